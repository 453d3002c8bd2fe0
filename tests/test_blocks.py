"""Packed blocks written as they stream (helpers.data.blocks.pack_blocks_to_file): the rows of pack_blocks, a valid
.npy file, and (marker ``scale``) a peak memory that does not grow with the corpus."""
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from helpers.data.blocks import cached_blocks, pack_blocks, pack_blocks_to_file


def _lists(seed: int, n: int):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 5000, size=int(k)).tolist() for k in rng.integers(0, 40, size=n)]


@pytest.mark.parametrize("block,chunk", [(2, 1), (8, 7), (16, 1 << 22), (33, 50)])
def test_streamed_rows_equal_pack_blocks(tmp_path, block, chunk):
    lists = _lists(block, 300)
    rows = pack_blocks_to_file(iter(lists), block, tmp_path / "b.npy", chunk_tokens=chunk)
    got = np.load(tmp_path / "b.npy", mmap_mode="r")
    want = pack_blocks(lists, block)
    assert rows == len(want) and got.shape == tuple(want.shape) and got.dtype == np.int64
    assert torch.equal(torch.from_numpy(np.array(got)), want)
    assert (tmp_path / "b.npy").stat().st_size == 128 + rows * block * 8  # the remainder is dropped


def test_streamed_packing_refuses_what_pack_blocks_refuses(tmp_path):
    with pytest.raises(ValueError, match="not enough for one block"):
        pack_blocks_to_file(iter([[1, 2], [3]]), 4, tmp_path / "b.npy")
    with pytest.raises(ValueError, match="block length"):
        pack_blocks_to_file(iter([[1, 2]]), 1, tmp_path / "c.npy")


def test_cached_blocks_streams_the_same_ids(tmp_path):
    lists = _lists(3, 200)
    a = cached_blocks(tmp_path / "a.npy", "fp", lambda: pack_blocks(lists, 16), log=lambda s: None)
    b = cached_blocks(tmp_path / "b.npy", "fp", lambda: iter(lists), log=lambda s: None, block=16)
    assert torch.equal(a, b)
    again = cached_blocks(tmp_path / "b.npy", "fp", lambda: pytest.fail("repacked"), log=lambda s: None, block=16)
    assert torch.equal(again, b)  # a finished file is reused, not rebuilt


MEASURE = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    from helpers.data.blocks import pack_blocks, pack_blocks_to_file
    tokens, streamed, out = int(sys.argv[1]), sys.argv[2] == "stream", sys.argv[3]
    piece = np.arange(1000, dtype=np.int64).tolist()
    lists = (piece for _ in range(tokens // 1000))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if streamed:
        pack_blocks_to_file(lists, 256, out)
    else:
        np.save(out, pack_blocks(lists, 256).numpy())
    print(json.dumps({"grown_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024}))
""")


@pytest.mark.scale
def test_streamed_packing_memory_does_not_grow_with_the_corpus(tmp_path):
    """40M token ids (320 MB as int64): packed in memory the peak grows by about that or more; streamed into the
    file it stays within the chunk (32 MB) and Python's overhead, under 80 MiB and under half the baseline's."""
    def grown(mode: str) -> float:
        out = subprocess.run([sys.executable, "-c", MEASURE, str(40_000_000), mode, str(tmp_path / f"{mode}.npy")],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])["grown_mib"]

    streamed, whole = grown("stream"), grown("memory")
    # the baseline holds at least the 305 MiB of ids once (how much more depends on the allocator's reuse)
    assert whole > 150, f"the in-memory baseline grew only {whole:.0f} MiB: the measure cannot see the difference"
    assert streamed < 80 and streamed < whole / 2, f"streamed packing grew the peak by {streamed:.0f} MiB for 40M ids"
    assert np.array_equal(np.load(tmp_path / "stream.npy", mmap_mode="r")[-3:], np.load(tmp_path / "memory.npy")[-3:])
