"""Loading the corpora: TinyStories, the BabyLM-like corpus, running text; checksums.

TinyStories (``docs/methods.md#data``) comes as
* ``.txt`` files with stories separated by ``<|endoftext|>`` (V1 ``TinyStories-*.txt``, V2 ``TinyStoriesV2-GPT4-*``);
  a file that does not end with the separator was byte-truncated, so its last story is dropped;
* JSON: a list of strings, ``{"texts": [...]}``, a list of ``{"story"|"text": ...}`` objects, or JSON lines;
* a folder of such files;
* a Hugging Face dataset name or path (``roneneldan/TinyStories``) when the user has it locally or a hub.

Every file read is checked against ``data/CHECKSUMS.sha256`` when it is listed there and remembered (path and
SHA-256) so that reports can record their exact inputs (:func:`loaded_files`).
Mojibake (``â€™`` etc.) is repaired with ftfy and the number of repaired stories is reported; so are the stories
that held NUL bytes (removed: a NUL is never text, only a damaged file's filler) and the stories longer than
:data:`MAX_STORY_CHARS` characters (kept, but a story that long is most likely several whose separators were
lost): :func:`repairs_row`, notebook 01's repairs table.

Scale: ``load_tinystories(path, lazy=True)`` indexes a plain ``.txt`` file in one streaming pass (its SHA-256 in the
same pass) and keeps only a byte offset, a length and a word count per story
(:class:`helpers.data.story_files.FileStories`, ~20 bytes a story), reading a story from the file when it is asked
for; the paper's 2.3 GB TinyStories V2 file is never held as Python strings. Normalisation and sentence splitting
are in :mod:`helpers.data.normalisation`, corpus statistics in :mod:`helpers.data.text_stats`, token blocks in
:mod:`helpers.data.blocks`.
"""
from __future__ import annotations

import gzip
import json
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import ftfy
import numpy as np

from helpers.core.artifacts import parse_jsonl, write_text
from helpers.core.config import data_dir, repo_root
from helpers.core.digests import sha256_file, sha256_stream
from helpers.data.story_files import ChainedStories, DataError, FileStories, universal_newlines

EOT = "<|endoftext|>"
CHECKSUM_FILE = "CHECKSUMS.sha256"
MAX_STORY_CHARS = 100_000  # a story longer than this is counted in the repairs table (TinyStories' run to ~4,000)
_LOADED: dict[str, str] = {}


# ----------------------------------------------------------------------------- files and checksums
def expected_checksums(root: Path | None = None) -> dict[str, str]:
    """``relative path -> sha256`` of the bundled files (``data/CHECKSUMS.sha256``, sha256sum format)."""
    root = root or data_dir()
    f = root / CHECKSUM_FILE
    if not f.is_file():
        return {}
    out = {}
    for line in f.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split(maxsplit=1)
            out[name.strip().lstrip("*")] = digest
    return out


def resolve(path: str | Path) -> Path:
    """A data path: absolute, relative to the cwd, or relative to ``data/``."""
    p = Path(path)
    if p.exists():
        return p.resolve()
    q = data_dir() / p
    if q.exists():
        return q.resolve()
    raise FileNotFoundError(f"data file not found: {path} (looked in the working directory and in {data_dir()})")


def checked(path: str | Path) -> Path:
    """Resolve ``path``, verify its SHA-256 against the bundled checksum list if listed, and record it."""
    p = resolve(path)
    return _record(p, sha256_file(p))


def _record(p: Path, digest: str) -> Path:
    """Check ``digest`` (of the resolved file ``p``) against the bundled checksum list if listed; remember it."""
    try:
        rel = p.relative_to(data_dir().resolve()).as_posix()
    except ValueError:
        rel = None
    if rel is not None:
        want = expected_checksums().get(rel)
        if want is not None and want != digest:
            raise DataError(
                f"checksum mismatch for data/{rel}: expected {want[:12]}…, found {digest[:12]}…; "
                "the bundled file was modified or corrupted (restore it with `git checkout -- data/`)"
            )
    _LOADED[str(p)] = digest
    return p


def loaded_files() -> dict[str, str]:
    """Every data file read so far in this process: path (relative to the repo when possible) -> SHA-256."""
    out = {}
    root = repo_root().resolve()
    for p, d in sorted(_LOADED.items()):
        try:
            out[Path(p).relative_to(root).as_posix()] = d
        except ValueError:
            out[p] = d
    return out


def read_text(path: str | Path) -> str:
    """Text of a (possibly gzip-compressed) UTF-8 file, checksum-verified."""
    p = checked(path)
    opener = gzip.open if p.suffix == ".gz" else open
    try:
        with opener(p, "rt", encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"cannot read {p}: {e}") from None


def read_jsonl_rows(path: str | Path) -> list[dict]:
    """Rows of a (possibly gzip-compressed) JSONL data file, checksum-verified; a malformed line raises
    :class:`DataError` naming the file and line."""
    return parse_jsonl(read_text(path).splitlines(), path, DataError)


def write_checksums(root: Path | None = None, patterns: Iterable[str] = ("**/*.gz", "**/*.json", "**/*.yaml")) -> Path:
    """(Re)write ``data/CHECKSUMS.sha256`` for the bundled files (maintainers only)."""
    root = root or data_dir()
    files = sorted({p for pat in patterns for p in root.glob(pat) if p.is_file()})
    lines = [f"{sha256_file(p)}  {p.relative_to(root).as_posix()}" for p in files]
    return write_text(root / CHECKSUM_FILE, "# sha256 of the bundled files as stored (compressed bytes); verified on load\n"
                      + "\n".join(lines) + "\n")


# ----------------------------------------------------------------------------- TinyStories
@dataclass
class StoryCorpus:
    """Stories plus what was done to them on the way in.

    ``stories`` is a list, or (``load_tinystories(..., lazy=True)``) a :class:`FileStories` view that reads each story
    from its file on demand; then ``word_counts`` holds every story's word count (counted while indexing)."""

    stories: Sequence[str]
    sources: list[str] = field(default_factory=list)  # one source name per story (lazy corpora: empty)
    n_repaired: int = 0
    n_dropped_truncated: int = 0
    n_dropped_empty: int = 0
    files: dict[str, str] = field(default_factory=dict)
    unit: str = "stories"  # "paragraphs" for running text without story boundaries
    counts: np.ndarray | None = field(default=None, compare=False, repr=False)  # words per story when known (lazy)
    n_nul: int = 0  # stories that held NUL bytes (removed)
    n_overlong: int = 0  # stories longer than MAX_STORY_CHARS characters (kept)

    def __len__(self) -> int:
        return len(self.stories)

    @property
    def word_counts(self) -> np.ndarray:
        """Words of every story (:func:`count_words`), as an int64 array."""
        if self.counts is not None and len(self.counts) == len(self.stories):
            return self.counts
        return np.fromiter((count_words(s) for s in self.stories), dtype=np.int64, count=len(self.stories))

    @property
    def words(self) -> int:
        if self.counts is not None and len(self.counts) == len(self.stories):
            return int(self.counts.sum())
        return sum(count_words(s) for s in self.stories)

    def extend(self, other: "StoryCorpus") -> "StoryCorpus":
        if isinstance(self.stories, list) and isinstance(other.stories, list) and self.counts is None and other.counts is None:
            self.stories += other.stories
        else:  # a lazy corpus: chain the views, keep the word counts
            self.counts = np.concatenate([self.word_counts, other.word_counts])
            self.stories = ChainedStories([self.stories, other.stories])
        self.sources += other.sources
        self.n_repaired += other.n_repaired
        self.n_dropped_truncated += other.n_dropped_truncated
        self.n_dropped_empty += other.n_dropped_empty
        self.n_nul += other.n_nul
        self.n_overlong += other.n_overlong
        self.files.update(other.files)
        return self


def count_words(text: str) -> int:
    """Whitespace-split words; ``<|endoftext|>`` is not a word."""
    return sum(1 for w in text.split() if w != EOT)


def repair(text: str) -> tuple[str, bool]:
    """Fix mojibake (``â€™`` → ``’``) with ``ftfy.fix_encoding``; returns the text and whether it changed."""
    if text.isascii():  # ftfy returns ASCII unchanged (its first check); skipping the call saves ~25 µs a story
        return text, False
    fixed = ftfy.fix_encoding(text)  # only mojibake: curly quotes, ligatures etc. are kept as written
    return fixed, fixed != text


def without_nul(text: str) -> tuple[str, bool]:
    """``text`` without its NUL bytes (``\\x00``, never text: the filler of a damaged or preallocated file), stripped
    again; and whether it held any."""
    if "\x00" not in text:
        return text, False
    return text.replace("\x00", "").strip(), True


def repairs_row(corpus_name: str, corpus: "StoryCorpus") -> dict:
    """One row of notebook 01's repairs table: the corpus, its unit and count, and what loading did to it: stories
    whose mojibake was repaired, whose NUL bytes were removed, a truncated tail dropped, and stories over
    :data:`MAX_STORY_CHARS` characters (kept: likely several stories whose separators were lost)."""
    return {"corpus": corpus_name, "units": corpus.unit, "count": len(corpus), "repaired (mojibake)": corpus.n_repaired,
            "NUL bytes removed": corpus.n_nul, "dropped (truncated tail)": corpus.n_dropped_truncated,
            f"over {MAX_STORY_CHARS:,} characters (kept)": corpus.n_overlong}


def _finish(raw: list[str], name: str, truncated_tail: bool, files: dict[str, str]) -> StoryCorpus:
    stories, n_rep, n_empty, n_nul, n_long = [], 0, 0, 0, 0
    if truncated_tail and raw:
        raw = raw[:-1]
    for s in raw:
        s, nul = without_nul(s.strip())
        n_nul += nul
        if not s:
            n_empty += 1
            continue
        s, changed = repair(s)
        n_rep += changed
        n_long += len(s) > MAX_STORY_CHARS
        stories.append(s)
    return StoryCorpus(stories, [name] * len(stories), n_rep, int(truncated_tail), n_empty, files, n_nul=n_nul,
                       n_overlong=n_long)


def _json_stories(text: str, p: Path) -> list[str]:
    text = text.strip()
    if not text:
        return []
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        obj = parse_jsonl(text.splitlines(), p, DataError)
    if isinstance(obj, dict):
        for key in ("texts", "stories", "data"):
            if key in obj:
                obj = obj[key]
                break
        else:
            raise DataError(f"{p}: JSON object without a 'texts'/'stories'/'data' list")
    if not isinstance(obj, list):
        raise DataError(f"{p}: expected a JSON list of stories")
    out = []
    for i, item in enumerate(obj):
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and isinstance(item.get("story", item.get("text")), str):
            out.append(item.get("story", item.get("text")))
        else:
            raise DataError(f"{p}: item {i} is neither a string nor an object with a 'story' or 'text' field")
    return out


def load_tinystories(source: str | Path, split: str = "train", limit: int | None = None, lazy: bool = False) -> StoryCorpus:
    """TinyStories from a ``.txt``/``.json``/``.jsonl`` file (optionally ``.gz``), a folder, or a HF dataset.

    ``limit`` keeps the first ``limit`` stories (after dropping a truncated tail).
    ``lazy``: a plain (uncompressed) ``.txt`` file is indexed in one streaming pass instead of read into memory
    (:func:`index_story_file`): the same stories, counts and checksum, as a :class:`FileStories` view with word
    counts. Other sources load as usual.
    """
    src = str(source)
    try:
        p = resolve(src)
    except FileNotFoundError:
        if "/" in src and not src.startswith((".", "/")) and not Path(src).suffix:
            return _load_hf(src, split, limit)
        raise
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if re.search(r"\.(txt|json|jsonl)(\.gz)?$", f.name))
        if not files:
            raise DataError(f"folder {p} holds no .txt/.json/.jsonl story files")
        corpus = StoryCorpus([])
        for f in files:
            corpus.extend(load_tinystories(f, lazy=lazy))
        return _limit(corpus, limit)
    if lazy and p.name.endswith(".txt"):
        return _limit(index_story_file(p), limit)
    text = read_text(p)
    name = re.sub(r"(\.(txt|json|jsonl))?(\.gz)?$", "", p.name)
    files = {p.name: _LOADED[str(p)]}
    if not text.strip():
        raise DataError(f"{p} is empty")
    if re.search(r"\.jsonl?(\.gz)?$", p.name):
        return _limit(_finish(_json_stories(text, p), name, False, files), limit)
    if EOT not in text:
        raise DataError(
            f"{p} has no {EOT} separators, so story boundaries are unknown; use load_running_text() for running text"
        )
    parts = text.split(EOT)
    truncated = bool(parts[-1].strip())  # text after the last separator = a byte-truncated story
    if not truncated:
        parts = parts[:-1]
    return _limit(_finish(parts, name, truncated, files), limit)


def _limit(c: StoryCorpus, limit: int | None) -> StoryCorpus:
    if limit is not None:
        if c.counts is not None:
            c.counts = c.word_counts[:limit]
        c.stories = c.stories.head(limit) if isinstance(c.stories, FileStories) else c.stories[:limit]
        c.sources = c.sources[:limit]
    return c


_EOT_BYTES = EOT.encode()


def index_story_file(path: str | Path, chunk_bytes: int = 16 << 20) -> StoryCorpus:
    """Index an ``<|endoftext|>``-separated UTF-8 text file in one streaming pass (``chunk_bytes`` at a time): the
    stories :func:`load_tinystories` would return (stripped, mojibake repaired, empty ones and a byte-truncated tail
    dropped, universal newlines) as a :class:`FileStories` view, with every story's word count and the file's
    SHA-256 (checked against ``data/CHECKSUMS.sha256`` and recorded, like :func:`checked`). Memory: the offsets and
    counts (~24 bytes a story) and the repaired stories, never the file's text."""
    p = resolve(path)
    name = re.sub(r"(\.txt)?$", "", p.name)
    h = sha256_stream()  # the file's SHA-256, computed in the pass that indexes it
    starts, lengths, counts = array("q"), array("q"), array("q")
    fixed: dict[int, str] = {}
    n_rep = n_empty = n_nul = n_long = 0
    seen_sep = False
    carry, base = b"", 0  # carry: bytes after the last separator so far, starting at file offset base

    def take(raw: bytes, at: int) -> None:
        nonlocal n_rep, n_empty, n_nul, n_long
        try:
            u = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(f"cannot read {p}: invalid UTF-8 at byte {at + e.start:,} ({e.reason})") from None
        body = u.strip()
        clean, nul = without_nul(body)
        n_nul += nul
        if not clean:
            n_empty += 1
            return
        lead = len(u) - len(u.lstrip())
        if raw.isascii():
            start, length = at + lead, len(body)
        else:
            start, length = at + len(u[:lead].encode()), len(body.encode())
        text = universal_newlines(clean) if "\r" in clean else clean
        fixed_text, changed = repair(text)
        n_rep += changed
        n_long += len(fixed_text) > MAX_STORY_CHARS
        if changed or nul:  # the file's bytes are not the story: keep the story itself
            fixed[len(starts)] = fixed_text
        starts.append(start)
        lengths.append(length)
        counts.append(len(fixed_text.split()))  # no <|endoftext|> inside a story: count_words without the filter

    with open(p, "rb") as f:
        while chunk := f.read(chunk_bytes):
            h.update(chunk)
            buf = carry + chunk
            parts = buf.split(_EOT_BYTES)
            carry = parts.pop()
            pos = base
            for part in parts:
                seen_sep = True
                take(part, pos)
                pos += len(part) + len(_EOT_BYTES)
            base = pos
    _record(p, h.hexdigest())
    if not seen_sep:
        if not carry.strip():
            raise DataError(f"{p} is empty")
        raise DataError(
            f"{p} has no {EOT} separators, so story boundaries are unknown; use load_running_text() for running text"
        )
    try:
        truncated = bool(carry.decode("utf-8").strip())  # text after the last separator = a byte-truncated story
    except UnicodeDecodeError:
        truncated = True  # cut inside a character: certainly truncated
    stories = FileStories(p, np.frombuffer(starts, dtype=np.int64), np.frombuffer(lengths, dtype=np.int64), fixed)
    return StoryCorpus(stories, [], n_rep, int(truncated), n_empty, {p.name: _LOADED[str(p)]},
                       counts=np.frombuffer(counts, dtype=np.int64).copy(), n_nul=n_nul, n_overlong=n_long)


def _load_hf(name: str, split: str, limit: int | None) -> StoryCorpus:
    try:
        import datasets

        ds = datasets.load_dataset(name, split=split)
    except Exception as e:  # hub unreachable, dataset missing, ...
        raise DataError(
            f"could not load the Hugging Face dataset {name!r} (split {split!r}): {e}. Download it where you have "
            "internet (e.g. `hf download roneneldan/TinyStories --repo-type dataset --local-dir "
            "data/full/TinyStories`) and point the params at the local TinyStories-train.txt instead."
        ) from None
    col = "text" if "text" in ds.column_names else ds.column_names[0]
    raw = ds[col] if limit is None else ds.select(range(min(limit, len(ds))))[col]
    return _finish(list(raw), name.replace("/", "_"), False, {name: f"hf:{getattr(ds, '_fingerprint', '?')}"})


def load_running_text(path: str | Path, min_words: int = 1) -> StoryCorpus:
    """A file without story boundaries, as blank-line separated paragraphs (repaired with ftfy)."""
    p = resolve(path)
    text = read_text(p)
    paras = [x for x in re.split(r"\n\s*\n", text) if count_words(x) >= min_words]
    name = re.sub(r"(\.txt)?(\.gz)?$", "", p.name)
    corpus = _finish(paras, name, False, {p.name: _LOADED[str(p)]})
    corpus.unit = "paragraphs"
    return corpus


def load_validation(path: str | Path) -> StoryCorpus:
    """The TinyStories validation file: whole stories when the file marks boundaries with ``<|endoftext|>`` (the
    official ``TinyStoriesV2-GPT4-valid.txt`` and ``TinyStories-valid.txt``), else blank-line separated paragraphs
    of running text (the bundled HF export, which has no boundaries)."""
    p = resolve(path)
    if p.is_file() and re.search(r"\.txt(\.gz)?$", p.name) and EOT in read_text(p):
        return load_tinystories(p)
    return load_running_text(p)


# ----------------------------------------------------------------------------- BabyLM
@dataclass
class Document:
    source: str
    text: str

    @property
    def words(self) -> int:
        return count_words(self.text)


def split_documents(text: str, source: str, chunk_lines: int = 32) -> list[Document]:
    """Documents of a BabyLM file: blank-line separated blocks; blocks longer than ``chunk_lines`` lines (the
    bundled files are one utterance/sentence per line with no blank lines) are cut into consecutive chunks of
    ``chunk_lines`` lines, which then act as the sampling unit."""
    docs = []
    for block in re.split(r"\n\s*\n", text):
        lines = [ln for ln in block.splitlines() if ln.strip()]
        for i in range(0, len(lines), chunk_lines):
            chunk = "\n".join(lines[i : i + chunk_lines])
            if chunk.strip():
                docs.append(Document(source, chunk))
    return docs


def load_babylm(files: dict[str, list[str]] | str | Path, splits: Iterable[str] = ("train",), chunk_lines: int = 32) -> list[Document]:
    """The BabyLM corpus as documents tagged with their source.

    ``files`` is either ``{source: [file, ...]}`` or a folder holding ``<source>.<split>[.gz]`` files
    (``bnc_spoken.train``, ``childes.train``, …) of which the given ``splits`` are read.
    """
    if not isinstance(files, dict):
        folder = resolve(files)
        if not folder.is_dir():
            raise DataError(f"{folder} is not a folder of <source>.<split> files")
        groups: dict[str, list[str]] = {}
        for f in sorted(folder.rglob("*")):
            m = re.match(r"(.+)\.(train|dev|test)(\.gz)?$", f.name)
            if m and m.group(2) in splits:
                groups.setdefault(m.group(1), []).append(str(f))
        if not groups:
            raise DataError(f"no BabyLM files ({', '.join(splits)}) in {folder}")
        files = groups
    docs: list[Document] = []
    for source, paths in files.items():
        for path in paths:
            text = read_text(path)
            if not text.strip():
                raise DataError(f"{path} is empty")
            docs += split_documents(ftfy.fix_encoding(text), source, chunk_lines)
    return docs
