"""Notebook 02b's "What this run shows": sentences computed from its sweep, scaling, contrastive, compressor and
memory tables (the conventions of :mod:`helpers.report.findings`: nothing typed by hand; two results are called apart
only where their 95 % intervals do not overlap, which says which items were drawn, not which seed trained the model;
single runs without an interval are compared against a stated noise level).
"""
from __future__ import annotations

import math

import pandas as pd

from helpers.evaluation.zero_shot import chance_verdict
from helpers.report.findings import CHANCE_WORDS


def sweep(table: pd.DataFrame, noise: float = 0.03) -> list[str]:
    """Notebook 02b: at equal training tokens, the best shape, and whether the held-out loss falls with width at
    each depth and with depth at each width (steps larger than ``noise`` count). Columns: model, hidden, layers,
    heads, "best valid loss"."""
    out = []
    best = table.sort_values("best valid loss").iloc[0]
    out.append(f"lowest held-out loss at equal tokens: {best.model} ({best['best valid loss']:.3f})")
    main = table[table.heads == table.heads.mode().iloc[0]]  # the width x depth grid (its usual number of heads)
    for key, other in (("hidden", "layers"), ("layers", "hidden")):
        for val, group in main.groupby(other):
            g = group.sort_values(key)
            if len(g) < 2:
                continue
            losses = g["best valid loss"].tolist()
            steps = [a - b for a, b in zip(losses, losses[1:])]
            if all(s > noise for s in steps):
                verdict = "falls"
            elif all(s < -noise for s in steps):
                verdict = "rises"
            elif all(abs(s) <= noise for s in steps):
                verdict = "does not change beyond noise"
            else:
                verdict = f"is lowest at {key} {g[key].iloc[losses.index(min(losses))]}"
            out.append(f"{other} {val}: loss {verdict} with {key} "
                       + " → ".join(f"{k} {l:.3f}" for k, l in zip(g[key], losses)))
    if "heads" in table and table.heads.nunique() > 1:
        for (h, l), g in table.groupby(["hidden", "layers"]):
            if g.heads.nunique() > 1:
                spread = g["best valid loss"].max() - g["best valid loss"].min()
                out.append(f"hidden {h}, {l} layers: heads {sorted(g.heads)} change the loss by {spread:.3f}"
                           + (" (within noise)" if spread <= noise else ""))
    return out


def blimp_intervals(table: pd.DataFrame, chance: float = 50.0) -> list[str]:
    """Notebook 02b: how wide the sweep's BLiMP 95 % intervals are (half-widths) and which of them lie above
    ``chance``. Columns: model, BLiMP, "BLiMP CI low", "BLiMP CI high"."""
    half = (table["BLiMP CI high"] - table["BLiMP CI low"]) / 2
    lo, hi = f"{half.min():.1f}", f"{half.max():.1f}"
    out = [f"BLiMP 95 % intervals are ±{lo if lo == hi else f'{lo}–{hi}'} points wide (half-widths) over {len(table)} models"]
    verdicts = {r.model: chance_verdict(r["BLiMP CI low"], r["BLiMP CI high"], chance) for _, r in table.iterrows()}
    above = [m for m, v in verdicts.items() if v == "yes"]
    below = [m for m, v in verdicts.items() if v == "below"]
    if not above and not below:
        out.append(f"every interval covers chance ({chance:g}): BLiMP does not tell these models from guessing, "
                   "nor from each other")
    else:
        out.append(f"above chance ({chance:g}): {', '.join(above) or 'none'}; below: {', '.join(below) or 'none'}; "
                   f"the other {len(table) - len(above) - len(below)} intervals cover chance")
    return out


def contrastive(table: pd.DataFrame, chance: float = 50.0) -> list[str]:
    """Notebook 02b: plain vs contrastive. Per model the order preference (``prefers original (%)`` with its
    ``prefers CI low``/``high``, ``order wins``/``ties``/``losses``) against ``chance``, and its held-out loss on
    original vs shuffled stories; then the contrastive − plain gaps, and the themed suites (``themed <suite>``
    columns, with ``… CI low``/``… CI high``) when every score is 0."""
    out = []
    for _, r in table.iterrows():
        verdict = chance_verdict(r["prefers CI low"], r["prefers CI high"], chance)
        n = int(r["order wins"] + r["order ties"] + r["order losses"])
        ties = (f"{int(r['order ties'])} ties (counted half)" if r["order ties"] else "no ties")
        gap = r["held-out loss, shuffled"] - r["held-out loss, original order"]
        out.append(f"{r.model}: gives the original story the higher log-probability in {r['prefers original (%)']:.1f} % "
                   f"of {n} stories [{r['prefers CI low']:.1f}, {r['prefers CI high']:.1f}] ({int(r['order wins'])} wins, "
                   f"{int(r['order losses'])} losses, {ties}): "
                   + CHANCE_WORDS[verdict]
                   + f"; held-out loss shuffled − original {gap:+.4f} nats/token")
    if {"plain", "contrastive"} <= set(table.model):
        d = table.set_index("model")
        out.append(f"contrastive − plain: best held-out loss {d.at['contrastive', 'best valid loss'] - d.at['plain', 'best valid loss']:+.3f} "
                   f"nats/token, order preference {d.at['contrastive', 'prefers original (%)'] - d.at['plain', 'prefers original (%)']:+.1f} points"
                   + (f", BLiMP {d.at['contrastive', 'BLiMP'] - d.at['plain', 'BLiMP']:+.1f} points" if "BLiMP" in d else ""))
    themed = [c for c in table.columns if c.startswith("themed ") and not c.endswith((" CI low", " CI high"))]
    if themed and (table[themed].to_numpy() == 0).all():
        highs = [c + " CI high" for c in themed if c + " CI high" in table]
        bound = (f" (95 % intervals reach at most {table[highs].to_numpy().max():.2f}: few prompts)" if highs else "")
        out.append(f"themed suites ({', '.join(c.removeprefix('themed ') for c in themed)}): every score is 0 for every "
                   f"model{bound} — no greedy completion contains an answer key (the prompts are answered, badly: see the "
                   "completions printed above), so these columns do not separate the models")
    return out


def sweep_caveat(table: pd.DataFrame, tuned_hidden: int, lr: float, steps: int) -> str:
    """Notebook 02b: the sweep reuses notebook 02's learning rate ``lr``, tuned on the ``tuned_hidden``-wide model,
    for ``steps`` steps: the width comparison favours that width. Says so, and whether the lowest loss of the
    width × depth grid is at that width (then the ranking may be the tuning, not the width). Columns: hidden,
    heads, "best valid loss"."""
    main = table[table.heads == table.heads.mode().iloc[0]]
    best_hidden = int(main.sort_values("best valid loss").iloc[0].hidden)
    line = (f"caveat: every sweep run uses notebook 02's learning rate {lr:g}, chosen for its hidden-{tuned_hidden} "
            f"model (the cpu profile's was tuned on it), for {steps} steps; other widths were not tuned (a wider model usually wants a smaller rate and "
            f"more steps), so the width comparison favours hidden {tuned_hidden}")
    if best_hidden == tuned_hidden:
        line += f": the lowest loss at hidden {best_hidden} may reflect that tuning rather than the width"
    else:
        line += f"; the lowest loss is nevertheless at hidden {best_hidden}"
    return line


def power_law(fit) -> str:
    """The compute-scaling fit (a :class:`helpers.analysis.architecture.PowerLaw`): the exponent with its interval,
    whether that interval excludes 0 (loss falling with compute), and how well the line fits."""
    lo, hi = fit.ci
    if not math.isfinite(lo):
        return (f"the power law L = a·C^(-α) was fitted on {fit.n} frontier point(s): too few for an interval, so "
                f"α = {fit.exponent:.3f} is not evidence of scaling")
    verdict = ("the loss falls with compute along the frontier" if lo > 0 else
               "the interval covers 0: no scaling is shown" if hi >= 0 else "the loss rises with compute (an artefact)")
    return (f"compute scaling: on the {fit.n} frontier points, L ∝ C^(-{fit.exponent:.3f}), α's {fit.confidence:.0%} "
            f"interval [{lo:.3f}, {hi:.3f}] ({verdict}), R² {fit.r2:.2f}; the interval is the fit's, over points of "
            "one short run each, not over training seeds")


def compressor(table: pd.DataFrame, steps: int, noise: float = 0.03) -> list[str]:
    """The compressor against GPT-Neo of the same shape (notebook 02b's compressor table: model, parameters,
    "held-out loss, tokens 2..T-1"; the GPT-Neo row first): the loss gap on the same tokens, called a difference only
    beyond ``noise`` nats (one run each, no interval), and the parameter ratio."""
    if len(table) < 2:
        return ["the compressor has no GPT-Neo twin in the sweep: no comparison"]
    col = "held-out loss, tokens 2..T-1"
    neo, comp = table.iloc[0], table.iloc[1]
    gap = comp[col] - neo[col]
    verdict = ("within noise" if abs(gap) <= noise else "worse" if gap > 0 else "better")
    return [f"compressor − GPT-Neo held-out loss on the same tokens: {gap:+.3f} nats/token ({verdict}; one run each, "
            f"differences under {noise} nats count as noise), with {comp.parameters / neo.parameters:.2f}× the "
            f"parameters and the same {steps} steps"]


def memory(ratio: pd.DataFrame) -> list[str]:
    """Measured peak training memory, compressor / GPT-Neo (notebook 02b's ratio table: width, batch,
    "compressor / GPT-Neo"): the range of the ratio, where the saving is largest, and whether it grows with batch at
    every width. Each ratio is one measurement of each model (the RSS moves by a few MB between runs)."""
    col = "compressor / GPT-Neo"
    if ratio.empty or col not in ratio:
        return ["no memory ratio was measured (a model failed or exceeded the cap at every size)"]
    best = ratio.loc[ratio[col].idxmin()]
    out = [f"peak training memory, compressor / GPT-Neo: {ratio[col].min():.2f}–{ratio[col].max():.2f} over "
           f"{len(ratio)} (width, batch) sizes; the largest saving ({1 - best[col]:.0%}) at width {int(best.width)}, "
           f"batch {int(best.batch)}"]
    for width, g in ratio.sort_values("batch").groupby("width"):
        if len(g) > 1:
            r = g[col].tolist()
            trend = ("shrinks" if all(b > a for a, b in zip(r, r[1:])) else "grows" if all(b < a for a, b in zip(r, r[1:]))
                     else "is not monotone")
            out.append(f"width {int(width)}: the saving {trend} as the batch grows ("
                       + " → ".join(f"batch {int(b)} {x:.2f}" for b, x in zip(g.batch, r)) + ")")
    return out
