"""Shared by the benchmark scripts (run as ``python benchmarks/<name>.py``, so this folder is on sys.path)."""
from __future__ import annotations

import time

import torch


def matmul_peak(n: int = 2048, repeats: int = 5) -> float:
    """Best fp32 GFLOP/s of an n×n @ n×n matmul (the machine's practical peak for this process)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e9
