"""Training loop shared by every model of the study (decoders here; encoders and sweeps reuse it).

* **Data**: :class:`PackedBlocks` packs token streams (each story closed by ``<|endoftext|>``) into fixed blocks.
  The batch of optimizer step ``s`` is a pure function of ``(seed, s)`` (blocks are reshuffled every epoch with a
  seeded generator), so the data position is the step counter and a resumed run sees exactly the batches an
  uninterrupted one would.
* **Optimiser**: AdamW with decoupled weight decay on matrices only; biases, LayerNorms and embeddings go to
  the no-decay group (:func:`param_groups`, tested on GPT-Neo's real names: the reference code meant this but
  its filter never matched them). Cosine schedule with linear warm-up down to ``min_lr``; gradient clipping.
* **Checkpoints**: every ``save_every`` steps the model, optimizer, scheduler, RNG state and step go to
  ``<out>/checkpoint/`` (atomically). Rerunning :func:`train` resumes from it, and a run killed at any point
  finishes with the same weights as one never interrupted. The best-validation model is kept in
  ``<out>/best/`` with ``save_pretrained`` (plus the tokenizer), the metrics are appended to
  ``<out>/metrics.jsonl``. A NaN/inf loss stops the run with :class:`TrainingDiverged`; the last good checkpoint
  is left as it was.
* **Scale out**: the same function runs under ``torchrun --nproc_per_node N`` or ``accelerate launch``: when
  ``WORLD_SIZE > 1`` it initialises ``torch.distributed`` (NCCL on GPUs, gloo on CPU), wraps the model in
  DistributedDataParallel and gives each rank its slice of every global batch; rank 0 writes the files.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from transformers import GPTNeoForCausalLM

from . import decoder
from .artifacts import atomic_path, read_json, write_json
from .config import shown_path
from .hardware import autocast_context, resolve_precision
from .data import EOT, PackedBlocks, pack_blocks  # noqa: F401  (the loop's data classes; re-exported)


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


# ----------------------------------------------------------------------------- data


# ----------------------------------------------------------------------------- optimisation


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups: decay for weight matrices of Linear/Conv layers, none for biases, norms, embeddings.

    Decided by module type, not by a name filter (a name filter is how the reference code missed GPT-Neo's
    ``ln_1``/``wte``/``wpe``). Tied weights are counted once."""
    decay, no_decay, seen = [], [], set()
    norm_types = (torch.nn.LayerNorm, torch.nn.GroupNorm, torch.nn.BatchNorm1d)
    for module in model.modules():
        for pname, p in module.named_parameters(recurse=False):
            if not p.requires_grad or id(p) in seen:
                continue
            seen.add(id(p))
            is_matrix = isinstance(module, (torch.nn.Linear, torch.nn.Conv1d)) and pname == "weight"
            is_embedding = isinstance(module, torch.nn.Embedding)
            if is_matrix and not is_embedding and not isinstance(module, norm_types):
                decay.append(p)
            else:
                no_decay.append(p)
    # a Linear tied to an embedding (lm_head) was seen through the embedding first or later: never decay it
    emb_ids = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    moved = [p for p in decay if id(p) in emb_ids]
    decay = [p for p in decay if id(p) not in emb_ids]
    no_decay += moved
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def param_group_names(model: torch.nn.Module, weight_decay: float = 0.1) -> tuple[list[str], list[str]]:
    """Names of the parameters in the decay and no-decay groups of :func:`param_groups` (for tests/reports)."""
    names = {id(p): n for n, p in model.named_parameters()}
    g = param_groups(model, weight_decay)
    return [names[id(p)] for p in g[0]["params"]], [names[id(p)] for p in g[1]["params"]]


def cosine_schedule(step: int, total: int, warmup: int, min_ratio: float) -> float:
    """LR multiplier: linear warm-up to 1 over ``warmup`` steps, then cosine down to ``min_ratio`` at ``total``."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


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


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    groups = param_groups(model, cfg.weight_decay)
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
    if cfg.optimizer == "lamb":
        from .optim import Lamb  # provided with the encoders

        return Lamb(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
    raise ValueError(f"unknown optimizer {cfg.optimizer!r} (adamw or lamb)")


# ----------------------------------------------------------------------------- distributed


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed() -> Dist:
    """Read ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` (set by torchrun/accelerate) and initialise the process group."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
    import torch.distributed as dist

    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend=backend)
    return Dist(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def _barrier(d: Dist) -> None:
    if d.world > 1:
        import torch.distributed as dist

        dist.barrier()


def _device(cfg: TrainConfig, d: Dist) -> torch.device:
    if cfg.device != "auto":
        return torch.device(cfg.device)
    if torch.cuda.is_available():
        return torch.device("cuda", d.local_rank)
    return torch.device("cpu")


# ----------------------------------------------------------------------------- the loop


def lm_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Next-token cross-entropy (HF shifts the labels). A GPT-Neo on a CPU (not wrapped by DDP) takes the fused
    LM-head loss (:func:`helpers.decoder.lm_head_loss`): the same number without storing the fp32 logits."""
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
) -> TrainResult:
    """Train ``model`` for ``cfg.steps`` optimizer steps, resuming from ``<out_dir>/checkpoint`` if present.

    ``stop_after`` ends the process's work after that many steps (as an interruption would; used by tests).
    ``extra_state`` is stored in the checkpoint and in ``train_state.json`` (e.g. the spec of the model)."""
    out = Path(out_dir)
    d = init_distributed()
    device = _device(cfg, d)
    model.to(device)
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
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
        from torch.nn.parallel import DistributedDataParallel as DDP

        wrapped = DDP(model, device_ids=[d.local_rank] if device.type == "cuda" else None)
    micro = cfg.micro_batch or cfg.batch_size
    per_rank = cfg.batch_size // d.world
    if per_rank % min(micro, per_rank):
        raise ValueError(f"per-process batch {per_rank} is not divisible by micro_batch {micro}")
    micro = min(micro, per_rank)
    tokens_per_step = cfg.batch_size * train_data.blocks.shape[1]
    autocast = autocast_context(resolve_precision(cfg.precision, device), device)
    bar = None
    if progress and d.main:
        from .progress import progress as progress_bar

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
                import torch.distributed as dist

                t = torch.tensor([loss_val], device=device)
                dist.all_reduce(t)
                loss_val = float(t) / d.world
            if not math.isfinite(loss_val):
                raise TrainingDiverged(
                    f"loss became {loss_val} at step {step} of {out.name}; the last good checkpoint "
                    f"(step {_ckpt_step(ckpt_dir)}) is kept in {ckpt_dir}. Lower the learning rate or check the data."
                )
            gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip))
            if not math.isfinite(gnorm):  # a finite loss with inf/NaN gradients would poison the weights
                raise TrainingDiverged(
                    f"gradient norm became {gnorm} at step {step} of {out.name} (loss {loss_val}); the last good "
                    f"checkpoint (step {_ckpt_step(ckpt_dir)}) is kept in {ckpt_dir}. Lower the learning rate or check the data."
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
                vloss = evaluate(model, valid_data, micro, loss_fn, device)
                if d.main:
                    _log(log_path, {"step": s, "split": "valid", "loss": vloss, "tokens": state["tokens_seen"],
                                    "seconds": state["seconds"]})
                    if vloss < state["best_valid_loss"]:
                        state["best_valid_loss"], state["best_step"] = vloss, s
                        _save_pretrained(model, tokenizer, best_dir, {"step": s, "valid_loss": vloss})
                state["final_valid_loss"] = vloss
                state["evals_since_best"] = 0 if state["best_step"] == s else state.get("evals_since_best", 0) + 1
                if (cfg.stop_patience is not None and state["evals_since_best"] >= cfg.stop_patience
                        and vloss >= state["best_valid_loss"] + cfg.stop_margin):
                    state["stopped_early"] = end = s  # the loss has clearly passed its minimum: the best model is kept
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
    # the run this one replaces (set aside by train_or_skip) is dropped once the new run has a checkpoint
    marker = ckpt_dir.parent / "_replaces.json"
    if marker.is_file():
        try:
            kept = Path(json.loads(marker.read_text())["kept"])
        except (OSError, json.JSONDecodeError, KeyError):
            kept = None
        if kept is not None and kept.exists():
            import shutil

            shutil.rmtree(kept, ignore_errors=True)
            print(f"[replace] {shown_path(ckpt_dir.parent)}: first checkpoint written (step {state['step']}); the previous run "
                  f"kept at {shown_path(kept)} is removed", flush=True)
        marker.unlink(missing_ok=True)


def _save_error(what: str, path: Path, e: BaseException, kept: str) -> OSError:
    """One line for a failed save (disk full, quota, unwritable folder), naming the path and the free space."""
    import errno
    import shutil

    try:
        free = f"{shutil.disk_usage(path.parent if path.parent.exists() else Path.cwd()).free / 2**20:,.0f} MiB free"
    except OSError:
        free = "free space unknown"
    msg = " ".join(str(e).split())[:200]
    return OSError(getattr(e, "errno", None) or errno.ENOSPC,
                   f"cannot save the {what} to {shown_path(path)} ({free}; disk full?): {type(e).__name__}: {msg}; {kept}")


def _save_pretrained(model, tokenizer, path: Path, info: dict) -> None:
    try:
        with atomic_path(path) as tmp:
            model.save_pretrained(tmp)
            if tokenizer is not None:
                tokenizer.save_pretrained(tmp)
            (tmp / "best.json").write_text(json.dumps(info))
    except (OSError, RuntimeError) as e:
        raise _save_error("model", path, e, "the previous best model (if any) is kept") from None


def _log(path: Path, row: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()


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


# ----------------------------------------------------------------------------- the decoder stage


def encode_blocks(tokenizer, texts: Sequence[str], block: int, max_blocks: int | None = None, seed: int = 0) -> PackedBlocks:
    """Stories → token ids, each closed by ``<|endoftext|>`` → packed blocks of ``block`` tokens (first
    ``max_blocks`` kept, for bounded validation cost)."""
    from .tokenizers import encode_stories

    blocks = pack_blocks(encode_stories(tokenizer, texts, add_eot=True), block)
    if max_blocks is not None:
        blocks = blocks[:max_blocks]
    return PackedBlocks(blocks, seed)


def blocks_digest(data: PackedBlocks) -> str:
    """SHA-256 of the packed token ids (what a run was trained on, whatever produced it)."""
    import hashlib

    return hashlib.sha256(data.blocks.numpy().tobytes()).hexdigest()[:16]


def train_or_skip(
    name: str,
    build_model: Callable[[], torch.nn.Module],
    spec: dict,
    train_data,
    valid_data,
    tokenizer,
    cfg: TrainConfig,
    out_dir: str | Path,
    loss_fn: Callable[[torch.nn.Module, dict], torch.Tensor] = lm_loss,
    progress: bool = True,
    log: Callable[[str], None] = print,
    extra: dict | None = None,
) -> TrainResult:
    """Train (or resume, or skip) one model; the best checkpoint lands in ``<out_dir>/best`` with its tokenizer.

    A finished run whose ``spec``, config and token data are unchanged is skipped. A run (finished or a checkpoint)
    made from other inputs is never deleted first: it is moved aside to ``<out_dir>.kept-<date>`` (said in the
    output), dropped only once the new run has written its first checkpoint, and moved back if the new run fails
    before that and the old params return. ``extra`` (e.g. the words per source of an encoder's mix) is stored with
    the run."""
    import shutil
    import time as _time

    from .artifacts import fingerprint

    out = Path(out_dir)
    fp = fingerprint(spec, asdict(cfg), blocks_digest(train_data), blocks_digest(valid_data), *([extra] if extra else []))
    state_file = out / "train_state.json"
    ck = out / "checkpoint" / "state.pt"

    def run_fp(folder: Path) -> str | None:  # the fingerprint of a finished run in ``folder``
        try:
            return read_json(folder / "train_state.json").get("extra", {}).get("fingerprint")
        except (FileNotFoundError, json.JSONDecodeError, AttributeError):
            return None

    # a run set aside when the params changed (see below) whose params are back: restore it instead of retraining
    if not ck.is_file() and run_fp(out) != fp:
        for kept in sorted(out.parent.glob(f"{out.name}.kept-*"), reverse=True):
            if run_fp(kept) == fp and (kept / "best").is_dir():
                if out.exists():
                    shutil.rmtree(out)  # holds no checkpoint and no finished run: the remains of a failed attempt
                os.replace(kept, out)
                log(f"[restore] {name}: the finished run kept at {shown_path(kept)} matches these params again; moved back to {shown_path(out)}")
                break
    if state_file.is_file() and (out / "best").is_dir():
        st = read_json(state_file)
        if st.get("extra", {}).get("fingerprint") == fp:
            log(f"[skip] {name}: trained already with these inputs and params ({fp})")
            return TrainResult(str(out), st["steps"], st["tokens_seen"], st["best_valid_loss"], st["best_step"],
                               st["final_valid_loss"], st["seconds"], None, read_metrics(out / "metrics.jsonl"),
                               st.get("stopped_early"))
    old = torch.load(ck, map_location="cpu", weights_only=False).get("extra", {}).get("fingerprint") if ck.is_file() else None
    kept = None
    if ck.is_file() and old == fp:
        log(f"[resume] {name} from step {_ckpt_step(out / 'checkpoint')}")
    elif ck.is_file() or state_file.is_file() or (out / "best").is_dir():
        # never delete a result before its replacement exists: the old run is set aside under a dated name and
        # dropped by _save_checkpoint once the new run has written its first checkpoint
        kept = out.with_name(f"{out.name}.kept-{_time.strftime('%Y%m%d-%H%M%S')}")
        for i in range(2, 1000):
            if not kept.exists():
                break
            kept = out.with_name(f"{out.name}.kept-{_time.strftime('%Y%m%d-%H%M%S')}-{i}")
        os.replace(out, kept)
        out.mkdir(parents=True)
        (out / "_replaces.json").write_text(json.dumps({"kept": str(kept)}))
        what = "finished run" if state_file.name in os.listdir(kept) else f"checkpoint (step {_ckpt_step(kept / 'checkpoint')})"
        log(f"[new ] {name}: the {what} in {shown_path(out)} was made from other inputs/params; it is kept as {shown_path(kept)} until the "
            f"new run writes its first checkpoint (and restored if these params are put back before then)")
    elif out.exists():
        marker = out / "_replaces.json"  # a run set aside earlier stays set aside until a checkpoint replaces it
        pending = marker.read_text() if marker.is_file() else None
        shutil.rmtree(out)  # no checkpoint, no model, no finished run: nothing to keep
        if pending:
            out.mkdir(parents=True)
            (out / "_replaces.json").write_text(pending)
            kept = Path(json.loads(pending).get("kept", ""))
    torch.manual_seed(cfg.seed)
    model = build_model()
    log(f"[run ] {name}: {len(train_data)} blocks × {train_data.blocks.shape[1]} tokens, {cfg.steps} steps of "
        f"{cfg.batch_size} ({train_data.epochs(cfg.steps, cfg.batch_size):.2f} epochs)")
    try:
        return train(model, train_data, valid_data, out, cfg, tokenizer=tokenizer, loss_fn=loss_fn, progress=progress,
                     extra_state={"fingerprint": fp, "name": name, "spec": spec, **(extra or {})})
    except TrainingDiverged as e:
        if kept is not None and kept.exists():
            raise TrainingDiverged(f"{e} The previous run is untouched, kept as {kept} (moved back by itself when "
                                   f"its params are restored).") from None
        raise


def train_decoder(name: str, train_data: PackedBlocks, valid_data: PackedBlocks, tokenizer, spec, cfg: TrainConfig,
                  out_dir: str | Path, progress: bool = True, log: Callable[[str], None] = print,
                  loss_fn: Callable[[torch.nn.Module, dict], torch.Tensor] = lm_loss, extra: dict | None = None) -> TrainResult:
    """One GPT-Neo decoder (``spec``: a :class:`~helpers.decoder.DecoderSpec` or its dict) via :func:`train_or_skip`.

    The fast path's version is part of the run's fingerprint: a change of its numerics retrains rather than
    silently reusing models trained by other code. ``loss_fn``/``extra``: another objective (e.g. the contrastive
    one of :mod:`helpers.architecture`) and what identifies it."""
    from .decoder import FAST_PATH_VERSION, DecoderSpec, build_decoder

    spec = spec if isinstance(spec, DecoderSpec) else DecoderSpec(**spec)
    eot = tokenizer.convert_tokens_to_ids(EOT)
    return train_or_skip(name, lambda: build_decoder(spec, seed=cfg.seed, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot),
                         asdict(spec), train_data, valid_data, tokenizer, cfg, out_dir, loss_fn, progress, log,
                         extra={"fast_path": FAST_PATH_VERSION, **(extra or {})})


@dataclass
class DecoderRun:
    """Everything one budget's decoder run needs (see :func:`plan_decoders`)."""

    name: str
    tokenizer: Any
    train_data: PackedBlocks
    valid_data: PackedBlocks
    spec: Any
    cfg: TrainConfig
    words: int
    epochs: float

    def row(self, word_scale: float = 1.0) -> dict:
        from .budgets import fmt_words

        return {"budget": self.name, "words": self.words, "stands for": fmt_words(self.words * word_scale),
                "train tokens": self.train_data.tokens, "blocks": len(self.train_data), "epochs": round(self.epochs, 2),
                "dropout": self.spec.dropout, "weight decay": self.cfg.weight_decay}


def plan_decoders(
    run_dir: str | Path,
    budgets: Sequence[str],
    model: dict,
    train: dict,
    regularisation: str = "words",
    word_scale: float = 1.0,
    fixed_dropout: float = 0.1,
    fixed_weight_decay: float = 0.1,
    valid_blocks: int | None = None,
) -> dict[str, DecoderRun]:
    """The decoder runs of notebook 02's parameters: per budget, its tokenizer (notebook 01), packed training
    blocks, held-out validation blocks, and the regularisation chosen by ``regularisation``:
    ``"words"`` (the paper's table at the budget × ``word_scale``), ``"epochs"`` (the paper's value for the budget
    that would see as many passes under the paper's schedule) or ``"fixed"``."""
    from .budgets import Ledger, read_corpus
    from .decoder import DecoderSpec, regularisation_for_budget, regularisation_for_epochs
    from .tokenizers import load_tokenizer

    run_dir = Path(run_dir)
    data = run_dir / "data"
    if not (data / "ledger.json").is_file():
        raise FileNotFoundError(f"no budget ledger in {data}: run notebook 01 for this profile first")
    ledger = Ledger(data / "ledger.json")
    heldout = [r["text"] for r in read_corpus(data / "tiny-heldout.jsonl")]
    runs = {}
    for name in budgets:
        tok = load_tokenizer(run_dir / "tokenizers" / f"decoder-{name}")
        texts = [r["text"] for r in read_corpus(data / f"{name}.jsonl")]
        train_data = encode_blocks(tok, texts, model["context"], seed=train.get("seed", 0))
        valid_data = encode_blocks(tok, heldout, model["context"], max_blocks=valid_blocks)
        epochs = train_data.epochs(train["steps"], train["batch_size"])
        words = ledger[name].words
        if regularisation == "words":
            dropout, wd = regularisation_for_budget(words, word_scale)
        elif regularisation == "epochs":
            dropout, wd = regularisation_for_epochs(epochs)
        elif regularisation == "fixed":
            dropout, wd = fixed_dropout, fixed_weight_decay
        else:
            raise ValueError(f"regularisation must be words, epochs or fixed, not {regularisation!r}")
        spec = DecoderSpec(**model, vocab_size=len(tok), dropout=dropout)
        runs[name] = DecoderRun(name, tok, train_data, valid_data, spec, TrainConfig(**train, weight_decay=wd), words, epochs)
    return runs


# ----------------------------------------------------------------------------- the encoder stage


@dataclass
class EncoderRun:
    """One encoder's mix, tokenizer, masked data and configs (see :func:`plan_encoders`)."""

    name: str
    corpora: list[str]
    balanced: bool
    tokenizer: Any
    train_data: Any  # masking.MaskedBlocks
    valid_data: dict  # "tiny" / "baby" held-out MaskedBlocks (and "all", their union, used during training)
    config: Any  # ltg_bert.LtgBertConfig
    cfg: TrainConfig
    words: dict  # words per kind and per source of the mix
    blocks: dict  # training blocks per group before/after balancing

    def row(self) -> dict:
        kind = self.words["by_kind"]
        return {"mix": self.name, "corpora": " + ".join(self.corpora), "balanced": self.balanced,
                **{f"words {k}": kind.get(k, 0) for k in ("baby", "tiny", "gen")},
                "words (rule)": self.words.get("rule", kind.get("baby", 0) + kind.get("tiny", 0)),
                **{f"blocks {g}": self.blocks.get(f"{g} (raw)", 0) for g in ("baby", "stories")},
                "blocks (trained on)": self.blocks["total"],
                "epochs": round(self.train_data.epochs(self.cfg.steps, self.cfg.batch_size), 2)}


def encoder_documents(run_dir: str | Path, corpus: str, log: Callable[[str], None] = print) -> list[str]:
    """Normalised, sentence-segmented documents of a ledger corpus (``data/<corpus>.jsonl``), each closed by
    ``[PAR]`` (``docs/methods.md#normalisation``); computed once and kept in ``encoder_data/<corpus>.jsonl``."""
    from .artifacts import fingerprint, read_jsonl, run_step, sha256_file, write_jsonl
    from .budgets import read_corpus
    from .data import encoder_segments

    run_dir = Path(run_dir)
    src = run_dir / "data" / f"{corpus}.jsonl"
    if not src.is_file():
        raise FileNotFoundError(f"no corpus {src} (notebooks 01 and 03 write the corpora of the ledger)")
    out = run_dir / "encoder_data" / f"{corpus}.jsonl"
    run_step(f"encoder text of {corpus}", out, fingerprint(sha256_file(src), "encoder_segments-v1"),
             lambda: write_jsonl(out, ({"text": t} for t in encoder_segments(r["text"] for r in read_corpus(src)))), log)
    return [r["text"] for r in read_jsonl(out)]


def balance_blocks(groups: dict[str, torch.Tensor], seed: int) -> torch.Tensor:
    """Rows of every group, the smaller groups repeated (whole copies, then a seeded sample of the rest) up to
    the largest one, so that uniform sampling over the result gives each group the same total probability."""
    n = max(len(g) for g in groups.values())
    out = []
    gen = torch.Generator().manual_seed(seed)
    for g in groups.values():
        reps, rest = divmod(n, len(g))
        out += [g] * reps + [g[torch.randperm(len(g), generator=gen)[:rest]]]
    return torch.cat(out)


def long_phase_data(tok, short, texts: dict[str, list[str]], balanced: bool, steps: int, seed: int, long_block: int = 512,
                    long_from: float = 0.9, long_batch_fraction: float = 0.25):
    """LTG-BERT's "+512" schedule around the short-block training data ``short`` (``masking.LongPhaseBlocks``): the
    same documents packed into ``long_block``-token blocks (balanced like the short ones when ``balanced``), used
    from step ``int(steps * long_from)`` with ``long_batch_fraction`` of the batch. Set by ``long_block``,
    ``long_from`` and ``long_batch_fraction`` in the ``train`` params of notebook 04 (``docs/methods.md#encoder-training``)."""
    from .masking import LongPhaseBlocks, MaskedBlocks, encode_encoder_blocks

    groups = {g: encode_encoder_blocks(tok, t, int(long_block)).blocks for g, t in texts.items()}
    blocks = balance_blocks(groups, seed) if balanced and len(groups) > 1 else torch.cat(list(groups.values()))
    long = MaskedBlocks(blocks, short.tok, seed=seed + 1, masking=short.masking)
    return LongPhaseBlocks(short, long, steps, long_from, long_batch_fraction)


def plan_encoders(
    run_dir: str | Path,
    mixes: Sequence[dict],
    model: str | dict,
    block: int,
    train: dict,
    vocab_size: int,
    track_budget: int,
    min_frequency: int = 2,
    valid_blocks: int | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, EncoderRun]:
    """The encoder runs of notebook 04: for every mix ``{"name", "corpora", "balanced"}`` the challenge rule is
    checked through the ledger (a mix that breaks it raises :class:`~helpers.budgets.BudgetError` unless it says
    ``allow_over_budget: true``), its documents are normalised and segmented, an encoder tokenizer is trained on
    them, and the token stream is cut into ``[CLS] … [SEP]`` blocks of ``block`` tokens; with ``balanced`` the BabyLM
    blocks and the TinyStories(+generated) blocks get equal total sampling probability. Validation: held-out
    TinyStories stories and held-out BabyLM documents, masked once."""
    from .artifacts import fingerprint, run_step
    from .budgets import Ledger
    from .ltg_bert import ltg_bert_config
    from .masking import MaskedBlocks, TokenIds, encode_encoder_blocks
    from .tokenizers import load_tokenizer, train_tokenizer

    run_dir = Path(run_dir)
    train = dict(train)
    long_phase = {k: train.pop(k) for k in ("long_block", "long_from", "long_batch_fraction") if k in train}
    ledger = Ledger(run_dir / "data" / "ledger.json")
    held = {"tiny": encoder_documents(run_dir, "tiny-heldout", log), "baby": encoder_documents(run_dir, "baby-heldout", log)}
    runs = {}
    for mix in mixes:
        name, corpora, balanced = mix["name"], list(mix["corpora"]), bool(mix.get("balanced", False))
        by_kind = ledger.check_mix(corpora, track_budget, allow_over_budget=bool(mix.get("allow_over_budget", False)))
        by_source: dict[str, int] = {}
        for c in corpora:
            for src, w in ledger[c].words_by_source.items():
                key = f"{ledger[c].kind}:{src}"
                by_source[key] = by_source.get(key, 0) + w
        docs = {c: encoder_documents(run_dir, c, log) for c in corpora}
        tok_dir = run_dir / "tokenizers" / f"encoder-{name}"
        all_docs = [d for c in corpora for d in docs[c]]
        run_step(f"encoder tokenizer {name}", tok_dir, fingerprint(corpora, [len(docs[c]) for c in corpora], vocab_size, min_frequency,
                                                                    [ledger[c].words for c in corpora]),
                 lambda: train_tokenizer(all_docs, "encoder", vocab_size, min_frequency).save_pretrained(tok_dir), log)
        tok = load_tokenizer(tok_dir)
        ids = TokenIds.from_tokenizer(tok)
        groups = {}
        for group, kinds in (("baby", ("baby",)), ("stories", ("tiny", "gen"))):
            texts = [d for c in corpora if ledger[c].kind in kinds for d in docs[c]]
            if texts:
                groups[group] = encode_encoder_blocks(tok, texts, block).blocks
        counts = {f"{g} (raw)": len(b) for g, b in groups.items()}
        blocks = balance_blocks(groups, train.get("seed", 0)) if balanced and len(groups) > 1 else torch.cat(list(groups.values()))
        counts["total"] = len(blocks)
        train_data = MaskedBlocks(blocks, ids, seed=train.get("seed", 0))
        if long_phase.get("long_block"):
            texts = {g: [d for c in corpora if ledger[c].kind in kinds for d in docs[c]]
                     for g, kinds in (("baby", ("baby",)), ("stories", ("tiny", "gen")))}
            train_data = long_phase_data(tok, train_data, {g: t for g, t in texts.items() if t}, balanced,
                                         int(train["steps"]), train.get("seed", 0), **long_phase)
            counts["long phase"] = {"block": int(long_phase["long_block"]), "blocks": len(train_data.long.blocks),
                                    "from step": train_data.switch_step, "batch fraction": train_data.long_batch_fraction}
        valid = {k: encode_encoder_blocks(tok, v, block, max_blocks=valid_blocks, seed=train.get("seed", 0)) for k, v in held.items()}
        valid["all"] = MaskedBlocks(torch.cat([valid["tiny"].blocks, valid["baby"].blocks]), ids, seed=train.get("seed", 0))
        config = ltg_bert_config(model, vocab_size=len(tok), pad_token_id=ids.pad_id, cls_token_id=ids.cls_id,
                                 sep_token_id=ids.sep_id, mask_token_id=ids.mask_id)
        runs[name] = EncoderRun(name, corpora, balanced, tok, train_data, valid, config, TrainConfig(**train),
                                {"by_kind": {k: v for k, v in by_kind.items() if v}, "by_source": by_source,
                                                 "rule": ledger.rule_words(corpora)["counted"]}, counts)
    return runs


def train_encoder(run: EncoderRun, out_dir: str | Path, progress: bool = True, log: Callable[[str], None] = print) -> TrainResult:
    """Pretrain one LTG-BERT encoder on its mix (MLM with span masking) via :func:`train_or_skip`; the mix's
    words per source are stored with the run (``train_state.json``) and next to the model (``best/mix.json``)."""
    from .ltg_bert import LtgBertForMaskedLM
    from .masking import mlm_loss

    mix = {"corpora": run.corpora, "balanced": run.balanced, "words": run.words, "blocks": run.blocks}
    spec = {k: v for k, v in run.config.to_dict().items() if k not in ("transformers_version", "architectures", "auto_map")}
    res = train_or_skip(run.name, lambda: LtgBertForMaskedLM(run.config), spec, run.train_data,
                        run.valid_data["all"], run.tokenizer, run.cfg, out_dir, mlm_loss, progress, log, extra={"mix": mix})
    from .artifacts import write_json

    write_json(Path(out_dir) / "best" / "mix.json", mix)
    return res


def main(argv: Sequence[str] | None = None) -> int:
    """Train a profile's decoders outside the notebook, e.g. on several GPUs:

        torchrun --nproc_per_node 4 -m helpers.training --profile paper [--budgets tiny-5M,tiny-10M]

    Reads ``params/<profile>/02_*.yaml``; notebook 02 then finds the finished runs and skips them."""
    import argparse

    from .config import load_params, run_dir

    ap = argparse.ArgumentParser(prog="python -m helpers.training", description=main.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--budgets", help="comma-separated subset of the profile's budgets")
    a = ap.parse_args(argv)
    p = load_params(a.profile, "02")
    budgets = a.budgets.split(",") if a.budgets else p["budgets"]
    unknown = sorted(set(budgets) - set(p["budgets"]))
    if unknown:
        raise SystemExit(f"budgets {unknown} are not in params/{a.profile}/02_*.yaml ({p['budgets']})")
    runs = plan_decoders(run_dir(a.profile), budgets, p["model"], p["train"], p.get("regularisation", "words"),
                         p.get("word_scale", 1.0), p.get("fixed_dropout", 0.1), p.get("fixed_weight_decay", 0.1),
                         p.get("valid_blocks"))
    d = init_distributed()
    for name, r in runs.items():
        res = train_decoder(name, r.train_data, r.valid_data, r.tokenizer, r.spec, r.cfg,
                            run_dir(a.profile) / "decoders" / name, log=print if d.main else (lambda *_: None))
        if d.main:
            print(f"{name}: best valid loss {res.best_valid_loss:.4f} at step {res.best_step}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
