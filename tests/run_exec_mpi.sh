#!/bin/sh
# gridstep exec across processes (mpirun, one rank per process, the host driver's collectives
# and sends over MPI). Scenarios: the model of tests/exec/single.yaml on dp2, tp2, pp2 (2
# processes) and dp2 x tp2 (4 processes), made from tests/exec/dp2-pp2-tp2.yaml by changing only
# the grid (FULL_SHARD, 1F1B, SP, full recompute as there).
#  - the losses of 3 steps equal the single-rank reference within 1e-5 relative (the correctness
#    contract tests/run_exec.sh applies to the one-process run), and equal the one-process run of
#    the same grid exactly: every fp32 sum is taken in the same ascending rank order either way
#    (the host driver gathers the members' inputs and sums them in rank order), and the loss is
#    the same sum of the head ranks' token losses in rank order;
#  - the output is printed once (rank 0); the trace holds every rank's events (as many as the
#    one-process trace, every rank's pid); compare prints the one-process compare's classes;
#  - a launch of 2 processes for a 4-rank scenario fails with exit 2 and says why, once;
#  - an injected failure on rank 3 ends every process (exit 1) with rank 0 naming rank 3 and the
#    event, once, well within --timeout; a rank that dies is named by the timeout of its peers;
#  - --save across processes writes the one-process save's files byte for byte (every rank file
#    and index.json), --save-full the one-process file; --save then --load resumes bit-exactly;
#    --save-every; rank 0 killed mid-swap leaves the previous checkpoint loadable (DIR.old) and the
#    next save recovers; a save failing on one rank fails on all, said once, the previous
#    checkpoint intact; a process killed mid-save leaves rank 0's DIR.tmp-PID, which the next
#    save removes; --save-full failing on one process leaves FILE as it was;
#  - the JSON names each rank's host and local rank (GRIDSTEP_HOST standing in for other
#    machines: hosts a a b b give local ranks 0 1 0 1, a b a b give 0 0 1 1);
#  - --load works (each process reads its rank's pieces) and continues with the one-process
#    load's losses, exactly; another model's checkpoint is refused (a tensor is the model's when
#    any process's rank has it).
# Without MPI built in, a launcher's environment of 2 processes is refused with exit 2 and the
# way to build MPI in, printed by rank 0 only. Skips (77) when MPI is built in but mpirun is
# absent.
set -u
: "${top_srcdir:?set top_srcdir}"
: "${GRIDSTEP:?set GRIDSTEP}"
cd "$top_srcdir" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # name, command...
    name=$1; shift
    if "$@"; then echo "PASS: $name"; else echo "FAIL: $name"; fail=1; fi
}
dir=tests/exec

if [ "${GS_HAVE_MPI:-no}" != yes ]; then
    OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$GRIDSTEP" exec "$dir/single.yaml" >"$tmp/out" 2>"$tmp/err"
    check "no MPI: exec under a 2-process launcher: exit 2" test $? -eq 2
    check "no MPI: ... saying how to build MPI in" grep -q "built without MPI: install an MPI (apt-get install libopenmpi-dev), then reconfigure with --with-mpi" "$tmp/err"
    check "no MPI: ... and running nothing" test ! -s "$tmp/out"
    OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 "$GRIDSTEP" exec "$dir/single.yaml" >"$tmp/out" 2>"$tmp/err"
    check "no MPI: rank 1 exits 2 too" test $? -eq 2
    check "no MPI: ... silently (rank 0 says it)" test ! -s "$tmp/err" -a ! -s "$tmp/out"
    exit $fail
fi

. "$top_srcdir/tests/mpi_common.sh"
MPIRUN="mpirun --allow-run-as-root --oversubscribe"

# the grids: NAME DP PP TP (gpus_per_node = the rank count, so the cluster fits the grid)
grid() {
    n=$(($2 * $3 * $4))
    sed "s/grid: {dp: 2, pp: 2, tp: 2}/grid: {dp: $2, pp: $3, tp: $4}/; s/gpus_per_node: 8/gpus_per_node: $n/; s/^name: .*/name: $1/" \
        "$dir/dp2-pp2-tp2.yaml" >"$tmp/$1.yaml"
    grep -q "grid: {dp: $2, pp: $3, tp: $4}" "$tmp/$1.yaml" || { echo "FAIL: cannot make $1"; fail=1; }
}
grid dp2 2 1 1
grid tp2 1 1 2
grid pp2 1 2 1
grid dp2tp2 2 1 2

losses() { # JSON file -> one loss a line
    tr -d ' \n' <"$1" | sed 's/.*"loss":\[\([^]]*\)\].*/\1/' | tr ',' '\n'
}
"$GRIDSTEP" exec --json --steps 3 "$dir/single.yaml" >"$tmp/ref.json" || fail=1
losses "$tmp/ref.json" >"$tmp/ref.txt"
check "reference: 3 losses" test "$(grep -c . "$tmp/ref.txt")" -eq 3

for spec in dp2:2 tp2:2 pp2:2 dp2tp2:4; do
    g=${spec%:*}; np=${spec#*:}
    "$GRIDSTEP" exec --json --steps 3 --trace "$tmp/$g.one.trace" "$tmp/$g.yaml" >"$tmp/$g.one.json" || fail=1
    $MPIRUN -np "$np" "$GRIDSTEP" exec --json --steps 3 --trace "$tmp/$g.mpi.trace" "$tmp/$g.yaml" \
        >"$tmp/$g.mpi.json" 2>"$tmp/$g.err"
    check "$g, mpirun -np $np: exit 0" test $? -eq 0
    losses "$tmp/$g.one.json" >"$tmp/$g.one.txt"
    losses "$tmp/$g.mpi.json" >"$tmp/$g.mpi.txt"
    check "$g, mpirun -np $np: 3 losses, printed once" test "$(grep -c . "$tmp/$g.mpi.txt")" -eq 3 -a \
        "$(grep -c '"scenario"' "$tmp/$g.mpi.json")" -eq 1
    check "$g, mpirun -np $np: losses = single-rank reference (1e-5 relative)" sh -c \
        "paste '$tmp/ref.txt' '$tmp/$g.mpi.txt' | awk '{ d = \$1 - \$2; if (d < 0) d = -d; if (d / \$1 > 1e-5) bad = 1 } END { exit bad }'"
    check "$g, mpirun -np $np: losses = the one-process run of $g, exactly" cmp "$tmp/$g.one.txt" "$tmp/$g.mpi.txt"
    # the trace: every rank's events (one "ph":"X" slice per event, pid = rank)
    one=$(grep -o '"ph": *"X"' "$tmp/$g.one.trace" | wc -l)
    mpi=$(grep -o '"ph": *"X"' "$tmp/$g.mpi.trace" | wc -l)
    check "$g, mpirun -np $np: trace holds every rank's events ($mpi = $one)" test "$mpi" -eq "$one" -a "$one" -gt 0
    pids_one=$(grep -o '"pid": *[0-9]*' "$tmp/$g.one.trace" | sort -u | tr -d ' \n')
    pids_mpi=$(grep -o '"pid": *[0-9]*' "$tmp/$g.mpi.trace" | sort -u | tr -d ' \n')
    check "$g, mpirun -np $np: trace ranks = the one-process trace's" test "$pids_one" = "$pids_mpi"
done

# tied embeddings under a pipeline across processes: the two stages' gradient exchange goes
# over MPI (each stage's send grouped with its receive); the losses are the one-process run's
sed 's/tied_embeddings: false/tied_embeddings: true/' "$tmp/pp2.yaml" >"$tmp/tpp2.yaml"
"$GRIDSTEP" exec --json --steps 3 "$tmp/tpp2.yaml" >"$tmp/tpp2.one.json" || fail=1
$MPIRUN -np 2 "$GRIDSTEP" exec --json --steps 3 "$tmp/tpp2.yaml" >"$tmp/tpp2.mpi.json" 2>"$tmp/tpp2.err"
check "tied pp2, mpirun -np 2: exit 0" test $? -eq 0
losses "$tmp/tpp2.one.json" >"$tmp/tpp2.one.txt"
losses "$tmp/tpp2.mpi.json" >"$tmp/tpp2.mpi.txt"
check "tied pp2, mpirun -np 2: the one-process losses, exactly" sh -c \
    "grep -q tied_embeddings:\ true '$tmp/tpp2.yaml' && test \$(grep -c . '$tmp/tpp2.mpi.txt') -eq 3 && cmp -s '$tmp/tpp2.one.txt' '$tmp/tpp2.mpi.txt'"

# dropout across processes: a GPT with dropout on DP2 x TP2, its masks drawn from global
# sequence, head and token indices in each process, gives the one-process losses exactly, and
# the single rank's to 1e-5
sed 's/norm: rmsnorm, mlp: swiglu, pos: rope}/norm: layernorm, mlp: gelu, pos: learned, bias: true, dropout: true}/' \
    "$tmp/dp2tp2.yaml" >"$tmp/ddt.yaml"
sed 's/norm: rmsnorm, mlp: swiglu, pos: rope}/norm: layernorm, mlp: gelu, pos: learned, bias: true, dropout: true}/' \
    "$dir/single.yaml" >"$tmp/dsingle.yaml"
"$GRIDSTEP" exec --json --steps 3 "$tmp/ddt.yaml" >"$tmp/ddt.one.json" || fail=1
"$GRIDSTEP" exec --json --steps 3 "$tmp/dsingle.yaml" >"$tmp/dsingle.json" || fail=1
$MPIRUN -np 4 "$GRIDSTEP" exec --json --steps 3 "$tmp/ddt.yaml" >"$tmp/ddt.mpi.json" 2>"$tmp/ddt.err"
check "dropout dp2tp2, mpirun -np 4: exit 0" test $? -eq 0
losses "$tmp/ddt.one.json" >"$tmp/ddt.one.txt"
losses "$tmp/ddt.mpi.json" >"$tmp/ddt.mpi.txt"
losses "$tmp/dsingle.json" >"$tmp/dsingle.txt"
check "dropout dp2tp2, mpirun -np 4: the one-process losses, exactly" sh -c \
    "grep -q dropout:\ true '$tmp/ddt.yaml' && test \$(grep -c . '$tmp/ddt.mpi.txt') -eq 3 && cmp -s '$tmp/ddt.one.txt' '$tmp/ddt.mpi.txt'"
check "dropout dp2tp2, mpirun -np 4: the single rank's losses (1e-5 relative)" sh -c \
    "paste '$tmp/dsingle.txt' '$tmp/ddt.mpi.txt' | awk 'NF == 2 { n++; d = \$1 - \$2; if (d < 0) d = -d; if (d / \$1 > 1e-5) bad = 1 } END { exit bad || n != 3 }'"

# tp_comm_overlap across processes: TP4 (the ring all-gather's steps as sends and receives
# between processes, each GEMM chunk waiting for its step) gives the unsplit one-process losses
sed -e 's/grid: {dp: 2, pp: 2, tp: 2}/grid: {dp: 1, pp: 1, tp: 4}/' \
    -e 's/gpus_per_node: 8/gpus_per_node: 4/' -e 's/sequence_parallel: true}/sequence_parallel: true, tp_comm_overlap: true}/' \
    "$dir/dp2-pp2-tp2.yaml" >"$tmp/tpo4.yaml"
sed -e 's/grid: {dp: 2, pp: 2, tp: 2}/grid: {dp: 1, pp: 1, tp: 4}/' -e 's/gpus_per_node: 8/gpus_per_node: 4/' "$dir/dp2-pp2-tp2.yaml" >"$tmp/tpn4.yaml"
"$GRIDSTEP" exec --json --steps 3 "$tmp/tpn4.yaml" >"$tmp/tpn4.one.json" || fail=1
$MPIRUN -np 4 "$GRIDSTEP" exec --json --steps 3 "$tmp/tpo4.yaml" >"$tmp/tpo4.mpi.json" 2>"$tmp/tpo4.err"
check "tp_comm_overlap tp4, mpirun -np 4: exit 0" test $? -eq 0
losses "$tmp/tpn4.one.json" >"$tmp/tpn4.one.txt"
losses "$tmp/tpo4.mpi.json" >"$tmp/tpo4.mpi.txt"
check "tp_comm_overlap tp4, mpirun -np 4: the unsplit one-process losses, exactly" sh -c \
    "grep -q tp_comm_overlap:\ true '$tmp/tpo4.yaml' && test \$(grep -c . '$tmp/tpo4.mpi.txt') -eq 3 && cmp -s '$tmp/tpn4.one.txt' '$tmp/tpo4.mpi.txt'"

# the host driver's rendezvous sends are a one-process mode: refused across processes
GRIDSTEP_HOST_P2P=rendezvous $MPIRUN -np 2 -x GRIDSTEP_HOST_P2P "$GRIDSTEP" exec --steps 1 "$tmp/pp2.yaml" \
    >"$tmp/out" 2>"$tmp/err"
check "GRIDSTEP_HOST_P2P=rendezvous under mpirun: exit 2" test $? -eq 2
check "... saying it works within one process" grep -q "GRIDSTEP_HOST_P2P=rendezvous works within one process" "$tmp/err"

# where each rank ran: the host's name (GRIDSTEP_HOST stands in for a second machine) and the
# local rank, its place among that host's processes in rank order (the cuda driver's device).
# Hosts a a b b: local ranks 0 1 0 1; a b a b: 0 0 1 1; each host holds 2 processes.
layout() { # JSON -> "host:local_rank/local_procs" per process, in rank order
    tr -d ' \n' <"$1" | sed 's/.*"processes":\[\([^]]*\)\].*/\1/' | tr '}' '\n' |
        sed -n 's/.*"host":"\([^"]*\)","local_rank":\([0-9]*\),"local_procs":\([0-9]*\).*/\1:\2\/\3/p' | tr '\n' ' '
}
for hosts in "a a b b" "a b a b"; do
    set -- $hosts
    $MPIRUN -np 1 env GRIDSTEP_HOST=$1 "$GRIDSTEP" exec --json --steps 3 "$tmp/dp2tp2.yaml" : \
        -np 1 env GRIDSTEP_HOST=$2 "$GRIDSTEP" exec --json --steps 3 "$tmp/dp2tp2.yaml" : \
        -np 1 env GRIDSTEP_HOST=$3 "$GRIDSTEP" exec --json --steps 3 "$tmp/dp2tp2.yaml" : \
        -np 1 env GRIDSTEP_HOST=$4 "$GRIDSTEP" exec --json --steps 3 "$tmp/dp2tp2.yaml" >"$tmp/hosts.json" 2>"$tmp/hosts.err"
    rc=$?
    case "$hosts" in "a a b b") want="a:0/2 a:1/2 b:0/2 b:1/2 " ;; *) want="a:0/2 b:0/2 a:1/2 b:1/2 " ;; esac
    got=$(layout "$tmp/hosts.json")
    check "hosts $hosts (GRIDSTEP_HOST): exit 0, processes $want" test $rc -eq 0 -a "$got" = "$want"
    losses "$tmp/hosts.json" >"$tmp/hosts.txt"
    check "hosts $hosts: losses = the one-process run, exactly" cmp "$tmp/dp2tp2.one.txt" "$tmp/hosts.txt"
done

# SIGTERM to mpirun (a batch system's time limit): Open MPI passes it on to every process and
# sends SIGKILL odls_base_sigkill_timeout seconds later (default 1); with 10 s of grace every
# process stops its step, rank 0 reports, and the last periodic checkpoint is intact
$MPIRUN --mca odls_base_sigkill_timeout 10 -np 2 "$GRIDSTEP" exec --steps 100000 --save "$tmp/term" \
    --save-every 2 "$tmp/dp2.yaml" >/dev/null 2>"$tmp/term.err" &
pid=$!
waited=0
while [ ! -f "$tmp/term/index.json" ] && [ $waited -lt 600 ]; do
    sleep 0.1
    waited=$((waited + 1))
done
sleep 0.5
kill -0 $pid 2>/dev/null && kill -TERM $pid # not a PID mpirun left behind (another test's)
wait $pid
rc=$?
check "SIGTERM to mpirun: exit 1, rank 0 says interrupted and names the intact checkpoint" \
    test $rc -eq 1 -a "$(grep -c "interrupted after step [0-9]*; last checkpoint $tmp/term (step [0-9]*) is intact" "$tmp/term.err")" -eq 1
step=$(sed -n 's/.*(step \([0-9]*\)) is intact.*/\1/p' "$tmp/term.err")
$MPIRUN -np 2 "$GRIDSTEP" exec --json --steps 1 --load "$tmp/term" "$tmp/dp2.yaml" >"$tmp/term.json" 2>/dev/null
check "... and a load continues after that step" grep -q "\"first_step\": *$((${step:-0} + 1))" "$tmp/term.json"

# the text output: once
$MPIRUN -np 2 "$GRIDSTEP" exec --steps 2 "$tmp/tp2.yaml" >"$tmp/text.out" 2>/dev/null
check "text output printed once" test "$(grep -c 'step  loss' "$tmp/text.out")" -eq 1 -a \
    "$(grep -c 'last step (measured)' "$tmp/text.out")" -eq 1

# compare: the measured side gathered from every process, printed once: the same classes of
# events as the one-process compare (the schedule is the same; only times differ)
"$GRIDSTEP" compare --json "$tmp/pp2.yaml" >"$tmp/cmp1.json" || fail=1
$MPIRUN -np 2 "$GRIDSTEP" compare --json "$tmp/pp2.yaml" >"$tmp/cmpm.json" 2>/dev/null
check "compare, mpirun -np 2: exit 0, one document" test $? -eq 0 -a "$(grep -c '"sim_step_time_s"' "$tmp/cmpm.json")" -eq 1
grep -o '"name": *"[^"]*"' "$tmp/cmp1.json" >"$tmp/a"
grep -o '"name": *"[^"]*"' "$tmp/cmpm.json" >"$tmp/b"
check "compare, mpirun -np 2: the one-process compare's classes ($(grep -c . "$tmp/a"))" \
    test -s "$tmp/a" -a -z "$(cmp "$tmp/a" "$tmp/b" 2>&1)"

# a bad launch: 2 processes for 4 ranks
$MPIRUN -np 2 "$GRIDSTEP" exec "$tmp/dp2tp2.yaml" >"$tmp/out" 2>"$tmp/err"
check "np 2 for 4 ranks: exit 2" test $? -eq 2
check "np 2 for 4 ranks: said once" test "$(grep -c 'dp2tp2 has 4 ranks (dp=2 x pp=1 x tp=2), but the launcher started 2 processes' "$tmp/err")" -eq 1
check "np 2 for 4 ranks: nothing printed" test ! -s "$tmp/out"

# an injected failure on rank 3: every process ends, rank 0 names it, fast
start=$(date +%s)
GRIDSTEP_FAULT=fail:3:L2.mb0.fwd.tp_ag $MPIRUN -np 4 "$GRIDSTEP" exec --timeout 30 --steps 2 "$tmp/dp2tp2.yaml" \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
took=$(($(date +%s) - start))
check "failure on rank 3: exit 1" test $rc -eq 1
check "failure on rank 3: named once" test "$(grep -c 'rank 3: event L2.mb0.fwd.tp_ag: injected failure (test hook)' "$tmp/err")" -eq 1
check "failure on rank 3: every process stopped in $took s (< 15 s; --timeout 30)" test "$took" -lt 15
check "failure on rank 3: no report printed" test ! -s "$tmp/out"
# rank 3's events stop (its thread dies): its process sees its dispatcher stop, the processes
# agree on the failure and rank 0 names the event that never completed, once
GRIDSTEP_FAULT=die:3:L2.mb0.fwd.tp_ag $MPIRUN -np 4 "$GRIDSTEP" exec --timeout 3 "$tmp/dp2tp2.yaml" \
    >/dev/null 2>"$tmp/err"
check "rank 3 dies: exit 1" test $? -eq 1
check "rank 3 dies: rank 3's unfinished event named once" \
    test "$(grep -c 'rank 3: event L2.mb0.fwd.tp_ag: did not complete' "$tmp/err")" -eq 1

# ---- saving across processes ----------------------------------------------------------------
# --save: rank 0 creates DIR.tmp-PID, each process writes its rank's file, rank 0 checks and
# swaps. The files hold nothing process-specific (no PID, host or date: the rank files' metadata
# and index.json hold the grid, step, scenario, sizes and CRCs), so every file must be the
# one-process save's, byte for byte (same parameters: the losses above are bit-exact), and the
# directory one file per rank plus index.json. --save-full: rank 0 gathers every rank's pieces
# and writes the one-process file, byte for byte.
gone() { # DIR: waits (up to 10 s) until the process whose PID names DIR.tmp-PID has exited (mpirun
    # can return while the processes it told to stop are still exiting; a live PID's temporary is
    # rightly kept)
    for t in "$1".tmp-*; do
        pid=${t##*.tmp-}; n=0
        while kill -0 "$pid" 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
    done
}
same_dir() { # DIR0 DIR1: the same file names, every file cmp-identical
    [ "$(ls "$1" | tr '\n' ' ')" = "$(ls "$2" | tr '\n' ' ')" ] || return 1
    for f in "$1"/*; do cmp -s "$f" "$2/${f##*/}" || return 1; done
}
for spec in dp2:2 tp2:2 pp2:2 dp2tp2:4; do
    g=${spec%:*}; np=${spec#*:}
    "$GRIDSTEP" exec --steps 2 --save "$tmp/$g.s0" --save-full "$tmp/$g.f0" "$tmp/$g.yaml" >/dev/null || fail=1
    $MPIRUN -np "$np" "$GRIDSTEP" exec --steps 2 --save "$tmp/$g.s1" --save-full "$tmp/$g.f1" "$tmp/$g.yaml" \
        >/dev/null 2>"$tmp/err"
    check "--save/--save-full on $g, mpirun -np $np: exit 0" test $? -eq 0
    check "--save on $g, mpirun -np $np: $np rank files + index.json" \
        test "$(ls "$tmp/$g.s1" | grep -c '^rank[0-9]\{5\}-of-0000'"$np"'\.safetensors$')" -eq "$np" -a \
        "$(ls "$tmp/$g.s1" | wc -l)" -eq $((np + 1))
    check "--save on $g, mpirun -np $np: every file = the one-process save's, byte for byte" \
        same_dir "$tmp/$g.s0" "$tmp/$g.s1"
    check "--save-full on $g, mpirun -np $np: the one-process file, byte for byte" cmp -s "$tmp/$g.f0" "$tmp/$g.f1"
    check "--save on $g, mpirun -np $np: no temporaries left" test -z "$(ls -d "$tmp/$g.s1".* "$tmp/$g.f1".* 2>/dev/null)"
done

# --save-full failing on one process before it sends its pieces (fail:1:save:full-pieces): every
# process fails, rank 0 says it once, and FILE is left as it was (the step-2 file just written),
# byte for byte, with no temporary. A --steps 1 file differs from it in every parameter, so any
# write shows; rank 0 must not write the model without rank 1's pieces (zeros in their place)
cp "$tmp/dp2.f1" "$tmp/dp2.f1.copy"
GRIDSTEP_FAULT=fail:1:save:full-pieces $MPIRUN -np 2 "$GRIDSTEP" exec --steps 1 --save-full "$tmp/dp2.f1" \
    "$tmp/dp2.yaml" >"$tmp/out" 2>"$tmp/err"
check "--save-full failing on rank 1: exit 1" test $? -eq 1
check "--save-full failing on rank 1: said once" \
    test "$(grep -c "checkpoint $tmp/dp2.f1: rank 1: injected failure at full-pieces (test hook)" "$tmp/err")" -eq 1
check "--save-full failing on rank 1: FILE as it was, byte for byte" cmp -s "$tmp/dp2.f1.copy" "$tmp/dp2.f1"
check "--save-full failing on rank 1: no temporaries" test -z "$(ls -d "$tmp/dp2.f1".tmp-* 2>/dev/null)"
check "--save-full failing on rank 1: no report printed" test ! -s "$tmp/out"

# processes launched on two scenarios that differ only in the MLP width (mpirun's colon syntax;
# tp2, whose TP collectives carry hidden-sized activations that would still match, so the steps
# would run and --save-full then meet a [256 x 64] piece for a [128 x 64] tensor): every process
# refuses before anything runs, naming the field, said once (the timeout guards a hang)
sed 's/ffn: 128/ffn: 256/' "$tmp/tp2.yaml" >"$tmp/tp2w.yaml"
timeout 120 $MPIRUN -np 1 "$GRIDSTEP" exec --steps 1 --save-full "$tmp/mixed.f" "$tmp/tp2.yaml" : \
    -np 1 "$GRIDSTEP" exec --steps 1 --save-full "$tmp/mixed.f" "$tmp/tp2w.yaml" >"$tmp/out" 2>"$tmp/err"
check "two scenarios across processes: exit 2" test $? -eq 2
check "... naming the field that differs, once" \
    test "$(grep -c 'process 1 runs a different scenario or options than process 0 (model ffn: 256 vs 128)' "$tmp/err")" -eq 1
check "... nothing run, no FILE" test ! -s "$tmp/out" -a -z "$(ls -d "$tmp/mixed.f"* 2>/dev/null)"
# the same file with another --seed on one process: the data and the initial weights would differ
timeout 120 $MPIRUN -np 1 "$GRIDSTEP" exec --steps 1 "$tmp/tp2.yaml" : \
    -np 1 "$GRIDSTEP" exec --steps 1 --seed 7 "$tmp/tp2.yaml" >/dev/null 2>"$tmp/err"
check "another --seed on process 1: exit 2 naming --seed" \
    test $? -eq 2 -a "$(grep -c '(--seed: 7 vs 1234)' "$tmp/err")" -eq 1

# --save then --load across processes resumes bit-exactly: 2 + 2 steps give the losses of 4
# uninterrupted steps (Adam's step and moments saved and restored on every rank)
for spec in dp2tp2:4 pp2:2; do
    g=${spec%:*}; np=${spec#*:}
    $MPIRUN -np "$np" "$GRIDSTEP" exec --json --steps 4 "$tmp/$g.yaml" >"$tmp/$g.r4.json" 2>/dev/null || fail=1
    $MPIRUN -np "$np" "$GRIDSTEP" exec --json --steps 2 --save "$tmp/$g.rk" "$tmp/$g.yaml" >"$tmp/$g.ra.json" \
        2>/dev/null || fail=1
    $MPIRUN -np "$np" "$GRIDSTEP" exec --json --steps 2 --load "$tmp/$g.rk" "$tmp/$g.yaml" >"$tmp/$g.rb.json" \
        2>/dev/null
    check "--save, then --load on $g, mpirun -np $np: exit 0" test $? -eq 0
    losses "$tmp/$g.r4.json" | awk 1 >"$tmp/a"
    { losses "$tmp/$g.ra.json" | awk 1; losses "$tmp/$g.rb.json" | awk 1; } >"$tmp/b"
    check "--save, then --load on $g, mpirun -np $np: 2 + 2 losses = 4 uninterrupted, exactly" \
        test "$(grep -c . "$tmp/a")" -eq 4 -a -z "$(cmp "$tmp/a" "$tmp/b" 2>&1)"
done

# --save-every 2 over 3 steps saves at steps 2 and 3. Rank 0 killed in the step-3 save right
# after moving the step-2 checkpoint aside (die at old-moved: DIR missing, DIR.old complete,
# DIR.tmp-PID of a dead PID): what is on disk is the step-2 checkpoint, the one-process
# --steps 2 save's files byte for byte, and a load resumes from it
"$GRIDSTEP" exec --steps 2 --save "$tmp/e0" "$tmp/dp2tp2.yaml" >/dev/null || fail=1
GRIDSTEP_FAULT=die:0:save:old-moved $MPIRUN -np 4 "$GRIDSTEP" exec --steps 3 --save-every 2 --save "$tmp/e1" \
    "$tmp/dp2tp2.yaml" >/dev/null 2>&1
check "--save-every 2, rank 0 killed in the step-3 save: mpirun fails" test $? -ne 0
check "... DIR missing, DIR.old and rank 0's DIR.tmp-PID left" \
    test ! -e "$tmp/e1" -a -d "$tmp/e1.old" -a "$(ls -d "$tmp/e1".tmp-* 2>/dev/null | wc -l)" -eq 1
check "... DIR.old is the step-2 save (the one-process --steps 2 --save's files)" same_dir "$tmp/e0" "$tmp/e1.old"
$MPIRUN -np 4 "$GRIDSTEP" exec --json --steps 1 --load "$tmp/e1" "$tmp/dp2tp2.yaml" >"$tmp/e.json" 2>/dev/null
check "... a load reads DIR.old and continues at step 3" grep -q '"first_step": *3' "$tmp/e.json"
# the next save recovers DIR.old, removes the dead rank 0's temporary and saves step 3 (the
# one-process --steps 3 save's files)
gone "$tmp/e1"
"$GRIDSTEP" exec --steps 3 --save "$tmp/e3" "$tmp/dp2tp2.yaml" >/dev/null || fail=1
$MPIRUN -np 4 "$GRIDSTEP" exec --steps 3 --save-every 2 --save "$tmp/e1" "$tmp/dp2tp2.yaml" >/dev/null 2>&1
check "--save-every 2 over 3 steps, mpirun: exit 0" test $? -eq 0
check "... DIR is the step-3 save, byte for byte" same_dir "$tmp/e3" "$tmp/e1"
check "... DIR.old and the dead rank 0's DIR.tmp-PID are gone" test -z "$(ls -d "$tmp/e1".* 2>/dev/null)"

# a failure on one rank during a save: every process fails the save, rank 0 says it once, and
# the previous checkpoint (e1, step 3) is left as it was
cp -r "$tmp/e1" "$tmp/e1.copy"
GRIDSTEP_FAULT=fail:1:save:file-written $MPIRUN -np 4 "$GRIDSTEP" exec --steps 1 --save "$tmp/e1" \
    "$tmp/dp2tp2.yaml" >"$tmp/out" 2>"$tmp/err"
check "save failing on rank 1: exit 1" test $? -eq 1
check "save failing on rank 1: said once" \
    test "$(grep -c "checkpoint $tmp/e1: rank 1: injected failure at file-written (test hook)" "$tmp/err")" -eq 1
check "save failing on rank 1: the previous checkpoint intact, no temporaries" \
    sh -c "cd '$tmp' && test -z \"\$(ls -d e1.tmp-* e1.old 2>/dev/null)\"" 
check "save failing on rank 1: ... byte for byte" same_dir "$tmp/e1.copy" "$tmp/e1"
check "save failing on rank 1: no report printed" test ! -s "$tmp/out"
# a save target without its parent directory: refused before any step runs (exit 2), said once
$MPIRUN -np 2 "$GRIDSTEP" exec --save "$tmp/none/ck" "$tmp/dp2.yaml" >/dev/null 2>"$tmp/err"
check "save to a missing parent, mpirun: exit 2" test $? -eq 2
check "save to a missing parent, mpirun: said once" \
    test "$(grep -c -- "--save $tmp/none/ck: its parent directory $tmp/none does not exist" "$tmp/err")" -eq 1
# rank 2's process killed after writing its file: mpirun fails, DIR is as it was, rank 0's
# DIR.tmp-PID is left (its PID is dead now) and the next save removes it
GRIDSTEP_FAULT=die:2:save:file-written $MPIRUN -np 4 "$GRIDSTEP" exec --steps 1 --save "$tmp/e1" \
    "$tmp/dp2tp2.yaml" >/dev/null 2>&1
check "rank 2 killed mid-save: mpirun fails" test $? -ne 0
check "rank 2 killed mid-save: DIR byte for byte as it was, DIR.tmp-PID left" \
    sh -c "same() { for f in '$tmp/e1.copy'/*; do cmp -s \"\$f\" '$tmp/e1/'\"\${f##*/}\" || return 1; done; }; same && test \$(ls -d '$tmp'/e1.tmp-* | wc -l) -eq 1"
gone "$tmp/e1"
$MPIRUN -np 4 "$GRIDSTEP" exec --steps 3 --save "$tmp/e1" "$tmp/dp2tp2.yaml" >/dev/null 2>&1
check "the next save, mpirun: exit 0, the stale DIR.tmp-PID removed" \
    test $? -eq 0 -a -z "$(ls -d "$tmp/e1".tmp-* "$tmp/e1.old" 2>/dev/null)"
check "the next save: the one-process --steps 3 save's files" same_dir "$tmp/e3" "$tmp/e1"

# every process exits with the outcome of a save (issue 7), seen through tests/mpi_common.sh's
# rankwrap and every_rank. The processes other than rank 0 print one line each, not rank 0's
# message again.
wrapped() { # NP, gridstep arguments...: mpirun of NP wrapped processes; stdout, stderr to $tmp/out, $tmp/err
    np=$1; shift
    rm -f "$RANKDIR"/status.*
    timeout 300 $MPIRUN --mca odls_base_sigkill_timeout 10 -np "$np" "$tmp/rankwrap" "$GRIDSTEP" "$@" \
        >"$tmp/out" 2>"$tmp/err"
}
# the line of each process other than rank 0: "rank R of 4: the save failed; rank 0 reports
# the error", for R = 1, 2, 3, each once
printf 'gridstep exec: rank %s of 4: the save failed; rank 0 reports the error\n' 1 2 3 >"$tmp/notes.want"
one_note_each() {
    grep '^gridstep exec: rank [0-9]* of [0-9]*: ' "$tmp/err" | grep -v ': checkpoint ' | sort | cmp -s - "$tmp/notes.want"
}
intact() { # the previous checkpoint x1 and FILE x1.full as they were, byte for byte, no temporaries
    same_dir "$tmp/x1.copy" "$tmp/x1" && cmp -s "$tmp/x1.full.copy" "$tmp/x1.full" &&
        test -z "$(ls -d "$tmp/x1".tmp-* "$tmp/x1.old" "$tmp/x1.full".tmp-* 2>/dev/null)"
}
# success: --save-every 1 over 2 steps, and --save-full: every process exits 0; DIR is the
# one-process --steps 2 save's (e0) and FILE the mpirun --steps 2 --save-full's (dp2tp2.f1)
wrapped 4 exec --steps 2 --save-every 1 --save "$tmp/x1" --save-full "$tmp/x1.full" "$tmp/dp2tp2.yaml"
check "saves that succeed, 4 wrapped processes: mpirun exit 0" test $? -eq 0
check "saves that succeed: every process exit 0" every_rank 0 4
check "saves that succeed: DIR = the one-process save's, byte for byte" same_dir "$tmp/e0" "$tmp/x1"
check "saves that succeed: FILE = the unwrapped mpirun's, byte for byte" cmp -s "$tmp/dp2tp2.f1" "$tmp/x1.full"
check "saves that succeed: nothing on stderr" test ! -s "$tmp/err"
cp -r "$tmp/x1" "$tmp/x1.copy"
cp "$tmp/x1.full" "$tmp/x1.full.copy"
# a save failing at rank 0's step (tmp-dir), at rank 2's file in the first of two periodic saves
# (file-written), at rank 3's pieces for --save-full (full-pieces): PHASE|FAULT|ARGS|rank 0's message
for spec in "tmp-dir|fail:0:save:tmp-dir|--steps 1 --save $tmp/x1|checkpoint $tmp/x1: rank 0: injected failure at tmp-dir (test hook)" \
    "file-written|fail:2:save:file-written|--steps 2 --save-every 1 --save $tmp/x1|checkpoint $tmp/x1: rank 2: injected failure at file-written (test hook)" \
    "full-pieces|fail:3:save:full-pieces|--steps 1 --save-full $tmp/x1.full|checkpoint $tmp/x1.full: rank 3: injected failure at full-pieces (test hook)"; do
    phase=${spec%%|*}; rest=${spec#*|}; fault=${rest%%|*}; rest=${rest#*|}; args=${rest%%|*}; msg=${rest#*|}
    GRIDSTEP_FAULT=$fault wrapped 4 exec $args "$tmp/dp2tp2.yaml"
    check "save failing at $phase ($fault): mpirun exit 1" test $? -eq 1
    check "save failing at $phase: every process exit 1" every_rank 1 4
    check "save failing at $phase: rank 0's message once" test "$(grep -c "^gridstep exec: $msg\$" "$tmp/err")" -eq 1
    check "save failing at $phase: one line from each of ranks 1, 2, 3" one_note_each
    check "save failing at $phase: no report printed" test ! -s "$tmp/out"
    check "save failing at $phase: the previous checkpoint and FILE intact, no temporaries" intact
done
# rank 0 killed while the others wait for the save's outcome (tmp-dir: for the temporary's
# name; old-moved: for the commit): mpirun ends every process, none hangs. Each process's PID
# (the wrapper execs gridstep) must be gone within 10 s of mpirun's return, and none exited 0
cat >"$tmp/pidwrap" <<'EOF'
#!/bin/sh
echo $$ >"$RANKDIR/pid.$OMPI_COMM_WORLD_RANK"
exec "$@"
EOF
chmod +x "$tmp/pidwrap" || fail=1
all_gone() { # NP: every process whose PID a pidwrap wrote has exited
    r=0
    while [ $r -lt "$1" ]; do
        pid=$(cat "$RANKDIR/pid.$r" 2>/dev/null) || return 1
        n=0
        while kill -0 "$pid" 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
        kill -0 "$pid" 2>/dev/null && return 1
        r=$((r + 1))
    done
    return 0
}
for phase in tmp-dir old-moved; do
    rm -f "$RANKDIR"/pid.*
    start=$(date +%s)
    GRIDSTEP_FAULT=die:0:save:$phase timeout 300 $MPIRUN -np 4 "$tmp/pidwrap" "$GRIDSTEP" exec --steps 1 \
        --save "$tmp/x1" "$tmp/dp2tp2.yaml" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    took=$(($(date +%s) - start))
    check "rank 0 killed at save:$phase: mpirun fails (exit $rc), in $took s (< 60)" \
        test $rc -ne 0 -a $rc -ne 124 -a "$took" -lt 60
    check "rank 0 killed at save:$phase: every process has ended" all_gone 4
done
check "... the previous checkpoint is DIR.old, byte for byte" same_dir "$tmp/x1.copy" "$tmp/x1.old"

# loading works: each process reads its rank's pieces. Checkpoints saved by one process (dp2 x
# tp2 after 2 steps; the single-rank model after 2 steps, loaded on tp2 and on pp2, whose ranks
# each hold half the layers: a tensor is the model's when some process has it), then 2 more steps: the
# same losses as the one-process load, exactly, starting at step 3
"$GRIDSTEP" exec --steps 2 --save "$tmp/ck4" "$tmp/dp2tp2.yaml" >/dev/null || fail=1
"$GRIDSTEP" exec --steps 2 --save "$tmp/ck1" "$dir/single.yaml" >/dev/null || fail=1
for spec in dp2tp2:4:ck4 tp2:2:ck1 pp2:2:ck1; do
    g=${spec%%:*}; rest=${spec#*:}; np=${rest%%:*}; ck=${rest#*:}
    "$GRIDSTEP" exec --json --steps 2 --load "$tmp/$ck" "$tmp/$g.yaml" >"$tmp/$g.l1.json" || fail=1
    $MPIRUN -np "$np" "$GRIDSTEP" exec --json --steps 2 --load "$tmp/$ck" "$tmp/$g.yaml" >"$tmp/$g.lm.json" 2>"$tmp/err"
    check "--load $ck on $g, mpirun -np $np: exit 0" test $? -eq 0
    losses "$tmp/$g.l1.json" >"$tmp/a"
    losses "$tmp/$g.lm.json" >"$tmp/b"
    check "--load $ck on $g, mpirun -np $np: 2 losses = the one-process load's, exactly" \
        test "$(grep -c . "$tmp/b")" -eq 2 -a -z "$(cmp "$tmp/a" "$tmp/b" 2>&1)"
    check "--load $ck on $g, mpirun -np $np: continues at step 3" grep -q '"first_step": *3' "$tmp/$g.lm.json"
done
# another model's checkpoint (6 layers: layers 4 and 5 exist on no rank of the 4-layer model)
sed 's/layers: 4/layers: 6/' "$dir/single.yaml" >"$tmp/six.yaml"
"$GRIDSTEP" exec --save "$tmp/ck6" "$tmp/six.yaml" >/dev/null || fail=1
$MPIRUN -np 2 "$GRIDSTEP" exec --load "$tmp/ck6" "$tmp/tp2.yaml" >/dev/null 2>"$tmp/err"
check "--load of a 6-layer checkpoint on the 4-layer tp2, mpirun: exit 2" test $? -eq 2
check "--load of a 6-layer checkpoint: refused once, naming a tensor of layer 4" \
    test "$(grep -c 'tensor model.layers.4.* is not in the model of tp2' "$tmp/err")" -eq 1

exit $fail
