#!/bin/sh
# Progress on standard error when it is not a terminal (a batch log): sweep, plan, exec and
# calibrate print "gridstep CMD: P% (DONE of TOTAL UNIT...), ELAPSED[, about LEFT left]" lines,
# every GRIDSTEP_PROGRESS_S seconds (0 here: every update; by default 5, so a short run prints
# none), and nothing with --quiet. Expected lines are worked out from the work counts: a sweep of
# 3 points reports 1, 2 and 3 of 3 as 33%, 66% and 100% (floored); 2 exec steps 50% and 100%;
# calibrate's planned count of measurements must equal the measurements made (the line before
# "fitting" is TOTAL-1 of TOTAL). The host calibration's count is checked in tests/run_calib.sh.
set -u
: "${top_srcdir:?set top_srcdir}"
: "${GRIDSTEP:?set GRIDSTEP}"
cd "$top_srcdir" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
check() {
    name=$1
    shift
    if "$@"; then
        echo "PASS: $name"
        passed=$((passed + 1))
    else
        echo "FAIL: $name"
        sed 's/^/    stderr: /' "$tmp/err" | head -n 8
        failed=$((failed + 1))
    fi
}
T=scenarios/tiny-llama-2x2x2.yaml

# sweep: three points, a line each
GRIDSTEP_PROGRESS_S=0 "$GRIDSTEP" sweep --vary micro=1,2,4 "$T" >/dev/null 2>"$tmp/err"
sed 's/), .*/)/' "$tmp/err" >"$tmp/got"
printf '%s\n' 'gridstep sweep:  33% (1 of 3 points)' 'gridstep sweep:  66% (2 of 3 points)' \
    'gridstep sweep: 100% (3 of 3 points)' >"$tmp/want"
check "sweep: a line per point with its percentage" cmp -s "$tmp/want" "$tmp/got"
check "sweep: the time left on the lines before the last" \
    sh -c "head -n 2 '$tmp/err' | grep -c 's left\$' | grep -qx 2 && ! tail -n 1 '$tmp/err' | grep -q left"
"$GRIDSTEP" sweep --vary micro=1,2,4 "$T" >/dev/null 2>"$tmp/err"
check "sweep: a short run prints nothing at the default interval" test ! -s "$tmp/err"
GRIDSTEP_PROGRESS_S=0 "$GRIDSTEP" sweep --quiet --vary micro=1,2,4 "$T" >/dev/null 2>"$tmp/err"
check "sweep --quiet: nothing" test ! -s "$tmp/err"

# plan: simulations done of at most the count left after the early pruning, then 100%
GRIDSTEP_PROGRESS_S=0 "$GRIDSTEP" plan "$T" >/dev/null 2>"$tmp/err"
check "plan: every line 'N% (D of at most T configurations to simulate)'" \
    sh -c "test \$(grep -c . '$tmp/err') -gt 2 && ! sed '\$d' '$tmp/err' | grep -vq '^gridstep plan: *[0-9]*% ([0-9]* of at most [0-9]* configurations to simulate), '"
check "plan: the last line is 100% of what was simulated" \
    sh -c "tail -n 1 '$tmp/err' | grep -q '^gridstep plan: 100% (\\([0-9]*\\) of \\1 configurations to simulate)'"
GRIDSTEP_PROGRESS_S=0 "$GRIDSTEP" plan --quiet "$T" >/dev/null 2>"$tmp/err"
check "plan --quiet: nothing" test ! -s "$tmp/err"

# exec: a line per step with its loss
GRIDSTEP_PROGRESS_S=0 "$GRIDSTEP" exec --steps 2 tests/exec/single.yaml >"$tmp/out" 2>"$tmp/err"
check "exec: 50% then 100% of 2 steps, each with its loss" \
    sh -c "sed -n 1p '$tmp/err' | grep -q '^gridstep exec:  50% (1 of 2 steps: loss [0-9.]*, last step [0-9.]* s), .*, about .* left\$' &&
           sed -n 2p '$tmp/err' | grep -q '^gridstep exec: 100% (2 of 2 steps: loss ' && test \$(grep -c . '$tmp/err') -eq 2"
loss1=$(awk '$1 == 1 && NF == 4 { print $2 }' "$tmp/out")
check "exec: the progress line's loss is the report's ($loss1)" grep -q "(1 of 2 steps: loss $loss1," "$tmp/err"
GRIDSTEP_PROGRESS_S=0 "$GRIDSTEP" exec --quiet --steps 2 tests/exec/single.yaml >/dev/null 2>"$tmp/err"
check "exec --quiet: nothing" test ! -s "$tmp/err"

# calibrate, the stream-event path at test sizes (--events, about a second)
GRIDSTEP_PROGRESS_S=0 "$GRIDSTEP" calibrate --events --quick --out "$tmp/c.json" tests/calib/a-dp2.yaml >/dev/null 2>"$tmp/err"
total=$(sed -n 's/^gridstep calibrate: 100% (\([0-9]*\) of \1 measurements: fitting), .*/\1/p' "$tmp/err")
check "calibrate --events: ends at 100% of ${total:-?} measurements" test -n "$total"
check "calibrate --events: the planned count is the measurements made" \
    grep -q "^gridstep calibrate:  *[0-9]*% ($((${total:-1} - 1)) of ${total:-?} measurements: [a-z]" "$tmp/err"
GRIDSTEP_PROGRESS_S=0 "$GRIDSTEP" calibrate --quiet --events --quick --out "$tmp/c.json" tests/calib/a-dp2.yaml \
    >/dev/null 2>"$tmp/err"
check "calibrate --quiet: nothing" test ! -s "$tmp/err"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
