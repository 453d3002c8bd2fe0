"""GPT-Neo decoders (``docs/methods.md#decoders``): configurations built in code, and a fast attention path.

Every model is a plain :class:`transformers.GPTNeoForCausalLM`, so a checkpoint written with
``save_pretrained`` loads anywhere with ``AutoModelForCausalLM.from_pretrained`` (and gets HF's eager attention
there, which computes the same function).

**Fast attention.** HF's GPT-Neo only has eager attention on CPU: it materialises the full score matrix, masks
it with ``torch.where`` and adds a float mask built on every forward. :func:`enable_fast_attention` swaps the
class of each attention module for :class:`FastGPTNeoSelfAttention` (same parameters, same buffer, same state
dict) whose ``_attn`` calls :func:`torch.nn.functional.scaled_dot_product_attention` with GPT-Neo's semantics:

* **no** 1/sqrt(d) scaling (``scale=1.0``), softmax in fp32;
* global layers: causal; local layers: causal *and* at most ``window_size - 1`` tokens back (the
  ``bias ^ tril(bias, -window)`` mask of the reference);
* padding: the mask HF hands to the layer is honoured (float additive or boolean), with fully masked rows kept
  finite (as eager does) instead of becoming NaN.

When no padding mask is needed (packed training blocks) the model asks HF for no mask at all, so global
layers run SDPA's ``is_causal`` kernel and local layers a cached boolean window mask.

**Training with dropout.** PyTorch's CPU SDPA cannot apply attention dropout without materialising the weights (it
falls back to its math kernel), and ``F.dropout``'s per-element Bernoulli draws cost ~20 % of a step. So in training
the fast path computes eager's attention in blocks of query rows over only the keys they may see
(:func:`_blocked_attention_with_dropout`), draws dropout masks four per 64-bit random word (:func:`dropout_mask`;
``p`` rounded to 1/65,536) for the weights and for GPT-Neo's dropout modules (:class:`FastDropout`), and runs
``gelu_new`` as PyTorch's fused tanh GELU (:class:`FastGELUNew`). Same function, same distribution of dropout masks,
different random draws than HF's eager model (``benchmarks/train_throughput.py`` measures the step against HF eager).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import GPTNeoConfig, GPTNeoForCausalLM
from transformers import activations as _hf_activations
from transformers.models.gpt_neo import modeling_gpt_neo as _neo
from transformers.utils import logging as _hf_logging

from helpers.core.config import is_local_path, require_output
from helpers.core.seeding import seed_everything

_hf_logging.disable_progress_bar()  # no "Loading weights"/"Writing model shards" bars in reports

# ----------------------------------------------------------------------------- configurations


@dataclass
class DecoderSpec:
    """The shape of a GPT-Neo decoder. ``intermediate`` defaults to 4 × hidden; layers alternate global/local."""

    hidden: int = 768
    layers: int = 4
    heads: int = 16
    context: int = 512
    window: int = 256
    vocab_size: int = 16_384
    intermediate: int | None = None
    dropout: float = 0.1
    activation: str = "gelu_new"
    attention_pattern: list[str] = field(default_factory=lambda: ["global", "local"])

    def __post_init__(self):
        if min(self.hidden, self.layers, self.heads, self.context, self.window, self.vocab_size) <= 0:
            raise ValueError(f"every size of a decoder must be positive: {self}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden size {self.hidden} is not divisible by {self.heads} heads")
        bad = set(self.attention_pattern) - {"global", "local"}
        if bad or not self.attention_pattern:
            raise ValueError(f"attention_pattern must list 'global'/'local' layers, got {self.attention_pattern}")

    @property
    def attention_layers(self) -> list[str]:
        pat = self.attention_pattern
        return [pat[i % len(pat)] for i in range(self.layers)]


# The paper's decoder and TinyStories' released shapes (docs/methods.md#decoders), for reference and the paper
# profile.
PRESETS: dict[str, dict[str, Any]] = {
    "berttime-paper": dict(hidden=768, layers=4, heads=16, context=512, window=256, vocab_size=16_384),
    "tinystories-1M": dict(hidden=64, layers=8, heads=16, context=512, window=256, vocab_size=50_257),
    "tinystories-3M": dict(hidden=128, layers=8, heads=16, context=512, window=256, vocab_size=50_257),
    "tinystories-8M": dict(hidden=256, layers=8, heads=16, context=512, window=256, vocab_size=50_257),
    "tinystories-28M": dict(hidden=512, layers=8, heads=16, context=512, window=256, vocab_size=50_257),
    "tinystories-33M": dict(hidden=768, layers=4, heads=16, context=512, window=256, vocab_size=50_257),
}

# BERTtime Stories' regularisation by budget (paper words; docs/methods.md#regularisation):
# (upper bound of budget, dropout, weight decay).
DROPOUT_BY_BUDGET = [(5_000_000, 0.5, 0.2), (10_000_000, 0.4, 0.2), (25_000_000, 0.25, 0.2), (math.inf, 0.2, 0.1)]


def regularisation_for_budget(words: int, scale: float = 1.0) -> tuple[float, float]:
    """``(dropout, weight decay)`` of the paper for a budget of ``words``; ``scale`` maps this profile's words to
    the paper's (the cpu profile's 1M words stand for 10M: scale 10). Budgets between the paper's points take the
    next larger point's values (5M → 0.5/0.2, 10M → 0.4/0.2, 25M → 0.25/0.2, ≥ 50M → 0.2/0.1)."""
    paper_words = words * scale
    for upper, dropout, wd in DROPOUT_BY_BUDGET:
        if paper_words <= upper:
            return dropout, wd
    raise AssertionError("unreachable")


PAPER_TRAIN_TOKENS = 15_000 * 393_216  # 15,000 steps × 768 sequences × 512 tokens


def regularisation_for_epochs(epochs: float, tokens_per_word: float = 1.3) -> tuple[float, float]:
    """``(dropout, weight decay)`` the paper would use for a run that makes ``epochs`` passes over its data.

    The paper trains every budget for the same 5.9B tokens, so its small budgets see hundreds of epochs and its
    dropout is really a defence against repetition. A scaled-down run with few epochs is matched to the paper
    budget that would see as many epochs: ``B = 5.9e9 / (epochs · tokens_per_word)`` words."""
    if epochs <= 0:
        raise ValueError(f"epochs must be positive, got {epochs}")
    return regularisation_for_budget(int(PAPER_TRAIN_TOKENS / (epochs * tokens_per_word)))


def gpt_neo_config(spec: DecoderSpec | dict, **token_ids: int) -> GPTNeoConfig:
    """A :class:`GPTNeoConfig` for ``spec`` (tied embeddings; dropout on embeddings, attention and residuals).

    ``token_ids`` sets ``bos_token_id``/``eos_token_id``/``pad_token_id`` (from the tokenizer)."""
    if isinstance(spec, dict):
        spec = DecoderSpec(**spec)
    layers = spec.attention_layers
    # GPTNeoConfig wants attention_types as [[pattern, repeat], ...] whose expansion has num_layers entries
    types = [[[t], 1] for t in layers]
    cfg = GPTNeoConfig(
        vocab_size=spec.vocab_size,
        max_position_embeddings=spec.context,
        hidden_size=spec.hidden,
        num_layers=spec.layers,
        num_heads=spec.heads,
        attention_types=types,
        window_size=spec.window,
        intermediate_size=spec.intermediate or 4 * spec.hidden,
        activation_function=spec.activation,
        embed_dropout=spec.dropout,
        attention_dropout=spec.dropout,
        resid_dropout=spec.dropout,
        tie_word_embeddings=True,
        use_cache=True,
        **token_ids,
    )
    if cfg.attention_layers != layers:
        raise AssertionError(f"GPTNeoConfig expanded the layer pattern to {cfg.attention_layers}, expected {layers}")
    return cfg


def spec_of(config: GPTNeoConfig) -> DecoderSpec:
    """The :class:`DecoderSpec` a config was built from (inverse of :func:`gpt_neo_config`)."""
    return DecoderSpec(
        hidden=config.hidden_size, layers=config.num_layers, heads=config.num_heads,
        context=config.max_position_embeddings, window=config.window_size, vocab_size=config.vocab_size,
        intermediate=config.intermediate_size, dropout=config.resid_dropout, activation=config.activation_function,
        attention_pattern=list(config.attention_layers),
    )


def build_decoder(spec: DecoderSpec | dict | GPTNeoConfig, fast: bool = True, seed: int | None = None, **token_ids: int) -> GPTNeoForCausalLM:
    """A freshly initialised GPT-Neo (seeded if ``seed`` is given), with the fast attention path by default."""
    cfg = spec if isinstance(spec, GPTNeoConfig) else gpt_neo_config(spec, **token_ids)
    if seed is not None:
        seed_everything(seed)
    model = GPTNeoForCausalLM(cfg)
    return enable_fast_attention(model) if fast else model


def load_decoder(path: str | Path, fast: bool = True, **kwargs: Any) -> GPTNeoForCausalLM:
    """Load a checkpoint written by ``save_pretrained`` (a folder or a hub name), fast attention by default.
    A missing local folder raises :class:`FileNotFoundError` naming the notebook that makes it (never a hub lookup)."""
    if is_local_path(path):
        require_output(path, "decoder")
    model = GPTNeoForCausalLM.from_pretrained(str(path), **kwargs)
    return enable_fast_attention(model) if fast else model


def context_length(model_or_config: Any) -> int | None:
    """The context length of a model, a transformers config, a config dict or a saved model folder (its
    ``config.json``): the first positive ``max_position_embeddings``, ``n_positions`` or ``n_ctx``; None when none
    is set. The one place every stage reads a model's context from (decoders and encoders alike)."""
    obj = model_or_config
    if isinstance(obj, (str, Path)):
        obj = json.loads((Path(obj) / "config.json").read_text())
    cfg = obj if isinstance(obj, dict) else getattr(obj, "config", obj)
    for k in ("max_position_embeddings", "n_positions", "n_ctx"):
        v = cfg.get(k) if isinstance(cfg, dict) else getattr(cfg, k, None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def count_parameters(model: torch.nn.Module, non_embedding: bool = False) -> int:
    """Unique trainable parameters (tied weights once); ``non_embedding`` leaves out token and position tables."""
    seen, n = set(), 0
    emb = set()
    if non_embedding and hasattr(model, "get_input_embeddings"):
        emb.add(id(model.get_input_embeddings().weight))
        wpe = getattr(getattr(model, "transformer", None), "wpe", None)
        if wpe is not None:
            emb.add(id(wpe.weight))
    for p in model.parameters():
        if id(p) in seen or id(p) in emb:
            continue
        seen.add(id(p))
        n += p.numel()
    return n


def flops_per_token(config: GPTNeoConfig, context: int | None = None) -> float:
    """Training FLOPs per token, forward + backward (≈ 3 × forward): 6·N for the matmul weights (N without the
    position table, with the tied output projection counted once as a matmul) plus attention scores and mixing,
    6 · layers · context · hidden (2 matmuls of 2·T·d per token, ×3), halved for causality; local layers see
    at most ``window`` keys. A standard estimate (Kaplan et al. 2020), used to compare runs, not a measurement."""
    T = context or config.max_position_embeddings
    H, L, V, I = config.hidden_size, config.num_layers, config.vocab_size, config.intermediate_size
    n_matmul = L * (4 * H * H + 2 * H * I) + V * H
    attn = 0.0
    for kind in config.attention_layers:
        span = min(T, config.window_size) if kind == "local" else T
        attn += 2 * 2 * span * H / 2  # QK^T and AV, causal half
    return 6.0 * n_matmul + 3.0 * attn


# ----------------------------------------------------------------------------- fast attention


def dropout_mask(shape: tuple[int, ...], p: float, device=None) -> tuple[torch.Tensor, float]:
    """A dropout mask (``True`` = dropped) and the matching ``1 / keep`` scale, from torch's seeded generator.

    ``torch.nn.functional.dropout`` draws one Bernoulli variate per element (``bernoulli_``: ~20 % of a CPU
    training step of our decoders). Here one 64-bit draw gives four 16-bit uniforms, so ``p`` is rounded to a
    multiple of 1/65,536 (0.2 → 0.199997); the draws come from the same generator, so runs stay seeded and a
    resumed run (which restores the RNG state) repeats them exactly."""
    n = math.prod(shape)
    cut = min(65_536, max(0, round(p * 65_536)))
    if cut == 65_536:
        return torch.ones(shape, dtype=torch.bool, device=device), 0.0
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-(2**63), 2**63 - 1)
    drop = words.view(torch.int16)[:n].view(shape) < (cut - 32_768)
    return drop, 65_536 / (65_536 - cut)


class _Dropped(torch.autograd.Function):
    """``x`` with ``drop`` zeroed and the rest scaled; saves only the boolean mask for backward."""

    @staticmethod
    def forward(ctx, x, drop, scale):
        ctx.save_for_backward(drop)
        ctx.scale = scale
        return x.masked_fill(drop, 0.0).mul_(scale)

    @staticmethod
    def backward(ctx, grad):
        (drop,) = ctx.saved_tensors
        return grad.masked_fill(drop, 0.0).mul_(ctx.scale), None, None


def fast_dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Inverted dropout with :func:`dropout_mask` (same distribution as ``F.dropout`` up to the rounding of ``p``)."""
    if not training or p <= 0.0:
        return x
    drop, scale = dropout_mask(tuple(x.shape), p, x.device)
    return _Dropped.apply(x, drop, scale)


class FastDropout(torch.nn.Dropout):
    """``nn.Dropout`` computed by :func:`fast_dropout` (swapped in place of GPT-Neo's dropout modules)."""

    def forward(self, x):
        return fast_dropout(x, self.p, self.training)


class FastGELUNew(_hf_activations.NewGELUActivation):
    """``gelu_new`` (tanh approximation) as PyTorch's fused kernel: one pass instead of seven (|diff| < 1e-6)."""

    def forward(self, x):
        return F.gelu(x, approximate="tanh")


# Version of the fast path's training numerics (part of every decoder run's fingerprint): 1 = SDPA with
# F.dropout; 2 = blocked attention, 16-bit dropout masks, fused tanh GELU; 3 = + the fused LM-head loss on a CPU.
FAST_PATH_VERSION = 3
LM_HEAD_CHUNK = 256  # rows (positions) per block of the fused LM-head loss
FUSED_LM_HEAD = True  # helpers.training.loop.lm_loss uses lm_head_loss for GPT-Neo on a CPU (benchmarks switch it off)


class _LmHeadLoss(torch.autograd.Function):
    """Mean cross-entropy of ``hidden @ weight.T`` against ``targets``, with both gradients computed in the forward
    pass, ``chunk`` rows at a time: the [rows, vocab] logits exist one block at a time and are never stored, cast
    to fp32 or passed through a separate log-softmax backward. The matmuls run in the autocast dtype when
    autocast is on (bf16, as ``nn.Linear`` would), the softmax in fp32. Same FLOPs as forward + backward."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, chunk):
        dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else hidden.dtype
        with torch.autocast("cpu", enabled=False):
            h, w = hidden.to(dtype), weight.to(dtype)
            n = h.shape[0]
            grad_h = torch.empty(h.shape, dtype=torch.float32)
            grad_w = torch.zeros(w.shape, dtype=torch.float32)
            total = torch.zeros((), dtype=torch.float32)
            for s0 in range(0, n, chunk):
                hs, ts = h[s0 : s0 + chunk], targets[s0 : s0 + chunk]
                logits = (hs @ w.t()).float()
                lse = torch.logsumexp(logits, dim=1, keepdim=True)
                total += (lse.squeeze(1) - logits.gather(1, ts[:, None]).squeeze(1)).sum()
                p = logits.sub_(lse).exp_()  # softmax, in place of the logits
                p[torch.arange(len(ts)), ts] -= 1.0  # d(sum of losses)/d logits
                p = p.to(dtype)
                grad_h[s0 : s0 + chunk] = p @ w
                grad_w += p.t() @ hs
        ctx.save_for_backward(grad_h, grad_w)
        ctx.n, ctx.dtypes = n, (hidden.dtype, weight.dtype)
        return total / n

    @staticmethod
    def backward(ctx, grad):
        grad_h, grad_w = ctx.saved_tensors
        scale = grad / ctx.n
        return (grad_h * scale).to(ctx.dtypes[0]), (grad_w * scale).to(ctx.dtypes[1]), None, None


def lm_head_loss(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk: int = LM_HEAD_CHUNK) -> torch.Tensor:
    """Mean next-token cross-entropy of rows ``hidden`` [N, H] under the LM head ``weight`` [V, H] against
    ``targets`` [N] (no ignored positions): :class:`_LmHeadLoss`, equal to ``F.cross_entropy(hidden @ weight.T,
    targets)`` within float rounding (``tests/test_decoder.py``)."""
    return _LmHeadLoss.apply(hidden, weight, targets, chunk)
ATTENTION_CHUNK = 64  # query rows per block of the training (dropout) attention path
# On a GPU, attention dropout runs inside SDPA's fused kernel (eager's function and dropout law, its own draws; 2.4x
# the blocked path there, ``benchmarks/gpu_check.py``). False: the blocked path everywhere (for that comparison).
SDPA_DROPOUT_ON_GPU = True


def _sdpa_dropout(query: torch.Tensor) -> bool:  # where attention dropout runs inside SDPA (a GPU)
    return SDPA_DROPOUT_ON_GPU and query.is_cuda


def _blocked_attention_with_dropout(query, key, value, allowed, attention_mask, p: float, chunk: int = ATTENTION_CHUNK):
    """Eager GPT-Neo attention (no scaling, ``where(allowed, w, min)``, + padding mask, fp32 softmax, dropout on
    the weights) computed ``chunk`` query rows at a time over only the keys those rows may see.

    Keys outside a block's allowed range get weight exactly 0 in eager's softmax (``exp(min - max)`` underflows),
    so leaving them out is exact; it skips the causal upper triangle and, in local layers, everything beyond the
    window: ~40 % of the [q, k] work at context 256. Dropout uses :func:`dropout_mask`; its ``1/keep`` scale is
    applied to the [q, d] output instead of the [q, k] weights."""
    q_len = query.size(-2)
    cols = torch.arange(allowed.size(-1), device=allowed.device)
    rows_allowed = allowed[0, 0]
    outs = []
    for s0 in range(0, q_len, chunk):
        s1 = min(q_len, s0 + chunk)
        seen = cols[rows_allowed[s0:s1].any(0)]
        k0, k1 = (int(seen[0]), int(seen[-1]) + 1) if len(seen) else (0, 1)
        w = torch.matmul(query[..., s0:s1, :], key[..., k0:k1, :].transpose(-1, -2))
        w.masked_fill_(~allowed[..., s0:s1, k0:k1], torch.finfo(w.dtype).min)  # w is bf16 under autocast
        if attention_mask is not None:
            m = attention_mask[..., s0:s1, :] if attention_mask.size(-2) > 1 else attention_mask
            w = w + m[..., k0:k1]
        w = torch.softmax(w, dim=-1)
        drop, scale = dropout_mask(tuple(w.shape), p, w.device)
        outs.append(torch.matmul(w.masked_fill(drop, 0.0), value[..., k0:k1, :]) * scale)
    return torch.cat(outs, dim=-2) if len(outs) > 1 else outs[0]


class FastGPTNeoSelfAttention(_neo.GPTNeoSelfAttention):
    """GPT-Neo self-attention through ``scaled_dot_product_attention`` (same parameters and outputs as eager).

    Without attention dropout (evaluation, generation) attention weights are not materialised. With dropout
    (training) on a CPU, SDPA would fall back to its math kernel anyway, so eager's computation is done here with
    :func:`dropout_mask` (the ``1/keep`` scale on the [q, d] output, not the [q, k] weights); on a GPU SDPA applies
    the dropout (:data:`SDPA_DROPOUT_ON_GPU`). With ``output_attentions=True`` HF's eager code is used."""

    def _attn(self, query, key, value, attention_mask=None):
        if self._want_weights:
            return super()._attn(query, key, value, attention_mask)
        q_len, k_len = query.size(-2), key.size(-2)
        dtype = query.dtype
        query, key, value32 = query.float(), key.float(), value.float()
        dropout = self.attn_dropout.p if self.training else 0.0
        if attention_mask is not None and attention_mask.dtype == torch.bool:
            attention_mask = torch.zeros(attention_mask.shape, dtype=torch.float32, device=query.device).masked_fill(
                ~attention_mask, torch.finfo(torch.float32).min)
        allowed = self.bias[:, :, k_len - q_len : k_len, :k_len]
        if dropout > 0.0 and not _sdpa_dropout(query):
            return _blocked_attention_with_dropout(query, key, value32, allowed, attention_mask, dropout).to(dtype), None
        local = self.attention_type == "local" and k_len > self.config.window_size
        if attention_mask is None and not local and q_len == k_len:
            out = F.scaled_dot_product_attention(query, key, value32, is_causal=True, scale=1.0, dropout_p=dropout)
        elif attention_mask is None:
            out = F.scaled_dot_product_attention(query, key, value32, attn_mask=allowed, scale=1.0, dropout_p=dropout)
        else:
            # eager: where(bias, w, min) + mask; rows masked everywhere stay finite (uniform), never NaN
            mask = attention_mask.float().masked_fill(~allowed, torch.finfo(torch.float32).min)
            out = F.scaled_dot_product_attention(query, key, value32, attn_mask=mask, scale=1.0, dropout_p=dropout)
        return out.to(dtype), None

    _want_weights = False

    def forward(self, hidden_states, attention_mask=None, layer_past=None, use_cache=False, output_attentions=False, **kwargs):
        self._want_weights = bool(output_attentions)
        try:
            return super().forward(hidden_states, attention_mask=attention_mask, layer_past=layer_past,
                                   use_cache=use_cache, output_attentions=output_attentions, **kwargs)
        finally:
            self._want_weights = False


class _MaskFreeGPTNeoModel(_neo.GPTNeoModel):
    """``GPTNeoModel`` whose forward, when no ``attention_mask`` is given (or it is all ones) and no cache is in
    use, has HF build no 4-D mask, so the attention layers use SDPA's causal kernel. A class (not a closure on
    the instance) so that ``copy.deepcopy`` and pickling of a fast model keep working on the copy's own weights."""

    _storybench_fast = True

    def forward(self, *args, attention_mask=None, **kwargs):
        # the cache arrives as ``past_key_values`` (transformers < 5.24) or ``cache`` (5.24 on, which warns when it is
        # handed ``past_key_values`` too): it is passed on under the name the caller used, never added
        cached = kwargs.get("past_key_values") is not None or kwargs.get("cache") is not None
        cfg = self.config
        unpadded = attention_mask is None or bool(attention_mask.all())
        if unpadded and not cached and not kwargs.get("output_attentions"):
            saved = cfg._attn_implementation
            try:
                cfg._attn_implementation_internal = "sdpa"  # only changes which mask create_causal_mask returns
                return super().forward(*args, attention_mask=None, **kwargs)
            finally:
                cfg._attn_implementation_internal = saved
        return super().forward(*args, attention_mask=attention_mask, **kwargs)


def _mask_free_forward(model: GPTNeoForCausalLM):
    """Switch ``model.transformer`` to :class:`_MaskFreeGPTNeoModel` (in place; same parameters and state dict)."""
    inner = model.transformer
    if type(inner) is _neo.GPTNeoModel:
        inner.__class__ = _MaskFreeGPTNeoModel


# (HF class, our class) pairs swapped in place by enable_fast_attention; parameters and state dict unchanged
_SWAPS = [(_neo.GPTNeoSelfAttention, FastGPTNeoSelfAttention), (torch.nn.Dropout, FastDropout),
          (_hf_activations.NewGELUActivation, FastGELUNew)]


@functools.lru_cache(maxsize=None)
def _cache_name(cls: type) -> str:
    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


def cache_kwarg(model: torch.nn.Module, cache: Any) -> dict:
    """``{"cache": cache}`` for a model whose ``forward`` takes ``cache`` (transformers 5.24 on, which deprecates
    ``past_key_values`` with a warning), else ``{"past_key_values": cache}``: the key-value cache of the next step.
    The signature is read once per model class (this runs at every decoding step)."""
    return {_cache_name(type(model)): cache}


def output_cache(outputs: Any) -> Any:
    """The key-value cache a forward returned: ``outputs.cache`` where the output class has that field
    (transformers 5.24 on, where reading ``outputs.past_key_values`` still works but logs a deprecation warning),
    else ``outputs.past_key_values``."""
    names = {f.name for f in dataclasses.fields(outputs)} if dataclasses.is_dataclass(outputs) else set(outputs.keys())
    return getattr(outputs, "cache") if "cache" in names else outputs.past_key_values


def enable_fast_attention(model: GPTNeoForCausalLM) -> GPTNeoForCausalLM:
    """Switch ``model`` to the fast path, in place: every GPT-Neo attention layer to
    :class:`FastGPTNeoSelfAttention`, dropout modules to :class:`FastDropout`, ``gelu_new`` to :class:`FastGELUNew`.

    Parameters, buffers and the state dict are untouched, so checkpoints stay in HF's format."""
    if not any(isinstance(m, (_neo.GPTNeoSelfAttention)) for m in model.modules()):
        raise TypeError(f"{type(model).__name__} has no GPT-Neo attention layers to accelerate")
    for module in model.modules():
        for hf, ours in _SWAPS:
            if type(module) is hf:
                module.__class__ = ours
    _mask_free_forward(model)
    return model


def disable_fast_attention(model: GPTNeoForCausalLM) -> GPTNeoForCausalLM:
    """Back to HF's eager modules (for comparisons)."""
    for module in model.modules():
        for hf, ours in _SWAPS:
            if type(module) is ours:
                module.__class__ = hf
    inner = model.transformer
    if type(inner) is _MaskFreeGPTNeoModel:
        inner.__class__ = _neo.GPTNeoModel
    return model


def spec_dict(spec: DecoderSpec) -> dict:
    return asdict(spec)
