"""Loops and endings of completions (helpers.diversity.continuation_health)."""
from __future__ import annotations

import pytest

from helpers.data.text_stats import repeated_run
from helpers.diversity.continuation_health import continuation_health, health_table


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


def test_health_table_rows_then_pooled_then_extra():
    loop, end = {"completion": "a b c d e f a b c d e f", "ended": False}, {"completion": "The end.", "ended": True}
    cont = {("m1", "train"): [loop, end], ("m1", "held-out"): [end], ("m2", "train"): [end], ("m2", "held-out"): [loop]}
    t = health_table(cont, "all", [("real", "real endings", [end, end])])
    assert list(zip(t.model, t.prompts)) == [("m1", "train"), ("m1", "held-out"), ("m2", "train"), ("m2", "held-out"),
                                             ("m1", "all"), ("m2", "all"), ("real", "real endings")]
    assert t["completions"].tolist() == [2, 1, 1, 1, 3, 2, 2]
    pooled = t.set_index(["model", "prompts"]).loc[("m1", "all")]
    assert pooled["loops (%)"] == pytest.approx(100 / 3) and pooled.to_dict() == continuation_health([loop, end, end])
