"""Word budgets and the budget ledger (``docs/methods.md#budgets``, ``docs/methods.md#challenge-rule``).

* TinyStories budgets are **nested**: the stories are shuffled once with a seed, then a budget of B words takes
  whole stories from the front until adding the next would exceed B (so 0.5M ⊂ 1M ⊂ …, like the reference
  code's prefixes of the train file).
* BabyLM is sampled at document level the same way (seeded shuffle of documents, then a prefix).
* The **ledger** records, for every corpus, its words by source, the input file checksums and the seed, and
  checks the challenge rule |D_baby| + |D_tiny ∪ generator corpus| ≤ track budget (D_gen itself is free, but the
  corpus its generator was trained on counts, and its prompts must come from stories inside that union).
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Sequence, TypeVar

import pandas as pd

from helpers.core.artifacts import read_json, read_jsonl, sha256_file, write_json, write_jsonl
from helpers.core.config import require_output, shown_path
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


def reserve_heldout(texts: Sequence[str], seed: int, max_words: int) -> list[int]:
    """Indices of the held-out reserve of a "full" budget: whole stories from the **end** of the seeded shuffle, up to
    ``max_words`` words (in shuffle order). The full budget is every other story."""
    order = shuffled_order(len(texts), seed)
    out, n = [], 0
    for i in reversed(order):
        w = count_words(texts[i])
        if n + w > max_words:
            break
        out.append(i)
        n += w
    return out[::-1]


def plan_budgets(texts: Sequence[str], budgets: Iterable[int], seed: int, heldout_max_words: int = 0,
                 full_budget: int | None = None) -> tuple[dict[int, list[int]], list[int]]:
    """``(budget -> indices, held-out indices)``. Without ``full_budget``, :func:`nested_budgets` and the held-out
    stories after the largest budget (:func:`heldout_stories`). With ``full_budget`` (one of ``budgets``, the largest:
    the paper's "all of TinyStories", nominally 440M words), a held-out reserve of ``heldout_max_words`` is first set
    aside from the end of the shuffle (:func:`reserve_heldout`), every budget takes a prefix of the rest, and the full
    budget takes all of the rest whatever its word count (nested still: the smaller budgets are prefixes of it)."""
    budgets = sorted(int(b) for b in budgets)
    if full_budget is None:
        nested = nested_budgets(texts, budgets, seed)
        return nested, (heldout_stories(texts, nested, seed, heldout_max_words) if heldout_max_words else [])
    full_budget = int(full_budget)
    if not budgets or full_budget != budgets[-1]:
        raise BudgetError(f"full budget {full_budget:,} must be the largest of the budgets {budgets}")
    held = reserve_heldout(texts, seed, heldout_max_words) if heldout_max_words else []
    reserved = set(held)
    pool = [i for i in shuffled_order(len(texts), seed) if i not in reserved]
    counts = [count_words(t) for t in texts]
    nested = {b: take_prefix(counts, pool, b) for b in budgets[:-1]}
    if budgets[:-1] and len(nested[budgets[-2]]) == len(pool):
        raise BudgetError(f"the full budget would hold no more stories than the {budgets[-2]:,}-word budget; add data")
    nested[full_budget] = pool
    return nested, held


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

    def _ids_words(self, name: str) -> dict | None:
        """``story id -> words`` of a corpus whose file is present (None when it is not)."""
        e = self[name]
        if not (e.path and self.path and (self.path.parent / e.path).is_file()):
            return None
        return {r["id"]: count_words(r["text"]) for r in read_jsonl(self.path.parent / e.path)}

    def _union_words(self, names: Sequence[str]) -> tuple[int, set | None]:
        """Words of the union of corpora (of one kind) and the union's story ids (None when a file is missing).
        Corpora that are nested budgets of one shuffle (same kind, seed and input files, written by
        :func:`prepare_corpora`) have the largest as their union; otherwise the files are read and the union is taken
        story by story (without files, the words are added up: an upper bound)."""
        names = list(dict.fromkeys(names))
        if not names:
            return 0, set()
        es = [self[n] for n in names]
        tables = [self._ids_words(n) for n in names]
        ids = None if any(t is None for t in tables) else set().union(*tables)
        if len(names) == 1:
            return es[0].words, ids
        if all(e.kind in ("tiny", "baby") and e.kind == es[0].kind and e.seed == es[0].seed and e.files == es[0].files
               and e.budget is not None for e in es):
            return max(e.words for e in es), ids
        if ids is None:
            return sum(e.words for e in es), None
        merged: dict = {}
        for t in tables:
            merged.update(t)
        return sum(merged.values()), ids

    def rule_words(self, names: Sequence[str]) -> dict[str, int]:
        """The words the challenge rule counts for a mix: ``baby`` = |D_baby ∪ generator corpora of kind baby|,
        ``tiny`` = |D_tiny ∪ generator corpora of kind tiny|, and ``counted`` = their sum. A generator's training
        corpus counts because the rule lets a model generate data only from data inside the budget: the stories the
        generator saw are part of the mix's data whether or not the mix also trains on them."""
        groups: dict[str, list[str]] = {"baby": [], "tiny": []}
        for n in names:
            e = self[n]
            if e.kind in groups:
                groups[e.kind].append(n)
            else:
                g = self[e.generator_corpus]
                if g.kind in groups:
                    groups[g.kind].append(g.name)
        out = {k: self._union_words(v)[0] for k, v in groups.items()}
        out["counted"] = out["baby"] + out["tiny"]
        return out

    def check_prompts(self, gen_name: str, names: Sequence[str]) -> list[str]:
        """Problems with the prompts of generated corpus ``gen_name`` in a mix ``names``: every prompt's story id
        (``story_id`` of its rows) must lie in D_tiny ∪ the generator's corpus (of the generator corpus's kind), i.e.
        the generator completed stories that the mix is allowed to hold. Empty when the files are not present."""
        e = self[gen_name]
        if not (e.path and self.path and (self.path.parent / e.path).is_file()):
            return []
        g = self[e.generator_corpus]
        _, ids = self._union_words([n for n in names if self[n].kind == g.kind] + [g.name])
        if ids is None:
            return []
        prompt_ids = {r["story_id"] for r in read_jsonl(self.path.parent / e.path) if "story_id" in r}
        outside = sorted(prompt_ids - ids, key=str)
        if outside:
            return [f"{len(outside):,} prompt(s) of {gen_name!r} come from stories outside D_{g.kind} ∪ {g.name!r} "
                    f"(story ids {', '.join(map(str, outside[:5]))}{' …' if len(outside) > 5 else ''})"]
        return []

    def check_mix(self, names: Sequence[str], track_budget: int, allow_over_budget: bool = False) -> dict[str, int]:
        """Words per kind of a mix; raises :class:`BudgetError` if |D_baby| + |D_tiny ∪ generator corpora| > ``track_budget``
        (:meth:`rule_words`), a generator was trained on more than the track budget, or a generated corpus's prompts
        come from stories outside that union (:meth:`check_prompts`), unless ``allow_over_budget``. The track budget
        is notebook 01's (recorded in the ledger): another value is refused."""
        if self.track_budget is not None and int(track_budget) != self.track_budget:
            raise BudgetError(
                f"track_budget {int(track_budget):,} differs from the ledger's {self.track_budget:,}, which notebook 01 "
                f"set (params/<profile>/01_data_budgets.yaml owns the track budget): use {self.track_budget:,} here, "
                f"or change it in notebook 01's params and rerun notebook 01"
            )
        words = {"baby": 0, "tiny": 0, "gen": 0}
        problems = []
        for n in dict.fromkeys(names):
            e = self[n]
            words[e.kind] += e.words
            if e.kind == "gen":
                g = self[e.generator_corpus]
                if g.words > track_budget:
                    problems.append(
                        f"the generator of {n!r} was trained on {g.name!r} ({g.words:,} words) > track budget {track_budget:,}"
                    )
                problems += self.check_prompts(n, names)
        rule = self.rule_words(names)
        if rule["counted"] > track_budget:
            gens = sorted({self[n].generator_corpus for n in names if self[n].kind == "gen"})
            what = "|D_baby| + |D_tiny" + (f" ∪ {', '.join(gens)}" if gens else "") + "|"
            problems.append(
                f"{what} = {rule['baby']:,} + {rule['tiny']:,} = {rule['counted']:,} words > track budget {track_budget:,}"
            )
        if problems and not allow_over_budget:
            raise BudgetError(
                f"mix {list(names)} breaks the challenge rule: " + "; ".join(problems)
                + " (pass allow_over_budget=True to train it anyway, outside the challenge rules)"
            )
        return words

    def table(self):
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
        rows = []
        for mix in mixes:
            words = self.check_mix(mix, track_budget, allow_over_budget=True)
            try:
                self.check_mix(mix, track_budget)
                verdict = "fits"
            except BudgetError:
                verdict = "refused"
            rows.append({"mix": " + ".join(mix), **{f"|D_{k}|": v for k, v in words.items()},
                         "counted (|D_baby| + |D_tiny ∪ generator corpus|)": self.rule_words(mix)["counted"],
                         "track budget": track_budget, "rule": verdict})
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
    full_budget: int | None = None,
    baby_full_budget: int | None = None,
    baby_heldout_docs: Sequence[Document] | None = None,
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
    training documents, so that a full BabyLM sample keeps every training document."""
    out = Path(out_dir)
    ledger = Ledger(out / "ledger.json")
    nested, held = plan_budgets(tiny_stories, tiny_budgets, seed, heldout_max_words, full_budget)
    if heldout_max_words:
        write_jsonl(out / "tiny-heldout.jsonl", ({"id": i, "source": "tinystories", "text": tiny_stories[i]} for i in held))
        ledger.record_file(out / "tiny-heldout.jsonl")
    for b, idx in nested.items():
        name = f"tiny-{fmt_words(b)}"
        write_jsonl(out / f"{name}.jsonl", ({"id": i, "source": "tinystories", "text": tiny_stories[i]} for i in idx))
        note = (f"all {len(idx):,} stories but the held-out reserve ({len(held):,} stories); nominal {fmt_words(b)}"
                if full_budget is not None and b == int(full_budget) else "")
        ledger.add(
            CorpusEntry(name, "tiny", {"tinystories": sum(count_words(tiny_stories[i]) for i in idx)}, seed, dict(tiny_files), b,
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
        note = (f"all {len(idx):,} documents but the held-out reserve ({len(baby_held):,}); nominal {fmt_words(b)}"
                if baby_full_budget is not None and b == int(baby_full_budget) else "")
        ledger.add(CorpusEntry(name, "baby", by_src, seed, dict(baby_files), b, path=f"{name}.jsonl", note=note), save=False)
    ledger.save()
    return ledger


def read_corpus(path: str | Path) -> list[dict]:
    """Rows of a corpus written by :func:`prepare_corpora` (or a generated corpus). A corpus registered in the
    ledger next to it is first checked against the ledger's size and SHA-256 (see :meth:`Ledger.verify`), so a
    truncated or edited file stops with a message instead of feeding a model silently."""
    path = Path(path)
    if (path.parent / "ledger.json").is_file():
        Ledger(path.parent / "ledger.json").verify_file(path)
    require_output(path, "corpus")  # missing (notebook 01 never ran): a message naming the notebook to run
    return read_jsonl(path)


def write_corpus(path: str | Path, rows: Iterable[dict]) -> Path:
    """Write a corpus (one JSON object per row, each with a ``text`` field), atomically."""
    return write_jsonl(path, rows)
