#!/bin/sh
# Every wait of `gridstep exec` ends: a stall injected (GRIDSTEP_FAULT=stall:RANK:EVENT, the event
# never completes until the run is aborted) into every kind of event (each compute op, each
# collective per dimension, send, recv) and into each rank's first and last event, on grids of 1,
# 2 and 8 ranks, must end the run with exit 1 within 2 x timeout + 1 s of detection (the worst
# case: a stream waiting on a dependency; waits on peers end after the timeout, the step watchdog
# after timeout + 0.5 s) plus start-up, with an error naming the stalled rank and its event.
# An outer `timeout` guards every run. Environment (set by make check): GRIDSTEP = the binary,
# top_srcdir = the source tree; STALL_TIMEOUT (default 0.5) is exec's --timeout.
GRIDSTEP=${GRIDSTEP:-./gridstep}
top_srcdir=${top_srcdir:-.}
T=${STALL_TIMEOUT:-0.5}
tmp=${TMPDIR:-/tmp}/gs-exec-stalls.$$
mkdir "$tmp" || exit 1
trap 'rm -rf "$tmp"' 0 1 2 15
passed=0
failed=0
# the bound: detection by 2T + 1 s at worst, and 3 s for start-up and exit on a loaded machine
limit=$(awk -v t="$T" 'BEGIN { print 2 * t + 1 + 3 }')

sed 's/grid: {dp: 1, pp: 1, tp: 1}/grid: {dp: 1, pp: 2, tp: 1}/; s/gpus_per_node: 1/gpus_per_node: 2/' \
    "$top_srcdir/tests/exec/single.yaml" > "$tmp/pp2.yaml"
grep -q "pp: 2" "$tmp/pp2.yaml" || { echo "FAIL: could not derive the 2-rank scenario"; exit 1; }

now() { date +%s.%N; }

# stall SCENARIO RANK EVENT WHY N: one run, judged into $tmp/res.N (PASS: or FAIL: line)
stall() {
    start=$(now)
    GRIDSTEP_FAULT=stall:$2:$3 timeout 60 "$GRIDSTEP" exec --timeout "$T" "$1" > /dev/null 2> "$tmp/err.$5"
    rc=$?
    took=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
    ev=$(printf '%s' "$3" | sed 's/[.#]/\\&/g')
    if [ $rc -eq 1 ] && awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t <= l) }' &&
       grep -q "rank $2[^0-9]" "$tmp/err.$5" && grep -Eq "event $ev([:, )]|\$)" "$tmp/err.$5"; then
        echo "PASS: $(basename "$1" .yaml) rank $2 $3 ($4): exit 1 in ${took} s" > "$tmp/res.$5"
    else
        echo "FAIL: $(basename "$1" .yaml) rank $2 $3 ($4): exit $rc after ${took} s (limit $limit s):" \
            "$(cat "$tmp/err.$5")" > "$tmp/res.$5"
    fi
}

# cases SCENARIO WORLD: the first and last event of every rank, and the first event of every kind
# (stream and operation) on a rank chosen round-robin among those that have it
cases() {
    scen=$1
    world=$2
    r=0
    : > "$tmp/all"
    while [ $r -lt "$world" ]; do
        "$GRIDSTEP" schedule --exact --format list --dump - --rank $r "$scen" |
            awk -v r=$r 'NR > 2 && NF >= 4 { print r, $2, $3 ":" $4 }' > "$tmp/r$r" || return 1
        [ -s "$tmp/r$r" ] || { echo "FAIL: no events listed for rank $r of $scen"; failed=$((failed + 1)); return 1; }
        cat "$tmp/r$r" >> "$tmp/all"
        echo "$r $(head -n 1 "$tmp/r$r" | cut -d' ' -f2) first" >> "$tmp/cases"
        echo "$r $(tail -n 1 "$tmp/r$r" | cut -d' ' -f2) last" >> "$tmp/cases"
        r=$((r + 1))
    done
    i=0
    for kind in $(cut -d' ' -f3 "$tmp/all" | sort -u); do
        want=$((i % world))
        i=$((i + 1))
        # the first rank at or after `want` (cyclically) that has the kind
        awk -v k="$kind" -v w="$want" -v n="$world" '$3 == k { d = ($1 - w + n) % n; if (!(d in seen)) { seen[d] = $1 " " $2 } }
            END { for (d = 0; d < n; d++) if (d in seen) { print seen[d], k; exit } }' "$tmp/all" >> "$tmp/cases"
    done
}

# two runs at a time (the bound leaves room for a loaded machine)
n=0
for spec in "$top_srcdir/tests/exec/single.yaml:1" "$tmp/pp2.yaml:2" "$top_srcdir/tests/exec/dp2-pp2-tp2.yaml:8"; do
    scen=${spec%:*}
    world=${spec##*:}
    : > "$tmp/cases"
    cases "$scen" "$world"
    while read -r rank event why; do
        n=$((n + 1))
        stall "$scen" "$rank" "$event" "$why" $n &
        [ $((n % 2)) -eq 0 ] && wait
    done < "$tmp/cases"
done
wait
i=1
while [ $i -le $n ]; do
    if [ -f "$tmp/res.$i" ]; then
        cat "$tmp/res.$i"
        if grep -q "^PASS" "$tmp/res.$i"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
    else
        echo "FAIL: case $i left no result"
        failed=$((failed + 1))
    fi
    i=$((i + 1))
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
