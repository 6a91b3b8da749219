#!/bin/sh
# Runs everywhere: the gridstep binary links no CUDA, cuBLAS or NCCL library (one binary for
# every machine), and `exec --driver cuda` without a loadable module exits 1 naming the cause.
. "${top_srcdir:-.}/tests/gpu/gpu_common.sh"
fail=0
if ! command -v ldd >/dev/null 2>&1; then
    echo "SKIP: no ldd"; exit 77
fi
libs=$(ldd "$GRIDSTEP" 2>&1) || { echo "FAIL: ldd $GRIDSTEP: $libs"; exit 1; }
if echo "$libs" | grep -Eq 'libcuda|libcudart|libnccl|libcublas'; then
    echo "FAIL: $GRIDSTEP links a GPU library:"; echo "$libs" | grep -E 'cuda|nccl|cublas'; fail=1
fi
scn="$top_srcdir/scenarios/tiny-llama-2x2x2.yaml"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# a module that is no shared object: dlopen's message, exit 1
: > "$tmp/gridstep-cuda.so"
GRIDSTEP_MODULE_PATH="$tmp" "$GRIDSTEP" exec --driver cuda "$scn" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 1 ] || ! grep -q "cannot load $tmp/gridstep-cuda.so" "$tmp/err"; then
    echo "FAIL: broken module: exit $rc (want 1), stderr:"; cat "$tmp/err"; fail=1
fi
# an unknown driver is a usage error
"$GRIDSTEP" exec --driver nosuch "$scn" >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q "expected host or cuda" "$tmp/err"; then
    echo "FAIL: unknown driver: exit $rc (want 2)"; cat "$tmp/err"; fail=1
fi
# without a module anywhere (only when this build made none): not found, exit 1
if [ ! -f "$GS_MODULE" ]; then
    mkdir "$tmp/empty" && cp "$GRIDSTEP" "$tmp/empty/gridstep"
    GRIDSTEP_MODULE_PATH="$tmp/empty" "$tmp/empty/gridstep" exec --driver cuda "$scn" >/dev/null 2>"$tmp/err"
    rc=$?
    if [ $rc -ne 1 ] || ! grep -q "module gridstep-cuda.so not found" "$tmp/err"; then
        echo "FAIL: missing module: exit $rc (want 1)"; cat "$tmp/err"; fail=1
    fi
fi
exit $fail
