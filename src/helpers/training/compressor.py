"""Training the memory-saving compressor model (:mod:`helpers.models.compressor`, Rathod et al. 2024 §7;
``docs/methods.md#compressor``) with the project's one loop: :func:`train_compressor` builds it with the tokenizer's
end-of-text id and trains, resumes or skips it through :func:`helpers.training.recipes.train_or_skip` with the
compressor's own loss (tokens ``2..T-1``). Its comparison with GPT-Neo is notebook 02b's
(:mod:`helpers.analysis.architecture`, :mod:`helpers.analysis.memory`)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from helpers.data.tokenizers import end_of_text_id
from helpers.models.compressor import build_compressor, compressor_config, compressor_loss
from helpers.training.loop import TrainResult
from helpers.training.recipes import train_or_skip


def train_compressor(name: str, train_data, valid_data, tokenizer, spec: dict, cfg, out_dir: str | Path,
                     progress: bool = True, log: Callable[[str], None] = print) -> TrainResult:
    """Train (or resume, or skip) a :mod:`helpers.models.compressor` model with the project's one loop
    (:func:`helpers.training.recipes.train_or_skip`, loss ``compressor_loss``); the best checkpoint lands in
    ``<out_dir>/best`` with the tokenizer."""
    compressor_config(spec)  # refuse bad specs before anything is deleted or trained
    eot = end_of_text_id(tokenizer)
    ids = dict(bos_token_id=eot, eos_token_id=eot, pad_token_id=eot)
    return train_or_skip(name, lambda: build_compressor(spec, seed=cfg.seed, **ids), {"compressor": dict(spec)},
                         train_data, valid_data, tokenizer, cfg, out_dir, loss_fn=compressor_loss, progress=progress,
                         log=log)
