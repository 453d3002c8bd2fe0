"""Views of notebook 05's evaluation tables that are not the paper's: accuracy by how familiar a minimal pair's
words are (:func:`helpers.evaluation.word_familiarity.familiarity_table`) and the questions table as a forest plot
(:func:`plot_questions`), the seeds the questions need (:func:`plot_seed_budget`), and colours per arm for any figure with one line per seed (:func:`arm_colours`). Each function takes the table its notebook
cell built and returns a matplotlib figure (saved by :func:`helpers.report.reporting.save_figure`)."""
from __future__ import annotations

import re
from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from helpers.evaluation.comparisons import arm_and_seed, seeds_per_arm
from helpers.report.figure_layout import FIGURE_WIDTH, font_pt, legend_columns, legend_inches, wrap
from helpers.report.training_views import seed_styles


def plot_word_familiarity(table: pd.DataFrame, corpus: str = "its training stories", chance: float = 50.0,
                          title: str = "", palette: Mapping[tuple[str, str], object] | None = None):
    """Accuracy (95 % interval as error bars) against the threshold, one line per model (decoders solid, encoders
    dashed), the chance level as a dotted line; ``corpus`` names the text the words were counted in. The legend
    sits below the axes, at the style's size. ``palette``: the colour of each ``(kind, model)`` (its budget's or mix's,
    as in every figure; :func:`helpers.report.training_views.profile_palette`), else matplotlib's cycle."""
    levels = sorted(table["words seen at least"].unique())
    pos = {n: i for i, n in enumerate(levels)}
    models = list(dict.fromkeys(zip(table["kind"], table["model"])))
    entries = [f"{kind}: {name}" for kind, name in models] + ["chance"]
    ncol = legend_columns(entries)
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.8 + legend_inches(entries, ncol)), layout="constrained")
    styles = seed_styles([name for _, name in models])  # a budget's seeds share its colour, one line style each
    for j, (kind, name) in enumerate(models):
        part = table[(table.kind == kind) & (table.model == name)].dropna(subset=["accuracy (%)"])
        x = [pos[n] + (j - (len(models) - 1) / 2) * 0.04 for n in part["words seen at least"]]
        ax.errorbar(x, part["accuracy (%)"], yerr=[part["accuracy (%)"] - part.ci_low, part.ci_high - part["accuracy (%)"]],
                    fmt="o-" if kind == "decoder" else "s--", capsize=3, label=f"{kind}: {name}",
                    **({"color": palette[(kind, name)], "ls": styles[name]} if palette and (kind, name) in palette else {}))
    ax.axhline(chance, color="k", ls=":", lw=1, label="chance")
    ax.set_xticks(range(len(levels)), ["all pairs" if n == 0 else f"words seen ≥ {n}×" for n in levels])
    ax.set(ylabel="accuracy over pairs (%), 95 % CI",
           xlabel=wrap(f"pairs whose every word occurs this often in {corpus}", FIGURE_WIDTH - 1,
                       font_pt(key="axes.labelsize")))
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol, frameon=False)
    if title:
        ax.set_title(wrap(title, FIGURE_WIDTH - 3.2, font_pt(key="axes.titlesize")))
    return fig


COLUMN_WIDTH = 3.3  # inches: a paper's column (the one-column variant of a figure)


def question_label(question: str, task: str) -> str:
    """A question's label with its task once: ``"D_gen: generated stories change BLiMP"`` stays as it is (the task
    is in it), another gets `` (task)``."""
    return question if str(task) in str(question) else f"{question} ({task})"


def plot_questions(questions: pd.DataFrame, title: str = "", one_column: bool = False):
    """The questions table as a forest plot: per question, the effect (A − B) with its seed-level 95 % interval
    (thick; absent where an arm has one seed) and its item-level interval (thin, grey), the band ±MDE (80 % power:
    what the design could detect, not a bound on the effect) shaded where it exists, the equivalence margin ±δ
    (dashed ticks) where the question has one, and 0 as the no-difference line. Each row is labelled with the
    question (its task once) and its verdict in short (:func:`short_verdict`; the arms and the whole verdict are in
    the table). ``one_column``: :data:`COLUMN_WIDTH` wide, each label above its row instead of beside it."""
    q = questions.reset_index(drop=True)
    n = len(q)
    width = COLUMN_WIDTH if one_column else FIGURE_WIDTH
    step = 1.15 if one_column else 0.75
    fig, ax = plt.subplots(figsize=(width, 1.3 + step * max(n, 1)), layout="constrained")
    delta_col = next((c for c in q.columns if c.startswith("δ")), None)
    for y, r in q.iterrows():
        y = n - 1 - y
        if np.isfinite(r.get("MDE (80 % power)", np.nan)):
            ax.fill_betweenx([y - 0.3, y + 0.3], -r["MDE (80 % power)"], r["MDE (80 % power)"], color="#dddddd", lw=0)
        if delta_col and np.isfinite(pd.to_numeric(r.get(delta_col), errors="coerce")):
            d = float(r[delta_col])
            ax.plot([-d, -d], [y - 0.3, y + 0.3], color="#555555", lw=1, ls="--")
            ax.plot([d, d], [y - 0.3, y + 0.3], color="#555555", lw=1, ls="--")
        if np.isfinite(r.get("item CI low", np.nan)):
            ax.plot([r["item CI low"], r["item CI high"]], [y - 0.12] * 2, color="#888888", lw=1.2)
        if np.isfinite(r.get("seed CI low", np.nan)):
            ax.plot([r["seed CI low"], r["seed CI high"]], [y] * 2, color="#1f77b4", lw=3)
        if np.isfinite(r.get("effect", np.nan)):
            ax.plot(r["effect"], y, "o", color="#1f77b4")
    ax.axvline(0, color="k", lw=1, ls=":")
    texts = [f"{question_label(r.question, r.task)}: {short_verdict(r.verdict, getattr(r, 'effect_after_Holm', ''))}"
             for r in q.rename(columns={"effect after Holm": "effect_after_Holm"}).itertuples()]
    size = 7.3 if one_column else 7.5  # 7 pt once the saved 3.4 in (tight bbox) prints 3.3 in wide
    if one_column:  # each label above its row, across the panel: no room for a label column beside it
        ax.set_yticks([])
        ax.set_ylim(-0.6, n - 0.1)
        for y, t in enumerate(texts):
            ax.annotate(wrap(t, width - 0.4, size), (0, n - 1 - y + 0.32), xycoords=("axes fraction", "data"),
                        fontsize=size, va="bottom", ha="left")
        ax.set_ylim(-0.6, n + 0.2)
    else:
        ax.set_yticks(range(n), [wrap(t, 2.5, size) for t in texts][::-1], fontsize=size)
    unit = q["unit"].iloc[0] if n and "unit" in q else "points"
    axis = width - (0.6 if one_column else 3.2)
    ax.set_xlabel(wrap(f"difference A − B ({unit}); thick: over seeds (95 %), thin grey: over items, shaded: ±MDE, "
                       "dashed: ±δ", axis, font_pt(key="axes.labelsize")))
    if title:
        ax.set_title(wrap(title, axis, font_pt(key="axes.titlesize")))
    return fig


def plot_seed_budget(budget: pd.DataFrame, title: str = ""):
    """The seed-budget table (:func:`helpers.evaluation.comparisons.seed_budget`) as one panel: per paired question,
    the minimum detectable effect with the first k seeds (markers and a solid line, where the run has them) and
    projected from all its seeds (dashed), against seeds per arm."""
    part = budget.dropna(subset=["MDE projected from all seeds"])
    names = list(dict.fromkeys(zip(part["question"], part["task"])))
    label = {(q, t): question_label(q, t) for q, t in names}  # the task once
    entries = list(label.values())
    ncol = 1
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.6 + legend_inches(entries, ncol)), layout="constrained")
    for j, (q, t) in enumerate(names):
        g = part[(part["question"] == q) & (part["task"] == t)]
        colour = sns.color_palette("tab10")[j % 10]
        ax.plot(g["seeds per arm"], g["MDE projected from all seeds"], "--", color=colour, lw=1)
        ax.plot(g["seeds per arm"], g["MDE with the first k seeds"], "o-", color=colour, label=label[(q, t)])
    if names:
        ax.set_yscale("log")
    else:  # one seed per arm (the paper profile): nothing to measure or project, and the panel says so
        ax.text(0.5, 0.5, "no question has two training seeds per arm:\nno minimum detectable effect to show",
                ha="center", va="center", transform=ax.transAxes)
    ax.set(xlabel="training seeds per arm (paired)",
           ylabel="minimum detectable effect (points, 80 % power)")
    ax.set_xticks(sorted(part["seeds per arm"].unique()))
    if names:
        fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=ncol, frameon=False,
                   fontsize=font_pt(key="legend.fontsize"))
    if title:
        ax.set_title(wrap(title + " (solid: measured on the first k seeds; dashed: projected from all)",
                          FIGURE_WIDTH - 3.2, font_pt(key="axes.titlesize")))
    return fig


def short_verdict(verdict: str, after_holm: str = "") -> str:
    """A questions-table verdict up to its first qualification ("effect: A higher than B by 6.0 points",
    "not shown: effect +1.0 points, in [-1.4, +3.4] (95 % over 5 seeds)", "untestable here: 1 vs 2 seeds per arm", "not shown beyond these items: A
    higher than B by 1.1 points"), an effect with "(Holm: yes|no)"."""
    short = re.split(r";|, a seed-level| over seeds on the", str(verdict))[0]
    short = re.sub(r" \((?:80 % power|paired over|\d+ vs \d+)[^()]*\)$", "", short)  # the design, named in the table
    return short + (f" (Holm: {after_holm})" if short.startswith("effect:") and after_holm in ("yes", "no") else "")


def arm_colours(names, palette: str = "tab10") -> tuple[dict[str, tuple], dict[str, str]]:
    """One colour per arm (a recipe; its seeds ``"<arm> (seed N)"`` share it) and one legend label per arm:
    ``({name: colour}, {name: label})``, the label ``"<arm> (N seeds)"`` on the arm's first run and ``"_nolegend_"``
    on the others, so a figure with one line per seed keeps a legend of arms."""
    names = list(names)
    arm_of = {n: arm_and_seed(n, 0)[0] for n in names}
    arms = list(dict.fromkeys(arm_of.values()))
    colour = dict(zip(arms, sns.color_palette(palette, len(arms))))
    count = seeds_per_arm(names)
    labels, seen = {}, set()
    for n in names:
        a = arm_of[n]
        labels[n] = "_nolegend_" if a in seen else (f"{a} ({count[a]} seeds)" if count[a] > 1 else a)
        seen.add(a)
    return {n: colour[arm_of[n]] for n in names}, labels
