"""Repetition fine-tuning of a decoder: notebook 03's targets before and after, side by side.

Takes a decoder trained by ``benchmarks/recipe.py`` (default: the recipe ``profile``, i.e. notebook 02's plain
training of tiny-1M), copies it to ``runs/<profile>/unlikelihood/<name>/`` and runs notebook 02's repetition
fine-tuning on the copy (``helpers.training.unlikelihood.finetune_decoder`` with the params file's
``repetition_finetune``, changed by ``--set key=value``). Both models, the plain one (``mle-best``) and the one kept
(``best``), are then scored on what the study needs of a decoder: notebook 03's 300 greedy continuations (share that
ends, share with a repeated 6-word run) and BLiMP on every filtered pair, with 95 % intervals; plus the held-out
loss. A finished run is skipped on a rerun (only the scores are printed again).

    .venv/bin/python benchmarks/recipe.py --recipes profile                  # the plain decoder (once)
    .venv/bin/python benchmarks/unlikelihood.py                              # the profile's fine-tuning
    .venv/bin/python benchmarks/unlikelihood.py --name lr1e-4 --set lr=1e-4  # a variant
"""
from __future__ import annotations

import argparse
import json
import shutil
import time

import torch

import _common  # noqa: F401,E402  (first: puts src/ on sys.path in a checkout without the editable install)

from helpers.core import config  # noqa: E402
from helpers.core.hardware import cpu_info  # noqa: E402
from helpers.data.corpus_files import read_corpus  # noqa: E402
from helpers.training import unlikelihood as U  # noqa: E402
from recipe import RECIPES, recipe_dir, run_recipe, target_scores  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--budget", default="tiny-1M")
    ap.add_argument("--source", default="profile", help="the recipe of benchmarks/recipe.py whose decoder is fine-tuned")
    ap.add_argument("--name", default="profile", help="the run's folder name under runs/<profile>/unlikelihood/")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="change one key of the params' repetition_finetune (a JSON value)")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args(argv)
    config.set_threads(a.threads or None)
    settings = dict(config.load_params(a.profile, "02").get("repetition_finetune", {}))
    for kv in a.set:
        key, _, value = kv.partition("=")
        settings[key] = json.loads(value)
    cfg = U.UnlikelihoodConfig(**settings)
    if cfg.steps == 0:
        raise SystemExit(f"repetition fine-tuning is off (no steps) in profile {a.profile}; pass --set steps=N")
    src = recipe_dir(a.profile, a.budget, a.source)
    if not (src / "train_state.json").is_file():
        raise SystemExit(f"no finished decoder in {src}: run benchmarks/recipe.py --recipes {a.source}"
                         + (f" --budget {a.budget}" if a.budget != "tiny-1M" else ""))
    _, run = run_recipe(a.profile, a.budget, a.source, RECIPES[a.source][1], train_missing=False)
    out = config.run_dir(a.profile) / "unlikelihood" / a.budget / a.name
    if not (out / "train_state.json").is_file():
        out.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src / "best", out / "best", dirs_exist_ok=True)
        shutil.copy(src / "train_state.json", out / "train_state.json")
    data = config.run_dir(a.profile) / "data"
    t0 = time.time()
    res = U.finetune_decoder(out, run, read_corpus(data / f"{a.budget}.jsonl"), read_corpus(data / "tiny-valid.jsonl"), cfg)
    print(f"[{a.name}] fine-tuning: {res.seconds / 60:.1f} min (this call {(time.time() - t0) / 60:.1f} min)")
    rows = []
    # the plain model is the source recipe's best/: scored once, in the recipe's own cache (recipe.py --targets)
    for label, folder, cache, probe in (("plain (mle-best)", src / "best", src / "targets", res.before),
                                        ("fine-tuned (best)", out / "best", out / "targets" / "best", res.after)):
        scores = target_scores(a.profile, folder, cache)
        rows.append({"model": label, "probe step": probe["step"], "held-out loss": probe["valid loss"],
                     "probe loops %": 100 * probe["loops"], "probe ended %": 100 * probe["ended"], **scores})
    import pandas as pd

    cpu = cpu_info()
    print(f"\nbudget {a.budget}, profile {a.profile}, source recipe {a.source}; CPU: {cpu['label']} "
          f"({', '.join(cpu['flags'])}), {torch.get_num_threads()} torch threads")
    print(f"fine-tuning: {json.dumps(settings)}; probes: {cfg.probe_prompts} prompts of the official validation "
          f"stories; 'ended %'/'loops %': notebook 03's 300 greedy continuations; BLiMP: all filtered pairs")
    df = pd.DataFrame(rows)
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        print(df.round(3).to_string(index=False))
    b, f = rows
    print(f"\nafter - before: loops {f['loops %'] - b['loops %']:+.1f} points, ended {f['ended %'] - b['ended %']:+.1f} "
          f"points, BLiMP {f['BLiMP'] - b['BLiMP']:+.2f} points, held-out loss {f['held-out loss'] - b['held-out loss']:+.3f} nats")
    print("probe history:")
    print(pd.DataFrame(res.history).round(3).to_string(index=False))


if __name__ == "__main__":
    main()
