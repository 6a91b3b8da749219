#!/bin/sh
# The exec and compare commands end to end on the host driver:
#  - dp2-pp2-tp2.yaml (FULL_SHARD, 1F1B, SP, full recompute) prints the losses of single.yaml
#    over 3 steps within 1e-5 relative (the correctness contract through the CLI; parameters are
#    compared by tests/check_exec) and the loss falls;
#  - --json carries DESIGN.md's keys; --trace writes a Chrome trace;
#  - an injected failure stops every rank with exit 1 and names the event, long before --timeout;
#  - a scenario larger than MemAvailable is refused with exit 2 before allocating;
#  - tied embeddings (one stage and under a pipeline), GPT blocks (and their checkpoints, resumed
#    on another grid) run, also with sends that wait for their receivers (rendezvous; the
#    interleaved pipeline too, its receives issued early), and dropout; tp_comm_overlap runs
#    its chunks with the unsplit losses;
#    compare --json carries its keys.
# Environment (set by make check): GRIDSTEP = the binary, top_srcdir = the source tree,
# GS_HAVE_BLAS = configure's BLAS for the host GEMMs (no, openblas, blis).
GRIDSTEP=${GRIDSTEP:-./gridstep}
top_srcdir=${top_srcdir:-.}
dir="$top_srcdir/tests/exec"
tmp=${TMPDIR:-/tmp}/gs-exec.$$
mkdir "$tmp" || exit 1
trap 'rm -rf "$tmp"' 0 1 2 15
passed=0
failed=0
ok() { echo "PASS: $1"; passed=$((passed + 1)); }
bad() { echo "FAIL: $1"; failed=$((failed + 1)); }

# the losses of a --json run, one per line
losses() {
    tr -d ' \n' < "$1" | sed 's/.*"loss":\[\([^]]*\)\].*/\1/' | tr ',' '\n'
    echo
}
# the losses of two --json runs agree: to the last printed digit, or, in a --with-blas build
# (GS_HAVE_BLAS: the BLAS's bits depend on a GEMM's extent), within a relative 1e-5
same_losses() {
    if [ "${GS_HAVE_BLAS:-no}" = no ]; then
        [ "$(losses "$1")" = "$(losses "$2")" ]
        return
    fi
    losses "$1" > "$1.l"
    losses "$2" > "$2.l"
    paste -d ' ' "$1.l" "$2.l" | awk 'NF == 2 { d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * ($2 < 0 ? -$2 : $2) + 1e-12) bad = 1 }
        NF == 1 { bad = 1 } END { exit bad }'
}
# exec on SCENARIO exits 2 with PATTERN in its message, and SCENARIO holds KEY (the edit took):
# refused LABEL SCENARIO KEY PATTERN
refused() {
    "$GRIDSTEP" exec "$2" > /dev/null 2> "$2.err"
    rc=$?
    if grep -q "$3" "$2" && [ $rc -eq 2 ] && grep -q "$4" "$2.err"; then
        ok "$1 refused"
    else
        bad "$1: exit $rc: $(cat "$2.err")"
    fi
}
# 0 when files A and B (one loss a line) hold N losses each, pairwise within 1e-5 relative
close_losses() {
    paste "$1" "$2" |
        awk -v want="$3" 'NF == 2 { n++; d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > 1e-5) bad = 1 }
                          END { exit !(n == want && !bad) }'
}

if "$GRIDSTEP" exec --json --steps 3 --lr 0.001 "$dir/single.yaml" > "$tmp/ref.json" &&
   "$GRIDSTEP" exec --json --steps 3 --trace "$tmp/trace.json" "$dir/dp2-pp2-tp2.yaml" > "$tmp/got.json"; then
    losses "$tmp/ref.json" > "$tmp/ref.txt"
    losses "$tmp/got.json" > "$tmp/got.txt"
    if [ "$(wc -l < "$tmp/ref.txt")" -eq 3 ] &&
       paste "$tmp/ref.txt" "$tmp/got.txt" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d / $1 > 1e-5) exit 1 }'; then
        ok "dp2-pp2-tp2 losses = single-rank losses (1e-5)"
    else
        bad "dp2-pp2-tp2 losses differ: $(paste "$tmp/ref.txt" "$tmp/got.txt" | tr '\n' ' ')"
    fi
    if awk 'NR == 1 { a = $1 } NR == 3 { exit !($1 < a) }' "$tmp/ref.txt"; then
        ok "loss falls over 3 steps"
    else
        bad "loss does not fall: $(tr '\n' ' ' < "$tmp/ref.txt")"
    fi
    missing=
    for k in step_time_s tokens_per_s tokens_per_s_per_gpu mfu hfu tflops_per_gpu comm_share exposed_comm_s \
             bubble_share peak_bytes events loss step_s; do
        grep -q "\"$k\"" "$tmp/got.json" || missing="$missing $k"
    done
    [ -z "$missing" ] && ok "exec --json keys" || bad "exec --json lacks:$missing"
    grep -q '"traceEvents"' "$tmp/trace.json" && ok "exec --trace" || bad "exec --trace wrote no trace"
else
    bad "exec runs failed"
fi

start=$(date +%s)
"$GRIDSTEP" exec --timeout 30 --fail-event L2.mb0.fwd.tp_ag --fail-rank 6 "$dir/dp2-pp2-tp2.yaml" \
    > /dev/null 2> "$tmp/fail.err"
rc=$?
took=$(($(date +%s) - start))
if [ $rc -eq 1 ] && grep -q "rank 6: event L2.mb0.fwd.tp_ag: injected failure" "$tmp/fail.err" && [ $took -lt 15 ]; then
    ok "injected failure stops every rank, named, in ${took} s"
else
    bad "injected failure: exit $rc after ${took} s: $(cat "$tmp/fail.err")"
fi

"$GRIDSTEP" exec "$top_srcdir/scenarios/seed-70b-64xa100.yaml" > /dev/null 2> "$tmp/mem.err"
rc=$?
if [ $rc -eq 2 ] && grep -q "MemAvailable" "$tmp/mem.err" && grep -q "refused before allocating" "$tmp/mem.err"; then
    ok "too large for the host: refused"
else
    bad "too large for the host: exit $rc: $(cat "$tmp/mem.err")"
fi

# tied embeddings (since 2026-11-30, exact gradients in tests/check_exec): one stage runs them,
# its checkpoint holds the embedding and no lm_head
sed 's/tied_embeddings: false/tied_embeddings: true/' "$dir/single.yaml" > "$tmp/tied.yaml"
if grep -q "tied_embeddings: true" "$tmp/tied.yaml" &&
   "$GRIDSTEP" exec --json --steps 2 --save "$tmp/tied-ckpt" "$tmp/tied.yaml" > "$tmp/tied.json" 2> "$tmp/tied.err" &&
   [ "$(losses "$tmp/tied.json" | wc -l)" -eq 2 ] && ls "$tmp/tied-ckpt"/*.safetensors > /dev/null 2>&1 &&
   grep -q "model.embed_tokens.weight" "$tmp/tied-ckpt"/*.safetensors &&
   ! grep -q "lm_head.weight" "$tmp/tied-ckpt"/*.safetensors; then
    ok "tied embeddings: 2 steps, checkpoint without lm_head"
else
    bad "tied embeddings: $(cat "$tmp/tied.err") $(ls "$tmp/tied-ckpt" 2>&1)"
fi
# resumed on a DP2 x TP2 grid: steps 3-4 are the uninterrupted run's (1e-5 relative)
sed -e 's/tied_embeddings: false/tied_embeddings: true/' -e 's/pp: 2/pp: 1/' -e 's/gpus_per_node: 8/gpus_per_node: 4/' \
    "$dir/dp2-pp2-tp2.yaml" > "$tmp/tied-dp2-tp2.yaml"
if "$GRIDSTEP" exec --json --steps 4 "$tmp/tied.yaml" > "$tmp/tied4.json" &&
   "$GRIDSTEP" exec --json --steps 2 --load "$tmp/tied-ckpt" "$tmp/tied-dp2-tp2.yaml" > "$tmp/tied-resume.json" &&
   losses "$tmp/tied4.json" | sed -n '3,4p' > "$tmp/tied4.l" && losses "$tmp/tied-resume.json" | sed -n '1,2p' > "$tmp/tiedr.l" &&
   close_losses "$tmp/tied4.l" "$tmp/tiedr.l" 2; then
    ok "tied embeddings: resumed on dp2 x tp2, steps 3-4 as uninterrupted"
else
    bad "tied embeddings resumed: $(losses "$tmp/tied4.json" | tr '\n' ' ') vs $(losses "$tmp/tied-resume.json" | tr '\n' ' ')"
fi
# under a pipeline (since 2026-11-30): the last stage's copy of the embedding, the two stages'
# gradients exchanged before the optimizer: DP2 x PP2 x TP2 prints the single rank's losses; its
# checkpoint (the copy is not written) resumes on one rank, and the one-rank checkpoint resumes
# on the pipeline, both giving the uninterrupted run's steps 3-4
sed 's/tied_embeddings: false/tied_embeddings: true/' "$dir/dp2-pp2-tp2.yaml" > "$tmp/tied-pp.yaml"
if grep -q "tied_embeddings: true" "$tmp/tied-pp.yaml" &&
   "$GRIDSTEP" exec --json --steps 2 --save "$tmp/tied-pp-ckpt" "$tmp/tied-pp.yaml" > "$tmp/tied-pp.json" 2> "$tmp/tied-pp.err" &&
   losses "$tmp/tied4.json" | sed -n '1,2p' > "$tmp/tied4a.l" && losses "$tmp/tied-pp.json" > "$tmp/tiedpp.l" &&
   close_losses "$tmp/tied4a.l" "$tmp/tiedpp.l" 2 && ! grep -q "lm_head.weight" "$tmp/tied-pp-ckpt"/*.safetensors; then
    ok "tied embeddings under a pipeline: dp2 x pp2 x tp2 losses = single rank's, no lm_head saved"
else
    bad "tied embeddings under a pipeline: $(cat "$tmp/tied-pp.err") $(tr '\n' ' ' < "$tmp/tiedpp.l") vs $(tr '\n' ' ' < "$tmp/tied4a.l")"
fi
for pair in "tied-pp-ckpt tied.yaml" "tied-ckpt tied-pp.yaml"; do
    set -- $pair
    if "$GRIDSTEP" exec --json --steps 2 --load "$tmp/$1" "$tmp/$2" > "$tmp/tr.json" 2> "$tmp/tr.err" &&
       losses "$tmp/tr.json" | sed -n '1,2p' > "$tmp/tr.l" && close_losses "$tmp/tied4.l" "$tmp/tr.l" 2; then
        ok "tied embeddings: $1 resumed on $2, steps 3-4 as uninterrupted"
    else
        bad "tied embeddings: $1 resumed on $2: $(cat "$tmp/tr.err") $(tr '\n' ' ' < "$tmp/tr.l")"
    fi
done
# sends that wait for their receivers, as NCCL's (GRIDSTEP_HOST_P2P=rendezvous): the pipeline
# and the tied exchange run, each send going out with the receive after it; without that
# grouping the 1F1B steady state deadlocks and the timeout names the cycle
if GRIDSTEP_HOST_P2P=rendezvous "$GRIDSTEP" exec --json --steps 2 "$tmp/tied-pp.yaml" > "$tmp/rv.json" 2> "$tmp/rv.err" &&
   losses "$tmp/rv.json" > "$tmp/rv.l" && close_losses "$tmp/tiedpp.l" "$tmp/rv.l" 2; then
    ok "rendezvous sends: tied dp2 x pp2 x tp2 runs with the eager losses"
else
    bad "rendezvous sends: $(cat "$tmp/rv.err")"
fi
# GPipe's stage 0 sends 72 micro-batches in a row before its first receive: only the send next to
# a receive goes out with it (a longer run would hold the first sends back), so this runs
sed -e 's/grid: {dp: 2, pp: 2, tp: 2}/grid: {dp: 1, pp: 2, tp: 1}/' -e 's/gpus_per_node: 8/gpus_per_node: 2/' \
    -e 's/pipeline: 1f1b/pipeline: gpipe/' -e 's/global: 8, micro: 1/global: 72, micro: 1/' \
    "$tmp/tied-pp.yaml" > "$tmp/g72.yaml"
if grep -q "global: 72" "$tmp/g72.yaml" && grep -q "pipeline: gpipe" "$tmp/g72.yaml" &&
   "$GRIDSTEP" exec --json --steps 2 "$tmp/g72.yaml" > "$tmp/g72e.json" 2> "$tmp/g72.err" &&
   GRIDSTEP_HOST_P2P=rendezvous "$GRIDSTEP" exec --json --steps 2 "$tmp/g72.yaml" > "$tmp/g72r.json" 2>> "$tmp/g72.err" &&
   losses "$tmp/g72e.json" > "$tmp/g72e.l" && losses "$tmp/g72r.json" > "$tmp/g72r.l" &&
   close_losses "$tmp/g72e.l" "$tmp/g72r.l" 2; then
    ok "tied PP2 GPipe with 72 micro-batches: rendezvous sends give the eager losses"
else
    bad "tied PP2 GPipe with 72 micro-batches: $(cat "$tmp/g72.err")"
fi
# the interleaved pipeline sends around the ring before receiving: under rendezvous sends exec
# issues receives ahead of their place (exec/p2p_groups.h) and says how many; eager sends need none
sed -e 's/pipeline: 1f1b/pipeline: interleaved, virtual_stages: 2/' "$dir/dp2-pp2-tp2.yaml" > "$tmp/il.yaml"
if grep -q "virtual_stages: 2" "$tmp/il.yaml" &&
   "$GRIDSTEP" exec --json --steps 2 "$tmp/il.yaml" > "$tmp/ile.json" 2> "$tmp/il.err" &&
   GRIDSTEP_HOST_P2P=rendezvous "$GRIDSTEP" exec --json --steps 2 "$tmp/il.yaml" > "$tmp/ilr.json" 2>> "$tmp/il.err" &&
   GRIDSTEP_HOST_P2P=rendezvous "$GRIDSTEP" exec --steps 1 "$tmp/il.yaml" > "$tmp/ilr.out" 2>> "$tmp/il.err" &&
   losses "$tmp/ile.json" > "$tmp/ile.l" && losses "$tmp/ilr.json" > "$tmp/ilr.l" &&
   close_losses "$tmp/ile.l" "$tmp/ilr.l" 2 && grep -q '"p2p_hoisted": 0,\{0,1\}$' "$tmp/ile.json" &&
   grep -q '"p2p_hoisted": [1-9]' "$tmp/ilr.json" &&
   grep -q "p2p groups .* receives per step issued ahead of their place" "$tmp/ilr.out"; then
    ok "rendezvous sends: interleaved dp2 x pp2 x tp2 runs with the eager losses, receives issued early"
else
    bad "rendezvous sends, interleaved: $(cat "$tmp/il.err") $(grep -o '"p2p_hoisted": [0-9]*' "$tmp/ile.json" "$tmp/ilr.json")"
fi
GRIDSTEP_P2P_GROUPS=0 GRIDSTEP_HOST_P2P=rendezvous "$GRIDSTEP" exec --steps 1 --timeout 2 "$dir/dp2-pp2-tp2.yaml" \
    > /dev/null 2> "$tmp/rv0.err"
rc=$?
if [ $rc -eq 1 ] && grep -q "(rendezvous): timed out after 2 s" "$tmp/rv0.err" && grep -q "(a cycle)" "$tmp/rv0.err"; then
    ok "rendezvous sends without grouping: the deadlock is reported as a cycle"
else
    bad "rendezvous sends without grouping: exit $rc: $(cat "$tmp/rv0.err")"
fi
# exec under VAR=VALUE exits 2 with PATTERN in its message: env_refused VAR=VALUE PATTERN
env_refused() {
    env "$1" "$GRIDSTEP" exec --steps 1 "$dir/single.yaml" > /dev/null 2> "$tmp/env.err"
    rc=$?
    if [ $rc -eq 2 ] && grep -q "$2" "$tmp/env.err"; then
        ok "$1 refused"
    else
        bad "$1: exit $rc: $(cat "$tmp/env.err")"
    fi
}
env_refused GRIDSTEP_P2P_GROUPS=maybe "GRIDSTEP_P2P_GROUPS is 'maybe', expected 0 or 1"
env_refused GRIDSTEP_HOST_P2P=bogus "GRIDSTEP_HOST_P2P is 'bogus', expected eager or rendezvous"
env_refused GRIDSTEP_HOST_GEMM=fp8 "GRIDSTEP_HOST_GEMM is 'fp8', expected fp32 or bf16"
# the first line and --json name the GEMMs' math
if GRIDSTEP_HOST_GEMM=bf16 "$GRIDSTEP" exec --steps 1 "$dir/single.yaml" | head -1 | grep -q "(GEMMs: bf16 inputs, fp32 accumulate)" &&
   "$GRIDSTEP" exec --json --steps 1 "$dir/single.yaml" | grep -q '"gemm": "fp32"'; then
    ok "the GEMMs' math is named (bf16 inputs under GRIDSTEP_HOST_GEMM=bf16, fp32 by default)"
else
    bad "the GEMMs' math is not named"
fi

# GPT blocks (LayerNorm, GELU, biases, learned positions; since 2026-11-30, gradients checked
# in tests/check_exec and check_kernels): DP2 x PP2 x TP2 with SP prints the single rank's losses
# (1e-5), and not the Llama's; with dropout too (the masks drawn from global indices), losses
# that are not the dropout-free run's
for f in single dp2-pp2-tp2; do
    sed 's/norm: rmsnorm, mlp: swiglu, pos: rope}/norm: layernorm, mlp: gelu, pos: learned, bias: true, dropout: false}/' \
        "$dir/$f.yaml" > "$tmp/gpt-$f.yaml"
done
if grep -q "mlp: gelu" "$tmp/gpt-single.yaml" && grep -q "mlp: gelu" "$tmp/gpt-dp2-pp2-tp2.yaml" &&
   "$GRIDSTEP" exec --json --steps 3 "$tmp/gpt-single.yaml" > "$tmp/gpt1.json" &&
   "$GRIDSTEP" exec --json --steps 3 "$tmp/gpt-dp2-pp2-tp2.yaml" > "$tmp/gpt8.json" &&
   losses "$tmp/gpt1.json" > "$tmp/gpt1.l" && losses "$tmp/gpt8.json" > "$tmp/gpt8.l" &&
   close_losses "$tmp/gpt1.l" "$tmp/gpt8.l" 3 &&
   ! cmp -s "$tmp/gpt1.l" "$tmp/ref.txt"; then
    ok "GPT blocks: dp2-pp2-tp2 losses = single-rank losses (1e-5): $(tr '\n' ' ' < "$tmp/gpt8.l")"
else
    bad "GPT blocks: $(tr '\n' ' ' < "$tmp/gpt1.l" 2>/dev/null) vs $(tr '\n' ' ' < "$tmp/gpt8.l" 2>/dev/null)"
fi
for f in single dp2-pp2-tp2; do
    sed 's/dropout: false}/dropout: true}/' "$tmp/gpt-$f.yaml" > "$tmp/gptd-$f.yaml"
done
if grep -q "dropout: true" "$tmp/gptd-single.yaml" && grep -q "dropout: true" "$tmp/gptd-dp2-pp2-tp2.yaml" &&
   "$GRIDSTEP" exec --json --steps 3 "$tmp/gptd-single.yaml" > "$tmp/gptd1.json" &&
   "$GRIDSTEP" exec --json --steps 3 "$tmp/gptd-dp2-pp2-tp2.yaml" > "$tmp/gptd8.json" &&
   losses "$tmp/gptd1.json" > "$tmp/gptd1.l" && losses "$tmp/gptd8.json" > "$tmp/gptd8.l" &&
   close_losses "$tmp/gptd1.l" "$tmp/gptd8.l" 3 && ! close_losses "$tmp/gpt1.l" "$tmp/gptd1.l" 3; then
    ok "dropout: dp2-pp2-tp2 losses = single-rank losses (1e-5), not the dropout-free ones: $(tr '\n' ' ' < "$tmp/gptd8.l")"
else
    bad "dropout: $(tr '\n' ' ' < "$tmp/gptd1.l" 2>/dev/null) vs $(tr '\n' ' ' < "$tmp/gptd8.l" 2>/dev/null)"
fi
# a rate with dropout: false, and a rate of 1, are input errors naming the key
sed 's/dropout: false}/dropout: false, hidden_dropout: 0.2}/' "$tmp/gpt-single.yaml" > "$tmp/gptd-bad.yaml"
refused "a dropout rate without dropout" "$tmp/gptd-bad.yaml" "hidden_dropout: 0.2" "model.hidden_dropout: found a dropout rate with dropout: false"
sed 's/dropout: false}/dropout: true, attention_dropout: 1}/' "$tmp/gpt-single.yaml" > "$tmp/gptd-bad1.yaml"
refused "a dropout rate of 1" "$tmp/gptd-bad1.yaml" "attention_dropout: 1" "expected a probability 0 <= p < 1"

# overlap_grad_reduce false (DDP's all-reduces after the backward) gives the same losses, bit for
# bit: the same sums, reduced later
sed 's/sharding: full_shard/sharding: no_shard/' "$dir/dp2-pp2-tp2.yaml" > "$tmp/ddp.yaml"
sed 's/sequence_parallel: true}/sequence_parallel: true, overlap_grad_reduce: false}/' "$tmp/ddp.yaml" > "$tmp/ddp-after.yaml"
if "$GRIDSTEP" exec --json --steps 3 "$tmp/ddp.yaml" > "$tmp/ddp.json" &&
   "$GRIDSTEP" exec --json --steps 3 "$tmp/ddp-after.yaml" > "$tmp/ddp-after.json" &&
   [ -n "$(losses "$tmp/ddp.json")" ] && [ "$(losses "$tmp/ddp.json")" = "$(losses "$tmp/ddp-after.json")" ]; then
    ok "overlap_grad_reduce false: the same losses"
else
    bad "overlap_grad_reduce false: losses $(losses "$tmp/ddp.json" | tr '\n' ' ') vs $(losses "$tmp/ddp-after.json" | tr '\n' ' ')"
fi

# tp_comm_overlap splits the GEMMs around the TP collectives (Transformer Engine's chunked
# overlaps); exec runs the chunks and gets the unsplit run's losses to the last printed digit
# (within 1e-5 with a BLAS, whose bits depend on a GEMM's extent),
# on TP2 and on TP4 (whose ring has steps to wait for), and the trace holds the split parts
sed 's/sequence_parallel: true}/sequence_parallel: true, tp_comm_overlap: true}/' "$dir/dp2-pp2-tp2.yaml" > "$tmp/tpo.yaml"
sed 's/grid: {dp: 2, pp: 2, tp: 2}/grid: {dp: 1, pp: 2, tp: 4}/' "$dir/dp2-pp2-tp2.yaml" > "$tmp/tp4.yaml"
sed 's/sequence_parallel: true}/sequence_parallel: true, tp_comm_overlap: true}/' "$tmp/tp4.yaml" > "$tmp/tpo4.yaml"
if grep -q "tp_comm_overlap: true" "$tmp/tpo4.yaml" &&
   "$GRIDSTEP" exec --json --steps 3 "$dir/dp2-pp2-tp2.yaml" > "$tmp/tpn.json" &&
   "$GRIDSTEP" exec --json --steps 3 "$tmp/tpo.yaml" > "$tmp/tpo.json" &&
   "$GRIDSTEP" exec --json --steps 3 "$tmp/tp4.yaml" > "$tmp/tpn4.json" &&
   "$GRIDSTEP" exec --json --steps 3 --trace "$tmp/tpo4.trace" "$tmp/tpo4.yaml" > "$tmp/tpo4.json" &&
   [ -n "$(losses "$tmp/tpn.json")" ] && same_losses "$tmp/tpn.json" "$tmp/tpo.json" &&
   same_losses "$tmp/tpn4.json" "$tmp/tpo4.json" &&
   grep -q '"L0.mb0.fwd.qkv#2"' "$tmp/tpo4.trace" && grep -q '"L0.mb0.fwd.tp_rs#2"' "$tmp/tpo4.trace"; then
    ok "tp_comm_overlap: the unsplit losses on TP2 and TP4: $(losses "$tmp/tpo4.json" | tr '\n' ' ')"
else
    bad "tp_comm_overlap: $(losses "$tmp/tpo.json" | tr '\n' ' ') vs $(losses "$tmp/tpn.json" | tr '\n' ' '); TP4 $(losses "$tmp/tpo4.json" | tr '\n' ' ') vs $(losses "$tmp/tpn4.json" | tr '\n' ' ')"
fi

if "$GRIDSTEP" compare --json "$dir/dp2-pp2-tp2.yaml" > "$tmp/cmp.json"; then
    missing=
    for k in sim_step_time_s exec_step_time_s step_error classes name sim_s exec_s error sim_dispatch_gap_s exec_dispatch_gap_s; do
        grep -q "\"$k\"" "$tmp/cmp.json" || missing="$missing $k"
    done
    [ -z "$missing" ] && ok "compare --json keys" || bad "compare --json lacks:$missing"
else
    bad "compare failed"
fi

# compare --mode flow simulates in flow mode: its sim step is `sim --exact --mode flow`'s (the
# same every-rank schedule), which on this scenario differs from analytic mode's in the 5th digit
if "$GRIDSTEP" compare --mode flow --json "$dir/dp2-pp2-tp2.yaml" > "$tmp/cmpf.json"; then
    got=$(sed -n 's/.*"sim_step_time_s": *\([0-9.e+-]*\).*/\1/p' "$tmp/cmpf.json")
    want=$("$GRIDSTEP" sim --exact --mode flow --json "$dir/dp2-pp2-tp2.yaml" |
           sed -n 's/^  "step_time_s": *\([0-9.e+-]*\).*/\1/p')
    if [ -n "$got" ] && [ "$got" = "$want" ] && grep -q '"sim_mode": "flow"' "$tmp/cmpf.json"; then
        ok "compare --mode flow: sim step $got = sim --exact --mode flow"
    else
        bad "compare --mode flow: sim step '$got', sim --exact --mode flow '$want'"
    fi
else
    bad "compare --mode flow failed"
fi
"$GRIDSTEP" compare --mode fluid "$dir/dp2-pp2-tp2.yaml" > /dev/null 2> "$tmp/mode.err"
rc=$?
[ $rc -eq 2 ] && grep -q "mode: found 'fluid'" "$tmp/mode.err" && ok "compare --mode fluid refused" ||
    bad "compare --mode fluid: exit $rc: $(cat "$tmp/mode.err")"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
