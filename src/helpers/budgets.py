"""Word budgets and the budget ledger (``docs/methods.md#budgets``, ``docs/methods.md#challenge-rule``).

* TinyStories budgets are **nested**: the stories are shuffled once with a seed, then a budget of B words takes
  whole stories from the front until adding the next would exceed B (so 0.5M ⊂ 1M ⊂ …, like the reference
  code's prefixes of the train file).
* BabyLM is sampled at document level the same way (seeded shuffle of documents, then a prefix).
* The **ledger** records, for every corpus, its words by source, the input file checksums and the seed, and
  checks the challenge rule |D_baby| + |D_tiny| ≤ track budget (D_gen is free, but its generator must have been
  trained within the budget).
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from .artifacts import read_json, write_json
from .config import shown_path
from .data import Document, count_words

# Bump when prepare_corpora writes something new, so that finished data steps are redone (it is in their fingerprint).
FORMAT_VERSION = 2
PAPER_BUDGETS = [5_000_000, 10_000_000, 25_000_000, 50_000_000, 75_000_000, 100_000_000, 440_000_000]
TRACKS = {"strict-small": 10_000_000, "strict": 100_000_000}


class BudgetError(ValueError):
    """A budget that cannot be met, or a corpus mix that breaks the challenge rule."""


def fmt_words(n: float) -> str:
    """``1250000 -> '1.25M'``, ``50000 -> '50k'``."""
    if n >= 1_000_000:
        return f"{n / 1e6:g}M"
    if n >= 1_000:
        return f"{n / 1e3:g}k"
    return str(int(n))


def shuffled_order(n: int, seed: int) -> list[int]:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def take_prefix(word_counts: Sequence[int], order: Sequence[int], budget: int) -> list[int]:
    """Indices (in ``order``) of whole items taken until adding the next would exceed ``budget`` words."""
    total = sum(word_counts)
    if budget > total:
        raise BudgetError(
            f"budget of {budget:,} words exceeds the {total:,} words available; lower the budget or add data"
        )
    taken, used = [], 0
    for i in order:
        if used + word_counts[i] > budget:
            break
        taken.append(i)
        used += word_counts[i]
    return taken


def nested_budgets(texts: Sequence[str], budgets: Iterable[int], seed: int) -> dict[int, list[int]]:
    """``budget -> indices`` of the texts in each budget; every smaller budget is a prefix of every larger one."""
    counts = [count_words(t) for t in texts]
    order = shuffled_order(len(texts), seed)
    return {int(b): take_prefix(counts, order, int(b)) for b in sorted(budgets)}


def heldout_stories(texts: Sequence[str], nested: dict[int, list[int]], seed: int, max_words: int) -> list[int]:
    """Indices of stories in no budget (the tail of the seeded shuffle), whole stories up to ``max_words``."""
    used = set(nested[max(nested)]) if nested else set()
    rest = [i for i in shuffled_order(len(texts), seed) if i not in used]
    out, n = [], 0
    for i in rest:
        w = count_words(texts[i])
        if n + w > max_words:
            break
        out.append(i)
        n += w
    return out


def sample_documents(docs: Sequence[Document], budget: int, seed: int) -> list[Document]:
    """Document-level BabyLM sample of at most ``budget`` words (seeded shuffle, then prefix)."""
    idx = take_prefix([d.words for d in docs], shuffled_order(len(docs), seed), budget)
    return [docs[i] for i in idx]


# ----------------------------------------------------------------------------- ledger
@dataclass
class CorpusEntry:
    """One corpus in the ledger."""

    name: str
    kind: str  # "tiny" | "baby" | "gen"
    words_by_source: dict[str, int]
    seed: int | None = None
    files: dict[str, str] = field(default_factory=dict)  # input file -> sha256
    budget: int | None = None  # the nominal budget it was sampled for
    generator_corpus: str | None = None  # for D_gen: the corpus its generator was trained on
    path: str | None = None
    note: str = ""
    sha256: str | None = None  # of the corpus file at ``path`` (relative to the ledger's folder), as written
    size: int | None = None  # its bytes

    @property
    def words(self) -> int:
        return sum(self.words_by_source.values())


class Ledger:
    """Budget ledger: every corpus with its words by source, checksums and seed; enforces the track rule."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else None
        self.entries: dict[str, CorpusEntry] = {}
        self.track_budget: int | None = None  # notebook 01's, the one owner of the rule (see set_track_budget)
        self.checksums: dict[str, dict] = {}  # other files of the folder (held-out stories): name -> size, sha256
        if self.path and self.path.is_file():
            raw = read_json(self.path)
            for e in raw["corpora"]:
                self.entries[e["name"]] = CorpusEntry(**e)
            self.track_budget = raw.get("track_budget")
            self.checksums = raw.get("checksums", {})

    def record_file(self, path: str | Path) -> None:
        """Record size and SHA-256 of a file next to the ledger that is not a corpus (e.g. the held-out stories)."""
        from .artifacts import sha256_file

        f = Path(path)
        self.checksums[f.name] = {"size": f.stat().st_size, "sha256": sha256_file(f)}

    def verify_file(self, path: str | Path) -> Path:
        """Check a file next to the ledger against what it recorded (a corpus or a :meth:`record_file`)."""
        f = Path(path)
        for name, e in self.entries.items():
            if e.path == f.name:
                return self.verify(name)
        rec = self.checksums.get(f.name)
        if rec is not None:
            from .artifacts import sha256_file

            profile = f.parent.parent.name
            redo = f"rerun notebook 01 for profile {profile} (./run_all.sh --profile {profile} --only 01), which rebuilds it"
            if not f.is_file():
                raise BudgetError(f"{shown_path(f)} is missing; {redo}")
            size = f.stat().st_size
            if size != rec["size"] or sha256_file(f) != rec["sha256"]:
                raise BudgetError(f"{shown_path(f)} does not match the budget ledger ({size:,} bytes now, {rec['size']:,} when "
                                  f"written: {'truncated' if size < rec['size'] else 'edited'}); {redo}")
        return f

    def set_track_budget(self, track_budget: int, save: bool = True) -> None:
        """Record the track budget (notebook 01 owns it); later notebooks' :meth:`check_mix` refuse another value."""
        if self.track_budget != int(track_budget):
            self.track_budget = int(track_budget)
            if save and self.path:
                self.save()

    def file_of(self, name: str) -> Path:
        e = self[name]
        if not e.path:
            raise ValueError(f"corpus {name!r} has no file in the ledger")
        return (self.path.parent if self.path else Path()) / e.path

    def verify(self, name: str) -> Path:
        """The corpus file of ``name``, checked against the size and SHA-256 recorded when it was written; a
        missing, truncated or edited file raises :class:`BudgetError` naming the notebook that rebuilds it."""
        from .artifacts import sha256_file

        e, f = self[name], self.file_of(name)
        maker = "03" if e.kind == "gen" else "01"
        profile = f.parent.parent.name
        redo = f"rerun notebook {maker} for profile {profile} (./run_all.sh --profile {profile} --only {maker}), which rebuilds it"
        if not f.is_file():
            raise BudgetError(f"corpus {name!r}: {shown_path(f)} is missing; {redo}")
        if e.sha256 is None:
            return f
        size = f.stat().st_size
        if size != e.size or sha256_file(f) != e.sha256:
            raise BudgetError(
                f"corpus {name!r}: {shown_path(f)} does not match the budget ledger ({size:,} bytes now, {e.size:,} when written: "
                f"{'truncated' if e.size and size < e.size else 'edited'}), so its word count ({e.words:,}) no longer "
                f"holds; {redo}"
            )
        return f

    def add(self, entry: CorpusEntry, save: bool = True) -> CorpusEntry:
        if entry.sha256 is None and entry.path and self.path and (self.path.parent / entry.path).is_file():
            from .artifacts import sha256_file

            f = self.path.parent / entry.path
            entry.sha256, entry.size = sha256_file(f), f.stat().st_size
        if entry.kind not in ("tiny", "baby", "gen"):
            raise ValueError(f"corpus kind must be tiny, baby or gen, not {entry.kind!r}")
        if entry.kind == "gen" and entry.generator_corpus is None:
            raise ValueError(f"generated corpus {entry.name!r} must name the corpus its generator was trained on")
        self.entries[entry.name] = entry
        if save and self.path:
            self.save()
        return entry

    def __getitem__(self, name: str) -> CorpusEntry:
        try:
            return self.entries[name]
        except KeyError:
            raise KeyError(f"corpus {name!r} is not in the ledger (known: {', '.join(sorted(self.entries)) or 'none'})") from None

    def save(self) -> None:
        if not self.path:
            raise ValueError("ledger has no path")
        extra = {"track_budget": self.track_budget} if self.track_budget is not None else {}
        if self.checksums:
            extra["checksums"] = self.checksums
        write_json(self.path, {"corpora": [asdict(e) for e in self.entries.values()], **extra})

    def check_mix(self, names: Sequence[str], track_budget: int, allow_over_budget: bool = False) -> dict[str, int]:
        """Words per kind of a mix; raises :class:`BudgetError` if |D_baby| + |D_tiny| > ``track_budget`` or a
        generator was trained on more than the track budget (unless ``allow_over_budget``). The track budget is
        notebook 01's (recorded in the ledger): another value is refused."""
        if self.track_budget is not None and int(track_budget) != self.track_budget:
            raise BudgetError(
                f"track_budget {int(track_budget):,} differs from the ledger's {self.track_budget:,}, which notebook 01 "
                f"set (params/<profile>/01_data_budgets.yaml owns the track budget): use {self.track_budget:,} here, "
                f"or change it in notebook 01's params and rerun notebook 01"
            )
        words = {"baby": 0, "tiny": 0, "gen": 0}
        problems = []
        for n in names:
            e = self[n]
            words[e.kind] += e.words
            if e.kind == "gen":
                g = self[e.generator_corpus]
                if g.words > track_budget:
                    problems.append(
                        f"the generator of {n!r} was trained on {g.name!r} ({g.words:,} words) > track budget {track_budget:,}"
                    )
        counted = words["baby"] + words["tiny"]
        if counted > track_budget:
            problems.append(
                f"|D_baby| + |D_tiny| = {words['baby']:,} + {words['tiny']:,} = {counted:,} words > track budget {track_budget:,}"
            )
        if problems and not allow_over_budget:
            raise BudgetError(
                f"mix {list(names)} breaks the challenge rule: " + "; ".join(problems)
                + " (pass allow_over_budget=True to train it anyway, outside the challenge rules)"
            )
        return words

    def table(self):
        import pandas as pd

        rows = []
        for e in self.entries.values():
            rows.append(
                {
                    "corpus": e.name,
                    "kind": e.kind,
                    "budget": fmt_words(e.budget) if e.budget else "",
                    "words": e.words,
                    **{f"words:{k}": v for k, v in sorted(e.words_by_source.items())},
                    "seed": e.seed,
                    "generator corpus": e.generator_corpus or "",
                }
            )
        df = pd.DataFrame(rows)
        cols = [c for c in df.columns if c.startswith("words")]
        df[cols] = df[cols].fillna(0).astype(int)
        return df

    def mix_table(self, mixes: Sequence[Sequence[str]], track_budget: int):
        """One row per candidate mix: words per kind and whether the challenge rule accepts it."""
        import pandas as pd

        rows = []
        for mix in mixes:
            words = self.check_mix(mix, track_budget, allow_over_budget=True)
            try:
                self.check_mix(mix, track_budget)
                verdict = "fits"
            except BudgetError:
                verdict = "refused"
            rows.append({"mix": " + ".join(mix), **{f"|D_{k}|": v for k, v in words.items()},
                         "|D_baby|+|D_tiny|": words["baby"] + words["tiny"], "track budget": track_budget, "rule": verdict})
        return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- the data stage
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
) -> Ledger:
    """Write the nested TinyStories budgets (``tiny-<B>.jsonl``) and BabyLM samples (``baby-<B>.jsonl``) under
    ``out_dir`` and register them in ``out_dir/ledger.json``. Each row: ``{"id", "source", "text"}``; TinyStories
    ids are indices into ``tiny_stories`` so later stages can point back at the exact training story.
    With ``heldout_max_words`` the stories outside the largest budget (up to that many words) are written to
    ``tiny-heldout.jsonl`` (held-out stories with real boundaries, used for validation losses), and likewise the
    BabyLM documents outside the largest BabyLM sample to ``baby-heldout.jsonl``."""
    from .artifacts import write_jsonl

    out = Path(out_dir)
    ledger = Ledger(out / "ledger.json")
    nested = nested_budgets(tiny_stories, tiny_budgets, seed)
    if heldout_max_words:
        write_jsonl(out / "tiny-heldout.jsonl", ({"id": i, "source": "tinystories", "text": tiny_stories[i]}
                                                 for i in heldout_stories(tiny_stories, nested, seed, heldout_max_words)))
        ledger.record_file(out / "tiny-heldout.jsonl")
    for b, idx in nested.items():
        name = f"tiny-{fmt_words(b)}"
        write_jsonl(out / f"{name}.jsonl", ({"id": i, "source": "tinystories", "text": tiny_stories[i]} for i in idx))
        ledger.add(
            CorpusEntry(name, "tiny", {"tinystories": sum(count_words(tiny_stories[i]) for i in idx)}, seed, dict(tiny_files), b, path=f"{name}.jsonl"),
            save=False,
        )
    order = shuffled_order(len(baby_docs), seed)
    counts = [d.words for d in baby_docs]
    if heldout_max_words and baby_budgets:
        used = set(take_prefix(counts, order, max(int(x) for x in baby_budgets)))
        rest, n = [], 0
        for i in (i for i in order if i not in used):
            if n + counts[i] > heldout_max_words:
                break
            rest.append(i)
            n += counts[i]
        write_jsonl(out / "baby-heldout.jsonl", ({"id": i, "source": baby_docs[i].source, "text": baby_docs[i].text} for i in rest))
        ledger.record_file(out / "baby-heldout.jsonl")
    for b in sorted(int(x) for x in baby_budgets):
        idx = take_prefix(counts, order, b)
        name = f"baby-{fmt_words(b)}"
        write_jsonl(out / f"{name}.jsonl", ({"id": i, "source": baby_docs[i].source, "text": baby_docs[i].text} for i in idx))
        by_src: dict[str, int] = {}
        for i in idx:
            by_src[baby_docs[i].source] = by_src.get(baby_docs[i].source, 0) + counts[i]
        ledger.add(CorpusEntry(name, "baby", by_src, seed, dict(baby_files), b, path=f"{name}.jsonl"), save=False)
    ledger.save()
    return ledger


def read_corpus(path: str | Path) -> list[dict]:
    """Rows of a corpus written by :func:`prepare_corpora` (or a generated corpus). A corpus registered in the
    ledger next to it is first checked against the ledger's size and SHA-256 (see :meth:`Ledger.verify`), so a
    truncated or edited file stops with a message instead of feeding a model silently."""
    from .artifacts import read_jsonl
    from .config import require_output

    path = Path(path)
    if (path.parent / "ledger.json").is_file():
        Ledger(path.parent / "ledger.json").verify_file(path)
    require_output(path, "corpus")  # missing (notebook 01 never ran): a message naming the notebook to run
    return read_jsonl(path)


def write_corpus(path: str | Path, rows: Iterable[dict]) -> Path:
    """Write a corpus (one JSON object per row, each with a ``text`` field), atomically."""
    from .artifacts import write_jsonl

    return write_jsonl(path, rows)
