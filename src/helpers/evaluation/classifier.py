"""The sequence classifier that (Super)GLUE fine-tuning trains (``docs/methods.md#glue``): a pretrained LM folder
loaded with a new classification head (:func:`load_classifier`), examples encoded and padded into batches,
prediction and scoring (:func:`evaluate_examples`), and the training loop with checkpoint selection on dev
(:func:`fit`).

Training
--------
AdamW (decay 0.01 on weight matrices only, :func:`helpers.training.optim.param_groups`), linear (or cosine) decay after a
linear warm-up (6 % of the steps, the pipeline's ``warmup_proportion``), gradient clipping, batch 32, max length
128, 10 epochs, lr 3e-5 (BERTtime) or 5e-5 with patience 3 (BabyLM):
:func:`helpers.evaluation.finetune_setup.finetune_config` ``("berttime")`` / ``("babylm")``. Each epoch ends with an
evaluation on dev; the best epoch's weights (strictly better dev metric; ties keep the earlier epoch) are restored
before the test evaluation. Batches are shuffled with a seeded generator and padded to the longest sequence of the
batch (no length sorting). Dropout is the model config's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
import transformers

from helpers.core.artifacts import read_json
from helpers.core.hardware import compute_device
from helpers.core.progress import progress as progress_bar
from helpers.core.seeding import generator, seed_everything
from helpers.data.tokenizers import load_tokenizer
from helpers.evaluation.finetune_setup import FinetuneConfig
from helpers.evaluation.glue_tasks import Example, score_all
from helpers.models.ltg_bert import LtgBertForSequenceClassification
from helpers.training.optim import param_groups


# ============================================================================================= model and batches


def model_kind(model_dir: str | Path) -> str:
    """``encoder`` (LTG-BERT) or ``decoder`` (GPT-Neo and other causal LMs) from ``config.json``."""
    cfg = read_json(Path(model_dir) / "config.json")
    mt = cfg.get("model_type", "")
    if mt == "ltgbert":
        return "encoder"
    if mt in ("gpt_neo", "gpt2", "llama", "gpt_neox"):
        return "decoder"
    raise ValueError(f"{model_dir}: model type {mt!r} is not supported for fine-tuning")


def load_classifier(model_dir: str | Path, num_labels: int, label_names: Sequence[str] = (), seed: int = 0):
    """(model, tokenizer, kind): a sequence classifier initialised from a pretrained LM folder (the new head is
    initialised with ``seed``) and the folder's tokenizer."""
    kind = model_kind(model_dir)
    tokenizer = load_tokenizer(model_dir)
    id2label = {i: n for i, n in enumerate(label_names)} if label_names else None
    extra = dict(id2label=id2label, label2id={n: i for i, n in id2label.items()}) if id2label else {}
    verbosity = transformers.logging.get_verbosity()
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.logging.set_verbosity_error()  # "newly initialized: classifier.*" is expected
    transformers.utils.logging.disable_progress_bar()
    try:
        seed_everything(seed)
        if kind == "encoder":
            model = LtgBertForSequenceClassification.from_pretrained(str(model_dir), num_labels=num_labels, **extra)
        else:
            model = transformers.AutoModelForSequenceClassification.from_pretrained(str(model_dir), num_labels=num_labels, **extra)
            model.config.pad_token_id = tokenizer.pad_token_id
    finally:
        transformers.logging.set_verbosity(verbosity)
        if bars:
            transformers.utils.logging.enable_progress_bar()
    return model, tokenizer, kind


def _truncate_pair(a: list[int], b: list[int], budget: int) -> tuple[list[int], list[int]]:
    """Longest-first truncation (one token at a time from the longer segment, the first one on ties)."""
    la, lb = len(a), len(b)
    while la + lb > budget:
        if la >= lb:
            la -= 1
        else:
            lb -= 1
    return a[:la], b[:lb]


def encode(tokenizer, examples: Sequence[Example], max_length: int, kind: str = "encoder") -> list[list[int]]:
    """Token ids per example. Encoders: the tokenizer's template (``[CLS] a [SEP] b [SEP]``), truncated
    longest-first to ``max_length``. Decoders (no pair template): ``a <|endoftext|> b`` with the same truncation;
    the classifier reads the last token."""
    if not examples:
        return []
    a = [e.a for e in examples]
    if kind == "encoder":
        if all(e.b is None for e in examples):
            return tokenizer(a, truncation=True, max_length=max_length)["input_ids"]
        if any(e.b is None for e in examples):
            raise ValueError("mixed single-segment and pair examples")
        return tokenizer(a, [e.b for e in examples], truncation=True, max_length=max_length)["input_ids"]
    ids_a = tokenizer(a, add_special_tokens=False)["input_ids"]
    if all(e.b is None for e in examples):
        return [x[:max_length] for x in ids_a]
    sep = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
    ids_b = tokenizer([e.b or "" for e in examples], add_special_tokens=False)["input_ids"]
    out = []
    for x, y in zip(ids_a, ids_b):
        x, y = _truncate_pair(x, y, max_length - 1)
        out.append(x + [sep] + y)
    return out


def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad to the longest sequence of the batch: (input_ids, attention_mask)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), int(pad_id), dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


@torch.no_grad()
def predict(model, ids: Sequence[Sequence[int]], pad_id: int, batch_size: int = 64, device=None) -> np.ndarray:
    """Arg-max class of every sequence (model in eval mode, restored afterwards); the batches go to ``device``,
    by default the model's own (a model that :func:`fit` moved to a GPU is read there)."""
    was = model.training
    model.eval()
    if device is None:
        device = next(model.parameters()).device
    out = []
    for i in range(0, len(ids), batch_size):
        x, m = pad_batch(ids[i : i + batch_size], pad_id)
        x, m = x.to(device), m.to(device)
        out.append(model(input_ids=x, attention_mask=m).logits.argmax(-1).cpu().numpy())
    model.train(was)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def evaluate_examples(model, tokenizer, examples: Sequence[Example], cfg: FinetuneConfig, kind: str, num_labels: int,
                      device=None, return_predictions: bool = False):
    """All metrics of :func:`score_all` on ``examples`` (with ``return_predictions``: and the labels and
    predictions, as ``(metrics, y_true, y_pred)``)."""
    ids = encode(tokenizer, examples, cfg.max_length, kind)
    pred = predict(model, ids, tokenizer.pad_token_id, cfg.eval_batch_size, device)
    y = [e.label for e in examples]
    scores = score_all(y, pred, num_labels)
    return (scores, np.asarray(y), np.asarray(pred)) if return_predictions else scores


# ============================================================================================= training loop


def lr_multiplier(step: int, total: int, warmup: int, schedule: str = "linear") -> float:
    """Linear warm-up over ``warmup`` steps, then linear/cosine decay to 0 at ``total`` (or constant)."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    if schedule == "cosine":
        return 0.5 * (1 + math.cos(math.pi * progress))
    return max(0.0, 1.0 - progress)


@dataclass
class FitResult:
    best_epoch: int
    best_dev: dict[str, float]
    epochs_run: int
    early_stopped: bool
    history: list[dict]
    steps: int




def fit(model, tokenizer, train: Sequence[Example], dev: Sequence[Example], cfg: FinetuneConfig, metric: str,
        num_labels: int, kind: str = "encoder", progress: bool = True, log: Callable[[str], None] = print,
        desc: str = "", verbose: bool = False) -> FitResult:
    """Fine-tune ``model`` on ``train``; after every epoch score ``dev`` with ``metric`` and keep the best epoch's
    weights (restored into ``model`` at the end). Sees only ``train`` and ``dev``: the reported split is never an
    argument here. ``verbose``: ``log`` a line per epoch (train loss, dev metric) and the early stop; otherwise
    nothing (the caller logs one line per run; every epoch is in the result's ``history``)."""
    if not train or not dev:
        raise ValueError(f"{desc}: empty train ({len(train)}) or dev ({len(dev)}) split")
    device = compute_device(cfg.device)
    model.to(device)
    seed_everything(cfg.seed)
    gen = generator(cfg.seed)
    train_ids = encode(tokenizer, train, cfg.max_length, kind)
    labels = torch.tensor([e.label for e in train], dtype=torch.long)
    pad_id = tokenizer.pad_token_id
    steps_per_epoch = math.ceil(len(train) / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    warmup = int(round(cfg.warmup * total)) if cfg.warmup < 1 else int(cfg.warmup)
    opt = torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_multiplier(s, total, warmup, cfg.schedule))
    best_score, best_state, best_epoch, best_dev = -math.inf, None, 0, {}
    history, bad, step, stopped = [], 0, 0, False
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        order = torch.randperm(len(train), generator=gen).tolist()
        total_loss, n_seen = 0.0, 0
        bar = progress_bar(range(steps_per_epoch), desc=f"{desc} epoch {epoch}/{cfg.epochs}", unit="step",
                           disable=not progress, leave=False)
        for b in bar:
            idx = order[b * cfg.batch_size : (b + 1) * cfg.batch_size]
            x, m = pad_batch([train_ids[i] for i in idx], pad_id)
            y = labels[idx]
            loss = model(input_ids=x.to(device), attention_mask=m.to(device), labels=y.to(device)).loss
            if not torch.isfinite(loss):
                raise FloatingPointError(f"{desc}: non-finite loss {float(loss)} at epoch {epoch}, step {step}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip and cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            sched.step()
            step += 1
            total_loss += float(loss.detach()) * len(idx)
            n_seen += len(idx)
            bar.set_postfix(loss=f"{total_loss / n_seen:.4f}", refresh=False)  # a forced redraw would print a stale count
        bar.close()
        dev_scores = evaluate_examples(model, tokenizer, dev, cfg, kind, num_labels, device)
        score = dev_scores[metric]
        improved = score > best_score
        history.append({"epoch": epoch, "train_loss": total_loss / max(n_seen, 1), "dev": dev_scores,
                        "improved": improved})
        if improved:
            best_score, best_epoch, best_dev, bad = score, epoch, dev_scores, 0
            best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        else:
            bad += 1
        if verbose:
            log(f"  {desc} epoch {epoch}: train loss {total_loss / max(n_seen, 1):.4f}, dev {metric} {score:.4f}"
                + (" *" if improved else ""))
        if cfg.patience is not None and bad >= cfg.patience and epoch < cfg.epochs:
            stopped = True
            if verbose:
                log(f"  {desc}: early stop, no dev improvement for {bad} epoch(s)")
            break
    model.load_state_dict(best_state)
    return FitResult(best_epoch, best_dev, len(history), stopped, history, step)


__all__ = ["model_kind", "load_classifier", "encode", "pad_batch", "predict", "evaluate_examples", "lr_multiplier",
           "FitResult", "fit"]
