"""helpers.report.paper_tables: Tables 1 and 2 from summaries, every zero-shot accuracy with its interval."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from helpers.evaluation import zero_shot as evaluation
from helpers.report import paper_tables, reporting


class _Result:  # what the tables read of an EvalResult
    def __init__(self, rows):
        s = evaluation.summarise(rows, seed=0)
        self.by_task, self.overall = s["task"], s["overall"]


def _rows(p_correct: dict[str, float], n: int = 40):
    rows = []
    for task, p in p_correct.items():
        for par in ("p1", "p2"):
            for i in range(n):
                rows.append({"task": task, "paradigm": par, "phenomenon": "ph", "pair_id": f"{par}-{i}",
                             "correct": i < p * n, "tie": False})
    return rows


def _paper(**extra):
    return pd.DataFrame([{"table": 1, "model": "GPT-Neo", "training_data": "tiny-10M", "total_words": 10_000_000,
                          "blimp": 60.0, "supplement": 55.0, "ewok": 50.0, "glue": 70.0, "average": 58.8, **extra}])


def test_decoder_table_has_an_interval_beside_every_accuracy():
    zero = {("decoder", "a"): _Result(_rows({"blimp": 0.75, "supplement": 0.5, "ewok": 0.6}))}
    t = paper_tables.decoder_table(zero, ["a"], "ours (cpu)", {"a": "1.25M"}, _paper())
    ours, paper = t.iloc[0], t.iloc[1]
    assert ours["BLiMP"] == 75.0 and ours["Supp."] == 50.0 and ours["EWoK"] == 60.0
    for col in ("BLiMP", "Supp.", "EWoK", "Avg."):
        lo, hi = (float(x) for x in ours[f"{col} 95% CI"].strip("[]").split(","))
        assert lo < ours[col] < hi, col
    summary = zero[("decoder", "a")].by_task.set_index("task").loc["ewok"]
    assert ours["EWoK 95% CI"] == reporting.fmt_interval(summary.ci_low, summary.ci_high)
    assert math.isclose(ours["Avg."], (75 + 50 + 60) / 3)
    assert paper["source"] == "paper" and paper["BLiMP"] == 60.0 and paper["BLiMP 95% CI"] == ""  # the paper prints none
    assert paper["stands for"] == "" and paper["paper note"] == "" and ours["paper note"] == ""
    noted = paper_tables.decoder_table(zero, ["a"], "ours", {}, _paper(note="printed Avg. 58.8; the mean is 55.0"))
    assert noted.iloc[1]["paper note"].startswith("printed Avg.") and noted.iloc[0]["paper note"] == ""
    assert list(t.columns[:5]) == ["source", "model", "training data", "stands for", "BLiMP"]


def test_a_task_not_scored_is_empty_not_invented():
    zero = {("decoder", "a"): _Result(_rows({"blimp": 0.75}))}
    t = paper_tables.decoder_table(zero, ["a"], "ours", {}, _paper())
    assert math.isnan(t.iloc[0]["Supp."]) and t.iloc[0]["Supp. 95% CI"] == ""


def test_encoder_table_marks_missing_and_scaled_glue():
    zero = {("encoder", m): _Result(_rows({"blimp": 0.6, "supplement": 0.55, "ewok": 0.5})) for m in ("x", "y")}
    t = paper_tables.encoder_table(zero, ["x", "y"], "ours (cpu, PLL mean)", {"x": 1000, "y": 2000}, {"x": "baby-10M"},
                                   {"x": 45.0}, {"x": "scaled protocol: boolq"},
                                   _paper(model="LTG-BERT baseline", table=2, track="strict-small"))
    x, y, paper = t.iloc[0], t.iloc[1], t.iloc[2]
    assert x["GLUE"] == 45.0 and math.isclose(x["Avg."], (60 + 55 + 50 + 45) / 4)
    assert "GLUE includes scaled protocol: boolq" in x["Avg. note"]
    assert math.isnan(y["GLUE"]) and y["GLUE protocol"] == "not fine-tuned" and "GLUE missing" in y["Avg. note"]
    assert math.isnan(y["Avg."])  # one rule for every row: all four benchmarks or no average
    for row in (x, y):
        assert math.isclose(row["Avg. zero-shot"], (60 + 55 + 50) / 3)
    assert math.isclose(paper["Avg. zero-shot"], (60 + 55 + 50) / 3) and paper["Avg."] == 58.8  # the paper's own Avg.
    assert x["stands for"] == "baby-10M" and y["stands for"] == "" and y["total words"] == "2k"
    assert (x["total words"], paper["total words"]) == ("1k", "10M")  # one format: the paper's budgets are text
    assert x["BLiMP 95% CI"].startswith("[") and paper["BLiMP 95% CI"] == ""
    assert paper["EWoK context"] == "no (organisers' pipeline)" and x["EWoK context"] == "yes"
    assert paper["Avg. note"] == ""
    # intervals beside the averages: GLUE's from the fine-tuning runs, Avg.'s from the four benchmarks' intervals
    t = paper_tables.encoder_table(zero, ["x", "y"], "ours", {"x": 1000, "y": 2000}, {}, {"x": 45.0}, {"x": ""},
                                   _paper(model="LTG-BERT baseline", table=2, track="strict-small"),
                                   glue_ci={"x": (40.0, 50.0)})
    x, y, paper = t.iloc[0], t.iloc[1], t.iloc[2]
    cols = list(t.columns)
    assert cols.index("Avg. 95% CI") == cols.index("Avg.") + 1
    assert cols.index("Avg. zero-shot 95% CI") == cols.index("Avg. zero-shot") + 1
    assert x["GLUE 95% CI"] == "[40.0, 50.0]" and y["GLUE 95% CI"] == "" and y["Avg. 95% CI"] == ""
    lo, hi = (float(v) for v in x["Avg. 95% CI"].strip("[]").split(","))
    assert lo < x["Avg."] < hi and hi - lo < 10  # GLUE's interval, a quarter of it in the average, dominates
    assert x["Avg. zero-shot 95% CI"].startswith("[") and y["Avg. zero-shot 95% CI"].startswith("[")
    assert paper["GLUE 95% CI"] == paper["Avg. 95% CI"] == paper["Avg. zero-shot 95% CI"] == ""


class _ParadigmResult:  # what breakdown_table reads of an EvalResult
    def __init__(self, rows):
        self.by_paradigm = evaluation.summarise(rows, seed=0)["paradigm"]


def test_breakdown_table_gives_each_phenomenon_its_interval():
    rows = []
    for ph, pars, p in (("agreement", ("a1", "a2"), 0.9), ("binding", ("b1",), 0.5)):
        for par in pars:
            rows += [{"task": "blimp", "paradigm": par, "phenomenon": ph, "pair_id": f"{par}-{i}",
                      "correct": i < p * 50, "tie": False} for i in range(50)]
    rows += [{"task": "ewok", "paradigm": "d", "phenomenon": "d", "pair_id": str(i), "correct": True, "tie": False}
             for i in range(10)]
    zero = {("encoder", "m"): _ParadigmResult(rows)}
    t = paper_tables.breakdown_table(zero, ["m"], "blimp", "phenomenon").set_index("phenomenon")
    assert list(t.index) == ["agreement", "binding"] and list(t.columns) == ["m", "m 95% CI", "pairs"]
    assert t.loc["agreement", "m"] == 90.0 and t.loc["binding", "m"] == 50.0
    assert t.loc["agreement", "pairs"] == 100 and t.loc["binding", "pairs"] == 50
    for ph in t.index:
        lo, hi = (float(x) for x in t.loc[ph, "m 95% CI"].strip("[]").split(","))
        assert lo <= t.loc[ph, "m"] <= hi and hi - lo > 1, ph
    wide = lambda s: float(s.strip("[]").split(",")[1]) - float(s.strip("[]").split(",")[0])  # noqa: E731
    assert wide(t.loc["binding", "m 95% CI"]) > wide(t.loc["agreement", "m 95% CI"])  # fewer items, p = 0.5
    ewok = paper_tables.breakdown_table(zero, ["m"], "ewok", "paradigm", label="domain")
    assert ewok.columns[0] == "domain" and list(ewok["domain"]) == ["d"] and ewok.loc[0, "m"] == 100.0
    with pytest.raises(ValueError, match="no supplement"):
        paper_tables.breakdown_table(zero, ["m"], "supplement", "paradigm")
    with pytest.raises(ValueError, match="level"):
        paper_tables.breakdown_table(zero, ["m"], "blimp", "domain")


def test_paper_breakdown_reads_the_reference_tables():
    ref = pd.read_csv(paper_tables.__file__.rsplit("src", 1)[0] + "params/paper_reference/table4_blimp_phenomena_100m.csv")
    t = paper_tables.paper_breakdown(ref)
    assert t.columns[0] == "phenomenon" and all(c.startswith("paper: ") for c in t.columns[1:])
    assert len(t) == len(ref) and "table" not in t.columns


def test_glue_table_gives_every_task_score_its_interval_and_flags_scaled_tasks():
    runs = pd.DataFrame([
        {"model": "x", "task": "cola", "score": 0.10, "ci_low": 0.02, "ci_high": 0.20, "protocol": "standard"},
        {"model": "x", "task": "boolq", "score": 0.60, "ci_low": 0.55, "ci_high": 0.66,
         "protocol": "scaled (train carved from validation)"},
        {"model": "y", "task": "cola", "score": 0.30, "ci_low": 0.20, "ci_high": 0.40, "protocol": "standard"},
        {"model": "y", "task": "boolq", "score": 0.70, "ci_low": 0.64, "ci_high": 0.75, "protocol": "standard"}])
    paper = pd.DataFrame([{"table": 7, "track": "strict", "training_data": "baby-100M", "cola": 40.0, "boolq": 70.0}])
    t = paper_tables.glue_table(runs, ["boolq", "cola"], paper)
    assert list(t.columns[:4]) == ["boolq", "boolq 95% CI", "cola", "cola 95% CI"]
    assert t.loc["x", "cola"] == 10.0 and t.loc["x", "cola 95% CI"] == "[2.0, 20.0]"
    assert math.isclose(t.loc["y", "GLUE avg."], 50.0)
    assert t.loc["x", "GLUE protocol"].startswith("scaled protocol: boolq") and t.loc["y", "GLUE protocol"] == "standard"
    p = t.loc["paper: baby-100M (100M track)"]
    assert p["GLUE avg."] == 55.0 and p["cola 95% CI"] == "" and p["GLUE protocol"].startswith("paper")
    # y: cola 30 [20, 40], boolq 70 [64, 75]: the average's half-width is z * sqrt(se_cola^2 + se_boolq^2) / 2
    z = 1.959964
    half = z * math.sqrt((10 / z) ** 2 + (5.5 / z) ** 2) / 2
    lo, hi = (float(v) for v in t.loc["y", "GLUE avg. 95% CI"].strip("[]").split(","))
    assert lo == pytest.approx(50 - half, abs=0.06) and hi == pytest.approx(50 + half, abs=0.06)
    assert p["GLUE avg. 95% CI"] == ""
    with pytest.raises(ValueError, match="no fine-tuning runs for mrpc"):
        paper_tables.glue_table(runs, ["boolq", "mrpc"], paper)


def test_glue_runs_table_gives_scores_and_intervals_in_percent():
    runs = pd.DataFrame([{"model": "x", "task": "cola", "metric": "mcc", "score": 0.10, "ci_low": 0.02, "ci_high": 0.20,
                          "dev_metric": 0.1, "best_epoch": 2, "n_train": 256, "n_dev": 50, "n_test": 300,
                          "protocol": "standard", "seconds": 3.0}])
    t = paper_tables.glue_runs_table(runs)
    assert tuple(t.columns) == paper_tables.GLUE_RUN_COLUMNS
    assert (t.loc[0, "score (%)"], t.loc[0, "CI low (%)"], t.loc[0, "CI high (%)"]) == (10.0, 2.0, 20.0)
    assert "score (%)" not in runs.columns  # the runs are left as they were


def test_glue_table_keeps_the_run_order_adds_the_majority_row_and_flags_single_class_runs():
    rows = []
    for m, scores, single in (("zeta", (0.81, 0.0), (True, True)), ("alpha", (0.70, 0.2), (False, False))):
        for t, sc, one in zip(("mrpc", "cola"), scores, single):
            rows.append({"model": m, "task": t, "score": sc, "ci_low": sc - 0.05, "ci_high": sc + 0.05,
                         "protocol": "standard", "top_prediction_share": 1.0 if one else 0.8, "single_class": one})
    runs = pd.DataFrame(rows)
    majority = pd.DataFrame([{"task": "mrpc", "score": 0.81}, {"task": "cola", "score": 0.0}])
    paper = pd.DataFrame([{"table": 7, "track": "strict", "training_data": "baby-100M", "cola": 40.0, "mrpc": 80.0}])
    t = paper_tables.glue_table(runs, ["mrpc", "cola"], paper, majority)
    assert list(t.index[:3]) == ["zeta", "alpha", paper_tables.MAJORITY_ROW]  # the runs' order, not the alphabet
    assert t.loc[paper_tables.MAJORITY_ROW, "mrpc"] == 81.0 and t.loc[paper_tables.MAJORITY_ROW, "cola"] == 0.0
    assert t.loc[paper_tables.MAJORITY_ROW, "mrpc 95% CI"] == ""
    assert t.loc["zeta", paper_tables.SINGLE_CLASS] == "mrpc, cola" and t.loc["alpha", paper_tables.SINGLE_CLASS] == "none"
    older = runs.assign(single_class=None)
    assert paper_tables.glue_table(older, ["mrpc", "cola"], paper).loc["zeta", paper_tables.SINGLE_CLASS] == "not recorded"
    runs_t = paper_tables.glue_runs_table(runs.assign(metric="f1", dev_metric=0.5, best_epoch=1, n_train=8, n_dev=4,
                                                      n_test=4))
    assert list(runs_t["top prediction (%)"]) == [100.0, 100.0, 80.0, 80.0]


def test_glue_panel_title_says_how_the_fine_tuning_was_scaled():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from helpers.evaluation.finetune_setup import finetune_config

    title = paper_tables.glue_panel_title(finetune_config(epochs=2, max_train_examples=256))
    assert "256 training examples" in title and "2 epochs" in title and title.startswith("GLUE")
    assert paper_tables.glue_panel_title(finetune_config()) == "GLUE"
    comp = pd.DataFrame([{"mix": "a", "paper mix": "A", "benchmark": b, "ours (cpu)": 55.0, "paper": 60.0}
                         for b in ("BLiMP", "GLUE")])
    fig = reporting.plot_ours_vs_paper(comp, panel_titles={"GLUE": title})
    glue_title = fig.axes[1].get_title()  # wrapped to the panel's width; the note on a line of its own
    assert " ".join(glue_title.split()) == " ".join(title.split()) + " (no interval: mean of tasks)"
    assert glue_title.endswith("\n(no interval: mean of tasks)") and fig.axes[0].get_title() == "BLiMP"
    plt.close(fig)


def test_scale_vs_paper_counts_both_kinds_against_the_paper_models():
    from helpers.models import decoder, ltg_bert

    dec = decoder.build_decoder(dict(hidden=64, layers=2, heads=4, context=64, window=32, vocab_size=512), seed=0)
    enc = ltg_bert.LtgBertForMaskedLM(ltg_bert.ltg_bert_config("smoke", vocab_size=512))
    t = paper_tables.scale_vs_paper({"decoder": dec, "encoder": enc}).set_index("kind")
    assert t.loc["decoder", "ours (parameters)"] == decoder.count_parameters(dec)
    assert 40e6 < t.loc["decoder", "paper (parameters)"] < 42e6  # docs/methods.md: "about 41M parameters"
    assert 97e6 < t.loc["encoder", "paper (parameters)"] < 99e6  # ~98M
    for kind in ("decoder", "encoder"):
        r = t.loc[kind]
        assert r["times smaller"] == pytest.approx(r["paper (parameters)"] / r["ours (parameters)"])
    with pytest.raises(ValueError, match="kind"):
        paper_tables.scale_vs_paper({"other": dec})


def test_words_text_and_stands_for_of_replicates():
    assert paper_tables.words_text(999_599) == "1M" and paper_tables.words_text(1_087_436) == "1.09M"
    assert paper_tables.words_text("10M") == "10M" and paper_tables.words_text(None) == ""
    assert paper_tables.words_text(float("nan")) == ""
    eq = {"a+b": "A + B", "a+b+g": "A + B + G"}
    got = paper_tables.encoder_stands_for(["a+b", "a+b (seed 7)", "a+b+g (balanced)", "other", "rep"], eq,
                                          {"rep": "a+b+g"})
    assert got == {"a+b": "A + B", "a+b (seed 7)": "A + B", "a+b+g (balanced)": "A + B + G", "other": "",
                   "rep": "A + B + G"}


def _interval_rows():
    rows = []
    for kind, model, pairs in [("decoder", "d1", 5000), ("decoder", "d2", 5000), ("encoder", "e1", 400)]:
        for task in ("BLiMP", "EWoK"):
            rows.append({"kind": kind, "model": model, "task": task, "pairs": pairs, "accuracy": 55.0,
                         "ci_low": 52.0, "ci_high": 58.0})
    return pd.DataFrame(rows)


def test_zero_shot_intervals_name_pairs_in_row_order_and_keep_legend_off_the_rows():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = _interval_rows()
    fig = reporting.plot_intervals(t, order=[("decoder", "d1"), ("decoder", "d2"), ("encoder", "e1")])
    assert fig.axes[0].get_title() == "BLiMP, pairs:\ndecoders 5,000\nencoders 400"  # a line per kind: 7 in wide
    assert all(ax.get_legend() is None for ax in fig.axes)  # no legend inside a panel
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["chance", "decoders", "encoders"]
    plt.close(fig)
    fig = reporting.plot_intervals(t, order=[("encoder", "e1"), ("decoder", "d1"), ("decoder", "d2")])
    assert fig.axes[1].get_title() == "EWoK, pairs:\nencoders 400\ndecoders 5,000"
    plt.close(fig)
    fig = reporting.plot_intervals(t[t.task == "BLiMP"], order=[("decoder", "d1"), ("decoder", "d2"), ("encoder", "e1")])
    assert fig.axes[0].get_title() == "BLiMP\n(decoders 5,000 / encoders 400 pairs)"  # one wide panel: one line
    plt.close(fig)


def test_encoders_vs_paper_holds_every_marker_and_has_one_entry_per_kind():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    comp = pd.DataFrame([{"mix": m, "paper mix": m.upper(), "benchmark": b, "ours (cpu)": 55.0, "paper": paper}
                         for m in ("a", "b") for b, paper in [("BLiMP", 71.2), ("GLUE", 69.5)]])
    ci = pd.DataFrame([{"kind": "encoder", "model": m, "task": "BLiMP", "pairs": 10, "accuracy": 55.0,
                        "ci_low": 50.0, "ci_high": 60.0} for m in ("a", "b")])
    fig = reporting.plot_ours_vs_paper(comp, ci, panel_titles={"GLUE": "GLUE (scaled)"}, fontsize=11)
    blimp, glue = fig.axes[:2]
    for ax in (blimp, glue):
        lo, hi = ax.get_xlim()
        assert lo < 50.0 - 0.5 and hi > 71.2 + 0.5 if ax is blimp else hi > 69.5 + 0.5  # diamonds with a margin
        assert all(t.get_fontsize() >= 11 for t in ax.get_xticklabels())
    assert glue.get_title().startswith("GLUE (scaled)") and blimp.get_title() == "BLiMP"
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["ours (95 % CI where drawn)", "paper", "chance"]
    plt.close(fig)


def test_table1_says_which_decoders_were_repetition_fine_tuned(tmp_path):
    (tmp_path / "decoders" / "a" / "mle-best").mkdir(parents=True)  # notebook 02 kept the plain model beside best/
    (tmp_path / "decoders" / "b" / "best").mkdir(parents=True)
    labels = paper_tables.decoder_models(tmp_path, ["a", "b"])
    assert labels == {"a": "GPT-Neo, repetition-fine-tuned", "b": "GPT-Neo"}
    both = paper_tables.decoder_models(tmp_path, ["a", "a (plain)", "a (plain) (seed 7)"])  # the plain one scored beside
    assert both["a (plain)"] == both["a (plain) (seed 7)"] == "GPT-Neo, plain (before repetition fine-tuning)"
    zero = {("decoder", n): _Result(_rows({"blimp": 0.75, "supplement": 0.5, "ewok": 0.6})) for n in ("a", "b")}
    t = paper_tables.decoder_table(zero, ["a", "b"], "ours", {}, _paper(), labels)
    assert list(t[t.source == "ours"]["model"]) == ["GPT-Neo, repetition-fine-tuned", "GPT-Neo"]


def test_table7_without_fine_tuned_encoders_keeps_the_majority_and_paper_rows():
    """The cpu profile fine-tunes no encoder (``glue_encoders: []``): Table 7 is the majority row and the paper's."""
    from helpers.evaluation import finetune
    from helpers.evaluation.finetune_setup import finetune_config
    cfg = finetune_config({"preset": "berttime", "epochs": 1, "max_train_examples": 16, "max_eval_examples": 16})
    runs = finetune.finetune_many({}, ["cola", "rte"], cfg, "unused", 1)
    assert runs.empty and {"model", "task", "score", "ci_low", "ci_high"} <= set(runs.columns)
    majority = pd.DataFrame({"task": ["cola", "rte"], "score": [0.0, 0.5]})
    paper = pd.DataFrame({"training_data": ["baby-100M"], "cola": [40.0], "rte": [60.0]})
    t = paper_tables.glue_table(runs, ["cola", "rte"], paper, majority)
    assert list(t.index) == [paper_tables.MAJORITY_ROW, "paper: baby-100M (100M track)"]
    assert t.loc[paper_tables.MAJORITY_ROW, "GLUE avg."] == 25.0 and t.loc["paper: baby-100M (100M track)", "GLUE avg."] == 50.0
    assert paper_tables.glue_average_intervals(runs, ["cola", "rte"]) == {}
    assert paper_tables.glue_runs_table(runs).empty


def test_ours_vs_paper_reads_a_mix_of_several_seeds_as_their_mean_with_a_seed_interval():
    """The paper prints one run per mix: our mix of three seeds is compared as their mean with a t-interval over
    seeds (not the first seed with its item interval); a mix of one seed keeps its item interval."""
    from scipy.stats import t as student_t

    ours = pd.DataFrame([{"source": "ours (cpu)", "training data": name, "BLiMP": blimp, "Supp.": 50.0,
                          "EWoK": float("nan"), "GLUE": float("nan"),
                          "GLUE protocol": ""}
                         for name, blimp in [("mix", 50.0), ("mix (seed 7)", 56.0), ("mix (seed 1)", 59.0),
                                             ("solo", 61.0)]])
    item_ci = pd.DataFrame([{"model": m, "task": "BLiMP", "ci_low": v - 1, "ci_high": v + 1}
                            for m, v in [("mix", 50.0), ("mix (seed 7)", 56.0), ("mix (seed 1)", 59.0), ("solo", 61.0)]])
    arms, ci = paper_tables.arms_for_paper(ours, item_ci)
    assert list(arms["training data"]) == ["mix", "solo"] and list(arms["seeds"]) == [3, 1]
    assert arms.set_index("training data").loc["mix", "BLiMP"] == pytest.approx(55.0)  # not the first seed's 50
    half = student_t.ppf(0.975, 2) * pd.Series([50.0, 56.0, 59.0]).std() / math.sqrt(3)
    row = ci.set_index(["model", "task"]).loc[("mix", "BLiMP")]
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(55.0 - half), pytest.approx(55.0 + half))
    assert row["interval over"] == "3 seeds (t)"
    solo = ci.set_index(["model", "task"]).loc[("solo", "BLiMP")]
    assert (solo["ci_low"], solo["ci_high"], solo["interval over"]) == (60.0, 62.0, "items (one seed)")
    assert ("mix", "GLUE") not in set(zip(ci["model"], ci["task"]))  # nothing scored: no interval

    from helpers.core import config

    paper = pd.read_csv(config.repo_root() / "params" / "paper_reference" / "table2_strict_small_10m.csv")
    comp = evaluation.compare_with_paper(arms, paper, {"mix": "baby-5M + tiny-5M"}, ours_label="ours (cpu)",
                                         intervals=ci)
    comp = paper_tables.with_interval_kind(comp, ci)
    blimp = comp.set_index("benchmark").loc["BLiMP"]
    assert blimp["ours (cpu)"] == pytest.approx(55.0) and blimp["seeds"] == 3
    assert blimp["CI low"] == pytest.approx(55.0 - half) and blimp["interval over"] == "3 seeds (t)"
    assert list(comp.columns).index("seeds") == list(comp.columns).index("CI high") + 1
    glue = comp.set_index("benchmark").loc["GLUE"]  # no model of the mix scored it: no seeds, not "0 seeds"
    assert pd.isna(glue["ours (cpu)"]) and pd.isna(glue["seeds"]) and glue["interval over"] == ""


def test_ours_vs_paper_clips_a_seed_interval_to_the_accuracy_scale():
    ours = pd.DataFrame([{"training data": n, "BLiMP": v} for n, v in [("m", 2.0), ("m (seed 7)", 40.0)]])
    _, ci = paper_tables.arms_for_paper(ours, pd.DataFrame(columns=["model", "task", "ci_low", "ci_high"]))
    assert ci["ci_low"].iloc[0] == 0.0 and ci["ci_high"].iloc[0] == 100.0  # two seeds: one degree of freedom


def test_a_limit_per_task_reads_as_words():
    limit_text = paper_tables.limit_text
    assert limit_text(30) == "30" and limit_text(None) == "all"
    assert limit_text({"blimp": 30, "supplement": 200, "ewok": None}) == "BLiMP 30, Supp. 200, EWoK all"


def test_the_glue_panel_says_when_nothing_was_fine_tuned():
    import pandas as pd

    from helpers.evaluation.finetune_setup import FinetuneConfig
    from helpers.report import paper_tables as PT

    comp = pd.DataFrame({"mix": ["m", "m"], "paper mix": ["p", "p"], "benchmark": ["BLiMP", "GLUE"],
                         "ours (cpu)": [56.0, float("nan")], "paper": [62.0, 70.0]})
    assert PT.ours_ran(comp, "BLiMP") and not PT.ours_ran(comp, "GLUE")
    title = PT.glue_panel_title(FinetuneConfig(), PT.ours_ran(comp, "GLUE"))
    assert "not fine-tuned in this profile" in title and "scaled" not in title
