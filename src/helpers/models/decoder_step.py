"""One new token at a time through a GPT-Neo decoder, with a key-value cache allocated once
(``docs/methods.md#truncation-and-generation``).

Decoding calls the model once per new token with a single position per row, so on a CPU the per-call overhead of
transformers' module stack (the 4-D mask it rebuilds, a cache that grows by concatenation, dozens of small modules)
costs more than the arithmetic: a cpu-profile decoder takes ~12 ms per step for 32 rows on 2 cores, of which the
matrices need a few. :class:`DecoderStepper` runs the same computation as GPT-Neo's forward for that one position
directly on the model's own weights:

* the prompt is read by the model's ordinary forward (the *prefill*); its cache is copied once into tensors sized
  for the whole completion, and each step writes its key and value into the next slot;
* attention is GPT-Neo's: no ``1/sqrt(d)`` scale, scores in fp32, padded slots masked, a local layer reads only the
  last ``window_size`` slots (HF's local mask counts slots, padding included, and so does this);
* the query, key and value projections are one matrix product.

The logits agree with transformers' within float rounding (tested: |difference| < 1e-4, the same greedy tokens on a
trained decoder); ``benchmarks/generation.py`` prints the speed ratio. Only fp32 GPT-Neo models in eval mode take
this path (:func:`stepper_for` returns ``None`` otherwise and the caller keeps transformers' loop).
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from transformers import GPTNeoForCausalLM


def _layer_kv(cache: Any, index: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Keys and values ([B, heads, T, d]) of layer ``index`` in a transformers cache: ``cache.layers[i].keys``
    (transformers 5), ``cache.key_cache[i]`` (4.x), or a legacy tuple of pairs; ``None`` for another layout."""
    layers = getattr(cache, "layers", None)
    if layers is not None and hasattr(layers[index], "keys") and torch.is_tensor(layers[index].keys):
        return layers[index].keys, layers[index].values
    if hasattr(cache, "key_cache") and hasattr(cache, "value_cache"):
        return cache.key_cache[index], cache.value_cache[index]
    if isinstance(cache, (tuple, list)) and len(cache[index]) == 2:
        return cache[index][0], cache[index][1]
    return None


class DecoderStepper:
    """The incremental forward of a GPT-Neo decoder after its prompt (see the module docstring).

    ``attention_mask`` [B, L] is the prefill's (1 = token, 0 = left padding) and ``capacity`` the most slots a row
    will hold (prompt width + new tokens). :meth:`step` takes each row's new token and position and returns the
    next logits [B, vocab]; :meth:`batch_select_indices` and :meth:`batch_repeat_interleave` reorder the rows as
    transformers' caches do, so a decoding loop can use either."""

    def __init__(self, model: GPTNeoForCausalLM, prefill_cache: Any, attention_mask: torch.Tensor, capacity: int):
        tr, cfg = model.transformer, model.config
        rows, width = attention_mask.shape
        if capacity < width:
            raise ValueError(f"capacity {capacity} is below the prompt width {width}")
        self.wte, self.wpe, self.ln_f = tr.wte.weight, tr.wpe.weight, tr.ln_f
        self.head_weight, self.head_bias = model.lm_head.weight, model.lm_head.bias
        self.window = cfg.window_size
        self.slots = width  # slots filled so far (the same for every row: prompts are left-padded)
        device = self.wte.device
        self.valid = torch.zeros((rows, capacity), dtype=torch.bool, device=device)
        self.valid[:, :width] = attention_mask.bool()
        self.layers = []
        for i, block in enumerate(tr.h):
            attn = block.attn.attention
            kv = _layer_kv(prefill_cache, i)
            if kv is None:
                raise TypeError(f"unknown cache layout {type(prefill_cache).__name__}")
            keys = torch.zeros((rows, attn.num_heads, capacity, attn.head_dim), dtype=torch.float32, device=device)
            values = torch.zeros_like(keys)
            keys[:, :, :width], values[:, :, :width] = kv[0], kv[1]
            self.layers.append(dict(
                ln_1=block.ln_1, ln_2=block.ln_2, act=block.mlp.act, local=attn.attention_type == "local",
                heads=attn.num_heads, head_dim=attn.head_dim, keys=keys, values=values,
                qkv=torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight], 0),
                out_w=attn.out_proj.weight, out_b=attn.out_proj.bias,
                fc_w=block.mlp.c_fc.weight, fc_b=block.mlp.c_fc.bias,
                proj_w=block.mlp.c_proj.weight, proj_b=block.mlp.c_proj.bias))

    @torch.no_grad()
    def step(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Feed ``tokens`` [B] at ``positions`` [B] (each row's position id) into the next slot; the logits [B, V]
        of the token after them."""
        t = self.slots
        if t >= self.valid.size(1):
            raise RuntimeError(f"the cache is full ({t} slots)")
        self.valid[:, t] = True
        x = self.wte[tokens] + self.wpe[positions]
        rows, hidden = x.shape
        lowest = torch.finfo(torch.float32).min
        masks = {}
        for lo in {0, max(0, t + 1 - self.window)}:  # global layers read every slot, local ones the last window
            masks[lo] = torch.zeros((rows, 1, t + 1 - lo), dtype=torch.float32, device=x.device).masked_fill_(
                ~self.valid[:, None, lo : t + 1], lowest)
        for layer in self.layers:
            h = F.layer_norm(x, (hidden,), layer["ln_1"].weight, layer["ln_1"].bias, layer["ln_1"].eps)
            nh, d = layer["heads"], layer["head_dim"]
            q, k, v = F.linear(h, layer["qkv"]).view(rows, 3, nh, d).unbind(1)
            layer["keys"][:, :, t], layer["values"][:, :, t] = k, v
            lo = max(0, t + 1 - self.window) if layer["local"] else 0
            keys, values = layer["keys"][:, :, lo : t + 1], layer["values"][:, :, lo : t + 1]
            scores = torch.matmul(q.unsqueeze(2), keys.transpose(-1, -2)).squeeze(2)  # [B, nh, slots], unscaled
            probs = torch.softmax(scores + masks[lo], dim=-1)
            context = torch.matmul(probs.unsqueeze(2), values).reshape(rows, hidden)
            x = x + F.linear(context, layer["out_w"], layer["out_b"])
            h = F.layer_norm(x, (hidden,), layer["ln_2"].weight, layer["ln_2"].bias, layer["ln_2"].eps)
            x = x + F.linear(layer["act"](F.linear(h, layer["fc_w"], layer["fc_b"])), layer["proj_w"], layer["proj_b"])
        self.slots = t + 1
        x = F.layer_norm(x, (hidden,), self.ln_f.weight, self.ln_f.bias, self.ln_f.eps)
        return F.linear(x, self.head_weight, self.head_bias)

    def batch_select_indices(self, keep: torch.Tensor) -> None:
        """Keep only rows ``keep`` (in that order)."""
        self.valid = self.valid[keep]
        for layer in self.layers:
            layer["keys"], layer["values"] = layer["keys"][keep], layer["values"][keep]

    def batch_repeat_interleave(self, repeats: int) -> None:
        """Repeat every row ``repeats`` times in place (row r becomes rows r·repeats … r·repeats + repeats − 1)."""
        self.valid = self.valid.repeat_interleave(repeats, dim=0)
        for layer in self.layers:
            layer["keys"] = layer["keys"].repeat_interleave(repeats, dim=0)
            layer["values"] = layer["values"].repeat_interleave(repeats, dim=0)


def stepper_for(model: Any, prefill_cache: Any, attention_mask: torch.Tensor, capacity: int) -> DecoderStepper | None:
    """A :class:`DecoderStepper` where ``model`` can take it (a GPT-Neo causal LM in eval mode with fp32 weights, and
    a cache this module reads that holds every prompt slot of every layer), else ``None``: the caller then keeps
    transformers' own forward."""
    if not isinstance(model, GPTNeoForCausalLM) or model.training:
        return None
    if any(p.dtype != torch.float32 for p in model.parameters()):
        return None
    if {block.attn.attention_type for block in model.transformer.h} - {"global", "local"}:
        return None
    width = attention_mask.size(1)
    for i in range(len(model.transformer.h)):  # every layer's cache holds every prompt slot (no sliding-window trim)
        kv = _layer_kv(prefill_cache, i)
        if kv is None or kv[0].size(2) != width or kv[1].size(2) != width:
            return None
    return DecoderStepper(model, prefill_cache, attention_mask, capacity)
