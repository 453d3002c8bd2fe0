"""Intervals: seeded percentile-bootstrap intervals, the one implementation behind every interval over resampled items
(``suites.grade_summary``, ``glue_tasks.metric_interval``, ``judge_validity``, :func:`bootstrap_mean_interval`; ``zero_shot`` and
``word_familiarity`` take :func:`percentile_interval` of their :func:`binomial_replicates`, a bootstrap stratified by
paradigm), and the Wilson score interval of a binomial
proportion (:func:`wilson_interval`); comparisons of two models: paired over items (:func:`paired_bootstrap_difference`,
:func:`mcnemar_exact`) and over training seeds (:func:`t_interval`, :func:`minimum_detectable_effect` by the noncentral t, :func:`tost_interval`,
:func:`seeds_to_detect`), and Holm's correction for a family of tests (:func:`holm`). ``helpers.evaluation.comparisons`` puts them together."""
from __future__ import annotations

import math
from statistics import NormalDist
from typing import Callable

import numpy as np
from scipy.optimize import brentq
from scipy.stats import binomtest, nct, norm
from scipy.stats import t as student_t


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


def binomial_replicates(pairs, correct, samples: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap replicates of the shares right in a few strata of right/wrong items (paradigms), resampled
    within each stratum: resampling a stratum's ``n`` items with replacement gives ``Binomial(n, correct / n)``
    right answers, so each of the ``samples`` replicates draws one binomial per stratum from ``rng``. Returns the
    shares right, ``samples × strata``; the caller reduces them to its statistic (a mean over paradigms, a weighted
    difference) and takes :func:`percentile_interval` of it."""
    n = np.asarray(pairs, dtype=np.int64)
    k = np.asarray(correct, dtype=np.int64)
    return rng.binomial(n[None, :], (k / n)[None, :], size=(samples, n.size)) / n[None, :]


def mean_interval(values, confidence: float = 0.95, n_boot: int = 1000, seed: int = 0,
                  rng: np.random.Generator | None = None) -> tuple[float, float]:
    """Seeded percentile-bootstrap interval of the mean of ``values`` (:func:`bootstrap_interval`)."""
    v = np.asarray(values, dtype=float)
    return bootstrap_interval(len(v), lambda idx: v[idx].mean(axis=1), confidence, n_boot, seed, rng)


def bootstrap_mean_interval(values, confidence: float = 0.95, n_boot: int = 1000,
                            seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Seeded percentile-bootstrap ``confidence`` interval of the mean of each column of ``values`` (units × columns;
    a 1-D array is one column): the units (rows: prompts, stories) are resampled with replacement ``n_boot`` times,
    the **same** resamples for every column, and the (1 − confidence)/2 and (1 + confidence)/2 quantiles of the
    resampled means are returned as two arrays (one value per column). Shared by ``self_bleu.self_bleu_table`` and
    ``validity.grade_interval_table``."""
    v = np.asarray(values, dtype=float)
    v = v[:, None] if v.ndim == 1 else v
    if v.ndim != 2 or v.shape[0] == 0:
        raise ValueError(f"values must be a non-empty units × columns array; got shape {np.shape(values)}")
    if not 0 < confidence < 1 or n_boot < 1:
        raise ValueError(f"need 0 < confidence < 1 and n_boot >= 1; got {confidence}, {n_boot}")
    lo, hi = bootstrap_interval(v.shape[0], lambda idx: np.stack([v[:, j][idx].mean(axis=1) for j in range(v.shape[1])], axis=1),
                                confidence, n_boot, seed)  # column by column, the same resamples
    return np.atleast_1d(lo), np.atleast_1d(hi)


def intervals_apart(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two intervals ``(low, high)`` do not overlap: the project's (conservative) test of "a real
    difference" between two estimates with their own 95 % intervals."""
    return bool(a[0] > b[1] or b[0] > a[1])


def wilson_interval(k: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``k / n`` (as fractions). ``k`` may be fractional (ties
    counted as half a success): the share itself is used, never a count rounded down."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # the interval contains p; clamping keeps that true under rounding (p = 1 gave an upper end of 1 - 1e-16)
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def independent_mean_interval(estimates, lows, highs, weights=None, confidence: float = 0.95) -> tuple[float, float]:
    """Interval of the weighted mean of independent estimates (separate test sets: a GLUE average, an average over
    benchmarks) from each estimate's own ``confidence`` interval, by the normal approximation: an interval's
    half-width / z is its standard error, the mean's standard error is ``sqrt(sum((w_i se_i)^2))`` with the weights
    normalised to 1. Centred on the weighted mean; NaN when any input is missing."""
    est, lo, hi = (np.asarray(x, dtype=float) for x in (estimates, lows, highs))
    w = np.full(len(est), 1.0 / len(est)) if weights is None else np.asarray(weights, dtype=float) / np.sum(weights)
    if not (len(est) == len(lo) == len(hi) == len(w)) or len(est) == 0:
        raise ValueError("estimates, lows, highs (and weights) must be non-empty and of one length")
    if np.isnan(est).any() or np.isnan(lo).any() or np.isnan(hi).any():
        return float("nan"), float("nan")
    if (hi < lo).any():
        raise ValueError("every interval needs low <= high")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    se = (hi - lo) / (2 * z)
    mean, half = float(np.dot(w, est)), z * float(np.sqrt(np.sum((w * se) ** 2)))
    return mean - half, mean + half


# ----------------------------------------------------------------------------- comparisons of two models

def paired_bootstrap_difference(a, b, confidence: float = 0.95, n_boot: int = 2000, seed: int = 0
                                ) -> tuple[float, float, float]:
    """Mean difference ``mean(a − b)`` of two models scored on the **same** items (``a[i]`` and ``b[i]`` are item
    ``i``'s scores: 0/1 for a minimal pair, a grade, a loss) and its seeded percentile-bootstrap interval: the items
    are resampled once for both models, so what the two share (easy and hard items) cancels. Returns
    ``(difference, low, high)``."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError(f"need two non-empty 1-D score arrays over the same items; got shapes {a.shape}, {b.shape}")
    d = a - b
    lo, hi = mean_interval(d, confidence, n_boot, seed)
    return float(d.mean()), lo, hi


def mcnemar_exact(a, b) -> tuple[int, int, float]:
    """McNemar's exact test for two models' right/wrong answers on the same items (``a``, ``b``: 0/1 per item).
    Returns ``(a right and b wrong, b right and a wrong, two-sided p)``; p is the binomial test of the discordant
    pairs at one half (1.0 when there are none)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"need two 1-D 0/1 arrays over the same items; got shapes {a.shape}, {b.shape}")
    if not np.isin(a, (0.0, 1.0)).all() or not np.isin(b, (0.0, 1.0)).all():
        raise ValueError("McNemar needs 0/1 scores (a pair right or wrong); use paired_bootstrap_difference for others")
    ab, ba = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
    p = 1.0 if ab + ba == 0 else float(binomtest(ab, ab + ba, 0.5).pvalue)
    return ab, ba, p


def t_interval(values, confidence: float = 0.95) -> tuple[float, float, float, int, float]:
    """Student-t interval of the mean of a few seed-level values (one per training seed: seed means, or paired
    differences between two arms trained from the same seeds). Returns ``(mean, low, high, n, sd)``; with fewer than
    two values the interval is NaN (one seed says nothing about seed noise)."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    n = len(v)
    if n == 0:
        return float("nan"), float("nan"), float("nan"), 0, float("nan")
    mean = float(v.mean())
    if n < 2:
        return mean, float("nan"), float("nan"), n, float("nan")
    sd = float(v.std(ddof=1))
    half = float(student_t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half, n, sd


def detectable_shift(se: float, df: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true shift a two-sided t-test at level ``alpha`` detects with probability ``power``, exactly: the
    test statistic of an estimate with standard error ``se`` and ``df`` degrees of freedom is noncentral t with
    noncentrality ``shift / se``, and its power ``P(|T'| > t_{1−α/2, df})`` (both tails) is solved for the shift
    (``scipy.stats.nct``; the normal distribution for ``df = inf``, as for an interval over thousands of items).
    NaN without a finite positive ``se`` or with ``df < 1``; 0 for ``se = 0``."""
    if se is None or not np.isfinite(se) or se < 0 or not df >= 1:
        return float("nan")
    if se == 0:
        return 0.0
    if not 0 < power < 1 or not 0 < alpha < 1:
        raise ValueError(f"need 0 < alpha, power < 1; got {alpha}, {power}")
    if np.isinf(df):
        crit = norm.ppf(1 - alpha / 2)

        def achieved(lam: float) -> float:
            return float(norm.sf(crit - lam) + norm.cdf(-crit - lam))
    else:
        crit = float(student_t.ppf(1 - alpha / 2, df))

        def achieved(lam: float) -> float:
            lower = float(nct.cdf(-crit, df, lam))  # the wrong tail: scipy returns NaN where it is ~0
            return float(nct.sf(crit, df, lam)) + (lower if np.isfinite(lower) else 0.0)
    hi = crit + norm.ppf(power) + 1.0
    while achieved(hi) < power:  # the t quantile sum undershoots at few df: widen until the root is bracketed
        hi *= 2.0
    lam = brentq(lambda x: achieved(x) - power, 0.0, hi, xtol=1e-10)
    return float(lam * se)


def minimum_detectable_effect(sd: float, n: int, paired: bool = True, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true difference a two-sided t-test at level ``alpha`` detects with probability ``power``, given
    the seed-level standard deviation ``sd`` and ``n`` seeds per arm, from the noncentral t distribution
    (:func:`detectable_shift`): paired, ``sd`` is the SD of the per-seed differences, the standard error
    ``sd · sqrt(1/n)`` and df = n − 1; two independent arms of ``n`` seeds each, ``sd`` is the pooled SD of one arm,
    the standard error ``sd · sqrt(2/n)`` and df = 2n − 2 (the pooled two-sample t-test; the questions table's
    unpaired interval is Welch's, whose df is at most 2n − 2, so this is the design's best case). This is a property
    of the design (what it could detect), not of a result: a null result reads its own interval. NaN with fewer than
    two seeds or no ``sd``. (The t-quantile sum ``(t_{1−α/2} + t_{power}) · SE`` used before undershoots with few
    seeds: 73 % power at n = 2, 77 % at n = 3.)"""
    if n < 2 or sd is None or not np.isfinite(sd):
        return float("nan")
    df = n - 1 if paired else 2 * n - 2
    scale = math.sqrt(1.0 / n) if paired else math.sqrt(2.0 / n)
    return detectable_shift(sd * scale, df, alpha, power)


def tost_interval(effect: float, se: float, df: float, alpha: float = 0.05) -> tuple[float, float]:
    """The (1 − 2α) interval two one-sided tests at level ``alpha`` read (TOST, Schuirmann 1987): equivalence within
    ±δ is shown when it lies inside (−δ, δ). ``effect ± t_{1−α, df} · se``; NaN without a finite ``se``."""
    if se is None or not np.isfinite(se) or not df >= 1:
        return float("nan"), float("nan")
    half = float(student_t.ppf(1 - alpha, df)) * se
    return float(effect - half), float(effect + half)


def seeds_to_detect(sd: float, effect: float, paired: bool = True, factor: float = 2.0, most: int = 10_000,
                    alpha: float = 0.05, power: float = 0.8) -> float:
    """The fewest seeds per arm at which the design could detect ``factor`` × |``effect``| (the minimum detectable
    effect at ``sd`` no larger than that): the rule that decides whether a question keeps paying for seeds (a design
    whose MDE exceeds twice the observed effect cannot answer it). Infinite beyond ``most`` or for a zero effect; NaN
    without an SD."""
    if sd is None or not np.isfinite(sd) or not np.isfinite(effect):
        return float("nan")
    target = factor * abs(effect)
    if target == 0:
        return float("inf")
    n = 2
    while n <= most:
        if minimum_detectable_effect(sd, n, paired, alpha, power) <= target:
            return float(n)
        n = n + 1 if n < 64 else int(n * 1.1)
    return float("inf")


def holm(pvalues, alpha: float = 0.05) -> np.ndarray:
    """Holm's step-down correction: for each p-value of a family of tests, whether it is rejected at family-wise
    level ``alpha`` (a boolean array in the input's order; NaN p-values are never rejected and do not count)."""
    p = np.asarray(pvalues, dtype=float)
    ok = ~np.isnan(p)
    m = int(ok.sum())
    out = np.zeros(len(p), dtype=bool)
    order = np.argsort(np.where(ok, p, np.inf), kind="stable")
    for rank, i in enumerate(order[:m]):
        if p[i] > alpha / (m - rank):
            break
        out[i] = True
    return out


def binomial_p_above(k: float, n: int, chance: float = 0.5) -> float:
    """One-sided exact binomial p-value that a share ``k / n`` lies above ``chance`` (ties counted as half a success
    are rounded down, so the test is conservative)."""
    if n <= 0:
        return float("nan")
    return float(binomtest(int(math.floor(k)), int(n), chance, alternative="greater").pvalue)


def seed_item_components(scores) -> tuple[float, float, int, int]:
    """Split the seed-to-seed spread of a mean over items into seed noise and item noise. ``scores`` is a
    seeds × items matrix (one row per training seed, the same items in every row; for a paired comparison the
    per-item differences A − B of each seed). Under ``x[s, i] = mu + a_i + b_s + e_si`` (item effects ``a_i`` shared
    by every seed, a seed effect ``b_s`` of variance ``seed_var``, and an item-by-seed residual ``e_si`` of variance
    ``item_var``) the per-item variance over seeds averages ``seed_var + item_var`` and the variance of the seed means
    is ``seed_var + item_var / n``: two moment equations, solved for both (``seed_var`` clipped at 0). Returns
    ``(seed_var, item_var, seeds, items)``; NaNs with fewer than two seeds or items."""
    x = np.asarray(scores, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"need a seeds × items matrix, got shape {x.shape}")
    s, n = x.shape
    if s < 2 or n < 2:
        return float("nan"), float("nan"), s, n
    per_item = float(x.var(axis=0, ddof=1).mean())  # E = seed_var + item_var
    of_means = float(x.mean(axis=1).var(ddof=1))  # E = seed_var + item_var / n
    item_var = max(0.0, (per_item - of_means) * n / (n - 1))
    return max(0.0, of_means - item_var / n), item_var, s, n


def items_for_tolerance(seed_var: float, item_var: float, tolerance: float = 0.1) -> float:
    """How many items make the item noise add at most ``tolerance`` (0.1: 10 %) to the seed-level SD:
    ``sqrt(seed_var + item_var / n) <= (1 + tolerance) * sqrt(seed_var)``. Infinite when no seed noise was measured
    (every further item narrows the interval), NaN when the components are unknown."""
    if not (np.isfinite(seed_var) and np.isfinite(item_var)):
        return float("nan")
    if item_var == 0:
        return 1.0
    if seed_var <= 0:
        return float("inf")
    return float(math.ceil(item_var / (seed_var * ((1 + tolerance) ** 2 - 1))))
