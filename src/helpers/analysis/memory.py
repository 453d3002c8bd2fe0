"""Measured peak memory of one training step, GPT-Neo against the compressor of the same width (Rathod et al.
2024, Table 5, on CPU; ``docs/methods.md#compressor``).

:func:`peak_train_memory` measures one cell in a fresh subprocess from the process's own RSS high-water mark
(Linux ``/proc``), :func:`memory_table` sweeps kinds × widths × batches under a memory cap,
:func:`cached_memory_table` keeps the table as JSONL and :func:`memory_pivot` shapes it as the paper's table.
"""
from __future__ import annotations

import gc
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pandas as pd
import torch
from torch.profiler import ProfilerActivity, profile

from helpers.core.artifacts import fingerprint, read_jsonl, run_step, write_jsonl
from helpers.core.seeding import generator, seed_everything
from helpers.models.compressor import build_compressor, compressor_loss
from helpers.models.decoder import build_decoder, count_parameters  # unique parameters, tied weights once

KINDS = ("gpt-neo", "compressor")


def _rss_mb() -> float:
    """Current resident set size of this process (Linux ``/proc/self/statm``), MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _maxrss_mb() -> float:
    """``getrusage(RUSAGE_SELF).ru_maxrss`` in MB (kB on Linux). Caveat: Linux carries the *parent's* RSS high
    water into a child across ``fork``+``exec`` (``signal->maxrss``), so in a subprocess of a big process (a
    notebook kernel, pytest) it can start above anything the child does; :func:`_hwm_mb` does not."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _hwm_mb() -> float:
    """This process's own RSS high-water mark (``VmHWM`` of ``/proc/self/status``), MB; falls back to
    :func:`_maxrss_mb` where there is no ``/proc``."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return _maxrss_mb()


def _reset_peak_rss() -> bool:
    """Reset the process's RSS high-water mark to its current RSS (Linux ≥ 4.0: ``5 > /proc/self/clear_refs``;
    ``ru_maxrss`` follows it). ``False`` where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _profiler_peak_mb(step: Callable[[], Any]) -> float | None:
    """Peak of live tensor bytes allocated while ``step()`` runs, from ``torch.profiler`` (``profile_memory=True``):
    the running sum of every allocation and free the profiler records, in time order. Tensor bytes only (no
    allocator slack, no library memory). ``None`` if this torch's profiler does not expose its event tree."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    try:
        from torch._C._profiler import _EventType  # the event tree is semi-private: tolerate its absence

        stack, allocs = list(prof.profiler.kineto_results.experimental_event_tree()), []
        while stack:
            e = stack.pop()
            stack.extend(e.children)
            if e.tag == _EventType.Allocation:
                allocs.append((e.start_time_ns, e.extra_fields.alloc_size))
    except (ImportError, AttributeError):
        return None
    cur = peak = 0
    for _, size in sorted(allocs):
        cur += size
        peak = max(peak, cur)
    return peak / 2**20


def _measure_worker(args: dict) -> dict:
    """Body of the measuring subprocess (see :func:`peak_train_memory`); returns the result row."""
    import resource

    torch.set_num_threads(int(args["threads"]))
    kind, width, batch, seq = args["kind"], args["width"], args["batch"], args["seq"]
    layers, heads, vocab, dropout = args["layers"], args["heads"], args["vocab"], args["dropout"]
    seed_everything(args["seed"])
    if kind == "gpt-neo":
        model = build_decoder(dict(hidden=width, layers=layers, heads=heads, context=seq, window=seq // 2,
                                   vocab_size=vocab, dropout=dropout), bos_token_id=0, eos_token_id=0, pad_token_id=0)

        def loss_fn(m, b):
            return m(input_ids=b["input_ids"], labels=b["input_ids"], use_cache=False).loss
    else:
        model = build_compressor(dict(hidden=width, layers=layers, heads=heads, context=seq, vocab_size=vocab,
                                      dropout=dropout))
        loss_fn = compressor_loss
    model.train()
    g = generator(args["seed"])
    ids = torch.randint(vocab, (batch, seq), generator=g)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if args["optimizer"] == "adamw" else None
    # warm-up: one tiny step initialises kernels and autograd, then the gradients are dropped again
    loss_fn(model, {"input_ids": ids[:1, :8]}).backward()
    model.zero_grad(set_to_none=True)
    gc.collect()
    row: dict[str, Any] = {"params": count_parameters(model)}
    # the high-water mark of model building/warm-up would hide part of the step: reset it to the current RSS
    row["hwm_reset"] = _reset_peak_rss()
    base_max, base_cur, base_ru = _hwm_mb(), _rss_mb(), _maxrss_mb()
    saved_limit = resource.getrlimit(resource.RLIMIT_AS)
    if args.get("cap_mb"):
        limit = _vm_bytes() + int(args["cap_mb"] * 2**20)
        if saved_limit[1] != resource.RLIM_INFINITY:
            limit = min(limit, saved_limit[1])
        resource.setrlimit(resource.RLIMIT_AS, (limit, saved_limit[1]))
    t0 = time.perf_counter()
    try:
        loss = loss_fn(model, {"input_ids": ids})
        loss.backward()
        if opt is not None:
            opt.step()
    except (MemoryError, RuntimeError) as err:
        if isinstance(err, RuntimeError) and "alloc" not in str(err).lower() and "memory" not in str(err).lower():
            raise
        return {**row, "status": "oom", "baseline_mb": base_max, "error": str(err).splitlines()[0][:200]}
    finally:
        resource.setrlimit(resource.RLIMIT_AS, saved_limit)
    wall = time.perf_counter() - t0
    peak_max = _hwm_mb()
    row.update(status="ok", peak_mb=peak_max - base_max, baseline_mb=base_max, baseline_current_mb=base_cur,
               process_peak_mb=peak_max, step_s=wall, loss=float(loss.detach()),
               ru_maxrss_delta_mb=_maxrss_mb() - base_ru)
    if args.get("profile"):
        del loss
        model.zero_grad(set_to_none=True)
        gc.collect()

        def step():
            loss_fn(model, {"input_ids": ids}).backward()

        row["profiler_peak_mb"] = _profiler_peak_mb(step)
    return row


def peak_train_memory(
    kind: str,
    width: int,
    batch: int,
    seq: int = 256,
    layers: int = 2,
    heads: int = 4,
    vocab: int = 16_384,
    dropout: float = 0.1,
    optimizer: str = "none",
    cap_mb: float | None = None,
    profile: bool = False,
    threads: int = 1,
    seed: int = 0,
    timeout: float = 600.0,
) -> dict:
    """**Measured** peak memory of one training step of a GPT-Neo (``kind="gpt-neo"``, built with
    :func:`helpers.models.decoder.build_decoder`, window ``seq // 2``, our fast SDPA attention) or of the compressor
    (``kind="compressor"``) of the same width/layers/heads/vocab, on CPU, in a fresh subprocess.

    Protocol: the subprocess (``threads`` torch threads) builds the model and a random ``[batch, seq]`` batch,
    runs one tiny warm-up step (``[1, 8]`` tokens) and drops its gradients, resets the kernel's RSS high-water
    mark to the current RSS (``/proc/self/clear_refs``, so transient peaks of model building do not hide part of
    the step; ``hwm_reset`` says whether that worked), reads the high-water mark as the baseline, runs **one
    forward + backward** of the LM loss on the batch (plus ``opt.step()`` of AdamW when
    ``optimizer="adamw"``; default: no optimizer) and reads the high-water mark again. ``peak_mb`` = the
    difference: activations kept for backward, logits and loss temporaries, backward temporaries and the
    parameter gradients (and AdamW's two state tensors with ``optimizer="adamw"``); not the weights, the batch,
    or torch itself (those are in ``baseline_mb``). It is the allocator's view (RSS), so it includes malloc slack
    and excludes memory the step reused from freed-but-kept pages; ``baseline_current_mb`` is the RSS at the
    baseline. With ``profile=True`` a second step is run under ``torch.profiler`` (``profile_memory=True``) and
    ``profiler_peak_mb`` reports the peak of live tensor bytes during it, a cross-check independent of malloc.

    The high-water mark is ``VmHWM`` (``/proc/self/status``), i.e. ``ru_maxrss`` of the process's own memory:
    ``getrusage(RUSAGE_SELF).ru_maxrss`` itself inherits the parent's RSS across ``fork``+``exec`` on Linux,
    so in a subprocess of a notebook kernel or of pytest it can sit above the whole step and read 0. Its delta
    is still reported as ``ru_maxrss_delta_mb``, for comparison.

    ``cap_mb`` limits the step's address space (``RLIMIT_AS`` = the address space at the baseline + ``cap_mb``),
    so a cell that would exceed it fails as ``status="oom"`` instead of exhausting the machine.
    Returns a dict: the inputs, ``status`` (``ok``/``oom``), ``peak_mb``, ``baseline_mb``,
    ``baseline_current_mb``, ``process_peak_mb``, ``params``, ``step_s`` (the step's wall time), ``loss``,
    ``wall_s`` (the whole subprocess), and ``profiler_peak_mb`` when asked."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if optimizer not in ("none", "adamw"):
        raise ValueError(f"optimizer must be 'none' or 'adamw', got {optimizer!r}")
    if seq % 2 or seq < 8:
        raise ValueError(f"seq must be even and >= 8 (whole pairs; the warm-up uses 8 tokens), got {seq}")
    if min(width, batch, layers, heads, vocab) <= 0 or width % heads:
        raise ValueError(f"need positive sizes and heads dividing width, got width={width} heads={heads}")
    args = dict(kind=kind, width=width, batch=batch, seq=seq, layers=layers, heads=heads, vocab=vocab,
                dropout=dropout, optimizer=optimizer, cap_mb=cap_mb, profile=profile, threads=threads, seed=seed)
    src = str(Path(__file__).resolve().parents[2])  # src/, above helpers/analysis/
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    code = ("import json, sys; from helpers.analysis.memory import _measure_worker; "
            "print('@@ROW@@' + json.dumps(_measure_worker(json.loads(sys.argv[1]))))")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True,
                          env=env, timeout=timeout)
    wall = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@ROW@@")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        if cap_mb and any("memory" in ln.lower() or "alloc" in ln.lower() for ln in tail):
            return {**args, "status": "oom", "wall_s": wall, "error": " | ".join(tail)[-300:]}
        raise RuntimeError(f"memory measurement of {kind} width {width} batch {batch} failed "
                           f"(exit {proc.returncode}):\n" + "\n".join(tail))
    return {**args, **json.loads(lines[-1][len("@@ROW@@"):]), "wall_s": wall}


def memory_table(
    widths: Iterable[int],
    batches: Iterable[int],
    kinds: Sequence[str] = KINDS,
    cap_mb: float = 8192.0,
    log: Callable[[str], None] | None = None,
    jobs: int = 1,
    **kwargs: Any,
) -> list[dict]:
    """Table 5 of Rathod et al. 2024 on CPU: :func:`peak_train_memory` for every ``kind × width × batch`` (``kwargs``: seq,
    layers, heads, vocab, dropout, optimizer, threads, profile, ...). ``cap_mb`` bounds the *step's* memory
    (``peak_mb``; the process adds its baseline, ~0.4 GB of torch and weights). Rows are dicts with ``status``:

    * ``ok``: measured; ``oom``: the step hit the ``cap_mb`` address-space limit and was stopped;
    * ``skipped``: not run because its estimate ``est_mb`` exceeds ``cap_mb``. A cell's estimate is the peak of
      the nearest smaller measured batch of the same model scaled linearly with the batch (an over-estimate:
      gradients do not grow with the batch); the smallest batch is estimated from a probe at batch 1 (not in
      the rows). Once a cell is skipped or oom, the larger batches of that model are skipped as well.

    ``jobs`` models (kind × width) are measured at a time, each in its own subprocesses: a process's peak RSS is its
    own, so neighbours do not change it (the table is the same, ~``jobs`` times sooner; mind the memory of
    ``jobs`` steps at once). Rows come in the order kind, width, batch; ``log`` receives one line per cell."""
    batches = sorted(set(batches))
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")

    def chain(kind: str, width: int) -> list[dict]:
        rows: list[dict] = []
        prev: dict | None = None
        stop = False
        for b in batches:
            if not stop and prev is None and b > 1:
                probe = peak_train_memory(kind, width, 1, cap_mb=cap_mb, **kwargs)
                if probe["status"] == "ok":
                    prev = probe
                else:
                    stop = True
            est = prev["peak_mb"] * b / prev["batch"] if prev is not None else None
            if stop or (est is not None and est > cap_mb):
                stop = True
                row = {"kind": kind, "width": width, "batch": b, "status": "skipped"}
            else:
                row = peak_train_memory(kind, width, b, cap_mb=cap_mb, **kwargs)
                if row["status"] == "ok":
                    prev = row
                else:
                    stop = True
            row.update(est_mb=est, cap_mb=cap_mb)
            rows.append(row)
            if log is not None:
                peak = row.get("peak_mb")
                log(f"{kind:10s} width {width:4d} batch {b:3d}: {row['status']:7s} "
                    + (f"peak {peak:8.1f} MB" if peak is not None else f"est {est if est is not None else math.nan:8.1f} MB"))
        return rows

    models = [(kind, width) for kind in kinds for width in widths]
    if jobs == 1:
        return [row for kind, width in models for row in chain(kind, width)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # threads only wait on their subprocesses
        futures = [pool.submit(chain, kind, width) for kind, width in models]
        return [row for f in futures for row in f.result()]


def cached_memory_table(path: str | Path, widths: Iterable[int], batches: Iterable[int], **kwargs: Any) -> list[dict]:
    """:func:`memory_table`, kept as JSONL at ``path`` and reread when its arguments are unchanged (measurements
    are minutes of subprocesses; remove the file to measure again)."""
    path = Path(path)
    log = kwargs.get("log")
    settings = {k: v for k, v in kwargs.items() if k not in ("log", "jobs")}  # neither changes a number
    fp = fingerprint("memory-table-v1", list(widths), sorted(set(batches)), settings)
    run_step("memory table", path, fp, lambda: write_jsonl(path, memory_table(widths, batches, **kwargs)),
             log=log or (lambda _m: None))
    return read_jsonl(path)


def memory_pivot(rows: list[dict]):
    """Rows of :func:`memory_table` as the paper's Table 5: a DataFrame indexed by (kind, width), one column per
    batch, cells the measured ``peak_mb`` (rounded) or ``"oom"``/``"skipped"``."""
    df = pd.DataFrame([{"kind": r["kind"], "width": r["width"], "batch": r["batch"],
                        "cell": round(r["peak_mb"]) if r["status"] == "ok" else r["status"]} for r in rows])
    return df.pivot(index=["kind", "width"], columns="batch", values="cell")
