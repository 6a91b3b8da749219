#!/bin/sh
# With a GPU: the cuda driver trains the tiny scenario's first steps to the host driver's losses
# (relative difference below 1e-3: fp32 everywhere, only reduction orders differ), with the
# default attention path (auto: cuBLAS GEMMs, the flash variant under the scenario's flash
# attention), the flash kernels (GRIDSTEP_CUDA_ATTENTION=kernels) and, with flash_attention:
# false, the per-row kernels and the GEMMs. The scenario needs as many GPUs as ranks; with fewer,
# a one-rank scenario is used. The memory pre-flight counts the GEMM path's attention scratch:
# the one-rank scenario cut to one layer over sequences of 393216 = 3 x 2^17 tokens without
# flash attention needs 393216^2 x 4 B = 9 x 2^36 B = 576 GiB of dP/dS scratch for one kv head,
# more than any GPU has: refused with exit 2, the scratch named as its own term. With 2 GPUs or
# more, tp_comm_overlap gives the unsplit run's losses. Skips (77) without a GPU or without the
# module.
. "${top_srcdir:-.}/tests/gpu/gpu_common.sh"
[ -f "$GS_MODULE" ] || { echo "SKIP: no cuda module in this build"; exit 77; }
gs_have_gpu || { echo "SKIP: no GPU"; exit 77; }
# fp32 GEMMs, as the host driver's: the scenarios train in bf16, which the cuda driver follows
# by default (bf16 GEMM inputs) unless told otherwise
export GRIDSTEP_CUDA_GEMM=fp32
ngpu=$(nvidia-smi -L | grep -c '^GPU ')
scn="$top_srcdir/scenarios/tiny-llama-2x2x2.yaml"
[ "$ngpu" -ge 8 ] || scn="$top_srcdir/tests/gpu/tiny-llama-1gpu.yaml"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
sed 's/^  pipeline: 1f1b/  pipeline: 1f1b\
  flash_attention: false/' "$scn" >"$tmp/noflash.yaml"
grep -q 'flash_attention: false' "$tmp/noflash.yaml" || { echo "FAIL: no pipeline line in $scn to add to"; exit 1; }
host=$("$GRIDSTEP" exec --json --steps 3 "$scn") || { echo "FAIL: host driver"; exit 1; }
gflash=$("$GRIDSTEP" exec --json --steps 3 --driver cuda "$scn") || { echo "FAIL: cuda driver (auto, flash)"; exit 1; }
cuda=$(GRIDSTEP_CUDA_ATTENTION=kernels "$GRIDSTEP" exec --json --steps 3 --driver cuda "$scn") ||
    { echo "FAIL: cuda driver (flash kernels)"; exit 1; }
rows=$(GRIDSTEP_CUDA_ATTENTION=kernels "$GRIDSTEP" exec --json --steps 3 --driver cuda "$tmp/noflash.yaml") ||
    { echo "FAIL: cuda driver, flash_attention false, per-row kernels"; exit 1; }
gemm=$("$GRIDSTEP" exec --json --steps 3 --driver cuda "$tmp/noflash.yaml") ||
    { echo "FAIL: cuda driver, flash_attention false, auto (GEMMs)"; exit 1; }
python3 - "$host" "$cuda" "$rows" "$gemm" "$gflash" <<'PY'
import json, sys
h = json.loads(sys.argv[1])["loss"]
fail = 0
for name, doc in (("cuda flash kernels", sys.argv[2]), ("cuda per-row attention", sys.argv[3]),
                  ("cuda gemm attention", sys.argv[4]), ("cuda gemm flash attention", sys.argv[5])):
    c = json.loads(doc)["loss"]
    bad = [(i, a, b) for i, (a, b) in enumerate(zip(h, c)) if abs(a - b) > 1e-3 * abs(a)]
    print("host", h); print(name, c)
    fail |= bool(bad) or len(h) != len(c)
sys.exit(1 if fail else 0)
PY
rc=$?
sed 's/seq: 128/seq: 393216/; s/layers: 4/layers: 1/; s/global: 4, micro: 2/global: 1, micro: 1/;
     s/precision: bf16/precision: fp32/; s/^  pipeline: 1f1b/  pipeline: 1f1b\
  flash_attention: false/' "$top_srcdir/tests/gpu/tiny-llama-1gpu.yaml" >"$tmp/long.yaml"
GRIDSTEP_CUDA_ATTENTION=gemm "$GRIDSTEP" exec --driver cuda "$tmp/long.yaml" >/dev/null 2>"$tmp/err"
pre=$?
if [ $pre -eq 2 ] &&
    grep -q "memory ledger's peak [0-9.]* GiB (fp32) + scratch 576\.000 GiB (the GEMM attention path.* > free [0-9.]* GiB" "$tmp/err"; then
    echo "PASS: gemm attention scratch counted by the pre-flight: $(cat "$tmp/err")"
else
    echo "FAIL: gemm attention pre-flight: exit $pre (want 2 naming 576 GiB of scratch):"; cat "$tmp/err"; rc=1
fi
# tp_comm_overlap on 2 GPUs or more: the ring all-gather as NCCL send/receive groups on the TP
# communicator, each GEMM chunk waiting for its step's CUDA event, the pipelined reduce-scatter
# waiting for each split's: the unsplit run's losses (1e-5 relative: NCCL may reduce a split in
# another order than the whole)
if [ "$ngpu" -ge 2 ]; then
    sed 's/grid: {dp: 2, pp: 2, tp: 2}/grid: {dp: 1, pp: 1, tp: 2}/; s/gpus_per_node: 8/gpus_per_node: 2/' \
        "$top_srcdir/tests/exec/dp2-pp2-tp2.yaml" >"$tmp/tp2.yaml"
    sed 's/sequence_parallel: true}/sequence_parallel: true, tp_comm_overlap: true}/' "$tmp/tp2.yaml" >"$tmp/tpo.yaml"
    plain=$("$GRIDSTEP" exec --json --steps 3 --driver cuda "$tmp/tp2.yaml") &&
        ovl=$("$GRIDSTEP" exec --json --steps 3 --driver cuda "$tmp/tpo.yaml") &&
        python3 -c 'import json,sys
a = json.loads(sys.argv[1])["loss"]; b = json.loads(sys.argv[2])["loss"]
print("unsplit", a); print("tp_comm_overlap", b)
sys.exit(0 if len(a) == len(b) == 3 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)) else 1)' "$plain" "$ovl"
    if [ $? -eq 0 ]; then
        echo "PASS: tp_comm_overlap on 2 GPUs: the unsplit losses"
    else
        echo "FAIL: tp_comm_overlap on 2 GPUs"; rc=1
    fi
else
    echo "SKIP (part): tp_comm_overlap needs 2 GPUs, this machine shows $ngpu"
fi
exit $rc
