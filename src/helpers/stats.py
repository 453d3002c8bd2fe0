"""Seeded percentile-bootstrap intervals, the one implementation behind every interval over resampled items
(``story_eval.grade_summary``, ``glue_tasks.metric_interval``, ``judge_validity``, ``diversity.bootstrap_mean_interval``; ``evaluation`` uses
:func:`percentile_interval` on its stratified binomial replicates)."""
from __future__ import annotations

from typing import Callable

import numpy as np


def percentile_interval(replicates, confidence: float = 0.95):
    """The central ``confidence`` percentile interval of bootstrap ``replicates`` (along the first axis): the
    ``(1 - confidence) / 2`` and ``1 - (1 - confidence) / 2`` quantiles.  One number each for a 1-D array, one
    per column for a 2-D one."""
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(replicates, [alpha, 1.0 - alpha], axis=0)
    return lo, hi


def bootstrap_interval(n: int, statistic: Callable[[np.ndarray], np.ndarray], confidence: float = 0.95,
                       n_boot: int = 1000, seed: int = 0, rng: np.random.Generator | None = None):
    """Seeded percentile-bootstrap ``confidence`` interval over ``n`` items.

    ``n_boot`` resamples of the item indices ``0..n-1`` with replacement are drawn at once, as an ``(n_boot, n)``
    array, from ``rng`` (default: a fresh ``numpy.random.default_rng(seed)``; pass a generator to share one draw
    sequence across several calls).  ``statistic`` maps that index array to the replicates: ``n_boot`` numbers
    (the interval is two floats) or an ``(n_boot, k)`` array (two arrays of ``k``, for ``k`` statistics that share
    the resamples), e.g. ``lambda idx: values[idx].mean(axis=1)``."""
    rng = np.random.default_rng(seed) if rng is None else rng
    idx = rng.integers(0, n, size=(n_boot, n))
    lo, hi = percentile_interval(np.asarray(statistic(idx), dtype=float), confidence)
    if np.ndim(lo) == 0:
        return float(lo), float(hi)
    return lo, hi


def mean_interval(values, confidence: float = 0.95, n_boot: int = 1000, seed: int = 0,
                  rng: np.random.Generator | None = None) -> tuple[float, float]:
    """Seeded percentile-bootstrap interval of the mean of ``values`` (:func:`bootstrap_interval`)."""
    v = np.asarray(values, dtype=float)
    return bootstrap_interval(len(v), lambda idx: v[idx].mean(axis=1), confidence, n_boot, seed, rng)
