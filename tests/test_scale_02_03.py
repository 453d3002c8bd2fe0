"""Notebooks 02 and 03 must not hold a budget's derived data in memory: packing a budget into blocks (02) and
memorisation's n-gram indexes (03) run on generated budgets of two sizes (``benchmarks/scale_02_03.py``, in
subprocesses) and the peak RSS may grow by less than 4 bytes per byte of corpus added for the packing (its 32 MB
buffer fills up to the larger size) and 1 byte per byte for memorisation (03 reads the stories from disk; holding
them as rows takes ~2 bytes per byte). Tokenising a whole budget in one call grows by ~150 bytes per token, and
unsharded indexes by ~154 bytes per word: both fail by a wide margin.

Deselect with ``-m "not scale"`` (about two minutes on two idle cores)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "scale_02_03.py"
SMALL, LARGE = 500_000, 3_000_000
BYTES_PER_BYTE = {"pack": 4.0, "memorisation": 1.0}


def run_step(step: str, words: int, folder: Path) -> dict:
    env = {**os.environ, "MPLBACKEND": "Agg", "TOKENIZERS_PARALLELISM": "false"}
    res = subprocess.run([sys.executable, str(SCRIPT), "--step", step, "--words", str(words), "--dir", str(folder),
                          "--shard-words", "300000", "--json"], cwd=SCRIPT.parents[1], env=env, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.scale
@pytest.mark.slow
@pytest.mark.parametrize("step", ["pack", "memorisation"])
def test_memory_of_02_and_03_does_not_grow_with_the_budget(step, tmp_path):
    small = run_step(step, SMALL, tmp_path / "small")
    large = run_step(step, LARGE, tmp_path / "large")
    added = large["corpus_bytes"] - small["corpus_bytes"]
    grown = (large["peak_rss_mib"] - small["peak_rss_mib"]) * 2**20
    detail = (f"{step}: peak RSS {small['peak_rss_mib']} MiB at {SMALL:,} words, {large['peak_rss_mib']} MiB at "
              f"{LARGE:,} (+{grown / 2**20:.0f} MiB for +{added / 2**20:.0f} MiB of stories)")
    assert added > 10 * 2**20, detail
    assert grown < BYTES_PER_BYTE[step] * added, "memory grows with the budget: " + detail
    if step == "pack":  # every story packed: ~1.2 tokens per word in rows of 128
        assert large["rows"] > 0.9 * LARGE / 128, large
    else:  # the "completions" copy the second half of a training story: every one is found, whatever the shards
        assert large["exact copies"] == 4, large
