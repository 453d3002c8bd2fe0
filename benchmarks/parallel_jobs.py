"""Independent training runs: one after another in one process (all threads) vs side by side in worker processes
(``helpers.core.parallel.run_jobs``, one thread each), in one script on the same jobs.

    .venv/bin/python benchmarks/parallel_jobs.py [--model encoder|decoder|both|scoring|repetition] [--jobs 4] [--steps 20]

A job is ``--steps`` training steps (forward, backward, AdamW) of a fresh model of the cpu profile's shape on
random token ids, with ``precision: auto`` (bf16 autocast where the CPU has native bf16): the LTG-BERT ``cpu``
preset on 32 × 128 tokens (notebook 04) or the GPT-Neo cpu decoder on 16 × 256 tokens (notebooks 02/02b). The
baseline runs the jobs one after another with all threads, as the notebooks did before ``workers``; the other row
runs them through ``run_jobs`` with ``workers = threads``. Wall-clock includes the workers' start-up (each imports
torch) and the first step of every job, as a notebook pays them. Prints tokens/s of both and the ratio.

``--model scoring`` times notebook 05's zero-shot jobs instead: :func:`helpers.evaluation.zero_shot.evaluate_saved`
on ``--steps`` BLiMP pairs per paradigm for each trained model of ``runs/<--profile>/`` (the four decoders and the
first ``--jobs - 4`` encoders; run notebooks 02 and 04 first), one after another vs side by side; prints pairs/s.

``--model repetition`` times notebook 02's repetition fine-tuning: ``--jobs`` copies of ``--steps`` steps (with
the probes before and after) on the plain tiny-1M decoder of ``runs/<--profile>/`` (run notebook 02 first), with
seeds 0, 1, ...; prints greedy rollout tokens per second (32 × 128 per step) and the ratio.
"""
from __future__ import annotations

import argparse
import os
import time

import torch

from helpers.core.config import run_dir
from helpers.core.hardware import cpu_info, resolve_precision
from helpers.core.parallel import run_jobs
from helpers.evaluation.zero_shot import evaluate_saved
from _common import repetition_steps, train_steps


def one_process_vs_workers(fn, jobs: dict, threads: int) -> tuple[tuple[dict, float], tuple[dict, float]]:
    """``(results, seconds)`` of ``jobs`` one after another in this process, then side by side (one worker per thread,
    no lone tail in the caller)."""
    t0 = time.perf_counter()
    seq = run_jobs(fn, jobs, workers=1)
    t_seq = time.perf_counter() - t0
    t0 = time.perf_counter()
    par = run_jobs(fn, jobs, workers=threads, threads=threads, log=lambda _: None, lone_tail_in_caller=False)
    return (seq, t_seq), (par, time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["encoder", "decoder", "both", "scoring", "repetition"], default="both")
    ap.add_argument("--profile", default="cpu", help="--model scoring: whose trained models to score")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=None, help="threads in all (default: torch's default)")
    args = ap.parse_args()
    threads = args.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    precision = resolve_precision("auto")
    info = cpu_info()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"CPU {info.get('label', '?')} ({', '.join(info.get('flags', [])) or '?'}), {threads} threads, "
          f"precision {precision}, load average {load:.1f} before the run; torch {torch.__version__}")
    if args.model == "scoring":
        return scoring(args, threads)
    if args.model == "repetition":
        return repetition(args, threads)
    models = ["encoder", "decoder"] if args.model == "both" else [args.model]
    odd = args.jobs % threads == 1 and args.jobs > threads
    head = (f"\n{'model':8s} {'jobs':>4s} {'steps':>5s}  {'one process, ' + str(threads) + ' threads':>26s}  "
            f"{str(threads) + ' workers, 1 thread each':>26s}  ratio")
    if odd:
        head += f"  {'workers, last job alone in the caller':>38s}  ratio  vs the tail in the pool"
    print(head)
    for model in models:
        jobs = {f"{model}-{i}": dict(model=model, steps=args.steps, seed=i, precision=precision) for i in range(args.jobs)}
        (seq, t_seq), (par, t_par) = one_process_vs_workers(train_steps, jobs, threads)
        assert all(abs(seq[k]["loss"] - par[k]["loss"]) < 0.05 for k in jobs), "the same jobs must train alike"
        tokens = sum(r["tokens"] for r in seq.values())
        line = (f"{model:8s} {args.jobs:4d} {args.steps:5d}  {tokens / t_seq:13,.0f} tok/s ({t_seq:5.1f} s)  "
                f"{tokens / t_par:13,.0f} tok/s ({t_par:5.1f} s)  {t_seq / t_par:.2f}×")
        if odd:  # the helpers' default: a lone last round runs in the caller with all threads
            t0 = time.perf_counter()
            tail = run_jobs(train_steps, jobs, workers=threads, threads=threads, log=lambda _: None)
            t_tail = time.perf_counter() - t0
            assert all(abs(seq[k]["loss"] - tail[k]["loss"]) < 0.05 for k in jobs), "the same jobs must train alike"
            line += f"  {tokens / t_tail:24,.0f} tok/s ({t_tail:5.1f} s)  {t_seq / t_tail:.2f}×  {t_par / t_tail:.2f}×"
        print(line)

def scoring(args, threads: int) -> None:
    """Notebook 05's zero-shot jobs: every decoder and some encoders, one after another vs side by side."""
    run = run_dir(args.profile)
    folders = {f"decoder {p.parent.name}": (p, "causal") for p in sorted(run.glob("decoders/*/best"))}
    folders |= dict(list({f"encoder {p.parent.name}": (p, "mlm") for p in sorted(run.glob("encoders/*/best"))}.items())
                    [:max(0, args.jobs - len(folders))])
    if not folders:
        raise SystemExit(f"no trained models under {run}: run notebooks 02 and 04 of the {args.profile} profile first")
    jobs = {name: dict(folder=folder, kind=kind, tasks=("blimp",), limit_per_task=args.steps, progress=False,
                       **({"reduction": "mean"} if kind == "mlm" else {}))
            for name, (folder, kind) in folders.items()}
    print(f"\n{'jobs':>4s} {'pairs/paradigm':>14s}  {'one process, ' + str(threads) + ' threads':>26s}  "
          f"{str(threads) + ' workers, 1 thread each':>26s}  ratio")
    (seq, t_seq), (par, t_par) = one_process_vs_workers(evaluate_saved, jobs, threads)
    acc = lambda r: 100 * sum(x["correct"] for x in r.rows) / len(r.rows)  # noqa: E731
    assert all(abs(acc(seq[k]) - acc(par[k])) < 1 for k in jobs), "the same models must score alike"
    pairs = sum(len(r.rows) for r in seq.values())
    print(f"{len(jobs):4d} {args.steps:14d}  {pairs / t_seq:12,.0f} pairs/s ({t_seq:5.1f} s)  "
          f"{pairs / t_par:12,.0f} pairs/s ({t_par:5.1f} s)  {t_seq / t_par:.2f}×   ({', '.join(jobs)})")


def repetition(args, threads: int) -> None:
    """Notebook 02's repetition fine-tuning: ``--jobs`` copies on one decoder, one after another vs side by side."""
    jobs = {f"repetition-{i}": dict(profile=args.profile, budget="tiny-1M", steps=args.steps, seed=i)
            for i in range(args.jobs)}
    print(f"\n{'jobs':>4s} {'steps':>5s}  {'one process, ' + str(threads) + ' threads':>30s}  "
          f"{str(threads) + ' workers, 1 thread each':>30s}  ratio")
    (seq, t_seq), (par, t_par) = one_process_vs_workers(repetition_steps, jobs, threads)
    cfg = next(iter(seq.values()))["config"]
    tokens = args.jobs * args.steps * cfg["batch_size"] * cfg["rollout_tokens"]  # at most: rollouts that end stop
    in_seq, in_par = sum(r["seconds"] for r in seq.values()), max(r["seconds"] for r in par.values())
    print(f"{args.jobs:4d} {args.steps:5d}  {tokens / t_seq:12,.0f} rollout tok/s ({t_seq:5.1f} s)  "
          f"{tokens / t_par:12,.0f} rollout tok/s ({t_par:5.1f} s)  {t_seq / t_par:.2f}×   "
          f"(the fine-tuning alone, without start-up: {in_seq:.1f} s vs {in_par:.1f} s, {in_seq / in_par:.2f}×)")


if __name__ == "__main__":
    main()
