"""Tables from a :class:`helpers.analysis.interpret.ModelAnalysis`: per-head attention statistics and the classes of each
head's strongest targets (with the TinyStories observation checked on them), and per-neuron part-of-speech shares,
specialist counts against chance, top-token examples in context and the neurons worth showing."""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import binom, fisher_exact

from helpers.analysis.attention_stats import head_kind, positional_label
from helpers.analysis.interpret import ModelAnalysis, context_bounds, display_token, top_activations
from helpers.analysis.lexicon import ATTENTION_CLASSES, CLASSES, SPECIALIST_CLASSES, attention_class
from helpers.core.stats import wilson_interval

# ----------------------------------------------------------------------------- tables

def head_table(a: ModelAnalysis, threshold: float = 0.5) -> "pd.DataFrame":  # noqa: F821
    """One row per (layer, head): the head statistic — offset η² (mean ± sd over stories), evenness, and the
    ``label`` they give (:func:`helpers.analysis.attention_stats.head_kind`: positional when η² > ``threshold``, diffuse,
    or semantic) — then Rathod et al.'s statistic beside it (r over the lower triangle, over the full matrix, r of
    uniform attention, and their |r| > 0.5 label), mean attention distance, attention on the start token, and the
    offset (0…32) that gets the most attention with its mean weight."""
    s = a.stats
    prof = s["offset_sum"] / np.maximum(s["offset_n"], 1)
    rows = []
    L, H = s["r_lower"].shape[1:]
    for layer in range(L):
        for h in range(H):
            r = float(np.nanmean(s["r_lower"][:, layer, h]))
            eta2, even = float(np.nanmean(s["eta2"][:, layer, h])), float(np.nanmean(s["evenness"][:, layer, h]))
            d = int(np.argmax(prof[layer, h]))
            rows.append({"model": a.name, "layer": layer, "layer type": a.layer_types[layer], "head": h,
                         "offset η²": eta2, "η² sd": float(np.nanstd(s["eta2"][:, layer, h])), "evenness": even,
                         "label": head_kind(eta2, even, threshold),
                         "r (lower triangle)": r, "r sd": float(np.nanstd(s["r_lower"][:, layer, h])),
                         "r (full matrix)": float(np.nanmean(s["r_full"][:, layer, h])),
                         "r (uniform attention)": float(np.nanmean(s["r_uniform"][:, layer])),
                         "label (|r| > 0.5 rule)": positional_label(r, 0.5),
                         "mean distance": float(np.nanmean(s["mean_dist"][:, layer, h])),
                         "start-token weight": float(np.nanmean(s["sink"][:, layer, h])),
                         "top offset": d, "weight at top offset": float(prof[layer, h, d])})
    return pd.DataFrame(rows)


def target_class_table(a: ModelAnalysis, heads: "pd.DataFrame") -> "pd.DataFrame":  # noqa: F821
    """Per head, the share of its strongest targets (over all queries) in each class of :data:`ATTENTION_CLASSES`
    (joined to ``heads`` from :func:`head_table`), plus ``n targets``."""
    cls = np.array([attention_class(c) for c in a.classes], dtype=object)
    rows = []
    for r in heads.itertuples(index=False):
        t = a.targets[r.layer, r.head]
        t = t[t >= 0]
        c = cls[t]
        row = {"model": a.name, "layer": r.layer, "head": r.head, "n targets": len(t)}
        row.update({k: float(np.mean(c == k)) if len(c) else np.nan for k in ATTENTION_CLASSES})
        rows.append(row)
    return heads.merge(pd.DataFrame(rows), on=["model", "layer", "head"])


def class_base_rates(classes: Sequence[str], kinds: Sequence[str] = ATTENTION_CLASSES,
                     fold: Callable[[str], str] | None = attention_class) -> dict[str, float]:
    """Share of each class in ``kinds`` among ``classes`` (folded with ``fold``; ``None``: as they are)."""
    c = np.array([fold(x) if fold else x for x in classes], dtype=object)
    return {k: float(np.mean(c == k)) if len(c) else np.nan for k in kinds}


def group_target_classes(targets: "pd.DataFrame", base: dict[str, dict[str, float]]) -> "pd.DataFrame":  # noqa: F821
    """Mean class shares of strongest targets per model and head group, for three groupings: the paper's label
    (head kind from offset η²: positional/semantic/diffuse), GPT-Neo's layer type (global/local) and attention span (heads whose mean distance is
    below / at or above the model's median: short-range / long-range); with each model's base rate (class shares
    among all story tokens) as a reference row."""
    t = targets.copy()
    med = t.groupby("model")["mean distance"].transform("median")
    t["span"] = np.where(t["mean distance"] < med, "short-range", "long-range")
    rows = []
    for model, g in t.groupby("model", sort=False):
        rows.append({"model": model, "grouping": "reference", "group": "all tokens (base rate)", "heads": np.nan,
                     **base[model]})
        for grouping, col in [("head kind", "label"), ("layer type", "layer type"), ("span", "span")]:
            for value, gg in g.groupby(col, sort=True):
                rows.append({"model": model, "grouping": grouping, "group": value, "heads": len(gg),
                             **{k: float(gg[k].mean()) for k in ATTENTION_CLASSES}})
    return pd.DataFrame(rows)


def paper_observation(grouped: "pd.DataFrame", grouping: str = "span", near: str = "short-range",
                      far: str = "long-range", min_diff: float = 0.02) -> "pd.DataFrame":  # noqa: F821
    """The TinyStories observation, checked per model on :func:`group_target_classes` output: distance-based
    (``near``) heads should target articles/determiners and punctuation more than ``far`` heads, which should target
    names and nouns (the story's characters and topics) more. Shares are of strongest targets; base = all tokens.
    Each half of the observation counts as seen when the difference is at least ``min_diff`` (2 points)."""
    rows = []
    grouped = grouped.rename(columns={c: c.replace(" ", "_") for c in grouped.columns})
    for model, g in grouped.groupby("model", sort=False):
        pick = {r.group: r for r in g[g.grouping.isin([grouping, "reference"])].itertuples(index=False)}
        if near not in pick or far not in pick:
            continue
        get = lambda grp, cols: float(sum(getattr(pick[grp], c) for c in cols))
        base = next(r for k, r in pick.items() if k.startswith("all tokens"))
        fn, ct = ["determiner", "punctuation"], ["name", "noun"]
        row = {"model": model, "grouping": grouping,
               f"{near}: determiner+punctuation": get(near, fn), f"{far}: determiner+punctuation": get(far, fn),
               "base: determiner+punctuation": float(sum(getattr(base, c) for c in fn)),
               f"{near}: name+noun": get(near, ct), f"{far}: name+noun": get(far, ct),
               "base: name+noun": float(sum(getattr(base, c) for c in ct))}
        row["function words nearer"] = row[f"{near}: determiner+punctuation"] - row[f"{far}: determiner+punctuation"] >= min_diff
        row["names/nouns farther"] = row[f"{far}: name+noun"] - row[f"{near}: name+noun"] >= min_diff
        rows.append(row)
    return pd.DataFrame(rows)


def neuron_class_shares(a: ModelAnalysis, layer: int, k: int, distinct: bool = False
                        ) -> tuple["pd.DataFrame", np.ndarray, np.ndarray]:  # noqa: F821
    """Part-of-speech breakdown of every neuron of ``layer``: the share of its top-``k`` tokens (``distinct``: top-k
    distinct tokens, see :func:`top_activations`) in each class of :data:`CLASSES`, its dominant class and share.
    Returns ``(table, top rows [I, k], top values [I, k])``."""
    idx, vals = top_activations(a.acts[layer], k, a.ids if distinct else None)
    code = {c: i for i, c in enumerate(CLASSES)}
    cls = np.array([code.get(c, code["other"]) for c in a.classes], dtype=np.int64)[idx]  # [I, k]
    shares = np.stack([(cls == i).mean(axis=1) for i in range(len(CLASSES))], axis=1)
    dom = shares.argmax(axis=1)
    df = pd.DataFrame(shares, columns=CLASSES)
    df.insert(0, "neuron", np.arange(len(df)))
    df.insert(0, "layer", layer)
    df.insert(0, "top tokens", "distinct" if distinct else "all")
    df.insert(0, "model", a.name)
    df["dominant class"] = [CLASSES[i] for i in dom]
    df["dominant share"] = shares.max(axis=1)
    df["max activation"] = vals[:, 0]
    return df, idx, vals


def neuron_shares(analyses: Mapping[str, ModelAnalysis], k: int) -> tuple["pd.DataFrame", dict]:  # noqa: F821
    """:func:`neuron_class_shares` of every layer of every model (``analyses``: name -> analysis, in order), for its
    top-``k`` tokens and its top-``k`` distinct tokens: one table of all neurons, and the top rows and values per
    ``(model, layer, distinct)`` (to show a neuron's examples: :func:`neuron_examples`)."""
    parts, tops = [], {}
    for name, a in analyses.items():
        for layer in sorted(a.acts):
            for distinct in (False, True):
                df, idx, vals = neuron_class_shares(a, layer, k, distinct=distinct)
                parts.append(df)
                tops[name, layer, distinct] = (idx, vals)
    return pd.concat(parts, ignore_index=True), tops


def random_direction_shares(a: ModelAnalysis, layer: int, k: int, n_directions: int | None = None, seed: int = 0,
                            distinct: bool = False, rotated: ModelAnalysis | None = None) -> "pd.DataFrame":  # noqa: F821
    """The null for specialist neurons: :func:`neuron_class_shares` computed on ``n_directions`` (default: as many
    as the layer has neurons) random orthonormal directions of the **same** activations instead of the neuron
    axes. Any direction in activation space picks top tokens that cluster by word class (tokens of a class sit
    near one another), so this, not independent draws at the base rates, is what a neuron must beat to be called a
    specialist by role. Same columns as :func:`neuron_class_shares` (``neuron`` numbers the directions).
    ``rotated``: the projection already made by :func:`rotate_layer` (both top-token lists share it)."""
    rotated = rotated if rotated is not None else rotate_layer(a, layer, n_directions, seed)
    df, _, _ = neuron_class_shares(rotated, layer, k, distinct=distinct)
    return df


def rotate_layer(a: ModelAnalysis, layer: int, n_directions: int | None = None, seed: int = 0) -> ModelAnalysis:
    """``a`` with layer ``layer``'s activations projected on ``n_directions`` (default: as many as neurons) random
    orthonormal directions, seeded by ``(seed, layer)``."""
    acts = a.acts[layer]
    n_neurons = acts.shape[1]
    n_dir = n_neurons if n_directions is None else int(n_directions)
    if not 0 < n_dir <= n_neurons:
        raise ValueError(f"n_directions must be in 1..{n_neurons}; got {n_dir}")
    rng = np.random.default_rng([seed, layer])
    q, r = np.linalg.qr(rng.standard_normal((n_neurons, n_dir)))
    q *= np.sign(np.diag(r))  # a uniformly random orthonormal frame
    proj = np.concatenate([np.asarray(acts[c:c + 8192], dtype=np.float32) @ q.astype(np.float32)
                           for c in range(0, acts.shape[0], 8192)])
    return dataclasses.replace(a, acts={layer: proj})


def random_direction_null(a: ModelAnalysis, k: int, threshold: float, seed: int = 0) -> dict[tuple[str, int], float]:
    """Per (top-token list, layer) of ``a``: the share of random directions (:func:`random_direction_shares`, as
    many as neurons) whose top-``k`` tokens are at least ``threshold`` in one class — the specialist rate that
    rotation alone gives."""
    out = {}
    for layer in sorted(a.acts):
        rotated = rotate_layer(a, layer, seed=seed)  # one projection for both top-token lists
        for distinct in (False, True):
            df = random_direction_shares(a, layer, k, distinct=distinct, rotated=rotated)
            out["distinct" if distinct else "all", layer] = float((df["dominant share"] >= threshold).mean())
    return out


def chance_specialists(base_rates: dict[str, float], k: int, threshold: float) -> dict[str, float]:
    """Probability that a neuron is a specialist of each class if its top-``k`` tokens were ``k`` independent draws
    from the base rates: P(Binomial(k, p_c) ≥ ⌈threshold · k⌉)."""
    need = math.ceil(threshold * k - 1e-9)
    return {c: float(binom.sf(need - 1, k, p)) for c, p in base_rates.items()}


def token_base_rates(a: ModelAnalysis) -> dict[str, dict[str, float]]:
    """Base rates of :data:`CLASSES` for both top-token modes: ``"all"``, over token occurrences; ``"distinct"``,
    over distinct tokens (each token id counted once, with its most frequent class)."""
    occ = class_base_rates(a.classes, CLASSES, fold=None)
    per_id = pd.DataFrame({"id": a.ids, "cls": a.classes}).groupby("id")["cls"].agg(lambda c: c.value_counts().index[0])
    return {"all": occ, "distinct": class_base_rates(list(per_id), CLASSES, fold=None)}


def specialist_table(shares: "pd.DataFrame", threshold: float, base_rates: dict[str, dict[str, dict[str, float]]],
                     k: int, null: dict[str, dict[tuple[str, int], float]] | None = None) -> "pd.DataFrame":  # noqa: F821
    """Per model, top-token mode and layer: neurons whose top-k tokens are at least ``threshold`` in one class,
    counted by class (:data:`SPECIALIST_CLASSES`, any other class as "other class"), the total, the fraction of
    neurons, and the number and fraction of neurons expected if top tokens were independent draws at the base rates
    (``base_rates[model][mode]``, see :func:`token_base_rates` and :func:`chance_specialists`); with ``null``
    (``{model: random_direction_null(...)}``) also the number and share expected from random directions of the
    same activations, the null a specialist count is judged against."""
    rows = []
    for (model, mode, layer), g in shares.groupby(["model", "top tokens", "layer"], sort=False):
        spec = g[g["dominant share"] >= threshold]
        row = {"model": model, "top tokens": mode, "layer": layer, "neurons": len(g)}
        for c in SPECIALIST_CLASSES:
            row[c] = int((spec["dominant class"] == c).sum())
        row["other class"] = int((~spec["dominant class"].isin(SPECIALIST_CLASSES)).sum())
        row["specialists"] = len(spec)
        row["share of neurons"] = len(spec) / max(len(g), 1)
        p = chance_specialists(base_rates[model][mode], k, threshold)
        row["expected neurons by chance"] = len(g) * sum(p.values())
        row["expected share by chance"] = sum(p.values())
        if null is not None:
            row["random-direction share"] = null[model][mode, int(layer)]
            row["expected neurons, random directions"] = len(g) * row["random-direction share"]
        rows.append(row)
    return pd.DataFrame(rows)


def specialist_totals(spec: "pd.DataFrame", confidence: float = 0.95) -> "pd.DataFrame":  # noqa: F821
    """:func:`specialist_table` summed over layers, per model and top-token mode: the counts by class, the
    specialists, neurons and number expected by chance, the share of neurons, the share expected by chance and the
    share's Wilson interval ("share CI
    low"/"share CI high"; neurons treated as independent draws: the interval covers neither training seeds nor the
    choice of stories)."""
    cols = SPECIALIST_CLASSES + ["other class", "specialists", "neurons", "expected neurons by chance"]
    cols += ["expected neurons, random directions"] if "expected neurons, random directions" in spec.columns else []
    total = spec.groupby(["model", "top tokens"], sort=False)[cols].sum().reset_index()
    total["share of neurons"] = total.specialists / total.neurons
    total["expected share by chance"] = total["expected neurons by chance"] / total.neurons
    if "expected neurons, random directions" in total.columns:
        # the random directions are a sample of as many directions as neurons: a two-sided Fisher exact test of
        # the two counts (specialist neurons vs specialist directions)
        total["random-direction share"] = total["expected neurons, random directions"] / total.neurons
        total["p vs random directions"] = [
            float(fisher_exact([[int(k), int(n) - int(k)], [int(round(e)), int(n) - int(round(e))]])[1])
            for k, n, e in zip(total.specialists, total.neurons, total["expected neurons, random directions"])]
    ci = [wilson_interval(int(k), int(n), confidence) for k, n in zip(total.specialists, total.neurons)]
    total["share CI low"] = [lo for lo, _ in ci]
    total["share CI high"] = [hi for _, hi in ci]
    return total


def neuron_examples(a: ModelAnalysis, layer: int, neuron: int, idx: np.ndarray, vals: np.ndarray,
                    width: int = 5) -> list[dict]:
    """The top tokens of one neuron with ±``width`` tokens of context (same story): one dict per example with
    ``rank``, ``activation``, ``token`` (display), ``word``, ``class``, ``left``/``right`` (decoded context),
    ``row`` and the context rows' activations (for highlighting)."""
    out = []
    acts = a.acts[layer]
    for rank, (n, v) in enumerate(zip(idx[neuron], vals[neuron]), 1):
        n = int(n)
        lo, hi = context_bounds(a.story, n, width)
        st = a.stories[int(a.story[n])]
        wk = st.word_of[int(a.pos[n]) + 1]
        dec = lambda rows: a.tokenizer.decode([int(a.ids[r]) for r in rows], clean_up_tokenization_spaces=False)
        out.append({"rank": rank, "activation": float(v), "token": display_token(a.tokenizer, int(a.ids[n])),
                    "word": st.words[wk].text if wk >= 0 else "", "class": a.classes[n],
                    "left": dec(range(lo, n)), "piece": dec([n]), "right": dec(range(n + 1, hi)), "row": n,
                    "context rows": list(range(lo, hi)),
                    "context acts": [float(acts[r, neuron]) for r in range(lo, hi)]})
    return out


def showcase_neurons(shares: "pd.DataFrame", first: int, last_layer: int) -> list[tuple[int, int, str]]:  # noqa: F821
    """Neurons to show for one model: the first ``first`` neurons of ``last_layer`` (an arbitrary choice, since
    neurons are permutation-invariant, as in TinyStories), the neuron with the largest activation, and the most
    specialised neuron of each class in :data:`SPECIALIST_CLASSES`. ``(layer, neuron, why)``, no duplicates."""
    picks: list[tuple[int, int, str]] = []
    seen = set()

    def add(layer, neuron, why):
        if (layer, neuron) not in seen:
            seen.add((layer, neuron))
            picks.append((int(layer), int(neuron), why))

    shares = shares.reset_index(drop=True)
    for n in range(first):
        add(last_layer, n, f"neuron {n} of the last layer")
    r = shares.loc[shares["max activation"].idxmax()]
    add(r["layer"], r["neuron"], "largest activation of all neurons")
    for c in SPECIALIST_CLASSES:
        g = shares[shares["dominant class"] == c]
        if len(g):
            r = g.sort_values(["dominant share", "max activation"], ascending=False).iloc[0]
            add(r["layer"], r["neuron"], f"most {c}-specialised ({r['dominant share']:.0%} of top tokens)")
    return picks
