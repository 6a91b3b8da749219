#!/bin/sh
# gridstep under Slurm's srun (one rank per task, MPI through Slurm's PMIx or PMI-2 plugin
# instead of mpirun). Runs only where a Slurm cluster answers (sinfo reports a partition up
# within 10 s) and gridstep has MPI built in; skips (77) otherwise, as on the CI machine.
#  - srun -n 2 exec of a dp2 model (tests/exec/dp2-pp2-tp2.yaml's model on dp 2): exit 0, the
#    losses of 3 steps equal the one-process run of the same grid exactly (the host driver sums
#    in rank order either way), printed once; the JSON's processes list two tasks on this host,
#    local ranks 0 and 1 of 2 (the local rank comes from the host name, as under mpirun);
#  - srun -n 3 (overcommitted) for the 2-rank scenario: every task exits 2, the reason said once;
#  - srun -n 2 exec --driver cuda where there is no GPU: every task exits 1, naming the CUDA
#    call, said once (skipped where /dev/nvidia0 exists).
set -u
: "${top_srcdir:?set top_srcdir}"
: "${GRIDSTEP:?set GRIDSTEP}"
cd "$top_srcdir" || exit 1
if [ "${GS_HAVE_MPI:-no}" != yes ]; then
    echo "SKIP: gridstep built without MPI"
    exit 77
fi
command -v srun >/dev/null 2>&1 && command -v sinfo >/dev/null 2>&1 || { echo "SKIP: no srun/sinfo on PATH"; exit 77; }
up=$(timeout 10 sinfo -h -o %a 2>/dev/null | head -1)
[ "$up" = up ] || { echo "SKIP: no Slurm partition up (sinfo: '${up:-no answer}')"; exit 77; }
# Slurm's MPI plugin: PMIx where it has one, else PMI-2 (Open MPI reads either)
mpi=pmi2
srun --mpi=list 2>&1 | grep -q pmix && mpi=pmix
SRUN="timeout 300 srun --mpi=$mpi -N 1"
# one MPI test script at a time, as tests/mpi_common.sh has it
if command -v flock >/dev/null 2>&1; then
    exec 9>"${TMPDIR:-/tmp}/gridstep-mpi-tests.$(id -u).lock" && flock 9
fi
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # Open MPI leaks at finalize by design
export ASAN_OPTIONS OMPI_MCA_btl_base_warn_component_unused=0 OMPI_MCA_btl_vader_single_copy_mechanism=none
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # name, command...
    name=$1; shift
    if "$@"; then echo "PASS: $name"; else echo "FAIL: $name"; fail=1; fi
}
losses() { # JSON file -> one loss a line
    tr -d ' \n' <"$1" | sed 's/.*"loss":\[\([^]]*\)\].*/\1/' | tr ',' '\n'
}
layout() { # JSON -> "local_rank/local_procs" per process, in rank order
    tr -d ' \n' <"$1" | sed 's/.*"processes":\[\([^]]*\)\].*/\1/' | tr '}' '\n' |
        sed -n 's/.*"local_rank":\([0-9]*\),"local_procs":\([0-9]*\).*/\1\/\2/p' | tr '\n' ' '
}
sed 's/grid: {dp: 2, pp: 2, tp: 2}/grid: {dp: 2, pp: 1, tp: 1}/; s/gpus_per_node: 8/gpus_per_node: 2/; s/^name: .*/name: srun-dp2/' \
    tests/exec/dp2-pp2-tp2.yaml >"$tmp/dp2.yaml"
check "dp2 scenario made" grep -q "grid: {dp: 2, pp: 1, tp: 1}" "$tmp/dp2.yaml"

"$GRIDSTEP" exec --json --steps 3 "$tmp/dp2.yaml" >"$tmp/one.json" 2>"$tmp/one.err"
check "one process: exit 0" test $? -eq 0
losses "$tmp/one.json" >"$tmp/one.txt"

$SRUN -n 2 "$GRIDSTEP" exec --json --steps 3 "$tmp/dp2.yaml" >"$tmp/srun.json" 2>"$tmp/srun.err"
rc=$?
check "srun -n 2 --mpi=$mpi: exit 0" test $rc -eq 0
losses "$tmp/srun.json" >"$tmp/srun.txt"
check "srun -n 2: 3 losses, printed once" test "$(grep -c . "$tmp/srun.txt")" -eq 3 -a \
    "$(grep -c '"scenario"' "$tmp/srun.json")" -eq 1
check "srun -n 2: losses = the one-process run, exactly" cmp "$tmp/one.txt" "$tmp/srun.txt"
got=$(layout "$tmp/srun.json")
check "srun -n 2: two tasks on one host, local ranks 0/2 1/2 (got '$got')" test "$got" = "0/2 1/2 "

$SRUN -O -n 3 "$GRIDSTEP" exec --steps 1 "$tmp/dp2.yaml" >"$tmp/three.out" 2>"$tmp/three.err"
rc=$?
check "srun -n 3 for 2 ranks: exit 2" test $rc -eq 2
check "... every task exited 2 (srun: tasks 0-2)" grep -q "tasks 0-2: Exited with exit code 2" "$tmp/three.err"
check "... the reason said once" test "$(grep -c 'but the launcher started 3 processes' "$tmp/three.err")" -eq 1
check "... nothing run" test ! -s "$tmp/three.out"

if [ -e /dev/nvidia0 ]; then
    echo "SKIP: srun --driver cuda without a GPU (this machine has one)"
else
    $SRUN -n 2 "$GRIDSTEP" exec --steps 1 --driver cuda "$tmp/dp2.yaml" >"$tmp/cuda.out" 2>"$tmp/cuda.err"
    rc=$?
    check "srun -n 2 --driver cuda without a GPU: exit 1" test $rc -eq 1
    check "... every task exited 1" grep -q "tasks 0-1: Exited with exit code 1" "$tmp/cuda.err"
    check "... the CUDA error said once" test "$(grep -c 'gridstep exec: cuda driver' "$tmp/cuda.err")" -eq 1
fi
exit $fail
