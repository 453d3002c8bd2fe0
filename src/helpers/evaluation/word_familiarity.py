"""Minimal-pair accuracy by how familiar a pair's words are to the model's training stories.

BLiMP's sentences use an adult vocabulary ("Who should Derek hug after shocking Richard?"); a decoder trained on a
million words of TinyStories has never seen most of it, and on a pair whose telling word it never saw its choice
is close to a coin flip. This module splits a model's scored pairs of one task by the count, in that model's
training text, of the rarest word of the pair (both sentences; words are lower-cased runs of letters), and gives
the accuracy on the pairs whose words all occur at least ``n`` times, for a few ``n``, with a Wilson interval over
pairs (``docs/methods.md#minimal-pairs``).

This is a diagnostic, not a second benchmark. The familiar pairs are spread over the paradigms unevenly, so each
row also compares them with the *other* pairs of the same paradigms, every paradigm weighted by its number of
familiar pairs (:func:`matched_gap`): a gap there is not explained by the mix of phenomena (within a paradigm the
familiar pairs may still differ in other ways, e.g. shorter sentences). Accuracies are over pairs, not BLiMP's
headline number (the mean over paradigms). The table's figure is
:func:`helpers.report.evaluation_views.plot_word_familiarity`.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from helpers.core.stats import binomial_replicates, percentile_interval, wilson_interval
from helpers.data.corpus_files import iter_texts
from helpers.evaluation.comparisons import corpus_of
from helpers.evaluation.minimal_pairs import Item
from helpers.evaluation.zero_shot import BOOTSTRAP_SAMPLES, chance_verdict

_WORD = re.compile(r"[a-z]+")
COLUMNS = ["kind", "model", "words seen at least", "pairs", "share of pairs (%)", "paradigms", "accuracy (%)",
           "ci_low", "ci_high", "above chance", "matched pairs", "familiar, matched (%)", "rest, same paradigms (%)",
           "gap (points)", "gap ci_low", "gap ci_high"]


def words(text: str) -> list[str]:
    """The words the counts are kept for: lower-cased runs of letters (``didn't`` -> ``didn``, ``t``)."""
    return _WORD.findall(text.lower())


def word_counts(texts: Iterable[str]) -> Counter:
    """How often each word (:func:`words`) occurs in ``texts``."""
    counts: Counter = Counter()
    for t in texts:
        counts.update(words(t))
    return counts


def counts_by_model(data_dir: str | Path, models: Sequence[str]) -> dict[str, Counter]:
    """Each model's :func:`word_counts` over its training stories, ``data_dir / "<budget>.jsonl"`` (notebook 01's
    corpora; the budget is :func:`helpers.evaluation.comparisons.corpus_of` the name). Each budget is read once,
    streamed, and its counts are shared by the models trained on it (seeds, plain copies)."""
    by_budget = {b: word_counts(iter_texts(Path(data_dir) / f"{b}.jsonl")) for b in dict.fromkeys(map(corpus_of, models))}
    return {m: by_budget[corpus_of(m)] for m in models}


def rarest_word_count(item: Item, counts: Mapping[str, int]) -> int:
    """The count of the pair's rarest word over both sentences (0 when one was never seen)."""
    ws = words(f"{item.good} {item.bad}")
    if not ws:
        raise ValueError(f"pair {item.paradigm}/{item.pair_id} has no words")
    return min(counts.get(w, 0) for w in ws)


def matched_gap(familiar: Sequence[dict], rest: Sequence[dict], confidence: float = 0.95,
                samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> dict[str, float]:
    """The ``familiar`` rows against the ``rest`` rows of the same paradigms: only paradigms with rows on both sides
    count, each weighted by its number of familiar rows. Returns ``matched pairs`` (familiar rows in those
    paradigms), ``familiar, matched (%)`` (their accuracy), ``rest, same paradigms (%)`` (the rest's per-paradigm
    accuracies, weighted alike) and ``gap (points)`` (the first minus the second) with a percentile interval from a
    seeded bootstrap over items, stratified by paradigm and side (:func:`helpers.core.stats.binomial_replicates`, as
    :func:`helpers.evaluation.zero_shot.paradigm_mean_interval`). NaNs when no paradigm has rows on both sides."""
    nf: Counter = Counter(r["paradigm"] for r in familiar)
    kf: Counter = Counter(r["paradigm"] for r in familiar if r["correct"])
    nr: Counter = Counter(r["paradigm"] for r in rest)
    kr: Counter = Counter(r["paradigm"] for r in rest if r["correct"])
    ps = [p for p in nf if nr[p]]
    nan = float("nan")
    if not ps:
        return {"matched pairs": 0, "familiar, matched (%)": nan, "rest, same paradigms (%)": nan,
                "gap (points)": nan, "gap ci_low": nan, "gap ci_high": nan}
    n_f = np.array([nf[p] for p in ps], dtype=np.int64)
    n_r = np.array([nr[p] for p in ps], dtype=np.int64)
    k_f = np.array([kf[p] for p in ps], dtype=np.int64)
    k_r = np.array([kr[p] for p in ps], dtype=np.int64)
    a_f, a_r = k_f / n_f, k_r / n_r
    w = n_f / n_f.sum()
    rng = np.random.default_rng(seed)  # one draw sequence: the familiar side first, then the rest
    d_f = binomial_replicates(n_f, k_f, samples, rng)
    d_r = binomial_replicates(n_r, k_r, samples, rng)
    lo, hi = percentile_interval(100.0 * (d_f - d_r) @ w, confidence)
    return {"matched pairs": int(n_f.sum()), "familiar, matched (%)": float(100.0 * a_f @ w),
            "rest, same paradigms (%)": float(100.0 * a_r @ w), "gap (points)": float(100.0 * (a_f - a_r) @ w),
            "gap ci_low": float(lo), "gap ci_high": float(hi)}


def familiarity_table(results: Mapping[tuple[str, str], Any], items: Sequence[Item],
                      counts: Mapping[str, Mapping[str, int]], thresholds: Sequence[int] = (1, 5, 20),
                      task: str = "blimp", confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """One row per model (``results``: ``(kind, name) -> EvalResult`` with per-item ``rows``; ``counts[name]``: the
    word counts of that model's training text) and threshold ``n`` (0 first: every scored pair): the pairs of
    ``task`` whose words all occur at least ``n`` times, their share of the model's scored pairs, the number of
    paradigms they span, and the accuracy over them (%) with a Wilson ``confidence`` interval
    (``ci_low``/``ci_high``; NaN when no pair qualifies); then :func:`matched_gap` against the model's other pairs
    (seeded by ``seed``)."""
    if any(int(n) < 1 for n in thresholds):
        raise ValueError(f"thresholds must be counts >= 1, got {list(thresholds)}")
    items = [it for it in items if it.task == task]
    out = []
    for (kind, name), res in results.items():
        if name not in counts:
            raise ValueError(f"no word counts for {name}")
        rarest = {(it.paradigm, it.pair_id): rarest_word_count(it, counts[name]) for it in items}
        rows = [r for r in res.rows if r["task"] == task]
        if not rows:
            continue
        missing = [r for r in rows if (r["paradigm"], r["pair_id"]) not in rarest]
        if missing:
            raise ValueError(f"{name}: {len(missing)} scored {task} pair(s) are not among the items given")
        row_counts = [rarest[(r["paradigm"], r["pair_id"])] for r in rows]
        for n in [0, *sorted(set(int(t) for t in thresholds))]:
            sub, rest = [], []
            for r, c in zip(rows, row_counts):
                (sub if c >= n else rest).append(r)
            k = sum(bool(r["correct"]) for r in sub)
            lo, hi = wilson_interval(k, len(sub), confidence) if sub else (float("nan"), float("nan"))
            out.append({"kind": kind, "model": name, "words seen at least": n, "pairs": len(sub),
                        "share of pairs (%)": 100.0 * len(sub) / len(rows),
                        "paradigms": len({r["paradigm"] for r in sub}),
                        "accuracy (%)": 100.0 * k / len(sub) if sub else float("nan"),
                        "ci_low": 100.0 * lo, "ci_high": 100.0 * hi,
                        "above chance": chance_verdict(100.0 * lo, 100.0 * hi) if sub else "no pairs",
                        **matched_gap(sub, rest, confidence, seed=seed)})
    return pd.DataFrame(out, columns=COLUMNS)
