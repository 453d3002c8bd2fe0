"""Interpretability helpers (lexicon, interpret, interpret_tables, interpret_views): hooked MLP activations, distance
correlation, top-k contexts, word classes, cache, tables."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from helpers.analysis import attention_stats as A, interpret as I, interpret_tables as tables, lexicon
from helpers.report import interpret_views as views
from helpers.models.decoder import DecoderSpec, build_decoder


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


@pytest.fixture(scope="module")
def stories(real_stories):
    return real_stories[:200]  # conftest's bundled stories


@pytest.fixture(scope="module")
def tok(stories):
    from helpers.data.tokenizers import train_tokenizer

    return train_tokenizer(stories, "decoder", 512)


@pytest.fixture(scope="module")
def model(tok):
    spec = DecoderSpec(hidden=32, layers=2, heads=4, context=64, window=8, vocab_size=len(tok))
    return build_decoder(spec, seed=0, bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id).eval()


def test_hooked_activations_equal_a_manual_mlp_forward(model, tok, stories):
    ids = tok(stories[0], add_special_tokens=False)["input_ids"][:60]
    acts = I.mlp_activations(model, ids)
    assert sorted(acts) == [0, 1]
    x = torch.tensor([ids])
    with torch.no_grad():
        hidden = model(x, output_hidden_states=True).hidden_states
        for layer, block in enumerate(model.transformer.h):
            h = hidden[layer]  # the input of block `layer`
            resid = h + block.attn(block.ln_1(h))[0]
            manual = block.mlp.act(block.mlp.c_fc(block.ln_2(resid)))[0].numpy()
            assert acts[layer].shape == (len(ids), 4 * 32)
            assert np.abs(acts[layer] - manual).max() < 1e-6
    # a subset of layers, and the recorder removes its hooks
    assert list(I.mlp_activations(model, ids, layers=[1])) == [1]
    assert all(not b.mlp.act._forward_hooks for b in model.transformer.h)


def test_attention_maps_are_causal_and_local_layers_windowed(model, tok, stories):
    ids = tok(stories[1], add_special_tokens=False)["input_ids"][:40]
    att = I.attention_maps(model, ids)
    assert att.shape == (2, 4, len(ids), len(ids))
    np.testing.assert_allclose(att.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(att, 1) == 0)
    assert I.layer_types(model) == ["global", "local"]
    i, j = np.indices(att.shape[-2:])
    assert np.all(att[1][:, (i - j) >= 8] == 0) and np.any(att[0][:, (i - j) >= 8] > 0)


def test_distance_correlation_uses_only_the_lower_triangle():
    T = 12
    i, j = np.indices((T, T))
    att = np.where(j <= i, 1.0 - 0.05 * (i - j) + 0.01 * (i % 3), 0.0)  # weight falls with distance below the diagonal
    lower = A.distance_correlation(att)
    m = j <= i
    assert lower == pytest.approx(np.corrcoef(att[m], (i - j)[m])[0, 1])
    assert lower < -0.9
    full = A.distance_correlation(att, lower=False)
    assert full == pytest.approx(np.corrcoef(att.ravel(), np.abs(i - j).ravel())[0, 1])
    assert abs(full) < 0.5  # the zeros above the diagonal hide the pattern in the full-matrix value
    assert A.positional_label(lower) == "positional" and A.positional_label(full) == "semantic"
    # window: only the entries a local layer can attend to
    w = A.distance_correlation(att, window=4)
    mw = (j <= i) & (i - j < 4)
    assert w == pytest.approx(np.corrcoef(att[mw], (i - j)[mw])[0, 1]) and w != pytest.approx(lower)
    # leading dimensions are vectorised; first=1 leaves out the start token's row and column
    stack = np.stack([att, att[::-1, ::-1].T])
    np.testing.assert_allclose(A.distance_correlation(stack, first=1)[0], A.distance_correlation(att[1:, 1:]))


def test_positional_label_threshold():
    assert A.positional_label(0.51) == "positional"
    assert A.positional_label(-0.7) == "positional"
    assert A.positional_label(0.5) == "semantic"
    assert A.positional_label(-0.2) == "semantic"
    assert A.positional_label(float("nan")) == "undefined"
    assert list(A.positional_label(np.array([0.9, 0.1]))) == ["positional", "semantic"]
    ref = A.reference_correlations(100)
    assert ref["uniform"] < 0 and abs(ref["previous token"]) < 0.5  # what the criterion cannot see


@pytest.mark.parametrize("T, window", [(30, None), (128, None), (255, 128), (511, 256)])
def test_head_classes_get_all_ten_synthetic_heads_right(T, window):
    """Known answers: previous-token and recency (τ = 5) heads are positional; uniform attention is diffuse; a head
    that attends to one token class wherever it sits and a same-token (induction-like) head are content; 90 % on the
    start token or on the first story token is a sink; previous-token/sink 50/50, previous token 30 % + content 70 %
    and recency 60 % + content 40 % are mixed. The |r| > 0.5 rule of Rathod et al. misses the previous-token head at
    every length (why it is not the project's statistic)."""
    ref = A.reference_heads(T, window)
    assert len(ref) == 10 and list(ref["ideal head"]) == list(A.EXPECTED_KINDS)
    assert list(ref["kind (η² rule)"]) == list(ref["expected"]), ref[["ideal head", "offset η²", "kind (η² rule)"]]
    assert set(ref["expected"]) == set(A.HEAD_KINDS)
    assert ref.set_index("ideal head").at["previous token", "label (|r| > 0.5 rule)"] == "semantic"
    heads = A.synthetic_heads(T)
    assert all(np.allclose(a.sum(axis=1), 1.0) for a in heads.values())


@pytest.mark.parametrize("mutation", [dict(threshold=A.CONTENT_ETA2),  # no middle band: mixtures read as positional
                                      dict(mixed_sink=A.SINK_SHARE),  # no sink + offset mix
                                      dict(sink_at=2.0),  # no sink class
                                      dict(content=-1.0)])  # no content class: content heads read as mixed
def test_a_rule_without_a_class_fails_the_check(mutation, monkeypatch):
    """Each class is needed: the rule with one class removed misclassifies a synthetic head, so the check (and the
    findings' gate on it) catches it."""
    original = A.head_kind
    monkeypatch.setattr(A, "head_kind", lambda e, v, s=0.0, threshold=A.POSITIONAL_ETA2, **kw: original(
        e, v, s, **{"threshold": threshold, **kw, **mutation}))
    ref = A.reference_heads(128)
    assert (ref["kind (η² rule)"] != ref["expected"]).any()
    from helpers.report import interpret_findings
    heads = pd.DataFrame({"model": ["m"], "layer": [0], "label": ["content"]})
    assert "misclassify" in interpret_findings.attention_heads(heads, ref)[0]


def test_eta2_of_roots_follows_mass_not_concentration():
    """On raw weights a 30 % previous-token share dominates a 70 % content share more as rows grow; on √weights the
    mixture stays in the middle band at every length."""
    raw, root = [], []
    for T in (30, 128, 255):
        mix = A.synthetic_heads(T)["previous token 30 % + content 70 %"]
        raw.append(float(A.offset_eta_squared(mix, root=False)))
        root.append(float(A.offset_eta_squared(mix)))
    assert raw[-1] > A.POSITIONAL_ETA2 and raw[-1] - raw[0] > 0.25
    assert all(A.CONTENT_ETA2 < r < A.POSITIONAL_ETA2 for r in root) and max(root) - min(root) < 0.1
    # the sink share: 0 for uniform attention at any length, ~0.9 for the sinks
    for T in (8, 128):
        h = A.synthetic_heads(T)
        assert abs(float(A.sink_share(h["uniform"]))) < 1e-9 and float(A.sink_share(h["start-token sink"])) > 0.85


def test_offset_eta_squared_known_values_and_row_effects_removed():
    T = 20
    i, j = np.indices((T, T))
    fixed = np.where(i - j == 2, 1.0, 0.0)  # rows 0-1 have no key at offset 2: all-zero rows explain nothing
    assert float(A.offset_eta_squared(fixed, first=0)) > 0.95  # < 1 only because rows differ in length
    rows_only = np.where(j <= i, (i + 1.0)[:, :1] * 0 + (i % 3 + 1.0), 0.0)  # varies by query row only
    assert np.isnan(A.offset_eta_squared(rows_only, first=0))
    # vectorised over leading dimensions, as story_attention_stats calls it
    stack = np.stack([fixed, np.where(j <= i, 1.0, 0.0)])
    e = A.offset_eta_squared(stack, first=0)
    assert e.shape == (2,) and e[0] == pytest.approx(float(A.offset_eta_squared(fixed, first=0))) and np.isnan(e[1])
    assert A.head_kind(0.9, 0.3) == "positional" and A.head_kind(0.1, 0.3) == "content"
    assert A.head_kind(0.4, 0.3) == "mixed" and A.head_kind(0.9, 0.3, 0.4) == "mixed"
    assert A.head_kind(0.9, 0.3, 0.8) == "sink" and A.head_kind(float("nan"), 1.0, 0.4) == "diffuse"
    assert A.head_kind(0.9, 0.95) == "diffuse" and A.head_kind(float("nan"), 0.5) == "diffuse"
    assert list(A.head_kind(np.array([0.9, 0.1]), np.array([0.3, 0.3]))) == ["positional", "content"]


def test_head_findings_withhold_counts_when_the_check_fails():
    from helpers.report import interpret_findings
    heads = pd.DataFrame({"model": ["m"] * 3, "layer": [0, 0, 1], "label": ["mixed", "mixed", "content"]})
    good = A.reference_heads(40)
    assert interpret_findings.attention_heads(heads, good)[0] == "m: 3 heads: 1 content (layer 1); 2 mixed (layer 0)"
    for wrong in ("content", "positional"):  # any one synthetic head wrong: no counts at all
        bad = good.copy()
        bad.loc[bad["ideal head"] == "previous token 30 % + content 70 %", "kind (η² rule)"] = wrong
        lines = interpret_findings.attention_heads(heads, bad)
        assert len(lines) == 1 and "misclassify synthetic heads (previous token 30 % + content 70 %)" in lines[0]
    seeds = pd.concat([heads, heads.assign(model="m (seed 7)", label=["mixed", "content", "content"])], ignore_index=True)
    lines = interpret_findings.attention_heads(seeds, good)
    assert lines[-1] == "m over 2 training seeds: content 1 / 2; mixed 2 / 1 of 3 heads (the counts move with the seed)"
    assert len(interpret_findings.attention_heads(heads, good)) == 1  # one seed: no seed line


def test_story_attention_stats_targets_and_offsets():
    T = 6  # start token + 5 story tokens; every query attends fully to the previous token
    att = np.zeros((1, 1, T, T))
    att[0, 0, 0, 0] = att[0, 0, 1, 1] = 1.0
    for q in range(2, T):
        att[0, 0, q, q - 1] = 1.0
    s = I.story_attention_stats(att, ["global"], window=256)
    assert list(s["target"][0, 0]) == [-1, -1, 0, 1, 2, 3]  # story-token index of the previous token
    prof = s["offset_sum"][0, 0] / np.maximum(s["offset_n"], 1)
    assert np.argmax(prof) == 1 and prof[1] == pytest.approx(1.0)
    assert s["sink"][0, 0] == 0 and s["mean_dist"][0, 0] == pytest.approx(1.0)


def test_top_k_tokens_and_context_at_story_edges():
    story = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])  # stories of 4 and 12 tokens
    acts = np.zeros((len(story), 3), dtype=np.float32)
    acts[0, 0], acts[1, 0], acts[9, 0] = 5.0, 4.0, 3.0  # neuron 0: best at the very first token
    acts[3, 1] = 2.0  # neuron 1: last token of story 0
    acts[4, 2], acts[15, 2] = 1.0, 9.0  # neuron 2: last token of story 1, then first token of story 1
    idx, vals = I.top_activations(acts, 3)
    assert list(idx[0]) == [0, 1, 9] and list(vals[0]) == [5, 4, 3]
    assert idx[1][0] == 3 and list(idx[2][:2]) == [15, 4]
    # distinct tokens: each token once, at its strongest occurrence
    ids = np.array([7, 7, 8, 9, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    acts[13, 0] = 6.0  # token 7 again, stronger
    d_idx, d_vals = I.top_activations(acts, 3, ids)
    assert list(d_idx[0]) == [13, 9, 7] and list(d_vals[0]) == [6, 3, 0]  # 7 (best row 13), 3, then ties: token 1
    assert len(set(ids[d_idx[0]])) == 3
    for got, want in zip(I.top_activations(acts, 3, ids, chunk=1) + I.top_activations(acts, 3, chunk=2),
                         (d_idx, d_vals) + I.top_activations(acts, 3)):
        np.testing.assert_array_equal(got, want)  # neurons processed in chunks: same answer
    assert I.context_bounds(story, 0, 5) == (0, 4)  # nothing on the left, right stops at the story's end
    assert I.context_bounds(story, 3, 5) == (0, 4)  # last of story 0: never crosses into story 1
    assert I.context_bounds(story, 4, 5) == (4, 10)  # first of story 1: never crosses back into story 0
    assert I.context_bounds(story, 9, 5) == (4, 15)  # ±5 in the middle
    assert I.context_bounds(story, 15, 5) == (10, 16)  # end of the stream
    starts, ends = I.story_bounds(story)
    assert starts[9] == 4 and ends[9] == 16 and ends[2] == 4


def test_word_classes():
    lex = lexicon.load_lexicon()
    cls = lambda w, initial=False, names=frozenset(): lexicon.word_class(w, lex, initial, names)
    assert cls("the") == "determiner" and cls("The", True) == "determiner"
    assert cls("she") == "pronoun" and cls("with") == "preposition" and cls("and") == "conjunction"
    assert cls("was") == "auxiliary" and cls("didn't") == "auxiliary"
    assert cls(",") == "punctuation" and cls("!") == "punctuation"
    assert cls("dog") == "noun" and cls("cats") == "noun"
    assert cls("happy") == "adjective"
    assert cls("played") == "verb" and cls("went") == "verb"
    assert cls("Lily") == "name" and cls("Lily", True) == "name"  # a known name, even sentence-initially
    assert cls("Zorg") == "name" and cls("Zorg", True) == "other"  # capitalised mid-sentence only
    assert cls("Zorg", True, {"Zorg"}) == "name"
    words = lexicon.split_words('Once upon a time, Zorg ran. "Zorg is here," she said.')
    assert [w.text for w in words if w.sentence_initial] == ["Once", "Zorg"]
    tagger = lexicon.LexiconTagger(lex)
    tags = dict(zip([w.text for w in words], tagger.tag("", words)))
    assert tags["Zorg"] == "name" and tags["Once"] != "name"
    fitted = lexicon.LexiconTagger(lex).fit(["The blorp fell. A blorp is red. He saw the blorp!"])
    assert fitted.inferred.get("blorp") == "noun"
    assert lexicon.attention_class("preposition") == "other" and lexicon.attention_class("noun") == "noun"


def test_tokens_inherit_the_class_of_their_word(tok):
    tagger = lexicon.LexiconTagger()
    st = I.encode_story(tok, "Once upon a time, Zyxwv saw the dog.\nThe end.", 64, tagger)
    assert st.ids[0] == tok.convert_tokens_to_ids("<|endoftext|>")
    classes = st.token_classes()
    pieces = [tok.decode([t]) for t in st.ids[1:]]
    name_rows = [k for k, c in enumerate(classes[1:]) if c == "name"]
    assert "".join(pieces[k] for k in name_rows).strip() == "Zyxwv" and len(name_rows) > 1  # a multi-token name
    assert classes[0] == "start"
    assert [c for p, c in zip(pieces, classes[1:]) if p == "\n"] == ["punctuation"]
    assert I.display_token(tok, st.ids[0]) == "<eot>" and I.display_token(tok, tok("\n")["input_ids"][0]) == "↵"
    assert len(I.encode_story(tok, "Once upon a time " * 40, 10, tagger).ids) == 10


def test_spacy_tags_are_mapped_by_character_offsets():
    class Tok:
        def __init__(self, idx, pos):
            self.idx, self.pos_ = idx, pos

    text = "Lily didn't run."
    fake = lambda t: [Tok(0, "PROPN"), Tok(5, "AUX"), Tok(8, "PART"), Tok(12, "VERB"), Tok(15, "PUNCT")]
    tags = lexicon.SpacyTagger(fake).tag(text, lexicon.split_words(text))
    assert tags == ["name", "auxiliary", "verb", "punctuation"]


def test_analysis_is_cached_and_reused(tmp_path, model, tok, stories):
    path = tmp_path / "tiny" / "best"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    logs: list[str] = []
    texts = stories[:3]
    a = I.analyse_model(path, texts, 40, layers=[1], cache=tmp_path / "cache", log=logs.append)
    assert any(m.startswith("[run ]") for m in logs)
    assert a.acts[1].shape == (a.n_tokens, 128) and a.acts[1].dtype == np.float16
    assert len(a.classes) == a.n_tokens == sum(len(s.ids) - 1 for s in a.stories)
    assert a.stats["r_lower"].shape == (3, 2, 4) and a.targets.shape == (2, 4, a.n_tokens)
    # cached values are the hooked activations of each story
    direct = I.mlp_activations(a.model, a.stories[1].ids, [1])[1][1:]
    rows = a.story == 1
    np.testing.assert_allclose(np.asarray(a.acts[1][rows], dtype=np.float32), direct, rtol=2e-3, atol=2e-3)
    logs.clear()
    b = I.analyse_model(path, texts, 40, layers=[1], cache=tmp_path / "cache", log=logs.append)
    assert any(m.startswith("[skip]") for m in logs) and not any(m.startswith("[run ]") for m in logs)
    np.testing.assert_array_equal(np.asarray(a.acts[1]), np.asarray(b.acts[1]))
    logs.clear()
    I.analyse_model(path, texts, 30, layers=[1], cache=tmp_path / "cache", log=logs.append)
    assert any(m.startswith("[run ]") for m in logs)  # a parameter changed: recomputed
    # the tables run on the result
    heads = tables.head_table(a, n_boot=200)
    assert len(heads) == 8 and set(heads["label"]) <= set(A.HEAD_KINDS)
    assert (heads["η² CI low"] <= heads["offset η²"] + 1e-12).all() and (heads["offset η²"] <= heads["η² CI high"] + 1e-12).all()
    assert heads.equals(tables.head_table(a, n_boot=200))  # seeded: the same intervals again
    assert tables.head_table(a, n_boot=0)["η² CI low"].isna().all()
    assert tables.head_counts(heads)[list(A.HEAD_KINDS)].sum(axis=1).tolist() == [8]
    # the layer-0 η² per story as tidy rows for the questions table: item = the story's index in the texts
    rows = tables.layer_eta2_rows(a, texts, 42)
    assert list(rows.columns) == ["model", "arm", "seed", "task", "item", "value"] and len(rows) == 3
    assert rows["item"].tolist() == ["0", "1", "2"] and rows["value"].iloc[1] == pytest.approx(
        float(np.nanmean(a.stats["eta2"][1, 0])))
    # the untrained baseline: same architecture and stories, cached, the global random streams left alone
    state = torch.get_rng_state()
    u = I.analyse_untrained(a, seed=1, log=logs.append)  # (the fixture itself is an untrained model of seed 0)
    assert torch.equal(state, torch.get_rng_state()) and u.name == "tiny (untrained)"
    assert u.n_tokens == a.n_tokens and u.acts[1].shape == a.acts[1].shape and u.mlp_inputs[1].shape == (a.n_tokens, 32)
    assert not np.allclose(np.asarray(u.acts[1], dtype=np.float32), np.asarray(a.acts[1], dtype=np.float32))
    logs.clear()
    u2 = I.analyse_untrained(a, seed=1, log=logs.append)
    assert any(m.startswith("[skip]") for m in logs)
    np.testing.assert_array_equal(np.asarray(u.acts[1]), np.asarray(u2.acts[1]))
    # the MLP inputs are what the MLP sees: the activation module of them equals the recorded activations
    blk = a.model.transformer.h[1].mlp
    with torch.no_grad():
        manual = blk.act(blk.c_fc(torch.from_numpy(np.asarray(a.mlp_inputs[1][:20], dtype=np.float32)))).numpy()
    np.testing.assert_allclose(manual, np.asarray(a.acts[1][:20], dtype=np.float32), atol=2e-2)
    assert heads["offset η²"].between(0, 1).all() and set(heads["label (|r| > 0.5 rule)"]) <= {"positional", "semantic", "undefined"}
    targets = tables.target_class_table(a, heads)
    assert np.allclose(targets[lexicon.ATTENTION_CLASSES].sum(axis=1), 1.0)
    shares, idx, vals = tables.neuron_class_shares(a, 1, 5)
    assert len(shares) == 128 and np.allclose(shares[lexicon.CLASSES].sum(axis=1), 1.0)
    dshares, didx, _ = tables.neuron_class_shares(a, 1, 5, distinct=True)
    assert all(len(set(a.ids[r])) == 5 for r in didx)
    rates = {a.name: tables.token_base_rates(a)}
    spec = tables.specialist_table(pd.concat([shares, dshares]), 0.5, rates, 5)
    assert list(spec["top tokens"]) == ["all", "distinct"] and (spec.specialists <= 128).all()
    # the chance level as a count of neurons and as a share, beside the observed share
    assert (spec["expected neurons by chance"] == spec["expected share by chance"] * spec.neurons).all()
    assert ((spec["expected share by chance"] >= 0) & (spec["expected share by chance"] <= 1)).all()
    # the random-direction null: as many directions as neurons, the same activations rotated
    rd = tables.random_direction_shares(a, 1, 5, seed=0)
    assert len(rd) == 128 and np.allclose(rd[lexicon.CLASSES].sum(axis=1), 1.0)
    null = {a.name: tables.random_direction_null(a, 5, 0.5)}
    spec2 = tables.specialist_table(pd.concat([shares, dshares]), 0.5, rates, 5, null)
    tot = tables.specialist_totals(spec2)
    assert tot["random-direction share"].between(0, 1).all() and tot["p vs random directions"].between(0, 1).all()
    ctl = tables.neuron_controls({a.name: a}, {a.name: u}, tot, 5, 0.5)
    assert list(ctl["top tokens"]) == ["all", "distinct"] and (ctl["untrained model"] == "tiny (untrained)").all()
    assert {"trained specialists", "random-weight specialists", "random-direction specialists",
            "untrained-model specialists", "p vs random-weight layer", "p vs random directions", "p vs untrained model",
            "verdict"} <= set(ctl.columns)
    # the paper's observation with a bootstrap interval over stories
    obs = tables.paper_observation({a.name: a}, targets, "span", n_boot=100)
    assert len(obs) == 1 and obs.at[0, "function words nearer CI low"] <= obs.at[0, "function words nearer CI high"]
    assert obs.at[0, "function words nearer"] == pytest.approx(obs.at[0, "short-range: determiner+punctuation"]
                                                               - obs.at[0, "long-range: determiner+punctuation"])
    ex = tables.neuron_examples(a, 1, 0, idx, vals, 5)
    assert len(ex) == 5 and ex[0]["activation"] >= ex[-1]["activation"]
    assert "<mark" not in views.neuron_html(a, 1, 0, ex) and "class=\"top\"" in views.neuron_html(a, 1, 0, ex)
    # every layer of every model, both top-token lists: the tables above concatenated, their top rows kept
    every, tops = tables.neuron_shares({a.name: a}, 5)
    pd.testing.assert_frame_equal(every, pd.concat([shares, dshares], ignore_index=True))
    assert list(tops) == [(a.name, 1, False), (a.name, 1, True)] and np.array_equal(tops[a.name, 1, True][0], didx)


# the split of the former interpret module: each public name has one home
HOMES = {
    "analysis.lexicon": """CLASSES ATTENTION_CLASSES SPECIALIST_CLASSES FUNCTION_CLASSES CLOSED_CLASS IRREGULAR_VERBS NAMES LEXICON
        Word split_words Lexicon lexicon_from_frame load_lexicon word_class story_names LexiconTagger SpacyTagger
        installed_spacy_model make_tagger attention_class""",
    "analysis.attention_stats": """allowed_mask distance_correlation positional_label reference_correlations
        offset_eta_squared attention_evenness sink_share head_kind synthetic_heads reference_heads EXPECTED_KINDS
        HEAD_KINDS POSITIONAL_ETA2 CONTENT_ETA2 DIFFUSE_EVENNESS SINK_SHARE MIXED_SINK""",
    "analysis.interpret": """CACHE_VERSION StoryTokens encode_story display_token attention_maps layer_types
        MAX_OFFSET story_attention_stats MLPRecorder untrained_model analyse_untrained
        mlp_activations top_activations story_bounds context_bounds ModelAnalysis analysis_fingerprint analyse_model""",
    "analysis.interpret_tables": """head_table head_counts layer_eta2_rows target_class_table class_base_rates
        group_target_classes paper_observation FUNCTION_TARGETS CONTENT_TARGETS
        neuron_class_shares neuron_shares random_direction_shares rotate_layer random_direction_null chance_specialists token_base_rates
        random_weight_acts random_weight_layer specialist_counts control_verdict neuron_controls
        specialist_table specialist_totals neuron_examples
        showcase_neurons""",
    "report.interpret_views": """neuron_html html_page token_ticks plot_attention_grid plot_correlation_grid plot_head_kind_grid
        CLASS_COLOURS
        plot_class_shares plot_specialists plot_target_classes""",
}
#: same name, unrelated function elsewhere (none since memorisation's names of a corpus became corpus_names)
UNRELATED: set[tuple[str, str]] = set()


def test_each_moved_name_has_one_home():
    import ast
    import importlib
    from pathlib import Path

    folder = Path(importlib.import_module("helpers").__file__).parent
    defined: dict[str, set[str]] = {}
    for f in folder.rglob("*.py"):
        module_name = ".".join(f.relative_to(folder).with_suffix("").parts)
        for node in ast.parse(f.read_text()).body:  # top-level definitions only (imports do not count)
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            else:
                continue
            for n in names:
                defined.setdefault(n, set()).add(module_name)
    for home, names in HOMES.items():
        module = importlib.import_module(f"helpers.{home}")
        for name in names.split():
            obj = getattr(module, name)  # importable from its home
            if callable(obj) and hasattr(obj, "__module__"):
                assert obj.__module__ == f"helpers.{home}", f"{name} lives in {obj.__module__}, not helpers.{home}"
            others = {m for m in defined.get(name, set()) - {home} if (name, m) not in UNRELATED}
            assert home in defined.get(name, ()) and not others, f"{name} defined in {sorted(defined.get(name, ()))}"


def test_plot_specialists_draws_the_chance_count_beside_the_total():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    classes = ["noun", "other class"]
    total = pd.DataFrame([{"model": m, "top tokens": mode, "noun": 10, "other class": 30, "specialists": 40,
                           "neurons": 100, "expected neurons by chance": chance}
                          for mode, chance in [("all", 1.0), ("distinct", 20.0)] for m in ("a", "b")])
    fig = views.plot_specialists(total, classes, 20, "t", chance_label="chance")
    assert len(fig.axes) == 2
    ax = fig.axes[1]
    assert len(ax.patches) == 2 * 3  # 2 models x (2 classes + all specialists)
    assert sorted({round(p.get_height(), 3) for p in ax.patches}) == [0.1, 0.3, 0.4]
    segments = [seg for c in ax.collections for seg in c.get_segments()]
    chance = [seg for seg in segments if seg[0, 1] == seg[1, 1]]  # the horizontal ones
    assert len(chance) == 2 and all(list(seg[:, 1]) == [0.2, 0.2] and seg[:, 0].min() > 1.5 for seg in chance)
    assert "chance" in [t.get_text() for t in fig.legends[0].get_texts()]
    # every bar has its Wilson interval (neurons as independent draws): 10 of 100 -> [0.055, 0.174]
    vertical = sorted(tuple(round(v, 3) for v in seg[:, 1]) for seg in segments if seg[0, 0] == seg[1, 0])
    assert len(vertical) == 6 and (0.055, 0.174) in vertical
    plt.close(fig)
    # with specialist_totals' interval columns, the "all specialists" bars carry that interval
    fig = views.plot_specialists(total.assign(**{"share CI low": 0.31, "share CI high": 0.5}), classes, 20, "t")
    vertical = [seg for c in fig.axes[1].collections for seg in c.get_segments() if seg[0, 0] == seg[1, 0]]
    assert len(vertical) == 6 and sum(tuple(round(v, 3) for v in seg[:, 1]) == (0.31, 0.5) for seg in vertical) == 2
    plt.close(fig)


def test_neuron_controls_known_answer_the_nonlinearity_alone(model):
    """On synthetic class-clustered inputs (tokens of five classes, each token an embedding near its class centre,
    layer-normed), a layer of random weights through GELU gives more specialists than random directions of its own
    activations: the elementwise nonlinearity alone makes the neuron basis special. Such a layer, standing in for a
    trained one, beats the random-direction null but must not be called word-class specialisation: the verdict
    needs it to beat the random-weight control (the same inputs through other random weights) too."""
    from pathlib import Path
    rng = np.random.default_rng(0)
    d, V, N, names = 32, 800, 4000, ["noun", "verb", "adjective", "name", "punctuation"]
    tcls = rng.integers(0, 5, V)
    emb = rng.normal(0, 0.5, (5, d))[tcls] + rng.normal(0, 1, (V, d))
    ids = rng.integers(0, V, N)
    x = emb[ids] + 0.3 * rng.normal(0, 1, (N, d))
    x = ((x - x.mean(1, keepdims=True)) / x.std(1, keepdims=True)).astype(np.float16)
    acts = tables.random_weight_acts(x, 512, torch.nn.GELU(approximate="tanh"), 1.0, seed=1)
    a = I.ModelAnalysis("random GELU layer", Path("."), None, model, [], ids, np.zeros(N, np.int32),
                        np.arange(N, dtype=np.int32), np.array([names[c] for c in tcls[ids]], dtype=object), {0: acts},
                        {}, np.zeros((1, 1, 0), np.int32), ["global"], 8, 4, Path("."), mlp_inputs={0: x})
    rw, rd = tables.specialist_counts(a, 20, 0.5), tables.specialist_counts(tables.rotate_layer(a, 0), 20, 0.5)
    assert rw["all"][0] > rd["all"][0] and rw["distinct"][0] > rd["distinct"][0]  # the nonlinearity alone
    null = {a.name: tables.random_direction_null(a, 20, 0.5)}
    shares, _ = tables.neuron_shares({a.name: a}, 20)
    total = tables.specialist_totals(tables.specialist_table(shares, 0.5, {a.name: tables.token_base_rates(a)}, 20, null))
    ctl = tables.neuron_controls({a.name: a}, {}, total, 20, 0.5, seed=5)
    assert (ctl["p vs random directions"] < 0.05).any()  # the old null alone would have called it specialisation
    assert not ctl["verdict"].str.startswith("specialised").any()
    assert ctl["verdict"].str.contains("random-weight layer").all()
    from helpers.report import interpret_findings
    assert all("not shown to be word-class specialisation" in s for s in interpret_findings.control_lines(ctl))
    # the verdict: beyond every control, or it names the ones it does not beat
    ok = {"random-weight layer": (300, 1e-9), "random directions": (200, 1e-12), "untrained model": (250, 1e-10)}
    assert tables.control_verdict(500, ok).startswith("specialised beyond every control")
    assert tables.control_verdict(500, {**ok, "untrained model": (480, 0.4)}) == (
        "not shown to be word-class specialisation: not shown beyond the untrained model")
    assert "below the random-weight layer" in tables.control_verdict(100, ok)
