"""One training step under bf16 autocast against fp32, shared by the decoder and encoder tests."""
from __future__ import annotations

import pytest
import torch

from helpers.core.hardware import autocast_context


def assert_bf16_step_close_to_fp32(make_model, loss_of, rel: float = 0.02, min_cosine: float = 0.98) -> None:
    """Build a model with ``make_model()`` for each precision, take ``loss_of(model)`` under autocast and backprop:
    the bf16 loss is within ``rel`` of the fp32 one and every weight matrix's gradient has cosine similarity above
    ``min_cosine`` with its fp32 counterpart (bf16 keeps 8 bits of mantissa)."""
    grads, losses = {}, {}
    for precision in ("fp32", "bf16"):
        model = make_model()
        with autocast_context(precision, "cpu")():
            loss = loss_of(model)
        loss.float().backward()
        losses[precision] = float(loss.detach())
        grads[precision] = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=rel)
    for name, g in grads["fp32"].items():
        if g.dim() == 2 and g.norm() > 0:
            cos = torch.nn.functional.cosine_similarity(g.flatten(), grads["bf16"][name].flatten(), dim=0)
            assert cos > min_cosine, f"{name}: cosine {float(cos):.4f}"
