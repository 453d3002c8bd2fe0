"""Reports: tables (CSV + Markdown), figures (PNG) and the manifest of each notebook run.

Everything lands under ``reports/<profile>/``: ``tables/<name>.csv`` and ``tables/<name>.md``,
``figures/<name>.png``, and ``manifest.json`` which records, per notebook, its params, the git revision, the
helper package version and the SHA-256 of every input data file.
"""
from __future__ import annotations

import datetime as _dt
import platform
import subprocess
from pathlib import Path
from typing import Any

from . import __version__
from .artifacts import atomic_path, read_json, write_json, write_text
from .config import repo_root, reports_dir
from .hardware import cpu_info


def save_table(df, name: str, profile: str, index: bool = False, floatfmt: str = ".4f", caption: str | None = None) -> Path:
    """Write ``df`` as ``tables/<name>.csv`` and a Markdown rendering ``tables/<name>.md``; returns the CSV path."""
    d = reports_dir(profile) / "tables"
    csv = d / f"{name}.csv"
    with atomic_path(csv) as tmp:
        df.to_csv(tmp, index=index)
    shown = df.map(lambda v: v.replace("\n", "<br>") if isinstance(v, str) else v)  # keep Markdown rows on one line
    ints = [c for c in shown.columns if str(shown[c].dtype).startswith(("int", "uint"))]
    shown[ints] = shown[ints].astype(str)  # tabulate would print integer columns with the float format
    md = shown.to_markdown(index=index, floatfmt=floatfmt) if _has_tabulate() else df.to_string(index=index)
    write_text(d / f"{name}.md", (f"{caption}\n\n" if caption else "") + md + "\n")
    return csv


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401

        return True
    except ImportError:
        return False


def html_table(df, caption: str | None = None) -> str:
    """A readable, self-contained HTML rendering of ``df`` (wrapped text, left-aligned; for long text cells)."""
    import html as _html

    style = ("<style>table.sb{border-collapse:collapse;font-family:sans-serif;font-size:13px}"
             "table.sb td,table.sb th{border:1px solid #ccc;padding:6px;vertical-align:top;text-align:left;"
             "max-width:70ch;white-space:pre-wrap}table.sb th{background:#f3f3f3}"
             "table.sb caption{caption-side:top;text-align:left;padding:6px 0;max-width:140ch}</style>")
    head = "".join(f"<th>{_html.escape(str(c))}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(f"<td>{_html.escape(str(v))}</td>" for v in row) + "</tr>"
                   for row in df.itertuples(index=False))
    cap = f"<caption>{_html.escape(caption)}</caption>" if caption else ""
    return f'{style}<table class="sb">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def save_figure(fig, name: str, profile: str, dpi: int = 120) -> Path:
    """Save a matplotlib figure as ``figures/<name>.png`` (atomically)."""
    out = reports_dir(profile) / "figures" / f"{name}.png"
    with atomic_path(out, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight")
    # atomic_path renames tmp (which has a .png suffix so matplotlib picks the format) onto out
    return out


def git_revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo_root(), capture_output=True, text=True, check=True).stdout.strip()
        # reports/ is what a run writes: rewriting it does not make the code that produced it "dirty"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)reports"],
                               cwd=repo_root(), capture_output=True, text=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_manifest(profile: str, notebook: str, params: dict[str, Any], inputs: dict[str, str], extra: dict | None = None) -> Path:
    """Record this notebook's params, git revision, helper version and input checksums in ``manifest.json``."""
    import torch

    path = reports_dir(profile) / "manifest.json"
    try:
        manifest = read_json(path)
    except FileNotFoundError:
        manifest = {}
    manifest[notebook] = {
        "params": params,
        "git_revision": git_revision(),
        "helpers_version": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu": cpu_info(),
        "finished_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "inputs_sha256": inputs,
        **(extra or {}),
    }
    write_json(path, dict(sorted(manifest.items())))
    return path
