"""LTG-BERT training-step throughput on this machine: tokens/s and achieved GFLOP/s against a measured fp32 matmul
peak, in one process.

    .venv/bin/python benchmarks/encoder_throughput.py [--threads N] [--skip-base]

Runs the cpu preset with 1 thread and with torch's default thread count (on a shared machine a second thread that
gets descheduled makes every parallel kernel wait: compare the two rows), the head baseline with 1 thread, and the
base model with whichever thread count was faster.

One step = forward + backward + LAMB update (``helpers.training.optim.Lamb`` with the decay/no-decay groups of
``helpers.training.optim.param_groups``) on span-masked blocks from ``helpers.data.masking.MaskedBlocks`` (vocab 16,384,
synthetic token ids: the cost does not depend on which ids they are). Where the CPU has native bf16 (AVX512-BF16 or
AMX) the cpu preset also runs under bf16 autocast, as ``precision: auto`` trains it. Rows:

* ``cpu`` preset (128/341/4 heads/4 layers), 32 × 128 tokens, MLM head at the predicted positions only (ours,
  as the reference's ``MaskClassifier``) and, as the baseline, with the head over every position (HF-style
  full logits);
* ``base`` (768/2048/12/12, ~98M), 8 × 128 tokens.

FLOPs per step (forward + backward = 3 × forward, multiply-add = 2 FLOPs), per input token::

    6 · L·(4H² + 3HI)                   encoder matrices (qk, v, out; GEGLU in 2HI + out HI)
  + 6 · (H² + V·H) · s                  MLM head at the share s of predicted positions (s = 1 for full logits)
  + 12 · L · H · (T + R)                attention: q·kᵀ and probs·v (4TH forward), c2p and p2c (4RH), R = 63

The peak is the best of repeated 2048×2048 fp32 ``torch.mm`` with the same thread count. Element-wise work
(LayerNorms, softmax, GEGLU, gathers, the optimizer) is not counted, so the achieved share is a lower bound on how
busy the cores are.
"""
from __future__ import annotations

import argparse
import os
import time

import torch

from helpers.core.hardware import autocast_context, cpu_info, native_bf16
from helpers.models.ltg_bert import LtgBertForMaskedLM, count_parameters, ltg_bert_config, training_flops_per_token
from helpers.data.masking import MaskedBlocks, TokenIds, mlm_loss
from helpers.training.optim import Lamb, param_groups
from _common import matmul_peak

VOCAB = 16_384
TOK = TokenIds(vocab_size=VOCAB, mask_id=4, cls_id=1, sep_id=2, pad_id=3, special_ids=(0, 1, 2, 3, 4, 5))


def bench(preset: str, batch: int, seq: int, steps: int, masked_only: bool = True, precision: str = "fp32") -> dict:
    torch.manual_seed(0)
    cfg = ltg_bert_config(preset, VOCAB)
    model = LtgBertForMaskedLM(cfg).train()
    opt = Lamb(param_groups(model, 0.1), lr=1e-3, betas=(0.9, 0.98), eps=1e-6)
    g = torch.Generator().manual_seed(0)
    body = torch.randint(6, VOCAB, (batch * (steps + 1), seq - 2), generator=g)
    blocks = torch.cat([torch.full((len(body), 1), 1), body, torch.full((len(body), 1), 2)], 1)
    data = MaskedBlocks(blocks, TOK, seed=0)

    def loss_fn(m, b):
        if masked_only:
            return mlm_loss(m, b)
        # baseline: logits at every position, loss with ignore_index
        return m(input_ids=b["input_ids"], attention_mask=b["attention_mask"], labels=b["labels"]).loss

    times, predicted = [], 0
    for step in range(steps + 1):  # step 0 is a warm-up
        b = data.batch(step, batch)
        t0 = time.perf_counter()
        with autocast_context(precision, "cpu")():  # what helpers.training.loop.train does for ``precision``
            loss = loss_fn(model, b)
        opt.zero_grad(set_to_none=True)
        loss.float().backward()
        opt.step()
        dt = time.perf_counter() - t0
        if step:
            times.append(dt)
            predicted += int((b["input_ids"][:, 2] != -100).sum())
    tokens = batch * seq
    share = predicted / (tokens * steps) if masked_only else 1.0
    t_step = sorted(times)[len(times) // 2]  # median
    flops = training_flops_per_token(cfg, seq, share) * tokens
    return {"preset": preset, "params": count_parameters(model), "batch": f"{batch}x{seq}",
            "head": ("predicted only" if masked_only else "all positions") + ("" if precision == "fp32" else f", {precision}"),
            "s_per_step": t_step,
            "tokens_per_s": tokens / t_step, "gflop_per_step": flops / 1e9, "gflops": flops / t_step / 1e9}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=None, help="intra-op threads of the multi-thread rows "
                    "(default: torch's default)")
    ap.add_argument("--skip-base", action="store_true")
    ap.add_argument("--no-bf16", action="store_true", help="skip the bf16 autocast rows even where the CPU has native bf16")
    args = ap.parse_args()
    many = args.threads or torch.get_num_threads()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    info = cpu_info()
    print(f"torch {torch.__version__}, {os.cpu_count()} cores, load average {load:.1f} before the run; CPU {info.get('label', '?')}"
          f" (native bf16: {native_bf16('cpu')})")
    peaks = {}
    for n in sorted({1, many}):
        torch.set_num_threads(n)
        peaks[n] = matmul_peak()
        print(f"fp32 matmul peak, {n} thread(s) (2048² torch.mm, best of 5): {peaks[n]:.1f} GFLOP/s")
    rows = []
    for n in sorted({1, many}):
        torch.set_num_threads(n)
        rows.append({**bench("cpu", 32, 128, 5, True), "threads": n})
    if native_bf16("cpu") and not args.no_bf16:
        for n in sorted({1, many}):
            torch.set_num_threads(n)
            rows.append({**bench("cpu", 32, 128, 5, True, "bf16"), "threads": n})
    torch.set_num_threads(1)
    rows.append({**bench("cpu", 32, 128, 5, False), "threads": 1})
    if not args.skip_base:
        best = min((r for r in rows if r["head"] == "predicted only"), key=lambda r: r["s_per_step"])["threads"]
        torch.set_num_threads(best)
        rows.append({**bench("base", 8, 128, 2, True), "threads": best})
    hdr = (f"| {'model':6} | {'params':>11} | {'batch':>6} | {'MLM head':20} | {'threads':>7} | {'s/step':>7} | "
           f"{'tokens/s':>9} | {'GFLOP/step':>10} | {'GFLOP/s':>8} | {'% peak':>6} |")
    print()
    print(hdr)
    print("|" + "|".join("-" * len(c) for c in hdr.split("|")[1:-1]) + "|")
    for r in rows:
        print(f"| {r['preset']:6} | {r['params']:>11,} | {r['batch']:>6} | {r['head']:20} | {r['threads']:>7} | "
              f"{r['s_per_step']:7.3f} | {r['tokens_per_s']:9,.0f} | {r['gflop_per_step']:10.1f} | "
              f"{r['gflops']:8.1f} | {100 * r['gflops'] / peaks[r['threads']]:5.1f}% |")
    ours = next(r for r in rows if r["preset"] == "cpu" and r["threads"] == 1 and r["head"] == "predicted only")
    full = next(r for r in rows if r["head"] == "all positions")
    print(f"\ncpu preset, 1 thread: MLM head at the predicted positions only is "
          f"{full['s_per_step'] / ours['s_per_step']:.2f}× faster per step than full logits (same model and batch)")
    for r16 in (r for r in rows if r["head"].endswith("bf16")):
        r32 = next(r for r in rows if r["head"] == "predicted only" and r["threads"] == r16["threads"])
        print(f"cpu preset, {r16['threads']} thread(s): bf16 autocast is {r32['s_per_step'] / r16['s_per_step']:.2f}× "
              f"faster per step than fp32 (% peak of the bf16 rows is against the fp32 peak)")
    print("% peak = achieved GFLOP/s / matmul peak at the same thread count; s/step is the median of the timed steps "
          "(one warm-up step first)")


if __name__ == "__main__":
    main()
