"""The "What this run shows" sentences (helpers.report.findings) and the tables they read, on tiny hand-made inputs."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd
import pytest

from helpers.analysis import attention_stats as A
from helpers.report import architecture_findings, findings, interpret_findings, reporting
from helpers.diversity import self_bleu
from helpers.diversity.continuation_health import continuation_health
from helpers.evaluation.zero_shot import interval_table


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
    best_dec = [x for x in s if x.startswith("the two highest decoders")][0]
    assert "a (55.0)" in best_dec and "do not overlap" in best_dec and "best" not in best_dec
    best_enc = [x for x in s if x.startswith("the two highest encoders")][0]
    assert "each lies within the other's interval" in best_enc  # 45 [41, 48] and 44 [40, 47]: a tie
    assert "BLiMP is flat across the 2 encoders (mixes)" in " ".join(findings.zero_shot(_intervals(), "BLiMP",
                                                                                        {"encoder": "mixes"}))
    assert not any("flat across the 2 decoders" in x for x in s)  # a and b are separated
    assert findings.zero_shot(_intervals(), "GLUE") == ["no GLUE results in this run"]


def test_separation_is_strict():
    df = _intervals()
    df.loc[(df.model == "b") & (df.task == "BLiMP"), "ci_high"] = 53.0  # touching intervals (53.0 vs 53.0) are not separated
    s = [x for x in findings.zero_shot(df, "BLiMP") if x.startswith("the two highest decoders")][0]
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
    curves = {"m1": {2: 0.10, 5: 0.20, 10: 0.25, 20: 0.251, 30: 0.252}, "m2": {2: 0.010, 5: 0.012, 10: 0.013, 20: 0.013, 30: 0.013},
              "m3": {2: 0.01, 5: 0.05, 10: 0.10, 20: 0.15, 30: 0.20}}
    chosen = {n: self_bleu.choose_k_or_none(c, "knee", eps=0.01) for n, c in curves.items()}
    assert chosen == {"m1": 10, "m2": None, "m3": None}
    s = findings.self_bleu(curves, chosen, 0.01)
    assert "the rule chooses k = 10" in s[0] and "flat" in s[1] and "flat" not in s[2]
    assert "no knee within k ≤ 30" in s[2] and "k = 30" not in s[2]
    assert "least diverse completions" in s[3] and "m1" in s[3].split(";")[0]


def test_continuation_health_sentences_compare_with_real_endings():
    real = [{"completion": "the end came and they were happy", "ended": True}] * 40
    loopy = [{"completion": "a b c d e f a b c d e f", "ended": False}] * 40
    health = pd.DataFrame([
        {"model": "m", "prompts": "all", **continuation_health(loopy)},
        {"model": "original endings", "prompts": "real", **continuation_health(real)},
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
    # with the block-bootstrap intervals: apart or overlapping, and the last sentence says what they cover
    t = t.assign(**{"MLM acc (stories) CI low": [0.19, 0.32], "MLM acc (stories) CI high": [0.21, 0.34],
                    "MLM acc (BabyLM) CI low": [0.05, 0.10], "MLM acc (BabyLM) CI high": [0.15, 0.14]})
    s = findings.encoders(t)
    assert s[0].endswith("intervals [0.320, 0.340] and [0.190, 0.210]: apart")
    assert "overlapping, so the order of these two is not established" in s[1]
    assert "not the run-to-run spread" in s[3]


def test_sweep_sentences():
    t = pd.DataFrame([
        {"model": "h64-l2", "hidden": 64, "layers": 2, "heads": 4, "best valid loss": 4.8},
        {"model": "h128-l2", "hidden": 128, "layers": 2, "heads": 4, "best valid loss": 4.5},
        {"model": "h64-l4", "hidden": 64, "layers": 4, "heads": 4, "best valid loss": 4.81},
        {"model": "h128-l4", "hidden": 128, "layers": 4, "heads": 4, "best valid loss": 4.4},
    ])
    s = architecture_findings.sweep(t)
    assert s[0] == "lowest held-out loss at equal tokens: h128-l4 (4.400), beyond the noise of ±0.030"
    assert "layers 2: loss falls with hidden" in s[1]
    assert any("hidden 64: loss does not change beyond noise with layers" in x for x in s)
    # a heads slice beside the grid: the grid keeps its width/depth sentences, the slice gets its own
    t = pd.concat([t, pd.DataFrame([{"model": "h128-l4-a2", "hidden": 128, "layers": 4, "heads": 2, "best valid loss": 4.6},
                                    {"model": "h256-l4", "hidden": 256, "layers": 4, "heads": 4, "best valid loss": 4.5}])])
    s = architecture_findings.sweep(t)
    assert any(x.startswith("layers 4: lowest loss over hidden: hidden 128 (4.400), beyond the noise") for x in s)
    assert any(x.startswith("hidden 128: loss falls with layers") for x in s)
    assert any("heads [2, 4] change the loss by 0.200" in x for x in s)



def test_sweep_caveat_names_the_tuned_width_lr_and_steps():
    t = pd.DataFrame([{"hidden": h, "heads": 4, "best valid loss": l} for h, l in [(64, 5.0), (128, 4.7), (256, 4.9)]]
                     + [{"hidden": 128, "heads": 2, "best valid loss": 4.0}])  # a heads slice: not the width grid
    s = architecture_findings.sweep_caveat(t, 128, 3e-3, 100)
    assert "learning rate 0.003, chosen for its hidden-128 model (the cpu profile's was tuned on it), for 100 steps" in s
    assert s.endswith("the lowest loss at hidden 128 may reflect that tuning rather than the width")
    s = architecture_findings.sweep_caveat(t.assign(**{"best valid loss": [4.6, 4.7, 4.9, 4.0]}), 128, 3e-3, 100)
    assert s.endswith("the lowest loss is nevertheless at hidden 64")

def test_interpretability_sentences():
    heads = pd.DataFrame({"model": ["m"] * 4, "layer": [0, 0, 1, 1], "label": ["positional", "content", "positional", "mixed"]})
    assert interpret_findings.attention_heads(heads) == ["m: 4 heads: 2 positional (layers 0, 1); 1 content (layer 0); "
                                                         "1 mixed (layer 1)"]
    total = pd.DataFrame([{"model": "m", "top tokens": "all", "specialists": 30, "neurons": 100, "expected neurons by chance": 2.0},
                          {"model": "m", "top tokens": "distinct", "specialists": 5, "neurons": 100, "expected neurons by chance": 4.0}])
    s = interpret_findings.specialists(total)
    assert "against a floor of 2.0 expected by chance (a floor, not a fair null" in s[0]  # notebook 06's markdown
    assert "more than chance" not in s[0]  # no verdict against a floor
    assert s[1].endswith("not clearly more than chance")
    total = total.assign(**{"top tokens": "distinct", "expected neurons by chance": 1.0})
    assert interpret_findings.specialists(total)[0].endswith(": more than chance")
    classes = {"noun": 3, "verb": 4, "adjective": 1, "name": 1, "punctuation": 1}
    total = total.assign(**classes, **{"other class": [20, 2], "specialists": [30, 12]})
    s = interpret_findings.specialists(total)
    assert 'the largest group, 20 of the 30 (67 %), are "other class"' in s[0]
    assert "other class" not in s[1]  # 2 of 12: not the bulk, not said


@pytest.mark.parametrize("eps", [0.0])
def test_choose_k_or_none_with_zero_eps_is_choose_k(eps):
    c = {2: 0.1, 5: 0.1}
    assert self_bleu.choose_k_or_none(c, "knee", eps=0.01) is None
    assert self_bleu.choose_k_or_none(c, "knee", eps=eps) == self_bleu.choose_k(c, "knee", eps=eps)


def test_average_note_marks_missing_and_scaled_benchmarks():
    from helpers.evaluation.zero_shot import average_note

    nan = float("nan")
    row = {"source": "ours", "BLiMP": 57.5, "Supp.": 53.0, "EWoK": 50.8, "GLUE": nan, "GLUE protocol": "not fine-tuned"}
    assert average_note(row) == "no average: GLUE missing"
    row.update(GLUE=45.0, **{"GLUE protocol": "scaled protocol: boolq (1 of 11 tasks)"})
    assert average_note(row) == "GLUE includes scaled protocol: boolq (1 of 11 tasks)"
    row["GLUE protocol"] = "standard"
    assert average_note(row) == ""
    assert average_note({"source": "paper", "BLiMP": 60.0, "GLUE": nan}) == ""


def _selfbleu_intervals(b_low: float, b_high: float, b_mean: float = 0.20):
    rows = [("a", 2, 0.10, 0.08, 0.12), ("a", 10, 0.30, 0.28, 0.32), ("b", 2, 0.05, 0.03, 0.07),
            ("b", 10, b_mean, b_low, b_high), ("c", 2, 0.01, 0.00, 0.02), ("c", 10, 0.02, 0.01, 0.03)]
    return pd.DataFrame([{"model": m, "k": k, "self-BLEU": v, "ci_low": lo, "ci_high": hi, "prompts": 20}
                         for m, k, v, lo, hi in rows])


def test_self_bleu_sentences_compare_models_with_intervals():
    t = _selfbleu_intervals(0.18, 0.22)  # a 0.30 [0.28, 0.32] vs b 0.20 [0.18, 0.22]: separated
    curves = {m: dict(zip(g.k, g["self-BLEU"])) for m, g in t.groupby("model", sort=False)}
    chosen = {m: self_bleu.choose_k_or_none(c, "knee", eps=0.01) for m, c in curves.items()}
    s = findings.self_bleu(curves, chosen, 0.01, t)
    ranking = [x for x in s if x.startswith("self-BLEU at k = 10")][0]
    assert "over 20 prompts" in ranking and ranking.index("a 0.300 [0.280, 0.320]") < ranking.index("b 0.200") < ranking.index("c 0.020")
    pairs = [x for x in s if " vs " in x]
    assert len(pairs) == 2 and pairs[0].startswith("a vs b at k = 10 (+0.100)") and "do not overlap" in pairs[0]
    assert pairs[1].startswith("b vs c") and "do not overlap" in pairs[1]
    assert not any("without an interval" in x for x in s)
    # b's interval reaches a's mean and a's interval reaches b's: no difference shown
    wide = _selfbleu_intervals(0.05, 0.35, 0.29)
    pair = [x for x in findings.self_bleu(curves, chosen, 0.01, wide) if x.startswith("a vs b")][0]
    assert "each lies within the other's interval" in pair
    # overlapping intervals, neither mean inside the other's interval: may be noise
    touch = _selfbleu_intervals(0.15, 0.285)
    pair = [x for x in findings.self_bleu(curves, chosen, 0.01, touch) if x.startswith("a vs b")][0]
    assert "overlap (the gap may be noise)" in pair
    # without intervals the old sentence stays, and says so
    assert "without an interval" in findings.self_bleu(curves, chosen, 0.01)[-1]


def _decoder_table(losses, best_steps=(60, 120, 120), last_steps=(90, 120, 120)):
    return pd.DataFrame([{"budget": b, "passes trained": 6.0, "best step": bs, "last step": ls,
                          "stopped early": "yes" if bs < ls else "no", "best valid loss": l, "wall time (min)": 1.5}
                         for b, l, bs, ls in zip(["s", "m", "l"], losses, best_steps, last_steps)])


def _history(valid):  # {step: loss} of validation evaluations, with a training row in between
    rows = []
    for step, loss in valid.items():
        rows += [{"step": step, "split": "train", "loss": loss + 0.5}, {"step": step, "split": "valid", "loss": loss}]
    return rows


def test_decoder_sentences_ordering_noise_and_overfitting():
    budgets = ["s", "m", "l"]
    over = {"s": _history({30: 4.2, 60: 4.0, 90: 4.1}), "m": _history({120: 3.5}), "l": _history({120: 3.0})}
    # given out of order: sorted by the budgets list
    s = findings.decoders(_decoder_table([4.0, 3.5, 3.0]).iloc[::-1], over, budgets)
    assert s[0].startswith("best held-out loss falls strictly with the budget: s 4.000 → m 3.500 → l 3.000")
    assert "+0.500, +0.500" in s[0] and "each above the ~0.03 noise level" in s[0]
    assert s[1].startswith("s: validation minimum 4.000 at step 60") and "(step 90, +0.100)" in s[1]
    assert "it overfits after 4.0 epochs" in s[1]  # 6 epochs x 60 / 90 steps
    assert len(s) == 5 and s[2].startswith("s: 6.0 passes over its data trained, best at step 60 of 90 (stopped early)")
    assert "(stopped early)" not in s[4] and s[4].endswith("1.5 min")
    # not ordered, and a step within the noise level
    s = findings.decoders(_decoder_table([4.0, 4.02, 3.0]), over, budgets)
    assert s[0].startswith("best held-out loss does NOT fall strictly") and "-0.020" in s[0] and "within the ~0.03" in s[0]
    s = findings.decoders(_decoder_table([4.0, 3.98, 3.0]), over, budgets)
    assert "falls strictly" in s[0] and "some within the ~0.03 noise level" in s[0]
    # no overfitting: the smallest budget's validation loss is lowest at its last evaluation
    flat = dict(over, s=_history({30: 4.2, 60: 4.1, 90: 4.0}))
    s = findings.decoders(_decoder_table([4.0, 3.5, 3.0], best_steps=(90, 120, 120)), flat, budgets)
    assert "lowest at its last evaluation (step 90): no overfitting visible" in s[1]
    # past the minimum, but the rise is within the noise level: not called overfitting
    slight = dict(over, s=_history({30: 4.2, 60: 4.0, 90: 4.01}))
    s = findings.decoders(_decoder_table([4.0, 3.5, 3.0]), slight, budgets)
    assert "overfits" not in s[1] and "within the ~0.03 noise level" in s[1]
    assert findings.decoders(_decoder_table([4.0, 3.5, 3.0]), over, ["x"]) == ["no decoder results in this run"]


def test_decoder_sentences_report_the_loss_gap_between_seeds_of_a_budget():
    budgets = ["s", "m", "l"]
    table = _decoder_table([4.0, 3.5, 3.0]).assign(seed=42)
    twin = table[table.budget == "l"].assign(budget="l (seed 7)", seed=7, **{"best valid loss": 3.05})
    hist = {"s": _history({30: 4.2, 60: 4.0, 90: 4.1})}
    s = findings.decoders(pd.concat([table, twin], ignore_index=True), hist, budgets)
    assert s[0].startswith("best held-out loss falls strictly with the budget: s 4.000 → m 3.500 → l 3.000")  # twins aside
    assert s[-1] == ("l under 2 seeds (42, 7): best held-out loss 3.000 / 3.050, largest gap 0.050 nats "
                     "(above the ~0.03 assumed for single runs)")
    assert not any("l (seed 7):" in x for x in s)
    assert len(findings.decoders(table, hist, budgets)) == 5  # no twin, no seed line


def test_seed_replicates_reads_the_gap_against_the_intervals():
    df = pd.DataFrame([{"kind": "encoder", "model": m, "task": "BLiMP", "pairs": 4000, "accuracy": a,
                        "ci_low": a - 1.4, "ci_high": a + 1.4} for m, a in (("m", 57.9), ("m (seed 7)", 54.6), ("n", 56.0))])
    s = findings.seed_replicates(df, {"m (seed 7)": "m"})
    assert len(s) == 1 and "a gap of 3.3 points" in s[0] and "not evidence" in s[0] and "±1.4" in s[0]
    close = findings.seed_replicates(df, {"n": "m"})[0]  # 1.9 apart: the intervals overlap
    assert "within the item intervals" in close
    assert "not scored" in findings.seed_replicates(df, {"x": "m"})[0]


def test_encoder_training_best_at_last_step_and_gen_effect_against_seed_gap():
    t = pd.DataFrame({"mix": ["b+t", "b+t (seed 7)", "b+t+gen-n1", "b+t+gen-n1 (balanced)", "x+gen-n1"],
                      "steps": [600] * 5, "best step": [600] * 5,
                      "MLM acc (stories)": [0.30, 0.31, 0.305, 0.33, 0.2], "MLM acc (BabyLM)": [0.20, 0.19, 0.201, 0.25, 0.1]})
    s = findings.encoder_training(t)
    assert s[0].startswith("best checkpoint = the last step (600) for all 5 encoders")
    assert s[1].startswith("adding gen-n1 to b+t: MLM accuracy +0.005 on stories, +0.001 on BabyLM")
    assert "+0.010 and -0.010" in s[1] and s[1].endswith("not distinguishable from run-to-run noise")
    assert s[2].startswith("adding gen-n1 (balanced) to b+t") and s[2].endswith("larger than the seed gap in both domains")
    assert len(s) == 3  # x+gen-n1 has no base mix in the table
    early = findings.encoder_training(t.assign(**{"best step": [450, 600, 600, 600, 600]}).iloc[[0, 2]])
    assert early[0] == "best checkpoint = the last step for 1 of 2 encoders (still improving); earlier for b+t (step 450 of 600)"
    assert "no seed twin" in early[1]


def _sweep_blimp(rows):
    return pd.DataFrame([{"model": m, "BLiMP": v, "BLiMP CI low": lo, "BLiMP CI high": hi} for m, v, lo, hi in rows])


def test_blimp_intervals_sentences():
    # the cpu reference run's intervals (reports/cpu/tables/02b_sweep.csv, rounded): all cover 50
    t = _sweep_blimp([("h64-l2-a4", 50.0, 47.83, 52.24), ("h128-l2-a4", 51.94, 49.63, 54.33), ("h256-l2-a4", 49.55, 47.24, 51.79)])
    s = architecture_findings.blimp_intervals(t)
    assert s[0].startswith("BLiMP 95 % intervals are ±2.2–2.3 points wide") and "3 models" in s[0]
    assert s[1].startswith("every interval covers chance (50)")
    t2 = _sweep_blimp([("a", 56.0, 54.0, 58.0), ("b", 45.0, 43.0, 47.0), ("c", 50.0, 48.0, 52.0)])
    s2 = architecture_findings.blimp_intervals(t2)
    assert not any("every interval covers chance" in x for x in s2)
    assert "above chance (50): a; below: b; the other 1 intervals cover chance" in s2[1]
    assert s2[0].startswith("BLiMP 95 % intervals are ±2.0 points wide") and "3 models" in s2[0]  # one width


def _contrast(**contrastive):
    plain = {"model": "plain", "best valid loss": 4.721, "held-out loss, original order": 4.8145, "held-out loss, shuffled": 4.8233,
             "prefers original (%)": 64.5, "prefers CI low": 57.65, "prefers CI high": 70.80, "order wins": 129,
             "order ties": 0, "order losses": 71, "themed factual": 0.0, "themed reasoning": 0.0}
    con = {**plain, "model": "contrastive", "best valid loss": 5.127, "held-out loss, original order": 5.2532,
           "held-out loss, shuffled": 5.2529, "prefers original (%)": 50.0, "prefers CI low": 43.14, "prefers CI high": 56.86,
           "order wins": 100, "order losses": 100, **contrastive}
    return pd.DataFrame([plain, con])


def test_contrastive_sentences_count_wins_ties_and_chance():
    s = architecture_findings.contrastive(_contrast())
    assert s[0].startswith("plain: gives the original story the higher log-probability in 64.5 % of 200 stories")
    assert "(129 wins, 71 losses, no ties): above chance" in s[0] and "+0.0088" in s[0]
    assert "(100 wins, 100 losses, no ties): not distinguishable from chance" in s[1] and "-0.0003" in s[1]
    assert s[2] == "contrastive − plain: best held-out loss +0.406 nats/token, order preference -14.5 points"
    assert s[3].startswith("themed suites (factual, reasoning): every score is 0 for every model")
    tied = architecture_findings.contrastive(_contrast(**{"order wins": 90, "order ties": 20, "order losses": 90}))
    assert "(90 wins, 90 losses, 20 ties (counted half))" in tied[1]
    scored = architecture_findings.contrastive(_contrast(**{"themed factual": 0.25}))
    assert not any(x.startswith("themed suites") for x in scored)
    # with interval columns (suites.suite_columns): the all-zero check reads the scores only, the sentence the bounds
    bounds = {"themed factual CI low": 0.0, "themed factual CI high": 0.30, "themed reasoning CI low": 0.0,
              "themed reasoning CI high": 0.34}
    wide = architecture_findings.contrastive(_contrast(**bounds).fillna(bounds))
    assert wide[3].startswith("themed suites (factual, reasoning): every score is 0 for every model (95 % intervals "
                              "reach at most 0.34: few prompts)")


def test_suite_columns_put_each_suite_score_beside_its_interval():
    from helpers.story_eval import suites as SE
    graded = pd.DataFrame([{"model": m, "suite": s, "id": f"{s}-{i}", "score": sc}
                           for m, per in (("b", {"factual": [0, 0, 0], "reasoning": [1, 0.5, 0]}),
                                          ("a", {"factual": [1, 1, 0], "reasoning": [0, 0, 0]}))
                           for s, scores in per.items() for i, sc in enumerate(scores)])
    graded["grade"] = graded["score"].map({1: "success", 0.5: "partial", 0: "fail"})
    summary = SE.grade_summary(graded)
    wide = SE.suite_columns(summary, prefix="themed ")
    assert wide["model"].tolist() == ["b", "a"]  # the graded table's order
    assert list(wide.columns) == ["model", "themed factual", "themed factual CI low", "themed factual CI high",
                                  "themed reasoning", "themed reasoning CI low", "themed reasoning CI high"]
    row = wide.set_index("model").loc["a"]
    assert row["themed factual"] == pytest.approx(2 / 3) and row["themed reasoning"] == 0.0
    assert row["themed reasoning CI low"] == 0.0 and row["themed reasoning CI high"] > 0.4  # 0 of 3: Wilson, not [0, 0]


def test_glue_majority_counts_results_at_or_below_the_baseline():
    runs = pd.DataFrame([
        {"model": "a", "task": "mrpc", "score": 0.81, "ci_low": 0.77, "ci_high": 0.85, "single_class": True},
        {"model": "b", "task": "mrpc", "score": 0.79, "ci_low": 0.74, "ci_high": 0.83, "single_class": False},
        {"model": "a", "task": "cola", "score": 0.05, "ci_low": -0.05, "ci_high": 0.15, "single_class": False},
        {"model": "b", "task": "cola", "score": 0.30, "ci_low": 0.20, "ci_high": 0.40, "single_class": False}])
    majority = pd.DataFrame([{"task": "mrpc", "score": 0.81}, {"task": "cola", "score": 0.0}])
    s = findings.glue_majority(runs, majority)
    assert s[0].startswith("2 of 4 task × model results are at or below") and "mrpc 2 of 2" in s[0]
    assert "1 more are above it by less than" in s[0] and "so 1 of 4 beat the baseline beyond noise (b on cola)" in s[0]
    assert s[1] == "1 of 4 runs predict a single class for every test example (a on mrpc)"
    assert "not recorded" in findings.glue_majority(runs.drop(columns="single_class"), majority)[1]
    # every run at or below the baseline (the paper-sim run: cola -0.25, rte at chance): nothing above, no error
    low = runs.assign(score=[0.5, 0.5, -0.25, 0.0], ci_low=[0.3, 0.3, -0.5, -0.1])
    s = findings.glue_majority(low, majority)
    assert s[0].startswith("4 of 4 task × model results are at or below") and "so 0 of 4 beat the baseline" in s[0]


def test_data_budget_sentences():
    stats = pd.DataFrame([
        {"corpus": "TinyStories train", "units": 7043, "words": 1163603, "median words/unit": 147.0},
        {"corpus": "BabyLM: a", "units": 10, "words": 500, "median words/unit": 50.0},
        {"corpus": "BabyLM: b", "units": 20, "words": 700, "median words/unit": 30.0},
        {"corpus": "BabyLM (all)", "units": 30, "words": 1200, "median words/unit": 40.0}])
    repairs = pd.DataFrame([{"corpus": "TinyStories train", "units": "stories", "count": 7043, "repaired (mojibake)": 0},
                            {"corpus": "TinyStories valid", "units": "paragraphs", "count": 4302, "repaired (mojibake)": 109}])
    table = pd.DataFrame([{"budget (this profile)": "500k", "stands for (×10)": "5M", "in the paper": "yes"},
                          {"budget (this profile)": "125k", "stands for (×10)": "1.25M", "in the paper": "no"}])
    mixes = pd.DataFrame([{"mix": "tiny-1M", "rule": "fits"}, {"mix": "baby-500k + tiny-1M", "rule": "refused"}])
    toks = pd.DataFrame([{"tokens/word": 1.2475, "round-trip failures": 0}, {"tokens/word": 1.2637, "round-trip failures": 0}])
    s = findings.data_budgets(stats, repairs, table, mixes, toks, 10)
    assert s[0] == ("TinyStories: 7,043 stories, 1,163,603 words (median story 147 words); BabyLM-like text: 30 documents, "
                    "1,200 words from 2 sources")
    assert s[1] == "mojibake repaired: 109 of 4,302 paragraphs of TinyStories valid"
    assert "500k stands for 5M, 125k stands for 1.25M; 1 of them (5M) are budgets the paper trained" in s[2]
    assert s[3] == "challenge rule: 1 of 2 mixes fit the track budget; refused: baby-500k + tiny-1M"
    assert s[4] == "tokenizers: 1.25-1.26 tokens per word; every training story decodes back to itself"
    toks.loc[0, "round-trip failures"] = 3
    assert "3 stories do not decode back" in findings.data_budgets(stats, repairs, table, mixes, toks, 10)[4]


def test_evaluation_summary_sentences():
    from helpers.report import eval_findings

    rows = []
    for kind, model, blimp, supp in [("decoder", "d1", (51.0, 50.6, 51.4), (49.0, 45.0, 53.0)),
                                     ("encoder", "base", (58.0, 57.0, 59.0), (53.0, 48.0, 58.0)),
                                     ("encoder", "base (seed 7)", (55.0, 54.0, 56.0), (52.0, 47.0, 57.0)),
                                     ("encoder", "gen", (56.0, 55.0, 57.0), (52.5, 47.0, 58.0))]:
        rows += [{"kind": kind, "model": model, "task": "BLiMP", "accuracy": blimp[0], "ci_low": blimp[1], "ci_high": blimp[2]},
                 {"kind": kind, "model": model, "task": "Supp.", "accuracy": supp[0], "ci_low": supp[1], "ci_high": supp[2]}]
    iv = pd.DataFrame(rows)
    glue = {"base": (47.0, 45.0, 49.0), "gen": (43.0, 41.0, 44.5)}
    comp = pd.DataFrame({"ours (cpu)": [58.0, 53.0, 60.0], "paper": [62.6, 60.8, float("nan")]})
    s = eval_findings.evaluation(iv, glue, 44.0, [("base", "gen")], {"base (seed 7)": "base"}, comp, 10)
    assert s[0] == "BLiMP, decoders: 1 of 1 above chance (50) beyond their 95 % interval (d1); accuracies 51.0-51.0"
    assert s[1].startswith("BLiMP, encoders: 3 of 3 above chance")
    assert s[2].startswith("Supp., decoders: 0 of 1 above chance") and "(none)" in s[2]
    assert "base 47.0 [45.0, 49.0] above majority; gen 43.0 [41.0, 44.5] not apart from majority" in s[4]
    # BLiMP -2.0 has apart intervals but lies inside the 3-point seed gap; GLUE -4.0 is apart (no seed gap for GLUE)
    assert s[5].startswith("generated stories (gen minus base): BLiMP -2.0, Supp. -0.5, GLUE -4.0 points; "
                           "beyond the item intervals and one pair of seeds' gap (a rough screen, not a test): GLUE")
    assert s[5].endswith("two seeds of one mix lie BLiMP 3.0, Supp. 1.0 points apart")
    assert s[6] == ("against the authors' rows (trained on 10x our words, with a larger model): ours are lower in 2 of 2 "
                    "printed comparisons, by a median of 6.2 points")
    # with the seed-7 twin fine-tuned, GLUE has its own seed gap: a 4.0 drop beyond a 5.0 gap is not an effect
    twin = eval_findings.evaluation(iv, {**glue, "base (seed 7)": (42.0, 40.0, 44.0)}, 44.0, [("base", "gen")],
                                    {"base (seed 7)": "base"})
    gen = next(x for x in twin if x.startswith("generated stories"))
    assert "none beyond both the item intervals and one pair of seeds' gap" in gen and "no effect" not in gen
    assert gen.endswith("two seeds of one mix lie BLiMP 3.0, Supp. 1.0, GLUE 5.0 points apart")
    iv2 = iv.copy()
    iv2.loc[(iv2.model == "gen") & (iv2.task == "BLiMP"), ["accuracy", "ci_low", "ci_high"]] = [57.5, 56.5, 58.5]
    s = eval_findings.evaluation(iv2, None, None, [("base", "gen")], {"base (seed 7)": "base"})
    assert "none beyond both the item intervals and one pair of seeds' gap" in s[-1]
    # with a questions table, the D_gen question is answered over seeds and the one-pair screen is not printed
    q = pd.DataFrame([{"question": "D_gen", "A": "gen", "B": "base", "task": "BLiMP", "items": 100, "effect": -0.5,
                       "seed CI low": float("nan"), "seed CI high": float("nan"), "seeds A": 1, "seeds B": 2,
                       "item CI low": -1.0, "item CI high": 0.2, "unit": "points",
                       "verdict": "untestable here: 1 vs 2 seeds per arm"}])
    s = eval_findings.evaluation(iv2, None, None, [("base", "gen")], {"base (seed 7)": "base"}, questions=q)
    assert not any(x.startswith("generated stories") for x in s)
    assert s[-1].startswith("D_gen (gen minus base, BLiMP, 100 shared items): -0.5 points, no seed-level interval (1 and 2")


def test_generated_pairs_are_mixes_that_add_generated_stories_to_another_mix():
    from helpers.report.paper_tables import generated_pairs

    enc = ["baby-1M", "b+t", "b+t (seed 7)", "b+t+gen-nucleus-1", "b+t+gen-nucleus-1 (balanced)", "x+gen-greedy"]
    assert generated_pairs(enc) == [("b+t", "b+t+gen-nucleus-1")]  # x is not an encoder of the list
    assert generated_pairs(["baby-40k", "baby-20k+tiny-20k+gen-nucleus-1"]) == []


def test_story_evaluation_sentences():
    from helpers.report import eval_findings

    judge = pd.DataFrame([{"model": "a", "decoding": "greedy", "creativity": 4.1, "creativity low": 4.0, "creativity high": 4.2},
                          {"model": "b", "decoding": "greedy", "creativity": 4.5, "creativity low": 4.3, "creativity high": 4.7}])
    themed = pd.DataFrame([{"model": "a", "suite": "factual", "score": 0.0, "score CI low": 0.0, "score CI high": 0.0},
                           {"model": "b", "suite": "factual", "score": 0.3, "score CI low": 0.1, "score CI high": 0.5}])
    inst = pd.DataFrame([{"prompts": "p", "model": "plain", "share of required words used": 0.16, "required low": 0.14,
                          "required high": 0.19, "chance (words of another prompt)": 0.13, "chance low": 0.10, "chance high": 0.15},
                         {"prompts": "p", "model": "instruct", "share of required words used": 0.30, "required low": 0.25,
                          "required high": 0.35, "chance (words of another prompt)": 0.17, "chance low": 0.15, "chance high": 0.20}])
    s = eval_findings.story_evaluation(judge, ["creativity"], themed, inst)
    assert s[0] == ("judge, creativity (greedy), the largest and smallest means: b 4.50 [4.30, 4.70], a 4.10 "
                    "[4.00, 4.20]: b above a on these graded stories (intervals apart)")
    # no per-prompt grades: nothing separates the models, so none is called the best
    assert s[1].startswith("themed factual (scores of 1): score: tied") and "1 of 2 models' intervals exclude 0" in s[1]
    assert s[2] == "required words used, p prompts: plain 0.16 vs chance 0.13 (not above); instruct 0.30 vs chance 0.17 (above)"
    judge.loc[1, "creativity low"] = 4.15
    assert "not ranked by this judge" in eval_findings.story_evaluation(judge, ["creativity"], themed)[0]
    assert eval_findings.story_evaluation(None, [], themed)[0] == "no judge grades in this run"


def test_themed_best_only_beyond_a_paired_interval_over_prompts():
    """A "best" model on a themed suite whose interval overlaps every other is "tied"; a leader ahead on the
    same prompts by a paired interval that excludes 0 is the highest."""
    from helpers.report import eval_findings

    ids = [f"f-{i}" for i in range(30)]
    lead = [1.0] * 20 + [0.5] * 10
    graded = pd.DataFrame([{"model": m, "suite": "factual", "id": i, "score": v} for m, vals in
                           (("a", lead), ("b", [0.0] * 30), ("c", [0.0] * 28 + [1.0, 1.0])) for i, v in zip(ids, vals)])
    themed = graded.groupby(["model", "suite"], as_index=False)["score"].mean().assign(
        **{"score CI low": 0.0, "score CI high": 1.0})
    s = eval_findings.story_evaluation(None, [], themed, graded=graded)[1]
    assert s.startswith("themed factual (scores of 1): highest score: a (0.83), beyond its paired intervals")
    close = graded.assign(score=graded.score.where(~((graded.model == "b") & graded.id.isin(ids[:24])), 1.0))
    themed2 = close.groupby(["model", "suite"], as_index=False)["score"].mean().assign(
        **{"score CI low": 0.0, "score CI high": 1.0})
    s2 = eval_findings.story_evaluation(None, [], themed2, graded=close)[1]
    assert "tied within their paired intervals" in s2 and "no model is the best" in s2


def test_encoders_above_chance_only_where_both_pll_reductions_agree():
    """baby-1M above chance under the mean PLL but not the sum is not counted above chance, and the sentence
    names the reduction it hangs on; decoders keep their one interval."""
    from helpers.report import eval_findings

    iv = pd.DataFrame([{"kind": "decoder", "model": "d", "task": "BLiMP", "pairs": 100, "accuracy": 53.0, "ci_low": 51.0, "ci_high": 55.0},
                       {"kind": "encoder", "model": "e1", "task": "BLiMP", "pairs": 100, "accuracy": 56.0, "ci_low": 54.0, "ci_high": 58.0},
                       {"kind": "encoder", "model": "e2", "task": "BLiMP", "pairs": 100, "accuracy": 57.0, "ci_low": 55.0, "ci_high": 59.0}])
    red = pd.DataFrame([{"kind": "encoder", "model": "e1", "task": "BLiMP", "mean low": 54.0, "mean high": 58.0,
                         "sum low": 49.4, "sum high": 53.7},
                        {"kind": "encoder", "model": "e2", "task": "BLiMP", "mean low": 55.0, "mean high": 59.0,
                         "sum low": 51.0, "sum high": 55.0}])
    s = eval_findings.evaluation(iv, reductions=red)
    assert s[0].startswith("BLiMP, decoders: 1 of 1 above chance (50) beyond their 95 % interval (d)")
    assert s[1].startswith("BLiMP, encoders: 1 of 2 above chance (50) beyond their 95 % interval under both PLL "
                           "reductions") and "(e2)" in s[1]
    assert s[1].endswith("above chance under one reduction only, so not called above chance: e1 (mean)")
    z = findings.zero_shot(iv, "BLiMP", reductions=red)
    assert "encoder e1: BLiMP 56.0 [54.0, 58.0] on 100 pairs: above chance under mean only (not under sum)" in z
    assert "encoder e2: BLiMP 57.0 [55.0, 59.0] on 100 pairs: above chance" in z


def test_power_law_sentence_reads_the_exponent_interval():
    from helpers.analysis.architecture import fit_power_law
    c = [1e12, 2e12, 4e12, 8e12, 16e12]
    fit = fit_power_law(c, [5.0 * (x / 1e12) ** -0.1 * (1 + 0.002 * (-1) ** i) for i, x in enumerate(c)])
    s = architecture_findings.power_law(fit)
    assert "on the 5 frontier points" in s and "the loss falls with compute" in s
    flat = fit_power_law(c, [5.0, 5.1, 4.9, 5.05, 4.95])  # no trend: the interval covers 0
    assert "the interval covers 0: no scaling is shown" in architecture_findings.power_law(flat)
    two = fit_power_law(c[:2], [5.0, 4.8])
    assert "too few for an interval" in architecture_findings.power_law(two)


def test_compressor_and_memory_sentences():
    col = "held-out loss, tokens 2..T-1"
    t = pd.DataFrame([{"model": "GPT-Neo", "parameters": 1_000_000, col: 4.72},
                      {"model": "compressor", "parameters": 1_160_000, col: 5.49}])
    s = architecture_findings.compressor(t, 100)
    assert s == ["compressor − GPT-Neo held-out loss on the same tokens: +0.770 nats/token (worse; one run each, "
                 "differences under 0.03 nats count as noise), with 1.16× the parameters and the same 100 steps"]
    assert "(within noise;" in architecture_findings.compressor(t.assign(**{col: [4.72, 4.70]}), 100)[0]
    assert "(better;" in architecture_findings.compressor(t.assign(**{col: [4.72, 4.60]}), 100)[0]
    assert "no GPT-Neo twin" in architecture_findings.compressor(t.iloc[1:], 100)[0]
    # the cpu reference run's ratios (reports/cpu/tables/02b_memory_ratio.csv, rounded)
    r = pd.DataFrame({"width": [128, 128, 128, 256, 256, 256], "batch": [2, 8, 32, 2, 8, 32],
                      "compressor / GPT-Neo": [0.80, 0.82, 0.83, 0.52, 0.70, 0.76]})
    m = architecture_findings.memory(r)
    assert m[0].startswith("peak training memory, compressor / GPT-Neo: 0.52–0.83 over 6 (width, batch) sizes; ratio: tied")
    assert m[0].endswith("(no size has the largest saving)")  # ratios without their MB peaks: nothing separates them
    mb = pd.DataFrame({"width": r.width, "batch": r.batch, "compressor": [32.0, 139.0, 561.0, 25.0, 163.0, 724.0],
                       "gpt-neo": [40.0, 170.0, 672.0, 56.0, 233.0, 953.0]})
    mb["compressor / GPT-Neo"] = mb.compressor / mb["gpt-neo"]
    assert architecture_findings.memory(mb)[0].endswith(
        "the largest saving (55%) at width 256, batch 2, beyond the other sizes with both peaks moved by ±5 MB")
    assert "no size has the largest saving beyond ±20 MB" in architecture_findings.memory(mb, noise_mb=20)[0]
    assert m[1].startswith("width 128: the saving shrinks as the batch grows (batch 2 0.80 → batch 8 0.82")
    assert architecture_findings.memory(r.assign(**{"compressor / GPT-Neo": [0.9, 0.8, 0.85, 0.5, 0.4, 0.3]}))[2] \
        .startswith("width 256: the saving grows")
    assert "is not monotone" in architecture_findings.memory(r.assign(**{"compressor / GPT-Neo": [0.9, 0.8, 0.85, 0.5, 0.4, 0.3]}))[1]
    assert architecture_findings.memory(pd.DataFrame())[0].startswith("no memory ratio")


def _summary(small_spec, large_spec, n=2048):
    from helpers.analysis.interpret_tables import specialist_totals
    per_layer = pd.DataFrame([{"model": m, "top tokens": "distinct", "layer": layer, "noun": k // 2, "verb": 0, "adjective": 0,
                               "name": 0, "punctuation": 0, "other class": k - k // 2, "specialists": k, "neurons": n // 2,
                               "expected neurons by chance": 35.0}
                              for m, total in (("s", small_spec), ("l", large_spec))
                              for layer, k in ((0, total // 2), (1, total - total // 2))])
    return specialist_totals(per_layer)


def test_specialist_totals_sum_layers_and_add_wilson_intervals():
    from helpers.core.stats import wilson_interval
    t = _summary(507, 473)
    s = t.set_index("model").loc["s"]
    assert (s.specialists, s.neurons, s["expected neurons by chance"], s.noun) == (507, 2048, 70.0, 126 + 127)
    assert s["share of neurons"] == 507 / 2048 and s["expected share by chance"] == 70.0 / 2048
    assert (s["share CI low"], s["share CI high"]) == wilson_interval(507, 2048)


def test_specialist_comparison_needs_apart_intervals():
    # the cpu reference run: 507 vs 473 of 2,048 (24.8 % vs 23.1 %): the intervals overlap
    s = interpret_findings.specialist_comparison(_summary(507, 473), "s", "l")
    assert len(s) == 1 and s[0].startswith("distinct top tokens, specialists per neuron: the larger model (l) and the "
                                          "smaller (s) not shown apart on these neurons")
    assert "as many" not in s[0] and "23% [" in s[0] and "Wilson intervals over neurons" in s[0]
    assert "(l) below the smaller (s)" in interpret_findings.specialist_comparison(_summary(600, 400), "s", "l")[0]
    assert "(l) above the smaller (s)" in interpret_findings.specialist_comparison(_summary(400, 600), "s", "l")[0]
    assert interpret_findings.specialist_comparison(_summary(400, 600), "s", "missing") == []


def test_head_and_paper_observation_lines():
    heads = pd.DataFrame({"model": ["m"] * 3, "layer": [0, 0, 1], "head": [0, 1, 0],
                          "label": ["positional", "semantic", "semantic"], "r (lower triangle)": [-0.6, -0.1, 0.2],
                          "r (full matrix)": [-0.3, -0.3, -0.2], "weight at top offset": [0.2, 0.7, 0.1],
                          "top offset": [3, 1, 0], "start-token weight": [0.1, 0.2, 0.3]})
    heads["offset η²"] = [0.8, 0.2, 0.1]
    heads["label (|r| > 0.5 rule)"] = ["positional", "semantic", "semantic"]
    s = interpret_findings.head_lines(heads, 0.7, A.reference_heads(100), 100)
    assert s[0].startswith("known-answer check on synthetic heads (100 tokens): the graded classes get 10 of 10 right; "
                           "the |r| > 0.5 rule gets 9 of 10")
    assert s[1].startswith("m: offset η² 0.10 … 0.80 (positional from 0.7); 1 positional by |r| > 0.5; r ranges -0.60 … +0.20")
    assert "1 heads put ≥ 50 % of their attention on one fixed offset (L0H1: 1 back)" in s[1]
    assert s[1].endswith("mean start-token weight 0.20")
    check = pd.DataFrame([{"model": "m", "grouping": "span", "short-range: determiner+punctuation": 0.32,
                           "long-range: determiner+punctuation": 0.29, "base: determiner+punctuation": 0.27,
                           "short-range: name+noun": 0.18, "long-range: name+noun": 0.22, "base: name+noun": 0.18,
                           "function words nearer": 0.03, "function words nearer CI low": -0.01,
                           "function words nearer CI high": 0.07, "names/nouns farther": 0.04,
                           "names/nouns farther CI low": 0.01, "names/nouns farther CI high": 0.07}])
    s = interpret_findings.paper_pattern(check)[0]
    assert s.endswith("→ the paper's pattern holds in one half only") and "not shown, 0.03 [-0.01, 0.07]" in s
    both = check.assign(**{"function words nearer CI low": 0.005})
    assert interpret_findings.paper_pattern(both)[0].endswith("→ the paper's pattern holds")
    # "32 % vs 29 %" with no interval is not a pattern that holds
    bare = check.drop(columns=[c for c in check.columns if " CI " in c])
    s = interpret_findings.paper_pattern(bare)[0]
    assert ": holds," not in s and "whether it holds is not tested" in s and s.endswith("→ the paper's pattern is not shown")
    assert interpret_findings.paper_pattern(check.iloc[:0])[0].startswith("no model has both groups")


def test_encoder_training_answers_the_gen_effect_over_paired_seeds():
    """Several seeds in both arms: the generated-data effect gets a t-interval over the seeds' differences (one line
    per arm, not one per seed), and the last sentence of encoders() counts seeds instead of 'single runs'."""
    seeds = [42, 7, 1, 2]
    name = lambda arm, k: arm if k == 42 else f"{arm} (seed {k})"
    base_s, base_b = [0.30, 0.29, 0.31, 0.30], [0.20, 0.21, 0.20, 0.19]
    rows = [{"mix": name("b+t", k), "MLM acc (stories)": a, "MLM acc (BabyLM)": b} for k, a, b in zip(seeds, base_s, base_b)]
    # +0.02 on stories in every seed (an effect); BabyLM differences change sign (none)
    rows += [{"mix": name("b+t+gen-n1", k), "MLM acc (stories)": a + 0.02 + d, "MLM acc (BabyLM)": b + e}
             for k, a, b, d, e in zip(seeds, base_s, base_b, [0.001, -0.001, 0.002, 0.0], [0.01, -0.01, 0.005, -0.006])]
    t = pd.DataFrame(rows).assign(steps=600, **{"best step": 600})
    s = findings.encoder_training(t)
    assert len(s) == 2 and s[1].startswith("adding gen-n1 to b+t, paired over 4 seeds: MLM accuracy +0.021 on stories")
    assert s[1].endswith("an effect on stories")
    last = findings.encoders(t)[-1]
    assert last.startswith("8 encoders from 2 mixes (b+t: 4 seeds, b+t+gen-n1: 4 seeds")
