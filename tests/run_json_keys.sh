#!/bin/sh
# Every key every command writes with --json is listed in doc/json.md, and every document starts
# with "schema_version": runs each command on the shipped scenarios (sim, mem, diagnose, mesh and
# schedule on every one of scenarios/*.yaml; the others on small cases: sweep and plan with their
# --shard pieces and merge, exec and compare on two host ranks, coll, validate, presets), collects
# the key paths of its documents (tests/json_keys: a.b, a[].b) and looks each one up in the table
# of the command's section of doc/json.md (`a.*` there stands for any key under a).
# Prints PASS:/FAIL: per command and "N passed, M failed".
set -u
: "${top_srcdir:?set top_srcdir}"
: "${GRIDSTEP:?set GRIDSTEP}"
JSON_KEYS=${JSON_KEYS:-tests/json_keys}
[ -x "$JSON_KEYS" ] || { echo "FAIL: $JSON_KEYS not built"; exit 1; }
JSON_KEYS=$(cd "$(dirname "$JSON_KEYS")" && pwd)/$(basename "$JSON_KEYS")
cd "$top_srcdir" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
doc=doc/json.md
passed=0
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

# documented SECTION: the key paths of the table under "## SECTION" in doc/json.md, one per line
documented() {
    awk -v want="$1" '
        /^## / { in_section = ($2 == want); next }
        in_section && /^\| `/ {
            cell = $0; sub(/^\| /, "", cell); sub(/ \|.*/, "", cell)
            n = split(cell, parts, "`")
            for (i = 2; i <= n; i += 2) print parts[i]
        }' "$doc"
}

# run NAME ARGS...: runs gridstep ARGS (stdout into NAME.N.json); a failure to run is a FAIL.
# sim may exit 1 after a whole document when the step does not fit.
n=0
run() {
    name=$1
    shift
    n=$((n + 1))
    "$GRIDSTEP" "$@" >"$tmp/$name.$n.json" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -ne 0 ] && ! { [ "$rc" -eq 1 ] && [ "$1" = sim ] && grep -q '"fits": false' "$tmp/$name.$n.json"; }; then
        fail "$name: gridstep $* exited $rc: $(head -n 2 "$tmp/err")"
        rm -f "$tmp/$name.$n.json"
    fi
}

# check NAME SECTION: every document of NAME starts with schema_version and its keys are listed
check() {
    name=$1
    section=$2
    bad=0
    for f in "$tmp/$name".*.json; do
        [ -f "$f" ] || { fail "$name: no document"; return; }
        if [ "$(sed -n 2p "$f")" != '  "schema_version": 1,' ]; then
            fail "$name: $(basename "$f") does not start with \"schema_version\": 1"
            bad=1
        fi
    done
    documented "$section" >"$tmp/doc.keys"
    if [ ! -s "$tmp/doc.keys" ]; then
        fail "$name: doc/json.md has no section '## $section'"
        return
    fi
    "$JSON_KEYS" "$tmp/$name".*.json >"$tmp/emitted" || { fail "$name: json_keys failed"; return; }
    missing=$(awk 'NR == FNR { if ($0 ~ /\.\*$/) pre[substr($0, 1, length($0) - 1)] = 1; else k[$0] = 1; next }
                   { if ($0 in k) next
                     for (p in pre) if (index($0, p) == 1) next
                     print }' "$tmp/doc.keys" "$tmp/emitted")
    if [ -n "$missing" ]; then
        fail "$name: keys written but not in doc/json.md '## $section':"
        echo "$missing" | sed 's/^/    /'
        bad=1
    fi
    if [ "$bad" = 0 ]; then
        echo "PASS: $name ($(wc -l <"$tmp/emitted") keys)"
        passed=$((passed + 1))
    fi
}

T=scenarios/tiny-llama-2x2x2.yaml
for f in scenarios/*.yaml; do
    run sim sim --json "$f"
    run sim sim --json --mode flow "$f"
    run mem mem --json "$f"
    run diagnose diagnose --json "$f"
    run mesh mesh --json "$f"
    run schedule schedule --json "$f"
done
run mem mem --json --explain "$T"
run mesh mesh --json --all scenarios/seed-70b-64xa100.yaml
run sim sim --json --from-megatron @tests/golden/megatron-gpt.sh --cluster dgx-a100-80g
check sim sim
check mem mem
check diagnose diagnose
check mesh mesh
check schedule schedule

run sweep sweep --json --vary micro=1,2,4 --vary sharding=full_shard,no_shard "$T"
run sweep sweep --json --vary gpus=1..16 --vary tp=1,2 scenarios/seed-7b-8xa100.yaml
# --shard pieces (with "shard") and their merge
for i in 0 1; do run sweeppiece sweep --json --shard $i/2 --vary seq=64,128 "$T"; done
"$GRIDSTEP" merge "$tmp"/sweeppiece.*.json >"$tmp/sweep.merged.json" || fail "sweep: merge of its pieces"
for f in "$tmp"/sweeppiece.*.json; do mv "$f" "$tmp/sweep.p$(basename "$f")"; done
check sweep sweep

run plan plan --json "$T"
run plan plan --json --top 3 scenarios/seed-7b-8xa100.yaml
for i in 0 1; do run planpiece plan --json --shard $i/2 "$T"; done
"$GRIDSTEP" merge "$tmp"/planpiece.*.json >"$tmp/plan.merged.json" || fail "plan: merge of its pieces"
for f in "$tmp"/planpiece.*.json; do mv "$f" "$tmp/plan.p$(basename "$f")"; done
check plan plan

run exec exec --json --steps 1 tests/calib/a-dp2.yaml
check exec exec
run compare compare --json --steps 1 tests/calib/a-dp2.yaml
check compare compare

run coll coll --json --op all_reduce --ranks 8 --cluster dgx-h100
run coll coll --json --op all_gather --ranks 16 --nodes 2 --cluster dgx-h100 --algo ring --exact -e 1M
check coll coll
run validate validate --json scenarios/published/nar21-t1-01-gpt-1.7b.yaml scenarios/published/mcore-h100-05-70b.yaml
check validate validate
run presets presets --json
check presets presets

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
