"""The memory-saving "compressor" language model of Rathod et al. 2024 (§7, Table 5) in Hugging Face form: the
model encodes tokens two at a time, runs a causal trunk over the pairs and decodes the next two tokens from each
trunk state. Architecture, loss and comparison with GPT-Neo: ``docs/methods.md#compressor``.

Entry points: :class:`CompressorConfig`/:func:`compressor_config`, :func:`build_compressor`,
:class:`CompressorForCausalLM` (``save_pretrained``/``from_pretrained``, ``AutoModelForCausalLM`` after ``import
helpers.models.compressor``), :func:`load_compressor`; :func:`compressor_loss` plugs into
:func:`helpers.training.recipes.train_or_skip` (:func:`helpers.training.compressor.train_compressor` trains it);
:func:`predicted_token_loss` and :func:`shifted_token_nll` score any causal LM on the compressor's targets;
:func:`generate_pairs` generates two tokens per trunk pass, sampling with :func:`sample_token`
(:func:`helpers.generation.decoding.sample_next`'s nucleus rule, called with the same draws), and
:func:`generate_batch` is that loop in :func:`helpers.generation.completions.generate`'s batches: registered in
:mod:`helpers.models.registry`, the compressor is generated from and scored by the same calls as GPT-Neo.
Peak memory against GPT-Neo is measured by :mod:`helpers.analysis.memory`.

Code conventions (``T`` tokens, pair ``i`` = tokens ``(2i, 2i+1)``): ``forward`` returns logits ``[B, T, V]`` aligned
like any HF causal LM, ``logits[:, t]`` the distribution of token ``t + 1`` given tokens ``0..t``. Odd positions
``t = 2i + 1`` hold ``logits₁`` of pair ``i``, even positions ``t = 2i + 2`` its ``logits₂`` (teacher-forced on
token ``t``); position 0 is exactly 0 (uniform, never in the loss), and ``logits[:, T-1]`` is a real prediction of the
token after the input. The loss (``labels``, usually ``labels = input_ids``) ignores ``-100`` (HF's ignore index).
:func:`shifted_token_nll` columns ``1:`` are tokens ``2..T-1``. An odd ``T`` needs no padding (the trailing token only
feeds ``logits₂`` of the last pair); at least two tokens are needed, three for a loss. ``attention_mask`` must be
all ones or ``None``: padding is not supported (the compressor trains on packed blocks and generates from
equal-length prompts).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput
from transformers.utils import logging as _hf_logging

from helpers.core import seeding
from helpers.core.config import require_output
from helpers.generation.decoding import Decoding, sample_next

_hf_logging.disable_progress_bar()  # as helpers.models.decoder: no weight-loading bars in executed notebooks

MODEL_TYPE = "storybench-compressor"
FIRST_PREDICTED = 2  # the first token position the compressor predicts (tokens 0 and 1 are context only)
IGNORE_INDEX = -100

# ----------------------------------------------------------------------------- configuration


class CompressorConfig(PretrainedConfig):
    """Shape of a compressor model. ``context`` counts *tokens* (even; the trunk sees ``context // 2`` pairs),
    ``intermediate`` defaults to 4 × ``hidden`` (used by the trunk's MLPs and the second-token MLP).

    HF's standard names are aliases: ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``,
    ``max_position_embeddings`` (= ``context``, read by :mod:`helpers.generation.completions`) and ``intermediate_size``."""

    model_type = MODEL_TYPE
    attribute_map = {
        "hidden_size": "hidden",
        "num_hidden_layers": "layers",
        "num_attention_heads": "heads",
        "max_position_embeddings": "context",
        "intermediate_size": "intermediate",
    }

    def __init__(
        self,
        vocab_size: int = 16_384,
        hidden: int = 256,
        layers: int = 8,
        heads: int = 8,
        context: int = 512,
        intermediate: int | None = None,
        dropout: float = 0.1,
        layer_norm_epsilon: float = 1e-5,
        initializer_range: float = 0.02,
        bos_token_id: int | None = None,
        eos_token_id: int | None = None,
        pad_token_id: int | None = None,
        tie_word_embeddings: bool = True,
        **kwargs: Any,
    ):
        intermediate = 4 * hidden if intermediate is None else intermediate
        sizes = dict(vocab_size=vocab_size, hidden=hidden, layers=layers, heads=heads, context=context,
                     intermediate=intermediate)
        bad = {k: v for k, v in sizes.items() if not isinstance(v, int) or isinstance(v, bool) or v <= 0}
        if bad:
            raise ValueError(f"compressor sizes must be positive integers, got {bad}")
        if hidden % heads:
            raise ValueError(f"hidden size {hidden} is not divisible by {heads} heads")
        if context % 2 or context < 2:
            raise ValueError(f"context must be an even number of tokens (whole pairs), got {context}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if not tie_word_embeddings:
            raise ValueError("the compressor always ties its output head to the token embedding")
        for name, value in (("bos_token_id", bos_token_id), ("eos_token_id", eos_token_id), ("pad_token_id", pad_token_id)):
            if value is not None and not 0 <= value < vocab_size:
                raise ValueError(f"{name}={value} is outside the vocabulary of {vocab_size}")
        self.vocab_size, self.hidden, self.layers, self.heads = vocab_size, hidden, layers, heads
        self.context, self.intermediate, self.dropout = context, intermediate, float(dropout)
        self.layer_norm_epsilon, self.initializer_range = layer_norm_epsilon, initializer_range
        self.bos_token_id, self.eos_token_id, self.pad_token_id = bos_token_id, eos_token_id, pad_token_id
        self.tie_word_embeddings = tie_word_embeddings
        super().__init__(**kwargs)

    @property
    def pairs(self) -> int:
        """Trunk positions: ``context // 2``."""
        return self.context // 2


# ----------------------------------------------------------------------------- modules


class CompressorAttention(nn.Module):
    """Causal multi-head self-attention over pair positions (SDPA, ``is_causal=True``, scale ``1/sqrt(d)``)."""

    def __init__(self, config: CompressorConfig):
        super().__init__()
        self.heads, self.head_dim = config.heads, config.hidden // config.heads
        self.qkv = nn.Linear(config.hidden, 3 * config.hidden)
        self.proj = nn.Linear(config.hidden, config.hidden)
        self.attn_dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, P, H = x.shape
        q, k, v = self.qkv(x).view(B, P, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_dropout if self.training else 0.0,
                                             is_causal=True)
        return self.resid_dropout(self.proj(out.transpose(1, 2).reshape(B, P, H)))


class CompressorMLP(nn.Module):
    def __init__(self, d_in: int, d_mid: int, d_out: int, dropout: float):
        super().__init__()
        self.fc = nn.Linear(d_in, d_mid)
        self.act = nn.GELU(approximate="tanh")  # GPT-2's / GPT-Neo's gelu_new
        self.proj = nn.Linear(d_mid, d_out)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.proj(self.act(self.fc(x))))


class CompressorBlock(nn.Module):
    """Pre-LN transformer block: ``x + Attn(LN x)``, then ``x + MLP(LN x)``."""

    def __init__(self, config: CompressorConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.hidden, eps=config.layer_norm_epsilon)
        self.attn = CompressorAttention(config)
        self.ln_2 = nn.LayerNorm(config.hidden, eps=config.layer_norm_epsilon)
        self.mlp = CompressorMLP(config.hidden, config.intermediate, config.hidden, config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class CompressorPreTrainedModel(PreTrainedModel):
    config_class = CompressorConfig
    config: CompressorConfig
    base_model_prefix = "compressor"
    main_input_name = "input_ids"
    _no_split_modules = ["CompressorBlock"]
    _supports_sdpa = True


class CompressorForCausalLM(CompressorPreTrainedModel):
    """The compressor LM (architecture and loss: ``docs/methods.md#compressor``; logit alignment: the module
    docstring).

    ``forward(input_ids, labels=None, attention_mask=None)`` → :class:`CausalLMOutput` with ``logits [B, T, V]``
    (``logits[:, t]`` predicts token ``t + 1``; position 0 is all zeros, not a prediction) and ``loss`` over the
    predicted tokens ``2..T-1``. The lower-level pieces used by :func:`generate_pairs` are public:
    :meth:`pair_states` (trunk) and :meth:`second_states` (second-token decoder)."""

    _tied_weights_keys = {"lm_head.weight": "embed.weight"}

    def __init__(self, config: CompressorConfig):
        super().__init__(config)
        h = config.hidden
        self.embed = nn.Embedding(config.vocab_size, h)
        self.pair_proj = nn.Linear(2 * h, h)
        self.pair_pos = nn.Embedding(config.pairs, h)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList([CompressorBlock(config) for _ in range(config.layers)])
        self.ln_f = nn.LayerNorm(h, eps=config.layer_norm_epsilon)
        self.second = CompressorMLP(2 * h, config.intermediate, h, config.dropout)
        self.ln_second = nn.LayerNorm(h, eps=config.layer_norm_epsilon)
        self.lm_head = nn.Linear(h, config.vocab_size, bias=False)
        self.post_init()

    # -- HF plumbing
    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embed = value

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    # -- pieces
    def _check_ids(self, input_ids: torch.Tensor, min_len: int = 2) -> None:
        if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2:
            raise ValueError(f"input_ids must be a [batch, tokens] tensor, got {getattr(input_ids, 'shape', type(input_ids))}")
        if input_ids.dtype not in (torch.long, torch.int):
            raise ValueError(f"input_ids must hold integer token ids, got {input_ids.dtype}")
        T = input_ids.size(1)
        if T < min_len:
            raise ValueError(f"the compressor needs at least {min_len} tokens (the first pair is context only), got {T}")
        if T > self.config.context:
            raise ValueError(f"{T} tokens exceed the model's context of {self.config.context}")
        if input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= self.config.vocab_size):
            raise ValueError(f"token ids must lie in [0, {self.config.vocab_size}), got "
                             f"[{int(input_ids.min())}, {int(input_ids.max())}]")

    def pair_states(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Trunk output ``u [B, P, h]`` (after the final LayerNorm) for the ``P = T // 2`` full pairs of
        ``input_ids [B, T]``; ``u[:, i]`` depends on tokens ``0..2i+1`` only. A trailing odd token is ignored."""
        B, T = input_ids.shape
        P = T // 2
        e = self.embed(input_ids[:, : 2 * P]).reshape(B, P, 2 * self.config.hidden)
        pos = self.pair_pos(torch.arange(P, device=input_ids.device))
        x = self.drop(self.pair_proj(e) + pos)
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)

    def second_states(self, u: torch.Tensor, first_tokens: torch.Tensor) -> torch.Tensor:
        """Hidden states of the second-token head: ``LN₂(u + MLP([u ; E first]))``; ``u [..., h]`` and the
        (teacher-forced or sampled) first token of the next pair ``first_tokens [...]``."""
        return self.ln_second(u + self.second(torch.cat([u, self.embed(first_tokens)], dim=-1)))

    def token_states(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Per-position hidden states ``[B, T, h]`` whose image by the head are the logits of :meth:`forward`
        (position 0 is zeros)."""
        self._check_ids(input_ids)
        B, T = input_ids.shape
        P = T // 2
        u = self.pair_states(input_ids)  # [B, P, h] -> odd positions 1, 3, ..., 2P-1
        firsts = input_ids[:, 2::2]  # the first token of every next pair present in the input
        s = self.second_states(u[:, : firsts.size(1)], firsts)  # -> even positions 2, 4, ...
        even = torch.cat([u.new_zeros(B, 1, u.size(-1)), s], dim=1)  # P (even T) or P + 1 (odd T) entries
        states = torch.stack([even[:, :P], u], dim=2).reshape(B, 2 * P, u.size(-1))
        if T % 2:
            states = torch.cat([states, even[:, P:]], dim=1)
        return states

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        use_cache: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> CausalLMOutput:
        """Logits ``[B, T, V]`` (HF causal alignment) and, with ``labels``, the mean cross-entropy over tokens
        ``2..T-1`` (labels ``-100`` ignored). ``use_cache``/``return_dict`` are accepted for HF compatibility and
        ignored (no KV cache; always a :class:`CausalLMOutput`)."""
        unknown = {k for k, v in kwargs.items() if v is not None and v is not False}
        if unknown:
            raise TypeError(f"CompressorForCausalLM.forward got unsupported arguments {sorted(unknown)}")
        if attention_mask is not None and not bool(attention_mask.all()):
            raise NotImplementedError("the compressor does not support padding: attention_mask must be all ones")
        logits = self.lm_head(self.token_states(input_ids))
        loss = None
        if labels is not None:
            if labels.shape != input_ids.shape:
                raise ValueError(f"labels {tuple(labels.shape)} must have the shape of input_ids {tuple(input_ids.shape)}")
            if input_ids.size(1) <= FIRST_PREDICTED:
                raise ValueError("a loss needs at least 3 tokens: tokens 0 and 1 are context, token 2 is the first predicted")
            # target[t] = labels[t + 1] for t = 1..T-2 (tokens 2..T-1), ignored elsewhere: no copy of the logits
            target = torch.full_like(labels, IGNORE_INDEX)
            target[:, 1:-1] = labels[:, 2:]
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), target.reshape(-1),
                                   ignore_index=IGNORE_INDEX)
        return CausalLMOutput(loss=loss, logits=logits)


def _register() -> None:
    AutoConfig.register(MODEL_TYPE, CompressorConfig, exist_ok=True)
    AutoModelForCausalLM.register(CompressorConfig, CompressorForCausalLM, exist_ok=True)


_register()

# ----------------------------------------------------------------------------- building, training, losses

_SPEC_KEYS = ("vocab_size", "hidden", "layers", "heads", "context", "intermediate", "dropout", "layer_norm_epsilon",
              "initializer_range")


def compressor_config(spec: dict | CompressorConfig, **token_ids: int | None) -> CompressorConfig:
    """A :class:`CompressorConfig` from a spec dict (keys: ``vocab_size, hidden, layers, heads, context,
    intermediate, dropout``, optionally ``layer_norm_epsilon, initializer_range``) and the tokenizer's
    ``bos_token_id``/``eos_token_id``/``pad_token_id``. Unknown keys are refused (e.g. GPT-Neo's ``window``)."""
    if isinstance(spec, CompressorConfig):
        if token_ids:
            raise ValueError("pass token ids inside the CompressorConfig, not next to it")
        return spec
    unknown = set(spec) - set(_SPEC_KEYS)
    if unknown:
        raise ValueError(f"unknown compressor spec keys {sorted(unknown)}; accepted: {list(_SPEC_KEYS)}")
    bad_ids = set(token_ids) - {"bos_token_id", "eos_token_id", "pad_token_id"}
    if bad_ids:
        raise ValueError(f"token_ids accepts bos_token_id/eos_token_id/pad_token_id, got {sorted(bad_ids)}")
    return CompressorConfig(**spec, **token_ids)


def build_compressor(spec: dict | CompressorConfig, seed: int | None = None,
                     **token_ids: int | None) -> CompressorForCausalLM:
    """A freshly initialised compressor (seeded if ``seed`` is given); see :func:`compressor_config`."""
    cfg = compressor_config(spec, **token_ids)
    if seed is not None:
        seeding.seed_everything(seed)
    return CompressorForCausalLM(cfg)


def compressor_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``loss_fn`` for :func:`helpers.training.recipes.train_or_skip`: mean cross-entropy over tokens ``2..T-1`` of the
    packed blocks ``batch["input_ids"]`` (works on a DDP-wrapped model too)."""
    ids = batch["input_ids"]
    return model(input_ids=ids, labels=ids).loss


def shifted_token_nll(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """Per-token negative log-likelihood ``[B, T-1]`` of any HF-aligned causal LM: column ``t`` is
    ``-log p(token t+1 | logits[:, t])``. For the compressor column 0 (token 1) is not a prediction (uniform,
    ``log V``); compare models on columns ``FIRST_PREDICTED - 1 :`` (tokens ``2..T-1``)."""
    V = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V).float(), input_ids[:, 1:].reshape(-1),
                           reduction="none").view(input_ids.size(0), -1)


def load_compressor(path: str | Path) -> CompressorForCausalLM:
    """A trained compressor from a ``save_pretrained`` directory, in eval mode."""
    require_output(path, "compressor")
    return CompressorForCausalLM.from_pretrained(path).eval()


@torch.no_grad()
def predicted_token_loss(model: nn.Module, data, batch_size: int) -> float:
    """Mean held-out cross-entropy over tokens ``2..T-1`` of every block of ``data`` (a
    :class:`~helpers.data.blocks.PackedBlocks`), for any HF causal LM: the tokens the compressor predicts, so GPT-Neo
    and the compressor are compared on exactly the same targets."""
    was = model.training
    model.eval()
    total, n = 0.0, 0
    try:
        for b in data.eval_batches(batch_size):
            ids = b["input_ids"]
            nll = shifted_token_nll(model(input_ids=ids).logits, ids)[:, FIRST_PREDICTED - 1 :]
            total += float(nll.sum())
            n += nll.numel()
    finally:
        model.train(was)
    return total / max(n, 1)


# ----------------------------------------------------------------------------- generation


def sample_token(logits: torch.Tensor, top_p: float | None = None, temperature: float = 1.0,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row of ``logits [B, V]``: argmax when ``top_p`` is ``None``; otherwise nucleus sampling (the
    smallest set of most likely tokens whose probability reaches ``top_p``, the crossing token included) at
    ``temperature``, by inverse-CDF sampling with one uniform per row from ``generator``: a call of
    :func:`helpers.generation.decoding.sample_next` (the same draws)."""
    if top_p is None:
        return logits.argmax(-1)
    return sample_next(logits, Decoding("nucleus", k=1, top_p=top_p, temperature=temperature), generator)


@torch.no_grad()
def generate_pairs(
    model: CompressorForCausalLM,
    input_ids: torch.Tensor | Sequence[int] | Sequence[Sequence[int]],
    max_new_tokens: int,
    top_p: float | None = None,
    temperature: float = 1.0,
    seed: int | None = None,
    eos_token_id: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Continue equal-length prompts two tokens per trunk pass; returns ``[B, n + new]`` (prompt included).

    Each step runs the trunk over all full pairs (a plain recompute, no KV cache), takes the last pair's state
    ``u``, draws token 1 from ``logits₁ = E u`` and then token 2 from ``logits₂`` given token 1. Greedy when
    ``top_p`` is ``None``; nucleus otherwise (:func:`sample_token`), reproducible with ``seed`` (one
    ``torch.Generator``; tokens drawn in order 1, 2 of each step) or drawing from the given ``generator``.

    * **Odd prompt** (``n = 2P + 1``): its last token starts a pair, so the first step draws only that pair's
      second token (from ``logits₂`` given the prompt's last token); from then on the sequence is whole pairs.
    * **One-token prompt**: the first pair is context only, so it is preceded by ``config.bos_token_id`` (the
      ``<|endoftext|>`` that precedes every story in the packed stream); the returned ids do not include it.
    * ``max_new_tokens`` may be odd (the last step then draws token 1 only); new tokens are capped so that the
      sequence (with an added bos) never exceeds ``config.context``.
    * ``eos_token_id``: a row that produced it is finished; its later tokens are ``config.pad_token_id`` (or eos
      when there is none), and generation stops early when every row is finished.
    """
    cfg = model.config
    ids = torch.as_tensor(input_ids, dtype=torch.long)
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.size(1) == 0:
        raise ValueError(f"prompts must be a non-empty [batch, tokens] array of equal-length rows, got shape {tuple(ids.shape)}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    device = next(model.parameters()).device
    ids = ids.to(device)
    prefixed = ids.size(1) == 1
    if prefixed:
        if cfg.bos_token_id is None:
            raise ValueError("a one-token prompt needs config.bos_token_id to form the first (context) pair")
        ids = torch.cat([torch.full_like(ids, cfg.bos_token_id), ids], dim=1)
    model._check_ids(ids)
    remaining = min(max_new_tokens, cfg.context - ids.size(1))
    gen = generator if generator is not None else seeding.generator(seed) if seed is not None else None
    filler = cfg.pad_token_id if cfg.pad_token_id is not None else eos_token_id
    done = torch.zeros(ids.size(0), dtype=torch.bool, device=device)
    was_training = model.training
    model.eval()

    def emit(tok: torch.Tensor) -> None:
        nonlocal ids, done, remaining
        if eos_token_id is not None:
            tok = torch.where(done, torch.full_like(tok, filler), tok)
            done = done | (tok == eos_token_id)
        ids = torch.cat([ids, tok[:, None]], dim=1)
        remaining -= 1

    try:
        while remaining > 0 and not (eos_token_id is not None and bool(done.all())):
            u = model.pair_states(ids)[:, -1]
            if ids.size(1) % 2 == 0:  # a new pair: its first token from logits₁
                emit(sample_token(model.lm_head(u), top_p, temperature, gen))
                if remaining == 0 or (eos_token_id is not None and bool(done.all())):
                    break
            first = ids[:, -1]  # the pair's first token: just drawn, or the odd prompt's last token
            emit(sample_token(model.lm_head(model.second_states(u, first)), top_p, temperature, gen))
    finally:
        model.train(was_training)
    return ids[:, 1:] if prefixed else ids


def generate_batch(model: CompressorForCausalLM, prompts: Sequence[Sequence[int]], decoding: Decoding, eot_id: int,
                   max_new: int, generator: torch.Generator | None, device: Any = None,
                   keep_eot: bool = False) -> list[list[int]]:
    """The compressor's decoding loop for one batch of :func:`helpers.generation.completions.generate` (found
    through :mod:`helpers.models.registry`): ``decoding.k`` rows per prompt, in prompt order, each the new tokens of
    :func:`generate_pairs` (prompts of one length run together, no padding) cut at ``eot_id`` (kept with
    ``keep_eot``). Greedy, or nucleus with ``decoding.top_p``/``temperature`` drawing from ``generator``."""
    k = decoding.k
    top_p = None if decoding.method == "greedy" else decoding.top_p
    rows: list[list[int]] = [[] for _ in range(len(prompts) * k)]
    by_length: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_length.setdefault(len(p), []).append(i)
    for n, idx in by_length.items():
        ids = torch.tensor([list(prompts[i]) for i in idx for _ in range(k)], dtype=torch.long)
        out = generate_pairs(model, ids, max(0, max_new), top_p, decoding.temperature, eos_token_id=eot_id,
                             generator=generator)[:, n:].tolist()
        for r, row in enumerate(out):
            cut = row[: row.index(eot_id) + int(keep_eot)] if eot_id in row else row
            rows[idx[r // k] * k + r % k] = cut
    return rows
