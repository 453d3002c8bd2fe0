import pytest

from helpers.data import budgets, corpus_files, ledger
from helpers.report import reporting
from helpers.data.corpora import Document


def test_nested_prefix_and_whole_stories():
    texts = [" ".join(["w"] * n) for n in [5, 3, 8, 2, 7, 4, 6, 1]]
    got = budgets.nested_budgets(texts, [10, 20, 30], seed=1)
    order = budgets.shuffled_order(len(texts), 1)
    for b, idx in got.items():
        assert idx == order[: len(idx)]  # a prefix of one seeded shuffle
        used = sum(len(texts[i].split()) for i in idx)
        assert used <= b
        nxt = order[len(idx)] if len(idx) < len(order) else None
        assert nxt is None or used + len(texts[nxt].split()) > b  # adding the next one would exceed the budget
    assert got[10] == got[20][: len(got[10])] and got[20] == got[30][: len(got[20])]
    assert budgets.nested_budgets(texts, [20], seed=1) == {20: got[20]}
    assert budgets.nested_budgets(texts, [20], seed=2) != {20: got[20]}


def test_in_budget_order_is_the_order_the_budgets_take_stories():
    texts = [f"s{i} " + " ".join(["w"] * n) for i, n in enumerate([5, 3, 8, 2, 7, 4, 6, 1, 9, 2])]
    ordered = budgets.in_budget_order(texts, seed=1)
    assert sorted(ordered) == sorted(texts) and ordered != texts  # a permutation, not file order
    for idx in budgets.nested_budgets(texts, [10, 20, 30], seed=1).values():
        assert [texts[i] for i in idx] == ordered[: len(idx)]
    nested, held = budgets.plan_budgets(texts, [10, 40], seed=1, heldout_max_words=6, full_budget=40)
    assert [texts[i] for i in nested[40] + held] == ordered  # the full budget's pool, then its held-out reserve
    docs = [Document("a" if i % 2 else "b", "x " * (i + 1)) for i in range(12)]
    sample = budgets.sample_documents(docs, 30, seed=3)
    assert budgets.in_budget_order(docs, 3)[: len(sample)] == sample  # BabyLM documents likewise


def test_budget_too_large():
    with pytest.raises(budgets.BudgetError, match="exceeds the 6 words available"):
        budgets.nested_budgets(["a b c", "d e f"], [7], seed=0)


def test_document_sampling_seeded():
    docs = [Document("childes" if i % 2 else "switchboard", "x " * (i + 1)) for i in range(20)]
    a = budgets.sample_documents(docs, 50, seed=3)
    assert a == budgets.sample_documents(docs, 50, seed=3)
    assert sum(d.words for d in a) <= 50


def test_ledger_rule(tmp_path):
    led = ledger.Ledger(tmp_path / "ledger.json")
    led.add(ledger.CorpusEntry("tiny-5", "tiny", {"tinystories": 5}, 0))
    led.add(ledger.CorpusEntry("baby-6", "baby", {"childes": 4, "switchboard": 2}, 0))
    led.add(ledger.CorpusEntry("gen", "gen", {"generated": 100}, 0, generator_corpus="tiny-5"))
    assert led.check_mix(["tiny-5", "gen"], 10) == {"baby": 0, "tiny": 5, "gen": 100}
    with pytest.raises(budgets.BudgetError, match=r"6 \+ 5 = 11 words > track budget 10"):
        led.check_mix(["tiny-5", "baby-6"], 10)
    assert led.check_mix(["tiny-5", "baby-6"], 10, allow_over_budget=True)["baby"] == 6
    with pytest.raises(budgets.BudgetError, match="generator"):
        led.check_mix(["gen"], 4)
    with pytest.raises(ValueError, match="must name the corpus"):
        led.add(ledger.CorpusEntry("g2", "gen", {"generated": 1}))
    with pytest.raises(KeyError, match="not in the ledger"):
        led["nope"]
    assert ledger.Ledger(tmp_path / "ledger.json").entries["baby-6"].words == 6  # persisted


def test_prepare_corpora(tmp_path):
    stories = [f"story {i} " + "w " * (i % 7 + 1) for i in range(50)]
    docs = [Document("childes", "u " * 5) for _ in range(30)]
    led = corpus_files.prepare_corpora(tmp_path, stories, {"f": "x"}, docs, {}, [40, 80], [60], seed=0)
    small = corpus_files.read_corpus(tmp_path / "tiny-40.jsonl")
    big = corpus_files.read_corpus(tmp_path / "tiny-80.jsonl")
    assert big[: len(small)] == small
    assert led["tiny-80"].words == sum(len(r["text"].split()) for r in big) <= 80
    assert led["baby-60"].words_by_source == {"childes": 60}


def test_fmt_words():
    assert [budgets.fmt_words(x) for x in (5_000_000, 1_250_000, 125_000, 999)] == ["5M", "1.25M", "125k", "999"]
    assert budgets.fmt_words(1_249_200) == "1.2492M"  # exact: budgets are named with it
    assert [budgets.fmt_words(x, digits=3) for x in (1_249_200, 2_498_770, 99_989_100)] == ["1.25M", "2.5M", "100M"]
    assert [budgets.fmt_words(x, digits=3) for x in (999_599, 999_499, 1_087_436)] == ["1M", "999k", "1.09M"]  # rounded first


def test_readable_ledger_names_sources_and_moves_a_constant_seed(tmp_path):
    led = ledger.Ledger(tmp_path / "ledger.json")
    led.add(ledger.CorpusEntry("tiny-5", "tiny", {"tinystories": 5}, 42))
    led.add(ledger.CorpusEntry("baby-6", "baby", {"aochildes": 4, "switchboard": 2}, 42))
    view, note = reporting.readable_ledger(led.table())
    assert {"words (total)", "TinyStories words", "aochildes words", "switchboard words"} <= set(view.columns)
    assert not any(c.startswith("words:") for c in view.columns) and "seed" not in view.columns
    assert note == "sampling seed 42 for every corpus"
    assert view.set_index("corpus").loc["baby-6", "aochildes words"] == 4
    led.add(ledger.CorpusEntry("tiny-7", "tiny", {"tinystories": 7}, 1))
    view, note = reporting.readable_ledger(led.table())
    assert "seed" in view.columns and note == ""


def test_corpus_shelf_holds_one_corpus_at_a_time(tmp_path):
    """Notebook 03 visits every budget's stories: the shelf reads each when asked (checked against the ledger), keeps
    only the last one, tests membership without reading, and names a missing corpus up front."""
    stories = [f"story {i} " + "w " * (i % 7 + 1) for i in range(50)]
    corpus_files.prepare_corpora(tmp_path, stories, {"f": "x"}, [Document("childes", "u " * 5)], {}, [40, 80], [], seed=0)
    shelf = corpus_files.CorpusShelf(tmp_path, ["tiny-40", "tiny-80"])
    assert "tiny-80" in shelf and "tiny-5" not in shelf and shelf.reads == 0 and list(shelf) == ["tiny-40", "tiny-80"]
    small = shelf["tiny-40"]
    assert small == corpus_files.read_corpus(tmp_path / "tiny-40.jsonl") and shelf["tiny-40"] is small and shelf.reads == 1
    assert shelf["tiny-80"][: len(small)] == small and shelf.reads == 2
    assert shelf._held[0] == "tiny-80"  # tiny-40 is no longer held
    shelf["tiny-40"]
    assert shelf.reads == 3
    with pytest.raises(KeyError):
        shelf["tiny-5"]
    with pytest.raises(FileNotFoundError, match="tiny-9"):
        corpus_files.CorpusShelf(tmp_path, ["tiny-40", "tiny-9"])
    (tmp_path / "tiny-80.jsonl").write_text('{"text": "edited"}\n')
    with pytest.raises(Exception, match="tiny-80"):
        shelf["tiny-80"]  # the ledger's check still runs


def test_a_whole_official_set_counts_at_its_nominal_size(tmp_path):
    """baby_full_budget: all of train_10M is the 10M track's 10M although its whitespace words (speaker tags
    included) run above it; the rule counts the nominal size, the ledger keeps the actual words."""
    from helpers.data import corpus_files as CF
    from helpers.data.corpora import Document

    docs = [Document("childes", "w " * 10) for _ in range(30)]  # 300 words: "all of train_250"
    dev = [Document("childes", "d " * 10) for _ in range(5)]
    stories = [f"story {i} " + "w " * 8 for i in range(40)]
    led = CF.prepare_corpora(tmp_path, stories, {}, docs, {}, [100], [150, 250], 0, heldout_max_words=50,
                             baby_full_budget=250, baby_heldout_docs=dev)
    assert led["baby-250"].words == 300 and led["baby-250"].rule_words == 250
    assert led.check_mix(["baby-250"], 250)["baby"] == 300  # accepted as the track's whole set
    assert led.rule_words(["baby-250", "baby-150"])["baby"] == 250  # nested: the whole set's count
    with pytest.raises(budgets.BudgetError, match=r"250 \+ 100 = 350"):
        led.check_mix(["baby-250", "tiny-100"], 250)  # the set plus anything else is over the track
    reread = ledger.Ledger(tmp_path / "ledger.json")  # the count survives the ledger file
    assert reread["baby-250"].rule_words == 250 and reread["baby-150"].counted_as is None
    assert "counts it as" in reread["baby-250"].note
