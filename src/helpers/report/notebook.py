"""The setup cell every notebook shares: its parameters, its run folder, its thread count, and the check that the
decoders it reads exist.

    PARAMS, RUN, n_threads = notebook_setup("05b", globals())
    model_dir = require_decoders(RUN, models)

The parameter names are read from the notebook's own ``parameters`` cell (``notebooks/<NN>_*.ipynb``, the cell
papermill injects ``params/<profile>/<NN>_*.yaml`` after), so ``PARAMS`` (what ``reporting.write_manifest`` records)
holds every declared parameter, in the cell's order, with the value it has after injection; a name added to the
parameters cell is recorded without being typed a second time.
"""
from __future__ import annotations

import ast
import io
import json
import pprint
import tokenize
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

from helpers.core.artifacts import write_text
from helpers.core.config import load_params, profiles, repo_root, run_dir, set_threads, shown_path


class Setup(NamedTuple):
    params: dict[str, Any]  # every parameter of the parameters cell, in its order (the manifest's ``params``)
    run: Path  # runs/<profile>/
    threads: int | None  # torch threads set from the ``threads`` parameter; None when the notebook has none


def notebook_path(notebook: str) -> Path:
    """``notebooks/<NN>_*.ipynb`` for ``notebook`` (``"05b"`` or ``"05b_story_evaluation"``)."""
    prefix = notebook.split("_")[0]
    hits = sorted((repo_root() / "notebooks").glob(f"{prefix}_*.ipynb"))
    if len(hits) != 1:
        raise FileNotFoundError(f"expected one notebooks/{prefix}_*.ipynb for notebook {notebook!r}, found "
                                f"{[h.name for h in hits]}")
    return hits[0]


def parameter_names(notebook: str) -> list[str]:
    """The names assigned in the ``parameters`` cell of ``notebook`` (as saved on disk), in order."""
    path = notebook_path(notebook)
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = [c for c in nb["cells"] if "parameters" in (c.get("metadata", {}).get("tags") or [])]
    if len(cells) != 1:
        raise ValueError(f"{path.name} must have exactly one cell tagged 'parameters' (it has {len(cells)})")
    src = cells[0]["source"]
    names = [t.id for node in ast.parse("".join(src) if isinstance(src, list) else src).body
             if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)]
    return list(dict.fromkeys(names))


def notebook_setup(notebook: str, namespace: Mapping[str, Any]) -> Setup:
    """The parameters of ``notebook`` taken from ``namespace`` (the notebook's ``globals()``), ``runs/<profile>/``
    (created) and the torch thread count (``config.set_threads(threads or None)``, only where the notebook has a
    ``threads`` parameter)."""
    names = parameter_names(notebook)
    missing = [n for n in names if n not in namespace]
    if missing:
        raise NameError(f"notebook {notebook}: parameter(s) {', '.join(missing)} of its parameters cell are not "
                        "defined; run the parameters cell first")
    params = {n: namespace[n] for n in names}
    if "profile" not in params:
        raise ValueError(f"notebook {notebook}: the parameters cell must declare `profile`")
    run = run_dir(params["profile"])
    threads = set_threads(params["threads"] or None) if "threads" in params else None
    return Setup(params, run, threads)


def require_decoders(run: str | Path, names: Sequence[str]) -> dict[str, Path]:
    """``{name: runs/<profile>/decoders/<name>/best}`` for the decoders ``names``; a :class:`FileNotFoundError`
    naming every missing one, and notebook 02 (which trains them), if any is missing."""
    run = Path(run)
    model_dir = {name: run / "decoders" / name / "best" for name in names}
    missing = [name for name, p in model_dir.items() if not p.is_dir()]
    if missing:
        profile = run.name if run.name in profiles() else None
        how = (f"run notebook 02 for profile {profile} first (./run_all.sh --profile {profile} --only 02)" if profile
               else "run notebook 02 first")
        raise FileNotFoundError(f"decoder(s) {', '.join(missing)} missing (no "
                                f"{', '.join(f'{shown_path(run)}/decoders/{m}/best' for m in missing)}); they are trained by "
                                f"notebook 02: {how}")
    return model_dir


# ----------------------------------------------------------------------------- the parameters cell = the cpu profile

def _parameters_cell(nb: dict) -> dict:
    cells = [c for c in nb["cells"] if "parameters" in (c.get("metadata", {}).get("tags") or [])]
    if len(cells) != 1:
        raise ValueError(f"a notebook must have exactly one cell tagged 'parameters' (it has {len(cells)})")
    return cells[0]


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def parameters_cell_values(notebook: str) -> dict[str, Any]:
    """The values the ``parameters`` cell of ``notebook`` assigns (Python literals), in order."""
    tree = ast.parse(_source(_parameters_cell(json.loads(notebook_path(notebook).read_text(encoding="utf-8")))))
    return {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)}


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _literal  # an expression: never equal to a params value


def render_parameters_cell(source: str, values: Mapping[str, Any]) -> str:
    """``source`` (a parameters cell) with every assigned name whose value differs from ``values[name]`` given that
    value (a literal laid out by :func:`pprint.pformat`), the comments of each assignment kept, the other lines as
    they are; names of ``values`` the cell lacks are appended."""
    lines = source.splitlines()
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string
    out: list[str] = []
    done: set[str] = set()
    last = 0
    for node in ast.parse(source).body:
        out += lines[last:node.lineno - 1]  # full-line comments and blank lines before the statement
        last = node.end_lineno
        names = [t.id for t in node.targets if isinstance(t, ast.Name)] if isinstance(node, ast.Assign) else []
        if len(names) != 1 or names[0] not in values or _literal(node.value) == values[names[0]]:
            out += lines[node.lineno - 1:node.end_lineno]  # unchanged values keep their layout
            done.update(names)
            continue
        name = names[0]
        note = "  ".join(comments[i] for i in range(node.lineno, node.end_lineno + 1) if i in comments)
        body = pprint.pformat(values[name], width=110 - len(name) - 3, sort_dicts=False)
        first, *rest = body.splitlines()
        pad = " " * (len(name) + 3)
        text = [f"{name} = {first}"] + [pad + r for r in rest]
        if note:
            text[-1] += f"  {note}"
        out += text
        done.add(name)
    out += lines[last:]
    out += [f"{k} = {pprint.pformat(v, width=100, sort_dicts=False)}" for k, v in values.items() if k not in done]
    return "\n".join(out)


def sync_parameters_cell(notebook: str, profile: str = "cpu") -> bool:
    """Write ``params/<profile>/<NN>_*.yaml`` (and ``profile``) into the ``parameters`` cell of ``notebook``, so that a
    notebook opened in JupyterLab and run as it is computes what the runner computes for that profile. Returns
    whether the file changed (written atomically)."""
    path = notebook_path(notebook)
    nb = json.loads(path.read_text(encoding="utf-8"))
    cell = _parameters_cell(nb)
    new = render_parameters_cell(_source(cell), {"profile": profile, **load_params(profile, path.stem)})
    if new == _source(cell):
        return False
    cell["source"] = new.splitlines(keepends=True)
    write_text(path, json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n")  # as nbformat writes
    return True


if __name__ == "__main__":  # python -m helpers.report.notebook: the parameters cells follow params/cpu
    for p in sorted((repo_root() / "notebooks").glob("*.ipynb")):
        print(f"{p.name}: {'updated' if sync_parameters_cell(p.stem) else 'already the cpu profile'}")
