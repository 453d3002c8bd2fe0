"""GPT-Neo decoders: the fast attention path computes exactly HF's eager GPT-Neo, checkpoints stay HF's format,
the paper's configuration has the paper's size, regularisation follows the paper's budgets.

Every model here is tiny (hidden ≤ 64, sequences ≤ 64) and sequences are longer than the local window, so local
layers really see fewer keys than global ones (checked, not assumed: see ``test_window_matters``)."""
from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
import transformers
from transformers import AutoModelForCausalLM, GPTNeoForCausalLM
from transformers.models.gpt_neo import modeling_gpt_neo as neo

from helpers.models.decoder import (
    cache_kwarg,
    PRESETS,
    DecoderSpec,
    FastDropout,
    FastGELUNew,
    FastGPTNeoSelfAttention,
    build_decoder,
    dropout_mask,
    fast_dropout,
    count_parameters,
    disable_fast_attention,
    enable_fast_attention,
    flops_per_token,
    gpt_neo_config,
    load_decoder,
    regularisation_for_budget,
    spec_of,
)

transformers.logging.set_verbosity_error()

VOCAB, WINDOW, SEQ = 101, 8, 40
SPEC = dict(hidden=32, layers=3, heads=4, context=64, window=WINDOW, vocab_size=VOCAB, dropout=0.0)
TOKEN_IDS = dict(bos_token_id=0, eos_token_id=0, pad_token_id=0)
RTOL = 1e-4


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def _pair(spec=None, init_std=0.2, seed=0):
    """(eager, fast) models with identical weights. A large init std makes attention peaked, so a wrong mask,
    scale or window changes the logits by far more than the tolerance (see test_tolerance_is_meaningful)."""
    cfg = gpt_neo_config(spec or SPEC, **TOKEN_IDS)
    cfg.initializer_range = init_std
    eager = build_decoder(cfg, fast=False, seed=seed).eval()
    fast = enable_fast_attention(copy.deepcopy(eager)).eval()
    return eager, fast


def _ids(batch=3, seq=SEQ, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, VOCAB, (batch, seq), generator=g)


def _assert_rel_close(a: torch.Tensor, b: torch.Tensor, rtol: float = RTOL):
    assert a.shape == b.shape
    assert torch.isfinite(a).all() and torch.isfinite(b).all()
    err = (a - b).abs().max().item()
    scale = a.abs().max().item()
    assert err <= rtol * scale, f"max |diff| {err:.3g} > {rtol} × max |logit| {scale:.3g}"


# ----------------------------------------------------------------------------- the fast path is HF's function


def test_fast_path_is_installed_and_removable():
    eager, fast = _pair()
    attn = [m for m in fast.modules() if isinstance(m, neo.GPTNeoSelfAttention)]
    assert len(attn) == SPEC["layers"] and all(type(m) is FastGPTNeoSelfAttention for m in attn)
    assert [m.attention_type for m in attn] == ["global", "local", "global"]
    assert not any(isinstance(m, FastGPTNeoSelfAttention) for m in eager.modules())
    enable_fast_attention(fast)  # idempotent
    disable_fast_attention(fast)
    assert not any(isinstance(m, FastGPTNeoSelfAttention) for m in fast.modules())
    assert type(fast.transformer) is neo.GPTNeoModel
    with pytest.raises(TypeError, match="no GPT-Neo attention"):
        enable_fast_attention(torch.nn.Linear(2, 2))


def test_window_matters():
    """The sequence is longer than the window, so making local layers global must change the logits a lot:
    otherwise the comparisons below could not tell local from global attention."""
    ids = _ids()
    eager, _ = _pair()
    wide = gpt_neo_config({**SPEC, "window": 64}, **TOKEN_IDS)
    wide.initializer_range = 0.2
    wide_model = GPTNeoForCausalLM(wide).eval()
    wide_model.load_state_dict(eager.state_dict())
    with torch.no_grad():
        a, b = eager(ids).logits, wide_model(ids).logits
    assert torch.allclose(a[:, :WINDOW], b[:, :WINDOW], rtol=1e-5, atol=1e-5)  # inside the window: the same
    assert (a[:, WINDOW:] - b[:, WINDOW:]).abs().max() > 100 * RTOL * a.abs().max()


def test_tolerance_is_meaningful():
    """GPT-Neo does not scale scores by 1/sqrt(d): a path that did would fail the tolerance by far."""
    eager, fast = _pair()
    ids = _ids()
    with torch.no_grad():
        ref = eager(ids).logits
        for m in fast.modules():
            if isinstance(m, neo.GPTNeoSelfAttention):
                m.q_proj.weight.mul_(m.head_dim ** -0.5)
        scaled = fast(ids).logits
    assert (ref - scaled).abs().max() > 100 * RTOL * ref.abs().max()


@pytest.mark.parametrize("pattern", [["global", "local"], ["local"], ["local", "global"]])
def test_logits_match_eager_without_padding(pattern):
    eager, fast = _pair({**SPEC, "attention_pattern": pattern})
    ids = _ids()
    with torch.no_grad():
        ref = eager(ids).logits
        _assert_rel_close(ref, fast(ids).logits)
        # an all-ones mask takes the mask-free route in the fast path and the masked one in eager
        _assert_rel_close(ref, fast(ids, attention_mask=torch.ones_like(ids)).logits)
        _assert_rel_close(ref, eager(ids, attention_mask=torch.ones_like(ids)).logits)


@pytest.mark.parametrize("side", ["left", "right"])
def test_logits_match_eager_with_padding(side):
    eager, fast = _pair()
    ids = _ids(batch=4)
    mask = torch.ones_like(ids)
    pads = [0, 5, 13, 27]  # some longer than the window
    for row, n in enumerate(pads):
        if n:
            if side == "left":
                mask[row, :n] = 0
            else:
                mask[row, -n:] = 0
    ids = ids.masked_fill(mask == 0, 0)
    with torch.no_grad():
        ref = eager(ids, attention_mask=mask).logits
        out = fast(ids, attention_mask=mask).logits
    keep = mask.bool()
    assert torch.isfinite(out).all()  # fully masked (padding) rows stay finite, as in eager
    _assert_rel_close(ref[keep], out[keep])
    # and padding really is honoured: the unpadded row 0 equals its unbatched logits
    with torch.no_grad():
        alone = fast(ids[:1]).logits
    _assert_rel_close(alone[0], out[0])


def test_bool_padding_mask_is_honoured():
    """The layer accepts HF's boolean 4-D masks (True = attend) as well as additive float ones."""
    eager, fast = _pair()
    attn_fast = next(m for m in fast.modules() if isinstance(m, FastGPTNeoSelfAttention) and m.attention_type == "local")
    attn_eager = eager.transformer.h[1].attn.attention
    assert attn_eager.attention_type == "local"
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 4, SEQ, 8, generator=g) * 3 for _ in range(3))
    allowed = torch.ones(2, 1, SEQ, SEQ, dtype=torch.bool)
    allowed[0, :, :, :6] = False  # left padding of 6 in row 0
    additive = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
    with torch.no_grad():
        ref, _ = attn_eager._attn(q, k, v, additive)
        out_bool, _ = attn_fast._attn(q, k, v, allowed)
        out_float, _ = attn_fast._attn(q, k, v, additive)
    _assert_rel_close(ref[0, :, 6:], out_bool[0, :, 6:])
    _assert_rel_close(ref[1], out_bool[1])
    _assert_rel_close(out_bool, out_float)


def test_gradients_match_eager():
    """Training goes through the fast path: its gradients must be eager's too (dropout off)."""
    eager, fast = _pair(init_std=0.05)
    ids = _ids()
    for m in (eager, fast):
        m.train()
        m(input_ids=ids, labels=ids).loss.backward()
    for (n, p), (_, q) in zip(eager.named_parameters(), fast.named_parameters()):
        _assert_rel_close(p.grad, q.grad, rtol=1e-4)


def test_fast_path_swaps_dropout_and_gelu_and_restores_them():
    eager, fast = _pair({**SPEC, "dropout": 0.2})
    kinds = lambda m: sorted({type(x).__name__ for x in m.modules()})  # noqa: E731
    assert "FastDropout" in kinds(fast) and "FastGELUNew" in kinds(fast)
    assert "FastDropout" not in kinds(eager) and "NewGELUActivation" in kinds(eager)
    assert all(m.p == 0.2 for m in fast.modules() if isinstance(m, FastDropout))
    disable_fast_attention(fast)
    assert kinds(fast) == kinds(eager)
    x = torch.randn(1000) * 4
    assert (FastGELUNew()(x) - neo.ACT2FN["gelu_new"](x)).abs().max() < 1e-5


@pytest.mark.parametrize("p", [0.1, 0.2, 0.5])
def test_dropout_mask_rate_and_scale(p):
    torch.manual_seed(0)
    drop, scale = dropout_mask((64, 4, 32, 32), p)
    assert drop.dtype == torch.bool and drop.shape == (64, 4, 32, 32)
    rate = drop.float().mean().item()
    assert abs(rate - p) < 4 * (p * (1 - p) / drop.numel()) ** 0.5 + 2e-5  # 4 sigma
    assert scale == pytest.approx(1 / (1 - p), rel=1e-4)
    # neighbouring elements are independent (one 64-bit draw feeds four of them)
    a, b = drop.flatten()[0::4].float(), drop.flatten()[1::4].float()
    assert abs(((a - a.mean()) * (b - b.mean())).mean().item()) < 0.01
    torch.manual_seed(0)
    assert torch.equal(drop, dropout_mask((64, 4, 32, 32), p)[0])  # seeded by torch's generator
    assert not dropout_mask((10, 10), 0.0)[0].any() and dropout_mask((10, 10), 1.0)[0].all()


def test_fast_dropout_is_inverted_dropout_with_matching_gradient():
    torch.manual_seed(0)
    x = torch.randn(200, 300, requires_grad=True)
    y = fast_dropout(x, 0.3)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.7) < 0.01
    assert torch.allclose(y[kept], x[kept] / (1 - 0.3), rtol=1e-4)
    y.sum().backward()
    assert torch.allclose(x.grad, kept.float() / (1 - 0.3), rtol=1e-4)
    assert fast_dropout(x, 0.3, training=False) is x


@pytest.fixture
def drop_nothing(monkeypatch):
    """The training path's dropout masks drop nothing (scale 1), so it must compute eager's eval-mode function."""
    import helpers.models.decoder as dec

    monkeypatch.setattr(dec, "dropout_mask", lambda shape, p, device=None: (torch.zeros(shape, dtype=torch.bool), 1.0))


@pytest.mark.parametrize("pattern", [["global", "local"], ["local"]])
def test_training_path_equals_eager_when_nothing_is_dropped(monkeypatch, drop_nothing, pattern):
    """The dropout path (blocked attention over allowed keys only) is eager GPT-Neo's function: with a mask that
    drops nothing, train-mode logits and gradients equal eager's (dropout off). Blocks of 8 query rows over a
    40-token sequence with window 8 exercise the causal and the window ranges."""
    import helpers.models.decoder as dec

    spec = {**SPEC, "dropout": 0.3, "attention_pattern": pattern}
    eager, fast = _pair(spec, init_std=0.05)
    monkeypatch.setattr(dec, "ATTENTION_CHUNK", 8)
    ids = _ids()
    eager.eval()  # eager without dropout
    fast.train()  # the fast training path, dropping nothing
    for m in (eager, fast):
        m(input_ids=ids, labels=ids).loss.backward()
    with torch.no_grad():
        _assert_rel_close(eager(ids).logits, fast.eval()(ids).logits)
    for (n, a), (_, b) in zip(eager.named_parameters(), fast.named_parameters()):
        _assert_rel_close(a.grad, b.grad, rtol=1e-4)


def test_training_path_honours_padding(monkeypatch, drop_nothing):
    import helpers.models.decoder as dec

    eager, fast = _pair({**SPEC, "dropout": 0.3})
    monkeypatch.setattr(dec, "ATTENTION_CHUNK", 16)
    ids = _ids(batch=2)
    mask = torch.ones_like(ids)
    mask[0, :5] = 0  # left padding
    with torch.no_grad():
        ref = eager.eval()(ids, attention_mask=mask).logits
        out = fast.train()(ids, attention_mask=mask).logits
    _assert_rel_close(ref[0, 5:], out[0, 5:])
    _assert_rel_close(ref[1], out[1])


def test_training_with_dropout_is_seeded_and_really_drops():
    _, fast = _pair({**SPEC, "dropout": 0.3}, init_std=0.05)
    fast.train()
    ids = _ids()
    torch.manual_seed(5)
    a = fast(ids).logits
    torch.manual_seed(5)
    b = fast(ids).logits
    c = fast(ids).logits
    assert torch.equal(a, b) and not torch.allclose(a, c)
    with torch.no_grad():
        assert not torch.allclose(a, fast.eval()(ids).logits)


def test_generate_with_cache_matches_eager():
    eager, fast = _pair()
    prompt = _ids(batch=1, seq=10)
    kw = dict(max_new_tokens=40, do_sample=False, use_cache=True, pad_token_id=0, eos_token_id=None)
    with torch.no_grad():
        a = eager.generate(prompt, **kw)
        b = fast.generate(prompt, **kw)
        c = fast.generate(prompt, **{**kw, "use_cache": False})
    assert a.shape == (1, 50)  # past the window: cached local layers must drop old keys
    assert torch.equal(a, b)
    assert torch.equal(b, c)
    assert len(set(a[0, 10:].tolist())) > 1  # not a degenerate constant continuation


def test_generate_left_padded_batch_matches_eager():
    eager, fast = _pair()
    prompts = _ids(batch=2, seq=12)
    mask = torch.ones_like(prompts)
    mask[1, :5] = 0
    prompts = prompts.masked_fill(mask == 0, 0)
    kw = dict(attention_mask=mask, max_new_tokens=20, do_sample=False, pad_token_id=0, eos_token_id=None)
    with torch.no_grad():
        assert torch.equal(eager.generate(prompts, **kw), fast.generate(prompts, **kw))


def test_incremental_logits_match_full_forward():
    eager, fast = _pair()
    ids = _ids(batch=2)
    with torch.no_grad():
        full = eager(ids).logits
        out = fast(ids[:, :30], use_cache=True)
        steps, past = [out.logits], out.past_key_values
        for t in range(30, SEQ):
            out = fast(ids[:, t : t + 1], use_cache=True, **cache_kwarg(fast, past))
            steps.append(out.logits)
            past = out.past_key_values
    _assert_rel_close(full, torch.cat(steps, dim=1))


def test_output_attentions_equal_eager():
    eager, fast = _pair()
    ids = _ids()
    mask = torch.ones_like(ids)
    mask[1, :7] = 0
    with torch.no_grad():
        for kw in ({}, {"attention_mask": mask}):
            a = eager(ids, output_attentions=True, **kw)
            b = fast(ids, output_attentions=True, **kw)
            assert len(a.attentions) == len(b.attentions) == SPEC["layers"]
            assert all(w is not None for w in b.attentions)
            for wa, wb in zip(a.attentions, b.attentions):
                assert wa.shape == wb.shape == (3, SPEC["heads"], SEQ, SEQ)
                torch.testing.assert_close(wa, wb, rtol=1e-5, atol=1e-6)
            keep = mask.bool() if kw else torch.ones_like(mask, dtype=torch.bool)
            _assert_rel_close(a.logits[keep], b.logits[keep])
    # local layers attend to at most window - 1 tokens back
    w_local = b.attentions[1][0, 0]
    assert (w_local[SEQ - 1, : SEQ - WINDOW] == 0).all() and (w_local[SEQ - 1, SEQ - WINDOW :] > 0).all()


# ----------------------------------------------------------------------------- checkpoints


def test_checkpoint_is_plain_hf(tmp_path):
    eager, fast = _pair()
    ids = _ids()
    fast.save_pretrained(tmp_path)
    assert '"GPTNeoForCausalLM"' in (tmp_path / "config.json").read_text()
    plain = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(plain) is GPTNeoForCausalLM and type(plain.transformer) is neo.GPTNeoModel
    assert not any(isinstance(m, FastGPTNeoSelfAttention) for m in plain.modules())
    reference_keys = set(GPTNeoForCausalLM(gpt_neo_config(SPEC, **TOKEN_IDS)).state_dict())
    assert set(plain.state_dict()) == set(fast.state_dict()) == set(eager.state_dict()) == reference_keys
    assert plain.lm_head.weight is plain.transformer.wte.weight  # still tied
    with torch.no_grad():
        ref = fast(ids).logits
        _assert_rel_close(ref, plain(ids).logits)
        loaded = load_decoder(tmp_path).eval()
        assert any(isinstance(m, FastGPTNeoSelfAttention) for m in loaded.modules())
        assert torch.equal(ref, loaded(ids).logits)
    for k, v in fast.state_dict().items():
        assert torch.equal(v, plain.state_dict()[k]), k
    assert spec_of(plain.config) == DecoderSpec(**{**SPEC, "intermediate": 4 * SPEC["hidden"],
                                                    "attention_pattern": ["global", "local", "global"]})


def test_fast_model_copies_and_pickles():
    """A deep copy of a fast model must run on the copy's weights (not the original's), and pickle."""
    _, fast = _pair()
    ids = _ids()
    twin = copy.deepcopy(fast)
    with torch.no_grad():
        before = fast(ids).logits
        for p in twin.transformer.h[0].parameters():
            p.mul_(3.0)
        assert not torch.allclose(twin(ids).logits, before)
        assert torch.equal(fast(ids).logits, before)
    buf = io.BytesIO()
    torch.save(fast, buf)
    buf.seek(0)
    again = torch.load(buf, weights_only=False)
    with torch.no_grad():
        assert torch.equal(again(ids).logits, before)
    pickle.dumps(fast)


# ----------------------------------------------------------------------------- configurations and sizes


def _expected_parameters(V: int, H: int, L: int, positions: int = 512) -> int:
    per_layer = (
        4 * H * H + H  # q, k, v, out_proj weights + out_proj bias
        + 2 * (H * 4 * H) + 4 * H + H  # c_fc (H→4H, bias 4H), c_proj (4H→H, bias H)
        + 4 * H  # ln_1 and ln_2, weight and bias
    )
    return V * H + positions * H + L * per_layer + 2 * H  # + ln_f; lm_head tied to wte


def test_paper_preset_has_about_41M_parameters():
    cfg = gpt_neo_config(PRESETS["berttime-paper"])
    assert (cfg.hidden_size, cfg.num_layers, cfg.num_heads, cfg.window_size, cfg.vocab_size) == (768, 4, 16, 256, 16_384)
    assert cfg.attention_layers == ["global", "local", "global", "local"]
    assert cfg.activation_function == "gelu_new" and cfg.intermediate_size == 4 * 768 and cfg.tie_word_embeddings
    with torch.device("meta"):  # shapes only: no memory, no init time
        model = GPTNeoForCausalLM(cfg)
    expected = _expected_parameters(16_384, 768, 4)
    assert count_parameters(model) == expected == 41_319_936
    assert count_parameters(model, non_embedding=True) == expected - (16_384 + 512) * 768
    assert 40e6 < expected < 42e6


@pytest.mark.parametrize("V,H,L,heads", [(101, 32, 3, 4), (257, 64, 2, 16), (50, 16, 1, 2)])
def test_parameter_formula_on_real_models(V, H, L, heads):
    model = build_decoder(dict(hidden=H, layers=L, heads=heads, context=512, window=16, vocab_size=V), seed=0)
    assert model.lm_head.weight is model.transformer.wte.weight
    assert count_parameters(model) == _expected_parameters(V, H, L)
    assert count_parameters(model) == sum(p.numel() for p in model.parameters())  # tied weight counted once
    assert count_parameters(model) < sum(v.numel() for k, v in model.state_dict().items())  # state dict repeats it


def test_flops_per_token():
    cfg = gpt_neo_config(dict(hidden=64, layers=2, heads=4, context=64, window=16, vocab_size=100))
    n_matmul = 2 * (4 * 64 * 64 + 2 * 64 * 256) + 100 * 64
    attn = 2 * (64 * 64) + 2 * (16 * 64)  # 2·2·span·H/2 per layer: global span 64, local span 16
    assert flops_per_token(cfg) == pytest.approx(6 * n_matmul + 3 * attn)
    assert flops_per_token(cfg, context=8) < flops_per_token(cfg)


@pytest.mark.parametrize(
    "words,scale,expected",
    [
        (5_000_000, 1, (0.5, 0.2)),
        (10_000_000, 1, (0.4, 0.2)),
        (25_000_000, 1, (0.25, 0.2)),
        (50_000_000, 1, (0.2, 0.1)),
        (75_000_000, 1, (0.2, 0.1)),
        (100_000_000, 1, (0.2, 0.1)),
        (440_000_000, 1, (0.2, 0.1)),
        (1_000, 1, (0.5, 0.2)),  # below the smallest budget: the smallest budget's values
        (5_000_001, 1, (0.4, 0.2)),  # between points: the next larger point
        (25_000_001, 1, (0.2, 0.1)),
        # the cpu profile's micro track: 1M words stand for 10M (scale 10)
        (1_000_000, 10, (0.4, 0.2)),
        (500_000, 10, (0.5, 0.2)),
        (2_500_000, 10, (0.25, 0.2)),
        (5_000_000, 10, (0.2, 0.1)),
        (1_000_000, 1, (0.5, 0.2)),
    ],
)
def test_regularisation_for_budget(words, scale, expected):
    assert regularisation_for_budget(words, scale=scale) == expected


@pytest.mark.parametrize("layers", [1, 3, 5])
def test_odd_layer_counts_alternate_global_local(layers):
    """Odd depths (TinyStories' 1-layer model) are valid: the pattern alternates from 'global' and HF's config
    agrees layer by layer (HF's own [[pattern, n/2]] shorthand cannot express them)."""
    spec = DecoderSpec(**{**SPEC, "layers": layers})
    cfg = gpt_neo_config(spec)
    expected = ["global" if i % 2 == 0 else "local" for i in range(layers)]
    assert spec.attention_layers == cfg.attention_layers == expected
    model = build_decoder(spec, seed=0)
    assert [blk.attn.attention_type for blk in model.transformer.h] == expected
    assert spec_of(cfg).attention_layers == expected
    with pytest.raises(Exception, match="attention_layers"):  # the shorthand's failure mode, avoided here
        transformers.GPTNeoConfig(num_layers=layers, attention_types=[[["global", "local"], layers // 2]])


@pytest.mark.parametrize(
    "bad,message",
    [
        (dict(hidden=30, heads=4), "not divisible by 4 heads"),
        (dict(layers=0), "must be positive"),
        (dict(heads=0), "must be positive"),
        (dict(window=0), "must be positive"),
        (dict(vocab_size=-1), "must be positive"),
        (dict(context=0), "must be positive"),
        (dict(attention_pattern=["global", "sparse"]), "attention_pattern"),
        (dict(attention_pattern=[]), "attention_pattern"),
    ],
)
def test_invalid_specs_raise_clear_errors(bad, message):
    with pytest.raises(ValueError, match=message):
        DecoderSpec(**{**SPEC, **bad})
    with pytest.raises(ValueError, match=message):
        gpt_neo_config({**SPEC, **bad})


def test_unknown_spec_field_is_refused():
    with pytest.raises(TypeError, match="hiden"):
        gpt_neo_config({**SPEC, "hiden": 64})


def test_config_carries_token_ids_and_dropout():
    cfg = gpt_neo_config({**SPEC, "dropout": 0.4}, bos_token_id=1, eos_token_id=1, pad_token_id=1)
    assert (cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id) == (1, 1, 1)
    assert cfg.embed_dropout == cfg.attention_dropout == cfg.resid_dropout == 0.4
    assert cfg.max_position_embeddings == SPEC["context"] and cfg.window_size == WINDOW


def test_training_path_runs_under_bf16_autocast_with_dropout():
    """The blocked dropout attention masks its scores with the score dtype's minimum (fp32's overflows bf16)."""
    from helpers.models.decoder import build_decoder
    from helpers.core.hardware import autocast_context

    spec = dict(hidden=32, layers=2, heads=4, context=64, window=16, vocab_size=97, dropout=0.1)
    model = build_decoder(spec, seed=0).train()
    ids = torch.randint(0, 97, (2, 64), generator=torch.Generator().manual_seed(0))
    with autocast_context("bf16", "cpu")():
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    loss.float().backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_context_length_reads_every_kind_of_model_description(tmp_path):
    """One home for a model's context: a model, its config, a config dict, a saved folder; None when unstated."""
    import json

    from helpers.models.decoder import build_decoder, context_length

    model = build_decoder(dict(hidden=16, layers=1, heads=2, context=48, window=16, vocab_size=50), seed=0)
    assert context_length(model) == context_length(model.config) == 48
    model.config.save_pretrained(tmp_path)
    assert context_length(tmp_path) == context_length(str(tmp_path)) == 48
    assert context_length({"n_positions": 1024}) == 1024 and context_length({"n_ctx": 0, "n_positions": 7}) == 7
    assert context_length({}) is None and context_length({"max_position_embeddings": True}) is None
    assert json.loads((tmp_path / "config.json").read_text())["max_position_embeddings"] == 48


@pytest.mark.parametrize("chunk", [7, 64, 1000])
def test_fused_lm_head_loss_equals_cross_entropy(chunk):
    """lm_head_loss = F.cross_entropy(h @ W.T, t), gradients included, whatever the chunk (fp32: to 1e-5)."""
    from helpers.models.decoder import lm_head_loss

    g = torch.Generator().manual_seed(0)
    h0, w0 = torch.randn(130, 16, generator=g), torch.randn(97, 16, generator=g) * 0.3
    t = torch.randint(0, 97, (130,), generator=g)
    out = {}
    for name, fn in [("reference", lambda h, w: torch.nn.functional.cross_entropy(h @ w.t(), t)),
                     ("fused", lambda h, w: lm_head_loss(h, w, t, chunk))]:
        h, w = h0.clone().requires_grad_(), w0.clone().requires_grad_()
        loss = fn(h, w)
        (2.5 * loss).backward()  # a non-unit upstream gradient reaches both inputs
        out[name] = (loss.detach(), h.grad, w.grad)
    for a, b in zip(out["reference"], out["fused"]):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(out["fused"][1], torch.zeros_like(h0))


def test_lm_loss_takes_the_fused_head_with_the_same_loss_and_gradients(monkeypatch):
    """training.lm_loss on a GPT-Neo (tied embeddings, fast path) equals HF's loss: fp32 loss to 1e-5 and every
    gradient to 1e-5; under bf16 autocast it stays within the shared bf16-vs-fp32 tolerances."""
    from helpers.models import decoder as D
    from helpers.training import loop as training
    from helpers.models.decoder import build_decoder
    from precision_check import assert_bf16_step_close_to_fp32

    spec = dict(hidden=32, layers=2, heads=4, context=64, window=16, vocab_size=97, dropout=0.0)
    ids = torch.randint(0, 97, (3, 64), generator=torch.Generator().manual_seed(1))
    res = {}
    for fused in (False, True):
        monkeypatch.setattr(D, "FUSED_LM_HEAD", fused)
        model = build_decoder(spec, seed=0).train()
        loss = training.lm_loss(model, {"input_ids": ids})
        loss.backward()
        res[fused] = (float(loss.detach()), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert res[True][0] == pytest.approx(res[False][0], rel=1e-5)
    assert res[True][1].keys() == res[False][1].keys()
    for n, g in res[False][1].items():
        assert torch.allclose(res[True][1][n], g, atol=1e-5), n
    monkeypatch.setattr(D, "FUSED_LM_HEAD", True)
    assert_bf16_step_close_to_fp32(lambda: build_decoder(spec, seed=0).train(),
                                   lambda m: training.lm_loss(m, {"input_ids": ids}))


def test_cache_kwarg_follows_the_forward_signature():
    from helpers.models import decoder
    class New(torch.nn.Module):
        def forward(self, input_ids, cache=None):
            return input_ids

    class Old(torch.nn.Module):
        def forward(self, input_ids, past_key_values=None):
            return input_ids

    assert decoder.cache_kwarg(New(), "kv") == {"cache": "kv"}
    assert decoder.cache_kwarg(Old(), "kv") == {"past_key_values": "kv"}


def test_generation_and_scoring_raise_no_deprecation_warning():
    """transformers 5.24 deprecates ``past_key_values`` for ``cache`` with a FutureWarning (which lands in every
    executed report): neither the fast path nor our sampler may trigger it."""
    import warnings

    from helpers.models import decoder
    from helpers.generation import completions as generation, decoding
    from helpers.evaluation import lm_scoring

    m = decoder.build_decoder(decoder.DecoderSpec(vocab_size=64, hidden=16, layers=2, heads=2, context=32, window=16),
                              seed=0).eval()

    class Tok:
        eos_token_id = bos_token_id = pad_token_id = 0

        def __call__(self, texts, add_special_tokens=False, **kw):
            one = isinstance(texts, str)
            ids = [[1 + (ord(c) % 60) for c in t] for t in ([texts] if one else texts)]
            return {"input_ids": ids[0] if one else ids}

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        out = generation.generate(m, [[5, 6, 7], [8, 9]], decoding.Decoding(method="nucleus", k=2), eot_id=0,
                                  max_new_tokens=6, batch_size=4)
        assert len(out) == 2 and len(out[0]) == 2
        sums, counts = lm_scoring.causal_scores(m, Tok(), [(None, "ab c"), ("x", "yz")])
        assert len(sums) == 2 and (counts > 0).all()


@pytest.mark.parametrize("attention_type", ["global", "local"])
@pytest.mark.parametrize("path", ["blocked", "sdpa"])
def test_attention_dropout_paths_compute_eager_attention_in_expectation(monkeypatch, attention_type, path):
    """Both training attention paths (the blocked one of a CPU, SDPA's fused dropout of a GPU: forced here on the
    CPU) drop attention weights, never attend outside the causal/window range and are unbiased: with values set to
    one-hot vectors per key, the output rows *are* the dropped attention weights, so every draw shows where weight
    went and the mean of 3,000 draws is eager's weights (a missing 1/keep scale would be off by 2×)."""
    import helpers.models.decoder as dec

    T, window, p = 16, 4, 0.5
    spec = dict(hidden=64, layers=2, heads=4, context=T, window=window, vocab_size=VOCAB, dropout=p)
    model = build_decoder(gpt_neo_config(spec, **TOKEN_IDS), seed=0)
    attn = next(m for m in model.modules() if isinstance(m, dec.FastGPTNeoSelfAttention) and m.attention_type == attention_type)
    monkeypatch.setattr(dec, "_sdpa_dropout", lambda q: path == "sdpa")
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4, T, 16, generator=g) * 0.5, torch.randn(2, 4, T, 16, generator=g) * 0.5
    v = torch.eye(T).expand(2, 4, T, T)  # output row i = attention weights of query i
    with torch.no_grad():
        attn.eval()
        ref = attn._attn(q, k, v)[0]
        allowed = attn.bias[0, 0, :T, :T]
        assert (ref.masked_select(~allowed.expand_as(ref)) == 0).all() and (ref.masked_select(allowed.expand_as(ref)) > 0).all()
        attn.train()
        draws = torch.stack([attn._attn(q, k, v)[0] for _ in range(3000)])
    assert (draws.masked_select(~allowed.expand_as(draws)) == 0).all()  # nothing outside the range, ever
    kept = (draws > 0).float().mean()  # weights are positive where allowed: the share kept is 1 - p
    assert abs(float(kept) / float((ref > 0).float().mean()) - (1 - p)) < 0.02
    err = (draws.mean(0) - ref).abs().max()
    assert err < 0.05, f"mean of the dropped weights is off eager's by {float(err):.3f}"
