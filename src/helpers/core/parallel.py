"""Independent jobs (encoders, fine-tuning runs, sweep models) in worker processes with a share of the CPU each.

The study's models are small (hidden 64-256): one process does not keep two cores busy with them, so two
one-thread processes can do more work than one two-thread process. ``benchmarks/parallel_jobs.py`` measures it on the
machine at hand; on an AMD EPYC (Zen 4, AVX512-BF16), 2 cores, bf16: LTG-BERT cpu preset 1.19× (2 jobs × 60 steps),
GPT-Neo cpu decoder 0.97× (its 4,096-row matmuls already use both threads), so notebook 02 keeps its decoders in
one process while 02b, 04 and 05 use workers.

:func:`run_jobs` runs ``fn(**kwargs)`` for every job, in the calling process when one worker is asked for (or
there is one job), else in a pool of ``spawn`` processes with ``threads // workers`` torch threads each. A last job
that would run alone in the pool (5 jobs on 2 workers: rounds of 2, 2 and 1) runs instead in the calling process
with all ``threads`` once the pool is done, rather than on one thread beside an idle core. What a
worker prints comes back to the caller line by line, prefixed with the job's name, so an executed notebook keeps
its logs; an error in a job stops the pool and is raised in the caller with the job's name, and so does a worker
process that dies (killed, out of memory), whose job the pool would otherwise drop while the caller waits. Every job
the study runs this way writes its result atomically and skips itself when finished, so an interrupted pool loses at most
the runs in flight, which resume from their last checkpoint.
"""
from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import queue as _queue
import sys
import time
import traceback
from typing import Any, Callable, Mapping, Sequence

from helpers.core.process_memory import release_freed_memory
from helpers.core.progress import progress

_TAG = ""  # the name of the job a worker runs (prefix of what it prints)


class JobError(RuntimeError):
    """A job failed in a worker process (its traceback is in the message)."""


def visible_gpus() -> list[str]:
    """The GPUs independent jobs may be spread over, as ``CUDA_VISIBLE_DEVICES`` entries: ``$STORYBENCH_GPUS`` (a
    comma-separated list: pins the jobs to some GPUs, or simulates a device list where there is none, as the tests
    do), else this process's ``CUDA_VISIBLE_DEVICES``, else every CUDA device torch sees; ``[]`` without CUDA."""
    pinned = os.environ.get("STORYBENCH_GPUS", "").strip()
    if pinned:
        return [d.strip() for d in pinned.split(",") if d.strip()]
    import torch

    if not torch.cuda.is_available():
        return []
    listed = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if listed:
        return [d.strip() for d in listed.split(",") if d.strip()][: torch.cuda.device_count()]
    return [str(i) for i in range(torch.cuda.device_count())]


def resolve_workers(workers: int | str, jobs: int, threads: int | None = None, device: str | None = None,
                    gpus: Sequence[str] | None = None) -> int:
    """How many processes run ``jobs`` jobs: ``"auto"`` is one per CPU thread the notebook was given (``threads``,
    default ``os.cpu_count()``), one per GPU on a GPU machine (``device`` ``"cuda…"`` or CUDA available; ``gpus``,
    default :func:`visible_gpus`: a 4-GPU node trains four models at once); never more than ``jobs``."""
    if isinstance(workers, str):
        if workers != "auto":
            raise ValueError(f"workers must be a whole number ≥ 1 or 'auto', not {workers!r}")
        if device is None:
            from helpers.core.hardware import compute_device  # imports torch, so not in the header

            device = compute_device("auto").type
        if str(device).startswith("cuda"):
            n = max(1, len(visible_gpus() if gpus is None else gpus))
        else:
            n = threads or os.cpu_count() or 1
    else:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be a whole number ≥ 1 or 'auto', not {workers!r}")
        n = workers
    return max(1, min(n, jobs))


def plan_jobs(workers: int | str, names: Sequence[str], threads: int, lone_tail_in_caller: bool = True,
              device: str | None = None, gpus: Sequence[str] | None = None) -> tuple[int, int, list[str]]:
    """How :func:`run_jobs` runs the jobs ``names`` on ``threads`` threads: ``(processes, threads each, tail)``;
    ``tail`` is the job (at most one) left after full rounds, run afterwards in the caller with all the threads (on
    the CPU only: with GPUs every job keeps a GPU of its own)."""
    n = resolve_workers(workers, len(names), threads, device, gpus)
    if n <= 1:
        return 1, threads, []
    each = max(1, threads // n)
    tail = list(names[-1:]) if (lone_tail_in_caller and not gpus and len(names) > n and len(names) % n == 1
                                and threads > each) else []
    return n, each, tail


def describe_jobs(workers: int | str, names: Sequence[str], threads: int, lone_tail_in_caller: bool = True,
                  device: str | None = None, gpus: Sequence[str] | None = None) -> str:
    """:func:`plan_jobs` in words, for a table's timing column: its minutes depend on how the runs shared the CPU."""
    n, each, tail = plan_jobs(workers, names, threads, lone_tail_in_caller, device, gpus)
    if n <= 1:
        return f"one at a time, {threads} thread(s)"
    where = f"one GPU each ({', '.join(list(gpus)[:n])})" if gpus else f"{each} thread(s) each"
    return (f"{n} processes side by side, {where}"
            + (f"; {tail[0]} alone afterwards with {threads}" if tail else ""))


class _QueueStream:
    """A text stream that sends whole lines to the parent, prefixed with the current job's name."""

    def __init__(self, q, stream: str):
        self.q, self.stream, self.buf = q, stream, ""

    def write(self, s: str) -> int:
        self.buf += s.replace("\r", "\n")
        *lines, self.buf = self.buf.split("\n")
        for line in lines:
            if line.strip():
                self.q.put((self.stream, f"{_TAG} | {line}" if _TAG else line))
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _init(q, threads: int, path: list[str], devices=None) -> None:
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if devices is not None:  # one GPU per worker, chosen before torch starts CUDA in this process
        os.environ["CUDA_VISIBLE_DEVICES"] = devices.get()
    for p in reversed(path):
        if p not in sys.path:
            sys.path.insert(0, p)
    import torch

    torch.set_num_threads(threads)
    sys.stdout, sys.stderr = _QueueStream(q, "out"), _QueueStream(q, "err")


def _call(fn: tuple[str, str], name: str, kwargs: dict) -> tuple[str, Any, str | None]:
    global _TAG

    _TAG = name
    try:  # the job's function by module and name, imported here: an import error comes back as the job's error
        out = getattr(importlib.import_module(fn[0]), fn[1])(**kwargs)
        return name, out, None
    except BaseException:  # noqa: BLE001 - sent back whole, raised in the caller
        return name, None, traceback.format_exc()
    finally:
        for s in (sys.stdout, sys.stderr):
            if isinstance(s, _QueueStream) and s.buf.strip():
                s.write("\n")
        _TAG = ""
        release_freed_memory()  # the next job in this worker starts from what it needs, not the last one's heap


def _dead_workers(procs: Sequence) -> str:
    """The pool's worker processes that ended while jobs were pending, in words ('' when none did). A worker killed
    (the out-of-memory killer's SIGKILL) takes its job with it: ``multiprocessing.Pool`` starts another worker and
    never returns that job, so :func:`run_jobs` would wait forever without this check."""
    dead = [p for p in procs if p.exitcode is not None]
    return "; ".join(f"pid {p.pid} " + (f"killed by signal {-p.exitcode}" + (" (SIGKILL: out of memory, or a kill)"
                                         if p.exitcode == -9 else "") if p.exitcode < 0 else f"exited with {p.exitcode}")
                     for p in dead)


def _drain(q) -> None:
    while True:
        try:
            stream, line = q.get_nowait()
        except _queue.Empty:
            return
        print(line, file=sys.stderr if stream == "err" else sys.stdout, flush=True)


def run_jobs(fn: Callable[..., Any], jobs: Mapping[str, dict], workers: int | str = 1, threads: int | None = None,
             desc: str = "jobs", log: Callable[[str], None] = print, lone_tail_in_caller: bool = True,
             gpus: Sequence[str] | None = None) -> dict[str, Any]:
    """``{name: fn(**kwargs)}`` for every ``name: kwargs`` of ``jobs``, in order of ``jobs``.

    ``workers`` (a number or ``"auto"``, see :func:`resolve_workers`) processes share ``threads`` torch threads
    (default: the current ``torch.get_num_threads()``). On a GPU machine (``gpus``: default :func:`visible_gpus`
    where the compute device is CUDA) each worker process gets one GPU of its own (``CUDA_VISIBLE_DEVICES``; more
    workers than GPUs share them in turn), so independent runs spread over the node's GPUs as over CPU cores. ``fn`` must be importable (a module-level function of the
    package, not one defined in a notebook) and the kwargs picklable. With ``lone_tail_in_caller`` (default) and
    one job left over after full rounds of ``workers`` jobs, that last job runs after the pool in this process with
    all the threads (``benchmarks/parallel_jobs.py --jobs 3`` measures the difference)."""
    import torch

    jobs = dict(jobs)
    threads = threads or torch.get_num_threads()
    names = list(jobs)
    if gpus is None:
        from helpers.core.hardware import compute_device

        gpus = visible_gpus() if compute_device("auto").type == "cuda" else []
    gpus = list(gpus)
    n, each, tail = plan_jobs(workers, names, threads, lone_tail_in_caller, "cuda" if gpus else "cpu", gpus)
    if n <= 1:
        return {name: fn(**kw) for name, kw in jobs.items()}
    pooled = {name: jobs[name] for name in names if name not in tail}
    log(f"{len(jobs)} {desc} in {n} worker processes, "
        + (f"one GPU each ({', '.join(gpus[:n])})" if gpus else f"{each} thread{'s' if each > 1 else ''} each")
        + (f"; the last, {tail[0]!r}, alone afterwards with {threads} threads" if tail else ""))
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    devices = None
    if gpus:
        devices = ctx.Queue()
        for i in range(n):
            devices.put(gpus[i % len(gpus)])
    pool = ctx.Pool(n, initializer=_init, initargs=(q, each, list(sys.path), devices))
    procs = list(pool._pool)  # the workers started: none ends before close() unless it dies (see _dead_workers)
    results: dict[str, Any] = {}
    t0 = time.time()
    try:
        target = (fn.__module__, fn.__qualname__)
        pending = {name: pool.apply_async(_call, (target, name, kw)) for name, kw in pooled.items()}
        with progress(total=len(pooled), desc=desc, unit="job") as bar:
            while pending:
                time.sleep(0.2)
                _drain(q)
                if dead := _dead_workers(procs):
                    raise JobError(f"{desc}: a worker process died ({dead}) with job(s) {', '.join(map(repr, pending))} "
                                   "pending; its job is lost, so the pool stops (the runs that finished are kept)")
                for name in [k for k, r in pending.items() if r.ready()]:
                    _, out, err = pending.pop(name).get()
                    if err is not None:
                        _drain(q)
                        last = err.strip().splitlines()[-1]
                        raise JobError(f"{desc}: job {name!r} failed in its worker process: {last}\n\n{err}")
                    results[name] = out
                    bar.update(1)
        pool.close()
        pool.join()
        _drain(q)
    except BaseException:
        pool.terminate()  # runs in flight stop here; their checkpoints let a rerun resume them
        pool.join()
        _drain(q)
        raise
    if tail:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            results[tail[0]] = fn(**jobs[tail[0]])
        finally:
            torch.set_num_threads(before)
    log(f"{len(jobs)} {desc} done in {(time.time() - t0) / 60:.1f} min")
    return {name: results[name] for name in jobs}
