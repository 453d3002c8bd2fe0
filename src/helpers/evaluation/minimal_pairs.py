"""Minimal-pair tasks (``docs/methods.md#minimal-pairs``): the items of BLiMP, the BLiMP supplement and EWoK, their
loaders and the task registry.

Data (bundled, checksum-verified through :func:`helpers.data.corpora.read_text`):

* BLiMP, BabyLM vocabulary-filtered: ``data/babylm_eval/blimp_filtered/*.jsonl.gz`` (67 paradigms, 59,875 pairs;
  fields ``sentence_good``/``sentence_bad``/``field``/``linguistics_term``/``UID``/``pair_id``); the full BLiMP
  (``data/blimp/data``, 67,000 pairs, ``pairID``) with ``blimp_version="full"``.
* The supplement: ``data/babylm_eval/supplement_filtered/*.jsonl.gz`` (5 tasks, 5,218 pairs). Only
  ``sentence_good``/``sentence_bad`` are common to the five files (the rest are per-task metadata: ``row``,
  ``contrast``, ``fragment``, ``pair_ID``, ``template``, ``quad``, ...), so the pair id is the line number.
* EWoK, BabyLM-filtered: ``data/babylm_eval/ewok_filtered/*.jsonl.gz`` (11 domains = files, 7,618 items; fields
  ``Context1``/``Context2``/``Target1``/``Target2`` + metadata); pair id = line number.

**Data quirks** (kept as they are): 7 filtered BLiMP pairs have identical good and bad sentences (passive_1 ×2,
principle_A_case_2 ×5), so every model ties on them; in EWoK physical-relations, 10 (context, target) strings are
the right answer of one item and the wrong one of another, so no scorer of (context, target) alone reaches 100 %.

**Registry.** :data:`TASK_REGISTRY` maps a task name to a :class:`MinimalPairTask` (its name in the tables, its
loader, the folder of its data files); :func:`load_task` and :func:`task_files` read it, and :data:`TASKS` and
:data:`TASK_NAMES` follow it. A new task stored like the supplement (``sentence_good``/``sentence_bad`` rows, one
paradigm per file) is its data plus one entry, :func:`pair_file_task`; a task with another layout also brings its
loader. How the items are scored and summarised is :mod:`helpers.evaluation.zero_shot`.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Mapping, Sequence

import numpy as np

from helpers.data.corpora import DataError, read_jsonl_rows, resolve

DATA_DIRS = {
    "blimp": "babylm_eval/blimp_filtered",
    "blimp_full": "blimp/data",
    "supplement": "babylm_eval/supplement_filtered",
    "ewok": "babylm_eval/ewok_filtered",
}

# BLiMP linguistics_term -> the phenomenon rows of the BERTtime paper's Table 4 (the BLiMP paper's 12 phenomena)
BLIMP_PHENOMENA: dict[str, str] = {
    "anaphor_agreement": "Anaphor Agreement",
    "argument_structure": "Argument Structure",
    "s-selection": "Argument Structure",
    "binding": "Binding",
    "control_raising": "Control/Raising",
    "determiner_noun_agreement": "Determiner-Noun-Agr.",
    "ellipsis": "Ellipsis",
    "filler_gap_dependency": "Filler Gap",
    "irregular_forms": "Irregular Forms",
    "island_effects": "Island Effects",
    "npi_licensing": "NPI Licensing",
    "quantifiers": "Quantifiers",
    "subject_verb_agreement": "Subject-verb Agr.",
}
# supplement file -> Table 6 row
SUPPLEMENT_NAMES: dict[str, str] = {
    "hypernym": "Hypernym",
    "qa_congruence_easy": "Question-Ans. Congr. (easy)",
    "qa_congruence_tricky": "Question-Ans. Congr. (tricky)",
    "subject_aux_inversion": "Subject-Auxiliary Inversion",
    "turn_taking": "Turn-taking",
}


def ewok_domain_name(stem: str) -> str:
    """``agent-properties`` -> ``agent properties`` (the row names of Table 5)."""
    return stem.replace("-", " ")


# ============================================================================================ items and loaders


@dataclass(frozen=True)
class Item:
    """One minimal pair. ``good``/``bad`` are the continuations compared; ``context`` (EWoK) conditions both."""

    task: str  # blimp | supplement | ewok
    paradigm: str  # BLiMP UID, supplement file, EWoK domain (file)
    phenomenon: str  # Table 4 phenomenon, Table 6 task name, Table 5 domain name
    pair_id: str
    good: str
    bad: str
    context: str | None = None
    term: str = ""  # BLiMP linguistics_term as in the data (empty elsewhere)


def _jsonl_rows(path: Path) -> list[dict]:
    return read_jsonl_rows(path)


def _files(sub: str) -> list[Path]:
    folder = resolve(sub)
    files = sorted(folder.glob("*.jsonl.gz")) or sorted(folder.glob("*.jsonl"))
    if not files:
        raise DataError(f"no *.jsonl(.gz) files in {folder}")
    return files


def _stem(p: Path) -> str:
    return p.name.split(".jsonl")[0]


def _need(row: dict, keys: Sequence[str], where: str) -> None:
    missing = [k for k in keys if k not in row]
    if missing:
        raise DataError(f"{where}: missing field(s) {missing}; found {sorted(row)}")


def _subsample(items: list[Item], limit: int | None, seed: int, key: str) -> list[Item]:
    """At most ``limit`` items, a seeded sample that keeps the file order (per paradigm / file)."""
    if limit is None or len(items) <= limit:
        return items
    rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
    keep = np.sort(rng.choice(len(items), size=int(limit), replace=False))
    return [items[i] for i in keep]


def load_blimp(version: Literal["filtered", "full"] = "filtered", limit_per_task: int | None = None,
               seed: int = 0) -> list[Item]:
    """BLiMP pairs, one paradigm per file. ``version="filtered"``: the BabyLM vocabulary-filtered set (59,875 pairs);
    ``"full"``: the original 67 × 1,000."""
    if version not in ("filtered", "full"):
        raise ValueError(f"BLiMP version must be 'filtered' or 'full', not {version!r}")
    sub = DATA_DIRS["blimp" if version == "filtered" else "blimp_full"]
    id_key = "pair_id" if version == "filtered" else "pairID"
    out: list[Item] = []
    for f in _files(sub):
        items = []
        for i, r in enumerate(_jsonl_rows(f)):
            _need(r, ("sentence_good", "sentence_bad", "linguistics_term", "UID"), f"{f.name} line {i + 1}")
            term = r["linguistics_term"]
            if term not in BLIMP_PHENOMENA:
                raise DataError(f"{f.name}: unknown BLiMP linguistics_term {term!r}")
            items.append(Item("blimp", r["UID"], BLIMP_PHENOMENA[term], str(r.get(id_key, i)),
                              r["sentence_good"], r["sentence_bad"], None, term))
        out += _subsample(items, limit_per_task, seed, f"blimp/{_stem(f)}")
    return out


def load_pair_files(task: str, folder: str, limit_per_task: int | None = None, seed: int = 0,
                    names: Mapping[str, str] | None = None) -> list[Item]:
    """Minimal pairs from a folder of ``*.jsonl(.gz)`` files whose rows have ``sentence_good``/``sentence_bad`` (the
    supplement's layout): one paradigm per file, its phenomenon ``names[stem]`` (else the file's stem), pair id =
    line number. ``folder`` is resolved under ``data/`` (or is absolute)."""
    out: list[Item] = []
    for f in _files(folder):
        name = _stem(f)
        items = []
        for i, r in enumerate(_jsonl_rows(f)):
            _need(r, ("sentence_good", "sentence_bad"), f"{f.name} line {i + 1}")
            items.append(Item(task, name, (names or {}).get(name, name), str(i), r["sentence_good"], r["sentence_bad"]))
        out += _subsample(items, limit_per_task, seed, f"{task}/{name}")
    return out


def load_supplement(limit_per_task: int | None = None, seed: int = 0) -> list[Item]:
    """The BLiMP supplement (5 tasks). Pair id = line number in the file."""
    return load_pair_files("supplement", DATA_DIRS["supplement"], limit_per_task, seed, SUPPLEMENT_NAMES)


def load_ewok(limit_per_task: int | None = None, seed: int = 0) -> list[Item]:
    """EWoK (11 domains, one file each): good = Target1, bad = Target2, context = Context1 (the 2024 template).
    Pair id = line number in the file."""
    out: list[Item] = []
    for f in _files(DATA_DIRS["ewok"]):
        name = _stem(f)
        items = []
        for i, r in enumerate(_jsonl_rows(f)):
            _need(r, ("Context1", "Target1", "Target2"), f"{f.name} line {i + 1}")
            items.append(Item("ewok", name, ewok_domain_name(name), str(i), r["Target1"], r["Target2"],
                              r["Context1"]))
        out += _subsample(items, limit_per_task, seed, f"ewok/{name}")
    return out


# ============================================================================================ the task registry


@dataclass(frozen=True)
class MinimalPairTask:
    """One registered minimal-pair task."""

    display: str  # its column in the tables (the papers' headers)
    load: Callable[[int | None, int, str], list[Item]]  # (limit_per_task, seed, blimp_version) -> items
    data_dir: Callable[[str], str]  # blimp_version -> folder of its *.jsonl(.gz) files (their digests key the cache)


def pair_file_task(task: str, display: str, folder: str, names: Mapping[str, str] | None = None) -> MinimalPairTask:
    """The registry entry of a task stored like the supplement (:func:`load_pair_files`). Adding such a task is
    its data plus ``TASK_REGISTRY[task] = pair_file_task(task, "Column", "its/folder")``; a task with another layout
    (contexts, metadata) brings its own loader, as BLiMP and EWoK do."""
    return MinimalPairTask(display, lambda limit, seed, version: load_pair_files(task, folder, limit, seed, names),
                           lambda version: folder)


# task name -> its record, in the order of the tables
TASK_REGISTRY: dict[str, MinimalPairTask] = {
    "blimp": MinimalPairTask("BLiMP", lambda limit, seed, version: load_blimp(version, limit, seed),
                             lambda version: DATA_DIRS["blimp_full"] if version == "full" else DATA_DIRS["blimp"]),
    "supplement": pair_file_task("supplement", "Supp.", DATA_DIRS["supplement"], SUPPLEMENT_NAMES),
    "ewok": MinimalPairTask("EWoK", lambda limit, seed, version: load_ewok(limit, seed),
                            lambda version: DATA_DIRS["ewok"]),
}
TASKS = tuple(TASK_REGISTRY)  # the bundled tasks, every notebook's default (a task registered later is used by name)
TASK_NAMES = {name: task.display for name, task in TASK_REGISTRY.items()}


def task_display(task: str) -> str:
    """A task's column name in the tables (its registered ``display``; an unregistered name as it is)."""
    return TASK_REGISTRY[task].display if task in TASK_REGISTRY else task


def _registered(task: str) -> MinimalPairTask:
    if task not in TASK_REGISTRY:
        raise ValueError(f"unknown task {task!r}; choose from {tuple(TASK_REGISTRY)}")
    return TASK_REGISTRY[task]


Limit = int | None | Mapping[str, int | None]  # pairs per paradigm / file: one number for every task, or per task


def task_limit(limit: Limit, task: str) -> int | None:
    """The pairs per paradigm / file that ``limit`` gives ``task``: ``limit`` itself when it is a number (or None:
    every pair), else ``limit[task]`` (a mapping must name every task it is asked for, so that no task is scored on
    every pair by omission)."""
    if isinstance(limit, Mapping):
        unknown = sorted(set(limit) - set(TASK_REGISTRY))
        if unknown:
            raise ValueError(f"limit_per_task names unknown task(s) {unknown}; choose from {tuple(TASK_REGISTRY)}")
        if task not in limit:
            raise ValueError(f"limit_per_task {dict(limit)} gives no limit for {task!r}: add it (null for every pair)")
        limit = limit[task]
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"a limit per paradigm / file must be a whole number >= 1 or None, not {limit!r}")
    return limit


def load_task(task: str, limit_per_task: Limit = None, seed: int = 0,
              blimp_version: Literal["filtered", "full"] = "filtered") -> list[Item]:
    """The items of a registered task (``limit_per_task``: a seeded sample of at most that many per paradigm / file,
    one number for every task or a mapping task -> number, :func:`task_limit`)."""
    return _registered(task).load(task_limit(limit_per_task, task), seed, blimp_version)


def task_files(task: str, blimp_version: str = "filtered") -> list[Path]:
    """The data files of a registered task."""
    return _files(_registered(task).data_dir(blimp_version))
