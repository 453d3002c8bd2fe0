"""Decoder training recipes compared on the cpu profile's data, at equal wall-clock and at equal tokens.

Each recipe is notebook 02's decoder (``params/<profile>/02_decoder_training.yaml``) with some settings changed;
it is trained on one budget (default ``tiny-1M``, built by notebook 01) into ``runs/<profile>/recipes/<name>/``
(``recipes/<budget>/<name>/`` for another budget)
with the project's own ``recipes.train_decoder`` (so a finished recipe is skipped on a rerun and the table is
printed again from its metrics). The table gives, per recipe: the best held-out loss within each wall-clock
budget (``--minutes``), at each token count (``--tokens``), at the end, and a greedy sample of the best
checkpoint. Wall-clock is the training loop's own clock (validation included), measured on this machine, whose
CPU is printed with the table: compare minutes only between rows run on the same machine with the same load.

    .venv/bin/python benchmarks/recipe.py --list
    .venv/bin/python benchmarks/recipe.py --recipes before,chosen          # train what is missing, print the table
    .venv/bin/python benchmarks/recipe.py --recipes all --table-only       # print what is already trained
    .venv/bin/python benchmarks/recipe.py --recipes chosen-3000,wd0.3-3000 --table-only --targets   # + loops, BLiMP
"""
from __future__ import annotations

import copy
import math
import time
from pathlib import Path

import torch

import _common  # noqa: F401,E402  (first: puts src/ on sys.path in a checkout without the editable install)

from helpers.core import config  # noqa: E402
from helpers.training import recipes
from helpers.models.decoder import load_decoder  # noqa: E402
from helpers.core.hardware import cpu_info, resolve_precision  # noqa: E402
from helpers.data.corpus_files import read_corpus  # noqa: E402
from helpers.diversity.continuation_health import continuation_health  # noqa: E402
from helpers.evaluation import zero_shot  # noqa: E402
from helpers.generation import completions as G, decoding as D  # noqa: E402
from _common import chosen_recipes, recipe_parser  # noqa: E402

# name -> (what it tests, overrides of notebook 02's params: "model", "train", "regularisation", "fixed_dropout", ...)
RECIPES: dict[str, tuple[str, dict]] = {
    "before": ("the cpu profile before the recipe search: 300 x 16 blocks, lr 2e-3, dropout 0.2 ('epochs' rule)",
               {"model": {"hidden": 128, "layers": 4, "heads": 4, "context": 256, "window": 128},
                "train": {"steps": 300, "batch_size": 16, "micro_batch": 16, "lr": 2e-3, "min_lr": 2e-4, "warmup": 0.016,
                          "grad_clip": 2.0, "eval_every": 20, "save_every": 20, "stop_patience": None, "precision": "fp32"},
                "regularisation": "epochs"}),
    "before-no-dropout": ("the same with dropout 0 (few passes over the data: nothing to regularise yet)",
                          {"model": {"hidden": 128, "layers": 4, "heads": 4, "context": 256, "window": 128},
                           "train": {"steps": 300, "batch_size": 16, "micro_batch": 16, "lr": 2e-3, "min_lr": 2e-4,
                                     "warmup": 0.016, "grad_clip": 2.0, "eval_every": 20, "save_every": 20,
                                     "stop_patience": None, "precision": "fp32"},
                           "regularisation": "fixed", "fixed_dropout": 0.0, "fixed_weight_decay": 0.1}),
    "lr3e-3-600x16": ("dropout 0, lr 3e-3, 600 x 16 (2.5M tokens)",
                      {"train": {"steps": 600, "batch_size": 16, "micro_batch": 16, "lr": 3e-3, "min_lr": 3e-4,
                                 "stop_patience": None, "eval_every": 100, "save_every": 100, "precision": "fp32"},
                       "regularisation": "fixed", "fixed_dropout": 0.0, "fixed_weight_decay": 0.1}),
    "lr6e-3-600x16": ("dropout 0, lr 6e-3, 600 x 16",
                      {"train": {"steps": 600, "batch_size": 16, "micro_batch": 16, "lr": 6e-3, "min_lr": 6e-4,
                                 "stop_patience": None, "eval_every": 100, "save_every": 100, "precision": "fp32"},
                       "regularisation": "fixed", "fixed_dropout": 0.0, "fixed_weight_decay": 0.1}),
    "h256-bf16-600x16": ("hidden 256 in bf16 autocast, lr 2e-3, 600 x 16 (where the CPU has native bf16)",
                         {"model": {"hidden": 256}, "train": {"steps": 600, "batch_size": 16, "micro_batch": 16,
                                                              "lr": 2e-3, "min_lr": 2e-4, "stop_patience": None,
                                                              "eval_every": 100, "save_every": 100, "precision": "bf16"},
                          "regularisation": "fixed", "fixed_dropout": 0.0, "fixed_weight_decay": 0.1}),
    "lr3e-3-2000x16": ("dropout 0, lr 3e-3, 2000 x 16 (8.2M tokens)",
                       {"train": {"steps": 2000, "batch_size": 16, "micro_batch": 16, "lr": 3e-3, "min_lr": 3e-4,
                                  "stop_patience": None, "eval_every": 100, "save_every": 100, "precision": "fp32"},
                        "regularisation": "fixed", "fixed_dropout": 0.0, "fixed_weight_decay": 0.1}),
    "b8x4000": ("the chosen recipe with half the batch and twice the steps (4000 x 8: the same 8.2M tokens, 2x updates)",
                {"train": {"steps": 4000, "batch_size": 8, "micro_batch": 8, "stop_patience": None, "eval_every": 100,
                           "save_every": 100}, "fixed_weight_decay": 0.1}),
    "h192-2000x16": ("the chosen recipe 1.5x wider (hidden 192, 4 heads of 48)",
                     {"model": {"hidden": 192}, "train": {"stop_patience": None, "eval_every": 100, "save_every": 100},
                      "fixed_weight_decay": 0.1}),
    "lr5e-3-2000x16": ("the chosen recipe with lr 5e-3 and a 5 % warm-up",
                       {"train": {"lr": 5e-3, "min_lr": 5e-4, "warmup": 0.05, "stop_patience": None, "eval_every": 100,
                                  "save_every": 100}, "fixed_weight_decay": 0.1}),
    "chosen-3000": ("the chosen recipe stretched to 3000 steps (12.3M tokens; the cosine schedule over 3000 steps)",
                    {"train": {"steps": 3000, "stop_patience": None, "eval_every": 100, "save_every": 100},
                     "fixed_weight_decay": 0.1}),
    "wd0.3-3000": ("chosen-3000 with weight decay 0.3 instead of 0.1 (the data is seen ~10 times: a free regulariser, "
                   "unlike dropout, which leaves SDPA's fused kernel on a CPU)",
                   {"train": {"steps": 3000, "stop_patience": None, "eval_every": 100, "save_every": 100},
                    "fixed_weight_decay": 0.3}),
    "wd0.6-3000": ("chosen-3000 with weight decay 0.6 (the trend beyond 0.3)",
                   {"train": {"steps": 3000, "stop_patience": None, "eval_every": 100, "save_every": 100},
                    "fixed_weight_decay": 0.6}),
    "wd0.3": ("the cpu profile's recipe (early stopping included) with weight decay 0.3 (for the other budgets)",
              {"fixed_weight_decay": 0.3}),
    "seed7-3000": ("chosen-3000 with training seed 7 instead of 42 (other initial weights and batch order): the seed "
                   "noise of the recipe itself",
                   {"train": {"steps": 3000, "stop_patience": None, "eval_every": 100, "save_every": 100, "seed": 7},
                    "fixed_weight_decay": 0.1}),
    "wd0.3-3000-seed7": ("wd0.3-3000 with training seed 7 (does weight decay 0.3's BLiMP gain survive another seed?)",
                         {"train": {"steps": 3000, "stop_patience": None, "eval_every": 100, "save_every": 100,
                                    "seed": 7}, "fixed_weight_decay": 0.3}),
    "wd0.3-4000": ("wd0.3-3000 over 4000 steps (16.4M tokens: does BLiMP keep rising with tokens at weight decay 0.3?)",
                   {"train": {"steps": 4000, "stop_patience": None, "eval_every": 100, "save_every": 100},
                    "fixed_weight_decay": 0.3}),
    "wd0.3-4000-seed7": ("wd0.3-4000 with training seed 7",
                         {"train": {"steps": 4000, "stop_patience": None, "eval_every": 100, "save_every": 100,
                                    "seed": 7}, "fixed_weight_decay": 0.3}),
    "h256-wd0.3-3000": ("wd0.3-3000 with a 4x larger transformer body (hidden 256, 4 heads of 64; ~4.2M parameters "
                        "beside the embeddings): do loops fall and BLiMP rise with size at the same tokens? (not measured yet)",
                        {"model": {"hidden": 256}, "train": {"steps": 3000, "stop_patience": None, "eval_every": 100,
                                                             "save_every": 100}, "fixed_weight_decay": 0.3}),
    "h256-lr1e-3-wd0.3-3000": ("h256-wd0.3-3000 with a third of the learning rate (peak 1e-3, to 1e-4), in case the "
                               "wider model needs a smaller step (not measured yet)",
                               {"model": {"hidden": 256}, "train": {"steps": 3000, "lr": 1e-3, "min_lr": 1e-4,
                                                                    "stop_patience": None, "eval_every": 100,
                                                                    "save_every": 100}, "fixed_weight_decay": 0.3}),
    "L8-wd0.3-3000": ("wd0.3-3000 twice as deep (8 layers, global/local alternating; hidden 128): depth instead of "
                      "width at about the same added cost on a CPU (not measured yet)",
                      {"model": {"layers": 8}, "train": {"steps": 3000, "stop_patience": None, "eval_every": 100,
                                                         "save_every": 100}, "fixed_weight_decay": 0.3}),
    "wd0.3-seed7": ("the cpu profile's recipe with weight decay 0.3 and training seed 7 (for the other budgets)",
                    {"train": {"seed": 7}, "fixed_weight_decay": 0.3}),
    "seed7": ("the cpu profile's recipe with weight decay 0.1 (early stopping included) and training seed 7 (for the "
              "other budgets)", {"train": {"seed": 7}, "fixed_weight_decay": 0.1}),
    "chosen-full": ("the chosen recipe without early stopping, evaluated every 100 steps (the baseline of the rows above)",
                    {"train": {"stop_patience": None, "eval_every": 100, "save_every": 100}, "fixed_weight_decay": 0.1}),
    "chosen": ("the cpu profile's recipe with weight decay 0.1 (the profile's until the two-seed study of 2026-11-26)",
               {"fixed_weight_decay": 0.1}),
    "profile": ("the cpu profile's recipe (params/cpu/02_decoder_training.yaml as it is)", {}),
}


def merged_params(profile: str, overrides: dict) -> dict:
    """Notebook 02's params with ``overrides`` (``model`` and ``train`` are merged key by key)."""
    p = copy.deepcopy(config.load_params(profile, "02"))
    for key, value in overrides.items():
        if key in ("model", "train") and value is not None:
            p[key] = {**p[key], **value}
        else:
            p[key] = value
    return p


def recipe_dir(profile: str, budget: str, name: str) -> Path:
    """Where a recipe trains: ``runs/<profile>/recipes/<name>/`` for tiny-1M (the default budget), and
    ``runs/<profile>/recipes/<budget>/<name>/`` for any other budget, so one recipe on two budgets is two runs."""
    root = config.run_dir(profile) / "recipes"
    return root / name if budget == "tiny-1M" else root / budget / name


def run_recipe(profile: str, budget: str, name: str, overrides: dict, train_missing: bool = True):
    p = merged_params(profile, overrides)
    runs = recipes.plan_decoders(config.run_dir(profile), [budget], p["model"], p["train"], p.get("regularisation", "words"),
                                 p.get("word_scale", 1.0), p.get("fixed_dropout", 0.1), p.get("fixed_weight_decay", 0.1),
                                 p.get("valid_blocks"))
    r = runs[budget]
    out = recipe_dir(profile, budget, name)
    if not train_missing and not (out / "train_state.json").is_file():
        return None, r
    res = recipes.train_decoder(f"{name} ({budget})", r.train_data, r.valid_data, r.tokenizer, r.spec, r.cfg, out)
    return res, r


def best_within(history: list[dict], key: str, limit: float) -> float:
    vals = [h["loss"] for h in history if h["split"] == "valid" and h[key] <= limit * (1 + 1e-9)]
    return min(vals) if vals else math.nan


def greedy_sample(model_dir: Path, tokenizer, prompt: str, tokens: int = 40) -> str:
    model = load_decoder(model_dir).eval()
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True).replace("\n", " ")


def target_scores(profile: str, model_dir: Path, cache: Path) -> dict:
    """What the study needs of a decoder beyond its loss: greedy continuations of notebook 03's 300 prompts (150 from
    the smallest budget's stories, 150 held-out; its generation params) that end and that loop (a repeated 6-word
    run), and BLiMP on every filtered pair, each with its 95 % interval."""
    p3 = config.load_params(profile, "03")
    data = config.run_dir(profile) / "data"
    rows = []
    prompts_by_split = G.health_prompts(read_corpus(data / f"{p3['models'][0]}.jsonl"), read_corpus(data / "tiny-heldout.jsonl"),
                                        p3["memorisation_prompts"], p3["prompt_frac"], p3["min_words"], p3["max_words"],
                                        p3["seed"])
    for split, prompts in prompts_by_split.items():
        rows += G.cached_completions(cache / f"continuations-{split}.jsonl", model_dir, prompts, D.Decoding("greedy"),
                                     model_name=model_dir.parent.name, max_new_tokens=p3["max_new_tokens"],
                                     batch_size=p3["batch_size"], seed=p3["seed"], progress=False)
    h = continuation_health(rows)
    blimp = zero_shot.evaluate_saved(model_dir, "causal", tasks=("blimp",), batch_size=512, out_dir=cache / "eval",
                                     progress=False, log=lambda s: None)
    b = blimp.by_task.set_index("task").loc["blimp"]
    return {"ended %": h["ended (%)"], "loops %": h["loops (%)"],
            "loops 95% CI": f"[{h['loops CI low']:.1f}, {h['loops CI high']:.1f}]",
            "BLiMP": float(blimp.overall["BLiMP"].iloc[0]), "BLiMP 95% CI": f"[{b.ci_low:.2f}, {b.ci_high:.2f}]"}


def main(argv=None) -> None:
    ap = recipe_parser(__doc__, "before,chosen")
    ap.add_argument("--budget", default="tiny-1M")
    ap.add_argument("--targets", action="store_true",
                    help="also score each best checkpoint on greedy loops and BLiMP (all pairs; ~1 min per recipe)")
    ap.add_argument("--minutes", default="2,4,6,8,12", help="wall-clock budgets of the table (minutes)")
    ap.add_argument("--tokens", default="1.2,2.5,5,8", help="token budgets of the table (millions)")
    a = ap.parse_args(argv)
    names = chosen_recipes(a, RECIPES)
    if names is None:
        return
    config.set_threads(a.threads or None)
    minutes = [float(m) for m in a.minutes.split(",")]
    tokens = [float(t) * 1e6 for t in a.tokens.split(",")]
    cpu = cpu_info()
    prompt = config.load_params(a.profile, "02").get("sample_prompt", "Once upon a time")
    rows = []
    for name in names:
        t0 = time.time()
        res, r = run_recipe(a.profile, a.budget, name, RECIPES[name][1], train_missing=not a.table_only)
        if res is None:
            continue
        h = res.history
        row = {"recipe": name, "shape": f"h{r.spec.hidden} L{r.spec.layers} H{r.spec.heads} ctx{r.spec.context}",
               "steps x batch": f"{res.steps}x{r.cfg.batch_size}", "lr": r.cfg.lr, "dropout": r.spec.dropout,
               "precision": resolve_precision(r.cfg.precision), "tokens (M)": res.tokens_seen / 1e6,
               "minutes": res.seconds / 60, "best loss": res.best_valid_loss,
               **{f"<= {m:g} min": best_within(h, "seconds", m * 60) for m in minutes},
               **{f"<= {t / 1e6:g}M tok": best_within(h, "tokens", t) for t in tokens},
               **(target_scores(a.profile, Path(res.out_dir) / "best", Path(res.out_dir) / "targets") if a.targets else {}),
               "sample": greedy_sample(Path(res.out_dir) / "best", r.tokenizer, prompt)[:90]}
        rows.append(row)
        print(f"[{name}] done in {(time.time() - t0) / 60:.1f} min", flush=True)
    if not rows:
        raise SystemExit("nothing trained yet for these recipes (run without --table-only)")
    import pandas as pd

    print(f"\nbudget {a.budget}, profile {a.profile}; CPU: {cpu['label']} ({', '.join(cpu['flags'])}), "
          f"{torch.get_num_threads()} torch threads; held-out loss in nats/token (4,096-token vocabulary); "
          "'<= T' columns: best validation loss reached within T minutes / tokens (NaN: not reached)")
    df = pd.DataFrame(rows)
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.max_colwidth", 90):
        print(df.drop(columns=["sample"]).round(3).to_string(index=False))
        print()
        for row in rows:
            print(f"{row['recipe']:<20} {prompt} {row['sample']}")


if __name__ == "__main__":
    main()
