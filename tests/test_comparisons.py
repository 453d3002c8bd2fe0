"""Comparisons of two models: paired over items, t-intervals over seeds, the minimum detectable effect, Holm's
correction, and the verdicts that decide whether a difference is real (known answers on toy data)."""
import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest, ttest_1samp

from helpers.core import stats as S
from helpers.evaluation import comparisons as C
from helpers.report import eval_findings, findings


def test_mcnemar_counts_discordant_pairs_and_matches_the_binomial_test():
    a = np.array([1] * 8 + [0] * 2 + [1] * 30 + [0] * 60)
    b = np.array([0] * 8 + [1] * 2 + [1] * 30 + [0] * 60)
    ab, ba, p = S.mcnemar_exact(a, b)
    assert (ab, ba) == (8, 2)
    assert p == pytest.approx(binomtest(8, 10, 0.5).pvalue)
    assert S.mcnemar_exact(a, a)[2] == 1.0
    with pytest.raises(ValueError, match="0/1"):
        S.mcnemar_exact(a * 0.5, b)


def test_t_interval_known_values_and_one_seed_gives_no_interval():
    mean, lo, hi, n, sd = S.t_interval([1.0, 2.0, 3.0])
    assert (mean, n, sd) == (2.0, 3, 1.0)
    assert hi - mean == pytest.approx(4.302653 / np.sqrt(3), rel=1e-5)
    m1, lo1, hi1, n1, _ = S.t_interval([5.0])
    assert m1 == 5.0 and n1 == 1 and np.isnan(lo1) and np.isnan(hi1)


def test_minimum_detectable_effect_has_about_the_stated_power():
    """At a true paired difference equal to the MDE, a paired t-test at 5 % rejects about 80 % of the time (exactly:
    tests/test_stats.py simulates 20,000 experiments for n = 2, 3, 5)."""
    rng = np.random.default_rng(0)
    sd, n = 2.0, 6
    mde = S.minimum_detectable_effect(sd, n, paired=True)
    d = rng.normal(mde, sd, (4000, n))
    hits = (ttest_1samp(d, 0.0, axis=1).pvalue < 0.05).mean()
    assert 0.77 < hits < 0.83
    assert S.minimum_detectable_effect(sd, 1) != S.minimum_detectable_effect(sd, 1)  # NaN with one seed
    assert S.minimum_detectable_effect(sd, 4, paired=False) > S.minimum_detectable_effect(sd, 4, paired=True)


def test_holm_step_down():
    assert list(S.holm([0.01, 0.04, 0.03, 0.2])) == [True, False, False, False]
    assert list(S.holm([0.001, 0.012, 0.04])) == [True, True, True]  # 0.001<=.05/3, 0.012<=.025, 0.04<=.05
    assert list(S.holm([np.nan, 0.01])) == [False, True]


def test_paired_bootstrap_cancels_what_the_items_share():
    rng = np.random.default_rng(1)
    hard = rng.normal(0, 5, 400)  # item difficulty shared by both models
    a, b = hard + 0.3 + rng.normal(0, 0.1, 400), hard + rng.normal(0, 0.1, 400)
    d, lo, hi = S.paired_bootstrap_difference(a, b)
    assert lo > 0 and d == pytest.approx(0.3, abs=0.05)


def _rows(arm, seeds_acc, n_items=4000, task="BLiMP", seed=0):
    """0/1 item scores whose mean is exactly ``acc`` per seed (a random set of items right)."""
    rng = np.random.default_rng(seed)
    frames = []
    for s, acc in seeds_acc.items():
        v = np.zeros(n_items)
        v[rng.permutation(n_items)[: int(round(acc * n_items))]] = 1
        model = arm if s == 42 else f"{arm} (seed {s})"
        frames.append(pd.DataFrame({"model": model, "arm": arm, "seed": s, "task": task,
                                    "item": [f"p/{i}" for i in range(n_items)], "value": v}))
    return pd.concat(frames, ignore_index=True)


def test_items_separate_but_seeds_do_not_is_no_effect():
    """A toy case where the item interval excludes 0 but seed-to-seed differences change sign: not an effect, and
    the verdict reads its own seed interval (the MDE stays a column: it describes the design, not the result)."""
    rows = pd.concat([_rows("A", {42: 0.60, 1: 0.52, 2: 0.59}, seed=1), _rows("B", {42: 0.54, 1: 0.54, 2: 0.54}, seed=2)])
    r = C.compare_arms(rows, "A", "B", "BLiMP")
    assert r["item CI low"] > 0  # the items alone would call it real
    assert r["seed CI low"] < 0 < r["seed CI high"] and r["paired seeds"] == 3
    assert r["verdict"].startswith(f"not shown: effect {r['effect']:+.1f} points, in [{r['seed CI low']:+.1f}, "
                                   f"{r['seed CI high']:+.1f}] (95 % over 3 seeds)")
    assert "no effect larger than" not in r["verdict"] and "no equivalence margin set" in r["verdict"]
    lines = eval_findings.question_lines(C.questions_table(rows, [{"question": "q", "a": "A", "b": "B", "task": "BLiMP"}]))
    assert len(lines) == 1 and "real" not in lines[0] and "no effect larger than" not in lines[0]
    assert "not shown: effect" in lines[0]


def test_items_and_seeds_separate_is_an_effect():
    rows = pd.concat([_rows("A", {42: 0.60, 1: 0.61, 2: 0.595}, seed=3), _rows("B", {42: 0.54, 1: 0.545, 2: 0.54}, seed=4)])
    r = C.compare_arms(rows, "A", "B", "BLiMP")
    assert r["seed CI low"] > 0 and r["verdict"].startswith("effect: A higher than B by 6.0 points")


def _fixed_item_rows(per_seed_extra: dict[int, int], n_items: int = 60) -> pd.DataFrame:
    """A and B on the same items in every seed: A wins items 0-5 and loses items 6-9 whatever the seed (so the
    seed means barely move) and wins ``per_seed_extra[seed]`` more items in that seed; elsewhere they tie."""
    base = (np.random.default_rng(0).random(n_items) < 0.5).astype(float)
    frames = []
    for s, extra in per_seed_extra.items():
        a, b = base.copy(), base.copy()
        a[:6], b[:6], a[6:10], b[6:10] = 1, 0, 0, 1
        a[10:10 + extra], b[10:10 + extra] = 1, 0
        for arm, v in (("A", a), ("B", b)):
            frames.append(pd.DataFrame({"model": arm if s == 42 else f"{arm} (seed {s})", "arm": arm, "seed": s,
                                        "task": "EWoK", "item": [f"d/{i}" for i in range(n_items)], "value": v}))
    return pd.concat(frames, ignore_index=True)


def test_seeds_separate_but_items_do_not_is_not_an_effect():
    """The converse of the case above: the same few items decide the difference in every seed, so the seed-level
    interval excludes 0 while another draw of items could reverse it; not an effect, and Holm does not count it."""
    rows = _fixed_item_rows({42: 0, 7: 1, 1: 0, 2: 1})
    r = C.compare_arms(rows, "A", "B", "EWoK")
    assert r["seed CI low"] > 0 and r["item CI low"] < 0 < r["item CI high"]
    assert r["verdict"].startswith("not shown beyond these items: A higher than B by 4.2 points over seeds on the 60 "
                                   "items scored, but the item interval [")
    t = C.questions_table(rows, [{"question": "q", "a": "A", "b": "B", "task": "EWoK"}])
    assert t.at[0, "seed p"] < 0.05 and t.at[0, "effect after Holm"] == "no" and "Holm" not in t.at[0, "verdict"]
    line = eval_findings.question_lines(t)[0]
    assert "not shown beyond these items" in line and "effect:" not in line


def test_where_items_are_the_larger_noise_the_item_mde_is_a_column_not_a_verdict():
    rows = _fixed_item_rows({42: 0, 7: 1, 1: 0, 2: 0})
    rows.loc[(rows["arm"] == "A") & (rows["seed"] == 1) & (rows["item"].isin(["d/0", "d/1"])), "value"] = 0
    r = C.compare_arms(rows, "A", "B", "EWoK")  # seed differences +2, +3, 0, +2 items: the seeds do not separate
    assert r["seed CI low"] < 0 < r["seed CI high"]
    assert r["item MDE (80 % power)"] > r["MDE (80 % power)"]
    assert r["verdict"].startswith(f"not shown: effect {r['effect']:+.1f} points, in [{r['seed CI low']:+.1f}, "
                                   f"{r['seed CI high']:+.1f}] (95 % over 4 seeds)")
    # the item MDE is (z.975 + z.8) standard errors of the item interval: 2.80 / 3.92 of its width (normal, exact)
    width = r["item CI high"] - r["item CI low"]
    assert r["item MDE (80 % power)"] == pytest.approx(width * (1.959964 + 0.841621) / (2 * 1.959964), rel=1e-5)


def test_one_seed_per_arm_is_untestable_whatever_the_items_say():
    rows = pd.concat([_rows("A", {42: 0.70}, seed=5), _rows("B", {42: 0.50}, seed=6)])
    r = C.compare_arms(rows, "A", "B", "BLiMP")
    assert r["item CI low"] > 0 and r["McNemar p"] < 1e-6
    assert r["verdict"].startswith("untestable here: 1 vs 1 seeds")


def test_unpaired_seeds_use_welch_and_only_shared_items_count():
    a = _rows("A", {42: 0.6, 7: 0.62}, seed=7)
    b = _rows("B", {3: 0.5, 4: 0.52}, seed=8)
    b = b[b["item"] != "p/0"]  # an item B never scored is left out for both
    r = C.compare_arms(pd.concat([a, b]), "A", "B", "BLiMP")
    assert r["paired seeds"] == 0 and r["items"] == 3999 and r["seeds A"] == r["seeds B"] == 2
    assert r["effect"] == pytest.approx(10.0, abs=0.1) and r["verdict"].startswith("effect: A higher")
    assert C.compare_arms(pd.concat([a, b]), "A", "C", "BLiMP")["verdict"].startswith("untestable here: C not scored")


def test_arm_and_seed_from_names():
    assert C.arm_and_seed("baby-500k+tiny-500k (seed 7)", 42) == ("baby-500k+tiny-500k", 7)
    assert C.arm_and_seed("tiny-1M", 42) == ("tiny-1M", 42)


def test_above_chance_counts_survivors_of_holm():
    rows = pd.concat([_rows("good", {42: 0.60}, 2000, seed=9), _rows("chance", {42: 0.50}, 2000, seed=10)])
    cells = C.above_chance_holm(rows)
    assert list(cells["above chance (Holm)"]) == [True, False]
    assert C.holm_sentence(cells).startswith("1 of 2 model × task cells are above chance after Holm")


def test_zero_shot_findings_never_call_item_separation_real():
    ci = pd.DataFrame({"kind": ["decoder", "decoder"], "model": ["a", "b"], "task": ["BLiMP"] * 2,
                       "pairs": [50000, 50000], "accuracy": [60.0, 55.0], "ci_low": [59.5, 54.5], "ci_high": [60.5, 55.5]})
    text = " ".join(findings.zero_shot(ci))
    assert "do not overlap" in text and "real difference" not in text and "a difference on these items" in text


def test_expand_seeds_names_each_seed_so_arms_pair_up():
    from helpers.training.seed_axis import expand_seeds
    mixes = [{"name": "a", "corpora": ["x"], "seeds": [42, 7]}, {"name": "b", "corpora": ["y"], "balanced": True}]
    out = expand_seeds(mixes, 42)
    assert [(m["name"], m.get("seed")) for m in out] == [("a", 42), ("a (seed 7)", 7), ("b", None)]
    assert all("seeds" not in m for m in out) and out[2]["balanced"] is True
    assert [C.arm_and_seed(m["name"], 42) for m in out[:2]] == [("a", 42), ("a", 7)]
    with pytest.raises(ValueError, match="named twice"):
        expand_seeds(mixes + [{"name": "a (seed 7)", "corpora": ["x"]}], 42)
    with pytest.raises(ValueError, match="distinct"):
        expand_seeds([{"name": "a", "corpora": ["x"], "seeds": [1, 1]}], 42)


def test_decoder_seeds_add_a_named_run_per_further_seed_of_a_budget():
    from helpers.training.seed_axis import decoder_seeds
    got = decoder_seeds(["s", "m", "l"], {"s": [42, 7], "l": [7, 1]}, 42)
    assert got == [("s", "s", 42), ("s (seed 7)", "s", 7), ("m", "m", 42), ("l", "l", 42), ("l (seed 7)", "l", 7),
                   ("l (seed 1)", "l", 1)]  # the default seed is always trained: later notebooks read it by the budget's name
    assert [C.arm_and_seed(n, 42) for n, _, _ in got[:2]] == [("s", 42), ("s", 7)]
    assert decoder_seeds(["s"], None, 3) == [("s", "s", 3)]
    with pytest.raises(ValueError, match="not trained"):
        decoder_seeds(["s"], {"x": [1]}, 42)


def test_named_decoders_must_be_runs_notebook_02_trains():
    from helpers.training.seed_axis import named_decoder_problems
    p02 = {"budgets": ["tiny-1M", "tiny-2M"], "seeds": {"tiny-1M": [42, 7]}, "train": {"seed": 42}}
    good = {"03": {"models": ["tiny-1M", "tiny-2M"], "selfbleu_models": ["tiny-2M"], "generator": "tiny-1M"},
            "05": {"decoders": ["tiny-1M", "tiny-1M (seed 7)", "tiny-1M (plain)", "tiny-1M (plain) (seed 7)"]},
            "06": {"models": ["tiny-2M"]}, "04": {"models": ["anything"]}}  # 04 names encoders: not checked
    assert named_decoder_problems(good, p02) == []
    bad = {"03": {"models": ["tiny-1M"], "selfbleu_models": ["tiny-2M"], "generator": "tiny-5M"},
           "05": {"decoders": ["tiny-2M (seed 7)", "tiny-2M (plain) (seed 13)"]}, "05b": {"models": ["tiny-1M"]}}
    out = named_decoder_problems(bad, p02)
    assert out[0].startswith("03.generator: 'tiny-5M' not trained by notebook 02 (its runs: tiny-1M, tiny-1M (seed 7), tiny-2M)")
    assert out[1].startswith("05.decoders: 'tiny-2M (seed 7)', 'tiny-2M (plain) (seed 13)' not trained")
    assert out[2] == "03.selfbleu_models: 'tiny-2M' not among 03.models (whose stories it reads)" and len(out) == 3
    assert named_decoder_problems(good, {**p02, "seeds": {"tiny-5M": [7]}}) == [
        "02.seeds: seeds given for budgets that are not trained: tiny-5M (budgets: tiny-1M, tiny-2M)"]
    assert named_decoder_problems(good, None) == []  # no notebook 02 to check against


def test_tidy_zero_shot_keys_rows_by_kind_model_seed_task_item():
    from types import SimpleNamespace
    rows = [{"task": "blimp", "paradigm": "p", "pair_id": str(i), "correct": bool(i % 2)} for i in range(4)]
    res = {("decoder", "tiny-1M"): SimpleNamespace(rows=rows), ("encoder", "tiny-1M (seed 7)"): SimpleNamespace(rows=rows)}
    t = C.tidy_zero_shot(res, {"decoder": 42, "encoder": 42})
    assert list(t.columns) == ["kind", *C.TIDY_COLUMNS] and len(t) == 8
    assert set(t["task"]) == {"BLiMP"} and list(t["item"][:2]) == ["p/0", "p/1"] and list(t["value"][:2]) == [0.0, 1.0]
    assert t.groupby("kind")["seed"].first().to_dict() == {"decoder": 42, "encoder": 7}
    assert set(t["arm"]) == {"tiny-1M"}  # a decoder and an encoder share the name; questions pick by kind


def test_check_questions_refuses_unknown_arms_and_kinds():
    models = {"decoder": ["tiny-1M"], "encoder": ["a", "a (seed 7)"]}
    C.check_questions([{"question": "q", "a": "a", "b": "a", "task": "BLiMP", "kind": "encoder"}], models)
    with pytest.raises(ValueError, match="'b' is not|b = 'zzz' is not an? encoder"):
        C.check_questions([{"question": "q", "a": "a", "b": "zzz", "task": "BLiMP", "kind": "encoder"}], models)
    with pytest.raises(ValueError, match="kind must be one of"):
        C.check_questions([{"question": "q", "a": "a", "b": "a", "task": "BLiMP", "kind": "judge"}], models)
    with pytest.raises(ValueError, match="missing kind"):
        C.check_questions([{"question": "q", "a": "a", "b": "a", "task": "BLiMP"}], models)


def test_pll_reductions_recompute_the_sum_and_agree_on_equal_lengths():
    from types import SimpleNamespace
    # pair 0: mean prefers good, sum prefers bad (good is longer); pair 1: equal lengths, both prefer good
    rows = [{"task": "blimp", "paradigm": "p", "pair_id": "0", "score_good": -1.0, "score_bad": -1.5,
             "n_good": 4, "n_bad": 2, "correct": True},
            {"task": "blimp", "paradigm": "p", "pair_id": "1", "score_good": -1.0, "score_bad": -2.0,
             "n_good": 3, "n_bad": 3, "correct": True}]
    t = C.pll_reductions({("encoder", "e"): SimpleNamespace(rows=rows), ("decoder", "d"): SimpleNamespace(rows=rows)})
    assert len(t) == 1 and t.loc[0, "mean (%)"] == 100.0 and t.loc[0, "sum (%)"] == 50.0
    assert t.loc[0, "equal-length pairs"] == 1 and t.loc[0, "equal length (%)"] == 100.0
    assert t.loc[0, "above chance (both)"] == "no"  # two pairs: nothing is above chance


def test_corpus_of_strips_the_seed_and_the_plain_marks():
    assert [C.corpus_of(n) for n in ["tiny-1M", "tiny-1M (seed 7)", "tiny-1M (plain)", "tiny-1M (plain) (seed 7)",
                                     "baby-500k+tiny-500k (seed 1)"]] == ["tiny-1M"] * 4 + ["baby-500k+tiny-500k"]
    assert C.arm_and_seed("tiny-1M (plain) (seed 7)", 42) == ("tiny-1M (plain)", 7)  # its own arm, paired seed by seed


def test_a_comparison_without_seed_spread_is_not_called_precise():
    """Two arms that are the same models (a repetition phase that kept its step-0 checkpoint) differ by exactly 0 in
    every seed: the interval has no width, and the verdict must not read "no effect larger than ±0.0"."""
    row = {"A": "t", "B": "t (plain)", "effect": 0.0, "seed CI low": 0.0, "seed CI high": 0.0, "seed SD": 0.0,
           "MDE (80 % power)": 0.0, "design": "paired over 2 seeds", "unit": "points"}
    v = C.verdict(row)
    assert v.startswith("not measurable over seeds: the same scores in every seed") and "±0.0" not in v
    assert "the same difference (+1.5 points)" in C.verdict(dict(row, effect=1.5, **{"seed CI low": 1.5, "seed CI high": 1.5}))
    # through compare_arms: identical arms are not "equivalent within ±δ" either (an interval of no width proves nothing)
    import pandas as pd

    rows = pd.DataFrame([{"model": f"{arm} (seed {s})", "arm": arm, "seed": s, "task": "BLiMP", "item": f"i{i}",
                          "value": float((i * 7 + s) % 3 == 0)} for arm in ("t", "t (plain)") for s in (1, 2)
                         for i in range(40)])
    out = C.compare_arms(rows, "t", "t (plain)", "BLiMP", delta=2.0)
    assert out["seed SD"] == 0 and out["TOST"].startswith("not tested") and "equivalent" not in out["TOST"]


def _noisy_rows(arm, seed_shift, n_items=2000, seed=0):
    """0/1 scores drawn item by item (item-by-seed noise) around per-item rates shared by every seed and arm, each
    seed shifted by ``seed_shift[s]``."""
    rng = np.random.default_rng(seed)
    rates = np.random.default_rng(99).uniform(0.2, 0.9, n_items)
    frames = []
    for s, shift in seed_shift.items():
        v = (rng.random(n_items) < np.clip(rates + shift, 0, 1)).astype(float)
        model = arm if s == 42 else f"{arm} (seed {s})"
        frames.append(pd.DataFrame({"model": model, "arm": arm, "seed": s, "task": "BLiMP",
                                    "item": [f"p/{i}" for i in range(n_items)], "value": v}))
    return pd.concat(frames, ignore_index=True)


def test_item_budget_says_enough_when_seed_noise_dominates_and_asks_for_more_when_it_does_not():
    q = [{"question": "q", "a": "A", "b": "B", "task": "BLiMP"}]
    seeds = [42, 1, 2, 3, 4, 5, 6, 7]
    # seed effects of ±10 points on the difference: item noise at 2,000 pairs (SD ~0.7/sqrt(2000)*100 ~ 1.6) is small
    big = np.random.default_rng(5).normal(0, 0.10, len(seeds))
    rows = pd.concat([_noisy_rows("A", dict(zip(seeds, big)), seed=1), _noisy_rows("B", dict.fromkeys(seeds, 0.0), seed=2)])
    r = C.item_budget(rows, q).iloc[0]
    assert r["design"] == "paired over 8 seeds" and r["pairs"] == 2000
    assert r["seed SD without item noise"] == pytest.approx(100 * big.std(ddof=1), rel=0.2)
    assert r["pairs for ±10 %"] < 2000 and r["reading"].startswith("enough")
    # no seed effect at all: every seed's difference is item noise, so more pairs always narrow the interval
    rows = pd.concat([_noisy_rows("A", dict.fromkeys(seeds, 0.05), seed=3), _noisy_rows("B", dict.fromkeys(seeds, 0.0), seed=4)])
    r = C.item_budget(rows, q).iloc[0]
    assert r["seed SD without item noise"] < 1.0 and r["item share of the variance (%)"] > 50
    assert r["pairs for ±10 %"] > 2000 and not r["reading"].startswith("enough")
    # one seed per arm: nothing to split
    one = pd.concat([_noisy_rows("A", {42: 0.0}, seed=5), _noisy_rows("B", {42: 0.0}, seed=6)])
    assert C.item_budget(one, q).iloc[0]["reading"].startswith("untestable here")
    missing = C.item_budget(one, [{**q[0], "b": "C"}]).iloc[0]
    assert missing["reading"] == "untestable here: C not scored on BLiMP in this run" and missing["pairs"] == 0
    # the same model in both arms: no spread anywhere, not "enough pairs"
    same = _noisy_rows("A", dict.fromkeys(seeds, 0.0), seed=7)
    assert C.item_budget(pd.concat([same, same.assign(arm="B")]), q).iloc[0]["reading"].startswith("not measurable")


def test_arm_summary_averages_seeds_with_a_t_interval():
    ci = pd.DataFrame([{"kind": "encoder", "model": m, "task": "BLiMP", "pairs": 2500, "accuracy": a, "ci_low": a - 1,
                        "ci_high": a + 1} for m, a in (("m", 57.9), ("m (seed 7)", 54.6), ("m (seed 11)", 54.2), ("n", 56.0))])
    t = C.arm_summary(ci).set_index("arm")
    assert t.at["m", "seeds"] == 3 and t.at["m", "accuracy"] == pytest.approx((57.9 + 54.6 + 54.2) / 3)
    assert t.at["m", "seed SD"] == pytest.approx(np.std([57.9, 54.6, 54.2], ddof=1))
    half = 4.303 * t.at["m", "seed SD"] / np.sqrt(3)  # t(0.975, 2)
    assert t.at["m", "seed CI high"] - t.at["m", "accuracy"] == pytest.approx(half, rel=1e-3)
    assert (t.at["m", "lowest"], t.at["m", "highest"]) == (54.2, 57.9)
    assert t.at["n", "seeds"] == 1 and np.isnan(t.at["n", "seed CI low"])
    wide = C.arm_summary(ci.assign(accuracy=[20.0, 60.0, 90.0, 50.0])).set_index("arm")  # two-sided t overshoots 0-100
    assert (wide.at["m", "seed CI low"], wide.at["m", "seed CI high"]) == (0.0, 100.0)


def test_questions_are_one_family_holm_keeps_the_strong_effect_only():
    """Three questions: a large effect (p tiny), a marginal one (paired seed differences 2, 4, 3.2 points: p ~ 0.03,
    an effect alone but not below 0.05/2 after Holm) and none; the verdicts say which survive."""
    rows = pd.concat([
        _rows("A", {42: 0.60, 1: 0.61, 2: 0.595}, seed=11), _rows("B", {42: 0.54, 1: 0.545, 2: 0.54}, seed=12),
        _rows("C", {42: 0.52, 1: 0.54, 2: 0.532}, seed=13), _rows("D", {42: 0.50, 1: 0.50, 2: 0.50}, seed=14),
        _rows("E", {42: 0.50, 1: 0.52, 2: 0.49}, seed=15), _rows("F", {42: 0.51, 1: 0.50, 2: 0.50}, seed=16)])
    qs = [{"question": "strong", "a": "A", "b": "B", "task": "BLiMP"},
          {"question": "marginal", "a": "C", "b": "D", "task": "BLiMP"},
          {"question": "none", "a": "E", "b": "F", "task": "BLiMP"}]
    t = C.questions_table(rows, qs).set_index("question")
    assert t.at["marginal", "seed p"] == pytest.approx(0.034, abs=0.005) and t.at["strong", "seed p"] < 0.05 / 3
    assert list(t["effect after Holm"]) == ["yes", "no", "no"]
    assert t.at["strong", "verdict"].endswith("it survives Holm's correction over the 3 questions tested")
    assert t.at["marginal", "verdict"].startswith("effect:") and t.at["marginal", "verdict"].endswith(
        "not after Holm's correction over the 3 questions tested")
    assert t.at["none", "verdict"].startswith("not shown: effect")


def test_seed_budget_recomputes_the_mde_on_the_first_k_seeds_and_projects_beyond_them():
    q = [{"question": "q", "a": "A", "b": "B", "task": "BLiMP"}]
    seeds = [42, 7, 1, 2, 3]  # the order a profile lists (and so trains) them, not sorted
    shifts = dict(zip(seeds, [0.02, 0.06, -0.01, 0.04, 0.00]))
    rows = pd.concat([_noisy_rows("A", shifts, seed=1), _noisy_rows("B", dict.fromkeys(seeds, 0.0), seed=2)])
    t = C.seed_budget(rows, q, most=8).set_index("seeds per arm")
    assert list(t.index) == list(range(2, 9))
    full = C.compare_arms(rows, "A", "B", "BLiMP")
    # with every seed, the measured MDE is the questions table's; the projection from all seeds agrees there
    assert t.at[5, "MDE with the first k seeds"] == pytest.approx(full["MDE (80 % power)"])
    assert t.at[5, "MDE projected from all seeds"] == pytest.approx(full["MDE (80 % power)"])
    # with the first three seeds (42, 7, 1): the table of a run that trained only those
    first3 = rows[rows["seed"].isin([42, 7, 1])]
    assert t.at[3, "first seeds"] == "42, 7, 1"
    assert t.at[3, "MDE with the first k seeds"] == pytest.approx(C.compare_arms(first3, "A", "B", "BLiMP")["MDE (80 % power)"])
    # beyond the run's seeds only the projection, and it shrinks with n
    assert np.isnan(t.at[7, "MDE with the first k seeds"]) and t.at[8, "reading"].startswith("projected")
    proj = t["MDE projected from all seeds"].to_numpy()
    assert (np.diff(proj) < 0).all()
    # arms without two shared seeds: one row saying so
    one = pd.concat([_noisy_rows("A", {42: 0.0}, seed=5), _noisy_rows("B", {42: 0.0}, seed=6)])
    assert C.seed_budget(one, q).iloc[0]["reading"].startswith("untestable here")
    # a run with one seed per arm only (the paper profile): the columns are there, empty, and the figure says why
    import matplotlib.pyplot as plt

    from helpers.report import evaluation_views as EV

    lone = C.seed_budget(one, q)
    assert list(lone.columns[:len(C.SEED_BUDGET_COLUMNS)]) == list(C.SEED_BUDGET_COLUMNS)
    assert lone.dropna(subset=["MDE with the first k seeds"]).empty
    fig = EV.plot_seed_budget(lone, title="t")
    assert "no question has two training seeds" in " ".join(t.get_text() for t in fig.axes[0].texts)
    plt.close(fig)


def test_equivalence_only_by_tost_against_the_margin_set_before():
    """Eight seeds whose differences stay within ±1 point: with δ = 2 the 90 % interval lies inside the margin
    (equivalent); with δ = 0.2 it does not (inconclusive); without δ equivalence is not tested."""
    seeds = [42, 1, 2, 3, 4, 5, 6, 7]
    a = _rows("A", dict(zip(seeds, [0.55, 0.56, 0.545, 0.555, 0.55, 0.56, 0.545, 0.55])), seed=21)
    b = _rows("B", dict(zip(seeds, [0.55, 0.555, 0.55, 0.55, 0.555, 0.55, 0.55, 0.555])), seed=22)
    rows = pd.concat([a, b])
    r = C.compare_arms(rows, "A", "B", "BLiMP", delta=2.0)
    assert r["seed CI low"] < 0 < r["seed CI high"] and r["δ (equivalence margin)"] == 2.0
    assert r["seed CI low"] < r["TOST 90 % CI low"] < r["TOST 90 % CI high"] < r["seed CI high"]
    assert r["TOST"].startswith("equivalent within ±2.0 points") and "equivalent within ±2.0" in r["verdict"]
    narrow = C.compare_arms(rows, "A", "B", "BLiMP", delta=0.2)
    assert narrow["TOST"].startswith("inconclusive at ±0.2") and "equivalent" not in narrow["verdict"]
    assert C.compare_arms(rows, "A", "B", "BLiMP")["TOST"].startswith("no equivalence margin")


def test_a_null_says_when_seeds_cannot_answer_it():
    """A difference near 0 against a seed SD of a point: twice the effect is beyond any seed budget, and the verdict
    says so beside its interval; a moderate effect names the seeds that would bring the MDE within twice it."""
    rows = pd.concat([_rows("A", {42: 0.550, 7: 0.560, 1: 0.545}, seed=23), _rows("B", {42: 0.555, 7: 0.552, 1: 0.548}, seed=24)])
    r = C.compare_arms(rows, "A", "B", "BLiMP", delta=2.0)
    assert r["seeds to detect 2 × |effect|"] > C.SEED_BUDGET_LIMIT and "seeds will not detect an effect this small" in r["verdict"]
    mid = pd.concat([_rows("A", {42: 0.57, 7: 0.57, 1: 0.55}, seed=25), _rows("B", {42: 0.55, 7: 0.56, 1: 0.55}, seed=26)])
    m = C.compare_arms(mid, "A", "B", "BLiMP")
    assert m["seed CI low"] < 0 and 3 < m["seeds to detect 2 × |effect|"] <= C.SEED_BUDGET_LIMIT
    assert f"{m['seeds to detect 2 × |effect|']:.0f} seeds per arm would bring the MDE within 2 × |effect|" in m["verdict"]


def test_the_positive_control_is_outside_holms_family_and_says_whether_it_passed():
    rows = pd.concat([_rows("A", {42: 0.60, 1: 0.61, 2: 0.595}, seed=31), _rows("B", {42: 0.54, 1: 0.545, 2: 0.54}, seed=32),
                      _rows("U", {42: 0.50, 1: 0.505, 2: 0.495}, seed=33)])
    qs = [{"question": "q", "a": "A", "b": "B", "task": "BLiMP"},
          {"question": "control", "a": "B", "b": "U", "task": "BLiMP", "role": C.POSITIVE_CONTROL}]
    t = C.questions_table(rows, qs).set_index("question")
    assert list(t["role"]) == ["question", C.POSITIVE_CONTROL]
    assert t.at["control", "effect after Holm"] == "" and "over the 1 questions tested" in t.at["q", "verdict"]
    assert "the positive control passed" in t.at["control", "verdict"] and "Holm's correction over" not in t.at["control", "verdict"]
    failed = C.questions_table(rows, [{**qs[1], "a": "A", "b": "A"}]).iloc[0]
    assert "positive control FAILED" in failed["verdict"]
    with pytest.raises(ValueError, match="role must be"):
        C.check_questions([{**qs[1], "kind": "encoder", "role": "control"}], {"encoder": ["A", "B", "U"]})
    with pytest.raises(ValueError, match="delta"):
        C.check_questions([{**qs[0], "kind": "encoder", "delta": -1}], {"encoder": ["A", "B", "U"]})


def test_tidy_rows_under_the_summed_pll_and_a_verdict_that_flips_under_it():
    from types import SimpleNamespace
    # pair 0: mean prefers good, sum prefers bad; pair 1: both prefer good
    rows = [{"task": "blimp", "paradigm": "p", "pair_id": "0", "score_good": -1.0, "score_bad": -1.5,
             "n_good": 4, "n_bad": 2, "correct": True},
            {"task": "blimp", "paradigm": "p", "pair_id": "1", "score_good": -1.0, "score_bad": -2.0,
             "n_good": 3, "n_bad": 3, "correct": True}]
    res = {("encoder", "e"): SimpleNamespace(rows=rows), ("decoder", "d"): SimpleNamespace(rows=rows)}
    s = C.tidy_zero_shot(res, 42, reduction="sum")
    assert set(s["kind"]) == {"encoder"} and list(s["value"]) == [0.0, 1.0]
    # a question that is an effect under the mean and not shown under the sum says so in its verdict
    mean_rows = pd.concat([_rows("A", {42: 0.60, 1: 0.61, 2: 0.595}, seed=41), _rows("B", {42: 0.54, 1: 0.545, 2: 0.54}, seed=42)])
    sum_rows = pd.concat([_rows("A", {42: 0.60, 1: 0.52, 2: 0.59}, seed=43), _rows("B", {42: 0.54, 1: 0.54, 2: 0.54}, seed=44)])
    t = C.questions_table(mean_rows, [{"question": "q", "a": "A", "b": "B", "task": "BLiMP"}],
                          sensitivity=("sum PLL", sum_rows)).iloc[0]
    assert t["verdict"].startswith("effect:") and "; under sum PLL: not shown, " in t["verdict"]
    assert t["effect (sum PLL)"] == pytest.approx(C.compare_arms(sum_rows, "A", "B", "BLiMP")["effect"])
    same = C.questions_table(mean_rows, [{"question": "q", "a": "A", "b": "B", "task": "BLiMP"}],
                             sensitivity=("sum PLL", mean_rows)).iloc[0]
    assert "under sum PLL" not in same["verdict"] and same["verdict (sum PLL)"].startswith("effect, +")


def test_seed_budget_applies_the_rule_twice_the_effect():
    q = [{"question": "q", "a": "A", "b": "B", "task": "BLiMP"}]
    seeds = [42, 7, 1]
    rows = pd.concat([_noisy_rows("A", dict(zip(seeds, [0.03, 0.05, 0.02])), seed=1),
                      _noisy_rows("B", dict.fromkeys(seeds, 0.0), seed=2)])
    t = C.seed_budget(rows, q, most=6).set_index("seeds per arm")
    need = t["seeds for MDE ≤ 2 × |effect|"].iloc[0]
    assert list(t["pays for seeds (MDE ≤ 2 × |effect|)"]) == ["yes" if k >= need else "no" for k in t.index]


def test_above_chance_holm_needs_both_reductions_for_a_cell_in_the_sensitivity_rows():
    rows = pd.concat([_rows("e", {42: 0.60}, n_items=400, seed=51).assign(kind="encoder"),
                      _rows("d", {42: 0.60}, n_items=400, seed=52).assign(kind="decoder")])
    sums = _rows("e", {42: 0.50}, n_items=400, seed=53).assign(kind="encoder")
    plain = C.above_chance_holm(rows)
    assert plain["above chance (Holm)"].all()
    both = C.above_chance_holm(rows, sensitivity=sums).set_index("model")
    assert not both.at["e", "above chance (Holm)"] and both.at["d", "above chance (Holm)"]
    assert both.at["e", "p"] == both.at["e", "p (sensitivity)"] and np.isnan(both.at["d", "p (sensitivity)"])
    assert "both are" in C.holm_sentence(both.reset_index())


def test_untrained_twins_are_the_trained_encoders_initialisation_and_score_as_encoders(encoder_tokenizer, tmp_path):
    """The positive control's untrained arm: each twin has its trained encoder's config and tokenizer and exactly
    the weights ``seed_everything(seed)`` + a fresh model give (what training started from); made once, then
    skipped; scored on the control's task only."""
    import torch

    from helpers.core.artifacts import save_pretrained_atomic
    from helpers.core.seeding import seed_everything
    from helpers.evaluation import controls
    from helpers.models.ltg_bert import LtgBertForMaskedLM, load_model, ltg_bert_config

    tok = encoder_tokenizer
    cfg = ltg_bert_config("smoke", len(tok), pad_token_id=tok.pad_token_id, cls_token_id=tok.cls_token_id,
                          sep_token_id=tok.sep_token_id, mask_token_id=tok.mask_token_id)
    for name in ("mix", "mix (seed 7)"):
        trained = LtgBertForMaskedLM(cfg)
        with torch.no_grad():
            for p in trained.parameters():
                p.add_(0.5)  # "trained": far from any initialisation
        save_pretrained_atomic(tmp_path / "encoders" / name / "best", trained, tok)
    control = {"question": "control", "a": "mix", "b": "untrained", "task": "Supp.", "kind": "encoder",
               "role": C.POSITIVE_CONTROL}
    controls.check_control(control, ["mix", "mix (seed 7)"])
    with pytest.raises(ValueError, match="at least two seeds"):
        controls.check_control(control, ["mix"])
    with pytest.raises(ValueError, match="role"):
        controls.check_control({**control, "role": "question"}, ["mix", "mix (seed 7)"])
    log = []
    names = controls.untrained_encoders(tmp_path, ["mix", "mix (seed 7)"], "untrained", 42, log=log.append)
    assert names == ["untrained (seed 42)", "untrained (seed 7)"]
    seed_everything(7)
    fresh = LtgBertForMaskedLM(load_model(tmp_path / "encoders" / "mix (seed 7)" / "best").config).state_dict()
    saved = load_model(tmp_path / "encoders" / "untrained (seed 7)" / "best").state_dict()
    assert all(torch.equal(fresh[k], saved[k]) for k in fresh)
    controls.untrained_encoders(tmp_path, ["mix", "mix (seed 7)"], "untrained", 42, log=log.append)
    assert sum(x.startswith("[skip]") for x in log) == 2
    zero = controls.score_positive_control(tmp_path, control, ["mix", "mix (seed 7)"], ["blimp", "supplement"], 1, 42,
                                           dict(reduction="mean", max_tokens=512, limit_per_task=1))
    assert list(zero) == [("encoder", "untrained (seed 42)"), ("encoder", "untrained (seed 7)")]
    assert {r["task"] for r in zero[("encoder", "untrained (seed 7)")].rows} == {"supplement"}
    assert controls.score_positive_control(tmp_path, None, [], [], 1, 42) == {} and controls.as_questions(None) == []
