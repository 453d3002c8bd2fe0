"""Zero-shot minimal-pair evaluation: BLiMP, the BLiMP supplement and EWoK. The scoring rule, the EWoK protocol,
the averages and the intervals are described in ``docs/methods.md#minimal-pairs``.

The items come from :mod:`helpers.evaluation.minimal_pairs` (its task registry), the scores from
:mod:`helpers.evaluation.lm_scoring`; this module turns scored pairs into per-item rows (:func:`score_items`, ties
broken by :func:`tie_coin` and kept in the ``tie`` column), summarises them with intervals (:func:`summarise`:
paradigm mean as ``accuracy``, phenomenon mean, pooled pair accuracy; :func:`paradigm_mean_interval`,
:func:`interval_table`), runs and caches it all (:func:`evaluate_model`, :func:`evaluate_saved`; ``ewok_context`` and ``reduction`` in
:class:`EvalSettings`) and sets our numbers beside the paper's (:func:`compare_with_paper`).

:func:`evaluate_model` runs with a progress bar and caches the per-item rows as JSONL per task (skipped when the
weights, the tokenizer, the settings and the data did not change).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Mapping, Sequence

import numpy as np
import pandas as pd

from helpers.core.artifacts import fingerprint, read_jsonl, run_step, write_jsonl
from helpers.core.digests import model_digest, sha256_file, text_digest
from helpers.core.hardware import compute_device
from helpers.core.parallel import run_jobs
from helpers.core.stats import binomial_replicates, percentile_interval
from helpers.data.tokenizers import load_tokenizer
from helpers.generation.completions import PLAIN_DIR
from helpers.evaluation.lm_scoring import Request, _bar, causal_scores, mlm_scores
from helpers.evaluation.minimal_pairs import (TASK_REGISTRY, TASKS, Item, Limit, load_task, task_display, task_files,
                                              task_limit)
from helpers.models.ltg_bert import load_model
from helpers.models.registry import load_saved

if TYPE_CHECKING:  # annotations only (pandas is imported where it is used)
    import pandas as pd

SCORING_VERSION = "minimal-pairs-v1"  # part of every cache fingerprint: bump when scores would change


# ============================================================================================ pairs -> rows


def tie_coin(seed: int, task: str, paradigm: str, pair_id: str) -> bool:
    """The seeded coin that decides a tie: the same item and seed always give the same answer."""
    first_byte = int(text_digest(f"{seed}\x1f{task}\x1f{paradigm}\x1f{pair_id}", 2), 16)
    return bool(first_byte & 1)


Scorer = Callable[[Sequence[Request]], "tuple[np.ndarray, np.ndarray] | np.ndarray"]


def score_items(items: Sequence[Item], scorer: Scorer, *, reduction: Literal["sum", "mean"] = "sum",
                seed: int = 0, ewok_context: bool = True) -> list[dict]:
    """Per-item rows from any scorer (``requests -> scores`` or ``(sums, counts)``).

    ``reduction="mean"`` divides each score by its token count (needs a scorer that returns counts)."""
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction must be 'sum' or 'mean', not {reduction!r}")
    reqs: list[Request] = []
    for it in items:
        ctx = it.context if ewok_context else None
        reqs += [(ctx, it.good), (ctx, it.bad)]
    out = scorer(reqs) if reqs else (np.zeros(0), np.zeros(0))
    if isinstance(out, tuple):
        sums, counts = np.asarray(out[0], dtype=np.float64), np.asarray(out[1], dtype=np.int64)
    else:
        sums, counts = np.asarray(out, dtype=np.float64), None
    if len(sums) != len(reqs):
        raise ValueError(f"scorer returned {len(sums)} scores for {len(reqs)} requests")
    if reduction == "mean":
        if counts is None:
            raise ValueError("reduction='mean' needs a scorer that returns (sums, counts)")
        scores = sums / np.maximum(counts, 1)
    else:
        scores = sums
    rows = []
    for j, it in enumerate(items):
        g, b = float(scores[2 * j]), float(scores[2 * j + 1])
        tie = g == b
        correct = tie_coin(seed, it.task, it.paradigm, it.pair_id) if tie else g > b
        row = {"task": it.task, "paradigm": it.paradigm, "phenomenon": it.phenomenon, "term": it.term,
               "pair_id": it.pair_id, "score_good": g, "score_bad": b}
        if counts is not None:
            row["n_good"], row["n_bad"] = int(counts[2 * j]), int(counts[2 * j + 1])
        row["correct"], row["tie"] = bool(correct), bool(tie)
        rows.append(row)
    return rows


# ============================================================================================ aggregation


BOOTSTRAP_SAMPLES = 2000


def paradigm_mean_interval(pairs: Sequence[int], correct: Sequence[int], confidence: float = 0.95,
                           samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile interval (in %) of the mean over paradigms of their accuracies, by a seeded bootstrap over
    items stratified by paradigm: resampling a paradigm's ``n`` items with replacement gives
    ``Binomial(n, correct / n)`` right answers, so each replicate draws one binomial per paradigm."""
    n = np.asarray(pairs, dtype=np.int64)
    k = np.asarray(correct, dtype=np.int64)
    if n.size == 0 or (n <= 0).any() or (k < 0).any() or (k > n).any():
        raise ValueError("every paradigm needs pairs > 0 and 0 <= correct <= pairs")
    draws = binomial_replicates(n, k, samples, np.random.default_rng(seed))
    lo, hi = percentile_interval(100.0 * draws.mean(axis=1), confidence)
    return float(lo), float(hi)


def summarise(rows: Iterable[dict] | "pd.DataFrame", confidence: float = 0.95, seed: int = 0) -> dict[str, "pd.DataFrame"]:
    """Accuracies (in %) from per-item rows, with ``confidence`` intervals of the headline accuracies
    (:func:`paradigm_mean_interval`: a seeded bootstrap over items, stratified by paradigm; columns ``ci_low``,
    ``ci_high``; the ``overall`` row's interval is that of the mean over tasks, every task's paradigm weighted
    as in that mean).

    * ``paradigm``: task, paradigm, phenomenon, pairs, correct, ties, accuracy;
    * ``phenomenon``: task, phenomenon, paradigms, pairs, accuracy = mean of its paradigms' accuracies;
    * ``task``: task, paradigms, phenomena, pairs, ties, ``accuracy`` = mean over paradigms (the BabyLM 2024 group
      score, the headline), ``accuracy_phenomena`` = mean over phenomena, ``accuracy_pairs`` = pooled pairs;
    * ``overall``: one row, the unweighted mean of the tasks' headline accuracies (as the papers' "Avg." over the
      zero-shot columns) and each task's accuracy as a column."""
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if df.empty:
        raise ValueError("no rows to summarise")
    df = df.assign(correct=df["correct"].astype(bool), tie=df["tie"].astype(bool))
    order = {t: i for i, t in enumerate(TASK_REGISTRY)}
    par = (df.groupby(["task", "paradigm", "phenomenon"], sort=False)
             .agg(pairs=("correct", "size"), correct=("correct", "sum"), ties=("tie", "sum")).reset_index())
    par["accuracy"] = 100.0 * par["correct"] / par["pairs"]
    par = par.sort_values(["task", "paradigm"], key=lambda s: s.map(order) if s.name == "task" else s,
                          kind="stable").reset_index(drop=True)
    phe = (par.groupby(["task", "phenomenon"], sort=False)
              .agg(paradigms=("paradigm", "size"), pairs=("pairs", "sum"), accuracy=("accuracy", "mean"))
              .reset_index())
    phe = phe.sort_values(["task", "phenomenon"], key=lambda s: s.map(order) if s.name == "task" else s,
                          kind="stable").reset_index(drop=True)
    tasks = []
    for task, g in par.groupby("task", sort=False):
        p = phe[phe["task"] == task]
        lo, hi = paradigm_mean_interval(g["pairs"], g["correct"], confidence, seed=seed)
        tasks.append({"task": task, "paradigms": len(g), "phenomena": len(p), "pairs": int(g["pairs"].sum()),
                      "ties": int(g["ties"].sum()), "accuracy": float(g["accuracy"].mean()), "ci_low": lo, "ci_high": hi,
                      "accuracy_phenomena": float(p["accuracy"].mean()),
                      "accuracy_pairs": float(100.0 * g["correct"].sum() / g["pairs"].sum())})
    task_df = pd.DataFrame(tasks).sort_values("task", key=lambda s: s.map(order)).reset_index(drop=True)
    overall = {task_display(t): a for t, a in zip(task_df["task"], task_df["accuracy"])}
    # the average over tasks weights each paradigm by 1 / (tasks × its task's paradigms): one bootstrap per task,
    # drawn with the same seed sequence, then averaged replicate by replicate
    rng = np.random.default_rng(seed)
    reps = [100.0 * binomial_replicates(g["pairs"], g["correct"], BOOTSTRAP_SAMPLES, rng).mean(axis=1)
            for _, g in par.groupby("task", sort=False)]
    avg_lo, avg_hi = percentile_interval(np.mean(reps, axis=0), confidence)
    overall_df = pd.DataFrame([{**overall, "average": float(task_df["accuracy"].mean()),
                                "average_ci_low": float(avg_lo), "average_ci_high": float(avg_hi),
                                "ties": int(task_df["ties"].sum()), "pairs": int(task_df["pairs"].sum())}])
    return {"paradigm": par, "phenomenon": phe, "task": task_df, "overall": overall_df}


# ============================================================================================ top level


@dataclass
class EvalSettings:
    kind: Literal["causal", "mlm"]
    reduction: Literal["sum", "mean"] = "sum"
    delimiter: str = " "
    ewok_context: bool = True
    seed: int = 0
    limit_per_task: Limit = None
    blimp_version: Literal["filtered", "full"] = "filtered"
    batch_size: int = 64
    max_tokens: int = 2048
    scoring_version: str = SCORING_VERSION

    def cache_key(self) -> dict:
        d = asdict(self)
        d.pop("batch_size")  # exact batching: the batch shape does not change scores beyond float noise
        d.pop("max_tokens")
        return d


@dataclass
class EvalResult:
    rows: list[dict]
    summary: dict[str, Any] = field(default_factory=dict)  # DataFrames from :func:`summarise`
    settings: EvalSettings | None = None
    files: dict[str, Path] = field(default_factory=dict)  # task -> per-item JSONL (when cached)

    @property
    def by_paradigm(self):
        return self.summary["paradigm"]

    @property
    def by_phenomenon(self):
        return self.summary["phenomenon"]

    @property
    def by_task(self):
        return self.summary["task"]

    @property
    def overall(self):
        return self.summary["overall"]


def chance_verdict(ci_low: float, ci_high: float, chance: float = 50.0) -> str:
    """``"yes"`` when the whole interval lies above ``chance``, ``"below"`` when it lies below, else ``"no"``."""
    return "yes" if ci_low > chance else ("below" if ci_high < chance else "no")


def interval_table(results: Mapping[tuple[str, str], "EvalResult"], chance: float = 50.0) -> "pd.DataFrame":
    """One row per (kind, model, task) of ``results`` (``{(kind, name): EvalResult}``): pairs, accuracy and its
    paradigm-stratified bootstrap interval (``ci_low``/``ci_high``, percent), and ``above chance`` ("yes" when the
    interval lies above ``chance``, "below" when under it, "no" when it contains it)."""
    rows = []
    for (kind, name), res in results.items():
        for r in res.by_task.itertuples():
            verdict = chance_verdict(r.ci_low, r.ci_high, chance)
            rows.append({"kind": kind, "model": name, "task": task_display(r.task), "pairs": r.pairs,
                         "accuracy": r.accuracy, "ci_low": r.ci_low, "ci_high": r.ci_high, "above chance": verdict})
    return pd.DataFrame(rows)


def average_note(row: Mapping[str, Any], benchmarks: Sequence[str] = ("BLiMP", "Supp.", "EWoK", "GLUE")) -> str:
    """What the average over ``benchmarks`` of a row of ours (``source`` not "paper") needs beside it. The average is
    taken only over all of them (one rule for our rows and the paper's, whose average is blank when a benchmark is
    missing), so a row missing some says "no average: GLUE missing"; a row with GLUE from a scaled protocol (its
    ``GLUE protocol`` column) says "GLUE includes <protocol>". Paper rows keep the paper's own average: empty note."""
    if row.get("source") == "paper":
        return ""
    missing = [b for b in benchmarks if row.get(b) is None or (isinstance(row.get(b), float) and math.isnan(row[b]))]
    parts = []
    if missing and len(missing) < len(benchmarks):
        parts.append(f"no average: {', '.join(missing)} missing")
    protocol = row.get("GLUE protocol") or ""
    if "GLUE" not in missing and protocol not in ("", "standard", "not fine-tuned"):
        parts.append("GLUE includes " + protocol)
    return "; ".join(parts)


def tokenizer_digest(tokenizer) -> str:
    """SHA-256 (16 hex) of a tokenizer: its backend's JSON (or its vocabulary) and its special tokens (the weights
    are :func:`helpers.core.digests.model_digest`)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    blob = backend.to_str() if backend is not None else json.dumps(tokenizer.get_vocab(), sort_keys=True)
    specials = json.dumps({k: str(v) for k, v in sorted(tokenizer.special_tokens_map.items())})
    return text_digest(blob + specials, 16)


def make_scorer(model, tokenizer, settings: EvalSettings, progress: bool | Any = False) -> Scorer:
    if settings.kind == "causal":
        return lambda reqs: causal_scores(model, tokenizer, reqs, batch_size=settings.batch_size,
                                          delimiter=settings.delimiter, progress=progress)
    if settings.kind == "mlm":
        return lambda reqs: mlm_scores(model, tokenizer, reqs, max_tokens=settings.max_tokens,
                                       delimiter=settings.delimiter, progress=progress)
    raise ValueError(f"kind must be 'causal' or 'mlm', not {settings.kind!r}")


def evaluate_model(
    model,
    tokenizer,
    kind: Literal["causal", "mlm"] = "causal",
    tasks: Sequence[str] = TASKS,
    *,
    reduction: Literal["sum", "mean"] | None = None,
    out_dir: str | Path | None = None,
    name: str | None = None,
    batch_size: int = 64,
    max_tokens: int = 2048,
    limit_per_task: Limit = None,
    seed: int = 0,
    blimp_version: Literal["filtered", "full"] = "filtered",
    ewok_context: bool = True,
    delimiter: str = " ",
    progress: bool = True,
    log: Callable[[str], None] = print,
    device: str | None = "auto",
) -> EvalResult:
    """Score ``model`` on the minimal-pair ``tasks`` and summarise (protocol: ``docs/methods.md#minimal-pairs``).

    ``device``: the model is moved there first (``"auto"``: the GPU when there is one, see
    :func:`helpers.core.hardware.compute_device`; ``None``: left where it is).

    ``reduction`` (masked LMs): ``"sum"`` or ``"mean"`` PLL; decoders always use the summed log-probability, so
    anything but ``None``/``"sum"`` is refused for ``kind="causal"``. With ``out_dir`` the per-item rows of each
    task are cached in ``out_dir/<task>.jsonl`` (skipped when the weights, tokenizer, settings and data files are
    unchanged). ``limit_per_task`` takes a seeded sample of at most that many pairs per paradigm / file: one number
    for every task or a mapping task -> number (:func:`~helpers.evaluation.minimal_pairs.task_limit`); a task's cache
    is keyed by its own number, so changing another task's limit re-scores only that task."""
    if kind not in ("causal", "mlm"):
        raise ValueError(f"kind must be 'causal' or 'mlm', not {kind!r}")
    if kind == "causal" and reduction not in (None, "sum"):
        raise ValueError("decoders are scored with the summed log-probability; reduction applies to masked LMs")
    bad = [t for t in tasks if t not in TASK_REGISTRY]
    if bad:
        raise ValueError(f"unknown task(s) {bad}; choose from {tuple(TASK_REGISTRY)}")
    if device is not None:
        model.to(compute_device(device))
    settings = EvalSettings(kind=kind, reduction=reduction or "sum", delimiter=delimiter, ewok_context=ewok_context,
                            seed=seed, limit_per_task=limit_per_task, blimp_version=blimp_version,
                            batch_size=batch_size, max_tokens=max_tokens)
    items = {t: load_task(t, limit_per_task, seed, blimp_version) for t in tasks}  # checks the limits first
    total = sum(2 * len(v) for v in items.values())
    bar = _bar(total, f"{name or 'model'}: {'+'.join(tasks)}", progress) if progress else None
    scorer = make_scorer(model, tokenizer, settings, progress=bar if bar is not None else False)
    digests = None
    rows: list[dict] = []
    files: dict[str, Path] = {}
    try:
        for task in tasks:
            def run(task=task) -> list[dict]:
                return score_items(items[task], scorer, reduction=settings.reduction, seed=seed,
                                   ewok_context=ewok_context)

            if out_dir is None:
                rows += run()
                continue
            if digests is None:
                digests = (model_digest(model), tokenizer_digest(tokenizer))
            out = Path(out_dir) / f"{task}.jsonl"
            data = {p.name: sha256_file(p) for p in task_files(task, blimp_version)}
            key = replace(settings, limit_per_task=task_limit(limit_per_task, task)).cache_key()
            fp = fingerprint(task, digests, key, data)
            ran = run_step(f"{name or 'model'} {task}", out, fp, lambda out=out, run=run: write_jsonl(out, run()),
                           log=log)
            if not ran and bar is not None:
                bar.update(2 * len(items[task]))
            rows += read_jsonl(out)
            files[task] = out
    finally:
        if bar is not None:
            bar.close()
    return EvalResult(rows=rows, summary=summarise(rows), settings=settings, files=files)


def evaluate_saved(folder: str | Path, kind: Literal["causal", "mlm"], tasks: Sequence[str] = TASKS,
                   **kwargs: Any) -> EvalResult:
    """:func:`evaluate_model` of a saved model folder with its tokenizer: for ``kind="causal"`` any model of
    :mod:`helpers.models.registry` (a GPT-Neo decoder, the compressor; recognised by its ``config.json``), an LTG-BERT
    encoder for ``"mlm"``. A module-level function of paths, so that :func:`helpers.core.parallel.run_jobs` can score
    several models side by side."""
    model = load_saved(folder) if kind == "causal" else load_model(folder)
    return evaluate_model(model.eval(), load_tokenizer(folder), kind, tasks, **kwargs)


PLAIN = re.compile(r"^(?P<run>.+?) \(plain\)(?P<seed>(?: \(seed \d+\))?)$")


def model_folder(run_dir: str | Path, kind: str, name: str) -> Path:
    """The saved model a scored name stands for: ``<run_dir>/<kind>s/<name>/best``; a decoder named
    ``"<budget> (plain)"`` (or ``"<budget> (plain) (seed N)"``) is the plain best-validation model kept in
    ``mle-best/`` beside the repetition-fine-tuned ``best/`` of ``<budget>`` (``<budget> (seed N)``), so that both
    can be scored and paired (the arm ``"<budget> (plain)"`` against ``"<budget>"``, seed by seed)."""
    m = PLAIN.match(name) if kind == "decoder" else None
    if m:
        return Path(run_dir) / "decoders" / (m.group("run") + m.group("seed")) / PLAIN_DIR
    return Path(run_dir) / f"{kind}s" / name / "best"


def evaluate_many(run_dir: str | Path, decoders: Sequence[str], encoders: Sequence[str], tasks: Sequence[str] = TASKS,
                  workers: int | str = 1, *, decoder_kwargs: Mapping[str, Any] | None = None,
                  encoder_kwargs: Mapping[str, Any] | None = None) -> dict[tuple[str, str], EvalResult]:
    """Notebook 05's zero-shot scores: :func:`evaluate_saved` of every decoder (:func:`model_folder`: its ``best/``,
    or ``mle-best/`` for ``"<budget> (plain)"``; causal) and encoder (``<run_dir>/encoders/<name>/best``, PLL), items cached under ``<run_dir>/eval/``, scored
    side by side in ``workers`` processes (:func:`helpers.core.parallel.run_jobs`). ``decoder_kwargs`` /
    ``encoder_kwargs`` go to :func:`evaluate_model` (batch size, limit per task, reduction, seed, ...). Keys:
    ``("decoder" | "encoder", name)``, decoders first, each in the order given."""
    run_dir = Path(run_dir)
    jobs = {}
    for kind, names, folder, scorer, extra in (("decoder", decoders, "decoders", "causal", decoder_kwargs),
                                               ("encoder", encoders, "encoders", "mlm", encoder_kwargs)):
        for name in names:
            jobs[f"{kind} {name}"] = dict(folder=model_folder(run_dir, kind, name), kind=scorer, tasks=tasks,
                                          out_dir=run_dir / "eval" / folder / name, name=name, progress=False,
                                          **dict(extra or {}))
    scored = run_jobs(evaluate_saved, jobs, workers, desc="zero-shot scoring runs")
    return {tuple(key.split(" ", 1)): result for key, result in scored.items()}


# ----------------------------------------------------------------------------- published numbers beside ours
PAPER_BENCHMARKS = {"BLiMP": "blimp", "Supp.": "supplement", "EWoK": "ewok", "GLUE": "glue"}


def paper_authors_row(table: "pd.DataFrame", training_data: str, *, plus_512: bool = False) -> "pd.Series | None":
    """The BERTtime Stories authors' own row of Table 2 or 3 (``params/paper_reference``) for a mix: model
    ``LTG-BERT (ours)``, never the organisers' baselines (``LTG-BERT (baseline)``, ``BabyLlama (baseline)``), which
    share the ``baby-10M`` / ``baby-100M`` data with the authors' own run; ``plus_512`` picks the "+512 training" row
    instead. None when the table has no such row."""
    model = "LTG-BERT (ours) +512 training" if plus_512 else "LTG-BERT (ours)"
    rows = table[(table["training_data"] == training_data) & (table["model"] == model)]
    return None if rows.empty else rows.iloc[0]


def paper_ewok_has_context(row: "pd.Series") -> bool:
    """Whether a published EWoK number conditions on the item's context, as ours does (``ewok_context=True``).
    The organisers' baseline numbers (48.9, 51.9, 50.7, 52.1: rows whose model says "baseline") come from the 2024
    pipeline's masked-LM wrapper, which we read as dropping the context (50 % by construction on the swapped-twin
    files; see ``docs/methods.md#minimal-pairs``); the authors' own rows are taken to be context-conditioned
    unless their ``note`` says "without context"."""
    return "baseline" not in str(row.get("model", "")).lower() and "without context" not in str(row.get("note", "")).lower()


def compare_with_paper(ours: "pd.DataFrame", table: "pd.DataFrame", equivalents: dict[str, str],
                       ours_label: str = "ours", intervals: "pd.DataFrame | None" = None) -> "pd.DataFrame":
    """One row per (our mix, benchmark): our score beside the authors' own row for the mix it stands for
    (:func:`paper_authors_row`). ``ours``: one row per mix with ``training data`` and the columns of
    :data:`PAPER_BENCHMARKS` (and, where present, ``GLUE protocol``: a GLUE row's note then says when the
    fine-tuning was scaled down); ``table``: a paper table as stored in ``params/paper_reference``;
    ``intervals``: rows (model, task, ci_low, ci_high) whose 95 % intervals become ``CI low`` / ``CI high``
    (task = benchmark). An EWoK number computed without the context (:func:`paper_ewok_has_context`) is replaced by
    the row's ``ewok_alt`` when it has one, else left out, and the ``note`` says which; a missing paper cell is NaN
    with a note."""
    ci = {} if intervals is None else {(m, t): (lo, hi) for m, t, lo, hi in
                                        zip(intervals["model"], intervals["task"], intervals["ci_low"], intervals["ci_high"])}
    out = []
    for name, paper_mix in equivalents.items():
        mine = ours[ours["training data"] == name]
        if mine.empty:
            continue
        row = paper_authors_row(table, paper_mix)
        for bench, col in PAPER_BENCHMARKS.items():
            paper, note = float("nan"), ""
            if row is None:
                note = f"no authors' row for {paper_mix}"
            else:
                paper = row.get(col, float("nan"))
                if bench == "EWoK" and not paper_ewok_has_context(row):
                    alt = row.get("ewok_alt", float("nan"))
                    paper, note = (alt, "paper's context-conditioned value (ewok_alt)") if pd.notna(alt) else \
                        (float("nan"), "paper EWoK computed without context: not compared")
                if pd.isna(paper) and not note:
                    note = "not printed in the paper"
            protocol = str(mine["GLUE protocol"].iloc[0]) if "GLUE protocol" in mine.columns else ""
            if bench == "GLUE" and protocol.startswith("scaled"):
                note = "; ".join(n for n in (note, f"ours: {protocol}") if n)
            lo, hi = ci.get((name, bench), (float("nan"), float("nan")))
            out.append({"mix": name, "paper mix": paper_mix, "paper row": None if row is None else row["model"],
                        "benchmark": bench, ours_label: float(mine[bench].iloc[0]) if pd.notna(mine[bench].iloc[0]) else float("nan"),
                        "CI low": lo, "CI high": hi,
                        "paper": float(paper) if pd.notna(paper) else float("nan"), "note": note})
    return pd.DataFrame(out)
