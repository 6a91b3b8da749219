#!/bin/sh
# The GPU day's first minutes, rehearsed on any machine with the CUDA toolkit: pack what
# tests/gpu/device-check.sh needs (tests/gpu/pack-for-device.sh), build the cuda module and the
# kernel check from the pack alone with nvcc (device-check.sh --build-only: the packed sources
# suffice, and the module exports the entry this gridstep asks for), then run the check itself:
# 77 where there is no GPU, as here; on a GPU machine that part is left to device-check.sh by hand.
# Skips (77) without the cuda module in this build.
. "${top_srcdir:-.}/tests/gpu/gpu_common.sh"
[ -f "$GS_MODULE" ] || { echo "SKIP: no cuda module in this build"; exit 77; }
# the pack (about 11 MiB), nvcc's temporary files and the build take about 60 MiB: on a disk
# with less than 256 MiB free this says so and skips rather than fail on the disk
free_kib=$(df -Pk "${TMPDIR:-/tmp}" 2>/dev/null | awk 'NR == 2 { print $4 }')
if [ -n "$free_kib" ] && [ "$free_kib" -lt 262144 ]; then
    echo "SKIP: ${TMPDIR:-/tmp} has $((free_kib / 1024)) MiB free, under the 256 MiB this test needs"; exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
if sh "$top_srcdir/tests/gpu/pack-for-device.sh" --gridstep "$GRIDSTEP" "$tmp/pack" >"$tmp/pack.out" 2>&1; then
    echo "PASS: pack-for-device ($(tail -2 "$tmp/pack.out" | head -1 | cut -c1-60)...)"
else
    echo "FAIL: pack-for-device:"; cat "$tmp/pack.out"; exit 1
fi
# the toolchain is found from nvcc itself: nvcc on PATH may be a wrapper script (CI machines
# have /usr/local/bin/nvcc exec'ing /usr/local/cuda-13.0/bin/nvcc), whose parent directory holds
# neither CUDA nor NCCL. Found as this environment has it, then through such a wrapper alone.
if sh "$tmp/pack/device-check.sh" --toolchain >"$tmp/tc.out" 2>&1; then
    cuda_home=$(sed -n 's/^CUDA_HOME=//p' "$tmp/tc.out")
    echo "PASS: device-check.sh --toolchain: $(head -1 "$tmp/tc.out")"
    mkdir -p "$tmp/wrap"
    printf '#!/bin/sh\nexec %s/bin/nvcc "$@"\n' "$cuda_home" > "$tmp/wrap/nvcc"
    chmod +x "$tmp/wrap/nvcc"
    env -u CUDA_HOME -u NCCL_HOME PATH="$tmp/wrap:/usr/bin:/bin" \
        sh "$tmp/pack/device-check.sh" --toolchain >"$tmp/tcw.out" 2>&1
    rc=$?
    got=$(sed -n 's/^CUDA_HOME=//p' "$tmp/tcw.out")
    if [ $rc -eq 0 ] && [ "$got" = "$cuda_home" ]; then
        echo "PASS: through a wrapper nvcc on PATH: the same CUDA tree ($got)"
    else
        echo "FAIL: through a wrapper nvcc on PATH: exit $rc, CUDA_HOME '$got' (want '$cuda_home')"
        cat "$tmp/tcw.out"; fail=1
    fi
else
    echo "FAIL: device-check.sh --toolchain: exit $?"; cat "$tmp/tc.out"; exit 1
fi
# two nvcc at a time, not six: make check runs timing tests beside this one
sh "$tmp/pack/device-check.sh" --build-only --jobs 2 >"$tmp/build.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^build (module + kernel_check) *ok' "$tmp/build.out"; then
    echo "PASS: device-check.sh --build-only from the pack: $(grep '^build' "$tmp/build.out" | tr -s ' ')"
else
    echo "FAIL: device-check.sh --build-only from the pack: exit $rc"; tail -80 "$tmp/build.out"; fail=1
fi
# the module built from the pack loads and has the entry (kernel_check loads it before looking
# for a GPU: exit 77 here, 1 for a module it cannot load or whose entry is missing)
if [ $fail -eq 0 ] && ! gs_have_gpu; then
    "$tmp/pack/build-cuda/kernel_check" --quick "$tmp/pack/build-cuda/gridstep-cuda.so" >"$tmp/kc.out" 2>&1
    rc=$?
    if [ $rc -eq 77 ]; then echo "PASS: the packed module loads and has its entry (kernel_check: no GPU, 77)"
    else echo "FAIL: kernel_check on the packed module: exit $rc"; cat "$tmp/kc.out"; fail=1; fi
    "$tmp/pack/build-cuda/gemm_sweep" "$tmp/pack/src/tests/gpu/gemm-shapes.txt" >"$tmp/gs.out" 2>&1
    rc=$?
    if [ $rc -eq 77 ]; then echo "PASS: gemm_sweep reads its shapes and finds no GPU (77)"
    else echo "FAIL: gemm_sweep without a GPU: exit $rc (want 77)"; cat "$tmp/gs.out"; fail=1; fi
    "$tmp/pack/build-cuda/contention" --quick "$tmp/c.csv" >"$tmp/c.out" 2>&1
    rc=$?
    if [ $rc -eq 77 ]; then echo "PASS: contention finds no GPU (77)"
    else echo "FAIL: contention without a GPU: exit $rc (want 77)"; cat "$tmp/c.out"; fail=1; fi
    sh "$tmp/pack/device-check.sh" --skip-build >"$tmp/run.out" 2>&1
    rc=$?
    if [ $rc -eq 77 ] && grep -q "no GPU here" "$tmp/run.out"; then echo "PASS: device-check.sh without a GPU: 77"
    else echo "FAIL: device-check.sh without a GPU: exit $rc (want 77)"; tail -5 "$tmp/run.out"; fail=1; fi
fi
exit $fail
