"""Span masking for LTG-BERT pretraining and the encoder's training data; the procedure (blocks, shortening,
budget, spans, replacement) and its departures from the reference code are in ``docs/methods.md#masking``.

Entry points: :func:`pack_encoder_blocks` (documents → ``[n, T]`` blocks ``[CLS] piece [SEP]``; ``doc_sep_id`` adds a
separator to documents that lack one, ``keep_remainder=True`` pads the last piece with ``[PAD]`` instead of dropping
it), :func:`mask_batch` (:func:`shorten` then :func:`span_mask`, vectorised over the batch; :class:`MaskingConfig`
holds the hyper-parameters, :class:`TokenIds` the special ids), :class:`MaskedBlocks` and :class:`LongPhaseBlocks`
(training data), :func:`mlm_loss` and :func:`mlm_metrics`.

Everything is drawn from one numpy ``Generator``: the output is a pure function of (input, generator state).
:class:`MaskedBlocks` seeds it from ``(seed, step)`` (:func:`step_rng`) and masks the global batch before slicing it.
With the shared training loop, :meth:`MaskedBlocks.batch` returns ``{"input_ids", "attention_mask", "labels"}``
(labels ``-100`` where nothing is predicted); the loop splits every tensor into micro-batches and hands them to
:func:`mlm_loss`.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Iterable, Optional, Sequence

import numpy as np
import torch

from helpers.core.stats import bootstrap_interval
from helpers.data.blocks import PackedBlocks
from helpers.data.tokenizers import iter_story_ids

IGNORE = -100


@dataclass(frozen=True)
class MaskingConfig:
    """The reference's masking hyper-parameters (``mask_p``, ``random_p``, ``keep_p``, ``short_p``) and span law."""

    mask_p: float = 0.15
    random_p: float = 0.1
    keep_p: float = 0.1
    short_p: float = 0.1
    geometric_p: float = 1 / 3
    span_mod: int = 10

    def __post_init__(self):
        if not 0 < self.mask_p <= 1 or not 0 < self.geometric_p <= 1:
            raise ValueError(f"mask_p and geometric_p must lie in (0, 1]: {self}")
        if self.random_p < 0 or self.keep_p < 0 or self.random_p + self.keep_p > 1:
            raise ValueError(f"random_p and keep_p must be >= 0 with a sum <= 1: {self}")
        if not 0 <= self.short_p <= 1 or self.span_mod < 2:
            raise ValueError(f"short_p must lie in [0, 1] and span_mod be >= 2: {self}")


@dataclass(frozen=True)
class TokenIds:
    """The ids masking needs (from the encoder tokenizer: ``TokenIds.from_tokenizer(tok)``)."""

    vocab_size: int
    mask_id: int
    cls_id: int
    sep_id: int
    pad_id: int
    special_ids: tuple[int, ...]

    @classmethod
    def from_tokenizer(cls, tokenizer) -> "TokenIds":
        ids = dict(mask_id=tokenizer.mask_token_id, cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id,
                   pad_id=tokenizer.pad_token_id)
        missing = [k for k, v in ids.items() if v is None]
        if missing:
            raise ValueError(f"the tokenizer has no {missing} token (is it an encoder tokenizer?)")
        specials = set(tokenizer.all_special_ids) | set(ids.values())
        return cls(vocab_size=len(tokenizer), special_ids=tuple(sorted(specials)), **ids)


# --------------------------------------------------------------------------------------------- theory


def span_length_distribution(p: float = 1 / 3, mod: int = 10) -> np.ndarray:
    """P(L = r), r = 0 … mod − 1, for L = Geometric(p) mod ``mod`` (Geometric on 1, 2, …)::

        P(r) = p·q^(r−1) / (1 − q^mod)  for r ≥ 1,      P(0) = p·q^(mod−1) / (1 − q^mod)."""
    q = 1 - p
    r = np.arange(mod)
    probs = p * q ** (r - 1.0) / (1 - q ** mod)
    probs[0] = p * q ** (mod - 1) / (1 - q ** mod)
    return probs


def expected_span_length(p: float = 1 / 3, mod: int = 10, nonzero: bool = False) -> float:
    """E[Geometric(p) mod ``mod``] = (1 − mod·q^(mod−1) + (mod−1)·q^mod) / (p·(1 − q^mod)) (2.735 for p = 1/3, mod = 10);
    with ``nonzero`` the mean of the draws that mask something, i.e. divided by 1 − P(0) = (1 − q^(mod−1))/(1 − q^mod)
    (2.760)."""
    q = 1 - p
    mean = (1 - mod * q ** (mod - 1) + (mod - 1) * q ** mod) / (p * (1 - q ** mod))
    if nonzero:
        mean /= (1 - q ** (mod - 1)) / (1 - q ** mod)
    return mean


# --------------------------------------------------------------------------------------------- masking


def _rng(seed_or_rng) -> np.random.Generator:
    if isinstance(seed_or_rng, np.random.Generator):
        return seed_or_rng
    return np.random.default_rng(0 if seed_or_rng is None else seed_or_rng)


def shorten(ids: np.ndarray, tok: TokenIds, short_p: float, rng: np.random.Generator
            ) -> tuple[np.ndarray, np.ndarray]:
    """Cut each ``[CLS] … [SEP]`` row, with probability ``short_p``, to ``[CLS] c₁…c_k [SEP] [PAD]…`` with ``k``
    uniform in ``1 … T − 3``. Returns (ids, attention_mask); rows already containing ``[PAD]`` keep their mask."""
    b, t = ids.shape
    u = rng.random(b)
    k = rng.integers(1, max(2, t - 2), size=b)
    ids = ids.copy()
    attn = (ids != tok.pad_id).astype(np.int64)
    rows = np.flatnonzero(u < short_p)
    if t >= 4 and len(rows):
        pos = np.arange(t)
        kk = k[rows][:, None]
        sub = ids[rows]
        sub = np.where(pos == kk + 1, tok.sep_id, sub)
        sub = np.where(pos > kk + 1, tok.pad_id, sub)
        ids[rows] = sub
        attn[rows] = (pos <= kk + 1)
    return ids, attn


def span_mask(ids: np.ndarray | torch.Tensor, attention_mask, tok: TokenIds, cfg: MaskingConfig,
              rng: np.random.Generator | int | None = None, return_spans: bool = False) -> dict:
    """Span-mask a batch ``ids`` [B, T] (``docs/methods.md#masking``). Returns torch tensors ``input_ids`` and
    ``labels``; with ``return_spans`` also ``kind`` [B, T] (0 = not chosen, 1 = [MASK], 2 = random, 3 = kept) and
    ``spans``: a dict of 1-D tensors over every span drawn for a sequence that still needed tokens: ``row``,
    ``drawn`` (L after mod), ``applied`` (positions it actually took), ``kind``.

    Runs in numpy (single-threaded: on a busy 2-core machine torch's threaded element-wise kernels on such small
    arrays are ~20× slower than numpy here)."""
    rng = _rng(rng)
    ids = ids.numpy() if isinstance(ids, torch.Tensor) else np.asarray(ids)
    ids = ids.astype(np.int64, copy=False)
    b, t = ids.shape
    if attention_mask is None:
        attention_mask = np.ones_like(ids)
    attention_mask = attention_mask.numpy() if isinstance(attention_mask, torch.Tensor) else np.asarray(attention_mask)
    cand = ~np.isin(ids, np.asarray(tok.special_ids, dtype=np.int64)) & (attention_mask != 0)
    n_cand = cand.sum(1)
    budget = ((rng.random((b, t)) < cfg.mask_p) & cand).sum(1)
    budget = np.minimum(np.maximum(budget, 1), n_cand)
    lengths = np.maximum(attention_mask.sum(1), 1)  # unpadded length: spans start in [1 - L, len - 1]
    pos = np.arange(t)
    free = cand.copy()  # maskable and not taken yet
    kind = np.zeros((b, t), dtype=np.int8)
    remaining = budget.astype(np.int64)
    p_mask = 1.0 - cfg.random_p - cfg.keep_p
    log = {"row": [], "drawn": [], "applied": [], "kind": []}
    rounds, max_rounds = 0, 64 * t + 64
    active = np.flatnonzero(remaining > 0)
    while len(active):
        rounds += 1
        if rounds > max_rounds:  # unreachable in practice: each round covers a needed token with probability > 0
            raise RuntimeError("span masking did not reach its budget")
        n = len(active)
        span_len = rng.geometric(cfg.geometric_p, size=n) % cfg.span_mod
        start = (rng.random(n) * (lengths[active] + span_len - 1)).astype(np.int64) + 1 - span_len
        u = rng.random(n)
        k = np.where(u < p_mask, 1, np.where(u < 1.0 - cfg.keep_p, 2, 3)).astype(np.int8)
        new = (pos >= start[:, None]) & (pos < (start + span_len)[:, None]) & free[active]
        new &= np.cumsum(new, axis=1, dtype=np.int32) <= remaining[active][:, None]  # trim the last span
        took = new.sum(1)
        hit = took > 0
        if hit.any():
            rows, sub = active[hit], new[hit]
            kind[rows] = np.where(sub, k[hit][:, None], kind[rows])
            free[rows] &= ~sub
            remaining[rows] -= took[hit]
        if return_spans:
            log["row"].append(active)
            log["drawn"].append(span_len)
            log["applied"].append(took)
            log["kind"].append(k.astype(np.int64))
        active = active[remaining[active] > 0]
    special = np.asarray(tok.special_ids, dtype=np.int64)
    allowed = np.setdiff1d(np.arange(tok.vocab_size, dtype=np.int64), special)
    random_tokens = allowed[rng.integers(len(allowed), size=(b, t))]
    inputs = np.where(kind == 1, tok.mask_id, ids)
    inputs = np.where(kind == 2, random_tokens, inputs)
    labels = np.where(kind > 0, ids, IGNORE)
    out = {"input_ids": torch.from_numpy(inputs), "labels": torch.from_numpy(labels)}
    if return_spans:
        out["kind"] = torch.from_numpy(kind)
        out["spans"] = {k_: torch.from_numpy(np.concatenate(v) if v else np.zeros(0, dtype=np.int64)).long()
                        for k_, v in log.items()}
    return out


def mask_batch(blocks: torch.Tensor | np.ndarray, tok: TokenIds, cfg: MaskingConfig = MaskingConfig(),
               rng: np.random.Generator | int | None = None, return_spans: bool = False) -> dict:
    """Shorten then span-mask ``blocks`` [B, T] of ``[CLS] … [SEP]`` rows with ``rng`` (a numpy Generator or a
    seed). Returns torch tensors ``input_ids``, ``attention_mask``, ``labels`` and ``original`` (the ids after
    shortening, before masking)."""
    rng = _rng(rng)
    ids = blocks.detach().cpu().numpy() if isinstance(blocks, torch.Tensor) else np.asarray(blocks)
    ids, attn = shorten(ids.astype(np.int64), tok, cfg.short_p, rng)
    out = span_mask(ids, attn, tok, cfg, rng, return_spans=return_spans)
    out["attention_mask"] = torch.from_numpy(attn)
    out["original"] = torch.from_numpy(ids)
    return out


def step_rng(seed: int, step: int, stream: int = 0) -> np.random.Generator:
    """A numpy Generator seeded from ``(seed, stream, step)`` (SeedSequence: well mixed, no collisions)."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(stream), int(step)])


# --------------------------------------------------------------------------------------------- blocks and dataset


def pack_encoder_blocks(token_lists: Iterable[Sequence[int]], block: int, cls_id: int, sep_id: int,
                        pad_id: Optional[int] = None, doc_sep_id: Optional[int] = None,
                        keep_remainder: bool = False) -> torch.Tensor:
    """Documents' ids → ``[n, block]`` rows ``[CLS] piece [SEP]`` cut from the concatenated stream
    (``docs/methods.md#masking``). ``doc_sep_id`` is appended to documents that do not already end with it."""
    if block < 4:
        raise ValueError(f"encoder blocks need at least 4 positions, got {block}")
    parts = []
    for ids in token_lists:
        ids = list(ids)
        if doc_sep_id is not None and (not ids or ids[-1] != doc_sep_id):
            ids.append(doc_sep_id)
        parts.append(np.asarray(ids, dtype=np.int64))
    flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    body = block - 2
    n = len(flat) // body
    rest = len(flat) - n * body
    rows = flat[: n * body].reshape(n, body)
    if keep_remainder and rest:
        if pad_id is None:
            raise ValueError("keep_remainder needs pad_id")
        last = np.full((1, body + 1), pad_id, dtype=np.int64)
        last[0, :rest] = flat[n * body:]
        last[0, rest] = sep_id
        out = np.concatenate([np.full((n + 1, 1), cls_id), np.concatenate(
            [np.concatenate([rows, np.full((n, 1), sep_id)], 1), last], 0)], 1)
    else:
        if n == 0:
            raise ValueError(f"only {len(flat)} tokens: not enough for one encoder block of {block}")
        out = np.concatenate([np.full((n, 1), cls_id), rows, np.full((n, 1), sep_id)], 1)
    return torch.from_numpy(np.ascontiguousarray(out, dtype=np.int64))


class MaskedBlocks(PackedBlocks):
    """Encoder blocks with deterministic dynamic masking: :class:`helpers.data.blocks.PackedBlocks` (the same row order)
    plus masking.

    * ``batch(step, size, rank, world)`` → ``{"input_ids", "attention_mask", "labels"}`` of ``size/world`` rows;
      the rows are those :class:`PackedBlocks` gives (seeded per-epoch permutations) and their masking is a
      pure function of ``(seed, step)``.
    * ``masked_batch(...)`` → the same (kept as an explicit name).
    * ``eval_batches(size)`` → every block once, in order, masked once with a fixed generator (the same masks at
      every evaluation, whatever ``size``), without shortening unless ``eval_short_p`` says otherwise.
    """

    def __init__(self, blocks: torch.Tensor, tok: TokenIds, seed: int = 0, masking: MaskingConfig = MaskingConfig(),
                 eval_short_p: float = 0.0):
        super().__init__(blocks, seed)
        self.tok, self.masking = tok, masking
        self.eval_masking = MaskingConfig(**{**asdict(masking), "short_p": eval_short_p})
        self._eval: Optional[dict] = None

    @classmethod
    def from_tokenizer(cls, blocks: torch.Tensor, tokenizer, seed: int = 0, **kwargs) -> "MaskedBlocks":
        return cls(blocks, TokenIds.from_tokenizer(tokenizer), seed, **kwargs)

    def masked_batch(self, step: int, size: int, rank: int = 0, world: int = 1) -> dict:
        if size % world:
            raise ValueError(f"global batch {size} is not divisible by {world} processes")
        rows = self.blocks[self.indices(step, size)]
        out = mask_batch(rows, self.tok, self.masking, step_rng(self.seed, step))
        per = size // world
        return {k: out[k][rank * per: (rank + 1) * per] for k in ("input_ids", "attention_mask", "labels")}

    def batch(self, step: int, size: int, rank: int = 0, world: int = 1) -> dict:
        return self.masked_batch(step, size, rank, world)

    def _eval_masked(self) -> dict:
        if self._eval is None:
            out = mask_batch(self.blocks, self.tok, self.eval_masking, step_rng(self.seed, 0, stream=1))
            self._eval = {k: out[k] for k in ("input_ids", "attention_mask", "labels")}
        return self._eval

    def eval_batches(self, size: int):
        ev = self._eval_masked()
        for i in range(0, len(self.blocks), size):
            yield {k: v[i: i + size] for k, v in ev.items()}


def encode_encoder_blocks(tokenizer, texts: Sequence[str], block: int, max_blocks: Optional[int] = None,
                          seed: int = 0, masking: MaskingConfig = MaskingConfig(), **kwargs) -> MaskedBlocks:
    """Encoder documents (e.g. from :func:`helpers.data.normalisation.encoder_segments`) → token ids
    (:func:`helpers.data.tokenizers.iter_story_ids`, no end-of-text, streamed) → blocks → MaskedBlocks."""
    tok = TokenIds.from_tokenizer(tokenizer)
    ids = iter_story_ids(tokenizer, texts, add_eot=False)  # streamed: only the packed blocks are held
    blocks = pack_encoder_blocks(ids, block, tok.cls_id, tok.sep_id, tok.pad_id, **kwargs)
    if max_blocks is not None:
        blocks = blocks[:max_blocks]
    return MaskedBlocks(blocks, tok, seed, masking)


class LongPhaseBlocks:
    """LTG-BERT's reference schedule ("+512 training" in Theodoropoulos et al. 2024, Tables 2-3; ``long_after`` in
    the authors' code): the first ``long_from`` share of the steps draws batches of short blocks (``short``, e.g.
    128 tokens), the rest batches of long blocks (``long``, e.g. 512 tokens) with ``long_batch_fraction`` of the
    batch (a quarter: the same tokens per step). The switch is at step ``int(steps * long_from)``, as in the
    authors' code; the long phase starts its own seeded order at its first step, so the schedule stays a pure
    function of the step (a resumed run gets the same batches).

    It stands in for a :class:`MaskedBlocks` as training data: ``batch``, ``blocks`` (the short ones, for the
    block length and digest), ``epochs`` and ``tokens_at``."""

    def __init__(self, short: MaskedBlocks, long: MaskedBlocks, steps: int, long_from: float = 0.9,
                 long_batch_fraction: float = 0.25):
        if not 0 < long_from < 1:
            raise ValueError(f"long_from must lie in (0, 1); got {long_from}")
        if not 0 < long_batch_fraction <= 1:
            raise ValueError(f"long_batch_fraction must lie in (0, 1]; got {long_batch_fraction}")
        self.short, self.long = short, long
        self.steps, self.long_from, self.long_batch_fraction = int(steps), float(long_from), float(long_batch_fraction)
        self.switch_step = int(self.steps * self.long_from)

    @property
    def blocks(self) -> torch.Tensor:
        return self.short.blocks

    def __len__(self) -> int:
        return len(self.short)

    def long_size(self, size: int, world: int = 1) -> int:
        """Rows of a long-phase batch: ``size * long_batch_fraction``, at least one per process and a multiple of
        ``world``."""
        n = max(world, int(round(size * self.long_batch_fraction)))
        return n - n % world

    def batch(self, step: int, size: int, rank: int = 0, world: int = 1) -> dict:
        if step < self.switch_step:
            return self.short.batch(step, size, rank, world)
        return self.long.batch(step - self.switch_step, self.long_size(size, world), rank, world)

    def tokens_at(self, step: int, size: int) -> int:
        """Token positions of global batch ``step`` (long-phase batches hold fewer, longer rows)."""
        if step < self.switch_step:
            return size * self.short.blocks.shape[1]
        return self.long_size(size) * self.long.blocks.shape[1]

    def epochs(self, steps: int, size: int) -> float:
        """Passes over the short blocks plus passes over the long blocks (each a share of the same text)."""
        short_steps = min(steps, self.switch_step)
        return short_steps * size / len(self.short) + (steps - short_steps) * self.long_size(size) / len(self.long)


# --------------------------------------------------------------------------------------------- loss and metrics


def _supports_masked_only(model) -> bool:
    inner = getattr(model, "module", model)  # DistributedDataParallel
    return bool(getattr(inner, "supports_masked_only", False))


def mlm_loss(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    """Mean cross-entropy over the predicted tokens (a ``loss_fn`` for :func:`helpers.training.loop.train`). Accepts
    the batch dict of :class:`MaskedBlocks` (``input_ids``, ``attention_mask``, ``labels``). LTG-BERT runs its
    head at the predicted positions only."""
    if "labels" not in batch:
        raise ValueError("mlm_loss needs masked batches with labels: use MaskedBlocks (not PackedBlocks)")
    b = batch
    kw = {"masked_only": True} if _supports_masked_only(model) else {}
    return model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], labels=b["labels"], **kw).loss


@torch.no_grad()
def mlm_metrics(model: torch.nn.Module, data: MaskedBlocks, batch_size: int = 32, device=None) -> dict:
    """Held-out MLM metrics over ``data.eval_batches``: token-weighted ``loss`` (mean CE per predicted token),
    ``perplexity``, top-1 ``accuracy`` at predicted positions with ``accuracy_ci`` (95 %, a seeded bootstrap over the
    held-out blocks: masked tokens of one block are not independent) and ``tokens`` (how many were predicted)."""
    was = model.training
    model.eval()
    total, hits, counts = 0.0, [], []
    for b in data.eval_batches(batch_size):
        if device is not None:
            b = {k: v.to(device) for k, v in b.items()}
        labels = b["labels"]
        sel = labels != IGNORE
        if _supports_masked_only(model):
            logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], labels=labels,
                           masked_only=True).logits
        else:
            logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits[sel]
        target, rows = labels[sel], sel.nonzero()[:, 0]  # row-major, as boolean indexing orders the positions
        total += float(torch.nn.functional.cross_entropy(logits.float(), target, reduction="sum"))
        hits.append(torch.bincount(rows[logits.argmax(-1) == target], minlength=len(labels)).cpu())
        counts.append(sel.sum(1).cpu())
    model.train(was)
    hit, cnt = torch.cat(hits).double().numpy(), torch.cat(counts).double().numpy()
    n = int(cnt.sum())
    loss = total / max(n, 1)
    ci = bootstrap_interval(len(cnt), lambda idx: hit[idx].sum(1) / np.maximum(cnt[idx].sum(1), 1)) if n else (0.0, 0.0)
    return {"loss": loss, "perplexity": math.exp(min(loss, 50.0)), "accuracy": float(hit.sum()) / max(n, 1),
            "accuracy_ci": ci, "tokens": n}


def mlm_accuracy(model: torch.nn.Module, data: MaskedBlocks, batch_size: int = 32, device=None) -> float:
    """Top-1 accuracy at the predicted positions of the held-out blocks."""
    return mlm_metrics(model, data, batch_size, device)["accuracy"]
