"""Judge validity: does the judge grade a story's real ending above corrupted endings?

Before a judge grades any model (``docs/methods.md#gpt-eval``), held-out stories are split into a *beginning* (the
first sentences, like a GPT-Eval prompt) and their *real ending*; each real ending is paired with four corrupted
ones (:data:`CORRUPTIONS`):

* ``shuffled``: the ending's sentences in another order;
* ``other story``: the ending of another held-out story;
* ``truncated``: the ending cut in the middle of a sentence (about half of its words kept, the cut never at a
  sentence end);
* ``scrambled``: the ending's words in random order.

For every criterion (grammar, creativity, consistency, plot, and the age group's expectation, A = 1 ... F = 6) and
corruption, the statistic is the share of pairs where the real ending gets the higher expected grade (ties count
one half), with a 95 % Wilson interval over pairs (:func:`helpers.core.stats.wilson_interval` of the share itself, ties as half a win,
never a rounded count, so two different shares never get one interval).  A criterion *separates* when the share
over all four corruptions has the lower bound of its 95 % interval above one half; that pooled interval counts
stories, not pairs (a story's four pairs share one real ending, so they are not independent): the wider of a
Wilson interval over stories (each story's share of wins) and a seeded bootstrap over stories.  Models are then graded only with
the criteria that separate (:func:`separating_criteria`); :func:`verdict` tells a criterion no better than chance
(its interval holds one half) from one worse than chance (the upper bound below one half: the judge prefers the
corrupted ending).
"""
from __future__ import annotations

import random
import re
from typing import Any, Mapping, Sequence

import pandas as pd

from helpers.core.stats import bootstrap_mean_interval, mean_interval, wilson_interval  # bootstrap_mean_interval: also self-BLEU's
from helpers.data.corpora import split_sentences

CORRUPTIONS = ("shuffled", "other story", "truncated", "scrambled")
VALIDITY_CRITERIA = ("grammar", "creativity", "consistency", "plot", "age")


def one_line_sentences(text: str) -> list[str]:
    """:func:`helpers.data.corpora.split_sentences` of ``text`` with its line breaks and runs of spaces made single spaces,
    so that splitting ``" ".join`` of the result again gives the same sentences (a line break without a stop would
    otherwise end a sentence in the story but not in its space-joined ending)."""
    return split_sentences(" ".join(text.split()))


def split_story(story: str, begin_frac: float = 0.4) -> tuple[str, str] | None:
    """(beginning, real ending): the first ``begin_frac`` of the sentences (at least one) and the rest, on one line
    each; ``None`` when the story has fewer than four sentences (the ending needs two distinct ones to be
    shuffled)."""
    s = one_line_sentences(story)
    if len(s) < 4:
        return None
    k = min(max(1, round(len(s) * begin_frac)), len(s) - 2)
    if len(set(s[k:])) < 2:
        return None
    return " ".join(s[:k]), " ".join(s[k:])


def corrupt(ending: str, kind: str, rng: random.Random, other: str | None = None) -> str:
    """One corrupted version of ``ending`` (see :data:`CORRUPTIONS`); ``other`` is the other story's ending."""
    if kind == "shuffled":
        s = one_line_sentences(ending)
        order = list(range(len(s)))
        while order == sorted(order) and len(s) > 1:
            rng.shuffle(order)
        return " ".join(s[i] for i in order)
    if kind == "other story":
        if not other or other == ending:
            raise ValueError("the 'other story' corruption needs another story's ending")
        return other
    if kind == "truncated":
        words = ending.split()
        k = max(1, len(words) // 2)
        while k > 1 and re.search(r"[.!?…][\"”’']*$", words[k - 1]):
            k -= 1
        return " ".join(words[:k])
    if kind == "scrambled":
        words = ending.split()
        perm = words[:]
        while perm == words and len(set(words)) > 1:
            rng.shuffle(perm)
        return " ".join(perm)
    raise ValueError(f"unknown corruption {kind!r}; choose from {CORRUPTIONS}")


def validity_items(stories: Sequence[str], n: int, seed: int, min_words: int = 60, max_words: int = 160,
                   begin_frac: float = 0.4) -> list[dict[str, Any]]:
    """Judge items of ``n`` stories (the first ones, in a seeded order, with ``min_words``-``max_words`` words and at
    least four sentences): per story one ``real`` item and one per corruption, all with the same beginning.  Rows:
    ``pair`` (story index), ``variant`` (``real`` or a corruption), ``prompt`` (beginning), ``completion``."""
    rng = random.Random(seed)
    pool = [s for s in stories if min_words <= len(s.split()) <= max_words]
    rng.shuffle(pool)
    picked = []
    for s in pool:
        sp = split_story(s, begin_frac)
        if sp is not None:
            picked.append(sp)
        if len(picked) == n:
            break
    if len(picked) < max(2, n):
        raise ValueError(f"only {len(picked)} usable stories ({min_words}-{max_words} words, >= 4 sentences) for "
                         f"{n} validity pairs")
    rows = []
    for i, (begin, end) in enumerate(picked):
        rows.append({"pair": i, "variant": "real", "prompt": begin, "completion": end})
        other = picked[(i + 1) % len(picked)][1]
        for kind in CORRUPTIONS:
            rows.append({"pair": i, "variant": kind, "prompt": begin, "completion": corrupt(end, kind, rng, other)})
    return rows


def _scores(graded) -> Any:
    """Expected grade per row and criterion (``age``: the age expectation when the judge gives one, else the
    letter's rank)."""
    df = graded.copy()
    if "age_expected" in df.columns:
        df["age"] = pd.to_numeric(df["age_expected"], errors="coerce")
    else:
        df["age"] = df["age_group"].map({c: i + 1 for i, c in enumerate("ABCDEF")})
    return df


def pair_outcomes(graded, criteria: Sequence[str] = VALIDITY_CRITERIA):
    """One row per (pair, corruption, criterion): ``win`` = 1 when the real ending's grade is higher, 0.5 on a tie,
    0 when lower (pairs with a failed item are dropped)."""
    df = _scores(graded)
    if "status" in df.columns:
        df = df[df["status"] != "failed"]
    real = df[df["variant"] == "real"].set_index("pair")
    rows = []
    for r in df[df["variant"] != "real"].itertuples(index=False):
        if r.pair not in real.index:
            continue
        for c in criteria:
            a, b = real.at[r.pair, c], getattr(r, c)
            if pd.isna(a) or pd.isna(b):
                continue
            rows.append({"pair": r.pair, "corruption": r.variant, "criterion": c,
                         "real": float(a), "corrupted": float(b), "win": 1.0 if a > b else (0.5 if a == b else 0.0)})
    return pd.DataFrame(rows, columns=["pair", "corruption", "criterion", "real", "corrupted", "win"])


def validity_table(graded, criteria: Sequence[str] = VALIDITY_CRITERIA, confidence: float = 0.95,
                   samples: int = 2000, seed: int = 0):
    """Per criterion and corruption (and ``all`` corruptions): pairs, share where the real ending wins (ties half),
    its interval, mean grade difference (real - corrupted) and ``separates`` (lower bound > 0.5).  Per corruption:
    Wilson interval over pairs (of the share, ties as half a win); ``all``: the wider of a
    Wilson interval over stories and a bootstrap over stories."""

    out = pair_outcomes(graded, criteria)
    rows = []
    for c in criteria:
        part = out[out.criterion == c]
        for kind in (*CORRUPTIONS, "all"):
            sub = part if kind == "all" else part[part.corruption == kind]
            n = len(sub)
            if n == 0:
                continue
            share = float(sub["win"].mean())
            lo, hi = wilson_interval(float(sub["win"].sum()), n, confidence)
            if kind == "all":  # a story's pairs share its real ending: count stories, not pairs, and keep the wider
                per_story = sub.groupby("pair")["win"].mean().to_numpy()
                lo, hi = wilson_interval(float(per_story.sum()), len(per_story), confidence)
                blo, bhi = mean_interval(per_story, confidence, samples, seed)
                lo, hi = min(lo, blo), max(hi, bhi)
            rows.append({"criterion": c, "corruption": kind, "pairs": n, "stories": int(sub["pair"].nunique()),
                         "real wins": round(share, 4),
                         "low": round(lo, 4), "high": round(hi, 4),
                         "mean difference": round(float((sub["real"] - sub["corrupted"]).mean()), 4),
                         "separates": bool(lo > 0.5)})
    return pd.DataFrame(rows)


def separating_criteria(table, criteria: Sequence[str] = ("grammar", "creativity", "consistency", "plot")) -> list[str]:
    """The criteria whose share over all corruptions has its lower bound above one half."""
    t = table[(table.corruption == "all") & table.separates]
    return [c for c in criteria if c in set(t.criterion)]


def verdict(table, judge_name: str) -> str:
    """A sentence, computed from ``table``, saying which criteria the judge separates, which are no better than
    chance (the pooled interval holds one half) and which are worse than chance (its upper bound is below one half:
    the judge prefers the corrupted endings), and the criterion/corruption cells on either side of chance."""
    allc = table[table.corruption == "all"].set_index("criterion")
    parts: dict[str, list[str]] = {"yes": [], "chance": [], "worse": []}
    for c, r in allc.iterrows():
        s = (f"{c} ({100 * r['real wins']:.0f} % of {int(r['pairs'])} pairs from {int(r['stories'])} stories, 95 % "
             f"interval {100 * r['low']:.1f}-{100 * r['high']:.1f} %)")
        parts["yes" if r["separates"] else "worse" if r["high"] < 0.5 else "chance"].append(s)
    yes = "; ".join(parts["yes"]) if parts["yes"] else "no criterion"
    text = (f"The judge {judge_name} separates real from corrupted endings (lower 95 % bound of the share above "
            f"one half, all corruptions pooled) with: {yes}.")
    if parts["chance"]:
        text += f" No better than chance (the interval holds one half) with: {'; '.join(parts['chance'])}."
    if parts["worse"]:
        text += (f" Worse than chance (upper bound below one half: it prefers the corrupted endings) with: "
                 f"{'; '.join(parts['worse'])}.")
    cells = table[table.corruption != "all"]
    per = cells[cells.separates]
    caught = ", ".join(f"{c}/{k}" for c, k in zip(per.criterion, per.corruption)) or "none"
    text += f" Criterion/corruption cells separated on their own: {caught}."
    worse = cells[cells["high"] < 0.5]
    if len(worse):
        text += (" Cells where the judge prefers the corrupted ending beyond chance: "
                 + ", ".join(f"{c}/{k} ({100 * w:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}])"
                             for c, k, w, lo, hi in zip(worse.criterion, worse.corruption, worse["real wins"],
                                                        worse["low"], worse["high"])) + ".")
    return text


def grade_interval_table(grades, criteria: Sequence[str], by: Sequence[str] = ("model", "decoding"),
                         confidence: float = 0.95, samples: int = 2000, seed: int = 0):
    """Mean expected grade per group and criterion with a percentile bootstrap interval over prompts (an item's
    samples stay together: ``story_id`` is the resampling unit; :func:`stats.bootstrap_mean_interval`), and the
    number of graded items."""
    ok = grades[grades["status"] != "failed"] if "status" in grades.columns else grades
    rows = []
    for key, g in ok.groupby(list(by), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = dict(zip(by, key))
        row["items"] = len(g)
        per_prompt = g.groupby("story_id")[list(criteria)].mean()
        lo, hi = bootstrap_mean_interval(per_prompt.to_numpy(dtype=float), confidence, samples, seed)  # shared resamples
        for j, c in enumerate(criteria):
            row[c] = float(g[c].mean())
            row[f"{c} low"], row[f"{c} high"] = float(lo[j]), float(hi[j])
        rows.append(row)
    return pd.DataFrame(rows)


def time_per_item(*graded: Mapping[str, Any] | Any) -> dict[str, float]:
    """Judge seconds per item measured when each item was graded (the cache keeps the measurement), over the
    frames given: items, total seconds, mean and median seconds per item."""
    s = pd.concat([g["seconds"] for g in graded if g is not None and "seconds" in g.columns], ignore_index=True)
    s = pd.to_numeric(s, errors="coerce").dropna()
    return {"items": int(len(s)), "seconds": round(float(s.sum()), 1),
            "mean s/item": round(float(s.mean()), 3) if len(s) else float("nan"),
            "median s/item": round(float(s.median()), 3) if len(s) else float("nan")}


def closing_note(table, judge_name: str, timing: Mapping[str, Any] | None, used: Sequence[str],
                 verdict_line: bool = True) -> str:
    """The closing note's judge paragraph, every number computed: the verdict (unless ``verdict_line`` is False:
    a notebook that printed it already), each criterion's share per corruption with its interval, the criteria
    used, and the judge's time per item."""
    lines = ([verdict(table, judge_name)] if verdict_line else []) + [
        f"Judge {judge_name}: real ending graded higher, share of pairs [95 % interval], per corruption:"]
    for c in dict.fromkeys(table.criterion):
        t = table[table.criterion == c]
        cells = [f"{k} {100 * w:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}]"
                 for k, w, lo, hi in zip(t.corruption, t["real wins"], t["low"], t["high"])]
        lines.append(f"  {c}: " + "; ".join(cells))
    lines.append(f"Decoders graded with: {', '.join(used) if used else 'no criterion (none separates)'}.")
    if timing:
        lines.append(f"Judge time: {timing.get('mean s/item')} s per item on average (median {timing.get('median s/item')} s) "
                     f"over {timing.get('items')} items graded in this or an earlier run, plus "
                     f"{timing.get('model load s', '?')} s to load the judge; {timing.get('threads', '?')} threads of "
                     f"{timing.get('cpu', '?')}.")
    return "\n".join(lines)
