"""One progress-bar style for the whole study.

``progress(...)`` returns a tqdm bar. Interactively (JupyterLab, a terminal) it is ``tqdm.auto``: a widget bar in
JupyterLab (with ``ipywidgets``), a text bar elsewhere. Headless (``STORYBENCH_HEADLESS=1``, set by the runner
before papermill executes a notebook) it is a plain ASCII text bar without cursor escapes that first shows after
``HEADLESS_INTERVAL`` seconds and then updates at most that often, so executed notebooks keep a few lines, not
thousands of redraws.
"""
from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Iterable

HEADLESS_ENV = "STORYBENCH_HEADLESS"
HEADLESS_INTERVAL = 60.0  # seconds between two redraws of a headless bar (and before its first one)
HEADLESS_NCOLS = 100


def headless() -> bool:
    """True when running under the runner (papermill) or when ``STORYBENCH_HEADLESS`` is set to a true value."""
    return os.environ.get(HEADLESS_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def bar_options() -> dict[str, Any]:
    """The tqdm keyword arguments of the current mode (headless or interactive)."""
    if headless():
        return {"mininterval": HEADLESS_INTERVAL, "maxinterval": HEADLESS_INTERVAL, "delay": HEADLESS_INTERVAL,
                "ascii": True, "dynamic_ncols": False, "ncols": HEADLESS_NCOLS, "file": sys.stderr}
    return {"dynamic_ncols": True}


def _tqdm_class():
    if headless():
        from tqdm.std import tqdm
        return tqdm
    with warnings.catch_warnings():  # without ipywidgets tqdm.auto falls back to text bars: say so once, not per cell
        warnings.filterwarnings("ignore", message="IProgress not found")
        from tqdm.auto import tqdm
    return tqdm


def progress(iterable: Iterable | None = None, total: int | float | None = None, desc: str = "", unit: str = "it",
             **kw: Any):
    """A tqdm bar in the study's style; ``kw`` (``initial``, ``leave``, ``disable``, ``postfix``, ...) goes to tqdm
    and may override the style's options."""
    opts = {**bar_options(), **kw}
    if total is None and iterable is not None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    return _tqdm_class()(iterable, total=total, desc=desc, unit=unit, **opts)


def silence_headless_warnings() -> None:
    """Under the runner, drop tqdm's "IProgress not found" warning (third-party libraries import ``tqdm.auto``)."""
    if headless():
        warnings.filterwarnings("ignore", message="IProgress not found")
