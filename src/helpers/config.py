"""Profiles, paths and parameter files.

A *profile* (``smoke``, ``cpu``, ``paper``) selects one folder of parameter files,
``params/<profile>/<NN>_<name>.yaml``, one per notebook.  Artefacts go to
``runs/<profile>/`` (git-ignored) and reports to ``reports/<profile>/``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

PROFILES = ("smoke", "cpu", "paper")


def repo_root() -> Path:
    """The project root: ``$STORYBENCH_ROOT`` or the first parent holding ``pyproject.toml`` and ``params/``."""
    env = os.environ.get("STORYBENCH_ROOT")
    if env:
        return Path(env).resolve()
    candidates = [Path.cwd(), *Path.cwd().parents, Path(__file__).resolve().parent, *Path(__file__).resolve().parents]
    for c in candidates:
        if (c / "pyproject.toml").is_file() and (c / "params").is_dir():
            return c
    raise FileNotFoundError(
        "cannot find the storybench root (a folder with pyproject.toml and params/); "
        "run from inside the repository or set STORYBENCH_ROOT"
    )


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    return profile


def data_dir() -> Path:
    return repo_root() / "data"


def run_dir(profile: str) -> Path:
    """``runs/<profile>/``: datasets, tokenizers, models, generations, scores (git-ignored)."""
    d = Path(os.environ.get("STORYBENCH_RUNS", repo_root() / "runs")) / check_profile(profile)
    d.mkdir(parents=True, exist_ok=True)
    return d


def reports_dir(profile: str) -> Path:
    d = Path(os.environ.get("STORYBENCH_REPORTS", repo_root() / "reports")) / check_profile(profile)
    for sub in ("notebooks", "figures", "tables"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    return d


def params_file(profile: str, notebook: str) -> Path:
    """The params file of ``notebook`` (``"01"`` or ``"01_data_budgets"``) for ``profile``."""
    check_profile(profile)
    prefix = notebook.split("_")[0]
    folder = repo_root() / "params" / profile
    hits = sorted(folder.glob(f"{prefix}_*.yaml"))
    if not hits:
        raise FileNotFoundError(f"no params file {folder}/{prefix}_*.yaml for notebook {notebook!r}, profile {profile!r}")
    if len(hits) > 1:
        raise ValueError(f"several params files match notebook {notebook!r}: {[h.name for h in hits]}")
    return hits[0]


def load_params(profile: str, notebook: str) -> dict[str, Any]:
    with open(params_file(profile, notebook), encoding="utf-8") as f:
        params = yaml.safe_load(f) or {}
    if not isinstance(params, dict):
        raise ValueError(f"{params_file(profile, notebook)} must hold a mapping of parameter names to values")
    return params


def set_threads(n: int | None = None) -> int:
    """Use ``n`` (default: all) CPU threads for torch; returns the number set."""
    import torch

    n = n or os.cpu_count() or 1
    torch.set_num_threads(n)
    return n
