"""The BERTtime Stories tables rebuilt from our results: Table 1 (GPT-Neo decoders) and Table 2/3 (LTG-BERT
encoders), our rows with a 95 % interval beside every zero-shot accuracy and the average, then the paper's rows;
Tables 4-6 (BLiMP by phenomenon, EWoK by domain, the supplement by task), one column per model with its interval;
Table 7 (GLUE by task), every score with its interval.

Our rows come from :class:`helpers.evaluation.zero_shot.EvalResult` summaries (intervals: a seeded bootstrap over items,
stratified by paradigm) and, for the encoders, the GLUE average of :mod:`helpers.evaluation.finetune`; the paper's rows from
``params/paper_reference/*.csv`` (columns ``training_data``, ``blimp``, ``supplement``, ``ewok``, ``glue``,
``average``, …). An interval is written ``[low, high]`` in a text column after its accuracy; the paper's rows have
none (the paper prints no intervals). Notebook 05's figures of these numbers (:func:`plot_zero_shot_intervals`,
:func:`plot_encoders_vs_paper`) finish :mod:`helpers.report.reporting`'s plots for the page: legends off the rows,
every marker inside its panel."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from helpers.core.config import repo_root
from helpers.core.stats import independent_mean_interval, t_interval
from helpers.data.budgets import fmt_words
from helpers.evaluation.comparisons import arm_and_seed
from helpers.evaluation.finetune import protocol_note, scaled_protocol_tasks
from helpers.generation.completions import PLAIN_DIR
from helpers.models import decoder, ltg_bert, registry
from helpers.report.reporting import fmt_interval
from helpers.evaluation.zero_shot import (PAPER_BENCHMARKS, PLAIN, average_note, paradigm_mean_interval,
                                         paper_ewok_has_context)
from helpers.evaluation.minimal_pairs import task_display

# the paper's zero-shot columns (not the task registry: a task added there has no column in the paper's tables)
ZERO_SHOT = (("blimp", "BLiMP"), ("supplement", "Supp."), ("ewok", "EWoK"))
PAPER_COLUMNS = {"training_data": "training data", "total_words": "total words", "blimp": "BLiMP",
                 "supplement": "Supp.", "ewok": "EWoK", "glue": "GLUE", "average": "Avg.", "note": "paper note"}
ZERO_SHOT_AVERAGE = "Avg. zero-shot"  # BLiMP, Supp., EWoK: a column every row with the three has


#: what chance is in the zero-shot tables, and how their intervals are made (the caption of Tables 1, 2 and 4-6)
ZERO_SHOT_CHANCE = ("Chance: 50 % on every BLiMP, supplement and EWoK pair (two sentences, one of them right). "
                    "95 % intervals: bootstrap over the pairs, stratified by paradigm.")
#: GLUE's chance level and the interval of an average of independent tasks or benchmarks (Tables 2 and 7)
GLUE_CHANCE = ("GLUE chance: the majority-class row of Table 7 (always the most frequent training label, on the same "
               "test examples). Intervals of averages (GLUE avg., Avg.) combine the independent tasks' or benchmarks' "
               "own 95 % intervals by the normal approximation.")


def glue_interval_rows(glue_ci: Mapping[str, tuple[float, float]]) -> pd.DataFrame:
    """:func:`glue_average_intervals` as rows of an interval table (``model``, ``task`` = ``"GLUE"``, ``ci_low``,
    ``ci_high``), to draw beside the zero-shot intervals in :func:`helpers.report.reporting.plot_ours_vs_paper`."""
    return pd.DataFrame([{"model": m, "task": "GLUE", "ci_low": lo, "ci_high": hi} for m, (lo, hi) in glue_ci.items()],
                        columns=["model", "task", "ci_low", "ci_high"])


def glue_average_intervals(runs: pd.DataFrame, tasks: Sequence[str]) -> dict[str, tuple[float, float]]:
    """Per model of ``runs`` (:func:`helpers.evaluation.finetune.finetune_many`'s rows), the 95 % interval of its GLUE
    average over ``tasks``, in %: the tasks' test sets are independent, so their bootstrap intervals combine
    (:func:`helpers.core.stats.independent_mean_interval`); the runs keep no per-example predictions to resample."""
    out = {}
    for model, g in runs[runs["task"].isin(list(tasks))].groupby("model", sort=False):
        g = g.set_index("task").reindex(list(tasks))
        lo, hi = independent_mean_interval(g["score"] * 100, g["ci_low"] * 100, g["ci_high"] * 100)
        out[model] = (lo, hi)
    return out


def zero_shot_cells(result) -> dict[str, Any]:
    """``{"BLiMP": acc, "BLiMP 95% CI": "[lo, hi]", "Supp.": …, "EWoK": …}`` of one model's zero-shot result; a
    task the run did not score is NaN with an empty interval."""
    overall = result.overall.iloc[0]
    by_task = result.by_task.set_index("task")
    out: dict[str, Any] = {}
    for task, label in ZERO_SHOT:
        if task in by_task.index:
            t = by_task.loc[task]
            out[label], out[f"{label} 95% CI"] = float(overall[label]), fmt_interval(t.ci_low, t.ci_high)
        else:
            out[label], out[f"{label} 95% CI"] = float("nan"), ""
    return out


def _with_paper(ours: pd.DataFrame, paper: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    theirs = paper.rename(columns=PAPER_COLUMNS).assign(source="paper")
    table = pd.concat([ours, theirs[[c for c in columns if c in theirs.columns]]], ignore_index=True)
    text = [c for c in table.columns if c.endswith("95% CI") or c in ("stands for", "GLUE protocol", "paper note")]
    return table.fillna({c: "" for c in text})


def decoder_models(run_dir: str | Path, decoders: Sequence[str]) -> dict[str, str]:
    """What each scored decoder is, for Table 1's ``model`` column: ``"GPT-Neo, repetition-fine-tuned"`` when its
    ``best/`` was replaced by repetition fine-tuning (the plain model kept beside it in ``mle-best/``, notebook 02),
    else ``"GPT-Neo"``; a ``"<budget> (plain)"`` name (:func:`helpers.evaluation.zero_shot.model_folder`) is that
    plain model: the table says which decoders it scores."""
    root = Path(run_dir) / "decoders"
    return {n: "GPT-Neo, plain (before repetition fine-tuning)" if PLAIN.match(n) else
            "GPT-Neo, repetition-fine-tuned" if (root / n / PLAIN_DIR).is_dir() else "GPT-Neo" for n in decoders}


def decoder_table(zero: Mapping[tuple[str, str], Any], decoders: Sequence[str], source: str,
                  stands_for: Mapping[str, str], paper: pd.DataFrame, models: Mapping[str, str] | None = None
                  ) -> pd.DataFrame:
    """Table 1: one row per decoder (``zero[("decoder", name)]``), ``stands for`` the paper's budget it scales
    (e.g. ``1.25M``), BLiMP / Supp. / EWoK with intervals and their average with its interval; then the paper's
    rows, with the reference file's ``note`` as ``paper note`` (e.g. where the printed Avg. is not the mean of the
    three printed columns: Table 1's 10M and 25M rows). ``models``: :func:`decoder_models`, what each of ours is."""
    rows = []
    for name in decoders:
        res = zero[("decoder", name)]
        o = res.overall.iloc[0]
        rows.append({"source": source, "model": (models or {}).get(name, "GPT-Neo"), "training data": name, "stands for": stands_for.get(name, ""),
                     **zero_shot_cells(res), "Avg.": float(o["average"]),
                     "Avg. 95% CI": fmt_interval(o["average_ci_low"], o["average_ci_high"]), "paper note": ""})
    return _with_paper(pd.DataFrame(rows), paper,
                       ["source", "model", "training data", "BLiMP", "Supp.", "EWoK", "Avg.", "paper note"])


def words_text(n: float | int | str | None) -> str:
    """A word count as the paper writes its budgets, to three significant digits (``999599 -> "1M"``,
    ``1087436 -> "1.09M"``, :func:`helpers.data.budgets.fmt_words`); text (a budget already written, ``"10M"``) is
    kept and a missing count is ``""``."""
    if n is None or isinstance(n, str):
        return n or ""
    return "" if n != n else fmt_words(n, digits=3)


def generated_pairs(encoders: Sequence[str]) -> list[tuple[str, str]]:
    """``(mix, mix + generated stories)`` for each encoder whose mix adds a generated corpus (``"…+gen-…"``) to the
    mix of another encoder of the list: the paper's question whether generated stories help. Variants in
    parentheses (another seed, balanced sampling) are left out."""
    plain = [e for e in encoders if "(" not in e]
    return [(e.split("+gen-")[0], e) for e in plain if "+gen-" in e and e.split("+gen-")[0] in plain]


#: how ``05_ours_vs_paper`` reads an arm of several seeds
ARM_CAPTION = ("Ours: one row per mix. Where the mix was trained with several seeds, its score is the mean over the "
               "seeds and the interval a Student-t 95 % interval over them (column `interval over`), the spread a "
               "reader of the paper's single runs should expect; a mix with one seed keeps its bootstrap interval over "
               "items.")


def arms_for_paper(ours: pd.DataFrame, intervals: pd.DataFrame,
                   bounds: tuple[float, float] = (0.0, 100.0)) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Our encoder rows of Table 2 (``ours``: one row per model, ``training data`` its name) folded to one row per
    arm (the seeds of one mix, :func:`helpers.evaluation.comparisons.arm_and_seed`), the unit the paper prints one
    number for. Per benchmark of :data:`helpers.evaluation.zero_shot.PAPER_BENCHMARKS`: with two or more seeds
    scored, the mean over them and a Student-t 95 % interval over seeds (clipped to ``bounds``); with one, that
    model's score and its own interval from ``intervals`` (rows model, task, ci_low, ci_high: the bootstrap over
    items). Returns the rows (``training data`` = the arm, ``seeds``; other columns from the arm's first model) and
    their intervals (model = arm, task, ci_low, ci_high, ``seeds``, ``interval over``), the inputs of
    :func:`helpers.evaluation.zero_shot.compare_with_paper`."""
    item_ci = {(m, t): (lo, hi) for m, t, lo, hi in
               zip(intervals["model"], intervals["task"], intervals["ci_low"], intervals["ci_high"])}
    arm_of = [arm_and_seed(name, 0)[0] for name in ours["training data"]]
    rows, cis = [], []
    for arm, g in ours.assign(_arm=arm_of).groupby("_arm", sort=False):
        row = g.iloc[0].drop("_arm").to_dict()
        row.update({"training data": arm, "seeds": len(g)})
        for bench in PAPER_BENCHMARKS:  # our column names
            if bench not in g.columns:
                continue
            scored = g.dropna(subset=[bench])
            if len(scored) >= 2:
                mean, lo, hi, n, _ = t_interval(scored[bench].to_numpy(dtype=float))
                lo, hi, how = max(lo, bounds[0]), min(hi, bounds[1]), f"{n} seeds (t)"
            elif len(scored) == 1:
                mean = float(scored[bench].iloc[0])
                lo, hi = item_ci.get((scored["training data"].iloc[0], bench), (float("nan"), float("nan")))
                n, how = 1, "items (one seed)"
            else:
                continue
            row[bench] = mean
            cis.append({"model": arm, "task": bench, "ci_low": lo, "ci_high": hi, "seeds": n, "interval over": how})
        rows.append(row)
    return pd.DataFrame(rows), pd.DataFrame(cis, columns=["model", "task", "ci_low", "ci_high", "seeds", "interval over"])


def with_interval_kind(comparison: pd.DataFrame, arm_intervals: pd.DataFrame) -> pd.DataFrame:
    """:func:`helpers.evaluation.zero_shot.compare_with_paper`'s table with each row's ``seeds`` and ``interval
    over`` from :func:`arms_for_paper`'s intervals, after the CI columns (both blank on a row that none of the arm's
    models scored, e.g. GLUE when the profile fine-tunes nothing)."""
    how = arm_intervals.set_index(["model", "task"])
    keys = list(zip(comparison["mix"], comparison["benchmark"]))
    out = comparison.copy()
    at = list(out.columns).index("CI high") + 1
    out.insert(at, "interval over", [how["interval over"].get(k, "") for k in keys])
    seeds = [how["seeds"].get(k) for k in keys]  # blank where no model of the arm scored the benchmark
    out.insert(at, "seeds", pd.array([None if n is None or pd.isna(n) else int(n) for n in seeds], dtype="Int64"))
    return out


def encoder_stands_for(encoders: Sequence[str], paper_equivalents: Mapping[str, str],
                       seed_replicates: Mapping[str, str] | None = None) -> dict[str, str]:
    """The paper mix each encoder stands for: its own ``paper_equivalents`` entry; else that of the mix it repeats
    (``seed_replicates``: replicate → base mix, another seed of the same data) or of its name without a trailing
    variant in parentheses (``"… (balanced)"``: the same mix, another sampling); ``""`` where none applies."""
    seed_replicates = seed_replicates or {}
    out = {}
    for name in encoders:
        base = seed_replicates.get(name) or re.sub(r"\s*\([^()]*\)$", "", name)
        out[name] = paper_equivalents.get(name) or paper_equivalents.get(base, "")
    return out


def encoder_table(zero: Mapping[tuple[str, str], Any], encoders: Sequence[str], source: str,
                  total_words: Mapping[str, int], stands_for: Mapping[str, str], glue_avg: Mapping[str, float],
                  glue_protocol: Mapping[str, str], paper: pd.DataFrame,
                  glue_ci: Mapping[str, tuple[float, float]] | None = None) -> pd.DataFrame:
    """Table 2 (or 3): one row per encoder (``zero[("encoder", name)]``) with its zero-shot accuracies and
    intervals, its GLUE average (NaN when not fine-tuned) and the GLUE protocol (``"standard"``, a scaled-protocol
    note, or ``"not fine-tuned"``), ``Avg.`` over all four benchmarks (NaN when one is missing, as in the paper's
    rows: one rule for every row) and an ``Avg. note`` that says which is missing or scaled; then the paper's rows.
    Every row (ours and the paper's) also has ``Avg. zero-shot``, the mean of BLiMP, Supp. and EWoK (NaN where one
    of them is not printed), and ``EWoK context`` says where a published EWoK number was computed without the
    item's context (the organisers' pipeline). ``total words`` is written like the paper's (``"1.00M"``, three
    significant digits, beside its ``"10M"``), one format for the column. Our rows carry 95 % intervals: ``GLUE`` from
    ``glue_ci`` (:func:`glue_average_intervals`), ``Avg.`` from the four benchmarks' intervals and ``Avg. zero-shot``
    from the zero-shot bootstrap (``…95% CI`` columns; empty where the value is missing)."""
    glue_ci = glue_ci or {}
    nan = float("nan")
    rows = []
    for name in encoders:
        res = zero[("encoder", name)]
        cells, by_task, o = zero_shot_cells(res), res.by_task.set_index("task"), res.overall.iloc[0]
        glue, (g_lo, g_hi) = glue_avg.get(name, nan), glue_ci.get(name, (nan, nan))
        bounds = [(by_task.loc[t, "ci_low"], by_task.loc[t, "ci_high"]) if t in by_task.index else (nan, nan)
                  for t, _ in ZERO_SHOT]
        avg_lo, avg_hi = independent_mean_interval([cells[label] for _, label in ZERO_SHOT] + [glue],
                                                   [b[0] for b in bounds] + [g_lo], [b[1] for b in bounds] + [g_hi])
        rows.append({"source": source, "model": "LTG-BERT", "training data": name,
                     "total words": words_text(total_words.get(name)), "stands for": stands_for.get(name, ""),
                     **cells, "GLUE": glue, "GLUE 95% CI": fmt_interval(g_lo, g_hi) if glue == glue else "",
                     "GLUE protocol": glue_protocol.get(name, "not fine-tuned") or "standard",
                     "Avg. 95% CI": fmt_interval(avg_lo, avg_hi) if glue == glue else "",
                     f"{ZERO_SHOT_AVERAGE} 95% CI": fmt_interval(o["average_ci_low"], o["average_ci_high"])})
    ours = pd.DataFrame(rows)
    ours["Avg."] = ours[["BLiMP", "Supp.", "EWoK", "GLUE"]].mean(axis=1, skipna=False)  # all four, or none
    table = _with_paper(ours, paper, ["source", "model", "training data", "total words", "BLiMP", "Supp.", "EWoK",
                                      "GLUE", "Avg."])
    table[ZERO_SHOT_AVERAGE] = table[[label for _, label in ZERO_SHOT]].mean(axis=1, skipna=False)
    table["total words"] = [words_text(v) for v in table["total words"]]
    records = table.to_dict("records")
    table["Avg. note"] = [average_note(r) for r in records]
    table["EWoK context"] = ["no (organisers' pipeline)" if r["source"] == "paper" and not paper_ewok_has_context(r)
                             else "yes" for r in records]
    cols = [c for c in table.columns if c not in ("Avg. 95% CI", f"{ZERO_SHOT_AVERAGE} 95% CI")]
    for after in ("Avg.", ZERO_SHOT_AVERAGE):  # each interval beside its value
        cols.insert(cols.index(after) + 1, f"{after} 95% CI")
    return table[cols]


# task -> (the level of our results its paper table breaks it down by, the paper's reference table, our table's
# name, what the level is called for that task: EWoK's "paradigms" are its domains, the supplement's its tasks)
BREAKDOWNS = {"blimp": ("phenomenon", "table4_blimp_phenomena_100m", "05_table4_blimp_phenomena", "phenomenon"),
              "ewok": ("paradigm", "table5_ewok_domains_100m", "05_table5_ewok_domains", "domain"),
              "supplement": ("paradigm", "table6_supplement_100m", "05_table6_supplement", "task")}


def breakdown_table(zero: Mapping[tuple[str, str], Any], models: Sequence[str], task: str, level: str,
                    kind: str = "encoder", confidence: float = 0.95, seed: int = 0,
                    label: str | None = None) -> pd.DataFrame:
    """Tables 4-6: one row per ``level`` (``"phenomenon"``: BLiMP's 12 phenomena; ``"paradigm"``: EWoK's domains,
    the supplement's tasks) of ``task``, and per model its accuracy (%, the mean over the level's paradigms, as
    the summaries) and ``"<model> 95% CI"`` (:func:`helpers.evaluation.zero_shot.paradigm_mean_interval`, seeded bootstrap
    over items stratified by paradigm), then ``pairs`` scored per model (the same for every model of one run).
    The first column is named ``label`` (default ``level``; e.g. ``"domain"`` for EWoK, whose paradigms are
    domains)."""
    if level not in ("phenomenon", "paradigm"):
        raise ValueError(f"level must be 'phenomenon' or 'paradigm', not {level!r}")
    columns: dict[str, pd.Series] = {}
    pairs = None
    for name in models:
        par = zero[(kind, name)].by_paradigm.query("task == @task")
        if par.empty:
            raise ValueError(f"{name} has no {task} results")
        acc, ci, n = {}, {}, {}
        for key, g in par.groupby(level, sort=False):
            acc[key] = float(g["accuracy"].mean())
            ci[key] = fmt_interval(*paradigm_mean_interval(g["pairs"], g["correct"], confidence, seed=seed))
            n[key] = int(g["pairs"].sum())
        columns[name], columns[f"{name} 95% CI"] = pd.Series(acc), pd.Series(ci)
        pairs = pd.Series(n) if pairs is None else pairs
    table = pd.DataFrame(columns).sort_index()
    table["pairs"] = pairs.reindex(table.index)
    return table.rename_axis(label or level).reset_index()


def paper_breakdown(reference: pd.DataFrame) -> pd.DataFrame:
    """One of the paper's Tables 4-6 (``params/paper_reference/table{4,5,6}_*.csv``) as printed beside ours: its
    level column first, every model column prefixed ``paper: ``."""
    level = reference.columns[2]
    paper = reference.drop(columns=["table", "track"]).set_index(level)
    paper.columns = [f"paper: {c}" for c in paper.columns]
    return paper.reset_index()


GLUE_RUN_COLUMNS = ("model", "task", "metric", "score (%)", "CI low (%)", "CI high (%)", "top prediction (%)",
                    "dev_metric", "best_epoch", "n_train", "n_dev", "n_test", "protocol")
MAJORITY_ROW = "majority class (most frequent training label)"
SINGLE_CLASS = "single-class predictions"


def glue_runs_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per fine-tuning run (:func:`helpers.evaluation.finetune.finetune_many`'s rows) with its score and the bounds of
    its 95 % interval (bootstrap over test examples) in %, the share of the test examples given the model's most
    frequent prediction (``top prediction (%)``: 100 = one class for every example; NaN for runs cached before the
    counts were kept), and what the run used: the dev metric, the best epoch, the split sizes and the protocol
    (:data:`GLUE_RUN_COLUMNS`)."""
    top = runs["top_prediction_share"] if "top_prediction_share" in runs else pd.Series(float("nan"), index=runs.index)
    out = runs.assign(**{"score (%)": 100 * runs["score"], "CI low (%)": 100 * runs["ci_low"],
                         "CI high (%)": 100 * runs["ci_high"], "top prediction (%)": 100 * top.astype(float)})
    return out[list(GLUE_RUN_COLUMNS)]


def single_class_note(runs: pd.DataFrame, tasks: Sequence[str]) -> str:
    """The tasks of ``tasks`` on which one model's runs (rows of one model) predicted one class for every test
    example (``single_class``), ``"none"``, or ``"not recorded"`` when the runs predate the predicted counts."""
    if "single_class" not in runs or runs["single_class"].isna().any():
        return "not recorded"
    flagged = [t for t in tasks if bool(runs.loc[runs["task"] == t, "single_class"].any())]
    return ", ".join(flagged) if flagged else "none"


def glue_table(runs: pd.DataFrame, tasks: Sequence[str], paper: pd.DataFrame,
               majority: pd.DataFrame | None = None) -> pd.DataFrame:
    """Table 7: one row per fine-tuned model of ``runs`` (:func:`helpers.evaluation.finetune.finetune_many`'s rows: ``model``,
    ``task``, ``score``, ``ci_low``, ``ci_high`` as fractions, ``protocol``), per task its score in % and
    ``"<task> 95% CI"`` (the bootstrap over test examples of the run), ``GLUE avg.`` (the unweighted mean over
    ``tasks``) with its interval (:func:`glue_average_intervals`) and ``GLUE protocol``
    (``"standard"`` or which tasks ran the scaled protocol) and ``single-class predictions`` (the tasks on which the
    fine-tuned model gave every test example the same class: :func:`single_class_note`). Our rows keep the order of
    ``runs``. With ``majority`` (:func:`helpers.evaluation.finetune.majority_baseline`), a :data:`MAJORITY_ROW` follows
    them: the score of always predicting the most frequent training label on the same test examples. Then the
    paper's rows (``paper: <data> (100M track)``), which have no intervals. Indexed by ``model``."""
    missing = sorted(set(tasks) - set(runs["task"]))
    if missing and not runs.empty:  # no runs at all (no encoder fine-tuned): the majority and paper rows only
        raise ValueError(f"no fine-tuning runs for {', '.join(missing)}")
    order = list(dict.fromkeys(runs["model"]))  # the caller's model order, not the alphabet
    score, low, high = (runs.pivot(index="model", columns="task", values=v).reindex(index=order, columns=list(tasks))
                        .astype(float) * 100 for v in ("score", "ci_low", "ci_high"))
    ours = pd.DataFrame(index=score.index)
    for t in tasks:
        ours[t] = score[t]
        ours[f"{t} 95% CI"] = [fmt_interval(lo, hi) for lo, hi in zip(low[t], high[t])]
    ours["GLUE avg."] = score.mean(axis=1)
    avg_ci = glue_average_intervals(runs, tasks)
    ours["GLUE avg. 95% CI"] = [fmt_interval(*avg_ci[m]) for m in ours.index]
    ours["GLUE protocol"] = [protocol_note(runs[runs["model"] == m], tasks) or "standard" for m in ours.index]
    ours[SINGLE_CLASS] = [single_class_note(runs[runs["model"] == m], tasks) for m in ours.index]
    text = [f"{t} 95% CI" for t in tasks] + ["GLUE avg. 95% CI", "GLUE protocol", SINGLE_CLASS]
    ours = ours.astype({c: object for c in text})  # text columns stay text when no model was fine-tuned
    if majority is not None:
        base = majority.set_index("task")["score"].reindex(list(tasks)) * 100
        ours.loc[MAJORITY_ROW, list(tasks)] = base.to_numpy()
        ours.loc[MAJORITY_ROW, "GLUE avg."] = float(base.mean())
        ours.loc[MAJORITY_ROW, "GLUE protocol"] = "constant prediction, scored on the same test examples"
    theirs = paper.set_index("training_data")[list(tasks)]
    theirs = theirs.assign(**{"GLUE avg.": theirs.mean(axis=1), "GLUE protocol": "paper (BabyLM training files)"})
    theirs.index = [f"paper: {i} (100M track)" for i in theirs.index]
    table = pd.concat([ours, theirs])
    table = table.fillna({**{f"{t} 95% CI": "" for t in tasks}, "GLUE avg. 95% CI": "", SINGLE_CLASS: ""})
    return table.rename_axis("model")


def ours_ran(comparison, benchmark: str) -> bool:
    """Whether a :func:`helpers.evaluation.zero_shot.compare_with_paper` table holds any score of ours (its first
    ``ours …`` column) on ``benchmark``: False for GLUE in a profile that fine-tunes nothing."""
    ours = next(c for c in comparison.columns if str(c).startswith("ours"))
    return bool(comparison.loc[comparison["benchmark"] == benchmark, ours].notna().any())


def glue_panel_title(cfg, ran: bool = True) -> str:
    """``GLUE (our fine-tuning scaled: 256 training examples, 2 epochs)``: how the runs of ``cfg`` (a
    :class:`helpers.evaluation.finetune_setup.FinetuneConfig`) differ from the paper's (all examples, 10 epochs);
    ``GLUE`` when they do not; with ``ran`` False (the profile fine-tunes nothing) the panel holds the paper's rows
    only, and says so instead of describing a protocol that did not run."""
    if not ran:
        return "GLUE (the paper's rows only:\nnot fine-tuned in this profile)"
    parts = []
    if cfg.max_train_examples is not None:
        parts.append(f"{cfg.max_train_examples} training examples")
    if cfg.epochs != 10:
        parts.append(f"{cfg.epochs} epoch{'s' if cfg.epochs != 1 else ''}")
    return "GLUE" + (f" (our fine-tuning scaled:\n{', '.join(parts)})" if parts else "")


def scale_vs_paper(ours: Mapping[str, Any]) -> pd.DataFrame:
    """How much smaller our models are than the paper's: per kind (``"decoder"``, ``"encoder"``) of ``ours`` (kind
    → one of our loaded models), our parameter count, the paper model's (GPT-Neo 768 × 4 layers with a 16,384
    vocabulary, :data:`helpers.models.decoder.PRESETS` ``berttime-paper``, counted by
    :func:`helpers.models.registry.parameter_count`;
    LTG-BERT base with a 16,384 vocabulary, :func:`helpers.models.ltg_bert.expected_parameters`) and the ratio."""
    rows = []
    for kind, model in ours.items():
        if kind == "decoder":
            mine = decoder.count_parameters(model)
            theirs = registry.parameter_count("gpt-neo", decoder.PRESETS["berttime-paper"])
            label = "GPT-Neo 768 × 4 layers (BERTtime Stories §5.2)"
        elif kind == "encoder":
            mine = ltg_bert.count_parameters(model)
            theirs = ltg_bert.expected_parameters(ltg_bert.ltg_bert_config("base", vocab_size=16_384))
            label = "LTG-BERT base (BERTtime Stories Table 9)"
        else:
            raise ValueError(f"kind must be 'decoder' or 'encoder', not {kind!r}")
        rows.append({"kind": kind, "ours (parameters)": mine, "paper model": label, "paper (parameters)": theirs,
                     "times smaller": theirs / mine})
    return pd.DataFrame(rows)


REFERENCE_TABLES = ("table1_gpt_neo_decoders", "table2_strict_small_10m", "table3_strict_100m",
                    "table4_blimp_phenomena_100m", "table5_ewok_domains_100m", "table6_supplement_100m",
                    "table7_glue_100m", "babylm2024_baselines")


def reference_tables(folder: str | Path | None = None) -> dict[str, pd.DataFrame]:
    """The published tables notebook 05 prints beside ours (``params/paper_reference/<name>.csv``), by name."""
    folder = Path(folder) if folder else repo_root() / "params" / "paper_reference"
    return {name: pd.read_csv(folder / f"{name}.csv") for name in REFERENCE_TABLES}


def limit_text(limit: Any) -> str:
    """A ``limit_per_task`` in words: ``"30"``, ``"all"`` (None), or per task (``"BLiMP 30, Supp. 200, EWoK 100"``)."""
    if isinstance(limit, Mapping):
        return ", ".join(f"{task_display(t)} {limit_text(n)}" for t, n in limit.items())
    return "all" if limit is None else str(limit)


def setup_lines(p: Mapping[str, Any], n_threads: int, ft_cfg, scale: pd.DataFrame, paper_track: str) -> list[str]:
    """Notebook 05's opening printout from its parameters ``p``: models, threads, pairs per paradigm and the PLL
    reduction; the fine-tuning protocol and its scaled-protocol tasks; how much smaller our models are than the
    paper's (:func:`scale_vs_paper` ``scale``); which published table the encoders are compared with."""
    decoders, encoders, tasks = p["decoders"], p["encoders"], p["glue_tasks"]
    scaled = scaled_protocol_tasks(tasks, ft_cfg)
    out = [f"profile {p['profile']}: {len(decoders)} decoders, {len(encoders)} encoders, {n_threads} threads; "
           f"zero-shot pairs per paradigm/task/domain: decoders {limit_text(p['limit_per_task'])}, encoders "
           f"{limit_text(p['encoder_limit_per_task'])}; PLL reduction for encoders: {p['pll_reduction']}",
           "fine-tuning: " + ("none (glue_encoders is empty)" if not p["glue_encoders"] else
                              ft_cfg.scale_note() or "the paper's protocol"),
           f"fine-tuning tasks without a training file (scaled protocol): {len(scaled)} of {len(tasks)}"
           + (f" ({', '.join(scaled)})" if scaled else "")]
    for r in scale.to_dict("records"):
        out.append(f"scale: our {r['kind']}s have {r['ours (parameters)']:,} parameters "
                   f"({decoders[0] if r['kind'] == 'decoder' else encoders[0]}), the paper's {r['paper model']} "
                   f"{r['paper (parameters)']:,}: {r['times smaller']:.0f}x smaller")
    out.append(f"encoders are compared with paper {p['paper_table']} ({paper_track} track); Tables 4-7 are the 100M "
               "track's: " + ("comparable" if paper_track == "strict" else "printed for orientation only"))
    return out
