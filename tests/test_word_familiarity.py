from __future__ import annotations

import math
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import pytest

from helpers import findings
from helpers.minimal_pairs import Item
from helpers.stats import wilson_interval
from helpers.word_familiarity import (familiarity_table, matched_rest, plot_word_familiarity, rarest_word_count,
                                     word_counts, words)


def _item(pid: str, good: str, bad: str, paradigm: str = "p1") -> Item:
    return Item(task="blimp", paradigm=paradigm, phenomenon="ph", pair_id=pid, good=good, bad=bad)


def _row(item: Item, correct: bool) -> dict:
    return {"task": item.task, "paradigm": item.paradigm, "pair_id": item.pair_id, "correct": correct, "tie": False}


def test_words_and_counts():
    assert words("Didn't Tom see the DOG?") == ["didn", "t", "tom", "see", "the", "dog"]
    counts = word_counts(["The dog ran.", "the dog sat", "A cat."])
    assert counts["the"] == 2 and counts["dog"] == 2 and counts["cat"] == 1 and counts["derek"] == 0


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
    res = {("decoder", "m"): SimpleNamespace(rows=[_row(i, c) for i, c in zip(items, correct)])}
    t = familiarity_table(res, items, counts, thresholds=(20, 1, 5)).set_index("words seen at least")
    assert list(t.index) == [0, 1, 5, 20]
    rarest = [rarest_word_count(i, counts) for i in items]  # 30, 6, 1, 0, 6
    for n, row in t.iterrows():
        sub = [c for c, r in zip(correct, rarest) if r >= n]
        assert row.pairs == len(sub) and row["accuracy (%)"] == pytest.approx(100 * sum(sub) / len(sub))
        lo, hi = wilson_interval(sum(sub), len(sub))
        assert (row.ci_low, row.ci_high) == pytest.approx((100 * lo, 100 * hi))
        assert row["share of pairs (%)"] == pytest.approx(100 * len(sub) / len(items))
    assert t.loc[20, "pairs"] == 1 and t.loc[20, "paradigms"] == 1 and t.loc[5, "paradigms"] == 2


def test_table_rejects_unknown_pairs_and_bad_thresholds_and_handles_empty_subsets():
    counts = word_counts(["the dog ran"])
    items = [_item("0", "The dog ran.", "Dog the ran.")]
    res = {("decoder", "m"): SimpleNamespace(rows=[_row(items[0], True), _row(_item("9", "x", "y"), False)])}
    with pytest.raises(ValueError, match="not among the items"):
        familiarity_table(res, items, counts)
    with pytest.raises(ValueError, match=">= 1"):
        familiarity_table(res, items, counts, thresholds=(0, 5))
    res = {("encoder", "e"): SimpleNamespace(rows=[_row(items[0], True)])}
    t = familiarity_table(res, items, counts, thresholds=(1, 5)).set_index("words seen at least")
    assert t.loc[5, "pairs"] == 0 and math.isnan(t.loc[5, "accuracy (%)"]) and t.loc[5, "above chance"] == "no pairs"


def test_sentences_and_plot():
    counts = word_counts(["the dog ran " * 30])
    familiar = [_item(str(i), "The dog ran.", "Dog the ran.") for i in range(200)]
    strange = [_item(str(i), "Derek ran.", "Ran Derek.", "p2") for i in range(200, 1000)]
    rows = [_row(i, True) for i in familiar[:180]] + [_row(i, False) for i in familiar[180:]]
    rows += [_row(i, j % 2 == 0) for j, i in enumerate(strange)]
    res = {("decoder", "m"): SimpleNamespace(rows=rows)}
    t = familiarity_table(res, familiar + strange, counts, thresholds=(1, 20))
    (line,) = findings.word_familiarity(t, "tiny-1M")
    assert "on the 200 pairs (20.0 %, from 1 paradigms)" in line and "at least 20 times in tiny-1M: above chance" in line
    assert "separated from the all-pairs interval" in line and "not separated" not in line
    assert "same paradigms" not in line  # the familiar pairs' paradigm has no other pairs here
    fig = plot_word_familiarity(t, "tiny-1M")
    assert len(fig.axes[0].get_xticklabels()) == 3
    none = familiarity_table(res, familiar + strange, word_counts(["nothing"]), thresholds=(1,))
    assert findings.word_familiarity(none, "x")[0].endswith("no pair has all its words in x")


def test_matched_rest_weights_paradigms_like_the_subset():
    sub = [{"paradigm": "a", "correct": True}] * 3 + [{"paradigm": "b", "correct": True}]
    rest = ([{"paradigm": "a", "correct": c} for c in (True, False)]       # a: 50 %
            + [{"paradigm": "b", "correct": c} for c in (True, True, True, False)]  # b: 75 %
            + [{"paradigm": "c", "correct": False}] * 5)                    # c: not in the subset, left out
    acc, lo, hi = matched_rest(sub, rest, seed=3)
    assert acc == pytest.approx(100 * (0.75 * 0.5 + 0.25 * 0.75))
    assert lo < acc < hi and 0 <= lo and hi <= 100
    assert matched_rest(sub, rest, seed=3) == (acc, lo, hi)  # seeded
    assert all(math.isnan(v) for v in matched_rest(sub, [{"paradigm": "c", "correct": True}]))


def test_the_rest_column_separates_familiar_from_unfamiliar_pairs_of_one_paradigm():
    counts = word_counts(["the dog ran " * 30])
    items = [_item(str(i), "The dog ran.", "Dog the ran.") for i in range(300)]
    items += [_item(str(i), "Derek ran.", "Ran Derek.") for i in range(300, 900)]
    rows = [_row(it, i % 10 < 8 if i < 300 else i % 2 == 0) for i, it in enumerate(items)]
    t = familiarity_table({("decoder", "m"): SimpleNamespace(rows=rows)}, items, counts, thresholds=(20,))
    top = t.set_index("words seen at least").loc[20]
    assert top["accuracy (%)"] == pytest.approx(80.0) and top["rest, same paradigms (%)"] == pytest.approx(50.0)
    (line,) = findings.word_familiarity(t, "c")
    assert line.endswith("weighted alike: 50.0 % [" + f"{top['rest ci_low']:.1f}, {top['rest ci_high']:.1f}] (a real difference)")
