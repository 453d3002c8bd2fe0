"""Independent training runs: one after another in one process (all threads) vs side by side in worker processes
(``helpers.core.parallel.run_jobs``, one thread each), in one script on the same jobs.

    .venv/bin/python benchmarks/parallel_jobs.py [--model encoder|decoder|both] [--jobs 4] [--steps 20]

A job is ``--steps`` training steps (forward, backward, AdamW) of a fresh model of the cpu profile's shape on
random token ids, with ``precision: auto`` (bf16 autocast where the CPU has native bf16): the LTG-BERT ``cpu``
preset on 32 × 128 tokens (notebook 04) or the GPT-Neo cpu decoder on 16 × 256 tokens (notebooks 02/02b). The
baseline runs the jobs one after another with all threads, as the notebooks did before ``workers``; the other row
runs them through ``run_jobs`` with ``workers = threads``. Wall-clock includes the workers' start-up (each imports
torch) and the first step of every job, as a notebook pays them. Prints tokens/s of both and the ratio.
"""
from __future__ import annotations

import argparse
import os
import time

import torch

from helpers.core.hardware import cpu_info, resolve_precision
from helpers.core.parallel import run_jobs
from _common import train_steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["encoder", "decoder", "both"], default="both")
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
    models = ["encoder", "decoder"] if args.model == "both" else [args.model]
    odd = args.jobs % threads == 1 and args.jobs > threads
    head = (f"\n{'model':8s} {'jobs':>4s} {'steps':>5s}  {'one process, ' + str(threads) + ' threads':>26s}  "
            f"{str(threads) + ' workers, 1 thread each':>26s}  ratio")
    if odd:
        head += f"  {'workers, last job alone in the caller':>38s}  ratio  vs the tail in the pool"
    print(head)
    for model in models:
        jobs = {f"{model}-{i}": dict(model=model, steps=args.steps, seed=i, precision=precision) for i in range(args.jobs)}
        t0 = time.perf_counter()
        seq = run_jobs(train_steps, jobs, workers=1)
        t_seq = time.perf_counter() - t0
        t0 = time.perf_counter()
        par = run_jobs(train_steps, jobs, workers=threads, threads=threads, log=lambda _: None, lone_tail_in_caller=False)
        t_par = time.perf_counter() - t0
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

if __name__ == "__main__":
    main()
