"""Notebook 05's decoder scoring: every filtered pair (the previous cpu profile, ``limit_per_task: null``) vs a seeded
sample of 250 pairs per BLiMP paradigm / supplement task / EWoK domain (today's ``limit_per_task: 250``), one process.

    .venv/bin/python benchmarks/decoder_item_sample.py [--folder runs/cpu/decoders/tiny-1M/best] [--limit 250]

Both runs call ``helpers.evaluation.zero_shot.evaluate_model`` exactly as notebook 05 does (batch 512, no cache), on
the same model, one after the other, with all threads. It prints pairs, seconds and pairs/s per setting, the ratio
of the times, and each task's accuracy with its 95 % item interval, so the sample can be read against the full set
(the sample's interval is wider: item noise, which notebook 05's item-budget table weighs against seed noise).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import _common  # noqa: F401  (puts src/ on sys.path when helpers is not installed)
import torch

from helpers.core import config
from helpers.core.hardware import cpu_info
from helpers.data.tokenizers import load_tokenizer
from helpers.evaluation import zero_shot
from helpers.models.decoder import load_decoder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--folder", default="runs/cpu/decoders/tiny-1M/best", help="a decoder folder (Hugging Face)")
    ap.add_argument("--limit", type=int, default=250, help="pairs per paradigm / task / domain in the sample")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    args = ap.parse_args()
    folder = Path(args.folder) if Path(args.folder).is_absolute() else config.repo_root() / args.folder
    if not (folder / "config.json").is_file():
        raise SystemExit(f"no decoder at {folder}: train the cpu profile's decoders first (./run_all.sh --only 01,02)")
    if args.threads:
        torch.set_num_threads(args.threads)
    info = cpu_info()
    print(f"CPU: {info['label']} ({', '.join(info['flags']) or 'no AVX-512/bf16 flags'}), {torch.get_num_threads()} threads; "
          f"decoder {folder.relative_to(config.repo_root()) if folder.is_relative_to(config.repo_root()) else folder}")
    model, tok = load_decoder(folder).eval(), load_tokenizer(folder)
    out = {}
    for limit in (None, args.limit):
        t = time.perf_counter()
        res = zero_shot.evaluate_model(model, tok, "causal", ["blimp", "supplement", "ewok"], batch_size=512,
                                       limit_per_task=limit, seed=0, progress=False)
        out[limit] = (time.perf_counter() - t, res)
    (full_s, full), (part_s, part) = out[None], out[args.limit]
    pairs = {k: int(r.by_task["pairs"].sum()) for k, (_, r) in out.items()}
    print(f"\n{'setting':<28}{'pairs':>8}{'seconds':>10}{'pairs/s':>10}")
    for name, limit in (("every pair (null)", None), (f"{args.limit} per paradigm/task/domain", args.limit)):
        print(f"{name:<28}{pairs[limit]:>8,}{out[limit][0]:>10.1f}{pairs[limit] / out[limit][0]:>10.0f}")
    print(f"ratio (every pair / sample): {full_s / part_s:.2f}x the time for {pairs[None] / pairs[args.limit]:.2f}x the pairs")
    ci_full, ci_part = zero_shot.interval_table({("decoder", "all"): full}), zero_shot.interval_table({("decoder", "s"): part})
    print("\naccuracy (%) and 95 % item interval, every pair vs the sample:")
    for (_, a), (_, b) in zip(ci_full.iterrows(), ci_part.iterrows()):
        print(f"  {a['task']:<6} {a['accuracy']:5.1f} [{a['ci_low']:.1f}, {a['ci_high']:.1f}] ({a['pairs']:,} pairs)   "
              f"{b['accuracy']:5.1f} [{b['ci_low']:.1f}, {b['ci_high']:.1f}] ({b['pairs']:,} pairs)")


if __name__ == "__main__":
    main()
