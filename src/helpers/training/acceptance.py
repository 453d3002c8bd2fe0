"""Checkpoint acceptance: a retrained model replaces the finished run it was trained to replace only when it is sane
(best held-out loss finite and below a uniform guess, ln(vocab)); otherwise the finished run is moved back and
:class:`~helpers.training.loop.TrainingRejected` says so. A finished run with a damaged model (:func:`damaged_run`)
is not accepted as done. Used by :func:`helpers.training.recipes.train_or_skip`."""
from __future__ import annotations

import json
import math
import os
import shutil
import time as _time
from pathlib import Path
from typing import Any, Callable

from helpers.core.artifacts import read_json
from helpers.core.config import model_folder_problem, shown_path
from helpers.training.loop import TrainingRejected, TrainResult


def vocab_size(model, spec: Any, tokenizer) -> int | None:
    """The number of classes a uniform guess spreads over (the model's input vocabulary)."""
    try:
        return int(model.get_input_embeddings().num_embeddings)
    except (AttributeError, TypeError):
        pass
    if isinstance(spec, dict) and spec.get("vocab_size"):
        return int(spec["vocab_size"])
    return len(tokenizer) if tokenizer is not None else None


def damaged_run(out: Path) -> str | None:
    """Why the finished run in ``out`` cannot be used (:func:`helpers.core.config.model_folder_problem` of its
    ``best/`` or of another saved model of it, such as the plain model repetition fine-tuning keeps in
    ``mle-best/``: truncated, edited since it was saved, NaN/inf weights), None when every model is whole. A
    skip decision that finds one trains the run again instead."""
    folders = [out / "best", *sorted({w.parent for w in out.glob("*/model.safetensors")} - {out / "best"})]
    return next(filter(None, map(model_folder_problem, folders)), None)


def pending_kept(out: Path) -> Path | None:
    """The run set aside for ``out`` (``_replaces.json``: a sibling's name; older markers hold a path)."""
    try:
        kept = Path(json.loads((out / "_replaces.json").read_text())["kept"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        return None
    return kept if kept.is_absolute() else out.parent / kept


def settle_replacement(name: str, out: Path, result: TrainResult, vocab: int | None,
                        log: Callable[[str], None]) -> TrainResult:
    """A finished run replaces the run set aside for it only if sane: best held-out loss finite and below a uniform
    guess, ln(vocab). Sane: the old run is removed. Not sane: the new run is moved to ``<out>.rejected-<date>``, the old
    one back to ``out``, and :class:`TrainingRejected` says so (with no old run, a warning)."""
    if int(os.environ.get("RANK", "0")) != 0 or not (out / "train_state.json").is_file():
        return result  # another process of a distributed run, or not finished: the main process settles
    kept = pending_kept(out)
    loss = result.best_valid_loss
    bound = math.log(vocab) if vocab and vocab > 1 else math.inf
    if math.isfinite(loss) and loss < bound:
        if kept is not None and kept.exists():
            shutil.rmtree(kept, ignore_errors=True)
            log(f"[replace] {name}: the new run (held-out loss {loss:.3f}) replaces the previous one; "
                f"{shown_path(kept)} is removed")
        (out / "_replaces.json").unlink(missing_ok=True)
        return result
    why = (f"its held-out loss {loss:.3f} is not below a uniform guess, ln({vocab}) = {bound:.3f}" if math.isfinite(loss)
           else f"its held-out loss is {loss}")
    if kept is None or not kept.exists():
        log(f"[warn] {name}: the model in {shown_path(out)} learnt nothing usable ({why}); lower the learning rate or "
            f"check the data")
        return result
    for old in out.parent.glob(f"{out.name}.rejected-*"):  # one rejected run per model is enough to inspect
        shutil.rmtree(old, ignore_errors=True)
    rejected = out.with_name(f"{out.name}.rejected-{_time.strftime('%Y%m%d-%H%M%S')}")
    os.replace(out, rejected)
    os.replace(kept, out)
    (rejected / "_replaces.json").unlink(missing_ok=True)
    try:
        before = f" (held-out loss {float(read_json(out / 'train_state.json')['best_valid_loss']):.3f})"
    except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError, ValueError):
        before = ""
    raise TrainingRejected(
        f"{name}: the retrained model is not sane ({why}), so it does not replace the previous run{before}, which "
        f"stays in {shown_path(out)}; the rejected run is kept at {shown_path(rejected)}. Lower the learning rate (or "
        f"put the previous params back) and rerun")
