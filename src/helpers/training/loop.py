"""Training loop shared by every model of the study (decoders, encoders and the sweeps all train through it).

* **Data**: :class:`PackedBlocks` packs token streams (each story closed by ``<|endoftext|>``) into fixed blocks.
  The batch of optimizer step ``s`` is a pure function of ``(seed, s)`` (blocks are reshuffled every epoch with a
  seeded generator), so the data position is the step counter and a resumed run sees exactly the batches an
  uninterrupted one would.
* **Optimiser**: AdamW (or LAMB) with decoupled weight decay on matrices only; biases, LayerNorms and embeddings go
  to the no-decay group (:func:`helpers.training.optim.param_groups`, tested on GPT-Neo's real names: the reference
  code meant this but its filter never matched them). Cosine schedule with linear warm-up down to ``min_lr``
  (:func:`helpers.training.optim.cosine_schedule`); gradient clipping.
* **Checkpoints**: every ``save_every`` steps the model, optimizer, scheduler, RNG state and step go to
  ``<out>/checkpoint/`` (atomically). Rerunning :func:`train` resumes from it, and a run killed at any point
  finishes with the same weights as one never interrupted. The best-validation model is kept in
  ``<out>/best/`` with ``save_pretrained`` (plus the tokenizer), the metrics are appended to
  ``<out>/metrics.jsonl``. A NaN/inf loss stops the run with :class:`TrainingDiverged`; the last good checkpoint
  is left as it was.
* **Scale out**: the same function runs under ``torchrun --nproc_per_node N`` or ``accelerate launch``: when
  ``WORLD_SIZE > 1`` it initialises ``torch.distributed`` (NCCL on GPUs, gloo on CPU), wraps the model in
  DistributedDataParallel and gives each rank its slice of every global batch; rank 0 writes the files.

The run plans that feed this loop (the decoders of notebook 02, the encoders of notebook 04) and training a run or
skipping it when it is finished are in :mod:`helpers.training.recipes`; the ``torchrun`` and job-array command line
is :mod:`helpers.training.launch`.
"""
from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import GPTNeoForCausalLM

from helpers.core.artifacts import append_jsonl, atomic_path, read_json, stamp_model_folder, write_json
from helpers.core.config import shown_path
from helpers.core.hardware import autocast_context, compute_device, resolve_precision
from helpers.core.process_memory import release_freed_memory
from helpers.core.progress import progress as progress_bar
from helpers.core.seeding import seed_everything
from helpers.data.blocks import PackedBlocks
from helpers.data.tokenizers import save_for_model
from helpers.models import decoder
from helpers.training.model_card import model_card, provenance
from helpers.training.optim import cosine_schedule, make_optimizer


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


class TrainingRejected(TrainingDiverged):
    """A retrained model that is not sane (held-out loss NaN, or not below a uniform guess): the run it was to
    replace is kept."""


@dataclass
class TrainConfig:
    """Hyper-parameters of one run (paper values: ``docs/methods.md#decoders``; profiles scale steps and batch size)."""

    steps: int = 1000
    batch_size: int = 32  # sequences per optimizer step (global, over all processes)
    micro_batch: int | None = None  # sequences per forward pass (gradient accumulation); default: all
    lr: float = 5e-4
    min_lr: float = 5e-5
    warmup: float = 0.016  # fraction of steps (< 1) or a number of steps
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    grad_clip: float = 2.0
    eval_every: int = 40
    save_every: int = 40
    log_every: int = 10
    seed: int = 42
    optimizer: str = "adamw"
    device: str = "auto"
    precision: str = "fp32"  # "fp32", "bf16" (autocast) or "auto" (bf16 where the hardware has it, see hardware.py)
    stop_patience: int | None = None  # stop after this many evaluations without a new best validation loss ...
    stop_margin: float = 0.0  # ... once the latest one is at least this far above the best (nats)

    def __post_init__(self):
        self.betas = tuple(self.betas)
        if self.steps <= 0 or self.batch_size <= 0:
            raise ValueError("steps and batch_size must be positive")
        if self.precision not in ("fp32", "bf16", "auto"):
            raise ValueError(f"precision must be fp32, bf16 or auto, not {self.precision!r}")
        if self.stop_patience is not None and self.stop_patience <= 0:
            raise ValueError(f"stop_patience must be a positive number of evaluations or null, not {self.stop_patience}")
        if self.micro_batch is not None and (self.micro_batch <= 0 or self.batch_size % self.micro_batch):
            raise ValueError(f"micro_batch {self.micro_batch} must divide batch_size {self.batch_size}")

    @property
    def warmup_steps(self) -> int:
        return int(round(self.warmup * self.steps)) if self.warmup < 1 else int(self.warmup)


# ----------------------------------------------------------------------------- distributed


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed(device: str | torch.device = "auto") -> Dist:
    """Read ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` (set by torchrun/accelerate) and initialise the process group:
    NCCL when this process trains on a GPU, gloo when it trains on the CPU (``device="cpu"`` on a GPU machine too)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        backend = "nccl" if compute_device(device, local_rank).type == "cuda" else "gloo"
        dist.init_process_group(backend=backend)
    return Dist(dist.get_rank(), dist.get_world_size(), local_rank)


def _barrier(d: Dist) -> None:
    if d.world > 1:
        dist.barrier()


@dataclass(frozen=True)
class Placement:
    """Where and how this process trains, resolved once at the start of training (:func:`placement`) and passed
    down: its place in the process group, its device, and the precision (``"fp32"`` or ``"bf16"``: ``auto``
    resolved on that device); ``requested`` is the ``(device, precision)`` of the config it was resolved from."""

    dist: Dist
    device: torch.device
    precision: str
    requested: tuple[str, str]

    def autocast(self) -> Callable[[], contextlib.AbstractContextManager]:
        """The autocast context factory of this precision on this device."""
        return autocast_context(self.precision, self.device)


def placement(device: str | torch.device = "auto", precision: str = "fp32") -> Placement:
    """The one question a training run asks :mod:`helpers.core.hardware`: this process's device (``"auto"``: its
    GPU under torchrun's ``LOCAL_RANK``, else the CPU), the process group on that device (:func:`init_distributed`)
    and the precision on it (``"auto"``: bf16 where native)."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0")) if int(os.environ.get("WORLD_SIZE", "1")) > 1 else 0
    dev = compute_device(device, local_rank)
    return Placement(init_distributed(dev), dev, resolve_precision(precision, dev), (str(device), precision))


# ----------------------------------------------------------------------------- the loop


def lm_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Next-token cross-entropy (HF shifts the labels). A GPT-Neo on a CPU (not wrapped by DDP) takes the fused
    LM-head loss (:func:`helpers.models.decoder.lm_head_loss`): the same number without storing the fp32 logits."""
    ids = batch["input_ids"]
    if decoder.FUSED_LM_HEAD and isinstance(model, GPTNeoForCausalLM) and ids.device.type == "cpu":
        h = model.transformer(input_ids=ids, use_cache=False).last_hidden_state
        return decoder.lm_head_loss(h[:, :-1].reshape(-1, h.shape[-1]), model.lm_head.weight, ids[:, 1:].reshape(-1))
    return model(input_ids=ids, labels=ids, use_cache=False).loss  # no KV cache is needed to train


@dataclass
class TrainResult:
    out_dir: str
    steps: int
    tokens_seen: int
    best_valid_loss: float
    best_step: int
    final_valid_loss: float
    seconds: float
    resumed_from: int | None = None
    history: list[dict] = field(default_factory=list)
    stopped_early: int | None = None  # the step at which early stopping ended the run (None: ran all steps)

    @property
    def best_perplexity(self) -> float:
        return math.exp(self.best_valid_loss)


def _rng_state() -> dict:
    return {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def _set_rng_state(s: dict) -> None:
    torch.set_rng_state(s["torch"])
    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    if s.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"])


@torch.no_grad()
def evaluate(model: torch.nn.Module, data: PackedBlocks, batch_size: int, loss_fn=lm_loss, device=None) -> float:
    """Mean loss over every validation block (blocks have equal length, so this is the per-token mean)."""
    was = model.training
    model.eval()
    total, n = 0.0, 0
    for b in data.eval_batches(batch_size):
        b = {k: v.to(device) if device is not None else v for k, v in b.items()}
        k = len(next(iter(b.values())))
        total += float(loss_fn(model, b)) * k
        n += k
    model.train(was)
    return total / max(n, 1)


def train(
    model: torch.nn.Module,
    train_data: PackedBlocks,
    valid_data: PackedBlocks,
    out_dir: str | Path,
    cfg: TrainConfig,
    tokenizer: Any = None,
    loss_fn: Callable[[torch.nn.Module, dict], torch.Tensor] = lm_loss,
    progress: bool = True,
    stop_after: int | None = None,
    extra_state: dict | None = None,
    place: Placement | None = None,
) -> TrainResult:
    """Train ``model`` for ``cfg.steps`` optimizer steps, resuming from ``<out_dir>/checkpoint`` if present.

    ``stop_after`` ends the process's work after that many steps (as an interruption would; used by tests).
    ``extra_state`` is stored in the checkpoint and in ``train_state.json`` (e.g. the spec of the model).
    ``place``: the device and precision resolved for ``cfg`` at the start of training (:func:`placement`; resolved
    here when not given)."""
    out = Path(out_dir)
    place = place or placement(cfg.device, cfg.precision)
    if place.requested != (str(cfg.device), cfg.precision):
        raise ValueError(f"placement resolved for (device, precision) {place.requested}, but the config says "
                         f"{(str(cfg.device), cfg.precision)}")
    d, device = place.dist, place.device
    model.to(device)
    seed_everything(cfg.seed)
    opt = make_optimizer(model, cfg)
    total, warm = cfg.steps, cfg.warmup_steps
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: cosine_schedule(s, total, warm, cfg.min_lr / cfg.lr))
    ckpt_dir, best_dir, log_path = out / "checkpoint", out / "best", out / "metrics.jsonl"
    state = {"step": 0, "best_valid_loss": math.inf, "best_step": -1, "tokens_seen": 0, "seconds": 0.0}
    resumed = None
    if (ckpt_dir / "state.pt").is_file():
        ck = torch.load(ckpt_dir / "state.pt", map_location="cpu", weights_only=False)
        if ck["config"] != asdict(cfg):
            raise ValueError(
                f"{ckpt_dir} was written with a different training config; delete {out} to start over\n"
                f"checkpoint: {ck['config']}\nnow:        {asdict(cfg)}"
            )
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["scheduler"])
        _set_rng_state(ck["rng"])
        state = ck["state"]
        resumed = state["step"]
        if d.main:
            _truncate_log(log_path, resumed)
    elif d.main and log_path.exists():
        log_path.unlink()
    wrapped = model
    if d.world > 1:
        wrapped = DDP(model, device_ids=[d.local_rank] if device.type == "cuda" else None)
    micro = cfg.micro_batch or cfg.batch_size
    per_rank = cfg.batch_size // d.world
    if per_rank % min(micro, per_rank):
        raise ValueError(f"per-process batch {per_rank} is not divisible by micro_batch {micro}")
    micro = min(micro, per_rank)
    tokens_per_step = cfg.batch_size * train_data.blocks.shape[1]
    autocast = place.autocast()
    bar = None
    if progress and d.main:
        bar = progress_bar(total=total, desc=out.name, unit="step", initial=state["step"])
    model.train()
    t_start = time.time() - state["seconds"]
    window_t, window_tok = time.time(), 0
    done_here = 0
    end = state.get("stopped_early") or total  # a run stopped early and resumed stays stopped
    try:
        while state["step"] < end:
            step = state["step"]
            batch = train_data.batch(step, cfg.batch_size, d.rank, d.world)
            rows = len(next(iter(batch.values())))
            opt.zero_grad(set_to_none=True)
            loss_sum = 0.0
            chunks = [{k: v[s0 : s0 + micro] for k, v in batch.items()} for s0 in range(0, rows, micro)]
            for i, chunk in enumerate(chunks):
                n = len(next(iter(chunk.values())))
                sync = contextlib.nullcontext() if (d.world == 1 or i == len(chunks) - 1) else wrapped.no_sync()
                with sync:
                    with autocast():
                        loss = loss_fn(wrapped, {k: v.to(device) for k, v in chunk.items()})
                    (loss.float() * n / rows).backward()
                loss_sum += float(loss.detach()) * n
            loss_val = loss_sum / rows  # rows == per_rank except in a long phase (masking.LongPhaseBlocks)
            if d.world > 1:
                t = torch.tensor([loss_val], device=device)
                dist.all_reduce(t)
                loss_val = float(t) / d.world
            if not math.isfinite(loss_val):
                raise TrainingDiverged(
                    f"loss became {loss_val} at step {step} of {out.name}; the last good checkpoint "
                    f"(step {_ckpt_step(ckpt_dir)}) is kept in {shown_path(ckpt_dir)}. Lower the learning rate or check the data."
                )
            gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip))
            if not math.isfinite(gnorm):  # a finite loss with inf/NaN gradients would poison the weights
                raise TrainingDiverged(
                    f"gradient norm became {gnorm} at step {step} of {out.name} (loss {loss_val}); the last good "
                    f"checkpoint (step {_ckpt_step(ckpt_dir)}) is kept in {shown_path(ckpt_dir)}. Lower the learning rate or check the data."
                )
            opt.step()
            sched.step()
            state["step"] = step + 1
            step_tokens = train_data.tokens_at(step, cfg.batch_size) if hasattr(train_data, "tokens_at") else tokens_per_step
            state["tokens_seen"] += step_tokens
            window_tok += step_tokens
            done_here += 1
            now = time.time()
            state["seconds"] = now - t_start
            s = state["step"]
            if d.main and (s % cfg.log_every == 0 or s == total):
                tps = window_tok / max(now - window_t, 1e-9)
                _log(log_path, {"step": s, "split": "train", "loss": loss_val, "lr": sched.get_last_lr()[0],
                                "grad_norm": gnorm, "tokens": state["tokens_seen"], "tokens_per_s": tps,
                                "seconds": state["seconds"]})
                window_t, window_tok = now, 0
                if bar is not None:
                    bar.set_postfix(loss=f"{loss_val:.3f}", tok_s=f"{tps:,.0f}", refresh=False)
            if s % cfg.eval_every == 0 or s == total:
                release_freed_memory()  # the heap's free memory back to the system (it grows with the steps otherwise)
                vloss = evaluate(model, valid_data, micro, loss_fn, device)
                if d.main:
                    _log(log_path, {"step": s, "split": "valid", "loss": vloss, "tokens": state["tokens_seen"],
                                    "seconds": state["seconds"]})
                    if vloss < state["best_valid_loss"]:
                        state["best_valid_loss"], state["best_step"] = vloss, s
                        _save_pretrained(model, tokenizer, best_dir, {"step": s, "valid_loss": vloss},
                                         model_card(model, out.name, s, vloss, cfg, extra_state))
                state["final_valid_loss"] = vloss
                state["evals_since_best"] = 0 if state["best_step"] == s else state.get("evals_since_best", 0) + 1
                if (cfg.stop_patience is not None and state["evals_since_best"] >= cfg.stop_patience
                        and vloss >= state["best_valid_loss"] + cfg.stop_margin):
                    state["stopped_early"] = end = s  # the loss has clearly passed its minimum: the best model is kept
                    if bar is not None:  # the bar ends at 100 % with the reason, not at "17 %" as if the run crashed
                        bar.total = s
                        bar.set_postfix_str(f"stopped early, best step {state['best_step']}", refresh=False)
            if s % cfg.save_every == 0 or s == end:
                if d.main:
                    _save_checkpoint(ckpt_dir, model, opt, sched, state, cfg, extra_state)
                _barrier(d)
            if bar is not None:
                bar.update(1)
            if stop_after is not None and done_here >= stop_after and state["step"] < end:
                break
    finally:
        if bar is not None:
            bar.close()
    result = TrainResult(
        str(out), state["step"], state["tokens_seen"], state["best_valid_loss"], state["best_step"],
        state.get("final_valid_loss", math.nan), state["seconds"], resumed,
        read_metrics(log_path) if d.main and log_path.exists() else [],
        state.get("stopped_early"),
    )
    if d.main and state["step"] >= end:
        write_json(out / "train_state.json", {**{k: v for k, v in asdict(result).items() if k != "history"},
                                              "out_dir": shown_path(out),  # repository-relative, never this machine's
                                              "config": asdict(cfg), "extra": extra_state or {},
                                              "train_blocks": len(train_data), "block_length": train_data.blocks.shape[1],
                                              "epochs": train_data.epochs(end, cfg.batch_size)})
    return result


def _ckpt_step(ckpt_dir: Path) -> int | str:
    try:
        return read_json(ckpt_dir / "step.json")["step"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return "none"


def _save_checkpoint(ckpt_dir: Path, model, opt, sched, state, cfg: TrainConfig, extra) -> None:
    try:
        with atomic_path(ckpt_dir) as tmp:
            tmp.mkdir()
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                        "rng": _rng_state(), "state": dict(state), "config": asdict(cfg), "extra": extra or {}},
                       tmp / "state.pt")
            (tmp / "step.json").write_text(json.dumps({"step": state["step"]}))
    except (OSError, RuntimeError) as e:
        raise _save_error("checkpoint", ckpt_dir, e, "the previous checkpoint (if any) is kept") from None
    # the run this one replaces (set aside by recipes.train_or_skip, named in ``_replaces.json``) stays until the new
    # run has finished and proved sane (acceptance.settle_replacement)


def _save_error(what: str, path: Path, e: BaseException, kept: str) -> OSError:
    """One line for a failed save (disk full, quota, unwritable folder), naming the path and the free space."""

    try:
        free = f"{shutil.disk_usage(path.parent if path.parent.exists() else Path.cwd()).free / 2**20:,.0f} MiB free"
    except OSError:
        free = "free space unknown"
    msg = " ".join(str(e).split())[:200]
    return OSError(getattr(e, "errno", None) or errno.ENOSPC,
                   f"cannot save the {what} to {shown_path(path)} ({free}; disk full?): {type(e).__name__}: {msg}; {kept}")


def _save_pretrained(model, tokenizer, path: Path, info: dict, card: str | None = None) -> None:
    try:
        with atomic_path(path) as tmp:
            model.save_pretrained(tmp)
            if tokenizer is not None:
                save_for_model(tokenizer, tmp, getattr(model.config, "max_position_embeddings", None))
            (tmp / "best.json").write_text(json.dumps(info))
            if card is not None:
                (tmp / "README.md").write_text(card, encoding="utf-8")  # the model card (training.model_card)
            stamp_model_folder(tmp, **provenance())  # the weights' SHA-256 (checked at every load) and provenance
    except (OSError, RuntimeError) as e:
        raise _save_error("model", path, e, "the previous best model (if any) is kept") from None


def _log(path: Path, row: dict) -> None:
    append_jsonl(path, row)  # a journal: a kill can cut only its last line, which read_metrics skips


def _truncate_log(path: Path, step: int) -> None:
    """Drop log rows written after the checkpoint we resume from (they will be produced again)."""
    if not path.exists():
        return
    rows = [r for r in read_metrics(path) if r["step"] <= step]
    with atomic_path(path) as tmp:
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))


def read_metrics(path: str | Path) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut by a kill: ignore it, it is redone on resume
                    continue
    return rows
