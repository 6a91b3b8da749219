#!/bin/sh
# gridstep under mpirun: a sweep (CSV and JSON) split across 3 ranks must print byte for byte
# the serial output, once (rank 0); a plan split across 3 ranks must print the serial plan's
# candidates and counts (all but the work-dependent `simulated` and R4 pruning lines, as for
# gridstep merge); an error on the ranks is reported once with the serial exit code. Under -np 2
# and -np 3, every process's own exit status is recorded: 0 on success, else the serial run's
# code on every process (bad input on every rank, a scenario failing on rank 1 alone, rank 0
# failing to write --out), rank 0 printing the serial message once and each other rank one line.
# Without MPI built in, a launcher's environment of size 3 must be refused (exit 2) with the
# reason.
# Skips (77) when this gridstep has MPI but mpirun is absent.
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
S=scenarios/tiny-llama-2x2x2.yaml
V="--vary micro=1,2,4 --vary tp=1,2,4,8"

if [ "${GS_HAVE_MPI:-no}" != yes ]; then
    # a launcher's environment without an MPI build: refused on every rank, exit 2
    OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_RANK=1 "$GRIDSTEP" sweep $V "$S" >"$tmp/out" 2>"$tmp/err"
    check "no MPI: 3 launched ranks are refused (exit 2)" test $? -eq 2
    check "no MPI: ... saying so" grep -q "this gridstep was built without MPI; reconfigure with --with-mpi, or use --shard I/N and gridstep merge" "$tmp/err"
    check "no MPI: ... and printing no output" test ! -s "$tmp/out"
    PMI_SIZE=2 "$GRIDSTEP" plan scenarios/seed-7b-8xa100.yaml --json >/dev/null 2>"$tmp/err"
    check "no MPI: plan under a 2-rank PMI launcher too" test $? -eq 2
    PMI_SIZE=1 "$GRIDSTEP" sweep $V "$S" >"$tmp/one.csv" 2>/dev/null
    "$GRIDSTEP" sweep $V "$S" >"$tmp/serial.csv" || fail=1
    check "no MPI: a launcher of size 1 runs the serial sweep" cmp "$tmp/serial.csv" "$tmp/one.csv"
    exit $fail
fi

. "$top_srcdir/tests/mpi_common.sh"
MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 3"

# sweep, CSV and JSON, --out too
"$GRIDSTEP" sweep $V "$S" >"$tmp/serial.csv" || fail=1
$MPIRUN "$GRIDSTEP" sweep $V "$S" >"$tmp/mpi.csv" 2>"$tmp/err"
check "mpirun sweep csv: exit 0" test $? -eq 0
check "mpirun sweep csv: 3 ranks = serial, byte for byte" cmp "$tmp/serial.csv" "$tmp/mpi.csv"
check "mpirun sweep csv: 12 points + header, printed once" test "$(wc -l <"$tmp/mpi.csv")" -eq 13
"$GRIDSTEP" sweep --json $V "$S" >"$tmp/serial.json" || fail=1
$MPIRUN "$GRIDSTEP" sweep --json $V --out "$tmp/mpi.json" "$S" >"$tmp/stdout" 2>"$tmp/err"
check "mpirun sweep json --out: exit 0" test $? -eq 0
check "mpirun sweep json --out: 3 ranks = serial, byte for byte" cmp "$tmp/serial.json" "$tmp/mpi.json"
check "mpirun sweep json --out: nothing on standard output" test ! -s "$tmp/stdout"
# more ranks than... two: the same bytes whatever the rank count
mpirun --allow-run-as-root --oversubscribe -np 2 "$GRIDSTEP" sweep $V "$S" >"$tmp/mpi2.csv" 2>/dev/null
check "mpirun -np 2 sweep csv = serial" cmp "$tmp/serial.csv" "$tmp/mpi2.csv"

# plan: as merge's test compares it
P="scenarios/seed-7b-8xa100.yaml --top 4 --micro 1,2 --json"
"$GRIDSTEP" plan $P >"$tmp/plan.json" || fail=1
$MPIRUN "$GRIDSTEP" plan $P >"$tmp/planm.json" 2>"$tmp/err"
check "mpirun plan: exit 0" test $? -eq 0
grep -v -e '"simulated":' -e '(R[1-4]' -e '(ledger peak)' "$tmp/plan.json" >"$tmp/a"
grep -v -e '"simulated":' -e '(R[1-4]' -e '(ledger peak)' "$tmp/planm.json" >"$tmp/b"
check "mpirun plan: 3 ranks = serial (candidates, rejections, counts)" cmp "$tmp/a" "$tmp/b"
check "mpirun plan: 4 candidates" test "$(grep -c '"grid": {' "$tmp/planm.json")" -eq 4
check "mpirun plan: no shard keys left in the output" test "$(grep -c -e '"shard"' -e '"order"' "$tmp/planm.json")" -eq 0

# errors: reported once (by rank 0), the serial exit code
$MPIRUN "$GRIDSTEP" plan scenarios/seed-7b-8xa100.yaml >/dev/null 2>"$tmp/err"
check "mpirun plan without --json: exit 2 (usage)" test $? -eq 2
check "mpirun plan without --json: ... said once" test "$(grep -c 'plan needs --json' "$tmp/err")" -eq 1
$MPIRUN "$GRIDSTEP" sweep $V --shard 0/2 "$S" >/dev/null 2>"$tmp/err"
check "mpirun sweep --shard: refused once" test "$(grep -c 'the ranks are the shards' "$tmp/err")" -eq 1
$MPIRUN "$GRIDSTEP" sweep $V tests/no-such-scenario.yaml >"$tmp/out" 2>"$tmp/err"
check "mpirun sweep of a missing scenario: exit 2 as serial" test $? -eq 2
check "mpirun sweep of a missing scenario: said once, nothing printed" \
    test "$(grep -c 'no-such-scenario' "$tmp/err")" -eq 1 -a ! -s "$tmp/out"
# an error on ranks 1 and 2 only (MPMD launch: rank 0 gets a good scenario): rank 0 reports the
# lowest failed rank's error, once, and prints no output
mpirun --allow-run-as-root --oversubscribe -np 1 "$GRIDSTEP" sweep $V "$S" : \
    -np 2 "$GRIDSTEP" sweep $V tests/no-such-scenario.yaml >"$tmp/out" 2>"$tmp/err"
check "mpirun, ranks 1-2 failing: exit 2" test $? -eq 2
check "mpirun, ranks 1-2 failing: rank 0 reports rank 1's error, once" \
    test "$(grep -c 'rank 1 of 3: tests/no-such-scenario.yaml' "$tmp/err")" -eq 1 -a "$(grep -c 'no-such' "$tmp/err")" -eq 1
check "mpirun, ranks 1-2 failing: no partial output" test ! -s "$tmp/out"

# Every process exits with the agreed status (issue 7), seen through tests/mpi_common.sh's
# rankwrap and every_rank. No process exits before every one has passed gridstep's last
# barrier, so 2 s for the others' MPI_Finalize is ample (mpirun waits about that long after each
# failure: 10 s, as run_exec_mpi.sh gives exec's runs, would make this test minutes long).
# timeout 300: a hang fails the status checks (124).
W="$tmp/rankwrap $GRIDSTEP"
wrapped() { # mpirun arguments (app contexts: -np K $W ARGS [: ...]); stdout, stderr to $tmp/out, $tmp/err
    rm -f "$RANKDIR"/status.*
    timeout 300 $MPIRUN0 --mca odls_base_sigkill_timeout 2 "$@" >"$tmp/out" 2>"$tmp/err"
}
MPIRUN0="mpirun --allow-run-as-root --oversubscribe"
# gridstep's lines on stderr (Open MPI's notice about the non-zero exits is not ours): exactly
# rank 0's message LINE (the serial run's stderr line, "rank R of NP: " inserted after the
# command when rank R failed first), then one line from each other rank P: "gridstep CMD: rank P
# of NP: the CMD failed; rank 0 reports the error", each once, in any order
said_once() { # CMD NP LINE
    { echo "$3"; p=1; while [ $p -lt "$2" ]; do
        echo "gridstep $1: rank $p of $2: the $1 failed; rank 0 reports the error"; p=$((p + 1)); done; } |
        sort >"$tmp/lines.want"
    grep '^gridstep ' "$tmp/err" | sort | cmp -s - "$tmp/lines.want"
}
# scenarios that fail at load with FILE:LINE:COL (serial: exit 2): kv_heads 3 (line 11) does not
# divide heads 4; pipeline 1f2b (line 31) is no schedule
sed 's/^  kv_heads: 2/  kv_heads: 3/' "$S" >"$tmp/heads.yaml"
sed 's/^  pipeline: 1f1b/  pipeline: 1f2b/' "$S" >"$tmp/pipe.yaml"
grep -q 'kv_heads: 3' "$tmp/heads.yaml" && grep -q 'pipeline: 1f2b' "$tmp/pipe.yaml" || { echo "FAIL: cannot make the bad scenarios"; fail=1; }
P2="--top 4 --micro 1,2 --json"
for np in 2 3; do
    # success: every process 0, rank 0's output the serial run's, nothing on stderr
    wrapped -np $np $W sweep $V "$S"
    check "np $np wrapped sweep: mpirun exit 0" test $? -eq 0
    check "np $np wrapped sweep: every process exit 0" every_rank 0 $np
    check "np $np wrapped sweep: = serial, byte for byte" cmp -s "$tmp/serial.csv" "$tmp/out"
    check "np $np wrapped sweep: nothing on stderr" test ! -s "$tmp/err"
    wrapped -np $np $W plan scenarios/seed-7b-8xa100.yaml $P2
    check "np $np wrapped plan: every process exit 0" every_rank 0 $np
    grep -v -e '"simulated":' -e '(R[1-4]' -e '(ledger peak)' "$tmp/out" >"$tmp/b"
    check "np $np wrapped plan: = serial (candidates, rejections, counts)" cmp -s "$tmp/a" "$tmp/b"

    # bad input on every rank: a bad --vary key, a scenario failing at FILE:LINE, a missing
    # scenario, a bad --tp list: every process exits 2, rank 0 gives the serial message once
    for spec in "sweep|--vary bogus=1 $S" "sweep|$V $tmp/heads.yaml" "sweep|$V tests/no-such-scenario.yaml" \
        "plan|$tmp/pipe.yaml $P2" "plan|scenarios/seed-7b-8xa100.yaml --tp 0,2 --json"; do
        cmd=${spec%%|*}; args=${spec#*|}
        "$GRIDSTEP" $cmd $args >/dev/null 2>"$tmp/serial.err"
        serial=$?
        check "serial $cmd $args: exit 2, one line" test $serial -eq 2 -a "$(grep -c '^gridstep ' "$tmp/serial.err")" -eq 1
        wrapped -np $np $W $cmd $args
        check "np $np $cmd $args: mpirun exit 2" test $? -eq 2
        check "np $np $cmd $args: every process exit 2" every_rank 2 $np
        check "np $np $cmd $args: the serial message once, one line from each other rank" \
            said_once $cmd $np "$(grep '^gridstep ' "$tmp/serial.err")"
        check "np $np $cmd $args: nothing on stdout" test ! -s "$tmp/out"
    done

    # an error on rank 1 alone: its scenario fails at FILE:LINE, rank 0's (and rank 2's) loads.
    # A point's own failure (a grid that does not divide, a batch that does not fit) is a row
    # (status illegal, no_fit), not an error, so the ranks are given different files (MPMD).
    # Every process exits 2 (rank 2 too, whose shard succeeded); rank 0 names rank 1 and gives the
    # serial message
    rest=$((np - 2))
    for spec in "sweep|$V|heads.yaml|$S" "plan|$P2|pipe.yaml|scenarios/seed-7b-8xa100.yaml"; do
        cmd=${spec%%|*}; rest_spec=${spec#*|}; args=${rest_spec%%|*}; rest_spec=${rest_spec#*|}
        bad=$tmp/${rest_spec%%|*}; good=${rest_spec#*|}
        "$GRIDSTEP" $cmd $args "$bad" >/dev/null 2>"$tmp/serial.err"
        msg=$(grep '^gridstep ' "$tmp/serial.err" | sed "s/^gridstep $cmd: //")
        check "serial $cmd of ${bad##*/}: FILE:LINE:COL" grep -q "^gridstep $cmd: $bad:[0-9]*:[0-9]*: " "$tmp/serial.err"
        if [ $rest -gt 0 ]; then
            wrapped -np 1 $W $cmd $args "$good" : -np 1 $W $cmd $args "$bad" : -np $rest $W $cmd $args "$good"
        else
            wrapped -np 1 $W $cmd $args "$good" : -np 1 $W $cmd $args "$bad"
        fi
        check "np $np, $cmd failing on rank 1 only: mpirun exit 2" test $? -eq 2
        check "np $np, $cmd failing on rank 1 only: every process exit 2" every_rank 2 $np
        check "np $np, $cmd failing on rank 1 only: rank 0 names rank 1 with the serial message, once" \
            said_once $cmd $np "gridstep $cmd: rank 1 of $np: $msg"
        check "np $np, $cmd failing on rank 1 only: nothing on stdout" test ! -s "$tmp/out"
    done

    # rank 0 cannot write --out (a missing directory: fopen fails; /dev/full: the close fails)
    # after every rank's shard succeeded: every process exits 1, as the serial run does
    for out in "$tmp/no-such-dir/sweep.csv" /dev/full; do
        "$GRIDSTEP" sweep $V --out "$out" "$S" >/dev/null 2>"$tmp/serial.err"
        serial=$?
        check "serial sweep --out $out: exit 1" test $serial -eq 1
        wrapped -np $np $W sweep $V --out "$out" "$S"
        check "np $np sweep --out $out: mpirun exit 1" test $? -eq 1
        check "np $np sweep --out $out: every process exit 1" every_rank 1 $np
        check "np $np sweep --out $out: the serial message once, one line from each other rank" \
            said_once sweep $np "$(grep '^gridstep ' "$tmp/serial.err")"
    done
done
# the same without the wrapper: a rank other than 0 failing alone must not have rank 0 killed
# before it has printed (mpirun stops the others when the first process exits non-zero)
timeout 300 $MPIRUN0 -np 1 "$GRIDSTEP" sweep $V "$S" : -np 1 "$GRIDSTEP" sweep $V "$tmp/heads.yaml" : \
    -np 1 "$GRIDSTEP" sweep $V "$S" >"$tmp/out" 2>"$tmp/err"
check "mpirun, rank 1 failing alone: exit 2" test $? -eq 2
check "mpirun, rank 1 failing alone: rank 0's message once" \
    test "$(grep -c "^gridstep sweep: rank 1 of 3: $tmp/heads.yaml:11:3: " "$tmp/err")" -eq 1

exit $fail
