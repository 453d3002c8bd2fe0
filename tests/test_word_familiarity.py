from __future__ import annotations

import math
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import pytest

from helpers.report import findings
from helpers.evaluation.minimal_pairs import Item
from helpers.core.stats import wilson_interval
from helpers.data.corpus_files import iter_texts, write_corpus
from helpers.evaluation.word_familiarity import (counts_by_model, familiarity_table, matched_gap, rarest_word_count,
                                               word_counts, words)
from helpers.report.evaluation_views import plot_word_familiarity


def _item(pid: str, good: str, bad: str, paradigm: str = "p1") -> Item:
    return Item(task="blimp", paradigm=paradigm, phenomenon="ph", pair_id=pid, good=good, bad=bad)


def _row(item: Item, correct: bool) -> dict:
    return {"task": item.task, "paradigm": item.paradigm, "pair_id": item.pair_id, "correct": correct, "tie": False}


def _res(rows):
    return SimpleNamespace(rows=rows)


def test_words_and_counts():
    assert words("Didn't Tom see the DOG?") == ["didn", "t", "tom", "see", "the", "dog"]
    counts = word_counts(["The dog ran.", "the dog sat", "A cat."])
    assert counts["the"] == 2 and counts["dog"] == 2 and counts["cat"] == 1 and counts["derek"] == 0


def test_counts_by_model_reads_each_budget_once_and_shares_it(tmp_path, monkeypatch):
    write_corpus(tmp_path / "tiny-1M.jsonl", [{"id": 0, "text": "The dog ran."}, {"id": 1, "text": "the dog"}])
    write_corpus(tmp_path / "tiny-125k.jsonl", [{"id": 0, "text": "A cat."}])
    from helpers.evaluation import word_familiarity as wf
    calls = []

    def counted_iter_texts(path):
        calls.append(path.name)
        return iter_texts(path)

    monkeypatch.setattr(wf, "iter_texts", counted_iter_texts)
    counts = counts_by_model(tmp_path, ["tiny-1M", "tiny-125k", "tiny-1M (plain) (seed 7)", "tiny-1M (seed 7)"])
    assert sorted(calls) == ["tiny-125k.jsonl", "tiny-1M.jsonl"]  # one read per budget
    assert counts["tiny-1M"]["dog"] == 2 and counts["tiny-1M"]["cat"] == 0 and counts["tiny-125k"]["cat"] == 1
    assert counts["tiny-1M (plain) (seed 7)"] is counts["tiny-1M"] is counts["tiny-1M (seed 7)"]
    with pytest.raises(Exception, match="tiny-9M"):
        counts_by_model(tmp_path, ["tiny-9M"])  # a budget notebook 01 never wrote is named


def test_rarest_word_counts_both_sentences():
    counts = word_counts(["the dog ran " * 5, "the cat ran"])
    assert rarest_word_count(_item("0", "The dog ran.", "The dog ran ran."), counts) == 5
    assert rarest_word_count(_item("1", "The dog ran.", "The cat ran."), counts) == 1  # "cat" only in the bad one
    assert rarest_word_count(_item("2", "Derek ran.", "Ran Derek."), counts) == 0
    with pytest.raises(ValueError, match="no words"):
        rarest_word_count(_item("3", "...", "!"), counts)


def test_table_counts_and_intervals_against_a_direct_computation():
    counts = word_counts(["the dog ran " * 30, "the cat sat " * 6, "a bird"])
    items = [_item("0", "The dog ran.", "Dog the ran."), _item("1", "The cat sat.", "Cat the sat.", "p2"),
             _item("2", "A bird sat.", "Bird a sat."), _item("3", "Derek sat.", "Sat Derek.", "p2"),
             _item("4", "The dog sat.", "The dog sat sat.")]
    correct = [True, True, False, False, True]
    res = {("decoder", "m"): _res([_row(i, c) for i, c in zip(items, correct)])}
    t = familiarity_table(res, items, {"m": counts}, thresholds=(20, 1, 5)).set_index("words seen at least")
    assert list(t.index) == [0, 1, 5, 20]
    rarest = [rarest_word_count(i, counts) for i in items]  # 30, 6, 1, 0, 6
    for n, row in t.iterrows():
        sub = [c for c, r in zip(correct, rarest) if r >= n]
        assert row.pairs == len(sub) and row["accuracy (%)"] == pytest.approx(100 * sum(sub) / len(sub))
        lo, hi = wilson_interval(sum(sub), len(sub))
        assert (row.ci_low, row.ci_high) == pytest.approx((100 * lo, 100 * hi))
        assert row["share of pairs (%)"] == pytest.approx(100 * len(sub) / len(items))
    assert t.loc[20, "pairs"] == 1 and t.loc[20, "paradigms"] == 1 and t.loc[5, "paradigms"] == 2
    assert t.loc[0, "matched pairs"] == 0 and math.isnan(t.loc[0, "gap (points)"])  # no other pairs at n = 0


def test_each_model_is_counted_in_its_own_text():
    items = [_item("0", "The dog ran.", "Dog the ran."), _item("1", "Derek ran.", "Ran Derek.")]
    rows = [_row(items[0], True), _row(items[1], False)]
    res = {("decoder", "small"): _res(rows), ("decoder", "large"): _res(rows)}
    counts = {"small": word_counts(["the dog ran"]), "large": word_counts(["the dog ran derek"])}
    t = familiarity_table(res, items, counts, thresholds=(1,)).set_index(["model", "words seen at least"])
    assert t.loc[("small", 1), "pairs"] == 1 and t.loc[("large", 1), "pairs"] == 2
    with pytest.raises(ValueError, match="no word counts for large"):
        familiarity_table(res, items, {"small": counts["small"]})


def test_table_rejects_unknown_pairs_and_bad_thresholds_and_handles_empty_subsets():
    counts = {"m": word_counts(["the dog ran"]), "e": word_counts(["the dog ran"])}
    items = [_item("0", "The dog ran.", "Dog the ran.")]
    res = {("decoder", "m"): _res([_row(items[0], True), _row(_item("9", "x", "y"), False)])}
    with pytest.raises(ValueError, match="not among the items"):
        familiarity_table(res, items, counts)
    with pytest.raises(ValueError, match=">= 1"):
        familiarity_table(res, items, counts, thresholds=(0, 5))
    res = {("encoder", "e"): _res([_row(items[0], True)])}
    t = familiarity_table(res, items, counts, thresholds=(1, 5)).set_index("words seen at least")
    assert t.loc[5, "pairs"] == 0 and math.isnan(t.loc[5, "accuracy (%)"]) and t.loc[5, "above chance"] == "no pairs"


def test_matched_gap_uses_only_paradigms_with_both_sides():
    # paradigm a: familiar only (9 pairs, all right) -- left out; b: 2 familiar (50 %) vs 4 others (75 %);
    # c: 1 familiar (100 %) vs 2 others (0 %)
    fam = ([{"paradigm": "a", "correct": True}] * 9 + [{"paradigm": "b", "correct": c} for c in (True, False)]
           + [{"paradigm": "c", "correct": True}])
    rest = ([{"paradigm": "b", "correct": c} for c in (True, True, True, False)]
            + [{"paradigm": "c", "correct": False}] * 2 + [{"paradigm": "d", "correct": True}] * 5)
    g = matched_gap(fam, rest, seed=3)
    assert g["matched pairs"] == 3
    assert g["familiar, matched (%)"] == pytest.approx(100 * (2 / 3 * 0.5 + 1 / 3 * 1.0))
    assert g["rest, same paradigms (%)"] == pytest.approx(100 * (2 / 3 * 0.75 + 1 / 3 * 0.0))
    assert g["gap (points)"] == pytest.approx(g["familiar, matched (%)"] - g["rest, same paradigms (%)"])
    assert g["gap ci_low"] <= g["gap (points)"] <= g["gap ci_high"]
    assert matched_gap(fam, rest, seed=3) == g  # seeded
    empty = matched_gap(fam, [{"paradigm": "d", "correct": True}])
    assert empty["matched pairs"] == 0 and all(math.isnan(v) for k, v in empty.items() if k != "matched pairs")


def test_sentences_report_the_matched_gap_and_plot():
    counts = {"m": word_counts(["the dog ran " * 30])}
    items = [_item(str(i), "The dog ran.", "Dog the ran.") for i in range(300)]
    items += [_item(str(i), "Derek ran.", "Ran Derek.") for i in range(300, 900)]
    rows = [_row(it, i % 10 < 8 if i < 300 else i % 2 == 0) for i, it in enumerate(items)]
    t = familiarity_table({("decoder", "m"): _res(rows)}, items, counts, thresholds=(1, 20))
    top = t.set_index("words seen at least").loc[20]
    assert top["familiar, matched (%)"] == pytest.approx(80.0) and top["rest, same paradigms (%)"] == pytest.approx(50.0)
    (line,) = findings.word_familiarity(t, "tiny-1M")
    assert "on the 300 pairs (33.3 %, from 1 paradigm) whose every word occurs at least 20 times in tiny-1M" in line
    assert line.endswith(f"a gap of +30.0 points [{top['gap ci_low']:+.1f}, {top['gap ci_high']:+.1f}]: "
                         "familiar words score higher beyond noise")
    even = [_row(it, i % 2 == 0) for i, it in enumerate(items)]
    t2 = familiarity_table({("decoder", "m"): _res(even)}, items, counts, thresholds=(20,))
    assert findings.word_familiarity(t2, "c")[0].endswith("the gap is within noise")
    fig = plot_word_familiarity(t, "tiny-1M")
    assert len(fig.axes[0].get_xticklabels()) == 3
    none = familiarity_table({("decoder", "m"): _res(rows)}, items, {"m": word_counts(["nothing"])}, thresholds=(1,))
    assert findings.word_familiarity(none, "x")[0].endswith("no pair has all its words in x")
