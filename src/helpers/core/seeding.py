"""Seeds: :func:`seed_everything`, the one global seeding (Python's ``random``, NumPy's global generator and torch
on every device, together), and :func:`generator`, a private torch generator for draws that must not touch the
global streams (batch orders, sampling, resampling). Nothing in ``helpers`` draws from Python's or NumPy's global
generator (seeded code passes a ``random.Random`` or ``numpy.random.default_rng`` of its own), so seeding all three
where torch alone was seeded before changes no number."""
from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global generator (with ``seed`` modulo 2**32, the range it accepts) and
    torch's default generators on every device (``torch.manual_seed``), before a model is initialised or trained."""
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def generator(seed: int) -> torch.Generator:
    """A private CPU ``torch.Generator`` seeded with ``seed``: its draws depend on ``seed`` only and leave the global
    streams (and so every other draw) untouched."""
    return torch.Generator().manual_seed(int(seed))
