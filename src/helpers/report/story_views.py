"""Views of notebook 05b's story evaluation: the judge-validity matrix and chart, the themed suites' grades and the
instruction-following chart. Each function takes the table its notebook cell built and returns a display table
or a matplotlib figure (saved by :func:`helpers.report.reporting.save_figure`)."""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from helpers.judge.validity import CORRUPTIONS, VALIDITY_CRITERIA
from helpers.story_eval.suites import GRADE_COLOURS, GRADES, SUITES


def validity_matrix(validity):
    """Criterion × corruption (then ``all``): the share of pairs (%) where the real ending got the higher grade,
    written ``"w [low, high]"`` with its 95 % interval (:func:`helpers.judge.validity.validity_table`'s columns
    ``criterion``, ``corruption``, ``real wins``, ``low``, ``high``, as fractions)."""
    cells = validity.assign(cell=[f"{100 * w:.0f} [{100 * lo:.0f}, {100 * hi:.0f}]" for w, lo, hi in
                                  zip(validity["real wins"], validity["low"], validity["high"])])
    return (cells.pivot(index="criterion", columns="corruption", values="cell")
            .reindex(index=list(VALIDITY_CRITERIA), columns=[*CORRUPTIONS, "all"]))


def plot_validity(validity, title: str):
    """Bars of :func:`validity_matrix`'s shares per criterion, one per corruption (``all`` in dark grey), with
    their 95 % intervals and the chance line at 0.5 (a judge that cannot tell real from corrupted endings)."""
    fig, ax = plt.subplots(figsize=(9, 3.8))
    kinds = [*CORRUPTIONS, "all"]
    width = 0.8 / len(kinds)
    crit = list(VALIDITY_CRITERIA)
    for i, k in enumerate(kinds):
        t = validity[validity.corruption == k].set_index("criterion").reindex(crit)
        x = np.arange(len(crit)) + i * width
        ax.bar(x, t["real wins"], width, label=k, color="#333333" if k == "all" else None)
        ax.errorbar(x, t["real wins"], yerr=[t["real wins"] - t["low"], t["high"] - t["real wins"]], fmt="none",
                    ecolor="#555555", capsize=2, lw=1)
    ax.axhline(0.5, color="red", lw=1, ls="--")
    ax.set_xticks(np.arange(len(crit)) + width * (len(kinds) - 1) / 2, crit)
    ax.set(ylim=(0, 1), ylabel="real ending graded higher (share)", title=title)
    ax.legend(ncol=len(kinds), fontsize=8, loc="lower left")
    return fig


def plot_themed_grades(graded, models: Sequence[str], prompts_per_suite: Mapping[str, int]):
    """One panel per themed suite: per model, its answers stacked by answer-key grade (success / partial / fail).
    ``graded`` has columns ``suite``, ``model``, ``grade`` (:func:`helpers.story_eval.suites.grade_table`)."""
    counts = (graded.groupby(["suite", "model", "grade"]).size().unstack("grade")
              .reindex(columns=list(GRADES)).fillna(0))
    fig, axes = plt.subplots(1, len(SUITES), figsize=(4.5 * len(SUITES), 3.6), sharey=False)
    for ax, suite in zip(np.atleast_1d(axes), SUITES):
        c = counts.loc[suite].reindex(models).fillna(0)
        bottom = np.zeros(len(c))
        for g in GRADES:
            ax.bar(c.index, c[g], bottom=bottom, color=GRADE_COLOURS[g], edgecolor="#555", label=g)
            bottom += c[g].to_numpy()
        ax.set(title=f"{suite} ({prompts_per_suite[suite]} prompts)", ylabel="answers")
        ax.tick_params(axis="x", rotation=30)
    handles, labels = np.atleast_1d(axes)[0].get_legend_handles_labels()
    fig.legend(handles, labels, title="answer-key grade", loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle("Themed prompts: first sentences of greedy completions graded by the answer keys", y=1.04)
    return fig


def plot_instruct_words(instruct_table, prompt_sets: Sequence[str]):
    """One panel per prompt set: per model, the share of required words used beside chance (the words of another
    prompt). ``instruct_table`` is :func:`helpers.story_eval.instruct.instruct_summary` by prompts and model."""
    fig, axes = plt.subplots(1, len(prompt_sets), figsize=(5.5 * len(prompt_sets), 3.8), sharey=True)
    for ax, set_name in zip(np.atleast_1d(axes), prompt_sets):
        t = instruct_table[instruct_table.prompts == set_name]
        x = np.arange(len(t))
        ax.bar(x - 0.2, t["share of required words used"], 0.4, label="required words used", color="#4c72b0")
        ax.bar(x + 0.2, t["chance (words of another prompt)"], 0.4, label="chance (another prompt's words)",
               color="#bbbbbb")
        ax.set_xticks(x, t["model"])
        ax.set(title=f"{set_name} prompts", ylim=(0, 1), ylabel="share of required words")
    np.atleast_1d(axes)[0].legend(fontsize=8)
    return fig


def plot_judge_scores(judge_means, models: Sequence[str], criteria: Sequence[str], title: str):
    """One panel per decoding (greedy, nucleus, …): per model, the judge's expected grade (1-10) on each validated
    criterion with its 95 % interval (:func:`helpers.judge.validity.grade_interval_table`: columns ``model``,
    ``decoding``, ``<criterion>``, ``<criterion> low``, ``<criterion> high``)."""
    decodings = list(dict.fromkeys(judge_means["decoding"]))
    fig, axes = plt.subplots(1, len(decodings), figsize=(6 * len(decodings), 3.8), sharey=True, squeeze=False)
    width = 0.8 / len(criteria)
    for ax, dec in zip(axes[0], decodings):
        t = judge_means[judge_means.decoding == dec].set_index("model").reindex(models)
        x = np.arange(len(t))
        for i, c in enumerate(criteria):
            ax.bar(x + i * width, t[c], width, label=c)
            ax.errorbar(x + i * width, t[c], yerr=[t[c] - t[f"{c} low"], t[f"{c} high"] - t[c]], fmt="none",
                        ecolor="#555555", capsize=2, lw=1)
        ax.set_xticks(x + width * (len(criteria) - 1) / 2, t.index)
        ax.set(ylim=(1, 10), title=f"{dec} completions", ylabel="expected judge grade (1-10)")
    axes[0][0].legend(fontsize=8, loc="upper left")
    fig.suptitle(title)
    return fig
