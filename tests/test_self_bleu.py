"""Self-BLEU and the choice of k (helpers.diversity.self_bleu) against nltk ``corpus_bleu``."""
from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
from nltk.translate.bleu_score import corpus_bleu

from helpers.diversity import self_bleu as sb


# ----------------------------------------------------------------------------- references
def nltk_self_bleu(completions: list[str], k: int, weights=(0.25,) * 4, level: str = "sentence") -> float:
    """The authors' loop (sentence) or one corpus_bleu over the k pairs (corpus), written out independently."""
    toks = [c.split() for c in completions[:k]]
    refs = [[toks[j] for j in range(k) if j != i] for i in range(k)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if level == "corpus":
            return corpus_bleu(refs, toks, weights=weights)
        return float(np.mean([corpus_bleu(list_of_references=[refs[i]], hypotheses=[toks[i]], weights=weights) for i in range(k)]))


def windows(stories: list[str], n: int, words: int, rng: random.Random) -> list[str]:
    out = []
    for _ in range(n):
        s = rng.choice(stories).split()
        a = rng.randint(0, max(0, len(s) - words))
        out.append(" ".join(s[a : a + words]))
    return out


# ----------------------------------------------------------------------------- self-BLEU
@pytest.mark.parametrize("level", ["sentence", "corpus"])
def test_self_bleu_equals_nltk_on_random_text(level):
    rng = random.Random(1)
    vocab = [f"w{i}" for i in range(6)] + ["The", "the"]
    for trial in range(25):
        n = rng.randint(2, 7)
        comps = [" ".join(rng.choice(vocab) for _ in range(rng.choice([0, 1, 2, 3, 4, 6, 15, 30]))) for _ in range(n)]
        weights = [(0.25,) * 4, (0.5, 0.5), (0.1, 0.2, 0.3, 0.4), (1.0,), (0.2,) * 5][trial % 5]
        ks = list(range(2, n + 1))
        per = sb.self_bleu_per_prompt([comps], ks, weights=weights, level=level)
        for k in ks:
            assert per[k][0] == pytest.approx(nltk_self_bleu(comps, k, weights, level), abs=1e-9), (comps, k, weights)


@pytest.mark.parametrize("level", ["sentence", "corpus"])
def test_self_bleu_curve_equals_nltk_on_real_stories(real_stories, level):
    rng = random.Random(2)
    groups = [windows(real_stories, 10, 60, rng) for _ in range(3)]
    ks = [2, 3, 5, 10]
    per = sb.self_bleu_per_prompt(groups, ks, level=level)
    curve = sb.self_bleu_curve(groups, ks, level=level)
    for k in ks:
        ref = [nltk_self_bleu(g, k, level=level) for g in groups]
        np.testing.assert_allclose(per[k], ref, rtol=0, atol=1e-9)
        assert curve[k] == pytest.approx(float(np.mean(ref)), abs=1e-9)
        assert sb.self_bleu(groups[1], k, level=level) == pytest.approx(ref[1], abs=1e-9)
    assert sb.self_bleu_nltk(groups[0], 5, level=level) == pytest.approx(nltk_self_bleu(groups[0], 5, level=level), abs=1e-12)


def test_self_bleu_zero_overlap_and_nltk_tiny_value():
    # no shared token at all: nltk returns 0
    assert sb.self_bleu(["a b c d e", "f g h i j", "k l m n o"], 3) == 0.0
    assert sb.self_bleu(["a b c d e", "f g h i j"], 2, level="corpus") == 0.0
    # unigrams shared but no 4-gram: nltk (no smoothing) gives bp * exp(0.25 * log(float_min)) ~ 1e-77, not 0
    comps = ["a b c d e f", "f e d c b a"]
    ours, ref = sb.self_bleu(comps, 2), nltk_self_bleu(comps, 2)
    assert 0 < ref < 1e-60 and ours == pytest.approx(ref, abs=1e-9)


def test_self_bleu_identical_completions_is_one():
    story = "Once upon a time there was a little dog named Max who loved to run ."
    for level in ("sentence", "corpus"):
        assert sb.self_bleu([story] * 2, 2, level=level) == pytest.approx(1.0, abs=1e-12)
        curve = sb.self_bleu_curve([[story] * 6, [story + " x"] * 6], [2, 4, 6], level=level)
        assert all(v == pytest.approx(1.0, abs=1e-12) for v in curve.values())


def test_self_bleu_short_and_empty_completions():
    cases = [
        ["", ""],
        ["", "a b c d"],
        ["a", "a"],
        ["a b", "a b", "a b c"],
        ["a b c", "a b c d", ""],
        ["x y z", "x y z w v", "x y", "z"],
    ]
    for comps in cases:
        for level in ("sentence", "corpus"):
            for k in range(2, len(comps) + 1):
                assert sb.self_bleu(comps, k, level=level) == pytest.approx(nltk_self_bleu(comps, k, level=level), abs=1e-9)
    assert sb.self_bleu(["", "", ""]) == 0.0


def test_self_bleu_case_sensitive_and_parameters():
    a, b = "The cat sat on the mat", "the cat sat on the mat"
    assert sb.self_bleu([a, b], 2) < 1.0
    assert sb.self_bleu([a, b], 2, lowercase=True) == pytest.approx(1.0)
    assert sb.self_bleu([a, b], 2, tokenizer=lambda s: s.lower().split()) == pytest.approx(1.0)
    # only the first k completions are used
    assert sb.self_bleu([a, a, "zzz"], 2) == pytest.approx(1.0)


def test_self_bleu_bad_input():
    with pytest.raises(ValueError, match="needs at least 5 completions but only 3"):
        sb.self_bleu(["a", "b", "c"], 5)
    with pytest.raises(ValueError, match="k must be >= 2"):
        sb.self_bleu(["a", "b", "c"], 1)
    with pytest.raises(ValueError, match="at least 2 completions"):
        sb.self_bleu([])
    with pytest.raises(ValueError, match="empty"):
        sb.self_bleu([], 2)
    with pytest.raises(ValueError, match="single string"):
        sb.self_bleu("a b c", 2)
    with pytest.raises(ValueError, match="non-empty list"):
        sb.self_bleu_curve([], [2])
    with pytest.raises(ValueError, match="list of lists"):
        sb.self_bleu_curve(["a b", "c d"], [2])
    with pytest.raises(ValueError, match="prompt 1: k=3 needs at least 3"):
        sb.self_bleu_curve([["a", "b", "c"], ["a", "b"]], [2, 3])
    with pytest.raises(ValueError, match="ks is empty"):
        sb.self_bleu_curve([["a", "b"]], [])
    with pytest.raises(ValueError, match="level"):
        sb.self_bleu(["a", "b"], 2, level="macro")
    with pytest.raises(ValueError, match="weights"):
        sb.self_bleu(["a", "b"], 2, weights=())
    with pytest.raises(ValueError, match="expected str"):
        sb.self_bleu(["a", None], 2)


def test_self_bleu_table_mean_equals_curve_and_interval_covers_it(real_stories):
    rng = random.Random(5)
    ks = [2, 3, 5]

    def variants(n):  # one prompt: n copies of a story window, each word replaced with a prompt-specific chance
        base, rate = windows(real_stories, 1, 40, rng)[0].split(), rng.uniform(0.05, 0.6)
        return [" ".join(w if rng.random() > rate else f"x{rng.randrange(99)}" for w in base) for _ in range(n)]

    groups = {"few": [variants(5) for _ in range(4)], "many": [variants(5) for _ in range(40)]}
    per = {name: sb.self_bleu_per_prompt(g, ks) for name, g in groups.items()}
    t = sb.self_bleu_table(per, n_boot=1000, seed=7)
    assert list(t.columns) == ["model", "k", "self-BLEU", "ci_low", "ci_high", "prompts"]
    assert len(t) == 2 * len(ks) and set(t.prompts) == {4, 40}
    for name, g in groups.items():
        curve = sb.self_bleu_curve(g, ks)
        part = t[t.model == name].set_index("k")
        for k in ks:
            assert part.at[k, "self-BLEU"] == pytest.approx(curve[k], abs=1e-12)  # the number the curve reports
            assert part.at[k, "ci_low"] <= part.at[k, "self-BLEU"] <= part.at[k, "ci_high"]
    assert t.equals(sb.self_bleu_table(per, n_boot=1000, seed=7))  # seeded: identical on a rerun
    width = (t.ci_high - t.ci_low).groupby(t.model).mean()
    assert width["many"] < width["few"]  # ten times the prompts: a narrower interval
    # each model's interval depends on its own prompts only, not on which other models are in the table
    alone = sb.self_bleu_table({"few": per["few"]}, n_boot=1000, seed=7)
    assert alone.equals(t[t.model == "few"].reset_index(drop=True))


def test_choose_k_rules():
    curve = {2: 0.10, 3: 0.20, 4: 0.26, 5: 0.29, 6: 0.30, 8: 0.305, 10: 0.31}
    assert sb.choose_k(curve, "knee", eps=0.021) == 5
    assert sb.choose_k(curve, "knee", eps=0.0) is None  # never flat: the last k no longer qualifies vacuously
    assert sb.choose_k(curve, "knee", eps=1.0) == 2
    assert sb.choose_k(curve, "slope", eps=0.011) == 5  # steps after 5: 0.01, 0.0025, 0.0025 per completion
    assert sb.choose_k(curve, "threshold", threshold=0.27) == 4
    with pytest.raises(ValueError, match="no k has self-BLEU"):
        sb.choose_k(curve, "threshold", threshold=0.05)
    with pytest.raises(ValueError, match="needs threshold"):
        sb.choose_k(curve, "threshold")
    with pytest.raises(ValueError, match="rule must be"):
        sb.choose_k(curve, "elbow")
    with pytest.raises(ValueError, match="non-empty"):
        sb.choose_k({})


# the cpu reference run's tiny-500k curve (reports/cpu/tables/03_self_bleu.csv, rounded): still rising ~0.02 per 5 k
RISING = {2: 0.0056, 3: 0.0132, 4: 0.0225, 5: 0.0324, 6: 0.0412, 7: 0.0476, 8: 0.0531, 9: 0.0590, 10: 0.0678,
          15: 0.0979, 20: 0.1250, 25: 0.1432, 30: 0.1632}


def test_choose_k_rising_curve_has_no_knee():
    """A curve that never flattens has no knee: the rule must not fall through to the last k (it used to return 30)."""
    assert sb.choose_k(RISING, "knee", eps=0.01) is None
    assert sb.choose_k_or_none(RISING, "knee", eps=0.01) is None
    assert sb.choose_k(RISING, "slope", eps=0.001) is None  # steps of 0.004-0.008 per completion at the end
    assert sb.k_choice_label(RISING, None, 0.01) == "no knee within k ≤ 30"
    # a single point inside eps after k is not a knee either: k = 25 -> 30 changes by 0.02 > eps, 20 -> 25 too
    two_last_close = {**RISING, 30: 0.1435}
    assert sb.choose_k(two_last_close, "knee", eps=0.01) is None


def test_choose_k_finds_a_real_knee():
    curve = {2: 0.05, 3: 0.10, 4: 0.14, 5: 0.173, 6: 0.175, 8: 0.178, 10: 0.18, 15: 0.181, 20: 0.182}
    assert sb.choose_k(curve, "knee", eps=0.01) == 5
    assert sb.choose_k_or_none(curve, "knee", eps=0.01) == 5
    assert sb.k_choice_label(curve, 5, 0.01) == "k = 5"
    # the knee needs two later points inside eps: with k = 15 the last flat stretch starts at 10 -> 10
    assert sb.choose_k({2: 0.0, 5: 0.1, 10: 0.2, 15: 0.201, 20: 0.202}, "knee", eps=0.01) == 10
    assert sb.choose_k({2: 0.0, 5: 0.1, 10: 0.2, 15: 0.201}, "knee", eps=0.01) is None  # one later point only


def test_choose_k_flat_curve_is_undefined():
    flat = {k: 1e-79 if k == 2 else 0.003 for k in (2, 3, 4, 5, 10, 20, 30)}
    assert sb.choose_k_or_none(flat, "knee", eps=0.01) is None
    assert sb.k_choice_label(flat, None, 0.01) == "undefined: flat curve"
    assert sb.choose_k(flat, "knee", eps=0.01) == 2  # choose_k alone would read a "knee" off noise at the first k


def test_k_choices_per_model_of_a_table():
    import pandas as pd

    rows = [("a", k, v) for k, v in {2: 0.0, 5: 0.1, 10: 0.2, 15: 0.201, 20: 0.202}.items()]
    rows += [("b", k, 0.003) for k in (2, 5, 10, 15, 20)]  # flat
    rows += [("c", k, k / 100) for k in (2, 5, 10, 15, 20)]  # still rising
    table = pd.DataFrame(rows, columns=["model", "k", "self-BLEU"])
    curves, chosen, labels = sb.k_choices(table, "knee", eps=0.01)
    assert list(curves) == ["a", "b", "c"] and curves["a"] == {2: 0.0, 5: 0.1, 10: 0.2, 15: 0.201, 20: 0.202}
    assert chosen == {"a": 10, "b": None, "c": None}
    assert labels == {"a": "k = 10", "b": "undefined: flat curve", "c": "no knee within k ≤ 20"}
