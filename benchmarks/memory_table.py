"""Notebook 02b's measured-memory table: one model at a time (the baseline) vs ``jobs`` at a time.

    .venv/bin/python benchmarks/memory_table.py [--widths 128,256] [--batches 2,8,32] [--jobs 2]

Both calls run ``helpers.analysis.memory.memory_table`` on the same grid (GPT-Neo and the compressor, seq 256,
4 layers, 4 heads, vocab 4,096, the cpu profile's shape), one after the other in this process; every cell is a
fresh subprocess that measures its own peak RSS. Prints the wall-clock of each, their ratio, and the largest
difference between the two tables' peaks (RSS is measured, so a few MB of noise are expected; the statuses must
agree).
"""
from __future__ import annotations

import argparse
import time

import _common  # noqa: F401,E402  (first: puts src/ on sys.path in a checkout without the editable install)

from helpers.analysis.memory import memory_table  # noqa: E402
from helpers.core.hardware import cpu_info  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--widths", default="128,256")
    ap.add_argument("--batches", default="2,8,32")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args(argv)
    widths = [int(x) for x in a.widths.split(",")]
    batches = [int(x) for x in a.batches.split(",")]
    kw = dict(seq=256, layers=4, heads=4, vocab=4096, dropout=0.0, cap_mb=6000.0)
    times, tables = {}, {}
    for jobs in (1, a.jobs):
        t0 = time.perf_counter()
        tables[jobs] = memory_table(widths, batches, jobs=jobs, **kw)
        times[jobs] = time.perf_counter() - t0
    cells = [(r["kind"], r["width"], r["batch"]) for r in tables[1]]
    assert cells == [(r["kind"], r["width"], r["batch"]) for r in tables[a.jobs]], "rows differ in order"
    status_same = all(x["status"] == y["status"] for x, y in zip(tables[1], tables[a.jobs]))
    gaps = [abs(x["peak_mb"] - y["peak_mb"]) for x, y in zip(tables[1], tables[a.jobs])
            if x.get("peak_mb") is not None and y.get("peak_mb") is not None]
    cpu = cpu_info()
    print(f"CPU: {cpu['label']} ({', '.join(cpu['flags'])}); grid: widths {widths} x batches {batches} x 2 kinds "
          f"({len(cells)} cells, plus a batch-1 probe per model)")
    print(f"{'one model at a time':>24}: {times[1]:6.1f} s")
    print(f"{f'{a.jobs} models at a time':>24}: {times[a.jobs]:6.1f} s   ratio {times[1] / times[a.jobs]:.2f}x")
    print(f"statuses agree: {status_same}; largest peak difference {max(gaps, default=0.0):.1f} MB "
          f"(of peaks {min(r['peak_mb'] for r in tables[1] if r.get('peak_mb')):.0f}-"
          f"{max(r['peak_mb'] for r in tables[1] if r.get('peak_mb')):.0f} MB)")


if __name__ == "__main__":
    main()
