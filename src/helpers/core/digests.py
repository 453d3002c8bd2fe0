"""Digests: the one place a hash is computed. SHA-256 of a file (:func:`sha256_file`), of bytes or text
(:func:`bytes_digest`, :func:`text_digest`; cut to ``length`` hex digits where a short key is enough), of a file
being read in a single pass (:func:`sha256_stream`), of the weights and tokenizer files of a model folder
(:func:`model_files_digest`) and of a model's class, config and weights in memory (:func:`model_digest`).

Digests key caches and checks (``data/CHECKSUMS.sha256``, step stamps, fingerprints, the judge's cache): a digest
that changed would run every cached step again, so ``tests/test_digests.py`` pins their values on small inputs.
Standard library only at import (the runner and the set-up's model-file check hash files without torch)."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable

#: the weight files of a ``save_pretrained`` folder (one of them must be there) and the files a model folder's
#: digest covers
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
MODEL_FILES = (*WEIGHT_FILES, "config.json", "tokenizer.json")


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """SHA-256 (64 hex digits) of the file's bytes, read ``chunk`` bytes at a time."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_stream() -> "hashlib._Hash":
    """A SHA-256 to ``update`` block by block, for a file hashed in the pass that reads it (its ``hexdigest()``
    equals :func:`sha256_file` of the same bytes)."""
    return hashlib.sha256()


def bytes_digest(data: bytes, length: int | None = None) -> str:
    """SHA-256 of ``data`` in hex, its first ``length`` digits (all 64 when None)."""
    return hashlib.sha256(data).hexdigest()[:length]


def text_digest(text: str, length: int | None = None) -> str:
    """:func:`bytes_digest` of ``text`` encoded as UTF-8."""
    return bytes_digest(text.encode("utf-8"), length)


def files_digest(folder: str | os.PathLike, names: Iterable[str]) -> dict[str, str]:
    """``name -> SHA-256`` of the files ``names`` of ``folder`` that exist, in the order given."""
    p = Path(folder)
    return {n: sha256_file(p / n) for n in names if (p / n).is_file()}


def model_files_digest(model_dir: str | os.PathLike) -> dict[str, str]:
    """``name -> SHA-256`` of the weights, ``config.json`` and ``tokenizer.json`` of a ``save_pretrained`` folder
    (what a cache of its results depends on); no weight file raises :class:`FileNotFoundError`."""
    out = files_digest(model_dir, MODEL_FILES)
    if not any(n in out for n in WEIGHT_FILES):
        raise FileNotFoundError(f"no model weights in {model_dir} ({' or '.join(WEIGHT_FILES)})")
    return out


def _config_text(cfg: Any) -> str:
    """``cfg.to_json_string(use_diff=False)`` with the folder the model was loaded from (``_name_or_path``) blanked,
    as in a model built in memory: the same weights loaded from another checkout, or through a relative path, are
    the same model (a digest that named the folder re-scored every model after the repository moved)."""
    text = cfg.to_json_string(use_diff=False)
    if '"_name_or_path"' not in text:
        return text
    d = json.loads(text)
    if not d.get("_name_or_path"):
        return text
    d["_name_or_path"] = ""
    return json.dumps(d, indent=2, sort_keys=True) + "\n"


def model_digest(model: Any) -> str:
    """SHA-256 (16 hex) of a model in memory: its class name, its config (``config.to_json_string``, where it has
    one, without the folder it was loaded from: :func:`_config_text`) and every tensor of its state dict (name,
    shape, dtype and bytes), in name order."""
    import torch

    h = hashlib.sha256(type(model).__name__.encode())
    cfg = getattr(model, "config", None)
    if cfg is not None and hasattr(cfg, "to_json_string"):
        h.update(_config_text(cfg).encode())
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode() + str(t.dtype).encode())
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:16]


def source_digest(folders: Iterable[str | os.PathLike], pattern: str = "*.py", length: int | None = 16) -> str:
    """SHA-256 (first ``length`` hex digits) of the source files ``pattern`` under each of ``folders`` (e.g. the
    ``helpers/training`` package): every file's path below its folder's parent (``training/loop.py``) and its bytes,
    in path order, caches (``__pycache__``) left out. What a model's provenance records as the code that trained it."""
    h = hashlib.sha256()
    for folder in map(Path, folders):
        for f in sorted(folder.rglob(pattern)):
            if "__pycache__" in f.parts or not f.is_file():
                continue
            h.update(f.relative_to(folder.parent).as_posix().encode() + b"\0")
            h.update(f.read_bytes() + b"\0")
    return h.hexdigest()[:length]
