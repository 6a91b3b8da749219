#!/bin/sh
# `gridstep calibrate --quick` end to end (host driver; about 5 s): it writes a calibration
# file with the documented keys, `gridstep sim --calib` accepts that file and its step time
# changes (the host is no A100), and the default sim is unchanged by the presence of the
# option's code path. --plot writes its data and scripts (and the PNGs when gnuplot exists).
# Environment (set by make check): GRIDSTEP = the binary, top_srcdir = the source tree.
GRIDSTEP=${GRIDSTEP:-./gridstep}
top_srcdir=${top_srcdir:-.}
tmp=${TMPDIR:-/tmp}/gs-calib.$$
mkdir "$tmp" || exit 1
trap 'rm -rf "$tmp"' 0 1 2 15
failed=0
fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}

scen="$top_srcdir/tests/calib/a-dp2.yaml"
if GRIDSTEP_PROGRESS_S=0 "$GRIDSTEP" calibrate --driver host --quick --out "$tmp/host.json" --plot "$tmp/p" "$scen" \
    >"$tmp/out" 2>"$tmp/err"; then
    echo "PASS: calibrate --quick --plot"
else
    rc=$?
    if [ "$rc" -eq 1 ] && grep -q "gnuplot is missing" "$tmp/err" && [ -f "$tmp/p-coll.dat" ] && [ -f "$tmp/p-gemm.gp" ]; then
        echo "PASS: calibrate --quick --plot (no gnuplot: data and scripts kept, exit 1)"
    else
        fail "calibrate exited $rc"
        cat "$tmp/err"
    fi
fi
[ -f "$tmp/host.json" ] || fail "no calibration file written"
# its progress (a line per measurement with GRIDSTEP_PROGRESS_S=0): the count planned before the
# measurements start is the count made, the line before "fitting" being TOTAL-1 of TOTAL
total=$(sed -n 's/^gridstep calibrate: 100% (\([0-9]*\) of \1 measurements: fitting), .*/\1/p' "$tmp/err")
if [ -n "$total" ] && grep -q "^gridstep calibrate:  *[0-9]*% ($((total - 1)) of $total measurements: a training step" "$tmp/err"; then
    echo "PASS: calibrate's progress: $total measurements planned and made"
else
    fail "calibrate's progress: planned ${total:-?}, last lines: $(tail -n 2 "$tmp/err" | tr '\n' '|')"
fi
for key in '"machine"' '"hostname"' '"cpu"' '"date"' '"driver": "host"' '"units"' '"gemm_curve"' \
    '"elementwise_bw"' '"all_reduce"' '"send_recv"' '"alpha_s"' '"beta_bytes_per_s"' '"measurements"' '"fits"'; do
    grep -q "$key" "$tmp/host.json" || fail "calibration file lacks $key"
done
# pinning: the single-thread kernels and the concurrency test's first thread on one CPU (the
# ratio's reference is the GEMM fit's CPU), the others each on another allowed CPU; skipped where
# this process may run on one CPU only
ncpu=$(nproc)
cpus=$(tr -d ' \n' <"$tmp/host.json" | sed -n 's/.*"concurrency_cpus":\[\([^]]*\)\].*/\1/p')
solo=$(tr -d ' \n' <"$tmp/host.json" | sed -n 's/.*"single_thread_cpu":\(-\{0,1\}[0-9]*\).*/\1/p')
if [ "$ncpu" -gt 1 ]; then
    first=${cpus%%,*}
    distinct=$(echo "$cpus" | tr ',' '\n' | sort -u | grep -c .)
    total=$(echo "$cpus" | tr ',' '\n' | grep -c .)
    if [ -n "$solo" ] && [ "$solo" -ge 0 ] && [ "$first" = "$solo" ] && [ "$distinct" -eq "$total" ]; then
        echo "PASS: calibrate pins the kernels and thread 1 to CPU $solo, the concurrency threads to CPUs $cpus"
    else
        fail "calibrate pinning: single_thread_cpu '$solo', concurrency_cpus '$cpus' ($ncpu CPUs)"
    fi
fi
for col in 'size' 'count' 'type' 'time(us)' 'algbw(GB/s)' 'busbw(GB/s)'; do
    grep -qF "$col" "$tmp/out" || fail "summary lacks the nccl-tests column $col"
done
[ -f "$tmp/p-coll.dat" ] && [ -f "$tmp/p-coll.gp" ] && [ -f "$tmp/p-gemm.dat" ] || fail "plot data or scripts missing"

"$GRIDSTEP" sim --json "$scen" >"$tmp/default.json" 2>&1 || fail "sim without --calib"
if "$GRIDSTEP" sim --json --calib "$tmp/host.json" "$scen" >"$tmp/calib.json" 2>"$tmp/err"; then
    echo "PASS: sim --calib accepts the file"
else
    fail "sim --calib refused the file: $(cat "$tmp/err")"
fi
d=$(sed -n 's/.*"step_time_s": \([^,]*\),.*/\1/p' "$tmp/default.json")
c=$(sed -n 's/.*"step_time_s": \([^,]*\),.*/\1/p' "$tmp/calib.json")
[ -n "$d" ] && [ -n "$c" ] && [ "$d" != "$c" ] || fail "step time with the calibration ($c) equals the default ($d)"

# compute.concurrency_slowdown s: a-dp2's two ranks compute at the same time on 2 cores, so each
# compute event's work takes 1 + s (2 - 1) times as long and the step (almost all compute: its
# collectives on the preset's NVLink take microseconds against milliseconds of host-rate
# compute) 1 + s = 1.25 times as long, a little less for the exposed communication; with one
# core the ranks take turns (n = min(2 ranks, 1 core) = 1) and nothing changes.
for c in 2 1; do
    for s in 0 0.25; do
        printf '{"driver": "host", "compute": {"peak_flops": 4e10, "cores": %s, "launch_s": 1e-6, "concurrency_slowdown": %s, "gemm_curve": {"form": "hyperbolic", "e_max": 1, "f0_flops": 1}, "elementwise_bw": {"add": 1e10}}}' \
            "$c" "$s" >"$tmp/conc-$c-$s.json"
        "$GRIDSTEP" sim --json --calib "$tmp/conc-$c-$s.json" "$scen" >"$tmp/conc-$c-$s.out" 2>&1 ||
            fail "sim --calib with concurrency_slowdown $s, cores $c: $(cat "$tmp/conc-$c-$s.out")"
    done
    t0=$(sed -n 's/.*"step_time_s": \([^,]*\),.*/\1/p' "$tmp/conc-$c-0.out")
    t1=$(sed -n 's/.*"step_time_s": \([^,]*\),.*/\1/p' "$tmp/conc-$c-0.25.out")
    if [ "$c" = 2 ]; then lo=1.23 hi=1.2500001; else lo=0.9999999 hi=1.0000001; fi
    if awk -v a="$t0" -v b="$t1" -v lo="$lo" -v hi="$hi" 'BEGIN { r = b / a; exit !(a > 0 && r >= lo && r <= hi) }'; then
        echo "PASS: concurrency_slowdown 0.25 on $c core(s): step $t0 -> $t1 s"
    else
        fail "concurrency_slowdown 0.25 on $c core(s): step $t0 -> $t1 s, expected a ratio in [$lo, $hi]"
    fi
done
# compute.collective_cpu_share: a-dp2's all-gathers and reduce-scatters (2 ranks, 10 us + size /
# 1 GB/s) copy on the same 2 cores as the two ranks' compute. With share 1 the step is longer,
# but by no more than the time any collective runs (while one runs, compute still gets at least
# half of the cores: 2 ranks computing + at most 2 members copying on 2 cores); share 0 is the
# file without the key.
links='"links": {"intra": {"all_gather": [{"ranks": 2, "alpha_s": 1e-5, "beta_bytes_per_s": 1e9}], "reduce_scatter": [{"ranks": 2, "alpha_s": 1e-5, "beta_bytes_per_s": 1e9}]}}'
for sh in none 0 1; do
    key=""
    [ "$sh" = none ] || key="\"collective_cpu_share\": $sh, "
    printf '{"driver": "host", "compute": {%s"peak_flops": 4e10, "cores": 2, "launch_s": 1e-6, "gemm_curve": {"form": "hyperbolic", "e_max": 1, "f0_flops": 1}, "elementwise_bw": {"add": 1e10}}, %s}' \
        "$key" "$links" >"$tmp/cc-$sh.json"
    "$GRIDSTEP" sim --json --calib "$tmp/cc-$sh.json" "$scen" >"$tmp/cc-$sh.out" 2>&1 || fail "sim with collective_cpu_share $sh"
done
t_none=$(sed -n 's/.*"step_time_s": \([^,]*\),.*/\1/p' "$tmp/cc-none.out")
t0=$(sed -n 's/.*"step_time_s": \([^,]*\),.*/\1/p' "$tmp/cc-0.out")
t1=$(sed -n 's/.*"step_time_s": \([^,]*\),.*/\1/p' "$tmp/cc-1.out")
comm=$(sed -n 's/.*"comm_share": \([^,]*\),.*/\1/p' "$tmp/cc-0.out")
if [ -n "$t0" ] && [ "$t0" = "$t_none" ] &&
    awk -v a="$t0" -v b="$t1" -v cs="$comm" 'BEGIN { exit !(b > a && b - a <= cs * a) }'; then
    echo "PASS: collective_cpu_share 1: step $t0 -> $t1 s (collectives run ${comm} of the step)"
else
    fail "collective_cpu_share: step $t_none (no key), $t0 (0), $t1 (1); collectives run $comm of the step"
fi
# wake_s: on the host a stream's thread that waits for another stream's event is woken by it,
# whatever the event: c-pp2's first send (pp stream) waits for L1's mlp_down (compute stream), so
# with wake_s 1 ms it starts 1000 us after mlp_down ends, and at once with wake_s 0; likewise
# b-tp2's first TP all-gather of L1 after L1's norm (both members alike: the same gap). The
# trace prints times to the nanosecond, so the gap read back is within 2 ns of wake_s.
for w in 0 1e-3; do
    printf '{"driver": "host", "compute": {"peak_flops": 4e10, "cores": 2, "launch_s_by_ranks": [{"ranks": 1, "launch_s": 1e-6, "wake_s": %s}], "gemm_curve": {"form": "hyperbolic", "e_max": 1, "f0_flops": 1}, "elementwise_bw": {"add": 1e10}}}' \
        "$w" >"$tmp/wake-$w.json"
    "$GRIDSTEP" sim --exact --calib "$tmp/wake-$w.json" --trace "$tmp/wake-$w.trace" "$top_srcdir/tests/calib/c-pp2.yaml" \
        >/dev/null 2>&1 || fail "sim --trace with wake_s $w"
    gap=$(awk -F'"ts": |, "dur": |, "name": "' '
        /"name": "L1.mb0.fwd.mlp_down"/ { end = $2 + $3 }
        /"name": "L1.mb0.fwd.send"/ { start = $2 }
        END { printf "%.3f", start - end }' "$tmp/wake-$w.trace")
    want=$(awk -v w="$w" 'BEGIN { printf "%.3f", w * 1e6 }')
    if awk -v g="$gap" -v w="$want" 'BEGIN { d = g - w; exit !(d <= 0.002 && d >= -0.002) }'; then
        echo "PASS: wake_s $w: the send starts $gap us after its compute dependency"
    else
        fail "wake_s $w: the send starts $gap us after its compute dependency, expected $want"
    fi
    "$GRIDSTEP" sim --exact --calib "$tmp/wake-$w.json" --trace "$tmp/wake-b-$w.trace" "$top_srcdir/tests/calib/b-tp2.yaml" \
        >/dev/null 2>&1 || fail "sim --trace b-tp2 with wake_s $w"
    gap=$(awk -F'"ts": |, "dur": |, "name": "' '
        /"pid": 0,/ && /"name": "L1.mb0.fwd.norm"/ { end = $2 + $3 }
        /"pid": 0,/ && /"name": "L1.mb0.fwd.tp_ag"/ { start = $2 }
        END { printf "%.3f", start - end }' "$tmp/wake-b-$w.trace")
    if awk -v g="$gap" -v w="$want" 'BEGIN { d = g - w; exit !(d <= 0.002 && d >= -0.002) }'; then
        echo "PASS: wake_s $w: the TP all-gather starts $gap us after its compute dependency"
    else
        fail "wake_s $w: the TP all-gather starts $gap us after its compute dependency, expected $want"
    fi
done
# launch_cpu_s / wake_cpu_s: the CPU parts of the per-event costs are work on the shared cores,
# not latency. On 2 cores a-dp2's two computing ranks alone would not contend; only the CPU part
# of its collectives' dispatch (at most launch + wake = 1.1 ms each, ncoll of them per rank)
# competes with them, so the step grows by more than 0 and at most ncoll x 1.1 ms. On 1 core the
# ranks share it and every compute event's CPU part slows the other rank too: the step grows.
for c in 2 1; do
    for part in 0 1; do
        printf '{"driver": "host", "compute": {"peak_flops": 4e10, "cores": %s, "launch_s_by_ranks": [{"ranks": 1, "launch_s": 1e-4, "wake_s": 1e-3, "launch_cpu_s": %s, "wake_cpu_s": %s}], "gemm_curve": {"form": "hyperbolic", "e_max": 1, "f0_flops": 1}, "elementwise_bw": {"add": 1e10}}}' \
            "$c" "$(awk -v p=$part 'BEGIN { print p * 1e-4 }')" "$(awk -v p=$part 'BEGIN { print p * 1e-3 }')" >"$tmp/cpu-$c-$part.json"
        "$GRIDSTEP" sim --json --calib "$tmp/cpu-$c-$part.json" "$scen" >"$tmp/cpu-$c-$part.out" 2>&1 ||
            fail "sim with the CPU parts $part on $c core(s): $(cat "$tmp/cpu-$c-$part.out")"
    done
    t0=$(sed -n 's/.*"step_time_s": \([^,]*\),.*/\1/p' "$tmp/cpu-$c-0.out")
    t1=$(sed -n 's/.*"step_time_s": \([^,]*\),.*/\1/p' "$tmp/cpu-$c-1.out")
    ncoll=$("$GRIDSTEP" schedule "$scen" | awk '$1 == 0 && NF >= 9 && $4 ~ /^[0-9]+$/ { print $6; exit }')
    if awk -v a="$t0" -v b="$t1" -v c="$c" -v n="$ncoll" 'BEGIN { d = b - a; exit !(a > 0 && n > 0 && d > 1e-6 && (c == 1 || d <= n * 1.1e-3)) }'; then
        echo "PASS: per-event CPU parts on $c core(s): step $t0 -> $t1 s ($ncoll collectives per rank)"
    else
        fail "per-event CPU parts on $c core(s): step $t0 -> $t1 s, $ncoll collectives per rank (expected longer, on 2 cores by at most $ncoll x 1.1 ms)"
    fi
done
for key in '"collective_cpu_share"' '"elementwise_bw_bwd"' '"xent"' '"qkv_rope_s_per_token"' '"concurrency_slowdown"' '"concurrency_test"'; do
    grep -q "$key" "$tmp/host.json" || fail "calibration file lacks $key"
done

# a slow spell of the machine during the collectives (the test hook GRIDSTEP_CALIB_SPELL: rank
# 0's timed collective calls 10, 11 and 12, in the order they run, take 0.2 s longer): the
# repeats are passes over every (op, ranks, size), so three consecutive calls are one repeat each
# of three points and every point's median stays far below 0.2 s (the largest --quick point takes
# a few ms). With the repeats back to back per point (--quick: 3), the three calls would be the
# repeats of one point and its median 0.2 s.
GRIDSTEP_CALIB_SPELL=10:3:0.2 "$GRIDSTEP" calibrate --driver host --quick --out "$tmp/spell.json" "$scen" \
    >"$tmp/spell.out" 2>"$tmp/spell.err"
calls=$(sed -n 's/.*GRIDSTEP_CALIB_SPELL: timed collective calls 10 .. 12 of \([0-9]*\) (ranks) slowed by 0.2 s$/\1/p' "$tmp/spell.err")
worst=$(python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))["measurements"]["collectives"]
print(max(p["time_s"] for op in c.values() for pts in op.values() for p in pts))' "$tmp/spell.json" 2>/dev/null)
if [ -n "$calls" ] && [ "$calls" -gt 12 ] && [ -n "$worst" ] && awk -v w="$worst" 'BEGIN { exit !(w < 0.1) }'; then
    echo "PASS: a slow spell (timed calls 10-12 of $calls slowed by 0.2 s) leaves every collective point's median under 0.1 s (worst $worst s)"
else
    fail "a slow spell: calls 10-12 of ${calls:-?} slowed by 0.2 s, worst point ${worst:-none} s (expected under 0.1 s)"
    tail -5 "$tmp/spell.err"
fi
GRIDSTEP_CALIB_SPELL=soon "$GRIDSTEP" calibrate --driver host --quick --out "$tmp/x.json" "$scen" >/dev/null 2>"$tmp/bad.err"
rc=$?
if [ "$rc" -eq 2 ] && grep -q "GRIDSTEP_CALIB_SPELL: found 'soon'" "$tmp/bad.err" && [ ! -e "$tmp/x.json" ]; then
    echo "PASS: a malformed GRIDSTEP_CALIB_SPELL: exit 2, named, nothing written"
else
    fail "a malformed GRIDSTEP_CALIB_SPELL: exit $rc ($(head -1 "$tmp/bad.err"))"
fi

echo "$failed failed"
[ "$failed" -eq 0 ]
