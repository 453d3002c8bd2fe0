"""Prompts, the prompt/completion boundary, and the batched sampler against HF generate."""
import shutil
import unicodedata

import pytest
import torch

from helpers.models import decoder
from helpers.generation import completions as G, decoding as D
from helpers.data import tokenizers

TRICKY = [
    'Tom said, "I have 3 apples and 12 pears!" Then he ran to the café with his dog, who barked: "Woof, woof!" '
    "They counted 1, 2, 3 and laughed. The end came at 4:30, when the naïve cat said ‘bye’ — and left.",
    "Mia’s mom baked 2 cakes. “Yummy!” said Mia. She ate 1½ slices in 10 minutes and wanted more, but mom "
    "said no. Mia was sad, then happy again when Dad brought ice cream with 3 cherries on top of it.",
]


@pytest.fixture(scope="module")
def tiny_model(decoder_tokenizer):
    eot = tokenizers.end_of_text_id(decoder_tokenizer)
    spec = decoder.DecoderSpec(hidden=32, layers=2, heads=4, context=128, window=16,
                               vocab_size=len(decoder_tokenizer), dropout=0.0)
    return decoder.build_decoder(spec, seed=3, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot).eval()


def test_truncate_story_keeps_original_text():
    story = TRICKY[0]
    for frac in (0.1, 0.15, 0.3, 0.5, 0.9):
        prompt, ending, n = G.truncate_story(story, frac)
        assert n == max(1, round(frac * len(story.split())))
        assert story.startswith(prompt) and not prompt.endswith(" ")
        assert " ".join((prompt + " " + ending).split()) == " ".join(story.split())


def test_make_prompts_filters_and_is_seeded(real_stories):
    a = G.make_prompts(real_stories, n=20, seed=5)
    b = G.make_prompts(real_stories, n=20, seed=5)
    c = G.make_prompts(real_stories, n=20, seed=6)
    assert [p.prompt for p in a] == [p.prompt for p in b] != [p.prompt for p in c]
    for p in a:
        assert 20 <= p.story_words <= 512
        assert 0.15 <= p.frac <= 0.30
        assert p.n_words == max(1, round(p.frac * p.story_words))
        assert real_stories[p.story_id].startswith(p.prompt)
    with pytest.raises(ValueError, match="only"):
        G.make_prompts(real_stories[:3], n=10)
    with pytest.raises(ValueError):
        G.make_prompts(real_stories, frac=(0.5, 0.2))


@pytest.mark.parametrize("story", TRICKY)
def test_prompt_completion_boundary_is_a_token_boundary(decoder_tokenizer, story):
    """If the model produced exactly the tokens of the true ending, prompt + completion must give back the story:
    the prompt is tokenised on its own and the completion is the decoding of the generated ids alone."""
    tok = decoder_tokenizer
    prompt, ending, _ = G.truncate_story(story, 0.4)
    rest = story[len(prompt):]  # the ending with its leading whitespace
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    gen_ids = tok(rest, add_special_tokens=False)["input_ids"]
    assert tok.decode(prompt_ids) == unicodedata.normalize("NFD", prompt)
    completion = tok.decode(gen_ids, skip_special_tokens=True)
    assert unicodedata.normalize("NFC", prompt + completion) == unicodedata.normalize("NFC", story)
    # and the concatenation of ids decodes to the same text: the boundary loses nothing
    assert tok.decode(prompt_ids + gen_ids) == unicodedata.normalize("NFD", story)


def test_greedy_matches_hf_generate_with_batching_and_padding(tiny_model, decoder_tokenizer, real_stories):
    tok, m = decoder_tokenizer, tiny_model
    eot = tokenizers.end_of_text_id(tok)
    prompts = G.make_prompts(real_stories, n=7, seed=2, max_words=200)
    ids = [tok(p.prompt, add_special_tokens=False)["input_ids"] for p in prompts]
    assert len({len(x) for x in ids}) > 1, "prompts of different lengths exercise the padding"
    ours = G.generate(m, ids, D.Decoding("greedy"), eot, max_new_tokens=15, batch_size=3)
    for i, p in enumerate(ids):
        x = torch.tensor([[eot] + p])
        ref = m.generate(x, max_new_tokens=15, do_sample=False, pad_token_id=eot, eos_token_id=eot)[0, x.shape[1]:].tolist()
        ref = ref[: ref.index(eot)] if eot in ref else ref
        assert ours[i] == [ref]


def test_sampling_is_seeded_and_independent_of_nothing_else(tiny_model, decoder_tokenizer, real_stories):
    tok, m = decoder_tokenizer, tiny_model
    eot = tokenizers.end_of_text_id(tok)
    ids = [tok(p.prompt, add_special_tokens=False)["input_ids"] for p in G.make_prompts(real_stories, n=4, seed=1, max_words=200)]
    d = D.Decoding("nucleus", k=3, top_p=0.95)
    a = G.generate(m, ids, d, eot, max_new_tokens=12, batch_size=6, seed=7)
    b = G.generate(m, ids, d, eot, max_new_tokens=12, batch_size=6, seed=7)
    c = G.generate(m, ids, d, eot, max_new_tokens=12, batch_size=6, seed=8)
    assert a == b and a != c
    assert all(len(cs) == 3 for cs in a)
    assert len({tuple(x) for x in a[0]}) > 1, "k samples of one prompt should differ"


def test_nucleus_keeps_the_smallest_set_reaching_top_p():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    logits = probs.log()
    g = torch.Generator().manual_seed(0)
    d = D.Decoding("nucleus", top_p=0.7)  # 0.5 < 0.7 <= 0.8: tokens 0 and 1
    draws = torch.stack([D.sample_next(logits, d, g) for _ in range(4000)]).flatten()
    assert set(draws.tolist()) == {0, 1}
    share = (draws == 0).float().mean().item()
    assert abs(share - 0.5 / 0.8) < 0.03
    tiny = D.Decoding("nucleus", top_p=0.01)
    assert all(int(D.sample_next(logits, tiny, g)) == 0 for _ in range(50))
    full = D.Decoding("nucleus", top_p=1.0)
    draws = torch.stack([D.sample_next(logits, full, g) for _ in range(4000)]).flatten()
    assert abs((draws == 3).float().mean().item() - 0.05) < 0.015


def test_nucleus_shortlist_draws_what_sorting_every_row_draws():
    """The shortlist (``topk``) path and its fallback give the tokens of the plain rule (sort the whole row, cut
    the tokens whose more likely predecessors hold top_p, inverse CDF) for the same uniforms: peaked rows (nucleus
    inside the shortlist), flat rows (the fallback sorts them whole), and both in one batch."""
    def whole_sort(logits, d, u):
        p, idx = torch.softmax(logits / d.temperature, -1).sort(-1, descending=True)
        p = p.masked_fill(p.cumsum(-1) - p >= d.top_p, 0.0)
        cdf = p.cumsum(-1)
        return idx.gather(-1, torch.searchsorted(cdf, u * cdf[:, -1:]).clamp_(max=p.size(-1) - 1)).squeeze(-1)

    g = torch.Generator().manual_seed(3)
    vocab = 4 * D.SHORTLIST
    for scale in (0.3, 1.0, 3.0, 8.0):
        logits = torch.randn(300, vocab, generator=g) * scale
        logits[::7] *= 0.05  # some nearly flat rows in every batch
        u = torch.rand(300, 1, generator=g)
        for d in (D.Decoding("nucleus"), D.Decoding("nucleus", top_p=0.5, temperature=0.7)):
            p = torch.softmax(logits / d.temperature, -1)
            wide = p.topk(D.SHORTLIST, -1).values.sum(-1) < d.top_p
            assert torch.equal(D.sample_next(logits, d, None, u), whole_sort(logits, d, u))
            if scale == 0.3:
                assert wide.all()  # the fallback is exercised
            if scale == 8.0:
                assert not wide[1::7].any()  # and the shortlist


def test_generation_stops_at_eot_and_respects_limits(tiny_model, decoder_tokenizer):
    tok, m = decoder_tokenizer, tiny_model
    eot = tokenizers.end_of_text_id(tok)
    ids = [tok("Once upon a time", add_special_tokens=False)["input_ids"]]
    out = G.generate(m, ids, D.Decoding("nucleus", k=4), eot, max_new_tokens=9, seed=1)
    assert all(len(c) <= 9 and eot not in c for c in out[0])
    with pytest.raises(ValueError, match="context"):
        G.generate(m, [[5] * 200], D.Decoding("greedy"), eot)
    with pytest.raises(ValueError):
        D.Decoding("greedy", k=2)
    with pytest.raises(ValueError):
        D.Decoding("beam")


def test_corpus_rows_and_ledger(tmp_path, real_stories):
    from helpers.data.ledger import CorpusEntry, Ledger

    prompts = G.make_prompts(real_stories, n=3, seed=0)
    comps = [[" and then they played.", " The end."]] * 3
    d = D.Decoding("nucleus", k=2)
    rows = list(G.completion_rows(prompts, comps, "tiny-1M", d, seed=4))
    assert len(rows) == 6 and rows[0]["text"] == rows[0]["prompt"] + rows[0]["completion"]
    assert rows[1]["decoding"] == "nucleus-2" and rows[1]["settings"]["top_p"] == 0.95
    ledger = Ledger(tmp_path / "ledger.json")
    ledger.add(CorpusEntry("tiny-1M", "tiny", {"tinystories": 1000}, 0))
    G.register_generated(ledger, "gen-nucleus-2", rows, "tiny-1M", "gen.jsonl", 4)
    e = Ledger(tmp_path / "ledger.json")["gen-nucleus-2"]
    assert e.kind == "gen" and e.words_by_source["completion"] == 3 * (4 + 2)


def test_nested_decodings_share_samples():
    ds = [D.Decoding("greedy"), D.Decoding("nucleus", k=1), D.Decoding("nucleus", k=5), D.Decoding("nucleus", k=10)]
    plan = D.nested_decodings(ds)
    assert plan["greedy"] == (ds[0], 1)
    assert plan["nucleus-1"] == (ds[3], 1) and plan["nucleus-5"] == (ds[3], 5) and plan["nucleus-10"] == (ds[3], 10)

def test_nested_completions_and_generated_corpora(tmp_path, real_stories, monkeypatch):
    """D_gen: one run per distinct decoding run of the plan, each corpus keeps its first samples, is written as
    JSONL and enters the ledger with its words (a stand-in for the cached completions: no model runs)."""
    from helpers.data.corpus_files import read_corpus
    from helpers.data.ledger import CorpusEntry, Ledger

    prompts = G.make_prompts(real_stories, n=3, seed=0)
    calls = []

    def fake_completions(path, model_dir, prompts, decoding, *, model_name, **kw):
        calls.append((path.name, decoding.name, model_name, kw["seed"]))
        return list(G.completion_rows(prompts, [[" the end."] * decoding.k] * len(prompts), model_name, decoding, 5))

    monkeypatch.setattr(G, "cached_completions", fake_completions)
    plan = D.nested_decodings([D.Decoding("greedy"), D.Decoding("nucleus", k=1), D.Decoding("nucleus", k=2)])
    generated, runs = G.nested_completions(tmp_path, "tiny-1M", "dir", prompts, plan, max_new_tokens=8, batch_size=4, seed=5)
    assert calls == [("tiny-1M-greedy.jsonl", "greedy", "tiny-1M", 5), ("tiny-1M-nucleus-2.jsonl", "nucleus-2", "tiny-1M", 5)]
    assert runs["run"].tolist() == ["greedy", "nucleus-2"] and runs["completions"].tolist() == [3, 6]
    ledger = Ledger(tmp_path / "ledger.json")
    ledger.add(CorpusEntry("tiny-1M", "tiny", {"tinystories": 1000}, 0))
    table = G.write_generated_corpora(tmp_path, ledger, plan, generated, "tiny-1M", len(prompts), seed=5)
    assert table["corpus"].tolist() == ["gen-tiny-1M-greedy", "gen-tiny-1M-nucleus-1", "gen-tiny-1M-nucleus-2"]
    assert table["completions"].tolist() == [3, 3, 6] and table["mean completion words"].tolist() == [2.0] * 3
    assert len(read_corpus(tmp_path / "gen-tiny-1M-nucleus-1.jsonl")) == 3  # the first sample of each prompt
    saved = Ledger(tmp_path / "ledger.json")["gen-tiny-1M-nucleus-2"]  # the ledger was saved
    assert saved.kind == "gen" and saved.words_by_source["completion"] == 12 == table["words (completion)"].iloc[2]
    assert table["words (total)"].iloc[2] == saved.words


@pytest.mark.parametrize("method", ["greedy", "nucleus"])
def test_dropping_finished_rows_changes_no_completion(monkeypatch, method):
    """Rows that reached <|endoftext|> leave the batch (and its KV cache); the others' completions are exactly
    those of a run that keeps every row to the end. A vocabulary of 6 makes end-of-text frequent, so rows finish
    at many different steps."""
    model = decoder.build_decoder(dict(hidden=16, layers=2, heads=2, context=64, window=8, vocab_size=6, dropout=0.0),
                                  seed=3, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    prompts = [[1, 2, 3], [4, 5], [2], [3, 3, 3, 4], [5, 1]]
    dec = D.Decoding("greedy") if method == "greedy" else D.Decoding("nucleus", top_p=0.95, k=4)
    kept = G.generate(model, prompts, dec, eot_id=0, max_new_tokens=40, batch_size=32, seed=7)
    monkeypatch.setattr(G, "SHRINK_AT", 0.0)  # never drop a row
    full = G.generate(model, prompts, dec, eot_id=0, max_new_tokens=40, batch_size=32, seed=7)
    assert kept == full
    if method == "nucleus":
        lengths = {len(c) for row in full for c in row}
        assert len(lengths) > 3  # rows really finished at different steps


def test_decoding_from_name():
    assert D.decoding_from_name("greedy") == D.Decoding("greedy")
    d = D.decoding_from_name("nucleus-5", top_p=0.9, temperature=0.7)
    assert (d.method, d.k, d.top_p, d.temperature) == ("nucleus", 5, 0.9, 0.7)
    for bad in ["nucleus", "nucleus-0", "beam-3", "nucleus-x"]:
        with pytest.raises(ValueError, match="decoding name"):
            D.decoding_from_name(bad)


def test_ended_flag_tells_eot_from_the_length_cap(tiny_model, decoder_tokenizer):
    """``ended`` is True exactly when the completion stopped at <|endoftext|> (biasing the output layer's EOT
    logit up or down forces either case); the texts are those of the plain call."""
    import copy

    tok = decoder_tokenizer
    eot = tokenizers.end_of_text_id(tok)
    prompts = G.make_prompts(["Once upon a time there was a cat. The cat liked milk and naps in the sun every day."],
                             None, (0.3, 0.3), 5, 100, 0)
    for bias, want in ((100.0, True), (-100.0, False)):
        m = copy.deepcopy(tiny_model)
        head = torch.nn.Linear(m.config.hidden_size, m.config.vocab_size, bias=True)
        head.weight = m.lm_head.weight
        with torch.no_grad():
            head.bias.zero_()
            head.bias[eot] = bias
        m.lm_head = head
        texts, ended = G.complete_prompts(m, tok, prompts, D.Decoding("nucleus", k=3), max_new_tokens=12, seed=2,
                                          return_ended=True)
        assert texts == G.complete_prompts(m, tok, prompts, D.Decoding("nucleus", k=3), max_new_tokens=12, seed=2)
        assert ended == [[want] * 3]
        rows = list(G.completion_rows(prompts, texts, "m", D.Decoding("nucleus", k=3), 2, ended))
        assert [r["ended"] for r in rows] == [want] * 3


def test_completion_reads_the_cache_without_the_deprecation_warning(tiny_model, decoder_tokenizer, real_stories, monkeypatch):
    """transformers 5.24 renamed the cache to ``cache``; reading ``outputs.past_key_values`` logs a deprecation warning
    into every notebook's stderr. ``decoder.output_cache`` reads the field the installed version has."""
    from transformers.utils import generic

    said = []
    monkeypatch.setattr(generic.logger, "warning_once", lambda msg, *a, **k: said.append(msg))
    monkeypatch.setattr(generic.logger, "warning", lambda msg, *a, **k: said.append(msg))
    prompts = G.make_prompts(real_stories, n=2, seed=5)
    G.complete_prompts(tiny_model, decoder_tokenizer, prompts, D.Decoding("greedy"), max_new_tokens=6, seed=0)
    G.complete_prompts(tiny_model, decoder_tokenizer, prompts, D.Decoding("nucleus", k=2), max_new_tokens=6, seed=0)
    assert not [m for m in said if "deprecated" in str(m)], said
    out = tiny_model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True)
    assert decoder.output_cache(out) is not None
    assert not [m for m in said if "deprecated" in str(m)], said


def test_health_prompts_are_make_prompts_at_the_offset_seed():
    # notebook 03 and benchmarks/recipe.py draw the continuation-health prompts through this one helper
    train = [f"Tom had {i} red balls. He gave one to Sue. She was happy. They played all day in the sun." for i in range(30)]
    held = [f"Mia saw {i} birds in a tree. They sang a song. Mia sang too. Then the birds flew away home." for i in range(30)]
    got = G.health_prompts(train, held, 10, (0.15, 0.3), 5, 100, 42)
    assert list(got) == ["train", "held-out"]
    assert got["train"] == G.make_prompts(train, 10, (0.15, 0.3), 5, 100, 42 + G.HEALTH_SEED_OFFSET)
    assert got["held-out"] == G.make_prompts(held, 10, (0.15, 0.3), 5, 100, 42 + G.HEALTH_SEED_OFFSET)
    assert got["train"] != G.make_prompts(train, 10, (0.15, 0.3), 5, 100, 42)


def test_sampling_reads_the_plain_model_beside_a_fine_tuned_decoder(tmp_path, tiny_model, decoder_tokenizer, real_stories):
    """A decoder whose best/ was replaced by repetition fine-tuning keeps its plain model in mle-best/: greedy
    completions come from best/, nucleus samples from mle-best/ (and from best/ where there is no mle-best/)."""
    tok = decoder_tokenizer
    eot = tokenizers.end_of_text_id(tok)
    other = decoder.build_decoder(decoder.DecoderSpec(hidden=32, layers=2, heads=4, context=128, window=16,
                                                      vocab_size=len(tok), dropout=0.0),
                                  seed=9, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot).eval()
    dec = tmp_path / "decoders" / "tiny-x"
    for folder, model in (("best", tiny_model), (G.PLAIN_DIR, other)):
        model.save_pretrained(dec / folder)
        tok.save_pretrained(dec / folder)
    prompts = G.make_prompts(real_stories, n=3, seed=0)
    nucleus, greedy = D.Decoding("nucleus", k=2), D.Decoding("greedy")
    assert G.decoding_model_dir(dec / "best", nucleus) == dec / G.PLAIN_DIR
    assert G.decoding_model_dir(dec / "best", greedy) == dec / "best"
    assert G.decoding_model_dir(dec / G.PLAIN_DIR, nucleus) == dec / G.PLAIN_DIR

    logged = []

    def texts(path, model_dir, decoding, name="tiny-x"):
        rows = G.cached_completions(tmp_path / path, model_dir, prompts, decoding, model_name=name,
                                    max_new_tokens=12, progress=False, log=logged.append)
        return [r["completion"] for r in rows]

    plain_samples = texts("n_plain.jsonl", dec / G.PLAIN_DIR, nucleus)
    assert "by tiny-x (the plain model, read from mle-best/)" in logged[-1]  # the log says which model sampled
    texts("n_named.jsonl", dec / "best", nucleus, name="tiny-x (plain)")
    assert "by tiny-x (plain), read from mle-best/" in logged[-1]  # not "(plain) (…, the plain model)"
    assert texts("n.jsonl", dec / "best", nucleus) == plain_samples
    assert texts("g.jsonl", dec / "best", greedy) != texts("g_plain.jsonl", dec / G.PLAIN_DIR, greedy)
    shutil.rmtree(dec / G.PLAIN_DIR)  # no plain model kept: sampling reads best/
    assert G.decoding_model_dir(dec / "best", nucleus) == dec / "best"
    assert texts("n2.jsonl", dec / "best", nucleus) != plain_samples
