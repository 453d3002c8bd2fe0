"""The runner's per-notebook memory: the peak over a process tree, read from a fake /proc and from real children."""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from helpers.core import process_memory as M


def _fake_proc(tmp_path: Path, procs: dict[int, tuple[int, int]]) -> Path:
    """A /proc with ``{pid: (ppid, rss pages)}``; the command names hold spaces and parentheses, as real ones may."""
    for pid, (ppid, pages) in procs.items():
        d = tmp_path / str(pid)
        d.mkdir()
        rest = ["S", str(ppid)] + ["0"] * 19 + [str(pages)] + ["0"] * 10
        (d / "stat").write_text(f"{pid} (a (weird) name) " + " ".join(rest) + "\n")
        (d / "statm").write_text(f"9999 {pages} 1 0 0 0 0\n")  # one file-backed page each
    (tmp_path / "self").mkdir()  # not a pid: skipped
    return tmp_path


def test_descendants_sum_over_the_whole_tree_but_not_the_root_or_strangers(tmp_path):
    proc = _fake_proc(tmp_path, {1: (0, 100), 10: (1, 5), 11: (10, 7), 12: (11, 11), 13: (10, 2), 99: (1, 1000)})
    table = M.process_table(proc)
    assert table[12] == (11, 11 * M.PAGE)
    total, largest = M.descendants_rss(10, table)
    assert (total, largest) == ((7 + 11 + 2) * M.PAGE, 11 * M.PAGE)
    assert M.descendants_rss(12, table) == (0, 0)  # a leaf has no descendants
    anon = M.process_table(proc, anon=True)
    assert M.descendants_rss(10, anon) == ((6 + 10 + 1) * M.PAGE, 10 * M.PAGE)  # resident minus file-backed


def test_tree_peak_sees_a_child_that_allocates_and_exits():
    child = "import time; b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(1.5)"
    with M.TreePeak(interval=0.05) as mem:
        subprocess.run([sys.executable, "-c", child], check=True)
    if not mem.available:
        pytest.skip("no /proc here")
    assert mem.peak_mib >= 200 and mem.largest_mib >= 200 and mem.peak_anon_mib >= 200  # anonymous memory
    with M.TreePeak(interval=0.05) as mapped:  # a child reading a 200 MB file through a mapping: file pages, not anon
        reader = ("import mmap, sys, time; f = open(sys.argv[1], 'rb'); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); "
                  "s = sum(m[i] for i in range(0, len(m), 4096)); time.sleep(1.5)")
        path = Path(tempfile.mkdtemp()) / "big.bin"
        path.write_bytes(b"\1" * (200 * 2**20))
        subprocess.run([sys.executable, "-c", reader, str(path)], check=True)
    assert mapped.peak_mib >= 200 > mapped.peak_anon_mib + 100
    with M.TreePeak(interval=0.05) as idle:
        pass
    assert idle.peak_mib < 200  # nothing of the first window carried over


def test_no_proc_gives_none(tmp_path):
    with M.TreePeak(proc=tmp_path / "none") as mem:
        pass
    assert mem.peak_mib is None and mem.largest_mib is None and mem.peak_anon_mib is None


def test_heartbeat_file_holds_the_label_and_the_time_so_far_and_goes_when_the_window_closes(tmp_path):
    beat = tmp_path / "reports" / ".attempt-01.json"
    with M.TreePeak(interval=0.02, heartbeat=beat, label={"notebook": "01.ipynb"}, every=0.05) as mem:
        time.sleep(0.3)
        row = json.loads(beat.read_text())
    assert row["notebook"] == "01.ipynb" and 0.05 <= row["seconds"] <= 5 and row["finished"]
    assert set(mem.peaks()) == {k for k in row if k.endswith("_mib")} == {"peak_rss_mib", "peak_anon_mib", "largest_process_mib"}
    assert mem.peaks()["peak_rss_mib"] == mem.peak_mib
    assert not beat.exists()
    with M.TreePeak(proc=tmp_path / "none", heartbeat=beat, label={"notebook": "02.ipynb"}) as mem:  # no /proc
        assert json.loads(beat.read_text())["notebook"] == "02.ipynb"  # written at the start, whatever the sampling
    assert mem.peak_mib is None and not beat.exists()


@pytest.mark.skipif(not Path("/proc/self/status").exists() or sys.platform != "linux", reason="reads /proc (glibc Linux)")
def test_release_freed_memory_gives_a_heap_hole_back():
    """The known answer: 128 MiB of 64 KiB blocks (under glibc's mmap threshold, so on the heap) freed below one block
    still in use is a hole the heap keeps (free() returns only the top); the call gives it back."""
    def rss_mib():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS"))

    blocks = [bytearray(64 * 1024) for _ in range(2048)]
    top = blocks[-1]
    del blocks
    held = rss_mib()
    assert M.release_freed_memory() is True
    assert held - rss_mib() > 64, "the freed hole was not given back"
    assert len(top) == 64 * 1024  # the block above the hole is still there
