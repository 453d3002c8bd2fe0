"""Benchmark: our self-BLEU curve vs nltk ``corpus_bleu`` (the authors' loop) on the same inputs, one process.

Inputs: ``--prompts`` groups (default 100, the paper's) of ``--completions`` completions (default 50), each a
random window of ``--words`` consecutive words (default 150) of a real TinyStories story from the bundled data
(stories with at least that many words; seeded), so n-gram overlap is realistic.  The curve uses
k in {2..10, 15, 20, ..., 50} (PAPER_KS, capped at --completions).

nltk needs ~2 s per prompt for the whole curve, so it is timed on the first ``--nltk-prompts`` prompts
(default 5) and extrapolated linearly to all prompts; the output says so.  On those prompts our per-prompt values
are compared with nltk's and the maximum absolute difference is printed.

    .venv/bin/python benchmarks/self_bleu.py [--prompts 100] [--completions 50] [--nltk-prompts 5] [--level sentence]
"""
from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from helpers.data.corpora import load_tinystories
from helpers.diversity.self_bleu import PAPER_KS, self_bleu_nltk, self_bleu_per_prompt


def make_groups(n_prompts: int, n_completions: int, n_words: int, seed: int) -> list[list[str]]:
    stories = [s.split() for s in load_tinystories("tinystories/v1_train_prefix_2MiB.txt.gz").stories]
    long = [s for s in stories if len(s) >= n_words]
    if not long:
        raise SystemExit(f"no bundled story has >= {n_words} words")
    rng = np.random.default_rng(seed)
    groups = []
    for _ in range(n_prompts):
        group = []
        for i in rng.integers(0, len(long), size=n_completions):
            s = long[int(i)]
            a = int(rng.integers(0, len(s) - n_words + 1))
            group.append(" ".join(s[a : a + n_words]))
        groups.append(group)
    return groups


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=100)
    ap.add_argument("--completions", type=int, default=50)
    ap.add_argument("--words", type=int, default=150)
    ap.add_argument("--nltk-prompts", type=int, default=5, help="prompts on which nltk is timed (then extrapolated)")
    ap.add_argument("--level", choices=("sentence", "corpus"), default="sentence")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not 1 <= args.nltk_prompts <= args.prompts:
        raise SystemExit("--nltk-prompts must be between 1 and --prompts")

    ks = [k for k in PAPER_KS if k <= args.completions]
    groups = make_groups(args.prompts, args.completions, args.words, args.seed)
    print(f"self-BLEU benchmark: {args.prompts} prompts x {args.completions} completions x {args.words} words "
          f"(random windows of bundled TinyStories, seed {args.seed}); level={args.level}; k in {ks}")
    print(f"python {platform.python_version()}, numpy {np.__version__}")

    t0 = time.perf_counter()
    ours = self_bleu_per_prompt(groups, ks, level=args.level)
    t_ours = time.perf_counter() - t0

    m = args.nltk_prompts
    t0 = time.perf_counter()
    ref = {k: np.array([self_bleu_nltk(g, k, level=args.level) for g in groups[:m]]) for k in ks}
    t_nltk_sub = time.perf_counter() - t0
    t_nltk = t_nltk_sub * args.prompts / m
    diff = max(float(np.max(np.abs(ours[k][:m] - ref[k]))) for k in ks)

    print(f"ours  (all {args.prompts} prompts, whole curve): {t_ours:9.3f} s  ({1000 * t_ours / args.prompts:.2f} ms/prompt)")
    print(f"nltk  (measured on {m} prompts):                 {t_nltk_sub:9.3f} s  ({t_nltk_sub / m:.3f} s/prompt)")
    extra = "EXTRAPOLATED linearly" if m < args.prompts else "measured"
    print(f"nltk  ({extra} to {args.prompts} prompts from {m}): {t_nltk:9.3f} s")
    print(f"speed-up nltk / ours: {t_nltk / t_ours:.1f}x")
    print(f"max |ours - nltk| over {m} prompts x {len(ks)} k values: {diff:.3e}")
    print("curve (mean over all prompts): " + ", ".join(f"{k}:{float(np.mean(ours[k])):.4f}" for k in ks))


if __name__ == "__main__":
    main()
