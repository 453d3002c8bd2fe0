"""Judge validity: does the judge grade a story's real ending above corrupted endings of the same length?

Before a judge grades any model (``docs/methods.md#gpt-eval``), held-out stories are split into a *beginning* (the
first sentences, like a GPT-Eval prompt) and their *real ending*; each real ending is paired with four corrupted
ones (:data:`CORRUPTIONS`), every one with exactly as many words as the real ending, so that length cannot tell
them apart:

* ``shuffled``: the ending's sentences in another order;
* ``other story``: whole sentences of another held-out story with the real ending's word count
  (:func:`length_matched`: its last sentences when they add up to that count, else other whole sentences of it,
  else its last words);
* ``scrambled``: the ending's words in random order;
* ``looping``: the ending's first sentences, then its last kept sentence repeated until the word count is reached
  (:func:`loop_ending`: the degenerate loop of a greedy decoder).

A fifth pair kind, ``decoder completion`` (:data:`DECODER_KIND`, :func:`decoder_items`), pairs the real ending of a
held-out story with a decoder's greedy continuation of the same beginning (notebook 03's continuation-health
prompts), both cut to the same number of words: not a corruption (a decoder may write well), but the text the
judge is asked to grade.  The ``truncated`` corruption (the ending cut mid-sentence) is still made by
:func:`corrupt` but no longer graded: it is shorter than the real ending, and the judge's preference for the longer
text would be read as validity.

For every criterion (grammar, creativity, consistency, plot, and the age group's expectation, A = 1 ... F = 6) and
pair kind, the statistic is the share of pairs where the real ending gets the higher expected grade (ties count
one half), with a 95 % Wilson interval over pairs (:func:`helpers.core.stats.wilson_interval` of the share itself,
ties as half a win, never a rounded count, so two different shares never get one interval).  The ``all`` row pools
the four corruptions; it counts stories, not pairs (a story's four pairs share one real ending, so they are not
independent): the wider of a Wilson interval over stories (each story's share of wins) and a seeded bootstrap over
stories.

**The gate** (:func:`judge_gate`, :func:`passing_criteria`): a criterion grades the decoders only when the lower
95 % bound of its share is above one half on *both* ``shuffled`` and ``other story`` (:data:`GATE_CORRUPTIONS`):
the corruptions that keep the length, the words and the fluency of a real ending and change only what a grade of
creativity, consistency or plot is about.  Scrambled and looping endings are shown beside them (a judge should
catch them too), but catching only broken text does not make a grade of fluent decoder text meaningful.
:func:`verdict` tells a criterion no better than chance (its pooled interval holds one half) from one worse than
chance (the upper bound below one half: the judge prefers the corrupted ending).
"""
from __future__ import annotations

import random
import re
from typing import Any, Mapping, Sequence

import pandas as pd

from helpers.core.stats import bootstrap_mean_interval, mean_interval, wilson_interval  # bootstrap_mean_interval: also self-BLEU's
from helpers.data.normalisation import split_sentences

CORRUPTIONS = ("shuffled", "other story", "scrambled", "looping")  # graded, each as long as the real ending
GATE_CORRUPTIONS = ("shuffled", "other story")  # a criterion must beat chance on both to grade the decoders
DECODER_KIND = "decoder completion"  # real ending vs a decoder's continuation of the same beginning (not pooled)
VALIDITY_KINDS = (*CORRUPTIONS, DECODER_KIND)
DECODER_MIN_WORDS = 10  # a real-vs-decoder pair needs this many words in both endings (shorter ones say nothing)
VALIDITY_CRITERIA = ("grammar", "creativity", "consistency", "plot", "age")
GRADED_CRITERIA = ("grammar", "creativity", "consistency", "plot")  # the age guess is shown, not graded with


def one_line_sentences(text: str) -> list[str]:
    """:func:`helpers.data.normalisation.split_sentences` of ``text`` with its line breaks and runs of spaces made single spaces,
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


def n_words(text: str) -> int:
    """Words of ``text`` (whitespace-separated), the unit every length match counts."""
    return len(text.split())


def length_matched(n: int, sources: Sequence[str], exclude: str | None = None) -> str:
    """A piece of another story with exactly ``n`` words, taken from the first of ``sources`` (in the order given;
    ``exclude``, the story itself, is skipped) that has one, looking for, in turn: its last whole sentences (an
    ending); any run of its whole sentences; its last ``n`` words (a piece that starts mid-sentence).  A story's
    first sentence is never used by the first two (an ending does not open a story).  A
    :class:`ValueError` when no source has ``n`` words."""
    if n < 1:
        raise ValueError(f"cannot match a length of {n} words")
    usable = [s for s in sources if s != exclude and n_words(s) >= n]
    if not usable:
        raise ValueError(f"no other story has {n} words")
    for src in usable:  # its last whole sentences (an ending: never its first sentence)
        sents = one_line_sentences(src)
        for i in range(1, len(sents)):
            if n_words(" ".join(sents[i:])) == n:
                return " ".join(sents[i:])
    for src in usable:  # any run of whole sentences but the first ("Once upon a time ..." begins no ending)
        sents = one_line_sentences(src)
        for i in range(1, len(sents)):
            for j in range(i + 1, len(sents) + 1):
                k = n_words(" ".join(sents[i:j]))
                if k == n:
                    return " ".join(sents[i:j])
                if k > n:
                    break
    return " ".join(usable[0].split()[-n:])


def loop_ending(ending: str, keep: float = 0.5) -> str:
    """``ending`` with its last part replaced by a loop, as long as ``ending`` in words: its first sentences (at
    most ``keep`` of its words, at least one sentence, never all), then the last kept sentence repeated (its last
    eight words when it has more than twelve) until the word count is reached; the last repetition may stop mid-way, as a
    decoder's loop stops at its length cap."""
    sents = one_line_sentences(ending)
    total = n_words(ending)
    if len(sents) < 2:
        raise ValueError("a looping ending needs an ending of at least two sentences")
    k = 1
    while k < len(sents) - 1 and n_words(" ".join(sents[:k + 1])) <= keep * total:
        k += 1
    kept = " ".join(sents[:k]).split()
    unit = sents[k - 1].split()
    unit = unit if len(unit) <= 12 else unit[-8:]
    fill = [unit[i % len(unit)] for i in range(total - len(kept))]
    return " ".join(kept + fill)


def corrupt(ending: str, kind: str, rng: random.Random, other: str | None = None) -> str:
    """One corrupted version of ``ending`` (see :data:`CORRUPTIONS`, and ``truncated``, no longer graded);
    ``other`` is the other story's piece (:func:`length_matched` makes it as long as ``ending``)."""
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
    if kind == "looping":
        return loop_ending(ending)
    raise ValueError(f"unknown corruption {kind!r}; choose from {(*CORRUPTIONS, 'truncated')}")


def validity_items(stories: Sequence[str], n: int, seed: int, min_words: int = 60, max_words: int = 160,
                   begin_frac: float = 0.4) -> list[dict[str, Any]]:
    """Judge items of ``n`` stories (the first ones, in a seeded order, with ``min_words``-``max_words`` words and at
    least four sentences): per story one ``real`` item and one per corruption (:data:`CORRUPTIONS`), all with the
    same beginning and as many words as the real ending; the ``other story`` piece comes from the other stories of
    the same seeded order (:func:`length_matched`), starting with the next one.  Rows: ``pair`` (story index),
    ``variant`` (``real`` or a corruption), ``prompt`` (beginning), ``completion``."""
    rng = random.Random(seed)
    pool = [s for s in stories if min_words <= len(s.split()) <= max_words]
    rng.shuffle(pool)
    picked = []
    for s in pool:
        sp = split_story(s, begin_frac)
        if sp is not None:
            picked.append((s, *sp))
        if len(picked) == n:
            break
    if len(picked) < max(2, n):
        raise ValueError(f"only {len(picked)} usable stories ({min_words}-{max_words} words, >= 4 sentences) for "
                         f"{n} validity pairs")
    rows = []
    for i, (story, begin, end) in enumerate(picked):
        rows.append({"pair": i, "variant": "real", "prompt": begin, "completion": end})
        j = pool.index(story)
        other = length_matched(n_words(end), pool[j + 1:] + pool[:j], exclude=story)
        for kind in CORRUPTIONS:
            rows.append({"pair": i, "variant": kind, "prompt": begin, "completion": corrupt(end, kind, rng, other)})
    return rows


def decoder_items(continuations: Sequence[Mapping[str, Any]], stories: Mapping[Any, str], n: int, seed: int,
                  first_pair: int = 0, min_words: int = DECODER_MIN_WORDS, max_words: int = 160) -> list[dict[str, Any]]:
    """Judge items pairing real endings with decoders' continuations of the same beginnings: ``n`` pairs drawn
    (seeded) from ``continuations`` (rows with ``model``, ``story_id``, ``prompt``, ``completion``: notebook 03's
    greedy continuations of held-out stories), taking the decoders in turn so that each gets about ``n / models``
    pairs.  ``stories`` maps a story id to its text; the real ending is the text after the prompt.  Both endings are
    cut to the same number of words (the shorter one's, at most ``max_words``); a pair with fewer than ``min_words``
    is skipped.  Rows: ``pair`` (from ``first_pair`` on), ``variant`` (``real`` or :data:`DECODER_KIND`), ``prompt``,
    ``completion``, ``model`` (the decoder)."""
    by_model: dict[Any, list[Mapping[str, Any]]] = {}
    for r in continuations:
        by_model.setdefault(r["model"], []).append(r)
    rng = random.Random(seed)
    queues = []
    for m in sorted(by_model):
        rows = sorted(by_model[m], key=lambda r: str(r["story_id"]))
        rng.shuffle(rows)
        queues.append(rows)
    out: list[dict[str, Any]] = []
    used: set[Any] = set()  # one pair per story: a story's real ending appears once
    while len(out) < 2 * n and any(queues):
        for q in queues:
            while q and len(out) < 2 * n:
                r = q.pop(0)
                text = stories.get(r["story_id"])
                if r["story_id"] in used or not text or not text.startswith(r["prompt"]):
                    continue
                real, dec = text[len(r["prompt"]):].split(), str(r["completion"]).split()
                k = min(len(real), len(dec), max_words)
                if k < min_words:
                    continue
                used.add(r["story_id"])
                pair = first_pair + len(out) // 2
                begin = " ".join(r["prompt"].split())
                out += [{"pair": pair, "variant": "real", "prompt": begin, "completion": " ".join(real[:k]),
                         "model": r["model"]},
                        {"pair": pair, "variant": DECODER_KIND, "prompt": begin, "completion": " ".join(dec[:k]),
                         "model": r["model"]}]
                break
    return out


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
    """Per criterion and pair kind (:data:`VALIDITY_KINDS`, then any other kind graded, then ``all``
    :data:`CORRUPTIONS` pooled; the decoder pairs are not pooled): pairs, share where the real ending wins (ties
    half), its interval, mean grade difference (real - other) and ``separates`` (lower bound > 0.5).  Per kind:
    Wilson interval over pairs (of the share, ties as half a win); ``all``: the wider of a Wilson interval over
    stories and a bootstrap over stories."""

    out = pair_outcomes(graded, criteria)
    kinds = [*VALIDITY_KINDS, *(k for k in dict.fromkeys(out.corruption) if k not in VALIDITY_KINDS)]
    rows = []
    for c in criteria:
        part = out[out.criterion == c]
        for kind in (*kinds, "all"):
            sub = part[part.corruption.isin(CORRUPTIONS)] if kind == "all" else part[part.corruption == kind]
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


def separating_criteria(table, criteria: Sequence[str] = GRADED_CRITERIA) -> list[str]:
    """The criteria whose share over all corruptions has its lower bound above one half (pooled; the gate that
    decides what grades the decoders is :func:`judge_gate`)."""
    t = table[(table.corruption == "all") & table.separates]
    return [c for c in criteria if c in set(t.criterion)]


def _cell(r) -> str:
    return f"{100 * r['real wins']:.0f} % [{100 * r['low']:.0f}, {100 * r['high']:.0f}]"


def judge_gate(table, criteria: Sequence[str] = VALIDITY_CRITERIA,
               required: Sequence[str] = GATE_CORRUPTIONS, chance: float = 0.5):
    """Per criterion of ``table`` (:func:`validity_table`): ``passes`` when the lower 95 % bound of the share of
    pairs where the real ending is preferred (ties half) is above ``chance`` for every kind in ``required``
    (shuffled and length-matched other story), and the ``reason`` in words, every number read from ``table``: the
    share and interval of each required kind, and which of them hold or fall below chance.  A required kind without
    graded pairs fails the criterion."""
    rows = []
    for c in criteria:
        t = table[table.criterion == c].set_index("corruption")
        cells, failed = [], []
        for k in required:
            if k not in t.index:
                cells.append(f"{k}: no graded pairs")
                failed.append(k)
                continue
            r = t.loc[k]
            cells.append(f"{k} {_cell(r)}")
            if not r["low"] > chance:
                failed.append(k)
        if failed:
            reason = (f"fails: lower bound at or below {100 * chance:.0f} % on {' and '.join(failed)} ("
                      + "; ".join(cells) + ")")
        else:
            reason = f"passes: lower bounds above {100 * chance:.0f} % on " + " and ".join(cells)
        rows.append({"criterion": c, "passes": not failed, **{k: _cell(t.loc[k]) if k in t.index else "-" for k in required},
                     "reason": reason})
    return pd.DataFrame(rows, columns=["criterion", "passes", *required, "reason"])


def _gate_kinds(gate) -> list[str]:
    """The pair kinds a :func:`judge_gate` table requires (its columns named after a kind)."""
    return [c for c in gate.columns if c in (*VALIDITY_KINDS, "truncated")]


def passing_criteria(gate, criteria: Sequence[str] = GRADED_CRITERIA) -> list[str]:
    """The criteria of ``criteria`` that pass :func:`judge_gate` (in that order)."""
    ok = set(gate.loc[gate["passes"].astype(bool), "criterion"])
    return [c for c in criteria if c in ok]


def gate_verdict(gate, judge_name: str, criteria: Sequence[str] = GRADED_CRITERIA) -> str:
    """What the gate decides, in words: the criteria that grade the decoders, or, when none passes, that GPT-Eval
    cannot be measured with this judge and no decoder is ranked; then each criterion's reason."""
    used = passing_criteria(gate, criteria)
    kinds = " and ".join(_gate_kinds(gate))
    if used:
        head = (f"Gate: the judge {judge_name} prefers the real ending beyond chance on both {kinds} endings with "
                f"{', '.join(used)}; the decoders are graded with {'this criterion' if len(used) == 1 else 'these criteria'} only.")
    else:
        head = (f"Gate: no criterion of the judge {judge_name} prefers the real ending beyond chance on both {kinds} "
                f"endings, so GPT-Eval cannot be measured offline with this judge: the decoders are not graded and "
                f"not ranked by it.")
    return head + " " + " ".join(f"{r.criterion}: {r.reason}." for r in gate.itertuples())


def length_correlation(graded, criteria: Sequence[str] = VALIDITY_CRITERIA):
    """Pearson correlation of each criterion's grade with the graded text's word count, over the graded items
    (``completion`` column): how much of a grade length alone explains; NaN where a column is constant."""
    df = _scores(graded)
    if "status" in df.columns:
        df = df[df["status"] != "failed"]
    words = df["completion"].map(n_words).astype(float)
    rows = []
    for c in criteria:
        g = pd.to_numeric(df[c], errors="coerce")
        ok = g.notna()
        r = float(g[ok].corr(words[ok])) if ok.sum() > 2 and g[ok].std() > 0 and words[ok].std() > 0 else float("nan")
        rows.append({"criterion": c, "items": int(ok.sum()), "r with length": round(r, 3)})
    return pd.DataFrame(rows)


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
                 verdict_line: bool = True, gate=None) -> str:
    """The closing note's judge paragraph, every number computed: the verdict (unless ``verdict_line`` is False:
    a notebook that printed it already), each criterion's share per corruption with its interval, the criteria
    used (with ``gate``, :func:`judge_gate`'s table: what the gate decided), and the judge's time per item."""
    lines = ([verdict(table, judge_name)] if verdict_line else []) + [
        f"Judge {judge_name}: real ending graded higher, share of pairs [95 % interval], per corruption:"]
    for c in dict.fromkeys(table.criterion):
        t = table[table.criterion == c]
        cells = [f"{k} {100 * w:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}]"
                 for k, w, lo, hi in zip(t.corruption, t["real wins"], t["low"], t["high"])]
        lines.append(f"  {c}: " + "; ".join(cells))
    if gate is not None:
        kinds = " and ".join(_gate_kinds(gate))
        none = f"no criterion (none passes the gate on {kinds}): GPT-Eval is not measured with this judge"
    else:
        none = "no criterion (none separates)"
    lines.append(f"Decoders graded with: {', '.join(used) if used else none}.")
    if timing:
        lines.append(f"Judge time: {timing.get('mean s/item')} s per item on average (median {timing.get('median s/item')} s) "
                     f"over {timing.get('items')} items graded in this or an earlier run, plus "
                     f"{timing.get('model load s', '?')} s to load the judge; {timing.get('threads', '?')} threads of "
                     f"{timing.get('cpu', '?')}.")
    return "\n".join(lines)
