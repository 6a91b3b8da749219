#!/bin/sh
# With a GPU: the cuda driver trains a mixture-of-experts model (4 experts, top-2, the router's
# top-k, the token permutation's gathers and scatter-adds: kernels/cuda/moe.cu; the experts' GEMMs
# as one cuBLAS grouped GEMM: exec/driver_cuda_grouped.c) and an FP8 model
# (current scaling: the casts of kernels/cuda/fp8.cu before each linear layer's GEMM) to the host
# driver's losses, 3 steps, relative difference below 1e-3 (fp32 GEMMs; the reduction orders
# differ, and under FP8 an element next to a rounding midpoint may take the neighbouring code on
# one side), and the FP8 model with GRIDSTEP_CUDA_FP8=cublaslt (cuBLASLt's FP8 GEMMs, the scales
# applied to each sum: fp32 rounding apart), and the FP8 model under delayed scaling (the casts at
# the amax history's scales, kernels/cuda/fp8.cu's round_scaled, each amax read back for the
# reduction). With 2 GPUs or more, the MoE model with expert
# parallelism 2 (the dispatch and combine as NCCL grouped sends and receives,
# gs__cuda_all_to_all) trains to the same host losses, and the dense model with context parallelism 2 (cp_comm p2p: the K, V all-gather and
# the dK, dV reduce-scatter on the CP communicator) too, in fp32 and in FP8 under current scaling; with 4 or more, hierarchical CP 4 = 2 x 2
# (cp_comm a2a+p2p: the a2a level's all-gathers and the p2p level's K, V all-gather and dK, dV
# reduce-scatter on their own communicators). Skips (77) without a GPU or without the module.
. "${top_srcdir:-.}/tests/gpu/gpu_common.sh"
[ -f "$GS_MODULE" ] || { echo "SKIP: no cuda module in this build"; exit 77; }
gs_have_gpu || { echo "SKIP: no GPU"; exit 77; }
export GRIDSTEP_CUDA_GEMM=fp32
ngpu=$(nvidia-smi -L | grep -c '^GPU ')
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
base="$top_srcdir/tests/gpu/tiny-llama-1gpu.yaml"
sed 's/^  pos: rope/  pos: rope\
  moe: {experts: 4, top_k: 2}/' "$base" >"$tmp/moe.yaml"
sed 's/precision: bf16/precision: fp8\
  fp8_recipe: current/; s/preset: dgx-a100-80g/preset: dgx-h100/' "$base" >"$tmp/fp8.yaml"
sed 's/fp8_recipe: current/fp8_recipe: delayed/' "$tmp/fp8.yaml" >"$tmp/fp8d.yaml"
grep -q 'fp8_recipe: delayed' "$tmp/fp8d.yaml" || { echo "FAIL: fp8d.yaml: the edit did not apply"; exit 1; }
sed 's/grid: {dp: 1, pp: 1, tp: 1}/grid: {dp: 2, pp: 1, tp: 1, ep: 2}/; s/gpus_per_node: 1/gpus_per_node: 2/' \
    "$tmp/moe.yaml" >"$tmp/ep2.yaml"
sed 's/grid: {dp: 1, pp: 1, tp: 1}/grid: {dp: 1, pp: 1, tp: 1, cp: 2}/; s/gpus_per_node: 1/gpus_per_node: 2/' \
    "$base" >"$tmp/cp2.yaml"
sed 's/grid: {dp: 1, pp: 1, tp: 1}/grid: {dp: 1, pp: 1, tp: 1, cp: 4, cp_a2a: 2}/; s/gpus_per_node: 1/gpus_per_node: 4/
s/^strategy:/strategy:\
  cp_comm: a2a+p2p/' "$base" >"$tmp/cp4h.yaml"
sed 's/grid: {dp: 1, pp: 1, tp: 1}/grid: {dp: 1, pp: 1, tp: 1, cp: 2}/; s/gpus_per_node: 1/gpus_per_node: 2/' \
    "$tmp/fp8.yaml" >"$tmp/fp8cp2.yaml"
for f in moe fp8 fp8d ep2 cp2 cp4h fp8cp2; do
    grep -q 'moe:\|fp8_recipe\|ep: 2\|cp: 2\|cp_a2a: 2' "$tmp/$f.yaml" || { echo "FAIL: $f.yaml: the edit of $base did not apply"; exit 1; }
done
rc=0
# same_losses NAME SCENARIO: the cuda driver's 3 losses within 1e-3 of the host driver's
same_losses() {
    host=$("$GRIDSTEP" exec --json --steps 3 "$2") || { echo "FAIL: $1: host driver"; rc=1; return; }
    cuda=$("$GRIDSTEP" exec --json --steps 3 --driver cuda "$2") || { echo "FAIL: $1: cuda driver"; rc=1; return; }
    if python3 -c 'import json,sys
h = json.loads(sys.argv[1])["loss"]; c = json.loads(sys.argv[2])["loss"]
print("host", h); print("cuda", c)
sys.exit(0 if len(h) == len(c) == 3 and all(abs(a - b) <= 1e-3 * abs(a) for a, b in zip(h, c)) else 1)' "$host" "$cuda"
    then
        echo "PASS: $1: the host driver's losses"
    else
        echo "FAIL: $1: the cuda driver's losses are not the host's"; rc=1
    fi
}
same_losses "MoE, 4 experts, top-2, one rank" "$tmp/moe.yaml"
same_losses "FP8 current scaling, one rank" "$tmp/fp8.yaml"
# cuBLASLt's FP8 GEMMs (hidden 256, ffn 688, 256 tokens: every dimension a multiple of 16)
export GRIDSTEP_CUDA_FP8=cublaslt
same_losses "FP8 current scaling through cuBLASLt's FP8 GEMMs" "$tmp/fp8.yaml"
unset GRIDSTEP_CUDA_FP8
same_losses "FP8 delayed scaling, one rank" "$tmp/fp8d.yaml"
if [ "$ngpu" -ge 2 ]; then
    same_losses "MoE, expert parallelism 2" "$tmp/ep2.yaml"
    same_losses "context parallelism 2 (p2p)" "$tmp/cp2.yaml"
    # each CP rank casts its own tokens' rows at their amax, on either driver
    same_losses "FP8 current scaling under context parallelism 2" "$tmp/fp8cp2.yaml"
else
    echo "SKIP (part): expert and context parallelism 2 need 2 GPUs, this machine shows $ngpu"
fi
if [ "$ngpu" -ge 4 ]; then
    same_losses "hierarchical context parallelism 4 = 2 x 2 (a2a+p2p)" "$tmp/cp4h.yaml"
else
    echo "SKIP (part): hierarchical context parallelism 4 needs 4 GPUs, this machine shows $ngpu"
fi
exit $rc
