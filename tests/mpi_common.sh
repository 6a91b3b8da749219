# Sourced by the MPI test scripts (run_mpi.sh, run_exec_mpi.sh, run_calib_mpi.sh) after their
# no-MPI branch, with $tmp set: mpirun or skip (77), one such script at a time, Open MPI's
# settings for this machine, and the per-process exit status wrapper.

command -v mpirun >/dev/null 2>&1 || { echo "SKIP: gridstep has MPI but mpirun is not on PATH"; exit 77; }
# one MPI test script at a time (make check -j runs them side by side): their jobs' processes
# poll for progress and several jobs oversubscribe a small machine, which the timing-sensitive
# checks (SIGTERM through mpirun, the timeouts) are not written for
if command -v flock >/dev/null 2>&1; then
    exec 9>"${TMPDIR:-/tmp}/gridstep-mpi-tests.$(id -u).lock" && flock 9
fi
# Open MPI leaks at MPI_Finalize by design; in an --enable-asan build LeakSanitizer would turn
# that into exit 1 (our own allocations are checked by the rest of make check). Open MPI as root
# in containers, more ranks than cores; quiet about missing fabrics.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
export OMPI_MCA_btl_base_warn_component_unused=0 OMPI_MCA_btl_vader_single_copy_mechanism=none

# Each process's own exit status: $tmp/rankwrap runs one rank's command and writes its status to
# $RANKDIR/status.RANK. Once one process has exited non-zero, mpirun sends the others SIGTERM
# (SIGKILL odls_base_sigkill_timeout seconds later): the wrapper ignores it, and so does gridstep
# once its run is over (an ignored signal stays ignored in the child), so each process's own exit
# status is what is seen.
cat >"$tmp/rankwrap" <<'WRAP'
#!/bin/sh
trap '' TERM
"$@"
rc=$?
echo $rc >"$RANKDIR/status.$OMPI_COMM_WORLD_RANK"
exit $rc
WRAP
RANKDIR=$tmp/ranks
export RANKDIR
mkdir -p "$RANKDIR" && chmod +x "$tmp/rankwrap" || fail=1
every_rank() { # WANT NP: each of the NP processes wrote its own exit status, WANT
    r=0
    while [ $r -lt "$2" ]; do
        [ "$(cat "$RANKDIR/status.$r" 2>/dev/null)" = "$1" ] || return 1
        r=$((r + 1))
    done
}
