"""Peak memory of a process tree, sampled from ``/proc``: the runner's notebook kernel and every worker process it
starts (encoders, memorisation shards, fine-tuning), which ``getrusage`` cannot see while they run.

    with TreePeak() as mem:        # samples every descendant of this process twice a second
        run_the_notebook()
    mem.peak_mib, mem.largest_mib  # the largest sum over the tree, and the largest single process (MiB)

The sum counts pages that forked processes share once per process, so it is an upper bound on the tree's memory;
``largest_mib`` is the largest one process held. Where there is no ``/proc`` (macOS, Windows) both stay ``None``.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def process_table(proc: Path = Path("/proc")) -> dict[int, tuple[int, int]]:
    """``{pid: (parent pid, RSS bytes)}`` of every process readable under ``proc`` (empty where there is none)."""
    out = {}
    try:
        entries = list(proc.iterdir())
    except OSError:
        return out
    for d in entries:
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:  # gone between the listing and the read
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state, ppid, ..., rss is field 24 of stat
        try:
            out[int(d.name)] = (int(fields[1]), int(fields[21]) * PAGE)
        except (IndexError, ValueError):
            continue
    return out


def descendants_rss(root: int, table: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(sum of RSS, largest RSS) over the processes below ``root`` in ``table`` (``root`` itself excluded)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total = largest = 0
    todo = list(children.get(root, []))
    seen = set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        rss = table[pid][1]
        total, largest = total + rss, max(largest, rss)
        todo += children.get(pid, [])
    return total, largest


class TreePeak:
    """A context manager sampling the memory of this process's descendants every ``interval`` seconds in a thread."""

    def __init__(self, root: int | None = None, interval: float = 0.5, proc: Path = Path("/proc")):
        self.root, self.interval, self.proc = root or os.getpid(), interval, proc
        self.available = (proc / str(self.root) / "stat").exists()
        self._peak = self._largest = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="storybench-memory")

    def sample(self) -> None:
        total, largest = descendants_rss(self.root, process_table(self.proc))
        self._peak, self._largest = max(self._peak, total), max(self._largest, largest)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> "TreePeak":
        if self.available:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.available:
            self._stop.set()
            self._thread.join()
            self.sample()

    @property
    def peak_mib(self) -> int | None:
        return round(self._peak / 2**20) if self.available else None

    @property
    def largest_mib(self) -> int | None:
        return round(self._largest / 2**20) if self.available else None
