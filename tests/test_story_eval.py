"""Themed-prompt answer keys, first sentences, Instruct documents and the required-word metric (fast, no models)."""
from __future__ import annotations

import json
import random

import pandas as pd
import pytest

from helpers.core.stats import wilson_interval
from helpers.story_eval import folding as FO, instruct as INS, suites as SE
from helpers.judge import runs as JR
from helpers.report import story_views as SV


# ----------------------------------------------------------------------------- folding and patterns
@pytest.mark.parametrize("a, b", [
    ("dog", "dogs"), ("play", "played"), ("play", "playing"), ("swim", "swimming"), ("swim", "swam"),
    ("berry", "berries"), ("big", "bigger"), ("big", "biggest"), ("happy", "happier"), ("Jane", "Jane's"),
    ("hide", "hiding"), ("hide", "hid"), ("box", "boxes"), ("love", "loved"), ("come", "came"), ("go", "went"),
    ("fly", "flies"), ("fall", "fell"), ("candy", "candies"), ("need", "needed"), ("sleep", "slept"),
    ("share", "sharing"), ("stop", "stopped"), ("Jane’s", "jane"),
])
def test_fold_same_lemma(a, b):
    assert FO.fold(a.lower()) == FO.fold(b.lower())


@pytest.mark.parametrize("a, b", [
    ("she's", "she"), ("it's", "it"), ("butter", "but"), ("here", "her"), ("don't", "do"), ("seed", "se"),
    ("better", "bet"), ("dinner", "din"),
])
def test_fold_keeps_apart(a, b):
    assert FO.fold(a) != FO.fold(b)


def key(**kw):
    return {"id": "t-1", **kw}


def test_sequence_pattern_is_contiguous_whole_words():
    k = key(success=["ice cream"])
    assert SE.grade_answer("She loves ice cream.", k).label == "success"
    assert SE.grade_answer("She loves ice and cream.", k).label == "fail"
    assert SE.grade_answer("Nice creamy soup.", k).label == "fail"  # whole words only
    assert SE.grade_answer("ICE CREAMS!", k).label == "success"  # case and plural folded


def test_ellipsis_pattern_requires_order():
    k = key(success=["ice cream ... better"])
    assert SE.grade_answer("Ice cream is much better.", k).label == "success"
    assert SE.grade_answer("Better than anything is ice cream.", k).label == "fail"
    assert SE.grade_answer("ice cream … better", key(success=["ice cream … better"])).label == "success"


def test_list_pattern_needs_all_in_any_order():
    k = key(success=[["alice", "jack"]], partial=["alice", "jack"])
    assert SE.grade_answer("Jack and Alice said hello.", k).label == "success"
    assert SE.grade_answer("Alice said hello.", k).label == "partial"
    assert SE.grade_answer("Bob said hello.", k).label == "fail"


def test_folding_in_patterns_and_answers():
    k = key(success=["go to bed", "dog"], partial=["jane"])
    assert SE.grade_answer("She went to bed.", k).label == "success"  # irregular verb
    assert SE.grade_answer("The dogs' bowls.", k).label == "success"  # plural possessive
    assert SE.grade_answer("It was Jane's idea.", k).label == "partial"  # possessive
    assert SE.grade_answer("He was going to bed early.", k).label == "success"  # -ing
    assert SE.grade_answer("They played with dogs happily.", key(success=["play ... dog"])).label == "success"
    assert SE.grade_answer("“No,” said Mom.", key(success=['"no"'])).label == "success"  # typographic quotes
    assert SE.grade_answer("I know.", key(success=["no"])).label == "fail"  # know is not no


def test_wrong_downgrades_one_step():
    k = key(success=["carrot"], partial=["vegetable"], wrong=["apple"])
    assert SE.grade_answer("the carrot", k).label == "success"
    g = SE.grade_answer("the carrot and the apple", k)
    assert g.label == "partial" and g.wrong == ["apple"] and g.success == ["carrot"]
    assert SE.grade_answer("a vegetable, an apple", k).label == "fail"
    assert SE.grade_answer("an apple", k).label == "fail"
    assert SE.grade_answer("nothing here", k).reason == "no expected word"
    assert SE.grade_answer("the carrot", k).score == 1.0 and SE.grade_answer("a vegetable", k).score == 0.5


@pytest.mark.parametrize("bad, msg", [(True, "quote them"), (None, "quote them"), ("", "empty pattern"),
                                      ("a ... ", "empty part"), ([["a"]], "do not nest"), ([], "empty list")])
def test_bad_patterns_are_refused(bad, msg):
    with pytest.raises(SE.AnswerKeyError, match=msg):
        SE.compile_pattern(bad, "k")


# ----------------------------------------------------------------------------- the bundled answer keys
def test_answer_keys_match_the_prompt_files():
    keys = SE.load_answer_keys()
    assert {s: len(v) for s, v in keys.items()} == {"factual": 9, "reasoning": 9, "context-tracking": 6}
    for suite, ks in keys.items():
        originals = SE.load_suite(suite)
        for i, k in enumerate(ks):
            assert k.id == f"{suite}-{i + 1}" and k.original == originals[i]
            assert k.prompt == FO.ascii_quotes(originals[i]) and "”" not in k.prompt and "’" not in k.prompt
            assert k.success and k.expect


def test_bundled_yaml_reads_the_same_with_the_one_yaml_reader(tmp_path):
    """The suites read their YAML with ``core.config.read_yaml`` (YAML 1.2 numbers, no repeated key) where they used
    ``yaml.safe_load``: the bundled files load to the same objects, and a repeated key is refused."""
    import yaml

    from helpers.core.config import ParamsError, read_yaml
    from helpers.data.corpora import read_text, resolve

    for name in (SE.ANSWER_KEYS, SE.EVAL_PROMPTS):
        old = yaml.safe_load(read_text(name))
        assert read_yaml(resolve(name), read_text(name)) == old and repr(read_yaml(resolve(name), read_text(name))) == repr(old)
    assert SE.load_eval_prompts() == yaml.safe_load(read_text(SE.EVAL_PROMPTS))
    p = tmp_path / "keys.yaml"
    p.write_text("factual: []\nfactual: []\n")
    with pytest.raises(ParamsError, match="duplicate key 'factual'"):
        SE.load_answer_keys(p, suites=["factual"], prompts={"factual": []})


def test_answer_key_loader_checks_prompts(tmp_path):
    text = ("factual:\n  - id: factual-1\n    prompt: \"Alice went\"\n    expect: home\n    success: [home]\n"
            "reasoning: []\ncontext-tracking: []\n")
    p = tmp_path / "keys.yaml"
    p.write_text(text)
    ok = SE.load_answer_keys(p, suites=["factual"], prompts={"factual": ["Alice went"]})
    assert ok["factual"][0].prompt == "Alice went"
    with pytest.raises(SE.AnswerKeyError, match="prompt differs"):
        SE.load_answer_keys(p, suites=["factual"], prompts={"factual": ["Alice ran"]})
    with pytest.raises(SE.AnswerKeyError, match="1 keys for 2 prompts"):
        SE.load_answer_keys(p, suites=["factual"], prompts={"factual": ["Alice went", "Bob"]})
    p.write_text(text.replace("success: [home]", "success: [home, no]"))  # unquoted no is a YAML boolean
    with pytest.raises(SE.AnswerKeyError, match="quote them"):
        SE.load_answer_keys(p, suites=["factual"], prompts={"factual": ["Alice went"]})
    p.write_text(text.replace("expect: home", "expect: home\n    colour: red"))
    with pytest.raises(SE.AnswerKeyError, match="unknown field"):
        SE.load_answer_keys(p, suites=["factual"], prompts={"factual": ["Alice went"]})
    p.write_text(text.replace("id: factual-1", "id: factual-2"))
    with pytest.raises(SE.AnswerKeyError, match="expected 'factual-1'"):
        SE.load_answer_keys(p, suites=["factual"], prompts={"factual": ["Alice went"]})


@pytest.mark.parametrize("kid, answer, grade", [
    # Rathod et al. 2024 Tables 2-4 and Yang et al. (McGill report) Table 1 completions
    ("factual-1", "to bed.", "success"), ("factual-1", "to the hospital", "fail"),
    ("factual-1", "to the kitchen to get some food.", "fail"), ("factual-2", "the library", "success"),
    ("factual-2", "the park.", "fail"), ("factual-4", "many colors and shapes.", "success"),
    ("factual-4", "a big yellow flower", "fail"), ("reasoning-3", "school, he saw a big, red car.", "fail"),
    ("reasoning-6", "his father.", "success"), ("reasoning-6", "his mother.", "fail"),
    ("reasoning-6", "his parents", "partial"), ("reasoning-8", "said that they should share and be kind.", "success"),
    ("context-tracking-3", "a candy.", "success"), ("context-tracking-3", "it is a special treat", "partial"),
    ("context-tracking-3", "Anne replied, 'It's a piece of chocolate, Mommy.", "fail"),
    ("context-tracking-5", "Alice said, 'I'm Jane.", "fail"),
    ("context-tracking-5", "Alice and Jack said 'We're Alice and Jack.'", "success"),
    ("context-tracking-6", "to have some sugar?\"", "success"), ("context-tracking-4", "out the carrot.", "success"),
    ("context-tracking-2", "a dog and a dog.", "partial"),
    ("reasoning-7", "\"I don't like swimming.\"", "partial"),  # the known keyword limit noted in the key
])
def test_keys_on_published_completions(kid, answer, grade):
    keys = {k.id: k for ks in SE.load_answer_keys().values() for k in ks}
    assert SE.grade_answer(answer, keys[kid]).label == grade


@pytest.mark.parametrize("kid, answer, grade", [
    ("factual-6", "Birds like to fly in the sky.", "fail"), ("factual-6", "They like to eat flies.", "success"),
    ("factual-5", "gone.", "success"), ("factual-5", "going to rain.", "fail"),
    ("reasoning-8", "looked at each other.", "fail"), ("reasoning-8", "each got a piece.", "success"),
    ("factual-1", "and laid down on the couch.", "success"), ("factual-7", "I know, said Mom.", "fail"),
    ("factual-7", "The cow was not happy.", "fail"), ("factual-7", "Cows do not fly.", "success"),
    ("reasoning-7", "\"I do not want to go.\"", "success"), ("reasoning-7", "it was not a big day.", "fail"),
])
def test_keys_avoid_folding_pitfalls(kid, answer, grade):
    keys = {k.id: k for ks in SE.load_answer_keys().values() for k in ks}
    assert SE.grade_answer(answer, keys[kid]).label == grade


def test_grade_table_summary_and_colours():
    keys = SE.load_answer_keys()["context-tracking"]
    rows = [{"model": m, "story_id": "context-tracking-4", "completion": c}
            for m, c in [("a", " out the carrot. She ate it."), ("b", " the apple. Then")]]
    rows += [{"model": m, "story_id": "context-tracking-3", "completion": " I don't know."} for m in ("a", "b")]
    g = SE.grade_table(rows, keys)
    assert g["answer"].tolist()[:2] == ["out the carrot.", "the apple."]
    assert g["grade"].tolist() == ["success", "fail", "fail", "fail"]
    s = SE.grade_summary(g)
    assert s.set_index("model").loc["a", ["success", "fail", "score"]].tolist() == [1, 1, 0.5]
    # two prompts, one success: the bootstrap interval of the mean spans 0..1; model b failed both: a bootstrap
    # would say [0, 0], the Wilson interval of 0 successes in 2 says how little two prompts tell
    assert s.set_index("model").loc["a", ["score CI low", "score CI high"]].tolist() == [0.0, 1.0]
    lo, hi = s.set_index("model").loc["b", ["score CI low", "score CI high"]].tolist()
    assert lo == 0.0 and hi == pytest.approx(wilson_interval(0, 2)[1]) and 0.6 < hi < 0.7
    html = SV.colour_table_html(g, caption="ct", extra={("a", "context-tracking-4"): "judge 9/10"})
    assert html.count(SE.GRADE_COLOURS["success"]) == 1 and html.count(SE.GRADE_COLOURS["fail"]) == 3
    assert "judge 9/10" in html and "expected:" in html


def test_grade_summary_adds_the_judges_mean_consistency_when_graded():
    keys = SE.load_answer_keys()["context-tracking"]
    rows = [{"model": m, "story_id": k, "completion": " I don't know."} for m in ("a", "b")
            for k in ("context-tracking-3", "context-tracking-4")]
    g = SE.grade_table(rows, keys)
    plain = SE.grade_summary(g)
    judged = SE.grade_summary(g.assign(**{"judge consistency": [2.0, 4.0, 6.0, float("nan")]}))
    assert "judge consistency" not in plain and judged.drop(columns="judge consistency").equals(plain)
    assert judged["judge consistency"].tolist() == [3.0, 6.0]  # per model and suite, a failed grade left out


# ----------------------------------------------------------------------------- first sentence and prompts
@pytest.mark.parametrize("text, first", [
    (" to bed. She slept.", "to bed."),
    (' "Yes!" said Mom. Then they left.', '"Yes!" said Mom.'),
    (" Mr. Lee came home. He smiled.", "Mr. Lee came home."),
    (' a candy." Mom smiled.', 'a candy."'),
    ("\nthe park\nand more", "the park"),
    (" no end at all", "no end at all"),
    (" Why? Because.", "Why?"),
    ('. "French," said Mom. She smiled.', '"French," said Mom.'),  # the prompt's sentence closed first
    ('?" \n\nMom said, "Yes." Then', 'Mom said, "Yes."'),
    (".", ""),
    ("", ""),
])
def test_first_sentence(text, first):
    assert SE.first_sentence(text) == first


def test_eval_prompts_and_trailing_spaces():
    prompts = SE.load_eval_prompts()
    assert len(prompts) == 44 and prompts[0].startswith("Once upon a time, there lived a bunny")
    ps = SE.story_prompts(["Words: a, b\nStory: ", "Once upon a time"])
    assert [p.prompt for p in ps] == ["Words: a, b\nStory:", "Once upon a time"] and [p.story_id for p in ps] == [0, 1]
    assert all(p.ending == "" for p in ps)


def test_fit_prompts(decoder_tokenizer):
    ps = SE.story_prompts(["short prompt", "a much longer prompt " * 20])
    kept, dropped = SE.fit_prompts(ps, decoder_tokenizer, context=40, min_new_tokens=8)
    assert [p.story_id for p in kept] == [0] and [p.story_id for p in dropped] == [1]


def test_gpteval_completions_fit_each_model_and_count_coverage(decoder_tokenizer, monkeypatch, tmp_path):
    """Each model completes the prompts that fit its context, cached under its own file; the coverage table names
    the prompts left out and counts words (a stand-in for the cached completions: no model runs)."""
    calls = []

    def fake_completions(path, folder, prompts, decoding, *, model_name, **kw):
        calls.append((path.name, [p.story_id for p in prompts], kw["seed"]))
        return [{"model": model_name, "story_id": p.story_id, "completion_words": 0 if p.story_id else 4} for p in prompts]

    monkeypatch.setattr(SE, "cached_completions", fake_completions)
    monkeypatch.setattr(SE, "load_tokenizer", lambda folder: decoder_tokenizer)
    monkeypatch.setattr(SE, "model_context", lambda folder: {"small": 40, "large": 400}[folder])
    ps = SE.story_prompts(["short prompt", "a much longer prompt " * 20])
    rows, coverage, kept = SE.gpteval_completions(tmp_path, {"m-small": "small", "m-large": "large"}, ps, "dec", 8,
                                                  max_new_tokens=16, batch_size=4, seed=3)
    assert calls == [("gpteval-m-small.jsonl", [0], 3), ("gpteval-m-large.jsonl", [0, 1], 3)]
    assert rows["model"].tolist() == ["m-small", "m-large", "m-large"] and list(kept) == ["m-small", "m-large"]
    assert coverage[["model", "context", "prompts used", "prompts left out", "completions", "empty completions"]
                    ].values.tolist() == [["m-small", 40, 1, "1", 1, 0], ["m-large", 400, 2, "-", 2, 1]]
    assert coverage["mean words"].tolist() == [4.0, 2.0] and coverage["median words"].tolist() == [4.0, 2.0]
    none = SE.coverage_row("m", 10, [], ps, [], 0.04)
    assert none["prompts left out"] == "0, 1" and none["completions"] == 0 and none["seconds"] == 0.0
    assert none["mean words"] != none["mean words"]  # NaN: no completion to count


def test_judge_config_none_without_endpoint(monkeypatch):
    for v in ("STORYBENCH_JUDGE_BASE_URL", "STORYBENCH_JUDGE_MODEL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(v, raising=False)
    assert JR.judge_config(None, None, "OPENAI_API_KEY") is None
    cfg = JR.judge_config("http://127.0.0.1:9/v1", "m", "MY_KEY", max_concurrency=2)
    assert cfg.model == "m" and cfg.api_key_env == "MY_KEY" and cfg.max_concurrency == 2


# ----------------------------------------------------------------------------- Instruct documents
STORY = ('Once upon a time, a little girl named Mia found a shiny red ball in the garden. "Look, Mom!" she said. '
         'Her mom smiled and said, "What a pretty ball." Mia rolled the ball to her brother, and they played until '
         'dinner. Mia learned that sharing makes playing more fun.')


def test_features_by_rule_only():
    assert INS.detect_features(STORY) == ["Dialogue", "MoralValue"]
    assert INS.detect_features("Tom ran home. He ate soup.") == []
    assert INS.detect_features('He said, "Hi." He learned to swim.') == ["Dialogue"]  # "learned to" is no lesson
    assert INS.detect_features("Sue took piano lessons. She played well.") == []
    assert INS.detect_features("Tom was sad. That day he learned a valuable lesson.") == ["MoralValue"]
    assert INS.detect_features("The moral of the story is to be kind.") == ["MoralValue"]
    with pytest.raises(ValueError, match="no honest detection rule"):
        INS.detect_features(STORY, ["BadEnding"])


def test_instruct_document_fields_are_derived_from_the_story():
    rng = random.Random(0)
    for _ in range(50):
        doc = INS.build_instruct_document(STORY, rng)
        names = [k for k, _ in doc.fields]
        assert names and len(set(names)) == len(names) and "Summary" not in names
        assert set(names) <= set(INS.DERIVED_FIELDS)
        assert doc.text.startswith(doc.prompt) and doc.prompt.endswith("\nStory: ") and doc.text.endswith(STORY)
        for w in doc.words:
            assert INS.word_used(w, STORY) and w in STORY and w not in INS.STOPWORDS
        for k, v in doc.fields:
            if k == "Random sentence":
                assert v in STORY
            if k == "Features":
                assert set(INS.split_list(v)) <= {"Dialogue", "MoralValue"}
        if doc.words:
            assert len(doc.words) == 3 and len({FO.fold(w) for w in doc.words}) == 3


def test_instruct_documents_random_subsets_and_orders_seeded():
    stories = [STORY] * 200
    docs = INS.instruct_documents(stories, seed=7)
    assert [d.text for d in docs] == [d.text for d in INS.instruct_documents(stories, seed=7)]
    assert [d.text for d in docs] != [d.text for d in INS.instruct_documents(stories, seed=8)]
    subsets = {tuple(sorted(k for k, _ in d.fields)) for d in docs}
    orders = {tuple(k for k, _ in d.fields) for d in docs}
    assert len(subsets) == 7  # every non-empty subset of the three derivable fields
    assert len(orders) > len(subsets)  # and several orders of the same subset
    counts = INS.field_counts(docs)
    assert counts["Summary"] == 0 and 0.3 < counts["Words"] / len(docs) < 0.8
    forced = INS.instruct_documents(stories, seed=7, require=("Words",), p_field=0.0)
    assert all([k for k, _ in d.fields] == ["Words"] for d in forced)


def test_instruct_requirements_that_cannot_be_met():
    with pytest.raises(ValueError, match="only"):
        INS.build_instruct_document(STORY, random.Random(0), require=("Summary",))
    with pytest.raises(ValueError, match="cannot give"):
        INS.build_instruct_document("Tom ran.", random.Random(0), require=("Words",))
    assert INS.instruct_documents(["Tom ran.", STORY], 0, require=("Words",), skip_unfit=True)[0].story == STORY


def test_parse_instruct_round_trip_and_bundled_prompts():
    for d in INS.instruct_documents([STORY] * 20, seed=3):
        parsed = INS.parse_instruct(d.text)
        assert parsed.fields == d.fields and parsed.story == d.story and parsed.words == d.words
        assert INS.parse_instruct(d.prompt).story is None
    bundled = INS.load_instruct_prompts()
    assert len(bundled) == 50
    p = INS.parse_instruct(bundled[3])
    assert p.words == ["meet", "waffle", "new"] and p.story is None
    two = INS.parse_instruct(bundled[0])
    assert len(two.get("Summary")) == 2 and two.features == ["Dialogue"]  # the source's double summaries
    assert sum(bool(INS.parse_instruct(b).words) for b in bundled) >= 30
    with pytest.raises(ValueError, match="not an Instruct field"):
        INS.parse_instruct("Hello there\nStory: x")
    with pytest.raises(ValueError, match="no 'Story:'"):
        INS.parse_instruct("Words: a, b")


def test_required_word_share():
    story = "Tom escaped from the tall tower. He was not at war with anyone."
    assert INS.required_word_share(["escape", "war", "tall"], story) == 1.0
    assert INS.required_word_share(["escape", "waffle", "meet"], story) == pytest.approx(1 / 3)
    assert INS.required_word_share([], story) is None
    assert INS.word_used("x-ray", "She saw her x-ray.") and not INS.word_used("x-ray", "She saw a ray.")
    assert not INS.word_used("war", "The warm sun.")  # whole words only


def test_instruct_scores_and_chance_baseline():
    rows = [{"model": "m", "prompt": "Words: cat, hat, mat\nStory:", "completion": "A cat in a hat."},
            {"model": "m", "prompt": "Words: dog, log, fog\nStory:", "completion": "A cat sat on a mat."},
            {"model": "m", "prompt": "Features: Dialogue\nStory:", "completion": "Hi."}]
    s = INS.instruct_scores(rows)
    assert s["share_used"].tolist()[:2] == pytest.approx([2 / 3, 0.0])
    assert s["chance_share"].tolist()[:2] == pytest.approx([0.0, 2 / 3])  # the other prompt's words
    assert s.loc[2, "n_words"] == 0 and pd.isna(s.loc[2, "share_used"])
    summ = INS.instruct_summary(s.assign(prompts="x"))
    assert summ.loc[0, "stories scored"] == 2 and summ.loc[0, "stories"] == 3
    assert summ.loc[0, "not scored (prompt without Words:)"] == 1  # the Features-only prompt
    assert summ.loc[0, "share of required words used"] == pytest.approx(1 / 3)
    html = SV.instruct_examples_html([{"prompt": rows[0]["prompt"], "m": "Cats like hats."}], ["m"])
    assert "<b>Cats</b>" in html and "<b>hats</b>" in html and "<b>like</b>" not in html


def test_unscored_notes_name_prompts_without_words():
    rows = [{"model": m, "prompts": "set", "prompt": p, "completion": "A cat."} for m in ("a", "b")
            for p in ("Words: cat, hat\nStory:", "Features: Dialogue\nStory:")]
    rows.append({"model": "a", "prompts": "other", "prompt": "Words: dog\nStory:", "completion": "A dog."})
    notes = INS.unscored_notes(INS.instruct_scores(rows))
    assert notes == ["set: 1 of 2 prompts have no Words: line (only features, a summary or a random sentence), so 2 of 4 "
                     "stories (2 models) are not scored for required words"]


def test_instruct_completions_fit_each_set_and_name_the_files(decoder_tokenizer, monkeypatch, tmp_path):
    from helpers.story_eval import instruct_files as IF

    calls = []

    def fake_completions(path, folder, prompts, decoding, *, model_name, **kw):
        calls.append((path.name, folder, [p.story_id for p in prompts]))
        return [{"model": model_name, "story_id": p.story_id, "completion": "x"} for p in prompts]

    monkeypatch.setattr(IF, "cached_completions", fake_completions)
    sets = {"bundled 50": SE.story_prompts(["Words: cat\nStory:", "Words: dog " * 30 + "\nStory:"]),
            "held-out derived": SE.story_prompts(["Words: hat\nStory:"], ["h-0"])}
    rows, fit = IF.instruct_completions(tmp_path, sets, {"tiny-1M (plain)": "p", "tiny-1M-instruct": "i"},
                                        "tiny-1M-instruct", "tiny-1M", decoder_tokenizer, 40, "dec", 8,
                                        max_new_tokens=16, batch_size=4, seed=0)
    assert calls == [("instruct-bundled-plain-tiny-1M.jsonl", "p", [0]), ("instruct-bundled-instruct-tiny-1M.jsonl", "i", [0]),
                     ("instruct-held-out-plain-tiny-1M.jsonl", "p", ["h-0"]),
                     ("instruct-held-out-instruct-tiny-1M.jsonl", "i", ["h-0"])]
    assert [r["prompts"] for r in rows] == ["bundled 50"] * 2 + ["held-out derived"] * 2
    assert fit.values.tolist() == [["bundled 50", 2, 1, 1], ["held-out derived", 1, 1, 0]]


def test_heldout_split_keeps_validation_first():
    val, ev = INS.heldout_split(list("abcdef"), 2)
    assert val == list("abcd") and ev == ["e", "f"]
    with pytest.raises(ValueError, match="only 3"):
        INS.heldout_split(list("abc"), 3)


def test_bundled_prompt_objects():
    ps = INS.bundled_instruct_prompts()
    assert len(ps) == 50 and ps[3].story_id == "bundled-3" and ps[3].prompt == "Words: meet, waffle, new\nStory:"
    assert json.loads(json.dumps([p.story_id for p in ps]))[0] == "bundled-0"


def test_instruct_run_row_tells_the_same_spec_from_a_shorter_schedule():
    from types import SimpleNamespace

    class Blocks(list):
        tokens = 1000

        def epochs(self, steps, batch):
            return steps * batch / len(self)

    run = INS.InstructRun("m-instruct", "m", None, Blocks(range(10)), None, SimpleNamespace(dropout=0.0),
                          SimpleNamespace(steps=300, batch_size=16, weight_decay=0.1), 5, 2, {}, None,
                          ["config.steps: plain 3000 vs instruct 300"])
    row = run.row()
    assert row["same model spec as plain"] is True
    assert row["training differences from plain"] == "steps: plain 3000 vs instruct 300"
    run.differences = ["spec.hidden: plain 128 vs instruct 64"]
    assert run.row()["same model spec as plain"] is False and run.row()["training differences from plain"] == "none"
