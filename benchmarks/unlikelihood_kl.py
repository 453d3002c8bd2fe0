"""Prototype: the repetition phase with a KL term that holds the model near its plain starting point.

    .venv/bin/python benchmarks/unlikelihood_kl.py --beta 0.5 --threads 1 --name kl0.5-steps300 \
        --set steps=300 --set probe_every=50

Everything after ``--beta`` goes to ``benchmarks/unlikelihood.py`` (same folders, same scoring). The phase's loss
gains ``beta * KL(p_plain || p_model)``: for every position of each step's greedy rollouts that predicts a
continuation token, the full-vocabulary KL divergence from the plain decoder (the source recipe's ``best/``, frozen)
to the model being tuned, averaged over those positions. Unlikelihood moves probability from repeated tokens into the
tail of the distribution, which collapses the phase after ~150 steps and spoils sampling
(``benchmarks/sampling.py``); the KL term pulls the distribution back towards the plain one.

This is a prototype, not an option of the phase: it wraps
``helpers.training.unlikelihood.unlikelihood_loss`` for this process only and costs one extra forward pass of each
model per step. The model's own forward is run twice, once inside the wrapped loss and once for the KL.
"""
from __future__ import annotations

import argparse

import torch

import _common  # noqa: F401,E402  (first: puts src/ on sys.path in a checkout without the editable install)

from helpers.core import config  # noqa: E402
from helpers.training import unlikelihood as U  # noqa: E402
from helpers.models.decoder import load_decoder  # noqa: E402
import unlikelihood as phase_benchmark  # noqa: E402  (benchmarks/unlikelihood.py)
from recipe import recipe_dir  # noqa: E402


def with_kl(loss_fn, reference, beta: float):
    """``loss_fn`` (:func:`helpers.training.unlikelihood.unlikelihood_loss`) plus ``beta`` times the mean KL
    divergence from ``reference`` to the model at the positions that predict continuation tokens."""
    def loss(model, prompts, continuations, n, pad_id):
        ul, count = loss_fn(model, prompts, continuations, n, pad_id)
        seqs = [list(p) + list(c) for p, c in zip(prompts, continuations)]
        ids = torch.full((len(seqs), max(len(s) for s in seqs)), pad_id, dtype=torch.long)
        predicts = torch.zeros(ids.shape, dtype=torch.bool)
        for r, (p, s) in enumerate(zip(prompts, seqs)):
            ids[r, : len(s)] = torch.tensor(s)
            predicts[r, len(p) - 1 : len(s) - 1] = True  # position t predicts token t + 1
        with torch.no_grad():
            ref = torch.log_softmax(reference(input_ids=ids).logits.float(), -1)[predicts]
        cur = torch.log_softmax(model(input_ids=ids).logits.float(), -1)[predicts]
        return ul + beta * (ref.exp() * (ref - cur)).sum(-1).mean(), count
    return loss


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--beta", type=float, required=True, help="weight of the KL term")
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--budget", default="tiny-1M")
    ap.add_argument("--source", default="profile")
    a, rest = ap.parse_known_args(argv)
    if a.beta < 0:
        raise SystemExit("--beta must be >= 0")
    src = recipe_dir(a.profile, a.budget, a.source) / "best"
    if not src.is_dir():
        raise SystemExit(f"no plain decoder in {config.shown_path(src)}: run benchmarks/recipe.py --recipes {a.source}")
    reference = load_decoder(src).eval().requires_grad_(False)
    U.unlikelihood_loss = with_kl(U.unlikelihood_loss, reference, a.beta)
    phase_benchmark.main(["--profile", a.profile, "--budget", a.budget, "--source", a.source, *rest])


if __name__ == "__main__":
    main()
