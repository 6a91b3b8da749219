#!/bin/sh
# On a machine without a GPU (or without the NVIDIA driver) where the cuda module was built:
# `exec --driver cuda` and `calibrate --driver cuda` load the module, find no device and exit 1
# with a message naming cudaGetDeviceCount, never a crash; and (with a GPU too) a bad GRIDSTEP_CUDA_ATTENTION,
# GRIDSTEP_CUDA_GEMM or GRIDSTEP_CUDA_FP8 is refused.
# Skips (77) where there is a GPU (after the variable's check) or no module.
. "${top_srcdir:-.}/tests/gpu/gpu_common.sh"
[ -f "$GS_MODULE" ] || { echo "SKIP: no cuda module in this build"; exit 77; }
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT
# with or without a GPU: a bad GRIDSTEP_CUDA_ATTENTION is refused (exit 2) naming the variable,
# before any device is touched (where the module loads at all)
GRIDSTEP_CUDA_ATTENTION=fast "$GRIDSTEP" exec --driver cuda "$top_srcdir/tests/gpu/tiny-llama-1gpu.yaml" \
    >/dev/null 2>"$err"
rc=$?
if ! grep -q "cannot load" "$err"; then
    if [ $rc -ne 2 ] || ! grep -q "GRIDSTEP_CUDA_ATTENTION='fast': expected auto" "$err"; then
        echo "FAIL: GRIDSTEP_CUDA_ATTENTION=fast: exit $rc (want 2 and a message naming it):"; cat "$err"; exit 1
    fi
fi
# and a bad GRIDSTEP_CUDA_GEMM the same way
GRIDSTEP_CUDA_GEMM=fp8 "$GRIDSTEP" exec --driver cuda "$top_srcdir/tests/gpu/tiny-llama-1gpu.yaml" >/dev/null 2>"$err"
rc=$?
if ! grep -q "cannot load" "$err"; then
    if [ $rc -ne 2 ] || ! grep -q "GRIDSTEP_CUDA_GEMM is 'fp8', expected fp32, tf32 or bf16" "$err"; then
        echo "FAIL: GRIDSTEP_CUDA_GEMM=fp8: exit $rc (want 2 and a message naming it):"; cat "$err"; exit 1
    fi
fi
# and a bad GRIDSTEP_CUDA_FP8 the same way
GRIDSTEP_CUDA_FP8=tensorcores "$GRIDSTEP" exec --driver cuda "$top_srcdir/tests/gpu/tiny-llama-1gpu.yaml" >/dev/null \
    2>"$err"
rc=$?
if ! grep -q "cannot load" "$err"; then
    if [ $rc -ne 2 ] || ! grep -q "GRIDSTEP_CUDA_FP8 is 'tensorcores', expected emulate or cublaslt" "$err"; then
        echo "FAIL: GRIDSTEP_CUDA_FP8=tensorcores: exit $rc (want 2 and a message naming it):"; cat "$err"; exit 1
    fi
fi
gs_have_gpu && { echo "SKIP: a GPU is present (tests/gpu/run_cuda_exec.sh covers it)"; exit 77; }
"$GRIDSTEP" exec --driver cuda "$top_srcdir/scenarios/tiny-llama-2x2x2.yaml" >/dev/null 2>"$err"
rc=$?
if [ $rc -ne 1 ]; then
    echo "FAIL: exit $rc (want 1)"; cat "$err"; exit 1
fi
# the module may also fail to load where libcudart / libnccl are absent: that message is fine too
if ! grep -Eq "cudaGetDeviceCount|cannot load" "$err"; then
    echo "FAIL: no device / library message:"; cat "$err"; exit 1
fi
cat "$err"
# calibrate through the module: the same clear refusal, exit 1 (and without a scenario the
# device path's own message, exit 2, whichever comes first: the driver is opened after the
# scenario is read)
"$GRIDSTEP" calibrate --driver cuda --quick --out /dev/null "$top_srcdir/tests/calib/a-dp2.yaml" >/dev/null 2>"$err"
rc=$?
if [ $rc -ne 1 ] || ! grep -Eq "cudaGetDeviceCount|cannot load" "$err"; then
    echo "FAIL: calibrate --driver cuda: exit $rc (want 1 and the no-device message):"; cat "$err"; exit 1
fi
# inside a batch allocation (SLURM_NTASKS set, no job step: one process with the node's GPUs)
# neither exec nor calibrate is refused as one of several processes: they reach the device check
for cmd in "exec --driver cuda" "calibrate --driver cuda --quick --out /dev/null"; do
    SLURM_NTASKS=8 "$GRIDSTEP" $cmd "$top_srcdir/tests/calib/a-dp2.yaml" >/dev/null 2>"$err"
    rc=$?
    if [ $rc -ne 1 ] || grep -q "without the process bootstrap" "$err" || ! grep -Eq "cudaGetDeviceCount|cannot load" "$err"; then
        echo "FAIL: SLURM_NTASKS=8 gridstep $cmd: exit $rc (want 1 at the device check):"; cat "$err"; exit 1
    fi
done
"$GRIDSTEP" calibrate --driver cuda --out /dev/null >/dev/null 2>"$err"
rc=$?
if ! grep -q "cannot load" "$err" && { [ $rc -ne 2 ] || ! grep -q "needs SCENARIO.yaml" "$err"; }; then
    echo "FAIL: calibrate --driver cuda without a scenario: exit $rc (want 2 naming SCENARIO.yaml):"; cat "$err"; exit 1
fi
cat "$err"
exit 0
