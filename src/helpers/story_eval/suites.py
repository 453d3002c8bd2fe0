"""TinyStories story evaluation: GPT-Eval prompts and the themed prompt suites with their answer keys. Protocols:
``docs/methods.md#gpt-eval`` and ``#themed-suites`` (prompts, first-sentence answers, the answer-key grammar and
grading rules); instruction following is :mod:`helpers.story_eval.instruct`.

GPT-Eval prompts: :func:`load_eval_prompts` reads the 44 TinyStories evaluation prompts; :func:`story_prompts` turns
them into :class:`~helpers.generation.completions.Prompt` objects (``story_id`` = prompt index, no ending) for
:func:`helpers.generation.completions.cached_completions`; :func:`fit_prompts` splits off (to be named) the prompts
that leave a model less than ``min_new_tokens`` of context; :func:`gpteval_completions` completes the rest for each
model (cached) with a coverage table (:func:`coverage_row`). Grading is :mod:`helpers.judge.rubric` (run from a
notebook by :mod:`helpers.judge.runs`).

Themed suites: :func:`first_sentence` extracts the answer, :func:`load_answer_keys` reads
``data/prompts/answer_keys.yaml`` and validates it against the prompt files (``data/prompts/<suite>_prompts.json``),
:func:`grade_answer` returns ``success`` / ``partial`` / ``fail`` (folding: :func:`helpers.story_eval.folding.fold`),
:func:`grade_table` grades completion rows; :func:`helpers.report.story_views.colour_table_html` renders them
colour-coded.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from helpers.core.config import read_yaml
from helpers.core.stats import mean_interval, wilson_interval
from helpers.data.corpora import read_text, resolve
from helpers.data.tokenizers import encode_stories, load_tokenizer
from helpers.generation.completions import Prompt, cached_completions
from helpers.models.decoder import context_length
from helpers.story_eval.folding import _find, ascii_quotes, folded

SUITES = ("factual", "reasoning", "context-tracking")
GRADES = ("success", "partial", "fail")
GRADE_SCORE = {"success": 1.0, "partial": 0.5, "fail": 0.0}
GRADE_COLOURS = {"success": "#c6efce", "partial": "#ffeb9c", "fail": "#ffc7ce"}  # green / yellow / red
EVAL_PROMPTS = "tinystories/evaluation_prompts.yaml.gz"
ANSWER_KEYS = "prompts/answer_keys.yaml"


class AnswerKeyError(ValueError):
    """answer_keys.yaml does not match the prompt files or breaks the pattern syntax."""


# ----------------------------------------------------------------------------- patterns
@dataclass(frozen=True)
class Pattern:
    """One answer-key pattern: ``parts`` (each a sequence of folded tokens) must occur in order; ``all_of`` (a list
    pattern) holds sub-patterns that must all occur, in any order."""

    source: Any
    parts: tuple[tuple[str, ...], ...] = ()
    all_of: tuple["Pattern", ...] = ()

    def matches(self, toks: Sequence[str]) -> bool:
        if self.all_of:
            return all(p.matches(toks) for p in self.all_of)
        start = 0
        for part in self.parts:
            pos = _find(toks, part, start)
            if pos < 0:
                return False
            start = pos + len(part)
        return True

    def __str__(self) -> str:
        if self.all_of:
            return "[" + ", ".join(str(p) for p in self.all_of) + "]"
        return str(self.source)


def compile_pattern(p: Any, where: str = "pattern") -> Pattern:
    """Parse one pattern of the answer-key syntax (a string, or a list of strings for "all of, any order")."""
    if isinstance(p, bool) or p is None:
        raise AnswerKeyError(f"{where}: {p!r} is not a pattern (YAML reads unquoted yes/no/on/off/null as "
                             f"booleans or null: quote them)")
    if isinstance(p, (int, float)):
        p = str(p)
    if isinstance(p, str):
        if not p.strip():
            raise AnswerKeyError(f"{where}: empty pattern")
        parts = []
        for chunk in re.split(r"\s*(?:\.\.\.|…)\s*", p.strip()):
            toks = tuple(folded(chunk))
            if not toks:
                raise AnswerKeyError(f"{where}: {p!r} has an empty part (write 'a ... b' with words on both sides)")
            parts.append(toks)
        return Pattern(p, tuple(parts))
    if isinstance(p, (list, tuple)):
        if not p:
            raise AnswerKeyError(f"{where}: empty list pattern")
        subs = []
        for q in p:
            if isinstance(q, (list, tuple)):
                raise AnswerKeyError(f"{where}: list patterns do not nest ({p!r})")
            subs.append(compile_pattern(q, where))
        return Pattern(list(p), (), tuple(subs))
    raise AnswerKeyError(f"{where}: unsupported pattern {p!r} ({type(p).__name__})")


# ----------------------------------------------------------------------------- answer keys
@dataclass
class AnswerKey:
    """The expected answer to one themed prompt (see data/prompts/answer_keys.yaml)."""

    id: str
    suite: str
    index: int  # 0-based position in the suite's JSON file
    prompt: str  # the prompt as given to the models: the JSON text with ASCII quotes
    original: str  # the JSON text as bundled
    expect: str
    success: list[Pattern]
    partial: list[Pattern] = field(default_factory=list)
    wrong: list[Pattern] = field(default_factory=list)
    note: str | None = None


@dataclass
class Grade:
    """A graded answer: ``label`` (success / partial / fail) and the patterns that matched."""

    label: str
    success: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return GRADE_SCORE[self.label]

    @property
    def reason(self) -> str:
        bits = [f"{k}: {', '.join(v)}" for k, v in (("success", self.success), ("partial", self.partial),
                                                    ("wrong", self.wrong)) if v]
        return "; ".join(bits) or "no expected word"


def grade_answer(answer: str, key: AnswerKey | Mapping[str, Any]) -> Grade:
    """Grade ``answer`` (the first sentence of a completion) against ``key`` (an :class:`AnswerKey`, or a mapping
    with ``success``/``partial``/``wrong`` pattern lists as in answer_keys.yaml)."""
    if not isinstance(key, AnswerKey):
        key = AnswerKey(str(key.get("id", "?")), str(key.get("suite", "?")), -1, "", "", str(key.get("expect", "")),
                        *[[compile_pattern(p, f"{key.get('id', '?')}.{f}") for p in (key.get(f) or [])]
                          for f in ("success", "partial", "wrong")])
    toks = folded(answer or "")
    hits = {f: [str(p) for p in getattr(key, f) if p.matches(toks)] for f in ("success", "partial", "wrong")}
    label = "success" if hits["success"] else "partial" if hits["partial"] else "fail"
    if hits["wrong"]:
        label = {"success": "partial", "partial": "fail", "fail": "fail"}[label]
    return Grade(label, hits["success"], hits["partial"], hits["wrong"])


def load_suite(suite: str) -> list[str]:
    """The prompts of one themed suite, as bundled (checksum-verified)."""
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; choose from {', '.join(SUITES)}")
    prompts = json.loads(read_text(f"prompts/{suite}_prompts.json"))
    if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
        raise AnswerKeyError(f"prompts/{suite}_prompts.json must be a JSON list of strings")
    return prompts


def load_answer_keys(path: str | Path = ANSWER_KEYS, suites: Sequence[str] = SUITES,
                     prompts: Mapping[str, Sequence[str]] | None = None) -> dict[str, list[AnswerKey]]:
    """Answer keys per suite, validated: one key per prompt (``id`` = ``suite-<n>``, 1-based), its ``prompt``
    equal to the JSON prompt with ASCII quotes, a non-empty ``success`` list, only known fields, every pattern
    well-formed.  ``prompts`` (suite -> list) replaces the bundled prompt files (tests)."""
    raw = read_yaml(resolve(path), read_text(path))  # read_text: checksum-verified
    if not isinstance(raw, dict):
        raise AnswerKeyError(f"{path}: expected a mapping suite -> list of keys")
    unknown = set(raw) - set(SUITES)
    if unknown:
        raise AnswerKeyError(f"{path}: unknown suite(s) {sorted(unknown)}")
    allowed = {"id", "prompt", "expect", "success", "partial", "wrong", "note"}
    out: dict[str, list[AnswerKey]] = {}
    for suite in suites:
        texts = list(prompts[suite]) if prompts is not None else load_suite(suite)
        entries = raw.get(suite) or []
        if len(entries) != len(texts):
            raise AnswerKeyError(f"{path}: {suite} has {len(entries)} keys for {len(texts)} prompts")
        keys = []
        for i, (e, text) in enumerate(zip(entries, texts)):
            want_id = f"{suite}-{i + 1}"
            if not isinstance(e, dict):
                raise AnswerKeyError(f"{path}: {suite} entry {i + 1} is not a mapping")
            if e.get("id") != want_id:
                raise AnswerKeyError(f"{path}: entry {i + 1} of {suite} has id {e.get('id')!r}, expected {want_id!r}")
            extra = set(e) - allowed
            if extra:
                raise AnswerKeyError(f"{want_id}: unknown field(s) {sorted(extra)}; allowed {sorted(allowed)}")
            if ascii_quotes(str(e.get("prompt", ""))) != ascii_quotes(text):
                raise AnswerKeyError(f"{want_id}: prompt differs from prompts/{suite}_prompts.json[{i}]:\n"
                                     f"  key:  {e.get('prompt')!r}\n  json: {ascii_quotes(text)!r}")
            if not e.get("success"):
                raise AnswerKeyError(f"{want_id}: needs at least one success pattern")
            pats = {}
            for f in ("success", "partial", "wrong"):
                v = e.get(f) or []
                if not isinstance(v, list):
                    raise AnswerKeyError(f"{want_id}.{f} must be a list of patterns")
                pats[f] = [compile_pattern(p, f"{want_id}.{f}") for p in v]
            keys.append(AnswerKey(want_id, suite, i, ascii_quotes(text), text, str(e.get("expect", "")),
                                  pats["success"], pats["partial"], pats["wrong"], e.get("note")))
        out[suite] = keys
    return out


# ----------------------------------------------------------------------------- prompts and completions
_ABBREV = re.compile(r"\b(?:Mr|Mrs|Ms|Dr|St|Jr|Sr)\.$")


def first_sentence(text: str, max_chars: int = 400) -> str:
    """The completion up to the end of its first sentence: the first ``.``, ``!``, ``?`` or ``…`` (with any closing
    quotes/brackets) followed by the end or by a space and a word that does not start in lower case (so
    ``"Yes!" said Mom.`` is one sentence), or a line break; abbreviations such as ``Mr.`` do not end it.  A
    "sentence" without a word (a completion that starts by closing the prompt's sentence with ``.``) is skipped, so
    the answer is the first sentence with words.  A completion without an end is cut at ``max_chars``.

    Not ``split_sentences(text)[0]`` (:func:`helpers.data.normalisation.split_sentences`): this reads a model's
    continuation of a prompt, not a story, so its rule differs on purpose and switching would change grades.  It
    skips a leading word-less "sentence" (``'. "French," said Mom. She smiled.'`` gives ``'"French," said Mom.'``;
    ``split_sentences`` gives ``'.'``); it returns ``""`` for an empty completion (``split_sentences`` gives no
    sentence); it ends a sentence before any word not in lower case, not only a capital or digit (``'Go! (Then
    run.)'`` gives ``'Go!'``, ``split_sentences`` keeps one sentence); ``etc.`` and ``vs.`` end a sentence here
    (``'They ate pears, etc. Then they slept.'`` gives ``'They ate pears, etc.'``); and it caps an unended answer
    at ``max_chars``.  The two agree on every suite prompt and answer key and the first 2,000 bundled stories."""
    s = text.lstrip()
    start = 0
    for m in re.finditer(r"[.!?…]+[\"'”’)\]]*(?=\s*$|[ \t]+[^a-z\s]|[ \t]*\n)|\n", s):
        if m.group() != "\n" and _ABBREV.search(s[: m.end()]):
            continue
        end = m.start() if m.group() == "\n" else m.end()
        if not re.search(r"[A-Za-z0-9]", s[start:end]):
            start = m.end()  # nothing said yet: the answer is in the next sentence
            continue
        return s[start:end].strip()
    return s[start : start + max_chars].strip()


def load_eval_prompts(path: str | Path = EVAL_PROMPTS) -> list[str]:
    """The 44 TinyStories evaluation prompts (a YAML list), checksum-verified."""
    prompts = read_yaml(resolve(path), read_text(path))  # read_text: checksum-verified, gzip
    if not isinstance(prompts, list) or not all(isinstance(p, str) and p.strip() for p in prompts):
        raise ValueError(f"{path} must hold a YAML list of non-empty prompt strings")
    return prompts


def generation_text(prompt: str) -> str:
    """The prompt as fed to a decoder: trailing spaces removed.  The byte-level tokenizers attach a space to the
    next word (``"Story: The"`` is ``Story`` ``:`` ``ĠThe``), so a prompt ending in a space would end in a lone
    ``Ġ`` token the model never saw before a word; without it the model writes the space itself."""
    return prompt.rstrip(" ")


def story_prompts(texts: Sequence[str], ids: Sequence[Any] | None = None, endings: Sequence[str] | None = None):
    """:class:`~helpers.generation.completions.Prompt` objects for fixed prompts: ``story_id`` = index (or ``ids``), the text
    without trailing spaces (:func:`generation_text`), ending ``""`` (or ``endings``)."""
    ids = list(range(len(texts))) if ids is None else list(ids)
    endings = [""] * len(texts) if endings is None else list(endings)
    if not len(ids) == len(endings) == len(texts):
        raise ValueError("need one id (and one ending) per prompt")
    return [Prompt(i, generation_text(t), e, 1.0, len(t.split()), len(t.split()) + len(e.split()))
            for i, t, e in zip(ids, texts, endings)]


def model_context(model_dir: str | Path) -> int:
    """The context length of a saved decoder (:func:`helpers.models.decoder.context_length` of its folder); an error when its
    config states none (prompts cannot be fitted then)."""
    n = context_length(model_dir)
    if n is None:
        raise ValueError(f"{Path(model_dir).name}: its config.json states no context length (max_position_embeddings)")
    return n


def fit_prompts(prompts, tokenizer, context: int, min_new_tokens: int, bos: bool = True):
    """Split ``prompts`` into those that leave at least ``min_new_tokens`` of a ``context``-token model (with the
    ``<|endoftext|>`` the generator puts first) and those that do not; returns ``(kept, dropped)``."""
    kept, dropped = [], []
    prompts = list(prompts)
    for p, ids in zip(prompts, encode_stories(tokenizer, [p.prompt for p in prompts], add_eot=False)):
        (kept if len(ids) + int(bos) + min_new_tokens <= context else dropped).append(p)
    return kept, dropped


def coverage_row(model: str, context: int, kept: Sequence[Any], dropped: Sequence[Any], rows: Sequence[Mapping[str, Any]],
                 seconds: float) -> dict[str, Any]:
    """One row of notebook 05b's GPT-Eval coverage table: a model's context, the prompts it could complete
    (:func:`fit_prompts`' ``kept``) and those left out (named by ``story_id``), its completions' word counts and
    the seconds they took."""
    words = [r["completion_words"] for r in rows]
    return {"model": model, "context": context, "prompts used": len(kept),
            "prompts left out": ", ".join(str(p.story_id) for p in dropped) or "-",
            "completions": len(rows), "mean words": float(np.mean(words)) if words else float("nan"),
            "median words": float(np.median(words)) if words else float("nan"),
            "empty completions": sum(w == 0 for w in words), "seconds": round(seconds, 1)}


def gpteval_completions(gen_dir: str | Path, model_dirs: Mapping[str, str | Path], prompts, decoding, min_new_tokens: int,
                        *, max_new_tokens: int, batch_size: int, seed: int):
    """GPT-Eval's completions: for each model (``model_dirs``: name -> saved decoder, in order) the ``prompts`` that
    fit its context (:func:`fit_prompts`) completed with ``decoding``, cached as ``<gen_dir>/gpteval-<model>.jsonl``
    (:func:`helpers.generation.completions.cached_completions`). Returns the completion rows (a DataFrame), the
    coverage table (one :func:`coverage_row` per model) and the kept prompts per model."""
    rows, coverage, kept_by_model = [], [], {}
    for name, folder in model_dirs.items():
        context = model_context(folder)
        kept, dropped = fit_prompts(prompts, load_tokenizer(folder), context, min_new_tokens)
        kept_by_model[name] = kept
        t0 = time.time()
        done = cached_completions(Path(gen_dir) / f"gpteval-{name}.jsonl", folder, kept, decoding, model_name=name,
                                  max_new_tokens=max_new_tokens, batch_size=batch_size, seed=seed) if kept else []
        rows += done
        coverage.append(coverage_row(name, context, kept, dropped, done, time.time() - t0))
    return pd.DataFrame(rows), pd.DataFrame(coverage), kept_by_model


def themed_prompts(keys: Sequence[AnswerKey]):
    """Prompt objects of answer keys (``story_id`` = key id, prompt = ASCII-quoted text)."""
    return story_prompts([k.prompt for k in keys], [k.id for k in keys])


def grade_table(rows: Iterable[Mapping[str, Any]], keys: Sequence[AnswerKey]):
    """Grade completion rows (``story_id`` = key id, ``completion``, ``model``); one row per (model, prompt) with the
    first sentence, the grade, its score (1 / 0.5 / 0) and the matched patterns."""
    by_id = {k.id: k for k in keys}
    out = []
    for r in rows:
        k = by_id[r["story_id"]]
        ans = first_sentence(r["completion"])
        g = grade_answer(ans, k)
        out.append({"model": r["model"], "suite": k.suite, "id": k.id, "prompt": k.prompt, "expected": k.expect,
                    "answer": ans, "grade": g.label, "score": g.score, "matched": g.reason})
    return pd.DataFrame(out)


def grade_summary(graded, confidence: float = 0.95, n_boot: int = 1000, seed: int = 0) -> Any:
    """Per model and suite: counts of success / partial / fail, the mean score (success 1, partial 0.5) and its
    seeded percentile-bootstrap ``confidence`` interval over the prompts (``score CI low`` / ``score CI high``).
    Where every prompt of a group has the same score (all fail, say) the bootstrap can only return that score, an
    interval of width 0; such a group gets the Wilson interval of its score × prompts successes in its prompts
    instead (all 9 failing: [0, 0.30], not [0, 0]). Where ``graded`` has a ``judge consistency`` column (a remote
    judge's grade of each answer: :func:`helpers.judge.runs.judge_themed_answers`), its mean per group is added."""

    counts = graded.pivot_table(index=["model", "suite"], columns="grade", values="id", aggfunc="count", fill_value=0)
    counts = counts.reindex(columns=list(GRADES), fill_value=0)
    score = graded.groupby(["model", "suite"])["score"].mean().rename("score")
    rng = np.random.default_rng(seed)  # one draw sequence for all groups, in groupby order
    ci = {}
    for key, part in graded.groupby(["model", "suite"])["score"]:
        v = part.to_numpy(dtype=float)
        ci[key] = mean_interval(v, confidence, n_boot, rng=rng)  # drawn even when replaced below: the other
        if np.ptp(v) == 0:  # groups keep their draws; a constant sample's bootstrap interval has width 0
            ci[key] = wilson_interval(float(v.sum()), len(v), confidence)
    bounds = pd.DataFrame.from_dict(ci, orient="index", columns=["score CI low", "score CI high"])
    bounds.index = pd.MultiIndex.from_tuples(bounds.index, names=["model", "suite"])
    out = pd.concat([counts, score, bounds], axis=1).reset_index()
    out.columns.name = None
    order = {m: i for i, m in enumerate(dict.fromkeys(graded["model"]))}
    sorder = {s: i for i, s in enumerate(SUITES)}
    out = out.sort_values(["model", "suite"], key=lambda c: c.map(order) if c.name == "model" else c.map(sorder)).reset_index(drop=True)
    if "judge consistency" in graded:
        out = out.merge(graded.groupby(["model", "suite"], as_index=False)["judge consistency"].mean(), on=["model", "suite"])
    return out


def suite_columns(summary: pd.DataFrame, prefix: str = "themed ") -> pd.DataFrame:
    """:func:`grade_summary` one row per model: for each suite (in :data:`SUITES` order) the score and its interval
    as columns ``<prefix><suite>``, ``<prefix><suite> CI low``, ``<prefix><suite> CI high``."""
    cols = {}
    for suite in [s for s in SUITES if s in set(summary["suite"])]:
        part = summary[summary["suite"] == suite].set_index("model")
        cols[f"{prefix}{suite}"] = part["score"]
        cols[f"{prefix}{suite} CI low"] = part["score CI low"]
        cols[f"{prefix}{suite} CI high"] = part["score CI high"]
    out = pd.DataFrame(cols)
    out.index.name = "model"
    return out.reindex(list(dict.fromkeys(summary["model"]))).reset_index()

