"""ROUGE-n of generated stories (``docs/methods.md#memorisation``) and the word tokenisation it shares with
:mod:`helpers.diversity.ngram_index`.

* :func:`rouge2` — ROUGE-2 from the ``rouge-score`` package with the Porter stemmer; we report the **F-measure** by
  default (``score="precision"|"recall"`` also available).  Argument order: ``rouge2(prediction, target)``, i.e. the
  generated completion first and the original ending second (``RougeScorer.score(target, prediction)``).
* :func:`rouge_n_matrix`, :func:`rouge2_pairs`, :func:`max_pairwise_rouge2` — the same numbers, fast: texts are
  tokenised once with rouge-score's exact tokenisation (:func:`rouge_tokenize`, stems cached per word), bigram
  counts go into a sparse matrix, and the clipped overlaps ``sum_g min(a_g, b_g)`` of all pairs come from
  ``sum_t [A >= t] [B >= t]^T``.  :func:`max_pairwise_rouge2` gives, for each generation, its highest ROUGE-2
  against any *other* generation (the "max ROUGE-2 among generations" histogram of Rathod et al. 2024).

:data:`Tokenizer` is the type of a word tokenizer (text -> words), as :func:`rouge_tokenize`; self-BLEU and the
n-gram index take one.
"""
from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np
from nltk.stem import porter  # the stemmer rouge-score uses
from rouge_score import rouge_scorer
from scipy import sparse

__all__ = [
    "rouge_tokenize",
    "rouge2",
    "rouge_n_matrix",
    "rouge2_pairs",
    "max_pairwise_rouge2",
]

Tokenizer = Callable[[str], Sequence[str]]


_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_SPACES = re.compile(r"\s+")
_VALID = re.compile(r"^[a-z0-9]+$")
_STEMS: dict[str, str] = {}
_SCORES = ("precision", "recall", "fmeasure")


@lru_cache(maxsize=1)
def _porter():
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
