#!/bin/sh
# Builds the libFuzzer harnesses tests/fuzz/fuzz_*.c against the engine and sim sources and runs
# each for FUZZ_SECONDS. Called by `make fuzz` (not part of make check), which sets:
#   FUZZ_CC       a clang that supports -fsanitize=fuzzer (default clang)
#   FUZZ_SECONDS  seconds per harness (default 60); 0 = build only
#   FUZZ_TARGETS  harness names to run (default: every tests/fuzz/fuzz_*.c, e.g. "scenario calib")
#   FUZZ_CPPFLAGS include flags (source and build tree, library headers)
#   FUZZ_LIBS     link flags of the libraries (GSL, libyaml, jansson)
#   FUZZ_SOURCES  the engine and sim .c files (relative to top_srcdir)
#   top_srcdir
# Work goes to tests/fuzz/out/NAME/ in the build tree: the binary, a corpus grown from the
# seeds in tests/fuzz/corpus/NAME/, crash-* files and fuzz.log. A new harness needs only a
# tests/fuzz/fuzz_NAME.c and (optionally) a seed folder tests/fuzz/corpus/NAME/.
# Exits 1 when a harness found a crash (its input is named in the log), 0 otherwise.
set -u
FUZZ_CC=${FUZZ_CC:-clang}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
top_srcdir=${top_srcdir:-.}
out=tests/fuzz/out
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
cflags="-g -O1 -fno-omit-frame-pointer $san"

if ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' |
    $FUZZ_CC -x c -fsanitize=fuzzer - -o /dev/null 2>/dev/null; then
    echo "fuzz: '$FUZZ_CC' cannot build with -fsanitize=fuzzer (install clang and libclang-rt, or set FUZZ_CC)" >&2
    exit 2
fi

mkdir -p "$out/lib" || exit 1
# The engine and sim, instrumented for coverage, once for all harnesses. An object is rebuilt
# when its source or any header is newer: a struct that grew in a header would otherwise meet
# objects compiled with its old layout (memory errors that are the build's, not the code's).
newest_h=$(ls -t "$top_srcdir"/*/*.h 2>/dev/null | head -n 1)
objs=
for s in $FUZZ_SOURCES; do
    case $s in *.c) ;; *) continue ;; esac
    o="$out/lib/$(echo "$s" | tr / _ | sed 's/\.c$/.o/')"
    if [ ! -f "$o" ] || [ "$top_srcdir/$s" -nt "$o" ] || { [ -n "$newest_h" ] && [ "$newest_h" -nt "$o" ]; }; then
        echo "  FUZZCC   $s"
        # shellcheck disable=SC2086
        $FUZZ_CC $cflags -fsanitize=fuzzer-no-link $FUZZ_CPPFLAGS -c "$top_srcdir/$s" -o "$o" || exit 1
    fi
    objs="$objs $o"
done

if [ -n "${FUZZ_TARGETS:-}" ]; then
    names=$FUZZ_TARGETS
else
    names=
    for h in "$top_srcdir"/tests/fuzz/fuzz_*.c; do
        [ -f "$h" ] && names="$names $(basename "$h" .c | sed 's/^fuzz_//')"
    done
fi

status=0
for name in $names; do
    dir="$out/$name"
    mkdir -p "$dir/corpus" || exit 1
    echo "  FUZZLD   fuzz_$name"
    # shellcheck disable=SC2086
    $FUZZ_CC $cflags -fsanitize=fuzzer $FUZZ_CPPFLAGS "$top_srcdir/tests/fuzz/fuzz_$name.c" $objs \
        $FUZZ_LIBS -o "$dir/fuzz_$name" || exit 1
    [ "$FUZZ_SECONDS" -gt 0 ] || continue
    seeds="$top_srcdir/tests/fuzz/corpus/$name"
    [ -d "$seeds" ] || seeds=
    echo "fuzz: fuzz_$name for ${FUZZ_SECONDS}s (log: $dir/fuzz.log)"
    # A small ASan quarantine keeps memory (and stalls on a loaded machine) down.
    # shellcheck disable=SC2086
    ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=32} "$dir/fuzz_$name" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 -timeout=60 \
        -rss_limit_mb=2048 -artifact_prefix="$dir/" "$dir/corpus" $seeds >"$dir/fuzz.log" 2>&1
    rc=$?
    grep -E '^#[0-9]+.*(DONE|cov:)' "$dir/fuzz.log" | tail -n 1 | sed "s/^/fuzz: fuzz_$name: /"
    grep -E '^stat::number_of_executed_units' "$dir/fuzz.log" | sed "s/^/fuzz: fuzz_$name: /"
    if [ "$rc" -ne 0 ]; then
        echo "fuzz: fuzz_$name FAILED (exit $rc); inputs:" $(ls "$dir" | grep -E '^(crash|leak|timeout|oom)-') >&2
        grep -E 'ERROR|SUMMARY' "$dir/fuzz.log" | head -n 5 >&2
        status=1
    fi
done
exit $status
