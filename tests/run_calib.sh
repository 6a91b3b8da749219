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
if "$GRIDSTEP" calibrate --driver host --quick --out "$tmp/host.json" --plot "$tmp/p" "$scen" >"$tmp/out" 2>"$tmp/err"; then
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
for key in '"machine"' '"hostname"' '"cpu"' '"date"' '"driver": "host"' '"units"' '"gemm_curve"' \
    '"elementwise_bw"' '"all_reduce"' '"send_recv"' '"alpha_s"' '"beta_bytes_per_s"' '"measurements"' '"fits"'; do
    grep -q "$key" "$tmp/host.json" || fail "calibration file lacks $key"
done
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

echo "$failed failed"
[ "$failed" -eq 0 ]
