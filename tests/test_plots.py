"""Report figures that show accuracies: intervals as error bars, chance as a dashed line."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
import pytest

from helpers.report import reporting


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


def test_ours_vs_paper_draws_glue_intervals_and_its_own_chance_level():
    """GLUE's panel gets its average's intervals (rows with task "GLUE") and, with ``panel_chance``, the majority
    class's average as its dashed line; the legend says what that line is there."""
    glue_ci = pd.DataFrame([{"model": m, "task": "GLUE", "ci_low": 40.0, "ci_high": 50.0} for m in ("a-1M", "b-1M")])
    fig = reporting.plot_ours_vs_paper(_comparison(), pd.concat([_intervals(), glue_ci]), panel_chance={"GLUE": 43.6})
    blimp, glue = fig.axes[:2]
    assert len(glue.containers) == 2 and "no interval" not in glue.get_title()
    assert sorted(float(x) for x in glue.containers[0].lines[2][0].get_segments()[0][:, 0]) == [40.0, 50.0]
    assert [list(ln.get_xdata()) for ln in glue.lines if ln.get_linestyle() == "--"] == [[43.6, 43.6]]
    assert [list(ln.get_xdata()) for ln in blimp.lines if ln.get_linestyle() == "--"] == [[50.0, 50.0]]
    assert "chance (GLUE: majority class)" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_ours_vs_paper_refuses_ambiguous_intervals():
    z = pd.concat([_intervals(), _intervals().assign(kind="decoder")])
    with pytest.raises(ValueError, match="one kind"):
        reporting.plot_ours_vs_paper(_comparison(), z)


def test_story_views_draw_intervals_chance_and_every_model():
    import matplotlib.pyplot as plt

    from helpers.report import story_views as SV
    from helpers.judge.validity import CORRUPTIONS, VALIDITY_CRITERIA
    from helpers.story_eval.suites import SUITES

    validity = pd.DataFrame([{"criterion": c, "corruption": k, "real wins": 0.7, "low": 0.6, "high": 0.8}
                             for c in VALIDITY_CRITERIA for k in [*CORRUPTIONS, "all"]])
    m = SV.validity_matrix(validity)
    assert list(m.index) == list(VALIDITY_CRITERIA) and list(m.columns) == [*CORRUPTIONS, "all"]
    assert m.iloc[0, 0] == "70 [60, 80]"
    fig = SV.plot_validity(validity, "v")
    ax = fig.axes[0]
    assert [float(y) for y in ax.lines[-1].get_ydata()] == [0.5, 0.5]  # chance: cannot tell real from corrupted
    assert len(ax.patches) == len(VALIDITY_CRITERIA) * (len(CORRUPTIONS) + 1)
    assert "chance (0.5)" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert ax.get_ylim()[1] > 1.0  # an interval ending at 1 keeps its cap
    fig.canvas.draw()
    legend_box, axes_box = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend_box.y1 <= axes_box.y0  # the legend sits below the bars, covering none
    plt.close(fig)

    graded = pd.DataFrame([{"suite": s, "model": mdl, "grade": g} for s in SUITES for mdl in ("a", "b")
                           for g in ("success", "fail", "fail")])
    fig = SV.plot_themed_grades(graded, ["a", "b"], {s: 3 for s in SUITES})
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert sum(heights) == 6 and len(fig.axes[0].patches) == 2 * 3  # 2 models x 3 grades, stacked
    plt.close(fig)

    means = pd.DataFrame([{"model": mdl, "decoding": dec, "grammar": 6.0, "grammar low": 5.0, "grammar high": 7.0}
                          for dec in ("greedy", "nucleus") for mdl in ("a", "b")])
    fig = SV.plot_judge_scores(means, ["a", "b"], ["grammar"], "t")
    assert len(fig.axes) == 2 and len(fig.axes[0].containers) == 2  # bars + error bars per panel
    fig.canvas.draw()  # the figure title clears the panel titles
    assert fig._suptitle.get_window_extent().y0 >= fig.axes[0].title.get_window_extent().y1
    plt.close(fig)

    words = pd.DataFrame([{"prompts": "bundled 50", "model": mdl, "share of required words used": 0.5,
                           "chance (words of another prompt)": 0.1} for mdl in ("a", "b")])
    fig = SV.plot_instruct_words(words, ["bundled 50"])
    assert len(fig.axes[0].patches) == 4 and not fig.axes[0].containers[2:]  # no intervals in the table: none drawn
    plt.close(fig)
    words = words.assign(**{"share of required words used": [0.02, 0.2], "required low": [0.01, 0.15],
                            "required high": [0.03, 0.25], "chance (words of another prompt)": 0.02,
                            "chance low": 0.01, "chance high": 0.04})
    fig = SV.plot_instruct_words(words, ["bundled 50"])
    ax = fig.axes[0]
    bars = [c for c in ax.containers if c.__class__.__name__ == "ErrorbarContainer"]
    assert len(bars) == 2  # required words and chance, each with its interval
    assert sorted(float(y) for y in bars[0].lines[2][0].get_segments()[1][:, 1]) == [0.15, 0.25]
    assert 0.25 < ax.get_ylim()[1] < 0.5  # scaled to the data, not 0-1
    plt.close(fig)


def test_instruct_intervals_resample_prompts():
    from helpers.report import story_views as SV

    rows = []
    for model, shares in [("a", [0.0, 0.5, 1.0, 0.5]), ("b", [0.2, 0.2, 0.2, 0.2])]:
        for i, share in enumerate(shares):
            for _ in range(3):  # three samples of a prompt: one unit, not three
                rows.append({"prompts": "p", "model": model, "prompt": f"q{i}", "n_words": 3, "share_used": share,
                             "chance_share": 0.1})
    rows.append({"prompts": "p", "model": "a", "prompt": "none", "n_words": 0, "share_used": 9.0, "chance_share": 9.0})
    t = SV.instruct_intervals(pd.DataFrame(rows), seed=0).set_index("model")
    assert list(t.columns) == ["prompts", "required low", "required high", "chance low", "chance high"]
    assert 0.0 <= t.loc["a", "required low"] < 0.5 < t.loc["a", "required high"] <= 1.0
    assert t.loc["b", "required low"] == pytest.approx(0.2) and t.loc["b", "required high"] == pytest.approx(0.2)
    assert t.loc["a", "chance high"] == pytest.approx(0.1)  # the unscored prompt (n_words 0) is left out
    again = SV.instruct_intervals(pd.DataFrame(rows), seed=0).set_index("model")
    assert again.equals(t)


def test_generation_views_draw_bands_panels_and_every_model():
    import matplotlib.pyplot as plt

    from helpers.report import generation_views as GV

    slope = {"a": 0.1, "b": 0.001, "c": 0.1}  # b: a flat curve; c: still rising, no knee
    sb = pd.DataFrame([{"model": m, "k": k, "self-BLEU": slope[m] * k, "ci_low": slope[m] * k - 0.05,
                        "ci_high": slope[m] * k + 0.05} for m in ("a", "b", "c") for k in (2, 3, 4)])
    fig = GV.plot_self_bleu(sb, {"a": 3, "b": None, "c": None}, 0.95, 25, "knee", eps=0.01)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["a (k = 3)", "b (undefined: flat curve)", "c (no knee within k ≤ 4)"]
    assert len(ax.lines) == 3 and len(ax.collections) == 3  # a curve and a band per model
    plt.close(fig)

    rng = np.random.default_rng(0)
    per = pd.DataFrame([{"model": m, "prompts": p, **{c: float(rng.random()) for c, _, _ in GV.MEMORISATION_PANELS}}
                        for m in ("a", "b") for p in ("train", "held-out") for _ in range(20)])
    per["longest_shared_run"] = [int(x) for x in rng.integers(3, 12, len(per))]
    fig = GV.plot_memorisation_histograms(per, 20)
    assert [a.get_title() for a in fig.axes[:4]] == [t for _, t, _ in GV.MEMORISATION_PANELS]
    assert fig.axes[2].lines[-1].get_xdata()[0] == 20  # the copy threshold, labelled
    assert [t.get_text() for t in fig.axes[2].get_legend().get_texts()] == ["copy threshold (20 words)"]
    edges = sorted({round(p.get_x(), 6) for p in fig.axes[2].patches} | {round(p.get_x() + p.get_width(), 6)
                                                                      for p in fig.axes[2].patches})
    assert all(float(e) % 1 == 0.5 for e in edges)  # one bar per whole number of words, never split
    plt.close(fig)

    pooled = pd.DataFrame([{"model": m, "completions": 300, "ended (%)": 80.0, "ended CI low": 75.0, "ended CI high": 85.0,
                            "loops (%)": 40.0, "loops CI low": 35.0, "loops CI high": 45.0} for m in ("a", "b", "real")])
    fig = GV.plot_continuation_health(pooled, 256, context=256, reference="real")
    assert [len(a.patches) for a in fig.axes] == [3, 3]
    assert "300 each" in fig._suptitle.get_text() and "prompt + continuation" in fig._suptitle.get_text()
    ended, loops = ([c for c in a.containers if type(c).__name__ == "ErrorbarContainer"][0] for a in fig.axes)
    widths = [[float(np.ptp(seg[:, 0])) if len(seg) else None for seg in c.lines[2][0].get_segments()]
              for c in (ended, loops)]
    assert widths[0] == [10.0, 10.0, None]  # the real endings end by construction: no interval drawn
    assert widths[1] == [10.0, 10.0, 10.0]  # their loops are measured
    assert any("by construction" in t.get_text() for t in fig.axes[0].texts)
    plt.close(fig)


def test_loss_curves_show_both_y_axes_and_mark_best_checkpoints():
    import matplotlib.pyplot as plt

    from helpers.training.loop import TrainResult

    def run(losses, best):
        hist = [{"step": 10 * (i + 1), "split": sp, "loss": v} for i, v in enumerate(losses) for sp in ("train", "valid")]
        return TrainResult("x", 10 * len(losses), 0, min(losses), best, losses[-1], 1.0, history=hist)

    results = {"a": run([5.0, 4.0, 4.5], 20), "b": run([6.0, 5.0, 4.2], 30)}
    fig = reporting.plot_loss_curves(results, {"a": "C0", "b": "C1"}, ("train", "valid"), "loss")
    left, right = fig.axes
    fig.canvas.draw()
    assert all(t.get_text() for t in right.get_yticklabels() if t.get_visible())  # numbers on the right panel too
    assert [t.get_visible() for t in right.get_yticklabels()].count(True) > 1
    stars = [ln for ln in right.lines if ln.get_marker() == "*" and len(ln.get_xdata())]
    assert [(float(s.get_xdata()[0]), float(s.get_ydata()[0])) for s in stars] == [(20.0, 4.0), (30.0, 4.2)]
    assert stars[0].get_markerfacecolor() != "none" and stars[1].get_markerfacecolor() == "none"  # b: best is last
    assert not [ln for ln in left.lines if ln.get_marker() == "*"]
    plt.close(fig)


def test_interpret_views_readable_labels_data_range_and_distinct_class_colours():
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb

    from helpers.analysis import lexicon
    from helpers.report import interpret_views as V

    assert V.tick_fontsize(40, 6.4) >= 8 and V.tick_fontsize(1000, 1) == 4.0  # readable, within bounds
    att = np.tril(np.ones((2, 2, 40, 40)))
    fig = V.plot_attention_grid(att / att.sum(-1, keepdims=True), [f"t{i}" for i in range(40)], ["global", "local"], n=40)
    assert min(t.get_fontsize() for t in fig.axes[0].get_yticklabels()) >= 8
    plt.close(fig)

    heads = pd.DataFrame([{"model": m, "layer": li, "head": h, "layer type": "global",
                           "r (lower triangle)": r * (1 if m == "a" else 0.5)}
                          for m in ("a", "b") for li in (0, 1) for h, r in enumerate((-0.3, 0.1, 0.6))])
    fig = V.plot_correlation_grid(heads, 0.5)
    assert fig.axes[0].images[0].get_clim() == (-0.6, 0.6)  # symmetric, spanning the data, not ±1
    assert "P is a positional head" in fig._suptitle.get_text()
    assert sum(t.get_text().endswith("\nP") for t in fig.axes[0].texts) == 2
    plt.close(fig)

    colours = [to_rgb(V.CLASS_COLOURS[c]) for c in lexicon.CLASSES]
    assert len(set(colours)) == len(lexicon.CLASSES)
    gaps = [np.abs(np.subtract(a, b)).sum() for i, a in enumerate(colours) for b in colours[i + 1:]]
    assert min(gaps) > 0.25  # no two classes in near shades
    rows = [{"model": "m", "top tokens": mode, "layer": layer, **{c: 1 / len(lexicon.CLASSES) for c in lexicon.CLASSES}}
            for mode in ("all", "distinct") for layer in ("0", "1", "base rate")]
    fig = V.plot_class_shares(pd.DataFrame(rows), lexicon.CLASSES, 20)
    assert len(fig.axes[0].patches) == 3 * len(lexicon.CLASSES)
    assert to_rgb(fig.axes[0].patches[0].get_facecolor()) == colours[0]
    plt.close(fig)


def test_millions_axis_has_no_offset():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1_200_000], [0, 1])
    reporting.millions_axis(ax.xaxis)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert "0" in labels and "1M" in labels and any(lab.endswith("M") and "." in lab for lab in labels)
    assert ax.xaxis.get_offset_text().get_text() == ""  # no "1e6" at the axis' end
    plt.close(fig)
