import gzip
import json

import pytest

from helpers.data import corpora as data, normalisation, text_stats


def test_bundled_tinystories_counts_and_truncated_tail():
    c = data.load_tinystories("tinystories/v1_train_prefix_2MiB.txt.gz")
    # SOURCES.md: 2316 stories ended by <|endoftext|> + 1 truncated tail; 404,062 words incl. the 163-word tail
    assert len(c) == 2316
    assert c.n_dropped_truncated == 1
    assert c.words == 404_062 - 163
    assert all("<|endoftext|>" not in s for s in c.stories)


def test_json_list_and_texts_object(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"texts": ["One day. ", "Two   words"]}))
    (tmp_path / "b.jsonl").write_text('{"story": "x y"}\n\n{"text": "z"}\n')
    c = data.load_tinystories(tmp_path)
    assert c.stories == ["One day.", "Two   words", "x y", "z"]
    assert c.words == 2 + 2 + 2 + 1


def test_mojibake_repaired_and_counted(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("Tom didnâ€™t go.<|endoftext|>Fine story.<|endoftext|>", encoding="utf-8")
    c = data.load_tinystories(f)
    assert c.stories == ["Tom didn’t go.", "Fine story."]
    assert c.n_repaired == 1 and c.n_dropped_truncated == 0


@pytest.mark.parametrize("lazy", [False, True])
def test_nul_bytes_and_overlong_stories_are_counted_in_the_repairs_table(tmp_path, lazy):
    long_story = "word " * 25_000  # 125,000 characters: most likely several stories whose separators were lost
    f = tmp_path / "s.txt"
    f.write_text(f"Tom\x00 ran\x00.<|endoftext|>Fine story.<|endoftext|>\x00\x00<|endoftext|>{long_story}<|endoftext|>",
                 encoding="utf-8")
    c = data.load_tinystories(f, lazy=lazy)
    assert list(c.stories) == ["Tom ran.", "Fine story.", long_story.strip()]  # NULs removed, a NUL-only story dropped
    assert (c.n_nul, c.n_overlong, c.n_dropped_empty, c.n_repaired) == (2, 1, 1, 0)
    assert list(c.word_counts) == [2, 2, 25_000]
    row = data.repairs_row("TinyStories train", c)
    assert row["NUL bytes removed"] == 2 and row["over 100,000 characters (kept)"] == 1
    assert row["repaired (mojibake)"] == 0 and row["count"] == 3 and row["units"] == "stories"
    clean = tmp_path / "clean.txt"
    clean.write_text("A story.<|endoftext|>", encoding="utf-8")
    both = data.load_tinystories(clean, lazy=lazy).extend(c)
    assert (both.n_nul, both.n_overlong, len(both)) == (2, 1, 4)


def test_curly_quotes_are_not_mojibake(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("“Hi,” she said. It’s fine.<|endoftext|>", encoding="utf-8")
    c = data.load_tinystories(f)
    assert c.stories == ["“Hi,” she said. It’s fine."] and c.n_repaired == 0


def test_bad_inputs(tmp_path):
    with pytest.raises(FileNotFoundError):
        data.load_tinystories(tmp_path / "missing.txt")
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(data.DataError, match="empty"):
        data.load_tinystories(tmp_path / "empty.txt")
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{"text": broken\n')
    with pytest.raises(data.DataError, match=r"bad.jsonl:2: malformed JSON"):
        data.load_tinystories(tmp_path / "bad.jsonl")
    (tmp_path / "nosep.txt").write_text("no separators here")
    with pytest.raises(data.DataError, match="no <\\|endoftext\\|> separators"):
        data.load_tinystories(tmp_path / "nosep.txt")


def test_hf_dataset_missing_says_what_to_download():
    with pytest.raises(data.DataError, match="Download it"):
        data.load_tinystories("nonexistent-user/NoSuchDataset")


def test_checksum_mismatch_detected(tmp_path, monkeypatch):
    root = tmp_path / "data"
    (root / "tinystories").mkdir(parents=True)
    f = root / "tinystories" / "x.txt.gz"
    with gzip.open(f, "wt") as g:
        g.write("a b<|endoftext|>")
    data.write_checksums(root)
    monkeypatch.setattr(data, "data_dir", lambda: root)
    assert data.load_tinystories(f).stories == ["a b"]
    with gzip.open(f, "wt") as g:
        g.write("tampered<|endoftext|>")
    with pytest.raises(data.DataError, match="checksum mismatch"):
        data.load_tinystories(f)


def test_bundled_checksums_all_match():
    want = data.expected_checksums()
    assert len(want) > 150
    from helpers.core.digests import sha256_file

    bad = [k for k, v in want.items() if sha256_file(data.data_dir() / k) != v]
    assert not bad


def test_babylm_documents_and_sources():
    docs = data.load_babylm({"switchboard": ["babylm_corpus/2024_train_10M/switchboard.train.gz"]}, chunk_lines=10)
    assert {d.source for d in docs} == {"switchboard"}
    assert sum(d.words for d in docs) == 146_789  # SOURCES.md word count
    assert max(len(d.text.splitlines()) for d in docs) == 10


def test_babylm_folder(tmp_path):
    (tmp_path / "childes.train").write_text("a b\nc\n\nd e f\n")
    (tmp_path / "childes.dev").write_text("dev only\n")
    docs = data.load_babylm(tmp_path)
    assert [d.text for d in docs] == ["a b\nc", "d e f"]


def test_normalise_and_sentences():
    assert normalisation.normalise_text("Hello , world ! Mr . Smith ca n't go .") == "Hello, world! Mr. Smith can't go."
    assert normalisation.split_sentences('He ran. "Stop!" she said. Mr. Lee smiled.') == ['He ran.', '"Stop!" she said.', "Mr. Lee smiled."]
    # the cases of the two splitters it replaced (contrastive shuffles, the judge's endings)
    assert normalisation.split_sentences('Tom ran. "Stop!" said Mom. He stopped? Yes... Then he smiled') == [
        "Tom ran.", '"Stop!" said Mom.', "He stopped?", "Yes...", "Then he smiled"]
    assert normalisation.split_sentences('She said, "Hi." "Bye!" he said.\nThe end') == ['She said, "Hi."', '"Bye!" he said.', "The end"]
    assert normalisation.split_sentences("They had 3 cats. 2 were black.") == ["They had 3 cats.", "2 were black."]
    seg = normalisation.encoder_segments(["One. Two.\n\nThree."])[0]
    assert seg.splitlines() == ["One.", "Two.", "[PAR]", "Three.", "[PAR]"]


def test_stats_and_vocab_growth():
    s = text_stats.corpus_stats(["a b a", "c"], "x")
    assert (s["unit"], s["units"], s["words"], s["vocabulary"]) == ("documents", 2, 4, 3)
    assert s["mean words/unit"] == 2.0
    assert text_stats.corpus_stats(["a b", "c"], "v", unit="paragraphs")["unit"] == "paragraphs"
    xs, ys = text_stats.vocab_growth(["a b a", "c"], n_points=4)
    assert xs == [1, 2, 3, 4] and ys == [1, 2, 2, 3]
