"""Progress as log lines for output that is not a terminal (helpers.core.progress.LineProgress)."""
from __future__ import annotations

from helpers.core.progress import LineProgress


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_line_each_time_the_count_passes_a_multiple_with_rate_and_time_left():
    lines, clock = [], Clock()
    bar = LineProgress(1000, "score", "seq", every=250, log=lines.append, clock=clock)
    for _ in range(9):
        clock.t += 1.0
        bar.update(100)  # 100 seq/s
    assert lines == ["score: 300/1,000 seq (30%), 100.0 seq/s, ~7 s left",
                     "score: 500/1,000 seq (50%), 100.0 seq/s, ~5 s left",
                     "score: 800/1,000 seq (80%), 100.0 seq/s, ~2 s left"]
    clock.t += 1.0
    bar.update(100)
    bar.set_postfix(loss="1.0")  # a bar's extra text: ignored
    bar.close()
    bar.close()  # once
    assert lines[3:] == ["score: 1,000/1,000 seq (100%), 100.0 seq/s"]


def test_default_every_is_a_twentieth_and_close_reports_the_rest():
    lines, clock = [], Clock()
    bar = LineProgress(20_000, "x", "seq", log=lines.append, clock=clock)
    assert bar.every == 1000
    clock.t += 600.0
    bar.update(999)
    assert lines == []
    bar.update(1)
    assert lines == ["x: 1,000/20,000 seq (5%), 1.7 seq/s, ~190.0 min left"]
    bar.update(10)
    bar.close()
    assert lines[1] == "x: 1,010/20,000 seq (5%), 1.7 seq/s, ~188.0 min left, done in 600 s"


def test_without_a_total_it_counts_every_thousand():
    lines, clock = [], Clock()
    bar = LineProgress(log=lines.append, clock=clock, unit="it")
    clock.t += 2.0
    bar.update(2500)
    assert bar.every == 1000 and lines == ["2,500 it, 1,250.0 it/s"]
