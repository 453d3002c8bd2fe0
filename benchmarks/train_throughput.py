"""Training-step throughput of GPT-Neo: HF's eager attention (the baseline) vs our fast path, in one process.

A step is what training does: forward with labels, backward, clipping, AdamW step (param groups of
helpers.training.loop), on the same config, weights, batch and data for both paths. The baseline is HF's eager
GPT-Neo as a transformers user trains it (``model(input_ids, labels=...)``); ours is ``helpers.training.loop.lm_loss``
on the fast path (``helpers.models.decoder.enable_fast_attention``: SDPA attention, and in training blocked attention
with cheap dropout masks and the fused GELU). Dropout differs in its random draws only.
After warm-up the two paths are timed alternately
(so a load spike from other processes hits both), and the median over the repeats is reported. The machine's
fp32 matmul peak is measured in the same process (square 2048 matmuls) to put the achieved GFLOP/s
(``decoder.flops_per_token`` × tokens/s) in context.

    .venv/bin/python benchmarks/train_throughput.py                  # the issue's config
    .venv/bin/python benchmarks/train_throughput.py --config cpu     # the cpu profile's decoder (+ bf16 where native)
    .venv/bin/python benchmarks/train_throughput.py --config cpu-h256
    .venv/bin/python benchmarks/train_throughput.py --profile        # + torch.profiler table of our path
"""
from __future__ import annotations

import argparse
import copy
import platform
import statistics
import time

import torch

import _common  # noqa: F401,E402  (first: puts src/ on sys.path in a checkout without the editable install)

import transformers  # noqa: E402

from helpers.models.decoder import build_decoder, count_parameters, enable_fast_attention, flops_per_token  # noqa: E402
from helpers.core.hardware import autocast_context, cpu_info, native_bf16  # noqa: E402
from helpers.training.loop import lm_loss  # noqa: E402
from helpers.training.optim import param_groups  # noqa: E402
from _common import matmul_peak

CONFIGS = {
    # the issue's: hidden 128, 4 layers, 16 heads, vocab 16,384, seq 512, batch 8 (window: the paper's 256)
    "issue": dict(spec=dict(hidden=128, layers=4, heads=16, context=512, window=256, vocab_size=16_384), seq=512, batch=8, dropout=0.1),
    # the cpu profile's decoder before the recipe search (dropout 0.2: what the old "epochs" regularisation gave it)
    "cpu-before": dict(spec=dict(hidden=128, layers=4, heads=4, context=256, window=128, vocab_size=4096), seq=256,
                       batch=16, dropout=0.2),
    # the cpu profile's decoder now (no dropout)
    "cpu": dict(spec=dict(hidden=128, layers=4, heads=4, context=256, window=128, vocab_size=4096), seq=256, batch=16,
                dropout=0.0),
    # a 2x wider decoder at the cpu profile's other settings (where bf16 pays more)
    "cpu-h256": dict(spec=dict(hidden=256, layers=4, heads=4, context=256, window=128, vocab_size=4096), seq=256,
                     batch=16, dropout=0.0),
}


def hf_loss(model, batch: dict) -> torch.Tensor:
    """What a plain transformers user writes."""
    return model(input_ids=batch["input_ids"], labels=batch["input_ids"]).loss


def make_step(model, batch: torch.Tensor, loss_fn=hf_loss, lr: float = 5e-4, precision: str = "fp32"):
    opt = torch.optim.AdamW(param_groups(model, 0.1), lr=lr, betas=(0.9, 0.95), eps=1e-8)
    model.train()
    autocast = autocast_context(precision, "cpu")

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        with autocast():  # what helpers.training.loop.train does for precision bf16
            loss = loss_fn(model, {"input_ids": batch})
        loss.float().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        return float(loss.detach())

    return step


def timed(step) -> float:
    t = time.perf_counter()
    step()
    return time.perf_counter() - t


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=sorted(CONFIGS), default="issue")
    ap.add_argument("--repeats", type=int, default=5, help="timed steps per path (median reported)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps per path first")
    ap.add_argument("--dropout", type=float, default=None,
                    help="embedding/attention/residual dropout (default: the config's, 0.1 issue, 0.2 cpu-before, 0 cpu)")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument("--profile", action="store_true", help="print a torch.profiler table of our path's steps")
    ap.add_argument("--no-bf16", action="store_true", help="skip the bf16 autocast path even where the CPU has native bf16")
    ap.add_argument("--compile", action="store_true",
                    help="also time our path with torch.compile on the transformer body (inductor; the first steps compile)")
    ap.add_argument("--profile-steps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    transformers.logging.set_verbosity_error()
    if a.threads:
        torch.set_num_threads(a.threads)
    conf = CONFIGS[a.config]
    if a.dropout is None:
        a.dropout = conf["dropout"]
    spec = {**conf["spec"], "dropout": a.dropout}
    seq, bsz = conf["seq"], conf["batch"]

    eager = build_decoder(spec, fast=False, seed=a.seed)
    fast = enable_fast_attention(copy.deepcopy(eager))
    g = torch.Generator().manual_seed(a.seed + 1)
    batch = torch.randint(0, spec["vocab_size"], (bsz, seq), generator=g)

    # sanity: same function (eval mode, no dropout) before timing anything
    with torch.no_grad():
        eager.eval(), fast.eval()
        l_e = float(eager(input_ids=batch, labels=batch).loss)
        l_f = float(fast(input_ids=batch, labels=batch).loss)

    fpt = flops_per_token(eager.config, context=seq)
    tokens = bsz * seq
    print(f"config {a.config}: hidden {spec['hidden']}, layers {spec['layers']}, heads {spec['heads']}, "
          f"vocab {spec['vocab_size']}, seq {seq}, window {spec['window']}, batch {bsz}, dropout {a.dropout}; "
          f"{count_parameters(eager) / 1e6:.2f}M parameters")
    cpu = cpu_info()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, python {platform.python_version()}, "
          f"threads {torch.get_num_threads()}, {platform.machine()}; CPU {cpu['label']} ({', '.join(cpu['flags'])})")
    print(f"eval loss on the batch: eager {l_e:.6f}, fast {l_f:.6f} (|diff| {abs(l_e - l_f):.2e})")
    peak_before = matmul_peak()

    steps = {"HF eager (baseline)": make_step(eager, batch), "fast path (ours)": make_step(fast, batch, lm_loss),
             "fast, HF loss head": make_step(copy.deepcopy(fast), batch, hf_loss)}  # ours without lm_head_loss
    bf16 = native_bf16("cpu") and not a.no_bf16
    if bf16:  # the precision the cpu profile's "auto" picks on this CPU
        steps["fast path + bf16"] = make_step(copy.deepcopy(fast), batch, lm_loss, precision="bf16")
        steps["fast + bf16, HF head"] = make_step(copy.deepcopy(fast), batch, hf_loss, precision="bf16")
    if a.compile:  # the precision "auto" picks, with the model body compiled (the loss head stays eager)
        compiled = copy.deepcopy(fast)
        compiled.transformer = torch.compile(compiled.transformer, dynamic=False)
        steps["fast + compile" + (" + bf16" if bf16 else "")] = make_step(compiled, batch, lm_loss,
                                                                          precision="bf16" if bf16 else "fp32")
    for name, step in steps.items():
        for _ in range(a.warmup):
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(a.repeats):  # alternate, so load from other processes affects both paths alike
        for name, step in steps.items():
            times[name].append(timed(step))
    peak_after = matmul_peak()
    peak = max(peak_before, peak_after)

    print(f"fp32 matmul peak (2048×2048, best of 5): {peak:.1f} GFLOP/s "
          f"(before {peak_before:.1f}, after {peak_after:.1f})")
    print(f"training FLOPs per token (flops_per_token, seq {seq}): {fpt / 1e6:.2f} MFLOP; {tokens} tokens per step; "
          f"{a.warmup} warm-up + {a.repeats} timed steps per path, alternating")
    print()
    header = f"{'path':<22}{'median s/step':>14}{'min':>8}{'max':>8}{'tokens/s':>11}{'GFLOP/s':>9}{'% peak':>8}"
    print(header)
    print("-" * len(header))
    tps = {}
    for name, ts in times.items():
        med = statistics.median(ts)
        tps[name] = tokens / med
        gf = fpt * tps[name] / 1e9
        print(f"{name:<22}{med:>14.3f}{min(ts):>8.3f}{max(ts):>8.3f}{tps[name]:>11,.0f}{gf:>9.2f}{100 * gf / peak:>7.1f}%")
    base, ours = tps["HF eager (baseline)"], tps["fast path (ours)"]
    print("-" * len(header))
    print(f"ratio fast/eager (tokens/s, medians): {ours / base:.2f}×")
    print(f"ratio fused LM-head loss / HF loss head (fp32): {ours / tps['fast, HF loss head']:.2f}×")
    if "fast path + bf16" in tps:
        print(f"ratio fast bf16/fast fp32: {tps['fast path + bf16'] / ours:.2f}×; bf16/eager: {tps['fast path + bf16'] / base:.2f}×")
        print(f"ratio fused LM-head loss / HF loss head (bf16): {tps['fast path + bf16'] / tps['fast + bf16, HF head']:.2f}×")
    else:
        print("bf16 path not timed: " + ("--no-bf16" if a.no_bf16 else "this CPU has no native bf16 (fp32 is what precision: auto uses here)"))
    for name in [n for n in tps if n.startswith("fast + compile")]:
        ref = "fast path + bf16" if name.endswith("bf16") else "fast path (ours)"
        print(f"ratio torch.compile / eager ({ref}): {tps[name] / tps[ref]:.2f}×")
    spread = max(max(ts) / min(ts) for ts in times.values())
    if spread > 1.3 or peak_after < 0.8 * peak_before:
        print(f"note: noisy machine (max/min step time up to {spread:.2f}×, matmul peak {peak_before:.1f} → "
              f"{peak_after:.1f} GFLOP/s); other processes were probably running")

    if a.profile:
        from torch.profiler import ProfilerActivity, profile

        step = steps["fast path (ours)"]
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(a.profile_steps):
                step()
        print()
        print(f"torch.profiler, fast path, {a.profile_steps} training steps, top ops by self CPU time:")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20, max_name_column_width=48))


if __name__ == "__main__":
    main()
