"""Atomic artefact writing, checksums and skippable steps.

Every artefact is written to a temporary sibling and renamed into place, so a killed
process never leaves a half-written file behind (:func:`atomic_path`, :func:`write_text`, :func:`write_json`,
:func:`write_jsonl`, :func:`save_pretrained_atomic`; journals grow by whole lines, :func:`append_jsonl`;
``tests/test_writes.py`` finds writes that bypass them); the digests (checksums) are
:mod:`helpers.core.digests`. A saved model or tokenizer folder carries a sidecar (:func:`stamp_model_folder`) with
the SHA-256 of its weights, which every load checks (:mod:`helpers.core.integrity`).  A *step* is a unit of work whose output folder carries a ``_step.json`` stamp
holding the fingerprint (hash of params and input checksums) it was made from; rerunning with the same
fingerprint skips the work.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from helpers.core.config import rebuild_hint, shown_path
from helpers.core.digests import bytes_digest, sha256_file
from helpers.core.integrity import SIDECAR, sidecar_record

STAMP = "_step.json"


def _umask() -> int:
    """The process's umask (read by setting it and restoring it at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _usual_modes(target: Path) -> None:
    """Give what a write produced the modes an ordinary write would have (0644 / 0755 under the usual umask):
    temporary files (``mkstemp``, some libraries' own temporaries) and ``mkdtemp`` folders are private (0600 / 0700),
    and a renamed model folder would keep that, unreadable to the other users of a shared run folder."""
    mask = _umask()
    paths = [target, *target.rglob("*")] if target.is_dir() else [target]
    for p in paths:
        if not p.is_symlink():
            os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~mask)


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
        _usual_modes(target)
        if path.is_dir() and not path.is_symlink():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(target, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(target, path)
    except OSError as e:
        if e.errno not in _DISK_FULL:
            raise
        raise disk_full_error(path, e) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def disk_full_error(path: str | os.PathLike, e: BaseException) -> OSError:
    """One line for a write that ran out of space: the path, the free space, and that the old file is kept."""
    path = Path(path)
    try:
        free = f"{shutil.disk_usage(path.parent).free / 2**20:,.0f} MiB free"
    except OSError:
        free = "free space unknown"
    return OSError(getattr(e, "errno", None) or errno.ENOSPC,
                   f"cannot write {shown_path(path)}: no space left ({free}; {getattr(e, 'strerror', None) or e}); nothing was "
                   f"replaced, the previous {path.name} (if any) is kept")


def write_text(path: str | os.PathLike, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(path: str | os.PathLike, obj: Any, indent: int = 2) -> Path:
    return write_text(path, json.dumps(obj, indent=indent, sort_keys=False, default=_json_default) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    """A JSON file's value; a file that does not parse (garbled, cut) raises a ``json.JSONDecodeError`` (a ValueError)
    naming it as the reader sees it (``runs/cpu/decoders/tiny-1M/best/config.json``), the notebook that rebuilds it,
    and where it breaks."""
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:  # still a JSONDecodeError (callers catch it), now naming the file
            raise json.JSONDecodeError(f"{shown_path(path)}: not valid JSON{rebuild_hint(path)}; {e.msg}", e.doc,
                                       e.pos) from None


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> Path:
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False, default=_json_default) + "\n")
    return Path(path)


def append_jsonl(path: str | os.PathLike, row: dict) -> Path:
    """Append ``row`` as one JSON line to a journal (training metrics, the runner's timings history): rewriting
    the whole file per row would be quadratic, so a kill can cut the last line, which the journals' readers skip
    (``training.loop.read_metrics``) or never reach (the history is read by its last, whole line)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row, default=_json_default) + "\n")
        f.flush()
    return path


def save_pretrained_atomic(path: str | os.PathLike, *objects: Any, info: dict | None = None) -> Path:
    """``save_pretrained`` of each of ``objects`` (a model, its tokenizer) into the one folder ``path``, written
    to a temporary sibling and renamed into place: a killed save leaves the previous folder (or none), never half
    of one. The folder gets its sidecar (:func:`stamp_model_folder`, with ``info``) before the rename."""
    with atomic_path(path) as tmp:
        tmp.mkdir()
        for obj in objects:
            obj.save_pretrained(tmp)
        stamp_model_folder(tmp, **(info or {}))
    return Path(path)


def stamp_model_folder(folder: str | os.PathLike, **info: Any) -> Path:
    """Write the sidecar ``<folder>/storybench.json`` (:data:`helpers.core.integrity.SIDECAR`, atomically): the
    SHA-256 of the folder's weights, ``config.json`` and ``tokenizer.json`` as saved, which every load checks
    (:func:`helpers.core.integrity.damaged_file`), and ``info`` (a trained model's provenance: ``revision``,
    ``code_digest``). Call it once the folder's files are written, before anything loads them."""
    return write_json(Path(folder) / SIDECAR, {**sidecar_record(folder), **info})


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
    """Rows of a JSONL file; a malformed line (a file cut mid-line) raises ValueError naming the file as the reader
    sees it (``runs/smoke/data/x.jsonl:12``) and the notebook that rebuilds it."""
    with open(path, encoding="utf-8") as f:
        try:
            return parse_jsonl(f, shown_path(path))
        except ValueError as e:
            raise ValueError(f"{e}{rebuild_hint(path)}") from None


def iter_rows(path: str | os.PathLike) -> Iterator[dict]:
    """Rows of a JSONL file one at a time (a malformed line raises ValueError naming the file and line)."""
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{i}: malformed JSON line ({e.msg})") from None


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


def fingerprint(*parts: Any) -> str:
    """A short stable hash of JSON-serialisable parts (params, checksums, names)."""
    return bytes_digest(json.dumps(parts, sort_keys=True, default=_json_default).encode(), 16)


def _stamp_path(out: Path) -> Path:
    return out / STAMP if out.is_dir() or not out.suffix else Path(str(out) + STAMP)


def _files(out: Path) -> dict[str, tuple[int, int, int]]:
    """(size, mtime_ns, inode) of every file a step wrote: ``out`` itself, or the files under the folder ``out``
    (stamps and hidden temporaries left out), keyed by their path relative to ``out``'s folder."""
    if out.is_file():
        st = out.stat()
        return {out.name: (st.st_size, st.st_mtime_ns, st.st_ino)}
    found = {}
    if out.is_dir():
        for f in out.rglob("*"):
            rel = f.relative_to(out)
            if f.name == STAMP or any(part.startswith(".") for part in rel.parts) or not f.is_file():
                continue
            st = f.stat()
            found[rel.as_posix()] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return found


def _output_base(out: Path) -> Path:
    return out if out.is_dir() else out.parent


def step_problem(out: str | os.PathLike, fp: str) -> str | None:
    """Why the step of ``out`` must run: no stamp, other inputs/params, or an output that is missing, truncated or
    edited since it was stamped (stamps record each output's size and SHA-256); None when it is done."""
    out = Path(out)
    stamp = _stamp_path(out)
    try:
        info = read_json(stamp)
    except (FileNotFoundError, json.JSONDecodeError):
        return "not run yet"
    if not isinstance(info, dict) or info.get("fingerprint") != fp:
        return "inputs or params changed"
    outputs = info.get("outputs")
    if outputs is None:  # a stamp from before outputs were recorded: no output may be newer than it
        newest = max((v[1] for v in _files(out).values()), default=0)
        if not out.exists():
            return f"its output {shown_path(out)} is missing"
        if newest > stamp.stat().st_mtime_ns:
            return f"an output under {shown_path(out)} changed after the step was stamped"
        return None
    base = _output_base(out)
    for rel, rec in outputs.items():
        f = base / rel
        if not f.is_file():
            return f"its output {shown_path(f)} is missing"
        if rec.get("sha256") is None:  # a file later steps update (e.g. the ledger): it must only exist
            continue
        size = f.stat().st_size
        if size != rec.get("size"):
            return f"its output {shown_path(f)} has {size:,} bytes, stamped with {rec.get('size'):,} (truncated or edited)"
        if sha256_file(f) != rec["sha256"]:
            return f"its output {shown_path(f)} was edited since it was stamped (SHA-256 differs)"
    return None


def step_is_done(out: str | os.PathLike, fp: str) -> bool:
    return step_problem(out, fp) is None


def mark_step_done(out: str | os.PathLike, fp: str, outputs: Iterable[str | os.PathLike] | None = None,
                   mutable: Iterable[str] = (), **info: Any) -> None:
    """Stamp ``out`` as made with ``fp``, recording size and SHA-256 of ``outputs`` (default: every file under
    ``out``); files named in ``mutable`` (later steps update them) are recorded as having to exist only."""
    out = Path(out)
    base = _output_base(out)
    files = [Path(f) for f in outputs] if outputs is not None else [base / rel for rel in _files(out)]
    rec = {}
    for f in files:
        f = f if f.is_absolute() else base / f
        rel = f.relative_to(base).as_posix() if f.is_relative_to(base) else str(f)
        rec[rel] = {"size": None, "sha256": None} if f.name in set(mutable) else {"size": f.stat().st_size,
                                                                                   "sha256": sha256_file(f)}
    write_json(_stamp_path(out), {"fingerprint": fp, **info, "outputs": rec})


def run_step(name: str, out: str | os.PathLike, fp: str, fn: Callable[[], Any], log: Callable[[str], None] = print,
             mutable: Iterable[str] = ()) -> bool:
    """Run ``fn`` unless ``out`` was already made with fingerprint ``fp`` and its outputs are intact. Returns True
    if it ran.

    ``fn`` is responsible for writing ``out`` atomically; the stamp is written after it returns, so an interrupted
    step is redone (or resumed, if ``fn`` checkpoints) on the next run. The stamp records the size and SHA-256 of
    every file ``fn`` wrote or changed (``out`` itself, or the new/changed files under the folder ``out``): a
    missing, truncated or edited output makes the step run again. ``mutable``: names of files the step writes and
    later steps update (such as the budget ledger); they must exist, their content is not compared.
    """
    problem = step_problem(out, fp)
    if problem is None:
        log(f"[skip] {name}: inputs and params unchanged since the last run ({fp})")
        return False
    if problem not in ("not run yet", "inputs or params changed"):
        log(f"[redo] {name}: {problem}")
    log(f"[run ] {name} ({fp})")
    out = Path(out).absolute()  # a path relative to the working folder, not to the output's folder (mark_step_done)
    before = _files(out)
    fn()
    after = _files(out)
    written = [rel for rel, st in after.items() if before.get(rel) != st]
    mark_step_done(out, fp, [_output_base(out) / rel if out.is_dir() else out for rel in written], mutable, step=name)
    return True


def remove_unwritten(folders: Iterable[str | os.PathLike], prefix: str, since: float, slack: float = 2.0) -> list[Path]:
    """Remove the files named ``<prefix>*`` in ``folders`` that were last written before ``since`` (a
    ``time.time()``; ``slack`` seconds allow for coarse file-system clocks) and return them, sorted. A notebook
    rewrites every table and figure it makes (atomically, so each gets a new mtime); what it left unwritten is the
    output of an earlier version (a table since renamed, or one written only under a condition that no longer holds)."""
    gone = []
    for folder in map(Path, folders):
        for f in sorted(folder.glob(f"{prefix}*")) if folder.is_dir() else []:
            if f.is_file() and f.stat().st_mtime < since - slack:
                f.unlink()
                gone.append(f)
    return sorted(gone)
