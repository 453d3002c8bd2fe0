"""Report figures that show accuracies: intervals as error bars, chance as a dashed line."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import pandas as pd
import pytest

from helpers import reporting


def _comparison():
    rows = []
    for mix, paper_mix in [("a-1M", "a-10M"), ("b-1M", "b-10M")]:
        for bench, ours, paper in [("BLiMP", 56.0, 62.0), ("GLUE", 45.0, float("nan"))]:
            rows.append({"mix": mix, "paper mix": paper_mix, "benchmark": bench, "ours (cpu)": ours, "paper": paper})
    return pd.DataFrame(rows)


def _intervals(models=("a-1M", "b-1M")):
    return pd.DataFrame([{"kind": "encoder", "model": m, "task": "BLiMP", "pairs": 100, "accuracy": 56.0,
                          "ci_low": 53.0, "ci_high": 59.0} for m in models])


def test_ours_vs_paper_has_intervals_chance_and_paper_markers():
    fig = reporting.plot_ours_vs_paper(_comparison(), _intervals(), title="t")
    blimp, glue = fig.axes[:2]
    chance = [ln for ln in blimp.lines if ln.get_linestyle() == "--"]
    assert chance and list(chance[0].get_xdata()) == [50.0, 50.0]
    assert not [ln for ln in glue.lines if ln.get_linestyle() == "--"]  # GLUE averages tasks with other chance levels
    assert len(blimp.containers) == 2  # one error bar per mix
    bar = blimp.containers[0].lines[2][0].get_segments()[0]  # the horizontal error bar of the first mix
    assert sorted(float(x) for x in bar[:, 0]) == [53.0, 59.0]
    diamonds = [ln for ln in blimp.lines if ln.get_marker() == "D"]
    assert [float(d.get_xdata()[0]) for d in diamonds] == [62.0, 62.0]
    assert not [ln for ln in glue.lines if ln.get_marker() == "D"]  # a paper value that is missing is not drawn
    assert "no interval" in glue.get_title()
    labels = [t.get_text() for t in blimp.get_yticklabels()]
    assert labels == ["a-1M\n(paper a-10M)", "b-1M\n(paper b-10M)"]


def test_ours_vs_paper_refuses_ambiguous_intervals():
    z = pd.concat([_intervals(), _intervals().assign(kind="decoder")])
    with pytest.raises(ValueError, match="one kind"):
        reporting.plot_ours_vs_paper(_comparison(), z)
