"""The (Super)GLUE tasks of the BabyLM 2024 fine-tuning: the task table, examples read from the bundled files,
seeded splits and the metrics. The inputs, labels, metrics and split protocols are described in
``docs/methods.md#glue``; fine-tuning itself is :mod:`helpers.evaluation.finetune`.

Entry points: :data:`TASKS` (one :class:`TaskSpec` per task: fields, label names, metric, grouping key),
:func:`render` (a raw row → its segments ``(a, b)``, ``b`` None for single-segment tasks), :func:`read_rows` and
:func:`load_examples` (read through :func:`helpers.data.corpora.read_jsonl_rows`, so every file is checksum-verified;
segments whitespace-stripped), :func:`carve_splits` and :func:`subsample` (the seeded, group-aware splitting that
:func:`helpers.evaluation.finetune_setup.prepare_task` applies per protocol), :func:`score_all` and
:func:`metric_interval` (scores of a split and their bootstrap interval), :func:`majority_label` and
:func:`constant_score` (the majority-class baseline).
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from helpers.core.stats import bootstrap_interval
from helpers.data.corpora import DataError, read_jsonl_rows, resolve

GLUE_DIR = "babylm_eval/glue_filtered"
STANDARD = "standard"
SCALED = "scaled (train carved from validation)"


# ============================================================================================= task table


def _strip(x: Any) -> str:
    return str(x).strip()


@dataclass(frozen=True)
class TaskSpec:
    """One (Super)GLUE task: input fields, label names, metric, files, template and split grouping."""

    name: str
    collection: str  # glue | super_glue
    fields: tuple[str, ...]  # raw fields the template reads
    label_names: tuple[str, ...]  # index = the integer label of the file
    metric: str  # mcc | f1 | accuracy
    has_train: bool  # is {name}.train.jsonl.gz bundled
    group_field: Optional[str] = None  # examples sharing this value stay in one split
    train_task: Optional[str] = None  # mnli-mm: evaluated with the mnli model

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def trained_as(self) -> str:
        return self.train_task or self.name

    @property
    def protocol(self) -> str:
        return STANDARD if TASKS[self.trained_as].has_train else SCALED

    def file(self, split: str) -> str:
        return f"{GLUE_DIR}/{self.name}.{split}.jsonl.gz"


TASKS: dict[str, TaskSpec] = {
    t.name: t
    for t in [
        TaskSpec("boolq", "super_glue", ("question", "passage"), ("False", "True"), "accuracy", False, "passage"),
        TaskSpec("cola", "glue", ("sentence",), ("unacceptable", "acceptable"), "mcc", True),
        TaskSpec("mnli", "glue", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"), "accuracy",
                 False, "premise"),
        TaskSpec("mnli-mm", "glue", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"),
                 "accuracy", False, "premise", train_task="mnli"),
        TaskSpec("mrpc", "glue", ("sentence1", "sentence2"), ("not_equivalent", "equivalent"), "f1", True),
        TaskSpec("multirc", "super_glue", ("paragraph", "question", "answer"), ("False", "True"), "accuracy", False,
                 "idx.paragraph"),
        TaskSpec("qnli", "glue", ("question", "sentence"), ("entailment", "not_entailment"), "accuracy", False,
                 "question"),
        TaskSpec("qqp", "glue", ("question1", "question2"), ("not_duplicate", "duplicate"), "f1", False),
        TaskSpec("rte", "glue", ("sentence1", "sentence2"), ("entailment", "not_entailment"), "accuracy", True),
        TaskSpec("sst2", "glue", ("sentence",), ("negative", "positive"), "accuracy", False),
        TaskSpec("wsc", "super_glue", ("text", "span1_text", "span2_text"), ("False", "True"), "accuracy", True,
                 "text"),
    ]
}
TASK_NAMES: tuple[str, ...] = tuple(TASKS)


def render(task: str, row: dict) -> tuple[str, Optional[str]]:
    """The input segments (a, b) of one raw row (b is None for single-sentence tasks); the templates are
    tabled in ``docs/methods.md#glue``."""
    if task == "multirc":
        return _strip(row["paragraph"]), f"{_strip(row['question'])} {_strip(row['answer'])}"
    if task == "wsc":
        return _strip(row["text"]), f'Does "{_strip(row["span2_text"])}" refer to "{_strip(row["span1_text"])}"?'
    spec = TASKS[task]
    a = _strip(row[spec.fields[0]])
    return (a, _strip(row[spec.fields[1]])) if len(spec.fields) > 1 else (a, None)


# ============================================================================================= examples and splits


@dataclass(frozen=True)
class Example:
    uid: str  # "{task}.{split}:{row number}": unique over all files
    a: str
    b: Optional[str]
    label: int
    group: str  # split-grouping key (the uid when the task has no grouping)


def _field(row: dict, path: str) -> Any:
    for part in path.split("."):
        row = row[part]
    return row


def read_rows(task: str, split: str, path: str | Path | None = None) -> list[dict]:
    """Raw rows of ``{task}.{split}.jsonl.gz`` (checksum-verified), or of ``path`` when given."""
    spec = TASKS[task]
    return read_jsonl_rows(path or spec.file(split))


def train_file(task: str, train_dir: str | Path | None = None) -> str | None:
    """The training file of ``task``: ``{train_dir}/{task}.train.jsonl`` (or ``.jsonl.gz``) when ``train_dir`` holds
    it (the BabyLM 2024 (Super)GLUE files, e.g. the full ``glue_filtered`` folder of the evaluation pipeline), else
    the bundled one when there is one, else None (the task then runs the scaled protocol)."""
    if train_dir:
        for suffix in (".train.jsonl", ".train.jsonl.gz"):
            try:
                return str(resolve(Path(train_dir) / f"{task}{suffix}"))
            except FileNotFoundError:
                pass
    return TASKS[task].file("train") if TASKS[task].has_train else None


def load_examples(task: str, split: str, path: str | Path | None = None) -> list[Example]:
    """Examples of one bundled file (``split`` = ``train`` or ``valid``), labels checked against the task; ``path``
    reads another file of the same format (a BabyLM training file from ``train_dir``)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(TASK_NAMES)}")
    spec = TASKS[task]
    if split == "train" and not spec.has_train and path is None:
        raise DataError(f"{task} has no bundled train file (see data/SOURCES.md); use the scaled protocol or give "
                        "the BabyLM training files (fine-tuning parameter train_dir)")
    out = []
    for i, row in enumerate(read_rows(task, split, path)):
        missing = [f for f in spec.fields + ("label",) if f not in row]
        if missing:
            raise DataError(f"{spec.file(split)} row {i}: missing field(s) {missing}")
        label = row["label"]
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < spec.num_labels:
            raise DataError(f"{spec.file(split)} row {i}: label {label!r} not in 0..{spec.num_labels - 1}")
        uid = f"{task}.{split}:{i}"
        group = str(_field(row, spec.group_field)) if spec.group_field else uid
        a, b = render(task, row)
        out.append(Example(uid, a, b, label, group))
    return out


def _rng(*keys: Any) -> np.random.Generator:
    """A numpy generator seeded by ints and strings (strings through CRC32, stable across processes)."""
    return np.random.default_rng([k if isinstance(k, int) else zlib.crc32(str(k).encode()) for k in keys])


def carve_splits(groups: Sequence[str], fractions: dict[str, float], seed: int | Sequence[Any]) -> dict[str, np.ndarray]:
    """Seeded, disjoint split of ``len(groups)`` examples into ``fractions`` (e.g. train 0.7, dev 0.1, test 0.2).

    Examples with the same group value land in the same split. Groups are shuffled with the seed and dealt out
    in order: every split but the first is filled up to ``round(fraction · n)`` examples (with whole groups, so
    sizes are approximate when groups are large), the first split takes the rest. Returns sorted index arrays
    that together cover ``range(n)`` exactly once."""
    if not fractions or any(f < 0 for f in fractions.values()) or abs(sum(fractions.values()) - 1) > 1e-6:
        raise ValueError(f"fractions must be non-negative and sum to 1, got {fractions}")
    n = len(groups)
    members: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    keys = list(members)
    rng = _rng(*seed) if isinstance(seed, (list, tuple)) else _rng(seed)
    order = rng.permutation(len(keys))
    names = list(fractions)
    filling = names[1:]  # the first split takes what is left
    targets = {s: int(round(fractions[s] * n)) for s in filling}
    out: dict[str, list[int]] = {s: [] for s in names}
    j = 0
    for s in filling:
        while len(out[s]) < targets[s] and j < len(order):
            out[s].extend(members[keys[order[j]]])
            j += 1
    for k in order[j:]:
        out[names[0]].extend(members[keys[k]])
    return {s: np.array(sorted(v), dtype=np.int64) for s, v in out.items()}


def subsample(examples: list[Example], limit: Optional[int], *seed: Any) -> list[Example]:
    """A seeded subset of at most ``limit`` examples (original order kept); all when ``limit`` is None."""
    if limit is None or len(examples) <= limit:
        return list(examples)
    idx = np.sort(_rng(*seed).choice(len(examples), size=int(limit), replace=False))
    return [examples[i] for i in idx]



# ============================================================================================= metrics


def _as_int_arrays(y_true, y_pred) -> tuple[np.ndarray, np.ndarray]:
    y, p = np.asarray(y_true).astype(np.int64).ravel(), np.asarray(y_pred).astype(np.int64).ravel()
    if y.shape != p.shape:
        raise ValueError(f"{len(y)} labels but {len(p)} predictions")
    if y.size == 0:
        raise ValueError("cannot score an empty split")
    return y, p


def accuracy(y_true, y_pred) -> float:
    y, p = _as_int_arrays(y_true, y_pred)
    return float((y == p).mean())


def f1_binary(y_true, y_pred, positive: int = 1) -> float:
    """F1 of the positive class, ``2TP / (2TP + FP + FN)``; 0.0 when there are no TP, FP or FN (sklearn's
    ``zero_division=0``)."""
    y, p = _as_int_arrays(y_true, y_pred)
    tp = int(((y == positive) & (p == positive)).sum())
    fp = int(((y != positive) & (p == positive)).sum())
    fn = int(((y == positive) & (p != positive)).sum())
    den = 2 * tp + fp + fn
    return 2 * tp / den if den else 0.0


def mcc(y_true, y_pred) -> float:
    """Matthews correlation (multi-class form of Gorodkin 2004, as sklearn): 0.0 when it is undefined, e.g. when
    every prediction (or every label) is the same class."""
    y, p = _as_int_arrays(y_true, y_pred)
    k = int(max(y.max(), p.max())) + 1
    cm = np.zeros((k, k), dtype=np.float64)
    np.add.at(cm, (y, p), 1)
    t, q = cm.sum(axis=1), cm.sum(axis=0)  # true and predicted counts per class
    c, s = np.trace(cm), cm.sum()
    cov_yp = c * s - t @ q
    den = math.sqrt((s * s - q @ q) * (s * s - t @ t))
    return float(cov_yp / den) if den > 0 else 0.0


METRICS: dict[str, Callable[[Any, Any], float]] = {"accuracy": accuracy, "f1": f1_binary, "mcc": mcc}


def majority_label(labels) -> int:
    """The most frequent label of ``labels`` (the smallest one on a tie)."""
    y = np.asarray(labels, dtype=np.int64).ravel()
    if y.size == 0:
        raise ValueError("no labels")
    return int(np.argmax(np.bincount(y)))


def constant_score(y_true, label: int, metric: str) -> float:
    """``metric`` (a key of :data:`METRICS`) of predicting ``label`` for every example of ``y_true``: the
    majority-class baseline when ``label`` is the training set's :func:`majority_label` (accuracy = the label's
    share, F1 of the positive class 0 unless it is positive, MCC 0 by definition)."""
    y = np.asarray(y_true, dtype=np.int64).ravel()
    return METRICS[metric](y, np.full_like(y, int(label)))


def score_all(y_true, y_pred, num_labels: int) -> dict[str, float]:
    """Accuracy always; F1 (positive class) and MCC for binary tasks; macro-F1 and MCC for multi-class."""
    out = {"accuracy": accuracy(y_true, y_pred), "mcc": mcc(y_true, y_pred)}
    if num_labels == 2:
        out["f1"] = f1_binary(y_true, y_pred)
    else:
        out["macro_f1"] = float(np.mean([f1_binary(y_true, y_pred, c) for c in range(num_labels)]))
    return out


def metric_interval(y_true, y_pred, metric: str, confidence: float = 0.95, n_boot: int = 1000,
                    seed: int = 0) -> tuple[float, float]:
    """Seeded percentile-bootstrap ``confidence`` interval of ``metric`` (a key of :data:`METRICS`) over the
    examples: the split is resampled with replacement ``n_boot`` times and the metric recomputed."""
    y, p = _as_int_arrays(y_true, y_pred)
    fn = METRICS[metric]
    return bootstrap_interval(len(y), lambda idx: np.array([fn(y[i], p[i]) for i in idx]), confidence, n_boot, seed)


__all__ = [
    "TASKS", "TASK_NAMES", "TaskSpec", "Example", "STANDARD", "SCALED", "render", "read_rows", "train_file",
    "load_examples", "carve_splits", "subsample", "accuracy", "f1_binary", "mcc", "METRICS", "score_all",
    "majority_label", "constant_score",
    "metric_interval",
]
