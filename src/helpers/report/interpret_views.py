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

def plot_attention_grid(att: np.ndarray, labels: Sequence[str], types: Sequence[str], title: str = "", n: int | None = None):
    """Heat maps of every layer (rows) × head (columns) of one story's attention ``[L, H, T, T]``, the first ``n``
    tokens, with token labels (queries down, keys across). Colour: attention weight, square-root scale."""

    L, H, T, _ = att.shape
    n = min(n or T, T)
    labels = list(labels)[:n]
    size = max(2.6, min(4.0, 0.11 * n))
    fig, axes = plt.subplots(L, H, figsize=(size * H + 1, size * L + 0.6), squeeze=False, layout="constrained")
    fs = max(3.0, min(7.0, 220 / max(n, 1)))
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
            ax.tick_params(length=0)
            ax.grid(False)
            ax.set_title(f"layer {layer} ({types[layer]}) · head {h}", fontsize=8)
    fig.colorbar(im, ax=axes, shrink=0.6, label="attention weight (√ scale)")
    if title:
        fig.suptitle(title)
    return fig


def plot_correlation_grid(heads: "pd.DataFrame", threshold: float = 0.5):  # noqa: F821
    """r (lower triangle) per layer × head, one panel per model; cells with |r| > threshold are marked P."""
    models = list(dict.fromkeys(heads["model"]))
    n_heads, n_layers = heads["head"].nunique(), heads["layer"].nunique()
    fig, axes = plt.subplots(1, len(models), figsize=(len(models) * (2.2 + 0.75 * n_heads) + 1.2, 2.0 + 0.6 * n_layers),
                             squeeze=False, layout="constrained")
    im = None
    for ax, m in zip(axes[0], models):
        g = heads[heads["model"] == m]
        piv = g.pivot(index="layer", columns="head", values="r (lower triangle)")
        im = ax.imshow(piv.values, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
        for (li, hi), v in np.ndenumerate(piv.values):
            ax.text(hi, li, f"{v:+.2f}" + ("\nP" if abs(v) > threshold else ""), ha="center", va="center", fontsize=8)
        types = g.drop_duplicates("layer").set_index("layer")["layer type"]
        ax.set_yticks(range(len(piv.index)))
        ax.set_yticklabels([f"{li} ({types[li]})" for li in piv.index])
        ax.set_xticks(range(len(piv.columns)))
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(m)
        ax.grid(False)
    fig.colorbar(im, ax=axes, shrink=0.9, label="r (lower triangle)")
    fig.suptitle(f"Correlation of attention weight with distance per head (P: |r| > {threshold} → positional)")
    return fig
