#!/bin/sh
# Golden CLI tests: for each tests/golden/NAME.args (one line: the arguments to gridstep, paths
# relative to the source tree), run gridstep from the source tree and diff its stdout against
# NAME.out (and stderr against NAME.err when that file exists; exit code against NAME.rc, default
# 0). `--update` rewrites the expected files: review the diff like code before committing.
set -u
: "${top_srcdir:?set top_srcdir}"
: "${GRIDSTEP:?set GRIDSTEP}"
update=0
[ "${1:-}" = "--update" ] && update=1
cd "$top_srcdir" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
for args_file in tests/golden/*.args; do
    name=$(basename "$args_file" .args)
    args=$(cat "$args_file")
    want_rc=0
    [ -f "tests/golden/$name.rc" ] && want_rc=$(cat "tests/golden/$name.rc")
    # shellcheck disable=SC2086
    "$GRIDSTEP" $args >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$update" = 1 ]; then
        cp "$tmp/out" "tests/golden/$name.out"
        [ -f "tests/golden/$name.err" ] && cp "$tmp/err" "tests/golden/$name.err"
        [ "$rc" != 0 ] && echo "$rc" >"tests/golden/$name.rc"
        echo "updated: $name"
        continue
    fi
    ok=1
    if [ "$rc" != "$want_rc" ]; then
        echo "FAIL: $name: exit $rc, expected $want_rc"; sed 's/^/  stderr: /' "$tmp/err"; ok=0
    fi
    if ! diff -u "tests/golden/$name.out" "$tmp/out" >"$tmp/diff"; then
        echo "FAIL: $name: stdout differs"; cat "$tmp/diff"; ok=0
    fi
    if [ -f "tests/golden/$name.err" ] && ! diff -u "tests/golden/$name.err" "$tmp/err" >"$tmp/diff"; then
        echo "FAIL: $name: stderr differs"; cat "$tmp/diff"; ok=0
    fi
    if [ "$ok" = 1 ]; then echo "PASS: $name"; pass=$((pass + 1)); else fail=$((fail + 1)); fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
