#!/bin/sh
# Every example of README.md runs and prints what the README shows. An example is a ```console
# block: lines starting with "$ " are commands (run by sh, in order, in one scratch directory that
# has the source tree's scenarios/ and tests/ and `gridstep` first in PATH); the lines after a
# command, up to the next command or the block's end, are its expected standard output.
# Compared as they are, except:
#   - wall-clock durations of the form "in 1.53 s" (sim's and plan's own run time) everywhere;
#   - in a block preceded by a line "<!-- measured: ... -->" (exec, compare: times measured on
#     this machine), every time (a number with s, ms or us, whichever unit) and percentage is
#     masked and runs of spaces and of dashes (table rules) are squeezed, so the text and the
#     losses still count.
# Prints PASS:/FAIL: per command and "N passed, M failed". `--update` is not offered: the
# README is written by hand and each difference is read.
set -u
: "${top_srcdir:?set top_srcdir}"
: "${GRIDSTEP:?set GRIDSTEP}"
readme="$top_srcdir/README.md"
[ -f "$readme" ] || { echo "FAIL: no $readme"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin" "$tmp/run" "$tmp/cases"
ln -s "$GRIDSTEP" "$tmp/bin/gridstep"
ln -s "$(cd "$top_srcdir" && pwd)/scenarios" "$tmp/run/scenarios"
ln -s "$(cd "$top_srcdir" && pwd)/tests" "$tmp/run/tests"

# Split the README into cases: cases/N.cmd (the command), cases/N.want (expected output),
# cases/N.mode ("measured" or "exact").
awk -v dir="$tmp/cases" '
    function close_case() { if (n) { close(dir "/" n ".want") } }
    /^<!-- measured:/ { measured = 1; next }
    /^```console$/ { inblock = 1; next }
    inblock && /^```$/ { close_case(); inblock = 0; measured = 0; next }
    inblock && /^\$ / {
        close_case()
        n++
        cmd = substr($0, 3)
        print cmd > (dir "/" n ".cmd"); close(dir "/" n ".cmd")
        print (measured ? "measured" : "exact") > (dir "/" n ".mode"); close(dir "/" n ".mode")
        printf "" > (dir "/" n ".want")
        next
    }
    inblock { print >> (dir "/" n ".want") }
    !inblock && !/^[[:space:]]*$/ && !/^<!--/ { measured = 0 }
' "$readme"

# normalize MODE < in > out
normalize() {
    if [ "$1" = measured ]; then
        sed -E 's/ in [0-9]+(\.[0-9]+)? s\b/ in # s/g; s/[-+]?[0-9]+(\.[0-9]+)? ?(s|ms|us)( |$|,|\))/#t\3/g;
                s/[-+]?[0-9]+(\.[0-9]+)?%/#%/g; s/--+/--/g; s/  +/ /g'
    else
        sed -E 's/ in [0-9]+(\.[0-9]+)? s\b/ in # s/g'
    fi
}

passed=0
failed=0
i=1
while [ -f "$tmp/cases/$i.cmd" ]; do
    cmd=$(cat "$tmp/cases/$i.cmd")
    mode=$(cat "$tmp/cases/$i.mode")
    (cd "$tmp/run" && PATH="$tmp/bin:$PATH" sh -c "$cmd") >"$tmp/got" 2>"$tmp/err"
    normalize "$mode" <"$tmp/cases/$i.want" >"$tmp/want.n"
    normalize "$mode" <"$tmp/got" >"$tmp/got.n"
    if [ ! -s "$tmp/cases/$i.want" ]; then
        echo "FAIL: README example $i shows no output: $cmd"
        failed=$((failed + 1))
    elif cmp -s "$tmp/want.n" "$tmp/got.n"; then
        echo "PASS: $cmd"
        passed=$((passed + 1))
    else
        echo "FAIL: $cmd: its output differs from README.md ($mode)"
        diff -u "$tmp/want.n" "$tmp/got.n" | sed 's/^/    /'
        sed 's/^/    stderr: /' "$tmp/err" | tail -n 5
        failed=$((failed + 1))
    fi
    i=$((i + 1))
done
[ "$i" -gt 1 ] || { echo "FAIL: no \`\`\`console example found in README.md"; exit 1; }
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
