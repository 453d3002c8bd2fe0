"""Sentences computed from the results of notebooks 05 and 05b (their "What this run shows" cells): which models are
above chance, the questions table's verdicts (a difference is real only over seeds), how ours compare with the paper's
rows.

Every sentence is computed from the tables it names; nothing is typed by hand, and every claiming word goes through
:mod:`helpers.core.claims`: "above chance" for an encoder only where its mean and summed PLL agree
(:func:`~helpers.core.claims.chance_claim` on the PLL-reductions table), "best" only beyond a paired interval
(:func:`~helpers.core.claims.ranking_claim`, else "tied"), overlapping intervals never read as equal
(:func:`~helpers.core.claims.apart_claim`). Two results are called "apart" only when their 95 % intervals do not
overlap (a statement about the items drawn); a difference is called real only by the questions table, over training
seeds."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from helpers.core.claims import apart_claim, chance_claim, ranking_claim
from helpers.core.stats import intervals_apart, paired_bootstrap_difference
from helpers.report.reporting import fmt_interval

#: the encoders' pre-registered PLL reduction (the 2024 pipeline's) and the other one, checked beside it
PLL_REDUCTIONS = ("mean", "sum")


def _names(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "none"


def chance_words(intervals: pd.DataFrame, reductions: pd.DataFrame | None, chance: float = 50.0) -> pd.Series:
    """One :func:`~helpers.core.claims.chance_claim` per row of ``intervals`` (kind, model, task, ci_low, ci_high):
    an encoder found in ``reductions`` (:func:`helpers.evaluation.comparisons.pll_reductions`) is judged on its mean
    and summed PLL intervals together (the mean pre-registered), any other row on its own interval (one reduction)."""
    red = {} if reductions is None or not len(reductions) else {
        (r["kind"], r["model"], r["task"]): {n: (r[f"{n} low"], r[f"{n} high"]) for n in PLL_REDUCTIONS}
        for _, r in reductions.iterrows()}
    return pd.Series([chance_claim(red.get((k, m, t), {"as scored": (lo, hi)}), chance, preregistered="mean")
                      for k, m, t, lo, hi in zip(intervals["kind"], intervals["model"], intervals["task"],
                                                 intervals["ci_low"], intervals["ci_high"])], index=intervals.index)


def evaluation(intervals: pd.DataFrame, glue: Mapping[str, tuple[float, float, float]] | None = None,
               majority: float | None = None, generated: Sequence[tuple[str, str]] = (),
               replicates: Mapping[str, str] | None = None, comparison: pd.DataFrame | None = None,
               scale: float | None = None, chance: float = 50.0, questions: pd.DataFrame | None = None,
               reductions: pd.DataFrame | None = None) -> list[str]:
    """Notebook 05's summary.

    ``intervals``: :func:`helpers.evaluation.zero_shot.interval_table` (kind, model, task, accuracy, ci_low, ci_high);
    ``glue``: ``{encoder: (GLUE average, low, high)}`` in %; ``majority``: the majority-class GLUE average;
    ``generated``: pairs ``(mix without, mix with generated stories)``, the paper's question; ``replicates``:
    ``{replicate: base}`` (two seeds of one mix: their gap is the run-to-run noise); ``comparison``:
    :func:`helpers.evaluation.zero_shot.compare_with_paper`'s table (its ``ours …`` column and ``paper``);
    ``scale``: how many times fewer words our mixes have than the paper's; ``questions``:
    :func:`helpers.evaluation.comparisons.questions_table` (when given, it answers the generated-stories question
    over seeds instead of the one-pair seed gap); ``reductions``: the encoders' PLL-reductions table (an encoder is
    called above chance only where its mean and summed PLL Wilson intervals both lie above chance; without the
    table the sentence says the other reduction was not checked)."""
    out = []
    words = chance_words(intervals, reductions, chance)
    for task in dict.fromkeys(intervals["task"]):
        t = intervals[intervals["task"] == task]
        for kind in dict.fromkeys(t["kind"]):
            k = t[t["kind"] == kind]
            w = words[k.index]
            above = list(k.model[w == "above chance"])
            one = [f"{m} ({x.split(' under ')[1].split(' only')[0]})" for m, x in zip(k.model, w)
                   if x.startswith("above chance under")]
            checked = reductions is not None and len(reductions) and (
                (reductions["kind"] == kind) & (reductions["task"] == task)).any()
            basis = (" under both PLL reductions (mean and sum, Wilson 95 % intervals over pairs)" if checked else
                     " (the reduction scored; the other PLL reduction not checked here)" if kind == "encoder" else "")
            out.append(f"{task}, {kind}s: {len(above)} of {len(k)} above chance ({chance:g}) beyond their 95 % "
                       f"interval{basis} ({_names(above)}); accuracies {k.accuracy.min():.1f}-{k.accuracy.max():.1f}"
                       + (f"; above chance under one reduction only, so not called above chance: {', '.join(one)}"
                          if one else ""))
    if glue:
        cells = []
        for m, (avg, lo, hi) in glue.items():
            where = ("" if majority is None else
                     " above majority" if lo > majority else " below majority" if hi < majority else " not apart from majority")
            cells.append(f"{m} {avg:.1f} {fmt_interval(lo, hi)}{where}")
        out.append("GLUE average" + (f" against the majority-class average {majority:.1f}" if majority is not None else "")
                   + ": " + "; ".join(cells))
    acc = {(m, task): (a, lo, hi) for m, task, a, lo, hi in
           zip(intervals.model, intervals.task, intervals.accuracy, intervals.ci_low, intervals.ci_high)}
    acc.update({(m, "GLUE"): v for m, v in (glue or {}).items()})
    noise = {}
    for rep, base in (replicates or {}).items():
        for task in [*dict.fromkeys(intervals["task"]), "GLUE"]:
            if (rep, task) in acc and (base, task) in acc:
                noise[task] = max(noise.get(task, 0.0), abs(acc[(rep, task)][0] - acc[(base, task)][0]))
    if questions is not None and len(questions):
        out += question_lines(questions)
        generated = ()  # the questions table answers the paper's D_gen question over seeds
    for without, with_gen in generated:
        diffs, apart = [], []
        for task in [*dict.fromkeys(intervals["task"]), "GLUE"]:
            if (without, task) in acc and (with_gen, task) in acc:
                a, b = acc[(without, task)], acc[(with_gen, task)]
                diffs.append(f"{task} {b[0] - a[0]:+.1f}")
                if intervals_apart(a[1:], b[1:]) and abs(b[0] - a[0]) > noise.get(task, 0.0):
                    apart.append(task)
        if diffs:
            seeds = ("; two seeds of one mix lie " + ", ".join(f"{t} {g:.1f}" for t, g in noise.items())
                     + " points apart") if noise else ""
            out.append(f"generated stories ({with_gen} minus {without}): " + ", ".join(diffs) + " points; "
                       + (f"beyond the item intervals and one pair of seeds' gap (a rough screen, not a test): "
                          f"{_names(apart)}" if apart else
                          "none beyond both the item intervals and one pair of seeds' gap (a rough screen, not a test: "
                          "the questions table says what this design can detect)")
                       + seeds)
    if comparison is not None and len(comparison):
        ours = next(c for c in comparison.columns if str(c).startswith("ours"))
        both = comparison.dropna(subset=[ours, "paper"])
        if len(both):
            gap = both["paper"] - both[ours]
            lower = int((gap > 0).sum())
            out.append(f"against the authors' rows{f' (trained on {scale:g}x our words, with a larger model)' if scale else ''}: "
                       f"ours are lower in {lower} of {len(both)} printed comparisons, by a median of {np.median(gap):.1f} "
                       "points")
    return out


def question_lines(questions: pd.DataFrame) -> list[str]:
    """One sentence per row of :func:`helpers.evaluation.comparisons.questions_table`: the effect with its
    seed-level interval (seeds per arm stated), the item-level interval beside it, and the verdict, which alone
    decides whether a difference is real."""
    out = []
    for _, r in questions.iterrows():
        role = "positive control: " if r.get("role", "question") == "positive control" else ""
        if not np.isfinite(r.get("effect", np.nan)):
            out.append(f"{role}{r.question}: {r.verdict}")
            continue
        seeds = (fmt_interval(r["seed CI low"], r["seed CI high"]) + f" over seeds ({int(r['seeds A'])} and "
                 f"{int(r['seeds B'])} per arm)" if np.isfinite(r["seed CI low"]) else
                 f"no seed-level interval ({int(r['seeds A'])} and {int(r['seeds B'])} seeds per arm)")
        out.append(f"{role}{r.question} ({r.A} minus {r.B}, {r.task}, {int(r['items']):,} shared items): "
                   f"{r.effect:+.1f} {r.unit}, {seeds}; item interval "
                   f"{fmt_interval(r['item CI low'], r['item CI high'])}: {r.verdict}")
    return out


def themed_paired_intervals(graded: pd.DataFrame, suite: str, leader: str, n_boot: int = 2000,
                            seed: int = 0) -> dict[str, tuple[float, float]]:
    """The paired 95 % interval of ``leader`` minus each other model on one themed ``suite``, over the prompts both
    answered (``graded``: one row per model and prompt, columns model, suite, id, score; a seeded paired bootstrap
    over prompts, :func:`helpers.core.stats.paired_bootstrap_difference`)."""
    part = graded[graded["suite"] == suite].pivot_table(index="id", columns="model", values="score", aggfunc="mean")
    out = {}
    for other in part.columns:
        if other == leader or leader not in part.columns:
            continue
        both = part[[leader, other]].dropna()
        if len(both):
            out[other] = paired_bootstrap_difference(both[leader].to_numpy(), both[other].to_numpy(),
                                                     n_boot=n_boot, seed=seed)[1:]
    return out


def story_evaluation(judge: pd.DataFrame | None, criteria: Sequence[str], themed: pd.DataFrame,
                     instruct: pd.DataFrame | None = None, graded: pd.DataFrame | None = None) -> list[str]:
    """Notebook 05b's summary.

    ``judge``: judge means per (model, decoding) with ``<criterion>``, ``<criterion> low`` / ``high`` columns
    (None without a judge); ``criteria``: those the judge was validated on; ``themed``: the themed summary (model,
    suite, score, score CI low/high); ``instruct``: the required-words table (prompts, model, share of required
    words used, required low/high, chance low/high); ``graded``: the themed answers, one per model and prompt
    (model, suite, id, score), from which the leader of a suite is compared with each other model over the same
    prompts (:func:`themed_paired_intervals`): "highest" only where every paired interval excludes 0, else "tied"
    (:func:`~helpers.core.claims.ranking_claim`; without ``graded`` no model is called the best). The judge's top
    and bottom decoders are compared by their intervals (:func:`~helpers.core.claims.apart_claim`), never ranked by
    means alone."""
    out = []
    if judge is None or not len(judge):
        out.append("no judge grades in this run")
    else:
        for decoding in dict.fromkeys(judge["decoding"]):
            d = judge[judge["decoding"] == decoding]
            for c in criteria:
                if c not in d.columns:
                    continue
                top, low = d.loc[d[c].idxmax()], d.loc[d[c].idxmin()]
                words = apart_claim(top.model, (top[f"{c} low"], top[f"{c} high"]), low.model,
                                    (low[f"{c} low"], low[f"{c} high"]), "graded stories")
                out.append(f"judge, {c} ({decoding}), the largest and smallest means: {top.model} {top[c]:.2f} "
                           f"{fmt_interval(top[f'{c} low'], top[f'{c} high'], 2)}, {low.model} {low[c]:.2f} "
                           f"{fmt_interval(low[f'{c} low'], low[f'{c} high'], 2)}: {words}"
                           + ("" if "intervals apart" in words else ", so the decoders are not ranked by this judge"))
    for suite in dict.fromkeys(themed["suite"]):
        s = themed[themed["suite"] == suite]
        values = dict(zip(s["model"], s["score"]))
        leader = max(values, key=values.get)
        paired = themed_paired_intervals(graded, suite, leader) if graded is not None and len(graded) else None
        out.append(f"themed {suite} (scores of 1): "
                   + ranking_claim(values, better="higher", what="score", paired=paired, digits=2)
                   + f"; {int((s['score CI low'] > 0).sum())} of {len(s)} models' intervals exclude 0")
    if instruct is not None and len(instruct):
        for prompts in dict.fromkeys(instruct["prompts"]):
            p = instruct[instruct["prompts"] == prompts]
            cells = []
            for _, r in p.iterrows():
                beyond = r["required low"] > r["chance high"]
                cells.append(f"{r.model} {r['share of required words used']:.2f} vs chance "
                             f"{r['chance (words of another prompt)']:.2f} ({'above' if beyond else 'not above'})")
            out.append(f"required words used, {prompts} prompts: " + "; ".join(cells))
    return out
