"""The findings rules (helpers.core.claims): each registered rule, fed a toy row that violates its claim, must change
its words; a rule without a case here fails the registry test."""
import math

import pytest

from helpers.core import claims as C

# rule name -> (a row that supports the claim, a row that violates it, the claim's words)
CASES = {
    "above chance": (dict(intervals={"mean": (51.0, 55.0), "sum": (50.5, 54.0)}, chance=50.0, preregistered="mean"),
                     dict(intervals={"mean": (51.0, 55.0), "sum": (49.0, 53.0)}, chance=50.0, preregistered="mean"),
                     "= above chance"),
    "best": (dict(values={"h128-l4-a2": 4.600, "h128-l2-a4": 4.662}, better="lower", what="held-out loss", noise=0.03),
             dict(values={"h128-l4-a2": 4.640, "h128-l2-a4": 4.662}, better="lower", what="held-out loss", noise=0.03),
             "lowest held-out loss: h128-l4-a2"),
    "pattern holds": (dict(what="function words nearer", estimate=0.03, low=0.01, high=0.05),
                      dict(what="function words nearer", estimate=0.03, low=None, high=None),
                      "function words nearer: holds"),
    "apart": (dict(a="tiny-1M", a_ci=(0.30, 0.40), b="tiny-125k", b_ci=(0.10, 0.20), over="neurons"),
              dict(a="tiny-1M", a_ci=(0.25, 0.40), b="tiny-125k", b_ci=(0.20, 0.30), over="neurons"),
              "above tiny-125k"),
    "equivalent": (dict(low=-1.0, high=1.5, delta=2.0), dict(low=-1.0, high=2.5, delta=2.0), "equivalent within"),
    "null": (dict(effect=1.0, low=-0.5, high=2.5, n=5), dict(effect=1.0, low=math.nan, high=math.nan, n=1),
             "in [-0.5, +2.5]"),
}


def test_every_rule_has_a_case():
    assert set(C.registered()) == set(CASES), "a claim rule without a violating toy case (add it to CASES)"


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_violating_row_changes_the_words(name):
    good, bad, words = CASES[name]
    fn = C.RULES[name].fn
    # "= words": the claim is the whole sentence (its words also begin the qualified sentences)
    holds = (lambda s: s == words[2:]) if words.startswith("= ") else (lambda s: words in s)
    assert holds(fn(**good)), fn(**good)
    changed = fn(**bad)
    assert not holds(changed), f"{name}: the words survived a row that violates them: {changed}"


def test_chance_names_the_reduction_it_hangs_on():
    s = C.chance_claim({"mean": (51.0, 55.0), "sum": (48.0, 53.0)}, 50.0, preregistered="mean")
    assert s == "above chance under mean only (not under sum)"
    assert C.chance_claim({"mean": (45.0, 49.0)}, 50.0) == "below chance"
    assert C.chance_claim({"mean": (48.0, 52.0), "sum": (47.0, 53.0)}, 50.0) == "not distinguishable from chance"
    assert C.chance_claim({"mean": (51.0, 53.0), "sum": (45.0, 49.0)}, 50.0).startswith("mixed")


def test_ranking_needs_noise_or_a_paired_interval():
    v = {"a": 0.30, "b": 0.10, "c": 0.12}
    assert "tied" in C.ranking_claim(v, better="higher", what="score")  # nothing to separate them: no winner
    assert C.ranking_claim(v, better="higher", what="score", noise=0.05).startswith("highest score: a")
    # a paired interval overrides the noise: b is separated, c is not
    s = C.ranking_claim(v, better="higher", what="score", paired={"b": (0.1, 0.3), "c": (-0.02, 0.4)})
    assert "tied" in s and "c 0.120" in s and "b 0.100" not in s


def test_pattern_and_null_read_their_interval():
    assert "reversed" in C.pattern_claim("x", -0.2, -0.3, -0.1)
    assert "not shown" in C.pattern_claim("x", 0.1, -0.1, 0.3)
    with pytest.raises(ValueError):
        C.interval_null(2.0, 0.5, 3.5, 5)  # an interval that excludes 0 is not a null
    assert "no effect larger" not in C.interval_null(1.015, -1.39, 3.42, 5)


def test_equivalence_only_by_tost():
    assert C.equivalence_claim(-1.0, 1.0, None).startswith("no equivalence margin")
    assert C.equivalence_claim(-2.5, 0.5, 2.0).startswith("inconclusive")
    with pytest.raises(ValueError):
        C.equivalence_claim(-1.0, 1.0, 0.0)


def test_overlap_is_never_equality():
    s = C.apart_claim("a", (0.2, 0.4), "b", (0.3, 0.5), "neurons")
    assert "not shown apart" in s and "as many" not in s and "same" not in s.replace("does not make them equal", "")
