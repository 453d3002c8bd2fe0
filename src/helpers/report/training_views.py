"""Training curves (notebooks 02 and 04): paper Figure 1's loss against the optimiser step, one colour per budget or
mix the same in every figure (:func:`budget_palette`), one line style per training seed, and a one-column variant
(3.3 in wide, panels stacked) for a two-column paper."""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from helpers.core.config import load_params
from helpers.evaluation.comparisons import arm_and_seed, corpus_of
from helpers.report.figure_layout import FIGURE_WIDTH, font_pt, legend_columns, legend_inches, wrap

#: a paper's column: the one-column variant of a figure is this wide
COLUMN_WIDTH = 3.3
#: the line style of the first, second, ... training seed of an arm (the first: the profile's train.seed)
SEED_STYLES = ("-", "--", ":", "-.")
#: the hatch of a bar of the first, second, ... seed (bars of one budget share its colour)
SEED_HATCHES = {"-": "", "--": "///", ":": "...", "-.": "xxx"}


def budget_palette(names: Sequence[str], budgets: Sequence[str]) -> dict[str, tuple]:
    """One colour per budget or mix, the same in every figure of a profile: ``budgets`` (the profile's list, in its
    order) fixes the colours (colour-blind palette), and each of ``names`` (a run such as ``"tiny-1M (seed 7)"`` or
    ``"tiny-1M (plain)"``) takes its corpus's colour; a corpus outside ``budgets`` is grey."""
    colours = dict(zip(budgets, sns.color_palette("colorblind", max(len(budgets), 1))))
    return {n: colours.get(corpus_of(n), (0.5, 0.5, 0.5)) for n in names}


def profile_palette(profile: str, names: Sequence[str], kind: str = "decoder") -> dict[str, tuple]:
    """The colour of each model of ``names`` in every figure of ``profile`` (notebooks 02 to 06): a decoder
    (``kind="decoder"``) its budget's, from notebook 02's ``budgets`` in order (:func:`budget_palette`, as Figure 1);
    an encoder (``kind="encoder"``) its mix's, from notebook 04's ``mixes`` in order (``tab10``, as notebook 04's
    curves). Seeds and plain twins share their corpus's colour; a name outside the lists is grey."""
    if kind == "decoder":
        return budget_palette(names, load_params(profile, "02")["budgets"])
    if kind != "encoder":
        raise ValueError(f"kind must be 'decoder' or 'encoder', not {kind!r}")
    mixes = [m["name"] for m in load_params(profile, "04")["mixes"]]
    colours = dict(zip(mixes, sns.color_palette("tab10", max(len(mixes), 1))))
    return {n: colours.get(corpus_of(n), (0.5, 0.5, 0.5)) for n in names}


def seed_styles(names: Sequence[str]) -> dict[str, str]:
    """The line style of each run: by the rank of its training seed within its arm (a name without ``(seed N)`` is the
    arm's first seed), :data:`SEED_STYLES` in turn."""
    ranks: dict[str, list[int]] = {}
    out = {}
    for n in names:
        arm, seed = arm_and_seed(n, -1)
        seen = ranks.setdefault(arm, [])
        if seed not in seen:
            seen.append(seed)
        out[n] = SEED_STYLES[seen.index(seed) % len(SEED_STYLES)]
    return out


def plot_loss_curves(results: dict, colours: dict, titles: tuple[str, str], ylabel: str, legend_title: str | None = None,
                     figsize: tuple[float, float] | None = None, labels: Mapping[str, str] | None = None,
                     one_column: bool = False):
    """Training (left) and validation (right) loss against the optimizer step, one line per run, from
    ``{name: TrainResult}`` (its ``history`` rows ``step``/``split``/``loss`` and its ``best_step``). The panels share
    the y axis and both show its tick labels; each run's best checkpoint (the lowest validation loss, the one that
    is kept) is marked with a star on its validation curve, a hollow star when it is the last evaluation (the loss
    was still falling). The seeds of an arm share its colour and differ in line style (:func:`seed_styles`; a legend
    entry per style). The figure is :data:`~helpers.report.figure_layout.FIGURE_WIDTH` wide (``figsize`` overrides;
    ``one_column``: :data:`COLUMN_WIDTH` wide, the panels one above the other), titles wrapped to their panel, the
    legend below the panels. ``labels``: a legend label per run (``"_nolegend_"`` leaves a run out, e.g. the further
    seeds of an arm: :func:`~helpers.report.evaluation_views.arm_colours`)."""
    labels = {n: (labels or {}).get(n, n) for n in results}
    styles = seed_styles(list(results))
    n_styles = len(set(styles.values()))
    style_entries = ["first seed", *(f"seed {i + 1}" for i in range(1, n_styles))] if n_styles > 1 else []
    entries = [*(x for x in labels.values() if x != "_nolegend_"), "best checkpoint (kept)",
               "best = last evaluation (still falling)", *style_entries]
    width = (figsize or (COLUMN_WIDTH if one_column else FIGURE_WIDTH,))[0]
    ncol = legend_columns(entries, width)
    legend_h = legend_inches(entries, ncol, title=bool(legend_title))
    figsize = figsize or ((COLUMN_WIDTH, 5.2 + legend_h) if one_column else (FIGURE_WIDTH, 3.4 + legend_h))
    rows, cols = (2, 1) if one_column else (1, 2)
    fig, axes = plt.subplots(rows, cols, figsize=figsize, sharey=True, layout="constrained")
    for name, res in results.items():
        h = pd.DataFrame(res.history)
        for ax, split in zip(axes, ["train", "valid"]):
            part = h[h.split == split]
            ax.plot(part.step, part.loss, label=labels[name], color=colours[name], ls=styles[name])
        valid = h[h.split == "valid"]
        best = valid[valid.step == res.best_step]
        if len(best):
            last = int(res.best_step) == int(valid.step.max())
            axes[1].plot(best.step, best.loss, marker="*", ms=13, ls="none", color=colours[name],
                         markerfacecolor="none" if last else colours[name], markeredgewidth=1.3, zorder=5)
    panel = figsize[0] if one_column else figsize[0] / 2
    for ax, title in zip(axes, titles):
        ax.set(title=wrap(title, panel - 0.6, font_pt(key="axes.titlesize")), xlabel="optimizer step", ylabel=ylabel)
        ax.tick_params(labelleft=True)  # sharey hides the right panel's numbers otherwise
    axes[1].plot([], [], marker="*", ms=11, ls="none", color="grey", label="best checkpoint (kept)")
    axes[1].plot([], [], marker="*", ms=11, ls="none", color="grey", markerfacecolor="none",
                 label="best = last evaluation (still falling)")
    handles, names = axes[1].get_legend_handles_labels()
    for style, label in zip(SEED_STYLES, style_entries):  # one entry per seed style, in grey
        handles.append(Line2D([], [], color="grey", ls=style))
        names.append(label)
    fig.legend(handles, names, title=legend_title, loc="outside lower center", frameon=False, ncol=ncol)
    return fig
