"""Every artefact is written atomically: through :mod:`helpers.core.artifacts` (``write_text``, ``write_json``,
``write_jsonl``, ``save_pretrained_atomic``, ``append_jsonl`` for journals) or inside a ``with atomic_path(...)``
block, never straight onto its final path, where a killed process would leave half a file that a later run trusts.
This test reads the source of ``src/helpers`` and fails on a direct write anywhere else, but for :data:`ALLOWED`."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from helpers.core import artifacts as A

HELPERS = Path(__file__).resolve().parents[1] / "src" / "helpers"

#: methods that write wherever they are called (``df.to_csv(path)``, ``model.save_pretrained(folder)``, ...)
WRITING_METHODS = {"write_text", "write_bytes", "to_csv", "to_json", "to_parquet", "to_pickle", "to_excel",
                   "save_pretrained", "savefig"}
#: ``module.function`` calls that write: NumPy's and torch's savers, JSON/pickle dumps, shutil's copies and moves
WRITING_FUNCTIONS = {("np", "save"), ("np", "savez"), ("np", "savez_compressed"), ("numpy", "save"), ("torch", "save"),
                     ("json", "dump"), ("pickle", "dump"), ("yaml", "dump"), ("yaml", "safe_dump"),
                     ("shutil", "copy"), ("shutil", "copy2"), ("shutil", "copyfile"), ("shutil", "copytree"),
                     ("shutil", "move")}
#: (module, enclosing function, what) -> why that direct write is safe; each is checked to still exist
ALLOWED = {
    # the lock must be created exclusively, which a rename onto the path cannot do: its content goes to a private
    # file first, hard-linked to the lock's name (or, without hard links, created with O_CREAT | O_EXCL)
    ("core.locking", "ProfileLock._create", ".write_text"): "the lock's private content file, linked into place",
    ("core.locking", "ProfileLock._create", "os.fdopen(w)"): "an exclusive lock file (no hard links)",
    # not a file: the kernel's switch that resets the RSS high-water mark (memory measurement)
    ("analysis.memory", "_reset_peak_rss", "open(w)"): "/proc/self/clear_refs, a kernel control",
    # the encoder's own save_pretrained: it writes into the folder its caller gave, and every caller passes the
    # temporary folder of atomic_path / save_pretrained_atomic
    ("models.ltg_bert", "LtgBertPreTrainedModel.save_pretrained", ".save_pretrained"): "the method itself",
    ("models.ltg_bert", "LtgBertPreTrainedModel.save_pretrained", "shutil.copyfile"): "inside save_pretrained",
    # copies of notebook 05's cached step outputs and their stamps: a stamp records its output's size and SHA-256,
    # so a copy cut by a kill fails the check (core.artifacts.step_problem) and the task is scored again
    ("evaluation.export", "export", "shutil.copy2"): "a stamped cache, verified on read",
    # packed blocks streamed into the .npy file: its one caller (data.blocks.cached_blocks) passes atomic_path's
    # temporary path, renamed into place only once the header holds the final shape
    ("data.blocks", "pack_blocks_to_file", "open(w)"): "writes the path it is given: atomic_path's temporary file",
    # a tokenizer saved into a model folder under construction: its callers (training.loop._save_pretrained,
    # training.unlikelihood) pass atomic_path's temporary folder
    ("data.tokenizers", "save_for_model", ".save_pretrained"): "into atomic_path's temporary model folder",
}


def _mode(call: ast.Call, position: int) -> str | None:
    """The constant file mode of an ``open``-like call (positional ``position`` or ``mode=``), if any."""
    for kw in call.keywords:
        if kw.arg == "mode" and isinstance(kw.value, ast.Constant):
            return kw.value.value
    if len(call.args) > position and isinstance(call.args[position], ast.Constant):
        return call.args[position].value
    return None


def _write(call: ast.Call) -> str | None:
    """What a call writes, as a short label (``open(w)``, ``torch.save``, ``.to_csv``), or None for a non-write."""
    f = call.func
    if isinstance(f, ast.Name) and f.id == "open":
        mode = _mode(call, 1)
        return "open(w)" if isinstance(mode, str) and set(mode) & set("wax+") else None
    if not isinstance(f, ast.Attribute):
        return None
    owner = f.value.id if isinstance(f.value, ast.Name) else None
    if f.attr in ("open", "fdopen"):  # gzip.open(p, "wt"), os.fdopen(fd, "w"), path.open("w")
        mode = _mode(call, 0 if owner is None or owner not in ("gzip", "bz2", "lzma", "os", "io") else 1)
        return f"{owner or ''}.{f.attr}(w)".lstrip(".") if isinstance(mode, str) and set(mode) & set("wax+") else None
    if (owner, f.attr) in WRITING_FUNCTIONS:
        return f"{owner}.{f.attr}"
    if f.attr in ("to_csv", "to_json") and not call.args and not any(k.arg == "path_or_buf" for k in call.keywords):
        return None  # no path: returns the text (``write_text(p, df.to_csv(index=False))``)
    if f.attr in WRITING_METHODS:
        return f".{f.attr}"
    return None


def _atomic(with_node: ast.With) -> bool:
    """Whether a ``with`` statement opens ``atomic_path(...)`` (its body writes to the temporary path)."""
    for item in with_node.items:
        e = item.context_expr
        if isinstance(e, ast.Call):
            name = e.func.attr if isinstance(e.func, ast.Attribute) else getattr(e.func, "id", None)
            if name == "atomic_path":
                return True
    return False


def direct_writes(tree: ast.AST) -> list[tuple[int, str, str]]:
    """``(line, enclosing function, what)`` of every write in ``tree`` outside a ``with atomic_path(...)`` block."""
    found = []

    def visit(node: ast.AST, where: list[str], atomic: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            where = [*where, node.name]
        if isinstance(node, ast.With) and _atomic(node):
            atomic = True
        if isinstance(node, ast.Call) and not atomic and (what := _write(node)):
            found.append((node.lineno, ".".join(where), what))
        for child in ast.iter_child_nodes(node):
            visit(child, where, atomic)

    visit(tree, [], False)
    return found


def _modules() -> dict[str, Path]:
    return {".".join(p.relative_to(HELPERS).with_suffix("").parts): p for p in sorted(HELPERS.rglob("*.py"))
            if p.name != "__init__.py"}


def test_no_direct_writes_outside_core_artifacts():
    """A write in ``src/helpers`` goes through core.artifacts or happens inside ``with atomic_path(...)``."""
    bad, used = [], set()
    for name, path in _modules().items():
        if name == "core.artifacts":
            continue
        for line, where, what in direct_writes(ast.parse(path.read_text())):
            if (name, where, what) in ALLOWED:
                used.add((name, where, what))
            else:
                bad.append(f"src/helpers/{path.relative_to(HELPERS)}:{line} in {where or 'module'}: {what}")
    assert not bad, ("direct writes (a kill leaves half a file): use helpers.core.artifacts (write_text, write_json, "
                     "write_jsonl, save_pretrained_atomic, append_jsonl) or write inside `with atomic_path(p) as tmp:`"
                     "\n" + "\n".join(bad))
    assert used == set(ALLOWED), f"allowances no longer needed (remove them): {sorted(set(ALLOWED) - used)}"


def test_the_detector_finds_writes_and_spares_atomic_ones():
    src = '''
import json, shutil, torch
def f(df, model, p):
    df.to_csv(p)
    write_text(p, df.to_csv(index=False))
    with open(p, "a") as h:
        json.dump({}, h)
    with open(p) as h:
        h.read()
    torch.save({}, p)
    shutil.copytree(p, p)
    model.save_pretrained(p)
    with atomic_path(p) as tmp:
        model.save_pretrained(tmp)
        torch.save({}, tmp / "x")
        (tmp / "y").write_text("z")
'''
    got = [(line, what) for line, _, what in direct_writes(ast.parse(src))]
    assert got == [(4, ".to_csv"), (6, "open(w)"), (7, "json.dump"), (10, "torch.save"), (11, "shutil.copytree"),
                   (12, ".save_pretrained")]


class _Saver:
    """Stands for a model or tokenizer: ``save_pretrained`` writes a file into the folder it is given."""

    def __init__(self, name: str, fail: bool = False):
        self.name, self.fail = name, fail

    def save_pretrained(self, folder):
        if self.fail:
            raise OSError("disk full")
        (Path(folder) / self.name).write_text(self.name)


def test_save_pretrained_atomic_replaces_a_folder_whole(tmp_path):
    out = tmp_path / "model"
    A.save_pretrained_atomic(out, _Saver("weights"), _Saver("tokenizer"))
    assert sorted(p.name for p in out.iterdir()) == ["storybench.json", "tokenizer", "weights"]  # with its sidecar
    with pytest.raises(OSError):
        A.save_pretrained_atomic(out, _Saver("new-weights"), _Saver("tokenizer", fail=True))
    assert sorted(p.name for p in out.iterdir()) == ["storybench.json", "tokenizer", "weights"]  # the old folder, whole
    assert [p.name for p in tmp_path.iterdir()] == ["model"]  # no temporary left behind


def test_append_jsonl_adds_whole_lines(tmp_path):
    f = tmp_path / "sub" / "log.jsonl"
    A.append_jsonl(f, {"step": 1, "loss": 2.5})
    A.append_jsonl(f, {"step": 2, "note": "é"})
    assert f.read_text() == '{"step": 1, "loss": 2.5}\n{"step": 2, "note": "\\u00e9"}\n'  # json.dumps' defaults
    assert [json.loads(line) for line in f.read_text().splitlines()][1] == {"step": 2, "note": "é"}
