"""File-backed story views: the stories of a TinyStories ``.txt`` file read from the file when asked for.

:class:`FileStories` keeps per story only a byte offset and a length (~20 bytes a story; the few stories that
mojibake repair changed are kept as text), so the paper's 2.3 GB TinyStories V2 file is never held as Python
strings; :class:`ChainedStories` reads several story sequences as one without copying them. Both are built by
:func:`helpers.data.corpora.index_story_file` and :meth:`helpers.data.corpora.StoryCorpus.extend`.
:class:`DataError` (bad or missing input data) lives here, below every loader, and is also
``helpers.data.corpora.DataError``.
"""
from __future__ import annotations

import bisect
import os
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from helpers.core.config import shown_paths_in


class DataError(ValueError):
    """Bad or missing input data, with a message that says what to do; paths in it are shown relative to the
    repository (:func:`helpers.core.config.shown_paths_in`), never as this machine's absolute paths."""

    def __init__(self, message: object = "", *args: object) -> None:
        super().__init__(shown_paths_in(str(message)), *args)


def universal_newlines(s: str) -> str:
    """Universal newlines, as Python's text-mode reading applies them (``\\r\\n`` and ``\\r`` become ``\\n``)."""
    return s.replace("\r\n", "\n").replace("\r", "\n")


class FileStories(Sequence[str]):
    """The stories of one ``<|endoftext|>``-separated plain-text file, read from the file when asked for.

    Holds per story its byte offset and length in the file (the story as
    :func:`helpers.data.corpora.load_tinystories` returns it: stripped; universal newlines applied on reading, as a
    text-mode read would) and, for the few stories that mojibake repair changed, the repaired text. Indexing returns a ``str``; a slice returns a list; iteration reads
    the file in order. The file must not change while the view is in use (its size is checked on every pass)."""

    def __init__(self, path: str | Path, starts: np.ndarray, lengths: np.ndarray, fixed: dict[int, str] | None = None):
        self.path = Path(path)
        self.starts = np.asarray(starts, dtype=np.int64)
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.fixed = dict(fixed or {})
        self._size = self.path.stat().st_size
        self._fd: int | None = None

    def __len__(self) -> int:
        return len(self.starts)

    def _read(self, i: int) -> str:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        s = os.pread(self._fd, int(self.lengths[i]), int(self.starts[i])).decode("utf-8")
        return universal_newlines(s) if "\r" in s else s

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"story {i} out of range ({n} stories)")
        fixed = self.fixed.get(i)
        return fixed if fixed is not None else self._read(i)

    def __iter__(self) -> Iterator[str]:
        if self.path.stat().st_size != self._size:
            raise DataError(f"{self.path} changed since it was indexed; load it again")
        for i in range(len(self)):
            yield self[i]

    def head(self, n: int) -> "FileStories":
        """The first ``n`` stories, as a view of the same file."""
        return FileStories(self.path, self.starts[:n], self.lengths[:n], {i: t for i, t in self.fixed.items() if i < n})

    def __del__(self):
        if getattr(self, "_fd", None) is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass


class ChainedStories(Sequence[str]):
    """Several story sequences (lists or :class:`FileStories`) read as one, without copying them."""

    def __init__(self, parts: Iterable[Sequence[str]]):
        self.parts = []
        for p in parts:
            self.parts += p.parts if isinstance(p, ChainedStories) else ([p] if len(p) else [])
        self._ends = np.cumsum([len(p) for p in self.parts]).tolist()

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"story {i} out of range ({len(self)} stories)")
        k = bisect.bisect_right(self._ends, i)
        return self.parts[k][i - (self._ends[k - 1] if k else 0)]

    def __iter__(self) -> Iterator[str]:
        for p in self.parts:
            yield from p
