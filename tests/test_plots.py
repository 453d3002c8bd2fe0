"""Report figures that show accuracies: intervals as error bars, chance as a dashed line."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
import pytest

from helpers.report import reporting, training_views
from helpers.report.evaluation_views import arm_colours


def _flat(text: str) -> str:
    """``text`` on one line: the figures wrap long titles to their panel's width."""
    return " ".join(text.split())


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
    from helpers.story_eval.suites import SUITES, grade_summary

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
    # with the summary: each model's mean score and its interval on a right-hand 0-1 axis of every panel
    graded = graded.assign(id=[f"p{i % 3}" for i in range(len(graded))],
                           score=graded["grade"].map({"success": 1.0, "fail": 0.0}))
    summary = grade_summary(graded)
    fig = SV.plot_themed_grades(graded, ["a", "b"], {s: 3 for s in SUITES}, summary)
    right = [ax for ax in fig.axes if ax.get_ylim() == (0.0, 1.0)]
    assert len(right) == len(SUITES)
    points = right[0].lines[0].get_ydata()
    assert list(points) == pytest.approx(list(summary[summary.suite == SUITES[0]]["score"]))  # 1/3 for both models
    plt.close(fig)

    means = pd.DataFrame([{"model": mdl, "decoding": dec, "grammar": g, "grammar low": g - 0.1, "grammar high": g + 0.1}
                          for dec, shift in (("greedy", 0.0), ("nucleus", 0.2)) for mdl, g in (("a", 4.0 + shift),
                                                                                            ("b", 4.1 + shift))])
    fig = SV.plot_judge_scores(means, ["a", "b"], ["grammar"], "t")
    panel, strip = fig.axes
    assert len(panel.containers) == 2  # a dot with its interval per decoding, not bars
    lo, hi = panel.get_xlim()
    assert 3.7 <= lo < 3.9 and 4.4 < hi < 4.7  # zoomed to the intervals (3.9-4.4), not the whole 1-10 scale
    assert strip.get_xlim() == (1, 10) and any("midpoint 5.5" in t.get_text() for t in strip.texts)
    assert {t.get_text() for t in panel.texts} == {"4.00", "4.10", "4.20", "4.30"}  # every value beside its dot
    fig.canvas.draw()  # the figure title clears the panel titles
    assert fig._suptitle.get_window_extent().y0 >= panel.title.get_window_extent().y1
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
    assert [_flat(a.get_title()) for a in fig.axes[:4]] == [t for _, t, _ in GV.MEMORISATION_PANELS]  # wrapped
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

    from helpers.report import training_views

    from helpers.training.loop import TrainResult

    def run(losses, best):
        hist = [{"step": 10 * (i + 1), "split": sp, "loss": v} for i, v in enumerate(losses) for sp in ("train", "valid")]
        return TrainResult("x", 10 * len(losses), 0, min(losses), best, losses[-1], 1.0, history=hist)

    results = {"a": run([5.0, 4.0, 4.5], 20), "b": run([6.0, 5.0, 4.2], 30)}
    fig = training_views.plot_loss_curves(results, {"a": "C0", "b": "C1"}, ("train", "valid"), "loss")
    left, right = fig.axes
    fig.canvas.draw()
    assert all(t.get_text() for t in right.get_yticklabels() if t.get_visible())  # numbers on the right panel too
    assert [t.get_visible() for t in right.get_yticklabels()].count(True) > 1
    stars = [ln for ln in right.lines if ln.get_marker() == "*" and len(ln.get_xdata())]
    assert [(float(s.get_xdata()[0]), float(s.get_ydata()[0])) for s in stars] == [(20.0, 4.0), (30.0, 4.2)]
    assert stars[0].get_markerfacecolor() != "none" and stars[1].get_markerfacecolor() == "none"  # b: best is last
    assert not [ln for ln in left.lines if ln.get_marker() == "*"]
    plt.close(fig)
    # seeds of one arm: one colour, one legend entry for the arm
    results["a (seed 7)"] = run([5.1, 4.1, 4.4], 20)
    colours, labels = arm_colours(results)
    fig = training_views.plot_loss_curves(results, colours, ("train", "valid"), "loss", labels=labels)
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts[:2] == ["a (2 seeds)", "b"] and not any("seed 7" in t for t in texts)
    plt.close(fig)


def test_interpret_views_readable_labels_data_range_and_distinct_class_colours():
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb

    from helpers.analysis import lexicon
    from helpers.report import interpret_views as V

    assert V.token_ticks(40, 6.4) == (1, pytest.approx(9.216)) and V.token_ticks(12, 6.4) == (1, 10.0)  # every token
    assert V.token_ticks(40, 1.3) == (4, 7.0)  # a narrow panel: every 4th token at 7 pt, not 40 labels at 2 pt
    att = np.tril(np.ones((2, 2, 40, 40)))
    fig = V.plot_attention_grid(att / att.sum(-1, keepdims=True), [f"t{i}" for i in range(40)], ["global", "local"], n=40,
                                head_classes={(0, 0): "positional", (1, 1): "semantic"})
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert min(t.get_fontsize() for t in fig.axes[0].get_yticklabels()) >= 8 and 3 <= len(ticks) <= 40 // 2
    gap = int(ticks[1][1:])
    assert ticks == [f"t{i}" for i in range(0, 40, gap)]  # a few labels, evenly spread
    assert fig.axes[0].get_title() == "L0 global · H0\npositional" and fig.axes[1].get_title() == "L0 global · H1"
    assert any(ax.get_label() == "<colorbar>" for ax in fig.axes)
    plt.close(fig)
    # sub-word pieces: words are named at their first piece, fragments and punctuation are never labelled
    pieces = ["<eot>", " Lily", " lik", "ed", " the", " d", "og", ".", " She", " s", "aw"]
    assert V.word_labels(pieces) == ["<eot>", "Lily", "liked", "", "the", "dog", "", ".", "She", "saw", ""]
    assert V.readable_ticks(V.word_labels(pieces), 20) == [0, 1, 2, 4, 5, 8, 9]
    assert V.readable_ticks(V.word_labels(pieces), 3) == [0, 4, 8]

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


# ----------------------------------------------------------------------------- the print rule
# Every saved figure is read in a paper at most 7 in wide: scaled to that width, no text under 6.5 pt
# (helpers.report.figure_layout). Each plotting helper is drawn here on inputs the size of the cpu run's (ten models,
# names such as "baby-500k+tiny-500k+gen-nucleus-1 (balanced)", four benchmarks, 4 x 4 heads over 40 tokens), in
# the notebooks' style.

LONG_ENCODERS = ["baby-1M", "tiny-1M", "baby-500k+tiny-500k", "baby-500k+tiny-500k (seed 7)",
                 "baby-500k+tiny-500k+gen-nucleus-1", "baby-500k+tiny-500k+gen-nucleus-1 (balanced)"]
DECODERS = ["tiny-125k", "tiny-250k", "tiny-500k", "tiny-1M"]


@pytest.fixture
def notebook_style():
    """The notebooks' style (seaborn's whitegrid theme: 11-12 pt text), undone after the test."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    with plt.rc_context():
        sns.set_theme(style="whitegrid")
        yield


def test_print_rule_scales_text_by_the_saved_width():
    import io
    import re

    import matplotlib.pyplot as plt
    from matplotlib import font_manager

    from helpers.report import figure_layout as FL

    fig, ax = plt.subplots(figsize=(17, 4))  # 05_ours_vs_paper's width before the rule
    ax.plot([0, 1], [0, 1])
    pt, text, width = FL.smallest_printed_text(fig)
    pdf = io.BytesIO()
    fig.savefig(pdf, format="pdf", bbox_inches="tight")  # as save_figure saves it
    box = re.search(rb"/MediaBox \[ *0 0 ([\d.]+) ([\d.]+)", pdf.getvalue())
    assert width == pytest.approx(float(box.group(1)) / 72, abs=0.05) and width > 12  # the saved width, in inches
    assert pt == pytest.approx(font_manager.FontProperties(size=plt.rcParams["xtick.labelsize"]).get_size_in_points()
                               * 7 / width)
    assert "under 6.5 pt" in FL.print_problem(fig)
    fig.set_figwidth(FL.FIGURE_WIDTH)
    assert FL.print_problem(fig) is None and FL.smallest_printed_text(fig)[2] <= 7.0
    ax.legend(["a line with a long legend entry"], loc="upper left", bbox_to_anchor=(1.01, 1))  # outside the axes
    assert FL.smallest_printed_text(fig)[2] > 7.5  # the tight bounding box holds the legend: a wider saved figure
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.text(0.5, 0.5, "tiny note", fontsize=5)
    assert FL.smallest_printed_text(fig)[:2] == (5.0, "tiny note") and "'tiny note'" in FL.print_problem(fig)
    plt.close(fig)


def test_wrap_and_panels_keep_figures_within_the_print_width():
    import matplotlib.pyplot as plt

    from helpers.report import figure_layout as FL

    lines = FL.wrap("encoder: baby-500k+tiny-500k+gen-nucleus-1 (balanced)", 2.0, 11).split("\n")
    assert lines[0] == "encoder: baby-500k+" and all(FL.text_inches(x, 11) <= 2.0 for x in lines)
    assert FL.wrap("BLiMP", 0.1) == "BLiMP"  # a word wider than the line stays whole
    fig, axes, inches = FL.panels(5, 2.0, 2.5, extra_width=0.5)
    assert len(axes) == 5 and len(fig.axes) == 5 and fig.get_figwidth() == FL.FIGURE_WIDTH  # 3 + 2, the 6th removed
    assert fig.get_figheight() == 5.0 and inches == pytest.approx((FL.FIGURE_WIDTH - 0.5) / 3 - 0.4)
    plt.close(fig)
    assert FL.legend_columns(["a", "b", "c"]) == 3 and FL.legend_columns(["x" * 80, "b"]) == 1


def _loss_results(names):
    from helpers.training.loop import TrainResult

    def run(k):
        losses = [6 - k * np.log1p(i) / 5 for i in range(20)]
        hist = [{"step": 100 * (i + 1), "split": sp, "loss": v} for i, v in enumerate(losses) for sp in ("train", "valid")]
        return TrainResult("x", 2000, 0, min(losses), 2000, losses[-1], 1.0, history=hist)

    return {n: run(i + 1) for i, n in enumerate(names)}


def _budget_rows(arm, shift, seeds=(42, 7, 1, 2, 3), n_items=300):
    """0/1 item scores of one arm over five seeds (each seed shifted a little), for the seed-budget figure."""
    rng = np.random.default_rng(len(arm))
    return pd.concat([pd.DataFrame({"model": arm if s == 42 else f"{arm} (seed {s})", "arm": arm, "seed": s,
                                    "task": "BLiMP", "item": [f"p/{i}" for i in range(n_items)],
                                    "value": (rng.random(n_items) < 0.55 + shift * (j % 3)).astype(float)})
                      for j, s in enumerate(seeds)], ignore_index=True)


def _figures():
    """(report figure name, a function drawing it at the cpu run's size)."""
    from helpers.analysis import lexicon
    from helpers.evaluation import comparisons as C
    from helpers.training import unlikelihood
    from helpers.judge.validity import CORRUPTIONS, VALIDITY_CRITERIA
    from helpers.report import evaluation_views as EV, generation_views as GV, interpret_views as IV, story_views as SV
    from helpers.story_eval.suites import SUITES, grade_summary

    rng = np.random.default_rng(0)
    models = [("decoder", m) for m in DECODERS] + [("encoder", m) for m in LONG_ENCODERS]
    intervals = pd.DataFrame([{"kind": k, "model": m, "task": task, "pairs": 4000, "accuracy": 55.0, "ci_low": 52.0,
                               "ci_high": 58.0} for task in ("BLiMP", "Supp.", "EWoK") for k, m in models])
    mixes = LONG_ENCODERS[:3] + LONG_ENCODERS[4:5]
    comparison = pd.DataFrame([{"mix": m, "paper mix": m.replace("500k", "5M").replace("1M", "10M"), "benchmark": b,
                                "ours (cpu)": 55.0, "paper": 62.0} for m in mixes
                               for b in ("BLiMP", "Supp.", "EWoK", "GLUE")])
    enc_ci = pd.concat([intervals[intervals.kind == "encoder"],
                        pd.DataFrame([{"model": m, "task": "GLUE", "ci_low": 50.0, "ci_high": 60.0} for m in mixes])])
    familiarity = pd.DataFrame([{"kind": "decoder", "model": m, "words seen at least": n, "accuracy (%)": 55.0,
                                 "ci_low": 50.0, "ci_high": 60.0} for m in DECODERS for n in (0, 1, 5, 20)])
    validity = pd.DataFrame([{"criterion": c, "corruption": k, "real wins": 0.7, "low": 0.6, "high": 0.8}
                             for c in VALIDITY_CRITERIA for k in [*CORRUPTIONS, "all"]])
    graded = pd.DataFrame([{"suite": s, "model": m, "id": f"{s}-{i}", "grade": g, "score": v} for s in SUITES
                           for m in DECODERS for i, (g, v) in enumerate((("success", 1.0), ("partial", 0.5), ("fail", 0.0)))])
    words = pd.DataFrame([{"prompts": p, "model": m, "share of required words used": 0.2, "required low": 0.1,
                           "required high": 0.3, "chance (words of another prompt)": 0.1, "chance low": 0.05,
                           "chance high": 0.15} for p in ("bundled 50", "held-out derived")
                          for m in ("tiny-1M (plain)", "tiny-1M-instruct")])
    criteria = ["grammar", "creativity", "consistency", "plot"]
    judge = pd.DataFrame([{"model": m, "decoding": d, **{c + x: v for c in criteria
                                                          for x, v in [("", 4.0), (" low", 3.5), (" high", 4.5)]}}
                          for d in ("greedy", "nucleus") for m in DECODERS])
    selfbleu = pd.DataFrame([{"model": m, "k": k, "self-BLEU": 0.01 * k, "ci_low": 0.005 * k, "ci_high": 0.02 * k}
                             for m in DECODERS for k in (2, 3, 5, 10, 20, 30)])
    per = pd.DataFrame([{"model": m, "prompts": "train", **{c: float(rng.random()) for c, _, _ in GV.MEMORISATION_PANELS}}
                        for m in DECODERS for _ in range(30)])
    per["longest_shared_run"] = [int(x) for x in rng.integers(3, 25, len(per))]
    pooled = pd.DataFrame([{"model": m, "completions": 300, "ended (%)": 80.0, "ended CI low": 75.0, "ended CI high": 85.0,
                            "loops (%)": 40.0, "loops CI low": 35.0, "loops CI high": 45.0}
                           for m in [*DECODERS, "original endings"]])
    att = np.tril(rng.random((4, 4, 40, 40)))
    tokens = ["<|endoftext|>" if i == 0 else f"word{i}" for i in range(40)]
    heads = pd.DataFrame([{"model": m, "layer": li, "head": h, "layer type": ("global", "local")[li % 2],
                           "r (lower triangle)": float(rng.uniform(-0.4, 0.4))}
                          for m in ("tiny-125k", "tiny-1M") for li in range(4) for h in range(4)])
    grouped = pd.DataFrame([{"model": m, "grouping": gr, "group": g, **{c: 1 / 8 for c in lexicon.ATTENTION_CLASSES}}
                            for m in ("tiny-125k", "tiny-1M") for gr, g in [("reference", "all tokens (base rate)"),
                                                                            ("span", "long-range"), ("span", "short-range")]])
    shares = pd.DataFrame([{"model": m, "top tokens": mode, "layer": layer, **{c: 1 / 13 for c in lexicon.CLASSES}}
                           for mode in ("all", "distinct") for m in ("tiny-125k", "tiny-1M")
                           for layer in ("0", "1", "2", "3", "base rate")])
    specialist_classes = lexicon.SPECIALIST_CLASSES + ["other class"]
    total = pd.DataFrame([{"model": m, "top tokens": mode, **{c: 100 for c in specialist_classes}, "specialists": 600,
                           "neurons": 2048, "expected neurons by chance": 1.2} for mode in ("all", "distinct")
                          for m in ("tiny-125k", "tiny-1M")])
    title = "Encoders: ours (10x fewer words) vs the authors' rows of BERTtime Stories Table 2"
    probes = pd.DataFrame(unlikelihood.history_rows({b: unlikelihood.UnlikelihoodResult(b, 150, 100, 1.0, [
        {"step": t, "ended": 0.9, "loops": 0.8 - t / 300, "healthy": 0.2 + t / 300, "probe prompts": 64,
         "valid loss": 3.0 + t / 1000} for t in range(0, 151, 25)]) for b in DECODERS}))
    arms = ("baby-500k+tiny-500k+gen-nucleus-1", "baby-500k+tiny-500k")
    questions = pd.DataFrame([{"question": q, "task": t, "A": arms[0], "B": arms[1], "effect": -3.3, "seed CI low": -5.0,
                               "seed CI high": -1.6, "MDE (80 % power)": 3.3, "item CI low": -4.0, "item CI high": -2.6,
                               "unit": "points", "verdict": v, "effect after Holm": h} for q, t, v, h in [
        ("TinyStories vs BabyLM at the same words (encoders, BLiMP)", "BLiMP",
         "no effect larger than ±9.0 points (80 % power, paired over 3 seeds)", ""),
        ("D_gen: generated stories change BLiMP", "BLiMP", f"effect: {arms[0]} lower than {arms[1]} by 3.3 points; it "
         "survives Holm's correction over the 6 questions tested", "yes"),
        ("Repetition fine-tuning changes BLiMP (tiny-1M decoders)", "BLiMP",
         "untestable here: 1 vs 2 seeds per arm, a seed-level interval needs at least two in each", "")] * 2])
    budget = C.seed_budget(pd.concat([_budget_rows(a, s) for a, s in ((arms[0], 0.02), (arms[1], 0.0))]),
                           [{"question": "D_gen: generated stories change BLiMP", "a": arms[0], "b": arms[1],
                             "task": "BLiMP"}], most=10)
    return [
        ("05_questions", lambda: EV.plot_questions(questions, "The study's questions: effects over seeds and over items")),
        ("05_seed_budget", lambda: EV.plot_seed_budget(budget, "Minimum detectable effect against training seeds per arm")),
        ("02_repetition_probes", lambda: GV.plot_repetition_probes(
            probes, dict(zip(DECODERS, [f"C{i}" for i in range(4)])))),
        ("02_figure1_loss_curves", lambda: training_views.plot_loss_curves(
            _loss_results(DECODERS), dict(zip(DECODERS, [f"C{i}" for i in range(4)])),
            ("training loss", "validation (held-out stories) loss"), "cross-entropy (nats/token)", legend_title="budget")),
        ("04_mlm_loss_curves", lambda: training_views.plot_loss_curves(
            _loss_results(LONG_ENCODERS), dict(zip(LONG_ENCODERS, [f"C{i}" for i in range(6)])),
            ("training MLM loss", "validation MLM loss (held-out stories + BabyLM documents)"),
            "cross-entropy per masked token")),
        ("03_self_bleu_vs_k", lambda: GV.plot_self_bleu(selfbleu, {m: None for m in DECODERS}, 0.95, 20, "knee")),
        ("03_memorisation_histograms", lambda: GV.plot_memorisation_histograms(per, 20)),
        ("03_continuation_health", lambda: GV.plot_continuation_health(pooled, 256, context=256)),
        ("05_zero_shot_intervals", lambda: reporting.plot_intervals(
            intervals, order=models, title="Zero-shot accuracy per model (blue: decoders, orange: encoders)")),
        ("05_blimp_word_familiarity", lambda: EV.plot_word_familiarity(
            familiarity, title="Decoders: BLiMP accuracy by how familiar the pair's words are")),
        ("05_ours_vs_paper", lambda: reporting.plot_ours_vs_paper(
            comparison, enc_ci, title=title, panel_chance={"GLUE": 43.6},
            panel_titles={"GLUE": "GLUE (our fine-tuning scaled: 256 training examples, 2 epochs)"})),
        ("05b_judge_validity", lambda: SV.plot_validity(
            validity, "Judge validity: HuggingFaceTB/SmolLM2-1.7B-Instruct, 24 held-out stories (95 % intervals)")),
        ("05b_gpteval_judge_scores", lambda: SV.plot_judge_scores(
            judge, DECODERS, criteria, "GPT-Eval by HuggingFaceTB/SmolLM2-1.7B-Instruct: 10 prompts per decoder")),
        ("05b_themed_grades", lambda: SV.plot_themed_grades(graded, DECODERS, {s: 9 for s in SUITES},
                                                            grade_summary(graded))),
        ("05b_instruct_words", lambda: SV.plot_instruct_words(words, ["bundled 50", "held-out derived"])),
        ("06_attention_maps", lambda: IV.plot_attention_grid(
            att / att.sum(-1, keepdims=True), tokens, ["global", "local"] * 2, n=40,
            title="tiny-1M: attention of every layer × head, held-out story 0 (first 40 tokens)")),
        ("06_attention_distance_correlation", lambda: IV.plot_correlation_grid(heads, 0.3)),
        ("06_attention_target_classes", lambda: IV.plot_target_classes(grouped, ["tiny-125k", "tiny-1M"])),
        ("06_neuron_pos_by_layer", lambda: IV.plot_class_shares(shares, lexicon.CLASSES, 20)),
        ("06_neuron_specialists", lambda: IV.plot_specialists(
            total, specialist_classes, 20, "Specialist neurons (≥ 50% of top-20 tokens in one class), tiny-125k vs tiny-1M",
            chance_label="expected by chance, all classes (in the 'all' list a floor)")),
    ]


@pytest.mark.parametrize("name", [name for name, _ in _figures()])
def test_every_figure_is_readable_printed_7_inches_wide(name, notebook_style):
    import matplotlib.pyplot as plt

    from helpers.report import figure_layout as FL

    fig = dict(_figures())[name]()
    assert FL.print_problem(fig) is None, f"{name}: {FL.print_problem(fig)}"
    assert FL.smallest_printed_text(fig)[2] <= FL.PRINT_WIDTH + 0.05  # made to print at its own size
    for ax in fig.axes:  # no panel squeezed to nothing by its labels
        box = ax.get_position()
        if ax.get_label() != "<colorbar>":
            assert box.width * fig.get_figwidth() > 0.8 and box.height * fig.get_figheight() > 0.5, name
    plt.close(fig)


def test_only_the_report_layer_draws():
    """Plotting helpers live in ``helpers.report`` (the other stages compute tables), so one print rule covers them."""
    import ast
    from pathlib import Path

    root = Path(reporting.__file__).resolve().parents[1]
    drawing = []
    for path in root.rglob("*.py"):
        if path.relative_to(root).parts[0] == "report":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            drawing += [f"{path.relative_to(root)}: {n}" for n in names if n.split(".")[0] in ("matplotlib", "seaborn")]
    assert not drawing, drawing


def test_saved_figures_embed_no_type3_fonts_and_pngs_are_300_dpi(tmp_path, monkeypatch):
    """ACL's and ACM's checkers reject PDFs with Type 3 fonts (matplotlib's default): ``save_figure`` embeds
    TrueType (Type 42) fonts, text, mathtext and non-ASCII signs alike, and writes 300-dpi PNGs."""
    import re

    import matplotlib.pyplot as plt
    from PIL import Image

    monkeypatch.setenv("STORYBENCH_REPORTS", str(tmp_path))
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([1, 2, 3], [2, -1, 3], label="loss − baseline ≥ 0")
    ax.set_title(r"$L = a \cdot C^{-\alpha}$, 95 % interval")
    ax.legend()
    png = reporting.save_figure(fig, "fonts", "smoke")
    plt.close(fig)
    pdf = (tmp_path / "smoke" / "figures" / "fonts.pdf").read_bytes()
    fonts = re.findall(rb"/Subtype\s*/(Type3|Type1|TrueType|Type0|CIDFontType2)\b", pdf)
    assert fonts and b"Type3" not in fonts, fonts
    assert b"/FontFile2" in pdf  # the TrueType program is embedded, not just named
    with Image.open(png) as im:
        assert im.info["dpi"] == pytest.approx((300, 300), abs=0.1)
        assert im.size[0] >= 3 * 300 * 0.8  # the pixels are there too, not just the header


def test_arm_colours_give_seeds_their_arm_colour_and_one_legend_entry():
    names = ["a", "a (seed 7)", "a (seed 1)", "b", "c (seed 3)"]
    colours, labels = arm_colours(names)
    assert colours["a"] == colours["a (seed 7)"] == colours["a (seed 1)"] != colours["b"]
    assert labels == {"a": "a (3 seeds)", "a (seed 7)": "_nolegend_", "a (seed 1)": "_nolegend_", "b": "b",
                      "c (seed 3)": "c"}


def test_short_verdict_keeps_the_claim_and_drops_the_design():
    from helpers.report.evaluation_views import short_verdict
    assert short_verdict("effect: a lower than a (plain) by 1.1 points; not after Holm's correction", "no") == \
        "effect: a lower than a (plain) by 1.1 points (Holm: no)"
    assert short_verdict("no effect larger than ±4.1 points (80 % power, paired over 8 seeds)") == \
        "no effect larger than ±4.1 points"
    assert short_verdict("untestable here: 1 vs 2 seeds per arm, a seed-level interval needs at least two in each; "
                         "the item interval [+1.0, +2.0] measures which items") == "untestable here: 1 vs 2 seeds per arm"


def test_short_verdict_of_an_effect_the_items_do_not_carry():
    from helpers.report.evaluation_views import short_verdict
    v = ("not shown beyond these items: A higher than B by 1.1 points over seeds on the 1,100 items scored, but the "
         "item interval [-0.6, +2.8] includes 0 (another draw of items could change the sign)")
    assert short_verdict(v, "no") == "not shown beyond these items: A higher than B by 1.1 points"
    assert short_verdict("no effect larger than ±4.2 points (80 % power, paired over 5 seeds, limited by the items)") \
        == "no effect larger than ±4.2 points"


def test_figure_file_names_are_usable_in_latex_and_the_shell(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from helpers.report import figure_layout, reporting

    assert figure_layout.file_stem("06_attention_maps_tiny-1M (seed 7)") == "06_attention_maps_tiny-1M_seed-7"
    assert figure_layout.file_stem("05 questions: BLiMP (one column)") == "05_questions_BLiMP_one_column"
    assert figure_layout.file_stem("02_loss_curves") == "02_loss_curves"
    monkeypatch.setenv("STORYBENCH_REPORTS", str(tmp_path))
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1])
    out = reporting.save_figure(fig, "06_maps tiny-125k (seed 7)", "smoke", formats=("png",))
    plt.close(fig)
    assert out.name == "06_maps_tiny-125k_seed-7.png" and out.is_file()



def test_loss_curves_tell_seeds_apart_keep_budget_colours_and_fit_one_column():
    """Seeds of one budget: the budget's colour, another line style, a legend entry per style; the colours follow the
    profile's budget list (the same budget, the same colour, in any figure); the one-column variant is 3.3 in wide
    and keeps every text at 7 pt or more printed at that width."""
    import matplotlib.pyplot as plt

    from helpers.report import training_views as TV
    from helpers.report.figure_layout import print_problem

    results = _loss_results(["tiny-125k", "tiny-1M", "tiny-125k (seed 7)", "tiny-1M (seed 7)", "tiny-1M (seed 13)"])
    budgets = ["tiny-125k", "tiny-250k", "tiny-500k", "tiny-1M"]
    palette = TV.budget_palette(list(results), budgets)
    assert palette["tiny-1M (seed 13)"] == palette["tiny-1M"] != palette["tiny-125k"]
    assert TV.budget_palette(["tiny-1M (plain)"], budgets)["tiny-1M (plain)"] == palette["tiny-1M"]
    assert TV.budget_palette(["tiny-1M"], budgets[::-1])["tiny-1M"] != palette["tiny-1M"]  # the list fixes colours
    styles = TV.seed_styles(list(results))
    assert styles["tiny-1M"] == "-" and styles["tiny-1M (seed 7)"] == "--" and styles["tiny-1M (seed 13)"] == ":"
    for one_column in (False, True):
        fig = TV.plot_loss_curves(results, palette, ("training loss", "validation (held-out stories) loss"),
                                  "cross-entropy (nats/token)", legend_title="budget", one_column=one_column)
        lines = {(ln.get_color() if isinstance(ln.get_color(), str) else tuple(ln.get_color()), ln.get_linestyle())
                 for ln in fig.axes[0].lines}
        assert len({s for _, s in lines}) == 3  # three seed styles drawn
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        assert {"first seed", "seed 2", "seed 3"} <= set(legend)
        if one_column:
            assert abs(fig.get_figwidth() - TV.COLUMN_WIDTH) < 1e-9
            assert print_problem(fig, width=TV.COLUMN_WIDTH, min_pt=7.0) is None, print_problem(fig, TV.COLUMN_WIDTH, 7.0)
        plt.close(fig)


def test_questions_figure_names_the_task_once_and_fits_one_column():
    import matplotlib.pyplot as plt
    import pandas as pd

    from helpers.report import evaluation_views as EV
    from helpers.report.figure_layout import print_problem

    rows = [{"question": q, "task": "BLiMP", "A": "a", "B": "b", "effect": 1.0, "seed CI low": -1.4, "seed CI high": 3.4,
             "MDE (80 % power)": 3.3, "item CI low": 0.0, "item CI high": 2.0, "δ (equivalence margin)": 2.0,
             "unit": "points", "effect after Holm": "no",
             "verdict": "not shown: effect +1.0 points, in [-1.4, +3.4] (95 % over 5 seeds); inconclusive at ±2.0 points"}
            for q in ("TinyStories vs BabyLM at the same words (encoders, BLiMP)", "D_gen: generated stories change BLiMP",
                      "Repetition fine-tuning changes the score (decoders)")]
    assert EV.question_label(rows[0]["question"], "BLiMP") == rows[0]["question"]
    assert EV.question_label(rows[2]["question"], "BLiMP").endswith("(decoders) (BLiMP)")
    for one_column in (False, True):
        fig = EV.plot_questions(pd.DataFrame(rows), "The study's questions", one_column=one_column)
        texts = [t.get_text() for t in fig.axes[0].get_yticklabels()] + [t.get_text() for t in fig.axes[0].texts]
        joined = " ".join(" ".join(t.split()) for t in texts)
        assert "(BLiMP) (BLiMP)" not in joined and "BLiMP) (BLiMP" not in joined
        dashed = [ln for ln in fig.axes[0].lines if ln.get_linestyle() == "--"]
        assert len(dashed) == 2 * len(rows)  # ±δ on every row
        if one_column:
            assert abs(fig.get_figwidth() - EV.COLUMN_WIDTH) < 1e-9
            assert print_problem(fig, width=EV.COLUMN_WIDTH, min_pt=7.0) is None, print_problem(fig, EV.COLUMN_WIDTH, 7.0)
        plt.close(fig)


def test_one_colour_per_budget_and_mix_in_every_notebook_figure():
    """profile_palette gives a decoder its budget's colour (notebook 02's list, as Figure 1) and an encoder its mix's
    (notebook 04's list); self-BLEU (03), continuation health (03), word familiarity (05) and specialists (06) draw
    with it, a budget's seeds in its colour told apart by line style or hatch."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb

    from helpers.core.config import load_params
    from helpers.report import evaluation_views as EV, generation_views as GV, interpret_views as IV, training_views as TV

    names = ["tiny-10k", "tiny-40k", "tiny-40k (seed 7)", "tiny-40k (plain)", "tiny-99k"]
    pal = TV.profile_palette("smoke", names)
    assert pal == TV.budget_palette(names, load_params("smoke", "02")["budgets"])  # Figure 1's colours
    assert pal["tiny-40k"] == pal["tiny-40k (seed 7)"] == pal["tiny-40k (plain)"] != pal["tiny-10k"]
    assert pal["tiny-99k"] == (0.5, 0.5, 0.5)
    enc = TV.profile_palette("smoke", ["baby-40k", "baby-40k (seed 7)", "baby-20k+tiny-20k+gen-nucleus-1"], kind="encoder")
    assert enc["baby-40k"] == enc["baby-40k (seed 7)"] != enc["baby-20k+tiny-20k+gen-nucleus-1"]
    with pytest.raises(ValueError, match="kind"):
        TV.profile_palette("smoke", names, kind="both")

    sb = pd.DataFrame([{"model": m, "k": k, "self-BLEU": 0.1 * k, "ci_low": 0.0, "ci_high": 1.0}
                       for m in ("tiny-40k", "tiny-10k") for k in (2, 3, 4)])
    fig = GV.plot_self_bleu(sb, {}, 0.95, 5, "knee", palette=pal)
    assert [to_rgb(ln.get_color()) for ln in fig.axes[0].lines] == [to_rgb(pal["tiny-40k"]), to_rgb(pal["tiny-10k"])]
    plt.close(fig)
    pooled = pd.DataFrame([{"model": m, "ended (%)": 50.0, "ended CI low": 40.0, "ended CI high": 60.0, "loops (%)": 5.0,
                            "loops CI low": 1.0, "loops CI high": 9.0, "completions": 20}
                           for m in ("tiny-10k", "tiny-40k", "original endings")])
    fig = GV.plot_continuation_health(pooled, 24, palette=pal)
    faces = [to_rgb(p.get_facecolor()) for p in fig.axes[0].patches][:3]
    assert faces[:2] == [to_rgb(pal["tiny-10k"]), to_rgb(pal["tiny-40k"])] and faces[2] == (0.6, 0.6, 0.6)
    plt.close(fig)
    fam = pd.DataFrame([{"kind": "decoder", "model": m, "words seen at least": n, "accuracy (%)": 60.0, "ci_low": 50.0,
                         "ci_high": 70.0} for m in ("tiny-40k", "tiny-40k (seed 7)") for n in (0, 5)])
    fig = EV.plot_word_familiarity(fam, palette={("decoder", n): c for n, c in pal.items()})
    drawn = [ln for ln in fig.axes[0].lines if ln.get_label() != "chance" and ln.get_linestyle() != "None"]
    assert {to_rgb(ln.get_color()) for ln in drawn} == {to_rgb(pal["tiny-40k"])}
    assert {ln.get_linestyle() for ln in drawn} == {"-", "--"}  # the two seeds, one colour, two styles
    plt.close(fig)
    total = pd.DataFrame([{"model": m, "top tokens": "all", "noun": 10, "other class": 30, "specialists": 40,
                           "neurons": 100, "expected neurons by chance": 1.0} for m in ("tiny-40k", "tiny-40k (seed 7)")])
    fig = IV.plot_specialists(total, ["noun", "other class"], 20, palette=pal)
    bars = fig.axes[0].patches
    assert {to_rgb(b.get_facecolor()) for b in bars} == {to_rgb(pal["tiny-40k"])}
    assert {b.get_hatch() or "" for b in bars} == {"", "///"}
    plt.close(fig)
