"""Notebook 03's memorisation measures over a large training set: both indexes built over every story at once (the
baseline, ``memorisation_rows`` before sharding) vs over shards of ``--shard-words`` words one after another (today's
``memorisation_rows``, ``SHARD_WORDS`` = 20M by default), in one process: peak resident memory above the process's
own before each call (a thread samples ``/proc/self/statm`` every 10 ms), wall time, and whether the rows are equal;
with ``--workers N`` also the shards searched in N worker processes (``memorisation_workers``), timed against one
after another.

    .venv/bin/python benchmarks/memorisation_memory.py --words 10000000 --shard-words 2000000

The training set is the bundled TinyStories train prefix repeated to ``--words`` words, each copy with its proper
names replaced by other names (so the copies are not identical stories); the completions are ``--completions``
stories of the validation file cut at half. Repetition keeps the vocabulary and the distinct n-grams of the bundled
stories, so the per-word arrays (every word, n-gram and posting) grow as in a real corpus of that size while the
vocabulary-sized ones stay small: read the bytes per word, not the absolute peak, when extrapolating to 440M words.
"""
from __future__ import annotations

import argparse
import os
import platform
import threading
import time

import _common  # noqa: F401  (first: puts src/ on sys.path in a checkout without the editable install)

from helpers.core.hardware import cpu_info
from helpers.data.corpora import load_tinystories
from helpers.diversity import memorisation as M

NAMES = ["Lily", "Tom", "Ben", "Mia", "Sue", "Max", "Anna", "Sam", "Tim", "Lucy", "Jack", "Emma", "Leo", "Zoe"]


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_during(fn):
    """``(result, peak RSS above the RSS at the start in bytes, seconds)`` of ``fn()``."""
    start, peak, done = rss(), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            done.wait(0.01)

    t = threading.Thread(target=sample, daemon=True)
    t0 = time.perf_counter()
    t.start()
    try:
        out = fn()
    finally:
        done.set()
        t.join()
    return out, max(peak[0], rss()) - start, time.perf_counter() - t0


def corpus(words: int) -> list[str]:
    base = list(load_tinystories("tinystories/v1_train_prefix_2MiB.txt.gz").stories)
    out, total, k = [], 0, 0
    while total < words:
        a, b = NAMES[k % len(NAMES)], NAMES[(3 * k + 5) % len(NAMES)]
        for s in base:
            s = s.replace("Lily", a).replace("Tom", b) if k else s
            out.append(s)
            total += s.count(" ") + 1
            if total >= words:
                break
        k += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--words", type=int, default=10_000_000)
    ap.add_argument("--shard-words", type=int, default=2_000_000)
    ap.add_argument("--completions", type=int, default=40)
    ap.add_argument("--workers", type=int, default=0, help="also search the shards in this many worker processes "
                    "(memorisation_workers) and print the time ratio against one after another")
    a = ap.parse_args()
    texts = corpus(a.words)
    held = list(load_tinystories("tinystories/v2_train_prefix_10k_lines.txt.gz").stories)[: a.completions]
    comps = [" ".join(s.split()[: len(s.split()) // 2]) for s in held]
    splits = {"held-out": (comps, held)}
    n_words = sum(t.count(" ") + 1 for t in texts)
    info = cpu_info()
    print(f"CPU {info['label']} ({', '.join(info['flags']) or 'no AVX-512/bf16 flags'}), python {platform.python_version()}; {len(texts):,} stories, {n_words:,} words; "
          f"{len(comps)} completions; shards of {a.shard_words:,} words: {len(M._shards(texts, a.shard_words))}")
    sharded, s_peak, s_sec = peak_during(lambda: M.memorisation_rows("m", texts, splits, shard_words=a.shard_words))
    whole, w_peak, w_sec = peak_during(lambda: M.memorisation_rows("m", texts, splits, shard_words=n_words + 1))
    gb = 1024 ** 3
    print(f"\n{'':34s}{'peak RSS above start':>22s}{'bytes per word':>16s}{'seconds':>10s}")
    print(f"{'every story at once (baseline)':34s}{w_peak / gb:>19.2f} GB{w_peak / n_words:>16.0f}{w_sec:>10.1f}")
    print(f"{f'shards of {a.shard_words:,} words':34s}{s_peak / gb:>19.2f} GB{s_peak / n_words:>16.0f}{s_sec:>10.1f}")
    print(f"ratio baseline / sharded: {w_peak / max(s_peak, 1):.2f}x memory, {w_sec / s_sec:.2f}x time; rows equal: "
          f"{whole == sharded}")
    print(f"at 440M words (the paper profile's largest budget), linearly: every story at once "
          f"~{w_peak / n_words * 440e6 / gb:.0f} GB; shards of {M.SHARD_WORDS:,} words ~{s_peak / a.shard_words * M.SHARD_WORDS / gb:.1f} GB "
          "(plus the stories themselves)")
    if a.workers > 1:
        pooled, _, p_sec = peak_during(lambda: M.memorisation_rows("m", texts, splits, shard_words=a.shard_words,
                                                                 workers=a.workers, log=lambda _: None))
        print(f"shards in {a.workers} worker processes: {p_sec:.1f} s against {s_sec:.1f} s one after another "
              f"({s_sec / p_sec:.2f}x; each worker holds one shard's indexes); rows equal: {pooled == sharded}")


if __name__ == "__main__":
    main()
