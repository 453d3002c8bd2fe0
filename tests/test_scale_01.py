"""Notebook 01 must not hold the corpus in memory: its code cells run on a generated corpus of two sizes
(``benchmarks/scale_01.py``, in subprocesses) and the peak RSS may grow by less than 0.75 byte per byte of corpus
added. Code that keeps every story or every word as Python objects grows by 5-20 bytes per byte and fails.

Deselect with ``-m "not scale"`` (about a minute on two idle cores)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "scale_01.py"
# TinyStories words: ~22 MB and ~88 MB train files, both larger than the 16 MiB chunks the story index reads, so a
# bounded read buffer counts at both sizes and cancels (at 2M words, ~11 MB, the small run read its file in one
# chunk and the large one's buffers alone came to ~0.75 byte per byte added)
SMALL, LARGE = 4_000_000, 16_000_000


def run_scale(words: int, folder: Path) -> dict:
    env = {**os.environ, "MPLBACKEND": "Agg", "TOKENIZERS_PARALLELISM": "false"}
    # budgets of a fixed size at both sizes and no full budget: the steps that read the whole corpus (loading, stats,
    # vocabulary growth, budget planning, held-out stories, ledger) scale with it; tokenizers train on 300k words
    res = subprocess.run([sys.executable, str(SCRIPT), "--words", str(words), "--dir", str(folder), "--json",
                          "--fixed-budgets", "100000,200000"], cwd=SCRIPT.parents[1], env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.scale
@pytest.mark.slow
def test_notebook01_memory_is_sublinear_in_the_corpus(tmp_path):
    small = run_scale(SMALL, tmp_path / "small")
    large = run_scale(LARGE, tmp_path / "large")
    added = large["train_file_bytes"] - small["train_file_bytes"]
    grown = (large["peak_rss_mib"] - small["peak_rss_mib"]) * 2**20
    steps = {r["cell"]: (r["peak_rss_mib"], s["peak_rss_mib"]) for r, s in zip(large["steps"], small["steps"])}
    detail = (f"peak RSS {small['peak_rss_mib']} MiB at {SMALL:,} words, {large['peak_rss_mib']} MiB at {LARGE:,} "
              f"(+{grown / 2**20:.0f} MiB for +{added / 2**20:.0f} MiB of stories); per cell (large, small): {steps}")
    assert large["words"] >= 4 * small["words"], detail
    assert grown < 0.75 * added, "memory grows with the corpus: " + detail
    assert large["peak_rss_mib"] < 1536, "over the 1.5 GiB cap: " + detail
    assert large["run_disk_bytes"] < 0.5 * large["train_file_bytes"], detail  # fixed budgets: no copy of the corpus


# ----------------------------------------------------------------------------- the streaming helpers, at unit scale
def _story_file(tmp_path):
    f = tmp_path / "train.txt"
    f.write_bytes(("\u00a0 Tom didnâ€™t go.\r\nNext line\rend. <|endoftext|>\n\n<|endoftext|>  Fine story.\n<|endoftext|>"
                   "“Hi,” she said.\u2003<|endoftext|>\r\nA b c<|endoftext|>trunc tail é").encode())
    return f


@pytest.mark.parametrize("chunk", [3, 16, 1 << 20])
def test_lazy_index_gives_the_stories_of_the_eager_load(tmp_path, chunk):
    from helpers.data import corpora

    f = _story_file(tmp_path)
    eager, lazy = corpora.load_tinystories(f), corpora.index_story_file(f, chunk_bytes=chunk)
    assert eager.stories == ["Tom didn’t go.\nNext line\nend.", "Fine story.", "“Hi,” she said.", "A b c"]
    assert list(lazy.stories) == eager.stories and lazy.stories[1:3] == eager.stories[1:3]
    assert lazy.stories[-1] == "A b c" and lazy.stories[0] == eager.stories[0]  # repaired (mojibake) story kept
    assert (lazy.n_repaired, lazy.n_dropped_truncated, lazy.n_dropped_empty) == (1, 1, 1)
    assert (eager.n_repaired, eager.n_dropped_truncated, eager.n_dropped_empty) == (1, 1, 1)
    assert lazy.files == eager.files and lazy.words == eager.words == 14
    assert list(lazy.word_counts) == [corpora.count_words(s) for s in eager.stories]
    assert list(corpora.load_tinystories(f, lazy=True, limit=2).stories) == eager.stories[:2]


def test_lazy_corpus_chains_and_plans_the_same_budgets(tmp_path):
    import gzip

    from helpers.data import budgets, corpora, corpus_files as CF, story_files as SF, text_stats as TS

    g = tmp_path / "v2.txt"
    g.write_bytes(gzip.open(corpora.resolve("tinystories/v2_train_prefix_10k_lines.txt.gz")).read())
    first = "tinystories/v1_train_prefix_2MiB.txt.gz"
    eager = corpora.StoryCorpus([]).extend(corpora.load_tinystories(first)).extend(corpora.load_tinystories(g))
    lazy = corpora.StoryCorpus([]).extend(corpora.load_tinystories(first, lazy=True)).extend(corpora.load_tinystories(g, lazy=True))
    assert isinstance(lazy.stories, SF.ChainedStories) and len(lazy) == len(eager) > 4000
    assert list(lazy.stories) == eager.stories and lazy.stories[2500] == eager.stories[2500]
    assert TS.corpus_stats(lazy.stories, "x") == TS.corpus_stats(eager.stories, "x")
    a = CF.prepare_corpora(tmp_path / "a", eager.stories, eager.files, [], {}, [50_000, 200_000], [], 3,
                           heldout_max_words=20_000)
    b = CF.prepare_corpora(tmp_path / "b", lazy.stories, lazy.files, [], {}, [50_000, 200_000], [], 3,
                           heldout_max_words=20_000, tiny_word_counts=lazy.word_counts)
    for name in ("tiny-50k.jsonl", "tiny-200k.jsonl", "tiny-heldout.jsonl", "ledger.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    full_a = budgets.plan_budgets(eager.stories, [50_000, 10**9], 3, 20_000, full_budget=10**9)
    assert budgets.plan_budgets(lazy.stories, [50_000, 10**9], 3, 20_000, 10**9, lazy.word_counts) == full_a


def _old_vocab_growth(texts, n_points=40):  # the list-of-every-word version it replaces
    words = [w for t in texts for w in t.split()]
    if not words:
        return [0], [0]
    marks = sorted({max(1, round(len(words) * (i + 1) / n_points)) for i in range(n_points)})
    seen, xs, ys, j = set(), [], [], 0
    for m in marks:
        seen.update(words[j:m])
        j = m
        xs.append(m)
        ys.append(len(seen))
    return xs, ys


def test_streamed_vocab_growth_equals_the_list_version(real_stories):
    from helpers.data import budgets, text_stats as TS

    for texts in (real_stories, real_stories[:3], ["a b a", "c"], ["", "x <|endoftext|> y"], [], [" "]):
        for n in (1, 4, 40, 1000):
            assert TS.vocab_growth(texts, n) == _old_vocab_growth(texts, n), (texts[:2], n)
    total = sum(len(t.split()) for t in real_stories)
    streamed = TS.vocab_growth(budgets.iter_in_budget_order(real_stories, 5), total=total)
    assert streamed == _old_vocab_growth(budgets.in_budget_order(real_stories, 5))
    with pytest.raises(ValueError, match="total"):
        TS.vocab_growth(iter(real_stories), total=total + 1)


def test_tokenizer_streams_and_checks_like_story_by_story(real_stories, tmp_path):
    from helpers.data import corpus_files as CF, tokenizers

    listed = tokenizers.train_tokenizer(real_stories, "decoder", 600)
    streamed = tokenizers.train_tokenizer((s for s in real_stories), "decoder", 600)  # a one-shot generator
    assert streamed.backend_tokenizer.to_str() == listed.backend_tokenizer.to_str()
    stories = real_stories[:150] + ["<|endoftext|> inside", "Cafe\u0301 and caf\u00e9"]
    got = tokenizers.encoding_check(listed, iter(stories), batch_size=7)
    assert got == {"texts": len(stories), "words": sum(len(s.split()) for s in stories),
                   "tokens": sum(len(x) for x in tokenizers.encode_stories(listed, stories, add_eot=False)),
                   "round-trip failures": sum(not tokenizers.round_trip_ok(listed, s) for s in stories), "every": 1}
    assert got["texts"] == 152 and got["tokens"] > 150
    # a bounded sample: the first stories up to and including the one that reaches max_words, across batches
    cum = [sum(len(s.split()) for s in stories[:i + 1]) for i in range(len(stories))]
    k = next(i for i, c in enumerate(cum) if c >= 1000) + 1
    part = tokenizers.encoding_check(listed, iter(stories), batch_size=7, max_words=1000)
    assert part == tokenizers.encoding_check(listed, iter(stories[:k]), batch_size=7) and part["texts"] == k
    assert tokenizers.encoding_check(listed, iter(stories), max_words=10**9) == got
    with pytest.raises(ValueError, match="max_words"):
        tokenizers.encoding_check(listed, iter(stories), max_words=0)
    # spread over the whole corpus: every k-th story, so nested budgets are not all checked on the same first stories
    total = cum[-1]
    spread = tokenizers.encoding_check(listed, iter(stories), batch_size=7, max_words=total // 4, total_words=total)
    assert spread["every"] == 5 and spread["texts"] == len(stories[::5])
    assert spread == {**tokenizers.encoding_check(listed, iter(stories[::5]), batch_size=7), "every": 5}
    row = tokenizers.tokenizer_row("c", listed, spread, total)
    assert row["checked"].startswith("every 5th story over the whole budget") and row["tokens counted"].startswith("estimated")
    assert row["tokens"] == round(spread["tokens"] / spread["words"] * total)
    assert tokenizers.tokenizer_row("c", listed, got, total)["tokens"] == got["tokens"]  # all checked: counted
    assert [tokenizers.ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111, 1002)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st", "111th", "1,002nd"]
    CF.write_corpus(tmp_path / "c.jsonl", ({"id": i, "text": s} for i, s in enumerate(real_stories[:20])))
    assert list(CF.iter_texts(tmp_path / "c.jsonl")) == real_stories[:20]


def test_mix_table_reads_no_corpus_file_for_nested_budgets(tmp_path, monkeypatch):
    from helpers.data import corpus_files as CF, ledger as L
    from helpers.data.corpora import Document

    stories = [f"w{i} " * (5 + i % 7) for i in range(300)]
    docs = [Document("s", "a b c d") for _ in range(100)]
    led = CF.prepare_corpora(tmp_path, stories, {"f": "x"}, docs, {}, [200, 400, 800], [100, 200], seed=0)
    monkeypatch.setattr(L, "iter_rows", lambda p: pytest.fail(f"read {p}"))
    mixes = [[b, t] for b in ("baby-100", "baby-200") for t in ("tiny-200", "tiny-400", "tiny-800")]
    table = led.mix_table(mixes, 600)
    assert list(table["rule"]) == ["fits", "fits", "refused", "fits", "fits", "refused"]
    assert list(table["counted (|D_baby| + |D_tiny ∪ generator corpus|)"]) == [
        led[b].words + led[t].words for b, t in mixes]


def test_vocab_growth_on_a_log_scale(real_stories):
    """spacing="log": marks from 100 words to the end, evenly spaced in log, the same types as the linear curve at
    the last mark; an unknown spacing is refused."""
    from helpers.data import text_stats as TS

    total = sum(len(t.split()) for t in real_stories)
    xs, ys = TS.vocab_growth(real_stories, n_points=20, total=total, spacing="log")
    assert xs[0] == 100 and xs[-1] == total and xs == sorted(set(xs))
    ratios = [b / a for a, b in zip(xs, xs[1:])]
    assert max(ratios) / min(ratios) < 1.2  # evenly spaced on a log axis (up to rounding)
    assert ys[-1] == TS.vocab_growth(real_stories, total=total)[1][-1] and ys == sorted(ys)
    with pytest.raises(ValueError, match="spacing"):
        TS.vocab_growth(real_stories, spacing="sqrt")
