"""The lean incremental forward of GPT-Neo (helpers.models.decoder_step) against transformers' own forward."""
import pytest
import torch

from helpers.generation import completions as G, decoding as D
from helpers.models import decoder, decoder_step
from helpers.models.decoder import cache_kwarg, output_cache

EOT = 0


def _model(window=6, layers=3, seed=1, fast=True, std=None):
    spec = decoder.DecoderSpec(hidden=32, layers=layers, heads=4, context=64, window=window, vocab_size=97, dropout=0.0)
    m = decoder.build_decoder(spec, seed=seed, fast=fast, bos_token_id=EOT, eos_token_id=EOT, pad_token_id=EOT).eval()
    if std is not None:  # peaked logits: greedy choices far from ties, so token sequences can be compared exactly
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in m.parameters():
                if p.dim() == 2:
                    p.copy_(torch.randn(p.shape, generator=g) * std)
    return m


def _prompts(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(1, 97, (n,), generator=g).tolist() for n in lengths]


def _left_padded(prompts):
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), EOT, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, width - len(p):], mask[r, width - len(p):] = torch.tensor(p), 1
    return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


@pytest.mark.parametrize("fast", [True, False])
def test_step_logits_match_transformers_past_the_local_window_with_padding_select_and_repeat(fast):
    """20 steps from prompts of 3..11 tokens (left padding), window 6 (the local layers drop slots), rows dropped
    after step 8 and every row repeated twice after step 4: the logits equal those of transformers' forward with its
    own cache within float rounding, at every step."""
    m = _model(fast=fast)
    ids, mask, pos = _left_padded(_prompts([3, 11, 7, 5]))
    with torch.no_grad():
        out = m(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
        ref_cache = output_cache(out)
        stepper = decoder_step.stepper_for(m, ref_cache, mask, ids.size(1) + 20)
        assert isinstance(stepper, decoder_step.DecoderStepper)
        g = torch.Generator().manual_seed(0)
        last = pos[:, -1]
        for t in range(20):
            tok = torch.randint(1, 97, (len(last),), generator=g)
            if t == 4:
                ref_cache.batch_repeat_interleave(2)
                stepper.batch_repeat_interleave(2)
                mask, last, tok = mask.repeat_interleave(2, 0), last.repeat_interleave(2, 0), tok.repeat_interleave(2, 0)
            if t == 8:
                keep = torch.tensor([6, 0, 3, 5])
                ref_cache.batch_select_indices(keep)
                stepper.batch_select_indices(keep)
                mask, last, tok = mask[keep], last[keep], tok[keep]
            mask = torch.cat([mask, torch.ones((len(last), 1), dtype=mask.dtype)], 1)
            last = last + 1
            ref = m(input_ids=tok[:, None], attention_mask=mask, position_ids=last[:, None], use_cache=True,
                    **cache_kwarg(m, ref_cache))
            ref_cache = output_cache(ref)
            ours = stepper.step(tok, last)
            assert ours.shape == ref.logits[:, -1].shape
            assert torch.allclose(ours, ref.logits[:, -1], atol=1e-4, rtol=1e-4), f"step {t}"
    assert stepper.slots == ids.size(1) + 20
    with pytest.raises(RuntimeError, match="full"):
        stepper.step(tok, last)


def test_generate_draws_the_same_tokens_through_the_stepper_and_through_transformers(monkeypatch):
    """The decoding loop with the stepper and with transformers' forward (stepper_for patched to decline) give the
    same greedy and nucleus completions, ended rows dropped from the batch included."""
    m = _model(std=0.6, seed=4)
    prompts = _prompts([5, 9, 2, 14, 7, 3], seed=1)
    # the end token: one that row 0's greedy completion produces early, so that some rows end and leave the batch
    end = G.generate(m, prompts[:1], D.Decoding("greedy"), EOT, max_new_tokens=30)[0][0][4]
    runs = {}
    for lean in (True, False):
        if not lean:
            monkeypatch.setattr(G, "stepper_for", lambda *a, **k: None)
        runs[lean] = [G.generate(m, prompts, d, end, max_new_tokens=30, batch_size=6, seed=3)
                      for d in (D.Decoding("greedy"), D.Decoding("nucleus", k=2, top_p=0.9))]
    assert runs[True] == runs[False]
    lengths = [len(c) for cs in runs[True][0] for c in cs]
    assert min(lengths) < 29 and max(lengths) > 6, f"ended and running rows: {lengths}"


def test_only_fp32_gpt_neo_in_eval_mode_takes_the_stepper():
    m = _model()
    ids, mask, pos = _left_padded(_prompts([4, 6]))
    with torch.no_grad():
        cache = output_cache(m(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True))
    assert decoder_step.stepper_for(m, cache, mask, 20) is not None
    assert decoder_step.stepper_for(m.train(), cache, mask, 20) is None
    assert decoder_step.stepper_for(_model().to(torch.bfloat16), cache, mask, 20) is None
    assert decoder_step.stepper_for(torch.nn.Linear(2, 2), cache, mask, 20) is None
    assert decoder_step.stepper_for(m.eval(), object(), mask, 20) is None
    layers = [decoder_step._layer_kv(cache, i) for i in range(3)]
    assert decoder_step.stepper_for(m, layers, mask, 20) is not None  # a legacy tuple of (keys, values) pairs
    trimmed = [(k[:, :, 1:], v[:, :, 1:]) for k, v in layers]  # a cache that dropped a slot (sliding window)
    assert decoder_step.stepper_for(m, trimmed, mask, 20) is None
    with pytest.raises(ValueError, match="capacity"):
        decoder_step.DecoderStepper(m, cache, mask, 3)
