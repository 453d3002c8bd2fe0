"""The budget corpora as files: the data stage that writes them (:func:`prepare_corpora`: the nested TinyStories
budgets and BabyLM samples, registered in the ledger) and the readers that check them against the ledger before
use (:func:`read_corpus`, :func:`verified_corpus`, :func:`iter_texts`, :class:`CorpusRows`, :class:`CorpusShelf`).

Scale: :func:`prepare_corpora` takes the stories' word counts when known, so each story is read once, when its
budget files are written; :func:`iter_texts` streams a corpus file; :class:`CorpusRows` reads rows from the file
when asked for, holding one byte offset per row (the paper's tiny-440M: 2.4 GB of stories, ~5 GB as Python rows,
~21 MB of offsets); :class:`CorpusShelf` gives a notebook that visits several corpora one at a time (held, or as
:class:`CorpusRows` with ``lazy=True``: notebook 03).
"""
from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Mapping, Sequence as SequenceABC
from typing import Iterable, Iterator, Sequence

import numpy as np

from helpers.core.artifacts import iter_rows, read_jsonl, write_jsonl
from helpers.core.config import require_output
from helpers.data.budgets import checked_word_counts, fmt_words, plan_budgets, shuffled_order
from helpers.data.corpora import Document
from helpers.data.ledger import CorpusEntry, Ledger


def prepare_corpora(
    out_dir: str | Path,
    tiny_stories: Sequence[str],
    tiny_files: dict[str, str],
    baby_docs: Sequence[Document],
    baby_files: dict[str, str],
    tiny_budgets: Iterable[int],
    baby_budgets: Iterable[int],
    seed: int,
    heldout_max_words: int = 0,
    full_budget: int | None = None,
    baby_full_budget: int | None = None,
    baby_heldout_docs: Sequence[Document] | None = None,
    tiny_word_counts: Sequence[int] | None = None,
) -> Ledger:
    """Write the nested TinyStories budgets (``tiny-<B>.jsonl``) and BabyLM samples (``baby-<B>.jsonl``) under
    ``out_dir`` and register them in ``out_dir/ledger.json``. Each row: ``{"id", "source", "text"}``; TinyStories
    ids are indices into ``tiny_stories`` so later stages can point back at the exact training story.
    With ``heldout_max_words`` the stories outside the largest budget (up to that many words) are written to
    ``tiny-heldout.jsonl`` (held-out stories with real boundaries, used for validation losses), and likewise the
    BabyLM documents outside the largest BabyLM sample to ``baby-heldout.jsonl``.
    ``full_budget``: the largest TinyStories budget means "all stories but the held-out reserve" (see
    :func:`plan_budgets`); its ledger entry keeps the nominal budget and records the words actually taken.
    ``baby_full_budget``: the same for the largest BabyLM sample (e.g. "all of train_10M", nominally 10M words).
    ``baby_heldout_docs`` (e.g. the BabyLM dev files): the BabyLM held-out documents come from them instead of the
    training documents, so that a full BabyLM sample keeps every training document.
    ``tiny_word_counts``: the stories' word counts when known (a lazy corpus's ``word_counts``); then each story is
    read once, when its budget files are written."""
    out = Path(out_dir)
    ledger = Ledger(out / "ledger.json")
    counts = checked_word_counts(tiny_stories, tiny_word_counts)
    nested, held = plan_budgets(tiny_stories, tiny_budgets, seed, heldout_max_words, full_budget, counts)
    if heldout_max_words:
        write_jsonl(out / "tiny-heldout.jsonl", ({"id": i, "source": "tinystories", "text": tiny_stories[i]} for i in held))
        ledger.record_file(out / "tiny-heldout.jsonl")
    for b, idx in nested.items():
        name = f"tiny-{fmt_words(b)}"
        write_jsonl(out / f"{name}.jsonl", ({"id": i, "source": "tinystories", "text": tiny_stories[i]} for i in idx))
        note = (f"all {len(idx):,} stories but the held-out reserve ({len(held):,} stories); nominal {fmt_words(b)}"
                if full_budget is not None and b == int(full_budget) else "")
        ledger.add(
            CorpusEntry(name, "tiny", {"tinystories": int(sum(counts[i] for i in idx))}, seed, dict(tiny_files), b,
                        path=f"{name}.jsonl", note=note),
            save=False,
        )
    reserve = 0 if baby_heldout_docs is not None else heldout_max_words
    baby_nested, baby_held = plan_budgets([d.text for d in baby_docs], baby_budgets, seed, reserve, baby_full_budget) \
        if baby_budgets else ({}, [])
    if heldout_max_words and baby_budgets:
        if baby_heldout_docs is not None:  # held-out documents from separate files (the BabyLM dev set)
            rows, n = [], 0
            for i in shuffled_order(len(baby_heldout_docs), seed):
                d = baby_heldout_docs[i]
                if n + d.words > heldout_max_words:
                    break
                rows.append({"id": f"dev-{i}", "source": d.source, "text": d.text})
                n += d.words
            write_jsonl(out / "baby-heldout.jsonl", rows)
        else:
            write_jsonl(out / "baby-heldout.jsonl", ({"id": i, "source": baby_docs[i].source, "text": baby_docs[i].text} for i in baby_held))
        ledger.record_file(out / "baby-heldout.jsonl")
    for b, idx in baby_nested.items():
        name = f"baby-{fmt_words(b)}"
        write_jsonl(out / f"{name}.jsonl", ({"id": i, "source": baby_docs[i].source, "text": baby_docs[i].text} for i in idx))
        by_src: dict[str, int] = {}
        for i in idx:
            by_src[baby_docs[i].source] = by_src.get(baby_docs[i].source, 0) + baby_docs[i].words
        whole = baby_full_budget is not None and b == int(baby_full_budget)
        note = (f"all {len(idx):,} documents but the held-out reserve ({len(baby_held):,}); nominal {fmt_words(b)}, "
                f"which the challenge rule counts it as" if whole else "")
        ledger.add(CorpusEntry(name, "baby", by_src, seed, dict(baby_files), b, path=f"{name}.jsonl", note=note,
                               counted_as=b if whole else None), save=False)
    ledger.save()
    return ledger


def read_corpus(path: str | Path) -> list[dict]:
    """Rows of a corpus written by :func:`prepare_corpora` (or a generated corpus). A corpus registered in the
    ledger next to it is first checked against the ledger's size and SHA-256 (see :meth:`helpers.data.ledger.Ledger.verify`), so a
    truncated or edited file stops with a message instead of feeding a model silently."""
    path = Path(path)
    if (path.parent / "ledger.json").is_file():
        Ledger(path.parent / "ledger.json").verify_file(path)
    require_output(path, "corpus")  # missing (notebook 01 never ran): a message naming the notebook to run
    return read_jsonl(path)


def verified_corpus(path: str | Path) -> Path:
    """``path`` after the checks of :func:`read_corpus` (ledger size and SHA-256, present), without reading it."""
    path = Path(path)
    if (path.parent / "ledger.json").is_file():
        Ledger(path.parent / "ledger.json").verify_file(path)
    require_output(path, "corpus")
    return path


def iter_texts(path: str | Path, verify: bool = True) -> Iterator[str]:
    """The ``text`` of every row of a corpus file, streamed (checked like :func:`read_corpus` first unless not
    ``verify``, e.g. when :func:`verified_corpus` already checked it): memory stays one row however large the
    corpus (the paper's tiny-440M is 2.4 GB)."""
    if verify:
        verified_corpus(path)
    for r in iter_rows(path):
        yield r["text"]


class CorpusRows(SequenceABC):
    """The rows of a corpus file, read from disk when asked for: a list of rows to code that indexes, slices and
    iterates it, holding only one byte offset per row (8 bytes; checked like :func:`read_corpus` once, when indexed).
    ``field="text"`` gives the rows' texts instead (:meth:`texts`). A slice is a :class:`CorpusRows` of those rows:
    cheap, and picklable, so a worker process reads its own rows (memorisation's shards)."""

    def __init__(self, path: str | Path, field: str | None = None, offsets: np.ndarray | None = None):
        self.path, self.field = Path(path), field
        if offsets is None:
            verified_corpus(self.path)
            offsets = self._index()
        self.offsets = offsets
        self._fh = None

    def _index(self) -> np.ndarray:
        out, pos = [], 0
        with open(self.path, "rb") as f:
            for line in f:
                if line.strip():
                    out.append(pos)
                pos += len(line)
        return np.asarray(out, dtype=np.int64)

    def texts(self) -> "CorpusRows":
        """The same rows' ``text`` fields (for code that takes a sequence of strings)."""
        return CorpusRows(self.path, "text", self.offsets)

    def _read(self, offset: int):
        if self._fh is None:
            self._fh = open(self.path, "rb")
        self._fh.seek(int(offset))
        line = self._fh.readline()
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{self.path} at byte {offset}: malformed JSON line ({e.msg})") from None
        return row if self.field is None else row[self.field]

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return CorpusRows(self.path, self.field, self.offsets[i])
        return self._read(self.offsets[i])

    def __iter__(self):
        for off in self.offsets:
            yield self._read(off)

    def __getstate__(self) -> dict:  # no open file across processes
        return {**self.__dict__, "_fh": None}

    def __del__(self):
        if getattr(self, "_fh", None) is not None:
            self._fh.close()


class CorpusShelf(Mapping):
    """``{name: rows}`` of the corpora ``<folder>/<name>.jsonl`` for ``names``, read (:func:`read_corpus`, with its
    checks) when first asked for and kept until another one is asked for: a loop over the corpora holds one at a
    time. Asking again for the one held costs nothing; asking for an earlier one reads it again. ``lazy``: each
    corpus as :class:`CorpusRows` (its rows read from disk when used; only their offsets held)."""

    def __init__(self, folder: str | Path, names: Iterable[str], lazy: bool = False):
        self.folder, self.names, self.lazy = Path(folder), list(dict.fromkeys(names)), lazy
        for name in self.names:  # a missing corpus stops here, naming the notebook to run, not at first use
            require_output(self.folder / f"{name}.jsonl", "corpus")
        self._held: tuple[str, list[dict]] | None = None
        self.reads = 0  # files read so far (what the one-at-a-time rule costs)

    def __getitem__(self, name: str) -> list[dict]:
        if name not in self.names:
            raise KeyError(name)
        if self._held is None or self._held[0] != name:
            self._held = None  # the one held goes before the next is read
            path = self.folder / f"{name}.jsonl"
            self._held = (name, CorpusRows(path) if self.lazy else read_corpus(path))
            self.reads += 1
        return self._held[1]

    def __contains__(self, name: object) -> bool:  # without reading the corpus (Mapping's default would)
        return name in self.names

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


def write_corpus(path: str | Path, rows: Iterable[dict]) -> Path:
    """Write a corpus (one JSON object per row, each with a ``text`` field), atomically."""
    return write_jsonl(path, rows)
