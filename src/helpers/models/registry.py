"""The causal language models of the study by name: GPT-Neo (``"gpt-neo"``, :mod:`helpers.models.decoder`) and the
memory-saving compressor (``"compressor"``, :mod:`helpers.models.compressor`). An entry says how to make the
model's config from a spec, build a fresh model, load a saved folder, and how it decodes, so that generation
(:func:`helpers.generation.completions.generate`, :func:`~helpers.generation.completions.cached_completions`),
scoring (:func:`helpers.evaluation.lm_scoring.causal_scores`) and zero-shot evaluation
(:func:`helpers.evaluation.zero_shot.evaluate_saved`) treat every registered model alike.

* A saved folder is recognised by the ``model_type`` of its ``config.json`` (:func:`load_saved`).
* ``generate_batch`` is the model's own decoding loop for one batch of prompts (the compressor emits two tokens
  per trunk pass); ``None`` means the shared loop with a key-value cache, left padding and position ids
  (GPT-Neo, and any Hugging Face causal LM no entry describes).
* ``min_tokens``: the shortest input the model reads (the compressor's first pair is context only).

A new architecture is its model module under ``models/`` plus one entry of :data:`REGISTRY`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from transformers import GPTNeoForCausalLM

from helpers.models import compressor, decoder


@dataclass(frozen=True)
class ModelEntry:
    """One registered causal LM: its name, the ``model_type`` of its config, its model class, and its entry points."""

    name: str
    model_type: str
    model_class: type
    config: Callable[..., Any]  # (spec, **token_ids) -> config
    build: Callable[..., torch.nn.Module]  # (spec, seed=None, **token_ids) -> a freshly initialised model
    load: Callable[[str | Path], torch.nn.Module]  # a save_pretrained folder -> the model
    generate_batch: Callable[..., list[list[int]]] | None = None  # its own decoding loop; None: the shared one
    min_tokens: int = 1


REGISTRY: dict[str, ModelEntry] = {
    "gpt-neo": ModelEntry("gpt-neo", "gpt_neo", GPTNeoForCausalLM, decoder.gpt_neo_config, decoder.build_decoder,
                          decoder.load_decoder),
    "compressor": ModelEntry("compressor", compressor.MODEL_TYPE, compressor.CompressorForCausalLM,
                             compressor.compressor_config, compressor.build_compressor, compressor.load_compressor,
                             compressor.generate_batch, min_tokens=compressor.FIRST_PREDICTED),
}
DEFAULT = "gpt-neo"  # the study's decoders: what a folder without a config.json (a hub name) is loaded as


def model_names() -> list[str]:
    """The registered models' names."""
    return list(REGISTRY)


def model_entry(name: str) -> ModelEntry:
    """The entry called ``name``."""
    if name not in REGISTRY:
        raise ValueError(f"unknown model {name!r}; registered: {model_names()}")
    return REGISTRY[name]


def entry_of(model_or_config: Any) -> ModelEntry | None:
    """The entry of a model, a config or a ``model_type`` string, found by its ``model_type``; None when no entry
    describes it (an unregistered Hugging Face model)."""
    if isinstance(model_or_config, str):
        model_type = model_or_config
    else:
        cfg = getattr(model_or_config, "config", model_or_config)
        model_type = getattr(cfg, "model_type", None)
    return next((e for e in REGISTRY.values() if e.model_type == model_type), None)


def saved_entry(folder: str | Path) -> ModelEntry:
    """The entry of a ``save_pretrained`` folder, read from the ``model_type`` of its ``config.json``; the default
    (GPT-Neo) for a path without one (a hub name, or a folder not made yet: its loader says which notebook makes it)."""
    config = Path(folder) / "config.json"
    if not config.is_file():
        return REGISTRY[DEFAULT]
    model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    entry = entry_of(model_type)
    if entry is None:
        raise ValueError(f"{folder} holds a {model_type!r} model; registered: "
                         f"{ {e.name: e.model_type for e in REGISTRY.values()} }")
    return entry


def load_saved(folder: str | Path) -> torch.nn.Module:
    """The model saved in ``folder``, loaded by its registered loader (GPT-Neo on the fast attention path, the
    compressor in eval mode)."""
    return saved_entry(folder).load(folder)


def build_model(name: str, spec: Any, seed: int | None = None, **token_ids: int | None) -> torch.nn.Module:
    """A freshly initialised model of entry ``name`` from its ``spec`` (seeded if ``seed`` is given)."""
    return model_entry(name).build(spec, seed=seed, **token_ids)


def parameter_count(name: str, spec: Any, non_embedding: bool = False) -> int:
    """Parameters of the model of entry ``name`` that ``spec`` describes (:func:`helpers.models.decoder.count_parameters`:
    tied weights once), built on the meta device: shapes only, no memory and no initialisation. Token ids do not
    change a count: token 0 stands for end-of-text (inside every vocabulary, so the config does not warn)."""
    entry = model_entry(name)
    with torch.device("meta"):
        model = entry.model_class(entry.config(spec, bos_token_id=0, eos_token_id=0))
    return decoder.count_parameters(model, non_embedding=non_embedding)


def min_tokens(model: Any) -> int:
    """The shortest input ``model`` reads (1 for a model no entry describes)."""
    entry = entry_of(model)
    return entry.min_tokens if entry is not None else 1


def own_generate(model: Any) -> Callable[..., list[list[int]]] | None:
    """``model``'s own decoding loop for one batch (:attr:`ModelEntry.generate_batch`), or None for the shared loop."""
    entry = entry_of(model)
    return entry.generate_batch if entry is not None else None
