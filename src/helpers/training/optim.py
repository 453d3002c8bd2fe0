"""Optimisers and schedules of every training loop: the two parameter groups (:func:`param_groups`: weight decay on
matrices only), the optimiser of a run (:func:`make_optimizer`: AdamW or LAMB), the cosine schedule with linear
warm-up (:func:`cosine_schedule`), and LAMB itself (:class:`Lamb`).

LAMB (You et al. 2020) as used to pretrain LTG-BERT (``ltgoslo/ltg-bert``, ``babylm/train/lamb.py``;
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

import math
from typing import Any

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


# ----------------------------------------------------------------------------- groups, optimiser, schedule


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups: decay for weight matrices of Linear/Conv layers, none for biases, norms, embeddings.

    Decided by module type, not by a name filter (a name filter is how the reference code missed GPT-Neo's
    ``ln_1``/``wte``/``wpe``). Tied weights are counted once."""
    decay, no_decay, seen = [], [], set()
    norm_types = (torch.nn.LayerNorm, torch.nn.GroupNorm, torch.nn.BatchNorm1d)
    for module in model.modules():
        for pname, p in module.named_parameters(recurse=False):
            if not p.requires_grad or id(p) in seen:
                continue
            seen.add(id(p))
            is_matrix = isinstance(module, (torch.nn.Linear, torch.nn.Conv1d)) and pname == "weight"
            is_embedding = isinstance(module, torch.nn.Embedding)
            if is_matrix and not is_embedding and not isinstance(module, norm_types):
                decay.append(p)
            else:
                no_decay.append(p)
    # a Linear tied to an embedding (lm_head) was seen through the embedding first or later: never decay it
    emb_ids = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    moved = [p for p in decay if id(p) in emb_ids]
    decay = [p for p in decay if id(p) not in emb_ids]
    no_decay += moved
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def param_group_names(model: torch.nn.Module, weight_decay: float = 0.1) -> tuple[list[str], list[str]]:
    """Names of the parameters in the decay and no-decay groups of :func:`param_groups` (for tests/reports)."""
    names = {id(p): n for n, p in model.named_parameters()}
    g = param_groups(model, weight_decay)
    return [names[id(p)] for p in g[0]["params"]], [names[id(p)] for p in g[1]["params"]]


def make_optimizer(model: torch.nn.Module, cfg: Any) -> torch.optim.Optimizer:
    """The optimiser of a run over :func:`param_groups`: ``cfg`` (a :class:`helpers.training.loop.TrainConfig`) gives
    ``optimizer`` (``"adamw"`` or ``"lamb"``), ``lr``, ``betas``, ``eps`` and ``weight_decay``."""
    groups = param_groups(model, cfg.weight_decay)
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
    if cfg.optimizer == "lamb":
        return Lamb(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
    raise ValueError(f"unknown optimizer {cfg.optimizer!r} (adamw or lamb)")


def cosine_schedule(step: int, total: int, warmup: int, min_ratio: float) -> float:
    """LR multiplier: linear warm-up to 1 over ``warmup`` steps, then cosine down to ``min_ratio`` at ``total``."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
