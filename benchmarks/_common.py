"""Shared by the benchmark scripts (run as ``python benchmarks/<name>.py``, so this folder is on sys.path)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Mapping

import torch

try:  # every script imports this module before helpers, so a checkout without the editable install works too
    import helpers  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def matmul_peak(n: int = 2048, repeats: int = 5) -> float:
    """Best fp32 GFLOP/s of an n×n @ n×n matmul (the machine's practical peak for this process)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e9


def train_steps(model: str, steps: int, seed: int, precision: str = "fp32") -> dict:
    """``steps`` training steps (forward, backward, AdamW) of a fresh cpu-profile model on random token ids: the
    LTG-BERT ``cpu`` preset on 32 × 128 tokens (``model="encoder"``) or the GPT-Neo cpu decoder on 16 × 256
    (``"decoder"``). Returns the tokens processed and the last loss (a job of ``benchmarks/parallel_jobs.py``)."""
    from helpers.models.decoder import DecoderSpec, build_decoder
    from helpers.core.hardware import autocast_context
    from helpers.models.ltg_bert import LtgBertForMaskedLM, ltg_bert_config
    from helpers.data.masking import MaskedBlocks, TokenIds, mlm_loss
    from helpers.training.loop import lm_loss
    from helpers.training.optim import param_groups

    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    vocab = 4096
    if model == "encoder":
        net = LtgBertForMaskedLM(ltg_bert_config("cpu", vocab)).train()
        tok = TokenIds(vocab_size=vocab, mask_id=4, cls_id=1, sep_id=2, pad_id=3, special_ids=(0, 1, 2, 3, 4, 5))
        body = torch.randint(6, vocab, (32 * steps, 126), generator=g)
        data = MaskedBlocks(torch.cat([torch.full((len(body), 1), 1), body, torch.full((len(body), 1), 2)], 1), tok, seed=seed)
        batches = [data.batch(s, 32) for s in range(steps)]
        loss_fn, tokens = mlm_loss, 32 * 128
    else:
        net = build_decoder(DecoderSpec(vocab_size=vocab, hidden=128, layers=4, heads=4, context=256, window=128,
                                        dropout=0.0), seed=seed).train()
        ids = torch.randint(0, vocab, (steps, 16, 256), generator=g)
        batches = [{"input_ids": x, "labels": x} for x in ids]
        loss_fn, tokens = lm_loss, 16 * 256
    opt = torch.optim.AdamW(param_groups(net, 0.1), lr=1e-3)
    autocast = autocast_context(precision, "cpu")
    for b in batches:
        with autocast():
            loss = loss_fn(net, b)
        opt.zero_grad(set_to_none=True)
        loss.float().backward()
        opt.step()
    return {"tokens": tokens * steps, "loss": float(loss.detach())}


# ----------------------------------------------------------------------------- the recipe scripts' command line

def repetition_steps(profile: str, budget: str, steps: int, seed: int = 0) -> dict:
    """``steps`` steps of notebook 02's repetition fine-tuning (its params, a probe before and after) on the plain
    decoder of ``budget`` that notebook 02 trained under ``runs/<profile>/`` (``mle-best/``, else ``best/``), in
    memory: nothing is saved. Returns the probe after the last step and the seconds (a job of
    ``benchmarks/parallel_jobs.py --model repetition``)."""
    from dataclasses import asdict

    from helpers.core.config import load_params, run_dir
    from helpers.data.corpus_files import read_corpus
    from helpers.training import unlikelihood as U
    from helpers.generation import completions as G
    from helpers.models.decoder import load_decoder
    from helpers.training import recipes

    p = load_params(profile, "02")
    run, data = run_dir(profile), run_dir(profile) / "data"
    plan = recipes.plan_decoders(run, [budget], p["model"], p["train"], p["regularisation"], p["word_scale"],
                                 p["fixed_dropout"], p["fixed_weight_decay"], p["valid_blocks"])[budget]
    folder = run / "decoders" / budget
    folder = folder / G.PLAIN_DIR if (folder / G.PLAIN_DIR).is_dir() else folder / "best"
    cfg = U.UnlikelihoodConfig(**{**p["repetition_finetune"], "steps": steps, "probe_every": steps, "patience": 0,
                                  "seed": seed})
    prompts, probes = U.phase_prompts(read_corpus(data / f"{budget}.jsonl"), read_corpus(data / "tiny-valid.jsonl"), cfg)
    res = U.finetune_planned(load_decoder(folder), plan, prompts, probes, cfg, progress=False)
    return {"probe": res.history[-1], "seconds": res.seconds, "config": asdict(cfg)}


def recipe_parser(doc: str | None, default_recipes: str) -> argparse.ArgumentParser:
    """A parser with the options both recipe scripts take; each script adds its own."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--recipes", default=default_recipes, help="comma-separated names, or 'all'")
    ap.add_argument("--table-only", action="store_true", help="print the recipes already trained; train nothing")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    ap.add_argument("--list", action="store_true", help="list the recipes and exit")
    return ap


def chosen_recipes(args: argparse.Namespace, recipes: Mapping[str, tuple[str, dict]]) -> list[str] | None:
    """The recipe names ``--recipes`` asks for (all with ``all``); ``None`` after printing them for ``--list``.
    An unknown name stops the script with the list of known ones."""
    if args.list:
        width = max(len(n) for n in recipes) + 2
        for name, (what, _) in recipes.items():
            print(f"{name:<{width}} {what}")
        return None
    names = list(recipes) if args.recipes == "all" else args.recipes.split(",")
    unknown = [n for n in names if n not in recipes]
    if unknown:
        raise SystemExit(f"unknown recipe(s) {unknown}; choose from {', '.join(recipes)} (--list describes them)")
    return names
