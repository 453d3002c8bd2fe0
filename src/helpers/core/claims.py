"""The rules every findings sentence obeys, in one place: a small registry of functions that turn table rows into the
words of a claim. A notebook's "What this run shows" sentences call these for every word that claims something
("above chance", "lowest", "the pattern holds", "equivalent", "no effect"), so a sentence cannot claim more than its
row supports. ``tests/test_claims.py`` feeds each registered rule a toy row that violates it and checks the words
change; a rule added here without such a case fails that test.

The rules:

* **above chance** (:func:`chance_claim`): only where every reduction of the score agrees (the encoders' mean and
  summed PLL); a result that holds under one reduction only names it.
* **best / lowest** (:func:`ranking_claim`): only where the leader is beyond the stated noise of every other, or a
  paired interval of the difference excludes 0; otherwise "tied within noise".
* **pattern holds** (:func:`pattern_claim`): only with an interval that excludes the null; a point estimate alone
  says "not tested".
* **apart / not apart** (:func:`apart_claim`): two intervals that do not overlap are apart on what they measured;
  overlapping intervals are "not shown apart", never "as many" or "the same" (overlap is not equivalence).
* **equivalence** (:func:`equivalence_claim`): only by two one-sided tests (the 1 − 2α interval inside ±δ) against a
  margin δ set before the run; otherwise "inconclusive".
* **null** (:func:`interval_null`): a difference not shown reads "effect in [L, U]" from its own interval (the
  minimum detectable effect describes the design, not the result).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

#: the registered rules by name (:func:`rule` adds one)
RULES: dict[str, "Rule"] = {}


@dataclass(frozen=True)
class Rule:
    """One registered claim rule: its name, the function that writes its words, and what it guards (the docstring)."""
    name: str
    fn: Callable[..., str]

    @property
    def guards(self) -> str:
        return (self.fn.__doc__ or "").strip().split("\n")[0]


def rule(name: str) -> Callable[[Callable[..., str]], Callable[..., str]]:
    """Register a claim function under ``name`` (one function per name)."""
    def register(fn: Callable[..., str]) -> Callable[..., str]:
        if name in RULES and RULES[name].fn is not fn:
            raise ValueError(f"claim rule {name!r} registered twice")
        RULES[name] = Rule(name, fn)
        return fn
    return register


def _finite(*xs: float | None) -> bool:
    return all(x is not None and isinstance(x, (int, float)) and math.isfinite(float(x)) for x in xs)


def _fmt(x: float, digits: int) -> str:
    return f"{x:.{digits}f}"


@rule("above chance")
def chance_claim(intervals: Mapping[str, tuple[float, float]], chance: float, preregistered: str | None = None) -> str:
    """"above chance" only where every reduction's interval lies above ``chance``; one reduction only is named.

    ``intervals``: ``{reduction: (low, high)}`` of one model on one task (a single entry for a score with one
    reduction, e.g. a decoder's summed log-probability). Returns "above chance", "below chance", "not distinguishable
    from chance", or, when the reductions disagree, "above chance under <r> only" (``preregistered`` first when it is
    one of them) / "below chance under <r> only" / "mixed across reductions"."""
    if not intervals:
        raise ValueError("chance_claim needs at least one (low, high) interval")
    side = {}
    for name, (lo, hi) in intervals.items():
        side[name] = "above" if _finite(lo) and lo > chance else "below" if _finite(hi) and hi < chance else "none"
    kinds = set(side.values())
    if kinds == {"above"}:
        return "above chance"
    if kinds == {"below"}:
        return "below chance"
    if kinds == {"none"}:
        return "not distinguishable from chance"
    for word in ("above", "below"):
        names = sorted((n for n, s in side.items() if s == word), key=lambda n: (n != preregistered, n))
        others = [n for n in side if n not in names]
        if names and len(kinds) == 2 and "none" in kinds:
            return f"{word} chance under {' and '.join(names)} only (not under {' and '.join(others)})"
    return "mixed across reductions (" + ", ".join(f"{n}: {s}" for n, s in side.items()) + ")"


@rule("best")
def ranking_claim(values: Mapping[str, float], *, better: str, what: str, noise: float | None = None,
                  paired: Mapping[str, tuple[float, float]] | None = None, digits: int = 3) -> str:
    """"best" / "lowest" only beyond the stated noise or a paired interval; otherwise "tied within noise".

    ``values``: one number per model; ``better``: "higher" or "lower"; ``noise``: a difference no larger than this is
    noise (stated by the caller, e.g. the spread of repeated runs); ``paired``: ``{other: (low, high)}``, the interval
    of leader − other where a paired comparison exists (it overrides ``noise`` for that model). Without either, no
    model is called the best."""
    if better not in ("higher", "lower"):
        raise ValueError(f"better must be 'higher' or 'lower', not {better!r}")
    if not values:
        return f"{what}: no values"
    order = sorted(values, key=lambda m: values[m], reverse=better == "higher")
    lead, top = order[0], "highest" if better == "higher" else "lowest"
    if len(order) == 1:
        return f"{what}: only {lead} ({_fmt(values[lead], digits)})"
    tied = []
    for other in order[1:]:
        ci = (paired or {}).get(other)
        if ci is not None and _finite(*ci):
            apart = ci[0] > 0 or ci[1] < 0
        elif noise is not None and _finite(noise):
            apart = abs(values[lead] - values[other]) > noise
        else:
            apart = False
        if not apart:
            tied.append(other)
    if not tied:
        return f"{top} {what}: {lead} ({_fmt(values[lead], digits)}), beyond " + (
            "its paired intervals" if paired else f"the noise of ±{_fmt(noise, digits)}")
    basis = (f"within the noise of ±{_fmt(noise, digits)}" if noise is not None and _finite(noise) else
             "within their paired intervals" if paired else "with no noise level or interval to separate them")
    return (f"{what}: tied {basis}: " + ", ".join(f"{m} {_fmt(values[m], digits)}" for m in [lead, *tied])
            + " (no model is the " + ("best" if better == "higher" else "lowest") + ")")


@rule("pattern holds")
def pattern_claim(what: str, estimate: float, low: float | None, high: float | None, null: float = 0.0,
                  digits: int = 2, confidence: float = 0.95) -> str:
    """"holds" only with an interval that excludes the null; a point estimate alone is "not tested".

    ``estimate``: the pattern's size (e.g. a difference of shares), positive in the predicted direction; ``low`` /
    ``high``: its interval."""
    point = _fmt(estimate, digits)
    if not _finite(low, high):
        return f"{what}: {point} with no interval, so whether it holds is not tested"
    ci = f"[{_fmt(low, digits)}, {_fmt(high, digits)}] ({100 * confidence:.0f} %)"
    if low > null:
        return f"{what}: holds, {point} {ci}"
    if high < null:
        return f"{what}: reversed, {point} {ci}"
    return f"{what}: not shown, {point} {ci} includes {null:g}"


@rule("apart")
def apart_claim(a: str, a_ci: tuple[float, float], b: str, b_ci: tuple[float, float], over: str) -> str:
    """Two intervals: "apart" only where they do not overlap; overlap is "not shown apart", never "as many" (overlap
    is not equivalence). ``over``: what the intervals are over (e.g. "neurons", "items"), said in the words."""
    if not _finite(*a_ci, *b_ci):
        return f"{a} vs {b}: no intervals, so not compared"
    if a_ci[0] > b_ci[1]:
        return f"{a} above {b} on these {over} (intervals apart)"
    if b_ci[0] > a_ci[1]:
        return f"{a} below {b} on these {over} (intervals apart)"
    return (f"{a} and {b} not shown apart on these {over} (the intervals overlap, which does not make them equal)")


@rule("equivalent")
def equivalence_claim(low: float, high: float, delta: float | None, unit: str = "points", digits: int = 1,
                      alpha: float = 0.05) -> str:
    """"equivalent within ±δ" only by TOST: the (1 − 2α) interval ``[low, high]`` inside ±δ, δ set before the run.

    Returns "no margin set" when ``delta`` is None (equivalence then is not tested), "equivalent within ±δ (TOST, α)"
    or "inconclusive at ±δ"."""
    if delta is None or not _finite(delta):
        return "no equivalence margin set, so equivalence is not tested"
    if delta <= 0:
        raise ValueError(f"an equivalence margin must be positive, not {delta}")
    if not _finite(low, high):
        return f"inconclusive at ±{_fmt(delta, digits)} {unit}: no interval"
    if -delta < low and high < delta:
        return f"equivalent within ±{_fmt(delta, digits)} {unit} (TOST, α = {alpha:g})"
    return (f"inconclusive at ±{_fmt(delta, digits)} {unit} (the {100 * (1 - 2 * alpha):.0f} % interval "
            f"[{_fmt(low, digits)}, {_fmt(high, digits)}] is not inside the margin)")


@rule("null")
def interval_null(effect: float, low: float, high: float, n: int, over: str = "seeds", unit: str = "points",
                  digits: int = 1, confidence: float = 0.95) -> str:
    """A difference not shown reads its own interval, "effect in [L, U]"; it never says "no effect larger than"
    (the minimum detectable effect describes the design, not the result)."""
    if not _finite(low, high):
        return f"{effect:+.{digits}f} {unit} with no interval over {over}: not testable here"
    if low > 0 or high < 0:
        raise ValueError(f"interval_null: [{low}, {high}] excludes 0, so this is not a null result")
    return (f"not shown: effect {effect:+.{digits}f} {unit}, in [{low:+.{digits}f}, {high:+.{digits}f}] "
            f"({100 * confidence:.0f} % over {n} {over})")


def registered() -> Sequence[str]:
    """The names of the registered rules, in the order they were added."""
    return list(RULES)
