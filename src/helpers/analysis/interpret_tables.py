"""Tables from a :class:`helpers.analysis.interpret.ModelAnalysis`: per-head attention statistics with their intervals
over stories and graded classes, the layer-0 η² per story as tidy rows for the questions table, the classes of each
head's strongest targets (with the TinyStories observation checked on them, with an interval over stories), and
per-neuron part-of-speech shares, specialist counts against chance and against three controls (random directions,
a random-weight layer on the same inputs, an untrained model), top-token examples in context and the neurons worth
showing."""
from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import binom, fisher_exact

import torch

from helpers.analysis.attention_stats import HEAD_KINDS, POSITIONAL_ETA2, head_kind, positional_label
from helpers.analysis.interpret import ModelAnalysis, context_bounds, display_token, top_activations
from helpers.analysis.lexicon import ATTENTION_CLASSES, CLASSES, SPECIALIST_CLASSES, attention_class
from helpers.core.stats import bootstrap_interval, wilson_interval
from helpers.evaluation.comparisons import tidy_rows

# ----------------------------------------------------------------------------- tables

def _story_interval(values: np.ndarray, n_boot: int, seed: int, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile-bootstrap interval over stories (rows of ``values [S, K]``) of each column's mean (NaN-aware): the
    same seeded resamples for every column (:func:`helpers.core.stats.bootstrap_interval`); NaN without resamples."""
    v = np.asarray(values, dtype=float).reshape(len(values), -1)
    if n_boot <= 0 or len(v) == 0:
        return np.full(v.shape[1], np.nan), np.full(v.shape[1], np.nan)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = bootstrap_interval(len(v), lambda idx: np.nanmean(v[idx], axis=1), confidence, n_boot, seed)
    return np.atleast_1d(lo), np.atleast_1d(hi)


def head_table(a: ModelAnalysis, threshold: float = POSITIONAL_ETA2, n_boot: int = 1000, seed: int = 0,
               confidence: float = 0.95) -> "pd.DataFrame":  # noqa: F821
    """One row per (layer, head): the head statistic — offset η² of √weights (mean over stories, its seeded
    percentile-bootstrap interval over stories with ``n_boot`` resamples, sd), the raw-weight η² beside it, evenness,
    sink share, and the graded ``label`` they give (:func:`helpers.analysis.attention_stats.head_kind`: positional,
    sink, content, mixed or diffuse; positional from η² ≥ ``threshold``) — then Rathod et al.'s statistic beside it
    (r over the lower triangle, over the full matrix, r of uniform attention, and their |r| > 0.5 label), mean
    attention distance, attention on the start token, and the offset (0…32) that gets the most attention with its
    mean weight. ``n_boot = 0``: no interval (NaN)."""
    s = a.stats
    prof = s["offset_sum"] / np.maximum(s["offset_n"], 1)
    rows = []
    L, H = s["r_lower"].shape[1:]
    lo, hi = _story_interval(s["eta2"].reshape(len(s["eta2"]), -1), n_boot, seed, confidence)
    mean = lambda k, layer, h: float(np.nanmean(s[k][:, layer, h])) if k in s else np.nan
    for layer in range(L):
        for h in range(H):
            r = mean("r_lower", layer, h)
            eta2, even, sink = mean("eta2", layer, h), mean("evenness", layer, h), mean("sink_share", layer, h)
            d = int(np.argmax(prof[layer, h]))
            rows.append({"model": a.name, "layer": layer, "layer type": a.layer_types[layer], "head": h,
                         "offset η²": eta2, "η² CI low": float(lo[layer * H + h]), "η² CI high": float(hi[layer * H + h]),
                         "η² sd": float(np.nanstd(s["eta2"][:, layer, h])),
                         "offset η² (raw weights)": mean("eta2_raw", layer, h), "evenness": even, "sink share": sink,
                         "label": head_kind(eta2, even, sink, threshold),
                         "r (lower triangle)": r, "r sd": float(np.nanstd(s["r_lower"][:, layer, h])),
                         "r (full matrix)": mean("r_full", layer, h),
                         "r (uniform attention)": float(np.nanmean(s["r_uniform"][:, layer])),
                         "label (|r| > 0.5 rule)": positional_label(r, 0.5),
                         "mean distance": mean("mean_dist", layer, h),
                         "start-token weight": mean("sink", layer, h),
                         "top offset": d, "weight at top offset": float(prof[layer, h, d])})
    return pd.DataFrame(rows)


def head_counts(heads: "pd.DataFrame", kinds: Sequence[str] | None = None) -> "pd.DataFrame":  # noqa: F821
    """Heads per model and class (columns in the order of :data:`helpers.analysis.attention_stats.HEAD_KINDS`) and
    the total, from :func:`head_table` rows."""
    kinds = list(kinds or HEAD_KINDS)
    return pd.DataFrame([{"model": m, **{k: int((g.label == k).sum()) for k in kinds}, "heads": len(g)}
                         for m, g in heads.groupby("model", sort=False)])


def layer_eta2_rows(a: ModelAnalysis, texts: Sequence[str], default_seed: int, layer: int = 0,
                    task: str = "layer-0 η²") -> "pd.DataFrame":  # noqa: F821
    """Tidy rows (:func:`helpers.evaluation.comparisons.tidy_rows`) for the questions table: one row per story, item =
    the story's index in ``texts`` (the same held-out stories for every model), value = the mean offset η² (√weights)
    of ``layer``'s heads on that story (the heads' per-story values averaged, NaN heads left out)."""
    where = {t: i for i, t in enumerate(texts)}
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        per_story = np.nanmean(a.stats["eta2"][:, layer, :], axis=-1)
    rows = [{"story": where[st.text], "value": float(v)} for st, v in zip(a.stories, per_story) if np.isfinite(v)]
    return tidy_rows(rows, a.name, task, "story", "value", default_seed)


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
    (the graded head class: positional/sink/content/mixed/diffuse), GPT-Neo's layer type (global/local) and attention span (heads whose mean distance is
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


FUNCTION_TARGETS = ("determiner", "punctuation")
CONTENT_TARGETS = ("name", "noun")


def _target_counts(a: ModelAnalysis, heads: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per story and head: strongest targets that are determiners/punctuation, names/nouns, and all targets
    (``[S, len(heads)]`` each; a target counts for the story of its query)."""
    cls = np.array([attention_class(c) for c in a.classes], dtype=object)
    fn, ct = np.isin(cls, FUNCTION_TARGETS), np.isin(cls, CONTENT_TARGETS)
    S = len(a.stories)
    out = [np.zeros((S, len(heads))) for _ in range(3)]
    for k, (layer, head) in enumerate(heads):
        t = a.targets[layer, head]
        q = np.flatnonzero(t >= 0)
        st, tg = a.story[q], t[q]
        out[0][:, k] = np.bincount(st, weights=fn[tg], minlength=S)
        out[1][:, k] = np.bincount(st, weights=ct[tg], minlength=S)
        out[2][:, k] = np.bincount(st, minlength=S)
    return out[0], out[1], out[2]


def paper_observation(analyses: Mapping[str, ModelAnalysis], targets: "pd.DataFrame", grouping: str = "span",
                      near: str = "short-range", far: str = "long-range", n_boot: int = 1000, seed: int = 0,
                      confidence: float = 0.95) -> "pd.DataFrame":  # noqa: F821
    """The TinyStories observation, checked per model with an interval: distance-based (``near``) heads should target
    determiners and punctuation more than ``far`` heads, which should target names and nouns more. ``targets``:
    :func:`target_class_table` rows (head, label, mean distance); ``grouping``: ``"span"`` (mean distance below /
    at or above the model's median head: short-range / long-range) or ``"head kind"`` (the ``label`` column, e.g.
    positional / content). Shares are of strongest targets, averaged over a group's heads (base = all tokens).
    Each half is a difference of group means — ``function words nearer`` (near − far, determiners + punctuation) and
    ``names/nouns farther`` (far − near, names + nouns) — with its seeded percentile-bootstrap interval over stories
    (the stories resampled, every head's shares recomputed on them; the grouping of heads held fixed). A model
    without heads in both groups gets no row."""
    rows = []
    for model, g in targets.groupby("model", sort=False):
        if model not in analyses:
            continue
        a = analyses[model]
        col = g["label"] if grouping == "head kind" else np.where(
            g["mean distance"] < g["mean distance"].median(), "short-range", "long-range")
        hn = [(int(r.layer), int(r.head)) for r, c in zip(g.itertuples(index=False), col) if c == near]
        hf = [(int(r.layer), int(r.head)) for r, c in zip(g.itertuples(index=False), col) if c == far]
        if not hn or not hf:
            continue
        fn, ct, n = _target_counts(a, hn + hf)
        k = len(hn)

        def diffs(idx: np.ndarray | None) -> np.ndarray:  # [n_boot, 2]: function words nearer, names/nouns farther
            f, c, m = (x[idx].sum(axis=-2) if idx is not None else x.sum(axis=0)[None] for x in (fn, ct, n))
            with np.errstate(invalid="ignore", divide="ignore"):
                fs, cs = f / m, c / m
            mean = lambda x, sl: np.nanmean(x[:, sl], axis=1)
            return np.stack([mean(fs, slice(0, k)) - mean(fs, slice(k, None)),
                             mean(cs, slice(k, None)) - mean(cs, slice(0, k))], axis=1)

        point = diffs(None)[0]
        share = lambda x, sl: float(np.nanmean(x.sum(axis=0)[sl] / np.maximum(n.sum(axis=0)[sl], 1)))
        cls = np.array([attention_class(c) for c in a.classes], dtype=object)
        base_fn, base_ct = float(np.isin(cls, FUNCTION_TARGETS).mean()), float(np.isin(cls, CONTENT_TARGETS).mean())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            lo, hi = (bootstrap_interval(len(a.stories), diffs, confidence, n_boot, seed) if n_boot > 0 else
                      (np.full(2, np.nan), np.full(2, np.nan)))
        row = {"model": model, "grouping": grouping, f"{near} heads": len(hn), f"{far} heads": len(hf)}
        for what, x, b in (("determiner+punctuation", fn, base_fn), ("name+noun", ct, base_ct)):
            row.update({f"{near}: {what}": share(x, slice(0, k)), f"{far}: {what}": share(x, slice(k, None)),
                        f"base: {what}": b})
        for i, half in enumerate(("function words nearer", "names/nouns farther")):
            row.update({half: float(point[i]), f"{half} CI low": float(lo[i]), f"{half} CI high": float(hi[i])})
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
    """A null for specialist neurons: :func:`neuron_class_shares` on ``n_directions`` (default: as many as neurons)
    random orthonormal directions of the **same** activations. Any direction picks top tokens that cluster by word
    class, so this beats independent draws at the base rates; it is fair against rotation, not against the
    nonlinearity (:func:`neuron_controls` adds the other controls). ``rotated``: a :func:`rotate_layer` projection."""
    return neuron_class_shares(rotated if rotated is not None else rotate_layer(a, layer, n_directions, seed),
                               layer, k, distinct=distinct)[0]


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


def random_weight_acts(inputs: np.ndarray, n_neurons: int, act, std: float, seed: int = 0,
                       chunk: int = 8192) -> np.ndarray:
    """A random-weight MLP layer on given inputs: ``act(inputs @ W)``, ``W`` of shape ``[hidden, n_neurons]`` drawn
    from N(0, ``std``²) (GPT-Neo's initialisation: normal weights at the config's ``initializer_range``, zero bias),
    seeded; ``act`` the layer's own nonlinearity (a torch module or function). ``inputs [N, hidden]`` may be a
    memory-mapped float16 array; returns float32 ``[N, n_neurons]``."""
    x = np.asarray(inputs[:0], dtype=np.float32)
    w = torch.from_numpy(np.random.default_rng(seed).normal(0.0, std, (x.shape[1], int(n_neurons))).astype(np.float32))
    out = []
    with torch.no_grad():
        for c in range(0, inputs.shape[0], chunk):
            out.append(act(torch.from_numpy(np.asarray(inputs[c:c + chunk], dtype=np.float32)) @ w).numpy())
    return np.concatenate(out) if out else np.zeros((0, int(n_neurons)), np.float32)


def random_weight_layer(a: ModelAnalysis, layer: int, seed: int = 0) -> ModelAnalysis:
    """``a`` with layer ``layer``'s activations replaced by a random-weight layer's on the **same** inputs (the
    trained model's pre-MLP LayerNorm outputs): as many neurons, the model's initialisation scale and its own
    nonlinearity module (:func:`random_weight_acts`), seeded by ``(seed, layer)``. The control for the elementwise
    nonlinearity: a neuron of any weights is one direction of the input, so its top tokens cluster by word class
    more than a random direction of the activations does."""
    if layer not in a.mlp_inputs:
        raise ValueError(f"{a.name}: no MLP inputs of layer {layer} recorded (recompute the analysis)")
    std = float(getattr(a.model.config, "initializer_range", 0.02))
    acts = random_weight_acts(a.mlp_inputs[layer], a.acts[layer].shape[1], a.model.transformer.h[layer].mlp.act, std,
                              seed=int(np.random.SeedSequence([int(seed), int(layer)]).generate_state(1)[0]))
    return dataclasses.replace(a, acts={layer: acts})


def specialist_counts(a: ModelAnalysis, k: int, threshold: float, layers: Sequence[int] | None = None
                      ) -> dict[str, tuple[int, int]]:
    """Specialist neurons (dominant share ≥ ``threshold`` of the top-``k`` tokens) summed over ``layers`` (default:
    every layer of ``a``), per top-token list: ``{"all" | "distinct": (specialists, neurons)}``."""
    out = {"all": [0, 0], "distinct": [0, 0]}
    for layer in sorted(a.acts) if layers is None else layers:
        for distinct in (False, True):
            df, _, _ = neuron_class_shares(a, layer, k, distinct=distinct)
            c = out["distinct" if distinct else "all"]
            c[0] += int((df["dominant share"] >= threshold).sum())
            c[1] += len(df)
    return {m: (int(x), int(n)) for m, (x, n) in out.items()}


def _fisher(k: int, n: int, c: int, m: int) -> float:
    """Two-sided Fisher exact p of ``k`` of ``n`` against ``c`` of ``m``."""
    return float(fisher_exact([[int(k), int(n) - int(k)], [int(c), int(m) - int(c)]])[1])


def control_verdict(trained: int, controls: Mapping[str, tuple[float, float]], alpha: float = 0.05) -> str:
    """Word-class specialisation is claimed only where the trained count exceeds **every** control
    (``{control: (count, p)}``) with p < ``alpha``; otherwise the words name the controls it does not beat (more
    than a control without p < alpha is "not shown beyond", fewer is "below")."""
    if not controls:
        return "no control, so specialisation is not tested"
    below = [n for n, (c, p) in controls.items() if trained < c and p < alpha]
    not_beyond = [n for n, (c, p) in controls.items() if not (trained > c and p < alpha) and n not in below]
    if not below and not not_beyond:
        return "specialised beyond every control (" + ", ".join(controls) + f"; each p < {alpha:g})"
    parts = [f"below the {', '.join(below)}"] * bool(below) + [f"not shown beyond the {', '.join(not_beyond)}"] * bool(not_beyond)
    return "not shown to be word-class specialisation: " + "; ".join(parts)


def neuron_controls(analyses: Mapping[str, ModelAnalysis], untrained: Mapping[str, ModelAnalysis],
                    total: "pd.DataFrame", k: int, threshold: float, seed: int = 0,
                    alpha: float = 0.05) -> "pd.DataFrame":  # noqa: F821
    """Specialist neurons of each trained model against three controls, per top-token list, summed over layers:
    random directions of the same activations (from ``total``, :func:`specialist_totals` with the random-direction
    null), a random-weight layer on the same inputs through the same nonlinearity (:func:`random_weight_layer`,
    seeded) and the untrained model of the same architecture (``untrained[model]``, e.g.
    :func:`helpers.analysis.interpret.analyse_untrained`). Two-sided Fisher exact p of the trained count against
    each, and the verdict of :func:`control_verdict`: specialisation only beyond all three."""
    t = total.set_index(["model", "top tokens"])
    memo: dict[str, dict[str, tuple[int, int]]] = {}
    rows = []
    for name, a in analyses.items():
        rw: dict[str, list[int]] = {"all": [0, 0], "distinct": [0, 0]}
        for layer in sorted(a.acts):
            for m, (c, n) in specialist_counts(random_weight_layer(a, layer, seed), k, threshold, [layer]).items():
                rw[m] = [rw[m][0] + c, rw[m][1] + n]
        u = untrained.get(name)
        if u is not None and u.name not in memo:
            memo[u.name] = specialist_counts(u, k, threshold)
        for mode in ("all", "distinct"):
            if (name, mode) not in t.index:
                continue
            r = t.loc[(name, mode)]
            spec, n = int(r["specialists"]), int(r["neurons"])
            row = {"model": name, "top tokens": mode, "neurons": n, "trained specialists": spec,
                   "random-weight specialists": rw[mode][0]}
            controls = {"random-weight layer": (rw[mode][0], _fisher(spec, n, rw[mode][0], rw[mode][1]))}
            if "expected neurons, random directions" in r.index:
                rd = int(round(float(r["expected neurons, random directions"])))
                row["random-direction specialists"] = rd
                controls["random directions"] = (rd, _fisher(spec, n, rd, n))
            if u is not None:
                uc, un = memo[u.name][mode]
                row["untrained model"] = u.name
                row["untrained-model specialists"] = uc
                controls["untrained model"] = (uc, _fisher(spec, n, uc, un))
            for c, (_, p) in controls.items():
                row[f"p vs {c}"] = p
            row["verdict"] = control_verdict(spec, controls, alpha)
            rows.append(row)
    return pd.DataFrame(rows)


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
