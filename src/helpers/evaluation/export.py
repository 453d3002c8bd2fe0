"""A trained model's zero-shot minimal-pair results in the formats other tools read: BabyLM-style predictions and an
lm-eval-style results JSON.

    python -m helpers.evaluation.export --model runs/smoke/decoders/tiny-40k/best --out exports/tiny-40k
    python -m helpers.evaluation.export --model runs/cpu/encoders/baby-1M/best --out exports/baby-1M --limit 30

The model is scored as notebook 05 scores it (:func:`helpers.evaluation.zero_shot.evaluate_saved`: summed
log-probability for a GPT-Neo decoder, pseudo-log-likelihood for an LTG-BERT encoder, the per-token mean by default
as in BabyLM 2024; ties broken by the seeded coin). Where notebook 05 already scored the same model with the same
settings, its per-item cache (``runs/<profile>/eval/<decoders|encoders>/<name>/<task>.jsonl``) is copied into
``OUT/cache/`` and read (the fingerprint of weights, tokenizer, settings and data decides); other settings are
scored afresh into ``OUT/cache/``, so the notebook's cache is never changed.

What is written under ``OUT/`` (formats documented here because they are what we emit; the rules they are held to
are :mod:`helpers.evaluation.babylm_format`'s, checked before anything is written):

* ``predictions/<group>/<subtask>.json``, one per data file (BLiMP paradigm, supplement task, EWoK domain), in the
  BabyLM 2024 evaluation pipeline's zero-shot prediction format:
  ``{"predictions": [{"id": "<subtask>_<index>", "pred": " <the sentence the model prefers>"}, ...]}``. ``<index>``
  is the item's line in its data file (0-based, also under ``--limit``, which scores a seeded sample of lines),
  predictions in file order; ``pred`` is the preferred sentence (the grammatical or the ungrammatical one; for EWoK
  the preferred target, the context left out) after one space, as lm-eval's ``" " + choice`` continuations print it
  (``--pred-prefix``). Groups as the pipeline's submission file names them: ``blimp``, ``blimp_supplement``,
  ``ewok`` (``blimp_full`` with ``--blimp-version full``, which has no place in a submission); subtasks by their
  data file's stem (``adjunct_island``, ``agent-properties``).
* ``all_predictions.json``: the same collated as the pipeline's submission file,
  ``{"<group>": {"<subtask>": {"predictions": [...]}}}``. Without ``--limit`` and with all three tasks it passes the
  pipeline's ``verify_dict`` rules for the zero-shot groups (:func:`~helpers.evaluation.babylm_format.
  verify_predictions`); a submission also needs the pipeline's ``glue`` group, which this export does not write.
* ``results.json``, lm-eval 0.4's results dict (:func:`~helpers.evaluation.babylm_format.verify_results`, what
  ``lm_eval.utils.make_table`` reads): ``results`` maps every subtask, named as the pipeline's lm-eval tasks are
  (``blimp_adjunct_island_filtered``, ``blimp_supplement_hypernym``, ``ewok_agent-properties_filtered``), and every
  group (``blimp_filtered``, ``blimp_supplement``, ``ewok_filtered``) to ``{"alias", "acc,none",
  "acc_stderr,none"}`` with ``acc`` a fraction; a subtask's standard error is ``sqrt(acc (1 - acc) / (n - 1))``
  (lm-eval's for a mean of 0/1 scores; ``"N/A"`` for one pair); a group's ``acc`` is the mean over its subtasks (the
  BabyLM group score, our table's headline, lm-eval's unweighted group mean) with ``sqrt(sum of the subtasks' se²) /
  subtasks``; ``groups`` and ``group_subtasks`` name the groups; ``n-shot`` (0), ``higher_is_better``, ``configs``
  (each task as the pipeline's task file defines it, with our data file) and ``versions`` (our scoring version) per
  task; ``n-samples`` gives each subtask's lines in the file (``original``) and scored (``effective``); ``ties`` the
  tied pairs per task; ``config`` the model (path, kind, ``model_revision``: the revision that trained it, from its
  folder's sidecar or else its model card; SHA-256 of its weights), the settings and this checkout's revision.

Progress: a bar on a terminal; when stdout is not a terminal (a log file, ``nohup``), a line every ``--progress-every``
scored sequences (default: every 5 %) with the rate and the time left (:class:`helpers.core.progress.LineProgress`).
"""
from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Literal, Sequence

from helpers.core.artifacts import read_json, write_json
from helpers.core.config import shown_path
from helpers.core.digests import sha256_file
from helpers.core.integrity import read_sidecar
from helpers.core.progress import LineProgress
from helpers.evaluation.babylm_format import (lm_eval_group, lm_eval_task, submission_group, verify_predictions,
                                              verify_results)
from helpers.evaluation.minimal_pairs import TASKS, Item, Limit, load_task, task_files, task_limit
from helpers.evaluation.zero_shot import SCORING_VERSION, EvalResult, evaluate_saved
from helpers.training.model_card import revision

MASKED_LM_TYPES = ("ltgbert", "ltg_bert")  # config.json model_type of an encoder; every other model is a decoder


def saved_kind(folder: str | Path) -> Literal["causal", "mlm"]:
    """``mlm`` for a saved LTG-BERT, ``causal`` for any other saved model (a GPT-Neo decoder, the compressor), from
    its ``config.json``."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"no saved model at {shown_path(folder)} (expected {shown_path(path)})")
    model_type = str(read_json(path).get("model_type", "")).lower()  # a garbled file names itself
    return "mlm" if model_type in MASKED_LM_TYPES else "causal"


def notebook_cache(folder: str | Path) -> Path | None:
    """Where notebook 05 caches a model's per-item rows: ``runs/<p>/eval/<decoders|encoders>/<name>/`` for a model
    saved at ``runs/<p>/<decoders|encoders>/<name>/best`` (None for a folder elsewhere)."""
    folder = Path(folder).resolve()
    if folder.name != "best" or folder.parent.parent.name not in ("decoders", "encoders"):
        return None
    cache = folder.parent.parent.parent / "eval" / folder.parent.parent.name / folder.parent.name
    return cache if cache.is_dir() else None


def line_indices(task: str, seed: int = 0, blimp_version: str = "filtered") -> dict[tuple[str, str], int]:
    """``(paradigm, pair id) -> line`` of every item of ``task`` in its data file (0-based, file order)."""
    seen: dict[str, int] = defaultdict(int)
    out = {}
    for it in load_task(task, None, seed, blimp_version):
        out[(it.paradigm, it.pair_id)] = seen[it.paradigm]
        seen[it.paradigm] += 1
    return out


def predictions(rows: Sequence[dict], items: Sequence[Item], index: dict[tuple[str, str], int],
                prefix: str = " ") -> dict[str, dict[str, list[dict]]]:
    """``{subtask: {"predictions": [{"id", "pred"}]}}`` from scored rows and their items (matched on paradigm and
    pair id): the sentence the model prefers (``correct`` = the good one, ties as the seeded coin decided), in the
    order of the lines of the data file."""
    by_id = {(it.paradigm, it.pair_id): it for it in items}
    lines: dict[str, list[tuple[int, str]]] = {}
    for r in rows:
        it = by_id[(r["paradigm"], str(r["pair_id"]))]
        sentence = it.good if r["correct"] else it.bad
        lines.setdefault(it.paradigm, []).append((index[(it.paradigm, it.pair_id)], prefix + sentence))
    return {sub: {"predictions": [{"id": f"{sub}_{line}", "pred": pred} for line, pred in sorted(found)]}
            for sub, found in lines.items()}


def _stderr(k: int, n: int) -> float | str:
    p = k / n
    return math.sqrt(p * (1 - p) / (n - 1)) if n > 1 else "N/A"


def _task_config(name: str, group: str, task: str, data_file: str | None, delimiter: str) -> dict[str, Any]:
    """One task as the pipeline's lm-eval task file defines it (our data file, our delimiter)."""
    pair = task == "ewok"
    return {"task": name, "group": group, "dataset_path": "json", "dataset_kwargs": {"data_files": data_file},
            "validation_split": "train", "output_type": "multiple_choice",
            "doc_to_text": "{{Context1}}" if pair else "", "doc_to_target": 0,
            "doc_to_choice": "{{[Target1, Target2]}}" if pair else "{{[sentence_good, sentence_bad]}}",
            "target_delimiter": delimiter, "num_fewshot": 0,
            "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
            "metadata": {"version": SCORING_VERSION}}


def results_json(result: EvalResult, config: dict[str, Any], file_lines: dict[str, dict[str, int]],
                 blimp_version: str = "filtered", data_files: dict[str, dict[str, str]] | None = None,
                 delimiter: str = " ") -> dict[str, Any]:
    """lm-eval 0.4's results dict of one :class:`EvalResult` (see the module docstring); ``file_lines``: lines of
    each data file (``task -> subtask -> lines``), ``data_files``: their paths, for ``configs``."""
    par = result.by_paradigm
    res: dict[str, dict] = {}
    groups: dict[str, list[str]] = {}
    samples: dict[str, dict[str, int]] = {}
    configs: dict[str, dict] = {}
    ties: dict[str, int] = {}
    for task, g in par.groupby("task", sort=False):
        group = lm_eval_group(task, blimp_version)
        subs, ses = [], []
        for r in g.itertuples(index=False):
            name = lm_eval_task(task, r.paradigm, blimp_version)
            se = _stderr(int(r.correct), int(r.pairs))
            res[name] = {"alias": name, "acc,none": int(r.correct) / int(r.pairs), "acc_stderr,none": se}
            samples[name] = {"original": file_lines[task].get(r.paradigm, int(r.pairs)), "effective": int(r.pairs)}
            configs[name] = _task_config(name, group, task, (data_files or {}).get(task, {}).get(r.paradigm),
                                         delimiter)
            ties[name] = int(r.ties)
            subs.append(name)
            ses.append(se)
        accs = [res[s]["acc,none"] for s in subs]
        group_se = "N/A" if "N/A" in ses else math.sqrt(sum(s * s for s in ses)) / len(ses)
        res[group] = {"alias": group, "acc,none": sum(accs) / len(accs), "acc_stderr,none": group_se}
        ties[group] = int(g["ties"].sum())
        groups[group] = subs
    return {"results": res, "groups": {g: res[g] for g in groups}, "group_subtasks": groups,
            "configs": dict(sorted(configs.items())), "versions": {name: SCORING_VERSION for name in res},
            "n-shot": {name: 0 for name in res}, "higher_is_better": {name: {"acc": True} for name in res},
            "n-samples": samples, "ties": ties, "config": config, "git_hash": revision(), "date": time.time()}


def model_revision(folder: str | Path) -> str:
    """The revision that trained a saved model: the ``revision`` its sidecar recorded when the folder was saved
    (:func:`helpers.core.integrity.read_sidecar`; a repetition-fine-tuned decoder's ``best/`` has no model card), else
    as its model card (``README.md``) states it; ``unknown`` only when the folder says neither."""
    try:
        recorded = (read_sidecar(folder) or {}).get("revision")
    except ValueError:  # an unreadable sidecar: the load refuses the folder itself; here the card may still say
        recorded = None
    if isinstance(recorded, str) and recorded and recorded != "unknown":
        return recorded
    card = Path(folder) / "README.md"
    m = re.search(r"revision `([^`]+)`", card.read_text(encoding="utf-8")) if card.is_file() else None
    return m.group(1) if m else "unknown"


def export(model: str | Path, out: str | Path, tasks: Sequence[str] = TASKS, *, kind: str | None = None,
           limit_per_task: Limit = None, seed: int = 0, reduction: str | None = None,
           blimp_version: Literal["filtered", "full"] = "filtered", batch_size: int = 64, max_tokens: int = 2048,
           pred_prefix: str = " ", use_cache: bool = True, progress: bool | Literal["lines"] = True,
           progress_every: int | None = None, log=print) -> dict[str, Any]:
    """Score ``model`` (a saved folder) on ``tasks`` and write the predictions and ``results.json`` under ``out``
    (see the module docstring), each checked first against the format it claims
    (:mod:`helpers.evaluation.babylm_format`); returns the results dict. ``progress``: a bar (True), none (False) or
    ``"lines"``: a ``log`` line every ``progress_every`` scored sequences (default every 5 %) with the rate
    (:class:`helpers.core.progress.LineProgress`), for output that is not a terminal."""
    model, out = Path(model), Path(out)
    kind = kind or saved_kind(model)
    reduction = reduction or ("mean" if kind == "mlm" else "sum")
    cache = out / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    source = notebook_cache(model) if use_cache else None
    for task in tasks if source else ():
        for f in (source / f"{task}.jsonl", source / f"{task}.jsonl_step.json"):
            if f.is_file() and not (cache / f.name).exists():
                shutil.copy2(f, cache / f.name)
    items = {task: load_task(task, limit_per_task, seed, blimp_version) for task in tasks}
    if progress == "lines":  # two sequences a pair, as the scorers count them
        progress = LineProgress(sum(2 * len(v) for v in items.values()), f"export {shown_path(model)}", "seq",
                                progress_every, log)
    result = evaluate_saved(model, kind, tasks, out_dir=cache, name=model.parent.name if model.name == "best" else
                            model.name, limit_per_task=limit_per_task, seed=seed, blimp_version=blimp_version,
                            batch_size=batch_size, max_tokens=max_tokens, progress=progress, log=log,
                            **({"reduction": reduction} if kind == "mlm" else {}))
    collated: dict[str, dict] = {}
    file_lines: dict[str, dict[str, int]] = {}
    data_files: dict[str, dict[str, str]] = {}
    for task in tasks:
        index = line_indices(task, seed, blimp_version)
        lines: dict[str, int] = defaultdict(int)
        for paradigm, _ in index:
            lines[paradigm] += 1
        file_lines[task] = dict(lines)
        data_files[task] = {f.name.split(".jsonl")[0]: shown_path(f) for f in task_files(task, blimp_version)}
        collated[submission_group(task, blimp_version)] = predictions(
            [r for r in result.rows if r["task"] == task], items[task], index, pred_prefix)
    if blimp_version == "filtered":  # every line of every file, unless a limit samples them
        verify_predictions(collated, [submission_group(t) for t in tasks],
                           complete=all(task_limit(limit_per_task, t) is None for t in tasks))
    weights = model / "model.safetensors"
    config = {"model": f"storybench-{kind}", "model_args": f"pretrained={model}", "model_path": str(model),
              "kind": kind, "reduction": reduction, "model_revision": model_revision(model),
              "model_sha256": sha256_file(weights) if weights.is_file() else None, "limit": limit_per_task,
              "random_seed": seed, "blimp_version": blimp_version, "batch_size": batch_size,
              "ewok_context": True, "tie_rule": "seeded coin (zero_shot.tie_coin)", "pred_prefix": pred_prefix}
    results = results_json(result, config, file_lines, blimp_version, data_files, pred_prefix)
    verify_results(results)
    for group, preds in collated.items():
        for sub, body in preds.items():
            write_json(out / "predictions" / group / f"{sub}.json", body, indent=None)
    write_json(out / "all_predictions.json", collated, indent=None)
    write_json(out / "results.json", results)
    if log:
        heads = ", ".join(f"{g} {100 * results['results'][g]['acc,none']:.1f}%" for g in results["group_subtasks"])
        log(f"export: {shown_path(model)} -> {shown_path(out)}: {heads}")
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.evaluation.export", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a saved model folder, e.g. runs/smoke/decoders/tiny-40k/best")
    ap.add_argument("--out", required=True, help="the folder to write predictions/, all_predictions.json, results.json")
    ap.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, of {', '.join(TASKS)}")
    ap.add_argument("--kind", choices=("causal", "mlm"), help="default: from the model's config.json")
    ap.add_argument("--limit", type=int, help="a seeded sample of at most this many pairs per paradigm / file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reduction", choices=("sum", "mean"), help="encoders' PLL (default mean); decoders sum")
    ap.add_argument("--blimp-version", choices=("filtered", "full"), default="filtered")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--pred-prefix", default=" ", help="put before each predicted sentence (default one space)")
    ap.add_argument("--no-cache", action="store_true", help="do not reuse notebook 05's per-item scores")
    ap.add_argument("--progress-every", type=int, help="without a terminal: a progress line every this many scored "
                                                       "sequences (default: every 5 %%)")
    a = ap.parse_args(argv)
    terminal = sys.stdout.isatty() and sys.stderr.isatty()
    try:
        export(a.model, a.out, [t for t in a.tasks.split(",") if t], kind=a.kind, limit_per_task=a.limit,
               seed=a.seed, reduction=a.reduction, blimp_version=a.blimp_version, batch_size=a.batch_size,
               pred_prefix=a.pred_prefix, use_cache=not a.no_cache, progress=True if terminal else "lines",
               progress_every=a.progress_every, log=lambda line: print(line, flush=True))
    except (ValueError, OSError) as e:
        print(f"export: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
