"""TinyStories architecture studies: sweep, compute scaling, contrastive objective.

Protocols: ``docs/methods.md#architecture-sweeps``, ``#compute-scaling`` and ``#contrastive`` (Rathod et al. 2024,
Table 1 and §6; Eldan & Li 2023).

* **Sweep** (Rathod et al. 2024, Table 1): GPT-Neo decoders over a hidden × layers × heads grid, every run on the same
  data, steps and batch (equal tokens), trained by :func:`helpers.training.recipes.train_decoder` (the one training loop).
  :func:`expand_grid` turns the params' sub-grids into shapes.
* **Compute scaling** (Eldan & Li 2023's "scaling law" discussion): every validation point of every run is placed at
  its training compute C = :func:`helpers.models.decoder.flops_per_token` × tokens seen (6·N for the matmul weights plus
  the attention scores and mixing, forward + backward). :func:`pareto_frontier` keeps the points no cheaper point
  beats; :func:`fit_power_law` fits L = a·C^(-α) by least squares on log L vs log C and gives α with a t confidence
  interval. The checkpoints of one run are not independent (each continues the last) and an intermediate point of
  a cosine-schedule run is not a run trained to that length (Hoffmann et al. 2022), so the notebook's law is
  :func:`power_law_over_runs`: one point per run (:func:`run_frontier`: each run's final evaluation, the frontier of
  those), least squares over them, and α's interval a seeded percentile bootstrap over the runs
  (:func:`bootstrap_exponent`, through :func:`helpers.core.stats.bootstrap_interval`).
* **Contrastive objective** (Rathod et al. 2024, §6): a ``fraction`` of every batch's rows are packed from stories whose
  sentences were shuffled (:class:`ContrastiveBlocks`); :func:`contrastive_loss` is
  L = L_next(normal rows) + α / (L_next(shuffled rows) + 0.01). Rows, not extra rows: the contrastive model sees
  the same number of tokens per step as the plain one, of which ``1 - fraction`` are ordinary stories.
  :func:`order_preference` measures what the objective aims at: how often a model gives a held-out story a
  higher log-probability than the same story with its sentences shuffled. :func:`loss_spikes` finds the spikes
  the report mentions.
* The compressor model (Rathod et al. 2024, §7) lives in :mod:`helpers.models.compressor`, its training in
  :mod:`helpers.training.compressor`; :func:`sample_remark` reads a greedy sample of it.
"""
from __future__ import annotations

import itertools
from collections import Counter
import math
import random
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from scipy import stats

from helpers.core.stats import bootstrap_interval, wilson_interval
from helpers.data.blocks import PackedBlocks, pack_blocks
from helpers.data.normalisation import split_sentences
from helpers.data.tokenizers import iter_story_ids
from helpers.evaluation.lm_scoring import causal_scores
from helpers.models.compressor import shifted_token_nll
from helpers.models.decoder import DecoderSpec, build_decoder, count_parameters, flops_per_token
from helpers.training.loop import lm_loss

SHAPE_KEYS = ("hidden", "layers", "heads")

# ============================================================================================ the sweep


def expand_grid(grids: Sequence[Mapping[str, Sequence[int]]] | Mapping[str, Sequence[int]]) -> list[dict[str, int]]:
    """The union of the cartesian products of ``grids`` (each ``{hidden: [...], layers: [...], heads: [...]}``),
    in order, without repeats. A shape whose hidden size is not divisible by its heads is an error."""
    if isinstance(grids, Mapping):
        grids = [grids]
    shapes: list[dict[str, int]] = []
    for g in grids:
        unknown = set(g) - set(SHAPE_KEYS)
        missing = set(SHAPE_KEYS) - set(g)
        if unknown or missing:
            raise ValueError(f"a sweep grid needs exactly {SHAPE_KEYS}; got {sorted(g)}")
        values = [list(g[k]) if isinstance(g[k], (list, tuple)) else [g[k]] for k in SHAPE_KEYS]
        for combo in itertools.product(*values):
            shape = dict(zip(SHAPE_KEYS, (int(v) for v in combo)))
            if min(shape.values()) <= 0:
                raise ValueError(f"sizes must be positive: {shape}")
            if shape["hidden"] % shape["heads"]:
                raise ValueError(f"hidden {shape['hidden']} is not divisible by {shape['heads']} heads")
            if shape not in shapes:
                shapes.append(shape)
    if not shapes:
        raise ValueError("the sweep grid is empty")
    return shapes


def shape_name(shape: Mapping[str, int]) -> str:
    return f"h{shape['hidden']}-l{shape['layers']}-a{shape['heads']}"


@dataclass
class SweepRun:
    """One model of the sweep: its name, the full :class:`~helpers.models.decoder.DecoderSpec` and its size."""

    name: str
    spec: Any
    params: int
    non_embedding_params: int
    flops_per_token: float


def plan_sweep(base_spec, shapes: Sequence[Mapping[str, int]], context: int | None = None) -> list[SweepRun]:
    """Sweep runs: ``base_spec`` (vocabulary, context, window, dropout) with each shape's hidden/layers/heads."""
    runs = []
    for shape in shapes:
        spec = DecoderSpec(**{**asdict(base_spec), **shape})
        model = build_decoder(spec, fast=False, seed=0, bos_token_id=0, eos_token_id=0, pad_token_id=0)  # sizes only
        runs.append(SweepRun(shape_name(shape), spec, count_parameters(model), count_parameters(model, non_embedding=True),
                             flops_per_token(model.config, context=context or spec.context)))
    return runs


# ============================================================================================ compute scaling


def loss_points(history: Sequence[Mapping[str, Any]], flops_per_token: float, run: str, **fields: Any) -> list[dict]:
    """Validation points of one run's metrics (``helpers.training.loop.read_metrics``) with their training compute."""
    return [{"run": run, "step": r["step"], "tokens": r["tokens"], "flops": r["tokens"] * flops_per_token,
             "valid_loss": r["loss"], **fields} for r in history if r.get("split") == "valid"]


def pareto_frontier(points: Sequence[Mapping[str, Any]], x: str = "flops", y: str = "valid_loss") -> list[dict]:
    """Points that no point with less or equal ``x`` beats on ``y`` (ascending ``x``, strictly falling ``y``)."""
    out, best = [], math.inf
    for p in sorted(points, key=lambda p: (p[x], p[y])):
        if p[y] < best:
            out.append(dict(p))
            best = p[y]
    return out


def best_per_budget(points: Sequence[Mapping[str, Any]], budgets: Sequence[float]) -> list[dict]:
    """For each FLOP budget, the (run, step) with the lowest validation loss among points within the budget."""
    rows = []
    for b in budgets:
        within = [p for p in points if p["flops"] <= b]
        if within:
            best = min(within, key=lambda p: p["valid_loss"])
            rows.append({"budget_flops": b, **best})
    return rows


@dataclass
class PowerLaw:
    """L = a · C^(-exponent), fitted on log-log axes; ``ci`` is the confidence interval of the exponent, by
    ``method``: ``"t"`` (Student's t over the points) or ``"bootstrap over runs"`` (:func:`power_law_over_runs`:
    ``resamples`` percentile-bootstrap resamples of the runs, ``dropped`` of them left out because all their runs
    had one compute, seeded by ``seed``)."""

    a: float
    exponent: float
    ci: tuple[float, float]
    confidence: float
    r2: float
    n: int
    method: str = "t"
    resamples: int = 0
    dropped: int = 0
    seed: int | None = None

    def __call__(self, c):
        return self.a * np.asarray(c, dtype=float) ** (-self.exponent)

    @property
    def unit(self) -> str:
        """What each fitted point is: a run (one point per run) or a point (checkpoints)."""
        return "runs" if self.method == "bootstrap over runs" else "points"

    def describe(self) -> str:
        lo, hi = self.ci
        ci = (f"{self.confidence:.0%} CI [{lo:.4f}, {hi:.4f}] ({self.interval_method()})" if math.isfinite(lo)
              else "no CI (fewer than 3 points)")
        return f"L = {self.a:.3g} · C^(-{self.exponent:.4f}), {ci}, R² = {self.r2:.3f}, {self.n} {self.unit}"

    def interval_method(self) -> str:
        """The exponent interval's method in words (a table caption or a findings sentence says it)."""
        if self.method == "t":
            return f"Student's t with {self.n} − 2 degrees of freedom"
        return (f"percentile bootstrap over the {self.n} runs, one point each: {self.resamples:,} resamples of the runs "
                f"with replacement, refitted, seed {self.seed}"
                + (f"; {self.dropped:,} resamples whose runs all had one compute left out" if self.dropped else ""))


def fit_power_law(c: Sequence[float], loss: Sequence[float], confidence: float = 0.95) -> PowerLaw:
    """Ordinary least squares of log L on log C; the exponent's interval uses Student's t with n - 2 dof."""
    c, loss = np.asarray(c, dtype=float), np.asarray(loss, dtype=float)
    if not (np.isfinite(c).all() and np.isfinite(loss).all() and (c > 0).all() and (loss > 0).all()):
        raise ValueError("compute and loss must be positive and finite")
    x, y = np.log(c), np.log(loss)
    if len(x) < 2 or np.ptp(x) == 0:
        raise ValueError("a power-law fit needs at least two points at different compute")
    slope, intercept = np.polyfit(x, y, 1)
    pred = intercept + slope * x
    ss_res, ss_tot = float(((y - pred) ** 2).sum()), float(((y - y.mean()) ** 2).sum())
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else 1.0
    n = len(x)
    if n > 2:
        se = math.sqrt(ss_res / (n - 2) / float(((x - x.mean()) ** 2).sum()))
        t = float(stats.t.ppf(0.5 + confidence / 2, n - 2))
        ci = (-slope - t * se, -slope + t * se)
    else:
        ci = (math.nan, math.nan)
    return PowerLaw(float(math.exp(intercept)), float(-slope), ci, confidence, r2, n)


def run_frontier(points: Sequence[Mapping[str, Any]], x: str = "flops", y: str = "valid_loss") -> list[dict]:
    """One point per run for the compute law: each run's final evaluation (its largest step; a run trained to the
    end of its schedule, not an intermediate checkpoint), then the :func:`pareto_frontier` of those points (the
    runs no cheaper run beats). A run's evaluation logged twice, and two runs with the same compute and loss, give
    one point."""
    final: dict[Any, dict] = {}
    for p in points:
        r = p["run"]
        if r not in final or (p.get("step", 0), p[x]) > (final[r].get("step", 0), final[r][x]):
            final[r] = dict(p)
    return pareto_frontier(list(final.values()), x, y)


def bootstrap_exponent(c: Sequence[float], loss: Sequence[float], confidence: float = 0.95, n_boot: int = 2000,
                       seed: int = 0) -> tuple[tuple[float, float], int]:
    """Percentile-bootstrap ``confidence`` interval of the exponent α of L = a·C^(-α): the (C, L) points (one per
    run) resampled with replacement ``n_boot`` times (:func:`helpers.core.stats.bootstrap_interval`, seeded) and
    refitted by least squares in log-log. A resample whose points all have one compute has no slope and is left
    out. Returns the interval and how many resamples were left out; fewer than 3 points give no interval (NaN)."""
    x, y = np.log(np.asarray(c, dtype=float)), np.log(np.asarray(loss, dtype=float))
    if len(x) < 3:
        return (math.nan, math.nan), 0
    dropped = []

    def slopes(idx: np.ndarray) -> np.ndarray:
        xs, ys = x[idx], y[idx]
        xc = xs - xs.mean(axis=1, keepdims=True)
        sxx = (xc ** 2).sum(axis=1)
        ok = sxx > 1e-12 * max(1.0, float(np.ptp(x)) ** 2)
        dropped.append(int((~ok).sum()))
        return -(xc[ok] * (ys[ok] - ys[ok].mean(axis=1, keepdims=True))).sum(axis=1) / sxx[ok]

    lo, hi = bootstrap_interval(len(x), slopes, confidence, n_boot, seed)
    return (float(lo), float(hi)), dropped[0]


def power_law_over_runs(points: Sequence[Mapping[str, Any]], confidence: float = 0.95, n_boot: int = 2000,
                        seed: int = 0) -> PowerLaw:
    """The compute law of a sweep from one point per run (:func:`run_frontier`): α by least squares in log-log over
    those points (:func:`fit_power_law`), its interval by :func:`bootstrap_exponent` over the runs (the checkpoints
    of one run are not independent, so they are never resampled as if they were). A frontier of one run (a sweep
    whose cheapest run is also its best) has no law: a, α and the interval are NaN, ``n`` says why."""
    front = run_frontier(points)
    c, loss = [p["flops"] for p in front], [p["valid_loss"] for p in front]
    if len(front) < 2:
        return PowerLaw(math.nan, math.nan, (math.nan, math.nan), confidence, math.nan, len(front),
                        "bootstrap over runs", n_boot, 0, seed)
    fit = fit_power_law(c, loss, confidence)
    ci, dropped = bootstrap_exponent(c, loss, confidence, n_boot, seed)
    return replace(fit, ci=ci, method="bootstrap over runs", resamples=n_boot, dropped=dropped, seed=seed)


# ============================================================================================ contrastive training

def shuffle_sentences(text: str, rng: random.Random, tries: int = 10) -> str | None:
    """The story with its sentences in a random order different from the original (``None`` when it has fewer
    than two distinct sentences). The text between sentences (spaces, line breaks) stays where it was, so the
    layout of a shuffled story (its paragraph breaks) does not tell it apart from an ordinary one."""
    sents = split_sentences(text)
    if len(set(sents)) < 2:
        return None
    ends, pos = [], 0
    for s in sents:  # every sentence is a piece of the text, in order
        start = text.index(s, pos)
        ends.append((start, start + len(s)))
        pos = start + len(s)
    gaps = [text[ends[j][1]:ends[j + 1][0]] for j in range(len(sents) - 1)]
    order = sents[1:] + sents[:1]
    for _ in range(tries):
        trial = sents[:]
        rng.shuffle(trial)
        if trial != sents:
            order = trial
            break
    return "".join(s + gap for s, gap in zip(order, gaps)) + order[-1]


class ContrastiveBlocks(PackedBlocks):
    """Packed blocks of the ordinary stories plus blocks of sentence-shuffled stories. Global batch ``step`` has
    ``round(fraction × size)`` shuffled rows spread evenly among the ordinary ones, flagged in ``"shuffled"``.

    ``blocks`` (length, epochs, tokens per step) are the ordinary blocks; both streams are deterministic and
    resumable like :class:`~helpers.data.blocks.PackedBlocks`."""

    def __init__(self, blocks: torch.Tensor, shuffled: torch.Tensor, fraction: float, seed: int = 0):
        super().__init__(blocks, seed)
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"the shuffled fraction must be in (0, 1), got {fraction}")
        if shuffled.ndim != 2 or shuffled.shape[1] != blocks.shape[1] or len(shuffled) == 0:
            raise ValueError("shuffled blocks must be a non-empty [n, length] tensor of the same block length")
        self.shuffled = PackedBlocks(shuffled, seed + 7919)
        self.fraction = fraction

    def layout(self, size: int) -> torch.Tensor:
        """Which rows of a global batch of ``size`` are shuffled (the same for every step)."""
        k = round(self.fraction * size)
        flags = torch.zeros(size, dtype=torch.bool)
        if k:
            flags[[min(size - 1, int((i + 0.5) * size / k)) for i in range(k)]] = True
        return flags

    def batch(self, step: int, size: int, rank: int = 0, world: int = 1) -> dict:
        if size % world:
            raise ValueError(f"global batch {size} is not divisible by {world} processes")
        flags = self.layout(size)
        k = int(flags.sum())
        normal = self.indices(step, size - k)
        shuf = self.shuffled.indices(step, k) if k else []
        rows = torch.empty(size, self.blocks.shape[1], dtype=self.blocks.dtype)
        rows[~flags] = self.blocks[normal]
        if k:
            rows[flags] = self.shuffled.blocks[shuf]
        per = size // world
        part = slice(rank * per, (rank + 1) * per)
        return {"input_ids": rows[part], "shuffled": flags[part]}


def contrastive_data(tokenizer, texts: Sequence[str], block: int, fraction: float, seed: int) -> tuple[ContrastiveBlocks, int]:
    """:class:`ContrastiveBlocks` from ``texts``: ordinary blocks from every story (the plain model's data) and
    shuffled blocks from a seeded ``fraction`` of them; also returns how many stories were shuffled."""
    rng = random.Random(seed)
    chosen = sorted(rng.sample(range(len(texts)), max(1, round(fraction * len(texts)))))
    shuffled = [s for s in (shuffle_sentences(texts[i], rng) for i in chosen) if s is not None]
    if not shuffled:
        raise ValueError("no story has two sentences to shuffle")
    normal = pack_blocks(iter_story_ids(tokenizer, texts, add_eot=True), block)
    shuf = pack_blocks(iter_story_ids(tokenizer, shuffled, add_eot=True), block)
    return ContrastiveBlocks(normal, shuf, fraction, seed), len(shuffled)


def row_losses(model, input_ids: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of each row (nats per predicted token)."""
    return shifted_token_nll(model(input_ids=input_ids, use_cache=False).logits, input_ids).mean(1)


def contrastive_loss(alpha: float, eps: float = 0.01) -> Callable[[torch.nn.Module, dict], torch.Tensor]:
    """The contrastive loss of Rathod et al. 2024 (§6) for :func:`helpers.training.loop.train`: L_n + α / (L_c + eps), L_n over the ordinary rows,
    L_c over the shuffled rows of the batch. Batches without a ``"shuffled"`` flag (validation) give plain L_n,
    so validation losses compare with a plain model's."""

    def loss_fn(model: torch.nn.Module, batch: dict) -> torch.Tensor:
        flags = batch.get("shuffled")
        if flags is None or not bool(flags.any()):
            return lm_loss(model, batch)
        per_row = row_losses(model, batch["input_ids"])
        l_c = per_row[flags].mean()
        l_n = per_row[~flags].mean() if bool((~flags).any()) else per_row.new_zeros(())
        return l_n + alpha / (l_c + eps)

    return loss_fn


def sentence_prefix(text: str, tokenizer, max_tokens: int) -> str:
    """The longest prefix of whole sentences of ``text`` within ``max_tokens`` tokens ("" if the first is longer)."""
    sents = split_sentences(text)
    lengths = [len(ids) for ids in tokenizer([" ".join(sents[: i + 1]) for i in range(len(sents))],
                                              add_special_tokens=False)["input_ids"]] if sents else []
    k = sum(1 for n in lengths if n <= max_tokens)
    return " ".join(sents[:k])


@torch.no_grad()
def order_preference(model, tokenizer, stories: Sequence[str], seed: int = 0, batch_size: int = 32,
                     max_tokens: int | None = None) -> dict[str, float]:
    """How often ``model`` gives a story a higher total log-probability than the same story with its sentences
    shuffled (seeded), with a Wilson 95 % interval (``ci_low``/``ci_high``), and the mean per-token loss of each
    version. With ``max_tokens`` each story is first cut to
    its longest prefix of whole sentences that fits (so neither version is truncated by the model's context);
    stories left with fewer than two distinct sentences are skipped. Ties (identical scores) count half; ``wins``,
    ``ties`` and ``losses`` are the raw counts (an exact 50 % can be ties or an even split of wins and losses)."""
    if max_tokens is not None:
        stories = [sentence_prefix(s, tokenizer, max_tokens) for s in stories]
    rng = random.Random(seed)
    pairs = [(s, t) for s in stories if (t := shuffle_sentences(s, rng)) is not None]
    if not pairs:
        raise ValueError(f"none of the {len(stories)} stories has two sentences to shuffle"
                         + (f" within {max_tokens} tokens" if max_tokens is not None else ""))
    reqs = [(None, s) for s, _ in pairs] + [(None, t) for _, t in pairs]
    was = model.training
    model.eval()
    try:
        lp, n = causal_scores(model, tokenizer, reqs, batch_size=batch_size)
    finally:
        model.train(was)
    k = len(pairs)
    orig, shuf = lp[:k], lp[k:]
    n_win, n_tie = int((orig > shuf).sum()), int((orig == shuf).sum())
    wins = n_win + 0.5 * n_tie
    lo, hi = wilson_interval(int(round(wins)), k)  # ties count half; the interval rounds them
    return {"stories": k, "prefers_original": wins / k, "ci_low": lo, "ci_high": hi,
            "wins": n_win, "ties": n_tie, "losses": k - n_win - n_tie,
            "loss_original": float(-orig.sum() / n[:k].sum()), "loss_shuffled": float(-shuf.sum() / n[k:].sum())}


def loss_spikes(history: Sequence[Mapping[str, Any]], factor: float = 1.25, window: int = 5) -> list[dict]:
    """Training-loss spikes: logged train points whose loss exceeds ``factor`` × the median of the ``window``
    points before them.  A series of at most ``window`` logged train points cannot contain one by construction:
    ValueError then (log more often: ``log_every``) rather than a silent "no spikes"."""
    if window < 1:
        raise ValueError(f"window must be >= 1; got {window}")
    train = [r for r in history if r.get("split") == "train"]
    if len(train) <= window:
        raise ValueError(f"only {len(train)} logged training losses: a spike needs {window} earlier points, so at least "
                         f"{window + 1} are needed (log the training loss more often: lower log_every)")
    out = []
    for i in range(window, len(train)):
        ref = float(np.median([r["loss"] for r in train[i - window : i]]))
        if train[i]["loss"] > factor * ref:
            out.append({"step": train[i]["step"], "loss": train[i]["loss"], "median_before": ref})
    return out


# ============================================================================================ the compressor


def sample_remark(token_ids: Sequence[int], decode: Callable[[list[int]], str], threshold: float = 0.5,
                  max_distinct: int = 3) -> str:
    """One sentence on a greedy sample's health from its generated token ids: how many distinct tokens it uses and
    the share of the most frequent one. It is called degenerate (the model loops over one or a few tokens: it has not
    learned to write at this size and number of steps) when that share is at least ``threshold`` or at most
    ``max_distinct`` distinct tokens fill ten or more. ``decode`` turns ids into text."""
    ids = [int(t) for t in token_ids]
    if not ids:
        return "the sample is empty: no token was generated"
    counts = Counter(ids)
    top, count = counts.most_common(1)[0]
    share = count / len(ids)
    line = (f"{len(counts)} distinct token(s) in {len(ids)} generated; the most frequent, {decode([top])!r}, is "
            f"{count} of them ({share:.0%})")
    if share >= threshold or (len(counts) <= max_distinct and len(ids) >= 10):
        loop = ", ".join(repr(decode([t])) for t, _ in counts.most_common(max_distinct))
        return (line + f" — the greedy sample loops over {loop}: the model has not learned to write at this size "
                "and number of steps")
    return line + ": not a loop over one or a few tokens"
