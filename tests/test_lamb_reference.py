"""helpers.training.optim.Lamb against a reference over 100 steps: a line-by-line NumPy (float64) transcription of
the LTG-BERT LAMB formulas in optim.py's docstring (``ltgoslo/ltg-bert``, ``babylm/train/lamb.py``), on a small model
with both parameter groups of :func:`helpers.training.optim.param_groups`, under a warm-up + cosine schedule.

Why not a third-party LAMB: ``pytorch_optimizer.Lamb`` (4.1) cannot be configured to these semantics. Its
trust ratio can be switched off per group (``adam=True``) and its decay put inside the ratio
(``weight_decouple=False``), but the second moment is never bias-corrected (``adam_debias`` only rescales the step
by the first moment's correction), ``‖w‖`` is clamped at 10 and the ratio is ``‖w‖ / (‖u‖ + ε)``; each of these
changes the trajectory. torch has no LAMB. So the reference is the transcription below, written from the formulas,
not from our code (no in-place tricks, no ``torch.where``; per-tensor norms; ε outside the root)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.training.optim import Lamb, cosine_schedule, param_groups

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py
STEPS = 100
LR, BETAS, EPS, WD = 1e-2, (0.9, 0.98), 1e-6, 0.1  # the LTG-BERT pretraining setting (docs/methods.md)


class Tiny(torch.nn.Module):
    """Embedding, Linear + bias, LayerNorm, a Linear head: decay on the two matrices, none on the rest; one matrix
    starts at zero (‖w‖ = 0: ratio 1 on the first step)."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 6)
        self.lin = torch.nn.Linear(6, 8)
        self.norm = torch.nn.LayerNorm(8)
        self.zero = torch.nn.Linear(8, 8, bias=False)
        self.head = torch.nn.Linear(8, 3)
        torch.nn.init.zeros_(self.zero.weight)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.norm(self.lin(self.emb(ids).mean(1))))
        return self.head(h + self.zero(h))


def reference_step(w: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, t: int, lr: float, wd: float):
    """One LAMB step of one tensor, as written in optim.py's docstring (float64 NumPy); returns (w, m, v)."""
    b1, b2 = BETAS
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat = m / (1 - b1 ** t)
    v_hat = v / (1 - b2 ** t)
    u = m_hat / (np.sqrt(v_hat) + EPS)
    if wd > 0:
        u = u + wd * w
        w_norm, u_norm = np.sqrt(np.sum(w * w)), np.sqrt(np.sum(u * u))
        r = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
    else:
        r = 1.0
    return w - lr * r * u, m, v


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1000 + step)
    return torch.randint(0, 11, (16, 5), generator=gen), torch.randint(0, 3, (16,), generator=gen)


def gradients(model: torch.nn.Module, step: int) -> None:
    ids, y = batch(step)
    model.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(ids), y).backward()


def test_lamb_follows_the_reference_for_100_steps_in_both_groups():
    torch.manual_seed(0)
    ours = Tiny().double()
    ref_model = Tiny().double()  # the reference's parameters live in NumPy; this model only computes gradients
    ref_model.load_state_dict(ours.state_dict())
    groups = param_groups(ours, WD)
    decay_ids = {id(p) for p in groups[0]["params"]}
    names = {id(p): n for n, p in ours.named_parameters()}
    assert {names[i] for i in decay_ids} == {"lin.weight", "zero.weight", "head.weight"}  # both groups are used
    opt = Lamb(groups, lr=LR, betas=BETAS, eps=EPS)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: cosine_schedule(s, STEPS, 10, 0.1))

    ref = {n: p.detach().numpy().copy() for n, p in ref_model.named_parameters()}
    start = {n: p.detach().clone() for n, p in ours.named_parameters()}
    state = {n: (np.zeros_like(w), np.zeros_like(w)) for n, w in ref.items()}
    wd = {names[id(p)]: WD if id(p) in decay_ids else 0.0 for p in ours.parameters()}
    worst = 0.0
    for step in range(STEPS):
        lr = LR * cosine_schedule(step, STEPS, 10, 0.1)
        assert opt.param_groups[0]["lr"] == pytest.approx(lr, rel=1e-15)
        gradients(ours, step)
        opt.step()
        sched.step()
        with torch.no_grad():  # the reference's gradients at the reference's own parameters
            for n, p in ref_model.named_parameters():
                p.copy_(torch.from_numpy(ref[n]))
        gradients(ref_model, step)
        grads = {n: p.grad.numpy() for n, p in ref_model.named_parameters()}
        for n in ref:
            m, v = state[n]
            ref[n], m, v = reference_step(ref[n], grads[n], m, v, step + 1, lr, wd[n])
            state[n] = (m, v)
        for n, p in ours.named_parameters():
            diff = np.abs(p.detach().numpy() - ref[n]).max() / max(1.0, np.abs(ref[n]).max())
            worst = max(worst, diff)
        assert worst < 1e-12, f"step {step + 1}: ours departs from the reference by {worst:.2e}"
    # the run did something in both groups: every tensor moved, the zero matrix left zero
    for n, p in ours.named_parameters():
        assert not torch.allclose(p, start[n]), n
    assert float(ours.zero.weight.detach().abs().max()) > 0


def test_the_trust_ratio_matters_where_the_reference_applies_it():
    """The reference is not vacuous: without the trust ratio in the decay group (plain Adam + decay, as a no-decay
    group steps) the same 100 steps end elsewhere."""
    torch.manual_seed(0)
    model = Tiny().double()
    w0 = model.lin.weight.detach().numpy().copy()
    w, m, v = w0.copy(), np.zeros_like(w0), np.zeros_like(w0)
    adam = w0.copy()
    ma, va = np.zeros_like(w0), np.zeros_like(w0)
    rng = np.random.default_rng(0)
    for t in range(1, STEPS + 1):
        g = rng.normal(size=w0.shape)
        w, m, v = reference_step(w, g, m, v, t, LR, WD)
        b1, b2 = BETAS
        ma, va = b1 * ma + (1 - b1) * g, b2 * va + (1 - b2) * g * g
        adam = adam - LR * ((ma / (1 - b1 ** t)) / (np.sqrt(va / (1 - b2 ** t)) + EPS) + WD * adam)
    assert np.abs(w - adam).max() > 1e-3
