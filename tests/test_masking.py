"""Span masking (docs/methods.md#masking): statistics on ~200k tokens against the LTG-BERT recipe (15 % of non-special tokens,
span lengths Geometric(1/3) mod 10, 80/10/10 per span, specials never touched, 10 % shortened), determinism per
(seed, step), the encoder blocks, and the MaskedBlocks + mlm_loss pair inside the shared training loop (an
interrupted LAMB run resumes to the same weights as an uninterrupted one)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers

from helpers.data.masking import (
    IGNORE,
    MaskedBlocks,
    MaskingConfig,
    TokenIds,
    encode_encoder_blocks,
    expected_span_length,
    mask_batch,
    mlm_loss,
    mlm_metrics,
    pack_encoder_blocks,
    shorten,
    span_length_distribution,
)

transformers.logging.set_verbosity_error()

V = 500
TOK = TokenIds(vocab_size=V, mask_id=4, cls_id=1, sep_id=2, pad_id=3, special_ids=(0, 1, 2, 3, 4, 5))
SPECIAL = torch.tensor(TOK.special_ids)


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def _blocks(n, t=128, seed=0, par_rate=0.03):
    g = torch.Generator().manual_seed(seed)
    body = torch.randint(6, V, (n, t - 2), generator=g)
    body[torch.rand(n, t - 2, generator=g) < par_rate] = 5  # [PAR] inside blocks: special, never masked
    return torch.cat([torch.full((n, 1), TOK.cls_id), body, torch.full((n, 1), TOK.sep_id)], 1)


@pytest.fixture(scope="module")
def big():
    blocks = _blocks(1600)  # 204,800 positions, ~193k non-special before shortening
    return mask_batch(blocks, TOK, MaskingConfig(), rng=123, return_spans=True)


# ----------------------------------------------------------------------------- theory


def test_span_length_theory():
    p, q = 1 / 3, 2 / 3
    probs = span_length_distribution(p, 10)
    assert probs.sum() == pytest.approx(1.0)
    # P(L mod 10 = r) = sum_j p q^(10j + r - 1) = p q^(r-1) / (1 - q^10); zero collects lengths 10, 20, ...
    assert probs[1] == pytest.approx(p / (1 - q ** 10))
    assert probs[0] == pytest.approx(p * q ** 9 / (1 - q ** 10)) and probs[0] == pytest.approx(0.008824, abs=1e-6)
    mean = sum(r * probs[r] for r in range(10))
    assert expected_span_length() == pytest.approx(mean) == pytest.approx(2.7353, abs=1e-4)
    assert expected_span_length(nonzero=True) == pytest.approx(mean / (1 - probs[0])) == pytest.approx(2.7596, abs=1e-4)


# ----------------------------------------------------------------------------- statistics


def test_masked_share_is_15_percent_of_non_special_tokens(big):
    orig, labels = big["original"], big["labels"]
    non_special = (~torch.isin(orig, SPECIAL)).sum().item()
    predicted = (labels != -100).sum().item()
    assert non_special > 170_000
    assert abs(predicted / non_special - 0.15) < 0.005, predicted / non_special


def test_special_tokens_are_never_masked_and_labels_are_the_originals(big):
    orig, labels, inputs = big["original"], big["labels"], big["input_ids"]
    chosen = labels != -100
    assert not (chosen & torch.isin(orig, SPECIAL)).any()
    assert torch.equal(labels[chosen], orig[chosen])
    assert torch.equal(inputs[~chosen], orig[~chosen])  # nothing else changes
    assert torch.equal(inputs[:, 0], orig[:, 0]) and (inputs[:, 0] == TOK.cls_id).all()


def test_span_lengths_follow_geometric_mod_10(big):
    sp = big["spans"]
    drawn = sp["drawn"].double()
    assert len(drawn) > 10_000
    # sd of L mod 10 ≈ 2.2: the standard error is ≈ 0.02, the tolerance 4 of them
    assert abs(drawn.mean().item() - expected_span_length()) < 0.08
    probs = span_length_distribution()
    for r in (1, 2, 3):
        assert abs((sp["drawn"] == r).double().mean().item() - probs[r]) < 0.02
    assert sp["drawn"].max() <= 9 and sp["drawn"].min() >= 0
    # length 0 (L = 10, 20, …) masks nothing: the draw is lost, as in the reference
    zero = sp["drawn"] == 0
    assert zero.any() and (sp["applied"][zero] == 0).all()
    assert (sp["applied"] <= sp["drawn"]).all()


def test_80_10_10_per_span(big):
    sp = big["spans"]
    used = sp["applied"] > 0
    kinds = sp["kind"][used]
    assert len(kinds) > 10_000
    shares = [(kinds == k).double().mean().item() for k in (1, 2, 3)]
    assert abs(shares[0] - 0.8) < 0.02 and abs(shares[1] - 0.1) < 0.015 and abs(shares[2] - 0.1) < 0.015, shares
    kind, inputs, orig = big["kind"], big["input_ids"], big["original"]
    assert (inputs[kind == 1] == TOK.mask_id).all()
    assert torch.equal(inputs[kind == 3], orig[kind == 3])
    rand = inputs[kind == 2]
    assert not torch.isin(rand, SPECIAL).any() and rand.max() < V
    assert (rand != orig[kind == 2]).double().mean() > 0.95  # random ids (equal only by chance, 1/494)
    # whole spans share one treatment: the token-level shares are the span-level ones too
    chosen = (kind > 0).sum().item()
    assert abs((kind == 1).sum().item() / chosen - 0.8) < 0.03


def test_about_ten_percent_of_sequences_are_shortened():
    blocks = _blocks(20_000, t=64, par_rate=0.0).numpy()
    ids, attn = shorten(blocks, TOK, 0.1, np.random.default_rng(5))
    short = attn.sum(1) < 64
    assert abs(short.mean() - 0.1) < 0.01  # standard error 0.002
    k = attn[short].sum(1) - 2  # content tokens kept
    assert k.min() >= 1 and k.max() <= 64 - 3 and abs(k.mean() - 31) < 2  # uniform on 1 … T-3
    rows = np.flatnonzero(short)
    for r in rows[:50]:
        n = attn[r].sum()
        assert ids[r, n - 1] == TOK.sep_id and (ids[r, n:] == TOK.pad_id).all() and ids[r, 0] == TOK.cls_id
        assert (ids[r, 1 : n - 1] == blocks[r, 1 : n - 1]).all()
    assert (ids[~short] == blocks[~short]).all()


def test_shortened_rows_are_masked_within_their_length(big):
    attn, labels = big["attention_mask"], big["labels"]
    assert ((labels != -100) & (attn == 0)).sum() == 0
    short = attn.sum(1) < attn.shape[1]
    assert 0.07 < short.double().mean() < 0.13
    assert ((labels[short] != -100).sum(1) >= 1).all()  # at least one prediction per sequence


# ----------------------------------------------------------------------------- determinism and the dataset


def test_masking_is_a_pure_function_of_seed_and_step():
    data = MaskedBlocks(_blocks(64, t=32), TOK, seed=7)
    a = data.masked_batch(5, 16)
    b = MaskedBlocks(_blocks(64, t=32), TOK, seed=7).masked_batch(5, 16)  # a fresh object: a resumed run
    for k in a:
        assert torch.equal(a[k], b[k])
    data.masked_batch(0, 16)  # what ran before does not matter
    c = data.masked_batch(5, 16)
    assert all(torch.equal(a[k], c[k]) for k in a)
    d = data.masked_batch(6, 16)
    e = MaskedBlocks(_blocks(64, t=32), TOK, seed=8).masked_batch(5, 16)
    assert not torch.equal(a["labels"], d["labels"]) and not torch.equal(a["labels"], e["labels"])
    # the same block in another epoch gets another mask (dynamic masking)
    assert not torch.equal(data.masked_batch(0, 64)["labels"].sort(0).values,
                           data.masked_batch(1, 64)["labels"].sort(0).values)


def test_rank_slices_and_batches():
    data = MaskedBlocks(_blocks(64, t=32), TOK, seed=1)
    full = data.masked_batch(3, 16)
    parts = [data.masked_batch(3, 16, rank=r, world=4) for r in range(4)]
    for k in full:
        assert torch.equal(full[k], torch.cat([p[k] for p in parts]))
    batch = data.batch(3, 16)
    assert all(torch.equal(batch[k], full[k]) for k in full)
    from helpers.data.blocks import PackedBlocks

    plain = PackedBlocks(data.blocks, seed=1)
    for step in (0, 3, 9):  # the same rows, in the same order, as the decoder's PackedBlocks
        assert data.indices(step, 16) == plain.indices(step, 16)
    assert data.epochs(8, 16) == plain.epochs(8, 16) and len(data) == len(plain) and data.tokens == plain.tokens
    with pytest.raises(ValueError, match="MaskedBlocks"):
        mlm_loss(None, {"input_ids": data.blocks[:4]})  # plain PackedBlocks rows are refused with a message


def test_eval_batches_do_not_depend_on_batch_size():
    data = MaskedBlocks(_blocks(30, t=32), TOK, seed=2)
    a = list(data.eval_batches(7))
    b = list(data.eval_batches(30))
    for k in ("input_ids", "attention_mask", "labels"):
        assert torch.equal(torch.cat([x[k] for x in a]), b[0][k])
    assert (b[0]["attention_mask"] == 1).all()  # no shortening at evaluation
    assert torch.equal(list(data.eval_batches(30))[0]["labels"], b[0]["labels"])


def test_pack_encoder_blocks_layout():
    docs = [[10, 11, 12], [20, 21], [30, 31, 32, 33, 34]]
    b = pack_encoder_blocks(docs, 6, cls_id=1, sep_id=2, doc_sep_id=5)
    # stream 10 11 12 5 20 21 5 30 31 32 33 34 5 → pieces of 4, remainder (1 token) dropped
    assert b.tolist() == [[1, 10, 11, 12, 5, 2], [1, 20, 21, 5, 30, 2], [1, 31, 32, 33, 34, 2]]
    c = pack_encoder_blocks(docs, 6, cls_id=1, sep_id=2, pad_id=3, doc_sep_id=5, keep_remainder=True)
    assert c[-1].tolist() == [1, 5, 2, 3, 3, 3]
    d = pack_encoder_blocks([[10, 11, 5], [20, 5]], 4, cls_id=1, sep_id=2, doc_sep_id=5)  # no doubled [PAR]
    assert d.tolist() == [[1, 10, 11, 2], [1, 5, 20, 2]]
    with pytest.raises(ValueError):
        pack_encoder_blocks([[1, 2]], 16, 1, 2)


def test_real_tokenizer_end_to_end(encoder_tokenizer, real_stories):
    from helpers.models.ltg_bert import LtgBertForMaskedLM, ltg_bert_config

    tok = TokenIds.from_tokenizer(encoder_tokenizer)
    names = encoder_tokenizer.convert_ids_to_tokens(list(tok.special_ids))
    assert set(names) == {"[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "[PAR]"}
    texts = [s + "\n[PAR]" for s in real_stories[:60]]
    data = encode_encoder_blocks(encoder_tokenizer, texts, block=64, seed=0)
    assert (data.blocks[:, 0] == tok.cls_id).all() and (data.blocks[:, -1] == tok.sep_id).all()
    par = encoder_tokenizer.convert_tokens_to_ids("[PAR]")
    assert (data.blocks == par).sum() > 0
    b = data.masked_batch(0, 8)
    assert not (torch.isin(b["labels"], torch.tensor(tok.special_ids))).any()
    torch.manual_seed(0)
    model = LtgBertForMaskedLM(ltg_bert_config("smoke", len(encoder_tokenizer)))
    m = mlm_metrics(model, data, batch_size=16)
    assert 0 <= m["accuracy"] <= 0.05 and abs(m["loss"] - np.log(len(encoder_tokenizer))) < 1.0 and m["tokens"] > 0
    assert m["accuracy_ci"][0] <= m["accuracy"] <= m["accuracy_ci"][1]


def test_mlm_accuracy_interval_is_a_bootstrap_over_blocks():
    """A model that is right on every masked token of the first half of the blocks and wrong on the rest: accuracy is
    the pooled share, and the interval comes from resampling whole blocks (so it is wide: 8 blocks)."""
    data = MaskedBlocks(_blocks(16, t=32), TOK, seed=3)
    batches = list(data.eval_batches(8))
    first = batches[0]["labels"]

    class Oracle(torch.nn.Module):
        calls = 0

        def forward(self, input_ids, attention_mask, labels=None, **kw):
            sel = labels != IGNORE
            block = Oracle.calls * len(labels) + torch.arange(len(labels))
            Oracle.calls += 1
            logits = torch.zeros(int(sel.sum()), V)
            target = labels[sel]
            right = (block[:, None].expand_as(labels)[sel] < 8)
            logits[torch.arange(len(target)), torch.where(right, target, (target + 1) % V)] = 1.0
            return type("Out", (), {"logits": logits})()

    oracle = Oracle()
    oracle.supports_masked_only = True
    m = mlm_metrics(oracle, data, batch_size=8)
    labels = torch.cat([b["labels"] for b in batches])
    per_block = (labels != IGNORE).sum(1).double()
    assert first.shape[0] == 8 and m["tokens"] == int(per_block.sum())
    assert m["accuracy"] == pytest.approx(float(per_block[:8].sum() / per_block.sum()))
    lo, hi = m["accuracy_ci"]
    assert lo < m["accuracy"] < hi and hi - lo > 0.3  # whole blocks right or wrong: a wide interval


def test_mlm_loss_packed_equals_plain():
    from helpers.models.ltg_bert import LtgBertForMaskedLM, ltg_bert_config

    torch.manual_seed(0)
    model = LtgBertForMaskedLM(ltg_bert_config("smoke", V)).eval()
    data = MaskedBlocks(_blocks(16, t=32), TOK, seed=3)
    packed = mlm_loss(model, data.batch(0, 8))
    plain = mlm_loss(model, data.masked_batch(0, 8))
    b = data.masked_batch(0, 8)
    full = model(**b).loss  # full logits, HF-style ignore_index
    torch.testing.assert_close(packed, plain)
    torch.testing.assert_close(packed, full)


def _train_run(out, steps=8, stop_after=None):
    from helpers.models.ltg_bert import LtgBertForMaskedLM, ltg_bert_config
    from helpers.training.loop import TrainConfig, train

    torch.manual_seed(0)
    model = LtgBertForMaskedLM(ltg_bert_config("smoke", V))
    tr = MaskedBlocks(_blocks(40, t=32, seed=1), TOK, seed=11)
    va = MaskedBlocks(_blocks(8, t=32, seed=2), TOK, seed=12)
    cfg = TrainConfig(steps=steps, batch_size=8, micro_batch=4, lr=1e-2, min_lr=1e-3, warmup=2, weight_decay=0.1,
                      betas=(0.9, 0.98), eps=1e-6, eval_every=4, save_every=4, log_every=2, seed=3, optimizer="lamb",
                      device="cpu")  # bitwise equality is a CPU promise: GPU kernels are not deterministic
    res = train(model, tr, va, out, cfg, loss_fn=mlm_loss, progress=False, stop_after=stop_after)
    return model, res


def test_training_loop_with_lamb_resumes_exactly(tmp_path):
    ref, r = _train_run(tmp_path / "ref")
    assert r.steps == 8 and np.isfinite(r.best_valid_loss)
    rows = [json.loads(x) for x in (tmp_path / "ref" / "metrics.jsonl").read_text().splitlines()]
    train_losses = [x["loss"] for x in rows if x["split"] == "train"]
    assert len(train_losses) == 4 and all(np.isfinite(train_losses))  # random tokens: learning is tested elsewhere
    assert (tmp_path / "ref" / "best" / "modeling_ltgbert.py").is_file()  # the best model is self-contained
    _, part = _train_run(tmp_path / "run", stop_after=6)  # killed between checkpoints (last at step 4)
    assert part.steps == 6
    resumed, res = _train_run(tmp_path / "run")
    assert res.resumed_from == 4 and res.steps == 8
    for (k, a), (_, b) in zip(ref.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), k


def test_a_masking_departure_enters_the_encoder_fingerprint_and_the_reference_does_not(monkeypatch, tmp_path):
    """``plan_encoders(masking=...)`` gives the training blocks a MaskingConfig; ``train_encoder`` adds it to the
    run's spec (so a changed mask rate retrains) only when it departs from the reference's."""
    from helpers.training import recipes
    from helpers.models.ltg_bert import ltg_bert_config

    seen = []
    monkeypatch.setattr(recipes, "train_or_skip", lambda name, build, spec, *a, **k: seen.append(spec))
    tok = TokenIds(vocab_size=64, mask_id=4, cls_id=1, sep_id=2, pad_id=3, special_ids=(0, 1, 2, 3, 4, 5))
    blocks = torch.randint(6, 64, (4, 16))
    for cfg in (MaskingConfig(), MaskingConfig(mask_p=0.3)):
        run = recipes.EncoderRun("m", ["c"], False, None, MaskedBlocks(blocks, tok, masking=cfg), {"all": None},
                                 ltg_bert_config("smoke", 64), None, {}, {})
        recipes.train_encoder(run, tmp_path / str(cfg.mask_p), progress=False)
    assert "masking" not in seen[0] and seen[1]["masking"]["mask_p"] == 0.3


def test_encoder_model_applies_model_dropout_to_a_preset_or_a_spec():
    from helpers.training.recipes import encoder_model

    assert encoder_model("cpu") == "cpu" and encoder_model("cpu", None) == "cpu"
    assert encoder_model("cpu", 0.0) == {"preset": "cpu", "dropout": 0.0}
    assert encoder_model({"preset": "cpu", "hidden": 192}, 0.0) == {"preset": "cpu", "hidden": 192, "dropout": 0.0}
