#!/bin/sh
# Sharded runs joined by `gridstep merge` against the serial run: a sweep split into 3 shards
# (CSV and JSON pieces, given out of order) must merge byte for byte into the serial output; a
# plan split into 3 shards must merge into the serial plan's candidates (and every count but the
# work-dependent `simulated` and R4 pruning lines). Also: the sweep's row for the scenario's own
# values equals `gridstep sim` on the scenario (a second computation path), and broken piece sets
# are refused.
set -u
: "${top_srcdir:?set top_srcdir}"
: "${GRIDSTEP:?set GRIDSTEP}"
cd "$top_srcdir" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # name, command...
    name=$1; shift
    if "$@"; then echo "PASS: $name"; else echo "FAIL: $name"; fail=1; fi
}
S=scenarios/tiny-llama-2x2x2.yaml
V="--vary micro=1,2,4 --vary tp=1,2,4,8"

# sweep, CSV: 12 points, 3 shards
"$GRIDSTEP" sweep $V "$S" >"$tmp/serial.csv" || fail=1
for i in 0 1 2; do "$GRIDSTEP" sweep $V --shard $i/3 --out "$tmp/p$i.csv" "$S" || fail=1; done
"$GRIDSTEP" merge "$tmp/p2.csv" "$tmp/p0.csv" "$tmp/p1.csv" >"$tmp/merged.csv" || fail=1
check "sweep csv: 3 shards merged = serial" cmp "$tmp/serial.csv" "$tmp/merged.csv"
check "sweep csv: 12 points + header" test "$(wc -l <"$tmp/serial.csv")" -eq 13
check "sweep csv: shard 1 holds points 1, 4, 7, 10" \
    test "$(sed -n '3,$p' "$tmp/p1.csv" | cut -d, -f1 | tr '\n' ' ')" = "1 4 7 10 "

"$GRIDSTEP" sweep $V --threads 1 "$S" >"$tmp/t1.csv" || fail=1
"$GRIDSTEP" sweep $V --threads 3 "$S" >"$tmp/t3.csv" || fail=1
check "sweep: the output does not depend on --threads" cmp "$tmp/t1.csv" "$tmp/t3.csv"
check "sweep: --threads 2 (the default) too" cmp "$tmp/t1.csv" "$tmp/serial.csv"

# sweep, JSON
"$GRIDSTEP" sweep --json $V "$S" >"$tmp/serial.json" || fail=1
for i in 0 1 2; do "$GRIDSTEP" sweep --json $V --shard $i/3 "$S" >"$tmp/p$i.json" || fail=1; done
"$GRIDSTEP" merge --out "$tmp/merged.json" "$tmp/p1.json" "$tmp/p2.json" "$tmp/p0.json" || fail=1
check "sweep json: 3 shards merged = serial" cmp "$tmp/serial.json" "$tmp/merged.json"

# the base point (micro 2, tp 2: the scenario itself) equals gridstep sim's report
"$GRIDSTEP" sim --json "$S" >"$tmp/sim.json" || fail=1
sim_step=$(sed -n 's/^  "step_time_s": \([0-9.e+-]*\),$/\1/p' "$tmp/sim.json")
sim_tps=$(sed -n 's/^  "tokens_per_s": \([0-9.e+-]*\),$/\1/p' "$tmp/sim.json")
row=$(awk -F, '$2 == 2 && $3 == 2' "$tmp/serial.csv")
check "sweep: the base point's step and tokens/s equal gridstep sim's" \
    awk -v a="$(echo "$row" | cut -d, -f6)" -v b="$sim_step" -v c="$(echo "$row" | cut -d, -f7)" -v d="$sim_tps" \
    'BEGIN { exit !(a > 0 && (a - b) / b < 1e-8 && (b - a) / b < 1e-8 && (c - d) / d < 1e-8 && (d - c) / d < 1e-8) }'
check "sweep: tp 8 x pp 2 on 8 GPUs is an illegal row with its reason" \
    grep -q '^3,1,8,,,.*,illegal,8 GPUs are not divisible by tp x pp = 8 x 2$' "$tmp/serial.csv"

# broken piece sets
"$GRIDSTEP" merge "$tmp/p0.csv" "$tmp/p1.csv" >/dev/null 2>"$tmp/err"
check "merge: a missing shard is refused (exit 2)" test $? -eq 2
check "merge: ... and named" grep -q "shard 2/3 is missing" "$tmp/err"
"$GRIDSTEP" merge "$tmp/p0.csv" "$tmp/p0.csv" "$tmp/p1.csv" >/dev/null 2>"$tmp/err"
check "merge: a repeated shard is refused" grep -q "given twice" "$tmp/err"
"$GRIDSTEP" merge "$tmp/p0.csv" "$tmp/p1.json" >/dev/null 2>"$tmp/err"
check "merge: CSV and JSON pieces are not mixed" grep -q "a JSON piece, expected CSV" "$tmp/err"
"$GRIDSTEP" merge "$tmp/serial.csv" >/dev/null 2>"$tmp/err"
check "merge: a serial output is not a piece" grep -q "expected a piece written by gridstep sweep --shard" "$tmp/err"
# pieces of two sweeps with the same axes, counts and header (another scenario, then other varied
# values): refused in CSV as in JSON
sed 's/^name: .*/name: another sweep/' "$S" >"$tmp/other.yaml"
"$GRIDSTEP" sweep $V --shard 1/3 --out "$tmp/o1.csv" "$tmp/other.yaml" || fail=1
"$GRIDSTEP" merge "$tmp/p0.csv" "$tmp/o1.csv" "$tmp/p2.csv" >/dev/null 2>"$tmp/err"
check "merge: CSV pieces of another scenario's sweep are refused (exit 2)" test $? -eq 2
check "merge: ... and said so" grep -q "not a piece of the same sweep as $tmp/p0.csv" "$tmp/err"
"$GRIDSTEP" sweep --vary micro=1,2,8 --vary tp=1,2,4,8 --shard 1/3 --out "$tmp/v1.csv" "$S" || fail=1
"$GRIDSTEP" merge "$tmp/p0.csv" "$tmp/v1.csv" "$tmp/p2.csv" >/dev/null 2>"$tmp/err"
check "merge: CSV pieces of other varied values are refused" grep -q "its scenario, mode or varied values differ" \
    "$tmp/err"

# plan: serial vs 3 shards (each shard bounds against its own best: what it examined, the simulations,
# the ledger's rejections and R1-R4, is counted per shard, hence those lines dropped)
P="scenarios/seed-7b-8xa100.yaml --top 4 --micro 1,2 --json"
"$GRIDSTEP" plan $P >"$tmp/plan.json" || fail=1
for i in 0 1 2; do "$GRIDSTEP" plan $P --shard $i/3 >"$tmp/plan$i.json" || fail=1; done
"$GRIDSTEP" merge "$tmp/plan2.json" "$tmp/plan0.json" "$tmp/plan1.json" >"$tmp/planm.json" || fail=1
grep -v -e '"simulated":' -e '(R[1-4]' -e '(ledger peak)' "$tmp/plan.json" >"$tmp/a"
grep -v -e '"simulated":' -e '(R[1-4]' -e '(ledger peak)' "$tmp/planm.json" >"$tmp/b"
check "plan: 3 shards merged = serial (candidates, rejections, counts)" cmp "$tmp/a" "$tmp/b"
check "plan: 4 candidates" test "$(grep -c '"grid": {' "$tmp/planm.json")" -eq 4
"$GRIDSTEP" plan $P --shard 1/3 >/dev/null 2>&1
"$GRIDSTEP" plan scenarios/seed-7b-8xa100.yaml --shard 1/3 >/dev/null 2>"$tmp/err"
check "plan: --shard without --json is a usage error" grep -q "needs --json" "$tmp/err"

exit $fail
