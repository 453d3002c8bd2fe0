"""What one (Super)GLUE fine-tuning run is given (``docs/methods.md#glue``): its configuration
(:class:`FinetuneConfig`, the presets of :func:`finetune_config`) and its examples (:class:`TaskData` from
:func:`prepare_task`: train, dev and the reported split(s), carved by the protocols below), with the data files a
run reads (:func:`data_files`, part of the cache key of :func:`helpers.evaluation.finetune.finetune_all`).

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
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

from helpers.core.digests import sha256_file
from helpers.data.corpora import checked
from helpers.evaluation.glue_tasks import SCALED, STANDARD, TASK_NAMES, TASKS, Example, carve_splits, load_examples, subsample, train_file


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
    ``preset`` key; e.g. a params-file section) or a config, with ``overrides``. Unknown keys are refused.
    (:func:`helpers.models.ltg_bert.ltg_bert_config` resolves its presets the same way; it cannot share this code,
    since that module must load without ``helpers`` next to saved weights.)"""
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


__all__ = ["FinetuneConfig", "PRESETS", "finetune_config", "TaskData", "prepare_task", "data_files"]
