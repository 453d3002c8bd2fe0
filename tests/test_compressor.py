"""The compressor LM of Rathod et al. 2024 (§7; docs/methods.md#compressor): shapes, causality, loss, HF round trip, pair generation, measured memory,
training through the project's loop. Tiny sizes, one torch thread."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import helpers.models.compressor as C
import helpers.analysis.memory as M
from helpers.models.compressor import (CompressorConfig, CompressorForCausalLM, build_compressor, compressor_loss,
                                generate_pairs, sample_token, shifted_token_nll)
from helpers.analysis.memory import memory_table, peak_train_memory

V = 37
SPEC = dict(vocab_size=V, hidden=16, layers=2, heads=2, context=16, dropout=0.0)


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def tiny(seed: int = 0, **kw) -> CompressorForCausalLM:
    m = build_compressor({**SPEC, **kw}, seed=seed, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    return m.eval()


def ids_of(shape, seed=1):
    return torch.randint(V, shape, generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------- configuration


def test_config_validation_and_aliases():
    cfg = CompressorConfig(vocab_size=V, hidden=16, layers=2, heads=4, context=32)
    assert cfg.intermediate == 64 and cfg.pairs == 16
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (16, 2, 4)
    assert cfg.max_position_embeddings == 32 and cfg.intermediate_size == 64
    with pytest.raises(ValueError, match="even"):
        CompressorConfig(vocab_size=V, hidden=16, heads=2, context=15)
    with pytest.raises(ValueError, match="divisible"):
        CompressorConfig(vocab_size=V, hidden=16, heads=3, context=16)
    with pytest.raises(ValueError, match="positive"):
        CompressorConfig(vocab_size=V, hidden=0, heads=1, context=16)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        CompressorConfig(vocab_size=V, hidden=16, heads=2, context=16, eos_token_id=V)
    with pytest.raises(ValueError, match="unknown compressor spec keys"):
        build_compressor({**SPEC, "window": 8})
    with pytest.raises(ValueError, match="token_ids"):
        build_compressor(SPEC, bos=0)


def test_tied_head_and_seeded_build():
    m = tiny()
    assert m.lm_head.weight is m.embed.weight
    assert torch.equal(tiny().pair_proj.weight, m.pair_proj.weight)  # same seed, same weights
    assert not torch.equal(tiny(seed=1).pair_proj.weight, m.pair_proj.weight)


# ----------------------------------------------------------------------------- forward


@pytest.mark.parametrize("T", [2, 3, 8, 11, 16])
def test_shapes_and_first_position(T):
    m = tiny()
    ids = ids_of((3, T))
    out = m(input_ids=ids)
    assert out.logits.shape == (3, T, V) and out.loss is None
    assert torch.equal(out.logits[:, 0], torch.zeros(3, V))  # token 1 is not predicted: uniform
    assert torch.isfinite(out.logits).all()
    if T >= 3:
        loss = m(input_ids=ids, labels=ids).loss
        assert loss.ndim == 0 and math.isfinite(float(loss.detach()))


def test_bad_inputs_are_refused():
    m = tiny()
    with pytest.raises(ValueError, match="at least 2"):
        m(input_ids=ids_of((2, 1)))
    with pytest.raises(ValueError, match="context"):
        m(input_ids=ids_of((2, 18)))
    with pytest.raises(ValueError, match="token ids"):
        m(input_ids=torch.full((1, 4), V))
    with pytest.raises(ValueError, match="at least 3"):
        m(input_ids=ids_of((1, 2)), labels=ids_of((1, 2)))
    with pytest.raises(ValueError, match="shape"):
        m(input_ids=ids_of((1, 4)), labels=ids_of((1, 5)))
    with pytest.raises(NotImplementedError, match="padding"):
        m(input_ids=ids_of((1, 4)), attention_mask=torch.tensor([[0, 1, 1, 1]]))
    ids = ids_of((1, 6))
    assert torch.equal(m(input_ids=ids, attention_mask=torch.ones(1, 6)).logits, m(input_ids=ids).logits)
    with pytest.raises(TypeError, match="unsupported"):
        m(input_ids=ids, output_attentions=True)


@pytest.mark.parametrize("T", [10, 11])
def test_causality(T):
    """logits[:, t] (the prediction of token t+1) depends on tokens 0..t only: in particular the first-token
    logits of a pair do not see that pair, and the second-token logits see the pair's first token (teacher
    forcing) but not the token they predict."""
    m = tiny()
    ids = ids_of((2, T))
    base = m(input_ids=ids).logits
    for j in range(T):
        changed = ids.clone()
        changed[:, j] = (changed[:, j] + 1 + torch.arange(2)) % V
        new = m(input_ids=changed).logits
        torch.testing.assert_close(new[:, :j], base[:, :j], rtol=0, atol=0)
        if j >= 1:  # position j itself does depend on token j (position 0 is never a prediction)
            assert (new[:, j] - base[:, j]).abs().max() > 1e-6, j


def _manual_logits(m: CompressorForCausalLM, ids: torch.Tensor) -> torch.Tensor:
    """An independent plain-tensor forward (explicit causal softmax attention, loops over pairs)."""
    cfg = m.config
    E, h, eps = m.embed.weight, cfg.hidden, cfg.layer_norm_epsilon
    B, T = ids.shape
    P = T // 2

    def ln(x, mod):
        return F.layer_norm(x, (h,), mod.weight, mod.bias, eps)

    def lin(x, mod):
        return x @ mod.weight.T + (mod.bias if mod.bias is not None else 0)

    def gelu(x):
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))

    x = torch.stack([lin(torch.cat([E[ids[:, 2 * i]], E[ids[:, 2 * i + 1]]], -1), m.pair_proj) + m.pair_pos.weight[i]
                     for i in range(P)], dim=1)
    nh, d = cfg.heads, h // cfg.heads
    for blk in m.blocks:
        q, k, v = lin(ln(x, blk.ln_1), blk.attn.qkv).split(h, dim=-1)
        q, k, v = (t.view(B, P, nh, d).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d)
        scores = scores.masked_fill(torch.ones(P, P, dtype=torch.bool).triu(1), float("-inf"))
        a = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, P, h)
        x = x + lin(a, blk.attn.proj)
        x = x + lin(gelu(lin(ln(x, blk.ln_2), blk.mlp.fc)), blk.mlp.proj)
    u = ln(x, m.ln_f)
    logits = torch.zeros(B, T, cfg.vocab_size)
    for i in range(P):
        logits[:, 2 * i + 1] = u[:, i] @ E.T
        if 2 * i + 2 < T:
            z = torch.cat([u[:, i], E[ids[:, 2 * i + 2]]], -1)
            s = ln(u[:, i] + lin(gelu(lin(z, m.second.fc)), m.second.proj), m.ln_second)
            logits[:, 2 * i + 2] = s @ E.T
    return logits


@pytest.mark.parametrize("T", [8, 7])
def test_logits_and_loss_match_hand_computation(T):
    torch.manual_seed(3)
    m = tiny(seed=3)
    with torch.no_grad():  # non-trivial norms and biases
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
    ids = ids_of((2, T), seed=4)
    with torch.no_grad():
        out = m(input_ids=ids, labels=ids)
        ref = _manual_logits(m, ids)
    torch.testing.assert_close(out.logits, ref, rtol=1e-5, atol=1e-5)
    nll = [float(torch.logsumexp(ref[b, t], 0) - ref[b, t, ids[b, t + 1]]) for b in range(2) for t in range(1, T - 1)]
    assert float(out.loss) == pytest.approx(sum(nll) / len(nll), rel=1e-5)
    # ignored labels leave the mean over the others
    labels = ids.clone()
    labels[0, 3] = -100
    kept = [float(torch.logsumexp(ref[b, t], 0) - ref[b, t, ids[b, t + 1]])
            for b in range(2) for t in range(1, T - 1) if not (b == 0 and t + 1 == 3)]
    assert float(m(input_ids=ids, labels=labels).loss.detach()) == pytest.approx(sum(kept) / len(kept), rel=1e-5)
    # the per-token helper agrees on the predicted tokens; token 1 gets the uniform log V
    tok = shifted_token_nll(out.logits, ids)
    assert tok.shape == (2, T - 1)
    assert float(tok[:, C.FIRST_PREDICTED - 1 :].mean()) == pytest.approx(float(out.loss), rel=1e-5)
    torch.testing.assert_close(tok[:, 0], torch.full((2,), math.log(V)))


def test_gpt_neo_loss_aligns_with_shifted_token_nll():
    from helpers.models.decoder import build_decoder

    g = build_decoder(dict(hidden=16, layers=1, heads=2, context=16, window=8, vocab_size=V, dropout=0.0), seed=0).eval()
    ids = ids_of((2, 12))
    with torch.no_grad():
        out = g(input_ids=ids, labels=ids, use_cache=False)
    assert float(shifted_token_nll(out.logits, ids).mean()) == pytest.approx(float(out.loss), rel=1e-5)


# ----------------------------------------------------------------------------- save / load


def test_save_load_round_trip(tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM

    m = tiny(seed=5)
    m.save_pretrained(tmp_path)
    assert isinstance(AutoConfig.from_pretrained(tmp_path), CompressorConfig)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is CompressorForCausalLM
    assert loaded.lm_head.weight is loaded.embed.weight
    assert loaded.config.to_dict()["context"] == 16 and loaded.config.eos_token_id == 0
    ids = ids_of((2, 9))
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids).logits, m(input_ids=ids).logits)
    assert torch.equal(CompressorForCausalLM.from_pretrained(tmp_path).pair_proj.weight, m.pair_proj.weight)


# ----------------------------------------------------------------------------- generation


def _argmax_loop(m, ids, n):
    """Token-by-token greedy decoding with the full forward (logits[:, -1] predicts the next token)."""
    for _ in range(n):
        with torch.no_grad():
            nxt = m(input_ids=ids).logits[:, -1].argmax(-1)
        ids = torch.cat([ids, nxt[:, None]], dim=1)
    return ids


@pytest.mark.parametrize("n_prompt,n_new", [(4, 6), (5, 6), (4, 5), (3, 1), (2, 0)])
def test_greedy_pairs_equal_an_argmax_loop(n_prompt, n_new):
    m = tiny(seed=7)
    prompt = ids_of((3, n_prompt), seed=8)
    out = generate_pairs(m, prompt, n_new)
    assert out.shape == (3, n_prompt + n_new) and torch.equal(out[:, :n_prompt], prompt)
    assert torch.equal(out, _argmax_loop(m, prompt, n_new))
    assert torch.equal(out, generate_pairs(m, prompt, n_new))  # deterministic


def test_one_token_prompt_and_context_cap():
    m = tiny(seed=7)
    prompt = ids_of((2, 1), seed=9)
    out = generate_pairs(m, prompt, 5)
    with_bos = torch.cat([torch.zeros(2, 1, dtype=torch.long), prompt], dim=1)
    assert torch.equal(out, _argmax_loop(m, with_bos, 5)[:, 1:])  # bos added, then removed
    assert generate_pairs(m, ids_of((1, 10)), 100).shape == (1, 16)  # capped at the context
    assert generate_pairs(m, [3, 4, 5], 2).shape == (1, 5)  # a plain list is one prompt
    with pytest.raises(ValueError, match="top_p"):
        generate_pairs(m, prompt, 2, top_p=0.0)
    with pytest.raises(ValueError, match="non-empty"):
        generate_pairs(m, torch.zeros(2, 0, dtype=torch.long), 2)
    nobos = build_compressor(SPEC, seed=0)
    with pytest.raises(ValueError, match="bos_token_id"):
        generate_pairs(nobos, prompt, 2)


def test_nucleus_is_seeded_and_matches_a_sampling_loop():
    m = tiny(seed=11)
    prompt = ids_of((4, 3), seed=12)
    a = generate_pairs(m, prompt, 9, top_p=0.9, seed=5)
    assert torch.equal(a, generate_pairs(m, prompt, 9, top_p=0.9, seed=5))
    assert not torch.equal(a, generate_pairs(m, prompt, 9, top_p=0.9, seed=6))
    assert int(a.min()) >= 0 and int(a.max()) < V
    # a tiny nucleus is greedy
    assert torch.equal(generate_pairs(m, prompt, 9, top_p=1e-9, seed=5), generate_pairs(m, prompt, 9))
    # token by token with the same generator: the same draws in the same order
    g, ids = torch.Generator().manual_seed(5), prompt
    for _ in range(9):
        with torch.no_grad():
            nxt = sample_token(m(input_ids=ids).logits[:, -1], 0.9, 1.0, g)
        ids = torch.cat([ids, nxt[:, None]], dim=1)
    assert torch.equal(a, ids)


def test_sample_token_follows_the_project_rule():
    from helpers.generation.decoding import Decoding, sample_next

    logits = torch.randn(6, V, generator=torch.Generator().manual_seed(0))
    for p, temp in ((0.95, 1.0), (0.5, 0.7), (1.0, 1.3)):
        ours = sample_token(logits, p, temp, torch.Generator().manual_seed(3))
        theirs = sample_next(logits, Decoding("nucleus", k=1, top_p=p, temperature=temp), torch.Generator().manual_seed(3))
        assert torch.equal(ours, theirs)
    assert torch.equal(sample_token(logits), logits.argmax(-1))


def test_eos_stops_rows():
    m = tiny(seed=7)
    prompt = ids_of((3, 4), seed=8)
    free = generate_pairs(m, prompt, 8)
    eos = int(free[0, 5])  # the second new token of row 0
    out = generate_pairs(m, prompt, 8, eos_token_id=eos)
    for r in range(3):
        new = out[r, 4:].tolist()
        if eos in new:
            k = new.index(eos)
            assert new[: k + 1] == free[r, 4 : 4 + k + 1].tolist()
            assert all(t == m.config.pad_token_id for t in new[k + 1 :])
        else:
            assert new == free[r, 4 : 4 + len(new)].tolist()
    assert out.size(1) <= free.size(1)


# ----------------------------------------------------------------------------- training


def test_overfits_a_repeated_batch():
    torch.manual_seed(0)
    m = build_compressor(SPEC, seed=0).train()
    batch = {"input_ids": ids_of((4, 16), seed=2)}
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        opt.zero_grad()
        loss = compressor_loss(m, batch)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[0] == pytest.approx(math.log(V), rel=0.1)  # starts near uniform
    assert losses[-1] < 0.5 * losses[0]


def test_train_or_skip_trains_and_saves_a_loadable_compressor(tmp_path):
    from transformers import AutoModelForCausalLM

    from helpers.data.blocks import PackedBlocks
    from helpers.training.recipes import train_or_skip
    from helpers.training.loop import TrainConfig

    block = ids_of((1, 16), seed=21)
    train = PackedBlocks(block.repeat(8, 1), seed=0)  # one block repeated: every batch is the same (overfit)
    valid = PackedBlocks(block.repeat(2, 1), seed=0)
    cfg = TrainConfig(steps=4, batch_size=4, eval_every=2, save_every=2, log_every=1, lr=1e-2, min_lr=1e-3,
                      warmup=0, device="cpu")
    lines: list[str] = []
    res = train_or_skip("compressor-tiny", lambda: build_compressor(SPEC, seed=cfg.seed, bos_token_id=0), SPEC,
                        train, valid, None, cfg, tmp_path / "run", loss_fn=compressor_loss, progress=False,
                        log=lines.append)
    assert res.steps == 4
    tr = [r["loss"] for r in res.history if r["split"] == "train"]
    va = [r["loss"] for r in res.history if r["split"] == "valid"]
    assert len(tr) == 4 and tr[-1] < tr[0]
    assert len(va) == 2 and va[1] < va[0]
    best = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "best").eval()
    assert type(best) is CompressorForCausalLM
    with torch.no_grad():
        assert float(compressor_loss(best, {"input_ids": valid.blocks})) == pytest.approx(res.best_valid_loss, rel=1e-5)
    again = train_or_skip("compressor-tiny", lambda: build_compressor(SPEC, seed=cfg.seed, bos_token_id=0), SPEC,
                          train, valid, None, cfg, tmp_path / "run", loss_fn=compressor_loss, progress=False,
                          log=lines.append)
    assert again.best_valid_loss == res.best_valid_loss and lines[-1].startswith("[skip]")


# ----------------------------------------------------------------------------- memory


def test_memory_table_estimates_and_skips(monkeypatch):
    calls = []

    def fake(kind, width, batch, cap_mb=None, **kw):
        calls.append((kind, width, batch))
        per_row = 10.0 if kind == "compressor" else 30.0
        return {"kind": kind, "width": width, "batch": batch, "status": "ok", "peak_mb": 5 + per_row * batch}

    monkeypatch.setattr(M, "peak_train_memory", fake)
    rows = memory_table([64], [2, 4, 8, 16], cap_mb=300.0)
    status = {(r["kind"], r["batch"]): r["status"] for r in rows}
    # gpt-neo: probe 35 MB at batch 1; batch 8 measured 245 < 300; batch 16 estimated 490 > 300: skipped
    assert [status[("gpt-neo", b)] for b in (2, 4, 8, 16)] == ["ok", "ok", "ok", "skipped"]
    assert [status[("compressor", b)] for b in (2, 4, 8, 16)] == ["ok"] * 4
    assert ("gpt-neo", 64, 16) not in calls and ("gpt-neo", 64, 1) in calls
    skipped = next(r for r in rows if r["status"] == "skipped")
    assert skipped["est_mb"] == pytest.approx(245 * 2)
    pivot = M.memory_pivot(rows)
    assert pivot.loc[("gpt-neo", 64), 16] == "skipped" and pivot.loc[("compressor", 64), 16] == 165
    # measured two models at a time: the same rows in the same order (kind, width, batch)
    side = memory_table([64], [2, 4, 8, 16], cap_mb=300.0, jobs=2)
    assert side == rows
    with pytest.raises(ValueError):
        memory_table([64], [2], jobs=0)


@pytest.mark.slow
def test_peak_train_memory_is_measured_and_compressor_is_smaller():
    """Real measurements in fresh subprocesses (seq 256, batch 8, width 64, 2 layers, vocab 1024)."""
    kw = dict(seq=256, layers=2, heads=4, vocab=1024, dropout=0.1)
    neo = peak_train_memory("gpt-neo", 64, 8, **kw)
    comp = peak_train_memory("compressor", 64, 8, profile=True, **kw)
    for r in (neo, comp):
        assert r["status"] == "ok" and r["peak_mb"] > 0 and r["baseline_mb"] > 0 and r["params"] > 0, str(r)
        assert r["step_s"] > 0 and math.isfinite(r["loss"])
    assert comp["peak_mb"] < neo["peak_mb"], (comp["peak_mb"], neo["peak_mb"])
    if comp.get("profiler_peak_mb") is not None:  # the tensor-level cross-check is of the same size
        assert 0.5 < comp["profiler_peak_mb"] / comp["peak_mb"] < 2.0
    oom = peak_train_memory("compressor", 64, 8, cap_mb=1, **kw)
    assert oom["status"] == "oom"
    with pytest.raises(ValueError, match="kind"):
        peak_train_memory("gpt2", 64, 8)


def test_predicted_token_loss_is_the_mean_over_tokens_2_onwards():
    from helpers.data.blocks import PackedBlocks
    from helpers.models.decoder import build_decoder

    torch.manual_seed(0)
    blocks = torch.randint(0, 50, (5, 12))
    data = PackedBlocks(blocks)
    comp = build_compressor(dict(vocab_size=50, hidden=16, layers=1, heads=2, context=12, dropout=0.0), seed=0)
    # the compressor's own loss is exactly that mean (equal-length blocks: the mean of per-block means)
    with torch.no_grad():
        ref = torch.stack([comp(input_ids=b[None], labels=b[None]).loss for b in blocks]).mean()
    assert C.predicted_token_loss(comp, data, batch_size=2) == pytest.approx(ref.item(), rel=1e-5)
    neo = build_decoder(dict(hidden=16, layers=1, heads=2, context=12, window=6, vocab_size=50, dropout=0.0),
                        seed=0, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    with torch.no_grad():
        logits = neo(blocks).logits
    nll = F.cross_entropy(logits[:, 1:-1].reshape(-1, 50), blocks[:, 2:].reshape(-1))
    assert C.predicted_token_loss(neo, data, batch_size=3) == pytest.approx(nll.item(), rel=1e-5)
    assert neo.training and comp.training  # modes restored
