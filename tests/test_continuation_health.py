"""Loops and endings of completions (helpers.diversity.continuation_health)."""
from __future__ import annotations

import pytest

from helpers.diversity.continuation_health import continuation_health, repeated_run


def test_repeated_run_finds_loops_only():
    loop = "there was a big dog . there was a big dog . and"
    assert repeated_run(loop, 6)
    assert not repeated_run(loop, 7)  # the repeated run is 6 words long
    assert not repeated_run("one two three four five six seven eight nine ten", 6)
    assert repeated_run("A b c d e f and a B c d e F", 6)  # case-insensitive
    with pytest.raises(ValueError):
        repeated_run("a b", 0)


def test_continuation_health_shares():
    rows = [{"completion": "a b c d e f a b c d e f", "ended": False}, {"completion": "The end.", "ended": True},
            {"completion": "She smiled and went home.", "ended": True}, {"completion": "x", "ended": True}]
    h = continuation_health(rows)
    assert h["completions"] == 4 and h["ended (%)"] == 75.0 and h["loops (%)"] == 25.0
    assert h["ended CI low"] < 75.0 < h["ended CI high"]
    with pytest.raises(ValueError, match="ended"):
        continuation_health([{"completion": "x"}])
