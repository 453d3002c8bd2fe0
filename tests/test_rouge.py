"""ROUGE-n (helpers.diversity.rouge) against the ``rouge-score`` package."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.diversity import rouge


def test_rouge_tokenize_matches_rouge_score(real_stories):
    from rouge_score import tokenizers

    ref = tokenizers.DefaultTokenizer(use_stemmer=True)
    for s in real_stories[:40] + ["Hello, WORLD!! it's 3 o'clock — café naïve", ""]:
        assert rouge.rouge_tokenize(s) == ref.tokenize(s)


def test_rouge_fast_paths_equal_rouge_score(real_stories):
    texts = [s[:300] for s in real_stories[:10]] + ["", "The dog runs.", "the dogs running fast", real_stories[0][:300]]
    for score in ("fmeasure", "precision", "recall"):
        ref = np.array([[rouge.rouge2(a, b, score=score) for b in texts] for a in texts])
        np.testing.assert_allclose(rouge.rouge_n_matrix(texts, score=score), ref, rtol=0, atol=1e-9)
    f = np.array([[rouge.rouge2(a, b) for b in texts] for a in texts])
    np.fill_diagonal(f, -np.inf)
    np.testing.assert_allclose(rouge.max_pairwise_rouge2(texts), f.max(axis=1), rtol=0, atol=1e-9)
    pairs = rouge.rouge2_pairs(texts[:7], texts[7:])
    np.testing.assert_allclose(pairs, [rouge.rouge2(a, b) for a, b in zip(texts[:7], texts[7:])], rtol=0, atol=1e-9)
    assert rouge.rouge2("the dogs are running", "The dog is running") > 0  # stemming: "dogs"/"dog", "running"
    with pytest.raises(ValueError, match="at least 2 texts"):
        rouge.max_pairwise_rouge2(["one"])
    with pytest.raises(ValueError, match="score must be"):
        rouge.rouge2("a b", "a b", score="f1")
