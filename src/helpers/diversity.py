"""Diversity and memorisation of generated stories: self-BLEU, ROUGE-2, nearest training story, copied runs.

Self-BLEU (Zhu et al. 2018; BERTtime Stories; ``docs/methods.md#self-bleu``)
---------------------------------------------------------------------------
For each prompt there are N completions (strings).  For a given k (paper: k in {2..10, 15, 20, ..., 50},
:data:`PAPER_KS`), each of the **first k** completions is the hypothesis and the other k - 1 are its references;
BLEU is nltk's ``corpus_bleu``: n-grams up to 4 with uniform weights (``weights`` is a parameter), whitespace tokens
(``str.split``), case-sensitive, **no smoothing**.  Scores are averaged within a prompt, then across prompts
(:func:`self_bleu_curve`).  Higher = less diverse.

``level`` says what "BLEU of a prompt" is:

* ``"sentence"`` (default) — what the authors' code does (``baby_lm/generator/calculate_self_bleu_nucleus_k.py``):
  it calls ``corpus_bleu(list_of_references=[refs_i], hypotheses=[hyp_i])`` once **per hypothesis** i (i.e. a
  sentence-level BLEU without smoothing) and takes ``np.mean`` of the k values.
* ``"corpus"`` — one ``corpus_bleu`` over the k (hypothesis, references) pairs of the prompt (n-gram counts and lengths
  pooled over the k hypotheses before the division).  Smoother for short or very diverse completions, because a
  single hypothesis without any 4-gram match no longer scores 0.

Both equal the corresponding nltk calls to within floating-point rounding (tests check 1e-9), including nltk's
corner cases: BLEU = 0 when no unigram matches; otherwise a precision with a zero numerator is replaced by
``sys.float_info.min`` (nltk's ``method0``: the score is ~1e-77 rather than exactly 0, and nltk warns — we do not);
the brevity penalty uses the closest reference length (ties -> the shorter one) and is 0 for an empty hypothesis.

Note: the authors' k-range is ``[2..10, 15, 20, 25, 30, 40, 50]`` (:data:`BERTTIME_CODE_KS`, no 35/45); the paper's
``{2..10, 15, 20, ..., 50}`` is :data:`PAPER_KS`.

Our implementation never calls nltk: per prompt, the first ``max(ks)`` completions are tokenised once, every n-gram
gets an integer id, and a sparse (completion, n-gram) -> count table is built with numpy.  Rows are then added one
at a time while keeping, per n-gram, the largest and second-largest count seen so far; when k rows are in, the
clipped count of hypothesis i for n-gram g is ``min(c_i[g], M2[g] if c_i[g] == M1[g] else M1[g])`` (the max over the
*other* k - 1 completions), so each k costs O(number of n-gram occurrences in the first k completions).
:func:`self_bleu_nltk` is the literal nltk loop of the authors' code, kept as the reference for tests/benchmarks.

Choosing the number of completions (:func:`choose_k`): the paper "picks N = 5 from the analysis" without stating a
rule.  We offer explicit rules: ``"knee"`` (default: the smallest k after which the curve stays within ``eps`` of
its value at k), ``"slope"`` (smallest k after which every step changes by at most ``eps`` per added completion)
and ``"threshold"`` (the largest k whose self-BLEU is at most ``threshold``).

Memorisation and diversity (``docs/methods.md#memorisation``)
-------------------------------------------------------------
* :func:`rouge2` — ROUGE-2 from the ``rouge-score`` package with the Porter stemmer; we report the **F-measure** by
  default (``score="precision"|"recall"`` also available).  Argument order: ``rouge2(prediction, target)``, i.e. the
  generated completion first and the original ending second (``RougeScorer.score(target, prediction)``).
* :func:`rouge_n_matrix`, :func:`rouge2_pairs`, :func:`max_pairwise_rouge2` — the same numbers, fast: texts are
  tokenised once with rouge-score's exact tokenisation (stems cached per word), bigram counts go into a sparse
  matrix, and the clipped overlaps ``sum_g min(a_g, b_g)`` of all pairs come from ``sum_t [A >= t] [B >= t]^T``.
  :func:`max_pairwise_rouge2` gives, for each generation, its highest ROUGE-2 against any *other* generation
  (the "max ROUGE-2 among generations" histogram of Rathod et al. 2024).
* :class:`NGramIndex` — an inverted index from n-grams of training stories to story ids.  ``closest(text, top)``
  returns the training stories sharing the most distinct n-grams with ``text`` (a ``bincount`` over the posting
  lists; no loop over stories).  ``longest_shared_run(text)`` returns the longest run of consecutive words that
  ``text`` shares with any single training story, exactly (suffix array over the tokenised corpus with story
  separators; for each start position of the text, a binary search and the longest-common-prefix with the two
  neighbouring suffixes), and flags an exact copy (:func:`longest_common_substring_words`).

Word tokenisation for the index (``tokenizer``): ``"words"`` (default: lower-cased alphanumeric runs, i.e.
rouge-score's tokenisation without stemming — punctuation and case do not break a copied run), ``"rouge"``
(the same with the Porter stemmer), ``"whitespace"`` (``str.split``, case-sensitive) or any callable.
"""
from __future__ import annotations

import bisect
import itertools
import math
import re
import sys
import warnings
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from .stats import bootstrap_interval

__all__ = [
    "PAPER_KS",
    "BERTTIME_CODE_KS",
    "self_bleu",
    "self_bleu_per_prompt",
    "self_bleu_curve",
    "self_bleu_nltk",
    "choose_k",
    "rouge_tokenize",
    "rouge2",
    "rouge_n_matrix",
    "rouge2_pairs",
    "max_pairwise_rouge2",
    "Match",
    "SharedRun",
    "NGramIndex",
    "longest_common_substring_words",
]

#: The paper's k in {2..10, 15, 20, ..., 50} (docs/methods.md#self-bleu).
PAPER_KS: tuple[int, ...] = (2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 35, 40, 45, 50)
#: The k values of the authors' script (calculate_self_bleu_nucleus_k.py), capped at N = 50.
BERTTIME_CODE_KS: tuple[int, ...] = (2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50)
DEFAULT_WEIGHTS: tuple[float, ...] = (0.25, 0.25, 0.25, 0.25)
LEVELS = ("sentence", "corpus")
_LOG_TINY = math.log(sys.float_info.min)  # nltk method0 replaces a zero precision by sys.float_info.min

Tokenizer = Callable[[str], Sequence[str]]


# ============================================================================ self-BLEU
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
    """``{k: mean over prompts of the per-prompt self-BLEU}`` (BERTtime Stories protocol; see module docstring).

    Per-prompt values: :func:`self_bleu_per_prompt` (same arguments).
    """
    per = self_bleu_per_prompt(groups, ks, weights=weights, level=level, tokenizer=tokenizer, lowercase=lowercase)
    return {k: float(np.mean(v)) for k, v in per.items()}


def bootstrap_mean_interval(values, confidence: float = 0.95, n_boot: int = 1000,
                            seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Seeded percentile-bootstrap ``confidence`` interval of the mean of each column of ``values`` (units × columns;
    a 1-D array is one column): the units (rows: prompts, stories) are resampled with replacement ``n_boot`` times,
    the **same** resamples for every column, and the (1 − confidence)/2 and (1 + confidence)/2 quantiles of the
    resampled means are returned as two arrays (one value per column). Shared by :func:`self_bleu_table` and
    ``judge_validity.grade_interval_table``."""
    v = np.asarray(values, dtype=float)
    v = v[:, None] if v.ndim == 1 else v
    if v.ndim != 2 or v.shape[0] == 0:
        raise ValueError(f"values must be a non-empty units × columns array; got shape {np.shape(values)}")
    if not 0 < confidence < 1 or n_boot < 1:
        raise ValueError(f"need 0 < confidence < 1 and n_boot >= 1; got {confidence}, {n_boot}")
    lo, hi = bootstrap_interval(v.shape[0], lambda idx: np.stack([v[:, j][idx].mean(axis=1) for j in range(v.shape[1])], axis=1),
                                confidence, n_boot, seed)  # column by column, the same resamples
    return np.atleast_1d(lo), np.atleast_1d(hi)


def self_bleu_table(per_prompt: Mapping[str, Mapping[int, Sequence[float]]], confidence: float = 0.95,
                    n_boot: int = 1000, seed: int = 0):
    """Long table of self-BLEU curves with intervals: one row per (model, k) with ``self-BLEU`` (the mean over
    prompts, equal to :func:`self_bleu_curve`), ``ci_low`` and ``ci_high`` (:func:`bootstrap_mean_interval` over the
    prompts, each model with its own seeded resamples, shared by all its k), and ``prompts``.
    ``per_prompt[model]`` is :func:`self_bleu_per_prompt`'s ``{k: per-prompt values}``."""
    import pandas as pd

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
    from nltk.translate.bleu_score import corpus_bleu

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


def choose_k_or_none(curve: Mapping[int, float], rule: str = "knee", *, eps: float = 0.01,
                     threshold: float | None = None) -> int | None:
    """:func:`choose_k`, or None when the curve is flat (its range is below ``eps``): a rule that reads a knee off a
    curve needs a curve, and on a flat one any k is as good as another."""
    vals = [float(v) for v in curve.values()]
    if vals and max(vals) - min(vals) < eps:
        return None
    return choose_k(curve, rule, eps=eps, threshold=threshold)


def choose_k(
    curve: Mapping[int, float],
    rule: str = "knee",
    *,
    eps: float = 0.01,
    threshold: float | None = None,
) -> int:
    """Pick the number of completions per prompt from a self-BLEU curve ``{k: mean self-BLEU}``.

    Rules (the paper states none; it chose N = 5):

    * ``"knee"``: the smallest k such that ``|curve[k'] - curve[k]| <= eps`` for every k' >= k in the curve
      (beyond k, adding completions changes self-BLEU by at most ``eps``).
    * ``"slope"``: the smallest k such that every later step changes by at most ``eps`` per added completion,
      ``|curve[k_{j+1}] - curve[k_j]| / (k_{j+1} - k_j) <= eps`` for all k_j >= k.
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
    if rule == "knee":
        for i, k in enumerate(ks):
            if np.all(np.abs(vs[i:] - vs[i]) <= eps):
                return k
    elif rule == "slope":
        steps = np.abs(np.diff(vs)) / np.diff(np.array(ks, dtype=float))
        for i, k in enumerate(ks):
            if np.all(steps[i:] <= eps):
                return k
    else:
        raise ValueError(f'rule must be "knee", "slope" or "threshold"; got {rule!r}')
    return ks[-1]  # unreachable: the last k always satisfies both rules


# ============================================================================ ROUGE
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_SPACES = re.compile(r"\s+")
_VALID = re.compile(r"^[a-z0-9]+$")
_STEMS: dict[str, str] = {}
_SCORES = ("precision", "recall", "fmeasure")


@lru_cache(maxsize=1)
def _porter():
    from nltk.stem import porter  # the stemmer rouge-score uses

    return porter.PorterStemmer()


def _stem(word: str) -> str:
    s = _STEMS.get(word)
    if s is None:
        s = _STEMS[word] = _porter().stem(word)
    return s


def rouge_tokenize(text: str, use_stemmer: bool = True) -> list[str]:
    """rouge-score's tokenisation (lower-case, non-alphanumerics -> space, Porter stem words longer than 3 chars)."""
    toks = _SPACES.split(_NON_ALNUM.sub(" ", text.lower()))
    if use_stemmer:
        toks = [_stem(t) if len(t) > 3 else t for t in toks]
    return [t for t in toks if _VALID.match(t)]


def _check_score(score: str) -> str:
    if score not in _SCORES:
        raise ValueError(f"score must be one of {_SCORES}; got {score!r}")
    return score


@lru_cache(maxsize=8)
def _rouge_scorer(n: int, use_stemmer: bool):
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer([f"rouge{n}"], use_stemmer=use_stemmer)


def rouge2(prediction: str, target: str, *, score: str = "fmeasure", use_stemmer: bool = True, n: int = 2) -> float:
    """ROUGE-n (default 2) of ``prediction`` (e.g. a completion) against ``target`` (e.g. the original ending),
    computed by the ``rouge-score`` package (Porter stemmer on by default); ``score`` picks P, R or F (default F)."""
    _check_score(score)
    if n < 1:
        raise ValueError(f"n must be >= 1; got {n}")
    return float(getattr(_rouge_scorer(n, use_stemmer).score(target, prediction)[f"rouge{n}"], score))


def _ngram_count_matrices(token_lists: Sequence[Sequence[str]], n: int, vocab: dict | None = None):
    vocab = {} if vocab is None else vocab
    indptr = [0]
    indices: list[int] = []
    data: list[int] = []
    for toks in token_lists:
        c = Counter(tuple(toks[i : i + n]) for i in range(len(toks) - n + 1))
        for g, v in c.items():
            indices.append(vocab.setdefault(g, len(vocab)))
            data.append(v)
        indptr.append(len(indices))
    return vocab, (indptr, indices, data)


def _to_csr(parts, n_cols: int):
    from scipy import sparse

    indptr, indices, data = parts
    return sparse.csr_matrix(
        (np.asarray(data, dtype=np.int64), np.asarray(indices, dtype=np.int64), np.asarray(indptr, dtype=np.int64)),
        shape=(len(indptr) - 1, max(n_cols, 1)),
    )


def _prf(overlap: np.ndarray, pred_total: np.ndarray, target_total: np.ndarray, score: str) -> np.ndarray:
    """rouge-score's formulas (same float operations, so bit-identical)."""
    p = overlap / np.maximum(pred_total, 1)
    r = overlap / np.maximum(target_total, 1)
    if score == "precision":
        return p
    if score == "recall":
        return r
    with np.errstate(divide="ignore", invalid="ignore"):
        f = 2 * p * r / (p + r)
    return np.where(p + r > 0, f, 0.0)


def _rouge_inputs(predictions, targets, n, use_stemmer):
    if n < 1:
        raise ValueError(f"n must be >= 1; got {n}")
    for name, texts in (("predictions", predictions), ("targets", targets)):
        if isinstance(texts, str):
            raise ValueError(f"{name} must be a list of strings, got a single string")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise ValueError(f"{name}[{i}] is {type(t).__name__}, expected str")
    vocab, pp = _ngram_count_matrices([rouge_tokenize(t, use_stemmer) for t in predictions], n)
    vocab, tp = _ngram_count_matrices([rouge_tokenize(t, use_stemmer) for t in targets], n, vocab)
    return _to_csr(pp, len(vocab)), _to_csr(tp, len(vocab))


def rouge_n_matrix(
    predictions: Sequence[str],
    targets: Sequence[str] | None = None,
    *,
    n: int = 2,
    score: str = "fmeasure",
    use_stemmer: bool = True,
) -> np.ndarray:
    """``M[i, j]`` = ROUGE-n of ``predictions[i]`` against ``targets[j]`` (``targets`` defaults to ``predictions``);
    equal to :func:`rouge2` on every pair, computed with sparse matrix products."""
    _check_score(score)
    targets = predictions if targets is None else targets
    P, T = _rouge_inputs(predictions, targets, n, use_stemmer)
    overlap = np.zeros((P.shape[0], T.shape[0]))
    cmax = int(max(P.data.max(initial=0), T.data.max(initial=0)))
    for t in range(1, cmax + 1):
        A = (P >= t).astype(np.int64)
        B = (T >= t).astype(np.int64)
        overlap += (A @ B.T).toarray()
    pt = np.asarray(P.sum(axis=1), dtype=np.float64).reshape(-1, 1)
    tt = np.asarray(T.sum(axis=1), dtype=np.float64).reshape(1, -1)
    return _prf(overlap, pt, tt, score)


def rouge2_pairs(
    predictions: Sequence[str],
    targets: Sequence[str],
    *,
    n: int = 2,
    score: str = "fmeasure",
    use_stemmer: bool = True,
) -> np.ndarray:
    """ROUGE-n of ``predictions[i]`` against ``targets[i]`` for each i (e.g. completions vs original endings)."""
    _check_score(score)
    if len(predictions) != len(targets):
        raise ValueError(f"predictions and targets differ in length ({len(predictions)} vs {len(targets)})")
    P, T = _rouge_inputs(predictions, targets, n, use_stemmer)
    overlap = np.zeros(P.shape[0])
    cmax = int(max(P.data.max(initial=0), T.data.max(initial=0)))
    for t in range(1, cmax + 1):
        overlap += np.asarray((P >= t).multiply(T >= t).sum(axis=1), dtype=np.float64).ravel()
    pt = np.asarray(P.sum(axis=1), dtype=np.float64).ravel()
    tt = np.asarray(T.sum(axis=1), dtype=np.float64).ravel()
    return _prf(overlap, pt, tt, score)


def max_pairwise_rouge2(
    texts: Sequence[str], *, n: int = 2, score: str = "fmeasure", use_stemmer: bool = True
) -> np.ndarray:
    """For each text, its highest ROUGE-n against any *other* text of the set (Rathod et al. 2024's "max ROUGE-2 among
    generations"); ``.max()`` of the result is the set's maximum.  For P/R, text i is the prediction."""
    if isinstance(texts, str) or len(texts) < 2:
        raise ValueError("max_pairwise_rouge2 needs a list of at least 2 texts")
    m = rouge_n_matrix(texts, None, n=n, score=score, use_stemmer=use_stemmer)
    np.fill_diagonal(m, -np.inf)
    return m.max(axis=1)


# ============================================================================ nearest training story, copied runs
def _word_tokenizer(tokenizer: str | Tokenizer) -> Tokenizer:
    if callable(tokenizer):
        return tokenizer
    if tokenizer == "words":
        return lambda t: rouge_tokenize(t, use_stemmer=False)
    if tokenizer == "rouge":
        return lambda t: rouge_tokenize(t, use_stemmer=True)
    if tokenizer == "whitespace":
        return str.split
    raise ValueError(f'tokenizer must be "words", "rouge", "whitespace" or a callable; got {tokenizer!r}')


class Match(NamedTuple):
    """A training story close to a text: ``overlap`` distinct shared n-grams, ``score`` (see ``NGramIndex.closest``)."""

    story_id: int
    overlap: int
    score: float


@dataclass(frozen=True)
class SharedRun:
    """The longest run of consecutive words a text shares with one training story."""

    length: int  # words in the run
    text_words: int  # words in the text (after tokenisation)
    fraction: float  # length / text_words (0 for an empty text)
    story_id: int  # -1 when nothing is shared
    text_start: int  # word offset of the run in the text
    story_start: int  # word offset of the run in the story
    words: tuple[str, ...]
    exact_copy: bool


def _is_copy(length: int, text_words: int, min_words: int | None, min_fraction: float | None, fraction_min_words: int) -> bool:
    if min_words is not None and length >= min_words:
        return True
    return bool(
        min_fraction is not None and text_words > 0 and length >= fraction_min_words and length / text_words >= min_fraction
    )


def _suffix_array(x: np.ndarray) -> np.ndarray:
    """Suffix array by prefix doubling (numpy lexsort per round); shorter suffix first on a common prefix."""
    n = x.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    rank = np.unique(x, return_inverse=True)[1].astype(np.int64).ravel()
    k = 1
    while True:
        second = np.full(n, -1, dtype=np.int64)
        if k < n:
            second[: n - k] = rank[k:]
        sa = np.lexsort((second, rank))
        r, s = rank[sa], second[sa]
        new = np.empty(n, dtype=np.int64)
        new[0] = 0
        np.cumsum((r[1:] != r[:-1]) | (s[1:] != s[:-1]), out=new[1:])
        rank = np.empty(n, dtype=np.int64)
        rank[sa] = new
        if new[-1] == n - 1 or k >= n:
            return sa
        k *= 2


class NGramIndex:
    """Inverted index ``n-gram -> ids of the training stories that contain it`` (plus, lazily, a suffix array).

    ``stories``: the training stories (strings); ``n``: the n-gram order for :meth:`closest`; ``tokenizer``:
    ``"words"`` | ``"rouge"`` | ``"whitespace"`` | callable (see module docstring).
    """

    _SEP = 1  # story separator in the suffix-array alphabet; token id t is stored as t + 2, unknown query words as 0

    def __init__(self, stories: Sequence[str], n: int = 3, tokenizer: str | Tokenizer = "words"):
        if isinstance(stories, str) or len(stories) == 0:
            raise ValueError("NGramIndex needs a non-empty list of training stories")
        if not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be an integer >= 1; got {n!r}")
        for i, s in enumerate(stories):
            if not isinstance(s, str):
                raise ValueError(f"stories[{i}] is {type(s).__name__}, expected str")
        self.stories = list(stories)
        self.n = int(n)
        self.tokenizer = tokenizer
        self._tok = _word_tokenizer(tokenizer)
        self.vocab: dict[str, int] = {}
        ids = [[self.vocab.setdefault(w, len(self.vocab)) for w in self._tok(s)] for s in self.stories]
        S = len(ids)
        self.lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=S)
        total = int(self.lengths.sum())
        self.tokens = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=total)
        self.starts = np.zeros(S + 1, dtype=np.int64)
        np.cumsum(self.lengths, out=self.starts[1:])
        story = np.repeat(np.arange(S, dtype=np.int64), self.lengths)
        pos = np.arange(total, dtype=np.int64) - self.starts[:-1][story]
        v = self._v = max(len(self.vocab), 1)
        # level m (m >= 2): sorted unique keys (id of the (m-1)-gram) * V + next token; a gram's id is its rank there
        self._levels: list[np.ndarray] = []
        gram = self.tokens
        valid = np.ones(total, dtype=bool)
        for m in range(2, self.n + 1):
            valid = pos + m <= self.lengths[story]
            where = np.flatnonzero(valid)
            keys = gram[where] * v + self.tokens[where + m - 1]
            uniq, inv = np.unique(keys, return_inverse=True)
            self._levels.append(uniq)
            gram = np.full(total, -1, dtype=np.int64)
            gram[where] = inv
        n_grams = v if self.n == 1 else max(int(self._levels[-1].size), 1)
        pair = np.unique(gram[valid] * S + story[valid])
        grams, post = pair // S, pair % S
        self._post = post
        self._ptr = np.searchsorted(grams, np.arange(n_grams + 1))
        self.story_ngrams = np.bincount(post, minlength=S)  # distinct n-grams per story
        self._sa: np.ndarray | None = None
        self._buf: bytes | None = None

    def __len__(self) -> int:
        return len(self.stories)

    def __repr__(self) -> str:
        return f"NGramIndex({len(self)} stories, {self.tokens.size} words, n={self.n}, tokenizer={self.tokenizer!r})"

    # ------------------------------------------------------------------ lookups
    def _ids(self, text: str) -> np.ndarray:
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}")
        words = self._tok(text)
        return np.fromiter((self.vocab.get(w, -1) for w in words), dtype=np.int64, count=len(words))

    def _gram_ids(self, ids: np.ndarray) -> np.ndarray:
        """Id of the order-n gram starting at each position of ``ids`` (-1: not in the corpus)."""
        if ids.size < self.n:
            return np.zeros(0, dtype=np.int64)
        g = ids.copy()
        for m, keys in enumerate(self._levels, start=2):
            nxt = ids[m - 1 :]
            g = g[: nxt.size]
            ok = (g >= 0) & (nxt >= 0)
            key = np.where(ok, g * self._v + nxt, 0)
            idx = np.searchsorted(keys, key)
            idx_c = np.minimum(idx, keys.size - 1)
            found = ok & (idx < keys.size) & (keys[idx_c] == key)
            g = np.where(found, idx, -1)
        return g

    def closest(self, text: str, top: int = 1, *, metric: str = "overlap") -> list[Match]:
        """The ``top`` training stories sharing the most distinct n-grams with ``text``, best first (ties: lower id).

        ``metric="overlap"``: rank by the number of shared distinct n-grams; ``score`` = that number divided by
        the number of distinct n-grams of ``text`` (the share of the text's n-grams found in the story).
        ``metric="jaccard"``: rank by ``overlap / (text n-grams + story n-grams - overlap)``.
        Returns ``[]`` when ``text`` shares no n-gram with any story (or has fewer than n words).
        """
        if top < 1:
            raise ValueError(f"top must be >= 1; got {top}")
        if metric not in ("overlap", "jaccard"):
            raise ValueError(f'metric must be "overlap" or "jaccard"; got {metric!r}')
        ids = self._ids(text)
        if ids.size < self.n:
            return []
        # distinct n-grams of the text, including those absent from the corpus (they count in the denominator)
        windows = np.lib.stride_tricks.sliding_window_view(ids, self.n)
        n_text = len({tuple(w) for w in windows.tolist()})
        g = np.unique(self._gram_ids(ids))
        g = g[g >= 0]
        if g.size == 0:
            return []
        a, b = self._ptr[g], self._ptr[g + 1]
        lens = b - a
        offs = np.repeat(a - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
        hits = self._post[offs + np.arange(int(lens.sum()))]
        counts = np.bincount(hits, minlength=len(self.stories))
        cand = np.flatnonzero(counts)
        ov = counts[cand]
        if metric == "overlap":
            score = ov / n_text
        else:
            score = ov / (n_text + self.story_ngrams[cand] - ov)
        order = np.lexsort((cand, -score))[:top]
        return [Match(int(cand[i]), int(ov[i]), float(score[i])) for i in order]

    # ------------------------------------------------------------------ longest shared run (suffix array)
    def _ensure_suffix_array(self) -> None:
        if self._sa is not None:
            return
        S = len(self.stories)
        seq = np.empty(self.tokens.size + S, dtype=np.int64)
        story_of_tok = np.repeat(np.arange(S, dtype=np.int64), self.lengths)
        seq[np.arange(self.tokens.size) + story_of_tok] = self.tokens + 2
        seq[self.starts[1:] + np.arange(S)] = self._SEP
        self._seq = seq
        self._seq_starts = self.starts[:-1] + np.arange(S)  # story s begins at this offset in seq
        self._sa = _suffix_array(seq)
        self._buf = seq.astype(">u4").tobytes()  # big-endian: bytes order == token-sequence order

    def longest_shared_run(
        self,
        text: str,
        *,
        min_words: int | None = 20,
        min_fraction: float | None = 0.5,
        fraction_min_words: int = 10,
    ) -> SharedRun:
        """Longest run of consecutive words of ``text`` that occurs in one training story (exact).

        ``exact_copy`` is True when the run has at least ``min_words`` words, or when it covers at least
        ``min_fraction`` of the text's words and has at least ``fraction_min_words`` words (so that a 3-word
        completion is not a "copy"); pass ``None`` to disable a criterion.
        """
        ids = self._ids(text)
        nw = int(ids.size)
        best, bp, bs = 0, 0, -1
        if nw:
            self._ensure_suffix_array()
            sa, buf, seq = self._sa, self._buf, self._seq
            q = np.where(ids >= 0, ids + 2, 0)
            qb = q.astype(">u4").tobytes()
            n_sa = sa.size
            for p in range(nw):
                m = nw - p
                if m <= best:
                    break
                pat = qb[4 * p :]
                i = bisect.bisect_left(sa, pat, key=lambda s: buf[4 * s : 4 * s + 4 * m])
                for j in (i - 1, i):
                    if 0 <= j < n_sa:
                        s = int(sa[j])
                        a = seq[s : s + m]
                        diff = np.flatnonzero(a != q[p : p + a.size])
                        lcp = int(diff[0]) if diff.size else int(a.size)
                        if lcp > best:
                            best, bp, bs = lcp, p, s
        if best == 0:
            return SharedRun(0, nw, 0.0, -1, 0, 0, (), False)
        story = int(np.searchsorted(self._seq_starts, bs, side="right") - 1)
        words = tuple(self._tok(text))[bp : bp + best]
        return SharedRun(
            length=best,
            text_words=nw,
            fraction=best / nw,
            story_id=story,
            text_start=bp,
            story_start=int(bs - self._seq_starts[story]),
            words=words,
            exact_copy=_is_copy(best, nw, min_words, min_fraction, fraction_min_words),
        )


def longest_common_substring_words(
    text: str,
    index_or_corpus: NGramIndex | Sequence[str],
    *,
    min_words: int | None = 20,
    min_fraction: float | None = 0.5,
    fraction_min_words: int = 10,
    tokenizer: str | Tokenizer = "words",
) -> SharedRun:
    """The longest run of consecutive words ``text`` shares with any training story (see
    :meth:`NGramIndex.longest_shared_run`).  Pass an :class:`NGramIndex` to reuse it across texts; a list of
    stories builds a throw-away index with ``tokenizer`` (an index keeps its own tokenizer)."""
    index = index_or_corpus if isinstance(index_or_corpus, NGramIndex) else NGramIndex(index_or_corpus, n=1, tokenizer=tokenizer)
    return index.longest_shared_run(text, min_words=min_words, min_fraction=min_fraction, fraction_min_words=fraction_min_words)


# ----------------------------------------------------------------------------- loops and endings


def repeated_run(text: str, n: int = 6) -> bool:
    """True when some run of ``n`` consecutive words (whitespace tokens, lower-cased, outer punctuation kept)
    occurs at least twice in ``text``: the signature of a decoder stuck in a loop."""
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    words = text.lower().split()
    seen = set()
    for i in range(len(words) - n + 1):
        gram = tuple(words[i : i + n])
        if gram in seen:
            return True
        seen.add(gram)
    return False


def continuation_health(rows: Sequence[dict], n: int = 6, confidence: float = 0.95) -> dict:
    """Share of completions that closed the story with ``<|endoftext|>`` before the length cap (the row's
    ``ended`` flag) and share that contain a repeated ``n``-word run (:func:`repeated_run`), each with a Wilson
    ``confidence`` interval; ``rows`` are completion rows of :mod:`helpers.generation`."""
    if not rows:
        raise ValueError("no completion rows")
    missing = [i for i, r in enumerate(rows) if "ended" not in r]
    if missing:
        raise ValueError(f"{len(missing)} row(s) have no 'ended' flag (completions cached by an older version)")
    total = len(rows)
    ended = sum(bool(r["ended"]) for r in rows)
    loops = sum(repeated_run(r["completion"], n) for r in rows)
    out = {"completions": total, "ended (%)": 100.0 * ended / total, "loops (%)": 100.0 * loops / total,
           "mean words": float(np.mean([len(r["completion"].split()) for r in rows]))}
    for key, k in (("ended", ended), ("loops", loops)):
        lo, hi = wilson_interval(k, total, confidence)
        out[f"{key} CI low"], out[f"{key} CI high"] = 100.0 * lo, 100.0 * hi
    return out


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``k / n`` (as fractions)."""
    from statistics import NormalDist

    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # the interval contains p; clamping keeps that true under rounding (p = 1 gave an upper end of 1 - 1e-16)
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


# ============================================================================ memorisation against the training set
def max_rouge2_train(
    completions: Sequence[str],
    index: NGramIndex,
    *,
    shortlist: int = 20,
    n: int = 2,
    score: str = "fmeasure",
    use_stemmer: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """For each completion, its highest ROUGE-n against any training story of ``index`` and that story's id (-1 when
    the completion shares no n-gram of the index's order with any story, score 0).

    Scoring every (completion, story) pair is quadratic; the stories scored are a **shortlist**: the ``shortlist``
    stories sharing the most distinct n-grams with each completion (:meth:`NGramIndex.closest`), pooled over all
    completions (every completion is scored against the union of the shortlists: one sparse matrix product). A story
    outside every shortlist shares fewer of the completion's n-grams than the shortlisted ones, so the maximum is a
    lower bound that is exact unless the best story ranks below ``shortlist`` on n-gram overlap."""
    if shortlist < 1:
        raise ValueError(f"shortlist must be >= 1; got {shortlist}")
    cand = sorted({m.story_id for c in completions for m in index.closest(c, shortlist)})
    best = np.zeros(len(completions))
    best_id = np.full(len(completions), -1, dtype=np.int64)
    if cand and len(completions):
        m = rouge_n_matrix(list(completions), [index.stories[j] for j in cand], n=n, score=score, use_stemmer=use_stemmer)
        arg = m.argmax(axis=1)
        best = m[np.arange(len(completions)), arg]
        best_id = np.where(best > 0, np.asarray(cand, dtype=np.int64)[arg], -1)
    return best, best_id


_CAP = re.compile(r"[A-Z][a-z]+")
_SENT_END = re.compile(r"[.!?\"”:]\s*$")
NAME = "Xname"  # a placeholder no story uses (the index lower-cases it)


def story_names(texts: Iterable[str], min_count: int = 1) -> set[str]:
    """Words used as proper names in ``texts``: capitalised words seen at least ``min_count`` times in the middle of a
    sentence (not after ``.!?:`` or an opening quote) and never lower-cased. "Lily", "Tom", "Max" qualify; "Once" or
    "The" (sentence starts) and "I" do not."""
    cap: dict[str, int] = {}
    lower: set[str] = set()
    for t in texts:
        words = t.split()
        for j, w in enumerate(words):
            core = w.strip(".,!?;:\"'“”‘’()")
            if not core:
                continue
            if core.islower():
                lower.add(core)
            elif _CAP.fullmatch(core) and j > 0 and not _SENT_END.search(words[j - 1]) and not w[0] in "\"“‘'":
                cap[core] = cap.get(core, 0) + 1
    return {w for w, c in cap.items() if c >= min_count and w.lower() not in lower}


def mask_names(text: str, names: set[str] | frozenset[str]) -> str:
    """``text`` with every occurrence of a word of ``names`` (whole word, any position) replaced by :data:`NAME`, so that
    two stories that differ only by their characters' names become identical."""
    if not names:
        return text
    return re.sub(r"\b[A-Z][a-z]+\b", lambda m: NAME if m.group(0) in names else m.group(0), text)


def template_matches(
    completions: Sequence[str],
    stories: Sequence[str],
    *,
    names: set[str] | None = None,
    n: int = 3,
    min_words: int = 20,
    index: NGramIndex | None = None,
    masked_index: NGramIndex | None = None,
    plain_runs: Sequence[int] | None = None,
) -> list[dict]:
    """The template check of memorisation: a completion that retells a training story with the names swapped is a
    copy that :meth:`NGramIndex.longest_shared_run` misses, because every name breaks the run. Names (``names``, by
    default :func:`story_names` of stories and completions) are masked in both, and the longest shared run is
    measured again. Per completion: ``run`` (words shared, names kept), ``masked_run`` (names masked), ``story_id``
    (of the masked match) and ``template`` (True when the masked run reaches ``min_words`` and the plain one does
    not: a copy hidden only by names). Pass ``index`` (an :class:`NGramIndex` of the *unmasked* stories) and
    ``masked_index`` (one of the stories after :func:`mask_names` with the same ``names``) to reuse them, and
    ``plain_runs`` (the completions' longest shared runs with the unmasked stories) when they are known already."""
    if names is None:
        names = story_names([*stories, *completions])
    if masked_index is None:
        masked_index = NGramIndex([mask_names(s, names) for s in stories], n=n)
    if plain_runs is None:
        plain_index = index if index is not None else NGramIndex(list(stories), n=n)
        plain_runs = [plain_index.longest_shared_run(c).length for c in completions]
    out = []
    for c, plain in zip(completions, plain_runs):
        masked = masked_index.longest_shared_run(mask_names(c, names))
        out.append({"run": int(plain), "masked_run": masked.length, "story_id": masked.story_id,
                    "template": masked.length >= min_words > plain})
    return out
