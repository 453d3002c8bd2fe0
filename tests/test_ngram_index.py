"""Nearest training story and longest shared run (helpers.diversity.ngram_index) against brute force."""
from __future__ import annotations

import random

import pytest

from helpers.diversity import ngram_index as ni
from helpers.diversity.rouge import rouge_tokenize


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


# ----------------------------------------------------------------------------- nearest story, shared runs
def test_closest_finds_planted_near_copy(real_stories):
    rng = random.Random(3)
    corpus = list(real_stories[:300])
    query = real_stories[350]  # not in the corpus
    words = query.split()
    near = " ".join("banana" if i % 12 == 5 else w for i, w in enumerate(words))  # every 12th word changed
    planted = 137
    corpus.insert(planted, near)
    index = ni.NGramIndex(corpus, n=3)
    top = index.closest(query, top=3)
    assert top[0].story_id == planted and top[0].score > 0.5
    assert top[0].overlap > top[1].overlap >= top[2].overlap
    assert index.closest(query, metric="jaccard")[0].story_id == planted
    # a story of the corpus finds itself with score 1
    j = rng.randrange(len(corpus))
    assert index.closest(corpus[j])[0].score == pytest.approx(1.0)
    assert index.closest("zzz qqq xxx yyy") == []
    assert index.closest("two words") == []


def test_closest_scores_do_not_depend_on_the_other_stories():
    """The score is the shared n-grams over the text's distinct n-grams of words: words the index never saw must
    not merge ("dog ran zz1" and "dog ran zz2" are two n-grams), so an index of one story and an index of many
    give that story the same score (memorisation's shards rely on it)."""
    stories = ["the dog ran to the park", "a cat and a dog sat", "the dog ran away"]  # only the second knows "and"
    text = "the dog ran zz1 and the dog ran zz2 then"  # 3-grams: 7 distinct, 1 shared with story 0
    alone, many = ni.NGramIndex(stories[:1], n=3), ni.NGramIndex(stories, n=3)
    assert alone.closest(text)[0].score == many.closest(text)[0].score == pytest.approx(1 / 7)


def test_longest_shared_run_equals_brute_force_random():
    rng = random.Random(4)
    for trial in range(60):
        vocab = ["a", "b", "c", "d"][: rng.randint(2, 4)]
        corpus = [" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 25))) for _ in range(rng.randint(1, 6))]
        text = " ".join(rng.choice(vocab + ["z"]) for _ in range(rng.randint(0, 20)))
        run = ni.longest_common_substring_words(text, corpus, tokenizer="whitespace")
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
    index = ni.NGramIndex(corpus, n=3)
    tok = lambda s: rouge_tokenize(s, use_stemmer=False)  # the index's "words" tokenizer
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
        ni.NGramIndex([])
    with pytest.raises(ValueError, match="n must be"):
        ni.NGramIndex(["a b"], n=0)
    with pytest.raises(ValueError, match="tokenizer"):
        ni.NGramIndex(["a b"], tokenizer="bpe")
    with pytest.raises(ValueError, match="top must be"):
        ni.NGramIndex(["a b c"]).closest("a b c", top=0)
