#!/bin/sh
# Runs everywhere: the gridstep binary links no CUDA, cuBLAS or NCCL library (one binary for
# every machine), and `exec --driver cuda` without a loadable module, or with one built for
# another driver table layout, exits 1 naming the cause.
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
# a module built for another driver table layout (an older gridstep's: only the unversioned
# entry) is refused by its entry's name, exit 1, before any slot of its table is called
if command -v "${CC:-cc}" >/dev/null 2>&1; then
    mkdir "$tmp/old"
    printf 'const void *gs_driver_cuda_module(void);\nconst void *gs_driver_cuda_module(void) { return 0; }\n' \
        > "$tmp/old/old.c"
    if "${CC:-cc}" -shared -fPIC -o "$tmp/old/gridstep-cuda.so" "$tmp/old/old.c" 2>"$tmp/err"; then
        GRIDSTEP_MODULE_PATH="$tmp/old" "$GRIDSTEP" exec --driver cuda "$scn" >/dev/null 2>"$tmp/err"
        rc=$?
        if [ $rc -ne 1 ] || ! grep -q "has no gs_driver_cuda_module_abi[0-9]* (it has the older entry): it was built for another version" "$tmp/err"; then
            echo "FAIL: module of another layout: exit $rc (want 1 naming the entry), stderr:"; cat "$tmp/err"; fail=1
        fi
    else
        echo "note: cannot build a stand-in module ($(cat "$tmp/err")): layout check not run"
    fi
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
