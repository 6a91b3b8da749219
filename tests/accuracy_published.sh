#!/bin/sh
# The published-runs part of `make accuracy` (markdown on stdout): gridstep validate over
# scenarios/published, the summary by regime with the leave-one-source-out errors, the runs worse
# than 30%, and a log-log scatter of predicted against published (one colour per regime), drawn by
# gnuplot into $PLOT_DIR/accuracy-published.svg when gnuplot is there.
# Environment: GRIDSTEP (default ./gridstep), top_srcdir (default .), PLOT_DIR (default
# $top_srcdir/doc), HOLDOUT (default 1; 0 skips the leave-one-source-out fits, minutes of CPU).
GRIDSTEP=${GRIDSTEP:-./gridstep}
top_srcdir=${top_srcdir:-.}
PLOT_DIR=${PLOT_DIR:-$top_srcdir/doc}
HOLDOUT=${HOLDOUT:-1}
tmp=${TMPDIR:-/tmp}/gs-accuracy-published.$$
mkdir "$tmp" || exit 1
trap 'rm -rf "$tmp"' 0 1 2 15
dir="$top_srcdir/scenarios/published"
hold=
[ "$HOLDOUT" = 1 ] && hold="--holdout-by source"

# shellcheck disable=SC2086
"$GRIDSTEP" validate $hold --csv-file "$tmp/runs.csv" "$dir" >"$tmp/table.txt" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }

echo "\`gridstep validate $hold scenarios/published\`: $(grep -c '' "$tmp/runs.csv" | awk '{print $1 - 1}') runs"
echo "from $(cut -d, -f2 "$tmp/runs.csv" | sed 1d | sort -u | wc -l) sources. Error = (predicted - published) / published on"
echo "each source's own metric (tokens/s per GPU, TFLOP/s or MFU under the source's FLOP formula, or"
echo "step time); the signed means read every error as speed (+: the simulated step is faster than"
echo "the measured one; a step time's error negated); LOSO = with the fitted constants refitted"
echo "without the run's source."
echo
echo '```'
sed -n '/^[0-9]* runs simulated/p' "$tmp/table.txt"
sed -n '/^by regime/,$p' "$tmp/table.txt"
echo '```'
echo
echo "Runs more than 30% off (in-sample), with the regime each belongs to:"
echo
echo "| run | dataset | regime | metric | published | predicted | error | LOSO error | fits memory | what the model lacks |"
echo "|---|---|---|---|---|---|---|---|---|---|"
awk -F, 'NR > 1 && $7 != "" && ($7 > 0.30 || $7 < -0.30) {
    gsub(/"/, "", $1); gsub(/"/, "", $2); gsub(/"/, "", $3)
    printf "| %s | %s | %s | %s | %.4g | %.4g | %+.1f%% | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, 100 * $7,
           $8 == "" ? "-" : sprintf("%+.1f%%", 100 * $8), $9 == 1 ? "yes" : "no", why($1, $9) }
# The physics, or the fact of the run, the model lacks for each kind of row (by source and case).
function why(id, fits) {
    if (fits != 1)
        return "the ledger says it does not fit in GPU memory: the run used settings the source does not state (recompute, smaller buffers), so the predicted step is of a configuration that did not run"
    if (id ~ /^TITAN-(9|10)$/)
        return "not identified: at 131k and 262k tokens over CP 4 and 8 the step is over 90% attention (the simulated attention runs at FlashAttention-2'"'"'s measured rate on each chunk, 255-300 TFLOP/s at 500 W); the measured step implies about half that rate, while CP 2 at 65k tokens is within 6%; which SDPA backend and chunking PyTorch'"'"'s context_parallel (December 2024, allgather rotation) dispatched is not stated"
    if (id ~ /^KFORGE-175B-2/)
        return "not identified, bounded: micro-batch 1 (KFORGE-175B-1, within 16%, runs micro-batch 8) leaves every layer'"'"'s all-gather of 175B over InfiniBand exposed, so this row measures the network; with two NICs a 4-GPU node instead of the assumed four (see the NIC what-if below) it comes within 4%"
    if (id ~ /^KFORGE-(WS|MFU)/)
        return "not identified, bounded: with KempnerForge'"'"'s no-sync accumulation and fp32 reduction the ledger finds the reported memory (86 GB per GPU against 83.6 GB for 70B on 128 H200), and the model finds the 70B forward passes bound by the per-layer gathers over InfiniBand (TP 4 in a node puts one GPU per node in each FSDP group); the NIC count per node is not stated (one 400 Gb/s NIC per GPU assumed): with two NICs a 4-GPU node every 70B row comes within 4% while the single-node rows do not move (NIC what-if below)"
    if (id ~ /^IBMFSDP/)
        return "not identified: the model finds the step compute-bound (exposed communication about 1%) and eager FSDP1 on H100 a quarter faster than measured; candidates are the CPU launch gaps of eager PyTorch and the rate limiter'"'"'s waits, neither modelled. The same models on 128 A100 are within 17%"
    if (id ~ /^FSDPPAPER/)
        return "the paper gives more than 173-186 TFLOP/s without its FLOP formula; with activation checkpointing a count of hardware FLOPs is 4/3 of the model FLOPs compared here"
    if (id ~ /^NEMO2502-MIXTRAL/)
        return "not identified: B200, FP8 delayed scaling with FP8 parameters and padded expert capacity; with NeMo'"'"'s CUDA graphs the host thread is far from binding; every MoE row on H100 comes out fast, most those whose experts are padded to capacity 1 (Grok-1 4-17%, DeepSeek-V3 18-22%) against 3-9% for the dropless Mixtral rows, so the routers'"'"' imbalance, which padding removes, is not the cause"
    if (id ~ /^MBRIDGE-QWEN3-30B-FP8CS/)
        return "not identified, bounded: its recipe does not overlap the exchanges; the BF16 row of the recipe family (MBRIDGE-QWEN3-30B-BF16-16), whose recipe overlaps them with another micro-batch'"'"'s compute (overlap_moe_expert_parallel_comm, modelled), is 19% fast. With the flex exchanges 3.7 times as long as modelled (the exchange what-if below) both rows come within 6%, so both point at the HybridEP exchange on 2 H100 nodes running well below its links'"'"' rates (its SM count, the host'"'"'s wait for the receive counts: not modelled)"
    if (id ~ /^MPT-A100-40/)
        return "memory pressure: 70B on 64 GPUs of 40 GB leaves little headroom, and the caching allocator'"'"'s flushes and retries are not modelled"
    return "not explained yet"
}' "$tmp/runs.csv"
echo

# The rows of a what-if table: each run of the what-if's CSV with its error as simulated above
# ($tmp/runs.csv) and in the what-if.
whatif_rows() {
    awk -F, 'function cell(err, fits) { return sprintf("%+.1f%%%s", 100 * err, fits == 1 ? "" : " (no fit)") }
             NR == FNR { if (FNR > 1) { gsub(/"/, "", $1); base[$1] = cell($7, $9) } next }
             FNR > 1 { gsub(/"/, "", $1); printf "| %s | %s | %s |\n", $1, base[$1], cell($7, $9) }' \
        "$tmp/runs.csv" "$1"
}

# What-if: KempnerForge's runs with half the assumed network per GPU (two NICs a 4-GPU node).
# The sources do not state the NIC count; the scenarios keep one NIC per GPU. This table is the
# sensitivity behind the rows above, recomputed here, not a fit.
mkdir "$tmp/nic"
for f in "$dir"/*.yaml; do
    grep -q '^  preset: hgx-h200-4gpu$' "$f" || continue
    sed 's/^  preset: hgx-h200-4gpu$/  preset: hgx-h200-4gpu\n  nics_per_node: 2/' "$f" >"$tmp/nic/${f##*/}"
done
if ls "$tmp/nic"/*.yaml >/dev/null 2>&1 &&
    "$GRIDSTEP" validate --csv-file "$tmp/nic.csv" "$tmp/nic" >/dev/null 2>"$tmp/nic.err"; then
    echo "NIC what-if: the $(grep -c '' "$tmp/nic.csv" | awk '{print $1 - 1}') KempnerForge runs (HGX H200 4-GPU nodes) with \`nics_per_node: 2\`"
    echo "instead of one 400 Gb/s NIC per GPU (the sources state InfiniBand NDR, not the NIC count):"
    echo
    echo "| run | error, one NIC a GPU (as simulated above) | error, two NICs a node |"
    echo "|---|---|---|"
    whatif_rows "$tmp/nic.csv"
else
    echo "(NIC what-if not run: $(head -n 1 "$tmp/nic.err" 2>/dev/null))"
fi
echo

# What-if: the flex (HybridEP) exchanges of Megatron Bridge's Qwen3-30B rows on 2 DGX H100 nodes
# at about a third of the modelled rate: NVLink2 and EDR links (120 and 12.5 GB/s a GPU) for
# NVLink4 and NDR (370.8 and 48). The rows' other traffic is under 0.2 s a step. Sensitivity,
# recomputed here, not a fit.
mkdir "$tmp/flex"
for f in "$dir"/*.yaml; do
    grep -q '^  moe_dispatcher: flex$' "$f" && grep -q '^  preset: dgx-h100$' "$f" || continue
    sed 's/^  preset: dgx-h100$/  preset: dgx-h100\n  intra: nvlink2\n  nic: ib-edr/' "$f" >"$tmp/flex/${f##*/}"
done
if ls "$tmp/flex"/*.yaml >/dev/null 2>&1 &&
    "$GRIDSTEP" validate --csv-file "$tmp/flex.csv" "$tmp/flex" >/dev/null 2>"$tmp/flex.err"; then
    echo "Exchange what-if: the $(grep -c '' "$tmp/flex.csv" | awk '{print $1 - 1}') runs with the flex dispatcher on DGX H100 nodes, their links at NVLink2 and"
    echo "EDR rates (\`intra: nvlink2\`, \`nic: ib-edr\`), so their exchanges take about 3.7 times as long:"
    echo
    echo "| run | error, as simulated above | error, exchanges 3.7x longer |"
    echo "|---|---|---|"
    whatif_rows "$tmp/flex.csv"
else
    echo "(exchange what-if not run: $(head -n 1 "$tmp/flex.err" 2>/dev/null))"
fi
echo

if command -v gnuplot >/dev/null 2>&1; then
    mkdir -p "$PLOT_DIR"
    # one data file per regime, numbered (regime names hold blanks and slashes)
    cut -d, -f3 "$tmp/runs.csv" | sed 1d | sort -u | tr -d '"' >"$tmp/regimes"
    plot=""
    k=0
    while IFS= read -r name; do
        k=$((k + 1))
        awk -F, -v r="\"$name\"" 'NR > 1 && $3 == r && $6 != "" { print $5, $6 }' "$tmp/runs.csv" >"$tmp/r$k.dat"
        [ -s "$tmp/r$k.dat" ] && plot="$plot${plot:+, }'$tmp/r$k.dat' using 1:2 with points pt 7 ps 0.6 title '$name'"
    done <"$tmp/regimes"
    cat >"$tmp/plot.gp" <<EOF
set terminal svg size 900,700 font 'sans,12'
set output '$PLOT_DIR/accuracy-published.svg'
set logscale xy
set xlabel 'published (the source metric: tokens/s per GPU, TFLOP/s per GPU, MFU, or s)'
set ylabel 'predicted by gridstep sim (same metric)'
set title 'gridstep validate scenarios/published: predicted against published, by regime'
set key outside right top box
set grid
f(x) = x
plot $plot, f(x) with lines lc rgb '#888888' dt 2 title 'predicted = published', 1.3*x with lines lc rgb '#cccccc' dt 3 title '+-30%', x/1.3 with lines lc rgb '#cccccc' dt 3 notitle
EOF
    if gnuplot "$tmp/plot.gp" 2>"$tmp/gp.err"; then
        echo "![predicted against published, log-log, one colour per regime](accuracy-published.svg)"
    else
        echo "(gnuplot failed: $(head -n 1 "$tmp/gp.err"))"
    fi
else
    echo "(no gnuplot: the scatter plot was not drawn)"
fi
