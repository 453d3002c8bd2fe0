"""Token blocks, the models' inputs: token lists packed into fixed-length rows (:func:`pack_blocks`), kept on disk
and memory-mapped (:func:`cached_blocks`), and read in a deterministic, resumable batch order (:class:`PackedBlocks`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import torch

from helpers.core.artifacts import atomic_path, run_step
from helpers.core.seeding import generator


def pack_blocks(token_lists: Iterable[Sequence[int]], block: int) -> "torch.Tensor":
    """Concatenate token lists and cut the stream into ``[n, block]`` rows (the remainder is dropped). The lists are
    read once, in order: a generator (:func:`helpers.data.tokenizers.iter_story_ids`) streams them, so only the packed
    ids are held."""
    if block <= 1:
        raise ValueError(f"block length must be > 1, got {block}")
    flat = np.fromiter((t for ids in token_lists for t in ids), dtype=np.int64)
    n = len(flat) // block
    if n == 0:
        raise ValueError(f"only {len(flat)} tokens: not enough for one block of {block}")
    return torch.from_numpy(flat[: n * block].reshape(n, block).copy())


def cached_blocks(path: str | Path, fp: str, make: Callable[[], "torch.Tensor"], name: str = "blocks",
                  log: Callable[[str], None] = print) -> "torch.Tensor":
    """The blocks ``make()`` packs, saved once as ``path`` (``.npy``, int64, atomically; stamped with ``fp``, the
    inputs' fingerprint) and returned memory-mapped (copy-on-write): a rerun reads no corpus and tokenises nothing,
    and the rows are paged in as batches touch them instead of being held in memory (the paper profile's budgets are
    ~860M token ids, ~7 GB as int64). The ids are the same as ``make()``'s, so digests of them do not change."""
    path = Path(path)

    def write() -> None:
        blocks = make()
        with atomic_path(path, suffix=".npy") as tmp:
            np.save(tmp, np.ascontiguousarray(blocks.numpy(), dtype=np.int64))

    run_step(name, path, fp, write, log=log)
    return torch.from_numpy(np.load(path, mmap_mode="c"))


class PackedBlocks:
    """Fixed-length blocks with a deterministic, resumable batch order.

    ``batch(step, size, rank, world)`` returns the rows of global batch ``step`` that belong to ``rank``: the
    global batch is ``size`` consecutive entries of an endless sequence of per-epoch permutations."""

    def __init__(self, blocks: "torch.Tensor", seed: int = 0):
        if blocks.ndim != 2 or len(blocks) == 0:
            raise ValueError("blocks must be a non-empty [n, length] tensor")
        self.blocks, self.seed = blocks, seed
        self._perms: dict = {}

    def __len__(self) -> int:
        return len(self.blocks)

    @property
    def tokens(self) -> int:
        return self.blocks.numel()

    def _perm(self, epoch: int) -> "torch.Tensor":
        if epoch not in self._perms:
            g = generator(self.seed * 1_000_003 + epoch)
            self._perms = {epoch: torch.randperm(len(self.blocks), generator=g)}
        return self._perms[epoch]

    def indices(self, step: int, size: int) -> list[int]:
        n = len(self.blocks)
        out = []
        for pos in range(step * size, (step + 1) * size):
            out.append(int(self._perm(pos // n)[pos % n]))
        return out

    def batch(self, step: int, size: int, rank: int = 0, world: int = 1) -> dict:
        if size % world:
            raise ValueError(f"global batch {size} is not divisible by {world} processes")
        idx = self.indices(step, size)
        per = size // world
        return {"input_ids": self.blocks[idx[rank * per : (rank + 1) * per]]}

    def epochs(self, steps: int, size: int) -> float:
        return steps * size / len(self.blocks)

    def eval_batches(self, size: int):
        for i in range(0, len(self.blocks), size):
            yield {"input_ids": self.blocks[i : i + size]}
