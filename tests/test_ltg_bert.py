"""LTG-BERT (Samuel et al. 2023; docs/methods.md#encoders): the published parameter count, bucket values, disentangled attention written out
by hand, padding invariance, init, save/load (our classes and a fresh process with trust_remote_code that cannot
import ``helpers``), learning, sequence classification, and LAMB against a step computed by hand."""
from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import transformers

from helpers.models.ltg_bert import (
    PRESETS,
    LtgBertForMaskedLM,
    LtgBertForSequenceClassification,
    LtgBertModel,
    count_parameters,
    expected_parameters,
    log_bucket_position,
    ltg_bert_config,
    relative_position_indices,
)
from helpers.training.optim import Lamb

transformers.logging.set_verbosity_error()

VOCAB = 120


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def _tiny(seed=0, **over):
    torch.manual_seed(seed)
    cfg = ltg_bert_config("smoke", VOCAB, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **over)
    return LtgBertForMaskedLM(cfg).eval()


def _ids(b=3, t=24, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(6, VOCAB, (b, t), generator=g)
    ids[:, 0], ids[:, -1] = 1, 2
    return ids


# ----------------------------------------------------------------------------- size


def spec_parameter_count(V, H, I, L, bucket=32):
    """Derived from the specification, term by term."""
    word = V * H  # word embedding (its LayerNorm has no affine)
    rel = (2 * bucket - 1) * H + 2 * H  # 63-row position table + its affine LayerNorm
    attn = (H * 2 * H + 2 * H) + (H * H + H) + (H * H + H) + 2 * H  # qk, v, out (with biases) + affine post-LN
    ffn = H * 2 * I + I * H  # GEGLU in (no bias) + out (no bias); both LayerNorms without affine
    head = (H * H + H) + V  # dense + decoder bias; decoder weight = word embedding
    return word + rel + L * (attn + ffn) + head


def test_base_parameter_count_matches_the_specification():
    with torch.device("meta"):
        model = LtgBertForMaskedLM(ltg_bert_config("base", 16_384))
    n = count_parameters(model)
    assert n == spec_parameter_count(16_384, 768, 2048, 12) == 98_229_760
    assert 97e6 < n < 99e6  # "~98M"
    assert n == expected_parameters(model.config)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_matches_the_formula(preset):
    with torch.device("meta"):
        model = LtgBertForMaskedLM(ltg_bert_config(preset, 16_384))
    p = PRESETS[preset]
    assert count_parameters(model) == spec_parameter_count(16_384, p["hidden_size"], p["intermediate_size"],
                                                           p["num_hidden_layers"])


def test_config_helper():
    cfg = ltg_bert_config({"preset": "cpu", "layers": 2, "dropout": 0.3}, vocab_size=6144)
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size) == (128, 2, 6144)
    assert cfg.hidden_dropout_prob == cfg.attention_probs_dropout_prob == 0.3
    assert cfg.model_type == "ltgbert"
    assert ltg_bert_config(cfg, num_hidden_layers=3).num_hidden_layers == 3
    with pytest.raises(ValueError):
        ltg_bert_config("huge", 100)
    with pytest.raises(ValueError):
        ltg_bert_config("smoke", 100, num_attention_heads=5)


# ----------------------------------------------------------------------------- relative positions


def test_bucket_values_by_hand():
    # exact for |r| <= 16; beyond: 16 + ceil(15 * ln(min(|r|,511)/16) / ln(511/16)), ln(511/16) = 3.46378
    #  17: 15*ln(1.0625)/3.46378 = 0.2625 -> 1 -> 17;  100: 15*ln(6.25)/3.46378 = 7.936 -> 8 -> 24
    #  511: 15*1 -> 15 -> 31;  1000 -> clipped to 511 -> 31
    hand = {0: 0, 1: 1, 15: 15, 16: 16, 17: 17, 100: 24, 511: 31, 1000: 31}
    for d, b in hand.items():
        assert int(log_bucket_position(torch.tensor(d))) == b, d
        assert int(log_bucket_position(torch.tensor(-d))) == -b, -d


def test_bucket_table():
    idx = relative_position_indices(600)
    assert idx.min() == 0 and idx.max() == 62  # 2*32-1 rows
    assert idx[40, 40] == 31 and idx[40, 41] == 30 and idx[41, 40] == 32  # row = bucket(i - j) + 31
    diffs = torch.arange(-599, 600)
    b = log_bucket_position(diffs)
    assert (b[1:] >= b[:-1]).all()  # monotone
    assert len(torch.unique(b)) == 63


def test_attention_is_the_disentangled_formula():
    """Attention probabilities against c2c + c2p + p2c computed entry by entry."""
    model = _tiny()
    ids = _ids(2, 20)
    out = model.ltg_bert(ids, output_attentions=True, output_hidden_states=True)
    cfg = model.config
    att = model.ltg_bert.layers[0].attention
    x = att.pre_layer_norm(out.hidden_states[0])
    nh, d = cfg.num_attention_heads, cfg.hidden_size // cfg.num_attention_heads
    q, k = att.in_proj_qk(x).chunk(2, -1)
    rel = model.ltg_bert.embedding.relative_layer_norm(model.ltg_bert.embedding.relative_embedding)
    qp, kp = att.in_proj_qk(rel).chunk(2, -1)  # the same projection for the position table
    T = ids.shape[1]
    scores = torch.empty(2, nh, T, T)
    for b in range(2):
        for h in range(nh):
            s = slice(h * d, (h + 1) * d)
            for i in range(T):
                for j in range(T):
                    r = int(log_bucket_position(torch.tensor(i - j))) + 31
                    c2c = q[b, i, s] @ k[b, j, s]
                    c2p = q[b, i, s] @ kp[r, s]
                    p2c = k[b, j, s] @ qp[r, s]
                    scores[b, h, i, j] = (c2c + c2p + p2c) / math.sqrt(3 * d)
    torch.testing.assert_close(out.attentions[0], scores.softmax(-1), rtol=1e-4, atol=1e-6)
    assert len(out.hidden_states) == cfg.num_hidden_layers + 1 and len(out.attentions) == cfg.num_hidden_layers


def test_padding_changes_nothing_at_real_positions():
    model = _tiny()
    ids = _ids(3, 24)
    full = model(ids).logits
    padded = torch.full((3, 40), 3)
    mask = torch.zeros(3, 40, dtype=torch.long)
    lengths = [24, 17, 9]
    for r, n in enumerate(lengths):
        padded[r, :n] = ids[r, :n]
        mask[r, :n] = 1
    out = model(padded, attention_mask=mask).logits
    for r, n in enumerate(lengths):
        ref = model(ids[r : r + 1, :n]).logits[0]
        torch.testing.assert_close(out[r, :n], ref, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out[0, :24], full[0], rtol=1e-4, atol=1e-5)
    # and the mask matters: without it the padded rows change
    assert not torch.allclose(model(padded).logits[1, :17], out[1, :17], atol=1e-3)


@pytest.mark.parametrize("t", [5, 15, 16, 17, 40])  # softmax below / from 16 keys; exact and log-bucketed distances
def test_inference_path_equals_training_path(t):
    """Eval mode (the attention's inference path, the in-place GEGLU) against train mode with dropout 0 (the
    training path), padded and unpadded, with and without gradients."""
    from helpers.models.ltg_bert import InferencePositions

    model = _tiny(seed=3)
    g = torch.Generator().manual_seed(t)
    ids = torch.randint(6, VOCAB, (3, t), generator=g)
    mask = torch.ones(3, t, dtype=torch.long)
    mask[1, t - t // 3:] = 0
    mask[2, 2:] = 0
    seen = []
    for layer in model.ltg_bert.layers:
        layer.attention.register_forward_pre_hook(lambda m, args: seen.append(type(args[3])))
    model.train()
    train = model(ids, attention_mask=mask).logits
    assert seen and InferencePositions not in seen
    model.eval()
    seen.clear()
    with torch.no_grad():
        infer = model(ids, attention_mask=mask).logits
    assert seen == [InferencePositions] * model.config.num_hidden_layers
    real = mask.bool()
    torch.testing.assert_close(infer[real], train[real], rtol=1e-5, atol=1e-5)
    eval_grad = model(ids, attention_mask=mask).logits  # eval with autograd: attention inference path, plain GEGLU
    torch.testing.assert_close(eval_grad[real], train[real], rtol=1e-5, atol=1e-5)
    eval_grad[real].sum().backward()  # the inference path is differentiable (no in-place op on a saved tensor)
    assert model.ltg_bert.layers[0].attention.in_proj_qk.weight.grad.abs().sum() > 0


def test_inference_positions_and_geglu():
    from helpers.models.ltg_bert import _geglu_inplace, inference_position_indices

    for t in (1, 2, 17, 18, 100, 600):
        idx = relative_position_indices(t)
        lo, hi, c2p, p2c = inference_position_indices(t)
        assert (lo, hi) == (int(idx.min()), int(idx.max()) + 1)
        r = hi - lo
        i, j = torch.arange(t).repeat_interleave(t), torch.arange(t).repeat(t)
        assert torch.equal(c2p, i * r + idx.reshape(-1) - lo) and torch.equal(p2c, j * r + idx.reshape(-1) - lo)
    assert inference_position_indices(15)[:2] == (31 - 14, 31 + 15)  # 29 of the 63 rows
    x = torch.randn(64, 2 * 50) * 4
    h, gate = x.chunk(2, dim=-1)
    torch.testing.assert_close(_geglu_inplace(h, gate), h * torch.nn.functional.gelu(gate, approximate="tanh"),
                               rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- structure and init


def test_layer_norms_biases_and_tying():
    model = LtgBertForMaskedLM(ltg_bert_config("smoke", VOCAB))
    e = model.ltg_bert.embedding
    layer = model.ltg_bert.layers[0]
    affine = lambda ln: ln.weight is not None  # noqa: E731
    assert not affine(e.word_layer_norm) and affine(e.relative_layer_norm)
    assert not affine(layer.attention.pre_layer_norm) and affine(layer.attention.post_layer_norm)
    assert not affine(layer.mlp.pre_layer_norm) and not affine(layer.mlp.mid_layer_norm)
    assert not affine(model.head.pre_layer_norm) and not affine(model.head.post_layer_norm)
    assert layer.mlp.up.bias is None and layer.mlp.down.bias is None
    assert layer.mlp.up.out_features == 2 * model.config.intermediate_size
    assert layer.attention.in_proj_qk.bias is not None
    assert e.relative_embedding.shape == (63, model.config.hidden_size)
    assert model.head.decoder.weight is e.word_embedding.weight
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    assert torch.all(model.head.decoder.bias == 0)
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in list(model.ltg_bert.children())[-1:])  # no final LN


def test_init_is_truncated_normal_with_layer_scaled_ffn():
    torch.manual_seed(0)
    model = LtgBertForMaskedLM(ltg_bert_config({"preset": "cpu", "layers": 3}, 2000))
    std = math.sqrt(2 / (5 * 128))
    trunc_sd = 0.8796  # sd of a standard normal truncated at ±2
    w = model.ltg_bert.embedding.word_embedding.weight
    assert w.abs().max() <= 2 * std + 1e-7 and abs(w.std().item() / std - trunc_sd) < 0.02
    for i, layer in enumerate(model.ltg_bert.layers):
        s = std * math.sqrt(1 / (2 * (i + 1)))
        for lin in (layer.mlp.up, layer.mlp.down):
            assert lin.weight.abs().max() <= 2 * s + 1e-7
            assert abs(lin.weight.std().item() / s - trunc_sd) < 0.03
        q = layer.attention.in_proj_qk
        assert abs(q.weight.std().item() / std - trunc_sd) < 0.03 and torch.all(q.bias == 0)


# ----------------------------------------------------------------------------- save / load


def test_save_load_round_trip(tmp_path):
    model = _tiny()
    ids = _ids()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "modeling_ltgbert.py").is_file()
    loaded = LtgBertForMaskedLM.from_pretrained(tmp_path).eval()
    assert torch.equal(model(ids).logits, loaded(ids).logits)
    assert loaded.head.decoder.weight is loaded.ltg_bert.embedding.word_embedding.weight
    auto = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path)  # registered: no remote code needed here
    assert isinstance(auto, LtgBertForMaskedLM)
    cls = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path, num_labels=3)
    assert isinstance(cls, LtgBertForSequenceClassification)
    torch.testing.assert_close(cls.ltg_bert.embedding.word_embedding.weight, model.ltg_bert.embedding.word_embedding.weight)


FRESH = textwrap.dedent(
    """
    import sys, importlib.abc
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "helpers" or name.startswith("helpers."):
                raise ImportError("helpers must not be imported: " + name)
    sys.meta_path.insert(0, Block())
    import torch, transformers
    transformers.logging.set_verbosity_error()
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoModelForSequenceClassification
    folder = sys.argv[1]
    cfg = AutoConfig.from_pretrained(folder, trust_remote_code=True)
    m = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True).eval()
    ids = torch.load(folder + "/ids.pt")
    torch.save(m(ids).logits, folder + "/fresh_logits.pt")
    c = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True, num_labels=2)
    out = c(ids, labels=torch.tensor([0, 1, 1]))
    out.loss.backward()
    assert c.classifier.decoder.weight.grad is not None
    assert type(m).__module__.startswith("transformers_modules"), type(m).__module__
    assert m.head.decoder.weight is m.ltg_bert.embedding.word_embedding.weight
    assert "helpers" not in sys.modules and not any(k.startswith("helpers.") for k in sys.modules)
    print("OK", cfg.model_type, type(m).__name__)
    """
)


def test_fresh_process_loads_with_trust_remote_code(tmp_path):
    model = _tiny()
    ids = _ids()
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    torch.save(ids, folder / "ids.pt")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1",
           "HF_HOME": str(tmp_path / "hf"), "HF_MODULES_CACHE": str(tmp_path / "hf_modules"),
           "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    res = subprocess.run([sys.executable, "-I", "-c", FRESH, str(folder)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "OK ltgbert LtgBertForMaskedLM" in res.stdout
    assert torch.equal(torch.load(folder / "fresh_logits.pt"), model(ids).logits)


# ----------------------------------------------------------------------------- learning and tasks


def test_tiny_model_overfits_one_batch():
    from helpers.data.masking import MaskedBlocks, TokenIds, mlm_loss

    torch.manual_seed(0)
    V = 64
    model = LtgBertForMaskedLM(ltg_bert_config("smoke", V, hidden_dropout_prob=0.0,
                                               attention_probs_dropout_prob=0.0))
    tok = TokenIds(vocab_size=V, mask_id=4, cls_id=1, sep_id=2, pad_id=3, special_ids=(0, 1, 2, 3, 4, 5))
    g = torch.Generator().manual_seed(0)
    blocks = torch.cat([torch.ones(8, 1, dtype=torch.long), torch.randint(6, V, (8, 30), generator=g),
                        torch.full((8, 1), 2)], 1)
    batch = MaskedBlocks(blocks, tok, seed=0).batch(0, 8)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    losses = []
    for _ in range(100):
        loss = mlm_loss(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 3.5  # ~ln(64) = 4.16
    assert losses[-1] < 0.3 * losses[0], losses[::10]


def test_sequence_classification_forward_backward():
    torch.manual_seed(0)
    cfg = ltg_bert_config("smoke", VOCAB, num_labels=3)
    model = LtgBertForSequenceClassification(cfg)
    ids = _ids(4, 16)
    mask = torch.ones_like(ids)
    mask[1, 10:] = 0
    out = model(ids, attention_mask=mask, labels=torch.tensor([0, 2, 1, 0]))
    assert out.logits.shape == (4, 3) and out.loss.ndim == 0
    out.loss.backward()
    assert model.classifier.decoder.weight.grad.abs().sum() > 0
    assert model.ltg_bert.embedding.word_embedding.weight.grad.abs().sum() > 0
    reg = LtgBertForSequenceClassification(ltg_bert_config("smoke", VOCAB, num_labels=1))
    r = reg(ids, labels=torch.tensor([0.5, 1.0, -1.0, 2.0]))
    assert r.logits.shape == (4, 1)
    torch.testing.assert_close(r.loss, torch.nn.functional.mse_loss(r.logits.squeeze(-1), torch.tensor([0.5, 1.0, -1.0, 2.0])))
    base = LtgBertModel(cfg)(ids, return_dict=False)
    assert base[0].shape == (4, 16, cfg.hidden_size)


def test_masked_only_head_gives_the_same_loss():
    model = _tiny()
    ids = _ids()
    labels = torch.full_like(ids, -100)
    labels[:, 3:7] = ids[:, 3:7]
    a = model(ids, labels=labels)
    b = model(ids, labels=labels, masked_only=True)
    torch.testing.assert_close(a.loss, b.loss)
    assert b.logits.shape == (12, VOCAB)
    torch.testing.assert_close(b.logits, a.logits[labels != -100])


def test_bf16_autocast_step_is_close_to_fp32():
    """The cpu profile trains encoders under bf16 autocast where the CPU has native bf16 (``precision: auto``): one
    MLM step's loss within 2 % and every weight matrix's gradient at cosine > 0.98 of the fp32 step."""
    from precision_check import assert_bf16_step_close_to_fp32

    ids = _ids(b=4, t=32)
    labels = torch.full_like(ids, -100)
    labels[:, 5:12] = ids[:, 5:12]
    assert_bf16_step_close_to_fp32(lambda: _tiny(0).train(),
                                   lambda m: m(ids, labels=labels, masked_only=True).loss)


# ----------------------------------------------------------------------------- LAMB


def test_lamb_single_step_by_hand():
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.98, 1e-6, 0.1
    w = torch.nn.Parameter(torch.tensor([3.0, 4.0], dtype=torch.float64))
    bias = torch.nn.Parameter(torch.tensor([3.0, 4.0], dtype=torch.float64))
    opt = Lamb([{"params": [w], "weight_decay": wd}, {"params": [bias], "weight_decay": 0.0}],
               lr=lr, betas=(b1, b2), eps=eps)
    g = [0.5, -1.0]
    w.grad = torch.tensor(g, dtype=torch.float64)
    bias.grad = torch.tensor(g, dtype=torch.float64)
    opt.step()
    # step 1: m̂ = g, v̂ = g², Adam direction u = g / (|g| + eps)
    u = [0.5 / (0.5 + eps), -1.0 / (1.0 + eps)]
    # decay group: u + wd·w = [1.3, -0.6] (approximately), trust ratio ‖w‖/‖u‖ = 5 / sqrt(2.05)
    ud = [u[0] + wd * 3.0, u[1] + wd * 4.0]
    ratio = 5.0 / math.sqrt(ud[0] ** 2 + ud[1] ** 2)
    assert abs(ratio - 3.49215) < 1e-4
    expect_w = [3.0 - lr * ratio * ud[0], 4.0 - lr * ratio * ud[1]]
    expect_b = [3.0 - lr * u[0], 4.0 - lr * u[1]]  # no-decay group: plain Adam step, no trust ratio
    torch.testing.assert_close(w.data, torch.tensor(expect_w, dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(bias.data, torch.tensor(expect_b, dtype=torch.float64), rtol=0, atol=1e-12)
    assert abs(w[0].item() - 2.954602) < 1e-5 and abs(w[1].item() - 4.020953) < 1e-5

    # step 2 with another gradient: bias correction by hand
    g2 = [0.1, 0.2]
    w.grad = torch.tensor(g2, dtype=torch.float64)
    opt.step()
    m = [(b1 * (1 - b1) * g[i] + (1 - b1) * g2[i]) / (1 - b1 ** 2) for i in range(2)]
    v = [(b2 * (1 - b2) * g[i] ** 2 + (1 - b2) * g2[i] ** 2) / (1 - b2 ** 2) for i in range(2)]
    u2 = [m[i] / (math.sqrt(v[i]) + eps) + wd * expect_w[i] for i in range(2)]
    r2 = math.hypot(*expect_w) / math.hypot(*u2)
    torch.testing.assert_close(w.data, torch.tensor([expect_w[i] - lr * r2 * u2[i] for i in range(2)],
                                                    dtype=torch.float64), rtol=0, atol=1e-12)


def test_lamb_zero_norms_and_training_hook():
    z = torch.nn.Parameter(torch.zeros(3))
    opt = Lamb([{"params": [z], "weight_decay": 0.1}], lr=0.1)
    z.grad = torch.tensor([1.0, -1.0, 0.0])
    opt.step()  # ‖w‖ = 0: ratio 1, no NaN
    assert torch.isfinite(z).all() and abs(z[0].item() + 0.1) < 1e-5
    from helpers.training.loop import TrainConfig
    from helpers.training.optim import make_optimizer

    model = _tiny()
    opt = make_optimizer(model, TrainConfig(optimizer="lamb", lr=1e-2, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.1))
    assert isinstance(opt, Lamb)
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(names[id(p)].endswith("weight") and "layer_norm" not in names[id(p)] for p in decay["params"])
    assert "ltg_bert.embedding.word_embedding.weight" in {names[id(p)] for p in no_decay["params"]}
    assert "ltg_bert.embedding.relative_embedding" in {names[id(p)] for p in no_decay["params"]}
