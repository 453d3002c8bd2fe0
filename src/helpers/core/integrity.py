"""Whether a saved artefact can be loaded, read from the file itself (standard library only at import, imported by
:mod:`helpers.core.config`): a safetensors file must be exactly as long as the tensors its header lists, a model
folder's ``config.json`` must parse, its weights (and ``config.json``, ``tokenizer.json``) must still have the SHA-256
recorded when the folder was saved (the sidecar :data:`SIDECAR`, written by
:func:`helpers.core.artifacts.stamp_model_folder`), and every floating tensor of its weights must be finite (torch is
imported only for a folder that holds weights). A folder saved before the sidecar existed is checked for finiteness
only."""
from __future__ import annotations

import json
import os
from pathlib import Path

from helpers.core.digests import MODEL_FILES, WEIGHT_FILES, files_digest, sha256_file

#: the sidecar of a saved model or tokenizer folder: the SHA-256 of its files when it was saved (``sha256``) and, for
#: a trained model, the provenance of the run (``revision``, ``code_digest``)
SIDECAR = "storybench.json"


def safetensors_problem(path: str | os.PathLike) -> str | None:
    """Why the safetensors file ``path`` cannot be loaded (missing, truncated, unreadable header), None when whole.
    Reads only its header: the file must be exactly as long as the tensors its header lists."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little") if size >= 8 else -1
            if n < 0 or 8 + n > size:
                return f"{size:,} bytes, shorter than its own header (truncated)"
            header = json.loads(f.read(n))
    except FileNotFoundError:
        return "missing"
    except (OSError, ValueError, UnicodeDecodeError) as e:
        return f"unreadable header ({type(e).__name__})"
    try:
        end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        return "unreadable header (no tensor offsets)"
    if 8 + n + end != size:
        return f"{size:,} bytes where its header needs {8 + n + end:,} (truncated or edited)"
    return None


def sidecar_record(folder: str | os.PathLike) -> dict[str, dict[str, str]]:
    """What the sidecar of a freshly saved ``folder`` records about its files: ``{"sha256": {name: SHA-256}}`` of its
    weights, ``config.json`` and ``tokenizer.json`` (those present)."""
    return {"sha256": files_digest(folder, MODEL_FILES)}


def read_sidecar(folder: str | os.PathLike) -> dict | None:
    """The sidecar (:data:`SIDECAR`) of a saved folder as a dict; None when there is none (a folder saved before it
    existed). An unreadable sidecar raises :class:`ValueError`."""
    f = Path(folder) / SIDECAR
    try:
        info = json.loads(f.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ValueError(f"unreadable ({type(e).__name__})") from None
    if not isinstance(info, dict) or not isinstance(info.get("sha256", {}), dict):
        raise ValueError("unreadable (not a mapping of file digests)")
    return info


def digest_mismatch(folder: str | os.PathLike) -> tuple[Path, str] | None:
    """(file, problem) of the first file of ``folder`` whose SHA-256 differs from the one its sidecar recorded when
    the folder was saved (or that is gone since); None when all agree or nothing was recorded."""
    folder = Path(folder)
    try:
        info = read_sidecar(folder)
    except ValueError as e:
        return folder / SIDECAR, str(e)
    for name, recorded in ((info or {}).get("sha256") or {}).items():
        f = folder / name
        if not f.is_file():
            return f, f"missing, though {SIDECAR} records it"
        if sha256_file(f) != recorded:
            return f, (f"its SHA-256 differs from the one recorded in {SIDECAR} when the folder was saved "
                       f"(overwritten or edited since)")
    return None


_FINITE: set[tuple] = set()  # (path, size, mtime_ns, inode) of weight files found finite in this process


def nonfinite_weights(folder: str | os.PathLike) -> tuple[Path, str] | None:
    """(file, problem) of the first weight file of ``folder`` (:data:`~helpers.core.digests.WEIGHT_FILES`) with a
    floating tensor that is not finite everywhere (NaN or inf), checked with ``torch.isfinite`` after loading each
    tensor; None when all are finite or there are no weights. Imports torch only when there are weights; a file
    found finite is not read again in this process until it changes."""
    folder = Path(folder)
    files = [folder / n for n in WEIGHT_FILES if (folder / n).is_file()]
    if not files:
        return None
    import torch

    for f in files:
        st = f.stat()
        key = (str(f.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
        if key in _FINITE:
            continue
        if f.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(f), framework="pt") as sf:
                tensors = ((name, sf.get_tensor(name)) for name in sf.keys())
                bad = next((name for name, t in tensors if t.is_floating_point() and not bool(torch.isfinite(t).all())),
                           None)
        else:
            state = torch.load(f, map_location="cpu", weights_only=True, mmap=True)
            bad = next((name for name, t in state.items()
                        if torch.is_tensor(t) and t.is_floating_point() and not bool(torch.isfinite(t).all())), None)
        if bad is not None:
            return f, f"tensor {bad} holds non-finite values (NaN or inf)"
        _FINITE.add(key)
    return None


def damaged_file(folder: str | os.PathLike, finite: bool = True) -> tuple[Path, str] | None:
    """(file, problem) of the first damaged file of a saved model or tokenizer folder (``save_pretrained``'s): a
    truncated ``*.safetensors`` file, an unreadable ``config.json``, a file whose SHA-256 differs from the one its
    sidecar recorded (:func:`digest_mismatch`) and, with ``finite``, weights holding NaN or inf
    (:func:`nonfinite_weights`); None when whole (or not a folder)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    for f in sorted(folder.glob("*.safetensors")):
        if problem := safetensors_problem(f):
            return f, problem
    cfg = folder / "config.json"
    if cfg.is_file():
        try:
            json.loads(cfg.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            return cfg, f"unreadable ({type(e).__name__})"
    if found := digest_mismatch(folder):
        return found
    return nonfinite_weights(folder) if finite else None
