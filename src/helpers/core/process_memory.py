"""Peak memory of a process tree, sampled from ``/proc``: the runner's notebook kernel and every worker process it
starts (encoders, memorisation shards, fine-tuning), which ``getrusage`` cannot see while they run.

    with TreePeak() as mem:        # samples every descendant of this process twice a second
        run_the_notebook()
    mem.peak_mib, mem.largest_mib  # the largest sum over the tree, and the largest single process (MiB)
    mem.peak_anon_mib              # the same sum over anonymous pages only (what the kernel cannot drop)

The sum counts pages that forked processes share once per process, so it is an upper bound on the tree's memory;
``largest_mib`` is the largest one process held. RSS also counts the pages of memory-mapped files a process has read
(notebook 02 reads its packed blocks, ~4 GB at 110M words, to fingerprint them): those are page cache, dropped
under memory pressure, so ``peak_anon_mib`` (resident minus file-backed pages, from ``statm``) is the memory a run
needs. Where there is no ``/proc`` (macOS, Windows) all stay ``None``.

With ``heartbeat`` (a path) it also writes what it knows so far, ``label`` plus the seconds since it started and the
peaks, to that JSON file every ``every`` seconds, and deletes the file when the window closes: a file left behind is
an attempt whose process was killed without running its ``finally`` (SIGKILL, a session's end, the machine lost),
which :func:`helpers.report.run_history.start_attempt` records as ``killed`` instead of losing its time.
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from pathlib import Path

from helpers.core.artifacts import write_json

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_LIBC: object = None  # glibc, loaded on first use (False where there is none)


def release_freed_memory() -> bool:
    """Give the memory the C heap holds free back to the system (glibc's ``malloc_trim(0)``); False where there is
    no glibc (macOS, Windows, musl), a no-op there.

    Tensors on the CPU come from the C allocator, which keeps what they free for later: a training process's resident
    memory grows with its steps (the LTG-BERT ``cpu`` preset, 32 × 128 tokens, one thread: 2,402 MiB after 300 steps
    from 427 before; ``benchmarks/heap_trim.py`` on an AMD EPYC Zen 3). The training loop calls this after each
    evaluation and :func:`helpers.core.parallel.run_jobs` after each job of a worker process; every 50 steps it left a
    peak of 1,587 MiB (0.66×) and 467 MiB at the end, in the same time (1.00×), with the same losses."""
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL("libc.so.6")
            _LIBC.malloc_trim  # noqa: B018 - present in glibc only
        except (OSError, AttributeError):
            _LIBC = False
    if not _LIBC:
        return False
    _LIBC.malloc_trim(0)
    return True


def process_table(proc: Path = Path("/proc"), anon: bool = False) -> dict[int, tuple[int, int]]:
    """``{pid: (parent pid, RSS bytes)}`` of every process readable under ``proc`` (empty where there is none);
    ``anon``: the resident pages that are not file-backed (``statm``'s resident minus shared) instead of all."""
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
            rss = int(fields[21])
            if anon:
                resident, shared = (int(x) for x in (d / "statm").read_text().split()[1:3])
                rss = resident - shared
            out[int(d.name)] = (int(fields[1]), rss * PAGE)
        except (IndexError, ValueError, OSError):
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

    def __init__(self, root: int | None = None, interval: float = 0.5, proc: Path = Path("/proc"),
                 heartbeat: Path | None = None, label: dict | None = None, every: float = 30.0):
        self.root, self.interval, self.proc = root or os.getpid(), interval, proc
        self.available = (proc / str(self.root) / "stat").exists()
        self._peak = self._largest = self._anon = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="storybench-memory")
        self.heartbeat, self.label, self.every = heartbeat, dict(label or {}), every
        self._t0 = self._beat = time.time()

    def beat(self) -> None:
        """Write the heartbeat file now: ``label``, the seconds so far, the peaks and when (see the module's text)."""
        if self.heartbeat is not None:
            self._beat = time.time()
            write_json(self.heartbeat, {**self.label, "seconds": round(self._beat - self._t0, 1), **self.peaks(),
                                        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._beat))})

    def peaks(self) -> dict[str, int | None]:
        """The peaks as a history row names them: all resident, anonymous, the largest one process (MiB; None
        without ``/proc``)."""
        return {"peak_rss_mib": self.peak_mib, "peak_anon_mib": self.peak_anon_mib, "largest_process_mib": self.largest_mib}

    def sample(self) -> None:
        total, largest = descendants_rss(self.root, process_table(self.proc))
        anon, _ = descendants_rss(self.root, process_table(self.proc, anon=True))
        self._peak, self._largest, self._anon = max(self._peak, total), max(self._largest, largest), max(self._anon, anon)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()
            if time.time() - self._beat >= self.every:
                self.beat()

    def __enter__(self) -> "TreePeak":
        self._t0 = time.time()
        self.beat()
        if self.available or self.heartbeat is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()
        if self.available:
            self.sample()
        if self.heartbeat is not None:
            self.heartbeat.unlink(missing_ok=True)

    @property
    def peak_mib(self) -> int | None:
        return round(self._peak / 2**20) if self.available else None

    @property
    def peak_anon_mib(self) -> int | None:
        return round(self._anon / 2**20) if self.available else None

    @property
    def largest_mib(self) -> int | None:
        return round(self._largest / 2**20) if self.available else None
