"""The "What this run shows" sentences (helpers.findings) and the tables they read, on tiny hand-made inputs."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd
import pytest

from helpers import diversity, findings, reporting
from helpers.evaluation import interval_table


def _intervals():
    return pd.DataFrame([
        {"kind": "decoder", "model": "a", "task": "BLiMP", "pairs": 1000, "accuracy": 55.0, "ci_low": 53.0, "ci_high": 57.0},
        {"kind": "decoder", "model": "b", "task": "BLiMP", "pairs": 1000, "accuracy": 50.5, "ci_low": 48.0, "ci_high": 52.5},
        {"kind": "encoder", "model": "c", "task": "BLiMP", "pairs": 300, "accuracy": 45.0, "ci_low": 41.0, "ci_high": 48.0},
        {"kind": "encoder", "model": "d", "task": "BLiMP", "pairs": 300, "accuracy": 44.0, "ci_low": 40.0, "ci_high": 47.0},
        {"kind": "decoder", "model": "a", "task": "EWoK", "pairs": 50, "accuracy": 60.0, "ci_low": 40.0, "ci_high": 75.0},
    ])


def test_chance_verdicts():
    assert findings.chance_verdict(50.1, 55) == "yes"
    assert findings.chance_verdict(45, 49.9) == "below"
    assert findings.chance_verdict(49, 51) == "no"


def test_zero_shot_sentences_follow_the_intervals():
    s = findings.zero_shot(_intervals(), "BLiMP")
    assert any(x.startswith("decoder a:") and "above chance" in x for x in s)
    assert any(x.startswith("decoder b:") and "not distinguishable from chance" in x for x in s)
    assert any(x.startswith("encoder c:") and "below chance" in x for x in s)
    best_dec = [x for x in s if x.startswith("best decoder")][0]
    assert "a (55.0)" in best_dec and "do not overlap" in best_dec
    best_enc = [x for x in s if x.startswith("best encoder")][0]
    assert "overlap (the gap may be noise)" in best_enc
    assert findings.zero_shot(_intervals(), "GLUE") == ["no GLUE results in this run"]


def test_separation_is_strict():
    df = _intervals()
    df.loc[(df.model == "b") & (df.task == "BLiMP"), "ci_high"] = 53.0  # touching intervals (53.0 vs 53.0) are not separated
    s = [x for x in findings.zero_shot(df, "BLiMP") if x.startswith("best decoder")][0]
    assert "may be noise" in s


def test_interval_table_and_plot():
    class R:  # the by_task frame of an EvalResult
        def __init__(self, rows):
            self.by_task = pd.DataFrame(rows)

    res = {("decoder", "x"): R([{"task": "blimp", "pairs": 10, "accuracy": 70.0, "ci_low": 60.0, "ci_high": 80.0}]),
           ("encoder", "y"): R([{"task": "blimp", "pairs": 10, "accuracy": 40.0, "ci_low": 30.0, "ci_high": 49.0}])}
    t = interval_table(res)
    assert list(t["above chance"]) == ["yes", "below"]
    assert list(t.task) == ["BLiMP", "BLiMP"]
    fig = reporting.plot_intervals(t, order=list(res), title="t")
    ax = fig.axes[0]
    assert any(line.get_linestyle() == "--" and list(line.get_xdata()) == [50, 50] for line in ax.lines)  # chance
    assert "10 pairs" in ax.get_title()


def test_self_bleu_sentences_and_flat_rule():
    curves = {"m1": {2: 0.10, 5: 0.20, 10: 0.25, 20: 0.251}, "m2": {2: 0.010, 5: 0.012, 10: 0.013, 20: 0.013}}
    chosen = {n: diversity.choose_k_or_none(c, "knee", eps=0.01) for n, c in curves.items()}
    assert chosen["m2"] is None and chosen["m1"] == diversity.choose_k(curves["m1"], "knee", eps=0.01)
    s = findings.self_bleu(curves, chosen, 0.01)
    assert "the rule chooses k = " in s[0] and "flat" in s[1]
    assert "least diverse completions" in s[2] and "m1" in s[2].split(";")[0]


def test_continuation_health_sentences_compare_with_real_endings():
    real = [{"completion": "the end came and they were happy", "ended": True}] * 40
    loopy = [{"completion": "a b c d e f a b c d e f", "ended": False}] * 40
    health = pd.DataFrame([
        {"model": "m", "prompts": "all", **diversity.continuation_health(loopy)},
        {"model": "original endings", "prompts": "real", **diversity.continuation_health(real)},
    ])
    s = findings.continuation_health(health, "all", reference="original endings")
    assert len(s) == 1 and "0 % [" in s[0] and "100 % [" in s[0] and "more than real endings: 0 %" in s[0]


def test_encoder_sentences():
    t = pd.DataFrame([{"mix": "baby-1M", "MLM acc (stories)": 0.2, "MLM acc (BabyLM)": 0.22},
                      {"mix": "tiny-1M", "MLM acc (stories)": 0.33, "MLM acc (BabyLM)": 0.12}])
    s = findings.encoders(t)
    assert "0.330 (tiny-1M)" in s[0] and "0.220 (baby-1M)" in s[1]
    assert "its own domain: yes" in s[2]
    assert "on the validation blocks per domain" in s[3] and "on 64 validation blocks" in findings.encoders(t, 64)[3]
    t.loc[0, "MLM acc (BabyLM)"] = 0.1
    assert "its own domain: no" in findings.encoders(t)[2]


def test_sweep_sentences():
    t = pd.DataFrame([
        {"model": "h64-l2", "hidden": 64, "layers": 2, "heads": 4, "best valid loss": 4.8},
        {"model": "h128-l2", "hidden": 128, "layers": 2, "heads": 4, "best valid loss": 4.5},
        {"model": "h64-l4", "hidden": 64, "layers": 4, "heads": 4, "best valid loss": 4.81},
        {"model": "h128-l4", "hidden": 128, "layers": 4, "heads": 4, "best valid loss": 4.4},
    ])
    s = findings.sweep(t)
    assert s[0] == "lowest held-out loss at equal tokens: h128-l4 (4.400)"
    assert "layers 2: loss falls with hidden" in s[1]
    assert any("hidden 64: loss does not change beyond noise with layers" in x for x in s)
    # a heads slice beside the grid: the grid keeps its width/depth sentences, the slice gets its own
    t = pd.concat([t, pd.DataFrame([{"model": "h128-l4-a2", "hidden": 128, "layers": 4, "heads": 2, "best valid loss": 4.6},
                                    {"model": "h256-l4", "hidden": 256, "layers": 4, "heads": 4, "best valid loss": 4.5}])])
    s = findings.sweep(t)
    assert any(x.startswith("layers 4: loss is lowest at hidden 128") for x in s)
    assert any(x.startswith("hidden 128: loss falls with layers") for x in s)
    assert any("heads [2, 4] change the loss by 0.200" in x for x in s)


def test_interpretability_sentences():
    heads = pd.DataFrame({"model": ["m"] * 4, "layer": [0, 0, 1, 1], "label": ["positional", "semantic", "positional", "semantic"]})
    assert findings.attention_heads(heads) == ["m: 2 of 4 heads positional (layer 0, layer 1); 2 semantic or mixed"]
    total = pd.DataFrame([{"model": "m", "top tokens": "all", "specialists": 30, "neurons": 100, "expected by chance": 2.0},
                          {"model": "m", "top tokens": "distinct", "specialists": 5, "neurons": 100, "expected by chance": 4.0}])
    s = findings.specialists(total)
    assert s[0].endswith("more than chance") and "not clearly" not in s[0]
    assert s[1].endswith("not clearly more than chance")


@pytest.mark.parametrize("eps", [0.0])
def test_choose_k_or_none_with_zero_eps_is_choose_k(eps):
    c = {2: 0.1, 5: 0.1}
    assert diversity.choose_k_or_none(c, "knee", eps=0.01) is None
    assert diversity.choose_k_or_none(c, "knee", eps=eps) == diversity.choose_k(c, "knee", eps=eps)


def test_average_note_marks_missing_and_scaled_benchmarks():
    from helpers.evaluation import average_note

    nan = float("nan")
    row = {"source": "ours", "BLiMP": 57.5, "Supp.": 53.0, "EWoK": 50.8, "GLUE": nan, "GLUE protocol": "not fine-tuned"}
    assert average_note(row) == "over 3 of 4 benchmarks (GLUE missing)"
    row.update(GLUE=45.0, **{"GLUE protocol": "scaled protocol: boolq (1 of 11 tasks)"})
    assert average_note(row) == "GLUE includes scaled protocol: boolq (1 of 11 tasks)"
    row["GLUE protocol"] = "standard"
    assert average_note(row) == ""
    assert average_note({"source": "paper", "BLiMP": 60.0, "GLUE": nan}) == ""
