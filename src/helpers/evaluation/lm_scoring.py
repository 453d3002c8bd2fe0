"""Scoring continuations with a language model, batched: summed log-probabilities for decoders
(:func:`causal_scores`) and pseudo-log-likelihoods for encoders (:func:`mlm_scores`).

A request is ``(context or None, text)``; both scorers return, per request, the sum of the log-probabilities (nats)
of the text's tokens and their count. :mod:`helpers.evaluation.zero_shot` turns them into minimal-pair rows.

* Causal LMs (:func:`causal_scores`): the sum of token log-probabilities of the continuation given
  ``<|endoftext|>`` + context. The continuation is ``delimiter + text`` with ``delimiter = " "`` as in the
  BabyLM 2024 pipeline (an lm-eval-harness fork whose ``multiple_choice`` requests are ``(context,
  target_delimiter + choice)`` with the default ``target_delimiter = " "``). With a context the split is
  lm-eval's: ``tok(context + " " + text)`` minus the first ``len(tok(context))`` tokens. Departure: lm-eval uses the
  end-of-text token only when the context is empty; we always put it first (our decoders saw every story after
  ``<|endoftext|>``). It only conditions; it is never scored. Every model of :mod:`helpers.models.registry` (GPT-Neo,
  the compressor) is scored by the same call.
* Masked LMs (:func:`mlm_scores`): pseudo-log-likelihood (Salazar et al. 2020): ``[CLS] context text [SEP]``, each
  token of ``text`` masked in turn with everything else visible, [CLS]/[SEP] (and the context) never masked;
  ``reduction="sum"`` (the BabyLM 2023 pipeline, and the ``hf-mlm`` code of the 2024 lm-eval fork we could read:
  ``float(s.sum())`` of log2 probabilities, the same ranking as nats) or ``"mean"`` over the scored tokens (the
  per-token PLL we understand the 2024 pipeline to use). Always say which one a table used.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from helpers.core.progress import progress as progress_bar
from helpers.models.decoder import context_length
from helpers.models.registry import min_tokens


# ============================================================================================ encoding


def _split_encode(tokenizer, context: str | None, text: str, delimiter: str) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) without special tokens, split as lm-eval does: the continuation is what
    ``tok(context + delimiter + text)`` adds after ``tok(context)``."""
    cont = delimiter + text
    if not context:
        return [], tokenizer(cont, add_special_tokens=False)["input_ids"]
    n_sp = len(context) - len(context.rstrip())
    if n_sp:  # lm-eval moves trailing spaces of the context onto the continuation
        context, cont = context[:-n_sp], context[-n_sp:] + cont
    whole = tokenizer(context + cont, add_special_tokens=False)["input_ids"]
    ctx = tokenizer(context, add_special_tokens=False)["input_ids"]
    return whole[: len(ctx)], whole[len(ctx):]


def _encode_all(tokenizer, requests: Sequence["Request"], delimiter: str) -> list[tuple[list[int], list[int]]]:
    """:func:`_split_encode` for many requests, with one batched tokenizer call per kind of input."""
    out: list = [None] * len(requests)
    free = [i for i, (c, _) in enumerate(requests) if not c]
    if free:
        ids = tokenizer([delimiter + requests[i][1] for i in free], add_special_tokens=False)["input_ids"]
        for i, t in zip(free, ids):
            out[i] = ([], t)
    ctx = [i for i, (c, _) in enumerate(requests) if c]
    if ctx:
        pairs = []
        for i in ctx:
            c, t = requests[i]
            cont = delimiter + t
            n_sp = len(c) - len(c.rstrip())
            if n_sp:
                c, cont = c[:-n_sp], c[-n_sp:] + cont
            pairs.append((c, cont))
        whole = tokenizer([c + t for c, t in pairs], add_special_tokens=False)["input_ids"]
        head = tokenizer([c for c, _ in pairs], add_special_tokens=False)["input_ids"]
        for i, w, h in zip(ctx, whole, head):
            out[i] = (w[: len(h)], w[len(h):])
    return out


Request = tuple  # (context or None, text)


def _unique(requests: Sequence[Request]) -> tuple[list[Request], np.ndarray]:
    index: dict[Request, int] = {}
    inv = np.empty(len(requests), dtype=np.int64)
    for i, r in enumerate(requests):
        inv[i] = index.setdefault(r, len(index))
    return list(index), inv


def _bar(total: int, desc: str, progress: bool | Any):
    if progress is False or progress is None:
        return None
    if progress is not True:  # a bar handed in by the caller
        return progress
    return progress_bar(total=total, desc=desc, unit="seq")


# ============================================================================================ causal LMs


@torch.inference_mode()
def causal_scores(
    model,
    tokenizer,
    requests: Sequence[Request],
    *,
    batch_size: int = 64,
    delimiter: str = " ",
    eot_id: int | None = None,
    mask_padding: bool = False,
    progress: bool | Any = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Sum of log-probabilities (nats) of each continuation and its token count.

    ``requests`` are ``(context, text)`` pairs (``context`` may be ``None``). The model reads
    ``<|endoftext|> context`` and scores ``delimiter + text``. Sequences are sorted by length (longest first) and
    run ``batch_size`` at a time, right-padded; the output projection runs only at the scored positions. Too long
    inputs are cut on the left (the context loses its start), as lm-eval does.

    Padding: rows are padded on the right, so in a causal model no real position ever attends to a pad (pads come
    after it) and positions count from 0 in every row: the attention mask changes nothing at the real positions.
    By default it is therefore not passed, which lets our GPT-Neo use SDPA's causal kernel (~25 % faster than the
    masked path here); ``mask_padding=True`` passes it anyway (for models where padding is not causal-safe). Both
    are tested against one-sentence forwards. A batch is at least as wide as the shortest input the model reads
    (:func:`helpers.models.registry.min_tokens`: the compressor's first pair), padded on the right."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    uniq, inv = _unique([(c or None, t) for c, t in requests])
    eot = eot_id if eot_id is not None else (tokenizer.eos_token_id if tokenizer.eos_token_id is not None
                                             else tokenizer.bos_token_id)
    if eot is None:
        raise ValueError("the tokenizer has no end-of-text token; pass eot_id")
    max_len = context_length(model)
    min_len = min_tokens(model)
    seqs, starts = [], []  # full token sequences; index of the first scored token in each
    for (ctx, text), (c_ids, t_ids) in zip(uniq, _encode_all(tokenizer, uniq, delimiter)):
        if not t_ids:
            raise ValueError(f"continuation {text!r} encodes to no tokens")
        full = [eot] + c_ids + t_ids
        if max_len is not None and len(full) > max_len + 1:
            if len(t_ids) > max_len:
                raise ValueError(f"continuation of {len(t_ids)} tokens does not fit the model's context {max_len}")
            full = full[-(max_len + 1):]
        seqs.append(full)
        starts.append(len(full) - len(t_ids))
    # inputs are full[:-1]; the logits at input position j predict full[j + 1]
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    sums = np.zeros(len(uniq), dtype=np.float64)
    counts = np.array([len(s) - st for s, st in zip(seqs, starts)], dtype=np.int64)
    weight = np.bincount(inv, minlength=len(uniq))  # requests served by each unique sequence
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eot
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    base = getattr(model, "base_model", None)
    split_head = head is not None and base is not None and base is not model
    bar = _bar(len(requests), "score (causal)", progress)
    try:
        for b in range(0, len(order), batch_size):
            idx = order[b: b + batch_size]
            T = max(len(seqs[idx[0]]) - 1, min_len)
            ids = torch.full((len(idx), T), pad, dtype=torch.long)
            tgt = torch.zeros((len(idx), T), dtype=torch.long)
            att = torch.zeros((len(idx), T), dtype=torch.long)
            scored = torch.zeros((len(idx), T), dtype=torch.bool)
            for r, i in enumerate(idx):
                full = seqs[i]
                n = len(full) - 1
                ids[r, :n] = torch.tensor(full[:-1])
                tgt[r, :n] = torch.tensor(full[1:])
                att[r, :n] = 1
                scored[r, starts[i] - 1:n] = True
            ids, att, scored, tgt = ids.to(device), att.to(device), scored.to(device), tgt.to(device)
            mask = att if mask_padding else None
            if split_head:
                hidden = base(input_ids=ids, attention_mask=mask).last_hidden_state
                logits = head(hidden[scored])
            else:
                logits = model(input_ids=ids, attention_mask=mask).logits[scored]
            lp = F.log_softmax(logits.float(), dim=-1).gather(-1, tgt[scored].unsqueeze(-1)).squeeze(-1)
            rows = torch.arange(len(idx), device=device).unsqueeze(1).expand(-1, T)[scored]
            per_row = torch.zeros(len(idx), dtype=torch.float64, device=device).index_add_(0, rows, lp.double())
            sums[idx] = per_row.cpu().numpy()
            if bar is not None:
                bar.update(int(weight[idx].sum()))
    finally:
        if bar is not None and progress is True:
            bar.close()
        model.train(was_training)
    return sums[inv], counts[inv]


# ============================================================================================ masked LMs


@dataclass
class _MlmPlan:
    seqs: list[list[int]]  # [CLS] context text [SEP]
    positions: list[list[int]]  # positions to mask (the text's tokens)


def _mlm_plan(tokenizer, uniq: Sequence[Request], delimiter: str) -> _MlmPlan:
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    if cls is None or sep is None or tokenizer.mask_token_id is None:
        raise ValueError("a masked-LM tokenizer needs [CLS], [SEP] and [MASK] tokens")
    seqs, positions = [], []
    for (ctx, text), (c_ids, t_ids) in zip(uniq, _encode_all(tokenizer, uniq, delimiter)):
        if not t_ids:
            raise ValueError(f"text {text!r} encodes to no tokens")
        seqs.append([cls] + c_ids + t_ids + [sep])
        positions.append(list(range(1 + len(c_ids), 1 + len(c_ids) + len(t_ids))))
    return _MlmPlan(seqs, positions)


def mlm_batches(lengths: Sequence[int], n_masks: Sequence[int], max_tokens: int,
                fill: float = 0.5) -> list[list[tuple[int, int]]]:
    """Pack the masked copies of many sequences into forward batches of at most ``max_tokens`` padded tokens.

    Sequences are taken longest first; a batch is a list of ``(sequence, k)`` (the k-th masked copy of that
    sequence), padded to the length of its first (longest) sequence, so ``len(batch) * that length <=
    max_tokens``. A shorter sequence opens a new batch when the current one is at least ``fill`` full, so most
    batches hold a single length (no padding, no attention mask) and few are small."""
    if lengths and max(lengths) > max_tokens:
        raise ValueError(f"a sequence of {max(lengths)} tokens exceeds max_tokens={max_tokens}; raise max_tokens")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches, cur, cur_len = [], [], 0
    for i in order:
        for k in range(n_masks[i]):
            full = (len(cur) + 1) * cur_len > max_tokens
            if cur and (full or (lengths[i] != cur_len and len(cur) * cur_len >= fill * max_tokens)):
                batches.append(cur)
                cur = []
            if not cur:
                cur_len = lengths[i]
            cur.append((i, k))
    if cur:
        batches.append(cur)
    return batches


def _supports_masked_only(model) -> bool:
    return bool(getattr(model, "supports_masked_only", False))


@torch.inference_mode()
def mlm_scores(
    model,
    tokenizer,
    requests: Sequence[Request],
    *,
    max_tokens: int = 2048,
    delimiter: str = " ",
    progress: bool | Any = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Pseudo-log-likelihood (sum of log-probabilities in nats, each text token masked in turn) and the number of
    masked tokens, per ``(context, text)`` request. Divide by the count for the per-token mean.

    The masked copies of all sentences are packed into forwards of at most ``max_tokens`` padded tokens
    (``rows × padded length``; :func:`mlm_batches`), longest first, right-padded with an attention mask. Models
    with ``supports_masked_only`` (our :class:`~helpers.models.ltg_bert.LtgBertForMaskedLM`) run the MLM head at the masked
    positions only; others return full logits, which ``max_tokens`` also bounds (``max_tokens × vocab`` floats).
    The default 2,048 was the fastest on CPU for the cpu-preset encoder (1,024 … 4,096 within noise, 8,192 ~15 %
    slower: a forward's activations stay in cache; ``benchmarks/scoring.py``)."""
    uniq, inv = _unique([(c or None, t) for c, t in requests])
    plan = _mlm_plan(tokenizer, uniq, delimiter)
    lengths = [len(s) for s in plan.seqs]
    n_masks = [len(p) for p in plan.positions]
    batches = mlm_batches(lengths, n_masks, max_tokens)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    mask_id = tokenizer.mask_token_id
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    masked_only = _supports_masked_only(model)
    # all sequences as one padded matrix (longest first); a batch gathers rows from it
    T_all = max(lengths) if lengths else 0
    base = torch.full((len(plan.seqs), T_all), pad, dtype=torch.long)
    for i, s in enumerate(plan.seqs):
        base[i, : len(s)] = torch.tensor(s)
    lens_t = torch.tensor(lengths, dtype=torch.long)
    sums = torch.zeros(len(plan.seqs), dtype=torch.float64)
    done = np.zeros(len(plan.seqs), dtype=np.int64)
    weight = np.bincount(inv, minlength=len(uniq))  # requests served by each unique sequence
    bar = _bar(len(requests), f"score (PLL, ≤{max_tokens} tok/forward)", progress)
    try:
        for batch in batches:
            seq = torch.tensor([i for i, _ in batch], dtype=torch.long)
            pos = torch.tensor([plan.positions[i][k] for i, k in batch], dtype=torch.long)
            T = int(lens_t[seq].max())
            ids = base[seq, :T].clone()
            target = ids[torch.arange(len(batch)), pos].clone()
            ids[torch.arange(len(batch)), pos] = mask_id
            att = (torch.arange(T).unsqueeze(0) < lens_t[seq].unsqueeze(1)).long()
            ids, att = ids.to(device), att.to(device)
            if masked_only:
                labels = torch.full_like(ids, -100)
                labels[torch.arange(len(batch)), pos] = target.to(device)
                logits = model(input_ids=ids, attention_mask=att, labels=labels, masked_only=True).logits
            else:
                logits = model(input_ids=ids, attention_mask=att).logits[torch.arange(len(batch)), pos.to(device)]
            lp = F.log_softmax(logits.float(), dim=-1).gather(-1, target.to(device).unsqueeze(-1)).squeeze(-1)
            sums.index_add_(0, seq, lp.double().cpu())
            if bar is not None:
                for i, _ in batch:
                    done[i] += 1
                    if done[i] == n_masks[i]:
                        bar.update(int(weight[i]))
    finally:
        if bar is not None and progress is True:
            bar.close()
        model.train(was_training)
    counts = np.array(n_masks, dtype=np.int64)
    return sums.numpy()[inv], counts[inv]
