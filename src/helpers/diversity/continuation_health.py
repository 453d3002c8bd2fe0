"""How completions end: the share that closed the story with ``<|endoftext|>`` and the share stuck in a loop (a
repeated run of words), each with a Wilson interval (``docs/methods.md#memorisation``)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from helpers.core.stats import wilson_interval


def repeated_run(text: str, n: int = 6) -> bool:
    """True when some run of ``n`` consecutive words (whitespace tokens, lower-cased, outer punctuation kept)
    occurs at least twice in ``text``: the signature of a decoder stuck in a loop."""
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    words = text.lower().split()
    seen = set()
    for i in range(len(words) - n + 1):
        gram = tuple(words[i : i + n])
        if gram in seen:
            return True
        seen.add(gram)
    return False


def continuation_health(rows: Sequence[dict], n: int = 6, confidence: float = 0.95) -> dict:
    """Share of completions that closed the story with ``<|endoftext|>`` before the length cap (the row's
    ``ended`` flag) and share that contain a repeated ``n``-word run (:func:`repeated_run`), each with a Wilson
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
