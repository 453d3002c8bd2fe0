"""The print rule of the report figures, and the layout helpers that keep it.

A figure in a paper is printed at most :data:`PRINT_WIDTH` (7 in) wide. The rule: once the saved figure
(:func:`helpers.report.reporting.save_figure` saves with ``bbox_inches="tight"``) is scaled down to that width, no
text it draws (tick labels, axis labels, titles, legends, annotations) is smaller than :data:`MIN_PRINTED_PT`
points. :func:`print_problem` checks it (``save_figure`` warns when a figure breaks it; ``tests/test_plots.py``
asserts it for every plotting helper).

The helpers keep it by making figures at most :data:`FIGURE_WIDTH` wide (the tight bounding box adds 0.1 in on
each side) at the style's own font sizes: panels that do not fit side by side wrap into more rows
(:func:`panels`), long titles and labels wrap onto more lines (:func:`wrap`), legends get as many columns as fit
(:func:`legend_columns`). :func:`file_stem` makes a figure's name a file name usable in LaTeX and the shell.
"""
from __future__ import annotations

import math
import re
from typing import Iterable

import matplotlib.pyplot as plt
from matplotlib import rcParams
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextPath

PRINT_WIDTH = 7.0  # inches: the widest a figure is printed (a paper's text width is 6-7 in)
MIN_PRINTED_PT = 6.5  # points: the smallest text that stays readable on paper
FIGURE_WIDTH = 6.8  # inches: the widest figure the helpers make (+ 0.1 in tight-bbox pad each side = 7 in)


def font_pt(size: float | str | None = None, key: str = "font.size") -> float:
    """``size`` in points (``"large"``, ``11``); None: the current style's ``rcParams[key]``
    (``"axes.titlesize"``, ``"legend.fontsize"``, ...)."""
    return float(FontProperties(size=rcParams[key] if size is None else size).get_size_in_points())


def text_inches(text: str, fontsize: float | str | None = None) -> float:
    """How wide ``text`` (its widest line) is, in inches, at ``fontsize`` (default: the style's ``font.size``), in the
    style's font."""
    prop = FontProperties(size=font_pt(fontsize))
    return max((TextPath((0, 0), line, prop=prop).get_extents().width if line.strip() else 0.0)
               for line in str(text).split("\n")) / 72


def wrap(text: str, inches: float, fontsize: float | str | None = None) -> str:
    """``text`` with each of its lines broken after a space or a ``+`` (``baby-500k+tiny-500k``) so that it is at
    most ``inches`` wide at ``fontsize`` (default: the style's ``font.size``); lines that fit, and pieces wider
    than a line, are left whole."""
    out = []
    for line in str(text).split("\n"):
        if text_inches(line, fontsize) <= inches:
            out.append(line)
            continue
        cur = ""
        for piece in re.split(r"(?<=[ +])", line):
            if cur.strip() and text_inches((cur + piece).rstrip(), fontsize) > inches:
                out.append(cur.rstrip())
                cur = piece.lstrip()
            else:
                cur += piece
        out.append(cur.rstrip())
    return "\n".join(out)


def fit_text(text: str, narrow: str, inches: float, key: str = "font.size") -> str:
    """``text`` where it fits in ``inches`` at the style's ``rcParams[key]`` size, else ``narrow`` (the same words
    over more lines, broken where they read best)."""
    return text if text_inches(text, font_pt(key=key)) <= inches else narrow


def row_positions(labels: list[str]) -> list[float]:
    """y positions of rows labelled ``labels`` (top to bottom once the axis is inverted): one unit apart, plus 0.7
    per extra line of a label, so that a label over more lines keeps clear of its neighbours."""
    ys: list[float] = []
    y, prev = 0.0, 1
    for lab in labels:
        lines = lab.count("\n") + 1
        y += 1.0 + 0.35 * (lines - 1) + 0.35 * (prev - 1) if ys else 0.0
        ys.append(y)
        prev = lines
    return ys


def slant_if_crowded(ax, labels: Iterable[str], inches: float) -> bool:
    """Slant the x tick labels of ``ax`` (30°, right-aligned under their tick) where ``labels`` side by side would
    take more than 80 % of the ``inches`` the axis is wide at the style's tick size; True when it did."""
    labels = [str(lab) for lab in labels]
    widest = max((text_inches(lab, font_pt(key="xtick.labelsize")) for lab in labels), default=0.0)
    if widest * len(labels) <= 0.8 * inches:
        return False
    ax.tick_params(axis="x", rotation=30)
    for t in ax.get_xticklabels():
        t.set_horizontalalignment("right")
        t.set_rotation_mode("anchor")
    return True


def legend_columns(labels: Iterable[str], width: float = FIGURE_WIDTH, fontsize: float | str | None = None,
                   at_most: int | None = None) -> int:
    """How many columns a legend of ``labels`` may have and stay within ``width`` inches at ``fontsize`` (default:
    the style's ``legend.fontsize``): every column as wide as the widest entry, with its handle and spacing."""
    labels = list(labels)
    fs = font_pt(fontsize, "legend.fontsize")
    entry = max((text_inches(lab, fs) for lab in labels), default=0.0) + 4.8 * fs / 72  # handle, pad, spacing
    n = max(1, int(width // entry)) if entry > 0 else len(labels)
    return max(1, min(n, len(labels), at_most or len(labels)))


def legend_inches(labels: Iterable[str], ncol: int, fontsize: float | str | None = None, title: bool = False) -> float:
    """About how tall a legend of ``labels`` in ``ncol`` columns is, in inches, at ``fontsize`` (default: the style's
    ``legend.fontsize``), with a ``title`` line or not: what a figure adds to its height for a legend below it."""
    labels = list(labels)
    rows = math.ceil(len(labels) / max(1, ncol)) + (1 if title else 0)
    return 0.15 + rows * 1.45 * font_pt(fontsize, "legend.fontsize") / 72


def columns(n: int, panel_width: float, extra_width: float = 0.0, width: float = FIGURE_WIDTH,
            max_cols: int | None = None) -> int:
    """How many of ``n`` panels, each ``panel_width`` inches, fit side by side in ``width`` less ``extra_width``
    (labels on the left, a colour bar); at least one."""
    fit = int((width - extra_width + 1e-9) // panel_width)
    return max(1, min(n, fit, max_cols or n))


def panels(n: int, panel_width: float, panel_height: float, extra_width: float = 0.0, extra_height: float = 0.0,
           width: float = FIGURE_WIDTH, max_cols: int | None = None, stretch: bool = True, **subplots_kw):
    """A constrained-layout figure of ``n`` panels in as many columns as fit (:func:`columns`), wrapping into
    more rows; the figure is ``width`` wide (``stretch=False``: ``columns × panel_width + extra_width`` where that
    is less) and ``rows × panel_height + extra_height`` tall. Returns ``(fig, axes, inches)``: ``axes`` the ``n``
    panels in reading order (the grid's unused cells removed), ``inches`` what a panel's title may span (its share
    of the width less 0.4 in for tick labels)."""
    cols = columns(n, panel_width, extra_width, width, max_cols)
    rows = math.ceil(n / cols)
    fig_width = width if stretch else min(width, cols * panel_width + extra_width)
    fig, grid = plt.subplots(rows, cols, figsize=(fig_width, rows * panel_height + extra_height), squeeze=False,
                             layout="constrained", **subplots_kw)
    axes = list(grid.ravel())
    for ax in axes[n:]:
        ax.remove()
    return fig, axes[:n], (fig_width - extra_width) / cols - 0.4


def _renderer(fig):
    canvas = fig.canvas
    if not hasattr(canvas, "get_renderer"):  # a canvas that cannot measure: draw on Agg, then give the old one back
        FigureCanvasAgg(fig)
        renderer = fig.canvas.get_renderer()
        fig.set_canvas(canvas)
        return renderer
    return canvas.get_renderer()


def drawn_texts(fig) -> tuple[list[tuple[float, str]], tuple[float, float]]:
    """Every piece of text ``fig`` draws, as ``(font size in points, text)``, and the size in inches
    ``(width, height)`` it is saved at with ``bbox_inches="tight"`` (its tight bounding box plus the pad)."""
    renderer = _renderer(fig)
    seen: list[tuple[float, str]] = []
    draw_text, draw_tex = renderer.draw_text, renderer.draw_tex

    def record_text(gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if str(s).strip():
            seen.append((float(prop.get_size_in_points()), str(s)))
        return draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    def record_tex(gc, x, y, s, prop, angle, *, mtext=None):
        if str(s).strip():
            seen.append((float(prop.get_size_in_points()), str(s)))
        return draw_tex(gc, x, y, s, prop, angle, mtext=mtext)

    renderer.draw_text, renderer.draw_tex = record_text, record_tex
    try:
        fig.draw(renderer)
    finally:
        del renderer.draw_text, renderer.draw_tex
    box = fig.get_tightbbox(renderer)
    pad = 2 * float(rcParams["savefig.pad_inches"])
    return seen, (float(box.width) + pad, float(box.height) + pad)


def smallest_printed_text(fig, width: float = PRINT_WIDTH) -> tuple[float, str, float]:
    """``(points, text, saved width in inches)``: the smallest text of ``fig`` once the saved figure is scaled to
    at most ``width`` inches wide (its font size × min(1, ``width`` / saved width)); ``(inf, "", w)`` when it draws
    no text."""
    texts, (w, _h) = drawn_texts(fig)
    scale = min(1.0, width / w)
    if not texts:
        return math.inf, "", w
    pt, s = min(texts, key=lambda t: t[0])
    return pt * scale, s, w


def print_problem(fig, width: float = PRINT_WIDTH, min_pt: float = MIN_PRINTED_PT) -> str | None:
    """None when ``fig`` keeps the print rule (every text at least ``min_pt`` points once the saved figure is
    printed at most ``width`` inches wide); otherwise what breaks it."""
    pt, s, w = smallest_printed_text(fig, width)
    if pt >= min_pt - 1e-9:
        return None
    short = s if len(s) <= 40 else s[:37] + "..."
    return (f"saved {w:.1f} in wide, printed {min(w, width):g} in wide its smallest text ({short!r}) is {pt:.1f} pt, "
            f"under {min_pt:g} pt")


def file_stem(name: str) -> str:
    """A figure's name as a file name usable in LaTeX and the shell: ``" (seed 7)"`` -> ``"_seed-7"``, other spaces
    -> ``_``, and no character outside letters, digits and ``. _ + -`` (``"06_maps_tiny-1M (seed 7)"`` ->
    ``"06_maps_tiny-1M_seed-7"``)."""
    stem = re.sub(r"\s*\(seed (\d+)\)", r"_seed-\1", name)
    stem = re.sub(r"[^A-Za-z0-9._+-]+", "_", stem.replace("(", "").replace(")", ""))
    return stem.strip("_") or "figure"
