#!/usr/bin/env python3
"""Writes scenarios/published/*.yaml from a published-runs CSV (the reference data set of measured
training runs outside Megatron's 3D regime: llm-foundry, fms-fsdp and the PyTorch FSDP blogs,
OLMo-core, KempnerForge, FlashAttention-2, LLaMA-1, Megatron-LM's README).

    tools/published_scenarios.py published-runs-sharded.csv scenarios/published

Every scenario states its source, what the row gives and what was assumed where the row is silent.
The mapping is by source family (the row id's prefix); a row the script cannot map is listed on
stderr with the reason and written nowhere. The script is a maintainer's tool: the YAML files it
writes are the data the tests read; the CSV is not part of the repository.
"""
import csv
import os
import re
import sys

# ------------------------------------------------------------------------------ helpers ---


def num(text):
    """The first number in a CSV cell ('~380', '45-46K' -> midpoint 45500, '1310k'), or None."""
    if text is None:
        return None
    t = text.strip().replace(',', '')
    m = re.match(r'^[~>]?\s*([0-9.]+)\s*(?:-\s*([0-9.]+))?\s*([kKmM]?)', t)
    if not m:
        return None
    a = float(m.group(1))
    if m.group(2):
        a = (a + float(m.group(2))) / 2.0
    mult = {'k': 1e3, 'K': 1e3, 'm': 1e6, 'M': 1e6}.get(m.group(3), 1.0)
    return a * mult


def yaml_str(s):
    return '"' + s.replace('\\', '\\\\').replace('"', '\\"') + '"'


def wrap_comment(text, width=98):
    out, line = [], '#'
    for word in text.split():
        if len(line) + 1 + len(word) > width:
            out.append(line)
            line = '#  '
        line += ' ' + word
    out.append(line)
    return '\n'.join(out)


class Scenario:
    """One scenario being built: YAML sections plus the comment header."""

    def __init__(self, row):
        self.row = row
        self.assumed = []
        self.given = []
        self.model = {}
        self.cluster = {}
        self.grid = {}
        self.strategy = {}
        self.batch = {}
        self.expect = {}

    def assume(self, text):
        self.assumed.append(text)

    def give(self, text):
        self.given.append(text)

    def render(self, title):
        r = self.row
        lines = [f"# {r['id']} -- {title}", '#']
        lines.append(wrap_comment(f"Source: {r['source']}; {r['locator']}. Row {r['id']} of the published-runs "
                                  f"data set (regime: {r['regime']}; reliability: {r['reliability']})."))
        lines.append('#')
        lines.append('# Given by the row:')
        for g in self.given:
            lines.append(wrap_comment('  - ' + g))
        lines.append('# Assumed (the row is silent; documented defaults, not fitted to the published number):')
        for a in self.assumed:
            lines.append(wrap_comment('  - ' + a))
        lines.append(f"name: {r['id']}")
        lines.append('model:')
        for k, v in self.model.items():
            lines.append(f'  {k}: {v}')
        lines.append('cluster:')
        for k, v in self.cluster.items():
            lines.append(f'  {k}: {v}')
        lines.append('grid: {' + ', '.join(f'{k}: {v}' for k, v in self.grid.items()) + '}')
        lines.append('strategy:')
        for k, v in self.strategy.items():
            lines.append(f'  {k}: {v}')
        lines.append('batch: {' + ', '.join(f'{k}: {v}' for k, v in self.batch.items()) + '}')
        lines.append('expect:')
        for k, v in self.expect.items():
            lines.append(f'  {k}: {v}')
        return '\n'.join(lines) + '\n'


def set_batch(sc, n_gpus, dp, micro, global_seqs, why_global):
    sc.batch['global'] = int(global_seqs)
    sc.batch['micro'] = int(micro)
    if why_global:
        sc.assume(why_global)


def cluster_for(sc, gpu_preset, n_gpus, gpus_per_node, nic=None, nics=None, why=None):
    nodes = max(1, n_gpus // gpus_per_node)
    preset_gpn = 4 if '4gpu' in gpu_preset else 8
    if n_gpus < gpus_per_node:
        gpus_per_node = n_gpus
        nodes = 1
    sc.cluster['preset'] = gpu_preset
    sc.cluster['nodes'] = nodes
    if gpus_per_node != preset_gpn:
        sc.cluster['gpus_per_node'] = gpus_per_node
    if nic:
        sc.cluster['nic'] = nic
    if nics is not None:
        sc.cluster['nics_per_node'] = nics
    if why:
        sc.assume(why)


# ------------------------------------------------------------------------ source families ---

MPT_ATTN = {'mpt-1b': 'flash', 'mpt-3b': 'flash', 'mpt-7b': 'flash', 'mpt-70b': 'flash',
            'mpt-13b': 'triton', 'mpt-30b': 'triton'}


def mpt(r, new_keys):
    sc = Scenario(r)
    name = r['model'].lower()
    h = int(r['hidden'])
    sc.model = {'name': name, 'layers': r['layers'], 'hidden': h, 'heads': r['heads'], 'ffn': r['ffn'],
                'vocab': r['vocab'], 'seq': r['seq_len'], 'mlp': 'gelu', 'norm': 'layernorm', 'pos': 'learned',
                'bias': 'false', 'dropout': 'false', 'tied_embeddings': 'true'}
    sc.give(f"MPT {r['model']}: {r['layers']} layers, d_model {h}, {r['heads']} heads, expansion ratio 4 "
            f"(ffn {r['ffn']}), vocab {r['vocab']}, seq {r['seq_len']}; NumParams in the notes")
    sc.assume("MPT's architecture as llm-foundry's benchmark yamls build it: learned positions (no ALiBi), "
              "low-precision LayerNorm without bias, GELU MLP without biases, tied embeddings, no dropout "
              "(attn_pdrop, resid_pdrop, emb_pdrop 0)")
    n = int(r['n_gpus'])
    gpu = r['gpu']
    if gpu.startswith('H100'):
        preset, why = 'dgx-h100', ("H100 SXM 80GB in 8-GPU nodes (the row says h100_80gb, form factor not "
                                   "stated; MosaicML's H100 clusters are HGX H100 SXM)")
        nic, nics, nwhy = 'roce-200', 8, ("8 x 200 Gb/s RoCE per node: the README's 1600 Gbps node-node "
                                          "interconnect, stated for its A100 sections, assumed for H100 too")
    elif '40GB' in gpu:
        preset, why = 'dgx-a100-40g', 'A100 40GB SXM in 8-GPU nodes (SXM/PCIe not stated)'
        nic, nics, nwhy = 'roce-200', 8, "8 x 200 Gb/s RoCE per node: the section's 1600 Gbps (RoCE)"
    else:
        preset, why = 'dgx-a100-80g', 'A100 80GB SXM in 8-GPU nodes (SXM/PCIe not stated)'
        nic, nics, nwhy = 'roce-200', 8, "8 x 200 Gb/s RoCE per node: the section's 1600 Gbps (RoCE)"
    sc.assume(why)
    cluster_for(sc, preset, n, 8, nic, nics, nwhy if n > 8 else None)
    sc.grid = {'dp': n, 'pp': 1, 'tp': 1}
    shard = 'shard_grad_op' if 'SHARD_GRAD_OP' in r['sharding'] else 'full_shard'
    if new_keys:
        sc.strategy['framework'] = 'fsdp1'
        sc.strategy['compile'] = 'false'
    sc.strategy['sharding'] = shard
    sc.strategy['wrap'] = 'layer'
    sc.strategy['prefetch'] = 'backward_pre'
    sc.strategy['forward_prefetch'] = 'true'
    sc.strategy['limit_all_gathers'] = 'true'
    full = r['recompute'].startswith('full')
    sc.strategy['recompute'] = 'full' if full else 'none'
    sc.strategy['precision'] = 'bf16'
    sc.strategy['flash_attention'] = 'true'
    if new_keys:
        if MPT_ATTN.get(name) == 'triton':
            sc.strategy['attention'] = 'triton'
        else:
            sc.strategy['attention'] = 'flash1'
    sc.strategy['cross_entropy'] = 'unfused'
    sc.give(f"PyTorch FSDP1 through Composer, {r['sharding']}, activation checkpointing "
            f"{'on' if full else 'off'}, global batch {r['gbs']} sequences, micro-batch {r['mbs']}; "
            f"{r['precision']}; the benchmark sweep sets limit_all_gathers, forward_prefetch and "
            "BACKWARD_PRE; attention " + ('triton' if MPT_ATTN.get(name) == 'triton' else 'flash') +
            " per the sweep script")
    sc.assume("bf16 parameters in the all-gathers (the sweep script's PURE mixed precision; the table's "
              "DEFAULT would gather fp32 parameters, twice the bytes, which the multi-node rows' "
              "throughput rules out) with gradients reduced in bf16")
    sc.assume("eager PyTorch (no torch.compile: Composer of 2023 did not compile), unfused cross-entropy")
    if MPT_ATTN.get(name) != 'triton':
        sc.assume("FlashAttention (v1): llm-foundry's attn_impl flash of 2023 pinned flash-attn 1.0.x "
                  "(its FlashAttention-2 support came later)")
    set_batch(sc, n, n, r['mbs'], int(r['gbs']), None)
    tps = num(r['tokens_per_s_per_gpu'])
    sc.expect = {'metric': 'tokens_per_s_per_gpu', 'value': tps,
                 'formula': yaml_str('tokens/s per GPU as published (Throughput(T/s) / GPUs)'),
                 'source': yaml_str(f"{r['source']}: {r['model']}, {n} x {gpu.split(' (')[0]}, "
                                    f"{r['tokens_per_s_per_gpu']} tokens/s per GPU, MFU {r['mfu']}%"),
                 'dataset': 'llm-foundry'}
    return sc, f"{r['model']} on {n} {gpu.split(' (')[0]} (llm-foundry FSDP benchmark)"


def llama2_model(sc, r, name):
    sc.model = {'name': name, 'layers': r['layers'], 'hidden': r['hidden'], 'heads': r['heads'],
                'kv_heads': r['kv_heads'], 'ffn': r['ffn'], 'vocab': r['vocab'].split()[0],
                'seq': r['seq_len'] or 4096, 'mlp': 'swiglu', 'norm': 'rmsnorm', 'pos': 'rope',
                'bias': 'false', 'dropout': 'false', 'tied_embeddings': 'false'}


ALL_ROWS = []  # every row of the CSV (main fills it): fms() reads sibling rows of the same scripts


def recompute_share(r):
    """The share p of blocks fms-fsdp's selective checkpointing recomputes, from the row's own HFU
    over MFU: the recomputed forward adds p / 3 of the model FLOPs, which HFU (PyTorch's FLOP
    counter) counts and MFU does not, so p = 3 (HFU / MFU - 1). The data set's full-AC rows give
    0.97-1.12 and its no-AC rows 0. Where the row states one of the two, the rows of the same
    scripts (fms-fsdp: the same model size, GPU and compile setting) that state both; else None."""
    def share(row):
        m, h = num(row['mfu']), num(row['hfu'])
        return 3.0 * (h / m - 1.0) if m and h else None
    p = share(r)
    if p is not None:
        return p, None
    size = re.search(r'(\d+)B', r['model']).group(1)
    for o in ALL_ROWS:
        if (o['id'].startswith(('IBMFSDP', 'FMSFSDP')) and o['id'] != r['id'] and o['recompute'].startswith('selective')
                and re.search(r'(\d+)B', o['model']).group(1) == size and o['gpu'][:4] == r['gpu'][:4]
                and o['torch_compile'][:1] == r['torch_compile'][:1] and share(o) is not None):
            return share(o), o['id']
    return None, None


def fms(r, new_keys):
    """IBMFSDP1, FMSFSDP-C/E, IBMFSDP2: fms-fsdp's Llama-2 architectures on A100 / H100."""
    sc = Scenario(r)
    size = re.search(r'(\d+)B', r['model']).group(1)
    llama2_model(sc, r, f'llama2-{size}b-fms')
    if not r['seq_len']:
        sc.assume('seq 4096 (fms-fsdp default seq_length)')
    sc.give(f"Llama-2 {size}B architecture (fms-fsdp): {r['layers']} layers, hidden {r['hidden']}, "
            f"{r['heads']} heads ({r['kv_heads']} KV), ffn {r['ffn']}, vocab {r['vocab']}")
    n = int(r['n_gpus'])
    a100 = r['gpu'].startswith('A100')
    fab = r['inter_node_fabric']
    if a100:
        preset = 'dgx-a100-80g'
        nic, nics = 'roce-100', 4
        nwhy = ("400 Gb/s per node as 4 x 100 Gb/s RoCE with GPUDirect RDMA (the blog's '400 Gbps "
                "inter-node', NIC count not stated)")
    elif '3.2' in fab:
        preset, nic, nics = 'dgx-h100', 'roce-400', 8
        nwhy = "3.2 Tb/s per node as 8 x 400 Gb/s (NIC count not stated)"
    else:
        preset, nic, nics = 'dgx-h100', 'roce-200', 4
        nwhy = "800 Gb/s per node as 4 x 200 Gb/s RoCE (NIC count not stated)"
    sc.assume(('A100 80GB SXM' if a100 else 'H100 SXM 80GB') + ' in 8-GPU nodes')
    cluster_for(sc, preset, n, 8, nic, nics, nwhy)
    compiled = r['torch_compile'].startswith('y')
    if r['id'].startswith('IBMFSDP2') or 'HSDP' in r['sharding'] and size == '7' or \
            r['sharding'].startswith('not stated'):
        shard = 'hybrid_shard' if size == '7' else 'full_shard'
        if r['sharding'].startswith('not stated'):
            sc.assume('sharding per the fms-fsdp README: HSDP for 7B, FSDP for 13B and larger')
    else:
        shard = 'hybrid_shard' if 'HSDP' in r['sharding'] else 'full_shard'
    sc.grid = {'dp': n, 'pp': 1, 'tp': 1}
    if new_keys:
        sc.strategy['framework'] = 'fsdp1'
        sc.strategy['compile'] = 'true' if compiled else 'false'
    sc.strategy['sharding'] = shard
    sc.strategy['wrap'] = 'layer'
    sc.strategy['prefetch'] = 'backward_pre'
    sc.strategy['limit_all_gathers'] = 'true'
    rec = r['recompute']
    every = 1
    if rec.startswith('full'):
        recompute = 'full'
    elif rec.startswith('selective') and size in ('34', '70'):
        recompute = 'full'
        sc.assume("full activation checkpointing for 34B and 70B: the fms-fsdp README lists 'Full AC' "
                  "for them; its 'selective' checkpoints a fraction of the blocks, which is not stated")
    elif rec.startswith('selective'):
        recompute = 'selective'
        p, sibling = recompute_share(r)
        if p is not None and p > 0.1:
            every = max(1, round(1.0 / min(p, 1.0)))
            recompute = 'full'
            src = f"the row's HFU {r['hfu']}% over its MFU {r['mfu']}%" if sibling is None else \
                f"row {sibling}'s HFU over MFU (the same scripts, model, GPU and compile setting)"
            sc.assume(f"fms-fsdp's selective checkpointing ('checkpoint every n blocks') as full recompute "
                      f"of every {every}{'st' if every == 1 else 'nd' if every == 2 else 'rd' if every == 3 else 'th'} "
                      f"block (recompute_every {every}): the recomputed share p = 3 (HFU / MFU - 1) = {p:.2f} "
                      f"from {src}, rounded to 1 / {every}")
    else:
        recompute = 'none'
    sc.strategy['recompute'] = recompute
    if every > 1:
        sc.strategy['recompute_every'] = str(every)
    sc.strategy['precision'] = 'bf16'
    sc.strategy['flash_attention'] = 'true'
    if new_keys:
        sc.strategy['attention'] = 'sdpa'
    sc.give(f"PyTorch FSDP1 (fms-fsdp), {r['sharding']}, {n} GPUs, micro-batch {r['mbs']} per GPU, "
            f"recompute {rec or 'none'}, torch.compile {'on' if compiled else 'off'}, "
            f"SDPA FlashAttention-2, bf16 mixed precision")
    if recompute == 'selective':
        sc.assume("fms-fsdp's selective checkpointing ('checkpoint every n blocks') modelled as "
                  "gridstep's selective recompute (attention core recomputed); the blocks' share is not stated")
    mbs = int(num(r['mbs']))
    gbs = n * mbs
    set_batch(sc, n, n, mbs, gbs, 'global batch = GPUs x micro-batch (one micro-batch per step per GPU; '
              'no gradient accumulation stated)')
    sc.assume('fp32 AdamW (not fused) as the fms-fsdp scripts use; gradients reduced in bf16 (FSDP '
              'MixedPrecision with reduce_dtype bf16)')
    tps = num(r['tokens_per_s_per_gpu'])
    src = f"{r['source']}: Llama-2 {size}B, {n} x {'A100' if a100 else 'H100'}"
    if tps:
        sc.expect = {'metric': 'tokens_per_s_per_gpu', 'value': tps,
                     'formula': yaml_str('tokens/s per GPU as published'),
                     'source': yaml_str(f"{src}, {r['tokens_per_s_per_gpu']} tokens/s per GPU"),
                     'dataset': 'fms-fsdp'}
    else:
        sc.expect = {'metric': 'mfu_palm', 'value': num(r['mfu']) / 100.0, 'peak_tflops': 989,
                     'formula': yaml_str('MFU per nanoGPT/PaLM: (6 N + 12 L H Q T) FLOPs per token, '
                                         'N all parameters; over 989 TFLOP/s'),
                     'source': yaml_str(f"{src}, MFU {r['mfu']}%"),
                     'dataset': 'fms-fsdp'}
    return sc, f"Llama-2 {size}B on {n} {'A100' if a100 else 'H100'} (fms-fsdp, " \
               f"{'compiled' if compiled else 'eager'})"


def olmo(r, new_keys):
    sc = Scenario(r)
    name = re.sub(r'[^a-z0-9.]+', '-', r['model'].split('(')[0].strip().lower()).strip('-')
    sc.model = {'name': name, 'layers': r['layers'], 'hidden': r['hidden'], 'heads': r['heads'],
                'kv_heads': r['kv_heads'], 'ffn': r['ffn'], 'vocab': 100352, 'seq': r['seq_len'],
                'mlp': 'swiglu', 'norm': 'rmsnorm', 'pos': 'rope', 'bias': 'false', 'dropout': 'false',
                'tied_embeddings': 'false'}
    sc.give(f"{r['model']}: {r['layers']} layers, hidden {r['hidden']}, {r['heads']} heads "
            f"({r['kv_heads']} KV), ffn {r['ffn']}, vocab 100352 (dolma2, padded), seq {r['seq_len']}")
    n = 64
    sc.assume('64 H100 SXM GPUs in 8-GPU nodes with 8 x 400 Gb/s InfiniBand NDR (GPU count not stated '
              'by the README; per-GPU throughput of FSDP2 at this size changes little with it)')
    cluster_for(sc, 'dgx-h100', n, 8)
    sc.grid = {'dp': n, 'pp': 1, 'tp': 1}
    if new_keys:
        sc.strategy['framework'] = 'fsdp2'
        sc.strategy['compile'] = 'true'
    sc.strategy['sharding'] = 'full_shard'
    sc.strategy['wrap'] = 'layer'
    sc.strategy['recompute'] = 'none'
    sc.strategy['precision'] = 'bf16'
    sc.strategy['grad_dtype'] = 'fp32'
    sc.strategy['flash_attention'] = 'true'
    if new_keys:
        sc.strategy['attention'] = 'sdpa'
    sc.give('FSDP2 (fully_shard), torch.compile, bf16 parameters with fp32 gradient reduction, '
            f"no activation checkpointing, global batch {r['gbs']} sequences, micro-batch {r['mbs']}")
    mbs = int(num(r['mbs']))
    set_batch(sc, n, n, mbs, int(r['gbs']), None)
    tps = num(r['tokens_per_s_per_gpu'])
    sc.expect = {'metric': 'tokens_per_s_per_gpu', 'value': tps,
                 'formula': yaml_str('tokens/s per GPU as published (a range is taken at its midpoint)'),
                 'source': yaml_str(f"{r['source']}: {r['model']}, {r['tokens_per_s_per_gpu']} tokens/s per GPU"),
                 'dataset': 'olmo-core'}
    return sc, f"{r['model']} on H100 (OLMo-core FSDP2, compiled)"


def kforge(r, new_keys):
    sc = Scenario(r)
    size = r['model'].split()[0]
    name = 'kforge-' + re.search(r'(\d+)B', r['model']).group(1) + 'b'
    ffn = r['ffn'] or '14336'
    vocab = r['vocab'] or '128256'
    sc.model = {'name': name, 'layers': r['layers'], 'hidden': r['hidden'], 'heads': r['heads'],
                'kv_heads': r['kv_heads'], 'ffn': ffn, 'vocab': vocab, 'seq': r['seq_len'],
                'mlp': 'swiglu', 'norm': 'rmsnorm', 'pos': 'rope', 'bias': 'false', 'dropout': 'false',
                'tied_embeddings': 'false'}
    if not r['ffn']:
        sc.assume('ffn 14336 (Llama-3 8B; the row gives 8.03B parameters, which it matches)')
    if not r['vocab']:
        sc.assume('vocab 128256 (Llama-3 tokenizer, as the report\'s other rows)')
    sc.give(f"{r['model']}: {r['layers']} layers, hidden {r['hidden']}, {r['heads']} heads "
            f"({r['kv_heads']} KV), seq {r['seq_len']}; {r['params_B']}B parameters")
    n = int(r['n_gpus'])
    tp = int(r['tp'] or 1)
    dp = n // tp
    sc.assume('HGX H200 4-GPU nodes: four SXM GPUs fully connected by NVLink without NVSwitch (the '
              "report's 4 GPUs per node), one 400 Gb/s InfiniBand NDR NIC per GPU (NIC count not stated)")
    cluster_for(sc, 'hgx-h200-4gpu', n, 4)
    sc.grid = {'dp': dp, 'pp': 1, 'tp': tp}
    compiled = r['torch_compile'].startswith('y') or r['torch_compile'] == ''
    if new_keys:
        sc.strategy['framework'] = 'fsdp2'
        sc.strategy['compile'] = 'true' if compiled else 'false'
    if r['torch_compile'] == '' or r['torch_compile'].startswith('not'):
        sc.assume('torch.compile on (the report\'s default configuration)')
    sc.strategy['sharding'] = 'full_shard' if dp > 1 else 'no_shard'
    sc.strategy['wrap'] = 'layer'
    sc.strategy['recompute'] = 'full'
    sc.strategy['precision'] = 'bf16'
    if 'fp32 gradient' in r['precision']:
        sc.strategy['grad_dtype'] = 'fp32'
    sc.strategy['flash_attention'] = 'true'
    if new_keys:
        sc.strategy['attention'] = 'sdpa'
    if tp > 1:
        sc.strategy['sequence_parallel'] = 'true'
        sc.assume('TP with sequence parallelism (DTensor SequenceParallel on the norms, as torchtitan-style '
                  'trainers apply it)')
    sc.assume('PyTorch SDPA (FlashAttention-2 backend) for attention')
    m = re.search(r'grad_accum=(\d+)', r['notes'])
    ga = int(m.group(1)) if m else 1
    mbs = int(num(r['mbs']))
    gbs = dp * mbs * ga
    sc.give(f"FSDP2{' + TP' + str(tp) if tp > 1 else ''} on {n} H200, micro-batch {mbs}, gradient "
            f"accumulation {ga}, full activation checkpointing, bf16 mixed precision; "
            f"{r['tokens_per_s_per_gpu'] or r['tokens_per_s_total']} tokens/s in all")
    set_batch(sc, n, dp, mbs, gbs, None)
    tot = num(r['tokens_per_s_total'])
    if tot:
        sc.expect = {'metric': 'tokens_per_s_per_gpu', 'value': round(tot / n, 2),
                     'formula': yaml_str('tokens/s per GPU = the report\'s aggregate tokens/s / GPUs'),
                     'source': yaml_str(f"{r['source']}: {r['model']}, {n} H200, {r['tokens_per_s_total']} tokens/s"),
                     'dataset': 'kempnerforge'}
    else:
        sc.expect = {'metric': 'mfu_palm', 'value': num(r['mfu']) / 100.0, 'peak_tflops': 989,
                     'palm_params': 'non_embedding',
                     'formula': yaml_str('KempnerForge metrics/mfu.py: (6 P + 12 L D S) per token, P without '
                                         'the embedding; over 989 TFLOP/s'),
                     'source': yaml_str(f"{r['source']}: {r['model']}, {n} H200, MFU {r['mfu']}%"),
                     'dataset': 'kempnerforge'}
    return sc, f"{r['model']} on {n} H200 (KempnerForge FSDP2{' + TP' + str(tp) if tp > 1 else ''})"


GPT3_DIMS = {'125M': (12, 768, 12), '355M': (24, 1024, 16), '760M': (24, 1536, 16),
             '1.3B': (24, 2048, 16), '2.7B': (32, 2560, 32)}


def flash(r, new_keys):
    """FA2-* (FlashAttention-2 Table 1) and FATRAIN-* (flash-attention training README)."""
    sc = Scenario(r)
    size = r['model'].split('-')[1]
    layers, hidden, heads = GPT3_DIMS[size]
    if size == '2.7B':
        heads = 20
        sc.assume('2.7B with head dim 128 (20 heads), as the flash-attention repository trains it')
    seq = int(r['seq_len'])
    sc.model = {'name': 'gpt3-' + size.lower(), 'layers': layers, 'hidden': hidden, 'heads': heads,
                'ffn': 4 * hidden, 'vocab': 50257, 'seq': seq, 'mlp': 'gelu', 'norm': 'layernorm',
                'pos': 'learned', 'bias': 'true', 'dropout': 'false', 'tied_embeddings': 'true'}
    sc.assume(f'GPT-3 {size} dimensions from the GPT-3 paper ({layers} layers, hidden {hidden}), ffn 4h, '
              'GPT-2 vocab 50257, learned positions, LayerNorm, biases, tied embeddings, no dropout')
    cluster_for(sc, 'dgx-a100-80g', 8, 8)
    sc.assume('one DGX A100 80GB node')
    sc.grid = {'dp': 8, 'pp': 1, 'tp': 1}
    fa = r['flash_attention']
    if new_keys:
        sc.strategy['framework'] = 'megatron'
        sc.strategy['compile'] = 'false'
    sc.strategy['sharding'] = 'zero2' if r['id'].startswith('FATRAIN') else 'no_shard'
    sc.strategy['recompute'] = 'none'
    sc.strategy['precision'] = 'bf16'
    flash_on = not fa.startswith('none') and not fa.startswith('n ')
    sc.strategy['flash_attention'] = 'true' if flash_on else 'false'
    if new_keys:
        if fa.startswith('FlashAttention (v1)'):
            sc.strategy['attention'] = 'flash1'
        elif flash_on:
            sc.strategy['attention'] = 'flash2'
        else:
            sc.strategy['attention'] = 'unfused'
    sc.assume("the flash-attention repository's training code: fused kernels (fused dense + GELU, fused "
              "dropout-add-LayerNorm, fused cross-entropy) as in Megatron-LM, modelled as framework megatron")
    sc.strategy['cross_entropy'] = 'fused'
    if r['id'].startswith('FATRAIN'):
        sc.assume("ZeRO-2 style data parallelism (the repository's configs use Apex DistributedFusedAdam)")
    else:
        sc.assume('data parallel over 8 GPUs (DDP), no activation checkpointing')
    mb = 8 if seq == 2048 else 2
    gtok = 524288 if '0.5M' in r['gbs'] or not r['gbs'] else 1048576
    gbs = gtok // seq
    set_batch(sc, 8, 8, mb, gbs, f'micro-batch {mb} sequences per GPU, global batch {gtok} tokens '
              '(the flash-attention configs; the paper does not state them)')
    if r['id'].startswith('FA2'):
        sc.expect = {'metric': 'tflops_palm', 'value': num(r['tflops_per_gpu']),
                     'formula': yaml_str('6 s N + 12 L h s^2 FLOPs per sequence (Megatron-LM formula, the '
                                         'attention term not halved for causal), per second per GPU'),
                     'source': yaml_str(f"{r['source']}: GPT3-{size}, seq {seq}, {fa}: "
                                        f"{r['tflops_per_gpu']} TFLOP/s per GPU"),
                     'dataset': 'flashattention2'}
        sc.give(f'GPT3-{size}, seq {seq}, 8 x A100 80GB SXM, attention {fa}')
    else:
        tot = num(r['tokens_per_s_total'])
        sc.expect = {'metric': 'tokens_per_s_per_gpu', 'value': round(tot / 8),
                     'formula': yaml_str('tokens/s per GPU = the README\'s aggregate tokens/s / 8'),
                     'source': yaml_str(f"{r['source']}: GPT3-{size}, {r['tokens_per_s_total']} tokens/s on 8 A100"),
                     'dataset': 'flashattention2'}
        sc.give(f'GPT3-{size}, seq {seq}, 8 x A100 80GB SXM (400 W), bf16, FlashAttention, no checkpointing')
    return sc, f"GPT3-{size} seq {seq} on 8 A100 (FlashAttention-2 paper / training code)"


def megreadme(r, new_keys):
    sc = Scenario(r)
    sc.model = {'preset': 'gpt3-175b'}
    sc.give('GPT-3 175B (96 layers, hidden 12288, 96 heads), seq 2048, 1024 A100, TP 8 x PP 16 x DP 8, '
            'global batch 1536, micro-batch 1, fp16, full activation checkpointing; about 32 s per iteration')
    cluster_for(sc, 'dgx-a100-80g', 1024, 8)
    sc.assume('DGX A100 80GB nodes with 8 x HDR 200 Gb/s (Selene)')
    sc.grid = {'dp': 8, 'pp': 16, 'tp': 8}
    if new_keys:
        sc.strategy['framework'] = 'megatron'
    sc.strategy['sharding'] = 'no_shard'
    sc.strategy['recompute'] = 'full'
    sc.strategy['precision'] = 'fp16'
    sc.strategy['pipeline'] = '1f1b'
    sc.strategy['flash_attention'] = 'false'
    sc.strategy['overlap_grad_reduce'] = 'false'
    sc.strategy['grad_dtype'] = 'fp32'
    sc.assume("Megatron-LM of January 2021: non-interleaved 1F1B, local DDP reducing fp32 gradients after "
              "the backward, no sequence parallelism, no flash attention")
    set_batch(sc, 1024, 8, 1, 1536, None)
    sc.expect = {'metric': 'step_time_s', 'value': 32,
                 'formula': yaml_str('seconds per iteration as published ("around 32 seconds")'),
                 'source': yaml_str(f"{r['source']}: GPT-3 175B on 1024 A100, 138 TFLOP/s per GPU, ~32 s per iteration"),
                 'dataset': 'megatron-readme'}
    return sc, 'GPT-3 175B on 1024 A100 (Megatron-LM README, 2021)'


def llama1(r, new_keys):
    sc = Scenario(r)
    sc.model = {'name': 'llama1-65b', 'layers': 80, 'hidden': 8192, 'heads': 64, 'ffn': 22016,
                'vocab': 32000, 'seq': 2048, 'mlp': 'swiglu', 'norm': 'rmsnorm', 'pos': 'rope', 'bias': 'false',
                'dropout': 'false', 'tied_embeddings': 'false'}
    sc.give('LLaMA-65B (80 layers, hidden 8192, 64 heads), seq 2048, 2048 A100 80GB, about 380 tokens/s per '
            'GPU, 4M tokens per batch, xformers causal attention, activations saved selectively')
    sc.assume('ffn 22016 (LLaMA: 2/3 x 4h rounded to a multiple of 256)')
    cluster_for(sc, 'dgx-a100-80g', 2048, 8)
    sc.assume('DGX A100 80GB nodes with 8 x HDR 200 Gb/s')
    sc.grid = {'dp': 256, 'pp': 1, 'tp': 8}
    sc.assume("TP 8 with sequence parallelism inside a node and FSDP (FULL_SHARD) over 256 replicas: the "
              "paper says 'model and sequence parallelism' and names neither degree")
    if new_keys:
        sc.strategy['framework'] = 'megatron'
        sc.strategy['attention'] = 'xformers'
    sc.strategy['sharding'] = 'full_shard'
    sc.strategy['recompute'] = 'selective'
    sc.strategy['precision'] = 'bf16'
    sc.strategy['sequence_parallel'] = 'true'
    sc.strategy['flash_attention'] = 'true'
    set_batch(sc, 2048, 256, 8, 2048, 'global batch 2048 sequences of 2048 tokens (4M tokens), micro-batch 8 (no gradient accumulation)')
    sc.expect = {'metric': 'tokens_per_s_per_gpu', 'value': 380,
                 'formula': yaml_str('tokens/s per GPU as published ("around 380")'),
                 'source': yaml_str(f"{r['source']}: LLaMA-65B on 2048 A100 80GB, ~380 tokens/s per GPU"),
                 'dataset': 'llama1'}
    return sc, 'LLaMA-65B on 2048 A100 80GB (LLaMA-1 paper)'


def fsdp_api(r, new_keys):
    """FSDPAPI (2022 blog, CPU offload) and FSDPPAPER (FSDP paper, lower bounds)."""
    sc = Scenario(r)
    if r['id'].startswith('FSDPAPI'):
        if r['model'].startswith('GPT 175B'):
            dims = (96, 12288, 96)
        else:
            dims = (128, 25600, 160)
        seq = int(r['seq_len'])
        n = 128
        preset = 'dgx-a100-40g'
        nic, nics = 'roce-100', 4
        sc.assume('AWS p4d nodes: 8 x A100 40GB SXM, 400 Gb/s EFA as 4 x 100 Gb/s')
        offload = 'true'
        prec = 'fp16'
    else:
        dims = (96, 12288, 96)
        seq = 2048
        n = 256
        preset = 'dgx-a100-80g'
        nic, nics = 'roce-200', 8
        sc.assume('256 GPUs of the paper\'s 128-512 (the figure holds across them); 8 x A100 80GB nodes with '
                  '2 Tb/s RoCE as 8 x 200 Gb/s')
        offload = 'false'
        prec = 'bf16'
    layers, hidden, heads = dims
    sc.model = {'name': f'mingpt-{r["params_B"]}b', 'layers': layers, 'hidden': hidden, 'heads': heads,
                'ffn': 4 * hidden, 'vocab': 50000, 'seq': seq, 'mlp': 'gelu', 'norm': 'layernorm',
                'pos': 'learned', 'bias': 'true', 'dropout': 'false', 'tied_embeddings': 'false'}
    sc.assume(f'minGPT dimensions {layers} layers x {hidden} hidden, ffn 4h, vocab 50000, untied')
    cluster_for(sc, preset, n, 8, nic, nics)
    sc.grid = {'dp': n, 'pp': 1, 'tp': 1}
    if new_keys:
        sc.strategy['framework'] = 'fsdp1'
        sc.strategy['compile'] = 'false'
    sc.strategy['sharding'] = 'full_shard'
    sc.strategy['wrap'] = 'layer'
    sc.strategy['prefetch'] = 'backward_pre'
    sc.strategy['limit_all_gathers'] = 'true'
    sc.strategy['recompute'] = 'full'
    sc.strategy['offload'] = offload
    sc.strategy['precision'] = prec
    sc.strategy['flash_attention'] = 'false'
    if new_keys:
        sc.strategy['attention'] = 'unfused'
    mbs = int(num(r['mbs']))
    set_batch(sc, n, n, mbs, n * mbs, 'global batch = GPUs x micro-batch (one micro-batch per step)')
    sc.give(f"{r['model']}, seq {seq}, micro-batch {mbs}, {r['sharding']}, activation checkpointing, {prec}")
    val = num(r['tflops_per_gpu'])
    sc.expect = {'metric': 'tflops_palm', 'value': val,
                 'formula': yaml_str('model TFLOP/s per GPU, (6 N + 12 L h s) per token (the source states no '
                                     'formula; a lower bound where the source says "more than")'),
                 'source': yaml_str(f"{r['source']}: {r['model']}, {r['tflops_per_gpu']} TFLOP/s per GPU"),
                 'dataset': 'pytorch-fsdp-paper' if r['id'].startswith('FSDPPAPER') else 'pytorch-fsdp-blog'}
    return sc, f"{r['model']} on {n} A100 (PyTorch FSDP {'paper' if 'PAPER' in r['id'] else 'blog, CPU offload'})"


FAMILIES = [('MPT-', mpt), ('IBMFSDP', fms), ('FMSFSDP', fms), ('OLMOCORE', olmo), ('KFORGE', kforge),
            ('FA2-', flash), ('FATRAIN', flash), ('MEGREADME', megreadme), ('LLAMA1', llama1),
            ('FSDPAPI', fsdp_api), ('FSDPPAPER', fsdp_api)]


def file_name(rid):
    m = re.match(r'^(.*?)-?(\d+)$', rid)
    base, k = (m.group(1), int(m.group(2))) if m else (rid, 0)
    return f"{base.lower()}-{k:03d}.yaml"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    new_keys = '--old-keys' not in sys.argv
    if len(args) != 2:
        sys.stderr.write(__doc__)
        return 2
    src, out = args
    rows = list(csv.DictReader(open(src, newline='')))
    ALL_ROWS.extend(rows)
    written = 0
    for r in rows:
        fn = None
        for prefix, f in FAMILIES:
            if r['id'].startswith(prefix):
                fn = f
                break
        if fn is None:
            sys.stderr.write(f"{r['id']}: no mapping for this source family\n")
            continue
        try:
            sc, title = fn(r, new_keys)
        except (ValueError, KeyError, AttributeError, TypeError) as e:
            sys.stderr.write(f"{r['id']}: not mapped: {e}\n")
            continue
        if sc.expect.get('value') in (None, 0):
            sys.stderr.write(f"{r['id']}: no published value to compare\n")
            continue
        with open(os.path.join(out, file_name(r['id'])), 'w') as fh:
            fh.write(sc.render(title))
        written += 1
    sys.stderr.write(f"{written} scenarios written to {out}\n")
    return 0


if __name__ == '__main__':
    sys.exit(main())
