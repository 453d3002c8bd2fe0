"""Notebook 02b's "What this run shows": sentences computed from its sweep, scaling, contrastive, compressor and
memory tables (the conventions of :mod:`helpers.report.findings`: nothing typed by hand; two results are called apart
only where their 95 % intervals do not overlap, which says which items were drawn, not which seed trained the model;
single runs without an interval are compared against a stated noise level).
"""
from __future__ import annotations

import math

import pandas as pd

from helpers.core.claims import ranking_claim
from helpers.evaluation.zero_shot import chance_verdict
from helpers.report.findings import CHANCE_WORDS


def _within_noise(losses: pd.Series, noise: float) -> pd.Series:
    """The rows whose loss is within ``noise`` of the lowest (:func:`helpers.core.claims.ranking_claim`'s rule: a
    difference no larger than the noise is noise)."""
    return losses - losses.min() <= noise


def sweep(table: pd.DataFrame, noise: float = 0.03) -> list[str]:
    """Notebook 02b: at equal training tokens, which shape has the lowest held-out loss ("lowest" only beyond
    ``noise`` of every other, else "tied within noise": :func:`helpers.core.claims.ranking_claim`), and whether the
    held-out loss falls with width at each depth and with depth at each width (steps larger than ``noise`` count).
    Columns: model, hidden, layers, heads, "best valid loss"."""
    losses = dict(zip(table.model, table["best valid loss"]))
    out = [ranking_claim(losses, better="lower", what="held-out loss at equal tokens", noise=noise)]
    main = table[table.heads == table.heads.mode().iloc[0]]  # the width x depth grid (its usual number of heads)
    for key, other in (("hidden", "layers"), ("layers", "hidden")):
        for val, group in main.groupby(other):
            g = group.sort_values(key)
            if len(g) < 2:
                continue
            losses = g["best valid loss"].tolist()
            steps = [a - b for a, b in zip(losses, losses[1:])]
            chain = " → ".join(f"{k} {l:.3f}" for k, l in zip(g[key], losses))
            if all(s > noise for s in steps):
                verdict = f"loss falls with {key} {chain}"
            elif all(s < -noise for s in steps):
                verdict = f"loss rises with {key} {chain}"
            elif all(abs(s) <= noise for s in steps):
                verdict = f"loss does not change beyond noise with {key} {chain}"
            else:  # neither monotone nor flat: where is it lowest, if anywhere beyond noise
                verdict = (ranking_claim({f"{key} {k}": l for k, l in zip(g[key], losses)}, better="lower",
                                         what=f"loss over {key}", noise=noise) + f" ({key} {chain})")
            out.append(f"{other} {val}: {verdict}")
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


def sweep_caveat(table: pd.DataFrame, tuned_hidden: int, lr: float, steps: int, noise: float = 0.03) -> str:
    """Notebook 02b: the sweep reuses notebook 02's learning rate ``lr``, tuned on the ``tuned_hidden``-wide model,
    for ``steps`` steps: the width comparison favours that width. Says so, and where the lowest loss of the
    width × depth grid is: one shape beyond ``noise`` of every other, or the shapes tied within it
    (:func:`helpers.core.claims.ranking_claim`); at the tuned width, the ranking may be the tuning, not the width.
    Columns: hidden, heads, "best valid loss" (model, when present, names the shapes)."""
    main = table[table.heads == table.heads.mode().iloc[0]]
    names = (main.model if "model" in main else [f"hidden {int(h)}" for h in main.hidden] if main.hidden.is_unique
             else [f"hidden {int(h)} (row {i})" for i, h in enumerate(main.hidden)])
    ranking = ranking_claim(dict(zip(names, main["best valid loss"])), better="lower",
                            what="held-out loss of the width × depth grid", noise=noise)
    near = main[_within_noise(main["best valid loss"], noise)]
    widths = sorted({int(h) for h in near.hidden})
    line = (f"caveat: every sweep run uses notebook 02's learning rate {lr:g}, chosen for its hidden-{tuned_hidden} "
            f"model (the cpu profile's was tuned on it), for {steps} steps; other widths were not tuned (a wider model usually wants a smaller rate and "
            f"more steps), so the width comparison favours hidden {tuned_hidden}; {ranking}")
    where = (f"the lowest loss at hidden {widths[0]}" if len(near) == 1 else
             f"the tied lowest losses, all at hidden {widths[0]}," if len(widths) == 1 else
             f"the tied lowest losses, at hidden {', '.join(map(str, widths))},")
    if tuned_hidden in widths:
        line += f": {where} may reflect that tuning rather than the width"
    elif len(near) == 1:
        line += f"; the lowest loss is nevertheless at hidden {widths[0]}"
    else:
        line += f"; the tied lowest losses are nevertheless at hidden {', '.join(map(str, widths))}"
    return line


def power_law(fit) -> str:
    """The compute-scaling fit (a :class:`helpers.analysis.architecture.PowerLaw`): the exponent with its interval
    and how that interval was made, whether it excludes 0 (loss falling with compute), and how well the line fits."""
    lo, hi = fit.ci
    unit = getattr(fit, "unit", "points")
    if not math.isfinite(fit.exponent):
        return (f"the power law L = a·C^(-α) was not fitted: the frontier holds {fit.n} {unit[:-1]}(s) (the cheapest "
                "run is also the best), so there is no scaling to read")
    if not math.isfinite(lo):
        return (f"the power law L = a·C^(-α) was fitted on {fit.n} frontier {unit}: too few for an interval, so "
                f"α = {fit.exponent:.3f} is not evidence of scaling")
    verdict = ("the loss falls with compute along the frontier" if lo > 0 else
               "the interval covers 0: no scaling is shown" if hi >= 0 else "the loss rises with compute (an artefact)")
    over = ("over runs of one seed each, not over training seeds" if unit == "runs" else
            "over points of one short run each, not over training seeds")
    return (f"compute scaling: on the {fit.n} frontier {unit}, L ∝ C^(-{fit.exponent:.3f}), α's {fit.confidence:.0%} "
            f"interval [{lo:.3f}, {hi:.3f}] ({verdict}), R² {fit.r2:.2f}; the interval is a "
            f"{fit.interval_method()}, {over}")


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


def memory(ratio: pd.DataFrame, noise_mb: float = 5.0) -> list[str]:
    """Measured peak training memory, compressor / GPT-Neo (notebook 02b's ratio table: width, batch,
    "compressor / GPT-Neo", and the peaks in MB, ``compressor`` and ``gpt-neo``): the range of the ratio, where the
    saving is largest, and whether it grows with batch at every width. Each ratio is one measurement of each model;
    the RSS of a repeated measurement moves by a few MB (``noise_mb``), so the largest saving is named only where
    its ratio stays below every other's with both peaks of both sizes moved by ±``noise_mb`` (the bounds of each
    difference, the ``paired`` intervals of :func:`helpers.core.claims.ranking_claim`; without the MB columns
    there is nothing to separate the sizes and none is named)."""
    col = "compressor / GPT-Neo"
    if ratio.empty or col not in ratio:
        return ["no memory ratio was measured (a model failed or exceeded the cap at every size)"]
    values = {f"width {int(w)}, batch {int(b)}": float(r) for w, b, r in zip(ratio.width, ratio.batch, ratio[col])}
    paired = None
    if {"compressor", "gpt-neo"} <= set(ratio.columns):  # each ratio's bounds with both peaks moved by ±noise_mb
        c, g = ratio["compressor"].astype(float), ratio["gpt-neo"].astype(float)
        bounds = dict(zip(values, zip((c - noise_mb) / (g + noise_mb), (c + noise_mb) / (g - noise_mb).clip(lower=1e-9))))
        lead = min(values, key=values.get)
        paired = {k: (bounds[lead][0] - hi, bounds[lead][1] - lo) for k, (lo, hi) in bounds.items() if k != lead}
    claim = ranking_claim(values, better="lower", what="ratio", paired=paired, digits=2)
    best = ratio.loc[ratio[col].idxmin()]
    where = (f"the largest saving ({1 - best[col]:.0%}) at width {int(best.width)}, batch {int(best.batch)}, beyond "
             f"the other sizes with both peaks moved by ±{noise_mb:g} MB" if claim.startswith("lowest ") else
             claim.replace("(no model is the lowest)", f"(no size has the largest saving"
                           + (f" beyond ±{noise_mb:g} MB in either peak)" if paired else ")")))
    out = [f"peak training memory, compressor / GPT-Neo: {ratio[col].min():.2f}–{ratio[col].max():.2f} over "
           f"{len(ratio)} (width, batch) sizes; {where}"]
    for width, g in ratio.sort_values("batch").groupby("width"):
        if len(g) > 1:
            r = g[col].tolist()
            trend = ("shrinks" if all(b > a for a, b in zip(r, r[1:])) else "grows" if all(b < a for a, b in zip(r, r[1:]))
                     else "is not monotone")
            out.append(f"width {int(width)}: the saving {trend} as the batch grows ("
                       + " → ".join(f"batch {int(b)} {x:.2f}" for b, x in zip(g.batch, r)) + ")")
    return out
