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


_NPY_HEADER = 128  # bytes of the .npy header pack_blocks_to_file writes (magic, version, length, dict, padding)


def _npy_header(rows: int, block: int) -> bytes:
    """A version-1.0 ``.npy`` header for an int64 C-order array of ``[rows, block]``, padded to a fixed length so that
    it can be written before the rows are counted and rewritten in place after."""
    d = "{'descr': '<i8', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, block)
    body = _NPY_HEADER - 10
    if len(d) + 1 > body:
        raise ValueError(f"shape ({rows}, {block}) does not fit a {_NPY_HEADER}-byte .npy header")
    return b"\x93NUMPY\x01\x00" + body.to_bytes(2, "little") + d.encode("latin1") + b" " * (body - len(d) - 1) + b"\n"


def pack_blocks_to_file(token_lists: Iterable[Sequence[int]], block: int, path: str | Path,
                        chunk_tokens: int = 1 << 22) -> int:
    """:func:`pack_blocks` written straight into the ``.npy`` file ``path`` as the lists stream in: the ids are copied
    into one int64 buffer of ``chunk_tokens`` ids (32 MB), written out whenever it fills, whatever the corpus's size
    (440M words: ~860M ids, ~7 GB, never in memory at once). Lists of Python ints would take ~36 bytes per id (a
    4M-id buffer of them, ~150 MB, was what grew with the budget before). The same rows as :func:`pack_blocks`
    (tested); returns the number of rows."""
    if block <= 1:
        raise ValueError(f"block length must be > 1, got {block}")
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    path = Path(path)
    total, held = 0, 0
    buf = np.empty(chunk_tokens, dtype="<i8")  # pages are touched only as ids fill them
    with open(path, "wb") as f:
        f.write(_npy_header(0, block))
        for ids in token_lists:
            a = np.asarray(ids, dtype="<i8")
            while len(a):  # a story longer than the room left fills the buffer and goes on in the next
                k = min(len(a), chunk_tokens - held)
                buf[held:held + k] = a[:k]
                held, a = held + k, a[k:]
                if held == chunk_tokens:
                    f.write(buf.data)
                    total, held = total + held, 0
        f.write(buf[:held].data)
        total += held
        rows = total // block
        if rows == 0:
            raise ValueError(f"only {total} tokens: not enough for one block of {block}")
        f.truncate(_NPY_HEADER + rows * block * 8)  # the remainder is dropped, as pack_blocks drops it
        f.seek(0)
        f.write(_npy_header(rows, block))
    return rows


def cached_blocks(path: str | Path, fp: str, make: Callable[[], "torch.Tensor | Iterable[Sequence[int]]"],
                  name: str = "blocks", log: Callable[[str], None] = print, block: int | None = None) -> "torch.Tensor":
    """The blocks ``make()`` packs, saved once as ``path`` (``.npy``, int64, atomically; stamped with ``fp``, the
    inputs' fingerprint) and returned memory-mapped (copy-on-write): a rerun reads no corpus and tokenises nothing,
    and the rows are paged in as batches touch them instead of being held in memory (the paper profile's budgets are
    ~860M token ids, ~7 GB as int64). The ids are the same as ``make()``'s, so digests of them do not change.
    With ``block``, ``make()`` returns the token lists instead (e.g. :func:`helpers.data.tokenizers.iter_story_ids`
    over a streamed corpus), packed into the file as they come (:func:`pack_blocks_to_file`): the first run holds
    no whole budget in memory either."""
    path = Path(path)

    def write() -> None:
        with atomic_path(path, suffix=".npy") as tmp:
            if block is not None:
                pack_blocks_to_file(make(), block, tmp)
            else:
                np.save(tmp, np.ascontiguousarray(make().numpy(), dtype=np.int64))

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
