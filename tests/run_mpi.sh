#!/bin/sh
# gridstep under mpirun: a sweep (CSV and JSON) split across 3 ranks must print byte for byte
# the serial output, once (rank 0); a plan split across 3 ranks must print the serial plan's
# candidates and counts (all but the work-dependent `simulated` and R4 pruning lines, as for
# gridstep merge); an error on the ranks is reported once with the serial exit code. Without MPI
# built in, a launcher's environment of size 3 must be refused (exit 2) with the reason.
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

command -v mpirun >/dev/null 2>&1 || { echo "SKIP: gridstep has MPI but mpirun is not on PATH"; exit 77; }
# Open MPI as root in containers, more ranks than cores; quiet about missing fabrics
# Open MPI leaks at MPI_Finalize by design; in an --enable-asan build LeakSanitizer would turn
# that into exit 1 (our own allocations are checked by the rest of make check).
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 3"
export OMPI_MCA_btl_base_warn_component_unused=0 OMPI_MCA_btl_vader_single_copy_mechanism=none

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
grep -v -e '"simulated":' -e '(R4)' "$tmp/plan.json" >"$tmp/a"
grep -v -e '"simulated":' -e '(R4)' "$tmp/planm.json" >"$tmp/b"
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

exit $fail
