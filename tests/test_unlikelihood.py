"""Repetition fine-tuning (helpers.training.unlikelihood): the candidates, the loss against HF's logits, and the
phase on a decoder folder (skip, rerun from the plain model, files left)."""
from __future__ import annotations

import json

import pytest
import torch

from helpers.data import tokenizers
from helpers.training import unlikelihood as U
from helpers.models import decoder
from helpers.training import recipes
from helpers.training.loop import TrainConfig

pytestmark = pytest.mark.usefixtures("one_thread")


def test_repeated_ngram_mask_marks_every_token_of_a_repeat():
    assert U.repeated_ngram_mask([1, 2, 3, 1, 2, 3, 4], 3) == [False, False, False, True, True, True, False]
    assert U.repeated_ngram_mask([1, 2, 3, 1, 2, 3, 4], 4) == [False] * 7
    # overlapping repeats: 5 5 5 5 has the 2-gram (5, 5) at 0, 1, 2; tokens 1..3 lie in a second occurrence
    assert U.repeated_ngram_mask([5, 5, 5, 5], 2) == [False, True, True, True]
    assert U.repeated_ngram_mask([], 2) == []
    with pytest.raises(ValueError):
        U.repeated_ngram_mask([1], 0)


@pytest.fixture(scope="module")
def tiny(decoder_tokenizer):
    eot = tokenizers.end_of_text_id(decoder_tokenizer)
    spec = decoder.DecoderSpec(hidden=32, layers=2, heads=4, context=128, window=16,
                               vocab_size=len(decoder_tokenizer), dropout=0.0)
    return spec, decoder.build_decoder(spec, seed=5, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot)


def test_unlikelihood_loss_matches_hf_logits(tiny, decoder_tokenizer):
    """The loss reads the model through the fast path, right-padded, without an attention mask: it must equal
    -log(1 - p) of HF's eager model on each unpadded sequence, averaged over the candidates."""
    spec, model = tiny
    eot = tokenizers.end_of_text_id(decoder_tokenizer)
    prompts = [[eot, 10, 11], [eot, 12]]
    conts = [[20, 21, 22, 20, 21, 22, 23], [30, 31, 30, 31, 30]]
    got, count = U.unlikelihood_loss(model.eval(), prompts, conts, 2, eot)
    ref_terms = []
    plain = decoder.build_decoder(spec, seed=5, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot)
    plain.load_state_dict(model.state_dict())
    decoder.disable_fast_attention(plain)  # HF's eager attention: the reference
    for p, c in zip(prompts, conts):
        ids = torch.tensor([p + c])
        with torch.no_grad():
            logp = torch.log_softmax(plain(input_ids=ids).logits[0].float(), -1)
        for j, hit in enumerate(U.repeated_ngram_mask(c, 2)):
            if hit:
                pos = len(p) + j
                ref_terms.append(-torch.log1p(-logp[pos - 1, ids[0, pos]].exp()))
    assert count == len(ref_terms) == 6
    assert float(got.detach()) == pytest.approx(float(torch.stack(ref_terms).mean()), rel=1e-5)
    zero, n = U.unlikelihood_loss(model, [[eot, 1]], [[2, 3, 4]], 2, eot)
    assert n == 0 and float(zero) == 0.0


def test_token_unlikelihood_matches_a_loop_over_positions_and_stories(tiny, decoder_tokenizer):
    """Candidates are the tokens seen earlier in the same story (reset at <|endoftext|>), the target excluded; the
    next-token part equals HF's own loss."""
    spec, model = tiny
    eot = tokenizers.end_of_text_id(decoder_tokenizer)
    ids = torch.tensor([[5, 6, 5, 7, eot, 6, 8, 6, 6], [9, 9, 10, eot, eot, 9, 11, 9, 10]])
    model.eval()
    mle, ul = U.token_unlikelihood_losses(model, ids, eot)
    with torch.no_grad():
        out = model(input_ids=ids, labels=ids)
        logp = torch.log_softmax(out.logits.float(), -1)
    assert float(mle.detach()) == pytest.approx(float(out.loss), rel=1e-5)
    terms, story = [], None
    for b in range(ids.shape[0]):
        for t in range(ids.shape[1] - 1):
            start = max([s + 1 for s in range(t + 1) if ids[b, s] == eot], default=0)
            cands = {int(x) for x in ids[b, start : t + 1]} - {int(ids[b, t + 1])}
            terms += [-torch.log1p(-logp[b, t, c].exp()) for c in cands]
            if b == 0 and t == 4:
                story = cands  # right after the <|endoftext|>: nothing seen yet in the new story
    assert story == set()
    assert float(ul.detach()) == pytest.approx(float(torch.stack(terms).sum()) / (ids.shape[0] * (ids.shape[1] - 1)), rel=1e-5)


def test_a_step_on_the_loss_lowers_the_penalised_probabilities(tiny, decoder_tokenizer):
    spec, model = tiny
    eot = tokenizers.end_of_text_id(decoder_tokenizer)
    m = decoder.build_decoder(spec, seed=5, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot)
    m.load_state_dict(model.state_dict())
    prompts, conts = [[eot, 10]], [[20, 21, 20, 21, 20, 21]]
    before, _ = U.unlikelihood_loss(m.train(), prompts, conts, 2, eot)
    before.backward()
    with torch.no_grad():
        for p in m.parameters():
            p -= 0.05 * p.grad
    after, _ = U.unlikelihood_loss(m, prompts, conts, 2, eot)
    assert float(after.detach()) < float(before.detach())


def _decoder_folder(tmp_path, spec, model, tok, real_stories):
    """A finished 'plain training' folder as notebook 02 leaves it: best/ and train_state.json."""
    out = tmp_path / "decoders" / "tiny"
    (out / "best").mkdir(parents=True)
    model.save_pretrained(out / "best")
    tok.save_pretrained(out / "best")
    (out / "train_state.json").write_text(json.dumps({"extra": {"fingerprint": "plain-1"}}))
    train = recipes.encode_blocks(tok, real_stories[:200], spec.context)
    valid = recipes.encode_blocks(tok, real_stories[200:260], spec.context, max_blocks=4)
    cfg = TrainConfig(steps=1, batch_size=4, precision="fp32", device="cpu", weight_decay=0.1)
    run = recipes.DecoderRun("tiny", tok, train, valid, spec, cfg, 0, 0.0)
    return out, run


def test_finetune_decoder_replaces_best_keeps_the_plain_model_and_skips(tmp_path, tiny, decoder_tokenizer, real_stories):
    spec, model = tiny
    out, run = _decoder_folder(tmp_path, spec, model, decoder_tokenizer, real_stories)
    cfg = U.UnlikelihoodConfig(steps=3, batch_size=4, rollout_tokens=24, mle_batch=2, probe_every=1, probe_prompts=6,
                               probe_tokens=24, lr=1e-2)
    assert U.finetune_decoder(out, run, real_stories[:200], real_stories[300:], U.UnlikelihoodConfig(steps=0)) is None
    logs = []
    res = U.finetune_decoder(out, run, real_stories[:200], real_stories[300:], cfg, progress=False, log=logs.append)
    assert [h["step"] for h in res.history] == [0, 1, 2, 3]
    assert all(0 <= h["loops"] <= 1 and 0 <= h["ended"] <= 1 and h["valid loss"] > 0 for h in res.history)
    assert all(h["healthy"] <= min(h["ended"], 1 - h["loops"]) + 1e-9 for h in res.history)
    chosen = res.after
    assert all((-chosen["healthy"], chosen["valid loss"]) <= (-h["healthy"], h["valid loss"]) for h in res.history)
    plain = decoder.load_decoder(out / "mle-best").state_dict()
    tuned = decoder.load_decoder(out / "best").state_dict()
    assert all(torch.equal(plain[k], model.state_dict()[k]) for k in plain)  # the plain model, untouched
    same = all(torch.equal(plain[k], tuned[k]) for k in plain)
    assert same == (res.chosen_step == 0)
    marker = json.loads((out / "unlikelihood.json").read_text())
    assert marker["chosen_step"] == res.chosen_step and len(marker["history"]) == 4
    # best/ has a card of its own (fine-tuned, from ../mle-best), front matter the Hub's reader parses
    from huggingface_hub import ModelCard

    hub = ModelCard.load(out / "best" / "README.md")
    assert "repetition-finetuned" in hub.data.tags and hub.data.library_name == "transformers"
    assert {r.metric_type for r in hub.data.eval_results} == {"loss", "accuracy"}
    text = (out / "best" / "README.md").read_text()
    assert "../mle-best" in text and f"kept step {res.chosen_step:,} of" in text and "training seed:" in text
    assert json.loads((out / "best" / "tokenizer_config.json").read_text())["model_max_length"] == spec.context
    # a rerun with the same inputs skips; other params start again from the plain model, not the fine-tuned one
    again = U.finetune_decoder(out, run, real_stories[:200], real_stories[300:], cfg, progress=False, log=logs.append)
    assert "[skip]" in logs[-1] and again.history == res.history
    other = U.finetune_decoder(out, run, real_stories[:200], real_stories[300:],
                               U.UnlikelihoodConfig(**{**cfg.__dict__, "steps": 1}), progress=False, log=logs.append)
    assert other.history[0] == res.history[0]  # probe of the starting model: the plain one again
    # plain training redone (new fingerprint): the old plain copy is dropped, best/ is the new source
    (out / "train_state.json").write_text(json.dumps({"extra": {"fingerprint": "plain-2"}}))
    U.finetune_decoder(out, run, real_stories[:200], real_stories[300:], cfg, progress=False, log=logs.append)
    assert (out / "mle-best" / "mle_fingerprint.txt").read_text() == "plain-2"


def test_config_is_checked():
    with pytest.raises(ValueError):
        U.UnlikelihoodConfig(steps=-1)
    with pytest.raises(ValueError):
        U.UnlikelihoodConfig(steps=10, lr=0)
    with pytest.raises(ValueError, match="schedule"):
        U.UnlikelihoodConfig(steps=10, schedule="linear")
    with pytest.raises(ValueError):
        U.UnlikelihoodConfig(steps=10, token_alpha=-1.0)


def test_a_phase_with_token_level_unlikelihood_logs_it(tmp_path, tiny, decoder_tokenizer, real_stories):
    spec, model = tiny
    _, run = _decoder_folder(tmp_path, spec, model, decoder_tokenizer, real_stories)
    m = decoder.build_decoder(spec, seed=5, bos_token_id=model.config.eos_token_id,
                              eos_token_id=model.config.eos_token_id, pad_token_id=model.config.eos_token_id)
    m.load_state_dict(model.state_dict())
    ids = [decoder_tokenizer(s[:200]).input_ids for s in real_stories[:40]]
    cfg = U.UnlikelihoodConfig(steps=2, batch_size=4, rollout_tokens=8, mle_batch=2, probe_every=1, probe_tokens=8,
                               token_alpha=1.0)
    res = U.finetune(m, decoder_tokenizer, ids, run.train_data, ids[:6], None, cfg, progress=False, device="cpu")
    assert [h["step"] for h in res.history] == [0, 1, 2]
    assert all(h["token unlikelihood"] > 0 for h in res.history[1:])
    plain = U.finetune(m, decoder_tokenizer, ids, run.train_data, ids[:6], None,
                       U.UnlikelihoodConfig(**{**cfg.__dict__, "token_alpha": 0.0}), progress=False, device="cpu")
    assert all("token unlikelihood" not in h for h in plain.history)


def test_phase_lr_is_constant_or_a_cosine_down_to_zero():
    const = U.UnlikelihoodConfig(steps=100, lr=1e-4)
    assert [U.phase_lr(const, s) for s in (0, 50, 99)] == [1e-4] * 3
    cos = U.UnlikelihoodConfig(steps=100, lr=1e-4, schedule="cosine")
    lrs = [U.phase_lr(cos, s) for s in range(100)]
    assert lrs[0] == pytest.approx(1e-4) and lrs[50] == pytest.approx(5e-5)
    assert U.phase_lr(cos, 100) == pytest.approx(0.0, abs=1e-20)
    assert all(a > b for a, b in zip(lrs, lrs[1:]))  # strictly decreasing, never negative
    assert min(lrs) > 0


def test_the_checkpoint_kept_is_the_healthiest_not_the_least_looping():
    """Fewer loops bought by no longer ending the stories is not progress: the choice counts continuations that
    end without a loop (the numbers of a real probe history of a small budget)."""
    start = {"step": 0, "ended": 0.88, "loops": 0.72, "healthy": 0.25, "valid loss": 3.48}
    early = {"step": 25, "ended": 0.89, "loops": 0.62, "healthy": 0.33, "valid loss": 3.50}
    late = {"step": 125, "ended": 0.50, "loops": 0.55, "healthy": 0.20, "valid loss": 3.44}
    assert U.healthier_probe(early, start) and not U.healthier_probe(late, early) and not U.healthier_probe(late, start)
    tie = {**early, "valid loss": 3.49}
    assert U.healthier_probe(tie, early)


def test_the_phase_stops_after_patience_probes_without_a_healthier_checkpoint(tmp_path, tiny, decoder_tokenizer,
                                                                              real_stories, monkeypatch):
    """Scripted probes (healthy 0.2, 0.3, 0.25, 0.1, 0.9, ...) with patience 2: the best is step 1, steps 2 and 3
    are no better, so the phase ends at step 3 (step 4's better probe is never reached) and the model is step 1's."""
    spec, model = tiny
    _, run = _decoder_folder(tmp_path, spec, model, decoder_tokenizer, real_stories)
    m = decoder.build_decoder(spec, seed=5, bos_token_id=model.config.eos_token_id,
                              eos_token_id=model.config.eos_token_id, pad_token_id=model.config.eos_token_id)
    m.load_state_dict(model.state_dict())
    script, states = iter([0.2, 0.3, 0.25, 0.1, 0.9, 0.9, 0.9]), []

    def scripted(model, *args, **kwargs):
        states.append({k: v.clone() for k, v in model.state_dict().items()})
        h = next(script)
        return {"ended": 1.0, "loops": 1 - h, "healthy": h, "probe prompts": 6, "valid loss": 3.0}

    monkeypatch.setattr(U, "probe", scripted)
    ids = [decoder_tokenizer(s[:200]).input_ids for s in real_stories[:40]]
    cfg = U.UnlikelihoodConfig(steps=6, batch_size=4, rollout_tokens=8, mle_batch=2, probe_every=1, patience=2, lr=1e-2)
    res = U.finetune(m, decoder_tokenizer, ids, run.train_data, ids[:6], None, cfg, progress=False, device="cpu")
    assert [h["step"] for h in res.history] == [0, 1, 2, 3]
    assert res.stopped_early and res.steps == 3 and res.chosen_step == 1
    assert all(torch.equal(v, states[1][k]) for k, v in m.state_dict().items())
    assert not torch.equal(states[1]["lm_head.weight"], states[3]["lm_head.weight"])  # training went on after it
    # patience 0 (the default) runs every step
    script, states = iter([0.2, 0.3, 0.25, 0.1, 0.9, 0.9, 0.9]), []
    full = U.finetune(m, decoder_tokenizer, ids, run.train_data, ids[:6], None,
                      U.UnlikelihoodConfig(**{**cfg.__dict__, "patience": 0}), progress=False, device="cpu")
    assert not full.stopped_early and full.steps == 6 and full.chosen_step == 4
    with pytest.raises(ValueError):
        U.UnlikelihoodConfig(steps=10, patience=-1)


def test_history_rows_flag_the_kept_probe_and_carry_wilson_intervals():
    res = U.UnlikelihoodResult("tiny-1M", 50, 25, 1.0, [
        {"step": 0, "ended": 0.5, "loops": 0.75, "healthy": 0.25, "probe prompts": 64, "valid loss": 3.0},
        {"step": 25, "ended": 1.0, "loops": 0.25, "healthy": 0.75, "probe prompts": 64, "valid loss": 3.1}])
    rows = U.history_rows({"tiny-1M": res, "tiny-125k": None})
    assert [(r["budget"], r["step"], r["chosen"]) for r in rows] == [("tiny-1M", 0, False), ("tiny-1M", 25, True)]
    for r in rows:
        for key in ("loops", "ended"):
            assert 0 <= r[f"{key} low"] <= r[key] <= r[f"{key} high"] <= 1
    # 48 of 64: the Wilson interval 0.63-0.84, not the normal approximation's 0.64-0.86
    assert (round(rows[0]["loops low"], 2), round(rows[0]["loops high"], 2)) == (0.63, 0.84)
    assert rows[1]["ended high"] == 1.0 and rows[1]["ended low"] < 1.0
    assert U.used_valid_losses({"tiny-1M": res, "tiny-125k": None}) == {"tiny-1M": 3.1}  # the kept probe's loss


def test_decoder_rows_report_the_plain_run_and_the_model_used(tmp_path, tiny, decoder_tokenizer, real_stories):
    """Notebook 02's table: plain training's numbers from its result, the held-out loss of the model used from the
    repetition phase where it ran, and the official-validation loss of ``best/`` (the model every notebook loads)."""
    from helpers.training.loop import TrainResult, evaluate

    spec, model = tiny
    out, run = _decoder_folder(tmp_path, spec, model, decoder_tokenizer, real_stories)
    res = TrainResult(str(out), steps=8, tokens_seen=8 * 4 * spec.context, best_valid_loss=4.5, best_step=6,
                      final_valid_loss=4.6, seconds=90.0, stopped_early=8)
    text = " ".join(real_stories[-60:])
    rows = recipes.decoder_rows({"tiny": res}, {"tiny": run}, tmp_path, text, 3, used_valid_loss={"tiny": 4.7})
    (row,) = rows
    assert (row["budget"], row["best step"], row["last step"], row["stopped early"]) == ("tiny", 6, 8, "yes")
    assert row["best valid loss"] == 4.5 and row["valid perplexity"] == pytest.approx(90.0171, rel=1e-5)
    assert row["held-out loss of the model used"] == 4.7 and row["wall time (min)"] == 1.5
    assert row["parameters"] == decoder.count_parameters(model) and row["precision"] == "fp32"
    official = recipes.encode_blocks(decoder_tokenizer, [text], spec.context, max_blocks=3)
    assert row["official valid loss"] == pytest.approx(evaluate(model, official, 4), rel=1e-5)
    plain_only = recipes.decoder_rows({"tiny": res}, {"tiny": run}, tmp_path, text, 3)
    assert plain_only[0]["held-out loss of the model used"] == 4.5  # no repetition phase: the plain best


def test_finetune_decoders_runs_each_budget_largest_first_and_returns_them_in_order(tmp_path, tiny, decoder_tokenizer,
                                                                                   real_stories, monkeypatch):
    """Notebook 02's phase over its budgets: each decoder folder is fine-tuned from its own stories
    (``data/<name>.jsonl``) with probes from ``data/tiny-valid.jsonl``; the longest job is handed out first."""
    spec, model = tiny
    runs = {}
    for name, n in (("small", 60), ("large", 200)):
        out, run = _decoder_folder(tmp_path / name, spec, model, decoder_tokenizer, real_stories)
        run.train_data = recipes.encode_blocks(decoder_tokenizer, real_stories[:n], spec.context)
        run.name = run.budget = name  # as notebook 02's plan names a budget's run
        target = tmp_path / "decoders" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        out.rename(target)
        runs[name] = run
    (tmp_path / "data").mkdir()
    for name, stories in (("small", real_stories[:60]), ("large", real_stories[:200]), ("tiny-valid", real_stories[300:])):
        (tmp_path / "data" / f"{name}.jsonl").write_text(
            "".join(json.dumps({"id": f"{name}-{i}", "text": s}) + "\n" for i, s in enumerate(stories)))
    seen = []
    real_run_jobs = U.run_jobs

    def spy(fn, jobs, workers, **kw):
        seen.append((list(jobs), workers))
        return real_run_jobs(fn, jobs, workers, **kw)

    monkeypatch.setattr(U, "run_jobs", spy)
    cfg = U.UnlikelihoodConfig(steps=1, batch_size=4, rollout_tokens=16, mle_batch=2, probe_every=1, probe_prompts=4,
                               probe_tokens=16, lr=1e-2)
    res = U.finetune_decoders(tmp_path, runs, cfg, workers=1)
    assert list(res) == ["small", "large"] and seen == [(["large", "small"], 1)]
    assert all(r.steps == 1 and (tmp_path / "decoders" / n / "unlikelihood.json").is_file() for n, r in res.items())
    alone = U.finetune_decoder(tmp_path / "decoders" / "large", runs["large"], real_stories[:200], real_stories[300:],
                               cfg, progress=False, log=lambda _m: None)  # the same inputs: skipped, same history
    assert alone.history == res["large"].history
    off = U.finetune_decoders(tmp_path, runs, U.UnlikelihoodConfig(steps=0), workers=2)
    assert off == {"small": None, "large": None} and seen[-1][1] == 1  # nothing to run: no worker processes


def test_a_seed_replicate_reads_its_budgets_stories_and_draws_its_own_prompts():
    from types import SimpleNamespace
    cfg = U.UnlikelihoodConfig(seed=3)
    base = SimpleNamespace(name="b", budget="b", cfg=SimpleNamespace(seed=42))
    twin = SimpleNamespace(name="b (seed 7)", budget="b", cfg=SimpleNamespace(seed=7))
    assert U._budget(twin, "b (seed 7)") == "b" and U._budget(base, "b") == "b"
    assert U._seeded(cfg, base, "b") is cfg  # the budget's own run keeps the profile's prompts
    assert U._seeded(cfg, twin, "b (seed 7)").seed == 10 and cfg.seed == 3


def test_too_few_prompts_say_which_setting_to_change(tiny, decoder_tokenizer):
    spec, model = tiny
    cfg = U.UnlikelihoodConfig(steps=1, batch_size=4)
    with pytest.raises(ValueError, match=r"tiny-1M: repetition fine-tuning found 3 training prompts for a batch of 4: "
                                         r"only stories of 20-300 words .*at most 3"):
        U.finetune(model, decoder_tokenizer, [[1, 2]] * 3, None, [[1]], None, cfg, name="tiny-1M", progress=False)
