#!/bin/sh
# With a GPU: the cuda driver trains the tiny scenario's first steps to the host driver's losses
# (relative difference below 1e-3: fp32 everywhere, only reduction orders differ), with the
# default attention kernels and with GRIDSTEP_CUDA_ATTENTION=gemm. The
# scenario needs as many GPUs as ranks; with fewer, a one-rank scenario is used. Skips (77)
# without a GPU or without the module.
. "${top_srcdir:-.}/tests/gpu/gpu_common.sh"
[ -f "$GS_MODULE" ] || { echo "SKIP: no cuda module in this build"; exit 77; }
gs_have_gpu || { echo "SKIP: no GPU"; exit 77; }
ngpu=$(nvidia-smi -L | grep -c '^GPU ')
scn="$top_srcdir/scenarios/tiny-llama-2x2x2.yaml"
[ "$ngpu" -ge 8 ] || scn="$top_srcdir/tests/gpu/tiny-llama-1gpu.yaml"
host=$("$GRIDSTEP" exec --json --steps 3 "$scn") || { echo "FAIL: host driver"; exit 1; }
cuda=$("$GRIDSTEP" exec --json --steps 3 --driver cuda "$scn") || { echo "FAIL: cuda driver"; exit 1; }
gemm=$(GRIDSTEP_CUDA_ATTENTION=gemm "$GRIDSTEP" exec --json --steps 3 --driver cuda "$scn") ||
    { echo "FAIL: cuda driver, GRIDSTEP_CUDA_ATTENTION=gemm"; exit 1; }
python3 - "$host" "$cuda" "$gemm" <<'PY'
import json, sys
h = json.loads(sys.argv[1])["loss"]
fail = 0
for name, doc in (("cuda", sys.argv[2]), ("cuda gemm attention", sys.argv[3])):
    c = json.loads(doc)["loss"]
    bad = [(i, a, b) for i, (a, b) in enumerate(zip(h, c)) if abs(a - b) > 1e-3 * abs(a)]
    print("host", h); print(name, c)
    fail |= bool(bad) or len(h) != len(c)
sys.exit(1 if fail else 0)
PY
