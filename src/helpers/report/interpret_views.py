"""Views of a :class:`helpers.analysis.interpret.ModelAnalysis`: one neuron's top tokens in context as HTML (Rathod et al.
2024, Figures 20–21), attention heat maps per layer × head, and the per-head distance-correlation grid."""
from __future__ import annotations

import html as _html
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import PowerNorm

from helpers.analysis.interpret import ModelAnalysis

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

def tick_fontsize(n: int, inches: float, lo: float = 4.0, hi: float = 10.0) -> float:
    """A font size (points) for ``n`` tick labels side by side along ``inches``: 80 % of the room each label has
    (72 points to the inch), kept within [``lo``, ``hi``]."""
    return float(max(lo, min(hi, 0.8 * 72 * inches / max(n, 1))))


def plot_attention_grid(att: np.ndarray, labels: Sequence[str], types: Sequence[str], title: str = "", n: int | None = None):
    """Heat maps of every layer (rows) × head (columns) of one story's attention ``[L, H, T, T]``, the first ``n``
    tokens, with token labels (queries down, keys across). Colour: attention weight, square-root scale."""

    L, H, T, _ = att.shape
    n = min(n or T, T)
    labels = list(labels)[:n]
    size = max(3.0, min(6.5, 0.16 * n))  # inches per panel: room for a readable label per token
    fig, axes = plt.subplots(L, H, figsize=(size * H + 1.5, size * L + 1.0), squeeze=False, layout="constrained")
    fs = tick_fontsize(n, size)
    im = None
    for layer in range(L):
        for h in range(H):
            ax = axes[layer, h]
            im = ax.imshow(att[layer, h, :n, :n], cmap="viridis", norm=PowerNorm(0.5, vmin=0, vmax=1),
                           interpolation="nearest")
            ax.set_xticks(range(n))
            ax.set_yticks(range(n))
            ax.set_xticklabels(labels if layer == L - 1 else [], rotation=90, fontsize=fs)
            ax.set_yticklabels(labels if h == 0 else [], fontsize=fs)
            ax.tick_params(length=0, pad=1)
            ax.grid(False)
            ax.set_title(f"layer {layer} ({types[layer]}) · head {h}", fontsize=11)
    fig.colorbar(im, ax=axes, shrink=0.6, label="attention weight (√ scale)")
    if title:
        fig.suptitle(title, fontsize=16)
    return fig


def plot_correlation_grid(heads: "pd.DataFrame", threshold: float = 0.5):  # noqa: F821
    """r (lower triangle) per layer × head, one panel per model; cells with |r| > threshold are marked P (a
    positional head). The colour scale is symmetric around 0 and spans the data (±max |r|), not ±1, so that small
    correlations are not washed out; the colour bar says so."""
    models = list(dict.fromkeys(heads["model"]))
    n_heads, n_layers = heads["head"].nunique(), heads["layer"].nunique()
    fig, axes = plt.subplots(1, len(models), figsize=(len(models) * (2.2 + 0.75 * n_heads) + 1.2, 2.0 + 0.6 * n_layers),
                             squeeze=False, layout="constrained")
    r = heads["r (lower triangle)"].to_numpy(float)
    vmax = float(np.nanmax(np.abs(r))) if np.isfinite(r).any() else 1.0
    vmax = vmax if vmax > 0 else 1.0
    im = None
    for ax, m in zip(axes[0], models):
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
        ax.set_title(m)
        ax.grid(False)
    fig.colorbar(im, ax=axes, shrink=0.9, label=f"r (lower triangle; scale ±{vmax:.2f} = max |r|)")
    n_pos = int((np.abs(r) > threshold).sum())
    fig.suptitle(f"Correlation of attention weight with distance per head\n"
                 f"(a cell marked P is a positional head, |r| > {threshold}; here {n_pos} of {len(r)} heads)")
    return fig


# qualitative colours, one per word class, told apart without a legend lookup of neighbouring shades
CLASS_COLOURS = {
    "noun": "#1f77b4", "verb": "#ff7f0e", "adjective": "#2ca02c", "adverb": "#d62728", "name": "#9467bd",
    "pronoun": "#8c564b", "determiner": "#e377c2", "preposition": "#bcbd22", "conjunction": "#17becf",
    "auxiliary": "#000080", "number": "#ffd700", "punctuation": "#404040", "other": "#c7c7c7",
}


def plot_class_shares(pos_table: "pd.DataFrame", classes: Sequence[str], top_k: int):  # noqa: F821
    """Stacked bars of word-class shares of the MLP neurons' top tokens, one bar per model × layer (and the base
    rates), one panel per ``top tokens`` mode (``all``, ``distinct``); colours from :data:`CLASS_COLOURS`."""
    modes = list(dict.fromkeys(pos_table["top tokens"]))
    n_rows = max(int((pos_table["top tokens"] == m).sum()) for m in modes)
    fig, axes = plt.subplots(1, len(modes), figsize=(7.5 * len(modes), 0.55 * n_rows + 2), sharey=True,
                             squeeze=False, layout="constrained")
    colours = [CLASS_COLOURS.get(c, "#7f7f7f") for c in classes]
    for ax, mode in zip(axes[0], modes):
        part = pos_table[pos_table["top tokens"] == mode]
        labels = part["model"] + np.where(part["layer"] == "base rate", " · base rate", " · layer " + part["layer"])
        part.assign(label=labels).set_index("label")[list(classes)].iloc[::-1].plot.barh(
            stacked=True, ax=ax, width=0.8, color=colours, legend=mode == modes[-1])
        ax.set(xlabel=f"mean share of a neuron's top-{top_k} tokens", ylabel="", xlim=(0, 1),
               title=f"top-{top_k} tokens: {mode}")
    axes[0][-1].legend(bbox_to_anchor=(1.01, 1), loc="upper left", fontsize=9)
    fig.suptitle("Word classes of MLP neurons' top tokens, per layer, against the base rates")
    return fig


def plot_specialists(total: "pd.DataFrame", classes: Sequence[str], top_k: int, title: str = "",  # noqa: F821
                     chance_label: str = "expected by chance (all classes)"):
    """Specialist neurons per class as shares of the analysed neurons, one panel per ``top tokens`` mode and one bar
    per model in each group (``classes``, e.g. the specialist classes and "other class", then every specialist
    together), with the number expected by chance (``expected by chance / neurons``, a count over all classes) drawn
    as a black bar over the "all specialists" group. ``total`` has columns model, "top tokens", the ``classes``,
    specialists, neurons, "expected by chance" (notebook 06's summary)."""
    modes = list(dict.fromkeys(total["top tokens"]))
    models = list(dict.fromkeys(total["model"]))
    groups = [*classes, "all specialists"]
    fig, axes = plt.subplots(1, len(modes), figsize=(6.5 * len(modes), 4.4), sharey=True, squeeze=False,
                             layout="constrained")
    width = 0.8 / len(models)
    x = np.arange(len(groups))
    for ax, mode in zip(axes[0], modes):
        t = total[total["top tokens"] == mode].set_index("model").reindex(models)
        for i, model in enumerate(models):
            r = t.loc[model]
            shares = [r[c] / r["neurons"] for c in classes] + [r["specialists"] / r["neurons"]]
            xi = x + (i - (len(models) - 1) / 2) * width
            ax.bar(xi, shares, width, label=model, color=f"C{i}")
            ax.hlines(r["expected by chance"] / r["neurons"], xi[-1] - width / 2, xi[-1] + width / 2, color="k", lw=2.5,
                      label=chance_label if i == 0 else None)
        ax.set_xticks(x, groups, rotation=20)
        ax.set(ylabel="share of analysed neurons", xlabel="specialism", title=f"top-{top_k} tokens: {mode}")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), frameon=False)
    if title:
        fig.suptitle(title)
    return fig
