"""(Super)GLUE fine-tuning of the encoders (and, optionally, the decoders) as in BabyLM 2024 (``docs/methods.md#glue``):
one task (:func:`finetune_task`), all tasks of a model with the results cache (:func:`finetune_all`), many models
side by side (:func:`finetune_many`), and the result rows, protocol notes and GLUE averages.

The tasks, their inputs, splits and metrics are in :mod:`helpers.evaluation.glue_tasks`; the configuration and a run's
examples (the split protocols) in :mod:`helpers.evaluation.finetune_setup`; the classifier, its batches and the training
loop in :mod:`helpers.evaluation.classifier`.

Results are cached per (model weights and tokenizer SHA-256, training task, config, data files, code version) in
``cache_dir`` (:func:`finetune_all`); fine-tuned weights are discarded unless ``keep_weights=True``.
Scores are fractions in [0, 1] (MCC in [-1, 1]); multiply by 100 to compare with the papers.
"""
from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from helpers.core.artifacts import fingerprint, read_json, run_step, save_pretrained_atomic, write_json
from helpers.core.config import shown_path
from helpers.core.digests import model_files_digest
from helpers.core.hardware import compute_device
from helpers.core.parallel import run_jobs
from helpers.evaluation.classifier import evaluate_examples, fit, load_classifier
from helpers.evaluation.finetune_setup import FinetuneConfig, TaskData, data_files, prepare_task
from helpers.evaluation.glue_tasks import (STANDARD, TASK_NAMES, TASKS, constant_score, majority_label, metric_interval,
                                           train_file)
from helpers.models.decoder import context_length

FINETUNE_VERSION = 3  # 2: bootstrap intervals of the reported metric; 3: predicted-class counts. Bump when a change alters results, so cached results are recomputed


# ============================================================================================= one task, all tasks


def model_name(model_dir: str | Path) -> str:
    """``runs/.../encoders/<name>/best`` → ``<name>``; otherwise the folder name."""
    p = Path(model_dir).resolve()
    return p.parent.name if p.name in ("best", "final", "model") else p.name


def finetune_prepared(model_dir: str | Path, data: TaskData, cfg: FinetuneConfig, out_dir: str | Path | None = None,
                      keep_weights: bool = False, progress: bool = True,
                      log: Callable[[str], None] = print, verbose: bool = False) -> dict:
    """Fine-tune on ``data.train``, select on ``data.dev``, then score every reported split once. Returns the
    record cached by :func:`finetune_all` (``reports``: reported task → metrics). ``log`` gets one line per run:
    the model, the selected epoch and the scores; ``verbose`` adds the split sizes before it and a line per epoch."""
    t0 = time.time()
    data.check_disjoint()
    model, tokenizer, kind = load_classifier(model_dir, data.num_labels, data.label_names, cfg.seed)
    context = context_length(model)
    cut = ""
    if context is not None and context < cfg.max_length:  # a model with a short context reads what fits it
        cut = f"max_length {cfg.max_length} cut to the model's context of {context} tokens"
        if verbose:
            log(f"[{data.task}] {cut}")
        cfg = dataclasses.replace(cfg, max_length=context)
    if verbose:
        log(f"[{data.task}] {kind} {model_name(model_dir)}: train {len(data.train)}, dev {len(data.dev)}, "
            + ", ".join(f"test[{k}] {len(v)}" for k, v in data.tests.items()) + f" ({data.protocol})")
    res = fit(model, tokenizer, data.train, data.dev, cfg, data.metric, data.num_labels, kind, progress, log,
              desc=data.task, verbose=verbose)
    device = compute_device(cfg.device)
    reports, intervals, predicted = {}, {}, {}
    for k, v in data.tests.items():  # each reported split once, with a bootstrap interval of its metric
        reports[k], y, p = evaluate_examples(model, tokenizer, v, cfg, kind, data.num_labels, device, return_predictions=True)
        intervals[k] = metric_interval(y, p, data.metrics[k], seed=cfg.seed)
        predicted[k] = np.bincount(np.asarray(p, dtype=np.int64), minlength=data.num_labels).tolist()
    record = {
        "model": model_name(model_dir), "model_dir": shown_path(model_dir), "kind": kind, "train_task": data.task,
        "protocol": data.protocol, "metric": data.metric, "metrics": data.metrics, "reports": reports,
        "intervals": {k: list(v) for k, v in intervals.items()}, "predicted_counts": predicted,
        "dev_metric": res.best_dev.get(data.metric), "dev": res.best_dev, "best_epoch": res.best_epoch,
        "epochs_run": res.epochs_run, "early_stopped": res.early_stopped, "steps": res.steps,
        "n_train": len(data.train), "n_dev": len(data.dev), "n_test": {k: len(v) for k, v in data.tests.items()},
        "splits": data.describe, "history": res.history, "config": cfg.to_dict(), "scale_note": cfg.scale_note(),
        "seconds": round(time.time() - t0, 2), "version": FINETUNE_VERSION,
    }
    if out_dir is not None:
        out = Path(out_dir)
        if keep_weights:
            save_pretrained_atomic(out / "model", model, tokenizer)
        write_json(out / "result.json", record)
    who = "" if verbose else f" {kind} {model_name(model_dir)}:"
    log(f"[{data.task}]{who} best epoch {res.best_epoch}/{res.epochs_run}"
        + (" (early stop)" if res.early_stopped and not verbose else "") + f", dev {data.metric} "
        f"{record['dev_metric']:.4f}; " + ", ".join(f"{k} {data.metrics[k]} {v[data.metrics[k]]:.4f}"
                                                     for k, v in reports.items()) + f" ({record['seconds']:.1f} s)"
        + (f"; {cut}" if cut and not verbose else ""))
    return record


def result_row(record: dict, task: str) -> dict:
    """One flat result row (the reported ``task``) from a training record."""
    m = record["metrics"][task]
    scores = record["reports"][task]
    counts = record.get("predicted_counts", {}).get(task)  # absent in records of FINETUNE_VERSION < 3
    top = max(counts) / sum(counts) if counts and sum(counts) else math.nan
    return {
        "model": record["model"], "task": task, "train_task": record["train_task"], "protocol": record["protocol"],
        "metric": m, "score": scores[m], "ci_low": record.get("intervals", {}).get(task, [math.nan] * 2)[0],
        "ci_high": record.get("intervals", {}).get(task, [math.nan] * 2)[1], "accuracy": scores.get("accuracy"), "f1": scores.get("f1", math.nan),
        "mcc": scores.get("mcc"), "dev_metric": record["dev_metric"], "best_epoch": record["best_epoch"],
        "epochs_run": record["epochs_run"], "early_stopped": record["early_stopped"], "n_train": record["n_train"],
        "n_dev": record["n_dev"], "n_test": record["n_test"][task], "reported_on": record["splits"][task],
        "scale_note": record["scale_note"], "seconds": record["seconds"],
        "predicted_counts": counts, "top_prediction_share": top,
        "single_class": bool(top == 1.0) if top == top else None,
    }


def finetune_task(model_dir: str | Path, task: str, cfg: FinetuneConfig | None = None,
                  out_dir: str | Path | None = None, log: Callable[[str], None] = print,
                  keep_weights: bool = False, progress: bool = True, verbose: bool = False) -> dict:
    """Fine-tune the model in ``model_dir`` on ``task`` and return its result row: score on the reported split
    (``metric``/``score`` plus accuracy, F1, MCC), the dev metric of the selected epoch, epochs run, split sizes,
    protocol and seconds. ``mnli-mm`` trains the mnli model and reports the mismatched set. With ``out_dir`` the
    full record goes to ``out_dir/result.json`` (and, with ``keep_weights``, the model to ``out_dir/model``).
    ``log`` gets one line (``verbose``: a line per epoch too)."""
    cfg = cfg or FinetuneConfig()
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(TASK_NAMES)}")
    data = prepare_task(task, cfg)
    record = finetune_prepared(model_dir, data, cfg, out_dir, keep_weights, progress, log, verbose)
    return result_row(record, task)


def finetune_all(model_dir: str | Path, tasks: Iterable[str] = TASK_NAMES, cfg: FinetuneConfig | None = None,
                 cache_dir: str | Path = "glue", keep_weights: bool = False, progress: bool = True,
                 log: Callable[[str], None] = print, verbose: bool = False, log_scale_note: bool = True):
    """Fine-tune on every task of ``tasks`` (mnli and mnli-mm share one run) and return a DataFrame with one row
    per task. Each training run is cached in ``cache_dir/<task>-<fingerprint>.json``, the fingerprint covering
    the model's weights/tokenizer SHA-256, the task, the config, the data files and :data:`FINETUNE_VERSION`;
    reruns read the cache. ``keep_weights`` also keeps ``cache_dir/<task>-<fingerprint>/model``.
    ``log`` gets the scale note (``log_scale_note``) and one line per run: its scores, or ``[skip]`` for a cached
    run; ``verbose`` adds the ``[run ]`` line, the split sizes and a line per epoch."""
    cfg = cfg or FinetuneConfig()
    tasks = list(tasks)
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}; known: {', '.join(TASK_NAMES)}")
    note = cfg.scale_note()
    if note and log_scale_note:
        log(f"scaled-down fine-tuning ({note}); paper setting: 10 epochs, all examples")
    step_log = log if verbose else (lambda line: None if line.startswith("[run ]") else log(line))
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
                                    progress, log, verbose)
            rec["fingerprint"] = fp
            write_json(out, rec)

        run_step(f"fine-tune {model_name(model_dir)} on {train_task}", out, fp, work, step_log)
        records[train_task] = read_json(out)
    rows = [result_row(records[TASKS[t].trained_as], t) for t in tasks]
    return pd.DataFrame(rows)


def finetune_many(model_dirs: dict[str, str | Path], tasks: Iterable[str], cfg: FinetuneConfig | None = None,
                  cache_root: str | Path = "glue", workers: int | str = 1, log: Callable[[str], None] = print,
                  verbose: bool = False):
    """:func:`finetune_all` for every model of ``model_dirs`` (name → folder), cached in ``cache_root/<name>``, with
    one row per (model, task) and a ``model`` column. The training runs (one per model and trained task: mnli and
    mnli-mm share one) are independent jobs: ``workers`` processes run them side by side
    (:func:`helpers.core.parallel.run_jobs`); the rows are the same whatever the number of workers. The scale note
    is printed once, then one line per run (``verbose``: per epoch, as :func:`finetune_all`)."""
    cfg = cfg or FinetuneConfig()
    tasks = list(tasks)
    by_run = {}
    for t in tasks:
        if t not in TASKS:
            raise ValueError(f"unknown task {t!r}; known: {', '.join(TASK_NAMES)}")
        by_run.setdefault(TASKS[t].trained_as, []).append(t)
    if note := cfg.scale_note():
        log(f"scaled-down fine-tuning ({note}); paper setting: 10 epochs, all examples")
    jobs = {f"{name}/{run}": dict(model_dir=model_dirs[name], tasks=ts, cfg=cfg, cache_dir=Path(cache_root) / name,
                                  progress=False, verbose=verbose, log_scale_note=False)
            for name in model_dirs for run, ts in by_run.items()}
    if not jobs:  # no model to fine-tune (the cpu profile): the rows' columns, no rows
        return pd.DataFrame(columns=["model", "task", "metric", "score", "ci_low", "ci_high", "dev_metric", "best_epoch",
                                     "n_train", "n_dev", "n_test", "protocol", "top_prediction_share", "single_class"])
    done = run_jobs(finetune_all, jobs, workers, desc="fine-tuning runs", log=log)
    rows = [done[f"{name}/{run}"].assign(model=name) for name in model_dirs for run in by_run]
    df = pd.concat(rows, ignore_index=True)
    rank = {"model": {m: i for i, m in enumerate(model_dirs)}, "task": {t: i for i, t in enumerate(tasks)}}
    return df.sort_values(["model", "task"], key=lambda col: col.map(rank[col.name]), kind="stable").reset_index(drop=True)


def majority_baseline(tasks: Iterable[str], cfg: FinetuneConfig | None = None) -> pd.DataFrame:
    """The majority-class baseline of every task of ``tasks``: always predict the most frequent label of the
    training examples a run of ``cfg`` trains on (:func:`helpers.evaluation.glue_tasks.majority_label`), scored with
    the task's metric on the same evaluation examples the runs report on (same splits and subsample). One row per
    task: ``task``, ``metric``, ``majority label`` (its name), ``train share`` and ``test share`` of that label,
    ``score`` (a fraction, as the runs' rows; MCC of a constant prediction is 0) and ``n_test``. Reads the data
    only (no model)."""
    cfg = cfg or FinetuneConfig()
    prepared: dict = {}
    rows = []
    for t in tasks:
        if t not in TASKS:
            raise ValueError(f"unknown task {t!r}; known: {', '.join(TASK_NAMES)}")
        train_task = TASKS[t].trained_as
        if train_task not in prepared:
            prepared[train_task] = prepare_task(train_task, cfg)
        data = prepared[train_task]
        train_y = np.array([e.label for e in data.train])
        test_y = np.array([e.label for e in data.tests[t]])
        label = majority_label(train_y)
        metric = data.metrics[t]
        rows.append({"task": t, "metric": metric, "majority label": data.label_names[label],
                     "train share": float((train_y == label).mean()), "test share": float((test_y == label).mean()),
                     "score": constant_score(test_y, label, metric), "n_test": len(test_y)})
    return pd.DataFrame(rows)


def scaled_protocol_tasks(tasks: Iterable[str], cfg: FinetuneConfig | None = None) -> list[str]:
    """The tasks of ``tasks`` (in their order) that run the scaled protocol under ``cfg``: their trained task has no
    training file (bundled, or in ``cfg.train_dir``), so train/dev/test are carved from the validation file
    (``mnli-mm`` counts with ``mnli``, whose model it is scored with)."""
    cfg = cfg or FinetuneConfig()
    return [t for t in tasks if train_file(TASKS[t].trained_as, cfg.train_dir) is None]


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
    "finetune_prepared", "finetune_task", "finetune_all", "finetune_many", "result_row", "glue_average",
    "model_name", "scaled_tasks", "protocol_note", "majority_baseline",
    "scaled_protocol_tasks",
]
