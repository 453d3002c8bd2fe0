"""How completions end: the share that closed the story with ``<|endoftext|>`` and the share stuck in a loop (a
repeated run of words), each with a Wilson interval (``docs/methods.md#memorisation``); notebook 03's table of them
(:func:`health_table`)."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from helpers.core.stats import wilson_interval
from helpers.data.text_stats import repeated_run


def continuation_health(rows: Sequence[dict], n: int = 6, confidence: float = 0.95) -> dict:
    """Share of completions that closed the story with ``<|endoftext|>`` before the length cap (the row's
    ``ended`` flag) and share that contain a repeated ``n``-word run (:func:`helpers.data.text_stats.repeated_run`), each with a Wilson
    ``confidence`` interval; ``rows`` are completion rows of :mod:`helpers.generation.completions`."""
    if not rows:
        raise ValueError("no completion rows")
    missing = [i for i, r in enumerate(rows) if "ended" not in r]
    if missing:
        raise ValueError(f"{len(missing)} row(s) have no 'ended' flag (completions cached by an older version)")
    total = len(rows)
    ended = sum(bool(r["ended"]) for r in rows)
    loops = sum(repeated_run(r["completion"], n) for r in rows)
    out = {"completions": total, "ended (%)": 100.0 * ended / total, "loops (%)": 100.0 * loops / total,
           "mean words": float(np.mean([len(r["completion"].split()) for r in rows]))}
    for key, k in (("ended", ended), ("loops", loops)):
        lo, hi = wilson_interval(k, total, confidence)
        out[f"{key} CI low"], out[f"{key} CI high"] = 100.0 * lo, 100.0 * hi
    return out


def health_table(continuations: Mapping[tuple[str, str], Sequence[dict]], pooled: str,
                 extra: Sequence[tuple[str, str, Sequence[dict]]] = ()) -> pd.DataFrame:
    """Notebook 03's continuation-health table: one :func:`continuation_health` row per (model, prompt split) of
    ``continuations`` ((model, split) -> completion rows), then per model one row of all its splits pooled (in their
    order; ``prompts`` = ``pooled``), then one row per ``extra`` (model, prompts label, rows): other completions or
    the real endings, the loop measure's base rate."""
    rows = [{"model": m, "prompts": split, **continuation_health(r)} for (m, split), r in continuations.items()]
    for m in dict.fromkeys(m for m, _ in continuations):
        rows.append({"model": m, "prompts": pooled,
                     **continuation_health([r for (mm, _), rs in continuations.items() if mm == m for r in rs])})
    rows += [{"model": m, "prompts": label, **continuation_health(r)} for m, label, r in extra]
    return pd.DataFrame(rows)
