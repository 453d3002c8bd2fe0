"""Whether a saved artefact can be loaded, read from the file itself (standard library only, imported by
:mod:`helpers.core.config`): a safetensors file must be exactly as long as the tensors its header lists, a model
folder's ``config.json`` must parse."""
from __future__ import annotations

import json
import os
from pathlib import Path


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


def damaged_file(folder: str | os.PathLike) -> tuple[Path, str] | None:
    """(file, problem) of the first damaged ``*.safetensors`` file or unreadable ``config.json`` in a saved model
    folder (``save_pretrained``'s); None when whole (or not a folder)."""
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
    return None
