"""Corpus statistics: units, words, vocabulary and type/token ratio (:func:`corpus_stats`), the Heaps curve of
vocabulary growth (:func:`vocab_growth`), and whether a text repeats a run of words (:func:`repeated_run`, the loop
test of notebook 03's continuation health and of notebook 02's repetition fine-tuning probes).

Both take any iterable of texts (a :class:`helpers.data.story_files.FileStories` view streams) and keep only the
vocabulary (a set of types, which grows sub-linearly: Heaps' law), never a list of words.
"""
from __future__ import annotations

from array import array
from typing import Iterable, Sequence

import numpy as np

from helpers.data.corpora import EOT


def corpus_stats(texts: Iterable[str], name: str = "", unit: str = "documents") -> dict:
    """Units, words, vocabulary (case-sensitive whitespace types), type/token ratio, words per unit.

    ``unit`` says what one text is (``"stories"``; ``"paragraphs"`` for running text whose story boundaries are
    not recoverable; BabyLM's line chunks), so a paragraph count is never read as a story count.
    One pass over ``texts`` (any iterable: a :class:`FileStories` view streams); memory: one word count per text
    and the set of types."""
    counts = array("q")
    types: set[str] = set()
    for t in texts:
        ws = t.split()
        types.update(ws)
        counts.append(len(ws) - ws.count(EOT) if EOT in t else len(ws))
    lengths = np.frombuffer(counts, dtype=np.int64) if counts else np.zeros(0, int)
    words = int(lengths.sum())
    return {
        "corpus": name,
        "unit": unit,
        "units": len(lengths),
        "words": words,
        "vocabulary": len(types),
        "type/token": len(types) / words if words else float("nan"),
        "mean words/unit": float(lengths.mean()) if len(lengths) else float("nan"),
        "median words/unit": float(np.median(lengths)) if len(lengths) else float("nan"),
    }


def vocab_growth(texts: Iterable[str], n_points: int = 40, total: int | None = None,
                 spacing: str = "linear") -> tuple[list[int], list[int]]:
    """Heaps curve: (tokens seen, distinct types) at ``n_points`` evenly spaced positions of the corpus
    (``spacing="log"``: evenly spaced on a log scale from 100 words, for a log-log plot where corpora of very
    different sizes, 1M and 440M words, are all readable).

    Streams ``texts`` once and keeps only the set of types. The marks need the number of whitespace tokens up front:
    pass it as ``total`` (e.g. a lazy corpus's ``words``) to read ``texts`` (any iterable) in one pass; without it
    ``texts`` is read twice (a sequence) or listed first (an iterator). A ``total`` that does not match the texts
    raises ValueError."""
    if total is None:
        if not isinstance(texts, Sequence):
            texts = list(texts)
        total = sum(len(t.split()) for t in texts)
    if total <= 0:
        for t in texts:
            if t.split():
                raise ValueError(f"total={total} but the texts hold words")
        return [0], [0]
    if spacing == "log":
        start = min(100, total)
        marks = sorted({max(1, round(start * (total / start) ** (i / max(1, n_points - 1)))) for i in range(n_points)} | {total})
    elif spacing == "linear":
        marks = sorted({max(1, round(total * (i + 1) / n_points)) for i in range(n_points)})
    else:
        raise ValueError(f"spacing must be 'linear' or 'log', not {spacing!r}")
    seen: set[str] = set()
    xs, ys, k, pos = [], [], 0, 0  # k: next mark; pos: tokens read so far
    for t in texts:
        ws = t.split()
        j = 0
        while k < len(marks) and pos + len(ws) - j >= marks[k]:
            cut = j + marks[k] - pos
            seen.update(ws[j:cut])
            pos, j = marks[k], cut
            xs.append(marks[k])
            ys.append(len(seen))
            k += 1
        seen.update(ws[j:])
        pos += len(ws) - j
    if pos != total:
        raise ValueError(f"vocab_growth: total={total:,} but the texts hold {pos:,} whitespace tokens")
    return xs, ys


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
