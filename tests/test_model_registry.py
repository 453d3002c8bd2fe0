"""The registry of causal LMs (helpers.models.registry): GPT-Neo and the compressor are listed, counted, built, saved
and loaded alike, and the same generation and scoring calls serve both (tiny random models, CPU)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.data import tokenizers
from helpers.evaluation import zero_shot
from helpers.evaluation.lm_scoring import causal_scores
from helpers.generation import completions as G, decoding as D
from helpers.models import compressor as C, decoder, registry

pytestmark = pytest.mark.usefixtures("one_thread")

SPECS = {"gpt-neo": dict(hidden=32, layers=2, heads=4, context=64, window=16, dropout=0.0),
         "compressor": dict(hidden=32, layers=2, heads=4, context=64, dropout=0.0)}


@pytest.fixture(scope="module")
def models(decoder_tokenizer):
    eot = tokenizers.end_of_text_id(decoder_tokenizer)
    ids = dict(bos_token_id=eot, eos_token_id=eot, pad_token_id=eot)
    return {name: registry.build_model(name, {**spec, "vocab_size": len(decoder_tokenizer)}, seed=1, **ids).eval()
            for name, spec in SPECS.items()}


@pytest.fixture(scope="module")
def saved(models, decoder_tokenizer, tmp_path_factory):
    root = tmp_path_factory.mktemp("registry")
    out = {}
    for name, model in models.items():
        folder = root / name / "best"
        model.save_pretrained(folder)
        decoder_tokenizer.save_pretrained(folder)
        out[name] = folder
    return out


def test_the_registry_lists_gpt_neo_and_the_compressor(models):
    assert registry.model_names() == ["gpt-neo", "compressor"]
    for name, model in models.items():
        entry = registry.model_entry(name)
        assert isinstance(model, entry.model_class) and registry.entry_of(model) is entry
        assert registry.entry_of(model.config) is entry and entry.model_type == model.config.model_type
    assert registry.own_generate(models["gpt-neo"]) is None  # the shared KV-cache loop
    assert registry.own_generate(models["compressor"]) is C.generate_batch
    assert registry.min_tokens(models["gpt-neo"]) == 1 and registry.min_tokens(models["compressor"]) == 2
    assert registry.entry_of(torch.nn.Linear(2, 2)) is None and registry.min_tokens(torch.nn.Linear(2, 2)) == 1
    with pytest.raises(ValueError, match="unknown model 'gpt2'"):
        registry.model_entry("gpt2")


@pytest.mark.parametrize("name", ["gpt-neo", "compressor"])
def test_parameter_count_on_the_meta_device_is_the_built_models(name):
    spec = {**SPECS[name], "vocab_size": 101}
    model = registry.build_model(name, spec, seed=0)
    assert registry.parameter_count(name, spec) == decoder.count_parameters(model)
    assert registry.parameter_count(name, spec, non_embedding=True) == decoder.count_parameters(model, non_embedding=True)


def test_the_paper_decoder_is_counted_without_building_it():
    assert registry.parameter_count("gpt-neo", decoder.PRESETS["berttime-paper"]) == 41_319_936


def test_saved_folders_load_by_their_config(models, saved, tmp_path):
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    for name, folder in saved.items():
        assert registry.saved_entry(folder) is registry.model_entry(name)
        loaded = registry.load_saved(folder)
        assert type(loaded) is type(models[name])
        with torch.no_grad():
            assert torch.allclose(loaded.eval()(input_ids=ids).logits, models[name](input_ids=ids).logits, atol=1e-5)
    assert isinstance(registry.load_saved(saved["gpt-neo"]).transformer.h[0].attn.attention,
                      decoder.FastGPTNeoSelfAttention)  # GPT-Neo's loader: the fast path, as load_decoder
    with pytest.raises(FileNotFoundError):  # a folder not made yet: the GPT-Neo loader says so, as before
        registry.load_saved(tmp_path / "missing" / "best")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ValueError, match="holds a 'bert' model"):
        registry.saved_entry(tmp_path / "other")


def test_one_generate_call_serves_both(models):
    prompts = [[5, 6, 7], [8, 9], [10, 11, 12, 13], [14]]
    greedy, nucleus = D.Decoding("greedy"), D.Decoding("nucleus", k=2, top_p=0.9)
    eot = models["gpt-neo"].config.eos_token_id
    for name, model in models.items():
        out = G.generate(model, prompts, greedy, eot, max_new_tokens=9, batch_size=3)
        assert [len(o) for o in out] == [1] * 4 and all(len(o[0]) <= 9 for o in out)
        sampled = G.generate(model, prompts, nucleus, eot, max_new_tokens=9, batch_size=4, seed=3)
        assert [len(o) for o in sampled] == [2] * 4
        assert sampled == G.generate(model, prompts, nucleus, eot, max_new_tokens=9, batch_size=4, seed=3)
        assert sampled != G.generate(model, prompts, nucleus, eot, max_new_tokens=9, batch_size=4, seed=4)
    # the compressor's rows are its own pair loop's, prompt by prompt (greedy: batching changes nothing)
    comp = models["compressor"]
    out = G.generate(comp, prompts, greedy, eot, max_new_tokens=9, batch_size=3)
    for p, o in zip(prompts, out):
        ref = C.generate_pairs(comp, [eot, *p], 9, eos_token_id=eot)[0, len(p) + 1:].tolist()
        assert o[0] == (ref[: ref.index(eot)] if eot in ref else ref)


def test_a_compressor_ends_rows_at_end_of_text():
    comp = C.build_compressor(dict(vocab_size=8, hidden=16, layers=1, heads=2, context=32, dropout=0.0), seed=0,
                              bos_token_id=0, eos_token_id=0, pad_token_id=0).eval()
    with torch.no_grad():  # constant hidden states, a head that sees only token 3: every position prefers it ...
        for ln in (comp.ln_f, comp.ln_second):
            ln.weight.zero_()
            ln.bias.fill_(1.0)
        comp.lm_head.weight.zero_()
        comp.lm_head.weight[3] = 1.0
    rows = C.generate_batch(comp, [[1, 2], [1, 2, 4]], D.Decoding("greedy"), 3, 6, None)
    assert rows == [[], []]  # ... which is end-of-text here: empty completions
    assert C.generate_batch(comp, [[1, 2]], D.Decoding("greedy"), 3, 6, None, keep_eot=True) == [[3]]
    assert C.generate_batch(comp, [[1, 2]], D.Decoding("greedy"), 7, 5, None) == [[3] * 5]  # no end: the cap


def test_one_score_call_serves_both(models, decoder_tokenizer):
    tok = decoder_tokenizer
    eot = tokenizers.end_of_text_id(tok)
    reqs = [(None, "The cat sat on the mat."), ("Once upon a time", "there was a dog."), (None, "a")]
    for name, model in models.items():
        sums, counts = causal_scores(model, tok, reqs, batch_size=2)
        for (ctx, text), s, n in zip(reqs, sums, counts):  # each against one unpadded forward
            c_ids = tok(ctx, add_special_tokens=False)["input_ids"] if ctx else []
            whole = tok((ctx or "") + " " + text, add_special_tokens=False)["input_ids"]
            t_ids = whole[len(c_ids):]
            full = [eot] + c_ids + t_ids
            inputs = torch.tensor([full[:-1]])
            if inputs.shape[1] < registry.min_tokens(model):  # the compressor reads at least a pair: pad after
                inputs = torch.tensor([full[:-1] + [eot]])
            with torch.no_grad():
                logp = torch.log_softmax(model(input_ids=inputs).logits[0].float(), -1)
            start = len(full) - len(t_ids)
            expected = sum(float(logp[j - 1, full[j]]) for j in range(start, len(full)))
            assert n == len(t_ids) and s == pytest.approx(expected, abs=1e-4), name


def test_cached_completions_and_zero_shot_load_either(saved, tmp_path, real_stories):
    prompts = G.make_prompts(real_stories, n=3, seed=0, max_words=100)
    for name, folder in saved.items():
        rows = G.cached_completions(tmp_path / f"{name}.jsonl", folder, prompts, D.Decoding("greedy"), model_name=name,
                                    max_new_tokens=8, progress=False, log=lambda *_: None, device="cpu")
        assert len(rows) == 3 and all(r["model"] == name and "ended" in r for r in rows)
        res = zero_shot.evaluate_saved(folder, "causal", tasks=("blimp",), limit_per_task=1, seed=0, progress=False,
                                       device="cpu")
        assert res.rows and np.isfinite(float(res.overall["BLiMP"].iloc[0]))


def test_a_trained_compressor_is_loaded_and_generated_from_like_a_decoder(decoder_tokenizer, real_stories, tmp_path):
    from helpers.data.blocks import PackedBlocks, pack_blocks
    from helpers.training.compressor import train_compressor
    from helpers.training.loop import TrainConfig

    blocks = pack_blocks(tokenizers.encode_stories(decoder_tokenizer, real_stories[:40]), 32)
    train, valid = PackedBlocks(blocks[:-4], seed=0), PackedBlocks(blocks[-4:], seed=0)
    cfg = TrainConfig(steps=2, batch_size=4, eval_every=2, save_every=2, warmup=0, device="cpu")
    spec = {**SPECS["compressor"], "context": 32, "vocab_size": len(decoder_tokenizer)}
    res = train_compressor("c", train, valid, decoder_tokenizer, spec, cfg, tmp_path / "c", progress=False,
                           log=lambda *_: None)
    assert res.steps == 2
    model = registry.load_saved(tmp_path / "c" / "best")
    assert isinstance(model, C.CompressorForCausalLM)
    short = ["Once upon a time there was a cat. The cat liked milk and naps in the sun.",
             "Tom had a red ball. He played with it in the park with his friend Sue."]
    texts = G.complete_prompts(model, decoder_tokenizer, G.make_prompts(short, n=2, min_words=5, max_words=40, seed=0),
                               D.Decoding("greedy"), max_new_tokens=4)
    assert len(texts) == 2 and all(len(t) == 1 for t in texts)
