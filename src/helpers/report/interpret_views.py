"""Views of a :class:`helpers.analysis.interpret.ModelAnalysis`: one neuron's top tokens in context as HTML (Rathod et al.
2024, Figures 20–21), attention heat maps per layer × head, and the per-head distance-correlation grid."""
from __future__ import annotations

import html as _html
import math
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import PowerNorm

from helpers.analysis.interpret import ModelAnalysis, attention_maps, display_token
from helpers.analysis.attention_stats import POSITIONAL_ETA2
from helpers.analysis.interpret_tables import head_table
from helpers.analysis.lexicon import ATTENTION_CLASSES
from helpers.core.stats import wilson_interval
from helpers.report.figure_layout import (FIGURE_WIDTH, font_pt, legend_columns, legend_inches, panels, slant_if_crowded,
                                          text_inches, wrap)
from helpers.report.training_views import SEED_HATCHES, seed_styles

# ----------------------------------------------------------------------------- HTML

_HTML_STYLE = ("<style>.sbn{font-family:sans-serif;font-size:13px;margin-bottom:18px}"
               ".sbn table{border-collapse:collapse}.sbn td,.sbn th{border:1px solid #ddd;padding:3px 6px;"
               "text-align:left;vertical-align:top}.sbn th{background:#f3f3f3}.sbn .ctx{font-family:monospace;"
               "white-space:pre-wrap}.sbn .top{outline:2px solid #c00;font-weight:bold}.sbn h4{margin:6px 0}</style>")


def neuron_html(a: ModelAnalysis, layer: int, neuron: int, examples: list[dict], shares: dict[str, float] | None = None,
                title: str | None = None, width: int = 5) -> str:
    """One neuron's top tokens as in Rathod et al. 2024, Figures 20–21: each row shows the activation, the token and its
    context, every context token shaded by this neuron's activation on it (relative to the neuron's maximum) and
    the top token outlined."""
    vmax = max([e["activation"] for e in examples] + [1e-9])
    head = title or f"{a.name} · layer {layer} · neuron {neuron}"
    if shares:
        top = sorted(((v, c) for c, v in shares.items() if v > 0), reverse=True)[:4]
        head += " — top tokens: " + ", ".join(f"{c} {v:.0%}" for v, c in top)
    rows = []
    for e in examples:
        spans = []
        for r, v in zip(e["context rows"], e["context acts"]):
            piece = a.tokenizer.decode([int(a.ids[r])], clean_up_tokenization_spaces=False).replace("\n", "↵ ")
            alpha = max(0.0, min(1.0, v / vmax))
            cls = ' class="top"' if r == e["row"] else ""
            spans.append(f'<span{cls} style="background:rgba(255,140,0,{alpha:.2f})" title="{v:.3f}">'
                         f"{_html.escape(piece)}</span>")
        token = e["token"] if not e["word"] or e["word"] == e["token"] else f"{e['token']} ({e['word']})"
        rows.append(f"<tr><td>{e['rank']}</td><td>{e['activation']:.3f}</td><td>{_html.escape(token)}</td>"
                    f"<td>{_html.escape(e['class'])}</td><td class=\"ctx\">{''.join(spans)}</td></tr>")
    return (f'<div class="sbn"><h4>{_html.escape(head)}</h4><table><thead><tr><th>#</th><th>activation</th>'
            f"<th>token</th><th>class</th><th>context (±{width} tokens, shaded by activation)</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def html_page(parts: Sequence[str], title: str = "") -> str:
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{_html.escape(title)}</title>{_HTML_STYLE}"
            f"</head><body>{'<h3>' + _html.escape(title) + '</h3>' if title else ''}{''.join(parts)}</body></html>")


# ----------------------------------------------------------------------------- figures

def token_ticks(n: int, inches: float, lo: float = 7.0, hi: float = 10.0) -> tuple[int, float]:
    """``(step, size)`` for ``n`` token labels side by side along ``inches``: the largest font size (points) within
    [``lo``, ``hi``] at which each label has 80 % of its room (72 points to the inch) and every token is labelled
    (``step`` 1); where even ``lo`` leaves too little room, every ``step``-th token is labelled at ``lo``."""
    room = 0.8 * 72 * inches
    size = float(max(lo, min(hi, room / max(n, 1))))
    return max(1, math.ceil(n * size / room)), size


def word_labels(pieces: Sequence[str]) -> list[str]:
    """Per token of a story, the whole word it starts (sub-word pieces joined: ``["Ġse", "eks"]`` -> ``["seeks",
    ""]``), ``""`` for a token that continues a word. ``pieces`` are the decoded tokens with their leading spaces; a
    piece starts a word when it begins with a space or a line break, follows one, or is punctuation or the start
    token (``<...>``)."""
    out: list[str] = []
    for i, p in enumerate(pieces):
        prev = pieces[i - 1] if i else "\n"
        starts = (i == 0 or p[:1].isspace() or prev.endswith(("\n", ">")) or p.startswith("<")
                  or not p.strip()[:1].isalnum() or not prev.strip()[-1:].isalnum())
        if starts or not out:
            out.append(p.strip() or ("↵" if "\n" in p else "␣"))
        else:
            word_start = max(j for j, w in enumerate(out) if w)
            out[word_start] += p.strip()
            out.append("")
    return out


def readable_ticks(labels: Sequence[str], most: int) -> list[int]:
    """At most ``most`` token positions to label, spread over the story: positions whose label has two or more
    letters or digits (a word, not a fragment such as ``s`` or ``,``; or the start token), each at least
    ``len(labels) / most`` tokens after the one before."""
    gap = max(1, math.ceil(len(labels) / max(1, most)))
    ticks: list[int] = []
    for i, lab in enumerate(labels):
        if (lab.startswith("<") or sum(ch.isalnum() for ch in lab) >= 2) and (not ticks or i - ticks[-1] >= gap):
            ticks.append(i)
    return ticks


def _short(label: str, chars: int = 9) -> str:
    return label if len(label) <= chars else label[:chars - 1] + "…"


HEAD_CLASS_COLOURS = {"positional": "#1b6ca8", "sink": "#7b3294", "content": "#b5651d", "mixed": "#1a9641",
                      "diffuse": "#555555"}


def plot_attention_grid(att: np.ndarray, labels: Sequence[str], types: Sequence[str], title: str = "",
                        n: int | None = None, max_cols: int = 4,
                        head_classes: Mapping[tuple[int, int], str] | None = None):
    """Heat maps of every layer × head of one story's attention ``[L, H, T, T]``, the first ``n`` tokens (queries
    down, the tokens they attend to across). Colour: attention weight, square-root scale, with its colour bar. A
    layer's heads sit side by side, at most ``max_cols`` to a row, in a figure of the print width. Only a few tokens
    are labelled, words of two or more letters spread over the story (:func:`readable_ticks`; ``labels`` may be
    :func:`word_labels`, ``""`` on a word's later pieces), in type at least 8 pt; each panel is titled with its
    layer, head and, given ``head_classes`` (``{(layer, head): "positional" | "sink" | "content" | "mixed" | "diffuse"}``, the
    ``label`` of :func:`helpers.analysis.interpret_tables.head_table`), the head's class."""
    L, H, T, _ = att.shape
    n = min(n or T, T)
    labels = [str(lab) for lab in list(labels)[:n]]
    cols = min(H, max_cols)
    per_layer = math.ceil(H / cols)
    rows = L * per_layer
    fs = max(8.0, min(9.0, font_pt(key="ytick.labelsize") - 1))
    label_width = max((text_inches(_short(lab), fs) for lab in labels), default=0.0) + 0.15
    size = (FIGURE_WIDTH - label_width - 1.25) / cols  # inches per panel, the colour bar and its label beside
    ticks = readable_ticks(labels, max(3, int(size * 72 / (fs * 1.4))))
    title_fs = max(8.0, min(font_pt(key="axes.titlesize"), 9.5))
    fig, axes = plt.subplots(rows, cols, figsize=(FIGURE_WIDTH, rows * (size + 0.5) + label_width + 0.9),
                             squeeze=False, layout="constrained")
    im = None
    for layer in range(L):
        for h in range(H):
            r, c = layer * per_layer + h // cols, h % cols
            ax = axes[r, c]
            im = ax.imshow(att[layer, h, :n, :n], cmap="viridis", norm=PowerNorm(0.5, vmin=0, vmax=1),
                           interpolation="nearest")
            ax.set_xticks(ticks)
            ax.set_yticks(ticks)
            ax.set_xticklabels([_short(labels[i]) for i in ticks] if r == rows - 1 else [], rotation=90, fontsize=fs)
            ax.set_yticklabels([_short(labels[i]) for i in ticks] if c == 0 else [], fontsize=fs)
            ax.tick_params(length=2, pad=1)
            ax.grid(False)
            kind = (head_classes or {}).get((layer, h))
            head = f"L{layer} {types[layer]} · H{h}"
            ax.set_title(head + (f"\n{kind}" if kind else ""), fontsize=title_fs,
                         color=HEAD_CLASS_COLOURS.get(kind, "black"))
    drawn = [ax for ax in axes.ravel() if ax.images]
    for ax in axes.ravel():
        if not ax.images:  # a row's empty cells where the heads wrap
            ax.remove()
    bar = fig.colorbar(im, ax=drawn, shrink=0.5, label="attention weight (√ scale)")
    bar.set_ticks([0, 0.05, 0.2, 0.5, 1.0])
    fig.supxlabel("token attended to (key) →", fontsize=font_pt(key="axes.labelsize"))
    fig.supylabel("← token attending (query)", fontsize=font_pt(key="axes.labelsize"))
    if title:
        fig.suptitle(wrap(title, FIGURE_WIDTH, font_pt(key="figure.titlesize")))
    return fig


def attention_figure(a: ModelAnalysis, story: int, n: int, threshold: float = POSITIONAL_ETA2, title: str | None = None):
    """Notebook 06's attention maps of one model: :func:`plot_attention_grid` of held-out story ``story`` (its first
    ``n`` tokens), the tokens labelled by the words they start (:func:`word_labels`) and each head titled with its
    class over all analysed stories (:func:`helpers.analysis.interpret_tables.head_table` at ``threshold``)."""
    whole = a.stories[story].ids
    ids = whole[:n]
    att = attention_maps(a.model, ids)
    pieces = [display_token(a.tokenizer, t) if i == 0 else  # the whole story: a word cut by the window keeps its name
              a.tokenizer.decode([int(t)], clean_up_tokenization_spaces=False) for i, t in enumerate(whole)]
    heads = head_table(a, threshold, n_boot=0)  # the classes only: no interval needed
    classes = {(int(r.layer), int(r.head)): str(r.label) for r in heads.itertuples(index=False)}
    title = title or (f"{a.name}: attention of every layer × head, held-out story {story} (first {len(ids)} tokens); "
                      "head classes over all analysed stories")
    return plot_attention_grid(att, word_labels(pieces)[:len(ids)], a.layer_types, title=title, n=len(ids),
                               head_classes=classes)


def plot_correlation_grid(heads: "pd.DataFrame", threshold: float = 0.5):  # noqa: F821
    """r (lower triangle) per layer × head, one panel per model; cells with |r| > threshold are marked P (a
    positional head). The colour scale is symmetric around 0 and spans the data (±max |r|), not ±1, so that small
    correlations are not washed out; the colour bar says so. Panels sit side by side as far as the print width
    allows, then wrap into rows."""
    models = list(dict.fromkeys(heads["model"]))
    n_heads, n_layers = heads["head"].nunique(), heads["layer"].nunique()
    fig, axes, inches = panels(len(models), max(2.2, 0.45 * n_heads + 0.9), 0.45 * n_layers + 1.0, extra_width=1.0,
                               extra_height=1.0)
    r = heads["r (lower triangle)"].to_numpy(float)
    vmax = float(np.nanmax(np.abs(r))) if np.isfinite(r).any() else 1.0
    vmax = vmax if vmax > 0 else 1.0
    im = None
    for ax, m in zip(axes, models):
        g = heads[heads["model"] == m]
        piv = g.pivot(index="layer", columns="head", values="r (lower triangle)")
        im = ax.imshow(piv.values, cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto")
        for (li, hi), v in np.ndenumerate(piv.values):
            ax.text(hi, li, f"{v:+.2f}" + ("\nP" if abs(v) > threshold else ""), ha="center", va="center", fontsize=8,
                    color="white" if abs(v) > 0.6 * vmax else "black")
        types = g.drop_duplicates("layer").set_index("layer")["layer type"]
        ax.set_yticks(range(len(piv.index)))
        ax.set_yticklabels([f"{li} ({types[li]})" for li in piv.index])
        ax.set_xticks(range(len(piv.columns)))
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(wrap(m, inches, font_pt(key="axes.titlesize")))
        ax.grid(False)
    rows = axes[-1].get_subplotspec().rowspan.stop  # rows of panels: the colour bar's label spans their height
    fig.colorbar(im, ax=axes, shrink=0.9, label=wrap(f"r (lower triangle; scale ±{vmax:.2f} = max |r|)",
                                                     0.8 * rows * (0.45 * n_layers + 1.0), font_pt(key="axes.labelsize")))
    n_pos = int((np.abs(r) > threshold).sum())
    fig.suptitle(wrap(f"Correlation of attention weight with distance per head\n"
                      f"(a cell marked P is a positional head, |r| > {threshold}; here {n_pos} of {len(r)} heads)",
                      fig.get_figwidth(), font_pt(key="figure.titlesize")))
    return fig


def plot_head_kind_grid(heads: "pd.DataFrame", threshold: float = POSITIONAL_ETA2):  # noqa: F821
    """Offset η² (√weights) per layer × head (0 to 1), one panel per model; each cell is marked with the head's graded
    class: P positional (η² ≥ threshold), S sink, C content, M mixed, D diffuse (nearly even attention)."""
    models = list(dict.fromkeys(heads["model"]))
    n_heads, n_layers = heads["head"].nunique(), heads["layer"].nunique()
    fig, axes, inches = panels(len(models), max(2.2, 0.45 * n_heads + 0.9), 0.45 * n_layers + 1.0, extra_width=1.0,
                               extra_height=1.0)
    mark = {"positional": "P", "sink": "S", "content": "C", "mixed": "M", "diffuse": "D"}
    im = None
    for ax, m in zip(axes, models):
        g = heads[heads["model"] == m]
        piv = g.pivot(index="layer", columns="head", values="offset η²")
        kinds = g.pivot(index="layer", columns="head", values="label")
        im = ax.imshow(piv.values, cmap="viridis", vmin=0, vmax=1, aspect="auto")
        for (li, hi), v in np.ndenumerate(piv.values):
            ax.text(hi, li, f"{v:.2f}\n{mark.get(kinds.values[li, hi], '?')}", ha="center", va="center", fontsize=8,
                    color="black" if v > 0.6 else "white")
        types = g.drop_duplicates("layer").set_index("layer")["layer type"]
        ax.set_yticks(range(len(piv.index)))
        ax.set_yticklabels([f"{li} ({types[li]})" for li in piv.index])
        ax.set_xticks(range(len(piv.columns)))
        ax.set(xlabel="head", ylabel="layer")
        ax.set_title(wrap(m, inches, font_pt(key="axes.titlesize")))
        ax.grid(False)
    fig.colorbar(im, ax=axes, shrink=0.9, label="offset η²")
    n_pos = int((heads["label"] == "positional").sum())
    fig.suptitle(wrap(f"Share of each head's attention variance (√weights) explained by the offset alone (η²)\n"
                      f"P positional (η² ≥ {threshold}), S sink, C content, M mixed, D diffuse; {n_pos} of "
                      f"{len(heads)} heads positional",
                      fig.get_figwidth(), font_pt(key="figure.titlesize")))
    return fig


# qualitative colours, one per word class, told apart without a legend lookup of neighbouring shades
CLASS_COLOURS = {
    "noun": "#1f77b4", "verb": "#ff7f0e", "adjective": "#2ca02c", "adverb": "#d62728", "name": "#9467bd",
    "pronoun": "#8c564b", "determiner": "#e377c2", "preposition": "#bcbd22", "conjunction": "#17becf",
    "auxiliary": "#000080", "number": "#ffd700", "punctuation": "#404040", "other": "#c7c7c7",
}


def plot_class_shares(pos_table: "pd.DataFrame", classes: Sequence[str], top_k: int):  # noqa: F821
    """Stacked bars of word-class shares of the MLP neurons' top tokens, one bar per model × layer (and the base
    rates), one panel per ``top tokens`` mode (``all``, ``distinct``); colours from :data:`CLASS_COLOURS`. The
    panels share the row labels; the legend sits below them."""
    modes = list(dict.fromkeys(pos_table["top tokens"]))
    n_rows = max(int((pos_table["top tokens"] == m).sum()) for m in modes)
    rows = {mode: pos_table[pos_table["top tokens"] == mode] for mode in modes}
    labels = {mode: part["model"] + np.where(part["layer"] == "base rate", " · base rate", " · layer " + part["layer"])
              for mode, part in rows.items()}
    tick = font_pt(key="ytick.labelsize")
    label_width = max(text_inches(lab, tick) for lab_set in labels.values() for lab in lab_set) + 0.3
    ncol = legend_columns(classes)
    fig, axes, inches = panels(len(modes), 2.3, 0.3 * n_rows + 1.4, extra_width=label_width,
                               extra_height=0.5 + legend_inches(classes, ncol), sharey=True)
    colours = [CLASS_COLOURS.get(c, "#7f7f7f") for c in classes]
    for ax, mode in zip(axes, modes):
        rows[mode].assign(label=labels[mode]).set_index("label")[list(classes)].iloc[::-1].plot.barh(
            stacked=True, ax=ax, width=0.8, color=colours, legend=False)
        ax.set(xlabel=wrap(f"mean share of a neuron's top-{top_k} tokens", inches, font_pt(key="axes.labelsize")),
               ylabel="", xlim=(0, 1), title=wrap(f"top-{top_k} tokens: {mode}", inches, font_pt(key="axes.titlesize")))
    handles, names = axes[-1].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=ncol, frameon=False)
    fig.suptitle(wrap("Word classes of MLP neurons' top tokens, per layer, against the base rates", fig.get_figwidth(),
                      font_pt(key="figure.titlesize")))
    return fig


def plot_specialists(total: "pd.DataFrame", classes: Sequence[str], top_k: int, title: str = "",  # noqa: F821
                     chance_label: str = "expected by chance (all classes)", confidence: float = 0.95,
                     palette: Mapping[str, object] | None = None):
    """Specialist neurons per class as shares of the analysed neurons, one panel per ``top tokens`` mode and one bar
    per model in each group (``classes``, e.g. the specialist classes and "other class", then every specialist
    together), with the number expected by chance (``expected by chance / neurons``, a count over all classes) drawn
    as a black bar over the "all specialists" group. ``total`` has columns model, "top tokens", the ``classes``,
    specialists, neurons, "expected neurons by chance" (notebook 06's summary). Every bar carries the Wilson
    ``confidence`` interval of its share (neurons as independent draws; for "all specialists" the summary's "share CI
    low"/"share CI high"). The legend sits below the panels. ``palette``: each model's colour (its budget's, as in
    every figure; :func:`helpers.report.training_views.profile_palette`), else matplotlib's cycle."""
    modes = list(dict.fromkeys(total["top tokens"]))
    models = list(dict.fromkeys(total["model"]))
    groups = [*classes, "all specialists"]
    ncol = legend_columns([*models, chance_label])
    fig, axes, inches = panels(len(modes), 3.2, 3.8, extra_height=(0.7 if title else 0.2)
                               + legend_inches([*models, chance_label], ncol), sharey=True)
    width = 0.8 / len(models)
    x = np.arange(len(groups))
    for ax, mode in zip(axes, modes):
        t = total[total["top tokens"] == mode].set_index("model").reindex(models)
        for i, model in enumerate(models):
            r = t.loc[model]
            shares = [r[c] / r["neurons"] for c in classes] + [r["specialists"] / r["neurons"]]
            xi = x + (i - (len(models) - 1) / 2) * width
            ax.bar(xi, shares, width, label=model, color=(palette or {}).get(model, f"C{i}"), edgecolor="white",
                   hatch=SEED_HATCHES[seed_styles(models)[model]] if palette else None)  # a budget's seeds: one colour
            counts = [int(r[c]) for c in classes] + [int(r["specialists"])]
            ci = [wilson_interval(k, int(r["neurons"]), confidence) for k in counts]  # neurons as independent draws
            if "share CI low" in t.columns:  # the summary's own interval of "all specialists" (specialist_totals)
                ci[-1] = (r["share CI low"], r["share CI high"])
            ax.errorbar(xi, shares, yerr=[[s - lo for s, (lo, _) in zip(shares, ci)], [hi - s for s, (_, hi) in zip(shares, ci)]],
                        fmt="none", ecolor="0.25", capsize=2, lw=1)
            ax.hlines(r["expected neurons by chance"] / r["neurons"], xi[-1] - width / 2, xi[-1] + width / 2, color="k", lw=2.5,
                      label=chance_label if i == 0 else None)
        ax.set_xticks(x, groups)
        if not slant_if_crowded(ax, groups, inches):
            ax.tick_params(axis="x", rotation=20)
        ax.set(ylabel="share of analysed neurons", xlabel="specialism", title=f"top-{top_k} tokens: {mode}")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol, frameon=False)
    if title:
        fig.suptitle(wrap(title, fig.get_figwidth(), font_pt(key="figure.titlesize")))
    return fig


def plot_target_classes(grouped: "pd.DataFrame", models: Sequence[str],  # noqa: F821
                        classes: Sequence[str] = tuple(ATTENTION_CLASSES), grouping: str = "span"):
    """The class of each query's strongest attention target, one panel per model: per class, the mean share of the
    targets of each head group of ``grouping`` (:func:`helpers.analysis.interpret_tables.group_target_classes`: by
    default the short- and long-range heads) beside the class's base rate among all story tokens (the
    ``reference`` rows). Each group has one colour in every panel; one legend ("heads") below the panels."""
    part = grouped[grouped["grouping"].isin(["reference", grouping])]
    groups = list(dict.fromkeys(part["group"]))
    colour = {g: f"C{i}" for i, g in enumerate(groups)}
    ncol = legend_columns(groups)
    fig, axes, inches = panels(len(models), 3.2, 4.0, extra_height=legend_inches(groups, ncol, title=True), sharey=True)
    for ax, name in zip(axes, models):
        g = part[part["model"] == name].set_index("group")[list(classes)]
        g.T.plot.bar(ax=ax, width=0.8, color=[colour[k] for k in g.index], legend=False)
        ax.set(title=wrap(f"{name}: class of each query's strongest target", inches, font_pt(key="axes.titlesize")),
               ylabel="share of targets", xlabel="")
    handles = {}
    for ax in axes:
        handles.update(zip(*reversed(ax.get_legend_handles_labels())))
    fig.legend(list(handles.values()), list(handles), title="heads", loc="outside lower center", ncol=ncol,
               frameon=False)
    return fig
