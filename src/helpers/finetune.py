"""(Super)GLUE fine-tuning of the encoders (and, optionally, the decoders) as in BabyLM 2024 (``docs/methods.md#glue``).

Tasks, inputs and labels
------------------------
The bundled files are the BabyLM 2024 filtered copies (``data/babylm_eval/glue_filtered/{task}.{split}.jsonl.gz``,
read with :func:`helpers.data.read_text`, so every file is checksum-verified). Inputs follow the 2024 pipeline
(``evaluation-pipeline-2024``, ``finetune_classification.py``: ``get_column_names`` and the two ``dataset.map``
calls), so a pair task is ``[CLS] a [SEP] b [SEP]`` with the tokenizer's pair template:

========  =====================================  ==================================================  ==========
task      segment a                              segment b                                           metric
========  =====================================  ==================================================  ==========
boolq     question                               passage                                             accuracy
cola      sentence                               –                                                   MCC
mnli      premise                                hypothesis                                          accuracy
mnli-mm   premise                                hypothesis (mnli-trained model)                     accuracy
mrpc      sentence1                              sentence2                                           F1 (pos.)
multirc   paragraph                              ``"{question} {answer}"``                           accuracy
qnli      question                               sentence                                            accuracy
qqp       question1                              question2                                           F1 (pos.)
rte       sentence1                              sentence2                                           accuracy
sst2      sentence                               –                                                   accuracy
wsc       text                                   ``'Does "{span2_text}" refer to "{span1_text}"?'``  accuracy
========  =====================================  ==================================================  ==========

Labels are the GLUE/SuperGLUE integers of the files (see :data:`TASKS` for the names): MNLI 0 entailment /
1 neutral / 2 contradiction; QNLI and RTE 0 entailment / 1 not_entailment; MRPC 1 = equivalent and QQP
1 = duplicate (the positive class of F1); CoLA 1 = acceptable; SST-2 1 = positive; BoolQ, MultiRC, WSC 1 = True.
MultiRC is scored per answer option with plain accuracy (the pipeline loads the ``wsc`` metric for it instead of
the SuperGLUE ``f1a``/``em``). WSC uses the pipeline's question template, not span markers, so the span indices
are unused (a pronoun that occurs twice is ambiguous in the template; this is the pipeline's choice). Segments are
whitespace-stripped (MNLI hypotheses and SST-2 sentences carry trailing spaces). Pairs are truncated to
``max_length`` longest-first (the HF default the pipeline relies on, so MultiRC/BoolQ lose the end of the passage,
never the question or answer).

Splits and protocols
--------------------
* ``standard`` (cola, mrpc, rte, wsc, which ship a train file): train on the train file minus a seeded dev split
  (``dev_fraction``), select the epoch on that dev split, report on the whole validation file.
* ``scaled (train carved from validation)`` (boolq, mnli, multirc, qnli, qqp, sst2, whose train files are not
  bundled): a seeded, disjoint train/dev/test split of the validation file (``carve_fractions``, 70/10/20); report
  on the carved test part. For mnli the whole ``mnli-mm`` validation file is a second test set only. The carved
  training sets are tiny next to the real ones (e.g. 1.1k BoolQ examples instead of 9.4k), so these scores are
  not comparable with published numbers; each row says which protocol it used.

Splits are grouped where examples share text, so nothing leaks between train, dev and test: MultiRC by paragraph,
BoolQ by passage, MNLI by premise, QNLI by question, WSC by sentence (several pronoun/candidate pairs per text).
Splits are cut from the full file first (``split_seed``, independent of the training seed) and only then
subsampled (``max_train_examples``, ``max_eval_examples``), so a scaled-down run is scored on a subset of the same
test split. The checkpoint (epoch) is always chosen on the dev split; the reported split is touched once, after
training (the 2024 pipeline picks the best checkpoint by loss on the very validation set it reports; we do not).
``mnli.subs.jsonl`` (200 MNLI *training* rows) is not used. Five CoLA validation sentences also occur in the CoLA
train file (as in the original CoLA); they are kept.

Training
--------
AdamW (decay 0.01 on weight matrices only, :func:`helpers.training.param_groups`), linear (or cosine) decay after a
linear warm-up (6 % of the steps, the pipeline's ``warmup_proportion``), gradient clipping, batch 32, max length
128, 10 epochs, lr 3e-5 (BERTtime) or 5e-5 with patience 3 (BabyLM): :func:`finetune_config` ``("berttime")`` /
``("babylm")``. Each epoch ends with an evaluation on dev; the best epoch's weights (strictly better dev metric;
ties keep the earlier epoch) are restored before the test evaluation. Batches are shuffled with a seeded
generator and padded to the longest sequence of the batch (no length sorting). Dropout is the model config's.

Results are cached per (model weights and tokenizer SHA-256, training task, config, data files, code version) in
``cache_dir`` (:func:`finetune_all`); fine-tuned weights are discarded unless ``keep_weights=True``.
Scores are fractions in [0, 1] (MCC in [-1, 1]); multiply by 100 to compare with the papers.
"""
from __future__ import annotations

import math
import time
import zlib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

import numpy as np
import torch

from .artifacts import fingerprint, read_json, run_step, sha256_file, write_json
from .data import DataError, checked, read_jsonl_rows
from .parallel import run_jobs

FINETUNE_VERSION = 2  # 2: bootstrap intervals of the reported metric. Bump when a change alters results, so cached results are recomputed
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
    """The input segments (a, b) of one raw row (b is None for single-sentence tasks); see the module table."""
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
    from .data import resolve

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


# ============================================================================================= configuration


@dataclass
class FinetuneConfig:
    """Fine-tuning hyper-parameters. Defaults: BERTtime (10 epochs, lr 3e-5, batch 32, max length 128, no early
    stopping; the best dev epoch is still selected). ``finetune_config("babylm")``: lr 5e-5, patience 3.
    ``max_train_examples``/``max_eval_examples``/``epochs`` scale a run down (the output says so)."""

    epochs: int = 10
    lr: float = 3e-5
    patience: Optional[int] = None  # stop after this many epochs without a better dev metric
    batch_size: int = 32
    eval_batch_size: int = 64
    max_length: int = 128
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    warmup: float = 0.06  # fraction of all optimizer steps (< 1) or a number of steps
    schedule: str = "linear"  # linear | cosine | constant (after warm-up)
    grad_clip: float = 1.0  # max gradient norm; 0 disables
    seed: int = 42  # model head init, batch order, dropout
    split_seed: int = 0  # carving of dev/test splits (kept fixed across training seeds)
    dev_fraction: float = 0.1  # standard tasks: share of the train file held out for checkpoint selection
    carve_fractions: tuple[float, float, float] = (0.7, 0.1, 0.2)  # scaled tasks: train/dev/test of validation
    max_train_examples: Optional[int] = None
    max_eval_examples: Optional[int] = None  # cap on each of dev and every test split
    train_dir: Optional[str] = None  # folder of the BabyLM {task}.train.jsonl files; tasks found there run standard
    device: str = "auto"

    def __post_init__(self):
        self.betas = tuple(self.betas)
        self.carve_fractions = tuple(self.carve_fractions)
        if self.epochs <= 0 or self.batch_size <= 0 or self.eval_batch_size <= 0 or self.max_length < 8:
            raise ValueError("epochs, batch sizes must be positive and max_length >= 8")
        if self.schedule not in ("linear", "cosine", "constant"):
            raise ValueError(f"schedule must be linear, cosine or constant, not {self.schedule!r}")
        if not 0 < self.dev_fraction < 1:
            raise ValueError("dev_fraction must lie in (0, 1)")
        if len(self.carve_fractions) != 3 or abs(sum(self.carve_fractions) - 1) > 1e-6 or min(self.carve_fractions) <= 0:
            raise ValueError("carve_fractions must be three positive fractions (train, dev, test) summing to 1")
        if self.patience is not None and self.patience <= 0:
            raise ValueError("patience must be positive or None")
        for k in ("max_train_examples", "max_eval_examples"):
            v = getattr(self, k)
            if v is not None and v <= 0:
                raise ValueError(f"{k} must be positive or None")

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("device")  # does not change results (CPU and GPU runs share a cache entry)
        if d["train_dir"] is None:
            d.pop("train_dir")  # the files themselves are in the fingerprint (data_files); keeps older caches valid
        return d

    def scale_note(self) -> str:
        """Empty at paper scale, else what was scaled down (printed and stored with every result)."""
        parts = []
        if self.epochs != 10:
            parts.append(f"{self.epochs} epoch(s) (paper: 10)")
        if self.max_train_examples is not None:
            parts.append(f"train ≤ {self.max_train_examples} examples")
        if self.max_eval_examples is not None:
            parts.append(f"dev/test ≤ {self.max_eval_examples} examples")
        return "; ".join(parts)


PRESETS: dict[str, dict[str, Any]] = {
    "berttime": dict(epochs=10, lr=3e-5, patience=None, batch_size=32, max_length=128),
    "babylm": dict(epochs=10, lr=5e-5, patience=3, batch_size=32, max_length=128),
}


def finetune_config(preset: str | dict | FinetuneConfig = "berttime", **overrides: Any) -> FinetuneConfig:
    """A :class:`FinetuneConfig` from a preset (``berttime`` or ``babylm``), a dict (optionally with a
    ``preset`` key; e.g. a params-file section) or a config, with ``overrides``. Unknown keys are refused."""
    if isinstance(preset, FinetuneConfig):
        spec = asdict(preset)
    elif isinstance(preset, str):
        if preset not in PRESETS:
            raise ValueError(f"unknown fine-tuning preset {preset!r}; known: {sorted(PRESETS)}")
        spec = dict(PRESETS[preset])
    elif isinstance(preset, dict):
        d = dict(preset)
        base = d.pop("preset", "berttime")
        spec = dict(PRESETS[base]) if base else {}
        spec.update(d)
    else:
        raise TypeError(f"expected a preset name, dict or FinetuneConfig, got {type(preset).__name__}")
    spec.update(overrides)
    known = {f.name for f in fields(FinetuneConfig)}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise ValueError(f"unknown fine-tuning parameter(s) {unknown}; known: {sorted(known)}")
    return FinetuneConfig(**spec)


# ============================================================================================= task data


@dataclass
class TaskData:
    """Everything one fine-tuning run needs: train and dev examples, and the split(s) it reports on."""

    task: str  # the task trained (mnli for mnli-mm)
    num_labels: int
    metric: str
    protocol: str
    train: list[Example]
    dev: list[Example]
    tests: dict[str, list[Example]]  # reported task name -> examples
    metrics: dict[str, str] = field(default_factory=dict)  # reported task -> metric (default: self.metric)
    describe: dict[str, str] = field(default_factory=dict)  # split name -> where it comes from
    label_names: tuple[str, ...] = ()

    def check_disjoint(self) -> None:
        """Raise when train, dev and a reported split share an example (by uid or by group)."""
        sets = {"train": self.train, "dev": self.dev, **{f"test:{k}": v for k, v in self.tests.items()}}
        names = list(sets)
        for i, x in enumerate(names):
            for y in names[i + 1:]:
                ux, uy = {e.uid for e in sets[x]}, {e.uid for e in sets[y]}
                gx, gy = {e.group for e in sets[x]}, {e.group for e in sets[y]}
                if ux & uy or gx & gy:
                    raise AssertionError(f"{self.task}: splits {x} and {y} overlap")


def prepare_task(task: str, cfg: FinetuneConfig) -> TaskData:
    """Train/dev/test examples of a training task (``mnli-mm`` maps to ``mnli``, which reports both)."""
    spec = TASKS[TASKS[task].trained_as] if task in TASKS else None
    if spec is None:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(TASK_NAMES)}")
    name = spec.name
    tfile = train_file(name, cfg.train_dir)
    if tfile is not None:
        pool = load_examples(name, "train", tfile)
        frac = {"train": 1 - cfg.dev_fraction, "dev": cfg.dev_fraction}
        idx = carve_splits([e.group for e in pool], frac, (cfg.split_seed, name, "dev"))
        train, dev = [pool[i] for i in idx["train"]], [pool[i] for i in idx["dev"]]
        tests = {name: load_examples(name, "valid")}
        describe = {"train": f"train file minus dev ({1 - cfg.dev_fraction:.0%})" + ("" if spec.has_train else f" ({Path(tfile).name})"),
                    "dev": f"{cfg.dev_fraction:.0%} of the train file (seeded)",
                    name: "validation file"}
    else:
        pool = load_examples(name, "valid")
        ftr, fdev, fte = cfg.carve_fractions
        idx = carve_splits([e.group for e in pool], {"train": ftr, "dev": fdev, "test": fte},
                           (cfg.split_seed, name, "carve"))
        train, dev = [pool[i] for i in idx["train"]], [pool[i] for i in idx["dev"]]
        tests = {name: [pool[i] for i in idx["test"]]}
        describe = {"train": f"{ftr:.0%} of the validation file (seeded)",
                    "dev": f"{fdev:.0%} of the validation file (seeded)",
                    name: f"{fte:.0%} of the validation file (seeded, disjoint)"}
        if name == "mnli":
            tests["mnli-mm"] = load_examples("mnli-mm", "valid")
            describe["mnli-mm"] = "mnli-mm validation file (test only)"
    train = subsample(train, cfg.max_train_examples, cfg.split_seed, name, "train-subset")
    dev = subsample(dev, cfg.max_eval_examples, cfg.split_seed, name, "dev-subset")
    tests = {k: subsample(v, cfg.max_eval_examples, cfg.split_seed, k, "test-subset") for k, v in tests.items()}
    data = TaskData(name, spec.num_labels, spec.metric, STANDARD if tfile is not None else SCALED, train, dev, tests,
                    {k: TASKS[k].metric for k in tests}, describe, spec.label_names)
    data.check_disjoint()
    return data


def data_files(task: str, train_dir: str | Path | None = None) -> dict[str, str]:
    """``relative path -> sha256`` of the files a training task reads (part of the cache fingerprint)."""
    spec = TASKS[TASKS[task].trained_as]
    tfile = train_file(spec.name, train_dir)
    names = [spec.file("valid")] + ([tfile] if tfile else [])
    if spec.name == "mnli":
        names.append(TASKS["mnli-mm"].file("valid"))
    return {n: sha256_file(checked(n)) for n in sorted(names)}


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


def score_all(y_true, y_pred, num_labels: int) -> dict[str, float]:
    """Accuracy always; F1 (positive class) and MCC for binary tasks; macro-F1 and MCC for multi-class."""
    out = {"accuracy": accuracy(y_true, y_pred), "mcc": mcc(y_true, y_pred)}
    if num_labels == 2:
        out["f1"] = f1_binary(y_true, y_pred)
    else:
        out["macro_f1"] = float(np.mean([f1_binary(y_true, y_pred, c) for c in range(num_labels)]))
    return out


# ============================================================================================= model and batches


def model_kind(model_dir: str | Path) -> str:
    """``encoder`` (LTG-BERT) or ``decoder`` (GPT-Neo and other causal LMs) from ``config.json``."""
    cfg = read_json(Path(model_dir) / "config.json")
    mt = cfg.get("model_type", "")
    if mt == "ltgbert":
        return "encoder"
    if mt in ("gpt_neo", "gpt2", "llama", "gpt_neox"):
        return "decoder"
    raise ValueError(f"{model_dir}: model type {mt!r} is not supported for fine-tuning")


def load_classifier(model_dir: str | Path, num_labels: int, label_names: Sequence[str] = (), seed: int = 0):
    """(model, tokenizer, kind): a sequence classifier initialised from a pretrained LM folder (the new head is
    initialised with ``seed``) and the folder's tokenizer."""
    import transformers

    from .tokenizers import load_tokenizer

    kind = model_kind(model_dir)
    tokenizer = load_tokenizer(model_dir)
    id2label = {i: n for i, n in enumerate(label_names)} if label_names else None
    extra = dict(id2label=id2label, label2id={n: i for i, n in id2label.items()}) if id2label else {}
    verbosity = transformers.logging.get_verbosity()
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.logging.set_verbosity_error()  # "newly initialized: classifier.*" is expected
    transformers.utils.logging.disable_progress_bar()
    try:
        torch.manual_seed(seed)
        if kind == "encoder":
            from .ltg_bert import LtgBertForSequenceClassification

            model = LtgBertForSequenceClassification.from_pretrained(str(model_dir), num_labels=num_labels, **extra)
        else:
            from transformers import AutoModelForSequenceClassification

            model = AutoModelForSequenceClassification.from_pretrained(str(model_dir), num_labels=num_labels, **extra)
            model.config.pad_token_id = tokenizer.pad_token_id
    finally:
        transformers.logging.set_verbosity(verbosity)
        if bars:
            transformers.utils.logging.enable_progress_bar()
    return model, tokenizer, kind


def _truncate_pair(a: list[int], b: list[int], budget: int) -> tuple[list[int], list[int]]:
    """Longest-first truncation (one token at a time from the longer segment, the first one on ties)."""
    la, lb = len(a), len(b)
    while la + lb > budget:
        if la >= lb:
            la -= 1
        else:
            lb -= 1
    return a[:la], b[:lb]


def encode(tokenizer, examples: Sequence[Example], max_length: int, kind: str = "encoder") -> list[list[int]]:
    """Token ids per example. Encoders: the tokenizer's template (``[CLS] a [SEP] b [SEP]``), truncated
    longest-first to ``max_length``. Decoders (no pair template): ``a <|endoftext|> b`` with the same truncation;
    the classifier reads the last token."""
    if not examples:
        return []
    a = [e.a for e in examples]
    if kind == "encoder":
        if all(e.b is None for e in examples):
            return tokenizer(a, truncation=True, max_length=max_length)["input_ids"]
        if any(e.b is None for e in examples):
            raise ValueError("mixed single-segment and pair examples")
        return tokenizer(a, [e.b for e in examples], truncation=True, max_length=max_length)["input_ids"]
    ids_a = tokenizer(a, add_special_tokens=False)["input_ids"]
    if all(e.b is None for e in examples):
        return [x[:max_length] for x in ids_a]
    sep = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
    ids_b = tokenizer([e.b or "" for e in examples], add_special_tokens=False)["input_ids"]
    out = []
    for x, y in zip(ids_a, ids_b):
        x, y = _truncate_pair(x, y, max_length - 1)
        out.append(x + [sep] + y)
    return out


def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad to the longest sequence of the batch: (input_ids, attention_mask)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), int(pad_id), dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


@torch.no_grad()
def predict(model, ids: Sequence[Sequence[int]], pad_id: int, batch_size: int = 64, device=None) -> np.ndarray:
    """Arg-max class of every sequence (model in eval mode, restored afterwards)."""
    was = model.training
    model.eval()
    out = []
    for i in range(0, len(ids), batch_size):
        x, m = pad_batch(ids[i : i + batch_size], pad_id)
        if device is not None:
            x, m = x.to(device), m.to(device)
        out.append(model(input_ids=x, attention_mask=m).logits.argmax(-1).cpu().numpy())
    model.train(was)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def evaluate_examples(model, tokenizer, examples: Sequence[Example], cfg: FinetuneConfig, kind: str, num_labels: int,
                      device=None, return_predictions: bool = False):
    """All metrics of :func:`score_all` on ``examples`` (with ``return_predictions``: and the labels and
    predictions, as ``(metrics, y_true, y_pred)``)."""
    ids = encode(tokenizer, examples, cfg.max_length, kind)
    pred = predict(model, ids, tokenizer.pad_token_id, cfg.eval_batch_size, device)
    y = [e.label for e in examples]
    scores = score_all(y, pred, num_labels)
    return (scores, np.asarray(y), np.asarray(pred)) if return_predictions else scores


def metric_interval(y_true, y_pred, metric: str, confidence: float = 0.95, n_boot: int = 1000,
                    seed: int = 0) -> tuple[float, float]:
    """Seeded percentile-bootstrap ``confidence`` interval of ``metric`` (a key of :data:`METRICS`) over the
    examples: the split is resampled with replacement ``n_boot`` times and the metric recomputed."""
    y, p = _as_int_arrays(y_true, y_pred)
    from .stats import bootstrap_interval

    fn = METRICS[metric]
    return bootstrap_interval(len(y), lambda idx: np.array([fn(y[i], p[i]) for i in idx]), confidence, n_boot, seed)


# ============================================================================================= training loop


def lr_multiplier(step: int, total: int, warmup: int, schedule: str = "linear") -> float:
    """Linear warm-up over ``warmup`` steps, then linear/cosine decay to 0 at ``total`` (or constant)."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    if schedule == "cosine":
        return 0.5 * (1 + math.cos(math.pi * progress))
    return max(0.0, 1.0 - progress)


@dataclass
class FitResult:
    best_epoch: int
    best_dev: dict[str, float]
    epochs_run: int
    early_stopped: bool
    history: list[dict]
    steps: int


def _device(cfg: FinetuneConfig) -> torch.device:
    if cfg.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(cfg.device)


def fit(model, tokenizer, train: Sequence[Example], dev: Sequence[Example], cfg: FinetuneConfig, metric: str,
        num_labels: int, kind: str = "encoder", progress: bool = True, log: Callable[[str], None] = print,
        desc: str = "") -> FitResult:
    """Fine-tune ``model`` on ``train``; after every epoch score ``dev`` with ``metric`` and keep the best epoch's
    weights (restored into ``model`` at the end). Sees only ``train`` and ``dev``: the reported split is never an
    argument here."""
    from .progress import progress as progress_bar
    from .training import param_groups

    if not train or not dev:
        raise ValueError(f"{desc}: empty train ({len(train)}) or dev ({len(dev)}) split")
    device = _device(cfg)
    model.to(device)
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    train_ids = encode(tokenizer, train, cfg.max_length, kind)
    labels = torch.tensor([e.label for e in train], dtype=torch.long)
    pad_id = tokenizer.pad_token_id
    steps_per_epoch = math.ceil(len(train) / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    warmup = int(round(cfg.warmup * total)) if cfg.warmup < 1 else int(cfg.warmup)
    opt = torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_multiplier(s, total, warmup, cfg.schedule))
    best_score, best_state, best_epoch, best_dev = -math.inf, None, 0, {}
    history, bad, step, stopped = [], 0, 0, False
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        order = torch.randperm(len(train), generator=gen).tolist()
        total_loss, n_seen = 0.0, 0
        bar = progress_bar(range(steps_per_epoch), desc=f"{desc} epoch {epoch}/{cfg.epochs}", unit="step",
                           disable=not progress, leave=False)
        for b in bar:
            idx = order[b * cfg.batch_size : (b + 1) * cfg.batch_size]
            x, m = pad_batch([train_ids[i] for i in idx], pad_id)
            y = labels[idx]
            loss = model(input_ids=x.to(device), attention_mask=m.to(device), labels=y.to(device)).loss
            if not torch.isfinite(loss):
                raise FloatingPointError(f"{desc}: non-finite loss {float(loss)} at epoch {epoch}, step {step}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip and cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            sched.step()
            step += 1
            total_loss += float(loss.detach()) * len(idx)
            n_seen += len(idx)
            bar.set_postfix(loss=f"{total_loss / n_seen:.4f}", refresh=False)  # a forced redraw would print a stale count
        bar.close()
        dev_scores = evaluate_examples(model, tokenizer, dev, cfg, kind, num_labels, device)
        score = dev_scores[metric]
        improved = score > best_score
        history.append({"epoch": epoch, "train_loss": total_loss / max(n_seen, 1), "dev": dev_scores,
                        "improved": improved})
        if improved:
            best_score, best_epoch, best_dev, bad = score, epoch, dev_scores, 0
            best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        else:
            bad += 1
        log(f"  {desc} epoch {epoch}: train loss {total_loss / max(n_seen, 1):.4f}, dev {metric} {score:.4f}"
            + (" *" if improved else ""))
        if cfg.patience is not None and bad >= cfg.patience and epoch < cfg.epochs:
            stopped = True
            log(f"  {desc}: early stop, no dev improvement for {bad} epoch(s)")
            break
    model.load_state_dict(best_state)
    return FitResult(best_epoch, best_dev, len(history), stopped, history, step)


# ============================================================================================= one task, all tasks


def model_name(model_dir: str | Path) -> str:
    """``runs/.../encoders/<name>/best`` → ``<name>``; otherwise the folder name."""
    p = Path(model_dir).resolve()
    return p.parent.name if p.name in ("best", "final", "model") else p.name


def model_files_digest(model_dir: str | Path) -> dict[str, str]:
    """SHA-256 of the weights and tokenizer files of a model folder (what the cache key depends on)."""
    p = Path(model_dir)
    names = [n for n in ("model.safetensors", "pytorch_model.bin", "config.json", "tokenizer.json") if (p / n).is_file()]
    if not any(n in names for n in ("model.safetensors", "pytorch_model.bin")):
        raise FileNotFoundError(f"no model weights in {p} (model.safetensors or pytorch_model.bin)")
    return {n: sha256_file(p / n) for n in names}


def finetune_prepared(model_dir: str | Path, data: TaskData, cfg: FinetuneConfig, out_dir: str | Path | None = None,
                      keep_weights: bool = False, progress: bool = True,
                      log: Callable[[str], None] = print) -> dict:
    """Fine-tune on ``data.train``, select on ``data.dev``, then score every reported split once. Returns the
    record cached by :func:`finetune_all` (``reports``: reported task → metrics)."""
    t0 = time.time()
    data.check_disjoint()
    model, tokenizer, kind = load_classifier(model_dir, data.num_labels, data.label_names, cfg.seed)
    log(f"[{data.task}] {kind} {model_name(model_dir)}: train {len(data.train)}, dev {len(data.dev)}, "
        + ", ".join(f"test[{k}] {len(v)}" for k, v in data.tests.items()) + f" ({data.protocol})")
    res = fit(model, tokenizer, data.train, data.dev, cfg, data.metric, data.num_labels, kind, progress, log,
              desc=data.task)
    device = _device(cfg)
    reports, intervals = {}, {}
    for k, v in data.tests.items():  # each reported split once, with a bootstrap interval of its metric
        reports[k], y, p = evaluate_examples(model, tokenizer, v, cfg, kind, data.num_labels, device, return_predictions=True)
        intervals[k] = metric_interval(y, p, data.metrics[k], seed=cfg.seed)
    record = {
        "model": model_name(model_dir), "model_dir": str(model_dir), "kind": kind, "train_task": data.task,
        "protocol": data.protocol, "metric": data.metric, "metrics": data.metrics, "reports": reports,
        "intervals": {k: list(v) for k, v in intervals.items()},
        "dev_metric": res.best_dev.get(data.metric), "dev": res.best_dev, "best_epoch": res.best_epoch,
        "epochs_run": res.epochs_run, "early_stopped": res.early_stopped, "steps": res.steps,
        "n_train": len(data.train), "n_dev": len(data.dev), "n_test": {k: len(v) for k, v in data.tests.items()},
        "splits": data.describe, "history": res.history, "config": cfg.to_dict(), "scale_note": cfg.scale_note(),
        "seconds": round(time.time() - t0, 2), "version": FINETUNE_VERSION,
    }
    if out_dir is not None:
        out = Path(out_dir)
        if keep_weights:
            model.save_pretrained(out / "model")
            tokenizer.save_pretrained(str(out / "model"))
        write_json(out / "result.json", record)
    log(f"[{data.task}] best epoch {res.best_epoch}/{res.epochs_run}, dev {data.metric} "
        f"{record['dev_metric']:.4f}; " + ", ".join(f"{k} {data.metrics[k]} {v[data.metrics[k]]:.4f}"
                                                     for k, v in reports.items()) + f" ({record['seconds']:.1f} s)")
    return record


def result_row(record: dict, task: str) -> dict:
    """One flat result row (the reported ``task``) from a training record."""
    m = record["metrics"][task]
    scores = record["reports"][task]
    return {
        "model": record["model"], "task": task, "train_task": record["train_task"], "protocol": record["protocol"],
        "metric": m, "score": scores[m], "ci_low": record.get("intervals", {}).get(task, [math.nan] * 2)[0],
        "ci_high": record.get("intervals", {}).get(task, [math.nan] * 2)[1], "accuracy": scores.get("accuracy"), "f1": scores.get("f1", math.nan),
        "mcc": scores.get("mcc"), "dev_metric": record["dev_metric"], "best_epoch": record["best_epoch"],
        "epochs_run": record["epochs_run"], "early_stopped": record["early_stopped"], "n_train": record["n_train"],
        "n_dev": record["n_dev"], "n_test": record["n_test"][task], "reported_on": record["splits"][task],
        "scale_note": record["scale_note"], "seconds": record["seconds"],
    }


def finetune_task(model_dir: str | Path, task: str, cfg: FinetuneConfig | None = None,
                  out_dir: str | Path | None = None, log: Callable[[str], None] = print,
                  keep_weights: bool = False, progress: bool = True) -> dict:
    """Fine-tune the model in ``model_dir`` on ``task`` and return its result row: score on the reported split
    (``metric``/``score`` plus accuracy, F1, MCC), the dev metric of the selected epoch, epochs run, split sizes,
    protocol and seconds. ``mnli-mm`` trains the mnli model and reports the mismatched set. With ``out_dir`` the
    full record goes to ``out_dir/result.json`` (and, with ``keep_weights``, the model to ``out_dir/model``)."""
    cfg = cfg or FinetuneConfig()
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(TASK_NAMES)}")
    data = prepare_task(task, cfg)
    record = finetune_prepared(model_dir, data, cfg, out_dir, keep_weights, progress, log)
    return result_row(record, task)


def finetune_all(model_dir: str | Path, tasks: Iterable[str] = TASK_NAMES, cfg: FinetuneConfig | None = None,
                 cache_dir: str | Path = "glue", keep_weights: bool = False, progress: bool = True,
                 log: Callable[[str], None] = print):
    """Fine-tune on every task of ``tasks`` (mnli and mnli-mm share one run) and return a DataFrame with one row
    per task. Each training run is cached in ``cache_dir/<task>-<fingerprint>.json``, the fingerprint covering
    the model's weights/tokenizer SHA-256, the task, the config, the data files and :data:`FINETUNE_VERSION`;
    reruns read the cache. ``keep_weights`` also keeps ``cache_dir/<task>-<fingerprint>/model``."""
    import pandas as pd

    cfg = cfg or FinetuneConfig()
    tasks = list(tasks)
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}; known: {', '.join(TASK_NAMES)}")
    note = cfg.scale_note()
    if note:
        log(f"scaled-down fine-tuning ({note}); paper setting: 10 epochs, all examples")
    cache = Path(cache_dir)
    digest = model_files_digest(model_dir)
    records: dict[str, dict] = {}
    for train_task in dict.fromkeys(TASKS[t].trained_as for t in tasks):
        fp = fingerprint("finetune", FINETUNE_VERSION, digest, train_task, cfg.to_dict(), data_files(train_task, cfg.train_dir))
        out = cache / f"{train_task}-{fp}.json"
        weights = cache / f"{train_task}-{fp}"
        if keep_weights and not (weights / "model").is_dir():
            out.with_name(out.name + "_step.json").unlink(missing_ok=True)  # rerun to keep the weights

        def work(train_task=train_task, out=out, weights=weights, fp=fp):
            data = prepare_task(train_task, cfg)
            rec = finetune_prepared(model_dir, data, cfg, weights if keep_weights else None, keep_weights,
                                    progress, log)
            rec["fingerprint"] = fp
            write_json(out, rec)

        run_step(f"fine-tune {model_name(model_dir)} on {train_task}", out, fp, work, log)
        records[train_task] = read_json(out)
    rows = [result_row(records[TASKS[t].trained_as], t) for t in tasks]
    return pd.DataFrame(rows)


def finetune_many(model_dirs: dict[str, str | Path], tasks: Iterable[str], cfg: FinetuneConfig | None = None,
                  cache_root: str | Path = "glue", workers: int | str = 1, log: Callable[[str], None] = print):
    """:func:`finetune_all` for every model of ``model_dirs`` (name → folder), cached in ``cache_root/<name>``, with
    one row per (model, task) and a ``model`` column. The training runs (one per model and trained task: mnli and
    mnli-mm share one) are independent jobs: ``workers`` processes run them side by side
    (:func:`helpers.parallel.run_jobs`); the rows are the same whatever the number of workers."""
    import pandas as pd

    cfg = cfg or FinetuneConfig()
    tasks = list(tasks)
    by_run = {}
    for t in tasks:
        if t not in TASKS:
            raise ValueError(f"unknown task {t!r}; known: {', '.join(TASK_NAMES)}")
        by_run.setdefault(TASKS[t].trained_as, []).append(t)
    jobs = {f"{name}/{run}": dict(model_dir=model_dirs[name], tasks=ts, cfg=cfg, cache_dir=Path(cache_root) / name,
                                  progress=False)
            for name in model_dirs for run, ts in by_run.items()}
    done = run_jobs(finetune_all, jobs, workers, desc="fine-tuning runs", log=log)
    rows = [done[f"{name}/{run}"].assign(model=name) for name in model_dirs for run in by_run]
    df = pd.concat(rows, ignore_index=True)
    rank = {"model": {m: i for i, m in enumerate(model_dirs)}, "task": {t: i for i, t in enumerate(tasks)}}
    return df.sort_values(["model", "task"], key=lambda col: col.map(rank[col.name]), kind="stable").reset_index(drop=True)


def scaled_tasks(df, tasks: Sequence[str] = TASK_NAMES) -> list[str]:
    """Tasks of ``df`` (rows of :func:`finetune_all`) among ``tasks`` that ran the scaled protocol."""
    sub = df[df["task"].isin(list(tasks))]
    return sorted(sub.loc[sub["protocol"] != STANDARD, "task"].unique())


def protocol_note(df, tasks: Sequence[str] = TASK_NAMES) -> str:
    """What an average over ``tasks`` of ``df`` must carry beside it: empty when every task ran the standard protocol,
    else ``"scaled protocol: boolq, mnli, … (k of n tasks; train carved from validation)"``."""
    sub = df[df["task"].isin(list(tasks))]
    scaled = scaled_tasks(df, tasks)
    if not scaled:
        return ""
    return f"scaled protocol: {', '.join(scaled)} ({len(scaled)} of {sub['task'].nunique()} tasks; train carved from validation)"


def glue_average(df, tasks: Sequence[str] = TASK_NAMES) -> float:
    """Unweighted mean of the primary scores (MCC for CoLA, F1 for MRPC/QQP, accuracy otherwise) over ``tasks``
    present in ``df`` (the BabyLM 2024 GLUE aggregate, as a fraction)."""
    sub = df[df["task"].isin(list(tasks))]
    return float(sub["score"].mean()) if len(sub) else math.nan


__all__ = [
    "TASKS", "TASK_NAMES", "TaskSpec", "Example", "TaskData", "FinetuneConfig", "PRESETS", "STANDARD", "SCALED",
    "finetune_config", "render", "read_rows", "load_examples", "carve_splits", "subsample", "prepare_task",
    "data_files", "accuracy", "f1_binary", "mcc", "score_all", "metric_interval", "METRICS", "model_kind", "load_classifier", "encode",
    "pad_batch", "predict", "evaluate_examples", "lr_multiplier", "fit", "FitResult", "finetune_prepared",
    "finetune_task", "finetune_all", "result_row", "glue_average", "model_files_digest", "model_name", "train_file",
    "scaled_tasks", "protocol_note",
]
