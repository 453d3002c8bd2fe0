"""The formats another tool reads our exports in, as rules of our own: the BabyLM 2024 evaluation pipeline's
submission file (``all_predictions.json``) and lm-eval's results dict (``results.json``).

Names (:func:`submission_group`, :func:`lm_eval_group`, :func:`lm_eval_task`)
    The pipeline (``babylm/evaluation-pipeline-2024``) names its groups ``blimp``, ``blimp_supplement``, ``ewok`` and
    ``glue`` in the submission file (``collect_results.py``: ``TEXT_TASKS``), a subtask by its data file's stem
    (``adjunct_island``, ``hypernym``, ``agent-properties``) and a prediction ``<subtask>_<index>``. Its lm-eval tasks
    (``lm_eval/tasks/{blimp_filtered,blimp_supplement,ewok_filtered}/*.yaml``) are ``blimp_<subtask>_filtered``,
    ``blimp_supplement_<subtask>`` and ``ewok_<subtask>_filtered`` in the groups ``blimp_filtered``,
    ``blimp_supplement`` and ``ewok_filtered``; lm-eval's own full BLiMP is ``blimp_<subtask>`` in ``blimp``.

:func:`verify_predictions`
    The rules of the pipeline's ``collect_results.verify_dict`` for the text tasks, checked against our bundled copies
    of its ``evaluation_data`` files: every required group is present, every subtask of a group (a BLiMP paradigm
    file, the five supplement tasks, the eleven EWoK domains, the eleven (Super)GLUE tasks) is present under it, a
    group or subtask without a data file is refused (the pipeline opens ``evaluation_data/<group>_filtered/
    <subtask>.jsonl``, ``supplement_filtered`` for the supplement, ``<task>.valid.jsonl`` for GLUE), each subtask has
    one prediction per line of its data file, and predictions are strings (zero-shot) or integers (GLUE). Stricter
    than ``verify_dict`` in three places, where ``make_task_dict`` fixes the shape it checks only loosely: every
    prediction's type is checked (not only the first), each prediction is exactly ``{"id", "pred"}``, and the ids
    are ``<subtask>_0``, ``<subtask>_1``, ... in file order. ``complete=False`` checks a sample (an export under
    ``--limit``): ids name distinct lines of the file, in file order, and the count rule is left out.

:func:`verify_results`
    The results dict that lm-eval 0.4's ``simple_evaluate`` returns, as ``lm_eval.utils.make_table`` and lm-eval's
    other readers use it: derived from lm-eval 0.4.2 (the version the 2024 pipeline vendors, whose ``make_table``
    reads ``result_dict["n-shot"][k]`` for every row and formats every metric with ``"%.4f"``) and 0.4.13 (the one on
    PyPI when this was written: ``higher_is_better`` per task and metric, ``n-samples`` with ``original`` and
    ``effective``). Keys ``results``, ``group_subtasks``, ``configs``, ``versions``, ``n-shot``,
    ``higher_is_better``, ``n-samples``, ``config``, ``git_hash``, ``date``; each row of ``results`` (and
    ``groups``) holds an ``alias`` and ``"<metric>,<filter>"`` numbers, a ``"<metric>_stderr,<filter>"`` beside its
    metric (a number or ``"N/A"``).
"""
from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from helpers.data.corpora import read_jsonl_rows, resolve
from helpers.evaluation import glue_tasks
from helpers.evaluation.minimal_pairs import task_files

#: our minimal-pair task -> its group in the pipeline's submission file
SUBMISSION_GROUPS = {"blimp": "blimp", "supplement": "blimp_supplement", "ewok": "ewok"}
#: the groups of a text-only submission (``verify_dict`` requires all four); an export writes the zero-shot three
TEXT_GROUPS = ("glue", "blimp", "blimp_supplement", "ewok")
ZERO_SHOT_GROUPS = ("blimp", "blimp_supplement", "ewok")
FULL_BLIMP_GROUP = "blimp_full"  # the full BLiMP, which has no place in a submission (verify_predictions refuses it)

#: keys of a results row that are not metrics (lm-eval's ``make_table`` drops them)
ROW_KEYS = ("alias", "name", "sample_len", "sample_count", "samples")
RESULTS_KEYS = ("results", "group_subtasks", "configs", "versions", "n-shot", "higher_is_better", "n-samples",
                "config", "git_hash", "date")


def submission_group(task: str, blimp_version: str = "filtered") -> str:
    """The group of our ``task`` in the submission file (``blimp``, ``blimp_supplement``, ``ewok``); the full BLiMP
    (``blimp_version="full"``) is ``blimp_full``, a group the pipeline does not know."""
    if task == "blimp" and blimp_version == "full":
        return FULL_BLIMP_GROUP
    return SUBMISSION_GROUPS.get(task, task)


def lm_eval_group(task: str, blimp_version: str = "filtered") -> str:
    """The lm-eval group of our ``task`` as the pipeline's task files name it: ``blimp_filtered``,
    ``blimp_supplement``, ``ewok_filtered`` (``blimp``: lm-eval's full BLiMP)."""
    if task == "blimp":
        return "blimp" if blimp_version == "full" else "blimp_filtered"
    return {"supplement": "blimp_supplement", "ewok": "ewok_filtered"}.get(task, task)


def lm_eval_task(task: str, subtask: str, blimp_version: str = "filtered") -> str:
    """The lm-eval task of one data file: ``blimp_adjunct_island_filtered``, ``blimp_supplement_hypernym``,
    ``ewok_agent-properties_filtered`` (``blimp_adjunct_island`` for the full BLiMP)."""
    if task == "blimp":
        return f"blimp_{subtask}" if blimp_version == "full" else f"blimp_{subtask}_filtered"
    if task == "supplement":
        return f"blimp_supplement_{subtask}"
    if task == "ewok":
        return f"ewok_{subtask}_filtered"
    return f"{task}_{subtask}"


def _stem(p: Path) -> str:
    return p.name.split(".jsonl")[0]


def submission_files(group: str) -> dict[str, Path]:
    """``subtask -> data file`` of a submission group, our bundled copy of the pipeline's ``evaluation_data``
    (empty for a group the pipeline does not know)."""
    if group == "glue":
        return {t: resolve(spec.file("valid")) for t, spec in glue_tasks.TASKS.items()}
    ours = {g: t for t, g in SUBMISSION_GROUPS.items()}
    return {_stem(p): p for p in task_files(ours[group])} if group in ours else {}


@functools.lru_cache(maxsize=None)
def file_lines(path: Path) -> int:
    """Examples (lines) in a bundled data file."""
    return len(read_jsonl_rows(path))


def _problems(collated: Mapping[str, Any], groups: Iterable[str], complete: bool) -> Iterable[str]:
    if not isinstance(collated, Mapping):
        yield f"not a mapping of groups but {type(collated).__name__}"
        return
    for group in groups:
        if group not in collated:
            yield f"{group} not present"
            continue
        for sub in submission_files(group):
            if sub not in collated[group]:
                yield f"{sub} not present under {group}"
    for group, subs in collated.items():
        files = submission_files(group)
        if not files:
            yield f"{group}: no such group in the pipeline (groups: {', '.join(TEXT_GROUPS)})"
            continue
        for sub, body in subs.items():
            where = f"{group}/{sub}"
            if sub not in files:
                yield f"{where}: no data file for this subtask"
                continue
            preds = body.get("predictions") if isinstance(body, Mapping) else None
            if not isinstance(preds, list) or not preds:
                yield f"{where}: no list of predictions"
                continue
            want = int if group == "glue" else str
            bad_shape = [p for p in preds if not isinstance(p, Mapping) or set(p) != {"id", "pred"}]
            if bad_shape:
                yield f"{where}: a prediction is not exactly {{'id', 'pred'}}: {bad_shape[0]!r}"
                continue
            bad_type = [p for p in preds if type(p["pred"]) is not want]
            if bad_type:
                yield f"{where}: predictions should be {want.__name__}s: {bad_type[0]!r}"
            n = file_lines(files[sub])
            if complete and len(preds) != n:
                yield f"{where}: examples missing ({len(preds)} predictions, {n} lines in the data file)"
                continue
            pattern = re.compile(rf"^{re.escape(sub)}_(0|[1-9][0-9]*)$")
            lines = []
            for p in preds:
                m = pattern.match(str(p["id"]))
                if not m:
                    yield f"{where}: id {p['id']!r} is not {sub}_<index>"
                    break
                lines.append(int(m.group(1)))
            else:
                if complete and lines != list(range(n)):
                    yield f"{where}: ids are not {sub}_0 ... {sub}_{n - 1} in file order"
                elif not complete and (lines != sorted(set(lines)) or (lines and lines[-1] >= n)):
                    yield f"{where}: ids are not distinct lines of the data file ({n} lines) in file order"


def verify_predictions(collated: Mapping[str, Any], groups: Iterable[str] = ZERO_SHOT_GROUPS,
                       complete: bool = True) -> None:
    """Raise :class:`ValueError` listing every way ``collated`` (an ``all_predictions.json`` as a dict) breaks the
    pipeline's ``verify_dict`` rules (see the module docstring). ``groups``: those that must be present (a full
    text-only submission: :data:`TEXT_GROUPS`); ``complete=False``: a sample of lines (no count rule)."""
    problems = list(_problems(collated, tuple(groups), complete))
    if problems:
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise ValueError("not a valid BabyLM 2024 submission: " + "; ".join(problems[:10]) + more)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _results_problems(res: Mapping[str, Any]) -> Iterable[str]:
    missing = [k for k in RESULTS_KEYS if k not in res]
    if missing:
        yield f"missing key(s) {missing}"
        return
    rows = dict(res["results"])
    groups = res["group_subtasks"]
    for column in ("results", "groups") if "groups" in res else ("results",):
        for name, row in res[column].items():
            where = f"{column}[{name!r}]"
            if not isinstance(row, Mapping):
                yield f"{where}: not a mapping"
                continue
            if not isinstance(row.get("alias", ""), str):
                yield f"{where}: alias is not a string"
            metrics = {k: v for k, v in row.items() if k not in ROW_KEYS}
            if not metrics:
                yield f"{where}: no metric"
            for key, v in metrics.items():
                metric, comma, _ = key.partition(",")
                if not comma:
                    yield f"{where}: {key!r} is not '<metric>,<filter>'"
                elif metric.endswith("_stderr"):
                    if metric[: -len("_stderr")] + key[len(metric):] not in metrics:
                        yield f"{where}: {key!r} without its metric"
                    if not (_number(v) and math.isfinite(v)) and v != "N/A":
                        yield f"{where}: {key} = {v!r} is neither a finite number nor 'N/A'"
                else:
                    if not _number(v):
                        yield f"{where}: {key} = {v!r} is not a number"
                    if not isinstance(res["higher_is_better"].get(name, {}).get(metric), bool):
                        yield f"higher_is_better[{name!r}] does not say for {metric!r}"
            if not isinstance(res["n-shot"].get(name), int):
                yield f"n-shot has no number for {name!r}"
            if name not in res["versions"]:
                yield f"versions has no entry for {name!r}"
    for group, subs in groups.items():
        if group not in rows:
            yield f"group_subtasks names {group!r}, which results lacks"
        for s in subs:
            if s not in rows:
                yield f"group {group!r} lists {s!r}, which results lacks"
    listed = {s for subs in groups.values() for s in subs}
    for name in rows:
        if name in groups:
            continue
        if name not in listed:
            yield f"{name!r} is neither a group nor in one"
        cfg = res["configs"].get(name)
        if not isinstance(cfg, Mapping) or cfg.get("task") != name:
            yield f"configs[{name!r}] missing or names another task"
        elif cfg.get("num_fewshot") != res["n-shot"].get(name):
            yield f"configs[{name!r}] num_fewshot differs from n-shot"
        n = res["n-samples"].get(name)
        if not (isinstance(n, Mapping) and isinstance(n.get("original"), int) and isinstance(n.get("effective"), int)
                and 0 <= n["effective"] <= n["original"]):
            yield f"n-samples[{name!r}] is not {{'original', 'effective'}} with effective <= original"
    for k in ("model", "model_args", "batch_size", "limit"):
        if k not in res["config"]:
            yield f"config has no {k!r}"


def verify_results(results: Mapping[str, Any]) -> None:
    """Raise :class:`ValueError` listing every way ``results`` (a ``results.json`` as a dict) departs from lm-eval
    0.4's results schema (see the module docstring)."""
    problems = list(_results_problems(results))
    if problems:
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise ValueError("not an lm-eval results dict: " + "; ".join(problems[:10]) + more)
