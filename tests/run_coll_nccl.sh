#!/bin/sh
# gridstep coll speaks nccl-tests: tests/coll/nccl_tests_parse.awk, a reader written to nccl-tests'
# printed format, first reads a run of nccl-tests itself (tests/coll/nccl-tests-*.txt: its
# parameter lines, "# Using devices", NCCL INFO lines, the header with its units row, the rows,
# the footer), then gridstep coll's output unchanged. On gridstep's rows the values are checked
# against nccl-tests' definitions, computed here: sizes from -b by -f up to -e, count = size /
# type bytes (/ ranks for all_gather), busbw = algbw x 2(n-1)/n for all_reduce and x (n-1)/n for
# all_gather, the in-place set equal to the out-of-place one, "# Avg bus bandwidth" = the mean
# busbw of the rows.
# Environment: GRIDSTEP = the binary, top_srcdir = the source tree.
# Prints PASS:/FAIL: per case and "N passed, M failed"; exits 1 on any failure.

GRIDSTEP=${GRIDSTEP:-./gridstep}
top_srcdir=${top_srcdir:-.}
parse="$top_srcdir/tests/coll/nccl_tests_parse.awk"

if [ ! -x "$GRIDSTEP" ]; then
    echo "run_coll_nccl.sh: gridstep binary not found at '$GRIDSTEP'" >&2
    exit 1
fi

tmp=${TMPDIR:-/tmp}/gs-coll-nccl.$$
mkdir "$tmp" || exit 1
trap 'rm -rf "$tmp"' 0 1 2 15

passed=0
failed=0
ok() { echo "PASS: $1"; passed=$((passed + 1)); }
bad() { echo "FAIL: $1"; failed=$((failed + 1)); }

# 1. the reader on nccl-tests' own output: 9 rows, the footer's values
if awk -f "$parse" "$top_srcdir/tests/coll/nccl-tests-all_reduce-8xh100.txt" >"$tmp/ref.csv" &&
    [ "$(grep -c '^[0-9]' "$tmp/ref.csv")" = 9 ] &&
    grep -qx 'avg_busbw,109.869' "$tmp/ref.csv" && grep -qx 'out_of_bounds,0' "$tmp/ref.csv" &&
    grep -qx '134217728,33554432,float,sum,-1,479.30,280.03,490.05,0,478.52,280.49,490.85,0' "$tmp/ref.csv"; then
    ok "the reader reads nccl-tests' all_reduce_perf output"
else
    bad "the reader on nccl-tests' all_reduce_perf output"
fi
# ... and refuses what breaks the format (a row of 12 columns under a header with root)
sed 's/^ *8  *2  *float  *sum  *-1 /           8             2     float     sum /' \
    "$top_srcdir/tests/coll/nccl-tests-all_reduce-8xh100.txt" >"$tmp/broken.txt"
if awk -f "$parse" "$tmp/broken.txt" >/dev/null 2>"$tmp/broken.err"; then
    bad "the reader accepted a row without its root column"
else
    ok "the reader refuses a row without its root column: $(cat "$tmp/broken.err")"
fi

# check NAME RANKS FACTOR_NUM FACTOR_DEN PER_RANK TYPE_BYTES TYPE REDOP ROOT ARGS...: runs gridstep
# coll ARGS, reads it with the reader and checks every row against nccl-tests' definitions.
check() {
    name=$1 n=$2 fnum=$3 fden=$4 per_rank=$5 tbytes=$6 type=$7 redop=$8 root=$9
    shift 9
    if ! "$GRIDSTEP" coll "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"; then
        bad "$name: gridstep coll $* failed: $(cat "$tmp/$name.err")"
        return
    fi
    if ! awk -f "$parse" "$tmp/$name.out" >"$tmp/$name.csv" 2>"$tmp/$name.perr"; then
        bad "$name: the nccl-tests reader refused the output: $(cat "$tmp/$name.perr")"
        return
    fi
    if msg=$(awk -F, -v n="$n" -v fnum="$fnum" -v fden="$fden" -v per_rank="$per_rank" -v tb="$tbytes" \
        -v type="$type" -v redop="$redop" -v root="$root" -v minb="$MINB" -v maxb="$MAXB" -v step="$STEP" '
        function abs(x) { return x < 0 ? -x : x }
        BEGIN { want = minb; rows = 0; sum = 0 }
        $1 == "avg_busbw" { avg = $2; next }
        $1 == "out_of_bounds" { next }
        {
            rows++
            per = tb * (per_rank ? n : 1)
            if ($1 != int(want / per) * per) { print "row " rows ": size " $1 ", expected " int(want / per) * per; exit 1 }
            if ($2 != $1 / per) { print "row " rows ": count " $2 ", expected " $1 / per; exit 1 }
            if ($3 != type || $4 != redop || $5 != root) { print "row " rows ": " $3 " " $4 " " $5; exit 1 }
            if ($6 != $10 || $7 != $11 || $8 != $12) { print "row " rows ": in-place differs"; exit 1 }
            if ($9 != "N/A" || $13 != "N/A") { print "row " rows ": #wrong " $9; exit 1 }
            if (abs($8 - $7 * fnum / fden) > 0.011 * fnum / fden + 0.011) { print "row " rows ": busbw " $8 " vs algbw " $7; exit 1 }
            sum += $8 + $12
            want *= step
        }
        END {
            if (rows == 0) { print "no rows"; exit 1 }
            if (want <= maxb) { print "the rows stop before -e: next size " want; exit 1 }
            if (abs(avg - sum / (2 * rows)) > 0.006) { print "avg " avg " vs mean " sum / (2 * rows); exit 1 }
        }' "$tmp/$name.csv"); then
        ok "$name: $(grep -c '^[0-9]' "$tmp/$name.csv") rows read by the nccl-tests reader"
    else
        bad "$name: $msg"
    fi
}

MINB=8 MAXB=134217728 STEP=2
check all_reduce 8 14 8 0 4 float sum -1 --op all_reduce --ranks 8 --cluster dgx-h100
MINB=1024 MAXB=1073741824 STEP=4
check all_reduce_g8_bf16_max 8 14 8 0 2 bfloat16 max -1 --op all_reduce_perf -g 8 --cluster dgx-a100-80g \
    -b 1K -e 1G -f 4 -d bfloat16 -o max -n 50 -w 5 -c 1
MINB=65536 MAXB=268435456 STEP=2
check all_gather_16 16 15 16 1 4 float none -1 --op all_gather --ranks 16 --cluster dgx-h100 -b 64K -e 256M
MINB=8 MAXB=8388608 STEP=8
check broadcast_exact 8 1 1 0 8 double none 0 --op broadcast --ranks 8 --cluster dgx-a100-80g -b 8 -e 8M -f 8 \
    -d double --exact
# --op with a reduction name is nccl-tests' long -o
MINB=1048576 MAXB=1048576 STEP=2
check op_is_redop 8 7 8 1 4 float min -1 --op reduce_scatter --op min --ranks 8 --cluster dgx-h100 -b 1M -e 1M
if [ "$(sed -n 's/^1048576,\([0-9]*\),.*/\1/p' "$tmp/op_is_redop.csv")" = 32768 ]; then
    ok "reduce_scatter count is per rank: 1 MiB / (4 B x 8 ranks) = 32768"
else
    bad "reduce_scatter count: $(head -n 1 "$tmp/op_is_redop.csv")"
fi
# -g: ranks are processes of -g GPUs
if "$GRIDSTEP" coll --op all_reduce --ranks 12 -g 8 --cluster dgx-h100 >/dev/null 2>"$tmp/g.err"; then
    bad "--ranks 12 -g 8 accepted"
elif grep -q 'expected a multiple of -g' "$tmp/g.err"; then
    ok "--ranks 12 -g 8 refused: $(cat "$tmp/g.err")"
else
    bad "--ranks 12 -g 8: $(cat "$tmp/g.err")"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
