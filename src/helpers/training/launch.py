"""Train a profile's decoders (notebook 02's runs) outside the notebook, then let notebook 02 find them and skip them.

    torchrun --nproc_per_node 4 -m helpers.training.launch --profile paper [--budgets tiny-5M,tiny-10M]   # DDP
    python -m helpers.training.launch --profile paper --array-task $SLURM_ARRAY_TASK_ID                  # one budget
    python -m helpers.training.launch --profile paper --array-tasks          # how many tasks: #SBATCH --array=0-(N-1)
    python -m helpers.training.launch --profile paper --array-task 3 --dry-run   # what task 3 would train, and where

* **torchrun** (one model on several GPUs): every process trains the same runs, DDP splitting each global batch; the
  main process holds the profile's lock, the lock ``./run_all.sh`` takes.
* **A job array** (many models, one GPU each, e.g. SLURM ``--array``): task ``N`` trains the ``N``-th budget of
  ``params/<profile>/02_*.yaml`` (0-based, in the file's order) with all its seeds, under that budget's lock
  (:class:`helpers.core.locking.ProfileLock` with ``budget``), so the tasks run side by side while ``./run_all.sh``
  is refused until they end (and a task is refused while ``./run_all.sh`` runs). Run notebook 02 after the array
  (``sbatch --dependency=afterok:<job>``): it skips every finished run and writes the tables and figures.
  ``--dry-run`` prints the task's plan (budget, runs, folders, lock) without reading any corpus or training.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Sequence

from helpers.core.config import load_params, run_dir, shown_path
from helpers.core.locking import ProfileBusy, ProfileLock
from helpers.training.loop import init_distributed, placement
from helpers.training.recipes import plan_decoders, train_decoder
from helpers.training.seed_axis import decoder_seeds

PROG = "python -m helpers.training.launch"


def array_budget(budgets: Sequence[str], task: int) -> str:
    """The budget of array task ``task`` (0-based, the params' order); a task out of range is refused by name."""
    if not 0 <= task < len(budgets):
        raise ValueError(f"array task {task} is out of range: the profile has {len(budgets)} budget(s), tasks 0-"
                         f"{len(budgets) - 1} ({', '.join(budgets)}); submit with --array=0-{len(budgets) - 1}")
    return budgets[task]


def task_plan(profile: str, budget: str, p: dict) -> list[str]:
    """The lines ``--dry-run`` prints for one budget: its runs (seeds), their folders and the lock the task takes."""
    seeds = {b: v for b, v in (p.get("seeds") or {}).items() if b == budget}
    runs = decoder_seeds([budget], seeds, p["train"]["seed"])  # (run name, budget, seed), as plan_decoders names them
    out = run_dir(profile) / "decoders"
    return [f"budget {budget}: {len(runs)} run(s), seeds {', '.join(str(s) for _, _, s in runs)}",
            *[f"  {r} -> {shown_path(out / r)}" for r, _, _ in runs],
            f"lock {shown_path(ProfileLock(profile, budget=budget).path)} (beside other budgets' tasks; "
            f"refused while ./run_all.sh --profile {profile} runs)",
            f"then: ./run_all.sh --profile {profile} --from 02 (skips the finished runs)"]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--budgets", help="comma-separated subset of the profile's budgets (torchrun or one process)")
    ap.add_argument("--array-task", type=int, help="train the N-th budget (0-based) under its own lock: a job array's task")
    ap.add_argument("--array-tasks", action="store_true", help="print how many array tasks the profile has, and stop")
    ap.add_argument("--dry-run", action="store_true", help="print what would be trained, and where; train nothing")
    a = ap.parse_args(argv)
    try:
        p = load_params(a.profile, "02")
        if a.array_tasks:
            print(len(p["budgets"]))
            return 0
        if a.array_task is not None and a.budgets:
            raise ValueError("--array-task picks one budget itself: drop --budgets")
        budgets = [array_budget(p["budgets"], a.array_task)] if a.array_task is not None else (
            a.budgets.split(",") if a.budgets else list(p["budgets"]))
        unknown = sorted(set(budgets) - set(p["budgets"]))
        if unknown:
            raise ValueError(f"budgets {unknown} are not in params/{a.profile}/02_*.yaml ({p['budgets']})")
        if a.dry_run:
            for b in budgets:
                print("\n".join(task_plan(a.profile, b, p)))
            return 0
        lock = ProfileLock(a.profile, budget=budgets[0] if a.array_task is not None else None)
        # the main process of a torchrun group holds the lock (torchrun stops the others if it is refused)
        with lock if int(os.environ.get("RANK", "0")) == 0 else contextlib.nullcontext():
            return train_budgets(a.profile, p, budgets)
    except (ProfileBusy, ValueError, FileNotFoundError, OSError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1


def train_budgets(profile: str, p: dict, budgets: Sequence[str]) -> int:
    """Train (or resume, or skip) every run of ``budgets`` as notebook 02 would, under DDP when torchrun started us."""
    runs = plan_decoders(run_dir(profile), budgets, p["model"], p["train"], p.get("regularisation", "words"),
                         p.get("word_scale", 1.0), p.get("fixed_dropout", 0.1), p.get("fixed_weight_decay", 0.1),
                         p.get("valid_blocks"), {b: v for b, v in (p.get("seeds") or {}).items() if b in budgets})
    d = init_distributed(p["train"].get("device", "auto"))  # the backend of the device the params train on
    place = None  # resolved once, for the first run: every run trains where and how the params say
    for name, r in runs.items():
        place = place or placement(r.cfg.device, r.cfg.precision)
        res = train_decoder(name, r.train_data, r.valid_data, r.tokenizer, r.spec, r.cfg,
                            run_dir(profile) / "decoders" / name, log=print if d.main else (lambda *_: None),
                            place=place)
        if d.main:
            print(f"{name}: best valid loss {res.best_valid_loss:.4f} at step {res.best_step}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
