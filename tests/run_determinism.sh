#!/bin/sh
# Determinism: the same scenario gives byte-identical output on two runs of `gridstep sim --json`
# (analytic and flow mode), `gridstep sim --json --exact` and `gridstep mem --json`. With
# GRIDSTEP_OTHER set (make check-determinism: a second build of the tree at -O0), every output
# must also be identical to that binary's.
# Environment: GRIDSTEP = the binary, top_srcdir = the source tree, GRIDSTEP_OTHER (optional),
# DETERMINISM_ALL=1 adds scenarios/published/*.yaml to the seed scenarios.
# Prints PASS:/FAIL: per case and "N passed, M failed"; exits 1 on any failure.

GRIDSTEP=${GRIDSTEP:-./gridstep}
top_srcdir=${top_srcdir:-.}

if [ ! -x "$GRIDSTEP" ]; then
    echo "run_determinism.sh: gridstep binary not found at '$GRIDSTEP'" >&2
    exit 1
fi

tmp=${TMPDIR:-/tmp}/gs-determinism.$$
mkdir "$tmp" || exit 1
trap 'rm -rf "$tmp"' 0 1 2 15

passed=0
failed=0
files="$top_srcdir"/scenarios/*.yaml
[ "${DETERMINISM_ALL:-0}" = 1 ] && files="$files $top_srcdir/scenarios/published/*.yaml"

# same NAME ARGS...: runs ARGS with the binary twice (and with GRIDSTEP_OTHER) and compares.
same() {
    name=$1
    shift
    why=
    "$GRIDSTEP" "$@" >"$tmp/a" 2>/dev/null
    rc=$?
    "$GRIDSTEP" "$@" >"$tmp/b" 2>/dev/null
    # sim exits 1 after its whole report when the step does not fit (troubled-70b*): the report
    # must still be deterministic
    if [ "$rc" -eq 1 ] && [ "$1" = sim ] && grep -q '^  "fits": false,$' "$tmp/a"; then
        rc=0
    fi
    if [ "$rc" -ne 0 ]; then
        why="exit status $rc"
    elif [ ! -s "$tmp/a" ]; then
        why="no output"
    elif ! cmp -s "$tmp/a" "$tmp/b"; then
        why="two runs differ: $(cmp "$tmp/a" "$tmp/b" 2>&1)"
    elif [ -n "${GRIDSTEP_OTHER:-}" ]; then
        "$GRIDSTEP_OTHER" "$@" >"$tmp/c" 2>/dev/null
        cmp -s "$tmp/a" "$tmp/c" || why="the other build differs: $(diff "$tmp/a" "$tmp/c" | head -n 6)"
    fi
    if [ -z "$why" ]; then
        echo "PASS: $name"
        passed=$((passed + 1))
    else
        echo "FAIL: $name: $why"
        failed=$((failed + 1))
    fi
}

for f in $files; do
    [ -f "$f" ] || continue
    n=$(basename "$f" .yaml)
    same "sim-$n" sim --json "$f"
    same "sim-flow-$n" sim --json --mode flow "$f"
    same "mem-$n" mem --json "$f"
done
same "sim-exact-tiny" sim --json --exact "$top_srcdir/scenarios/tiny-llama-2x2x2.yaml"
same "sim-exact-flow-tiny" sim --json --exact --mode flow "$top_srcdir/scenarios/tiny-llama-2x2x2.yaml"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
