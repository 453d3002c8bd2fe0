"""The model card (``README.md``) written into every best checkpoint folder next to the weights: what the model is,
how to load it with the Auto classes, what it was trained on and with which recipe, its best validation loss and
the project revision that trained it, so a folder copied elsewhere still says what it holds."""
from __future__ import annotations

import dataclasses
import functools
import json
import subprocess
from pathlib import Path
from typing import Any

from helpers.core.config import repo_root
from helpers.core.digests import source_digest

#: the packages whose source a trained model's ``code_digest`` covers (what builds, feeds and trains it)
TRAINING_CODE = ("training", "models", "data")


@functools.lru_cache(maxsize=1)
def revision() -> str:
    """The git revision of the checkout (``+dirty`` with uncommitted changes), or ``unknown`` outside git."""
    try:
        root = repo_root()
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True,
                             check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """The digest of the code that trains a model: :func:`helpers.core.digests.source_digest` of the ``.py`` files
    of the ``helpers`` packages :data:`TRAINING_CODE` (16 hex digits)."""
    helpers = Path(__file__).resolve().parents[1]
    return source_digest(helpers / name for name in TRAINING_CODE)


def provenance() -> dict[str, str]:
    """What a trained model's sidecar records about the code that trained it: ``revision`` (:func:`revision`) and
    ``code_digest`` (:func:`code_digest`)."""
    return {"revision": revision(), "code_digest": code_digest()}


def _loader(config: Any) -> str:
    arch = (getattr(config, "architectures", None) or [""])[0]
    if "MaskedLM" in arch:
        return ("from transformers import AutoModelForMaskedLM\n"
                "model = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True)  # LTG-BERT's code is in the folder")
    return "from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained(folder)"


def model_card(model: Any, name: str, step: int, valid_loss: float, cfg: Any, extra: dict | None = None) -> str:
    """Markdown for the best checkpoint of run ``name`` (the run folder's name: a budget such as ``tiny-1M`` or an
    encoder mix), at optimizer ``step`` with validation loss ``valid_loss`` (nats per token), trained with ``cfg``
    (a :class:`~helpers.training.loop.TrainConfig`) and ``extra`` (what the run stored beside it, e.g. the model's
    spec or the mix's corpora)."""
    config = model.config
    n_params = sum(p.numel() for p in model.parameters())
    recipe = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else dict(cfg)
    lines = [
        f"# {name}",
        "",
        f"A `{config.model_type}` model ({n_params:,} parameters) trained by storybench, revision `{revision()}`: "
        f"run `{name}` (a TinyStories budget for a decoder, a corpus mix for an encoder; the notebook that trained it "
        "records its data files with their SHA-256 in `reports/<profile>/manifest.json`).",
        "",
        "```python",
        "folder = \"path/to/this/folder\"",
        _loader(config),
        "```",
        "",
        f"- best checkpoint: step {int(step):,} of {int(recipe.get('steps', 0)):,}, validation loss {valid_loss:.4f} nats "
        "per token on the run's held-out blocks",
        f"- recipe: {json.dumps(recipe, default=str)}",
    ]
    if extra:
        lines.append(f"- run: {json.dumps(extra, default=str)}")
    lines += ["", "Methods, data and their licences: the storybench repository (`docs/methods.md`, `data/SOURCES.md`).", ""]
    return "\n".join(lines)
