"""Self-BLEU of generated stories (Zhu et al. 2018; BERTtime Stories) and the choice of the number of completions
per prompt from its curve. The measure (hypothesis and references, BLEU settings, the two levels, nltk's corner
cases) and the rules for k are described in ``docs/methods.md#self-bleu``.

Entry points: :func:`self_bleu`, :func:`self_bleu_per_prompt`, :func:`self_bleu_curve` (``level="sentence"``, the
authors' per-hypothesis loop, or ``"corpus"``; ``weights`` default to uniform up to 4-grams; tokens from
``str.split`` unless a ``tokenizer`` is given), :func:`self_bleu_table` (bootstrap intervals); :func:`choose_k`,
:func:`choose_k_or_none` and :func:`k_choice_label` (how to word the outcome), :func:`k_choices` (both for every
model of a :func:`self_bleu_table`); the k ranges :data:`PAPER_KS` and
:data:`BERTTIME_CODE_KS` (the authors' script).

Our implementation never calls nltk (and so never emits nltk's warnings): per prompt, the first ``max(ks)``
completions are tokenised once, every n-gram gets an integer id, and a sparse (completion, n-gram) -> count table is
built with numpy. Rows are then added one at a time while keeping, per n-gram, the largest and second-largest count
seen so far; when k rows are in, the clipped count of hypothesis i for n-gram g is
``min(c_i[g], M2[g] if c_i[g] == M1[g] else M1[g])`` (the max over the *other* k - 1 completions), so each k costs
O(number of n-gram occurrences in the first k completions). Results equal nltk's to 1e-9 (tested), corner cases
included; :func:`self_bleu_nltk` is the literal nltk loop of the authors' code, kept as the reference for tests and
benchmarks.
"""
from __future__ import annotations

import itertools
import math
import sys
import warnings
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from nltk.translate.bleu_score import corpus_bleu

from helpers.core.stats import bootstrap_mean_interval
from helpers.diversity.rouge import Tokenizer

__all__ = [
    "PAPER_KS",
    "BERTTIME_CODE_KS",
    "self_bleu",
    "self_bleu_per_prompt",
    "self_bleu_curve",
    "self_bleu_nltk",
    "choose_k",
    "k_choice_label",
    "is_flat",
]

#: The paper's k in {2..10, 15, 20, ..., 50} (docs/methods.md#self-bleu).
PAPER_KS: tuple[int, ...] = (2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 35, 40, 45, 50)
#: The k values of the authors' script (calculate_self_bleu_nucleus_k.py), capped at N = 50.
BERTTIME_CODE_KS: tuple[int, ...] = (2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50)
DEFAULT_WEIGHTS: tuple[float, ...] = (0.25, 0.25, 0.25, 0.25)
LEVELS = ("sentence", "corpus")
_LOG_TINY = math.log(sys.float_info.min)  # nltk method0 replaces a zero precision by sys.float_info.min


def _check_weights(weights: Sequence[float]) -> tuple[float, ...]:
    try:
        w = tuple(float(x) for x in weights)
    except TypeError as e:
        raise ValueError(f"weights must be a sequence of numbers, one per n-gram order; got {weights!r}") from e
    if not w or not all(math.isfinite(x) for x in w):
        raise ValueError(f"weights must be a non-empty sequence of finite numbers (one per n-gram order); got {weights!r}")
    return w


def _check_level(level: str) -> str:
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}; got {level!r}")
    return level


def _check_ks(ks: int | Iterable[int]) -> list[int]:
    if isinstance(ks, (int, np.integer)):
        ks = [int(ks)]
    out = []
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise ValueError(f"k must be an integer >= 2; got {k!r}")
        if k < 2:
            raise ValueError(
                f"k must be >= 2 (each of the first k completions is scored against the other k - 1 as references); got k={k}"
            )
        out.append(int(k))
    if not out:
        raise ValueError("ks is empty: give at least one k >= 2")
    return sorted(set(out))


def _check_group(group: Sequence[str], need: int, where: str) -> None:
    if isinstance(group, str):
        raise ValueError(f"{where}: expected a list of completion strings, got a single string")
    if len(group) == 0:
        raise ValueError(f"{where}: the list of completions is empty (self-BLEU needs at least {need})")
    if len(group) < need:
        raise ValueError(
            f"{where}: k={need} needs at least {need} completions but only {len(group)} were given "
            f"(lower k or generate more completions)"
        )
    for j, c in enumerate(group[:need]):
        if not isinstance(c, str):
            raise ValueError(f"{where}: completion {j} is {type(c).__name__}, expected str")


def _tokenise(texts: Sequence[str], tokenizer: Tokenizer | None, lowercase: bool) -> list[Sequence[str]]:
    if lowercase:
        texts = [t.lower() for t in texts]
    if tokenizer is None:
        return [t.split() for t in texts]
    return [tokenizer(t) for t in texts]


def _count_tables(token_lists: Sequence[Sequence[str]], max_n: int):
    """Per n-gram order: sparse (row, n-gram id) -> count, sorted by row, with row pointers."""
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in toks] for toks in token_lists]
    n_rows = len(ids)
    lens = np.fromiter((len(x) for x in ids), dtype=np.int64, count=n_rows)
    total = int(lens.sum())
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=total)
    row = np.repeat(np.arange(n_rows, dtype=np.int64), lens)
    starts = np.zeros(n_rows, dtype=np.int64)
    if n_rows > 1:
        np.cumsum(lens[:-1], out=starts[1:])
    pos = np.arange(total, dtype=np.int64) - np.repeat(starts, lens)
    row_len = lens[row]
    v = max(len(vocab), 1)
    gram = flat
    tables = []
    for n in range(1, max_n + 1):
        if n == 1:
            valid = np.ones(total, dtype=bool)
            n_grams = v
        else:
            valid = pos + n <= row_len
            where = np.flatnonzero(valid)
            keys = gram[where] * v + flat[where + n - 1]
            uniq, inv = np.unique(keys, return_inverse=True)
            gram = np.full(total, -1, dtype=np.int64)
            gram[where] = inv
            n_grams = max(int(uniq.size), 1)
        pair, cnt = np.unique(row[valid] * n_grams + gram[valid], return_counts=True)
        rows = pair // n_grams
        cols = pair % n_grams
        ptr = np.searchsorted(rows, np.arange(n_rows + 1))
        tables.append((rows, cols, cnt.astype(np.int64), ptr, n_grams))
    return lens, tables


def _closest_ref_lengths(lens: np.ndarray) -> np.ndarray:
    """For each i, the length of the reference j != i closest to len_i (ties -> shorter), as nltk."""
    d = np.abs(lens[:, None] - lens[None, :])
    key = d * (int(lens.max(initial=0)) + 1) + lens[None, :]
    np.fill_diagonal(key, np.iinfo(np.int64).max)
    return lens[np.argmin(key, axis=1)]


def _bleu(num: np.ndarray, den: np.ndarray, hyp_len: np.ndarray, ref_len: np.ndarray, weights: tuple[float, ...]) -> np.ndarray:
    """nltk corpus_bleu (no smoothing) from counts; num/den have shape (orders, m); returns m scores."""
    pos = num > 0
    logp = np.where(pos, np.log(np.where(pos, num, 1) / den), _LOG_TINY)
    s = np.zeros(num.shape[1])
    for w, lp in zip(weights, logp):
        s = s + w * lp
    hyp = hyp_len.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        bp = np.where(hyp_len > ref_len, 1.0, np.where(hyp_len == 0, 0.0, np.exp(1.0 - ref_len / np.maximum(hyp, 1.0))))
    out = bp * np.exp(s)
    out[num[0] == 0] = 0.0
    return out


def _prompt_scores(token_lists: Sequence[Sequence[str]], ks: list[int], weights: tuple[float, ...], level: str) -> np.ndarray:
    """Self-BLEU of one prompt for each k in ks (sorted); token_lists holds at least max(ks) completions."""
    max_n = len(weights)
    kmax = ks[-1]
    lens, tables = _count_tables(token_lists[:kmax], max_n)
    nums = np.zeros((len(ks), max_n, kmax))
    for o, (rows, cols, cnt, ptr, n_grams) in enumerate(tables):
        m1 = np.zeros(n_grams, dtype=np.int64)
        m2 = np.zeros(n_grams, dtype=np.int64)
        ki = 0
        for r in range(kmax):
            a, b = ptr[r], ptr[r + 1]
            if b > a:
                c, h = cols[a:b], cnt[a:b]
                old1, old2 = m1[c], m2[c]
                ge = h >= old1
                m1[c] = np.where(ge, h, old1)
                m2[c] = np.where(ge, old1, np.maximum(old2, h))
            while ki < len(ks) and ks[ki] == r + 1:
                e = ptr[r + 1]
                c, h = cols[:e], cnt[:e]
                top1 = m1[c]
                other = np.where(h == top1, m2[c], top1)
                clipped = np.minimum(h, other)
                nums[ki, o, : r + 1] = np.bincount(rows[:e], weights=clipped, minlength=r + 1)
                ki += 1
    out = np.empty(len(ks))
    orders = np.arange(1, max_n + 1)[:, None]
    for ki, k in enumerate(ks):
        hl = lens[:k]
        rl = _closest_ref_lengths(hl)
        num = nums[ki, :, :k]
        den = np.maximum(1, hl[None, :] - orders + 1).astype(np.float64)
        if level == "sentence":
            out[ki] = float(np.mean(_bleu(num, den, hl, rl, weights)))
        else:
            out[ki] = float(
                _bleu(num.sum(1, keepdims=True), den.sum(1, keepdims=True), hl.sum(keepdims=True), rl.sum(keepdims=True), weights)[0]
            )
    return out


def self_bleu(
    completions: Sequence[str],
    k: int | None = None,
    *,
    weights: Sequence[float] = DEFAULT_WEIGHTS,
    level: str = "sentence",
    tokenizer: Tokenizer | None = None,
    lowercase: bool = False,
) -> float:
    """Self-BLEU of one prompt's completions using the first ``k`` (default: all of them).

    ``tokenizer`` defaults to ``str.split``; ``lowercase=False`` keeps BLEU case-sensitive (the paper's setting).
    """
    w, lv = _check_weights(weights), _check_level(level)
    if isinstance(completions, str):
        raise ValueError("completions must be a list of strings (one prompt's completions), got a single string")
    if k is None:
        if len(completions) < 2:
            raise ValueError(f"self-BLEU needs at least 2 completions; got {len(completions)}")
        k = len(completions)
    ks = _check_ks(k)
    _check_group(completions, ks[-1], "completions")
    toks = _tokenise(completions[: ks[-1]], tokenizer, lowercase)
    return float(_prompt_scores(toks, ks, w, lv)[0])


def self_bleu_per_prompt(
    groups: Sequence[Sequence[str]],
    ks: Iterable[int] = PAPER_KS,
    *,
    weights: Sequence[float] = DEFAULT_WEIGHTS,
    level: str = "sentence",
    tokenizer: Tokenizer | None = None,
    lowercase: bool = False,
) -> dict[int, np.ndarray]:
    """``{k: array of per-prompt self-BLEU}`` for each k (sorted); ``groups[p]`` are prompt p's completions."""
    w, lv, kl = _check_weights(weights), _check_level(level), _check_ks(ks)
    if isinstance(groups, str) or len(groups) == 0:
        raise ValueError("groups must be a non-empty list with one list of completions per prompt")
    if isinstance(groups[0], str):
        raise ValueError(
            "groups must be a list of lists of completions (one list per prompt); got a list of strings "
            "(use self_bleu() for a single prompt)"
        )
    for p, g in enumerate(groups):
        _check_group(g, kl[-1], f"prompt {p}")
    per = np.empty((len(groups), len(kl)))
    for p, g in enumerate(groups):
        per[p] = _prompt_scores(_tokenise(g[: kl[-1]], tokenizer, lowercase), kl, w, lv)
    return {k: per[:, i].copy() for i, k in enumerate(kl)}


def self_bleu_curve(
    groups: Sequence[Sequence[str]],
    ks: Iterable[int] = PAPER_KS,
    *,
    weights: Sequence[float] = DEFAULT_WEIGHTS,
    level: str = "sentence",
    tokenizer: Tokenizer | None = None,
    lowercase: bool = False,
) -> dict[int, float]:
    """``{k: mean over prompts of the per-prompt self-BLEU}`` (BERTtime Stories protocol;
    ``docs/methods.md#self-bleu``).

    Per-prompt values: :func:`self_bleu_per_prompt` (same arguments).
    """
    per = self_bleu_per_prompt(groups, ks, weights=weights, level=level, tokenizer=tokenizer, lowercase=lowercase)
    return {k: float(np.mean(v)) for k, v in per.items()}


def self_bleu_table(per_prompt: Mapping[str, Mapping[int, Sequence[float]]], confidence: float = 0.95,
                    n_boot: int = 1000, seed: int = 0):
    """Long table of self-BLEU curves with intervals: one row per (model, k) with ``self-BLEU`` (the mean over
    prompts, equal to :func:`self_bleu_curve`), ``ci_low`` and ``ci_high`` (:func:`bootstrap_mean_interval` over the
    prompts, each model with its own seeded resamples, shared by all its k), and ``prompts``.
    ``per_prompt[model]`` is :func:`self_bleu_per_prompt`'s ``{k: per-prompt values}``."""
    rows = []
    for name, per in per_prompt.items():
        ks = sorted(per)
        values = np.column_stack([np.asarray(per[k], dtype=float) for k in ks])
        lo, hi = bootstrap_mean_interval(values, confidence, n_boot, seed)
        for j, k in enumerate(ks):
            rows.append({"model": name, "k": int(k), "self-BLEU": float(np.mean(values[:, j])),
                         "ci_low": float(lo[j]), "ci_high": float(hi[j]), "prompts": int(values.shape[0])})
    return pd.DataFrame(rows, columns=["model", "k", "self-BLEU", "ci_low", "ci_high", "prompts"])


def self_bleu_nltk(
    completions: Sequence[str],
    k: int,
    *,
    weights: Sequence[float] = DEFAULT_WEIGHTS,
    level: str = "sentence",
    tokenizer: Tokenizer | None = None,
    lowercase: bool = False,
) -> float:
    """Reference: the same quantity computed with ``nltk.translate.bleu_score.corpus_bleu`` (slow; warnings muted).

    ``level="sentence"`` is the authors' loop (one corpus_bleu call per hypothesis, then ``np.mean``).
    """
    w, lv, ks = _check_weights(weights), _check_level(level), _check_ks(k)
    k = ks[0]
    _check_group(completions, k, "completions")
    toks = [list(t) for t in _tokenise(completions[:k], tokenizer, lowercase)]
    hyps = toks
    refs = [[toks[j] for j in range(k) if j != i] for i in range(k)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if lv == "corpus":
            return float(corpus_bleu(refs, hyps, weights=w))
        return float(np.mean([corpus_bleu([refs[i]], [hyps[i]], weights=w) for i in range(k)]))


#: A knee (or a flat slope) needs at least this many later points of the curve inside ``eps``: at the last k (or
#: the one before it) the condition holds vacuously, so a curve that never flattens would otherwise "choose" its end.
MIN_LATER_POINTS = 2


def is_flat(curve: Mapping[int, float], eps: float) -> bool:
    """True when the curve's range is below ``eps`` (e.g. ~0 everywhere): no k is meaningful on it."""
    vals = [float(v) for v in curve.values()]
    return bool(vals) and max(vals) - min(vals) < eps


def choose_k_or_none(curve: Mapping[int, float], rule: str = "knee", *, eps: float = 0.01,
                     threshold: float | None = None) -> int | None:
    """:func:`choose_k`, or None when the curve is flat (its range is below ``eps``): a rule that reads a knee off a
    curve needs a curve, and on a flat one any k is as good as another.  Also None (from :func:`choose_k`) when the
    curve has no knee within its k range; :func:`k_choice_label` tells the two apart."""
    if is_flat(curve, eps):
        return None
    return choose_k(curve, rule, eps=eps, threshold=threshold)


def k_choice_label(curve: Mapping[int, float], k: int | None, eps: float) -> str:
    """How to report a choice of :func:`choose_k_or_none`: ``"k = 5"``, ``"undefined: flat curve"`` or
    ``"no knee within k ≤ 30"`` (30 = the largest k of the curve)."""
    if k is not None:
        return f"k = {k}"
    if is_flat(curve, eps):
        return "undefined: flat curve"
    return f"no knee within k ≤ {max(int(x) for x in curve)}"



def k_choices(table: pd.DataFrame, rule: str = "knee", *, eps: float = 0.01, threshold: float | None = None):
    """The choice of k for every model of a :func:`self_bleu_table` (columns ``model``, ``k``, ``self-BLEU``), in its
    order: the curves (model -> {k: mean self-BLEU}), the chosen k (:func:`choose_k_or_none`: None for a flat curve
    or one without a knee in its k range) and how to report it (:func:`k_choice_label`)."""
    curves = {name: {int(k): float(v) for k, v in zip(g["k"], g["self-BLEU"])} for name, g in table.groupby("model", sort=False)}
    chosen = {name: choose_k_or_none(c, rule, eps=eps, threshold=threshold) for name, c in curves.items()}
    labels = {name: k_choice_label(curves[name], k, eps) for name, k in chosen.items()}
    return curves, chosen, labels


def choose_k(
    curve: Mapping[int, float],
    rule: str = "knee",
    *,
    eps: float = 0.01,
    threshold: float | None = None,
) -> int | None:
    """Pick the number of completions per prompt from a self-BLEU curve ``{k: mean self-BLEU}``.

    Rules (the paper states none; it chose N = 5):

    * ``"knee"``: the smallest k such that ``|curve[k'] - curve[k]| <= eps`` for every k' >= k in the curve
      (beyond k, adding completions changes self-BLEU by at most ``eps``), with at least
      :data:`MIN_LATER_POINTS` (2) points after k: None when no k qualifies (the curve is still moving at its end).
    * ``"slope"``: the smallest k such that every later step changes by at most ``eps`` per added completion,
      ``|curve[k_{j+1}] - curve[k_j]| / (k_{j+1} - k_j) <= eps`` for all k_j >= k, again with at least two later
      points (two steps); None when none qualifies.
    * ``"threshold"``: the largest k with ``curve[k] <= threshold`` (diversity still acceptable); ValueError if none.
    """
    if not curve:
        raise ValueError("choose_k needs a non-empty curve {k: self-BLEU}")
    items = sorted((int(k), float(v)) for k, v in curve.items())
    ks = [k for k, _ in items]
    vs = np.array([v for _, v in items])
    if not np.all(np.isfinite(vs)):
        raise ValueError("choose_k: the curve has non-finite values")
    if rule == "threshold":
        if threshold is None:
            raise ValueError('rule="threshold" needs threshold=<max acceptable self-BLEU>')
        ok = [k for k, v in items if v <= threshold]
        if not ok:
            raise ValueError(f"no k has self-BLEU <= {threshold} (minimum is {vs.min():.4f} at k={ks[int(vs.argmin())]})")
        return max(ok)
    if eps < 0:
        raise ValueError(f"eps must be >= 0; got {eps}")
    last = len(ks) - 1 - MIN_LATER_POINTS  # the last index with MIN_LATER_POINTS points after it
    if rule == "knee":
        for i in range(last + 1):
            if np.all(np.abs(vs[i:] - vs[i]) <= eps):
                return ks[i]
    elif rule == "slope":
        steps = np.abs(np.diff(vs)) / np.diff(np.array(ks, dtype=float))
        for i in range(last + 1):
            if np.all(steps[i:] <= eps):
                return ks[i]
    else:
        raise ValueError(f'rule must be "knee", "slope" or "threshold"; got {rule!r}')
    return None  # no knee inside the curve's k range
