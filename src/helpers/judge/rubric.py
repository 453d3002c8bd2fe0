"""The LLM judge's rubric for story completions (TinyStories "GPT-Eval", ``docs/methods.md#gpt-eval``): the
prompts, the protocol versions, reply parsing and the on-disk cache that every judge backend shares.

Protocol and prompt: Eldan & Li 2023, §3 (their example of the GPT-Eval exchange; Yang et al., McGill report, reproduce the
prompt in their appendix, and we copy its wording from there): the judge is told that
a *student* was given the beginning of a story and completed it; it reads ``beginning *** completion``, first writes
a holistic assessment of the part after ``***`` (grammar, consistency with the beginning, whether the sentence
split by ``***`` is completed), and then, in a second turn of the same conversation, grades the completion for
grammar, creativity, consistency with the beginning and whether the plot makes sense, each on 1–10, plus a guess of
the student's age group (A: 3 or under, B: 4–5, C: 6–7, D: 8–9, E: 10–12, F: 13–16).  ``two_turn=False`` asks for
both in one message (half the requests, not the paper's protocol).

A second protocol, ``kind="instruct"``, grades stories written to TinyStoriesInstruct instructions (required words,
features, summary, a sentence to include): the paper's Table 4 adds an *instruct* grade to the four above; here the
judge reads the instructions and the story and grades grammar, creativity, consistency, plot and how well the
instructions are followed ("Instructions", 1–10).

The prompts of the local judge (grades read from next-token probabilities) are here too, as part of its protocol
version.  The backends: :mod:`helpers.judge.client` (any OpenAI-compatible chat endpoint, over HTTP) and
:mod:`helpers.judge.local` (SmolLM2 in-process); :mod:`helpers.judge.runs` picks one from the notebook parameters and
grades many items.

Each graded item is cached on disk (one JSON file per item, written atomically) keyed by (judge model, protocol
version, prompt, completion): an interrupted run resumes without paying twice.  Failed items are not cached.
"""
from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from helpers.core.artifacts import read_json, write_json
from helpers.core.digests import text_digest

CATEGORIES = ("grammar", "creativity", "consistency", "plot")
INSTRUCT_CATEGORIES = (*CATEGORIES, "instructions")
KINDS = ("story", "instruct")
AGE_GROUPS = {"A": "3 or under", "B": "4-5", "C": "6-7", "D": "8-9", "E": "10-12", "F": "13-16"}
SCORE_RANGE = (1.0, 10.0)

# The TinyStories GPT-Eval instructions (Eldan & Li 2023, §3; as reproduced in the McGill report's appendix), with a format line appended to the grading
# turn so that replies are machine-readable.
ASSESS_TEMPLATE = (
    "In the following exercise, the student is given a beginning of a story. The student needs to complete it into a "
    "full story. The exercise tests the student's language abilities and creativity. The symbol *** marks the "
    "separator between the prescribed beginning and the student's completion:\n\n"
    "{beginning} *** {completion}\n\n"
    "Please provide your general assessment about the part written by the student (the one after the *** symbol). "
    "Is it grammatically correct? Is it consistent with the beginning of the story? Pay special attention to whether "
    "the student manages to complete the sentence which is split in the middle by the separator ***."
)
GRADE_TEMPLATE = (
    "Now, grade the student's completion in terms of grammar, creativity, consistency with the story's beginning and "
    "whether the plot makes sense. Each grade is a number from 1 to 10. Moreover, please provide your best guess of "
    "what the age of the student might be, as reflected from the completion. Choose from possible age groups: "
    "A: 3 or under. B: 4-5. C: 6-7. D: 8-9. E: 10-12. F: 13-16.\n"
    "Answer in exactly this format:\n"
    "Grammar: <1-10>\nCreativity: <1-10>\nConsistency: <1-10>\nPlot: <1-10>\nAge group: <A-F>"
)
REASK_TEMPLATE = (
    "Your grades could not be read ({problem}). Please answer again with every grade a number from 1 to 10 and the "
    "age group a letter from A to F, in exactly this format:\n"
    "Grammar: <1-10>\nCreativity: <1-10>\nConsistency: <1-10>\nPlot: <1-10>\nAge group: <A-F>"
)
# Instruction following (TinyStoriesInstruct): the same two turns, with the instructions instead of a beginning.
INSTRUCT_ASSESS_TEMPLATE = (
    "In the following exercise, the student is given instructions for writing a short story for young children. The "
    "instructions may list words that the story must use, features that the story should have (such as a dialogue or "
    "a moral value), a summary of the plot, and a sentence that should appear somewhere in the story. The "
    "instructions are:\n\n{beginning}\n\nThe student's story is:\n\n{completion}\n\n"
    "Please provide your general assessment about the story written by the student. Is it grammatically correct? Is "
    "it consistent? Does it follow each of the instructions?"
)
INSTRUCT_GRADE_TEMPLATE = (
    "Now, grade the student's story in terms of grammar, creativity, consistency, whether the plot makes sense and how "
    "well it follows the instructions. Each grade is a number from 1 to 10. Moreover, please provide your best guess "
    "of what the age of the student might be, as reflected from the story. Choose from possible age groups: "
    "A: 3 or under. B: 4-5. C: 6-7. D: 8-9. E: 10-12. F: 13-16.\n"
    "Answer in exactly this format:\n"
    "Grammar: <1-10>\nCreativity: <1-10>\nConsistency: <1-10>\nPlot: <1-10>\nInstructions: <1-10>\nAge group: <A-F>"
)
INSTRUCT_REASK_TEMPLATE = (
    "Your grades could not be read ({problem}). Please answer again with every grade a number from 1 to 10 and the "
    "age group a letter from A to F, in exactly this format:\n"
    "Grammar: <1-10>\nCreativity: <1-10>\nConsistency: <1-10>\nPlot: <1-10>\nInstructions: <1-10>\nAge group: <A-F>"
)


@dataclass(frozen=True)
class Protocol:
    """The messages and grade categories of one grading protocol."""

    kind: str
    assess: str
    grade: str
    reask: str
    categories: tuple[str, ...]


PROTOCOLS = {
    "story": Protocol("story", ASSESS_TEMPLATE, GRADE_TEMPLATE, REASK_TEMPLATE, CATEGORIES),
    "instruct": Protocol("instruct", INSTRUCT_ASSESS_TEMPLATE, INSTRUCT_GRADE_TEMPLATE, INSTRUCT_REASK_TEMPLATE,
                         INSTRUCT_CATEGORIES),
}


def get_protocol(kind: str) -> Protocol:
    if kind not in PROTOCOLS:
        raise ValueError(f"unknown judge protocol {kind!r}; choose one of {', '.join(KINDS)}")
    return PROTOCOLS[kind]


class JudgeError(RuntimeError):
    """A judge request failed after its retries (or the reply could never be parsed)."""


class JudgeConfigError(JudgeError):
    """The endpoint rejected the configuration (bad key, unknown model or URL): retrying cannot help."""


class JudgeUnreachable(JudgeConfigError):
    """Several requests in a row could not reach the endpoint (refused, unresolvable, timed out): the run stops."""


class GradeParseError(ValueError):
    """A judge reply lacks a grade or has one out of range."""


# ----------------------------------------------------------------------------- the local judge's prompts
# (helpers.judge.local asks them; they are part of its protocol version)
GRADE_POINTS = tuple(range(1, 11))
AGE_LETTERS = tuple(AGE_GROUPS)
LOCAL_SYSTEM = "You are a strict teacher who grades short stories written by students."
_LOCAL_RUBRIC = ("After the story you will be asked for one grade at a time: grammar, creativity, consistency "
                 "with the beginning, and whether the plot makes sense, each from 1 (very bad) to 10 (perfect); and "
                 "your best guess of the student's age group: A: 3 or under. B: 4-5. C: 6-7. D: 8-9. E: 10-12. "
                 "F: 13-16.\n\n")
LOCAL_HEADS = {
    "story": ("In the following exercise, the student is given a beginning of a story. The student needs to complete "
              "it into a full story. The symbol *** marks the separator between the prescribed beginning and the "
              "student's completion. " + _LOCAL_RUBRIC),
    "instruct": ("In the following exercise, the student is given instructions for writing a short story for young "
                 "children. The instructions come first, then the symbol ***, then the student's story. "
                 + _LOCAL_RUBRIC.replace("and whether", "how well the story follows the instructions, and whether")),
}
# short per-criterion questions: only they (not the story) are run once per criterion
LOCAL_QUESTIONS = {
    "grammar": "Grade the grammar of the student's text.",
    "creativity": "Grade the creativity of the student's text.",
    "consistency": "Grade the consistency of the student's text with the beginning.",
    "plot": "Grade whether the plot makes sense.",
    "instructions": "Grade how well the instructions are followed.",
    "age_group": "Guess the student's age group.",
}
LOCAL_LABELS = {"grammar": "Grammar:", "creativity": "Creativity:", "consistency": "Consistency:", "plot": "Plot:",
                "instructions": "Instructions:", "age_group": "Age group:"}


SKIP_MESSAGE = ("skipped: no judge endpoint configured (set judge_base_url/judge_model params and the API key env var; "
                "or STORYBENCH_JUDGE_BASE_URL / STORYBENCH_JUDGE_MODEL in the environment; the key is read from the "
                "variable named by judge_api_key_env, default OPENAI_API_KEY)")


def judge_status(cfg: Any) -> str:
    """One line for a notebook: which judge is used, or why judge scores are skipped."""
    if cfg is None:
        return SKIP_MESSAGE
    d = cfg.describe()
    if getattr(cfg, "backend", None) == "local":
        return (f"LLM judge: {d['model']} in-process ({d['file']}), grades = expected values under its next-token "
                f"probabilities (protocol {d['protocol']})")
    return (f"LLM judge: {d['model']} at {d['base_url']} (key from ${d['api_key_env']}: "
            f"{'set' if d['api_key_set'] else 'not set'}; protocol {d['protocol']})")


def protocol_version(cfg: Any = None, kind: str = "story") -> str:
    """A short hash of the judge instructions and turn structure of protocol ``kind``; part of every cache key."""
    p = get_protocol(kind)
    if cfg is not None and getattr(cfg, "backend", None) == "local":  # probability grading: its own prompts
        blob = json.dumps(["local-geval-1", kind, LOCAL_SYSTEM, LOCAL_HEADS[kind],
                           [[LOCAL_QUESTIONS[c], LOCAL_LABELS[c]] for c in (*p.categories, "age_group")],
                           cfg.gguf_file, GRADE_POINTS, AGE_LETTERS])
        return text_digest(blob, 10)
    two_turn = True if cfg is None else cfg.two_turn
    if kind == "story":  # kept identical to the original single-protocol hash (existing caches stay valid)
        blob = json.dumps([ASSESS_TEMPLATE, GRADE_TEMPLATE, two_turn, CATEGORIES, sorted(AGE_GROUPS)])
    else:
        blob = json.dumps([kind, p.assess, p.grade, two_turn, p.categories, sorted(AGE_GROUPS)])
    return text_digest(blob, 10)


# ----------------------------------------------------------------------------- reply parsing
_LABELS = {
    "grammar": r"grammar",
    "creativity": r"creativity",
    "consistency": r"consistency",
    "plot": r"plot(?:[ _-]?sense)?",
    "instructions": r"instruct(?:ions?)?(?:[ _-]?following)?",
}
_NUM = r"(-?\d+(?:\.\d+)?)"
_RANGE_NOTE = re.compile(r"\(\s*(?:from\s+|on\s+a\s+scale\s+(?:of\s+)?)?[01]\s*(?:-|–|to)\s*10\s*\)", re.I)
_AGE_YEARS = {3: "A", 4: "B", 5: "B", 6: "C", 7: "C", 8: "D", 9: "D", 10: "E", 11: "E", 12: "E", 13: "F", 14: "F", 15: "F", 16: "F"}


def _json_objects(text: str) -> Iterable[dict]:
    dec = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = dec.raw_decode(text[m.start():])
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            yield obj


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        m = re.search(_NUM, v)
        return float(m.group(1)) if m else None
    return None


def _age_letter(v: Any) -> str | None:
    if v is None:
        return None
    s = str(v).strip()
    m = re.match(r"^\(?\s*([A-Fa-f])\b", s)
    if m:
        return m.group(1).upper()
    m = re.match(r"^(\d+)", s)
    if m:
        return _AGE_YEARS.get(int(m.group(1)))
    return None


def parse_grades(text: str, require: Sequence[str] | None = None, categories: Sequence[str] = CATEGORIES) -> dict[str, Any]:
    """Read the grades out of a judge reply.

    Accepts ``"Grammar: 8/10"``-style lines (markdown, "out of 10", "(1-10)" notes tolerated; the *last* mention
    of a label wins, so an assessment preceding the grades does not confuse it), a JSON object (``{"grammar": 8,
    "plot sense": "7/10", "age_group": "B"}``) or a bare number array ``[8, 7, 9, 6]`` in the order grammar,
    creativity, consistency, plot (then instructions).  ``categories`` are the grades to read (``CATEGORIES``, or
    ``INSTRUCT_CATEGORIES`` for the instruct protocol); ``require`` (default: every category and the age group) the
    ones that must be present.  Returns ``{category: float, "age_group": "A".."F"}``.
    Raises :class:`GradeParseError` naming what is missing or out of the 1–10 range.
    """
    categories = tuple(categories)
    if require is None:
        require = (*categories, "age_group")
    if not isinstance(text, str):
        raise GradeParseError(f"reply is not text ({type(text).__name__})")
    found: dict[str, Any] = {}
    # 1. JSON object(s)
    for obj in _json_objects(text):
        for k, v in obj.items():
            key = re.sub(r"[\s_\-]+", " ", str(k).strip().lower())
            if key.startswith("age"):
                found.setdefault("age_group", _age_letter(v))
                continue
            for cat in categories:
                pat = _LABELS[cat]
                if re.fullmatch(pat.replace("[ _-]?", " ?"), key) or key.startswith(cat[:8]):
                    num = _number(v)
                    if num is not None:
                        found.setdefault(cat, num)
    # 2. labelled numbers in text (last mention wins)
    clean = _RANGE_NOTE.sub("", text.replace("*", ""))
    for cat in categories:
        pat = _LABELS[cat]
        if cat in found:
            continue
        hits = re.findall(rf"(?i)\b{pat}\b[^\d\n]{{0,40}}?{_NUM}", clean)
        if hits:
            found[cat] = float(hits[-1])
    if found.get("age_group") is None:
        found.pop("age_group", None)
        hits = re.findall(r"(?i:\bage(?:[ _]?group)?\b)[^A-Za-z0-9\n]{0,10}([A-F])\b", clean)
        if hits:
            found["age_group"] = hits[-1]
        else:
            hits = re.findall(r"(?i:\bage(?:[ _]?group)?\b)[^A-Za-z0-9\n]{0,10}(\d+)", clean)
            if hits and _AGE_YEARS.get(int(hits[-1])):
                found["age_group"] = _AGE_YEARS[int(hits[-1])]
    # 3. bare number array
    if not any(c in found for c in categories):
        m = re.search(r"\[\s*(-?\d+(?:\.\d+)?(?:\s*,\s*-?\d+(?:\.\d+)?){2,})\s*\]", clean)
        if m:
            vals = [float(g) for g in re.split(r"\s*,\s*", m.group(1).strip())]
            found.update(zip(categories, vals))
    problems = []
    lo, hi = SCORE_RANGE
    for cat in require:
        if cat == "age_group":
            if found.get("age_group") not in AGE_GROUPS:
                problems.append("age group missing (expected a letter A-F)")
            continue
        v = found.get(cat)
        if v is None:
            problems.append(f"{cat} missing")
        elif not (lo <= v <= hi) or math.isnan(v):
            problems.append(f"{cat}={v:g} out of range {lo:g}-{hi:g}")
    if problems:
        raise GradeParseError("; ".join(problems))
    return {k: found[k] for k in (*categories, "age_group") if k in found}


# ----------------------------------------------------------------------------- the cache every backend shares
class _CachedJudge:
    """What every judge backend shares: the cache key, the on-disk cache and the record built from a grade reply.

    A backend implements ``_grade_new(prompt, completion, proto)`` returning ``reply`` (text in the
    ``"Grammar: 8"`` format that :func:`parse_grades` reads), ``assessment``, ``retries`` and optional ``extra``
    (numbers kept beside the grades, e.g. argmax grades); parsing, validation and caching happen here, once.
    """

    cfg: Any

    def scrub(self, text: str) -> str:
        return str(text)

    def cache_key(self, prompt: str, completion: str, kind: str = "story") -> str:
        """SHA-256 of (judge model, protocol version, prompt, completion); the protocol version covers ``kind``."""
        blob = json.dumps([self.cfg.model, protocol_version(self.cfg, kind), prompt, completion], ensure_ascii=False)
        return text_digest(blob)

    def _cache_file(self, prompt: str, completion: str, kind: str = "story") -> Path | None:
        if self.cfg.cache_dir is None:
            return None
        k = self.cache_key(prompt, completion, kind)
        return Path(self.cfg.cache_dir) / k[:2] / f"{k}.json"

    def cached(self, prompt: str, completion: str, kind: str = "story") -> dict[str, Any] | None:
        """The cached grade record of this item, if any (unreadable cache files are ignored)."""
        f = self._cache_file(prompt, completion, kind)
        if f is None or not f.is_file():
            return None
        try:
            rec = read_json(f)
            parse_grades(rec["reply"], categories=get_protocol(kind).categories)  # still valid under the current parser
            return rec
        except (ValueError, KeyError, TypeError, GradeParseError, OSError):
            return None

    def _grade_new(self, prompt: str, completion: str, proto: Protocol) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    def grade(self, prompt: str, completion: str, kind: str = "story") -> dict[str, Any]:
        """Grade one completion with the TinyStories protocol (``kind="story"``: prompt = the story's beginning) or
        the instruction-following one (``kind="instruct"``: prompt = the instructions); cached.  Returns a record
        with the scores, ``age_group``, the assessment and raw grade reply, ``retries`` used, ``seconds`` (time
        spent grading it, kept in the cache), backend ``extra`` numbers and ``cached``.  Raises JudgeError."""
        if not isinstance(prompt, str) or not isinstance(completion, str):
            raise TypeError("prompt and completion must be strings")
        proto = get_protocol(kind)
        rec = self.cached(prompt, completion, kind)
        if rec is not None:
            return {**rec, "cached": True}
        t0 = time.perf_counter()
        got = self._grade_new(prompt, completion, proto)
        try:
            grades = parse_grades(got["reply"], categories=proto.categories)
        except GradeParseError as e:
            raise JudgeError(f"judge reply unusable: {e}") from None
        rec = {
            "judge_model": self.cfg.model,
            "protocol": protocol_version(self.cfg, kind),
            "kind": kind,
            "prompt": prompt,
            "completion": completion,
            **grades,
            "extra": dict(got.get("extra") or {}),
            "assessment": self.scrub(got.get("assessment") or ""),
            "reply": self.scrub(got["reply"]),
            "retries": int(got.get("retries", 0)),
            "seconds": round(time.perf_counter() - t0, 4),
            "graded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        f = self._cache_file(prompt, completion, kind)
        if f is not None:
            write_json(f, rec)
        return {**rec, "cached": False}
