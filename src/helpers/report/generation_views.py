"""Views of notebook 03's generation study: the self-BLEU curves, the memorisation histograms and the health of
greedy continuations. Each function takes the table its notebook cell built and returns a matplotlib figure (saved
by :func:`helpers.report.reporting.save_figure`)."""
from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.ticker import MaxNLocator

from helpers.diversity.self_bleu import k_choice_label
from helpers.report.figure_layout import FIGURE_WIDTH, font_pt, panels, text_inches, wrap

# (column of the per-completion table, panel title, x label) of the memorisation histograms
MEMORISATION_PANELS = (
    ("rouge2_vs_ending", "completion vs the original ending", "ROUGE-2 F1"),
    ("max_rouge2_others", "completion vs the model's other completions (max)", "ROUGE-2 F1"),
    ("longest_shared_run", "longest run of words shared with a training story", "words"),
    ("max_rouge2_train", "completion vs the training stories (max over a shortlist)", "ROUGE-2 F1"),
)


def plot_self_bleu(selfbleu, chosen: Mapping[str, int | None], top_p: float, n_prompts: int, k_rule: str,
                   eps: float = 0.01, palette: Mapping[str, object] | None = None):
    """Self-BLEU against k per model (:func:`helpers.diversity.self_bleu.self_bleu_table`'s ``model``, ``k``, ``self-BLEU``,
    ``ci_low``, ``ci_high``) with its 95 % band; the legend gives each model's chosen k, or (``None``) "undefined:
    flat curve" / "no knee within k ≤ K" (:func:`helpers.diversity.self_bleu.k_choice_label` with ``eps``). ``palette``:
    each model's colour (:func:`helpers.report.training_views.profile_palette`: its budget's, as in every figure)."""
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 4.2), layout="constrained")
    for name, g in selfbleu.groupby("model", sort=False):
        label = k_choice_label(dict(zip(g.k, g["self-BLEU"])), chosen.get(name), eps)
        line, = ax.plot(g.k, g["self-BLEU"], marker="o", ms=3, label=f"{name} ({label})",
                        **({"color": palette[name]} if palette and name in palette else {}))
        ax.fill_between(g.k, g.ci_low, g.ci_high, color=line.get_color(), alpha=0.15, linewidth=0)
    ax.set(xlabel="k (completions per prompt)", ylabel="self-BLEU (higher = less diverse)",
           title=wrap(f"Self-BLEU of nucleus completions (p = {top_p}), {n_prompts} prompts per model\n"
                      "(band: 95 % bootstrap interval over prompts)", FIGURE_WIDTH - 0.8, font_pt(key="axes.titlesize")))
    ax.legend(title=f"model (rule: {k_rule})")
    return fig


def _integer_bins(values) -> np.ndarray:
    """Histogram edges one unit apart, centred on the integers (a count of words gets one bar per value)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    lo, hi = (int(v.min()), int(v.max())) if len(v) else (0, 1)
    return np.arange(lo - 0.5, hi + 1.5, 1.0)


def plot_memorisation_histograms(per_completion, copy_min_words: int):
    """Four histograms (density per model) of the completions of training-story prompts: ROUGE-2 against the
    original ending, against the model's other completions, against the training stories, and the longest run
    of words shared with a training story (one bar per whole number of words; dashed and labelled:
    ``copy_min_words``, the copy threshold)."""

    fig, axes = plt.subplots(2, 2, figsize=(FIGURE_WIDTH, 6.6), layout="constrained")  # x labels clear of the lower titles
    axes = axes.ravel()
    inches = FIGURE_WIDTH / 2 - 0.5
    train = per_completion[per_completion.prompts == "train"]
    for ax, (col, title, xlabel) in zip(axes, MEMORISATION_PANELS):
        bins = _integer_bins(np.append(train[col].to_numpy(float), copy_min_words)) if xlabel == "words" else 30
        sns.histplot(data=train, x=col, hue="model", element="step", stat="density", common_norm=False, bins=bins,
                     ax=ax, legend=ax is axes[0])
        ax.set(title=wrap(title, inches, font_pt(key="axes.titlesize")), xlabel=xlabel)
    runs = axes[2]
    runs.axvline(copy_min_words, color="k", ls="--", lw=1, label=f"copy threshold ({copy_min_words} words)")
    runs.xaxis.set_major_locator(MaxNLocator(integer=True))
    runs.legend(loc="upper right")
    fig.suptitle(wrap("Completions of training-story prompts (cf. Rathod et al. 2024, Figures 11 and 18)", FIGURE_WIDTH,
                      font_pt(key="figure.titlesize")))
    return fig


def plot_continuation_health(pooled, max_new_tokens: int, context: int | None = None,
                             reference: str = "original endings", palette: Mapping[str, object] | None = None):
    """Two bar panels per model (rows of :func:`helpers.diversity.continuation_health.continuation_health` with ``model``,
    ``completions``, ``ended (%)``/``loops (%)`` and their ``CI low``/``CI high``): the share of greedy
    continuations that ended with end-of-text before the cap, and the share that contain a repeated 6-word run.

    The ``reference`` row (the stories' real endings) is drawn grey and hatched: its loop share is measured (with
    its interval), its "ended" share is 100 % by construction, drawn without an interval and labelled so. The cap
    is :func:`helpers.generation.completions.generate`'s: ``max_new_tokens`` new tokens, fewer where prompt +
    continuation would pass the model's ``context`` (which counts the prompt: a batch gets at most ``context``
    minus its longest prompt)."""

    label_width = max(text_inches(m, font_pt(key="ytick.labelsize")) for m in pooled.model) + 0.3
    # one panel above the other, the full width each: room for the note inside the first; suptitle clear of the titles
    fig, axes, _ = panels(2, FIGURE_WIDTH, 0.3 * len(pooled) + 1.3, extra_width=label_width, extra_height=0.8,
                               max_cols=1, sharey=True)
    is_ref = (pooled.model == reference).to_numpy()
    colours = sns.color_palette("viridis", int((~is_ref).sum()))  # each model its budget's colour where given
    colours = [(0.6, 0.6, 0.6) if r else palette[m] if palette and m in palette else colours.pop(0)
               for r, m in zip(is_ref, pooled.model)]
    for ax, key, title in [(axes[0], "ended", "ended with <|endoftext|> before the cap"),
                           (axes[1], "loops", "contain a repeated 6-word run")]:
        value = pooled[f"{key} (%)"].to_numpy(float)
        low = value - pooled[f"{key} CI low"].to_numpy(float)
        high = pooled[f"{key} CI high"].to_numpy(float) - value
        if key == "ended":  # the real endings end by construction: nothing measured, no interval
            low, high = np.where(is_ref, np.nan, low), np.where(is_ref, np.nan, high)
        bars = ax.barh(pooled.model, value, xerr=[low, high], color=colours, capsize=3)
        for bar, r in zip(bars.patches, is_ref):
            if r:
                bar.set_hatch("//")
                bar.set_edgecolor("white")
        if key == "ended" and is_ref.any():
            y = int(np.flatnonzero(is_ref)[0])
            ax.text(2, y, f"{reference}: 100 % by construction (no interval)", va="center", ha="left",
                    bbox=dict(facecolor="white", alpha=0.85, linewidth=0))
        ax.set(title=title, xlabel="% of greedy continuations (95 % Wilson CI)", xlim=(0, 100))
        ax.tick_params(labelleft=True)
    cap = f"at most {max_new_tokens} new tokens"
    if context is not None:
        cap = f"prompt + continuation ≤ {context} tokens (the model's context), continuation ≤ {max_new_tokens} tokens"
    fig.suptitle(wrap(f"Greedy continuations per decoder ({int(pooled.completions.iloc[0])} each)\n{cap}", FIGURE_WIDTH,
                      font_pt(key="figure.titlesize")))
    return fig


def plot_repetition_probes(history, palette: Mapping[str, object]):
    """Notebook 02's repetition fine-tuning, one line per budget over the fine-tuning steps (rows of
    :func:`helpers.training.unlikelihood.history_rows`): the share of held-out greedy continuations that loop
    (left, with its 95 % Wilson band when the rows carry ``loops low``/``high``) and the held-out loss (right); the
    checkpoint kept is circled. Step 0 is the plain model."""
    fig, axes, inches = panels(2, FIGURE_WIDTH / 2, 3.0, extra_height=0.8)
    for budget, h in history.groupby("budget", sort=False):
        c = palette.get(budget)
        for ax, col, scale in ((axes[0], "loops", 100.0), (axes[1], "valid loss", 1.0)):
            ax.plot(h.step, h[col] * scale, marker=".", color=c, label=budget)
            if col == "loops" and "loops low" in h:
                ax.fill_between(h.step, h["loops low"] * scale, h["loops high"] * scale, color=c, alpha=0.12, lw=0)
            kept = h[h.chosen]
            ax.scatter(kept.step, kept[col] * scale, s=80, facecolors="none", edgecolors=[c], linewidths=1.5)
    n = int(history["probe prompts"].iloc[0])
    axes[0].set(xlabel="fine-tuning step", ylabel="% that loop (repeated 6-word run)", ylim=(0, 100),
                title=wrap(f"greedy continuations of {n} held-out prompts (bands: 95 % intervals)", inches))
    axes[1].set(xlabel="fine-tuning step", ylabel="held-out loss (nats/token)", title=wrap("held-out loss", inches))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, title="budget", loc="outside lower center", ncol=len(labels), frameon=False)
    fig.suptitle(wrap("Repetition fine-tuning (sequence-level unlikelihood); circles: the checkpoint kept",
                      FIGURE_WIDTH, font_pt(key="figure.titlesize")))
    return fig
