"""A tiny GPT-Neo training run for tests/test_training.py, run as a subprocess (killed mid-run) or under
``python -m torch.distributed.run --nproc_per_node 2`` (DDP on CPU with gloo).

Importable: the tests build the same model, data and config in-process for the reference runs.

    python tests/train_worker.py OUT [--steps N] [--save-every K] [--dropout P] [--sleep S] [--dump FILE]

``--dump`` writes this rank's final state dict to ``FILE`` (``{rank}`` is replaced by the rank).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

try:
    import helpers  # noqa: F401  (the editable install, or whatever PYTHONPATH points at)
except ImportError:  # a checkout without the editable install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from helpers.data.blocks import PackedBlocks, pack_blocks  # noqa: E402
from helpers.models.decoder import build_decoder  # noqa: E402
from helpers.training.loop import TrainConfig, lm_loss, train  # noqa: E402

VOCAB, BLOCK = 61, 32
THREADS = 1  # same thread count in every process: bitwise comparisons across processes


def make_model(dropout: float = 0.1, seed: int = 0):
    spec = dict(hidden=32, layers=2, heads=4, context=BLOCK, window=8, vocab_size=VOCAB, dropout=dropout)
    return build_decoder(spec, seed=seed, bos_token_id=0, eos_token_id=0, pad_token_id=0)


def make_data(seed: int = 0) -> tuple[PackedBlocks, PackedBlocks]:
    """Learnable synthetic 'stories': noisy counting sequences closed by token 0 (end of text)."""
    g = torch.Generator().manual_seed(seed)
    stories = []
    for _ in range(160):
        n = int(torch.randint(6, 30, (1,), generator=g))
        start = int(torch.randint(1, VOCAB, (1,), generator=g))
        seq = [(start + i) % (VOCAB - 1) + 1 for i in range(n)]
        noise = torch.rand(n, generator=g) < 0.1
        seq = [int(torch.randint(1, VOCAB, (1,), generator=g)) if z else t for t, z in zip(seq, noise.tolist())]
        stories.append(seq + [0])
    blocks = pack_blocks(stories, BLOCK)
    return PackedBlocks(blocks[:-6], seed=7), PackedBlocks(blocks[-6:], seed=7)


def make_config(steps: int = 60, save_every: int = 5, **kw) -> TrainConfig:
    base = dict(steps=steps, batch_size=8, lr=3e-3, min_lr=3e-4, warmup=5, weight_decay=0.1, grad_clip=1.0,
                eval_every=10, save_every=save_every, log_every=1, seed=3,
                device="cpu")  # bitwise comparisons and DDP over gloo are CPU promises, also on a machine with a GPU
    return TrainConfig(**{**base, **kw})


def slow_loss(delay: float):
    """lm_loss that also sleeps (so a test can kill the process mid-run); numerics unchanged."""

    def loss_fn(model, batch):
        if delay and model.training:
            time.sleep(delay)
        return lm_loss(model, batch)

    return loss_fn


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--save-every", type=int, default=5)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--dump", default=None)
    a = ap.parse_args(argv)
    torch.set_num_threads(THREADS)
    model = make_model(a.dropout)
    train_data, valid_data = make_data()
    cfg = make_config(a.steps, a.save_every)
    train(model, train_data, valid_data, a.out, cfg, loss_fn=slow_loss(a.sleep), progress=False)
    rank = int(os.environ.get("RANK", "0"))
    if a.dump:
        torch.save({k: v.clone() for k, v in model.state_dict().items()}, a.dump.format(rank=rank))
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
