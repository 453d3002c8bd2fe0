"""Self-BLEU, ROUGE-2, nearest training story and longest shared run (helpers.diversity) against references:
nltk ``corpus_bleu``, the ``rouge-score`` package and brute force."""
from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
from nltk.translate.bleu_score import corpus_bleu

from helpers import diversity as dv


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


def brute_lcs(a: list[str], b: list[str]) -> int:
    best = 0
    prev = [0] * (len(b) + 1)
    for i in range(1, len(a) + 1):
        cur = [0] * (len(b) + 1)
        for j in range(1, len(b) + 1):
            if a[i - 1] == b[j - 1]:
                cur[j] = prev[j - 1] + 1
                best = max(best, cur[j])
        prev = cur
    return best


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
        per = dv.self_bleu_per_prompt([comps], ks, weights=weights, level=level)
        for k in ks:
            assert per[k][0] == pytest.approx(nltk_self_bleu(comps, k, weights, level), abs=1e-9), (comps, k, weights)


@pytest.mark.parametrize("level", ["sentence", "corpus"])
def test_self_bleu_curve_equals_nltk_on_real_stories(real_stories, level):
    rng = random.Random(2)
    groups = [windows(real_stories, 10, 60, rng) for _ in range(3)]
    ks = [2, 3, 5, 10]
    per = dv.self_bleu_per_prompt(groups, ks, level=level)
    curve = dv.self_bleu_curve(groups, ks, level=level)
    for k in ks:
        ref = [nltk_self_bleu(g, k, level=level) for g in groups]
        np.testing.assert_allclose(per[k], ref, rtol=0, atol=1e-9)
        assert curve[k] == pytest.approx(float(np.mean(ref)), abs=1e-9)
        assert dv.self_bleu(groups[1], k, level=level) == pytest.approx(ref[1], abs=1e-9)
    assert dv.self_bleu_nltk(groups[0], 5, level=level) == pytest.approx(nltk_self_bleu(groups[0], 5, level=level), abs=1e-12)


def test_self_bleu_zero_overlap_and_nltk_tiny_value():
    # no shared token at all: nltk returns 0
    assert dv.self_bleu(["a b c d e", "f g h i j", "k l m n o"], 3) == 0.0
    assert dv.self_bleu(["a b c d e", "f g h i j"], 2, level="corpus") == 0.0
    # unigrams shared but no 4-gram: nltk (no smoothing) gives bp * exp(0.25 * log(float_min)) ~ 1e-77, not 0
    comps = ["a b c d e f", "f e d c b a"]
    ours, ref = dv.self_bleu(comps, 2), nltk_self_bleu(comps, 2)
    assert 0 < ref < 1e-60 and ours == pytest.approx(ref, abs=1e-9)


def test_self_bleu_identical_completions_is_one():
    story = "Once upon a time there was a little dog named Max who loved to run ."
    for level in ("sentence", "corpus"):
        assert dv.self_bleu([story] * 2, 2, level=level) == pytest.approx(1.0, abs=1e-12)
        curve = dv.self_bleu_curve([[story] * 6, [story + " x"] * 6], [2, 4, 6], level=level)
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
                assert dv.self_bleu(comps, k, level=level) == pytest.approx(nltk_self_bleu(comps, k, level=level), abs=1e-9)
    assert dv.self_bleu(["", "", ""]) == 0.0


def test_self_bleu_case_sensitive_and_parameters():
    a, b = "The cat sat on the mat", "the cat sat on the mat"
    assert dv.self_bleu([a, b], 2) < 1.0
    assert dv.self_bleu([a, b], 2, lowercase=True) == pytest.approx(1.0)
    assert dv.self_bleu([a, b], 2, tokenizer=lambda s: s.lower().split()) == pytest.approx(1.0)
    # only the first k completions are used
    assert dv.self_bleu([a, a, "zzz"], 2) == pytest.approx(1.0)


def test_self_bleu_bad_input():
    with pytest.raises(ValueError, match="needs at least 5 completions but only 3"):
        dv.self_bleu(["a", "b", "c"], 5)
    with pytest.raises(ValueError, match="k must be >= 2"):
        dv.self_bleu(["a", "b", "c"], 1)
    with pytest.raises(ValueError, match="at least 2 completions"):
        dv.self_bleu([])
    with pytest.raises(ValueError, match="empty"):
        dv.self_bleu([], 2)
    with pytest.raises(ValueError, match="single string"):
        dv.self_bleu("a b c", 2)
    with pytest.raises(ValueError, match="non-empty list"):
        dv.self_bleu_curve([], [2])
    with pytest.raises(ValueError, match="list of lists"):
        dv.self_bleu_curve(["a b", "c d"], [2])
    with pytest.raises(ValueError, match="prompt 1: k=3 needs at least 3"):
        dv.self_bleu_curve([["a", "b", "c"], ["a", "b"]], [2, 3])
    with pytest.raises(ValueError, match="ks is empty"):
        dv.self_bleu_curve([["a", "b"]], [])
    with pytest.raises(ValueError, match="level"):
        dv.self_bleu(["a", "b"], 2, level="macro")
    with pytest.raises(ValueError, match="weights"):
        dv.self_bleu(["a", "b"], 2, weights=())
    with pytest.raises(ValueError, match="expected str"):
        dv.self_bleu(["a", None], 2)


def test_bootstrap_mean_interval_contains_mean_is_seeded_and_shrinks():
    rng = np.random.default_rng(0)
    small, large = rng.random(8), rng.random(800)
    lo, hi = dv.bootstrap_mean_interval(small, n_boot=1000, seed=3)
    assert lo.shape == hi.shape == (1,) and lo[0] < small.mean() < hi[0]
    again = dv.bootstrap_mean_interval(small, n_boot=1000, seed=3)
    assert (again[0] == lo).all() and (again[1] == hi).all()  # same seed, same interval
    other = dv.bootstrap_mean_interval(small, n_boot=1000, seed=4)
    assert (other[0] != lo).any() or (other[1] != hi).any()
    llo, lhi = dv.bootstrap_mean_interval(large, n_boot=1000, seed=3)
    assert lhi[0] - llo[0] < (hi[0] - lo[0]) / 3  # 100x the prompts: about a tenth of the width
    assert dv.bootstrap_mean_interval([0.5] * 5)[0][0] == dv.bootstrap_mean_interval([0.5] * 5)[1][0] == 0.5
    # columns share the resamples: a column that is another plus a constant has the shifted interval
    two = np.column_stack([small, small + 1.0])
    blo, bhi = dv.bootstrap_mean_interval(two, n_boot=500, seed=1)
    np.testing.assert_allclose(blo[1] - blo[0], 1.0, atol=1e-12)
    np.testing.assert_allclose(bhi[1] - bhi[0], 1.0, atol=1e-12)
    with pytest.raises(ValueError):
        dv.bootstrap_mean_interval([])
    with pytest.raises(ValueError):
        dv.bootstrap_mean_interval([1.0, 2.0], confidence=1.0)


def test_self_bleu_table_mean_equals_curve_and_interval_covers_it(real_stories):
    rng = random.Random(5)
    ks = [2, 3, 5]

    def variants(n):  # one prompt: n copies of a story window, each word replaced with a prompt-specific chance
        base, rate = windows(real_stories, 1, 40, rng)[0].split(), rng.uniform(0.05, 0.6)
        return [" ".join(w if rng.random() > rate else f"x{rng.randrange(99)}" for w in base) for _ in range(n)]

    groups = {"few": [variants(5) for _ in range(4)], "many": [variants(5) for _ in range(40)]}
    per = {name: dv.self_bleu_per_prompt(g, ks) for name, g in groups.items()}
    t = dv.self_bleu_table(per, n_boot=1000, seed=7)
    assert list(t.columns) == ["model", "k", "self-BLEU", "ci_low", "ci_high", "prompts"]
    assert len(t) == 2 * len(ks) and set(t.prompts) == {4, 40}
    for name, g in groups.items():
        curve = dv.self_bleu_curve(g, ks)
        part = t[t.model == name].set_index("k")
        for k in ks:
            assert part.at[k, "self-BLEU"] == pytest.approx(curve[k], abs=1e-12)  # the number the curve reports
            assert part.at[k, "ci_low"] <= part.at[k, "self-BLEU"] <= part.at[k, "ci_high"]
    assert t.equals(dv.self_bleu_table(per, n_boot=1000, seed=7))  # seeded: identical on a rerun
    width = (t.ci_high - t.ci_low).groupby(t.model).mean()
    assert width["many"] < width["few"]  # ten times the prompts: a narrower interval
    # each model's interval depends on its own prompts only, not on which other models are in the table
    alone = dv.self_bleu_table({"few": per["few"]}, n_boot=1000, seed=7)
    assert alone.equals(t[t.model == "few"].reset_index(drop=True))


def test_choose_k_rules():
    curve = {2: 0.10, 3: 0.20, 4: 0.26, 5: 0.29, 6: 0.30, 8: 0.305, 10: 0.31}
    assert dv.choose_k(curve, "knee", eps=0.021) == 5
    assert dv.choose_k(curve, "knee", eps=0.0) == 10
    assert dv.choose_k(curve, "knee", eps=1.0) == 2
    assert dv.choose_k(curve, "slope", eps=0.011) == 5  # steps after 5: 0.01, 0.0025, 0.0025 per completion
    assert dv.choose_k(curve, "threshold", threshold=0.27) == 4
    with pytest.raises(ValueError, match="no k has self-BLEU"):
        dv.choose_k(curve, "threshold", threshold=0.05)
    with pytest.raises(ValueError, match="needs threshold"):
        dv.choose_k(curve, "threshold")
    with pytest.raises(ValueError, match="rule must be"):
        dv.choose_k(curve, "elbow")
    with pytest.raises(ValueError, match="non-empty"):
        dv.choose_k({})


# ----------------------------------------------------------------------------- ROUGE
def test_rouge_tokenize_matches_rouge_score(real_stories):
    from rouge_score import tokenizers

    ref = tokenizers.DefaultTokenizer(use_stemmer=True)
    for s in real_stories[:40] + ["Hello, WORLD!! it's 3 o'clock — café naïve", ""]:
        assert dv.rouge_tokenize(s) == ref.tokenize(s)


def test_rouge_fast_paths_equal_rouge_score(real_stories):
    texts = [s[:300] for s in real_stories[:10]] + ["", "The dog runs.", "the dogs running fast", real_stories[0][:300]]
    for score in ("fmeasure", "precision", "recall"):
        ref = np.array([[dv.rouge2(a, b, score=score) for b in texts] for a in texts])
        np.testing.assert_allclose(dv.rouge_n_matrix(texts, score=score), ref, rtol=0, atol=1e-9)
    f = np.array([[dv.rouge2(a, b) for b in texts] for a in texts])
    np.fill_diagonal(f, -np.inf)
    np.testing.assert_allclose(dv.max_pairwise_rouge2(texts), f.max(axis=1), rtol=0, atol=1e-9)
    pairs = dv.rouge2_pairs(texts[:7], texts[7:])
    np.testing.assert_allclose(pairs, [dv.rouge2(a, b) for a, b in zip(texts[:7], texts[7:])], rtol=0, atol=1e-9)
    assert dv.rouge2("the dogs are running", "The dog is running") > 0  # stemming: "dogs"/"dog", "running"
    with pytest.raises(ValueError, match="at least 2 texts"):
        dv.max_pairwise_rouge2(["one"])
    with pytest.raises(ValueError, match="score must be"):
        dv.rouge2("a b", "a b", score="f1")


# ----------------------------------------------------------------------------- nearest story, shared runs
def test_closest_finds_planted_near_copy(real_stories):
    rng = random.Random(3)
    corpus = list(real_stories[:300])
    query = real_stories[350]  # not in the corpus
    words = query.split()
    near = " ".join("banana" if i % 12 == 5 else w for i, w in enumerate(words))  # every 12th word changed
    planted = 137
    corpus.insert(planted, near)
    index = dv.NGramIndex(corpus, n=3)
    top = index.closest(query, top=3)
    assert top[0].story_id == planted and top[0].score > 0.5
    assert top[0].overlap > top[1].overlap >= top[2].overlap
    assert index.closest(query, metric="jaccard")[0].story_id == planted
    # a story of the corpus finds itself with score 1
    j = rng.randrange(len(corpus))
    assert index.closest(corpus[j])[0].score == pytest.approx(1.0)
    assert index.closest("zzz qqq xxx yyy") == []
    assert index.closest("two words") == []


def test_longest_shared_run_equals_brute_force_random():
    rng = random.Random(4)
    for trial in range(60):
        vocab = ["a", "b", "c", "d"][: rng.randint(2, 4)]
        corpus = [" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 25))) for _ in range(rng.randint(1, 6))]
        text = " ".join(rng.choice(vocab + ["z"]) for _ in range(rng.randint(0, 20)))
        run = dv.longest_common_substring_words(text, corpus, tokenizer="whitespace")
        tw = text.split()
        assert run.length == max(brute_lcs(tw, s.split()) for s in corpus), (text, corpus)
        if run.length:
            story = corpus[run.story_id].split()
            assert tw[run.text_start : run.text_start + run.length] == story[run.story_start : run.story_start + run.length]
            assert list(run.words) == story[run.story_start : run.story_start + run.length]
        else:
            assert run.story_id == -1


def test_longest_shared_run_real_text_and_copy_flag(real_stories):
    corpus = list(real_stories[:30])
    index = dv.NGramIndex(corpus, n=3)
    tok = lambda s: dv.rouge_tokenize(s, use_stemmer=False)  # the index's "words" tokenizer
    a, b = corpus[4].split(), corpus[17].split()
    text = " ".join(a[10:35] + ["meanwhile"] + b[5:20])
    run = index.longest_shared_run(text)
    assert run.length == max(brute_lcs(tok(text), tok(s)) for s in corpus)
    assert run.story_id == 4 and run.length >= 25 and run.exact_copy
    other = real_stories[200]
    run2 = index.longest_shared_run(other)
    assert run2.length == max(brute_lcs(tok(other), tok(s)) for s in corpus)
    assert not run2.exact_copy
    # thresholds are parameters
    short = " ".join(corpus[3].split()[:12])
    assert index.longest_shared_run(short).exact_copy  # 100 % of 12 words >= 10
    assert not index.longest_shared_run(short, min_fraction=None).exact_copy
    assert index.longest_shared_run(short, min_words=12, min_fraction=None).exact_copy
    assert not index.longest_shared_run(" ".join(short.split()[:4])).exact_copy  # too short to be a copy
    assert index.longest_shared_run("").length == 0


def test_index_bad_input():
    with pytest.raises(ValueError, match="non-empty list"):
        dv.NGramIndex([])
    with pytest.raises(ValueError, match="n must be"):
        dv.NGramIndex(["a b"], n=0)
    with pytest.raises(ValueError, match="tokenizer"):
        dv.NGramIndex(["a b"], tokenizer="bpe")
    with pytest.raises(ValueError, match="top must be"):
        dv.NGramIndex(["a b c"]).closest("a b c", top=0)


# ----------------------------------------------------------------------------- loops and endings


def test_repeated_run_finds_loops_only():
    loop = "there was a big dog . there was a big dog . and"
    assert dv.repeated_run(loop, 6)
    assert not dv.repeated_run(loop, 7)  # the repeated run is 6 words long
    assert not dv.repeated_run("one two three four five six seven eight nine ten", 6)
    assert dv.repeated_run("A b c d e f and a B c d e F", 6)  # case-insensitive
    with pytest.raises(ValueError):
        dv.repeated_run("a b", 0)


def test_wilson_interval_known_values():
    lo, hi = dv.wilson_interval(5, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.2366, 0.7634)
    lo, hi = dv.wilson_interval(0, 20)
    assert lo == pytest.approx(0.0, abs=1e-12) and round(hi, 4) == 0.1611
    with pytest.raises(ValueError):
        dv.wilson_interval(3, 2)


def test_continuation_health_shares():
    rows = [{"completion": "a b c d e f a b c d e f", "ended": False}, {"completion": "The end.", "ended": True},
            {"completion": "She smiled and went home.", "ended": True}, {"completion": "x", "ended": True}]
    h = dv.continuation_health(rows)
    assert h["completions"] == 4 and h["ended (%)"] == 75.0 and h["loops (%)"] == 25.0
    assert h["ended CI low"] < 75.0 < h["ended CI high"]
    with pytest.raises(ValueError, match="ended"):
        dv.continuation_health([{"completion": "x"}])


@pytest.mark.parametrize("n", [1, 7, 40, 150, 600, 1001])
def test_wilson_interval_contains_the_estimate_at_the_ends(n):
    """At k = 0 and k = n the interval must still contain the estimate (a float upper end of 1 - 1e-16 broke
    notebook 03's error bars for the real endings, which all end)."""
    from helpers.diversity import wilson_interval

    for k in (0, n):
        lo, hi = wilson_interval(k, n)
        assert lo <= k / n <= hi and 0.0 <= lo and hi <= 1.0
