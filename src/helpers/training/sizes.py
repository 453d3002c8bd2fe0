"""Sizes checked before any training starts: a batch no larger than the training data, and a micro-batch whose
activations fit the memory available, so that an absurd override (``--set 02.train.batch_size=1000000000``) is refused
with one line at planning time instead of grinding for an hour with memory rising.

The memory estimate is deliberately rough (an upper bound of the order of magnitude, not a measurement): per layer
and token the activations a transformer keeps for the backward pass, ≈ 34·h + 5·a·s bytes in 16-bit precision
(Korthikanti et al. 2022, Eq. 1, no recomputation), doubled for fp32, plus the logits and their gradient
(2 × vocab × 4 bytes per token) and the weights with AdamW's two moments (4 × 4 bytes per parameter).
"""
from __future__ import annotations

from typing import Any, Mapping

from helpers.core.hardware import available_memory
from helpers.models.registry import parameter_count


class SizeError(ValueError):
    """A batch or model size the data or the machine cannot hold; the message names the setting and a bound."""


def activation_bytes(micro_batch: int, context: int, hidden: int, layers: int, heads: int, vocab: int,
                     parameters: int) -> int:
    """Rough peak bytes of one fp32 training step of a transformer on ``micro_batch`` sequences of ``context`` tokens
    (the module docstring's formula)."""
    tokens = micro_batch * context
    per_layer = tokens * (34 * hidden + 5 * heads * context) * 2
    return int(layers * per_layer + tokens * vocab * 4 * 2 + parameters * 4 * 4)


def check_batch(name: str, batch_size: int, blocks: int, setting: str = "train.batch_size") -> None:
    """Refuse a batch larger than the training blocks: one optimiser step would read the whole budget more than once."""
    if batch_size > blocks:
        raise SizeError(f"{name}: {setting} = {batch_size:,} is larger than its {blocks:,} training blocks (one step "
                        f"would read the whole budget {batch_size / max(blocks, 1):,.1f} times); use at most {blocks:,}")


def check_memory(name: str, micro_batch: int, model: Mapping[str, int], vocab: int, parameters: int,
                 available: int | None, setting: str = "train.micro_batch") -> None:
    """Refuse a micro-batch whose estimated step (:func:`activation_bytes`) exceeds ``available`` bytes (None: not
    known, nothing is refused). ``model``: hidden, layers, heads, context."""
    if available is None:
        return
    need = activation_bytes(micro_batch, model["context"], model["hidden"], model["layers"], model["heads"], vocab,
                            parameters)
    if need > available:
        per = max(1, need // max(micro_batch, 1))
        fits = max(0, int(available // per))
        raise SizeError(f"{name}: a training step on {micro_batch:,} sequences of {model['context']} tokens needs "
                        f"~{need / 2**30:,.1f} GiB (estimated), more than the {available / 2**30:,.1f} GiB available; "
                        f"set {setting} to at most ~{fits:,} (gradient accumulation keeps the batch)")


def check_sizes(name: str, batch_size: int, micro_batch: int | None, blocks: int, spec: Any,
                entry: str = "gpt-neo") -> None:
    """Both checks for one planned run: ``batch_size`` against its ``blocks`` (:func:`check_batch`) and the
    micro-batch (all of the batch without one) against the memory available now (:func:`check_memory`), for the model
    of registry ``entry`` that ``spec`` describes (hidden, layers, heads, context, vocab_size)."""
    check_batch(name, batch_size, blocks)
    model = {k: getattr(spec, k) for k in ("hidden", "layers", "heads", "context")}
    check_memory(name, micro_batch or batch_size, model, spec.vocab_size, parameter_count(entry, spec),
                 available_memory())
