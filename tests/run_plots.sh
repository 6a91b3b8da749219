#!/bin/sh
# Plots through gnuplot (skipped, exit 77, without gnuplot): each plot on a small scenario, the
# image checked (PNG magic bytes, SVG root element), and the data file checked against the
# numbers the command prints: sweep .dat = the sweep's CSV values; mem bars sum to each stage's
# total and the largest total is mem --json's peak_bytes; the sim timeline ends at the step time;
# the comm bars are sim --json's comm_s and exposed_comm_s. Then a missing gnuplot (exit 1, data
# kept) and a bad extension (exit 2).
set -u
: "${top_srcdir:?set top_srcdir}"
: "${GRIDSTEP:?set GRIDSTEP}"
command -v gnuplot >/dev/null 2>&1 || { echo "SKIP: gnuplot not in PATH"; exit 77; }
cd "$top_srcdir" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {
    name=$1; shift
    if "$@"; then echo "PASS: $name"; else echo "FAIL: $name"; fail=1; fi
}
is_png() { test "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a"; }
is_svg() { grep -q '<svg' "$1" && tail -n 3 "$1" | grep -q '</svg>'; }
T=scenarios/tiny-llama-2x2x2.yaml
S7=scenarios/seed-7b-8xa100.yaml

# 1. sweep --plot
"$GRIDSTEP" sweep --vary micro=1,2,4 --vary sharding=full_shard,no_shard --plot "$tmp/sw.png" "$T" >"$tmp/sw.csv" || fail=1
check "sweep --plot: PNG" is_png "$tmp/sw.png"
check "sweep --plot: .gp beside it" test -s "$tmp/sw.gp"
# CSV rows (micro, sharding, tokens/s, mfu) vs .dat blocks (one per sharding: x, tokens/s, mfu)
awk -F, 'NR > 1 && $14 == "ok" { print $3, $2, $7, $9 }' "$tmp/sw.csv" | sort >"$tmp/from_csv"
awk '/^# sharding=/ { split($2, a, "="); sh = a[2]; next } /^#/ || NF == 0 { next } { print sh, $2, $3, $4 }' \
    "$tmp/sw.dat" | sort >"$tmp/from_dat"
check "sweep --plot: .dat holds the CSV's tokens/s and MFU" cmp "$tmp/from_csv" "$tmp/from_dat"
check "sweep --plot: 6 points plotted" test "$(wc -l <"$tmp/from_dat")" -eq 6
# the title says what every point shares and leaves out what varies (micro, sharding); the tiny
# scenario is tiny-llama on one dgx-a100-80g node, grid {dp 2, pp 2, tp 2}, global batch 8
check "sweep --plot: the title says what is held fixed" \
    grep -q "held fixed: tiny-llama on dgx-a100-80g, 8 GPUs, pp=2, tp=2 (dp = GPUs / (pp x tp))," "$tmp/sw.gp"
sed -n 's/.*held fixed: //p' "$tmp/sw.gp" >"$tmp/fixed"
check "sweep --plot: what is held fixed ends with the recompute" grep -q 'recompute none' "$tmp/fixed"
check "sweep --plot: the varied keys are not held fixed" sh -c "! grep -q 'micro\|full_shard' '$tmp/fixed'"
"$GRIDSTEP" sweep --vary gpus=8..16 --plot "$tmp/sw.svg" "$S7" >/dev/null || fail=1
check "sweep --plot: SVG" is_svg "$tmp/sw.svg"
check "sweep --plot: log2 x for GPU counts" grep -q 'set logscale x 2' "$tmp/sw.gp"

# merge --plot: the sharded sweep's curves are the serial sweep's (same .dat)
V="--vary micro=1,2,4 --vary sharding=full_shard,no_shard"
"$GRIDSTEP" sweep $V --json --plot "$tmp/ser.png" "$T" >/dev/null || fail=1
for i in 0 1; do "$GRIDSTEP" sweep $V --json --shard $i/2 "$T" >"$tmp/q$i.json" || fail=1; done
"$GRIDSTEP" merge --plot "$tmp/mer.svg" "$tmp/q1.json" "$tmp/q0.json" >/dev/null || fail=1
check "merge --plot: SVG" is_svg "$tmp/mer.svg"
check "merge --plot: the same data as sweep --plot" cmp "$tmp/ser.dat" "$tmp/mer.dat"

# 2. mem --plot
"$GRIDSTEP" mem --plot "$tmp/mem.png" "$T" >/dev/null || fail=1
check "mem --plot: PNG" is_png "$tmp/mem.png"
peak=$("$GRIDSTEP" mem --json "$T" | sed -n 's/^  "peak_bytes": \([0-9]*\),$/\1/p')
check "mem --plot: each bar's parts sum to its total" \
    awk '!/^#/ { if ($3 + $4 + $5 + $6 + $7 + $8 != $9) bad = 1; n++ } END { exit bad || n != 2 }' "$tmp/mem.dat"
check "mem --plot: the tallest bar is mem's peak_bytes ($peak)" \
    awk -v p="$peak" '!/^#/ && $9 > m { m = $9 } END { exit !(m == p && p > 0) }' "$tmp/mem.dat"
"$GRIDSTEP" mem --plot "$tmp/mem7.svg" "$S7" >/dev/null || fail=1
check "mem --plot: SVG" is_svg "$tmp/mem7.svg"

# 3. sim --plot (timeline) and 4. --plot-comm
"$GRIDSTEP" sim --json --plot "$tmp/tl.png" --plot-comm "$tmp/comm.png" "$T" >"$tmp/sim.json" || fail=1
check "sim --plot: PNG" is_png "$tmp/tl.png"
check "sim --plot-comm: PNG" is_png "$tmp/comm.png"
step=$(sed -n 's/^  "step_time_s": \([0-9.e+-]*\),$/\1/p' "$tmp/sim.json")
check "sim --plot: the last event ends at the step time ($step s, plotted in ms)" \
    awk -v s="$step" '!/^#/ && NF == 3 && $2 > m { m = $2 } END { d = m / 1000 - s; exit !(s > 0 && d * d < (1e-8 * s) ^ 2) }' \
    "$tmp/tl.dat"
check "sim --plot: rows of ranks 0 and 4 (first of each stage)" grep -q '"rank 4 compute"' "$tmp/tl.gp"
# ranks 0 and 4 of the 8 (order tp-dp-pp: rank = tp + 2 dp + 4 pp) are (dp 0, pp 0, tp 0) and (dp 0, pp 1, tp 0)
check "sim --plot: the title names the ranks shown and their coordinates" \
    grep -q "ranks shown (of 8, grid dp=2 x pp=2 x tp=2): 0 (dp 0 pp 0 tp 0), 4 (dp 0 pp 1 tp 0)" "$tmp/tl.gp"
for d in dp tp pp; do
    c=$(awk -v d="$d" '/"comm_s": \{/ { f = 1 } f && $1 == "\"" d "\":" { gsub(",", "", $2); print $2; exit }' "$tmp/sim.json")
    e=$(awk -v d="$d" '/"exposed_comm_s": \{/ { f = 1 } f && $1 == "\"" d "\":" { gsub(",", "", $2); print $2; exit }' "$tmp/sim.json")
    check "sim --plot-comm: $d overlapped + exposed = sim's comm_s, exposed = exposed_comm_s" \
        awk -v d="$d" -v c="$c" -v e="$e" '$1 == d { x = $3 - e; y = $4 - c; t = c > 0 ? c : 1
            exit !(x * x <= (1e-8 * t) ^ 2 && y * y <= (1e-8 * t) ^ 2 && ($2 + $3 - c) ^ 2 <= (1e-8 * t) ^ 2) }' "$tmp/comm.dat"
done
"$GRIDSTEP" sim --plot "$tmp/tl2.svg" --plot-ranks 1 "$T" >/dev/null 2>"$tmp/err"
check "sim --plot-ranks: a rank not simulated says --exact" grep -q "add --exact" "$tmp/err"
"$GRIDSTEP" sim --exact --plot "$tmp/tl2.svg" --plot-ranks 1,5 "$T" >/dev/null || fail=1
check "sim --plot-ranks with --exact: SVG" is_svg "$tmp/tl2.svg"

# gnuplot missing: exit 1, the message, the data kept
gs=$GRIDSTEP
(PATH=/nonexistent; "$gs" mem --plot "$tmp/nog.png" "$T" >/dev/null 2>"$tmp/err"; echo $? >"$tmp/rc")
check "no gnuplot: exit 1" test "$(cat "$tmp/rc")" = 1
check "no gnuplot: says so and where the data is" \
    grep -q "gnuplot not found in PATH; data written to $tmp/nog.dat and $tmp/nog.gp, run \`gnuplot $tmp/nog.gp\`" "$tmp/err"
check "no gnuplot: data kept" test -s "$tmp/nog.dat"
"$GRIDSTEP" mem --plot "$tmp/x.jpg" "$T" >/dev/null 2>"$tmp/err"
check "bad extension: exit 2" test $? -eq 2
check "bad extension: says what it expected" grep -q "expected a FILE.png or FILE.svg" "$tmp/err"
exit $fail
