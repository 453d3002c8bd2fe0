"""What the machine offers, and the numeric precision training uses on it.

* :func:`cpu_info`: the CPU model and the instruction-set flags that matter here (AVX2, AVX-512, AVX512-BF16,
  AMX), recorded in every report's manifest and timing so a number is never separated from the machine;
  :func:`gpu_names` beside it where the machine has GPUs.
* :func:`native_bf16`: whether bfloat16 matmuls run natively (AMX or AVX512-BF16 on a CPU, any recent GPU).
  Without it PyTorch emulates bf16 and training gets *slower*, so ``precision: auto`` falls back to fp32.
* :func:`autocast_context`: ``torch.autocast`` to bf16 for the forward pass (weights, optimizer state and the
  loss's log-softmax stay fp32), or a no-op.
* :func:`available_memory`: the memory a new process may still take (``MemAvailable``), for steps that size their
  workers by it.
* :func:`compute_device`: where models train and run (``"auto"``: the GPU when there is one, else the CPU); the one
  rule training, fine-tuning, generation and scoring share.
"""
from __future__ import annotations

import contextlib
import functools
import os
import platform
from typing import Callable

import torch

_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_vnni")


@functools.lru_cache(maxsize=1)
def cpu_info() -> dict:
    """``{"model": ..., "family": ..., "model_id": ..., "stepping": ..., "label": ..., "flags": [...], "cores": n,
    "torch_capability": ...}`` from ``/proc/cpuinfo`` where it exists (Linux), else from :mod:`platform`.

    ``label`` is what timings name: the model name plus its family/model numbers where the name alone does not tell
    CPU generations apart (a virtual machine may show only "AMD EPYC" for Zen 4, family 25, and Zen 5, family 26,
    whose bf16 decoder training steps ran at 13.3k vs 23.3k tokens/s in ``benchmarks/train_throughput.py``)."""
    model, flags, ids = platform.processor() or platform.machine(), set(), {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model in ("", platform.machine(), platform.processor()):
                    model = value.strip()
                elif key in ("flags", "Features"):
                    flags |= set(value.split())
                elif key in ("cpu family", "model", "stepping") and key not in ids:
                    ids[key] = value.strip()
    except OSError:
        pass
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except AttributeError:  # older torch
        capability = None
    family, model_id, stepping = ids.get("cpu family"), ids.get("model"), ids.get("stepping")
    label = model + (f" (family {family}, model {model_id})" if family and model_id else "")
    return {"model": model, "family": family, "model_id": model_id, "stepping": stepping, "label": label,
            "flags": [f for f in _FLAGS if f in flags], "cores": os.cpu_count(), "torch_capability": capability}


def available_memory() -> int | None:
    """Bytes of memory available to new work now: ``MemAvailable`` of ``/proc/meminfo`` (Linux; it counts reclaimable
    caches), else free physical pages from ``os.sysconf``; None where neither can be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def gpu_names() -> list[str]:
    """The names of the CUDA GPUs this process sees (``[]`` without CUDA), for manifests and timings."""
    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def compute_device(requested: str | torch.device = "auto", index: int = 0) -> torch.device:
    """``torch.device`` for ``requested``: ``"auto"`` is CUDA device ``index`` (a process's local rank) when CUDA is
    available, else the CPU; anything else is taken as it is (``"cpu"``, ``"cuda:1"``, ...).  ``"auto"`` with an
    ``index`` past the machine's GPUs (``torchrun --nproc_per_node`` above the GPU count) is an error that says so,
    rather than CUDA's "invalid device ordinal" at the first transfer."""
    if isinstance(requested, torch.device):
        return requested
    if requested == "auto":
        if not torch.cuda.is_available():
            return torch.device("cpu")
        n = torch.cuda.device_count()
        if index >= n:
            raise RuntimeError(f"process {index} (its LOCAL_RANK) asks for a GPU of its own, but this machine has {n}: "
                               f"start at most {n} processes per node (torchrun --nproc_per_node {n}), or train on the "
                               f"CPU (device: cpu)")
        return torch.device("cuda", index)
    return torch.device(requested)


def native_bf16(device: torch.device | str = "cpu") -> bool:
    """True when bf16 matmuls run natively on ``device`` (CPU: AMX or AVX512-BF16 and oneDNN says so)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type != "cpu":
        return False
    flags = set(cpu_info()["flags"])
    if not flags & {"avx512_bf16", "amx_bf16"}:
        return False
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_precision(precision: str, device: torch.device | str = "cpu") -> str:
    """``"fp32"`` or ``"bf16"``: ``auto`` picks bf16 only where it is native; an explicit ``bf16`` on hardware
    without it is honoured (emulated, slow) since the user asked for it."""
    if precision not in ("fp32", "bf16", "auto"):
        raise ValueError(f"precision must be fp32, bf16 or auto, not {precision!r}")
    if precision == "auto":
        return "bf16" if native_bf16(device) else "fp32"
    return precision


def autocast_context(precision: str, device: torch.device | str = "cpu") -> Callable[[], contextlib.AbstractContextManager]:
    """A factory of context managers: bf16 autocast on ``device`` for ``"bf16"``, nothing for ``"fp32"``."""
    device = torch.device(device)
    if precision == "bf16":
        return lambda: torch.autocast(device.type, dtype=torch.bfloat16)
    if precision == "fp32":
        return contextlib.nullcontext
    raise ValueError(f"precision must be resolved to fp32 or bf16, not {precision!r}")
