"""The training loop: parameter groups, schedule, deterministic data order, bitwise resume (also after SIGKILL),
divergence handling, config checks, and DDP on CPU (two processes under torch.distributed.run, gloo).

The model, data and config come from tests/train_worker.py, which the multi-process tests run as a script."""
from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import transformers

import helpers
from helpers.data.blocks import PackedBlocks, pack_blocks
from helpers.models.decoder import build_decoder, count_parameters
from helpers.training.loop import (
    TrainConfig,
    TrainingDiverged,
    lm_loss,
    read_metrics,
    train,
)
from helpers.training.optim import cosine_schedule, param_group_names, param_groups

sys.path.insert(0, str(Path(__file__).parent))
import train_worker as W  # noqa: E402

transformers.logging.set_verbosity_error()

WORKER = Path(__file__).parent / "train_worker.py"
SRC = Path(helpers.__file__).resolve().parents[1]  # subprocesses import the helpers this process tests


@pytest.fixture(autouse=True)
def one_thread():
    """Bitwise comparisons with subprocesses need the same intra-op thread count (train_worker.THREADS); tiny
    models also run fastest on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(W.THREADS)
    yield
    torch.set_num_threads(before)


def _run(out, cfg=None, dropout=0.1, **kw):
    model = W.make_model(dropout)
    tr, va = W.make_data()
    res = train(model, tr, va, out, cfg or W.make_config(), progress=False, **kw)
    return model, res


def _assert_same_weights(a: dict, b: dict):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs"


def _metric_rows(path):
    """(step, split, loss, lr, grad_norm) of each row: everything but timings."""
    return [(r["step"], r["split"], r["loss"], r.get("lr"), r.get("grad_norm")) for r in read_metrics(path)]


# ----------------------------------------------------------------------------- parameter groups


def test_param_groups_on_gpt_neo():
    layers = 3
    model = build_decoder(dict(hidden=32, layers=layers, heads=4, context=32, window=8, vocab_size=50), seed=0)
    assert model.lm_head.weight is model.transformer.wte.weight
    decay, no_decay = param_group_names(model)
    h = "transformer.h.{}."
    expected_decay = {h.format(i) + n for i in range(layers) for n in (
        "attn.attention.q_proj.weight", "attn.attention.k_proj.weight", "attn.attention.v_proj.weight",
        "attn.attention.out_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")}
    expected_no_decay = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight",
                         "transformer.ln_f.bias"} | {h.format(i) + n for i in range(layers) for n in (
        "ln_1.weight", "ln_1.bias", "ln_2.weight", "ln_2.bias",
        "attn.attention.out_proj.bias", "mlp.c_fc.bias", "mlp.c_proj.bias")}
    assert len(decay) == len(set(decay)) and len(no_decay) == len(set(no_decay))
    assert set(decay) == expected_decay
    assert set(no_decay) == expected_no_decay
    assert not any("lm_head" in n for n in decay + no_decay)  # the tied head is wte, listed once
    assert all(n.endswith(".weight") and "ln_" not in n for n in decay)
    assert all(("ln_" in n) or n.endswith(".bias") or n.split(".")[-2] in ("wte", "wpe") for n in no_decay)
    groups = param_groups(model, 0.25)
    assert [g["weight_decay"] for g in groups] == [0.25, 0.0]
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids))  # no tensor in two groups (AdamW would refuse it anyway)
    assert sum(p.numel() for g in groups for p in g["params"]) == count_parameters(model)
    assert any(p is model.lm_head.weight for p in groups[1]["params"])  # the head is not decayed


def test_param_groups_skip_frozen_parameters():
    model = build_decoder(dict(hidden=16, layers=1, heads=2, context=16, window=4, vocab_size=20), seed=0)
    model.transformer.wpe.weight.requires_grad_(False)
    decay, no_decay = param_group_names(model)
    assert "transformer.wpe.weight" not in decay + no_decay


# ----------------------------------------------------------------------------- schedule


def test_cosine_schedule_values():
    total, warm, floor = 1000, 16, 0.1
    assert cosine_schedule(0, total, warm, floor) == pytest.approx(1 / warm)  # warm-up starts above zero
    assert cosine_schedule(7, total, warm, floor) == pytest.approx(8 / warm)
    assert cosine_schedule(warm - 1, total, warm, floor) == pytest.approx(1.0)  # peak at the end of warm-up
    assert cosine_schedule(warm, total, warm, floor) == pytest.approx(1.0)
    mid = warm + (total - warm) // 2
    assert cosine_schedule(mid, total, warm, floor) == pytest.approx(floor + (1 - floor) / 2)
    assert cosine_schedule(total, total, warm, floor) == pytest.approx(floor)  # end = min ratio
    assert cosine_schedule(total + 50, total, warm, floor) == pytest.approx(floor)  # and stays there
    values = [cosine_schedule(s, total, warm, floor) for s in range(total + 1)]
    assert all(a <= b for a, b in zip(values[:warm], values[1:warm]))
    assert all(a >= b for a, b in zip(values[warm:], values[warm + 1 :]))
    assert min(values[warm:]) == pytest.approx(floor) and max(values) == pytest.approx(1.0)
    assert cosine_schedule(0, 10, 0, 0.0) == 1.0  # no warm-up
    cfg = TrainConfig(steps=15_000, warmup=0.016)
    assert cfg.warmup_steps == 240  # the paper's 1.6 % of 15,000
    assert TrainConfig(steps=100, warmup=7).warmup_steps == 7


def test_learning_rate_follows_schedule_in_training(tmp_path):
    cfg = W.make_config(steps=20, save_every=20, eval_every=20)
    _, res = _run(tmp_path, cfg)
    lrs = {r["step"]: r["lr"] for r in res.history if r["split"] == "train"}
    floor = cfg.min_lr / cfg.lr
    # the row of step s (after s optimizer steps) reports the lr of the next step
    for s, lr in lrs.items():
        assert lr == pytest.approx(cfg.lr * cosine_schedule(s, cfg.steps, cfg.warmup_steps, floor))
    assert lrs[cfg.steps] == pytest.approx(cfg.min_lr)


# ----------------------------------------------------------------------------- data


def test_pack_blocks_keeps_stream_order():
    lists = [[1, 2, 3], [4], [], [5, 6, 7, 8, 9], [10, 11]]
    blocks = pack_blocks(lists, 4)
    assert blocks.dtype == torch.int64 and blocks.shape == (2, 4)
    assert blocks.flatten().tolist() == list(range(1, 9))  # in order, remainder (9, 10, 11) dropped
    with pytest.raises(ValueError, match="not enough"):
        pack_blocks([[1, 2]], 4)
    with pytest.raises(ValueError, match="> 1"):
        pack_blocks(lists, 1)


def test_every_epoch_visits_each_block_once():
    n, size = 13, 5  # the batch size does not divide the number of blocks: batches straddle epochs
    data = PackedBlocks(torch.arange(n * 3).view(n, 3), seed=11)
    stream = [i for s in range(13) for i in data.indices(s, size)]  # 65 positions = 5 epochs
    epochs = [stream[e * n : (e + 1) * n] for e in range(5)]
    assert all(sorted(e) == list(range(n)) for e in epochs)
    assert len({tuple(e) for e in epochs}) > 1  # reshuffled every epoch
    rows = torch.cat([data.batch(s, size)["input_ids"] for s in range(13)])
    assert torch.equal(rows, data.blocks[stream])
    assert data.epochs(13, size) == pytest.approx(5.0)
    other = PackedBlocks(data.blocks, seed=12)
    assert [other.indices(s, size) for s in range(3)] != [data.indices(s, size) for s in range(3)]


def test_batch_is_a_pure_function_of_seed_and_step():
    blocks = torch.arange(40 * 2).view(40, 2)
    fresh = {s: PackedBlocks(blocks, seed=3).batch(s, 6)["input_ids"] for s in (0, 1, 6, 7, 25, 100)}
    used = PackedBlocks(blocks, seed=3)
    for s in (100, 7, 0, 25, 3, 6, 1, 99, 0):  # out of order, epochs visited back and forth
        b = used.batch(s, 6)["input_ids"]
        if s in fresh:
            assert torch.equal(b, fresh[s]), s
    assert torch.equal(used.batch(7, 6)["input_ids"], fresh[7])


def test_rank_slices_partition_the_global_batch():
    data = PackedBlocks(torch.arange(30 * 4).view(30, 4), seed=5)
    for step in (0, 4, 9):
        full = data.batch(step, 12)["input_ids"]
        for world in (1, 2, 3, 4):
            parts = [data.batch(step, 12, rank, world)["input_ids"] for rank in range(world)]
            assert all(len(p) == 12 // world for p in parts)
            assert torch.equal(torch.cat(parts), full)
    with pytest.raises(ValueError, match="divisible"):
        data.batch(0, 10, 0, 3)


def test_eval_batches_cover_every_block_once():
    data = PackedBlocks(torch.arange(7 * 2).view(7, 2), seed=0)
    assert torch.equal(torch.cat([b["input_ids"] for b in data.eval_batches(3)]), data.blocks)


# ----------------------------------------------------------------------------- determinism and resume


def test_two_fresh_runs_are_bitwise_identical(tmp_path, one_thread):
    cfg = W.make_config(steps=15, save_every=5)
    a, ra = _run(tmp_path / "a", cfg)
    b, rb = _run(tmp_path / "b", cfg)
    _assert_same_weights(a.state_dict(), b.state_dict())
    assert _metric_rows(tmp_path / "a" / "metrics.jsonl") == _metric_rows(tmp_path / "b" / "metrics.jsonl")
    assert ra.steps == 15 and ra.tokens_seen == 15 * cfg.batch_size * W.BLOCK and ra.resumed_from is None
    c, _ = _run(tmp_path / "c", W.make_config(steps=15, save_every=5, seed=4))
    assert not torch.equal(a.transformer.h[0].mlp.c_fc.weight, c.transformer.h[0].mlp.c_fc.weight)
    # artefacts: the best model is a plain HF checkpoint, the run summary is written
    best = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "a" / "best")
    info = json.loads((tmp_path / "a" / "best" / "best.json").read_text())
    card = (tmp_path / "a" / "best" / "README.md").read_text()  # the model card beside the weights
    assert card.startswith("---\n") and "\n# a\n" in card and "AutoModelForCausalLM.from_pretrained(folder)" in card
    from huggingface_hub import ModelCard  # the Hub's own reader parses the front matter

    hub = ModelCard.load(tmp_path / "a" / "best" / "README.md")
    assert hub.data.library_name == "transformers" and hub.data.language == "en" and hub.data.license == "other"
    assert hub.data.eval_results[0].metric_value == pytest.approx(info["valid_loss"], abs=1e-6)
    assert f"training seed: {cfg.seed}" in card and "revision `" in card and "code digest `" in card
    assert f"step {info['step']:,} of" in card and f"validation loss {info['valid_loss']:.4f} nats" in card
    assert info["step"] == ra.best_step and info["valid_loss"] == pytest.approx(ra.best_valid_loss)
    assert ra.best_valid_loss <= ra.final_valid_loss and math.isfinite(ra.best_valid_loss)
    assert type(best).__name__ == "GPTNeoForCausalLM"
    summary = json.loads((tmp_path / "a" / "train_state.json").read_text())
    assert summary["steps"] == 15 and summary["config"]["seed"] == cfg.seed


def test_stop_and_resume_in_process_is_bitwise_identical(tmp_path, one_thread):
    """Interrupted between checkpoints (step 7, last checkpoint at 5): the resumed run redoes 6..7."""
    cfg = W.make_config(steps=15, save_every=5)
    ref, _ = _run(tmp_path / "ref", cfg)
    _, part = _run(tmp_path / "run", cfg, stop_after=7)
    assert part.steps == 7 and not (tmp_path / "run" / "train_state.json").exists()
    resumed, res = _run(tmp_path / "run", cfg)
    assert res.resumed_from == 5 and res.steps == 15
    _assert_same_weights(ref.state_dict(), resumed.state_dict())
    assert _metric_rows(tmp_path / "ref" / "metrics.jsonl") == _metric_rows(tmp_path / "run" / "metrics.jsonl")
    again, res2 = _run(tmp_path / "run", cfg)  # a finished run: nothing more to do
    assert res2.resumed_from == 15
    _assert_same_weights(ref.state_dict(), again.state_dict())


def _worker_env(**extra: str) -> dict:
    """The environment of a worker subprocess: the project's src/ first, the caller's PYTHONPATH kept (a machine
    whose packages come from PYTHONPATH must still find them)."""
    path = os.pathsep.join([str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "PYTHONPATH": path, "TOKENIZERS_PARALLELISM": "false", **extra}


def test_resume_after_sigkill(tmp_path, one_thread):
    """Kill -9 a training process mid-run, rerun it: same final weights as an uninterrupted run, and the
    metrics log has every step once."""
    out = tmp_path / "killed"
    env = _worker_env()
    proc = subprocess.Popen([sys.executable, str(WORKER), str(out), "--steps", "60", "--save-every", "5",
                             "--sleep", "0.03"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    step_file = out / "checkpoint" / "step.json"
    deadline = time.time() + 120
    killed_at = None
    try:
        while time.time() < deadline and proc.poll() is None:
            try:
                step = json.loads(step_file.read_text())["step"]
            except (OSError, ValueError, KeyError):
                step = 0
            if step >= 15:
                time.sleep(0.07)  # land between checkpoints (or inside one)
                os.kill(proc.pid, signal.SIGKILL)
                killed_at = step
                break
            time.sleep(0.005)
    finally:
        if proc.poll() is None and killed_at is None:
            proc.kill()
        output = proc.communicate(timeout=60)[0].decode(errors="replace")
    assert killed_at is not None, f"the worker ended before it could be killed (rc {proc.returncode}):\n{output[-3000:]}"
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "train_state.json").exists()
    on_disk = json.loads(step_file.read_text())["step"]
    assert 15 <= on_disk < 60 and on_disk % 5 == 0

    cfg = W.make_config(60, 5)
    resumed, res = _run(out, cfg, loss_fn=W.slow_loss(0.0))
    assert res.resumed_from == on_disk and res.steps == 60
    ref, _ = _run(tmp_path / "ref", cfg)
    _assert_same_weights(ref.state_dict(), resumed.state_dict())

    rows = read_metrics(out / "metrics.jsonl")
    for split in ("train", "valid"):
        steps = [r["step"] for r in rows if r["split"] == split]
        assert len(steps) == len(set(steps)), f"duplicated {split} steps in metrics.jsonl"
        assert steps == sorted(steps)
    assert [r["step"] for r in rows if r["split"] == "train"] == list(range(1, 61))
    assert _metric_rows(out / "metrics.jsonl") == _metric_rows(tmp_path / "ref" / "metrics.jsonl")


def test_nan_loss_raises_and_keeps_last_good_checkpoint(tmp_path, one_thread):
    cfg = W.make_config(steps=20, save_every=4)
    bad_step = 10
    calls = {"n": 0}

    def nan_at(model, batch):
        loss = lm_loss(model, batch)
        if model.training:
            calls["n"] += 1
            if calls["n"] - 1 == bad_step:
                return loss * float("nan")
        return loss

    with pytest.raises(TrainingDiverged, match=r"at step 10 .*step 8"):
        _run(tmp_path, cfg, loss_fn=nan_at)
    ck = torch.load(tmp_path / "checkpoint" / "state.pt", map_location="cpu", weights_only=False)
    assert ck["state"]["step"] == 8 < bad_step
    assert json.loads((tmp_path / "checkpoint" / "step.json").read_text())["step"] == 8
    assert all(torch.isfinite(v).all() for v in ck["model"].values() if v.is_floating_point())
    fresh = W.make_model()
    fresh.load_state_dict(ck["model"])  # loadable
    assert not (tmp_path / "train_state.json").exists()
    # the kept checkpoint is exactly the step-8 state: resuming with a sane loss gives the uninterrupted result
    resumed, res = _run(tmp_path, cfg)
    assert res.resumed_from == 8
    ref, _ = _run(tmp_path / "ref", cfg)
    _assert_same_weights(ref.state_dict(), resumed.state_dict())


class _InfGrad(torch.autograd.Function):
    """Value 0, gradient +inf: a finite loss whose update would turn every weight into NaN."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sum() * 0

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.full_like(x, math.inf)


def test_non_finite_gradients_diverge_before_the_update(tmp_path):
    """Step 7's loss is finite but its gradients are not: the run must stop there, before the update and before
    the checkpoint of step 8 could save poisoned weights."""
    cfg = W.make_config(steps=12, save_every=4)
    calls = {"n": 0}

    def inf_grad_at_7(model, batch):
        loss = lm_loss(model, batch)
        if model.training:
            calls["n"] += 1
            if calls["n"] - 1 == 7:
                loss = loss + _InfGrad.apply(model.transformer.h[0].mlp.c_fc.weight)
        return loss

    with pytest.raises(TrainingDiverged, match=r"gradient norm became (inf|nan) at step 7"):
        _run(tmp_path, cfg, loss_fn=inf_grad_at_7)
    ck = torch.load(tmp_path / "checkpoint" / "state.pt", map_location="cpu", weights_only=False)
    assert ck["state"]["step"] == 4
    assert all(torch.isfinite(v).all() for v in ck["model"].values() if v.is_floating_point())


def test_inf_loss_also_diverges(tmp_path):
    cfg = W.make_config(steps=5, save_every=5)
    with pytest.raises(TrainingDiverged, match="inf"):
        _run(tmp_path, cfg, loss_fn=lambda m, b: lm_loss(m, b) + float("inf"))
    assert not (tmp_path / "checkpoint").exists()


def test_resume_with_a_different_config_is_refused(tmp_path):
    cfg = W.make_config(steps=10, save_every=3)
    _run(tmp_path, cfg, stop_after=4)
    with pytest.raises(ValueError, match="different training config"):
        _run(tmp_path, W.make_config(steps=10, save_every=3, lr=1e-3))
    with pytest.raises(ValueError, match="different training config"):
        _run(tmp_path, W.make_config(steps=20, save_every=3))
    _, res = _run(tmp_path, cfg)  # the same config still resumes
    assert res.resumed_from == 3 and res.steps == 10


def test_train_config_validation():
    with pytest.raises(ValueError, match="positive"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="micro_batch"):
        TrainConfig(batch_size=8, micro_batch=3)
    assert TrainConfig(betas=[0.9, 0.95]).betas == (0.9, 0.95)


def test_gradient_accumulation_matches_full_batch(tmp_path, one_thread):
    """micro_batch only changes how a step is computed, not the step (dropout off; up to float rounding)."""
    full, _ = _run(tmp_path / "full", W.make_config(steps=6, save_every=6), dropout=0.0)
    acc, _ = _run(tmp_path / "acc", W.make_config(steps=6, save_every=6, micro_batch=2), dropout=0.0)
    for (k, a), b in zip(full.state_dict().items(), acc.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=k)


# ----------------------------------------------------------------------------- DDP


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_ddp_two_processes_match_single_process(tmp_path, one_thread):
    steps = 8
    dump = tmp_path / "rank{rank}.pt"
    env = _worker_env(OMP_NUM_THREADS="1")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--nnodes", "1",
           "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
           str(WORKER), str(tmp_path / "ddp"), "--steps", str(steps), "--save-every", "4", "--dropout", "0",
           "--dump", str(dump)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    _assert_same_weights(r0, r1)  # DDP keeps the replicas identical

    single, _ = _run(tmp_path / "single", W.make_config(steps, 4), dropout=0.0)
    init = W.make_model(0.0).state_dict()
    for k, v in single.state_dict().items():
        torch.testing.assert_close(r0[k], v, rtol=1e-4, atol=1e-6, msg=k)
    assert any(not torch.equal(init[k], r0[k]) for k in init)  # it did train
    # rank 0 alone wrote the files, with the global batch's token count
    summary = json.loads((tmp_path / "ddp" / "train_state.json").read_text())
    assert summary["steps"] == steps and summary["tokens_seen"] == steps * 8 * W.BLOCK
    train_rows = [r for r in read_metrics(tmp_path / "ddp" / "metrics.jsonl") if r["split"] == "train"]
    assert [r["step"] for r in train_rows] == list(range(1, steps + 1))
    ref_rows = [r for r in read_metrics(tmp_path / "single" / "metrics.jsonl") if r["split"] == "train"]
    for a, b in zip(train_rows, ref_rows):  # the logged loss is the global mean over both ranks
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4)


# ----------------------------------------------------------------------------- early stopping and precision


def _scripted_valid_loss(values):
    """A loss function: the LM loss in training, the next value of ``values`` at each evaluation (one batch)."""
    it = iter(values)

    def loss_fn(model, batch):
        if model.training:
            return lm_loss(model, batch)
        return torch.tensor(next(it))

    return loss_fn


def _one_batch_valid():
    tr, va = W.make_data()
    return tr, PackedBlocks(va.blocks[:2], 0)


def test_early_stop_after_the_minimum_keeps_the_best(tmp_path):
    tr, va = _one_batch_valid()
    cfg = W.make_config(steps=20, eval_every=2, save_every=2, stop_patience=2, stop_margin=0.05)
    # evaluations at steps 2, 4, 6, 8, ...: best at step 4, then two evaluations without a new best, the second
    # of them 0.1 above the best: the run stops at step 8
    losses = [3.0, 2.0, 2.02, 2.1, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0]
    res = train(W.make_model(0.0), tr, va, tmp_path, cfg, progress=False, loss_fn=_scripted_valid_loss(losses))
    assert (res.stopped_early, res.steps, res.best_step) == (8, 8, 4)
    assert res.best_valid_loss == pytest.approx(2.0)
    assert json.loads((tmp_path / "best" / "best.json").read_text())["step"] == 4
    state = json.loads((tmp_path / "train_state.json").read_text())
    assert state["stopped_early"] == 8 and state["steps"] == 8
    # a rerun of the finished (stopped) run resumes from its last checkpoint and trains no further
    res2 = train(W.make_model(0.0), tr, va, tmp_path, cfg, progress=False, loss_fn=_scripted_valid_loss([9.0] * 10))
    assert res2.steps == 8 and res2.stopped_early == 8


def test_early_stop_ends_the_progress_bar_at_100_percent_with_the_reason(tmp_path, monkeypatch, capsys):
    """Under papermill a bar left at "8/20 [40 %]" reads like a crash: an early stop closes it full, saying why."""
    from helpers.core import progress as P

    monkeypatch.setenv("STORYBENCH_HEADLESS", "1")
    monkeypatch.setattr(P, "HEADLESS_INTERVAL", 0.0)  # draw at once (the notebooks' bars wait a minute)
    tr, va = _one_batch_valid()
    cfg = W.make_config(steps=20, eval_every=2, save_every=2, stop_patience=2, stop_margin=0.05)
    losses = [3.0, 2.0, 2.02, 2.1, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0]
    train(W.make_model(0.0), tr, va, tmp_path, cfg, progress=True, loss_fn=_scripted_valid_loss(losses))
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "100%" in last and "8/8" in last and "stopped early" in last and "best step 4" in last, last


def test_no_early_stop_within_the_margin_or_without_patience(tmp_path):
    tr, va = _one_batch_valid()
    flat = [2.0, 1.99, 2.0, 2.01, 2.0, 2.02, 2.0, 2.0, 2.0, 2.0, 2.0]
    cfg = W.make_config(steps=20, eval_every=2, save_every=10, stop_patience=2, stop_margin=0.05)
    res = train(W.make_model(0.0), tr, va, tmp_path / "a", cfg, progress=False, loss_fn=_scripted_valid_loss(flat))
    assert res.stopped_early is None and res.steps == 20
    cfg = W.make_config(steps=20, eval_every=2, save_every=10)
    rising = [1.0] + [9.0] * 10
    res = train(W.make_model(0.0), tr, va, tmp_path / "b", cfg, progress=False, loss_fn=_scripted_valid_loss(rising))
    assert res.stopped_early is None and res.steps == 20


def test_precision_config_is_validated():
    with pytest.raises(ValueError, match="precision"):
        TrainConfig(precision="fp16")
    with pytest.raises(ValueError, match="stop_patience"):
        TrainConfig(stop_patience=0)


def test_bf16_autocast_step_is_close_to_fp32():
    """One training step's loss and gradients under bf16 autocast against fp32 (bf16 keeps 8 bits of mantissa:
    tolerance 2 % on the loss, cosine similarity > 0.98 of every weight matrix's gradient). Runs everywhere: on
    CPUs without native bf16 PyTorch emulates it (slowly, hence ``precision: auto`` picks fp32 there)."""
    from precision_check import assert_bf16_step_close_to_fp32

    tr, _ = W.make_data()
    batch = tr.batch(0, 4)
    assert_bf16_step_close_to_fp32(lambda: W.make_model(0.0), lambda m: lm_loss(m, batch))


def test_training_in_bf16_learns_like_fp32(tmp_path):
    tr, va = W.make_data()
    cfg32 = W.make_config(steps=12, save_every=12, eval_every=12)
    _, r32 = _run(tmp_path / "fp32", cfg32, dropout=0.0)
    cfg16 = W.make_config(steps=12, save_every=12, eval_every=12, precision="bf16")
    _, r16 = _run(tmp_path / "bf16", cfg16, dropout=0.0)
    first = [r for r in r32.history if r["split"] == "train"][0]["loss"]
    assert r16.best_valid_loss == pytest.approx(r32.best_valid_loss, rel=0.03)
    assert r16.best_valid_loss < first  # it learned


def test_process_group_backend_follows_the_training_device(monkeypatch):
    """NCCL only when this process trains on a GPU: `device: cpu` on a GPU machine runs DDP over gloo."""
    import torch.distributed as dist

    from helpers.training import loop

    chosen = []
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend: chosen.append(backend))
    monkeypatch.setattr(dist, "get_rank", lambda: 0)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert loop.init_distributed("cpu") == loop.Dist(0, 2, 0)
    loop.init_distributed("auto")
    assert chosen == ["gloo", "nccl"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    loop.init_distributed("auto")
    assert chosen[-1] == "gloo"


def test_device_and_precision_are_resolved_once_and_passed_down(monkeypatch, tmp_path):
    """A run asks core.hardware where and how it trains once (loop.placement): train_decoder resolves it and hands it
    down through train_or_skip; the loop resolves it itself only when it is not given, and refuses one made for
    another config."""
    from helpers.training import loop, recipes

    asked = []
    real_device, real_precision = loop.compute_device, loop.resolve_precision
    monkeypatch.setattr(loop, "compute_device", lambda *a: asked.append("device") or real_device(*a))
    monkeypatch.setattr(loop, "resolve_precision", lambda *a: asked.append("precision") or real_precision(*a))
    tr, va = W.make_data()
    cfg = W.make_config(steps=2, save_every=2, eval_every=2)
    train(W.make_model(), tr, va, tmp_path / "a", cfg, progress=False)
    assert asked == ["device", "precision"]  # once each, at the start
    place = loop.placement(cfg.device, cfg.precision)
    assert (place.device, place.precision, place.requested) == (torch.device("cpu"), "fp32", ("cpu", "fp32"))
    asked.clear()
    train(W.make_model(), tr, va, tmp_path / "b", cfg, progress=False, place=place)
    assert asked == []  # passed down: the loop does not ask again
    with pytest.raises(ValueError, match="placement resolved for"):
        train(W.make_model(), tr, va, tmp_path / "c", W.make_config(steps=2, precision="auto"), progress=False, place=place)

    class Tok:
        unk_token_id = None

        def convert_tokens_to_ids(self, token):
            return 0

    seen = {}
    monkeypatch.setattr(recipes, "train_or_skip", lambda *a, **k: seen.update(k))
    asked.clear()
    spec = dict(hidden=32, layers=2, heads=4, context=W.BLOCK, window=8, vocab_size=W.VOCAB, dropout=0.0)
    recipes.train_decoder("tiny", tr, va, Tok(), spec, cfg, tmp_path / "d")
    assert asked == ["device", "precision"] and seen["place"].requested == ("cpu", "fp32")


def test_cached_blocks_tokenise_once_and_map_the_same_ids(tmp_path):
    """Notebook 02's blocks are packed once per budget, saved, and memory-mapped on every later plan: the same ids
    (so the same digest: finished decoders keep their fingerprints), and a rerun calls no tokenizer."""
    from helpers.data.blocks import cached_blocks
    from helpers.training.recipes import blocks_digest

    made = []

    def make():
        made.append(1)
        return pack_blocks([list(range(i, i + 37)) for i in range(20)], 16)

    path, logs = tmp_path / "blocks" / "decoder-tiny.npy", []
    first = cached_blocks(path, "fp1", make, "decoder blocks tiny", log=logs.append)
    again = cached_blocks(path, "fp1", make, "decoder blocks tiny", log=logs.append)
    fresh = make()
    assert made == [1, 1] and torch.equal(first, fresh)  # the second call packed nothing and torch.equal(again, fresh)
    assert first.dtype == torch.int64 and logs[-1].startswith("[skip]")
    assert blocks_digest(PackedBlocks(again, 7)) == blocks_digest(PackedBlocks(fresh, 7))
    batch = PackedBlocks(again, 7).batch(3, 4)["input_ids"]  # rows gathered from the mapped file, writable copies
    assert torch.equal(batch, PackedBlocks(fresh, 7).batch(3, 4)["input_ids"])
    batch[0, 0] = -1
    assert torch.equal(cached_blocks(path, "fp1", make, log=logs.append), fresh)  # the file is never written through
    cached_blocks(path, "fp2", make, log=logs.append)  # other inputs: packed again
    assert len(made) == 3


def test_an_unknown_budget_is_said_as_such_before_any_tokenizer_is_looked_for(tmp_path):
    from helpers.data.ledger import Ledger
    from helpers.training import recipes

    (tmp_path / "data").mkdir()
    Ledger(tmp_path / "data" / "ledger.json").save()
    with pytest.raises(ValueError, match=r"budget tiny-9Z is not in the budget ledger of notebook 01 \(.*ledger\.json\); "
                                         r"its tiny budgets: none \(notebook 01's tiny_budgets param makes others\)"):
        recipes.plan_decoders(tmp_path, ["tiny-9Z"], {}, {})
