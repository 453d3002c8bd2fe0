"""The budget ledger (``docs/methods.md#budgets``, ``docs/methods.md#challenge-rule``).

The **ledger** records, for every corpus, its words by source, the input file checksums and the seed, and checks
the challenge rule |D_baby| + |D_tiny ∪ generator corpus| ≤ track budget (D_gen itself is free, but the corpus its
generator was trained on counts, and its prompts must come from stories inside that union). It also verifies the
corpus files next to it (size and SHA-256 as written).

Scale: the challenge-rule checks read no corpus file unless a mix holds a generated corpus (whose prompts are checked
story by story, streaming).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import pandas as pd

from helpers.core.artifacts import iter_rows, read_json, write_json
from helpers.core.config import shown_path
from helpers.core.digests import sha256_file
from helpers.data.budgets import BudgetError, fmt_words
from helpers.data.corpora import count_words


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
    # the words the challenge rule counts it as, where that is not its whitespace words: a whole official set (all of
    # BabyLM's train_10M) is the track's nominal budget whatever its whitespace count (speaker tags, markup included)
    counted_as: int | None = None

    @property
    def words(self) -> int:
        return sum(self.words_by_source.values())

    @property
    def rule_words(self) -> int:
        """The words the challenge rule counts: ``counted_as`` for a whole official set, else its words."""
        return self.words if self.counted_as is None else int(self.counted_as)


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

    def require(self, names, kind: str = "tiny") -> None:
        """Refuse the ``names`` that are not in the ledger, all in one line that names the ledger's corpora of
        ``kind`` (a mistyped budget in a notebook's params, said before anything looks for its files)."""
        unknown = [n for n in dict.fromkeys(names) if n not in self.entries]
        if unknown:
            known = ", ".join(n for n, e in self.entries.items() if e.kind == kind) or "none"
            raise ValueError(f"budget{'s' * (len(unknown) > 1)} {', '.join(unknown)} {'are' if len(unknown) > 1 else 'is'} "
                             f"not in the budget ledger of notebook 01 ({shown_path(self.path) if self.path else 'in memory'}); "
                             f"its {kind} budgets: {known} (notebook 01's {kind}_budgets param makes others)")

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
        """``story id -> words`` of a corpus whose file is present (None when it is not); the file is streamed."""
        e = self[name]
        if not (e.path and self.path and (self.path.parent / e.path).is_file()):
            return None
        return {r["id"]: count_words(r["text"]) for r in iter_rows(self.path.parent / e.path)}

    def _nested(self, names: Sequence[str]) -> bool:
        """Whether the corpora are nested budgets of one shuffle (same kind, seed and input files, written by
        :func:`helpers.data.corpus_files.prepare_corpora`): the largest is their union."""
        es = [self[n] for n in names]
        return all(e.kind in ("tiny", "baby") and e.kind == es[0].kind and e.seed == es[0].seed and e.files == es[0].files
                   and e.budget is not None for e in es)

    def _union_words(self, names: Sequence[str], need_ids: bool = True) -> tuple[int, set | None]:
        """Words of the union of corpora (of one kind) and the union's story ids (None when a file is missing, or
        when not ``need_ids`` and the words did not need them). Corpora that are nested budgets of one shuffle
        (:meth:`_nested`) have the largest as their union (no file is read for the words); otherwise the files are
        read and the union is taken story by story (without files, the words are added up: an upper bound)."""
        names = list(dict.fromkeys(names))
        if not names:
            return 0, set()
        es = [self[n] for n in names]
        tables = [self._ids_words(n) for n in names] if need_ids else None
        ids = None if tables is None or any(t is None for t in tables) else set().union(*tables)
        if len(names) == 1:
            return es[0].rule_words, ids
        if self._nested(names):
            return max(e.rule_words for e in es), ids
        if tables is None:  # the words need the stories after all
            tables = [self._ids_words(n) for n in names]
            ids = None if any(t is None for t in tables) else set().union(*tables)
        if ids is None:
            return sum(e.words for e in es), None
        merged: dict = {}
        for t in tables:
            merged.update(t)
        return sum(merged.values()), ids

    def rule_words(self, names: Sequence[str]) -> dict[str, int]:
        """The words the challenge rule counts for a mix: ``baby`` = |D_baby ∪ generator corpora of kind baby|,
        ``tiny`` = |D_tiny ∪ generator corpora of kind tiny|, and ``counted`` = their sum. A whole official set counts
        at its nominal size (:attr:`CorpusEntry.counted_as`: all of BabyLM's train_10M is the 10M track's 10M, as the
        challenge counts it, though its whitespace words with speaker tags exceed 10M). A generator's training
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
        out = {k: self._union_words(v, need_ids=False)[0] for k, v in groups.items()}
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
        prompt_ids = {r["story_id"] for r in iter_rows(self.path.parent / e.path) if "story_id" in r}
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
            try:
                words = self.check_mix(mix, track_budget)
                verdict = "fits"
            except BudgetError:
                words = self.check_mix(mix, track_budget, allow_over_budget=True)
                verdict = "refused"
            rows.append({"mix": " + ".join(mix), **{f"|D_{k}|": v for k, v in words.items()},
                         "counted (|D_baby| + |D_tiny ∪ generator corpus|)": self.rule_words(mix)["counted"],
                         "track budget": track_budget, "rule": verdict})
        return pd.DataFrame(rows)
