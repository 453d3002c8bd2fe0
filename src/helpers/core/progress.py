"""One progress-bar style for the whole study.

``progress(...)`` returns a tqdm bar. Interactively (JupyterLab, a terminal) it is ``tqdm.auto``: a widget bar in
JupyterLab (with ``ipywidgets``), a text bar elsewhere. Headless (``STORYBENCH_HEADLESS=1``, set by the runner
before papermill executes a notebook) it is a plain ASCII text bar without cursor escapes that first shows after
``HEADLESS_INTERVAL`` seconds and then updates at most that often, so executed notebooks keep a few lines, not
thousands of redraws.

``LineProgress`` is the style for output that is not a terminal (a command's stdout sent to a log file or a pipe,
where a bar's redraws pile up or never show): one plain line every ``every`` items, with the rate and the time left.
"""
from __future__ import annotations

import logging
import math
import os
import sys
import time
import warnings
from typing import Any, Callable, Iterable

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


class LineProgress:
    """A progress report as log lines, for output that is not a terminal: ``desc: 1,200/24,000 seq (5%), 40.0 seq/s,
    ~9.5 min left`` through ``log`` each time the count passes a multiple of ``every`` (default: a twentieth of
    ``total``, else 1,000), and a last line at :meth:`close`. Takes the calls the scoring loops make on a tqdm bar
    (``update``, ``set_postfix``, ``close``), so it can be handed to them as their bar."""

    def __init__(self, total: int | None = None, desc: str = "", unit: str = "it", every: int | None = None,
                 log: Callable[[str], None] = print, clock: Callable[[], float] = time.monotonic):
        self.total, self.desc, self.unit, self.log, self.clock = total, desc, unit, log, clock
        self.every = max(1, int(every)) if every else (max(1, math.ceil(total / 20)) if total else 1000)
        self.n, self.start, self.closed, self._logged = 0, clock(), False, 0

    def _line(self) -> str:
        elapsed = self.clock() - self.start
        rate = self.n / elapsed if elapsed > 0 else float("nan")
        head = f"{self.desc}: " if self.desc else ""
        done = f"{self.n:,}/{self.total:,} {self.unit} ({100 * self.n / self.total:.0f}%)" if self.total else \
            f"{self.n:,} {self.unit}"
        line = f"{head}{done}, {rate:,.1f} {self.unit}/s"
        if self.total and rate > 0 and self.n < self.total:
            left = (self.total - self.n) / rate
            line += f", ~{left / 60:.1f} min left" if left >= 60 else f", ~{left:.0f} s left"
        return line

    def update(self, n: int = 1) -> None:
        """Count ``n`` more items; log a line when the count passes a multiple of ``every``."""
        self.n += int(n)
        if self.n // self.every > self._logged // self.every:
            self._logged = self.n
            self.log(self._line())

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        """Ignored (a bar's extra text; lines carry the count and rate only)."""

    def close(self) -> None:
        """Log the last line (once), unless the last update already logged this count."""
        if not self.closed and self._logged != self.n:
            self.log(self._line() + f", done in {self.clock() - self.start:.0f} s")
        self.closed = True


def show_cell_output() -> None:
    """The runner's ``--log-output``: papermill logs every cell's output to its logger (``papermill``: stdout at
    INFO, stderr at WARNING), which had no handler, so the INFO records (what the cells print) went nowhere. One
    handler writing them to stdout, replaced on each call (it keeps the stdout of its call)."""
    log = logging.getLogger("papermill")
    for h in [h for h in log.handlers if getattr(h, "storybench", False)]:
        log.removeHandler(h)
    handler = logging.StreamHandler(sys.stdout)
    handler.storybench = True
    log.addHandler(handler)
    log.setLevel(logging.INFO)
