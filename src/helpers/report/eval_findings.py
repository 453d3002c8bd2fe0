"""Sentences computed from the results of notebooks 05 and 05b (their "What this run shows" cells): which models are
above chance, the questions table's verdicts (a difference is real only over seeds), how ours compare with the paper's
rows.

Every sentence is computed from the tables it names; nothing is typed by hand. Two results are called "apart" only
when their 95 % intervals do not overlap (a statement about the items drawn); a difference is called real only by
the questions table, over training seeds."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from helpers.core.stats import intervals_apart
from helpers.evaluation.zero_shot import chance_verdict
from helpers.report.reporting import fmt_interval


def _names(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "none"


def evaluation(intervals: pd.DataFrame, glue: Mapping[str, tuple[float, float, float]] | None = None,
               majority: float | None = None, generated: Sequence[tuple[str, str]] = (),
               replicates: Mapping[str, str] | None = None, comparison: pd.DataFrame | None = None,
               scale: float | None = None, chance: float = 50.0, questions: pd.DataFrame | None = None) -> list[str]:
    """Notebook 05's summary.

    ``intervals``: :func:`helpers.evaluation.zero_shot.interval_table` (kind, model, task, accuracy, ci_low, ci_high);
    ``glue``: ``{encoder: (GLUE average, low, high)}`` in %; ``majority``: the majority-class GLUE average;
    ``generated``: pairs ``(mix without, mix with generated stories)``, the paper's question; ``replicates``:
    ``{replicate: base}`` (two seeds of one mix: their gap is the run-to-run noise); ``comparison``:
    :func:`helpers.evaluation.zero_shot.compare_with_paper`'s table (its ``ours …`` column and ``paper``);
    ``scale``: how many times fewer words our mixes have than the paper's; ``questions``:
    :func:`helpers.evaluation.comparisons.questions_table` (when given, it answers the generated-stories question
    over seeds instead of the one-pair seed gap)."""
    out = []
    for task in dict.fromkeys(intervals["task"]):
        t = intervals[intervals["task"] == task]
        for kind in dict.fromkeys(t["kind"]):
            k = t[t["kind"] == kind]
            above = [m for m, lo, hi in zip(k.model, k.ci_low, k.ci_high) if chance_verdict(lo, hi, chance) == "yes"]
            out.append(f"{task}, {kind}s: {len(above)} of {len(k)} above chance ({chance:g}) beyond their 95 % "
                       f"interval ({_names(above)}); accuracies {k.accuracy.min():.1f}-{k.accuracy.max():.1f}")
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
        if not np.isfinite(r.get("effect", np.nan)):
            out.append(f"{r.question}: {r.verdict}")
            continue
        seeds = (fmt_interval(r["seed CI low"], r["seed CI high"]) + f" over seeds ({int(r['seeds A'])} and "
                 f"{int(r['seeds B'])} per arm)" if np.isfinite(r["seed CI low"]) else
                 f"no seed-level interval ({int(r['seeds A'])} and {int(r['seeds B'])} seeds per arm)")
        out.append(f"{r.question} ({r.A} minus {r.B}, {r.task}, {int(r['items']):,} shared items): "
                   f"{r.effect:+.1f} {r.unit}, {seeds}; item interval "
                   f"{fmt_interval(r['item CI low'], r['item CI high'])}: {r.verdict}")
    return out


def story_evaluation(judge: pd.DataFrame | None, criteria: Sequence[str], themed: pd.DataFrame,
                     instruct: pd.DataFrame | None = None) -> list[str]:
    """Notebook 05b's summary.

    ``judge``: judge means per (model, decoding) with ``<criterion>``, ``<criterion> low`` / ``high`` columns
    (None without a judge); ``criteria``: those the judge was validated on; ``themed``: the themed summary (model,
    suite, score, score CI low/high); ``instruct``: the required-words table (prompts, model, share of required
    words used, required low/high, chance low/high)."""
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
                apart = intervals_apart((top[f"{c} low"], top[f"{c} high"]), (low[f"{c} low"], low[f"{c} high"]))
                out.append(f"judge, {c} ({decoding}): highest {top.model} {top[c]:.2f} "
                           f"{fmt_interval(top[f'{c} low'], top[f'{c} high'], 2)}, lowest {low.model} {low[c]:.2f} "
                           f"{fmt_interval(low[f'{c} low'], low[f'{c} high'], 2)}: "
                           + ("apart" if apart else "overlapping, so the decoders are not ranked by this judge"))
    for suite in dict.fromkeys(themed["suite"]):
        s = themed[themed["suite"] == suite]
        top = s.loc[s["score"].idxmax()]
        out.append(f"themed {suite}: best {top.model} {top.score:.2f} "
                   f"{fmt_interval(top['score CI low'], top['score CI high'], 2)} of 1; "
                   + (f"{int((s['score CI low'] > 0).sum())} of {len(s)} models' intervals exclude 0"))
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
