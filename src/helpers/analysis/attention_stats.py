"""Per-head attention statistics and their known-answer check (``docs/methods.md#interpretability``): which entries a
causal head may attend to (:func:`allowed_mask`), Rathod et al.'s correlation of weight with distance
(:func:`distance_correlation`, :func:`positional_label`), and the project's head statistic — the share of a head's
attention variance (of √weights) that the offset alone explains (:func:`offset_eta_squared`), the evenness of its rows
(:func:`attention_evenness`) and its share on fixed positions (:func:`sink_share`), and the graded class they give
(:func:`head_kind`: positional, sink, content, mixed, diffuse) — checked on ten synthetic heads with known answers
(:func:`synthetic_heads`, :func:`reference_heads`) before any trained head is read.
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def allowed_mask(T: int, window: int | None = None, first: int = 0) -> np.ndarray:
    """Entries ``(i, j)`` a causal head may attend to: ``j ≤ i`` (and ``i − j < window`` for a local layer), with
    ``i, j ≥ first`` (``first = 1`` leaves out the start token)."""
    i, j = np.indices((T, T))
    m = (j <= i) & (i >= first) & (j >= first)
    if window is not None:
        m &= (i - j) < window
    return m


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row of ``x`` (``[..., n]``) with ``y`` (``[n]``); NaN for a constant row."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean()
    num = (xc * yc).sum(axis=-1)
    den = np.sqrt((xc ** 2).sum(axis=-1) * (yc ** 2).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        r = num / den
    return np.where(den > 1e-12, r, np.nan)


def distance_correlation(att: np.ndarray, lower: bool = True, window: int | None = None, first: int = 0) -> np.ndarray:
    """Correlation between attention weight and token distance of ``att`` (``[..., T, T]``, rows = queries).

    ``lower=True``: over the causal lower triangle only (distance ``i − j ≥ 0``; with ``window``, only the entries a
    local layer can see); ``lower=False``: over the whole matrix with distance ``|i − j|``, as a naive computation
    on the heat map would do (the zeros above the diagonal then bias the value). ``first`` leaves out the first
    rows/columns (the start token)."""
    att = np.asarray(att)
    T = att.shape[-1]
    i, j = np.indices((T, T))
    if lower:
        m = allowed_mask(T, window, first)
        dist = (i - j)[m]
    else:
        m = (i >= first) & (j >= first)
        dist = np.abs(i - j)[m]
    return _pearson(att[..., m], dist)


def positional_label(r: float | np.ndarray, threshold: float = 0.5):
    """``"positional"`` if |r| > threshold, else ``"semantic"`` (Rathod et al. 2024, §5.1); NaN r → ``"undefined"``."""
    r_arr = np.asarray(r, dtype=float)
    out = np.where(np.isnan(r_arr), "undefined", np.where(np.abs(r_arr) > threshold, "positional", "semantic"))
    return str(out) if out.ndim == 0 else out


def reference_correlations(T: int, window: int | None = None) -> dict[str, float]:
    """r (lower triangle, start token excluded as in the analysis) of idealised heads on a story of ``T`` tokens
    after the start token: uniform attention, attention to the previous token, to the token itself, to the first
    story token. Shows what the |r| > 0.5 criterion can and cannot detect."""
    n = T + 1
    m = allowed_mask(n, window, 0)
    uni = m / m.sum(axis=1, keepdims=True)
    prev = np.eye(n, k=-1)
    prev[0, 0] = prev[1, 1] = 1.0
    selfa = np.eye(n)
    first = np.zeros((n, n))
    first[1:, 1] = 1.0
    first[0, 0] = 1.0
    pats = {"uniform": uni, "previous token": prev, "self": selfa, "first story token": first}
    return {k: float(distance_correlation(v, True, window, first=1)) for k, v in pats.items()}


def offset_eta_squared(att: np.ndarray, window: int | None = None, first: int = 1, root: bool = True) -> np.ndarray:
    """How much of a head's attention pattern the offset ``d = i − j`` alone explains: η² of the weights grouped by
    offset, after each query row's own mean is removed (rows differ in length, and a row's weights sum to its story
    mass, so the row effect is not the head's doing). Over the allowed entries of rows with at least two keys;
    ``first = 1`` leaves out the start token. 1 for a head that attends at a fixed offset (previous token, self), high
    for a recency head, near 0 for a head whose targets depend on the tokens (content-driven), NaN for exactly uniform
    attention (nothing to explain). Returns one value per leading index of ``att`` (``[..., T, T]``).

    ``root`` (the project's head statistic): η² of the **square roots** of the weights. On raw weights a component of
    mass m on k keys adds about m²/k to a row's variance, so the most concentrated component dominates: a head that
    puts 30 % on the previous token and 70 % on content words reads η² 0.67 at 128 tokens and more on longer rows. On
    √weights the same component adds about m (Σ (√(m/k))² = m, the Hellinger geometry of distributions), so η²
    follows the mass that goes by offset (that head: ≈ 0.37 at any length). ``root=False`` gives the raw-weight value.

    Unlike a Pearson r of weight against distance (Rathod et al. 2024), this does not assume a linear trend: r is
    −0.17 for a perfect previous-token head and about −0.5 for a recency head (τ = 5) on 128 tokens, so |r| > 0.5
    misses the canonical positional heads (:func:`reference_heads` shows both statistics)."""
    att = np.asarray(att, dtype=np.float64)
    if root:
        att = np.sqrt(np.clip(att, 0.0, None))
    T = att.shape[-1]
    i, j = np.indices((T, T))
    m = allowed_mask(T, window, first)
    m &= (m.sum(axis=1) >= 2)[:, None]
    rows, offs = i[m], (i - j)[m]
    row_n = np.bincount(rows, minlength=T).astype(np.float64)
    off_n = np.bincount(offs, minlength=T).astype(np.float64)
    lead = att.shape[:-2]
    flat = att[..., m].reshape(-1, int(m.sum()))
    out = np.full(len(flat), np.nan)
    for h, v in enumerate(flat):
        res = v - (np.bincount(rows, weights=v, minlength=T) / np.maximum(row_n, 1))[rows]
        total = float((res ** 2).sum())
        if total > 1e-12:
            by_off = np.bincount(offs, weights=res, minlength=T)
            out[h] = float((by_off[off_n > 0] ** 2 / off_n[off_n > 0]).sum()) / total
    return out.reshape(lead)


def attention_evenness(att: np.ndarray, window: int | None = None, first: int = 1) -> np.ndarray:
    """Mean normalised entropy of the query rows (over story keys, rows with at least two keys): 1 for uniform
    attention, 0 for attention on one key. A head above :data:`DIFFUSE_EVENNESS` spreads its weight nearly evenly,
    and neither distance nor content explains it."""
    att = np.asarray(att, dtype=np.float64)
    T = att.shape[-1]
    m = allowed_mask(T, window, first)
    n = m.sum(axis=1)
    a = np.where(m, att, 0.0)
    p = a / np.maximum(a.sum(axis=-1, keepdims=True), 1e-300)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(axis=-1)
        even = ent / np.log(np.maximum(n, 2))
    return even[..., n >= 2].mean(axis=-1)


def sink_share(att: np.ndarray, window: int | None = None) -> np.ndarray:
    """How much a head parks on fixed positions: the mean weight of the query rows ``i ≥ 2`` (those that see the
    start token: inside the window of a local layer) on the start token plus the first story token, as an excess
    over what uniform attention gives them and scaled to that headroom, ``(f − f_uniform) / (1 − f_uniform)``: 0 for
    uniform attention (which gives short rows a large share of fixed positions), 1 for a head whose every row sits on
    them. One value per leading index of ``att`` (``[..., T, T]``); NaN where no row qualifies."""
    att = np.asarray(att, dtype=np.float64)
    T = att.shape[-1]
    rows = np.arange(2, T if window is None else min(T, int(window)))
    if len(rows) == 0:
        return np.full(att.shape[:-2], np.nan)
    f = (att[..., rows, 0] + att[..., rows, 1]).mean(axis=-1)
    fu = float(np.mean(2.0 / (rows + 1.0)))
    return (f - fu) / (1.0 - fu)


#: the classes of :func:`head_kind`, in the order the tables and figures list them
HEAD_KINDS = ("positional", "sink", "content", "mixed", "diffuse")
POSITIONAL_ETA2 = 0.7
CONTENT_ETA2 = 0.2
DIFFUSE_EVENNESS = 0.9
SINK_SHARE = 0.6
MIXED_SINK = 0.25


def head_kind(eta2, evenness, sink=0.0, threshold: float = POSITIONAL_ETA2, content: float = CONTENT_ETA2,
              diffuse: float = DIFFUSE_EVENNESS, sink_at: float = SINK_SHARE, mixed_sink: float = MIXED_SINK):
    """The graded class of a head from its offset η² (:func:`offset_eta_squared`, √weights), the evenness of its
    rows (:func:`attention_evenness`) and its sink share (:func:`sink_share`):

    * **sink** when the sink share reaches ``sink_at`` (0.6): the head parks most of its mass on the start token or
      the first story token;
    * otherwise the story part: **diffuse** when its rows are nearly even (evenness above ``diffuse``, or η²
      undefined), **positional** when η² ≥ ``threshold`` (0.7: the offset explains the pattern), **content**
      (semantic) when η² ≤ ``content`` (0.2: the offset explains almost nothing, the tokens decide), **mixed** in
      between (neither offset nor content dominates);
    * a positional, content or mixed story part beside a sink share of at least ``mixed_sink`` (0.25) is **mixed**
      too (a sink share plus an offset or content share); a diffuse one stays diffuse.

    The thresholds are set so that the ten synthetic heads of :func:`synthetic_heads` get the class a careful reader
    gives them (:data:`EXPECTED_KINDS`) at 30 to 255 tokens; vectorised over arrays."""
    e, v, s = (np.asarray(x, dtype=float) for x in (eta2, evenness, sink))
    s = np.where(np.isnan(s), 0.0, s)
    story = np.where(np.isnan(e) | (v > diffuse), "diffuse",
                     np.where(e >= threshold, "positional", np.where(e <= content, "content", "mixed")))
    out = np.where(s >= sink_at, "sink", np.where((s >= mixed_sink) & (story != "diffuse"), "mixed", story))
    return str(out) if out.ndim == 0 else out


def synthetic_heads(T: int = 128, seed: int = 0, tau: float = 5.0) -> dict[str, np.ndarray]:
    """Ten idealised causal heads over a start token plus ``T`` story tokens (``[T + 1, T + 1]``, rows sum to 1), the
    known answers of the head classes (:data:`EXPECTED_KINDS`): ``previous token``; ``recency`` (weights ∝
    exp(−d / ``tau``)); ``uniform``; ``content`` (earlier tokens of one class, placed at random, whatever their
    distance); ``start-token sink`` (90 % on the start token, the rest even over the story); ``first-story-token
    sink`` (90 % on the first story token, the rest even); ``previous token / sink 50/50``; ``previous token 30 % +
    content 70 %``; ``recency 60 % + content 40 %`` (mixtures of mass); ``same token (induction-like)`` (earlier
    occurrences of the query's own token, from a vocabulary of 16)."""
    n = T + 1
    i, j = np.indices((n, n))
    m = j <= i
    rng = np.random.default_rng(seed)
    cls = rng.integers(0, 6, n)
    tok = rng.integers(0, 16, n)

    def norm(w):
        w = np.where(m, w, 0.0)
        return w / w.sum(axis=1, keepdims=True)

    prev = norm(np.where(i - j == 1, 1.0, 0.0) + np.where(i <= 1, np.eye(n), 0.0))
    recency = norm(np.exp(-(i - j) / tau))
    uniform = norm(np.ones((n, n)))
    content = norm(np.exp(4.0 * (cls[None, :] == 0)) * np.ones((n, n)))
    start = norm(np.where(j == 0, 1.0, 0.0))
    story_even = norm(np.where((j >= 1) | (i == 0), 1.0, 0.0))
    first = norm(np.where(j == 1, 1.0, 0.0) + np.where(i == 0, 1.0, 0.0))
    same = norm(np.exp(4.0 * ((tok[None, :] == tok[:, None]) & (j < i) & (j >= 1))))
    return {"previous token": prev, "recency": recency, "uniform": uniform, "content": content,
            "start-token sink": 0.9 * start + 0.1 * story_even, "first-story-token sink": 0.9 * first + 0.1 * uniform,
            "previous token / sink 50/50": 0.5 * start + 0.5 * prev,
            "previous token 30 % + content 70 %": 0.3 * prev + 0.7 * content,
            "recency 60 % + content 40 %": 0.6 * recency + 0.4 * content,
            "same token (induction-like)": same}


#: the class a careful reader gives each synthetic head (why: docs/methods.md#interpretability)
EXPECTED_KINDS = {"previous token": "positional", "recency": "positional", "uniform": "diffuse", "content": "content",
                  "start-token sink": "sink", "first-story-token sink": "sink", "previous token / sink 50/50": "mixed",
                  "previous token 30 % + content 70 %": "mixed", "recency 60 % + content 40 %": "mixed",
                  "same token (induction-like)": "content"}


def reference_heads(T: int, window: int | None = None, seed: int = 0,
                    threshold: float = POSITIONAL_ETA2) -> "pd.DataFrame":  # noqa: F821
    """The known-answer check of the head classes on :func:`synthetic_heads` of ``T`` story tokens: for each ideal
    head, offset η² (√weights, the statistic) and on raw weights, evenness, sink share, the class they give
    (:func:`head_kind` at ``threshold``), the expected class, and Pearson r with Rathod et al.'s |r| > 0.5 label
    beside them."""
    rows = []
    for name, a in synthetic_heads(T, seed).items():
        if window is not None:
            a = np.where(allowed_mask(len(a), window, 0), a, 0.0)
            a = a / a.sum(axis=1, keepdims=True)
        e, v = float(offset_eta_squared(a, window)), float(attention_evenness(a, window))
        raw, s = float(offset_eta_squared(a, window, root=False)), float(sink_share(a, window))
        r = float(distance_correlation(a, True, window, first=1))
        rows.append({"ideal head": name, "offset η²": e, "offset η² (raw weights)": raw, "evenness": v,
                     "sink share": s, "kind (η² rule)": head_kind(e, v, s, threshold),
                     "expected": EXPECTED_KINDS[name], "r (lower triangle)": r,
                     "label (|r| > 0.5 rule)": positional_label(r)})
    return pd.DataFrame(rows)
