#!/bin/sh
# Bad-input corpus: every case in tests/bad-input/ must make gridstep exit 2 (bad input or
# usage) without crashing, with an error that contains the fragment named on the case's first
# line:
#   # expect: <fragment of the error message>
# and, when the case is a file, an error that starts with the file's path (after the
# "gridstep CMD: " program prefix). The kind of case is its extension:
#   NAME.yaml   a scenario: `gridstep mem FILE`
#   NAME.sched  a schedule dump: `gridstep schedule --load FILE`
#   NAME.json   a calibration file: `gridstep sim --calib FILE tiny-llama-2x2x2.yaml`
#   NAME.args   a command line (no file): the `# args:` line is required
# A second line `# args: ARGS` replaces the command (words split at spaces; @FILE@ is the input
# file, @SCENARIO@ scenarios/tiny-llama-2x2x2.yaml, @SRCDIR@ the source tree). For .sched and
# .json cases the leading '#' lines are stripped and the rest written to a temporary NAME.EXT,
# so line numbers in their fragments count from the first line after the header.
# Also a nonexistent path must exit 2 with "No such file".
# Imported launch configurations, the same way: tests/bad-input/accelerate/*.yaml through
# `gridstep sim --from-accelerate FILE`, tests/bad-input/megatron/*.sh through
# `gridstep sim --from-megatron @FILE`, tests/bad-input/torchtitan/*.toml through
# `gridstep sim --from-torchtitan FILE`, with the options on the file's second line when it is
#   # args: <options>
# (default: --model llama2-7b --cluster dgx-a100-80g --nodes 1).
# Inputs that .args cases name live in tests/bad-input/inputs/ (not cases themselves). The
# checkpoint cases, tests/bad-input/index/*.json (index.json files) and
# tests/bad-input/safetensors/*.hdr (safetensors headers), are run by tests/check_bad_ckpt.
# Environment (set by make check): GRIDSTEP = the binary, top_srcdir = the source tree.
# Prints PASS:/FAIL: per case and "N passed, M failed"; exits 1 on any failure.

GRIDSTEP=${GRIDSTEP:-./gridstep}
top_srcdir=${top_srcdir:-.}
dir="$top_srcdir/tests/bad-input"
scenario="$top_srcdir/scenarios/tiny-llama-2x2x2.yaml"

if [ ! -x "$GRIDSTEP" ]; then
    echo "run_bad_input.sh: gridstep binary not found at '$GRIDSTEP'" >&2
    exit 1
fi

tmp=${TMPDIR:-/tmp}/gs-bad-input.$$
mkdir "$tmp" || exit 1
trap 'rm -rf "$tmp"' 0 1 2 15

passed=0
failed=0

# check NAME FILE FRAGMENT ARGS...: runs gridstep ARGS and judges its exit status and stderr;
# FILE ("" for none) must begin the message.
check() {
    name=$1
    file=$2
    fragment=$3
    shift 3
    [ $# -eq 0 ] && set -- mem "$file"
    "$GRIDSTEP" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    why=
    if [ "$rc" -ge 128 ]; then
        why="crashed (exit $rc)"
    elif [ "$rc" -ne 2 ]; then
        why="exit status $rc, expected 2"
    elif ! grep -F -e "$fragment" "$tmp/err" >/dev/null; then
        why="stderr lacks '$fragment'"
    elif [ -n "$file" ]; then
        # The first line that is not a warning, less the "gridstep CMD: " (or "gridstep: ")
        # prefix, starts with the path, then ':' (a line:column or the message follows).
        first=$(grep -v '^gridstep: warning: ' "$tmp/err" | grep -v ': ignored: ' |
            sed -n '1{s/^gridstep [a-z]*: //;s/^gridstep: //;p;}')
        case $first in
        "$file:"*) ;;
        *) why="message does not begin with the file path: $first" ;;
        esac
    fi
    if [ -z "$why" ]; then
        echo "PASS: $name"
        passed=$((passed + 1))
    else
        echo "FAIL: $name: $why"
        sed 's/^/    stderr: /' "$tmp/err"
        failed=$((failed + 1))
    fi
}

count=0
for f in "$dir"/*.yaml "$dir"/*.sched "$dir"/*.json "$dir"/*.args; do
    [ -f "$f" ] || continue
    count=$((count + 1))
    base=$(basename "$f")
    name=${base%.*}
    ext=${base##*.}
    fragment=$(sed -n '1s/^# expect: //p' "$f")
    args=$(sed -n '2s/^# args: //p' "$f")
    if [ -z "$fragment" ]; then
        echo "FAIL: $name.$ext: first line is not '# expect: <fragment>'"
        failed=$((failed + 1))
        continue
    fi
    input=$f
    case $ext in
    yaml) default="mem @FILE@" ;;
    sched) default="schedule --load @FILE@" ;;
    json) default="sim --calib @FILE@ @SCENARIO@" ;;
    args) default= ; input= ;;
    esac
    if [ "$ext" = sched ] || [ "$ext" = json ]; then
        input="$tmp/$base"
        awk 'body || !/^#/ { body = 1; print }' "$f" >"$input"
    fi
    [ -n "$args" ] || args=$default
    if [ -z "$args" ]; then
        echo "FAIL: $name.$ext: a .args case needs a second line '# args: ARGS'"
        failed=$((failed + 1))
        continue
    fi
    # Words split at spaces after substituting the placeholders (paths hold no spaces here).
    # shellcheck disable=SC2046
    set -f
    set -- $(echo "$args" | sed -e "s|@FILE@|$input|g" -e "s|@SCENARIO@|$scenario|g" -e "s|@SRCDIR@|$top_srcdir|g")
    set +f
    check "$name.$ext" "$input" "$fragment" "$@"
done

if [ "$count" -eq 0 ]; then
    echo "FAIL: no bad-input files found in $dir"
    failed=$((failed + 1))
fi

check missing-file "$dir/does-not-exist.yaml" "No such file" mem "$dir/does-not-exist.yaml"

# Calibration files (tests/bad-input/calib/*.json): the first line is the "# expect:" comment,
# the rest the JSON that `gridstep sim --calib` must refuse (exit 2) with an error that starts
# with the file's path and names the field.
for f in "$dir"/calib/*.json; do
    [ -f "$f" ] || continue
    name=calib-$(basename "$f" .json)
    fragment=$(sed -n '1s/^# expect: //p' "$f")
    if [ -z "$fragment" ]; then
        echo "FAIL: $name: first line is not '# expect: <fragment>'"
        failed=$((failed + 1))
        continue
    fi
    sed 1d "$f" >"$tmp/calib.json"
    "$GRIDSTEP" sim --calib "$tmp/calib.json" "$top_srcdir/tests/exec/single.yaml" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    why=
    if [ "$rc" -ne 2 ]; then
        why="exit status $rc, expected 2"
    elif ! grep -F -e "$fragment" "$tmp/err" >/dev/null; then
        why="stderr lacks '$fragment'"
    elif ! grep -F -e "$tmp/calib.json" "$tmp/err" >/dev/null; then
        why="the message does not name the file"
    fi
    if [ -z "$why" ]; then
        echo "PASS: $name"
        passed=$((passed + 1))
    else
        echo "FAIL: $name: $why"
        sed 's/^/    stderr: /' "$tmp/err"
        failed=$((failed + 1))
    fi
done
# import_cases SUBDIR EXT OPTION PREFIX: the imported-config cases of one format.
import_cases() {
    for f in "$dir/$1"/*."$2"; do
        [ -f "$f" ] || continue
        name=$1/$(basename "$f" ."$2")
        fragment=$(sed -n '1s/^# expect: //p' "$f")
        args=$(sed -n '2s/^# args: //p' "$f")
        [ -n "$args" ] || args="--model llama2-7b --cluster dgx-a100-80g --nodes 1"
        if [ -z "$fragment" ]; then
            echo "FAIL: $name: first line is not '# expect: <fragment>'"
            failed=$((failed + 1))
            continue
        fi
        # shellcheck disable=SC2086
        check "$name" "$f" "$fragment" sim "$3" "$4$f" $args
    done
}
import_cases accelerate yaml --from-accelerate ""
import_cases megatron sh --from-megatron @
import_cases torchtitan toml --from-torchtitan ""

# Readers refuse what they cannot bound: a FIFO with no writer (it would block the reader
# forever) as a scenario, a calibration file, an imported configuration and a checkpoint's
# index; every run is guarded by `timeout` and must exit 2 at once, naming what it found.
mkfifo "$tmp/fifo" 2>/dev/null
if [ -p "$tmp/fifo" ]; then
    for what in "mem $tmp/fifo" "sim --calib $tmp/fifo $scenario" \
        "sim --from-accelerate $tmp/fifo --model llama2-7b --cluster dgx-a100-80g --nodes 1"; do
        # shellcheck disable=SC2086
        timeout 10 "$GRIDSTEP" $what >"$tmp/out" 2>"$tmp/err" </dev/null
        rc=$?
        if [ "$rc" -eq 2 ] && grep -q "found a FIFO (named pipe), expected a regular file" "$tmp/err"; then
            echo "PASS: fifo: $what"
            passed=$((passed + 1))
        else
            echo "FAIL: fifo: $what: exit $rc: $(cat "$tmp/err")"
            failed=$((failed + 1))
        fi
    done
    mkdir "$tmp/ck"
    mkfifo "$tmp/ck/index.json"
    timeout 10 "$GRIDSTEP" exec --load "$tmp/ck" "$top_srcdir/tests/exec/single.yaml" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq 2 ] && grep -q "index.json: not a regular file" "$tmp/err"; then
        echo "PASS: fifo: a checkpoint's index.json"
        passed=$((passed + 1))
    else
        echo "FAIL: fifo: a checkpoint's index.json: exit $rc: $(cat "$tmp/err")"
        failed=$((failed + 1))
    fi
fi
# Work that grows with a count from the input is bounded: the memory ledger of a 1e17-parameter
# NO_SHARD model (4e9 gradient buckets of 25 MiB, summed in closed form) answers in seconds, and
# the sim refuses its schedule naming the bucket limit (tests/bad-input/buckets-too-many.yaml).
sed -n '2,$p' "$dir/buckets-too-many.yaml" | sed '1d' >"$tmp/huge.yaml"
start=$(date +%s)
timeout 30 "$GRIDSTEP" mem "$tmp/huge.yaml" >"$tmp/out" 2>"$tmp/err"
rc=$?
took=$(($(date +%s) - start))
if [ "$rc" -eq 0 ] && [ "$took" -le 5 ] && grep -q "params 100,000,000,000,000,000" "$tmp/out"; then
    echo "PASS: bounded: mem of a 1e17-parameter NO_SHARD model in ${took} s"
    passed=$((passed + 1))
else
    echo "FAIL: bounded: mem of a 1e17-parameter model: exit $rc after ${took} s: $(head -3 "$tmp/err")"
    failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
