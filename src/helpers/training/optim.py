"""LAMB (You et al. 2020) as used to pretrain LTG-BERT (``ltgoslo/ltg-bert``, ``babylm/train/lamb.py``;
``docs/methods.md#encoder-training``).

For each parameter ``w`` with gradient ``g`` at step ``t`` (1-based)::

    m ← β₁ m + (1 − β₁) g            v ← β₂ v + (1 − β₂) g²
    u = (m / (1 − β₁ᵗ)) / (sqrt(v / (1 − β₂ᵗ)) + ε)          # Adam direction, bias-corrected
    if the group's weight_decay λ > 0:
        u ← u + λ w                                       # decoupled decay, inside the trust ratio
        r = ‖w‖ / ‖u‖   (r = 1 when either norm is 0)
    else:
        r = 1                                             # no-decay group: plain Adam step
    w ← w − lr · r · u

The trust ratio is applied **only** in groups with ``weight_decay > 0`` (the reference's behaviour: biases,
LayerNorms, embeddings and the position table take plain Adam steps). Norms are per parameter tensor. ε is added
to ``sqrt(v̂)`` (not inside the root). The paper setting is lr 1e-2, β = (0.9, 0.98), ε = 1e-6, wd 0.1.
"""
from __future__ import annotations

import torch


class Lamb(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0.0):
        if lr < 0.0:
            raise ValueError(f"invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"invalid epsilon: {eps}")
        if not 0.0 <= betas[0] < 1.0 or not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"invalid betas: {betas}")
        if weight_decay < 0.0:
            raise ValueError(f"invalid weight decay: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                state["step"] += 1
                t = state["step"]
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = (exp_avg_sq / (1 - beta2 ** t)).sqrt_().add_(eps)
                update = (exp_avg / (1 - beta1 ** t)).div_(denom)
                if wd > 0:
                    update.add_(p, alpha=wd)
                    w_norm = torch.linalg.vector_norm(p)
                    u_norm = torch.linalg.vector_norm(update)
                    # tensors, not floats: no host sync per parameter on a GPU
                    ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
                    p.sub_(update.mul_(ratio * lr))
                else:
                    p.add_(update, alpha=-lr)
        return loss
