"""Figures of notebook 02b's architecture studies: the loss-vs-compute plot with its frontier and fitted power law
(:mod:`helpers.analysis.architecture` computes them), one style per run shape."""
from __future__ import annotations

import math
from collections import Counter
from typing import Mapping

import numpy as np
from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter, NullLocator

from helpers.analysis.architecture import SHAPE_KEYS, PowerLaw

# Okabe–Ito colours (colour-blind safe), one per width; line style per depth, marker per head count
_WIDTH_COLOURS = ("#E69F00", "#0072B2", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442")
_DEPTH_STYLES = ("-", "--", ":", "-.")
_HEAD_MARKERS = ("o", "^", "s", "D", "v", "P", "X")


def run_styles(shapes: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, str]]:
    """Plot style per run name: colour from its width, line style from its depth, marker from its heads.

    Runs that differ in any one of hidden, layers or heads differ in the matching attribute, so no two runs
    of a grid share colour, style and marker (a 3×2×3 grid is told apart without 18 colours).
    """
    counts = {k: Counter(int(s[k]) for s in shapes.values()) for k in SHAPE_KEYS}
    # the most common value of each key gets the plainest style (circle, solid line); ties by value
    values = {k: sorted(c, key=lambda v: (-c[v], v)) for k, c in counts.items()}
    for key, pool in [("hidden", _WIDTH_COLOURS), ("layers", _DEPTH_STYLES), ("heads", _HEAD_MARKERS)]:
        if len(values[key]) > len(pool):
            raise ValueError(f"{len(values[key])} distinct {key} values; the figure styles {len(pool)}")
    return {name: {"color": _WIDTH_COLOURS[values["hidden"].index(int(s["hidden"]))],
                   "ls": _DEPTH_STYLES[values["layers"].index(int(s["layers"]))],
                   "marker": _HEAD_MARKERS[values["heads"].index(int(s["heads"]))]}
            for name, s in shapes.items()}


def plain_log_ticks(lo: float, hi: float, min_ticks: int = 4) -> list[float]:
    """Round ticks spanning [lo, hi] for a log axis whose range is less than a decade.

    Matplotlib's log locator puts one or two ticks (written 5×10⁰) on such a range; these are plain numbers at
    the coarsest 1-2-2.5-5 step that still puts at least ``min_ticks`` ticks within the range.
    """
    if not (0 < lo < hi and math.isfinite(hi)):
        raise ValueError("need 0 < lo < hi")
    top = 10 ** math.ceil(math.log10(hi - lo))
    for step in (top * m / d for d in (1, 10, 100, 1000) for m in (1, 0.5, 0.25, 0.2)):
        first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
        if last - first + 1 >= min_ticks:
            return [round(k * step, 10) for k in range(first, last + 1)]
    raise ValueError(f"no round step gives {min_ticks} ticks in [{lo}, {hi}]")


def plot_loss_vs_flops(ax, points, frontier, fit: PowerLaw, shapes: Mapping[str, Mapping[str, int]]) -> None:
    """Held-out loss vs training compute of every evaluation of every run, the frontier and the fitted law.

    ``points`` and ``frontier`` are data frames with ``run``, ``flops`` and ``valid_loss`` (``frontier``: the points
    the law was fitted on, circled: :func:`helpers.analysis.architecture.run_frontier`'s one point per run);
    ``shapes`` maps each run to its hidden/layers/heads (:func:`run_styles`). The y axis is logarithmic with
    plain-number ticks; the fit's label names the confidence level of the exponent's interval. A law that was not
    fitted (NaN exponent: a frontier of one run) draws no line.
    """
    styles = run_styles(shapes)
    for name, g in points.groupby("run", sort=False):
        st = styles[name]
        ax.plot(g.flops, g.valid_loss, color=st["color"], ls=st["ls"], marker=st["marker"], ms=4, lw=1.2,
                alpha=0.85, label=name)
    ax.plot(frontier.flops, frontier.valid_loss, "o", mfc="none", mec="k", ms=8, mew=1.2, ls="none",
            label="frontier (circled: the fitted points)")
    cs = np.logspace(np.log10(frontier.flops.min()), np.log10(frontier.flops.max()), 50)
    lo, hi = fit.ci
    ci = (f"{fit.confidence:.0%} CI [{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) else "no CI (< 3 points)")
    fitted = math.isfinite(fit.exponent)
    if fitted:
        ax.plot(cs, fit(cs), "k--", lw=1.5, label=f"fit L = a·C^(−α): α = {fit.exponent:.3f}, {ci}")
    ax.set(xscale="log", yscale="log", xlabel="training compute C (FLOPs)", ylabel="held-out loss (nats/token)")
    y = np.concatenate([np.asarray(points.valid_loss, float), np.asarray(fit(cs) if fitted else [], float)])
    ylo, yhi = float(y.min()), float(y.max())
    pad = (yhi / ylo) ** 0.04
    ax.set_ylim(ylo / pad, yhi * pad)
    ticks = plain_log_ticks(ylo / pad, yhi * pad)
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FixedFormatter([f"{t:g}" for t in ticks]))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())
