"""The paper profile's protocol points, each on tiny synthetic files shaped like the real ones."""
import numpy as np
import pytest

from helpers.diversity import memorisation as M, ngram_index as NI, rouge

STORIES = [
    "Once upon a time, there was a girl named Lily. Lily liked to play with her red ball in the park. One day the "
    "ball rolled into the pond and Lily was sad. Her friend Tom came and helped her get the ball back. They were happy.",
    "Tim had a big dog called Max. Max liked to run and jump in the garden all day long. One day Max found a bone "
    "under the old tree and gave it to Tim. Tim laughed and hugged his dog.",
    "The sun was hot and the bird was thirsty. It flew to the river and drank some cool water. Then it sang a song.",
]


# ----------------------------------------------------------------------------- 8. memorisation protocol
def test_max_rouge2_train_finds_the_copied_story_over_a_shortlist():
    idx = NI.NGramIndex(STORIES, n=3)
    comps = [STORIES[1][40:], "A completely different text about cars and trucks on the road today."]
    best, ids = M.max_rouge2_train(comps, idx, shortlist=2)
    assert ids[0] == 1 and best[0] > 0.5
    assert ids[1] == -1 and best[1] == 0.0
    # the shortlist maximum equals the brute-force maximum over every story
    brute = max(rouge.rouge2(comps[0], s) for s in STORIES)
    assert best[0] == pytest.approx(brute)
    with pytest.raises(ValueError):
        M.max_rouge2_train(comps, idx, shortlist=0)


def test_template_check_catches_a_story_with_names_swapped():
    names = M.corpus_names(STORIES)
    assert {"Lily", "Tom", "Max"} <= names and "Once" not in names and "One" not in names
    swapped = STORIES[0].replace("Lily", "Sue").replace("Tom", "Sam")
    names |= {"Sue", "Sam"}
    out = M.template_matches([swapped, STORIES[2]], STORIES, names=names, min_words=20)
    assert out[0]["template"] and out[0]["story_id"] == 0 and out[0]["masked_run"] > out[0]["run"]
    assert not out[1]["template"]  # a verbatim copy is an exact copy, not a template
    assert M.mask_names("Lily met Tom.", {"Lily", "Tom"}) == f"{M.NAME} met {M.NAME}."


def test_memorisation_rows_per_split_and_per_completion():
    """Notebook 03's memorisation table: a verbatim copy, a copy with the names swapped and a new text, against
    their real endings; the summary row agrees with the per-completion rows and with the measures it is made of."""
    names = M.corpus_names(STORIES)
    swapped = STORIES[0].replace("Lily", "Max").replace("Tom", "Tim")  # names of the corpus: masked as well
    comps, endings = [STORIES[1], swapped, "A car drove down the long road to the sea."], [STORIES[1], STORIES[0], "x y"]
    summary, per = M.memorisation_rows("m", STORIES, {"train": (comps, endings), "held-out": (comps[1:], endings[1:])},
                                       n=3, shortlist=2, min_words=20)
    assert [(r["model"], r["prompts"], r["completions"]) for r in summary] == [("m", "train", 3), ("m", "held-out", 2)]
    assert [r["prompts"] for r in per] == ["train"] * 3 + ["held-out"] * 2
    first = summary[0]
    assert first["exact copies (≥ 20 words)"] == 1 and first["template copies (names swapped)"] == 1
    assert [r["longest_shared_run"] for r in per[:3]] == [len(STORIES[1].split()), *[r["run"] for r in M.template_matches(
        comps[1:], STORIES, names=names, min_words=20)]]
    assert first["max ROUGE-2 vs ending"] == max(r["rouge2_vs_ending"] for r in per[:3]) == pytest.approx(1.0)
    assert first["mean max ROUGE-2 vs training stories"] == pytest.approx(np.mean([r["max_rouge2_train"] for r in per[:3]]))
    assert per[3:] == [{**r, "prompts": "held-out", "max_rouge2_others": per[3 + i]["max_rouge2_others"]}
                       for i, r in enumerate(per[1:3])]  # the same measures but among the other completions
    assert summary[1]["template copies (names swapped)"] == 1 and summary[1]["exact copies (≥ 20 words)"] == 0


def test_memorisation_prompts_have_their_own_cut(tmp_path):
    import yaml

    from helpers.core import config
    from helpers.generation import completions as G

    for profile in config.PROFILES:
        p = yaml.safe_load((config.repo_root() / "params" / profile / "03_generation_self_bleu.yaml").read_text())
        assert p["memorisation_frac"] == [0.4, 0.5] and p["prompt_frac"] == [0.15, 0.30]
    prompts = G.make_prompts(STORIES, None, (0.4, 0.5), 10, 100, 0)
    assert all(0.4 <= p.frac <= 0.5 for p in prompts)


# ----------------------------------------------------------------------------- 1. TinyStories V2, the full budget
def _v2_file(path, n, seed, truncated=True):
    """A file shaped like TinyStoriesV2-GPT4-*.txt: stories separated by '<|endoftext|>' lines."""
    import random

    rng = random.Random(seed)
    words = "the cat dog sun ran saw big little happy sad park ball tree played jumped".split()
    stories = [" ".join(rng.choice(words) for _ in range(rng.randint(20, 60))).capitalize() + "." for _ in range(n)]
    text = "\n<|endoftext|>\n".join(stories) + "\n<|endoftext|>\n" + ("Once upon a ti" if truncated else "")
    path.write_text(text, encoding="utf-8")
    return stories


def test_full_budget_is_all_stories_but_the_heldout_reserve(tmp_path):
    from helpers.data import budgets as B, corpora as data, corpus_files as CF
    from helpers.core.artifacts import read_jsonl

    train = tmp_path / "TinyStoriesV2-GPT4-train.txt"
    stories = _v2_file(train, 300, 0)
    corpus = data.load_tinystories(train)
    assert corpus.stories == stories and corpus.n_dropped_truncated == 1
    total = sum(data.count_words(s) for s in stories)
    out = tmp_path / "data"
    out.mkdir()
    ledger = CF.prepare_corpora(out, corpus.stories, corpus.files, [], {}, [1000, 2000, 440_000_000], [], 42,
                                heldout_max_words=1500, full_budget=440_000_000)
    held = [r["id"] for r in read_jsonl(out / "tiny-heldout.jsonl")]
    full = [r["id"] for r in read_jsonl(out / "tiny-440M.jsonl")]
    small = [r["id"] for r in read_jsonl(out / "tiny-1k.jsonl")]
    assert set(held).isdisjoint(full) and set(held) | set(full) == set(range(len(stories)))
    assert 1500 - 60 < sum(data.count_words(stories[i]) for i in held) <= 1500
    assert full[: len(small)] == small  # nested
    e = ledger["tiny-440M"]
    assert e.budget == 440_000_000 and e.words == total - sum(data.count_words(stories[i]) for i in held)
    assert "held-out reserve" in e.note
    with pytest.raises(B.BudgetError, match="largest of the budgets"):
        B.plan_budgets(corpus.stories, [1000, 2000], 42, 1500, full_budget=1000)
    # without full_budget a 440M budget is refused as before
    with pytest.raises(B.BudgetError, match="exceeds"):
        B.plan_budgets(corpus.stories, [1000, 440_000_000], 42, 1500)


def test_official_v2_validation_file_is_read_as_stories(tmp_path):
    from helpers.data import corpora as data

    valid = tmp_path / "TinyStoriesV2-GPT4-valid.txt"
    stories = _v2_file(valid, 20, 1, truncated=False)
    v = data.load_validation(valid)
    assert v.unit == "stories" and v.stories == stories
    running = tmp_path / "valid_hfexport.txt"
    running.write_text("Spot saw the car.\n\nIt was red and fast.\n", encoding="utf-8")
    r = data.load_validation(running)
    assert r.unit == "paragraphs" and len(r) == 2


def test_paper_profile_reads_tinystories_v2_and_passes_the_params_check():
    from helpers.core import config
    from helpers import runner

    runner.plan("paper", runner.notebooks())
    p = config.read_yaml(config.params_file("paper", "01_data_budgets"))
    assert all("TinyStoriesV2-GPT4-train" in f for f in p["tinystories_train"])
    assert "TinyStoriesV2-GPT4-valid" in p["tinystories_valid"]
    assert p["full_budget"] == max(p["tiny_budgets"]) == 440_000_000


# ----------------------------------------------------------------------------- 3. the challenge rule counts the generator's corpus
def test_rule_counts_the_generator_corpus_and_checks_prompt_ids(tmp_path):
    from helpers.data import budgets as B, corpus_files as CF, ledger as L
    from helpers.generation import completions as G

    stories = [f"story {i} " + "w " * 8 for i in range(40)]  # 10 words each
    led = CF.prepare_corpora(tmp_path, stories, {"f": "x"}, [], {}, [50, 100, 200], [], seed=0)
    led.add(L.CorpusEntry("baby-60", "baby", {"childes": 60}, 0))
    gen_rows = [{"story_id": r["id"], "sample": 0, "prompt": "story", "completion": "w w w"}
                for r in CF.read_corpus(tmp_path / "tiny-100.jsonl")]
    CF.write_corpus(tmp_path / "gen-tiny-100-greedy.jsonl", gen_rows)
    G.register_generated(led, "gen-tiny-100-greedy", gen_rows, "tiny-100", "gen-tiny-100-greedy.jsonl", 0)
    # D_tiny = tiny-50, generator corpus tiny-100: the union is tiny-100 (nested), 60 + 100 > 150
    assert led.rule_words(["baby-60", "tiny-50", "gen-tiny-100-greedy"]) == {"baby": 60, "tiny": 100, "counted": 160}
    with pytest.raises(B.BudgetError, match=r"\|D_baby\| \+ \|D_tiny ∪ tiny-100\| = 60 \+ 100 = 160"):
        led.check_mix(["baby-60", "tiny-50", "gen-tiny-100-greedy"], 150)
    # the old rule (D_gen free, its generator corpus not counted) would have accepted 60 + 50 = 110
    assert led.check_mix(["tiny-50", "gen-tiny-100-greedy"], 150)["tiny"] == 50
    # prompts from stories outside D_tiny ∪ generator corpus are refused
    bad = gen_rows + [{"story_id": 999, "sample": 0, "prompt": "x", "completion": "y"}]
    CF.write_corpus(tmp_path / "gen-bad.jsonl", bad)
    G.register_generated(led, "gen-bad", bad, "tiny-100", "gen-bad.jsonl", 0)
    with pytest.raises(B.BudgetError, match="outside D_tiny"):
        led.check_mix(["tiny-100", "gen-bad"], 1000)
    assert led.mix_table([["baby-60", "tiny-50", "gen-tiny-100-greedy"]], 150).iloc[0]["rule"] == "refused"


def test_rule_union_of_corpora_that_are_not_nested(tmp_path):
    from helpers.data import corpus_files as CF, ledger as L

    led = L.Ledger(tmp_path / "ledger.json")
    for name, ids in [("tiny-a", [0, 1, 2]), ("tiny-b", [2, 3])]:
        CF.write_corpus(tmp_path / f"{name}.jsonl", [{"id": i, "text": "a b c d e"} for i in ids])
        led.add(L.CorpusEntry(name, "tiny", {"tinystories": 5 * len(ids)}, seed=None, path=f"{name}.jsonl"))
    led.add(L.CorpusEntry("gen", "gen", {"completion": 1}, generator_corpus="tiny-b"))
    assert led.rule_words(["tiny-a", "gen"])["tiny"] == 20  # ids {0, 1, 2, 3}


# ----------------------------------------------------------------------------- 7. LTG-BERT's "+512" schedule
def _blocks(n, length, V=64, seed=0):
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.cat([torch.ones(n, 1, dtype=torch.long), torch.randint(6, V, (n, length - 2), generator=g),
                      torch.full((n, 1), 2)], 1)


def test_long_phase_switches_to_long_blocks_with_a_quarter_of_the_batch(tmp_path):
    import json

    import torch

    from helpers.models.ltg_bert import LtgBertForMaskedLM, ltg_bert_config
    from helpers.data.masking import LongPhaseBlocks, MaskedBlocks, TokenIds, mlm_loss
    from helpers.training.loop import TrainConfig, train

    tok = TokenIds(vocab_size=64, mask_id=4, cls_id=1, sep_id=2, pad_id=3, special_ids=(0, 1, 2, 3, 4, 5))
    short, long = MaskedBlocks(_blocks(40, 16), tok), MaskedBlocks(_blocks(12, 64, seed=1), tok, seed=1)
    data = LongPhaseBlocks(short, long, steps=10, long_from=0.9, long_batch_fraction=0.25)
    assert data.switch_step == 9  # int(10 * 0.9), as the authors' code
    assert data.batch(8, 8)["input_ids"].shape == (8, 16)
    assert data.batch(9, 8)["input_ids"].shape == (2, 64)
    assert data.tokens_at(8, 8) == data.tokens_at(9, 8) == 128  # a quarter of the rows, four times as long
    assert data.batch(9, 8, rank=1, world=2)["input_ids"].shape == (1, 64)
    torch.manual_seed(0)
    model = LtgBertForMaskedLM(ltg_bert_config("smoke", 64))
    cfg = TrainConfig(steps=10, batch_size=8, micro_batch=4, lr=1e-3, eval_every=5, save_every=5, log_every=1, seed=0)
    res = train(model, data, MaskedBlocks(_blocks(8, 16, seed=2), tok), tmp_path / "run", cfg, loss_fn=mlm_loss, progress=False)
    assert res.tokens_seen == 10 * 128
    with pytest.raises(ValueError):
        LongPhaseBlocks(short, long, 10, long_from=1.0)


def test_long_phase_is_a_train_param_of_the_encoders(tmp_path):
    from helpers.core import config
    from helpers import runner

    runner.plan("paper", runner.notebooks())
    p = config.read_yaml(config.params_file("paper", "04_encoder_pretraining"))["train"]
    assert (p["long_block"], p["long_from"], p["long_batch_fraction"]) == (512, 0.9, 0.25)
    assert "long_block" not in config.read_yaml(config.params_file("cpu", "04_encoder_pretraining"))["train"]
    assert config.read_yaml(config.params_file("smoke", "04_encoder_pretraining"))["train"]["long_block"] == 256


# ----------------------------------------------------------------------------- 4. ours vs the authors' own rows
def test_comparison_takes_the_authors_row_and_never_a_context_free_ewok():
    import pandas as pd

    from helpers.core import config
    from helpers.evaluation import zero_shot as evaluation

    t2 = pd.read_csv(config.repo_root() / "params" / "paper_reference" / "table2_strict_small_10m.csv")
    row = evaluation.paper_authors_row(t2, "baby-10M")
    assert row["model"] == "LTG-BERT (ours)" and row["blimp"] == 62.1  # not the organisers' 60.6
    assert evaluation.paper_authors_row(t2, "baby-5M + tiny-5M + gen-nucleus-1", plus_512=True)["blimp"] == 62.6
    base = t2[t2["model"] == "LTG-BERT (baseline)"].iloc[0]
    assert not evaluation.paper_ewok_has_context(base) and evaluation.paper_ewok_has_context(row)
    ours = pd.DataFrame([{"training data": "baby-1M", "BLiMP": 55.0, "Supp.": 50.0, "EWoK": 52.0, "GLUE": float("nan")},
                         {"training data": "mix", "BLiMP": 55.0, "Supp.": 50.0, "EWoK": 52.0, "GLUE": 60.0}])
    comp = evaluation.compare_with_paper(ours, t2, {"baby-1M": "baby-10M", "mix": "baby-5M + tiny-5M"}).set_index(["mix", "benchmark"])
    assert comp.loc[("baby-1M", "BLiMP"), "paper"] == 62.1 and comp.loc[("baby-1M", "EWoK"), "paper"] == 63.1
    assert comp.loc[("mix", "GLUE"), "paper"] == 71.2
    # an authors' row whose EWoK was computed without the context: its ewok_alt is compared, or nothing
    synth = pd.DataFrame([
        {"model": "LTG-BERT (ours)", "training_data": "a", "blimp": 60.0, "supplement": 60.0, "ewok": 50.0,
         "ewok_alt": 64.0, "glue": None, "note": "EWoK without context"},
        {"model": "LTG-BERT (ours)", "training_data": "b", "blimp": 60.0, "supplement": 60.0, "ewok": 50.0,
         "ewok_alt": None, "glue": None, "note": "EWoK without context"}])
    ours = pd.DataFrame([{"training data": n, "BLiMP": 1.0, "Supp.": 1.0, "EWoK": 1.0, "GLUE": 1.0} for n in "xy"])
    comp = evaluation.compare_with_paper(ours, synth, {"x": "a", "y": "b"}).set_index(["mix", "benchmark"])
    assert comp.loc[("x", "EWoK"), "paper"] == 64.0 and "ewok_alt" in comp.loc[("x", "EWoK"), "note"]
    assert pd.isna(comp.loc[("y", "EWoK"), "paper"]) and "not compared" in comp.loc[("y", "EWoK"), "note"]
    assert comp.loc[("y", "GLUE"), "note"] == "not printed in the paper"
    # our intervals beside our scores; a scaled-down GLUE says so beside the paper's number
    ours = ours.assign(**{"GLUE protocol": ["scaled protocol: boolq (1 of 11 tasks)", "the paper's protocol"]})
    ci = pd.DataFrame([{"model": "x", "task": "BLiMP", "ci_low": 0.5, "ci_high": 1.5},
                       {"model": "x", "task": "GLUE", "ci_low": 0.2, "ci_high": 1.8}])
    comp = evaluation.compare_with_paper(ours, synth, {"x": "a", "y": "b"}, intervals=ci).set_index(["mix", "benchmark"])
    assert tuple(comp.loc[("x", "BLiMP"), ["CI low", "CI high"]]) == (0.5, 1.5)
    assert pd.isna(comp.loc[("y", "BLiMP"), "CI low"])
    assert comp.loc[("x", "GLUE"), "note"] == "not printed in the paper; ours: scaled protocol: boolq (1 of 11 tasks)"
    assert comp.loc[("y", "GLUE"), "note"] == "not printed in the paper"


# ----------------------------------------------------------------------------- 2. GLUE: BabyLM training files, scaled tasks flagged
def test_glue_train_dir_gives_the_standard_protocol_and_scaled_tasks_are_flagged(tmp_path):
    import gzip
    import json

    import pandas as pd

    from helpers.core import config
    from helpers.evaluation import finetune as ft, finetune_setup as fs, glue_tasks as gt

    # a BabyLM-shaped boolq.train.jsonl (same fields as the bundled validation file), grouped by passage
    rows = [{"question": f"is it {i}?", "passage": f"passage {i // 2} about things", "label": i % 2, "idx": i}
            for i in range(60)]
    (tmp_path / "boolq.train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = fs.finetune_config("berttime", train_dir=str(tmp_path), max_eval_examples=50)
    assert gt.train_file("boolq", tmp_path).endswith("boolq.train.jsonl")
    assert gt.train_file("qqp", tmp_path) is None and gt.train_file("cola", tmp_path).endswith("cola.train.jsonl.gz")
    d = fs.prepare_task("boolq", cfg)
    assert d.protocol == gt.STANDARD and len(d.train) + len(d.dev) == 60
    assert len(d.tests["boolq"]) == 50  # reported on the validation file, not a carved part of it
    assert fs.prepare_task("boolq", fs.finetune_config("berttime", max_eval_examples=50)).protocol == gt.SCALED
    assert any("boolq.train.jsonl" in k for k in fs.data_files("boolq", tmp_path))
    # no train_dir: the config (and so the cache fingerprint) is the one it was before the parameter existed
    assert "train_dir" not in fs.finetune_config("berttime").to_dict()
    df = pd.DataFrame({"task": ["boolq", "cola", "qqp"], "protocol": [gt.STANDARD, gt.STANDARD, gt.SCALED], "score": [0.6, 0.1, 0.5]})
    assert ft.scaled_tasks(df) == ["qqp"] and "qqp (1 of 3 tasks" in ft.protocol_note(df)
    assert ft.protocol_note(df, ["boolq", "cola"]) == ""
    p = config.read_yaml(config.params_file("paper", "05_evaluation"))
    assert p["glue"]["train_dir"] and fs.finetune_config(p["glue"]).train_dir == p["glue"]["train_dir"]


# ----------------------------------------------------------------------------- 5. the real TinyStoriesInstruct files
INSTRUCT_FILE = """Features: Dialogue
Words: quit, oak, gloomy
Summary: Sara and Ben were playing in the park, but Sara wanted to go home because it was cold and dark.
Story: 
Sara and Ben were playing in the park. "I want to quit," said Sara. The oak tree looked gloomy.
Ben said, "Let's go home."
<|endoftext|>
Random sentence: The cat sat on the mat.
Words: cat, mat, nap
Story: 
The cat sat on the mat. It took a nap in the sun.
<|endoftext|>
This document has no story line at all.
<|endoftext|>
Summary: A girl loses her hat.
Story: 
Lily lost her hat. She found it under â€œthe bedâ€\x9d.
<|endoftext|>
Features: Twist
Story: 
Once upon a ti"""


def test_real_tinystories_instruct_file_is_parsed(tmp_path):
    from helpers.data import corpora as data
    from helpers.story_eval import instruct, instruct_files

    f = tmp_path / "TinyStoriesInstruct-valid.txt"
    f.write_text(INSTRUCT_FILE, encoding="utf-8")
    c = instruct_files.load_tinystories_instruct(f)
    assert len(c) == 3 and c.n_malformed == 1 and c.n_dropped_truncated == 1 and c.n_repaired == 1
    d = c.documents[0]
    assert d.fields[0] == ("Features", "Dialogue") and d.words == ["quit", "oak", "gloomy"]
    assert d.story.startswith("Sara and Ben") and d.story.endswith('go home."')
    assert instruct.parse_instruct(d.text).words == ["quit", "oak", "gloomy"]  # round trip
    assert "“the bed”" in c.documents[2].story
    total = sum(data.count_words(x.text) for x in c.documents)
    assert len(instruct_files.instruct_budget(c.documents, total, seed=0)) == 3
    picked = instruct_files.instruct_budget(c.documents, total - 1, seed=0)
    assert len(picked) < 3 and sum(data.count_words(x.text) for x in picked) <= total - 1
    assert picked == instruct_files.instruct_budget(c.documents, total - 1, seed=0)


# ----------------------------------------------------------------------------- 6. the 100M strict track
def test_strict_100m_track_profile(tmp_path):
    from helpers.data import budgets as B, corpus_files as CF
    from helpers.core import config
    from helpers import runner
    from helpers.data.corpora import Document

    assert "paper-100m" in config.PROFILES
    runner.plan("paper-100m", runner.notebooks())
    p01 = config.load_params("paper-100m", "01")
    assert all("train_100M" in f for fs in p01["babylm_files"].values() for f in fs)
    assert p01["tiny_budgets"] == [50_000_000, 100_000_000] == p01["baby_budgets"]
    assert p01["track_budget"] == B.TRACKS["strict"] == p01["paper_track_budget"]
    assert config.load_params("paper-100m", "03")["generator"] == "tiny-50M"
    p02 = config.load_params("paper-100m", "02")
    assert p02["budgets"] == ["tiny-50M"] and p02["model"] == config.load_params("paper", "02")["model"]
    p04 = config.load_params("paper-100m", "04")
    assert p04["track_budget"] == 100_000_000
    mixes = {m["name"]: m["corpora"] for m in p04["mixes"]}
    assert mixes["baby-50M+tiny-50M+gen-nucleus-1"] == ["baby-50M", "tiny-50M", "gen-tiny-50M-nucleus-1"]
    p05 = config.load_params("paper-100m", "05")
    assert p05["paper_table"] == "table3_strict_100m" and config.load_params("paper", "05")["paper_table"] == "table2_strict_small_10m"
    import pandas as pd

    t3 = pd.read_csv(config.repo_root() / "params" / "paper_reference" / "table3_strict_100m.csv")
    assert set(p05["paper_equivalents"].values()) <= set(t3["training_data"])
    assert set(p05["encoders"]) == set(mixes)
    # a baby sample that is "all of train_100M": every training document, held-out documents from the dev files
    docs = [Document("childes", "w " * 10) for _ in range(30)]
    dev = [Document("childes", "d " * 10) for _ in range(10)]
    stories = [f"story {i} " + "w " * 8 for i in range(40)]
    led = CF.prepare_corpora(tmp_path, stories, {}, docs, {}, [100, 200], [150, 100_000_000], 0, heldout_max_words=50,
                            baby_full_budget=100_000_000, baby_heldout_docs=dev)
    assert led["baby-100M"].words == 300 and len(CF.read_corpus(tmp_path / "baby-heldout.jsonl")) == 5
    assert all(r["id"].startswith("dev-") for r in CF.read_corpus(tmp_path / "baby-heldout.jsonl"))


def test_instruct_decoder_plans_on_the_real_files(tmp_path, real_stories, decoder_tokenizer):
    from helpers.data import corpus_files as CF
    from helpers.core import config
    from helpers.story_eval import instruct_files

    run = tmp_path / "runs"
    (run / "data").mkdir(parents=True)
    CF.prepare_corpora(run / "data", real_stories, {}, [], {}, [20_000], [], 0, heldout_max_words=3_000)
    decoder_tokenizer.save_pretrained(run / "tokenizers" / "decoder-tiny-20k")
    docs = "\n<|endoftext|>\n".join(f"Words: cat, hat\nFeatures: Dialogue\nStory: \n{s}" for s in real_stories[:120])
    (tmp_path / "TinyStoriesInstruct-train.txt").write_text(docs + "\n<|endoftext|>\n", encoding="utf-8")
    (tmp_path / "TinyStoriesInstruct-valid.txt").write_text(docs + "\n<|endoftext|>\n", encoding="utf-8")
    p02 = config.load_params("smoke", "02")
    r = instruct_files.plan_instruct_from_files(run, "tiny-20k", p02, tmp_path / "TinyStoriesInstruct-train.txt",
                                                tmp_path / "TinyStoriesInstruct-valid.txt", seed=0, words=5_000)
    assert 0 < r.documents < 120 and r.valid_documents == 120 and r.field_counts["Words"] == r.documents
    assert r.examples[0].startswith("Words: cat, hat\nFeatures: Dialogue\nStory: ")
    prompts = instruct_files.instruct_file_prompts(tmp_path / "TinyStoriesInstruct-valid.txt", 5, seed=0)
    assert len(prompts) == 5 and all(str(p.story_id).startswith("valid-") and p.ending for p in prompts)


def test_template_check_reuses_known_plain_runs():
    names = M.corpus_names(STORIES) | {"Sue", "Sam"}
    swapped = STORIES[0].replace("Lily", "Sue").replace("Tom", "Sam")
    idx = NI.NGramIndex(STORIES, n=3)
    runs = [idx.longest_shared_run(swapped).length]
    assert M.template_matches([swapped], STORIES, names=names, plain_runs=runs) == \
        M.template_matches([swapped], STORIES, names=names, index=idx)


def test_notebook_05b_picks_the_real_instruct_files_when_given(tmp_path, monkeypatch):
    """``instruct_files.plan_instruct_run`` / ``heldout_prompts`` (what notebook 05b calls) use the real files
    when the params name them, the derived documents otherwise, and refuse a train file without a valid file."""
    from helpers.story_eval import instruct_files as IF

    calls = []
    monkeypatch.setattr(IF, "plan_instruct", lambda *a, **k: calls.append(("derived", a, k)) or "derived")
    monkeypatch.setattr(IF, "plan_instruct_from_files", lambda *a, **k: calls.append(("real", a, k)) or "real")
    monkeypatch.setattr(IF, "heldout_instruct_prompts", lambda *a, **k: "derived prompts")
    monkeypatch.setattr(IF, "instruct_file_prompts", lambda f, n, s: f"real prompts {f} {n} {s}")
    assert IF.plan_instruct_run(tmp_path, "tiny-1M", {}, 1, 5, n_words=3) == "derived"
    assert IF.plan_instruct_run(tmp_path, "tiny-1M", {}, 1, 5, "train.txt", "valid.txt", n_words=3) == "real"
    assert calls[1][1][3:5] == ("train.txt", "valid.txt") and calls[1][2] == {"n_words": 3}
    with pytest.raises(ValueError, match="instruct_valid_file"):
        IF.plan_instruct_run(tmp_path, "tiny-1M", {}, 1, 5, "train.txt", None)
    assert IF.heldout_prompts(tmp_path, 4, 7, None, n_words=3) == "derived prompts"
    assert IF.heldout_prompts(tmp_path, 4, 7, "valid.txt", n_words=3) == "real prompts valid.txt 4 7"
    # the paper profiles name the real Instruct files; the cpu and smoke profiles build the documents themselves
    from helpers.core import config

    for profile in ("paper", "paper-100m"):
        p = config.load_params(profile, "05b")
        assert p["instruct_train_file"].endswith("TinyStoriesInstruct-train.txt"), profile
        assert p["instruct_valid_file"].endswith("TinyStoriesInstruct-valid.txt"), profile
    for profile in ("cpu", "smoke"):
        assert not config.load_params(profile, "05b").get("instruct_train_file"), profile


def test_memorisation_workers_fit_the_memory_budget():
    """Workers are lowered until that many of the largest shards fit the budget; a shard larger than the budget is
    said; no budget known leaves the request."""
    per = M.WORKER_BYTES_PER_WORD
    assert M.memory_workers(8, [20_000_000] * 22, 29e9)[0] == 8  # 8 x 3.6 GB = 28.8 GB fits 29 GB
    n, why = M.memory_workers(8, [20_000_000] * 22, 8e9)
    assert n == 2 and "2 worker(s) of the 8 asked" in why and "22 shards" in why
    n, why = M.memory_workers(4, [100, 10, 10], 50 * per)
    assert n == 1 and "even one shard may not fit" in why
    assert M.memory_workers(3, [10, 10, 10], None)[0] == 3
    with pytest.raises(ValueError):
        M.memory_workers(0, [10], None)


def test_memorisation_rows_are_the_same_over_any_shards():
    """The paper profile builds the memorisation indexes over shards of the training stories (memory); every measure
    is a maximum or a top-k over single stories, so one story per shard gives the rows of one shard for all."""
    stories = [*STORIES, STORIES[1].replace("Tom", "Sam"), "The dog ran to the park and played with a red ball."]
    swapped = STORIES[0].replace("Lily", "Max").replace("Tom", "Tim")
    comps = [STORIES[1], swapped, "A car drove down the long road to the sea.", stories[-1] + " Then it slept."]
    splits = {"train": (comps, [STORIES[1], STORIES[0], "x y", "z"]), "held-out": (comps[2:], ["x y", "z"])}
    whole = M.memorisation_rows("m", stories, splits, n=3, shortlist=2, min_words=20)
    assert M._shards(stories, 10**9) == [(0, len(stories))]
    for shard_words in (1, 30, 60):  # one story per shard (each is longer than 1 word), then a few per shard
        shards = M._shards(stories, shard_words)
        assert shards[0][0] == 0 and shards[-1][1] == len(stories) and len(shards) > 1
        assert all(a[1] == b[0] for a, b in zip(shards, shards[1:]))  # consecutive, every story once
        assert M.memorisation_rows("m", stories, splits, n=3, shortlist=2, min_words=20, shard_words=shard_words) == whole
    # shards searched in two worker processes (the paper profile's memorisation_workers): the same rows
    logged = []
    assert M.memorisation_rows("m", stories, splits, n=3, shortlist=2, min_words=20, shard_words=1, workers=2,
                               log=logged.append, cores=2) == whole
    assert any("2 worker processes" in line for line in logged), logged
    assert any("2 worker(s) of the 2 asked" in line for line in logged), logged
    # more workers asked than cores (8, so one per shard: 5): one per core, said so (5 on 2 cores held 5 shards for nothing)
    logged = []
    assert M.memorisation_rows("m", stories, splits, n=3, shortlist=2, min_words=20, shard_words=1, workers=8,
                               log=logged.append, cores=2) == whole
    assert any("2 worker(s) of the 2 asked" in line and "(5 asked: at most one per CPU core, 2)" in line
               for line in logged), logged
    assert M.usable_cores() >= 1
    # a memory budget that holds one shard's indexes only: one worker, said so, the same rows
    logged = []
    assert M.memorisation_rows("m", stories, splits, n=3, shortlist=2, min_words=20, shard_words=1, workers=2,
                               memory_budget=30 * M.WORKER_BYTES_PER_WORD, log=logged.append, cores=2) == whole
    assert any("1 worker(s) of the 2 asked" in line for line in logged), logged
    with pytest.raises(ValueError, match="shard_words must be >= 1"):
        M.memorisation_rows("m", stories, splits, shard_words=0)


def test_stories_read_from_disk_give_the_same_prompts_and_memorisation_rows(tmp_path):
    """Notebook 03 reads each budget's stories from disk (CorpusRows: one offset per row held, a shard read by the
    process that searches it): the rows, slices, prompts and memorisation rows are those of the stories in memory."""
    import pickle

    from helpers.core.artifacts import write_jsonl
    from helpers.data.corpus_files import CorpusRows, CorpusShelf, read_corpus
    from helpers.generation import completions as G

    stories = [*STORIES, STORIES[1].replace("Tom", "Sam"), "The dog ran to the park and played with a red ball."] * 3
    write_jsonl(tmp_path / "b.jsonl", ({"id": 100 + i, "source": "t", "text": t} for i, t in enumerate(stories)))
    (tmp_path / "b.jsonl").write_text((tmp_path / "b.jsonl").read_text() + "\n")  # a blank line is skipped, as read_corpus does
    rows = CorpusRows(tmp_path / "b.jsonl")
    held = read_corpus(tmp_path / "b.jsonl")
    assert list(rows) == held and len(rows) == len(held) and rows[-1] == held[-1] and list(rows[2:5]) == held[2:5]
    texts = rows.texts()
    assert list(texts) == stories and list(texts[3:7]) == stories[3:7]
    again = pickle.loads(pickle.dumps(texts[1:4]))  # a worker's shard: its path and offsets, no open file
    assert list(again) == stories[1:4]
    shelf = CorpusShelf(tmp_path, ["b"], lazy=True)
    assert isinstance(shelf["b"], CorpusRows) and list(shelf["b"]) == held
    for n in (3, None):
        assert G.make_prompts(rows, n, (0.3, 0.5), 5, 100, seed=4) == G.make_prompts(held, n, (0.3, 0.5), 5, 100, seed=4)
    comps = [stories[1], "A car drove down the long road to the sea.", stories[-1] + " Then it slept."]
    splits = {"train": (comps, [stories[1], "x y", "z"])}
    whole = M.memorisation_rows("m", stories, splits, n=3, shortlist=2, min_words=20)
    for shard_words, workers in ((10**9, 1), (30, 1), (30, 2)):
        assert M.memorisation_rows("m", texts, splits, n=3, shortlist=2, min_words=20, shard_words=shard_words,
                                   workers=workers, log=lambda *_: None) == whole


def test_paper_sim_below_the_largest_budgets_runs_only_the_budgets_the_corpus_holds(tmp_path):
    """``benchmarks/paper_sim.py --words 20e6``: budgets of 25M words and more cannot be cut from 20M words, so the
    notebooks name 5M, 10M and all of it, and the runner's parameter check accepts the overrides; at 110M words every
    budget fits and the overrides stay those of the measured run."""
    import importlib.util
    import sys
    from pathlib import Path

    from helpers import runner

    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    saved = list(sys.path)  # the script puts benchmarks/ first; left there, its parallel_jobs.py would shadow the
    try:                    # tests' own in later worker processes (tests/test_parallel.py hung on that)
        spec = importlib.util.spec_from_file_location("paper_sim", bench / "paper_sim.py")
        sim = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sim)
    finally:
        sys.path[:] = saved
    small = sim.overrides_for(tmp_path, 20e6)
    assert small["01"]["tiny_budgets"] == [5_000_000, 10_000_000, 440_000_000]
    assert small["02"]["budgets"] == small["05"]["decoders"] == ["tiny-5M", "tiny-10M", "tiny-440M"]
    assert small["03"]["models"] == small["05b"]["models"] == ["tiny-5M", "tiny-10M", "tiny-440M"]
    assert small["02b"]["budget"] == "tiny-10M" and small["03"]["max_words"] == sim.SIM["03"]["max_words"]
    assert small["03"]["selfbleu_models"] == ["tiny-10M"]  # the paper's tiny-50M is not there (a KeyError in 03)
    runner.plan("paper", runner.notebooks(), small)
    assert sim.fitting_budgets(110e6) == {} and sim.overrides_for(tmp_path, 110e6)["03"] == sim.SIM["03"]
