"""Loading the corpora: TinyStories, the BabyLM-like corpus, running text; checksums; normalisation.

TinyStories (``docs/methods.md#data``) comes as
* ``.txt`` files with stories separated by ``<|endoftext|>`` (V1 ``TinyStories-*.txt``, V2 ``TinyStoriesV2-GPT4-*``);
  a file that does not end with the separator was byte-truncated, so its last story is dropped;
* JSON: a list of strings, ``{"texts": [...]}``, a list of ``{"story"|"text": ...}`` objects, or JSON lines;
* a folder of such files;
* a Hugging Face dataset name or path (``roneneldan/TinyStories``) when the user has it locally or a hub.

Every file read is checked against ``data/CHECKSUMS.sha256`` when it is listed there and remembered (path and
SHA-256) so that reports can record their exact inputs (:func:`loaded_files`).
Mojibake (``â€™`` etc.) is repaired with ftfy and the number of repaired stories is reported.
"""
from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

import ftfy
import numpy as np
from sacremoses import MosesPunctNormalizer

from helpers.core.artifacts import parse_jsonl, sha256_file
from helpers.core.config import data_dir, repo_root

if TYPE_CHECKING:  # torch is imported lazily: loading text must not pay for it
    import torch

EOT = "<|endoftext|>"
CHECKSUM_FILE = "CHECKSUMS.sha256"
_LOADED: dict[str, str] = {}


class DataError(ValueError):
    """Bad or missing input data, with a message that says what to do."""


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
    digest = sha256_file(p)
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
    out = root / CHECKSUM_FILE
    out.write_text("# sha256 of the bundled files as stored (compressed bytes); verified on load\n" + "\n".join(lines) + "\n")
    return out


# ----------------------------------------------------------------------------- TinyStories
@dataclass
class StoryCorpus:
    """Stories plus what was done to them on the way in."""

    stories: list[str]
    sources: list[str] = field(default_factory=list)  # one source name per story
    n_repaired: int = 0
    n_dropped_truncated: int = 0
    n_dropped_empty: int = 0
    files: dict[str, str] = field(default_factory=dict)
    unit: str = "stories"  # "paragraphs" for running text without story boundaries

    def __len__(self) -> int:
        return len(self.stories)

    @property
    def words(self) -> int:
        return sum(count_words(s) for s in self.stories)

    def extend(self, other: "StoryCorpus") -> "StoryCorpus":
        self.stories += other.stories
        self.sources += other.sources
        self.n_repaired += other.n_repaired
        self.n_dropped_truncated += other.n_dropped_truncated
        self.n_dropped_empty += other.n_dropped_empty
        self.files.update(other.files)
        return self


def count_words(text: str) -> int:
    """Whitespace-split words; ``<|endoftext|>`` is not a word."""
    return sum(1 for w in text.split() if w != EOT)


def repair(text: str) -> tuple[str, bool]:
    """Fix mojibake (``â€™`` → ``’``) with ``ftfy.fix_encoding``; returns the text and whether it changed."""
    fixed = ftfy.fix_encoding(text)  # only mojibake: curly quotes, ligatures etc. are kept as written
    return fixed, fixed != text


def _finish(raw: list[str], name: str, truncated_tail: bool, files: dict[str, str]) -> StoryCorpus:
    stories, n_rep, n_empty = [], 0, 0
    if truncated_tail and raw:
        raw = raw[:-1]
    for s in raw:
        s = s.strip()
        if not s:
            n_empty += 1
            continue
        s, changed = repair(s)
        n_rep += changed
        stories.append(s)
    return StoryCorpus(stories, [name] * len(stories), n_rep, int(truncated_tail), n_empty, files)


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


def load_tinystories(source: str | Path, split: str = "train", limit: int | None = None) -> StoryCorpus:
    """TinyStories from a ``.txt``/``.json``/``.jsonl`` file (optionally ``.gz``), a folder, or a HF dataset.

    ``limit`` keeps the first ``limit`` stories (after dropping a truncated tail).
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
            corpus.extend(load_tinystories(f))
        return _limit(corpus, limit)
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
        c.stories, c.sources = c.stories[:limit], c.sources[:limit]
    return c


def _load_hf(name: str, split: str, limit: int | None) -> StoryCorpus:
    try:
        import datasets

        ds = datasets.load_dataset(name, split=split)
    except Exception as e:  # hub unreachable, dataset missing, ...
        raise DataError(
            f"could not load the Hugging Face dataset {name!r} (split {split!r}): {e}. Download it where you have "
            "internet (e.g. `huggingface-cli download roneneldan/TinyStories --repo-type dataset --local-dir "
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


# ----------------------------------------------------------------------------- encoder normalisation
_ABBREV = {r"\bMr\s*\.": "Mr.", r"\bMrs\s*\.": "Mrs.", r"\bDr\s*\.": "Dr.", r"\bSt\s*\.": "St."}
_SENT_END = re.compile(r"(?<=[.!?…])([\"”’']*)\s+(?=[\"“‘']*[A-Z0-9])")


def normalise_text(text: str) -> str:
    """Encoder-side normalisation (docs/methods.md#normalisation): ftfy, Moses punctuation normalisation, punctuation spacing
    (``word , word`` → ``word, word``, as in the tokenised BabyLM sources), abbreviation fixes."""
    text = ftfy.fix_text(text)
    text = re.sub(r"^[AB]:\t", "", text, flags=re.M)  # Switchboard speaker tags
    text = MosesPunctNormalizer(lang="en", pre_replace_unicode_punct=True).normalize(text)
    text = re.sub(r" +([,.;:!?%)\]}])", r"\1", text)
    text = re.sub(r"([(\[{]) +", r"\1", text)
    text = re.sub(r" +n't\b", "n't", text)
    text = re.sub(r" +'(s|re|ve|ll|d|m)\b", r"'\1", text)
    text = re.sub(r"`` *| *''", '"', text)
    for pat, rep in _ABBREV.items():
        text = re.sub(pat, rep, text)
    return re.sub(r"[ \t]+", " ", text).strip()


def split_sentences(text: str) -> list[str]:
    """The project's one sentence splitter (encoder segments, instruction summaries, contrastive shuffles, the
    judge's story endings): a sentence ends at a line break, or at ``.``/``!``/``?``/``…`` (closing quotes kept
    with it) followed by a space and a word that starts with a capital or a digit (opening quotes allowed), so
    ``"Stop!" said Mom.`` stays one sentence; ``Mr.``, ``Mrs.``, ``Ms.``, ``Dr.``, ``St.``, ``Jr.``, ``Sr.``,
    ``vs.`` and ``etc.`` never end one; a last sentence without a stop is kept."""
    protected = re.sub(r"\b(Mr|Mrs|Ms|Dr|St|Jr|Sr|vs|etc)\.", r"\1<DOT>", text)
    out = []
    for line in protected.splitlines():
        for s in _SENT_END.sub(lambda m: m.group(1) + "\n", line).split("\n"):
            s = s.replace("<DOT>", ".").strip()
            if s:
                out.append(s)
    return out


def encoder_segments(texts: Iterable[str], par: str = "[PAR]") -> list[str]:
    """Normalised, one-sentence-per-line text per document; paragraphs (and documents) are closed by ``[PAR]``,
    which is how TinyStories' ``<|endoftext|>`` is rendered for the encoder."""
    segs = []
    for t in texts:
        paras = [p for p in re.split(r"\n\s*\n", t) if p.strip()]
        body = f"\n{par}\n".join("\n".join(split_sentences(normalise_text(p))) for p in paras)
        segs.append(body + f"\n{par}")
    return segs


# ----------------------------------------------------------------------------- statistics
def corpus_stats(texts: list[str], name: str = "", unit: str = "documents") -> dict:
    """Units, words, vocabulary (case-sensitive whitespace types), type/token ratio, words per unit.

    ``unit`` says what one text is (``"stories"``; ``"paragraphs"`` for running text whose story boundaries are
    not recoverable; BabyLM's line chunks), so a paragraph count is never read as a story count."""
    lengths = np.array([count_words(t) for t in texts]) if texts else np.zeros(0, int)
    types: set[str] = set()
    for t in texts:
        types.update(t.split())
    words = int(lengths.sum())
    return {
        "corpus": name,
        "unit": unit,
        "units": len(texts),
        "words": words,
        "vocabulary": len(types),
        "type/token": len(types) / words if words else float("nan"),
        "mean words/unit": float(lengths.mean()) if len(lengths) else float("nan"),
        "median words/unit": float(np.median(lengths)) if len(lengths) else float("nan"),
    }


def vocab_growth(texts: list[str], n_points: int = 40) -> tuple[list[int], list[int]]:
    """Heaps curve: (tokens seen, distinct types) at ``n_points`` evenly spaced positions of the corpus."""
    words = [w for t in texts for w in t.split()]
    if not words:
        return [0], [0]
    marks = sorted({max(1, round(len(words) * (i + 1) / n_points)) for i in range(n_points)})
    seen: set[str] = set()
    xs, ys, j = [], [], 0
    for m in marks:
        seen.update(words[j:m])
        j = m
        xs.append(m)
        ys.append(len(seen))
    return xs, ys


# ----------------------------------------------------------------------------- token blocks (model inputs)
def pack_blocks(token_lists: Sequence[Sequence[int]], block: int) -> "torch.Tensor":
    """Concatenate token lists and cut the stream into ``[n, block]`` rows (the remainder is dropped)."""
    import torch

    if block <= 1:
        raise ValueError(f"block length must be > 1, got {block}")
    flat = np.fromiter((t for ids in token_lists for t in ids), dtype=np.int64)
    n = len(flat) // block
    if n == 0:
        raise ValueError(f"only {len(flat)} tokens: not enough for one block of {block}")
    return torch.from_numpy(flat[: n * block].reshape(n, block).copy())


class PackedBlocks:
    """Fixed-length blocks with a deterministic, resumable batch order.

    ``batch(step, size, rank, world)`` returns the rows of global batch ``step`` that belong to ``rank``: the
    global batch is ``size`` consecutive entries of an endless sequence of per-epoch permutations."""

    def __init__(self, blocks: "torch.Tensor", seed: int = 0):
        if blocks.ndim != 2 or len(blocks) == 0:
            raise ValueError("blocks must be a non-empty [n, length] tensor")
        self.blocks, self.seed = blocks, seed
        self._perms: dict = {}

    def __len__(self) -> int:
        return len(self.blocks)

    @property
    def tokens(self) -> int:
        return self.blocks.numel()

    def _perm(self, epoch: int) -> "torch.Tensor":
        import torch

        if epoch not in self._perms:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._perms = {epoch: torch.randperm(len(self.blocks), generator=g)}
        return self._perms[epoch]

    def indices(self, step: int, size: int) -> list[int]:
        n = len(self.blocks)
        out = []
        for pos in range(step * size, (step + 1) * size):
            out.append(int(self._perm(pos // n)[pos % n]))
        return out

    def batch(self, step: int, size: int, rank: int = 0, world: int = 1) -> dict:
        if size % world:
            raise ValueError(f"global batch {size} is not divisible by {world} processes")
        idx = self.indices(step, size)
        per = size // world
        return {"input_ids": self.blocks[idx[rank * per : (rank + 1) * per]]}

    def epochs(self, steps: int, size: int) -> float:
        return steps * size / len(self.blocks)

    def eval_batches(self, size: int):
        for i in range(0, len(self.blocks), size):
            yield {"input_ids": self.blocks[i : i + size]}
