"""Atomic artefact writing, checksums and skippable steps.

Every artefact is written to a temporary sibling and renamed into place, so a killed
process never leaves a half-written file behind.  A *step* is a unit of work whose
output folder carries a ``_step.json`` stamp holding the fingerprint (hash of params and
input checksums) it was made from; rerunning with the same fingerprint skips the work.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

STAMP = "_step.json"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success rename it onto ``path``.

    Works for files and folders (whatever the body creates at the yielded path).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    target = tmp / (path.name + suffix)
    try:
        yield target
        if not target.exists():
            raise FileNotFoundError(f"atomic write of {path} produced nothing")
        if path.is_dir() and not path.is_symlink():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(target, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(target, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_text(path: str | os.PathLike, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(path: str | os.PathLike, obj: Any, indent: int = 2) -> Path:
    return write_text(path, json.dumps(obj, indent=indent, sort_keys=False, default=_json_default) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> Path:
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False, default=_json_default) + "\n")
    return Path(path)


def parse_jsonl(lines: Iterable[str], where: Any, error: type[Exception] = ValueError) -> list[dict]:
    """JSON objects of non-blank ``lines``; a malformed line raises ``error`` naming ``where`` and the line."""
    rows = []
    for i, line in enumerate(lines, 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise error(f"{where}:{i}: malformed JSON line ({e.msg})") from None
    return rows


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return parse_jsonl(f, path)


def _json_default(o: Any) -> Any:
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def fingerprint(*parts: Any) -> str:
    """A short stable hash of JSON-serialisable parts (params, checksums, names)."""
    blob = json.dumps(parts, sort_keys=True, default=_json_default).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def step_is_done(out: str | os.PathLike, fp: str) -> bool:
    stamp = Path(out) / STAMP if Path(out).is_dir() or not Path(out).suffix else Path(str(out) + STAMP)
    try:
        return read_json(stamp).get("fingerprint") == fp
    except (FileNotFoundError, json.JSONDecodeError, AttributeError):
        return False


def mark_step_done(out: str | os.PathLike, fp: str, **info: Any) -> None:
    stamp = Path(out) / STAMP if Path(out).is_dir() else Path(str(out) + STAMP)
    write_json(stamp, {"fingerprint": fp, **info})


def run_step(name: str, out: str | os.PathLike, fp: str, fn: Callable[[], Any], log: Callable[[str], None] = print) -> bool:
    """Run ``fn`` unless ``out`` was already made with fingerprint ``fp``. Returns True if it ran.

    ``fn`` is responsible for writing ``out`` atomically; the stamp is written after it returns,
    so an interrupted step is redone (or resumed, if ``fn`` checkpoints) on the next run.
    """
    if step_is_done(out, fp):
        log(f"[skip] {name}: inputs and params unchanged since the last run ({fp})")
        return False
    log(f"[run ] {name} ({fp})")
    fn()
    mark_step_done(out, fp, step=name)
    return True
