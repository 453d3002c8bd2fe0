"""The index of training stories for memorisation (``docs/methods.md#memorisation``): nearest training story and
longest copied run of words.

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
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np

from helpers.diversity.rouge import Tokenizer, rouge_tokenize

__all__ = [
    "Match",
    "SharedRun",
    "NGramIndex",
    "longest_common_substring_words",
]


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
        # distinct n-grams of the text's words, including those absent from the corpus (they count in the
        # denominator); counted on the words, not the ids, where every unknown word is -1 and two n-grams that
        # differ only in unknown words would count once: the score must not depend on the index's vocabulary
        words = self._tok(text)
        n_text = len({tuple(words[i : i + self.n]) for i in range(len(words) - self.n + 1)})
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
