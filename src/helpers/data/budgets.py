"""Word budgets (``docs/methods.md#budgets``): which stories and documents each budget holds.

* TinyStories budgets are **nested**: the stories are shuffled once with a seed, then a budget of B words takes
  whole stories from the front until adding the next would exceed B (so 0.5M ⊂ 1M ⊂ …, like the reference
  code's prefixes of the train file).
* BabyLM is sampled at document level the same way (seeded shuffle of documents, then a prefix).

The ledger that records every corpus and checks the challenge rule is :mod:`helpers.data.ledger`; the data stage
that writes the budget corpora, and the readers of those files, are :mod:`helpers.data.corpus_files`.

Scale: every function that plans budgets takes the stories' word counts (``word_counts``, e.g. a lazy corpus's,
counted once while indexing) so that the stories themselves are read once, when a budget file is written.
"""
from __future__ import annotations

import random
from typing import Iterable, Iterator, Sequence, TypeVar

import numpy as np

from helpers.data.corpora import Document, count_words

# Bump when prepare_corpora writes something new, so that finished data steps are redone (it is in their fingerprint).
FORMAT_VERSION = 2
PAPER_BUDGETS = [5_000_000, 10_000_000, 25_000_000, 50_000_000, 75_000_000, 100_000_000, 440_000_000]
TRACKS = {"strict-small": 10_000_000, "strict": 100_000_000}
T = TypeVar("T")


class BudgetError(ValueError):
    """A budget that cannot be met, or a corpus mix that breaks the challenge rule."""


def fmt_words(n: float, digits: int | None = None) -> str:
    """``1250000 -> '1.25M'``, ``50000 -> '50k'``; exact (a budget's name) unless ``digits`` significant digits are
    asked for (``fmt_words(1249200, digits=3) -> '1.25M'``, for a count shown to people)."""
    spec = f".{digits}g" if digits else "g"
    if digits:
        n = float(f"{n:.{digits}g}")  # round before the unit is chosen: 999,599 -> 1.00e6 -> '1M', not '1e+03k'
    if n >= 1_000_000:
        return f"{n / 1e6:{spec}}M"
    if n >= 1_000:
        return f"{n / 1e3:{spec}}k"
    return str(int(n))


def shuffled_order(n: int, seed: int) -> list[int]:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def in_budget_order(items: Sequence[T], seed: int) -> list[T]:
    """``items`` (stories or documents) in the order the budgets take them: the seeded shuffle of
    :func:`shuffled_order`. Every nested budget is a prefix of it, and so is the pool of a "full" budget (its
    held-out reserve comes from the end); a curve over a corpus "as the budgets grow" (e.g. vocabulary growth) reads
    the items in this order, not in file order."""
    return [items[i] for i in shuffled_order(len(items), seed)]


def iter_in_budget_order(items: Sequence[T], seed: int) -> Iterator[T]:
    """:func:`in_budget_order` one item at a time (no list of the items: for a lazy corpus's stories)."""
    for i in shuffled_order(len(items), seed):
        yield items[i]


def checked_word_counts(texts: Sequence[str], word_counts: Sequence[int] | None) -> Sequence[int]:
    """``word_counts`` when given (checked to hold one count per text), else every text's :func:`count_words`."""
    if word_counts is None:
        return [count_words(t) for t in texts]
    if len(word_counts) != len(texts):
        raise ValueError(f"{len(word_counts):,} word counts for {len(texts):,} texts")
    return word_counts


def take_prefix(word_counts: Sequence[int], order: Sequence[int], budget: int) -> list[int]:
    """Indices (in ``order``) of whole items taken until adding the next would exceed ``budget`` words."""
    total = int(sum(word_counts)) if not isinstance(word_counts, np.ndarray) else int(word_counts.sum())
    if budget > total:
        raise BudgetError(
            f"budget of {budget:,} words exceeds the {total:,} words available; lower the budget or add data"
        )
    if isinstance(word_counts, np.ndarray):  # vectorised: the longest prefix whose running sum stays within budget
        cum = np.cumsum(word_counts[np.asarray(order, dtype=np.int64)])
        return list(order[: int(np.searchsorted(cum, budget, side="right"))])
    taken, used = [], 0
    for i in order:
        if used + word_counts[i] > budget:
            break
        taken.append(i)
        used += word_counts[i]
    return taken


def nested_budgets(texts: Sequence[str], budgets: Iterable[int], seed: int,
                   word_counts: Sequence[int] | None = None) -> dict[int, list[int]]:
    """``budget -> indices`` of the texts in each budget; every smaller budget is a prefix of every larger one.
    ``word_counts``: the texts' word counts when known (then the texts are not read)."""
    counts = checked_word_counts(texts, word_counts)
    order = shuffled_order(len(texts), seed)
    return {int(b): take_prefix(counts, order, int(b)) for b in sorted(budgets)}


def reserve_heldout(texts: Sequence[str], seed: int, max_words: int,
                    word_counts: Sequence[int] | None = None) -> list[int]:
    """Indices of the held-out reserve of a "full" budget: whole stories from the **end** of the seeded shuffle, up to
    ``max_words`` words (in shuffle order). The full budget is every other story."""
    order = shuffled_order(len(texts), seed)
    out, n = [], 0
    for i in reversed(order):
        w = count_words(texts[i]) if word_counts is None else int(word_counts[i])
        if n + w > max_words:
            break
        out.append(i)
        n += w
    return out[::-1]


def plan_budgets(texts: Sequence[str], budgets: Iterable[int], seed: int, heldout_max_words: int = 0,
                 full_budget: int | None = None, word_counts: Sequence[int] | None = None) -> tuple[dict[int, list[int]], list[int]]:
    """``(budget -> indices, held-out indices)``. Without ``full_budget``, :func:`nested_budgets` and the held-out
    stories after the largest budget (:func:`heldout_stories`). With ``full_budget`` (one of ``budgets``, the largest:
    the paper's "all of TinyStories", nominally 440M words), a held-out reserve of ``heldout_max_words`` is first set
    aside from the end of the shuffle (:func:`reserve_heldout`), every budget takes a prefix of the rest, and the full
    budget takes all of the rest whatever its word count (nested still: the smaller budgets are prefixes of it).
    ``word_counts``: the texts' word counts when known (then no text is read)."""
    budgets = sorted(int(b) for b in budgets)
    counts = checked_word_counts(texts, word_counts)
    if full_budget is None:
        nested = nested_budgets(texts, budgets, seed, counts)
        return nested, (heldout_stories(texts, nested, seed, heldout_max_words, counts) if heldout_max_words else [])
    full_budget = int(full_budget)
    if not budgets or full_budget != budgets[-1]:
        raise BudgetError(f"full budget {full_budget:,} must be the largest of the budgets {budgets}")
    held = reserve_heldout(texts, seed, heldout_max_words, counts) if heldout_max_words else []
    reserved = set(held)
    pool = [i for i in shuffled_order(len(texts), seed) if i not in reserved]
    nested = {b: take_prefix(counts, pool, b) for b in budgets[:-1]}
    if budgets[:-1] and len(nested[budgets[-2]]) == len(pool):
        raise BudgetError(f"the full budget would hold no more stories than the {budgets[-2]:,}-word budget; add data")
    nested[full_budget] = pool
    return nested, held


def heldout_stories(texts: Sequence[str], nested: dict[int, list[int]], seed: int, max_words: int,
                    word_counts: Sequence[int] | None = None) -> list[int]:
    """Indices of stories in no budget (the tail of the seeded shuffle), whole stories up to ``max_words``."""
    used = set(nested[max(nested)]) if nested else set()
    rest = [i for i in shuffled_order(len(texts), seed) if i not in used]
    out, n = [], 0
    for i in rest:
        w = count_words(texts[i]) if word_counts is None else int(word_counts[i])
        if n + w > max_words:
            break
        out.append(i)
        n += w
    return out


def sample_documents(docs: Sequence[Document], budget: int, seed: int) -> list[Document]:
    """Document-level BabyLM sample of at most ``budget`` words (seeded shuffle, then prefix)."""
    idx = take_prefix([d.words for d in docs], shuffled_order(len(docs), seed), budget)
    return [docs[i] for i in idx]
