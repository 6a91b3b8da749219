#!/bin/sh
# With GPUs, MPI and mpirun: `mpirun -np 2 gridstep exec --driver cuda` runs one rank per
# process (the NCCL id broadcast over MPI, device = local rank). On 2 or more GPUs the tp2 model
# of tests/exec trains to the host driver's losses (relative difference below 1e-3, as
# run_cuda_exec.sh: fp32, only reduction orders differ); on one GPU the launch is refused with
# exit 2, rank 0 saying that the host runs 2 ranks but shows 1 GPU. Skips (77) without the
# module, a GPU, an MPI build or mpirun.
. "${top_srcdir:-.}/tests/gpu/gpu_common.sh"
[ -f "$GS_MODULE" ] || { echo "SKIP: no cuda module in this build"; exit 77; }
gs_have_gpu || { echo "SKIP: no GPU"; exit 77; }
[ "${GS_HAVE_MPI:-no}" = yes ] || { echo "SKIP: gridstep built without MPI"; exit 77; }
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_base_warn_component_unused=0
ngpu=$(nvidia-smi -L | grep -c '^GPU ')
sed 's/grid: {dp: 2, pp: 2, tp: 2}/grid: {dp: 1, pp: 1, tp: 2}/; s/gpus_per_node: 8/gpus_per_node: 2/; s/^name: .*/name: tp2/' \
    "$top_srcdir/tests/exec/dp2-pp2-tp2.yaml" >"$tmp/tp2.yaml"
if [ "$ngpu" -lt 2 ]; then
    mpirun --oversubscribe -np 2 "$GRIDSTEP" exec --driver cuda "$tmp/tp2.yaml" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(grep -c 'runs 2 ranks of the job (one GPU each, by local rank), but shows 1 GPU' "$tmp/err")" -eq 1 ]; then
        echo "PASS: one GPU: mpirun -np 2 --driver cuda refused once, exit 2"; exit 0
    fi
    echo "FAIL: one GPU: mpirun -np 2 --driver cuda: exit $rc: $(cat "$tmp/err")"; exit 1
fi
host=$("$GRIDSTEP" exec --json --steps 3 "$tmp/tp2.yaml") || { echo "FAIL: host driver"; exit 1; }
cuda=$(mpirun --oversubscribe -np 2 "$GRIDSTEP" exec --json --steps 3 --driver cuda "$tmp/tp2.yaml" 2>"$tmp/err") ||
    { echo "FAIL: mpirun cuda driver: $(cat "$tmp/err")"; exit 1; }
python3 - "$host" "$cuda" <<'PY'
import json, sys
h, c = json.loads(sys.argv[1])["loss"], json.loads(sys.argv[2])["loss"]
bad = [(i, a, b) for i, (a, b) in enumerate(zip(h, c)) if abs(a - b) > 1e-3 * abs(a)]
print("host", h); print("cuda, mpirun -np 2", c)
sys.exit(1 if bad or len(h) != len(c) else 0)
PY
