"""TinyStories story evaluation: GPT-Eval prompts, themed prompt suites, instruction following.

Protocols: ``docs/methods.md#gpt-eval``, ``#themed-suites`` and ``#instruct``.

GPT-Eval prompts
----------------
:func:`load_eval_prompts` reads the 44 TinyStories evaluation prompts; :func:`story_prompts` turns them into
:class:`~helpers.generation.Prompt` objects (``story_id`` = prompt index, no ending) for
:func:`helpers.generation.cached_completions`; :func:`fit_prompts` drops (and names) prompts that leave a model less
than ``min_new_tokens`` of context.  Grading is :mod:`helpers.judge`; :func:`judge_config` builds its config from
flat notebook parameters and :func:`judge_summary` averages the grades per model.

Themed suites (Yang et al., McGill report, Table 1; Rathod et al. 2024, Tables 2-4)
----------------------------------------------------------------------------------
Factual, reasoning and context-tracking prompts (``data/prompts/<suite>_prompts.json``) are completed greedily; the
answer is the **first sentence** of the completion (:func:`first_sentence`).  :func:`grade_answer` applies the
hand-written key of ``data/prompts/answer_keys.yaml`` (:func:`load_answer_keys` validates it against the prompt
files) and returns ``success`` / ``partial`` / ``fail``:

* a pattern is a word or words in sequence (``ice cream``), ``a ... b`` (a, then b later), or a list of patterns
  that must all occur in any order (``[alice, jack]``); matching is case-insensitive on whole words after
  *folding* (:func:`fold`): typographic quotes made ASCII, possessive ``'s`` dropped (not in ``she's``/``it's``...),
  plural ``-s/-es/-ies``, ``-ed``, ``-ing``, ``-er/-est`` after a doubled consonant or ``y -> i``, a final silent
  ``-e`` and a list of irregular verb forms;
* any ``success`` pattern -> success; else any ``partial`` pattern -> partial; else fail;
* a ``wrong`` pattern (contradicts the context) downgrades success -> partial and partial -> fail.

:func:`grade_table` grades completion rows; :func:`colour_table_html` renders them colour-coded like the McGill
report's Table 1 (green = follows the prompt, yellow = flawed but on the right track, red = wrong or nonsensical).

Instruction following (TinyStoriesInstruct)
-------------------------------------------
The Instruct documents put some of ``Features:``, ``Words:``, ``Summary:``, ``Random sentence:`` in a random subset
and order before ``Story:``.  The bundled stories have no summaries and no generation-time feature labels, so
:func:`build_instruct_document` derives only what the story itself shows:

* ``Words:`` ``n_words`` distinct content words drawn from the story (lower-case occurrences, not function words),
  as they appear in it;
* ``Random sentence:`` one sentence of the story (3-30 words);
* ``Features:`` only features with an honest detection rule (:data:`FEATURE_RULES`): ``Dialogue`` (a quoted
  utterance) and ``MoralValue`` (the story states a lesson: "moral", "learned that", or "lesson" with learn/teach in
  the same sentence; a heuristic); BadEnding, Twist, Foreshadowing and Conflict have no reliable rule and are never
  produced;
* ``Summary:`` never (there is none to take).

:func:`parse_instruct` reads a document or prompt back; :func:`required_word_share` is the share of a prompt's
required words that a story uses (folded, so ``escape`` counts ``escaped``); :func:`instruct_scores` scores
completion rows and adds a chance baseline (the words of *another* prompt).
"""
from __future__ import annotations

import html as _html
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

SUITES = ("factual", "reasoning", "context-tracking")
GRADES = ("success", "partial", "fail")
GRADE_SCORE = {"success": 1.0, "partial": 0.5, "fail": 0.0}
GRADE_COLOURS = {"success": "#c6efce", "partial": "#ffeb9c", "fail": "#ffc7ce"}  # green / yellow / red
EVAL_PROMPTS = "tinystories/evaluation_prompts.yaml.gz"
ANSWER_KEYS = "prompts/answer_keys.yaml"
INSTRUCT_PROMPTS = "prompts/instruct_prompts_50.json"
INSTRUCT_FIELDS = ("Features", "Words", "Summary", "Random sentence")
DERIVED_FIELDS = ("Features", "Words", "Random sentence")  # what the bundled stories let us derive honestly


class AnswerKeyError(ValueError):
    """answer_keys.yaml does not match the prompt files or breaks the pattern syntax."""


# ----------------------------------------------------------------------------- text normalisation and folding
_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‟": '"', "″": '"', "«": '"', "»": '"',
                         "‘": "'", "’": "'", "‚": "'", "‛": "'", "′": "'", "`": "'"})


def ascii_quotes(text: str) -> str:
    """Typographic double/single quotes and apostrophes made ASCII (the prompt files' ``”`` opens quotes too)."""
    return text.translate(_QUOTES)


_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)*")
# contractions whose 's is "is"/"us", not a possessive
_KEEP_S = {"it's", "he's", "she's", "that's", "what's", "there's", "here's", "who's", "let's", "where's", "how's"}
_IRREGULAR = {
    "went": "go", "goes": "go", "came": "come", "saw": "see", "seen": "see", "took": "take",
    "taken": "take", "gave": "give", "given": "give", "ate": "eat", "eaten": "eat", "flew": "fly", "flown": "fly",
    "fell": "fall", "fallen": "fall", "said": "say", "says": "say", "told": "tell", "found": "find", "made": "make",
    "ran": "run", "knew": "know", "known": "know", "thought": "think", "brought": "bring", "bought": "buy",
    "sat": "sit", "lay": "lie", "lain": "lie", "laid": "lie", "slept": "sleep", "felt": "feel", "kept": "keep",
    "met": "meet", "got": "get", "gotten": "get", "fought": "fight", "caught": "catch",
    "threw": "throw", "thrown": "throw", "wore": "wear", "worn": "wear", "woke": "wake", "drank": "drink",
    "swam": "swim", "began": "begin", "begun": "begin", "broke": "break", "broken": "break", "chose": "choose",
    "chosen": "choose", "drew": "draw", "drawn": "draw", "drove": "drive", "driven": "drive", "forgot": "forget",
    "forgotten": "forget", "grew": "grow", "grown": "grow", "held": "hold", "heard": "hear", "hid": "hide",
    "hidden": "hide", "led": "lead", "lost": "lose", "meant": "mean", "paid": "pay", "rode": "ride",
    "ridden": "ride", "rang": "ring", "rung": "ring", "risen": "rise", "sang": "sing",
    "sung": "sing", "shook": "shake", "shaken": "shake", "shone": "shine", "shot": "shoot", "slid": "slide",
    "spoke": "speak", "spoken": "speak", "spent": "spend", "stood": "stand", "stole": "steal", "stolen": "steal",
    "stuck": "stick", "swept": "sweep", "taught": "teach", "tore": "tear", "torn": "tear",
    "understood": "understand", "won": "win", "wrote": "write", "written": "write", "did": "do", "does": "do",
    "done": "do", "had": "have", "has": "have", "built": "build", "sent": "send", "bitten": "bite",
    "blew": "blow", "blown": "blow", "dug": "dig", "fed": "feed", "froze": "freeze", "frozen": "freeze",
    "hung": "hang", "knelt": "kneel", "lit": "light", "sold": "sell", "sank": "sink", "sunk": "sink",
    "sprang": "spring", "stung": "sting", "struck": "strike", "swung": "swing", "wept": "weep",
    "children": "child", "mice": "mouse", "feet": "foot", "teeth": "tooth", "men": "man", "women": "woman",
    "geese": "goose", "people": "person",
}
# -er/-est words after a doubled consonant that are not comparatives
_NOT_COMPARATIVE = {"butter", "better", "dinner", "summer", "letter", "hammer", "supper", "winner", "zipper",
                    "slipper", "bitter", "glitter", "litter", "ladder", "pepper", "matter", "otter", "copper",
                    "rubber", "shutter", "flutter", "chatter", "clatter", "scatter", "platter", "mutter", "stutter",
                    "dresser", "banner", "manner", "hopper", "shudder", "rudder", "bladder", "trigger"}
_NO_E_STRIP = {"here", "there", "where", "were", "none", "once", "else", "while"}  # "here" would become "her"
_VOWEL = re.compile(r"[aeiouy]")


def _undouble(stem: str) -> str:
    if len(stem) >= 3 and stem[-1] == stem[-2] and stem[-1] not in "aeiouylsz":
        return stem[:-1]
    return stem


def fold(token: str) -> str:
    """A crude lemma of one lower-case token ("lemma-light"): the same key for ``dog``/``dogs``, ``play``/``played``/
    ``playing``, ``swim``/``swimming``/``swam``, ``berry``/``berries``, ``big``/``bigger``/``biggest``,
    ``happy``/``happier``, ``Jane``/``Jane's``, ``hide``/``hiding``/``hid``.  Keys are not always words (``love`` ->
    ``lov``); only equality of keys matters."""
    w = ascii_quotes(token.lower())
    if w.endswith("'s") and w not in _KEEP_S:
        w = w[:-2]
    if w in _IRREGULAR:
        w = _IRREGULAR[w]
    elif "'" in w:
        return w  # contractions (don't, can't, she's, i'm) stay as written
    elif len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 4 and w.endswith("ied"):
        w = w[:-3] + "y"
    elif len(w) > 5 and w.endswith(("iest", "ier")) and w not in _NOT_COMPARATIVE:
        w = w[: -4 if w.endswith("iest") else -3] + "y"
    elif w.endswith("ing") and len(w) - 3 >= 2 and _VOWEL.search(w[:-3]):
        w = _undouble(w[:-3])
    elif w.endswith("ed") and len(w) - 2 >= 3 and _VOWEL.search(w[:-2]):
        w = _undouble(w[:-2])
    elif w.endswith(("est", "er")) and w not in _NOT_COMPARATIVE:
        stem = w[:-3] if w.endswith("est") else w[:-2]
        if len(stem) >= 3 and stem[-1] == stem[-2] and stem[-1] not in "aeiouylsz":
            w = stem[:-1]
    elif len(w) > 4 and w.endswith("es") and w[:-2].endswith(("s", "x", "z", "ch", "sh")):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if len(w) > 3 and w.endswith("e") and not w.endswith("ee") and w not in _NO_E_STRIP:
        w = w[:-1]
    return w


def tokens(text: str) -> list[str]:
    """Lower-case word tokens (letters/digits with inner apostrophes: ``don't``, ``jane's``), quotes made ASCII."""
    return _TOKEN.findall(ascii_quotes(text).lower())


def folded(text: str) -> list[str]:
    """:func:`fold` of every token of ``text``."""
    return [fold(t) for t in tokens(text)]


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


def _find(toks: Sequence[str], seq: Sequence[str], start: int) -> int:
    n = len(seq)
    for i in range(start, len(toks) - n + 1):
        if tuple(toks[i : i + n]) == tuple(seq):
            return i
    return -1


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
    from .data import read_text

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
    import yaml

    from .data import read_text

    raw = yaml.safe_load(read_text(path))
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
    the answer is the first sentence with words.  A completion without an end is cut at ``max_chars``."""
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
    import yaml

    from .data import read_text

    prompts = yaml.safe_load(read_text(path))
    if not isinstance(prompts, list) or not all(isinstance(p, str) and p.strip() for p in prompts):
        raise ValueError(f"{path} must hold a YAML list of non-empty prompt strings")
    return prompts


def generation_text(prompt: str) -> str:
    """The prompt as fed to a decoder: trailing spaces removed.  The byte-level tokenizers attach a space to the
    next word (``"Story: The"`` is ``Story`` ``:`` ``ĠThe``), so a prompt ending in a space would end in a lone
    ``Ġ`` token the model never saw before a word; without it the model writes the space itself."""
    return prompt.rstrip(" ")


def story_prompts(texts: Sequence[str], ids: Sequence[Any] | None = None, endings: Sequence[str] | None = None):
    """:class:`~helpers.generation.Prompt` objects for fixed prompts: ``story_id`` = index (or ``ids``), the text
    without trailing spaces (:func:`generation_text`), ending ``""`` (or ``endings``)."""
    from .generation import Prompt

    ids = list(range(len(texts))) if ids is None else list(ids)
    endings = [""] * len(texts) if endings is None else list(endings)
    if not len(ids) == len(endings) == len(texts):
        raise ValueError("need one id (and one ending) per prompt")
    return [Prompt(i, generation_text(t), e, 1.0, len(t.split()), len(t.split()) + len(e.split()))
            for i, t, e in zip(ids, texts, endings)]


def model_context(model_dir: str | Path) -> int:
    """The context length of a saved decoder (:func:`helpers.decoder.context_length` of its folder); an error when its
    config states none (prompts cannot be fitted then)."""
    from .decoder import context_length

    n = context_length(model_dir)
    if n is None:
        raise ValueError(f"{Path(model_dir).name}: its config.json states no context length (max_position_embeddings)")
    return n


def fit_prompts(prompts, tokenizer, context: int, min_new_tokens: int, bos: bool = True):
    """Split ``prompts`` into those that leave at least ``min_new_tokens`` of a ``context``-token model (with the
    ``<|endoftext|>`` the generator puts first) and those that do not; returns ``(kept, dropped)``."""
    kept, dropped = [], []
    for p in prompts:
        n = len(tokenizer(p.prompt, add_special_tokens=False)["input_ids"]) + int(bos)
        (kept if n + min_new_tokens <= context else dropped).append(p)
    return kept, dropped


def themed_prompts(keys: Sequence[AnswerKey]):
    """Prompt objects of answer keys (``story_id`` = key id, prompt = ASCII-quoted text)."""
    return story_prompts([k.prompt for k in keys], [k.id for k in keys])


def grade_table(rows: Iterable[Mapping[str, Any]], keys: Sequence[AnswerKey]):
    """Grade completion rows (``story_id`` = key id, ``completion``, ``model``); one row per (model, prompt) with the
    first sentence, the grade, its score (1 / 0.5 / 0) and the matched patterns."""
    import pandas as pd

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
    seeded percentile-bootstrap ``confidence`` interval over the prompts (``score CI low`` / ``score CI high``)."""
    import numpy as np
    import pandas as pd

    from .stats import mean_interval

    counts = graded.pivot_table(index=["model", "suite"], columns="grade", values="id", aggfunc="count", fill_value=0)
    counts = counts.reindex(columns=list(GRADES), fill_value=0)
    score = graded.groupby(["model", "suite"])["score"].mean().rename("score")
    rng = np.random.default_rng(seed)  # one draw sequence for all groups, in groupby order
    ci = {key: mean_interval(part.to_numpy(dtype=float), confidence, n_boot, rng=rng)
          for key, part in graded.groupby(["model", "suite"])["score"]}
    bounds = pd.DataFrame.from_dict(ci, orient="index", columns=["score CI low", "score CI high"])
    bounds.index = pd.MultiIndex.from_tuples(bounds.index, names=["model", "suite"])
    out = pd.concat([counts, score, bounds], axis=1).reset_index()
    out.columns.name = None
    order = {m: i for i, m in enumerate(dict.fromkeys(graded["model"]))}
    sorder = {s: i for i, s in enumerate(SUITES)}
    return out.sort_values(["model", "suite"], key=lambda c: c.map(order) if c.name == "model" else c.map(sorder)).reset_index(drop=True)


def colour_table_html(graded, caption: str | None = None, extra: Mapping[tuple[str, str], str] | None = None,
                      prompt_chars: int = 160) -> str:
    """Table 1 of Yang et al. (McGill report) as HTML: one row per prompt (with the expected answer), one column per model, each cell the
    model's first sentence on a green / yellow / red background (success / partial / fail); ``extra[(model, id)]``
    is appended to a cell (e.g. a judge grade)."""
    models = list(dict.fromkeys(graded["model"]))
    ids = list(dict.fromkeys(graded["id"]))
    cell = {(r.model, r.id): r for r in graded.itertuples(index=False)}
    first = {r.id: r for r in graded.itertuples(index=False)}
    style = ("<style>table.sbc{border-collapse:collapse;font-family:sans-serif;font-size:12px}"
             "table.sbc td,table.sbc th{border:1px solid #bbb;padding:5px;vertical-align:top;text-align:left;"
             "max-width:36ch}table.sbc th{background:#f3f3f3}table.sbc td.p{max-width:48ch;background:#fafafa}"
             "table.sbc caption{caption-side:top;text-align:left;padding:6px 0}"
             "table.sbc small{color:#555}</style>")
    head = "<th>prompt (expected)</th>" + "".join(f"<th>{_html.escape(m)}</th>" for m in models)
    body = []
    for i in ids:
        f = first[i]
        p = f.prompt if len(f.prompt) <= prompt_chars else "[...] " + f.prompt[-prompt_chars:]
        tds = [f'<td class="p">{_html.escape(p)}<br><small>expected: {_html.escape(str(f.expected))}</small></td>']
        for m in models:
            r = cell.get((m, i))
            if r is None:
                tds.append("<td></td>")
                continue
            more = f"<br><small>{_html.escape(extra[(m, i)])}</small>" if extra and (m, i) in extra else ""
            tds.append(f'<td style="background:{GRADE_COLOURS[r.grade]}" title="{_html.escape(r.matched)}">'
                       f"{_html.escape(r.answer) or '<i>(empty)</i>'}{more}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    legend = ("green = success (follows the prompt), yellow = partial (flawed but on the right track), "
              "red = fail (wrong or nonsensical)")
    cap = f"<caption>{_html.escape(caption + ' — ' if caption else '')}{legend}</caption>"
    return f'{style}<table class="sbc">{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


# ----------------------------------------------------------------------------- the judge, from notebook parameters
def judge_config(base_url: str | None = None, model: str | None = None, api_key_env: str | None = None,
                 cache_dir: str | Path | None = None, backend: str = "openai-compatible", **settings: Any):
    """The judge of notebook parameters.  ``backend`` (the ``judge`` parameter): ``"local"`` gives a
    :class:`helpers.judge.LocalJudgeConfig` (the in-process SmolLM2 judge; the other arguments but ``cache_dir``
    are ignored), ``"none"`` gives ``None``, ``"openai-compatible"`` a :class:`helpers.judge.JudgeConfig` from flat
    notebook parameters (``judge_base_url``, ``judge_model``, ``judge_api_key_env`` and other settings), falling
    back to the environment, or ``None`` when no endpoint is configured (judge scores are then skipped, never
    invented)."""
    from .judge import JUDGE_BACKENDS, JudgeConfig, LocalJudgeConfig

    if backend not in JUDGE_BACKENDS:
        raise ValueError(f"judge = {backend!r}; choose one of {', '.join(JUDGE_BACKENDS)}")
    if backend == "none":
        return None
    if backend == "local":
        return LocalJudgeConfig(cache_dir=Path(cache_dir) if cache_dir else None)

    p = {"base_url": base_url, "model": model, **settings}
    if api_key_env:
        p["api_key_env"] = api_key_env
    return JudgeConfig.from_params({"judge": p}, cache_dir=cache_dir)


def judge_prompt_ids(kept: Mapping[str, Iterable[Any]], n: int, seed: int) -> list[Any]:
    """``n`` prompt ids (seeded, sorted) among those that every model kept (see :func:`fit_prompts`): the judged
    prompts are the same for every model."""
    sets = [set(v) for v in kept.values()]
    common = sorted(set.intersection(*sets)) if sets else []
    return sorted(random.Random(seed).sample(common, min(int(n), len(common))))


def judge_items(nucleus, greedy, prompt_ids: Sequence[Any], samples: int):
    """The completions to grade: for each judged prompt, the greedy completion (``greedy`` rows, may be None) and
    the first ``samples`` nucleus samples; a ``decoding`` column says which."""
    import pandas as pd

    cols = ["model", "story_id", "sample", "prompt", "completion"]
    parts = []
    if greedy is not None and len(greedy):
        g = greedy[greedy["story_id"].isin(prompt_ids)][cols].copy()
        g["decoding"] = "greedy"
        parts.append(g)
    if samples and nucleus is not None and len(nucleus):
        s = nucleus[nucleus["story_id"].isin(prompt_ids) & (nucleus["sample"] < samples)][cols].copy()
        s["decoding"] = "nucleus"
        parts.append(s)
    if not parts:
        return pd.DataFrame(columns=[*cols, "decoding"])
    return pd.concat(parts, ignore_index=True)


def judge_summary(grades, by: Sequence[str] = ("model",), categories: Sequence[str] | None = None):
    """Mean, standard error and count of every judge category per group (failed items excluded and counted)."""
    import pandas as pd

    from .judge import CATEGORIES

    cats = [c for c in (categories or CATEGORIES) if c in grades.columns]
    ok = grades[grades["status"] != "failed"]
    g = ok.groupby(list(by), sort=False)
    out = g[cats].mean()
    for c in cats:
        out[f"{c} sem"] = g[c].sem()
    out["graded"] = g.size()
    failed = grades[grades["status"] == "failed"].groupby(list(by), sort=False).size()
    out["failed"] = failed.reindex(out.index).fillna(0).astype(int)
    out["age group (mode)"] = g["age_group"].agg(lambda s: s.mode().iat[0] if len(s.mode()) else None)
    return out.reset_index()


# ----------------------------------------------------------------------------- instruction following
# Function words and story formulae never offered as required words.
STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at away back be because been before being below
between both but by can can't could couldn't did didn't do does doesn't doing don't down during each even ever every
few for from further get got had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself
him himself his how i i'd i'll i'm i've if in into is isn't it it's its itself just let let's like me more most much
must my myself no nor not now of off oh on once one only or other our ours ourselves out over own said same say says
she she'd she'll she's should so some such than that that's the their theirs them themselves then there there's these
they they'd they'll they're they've this those through time to too two under until up upon us very was wasn't we we'd
we'll we're we've were weren't what what's when where which while who who's whom why will with won't would wouldn't
yes you you'd you'll you're you've your yours yourself named day once upon went came asked told always never really
three four five six seven eight nine ten
""".split())


def _has_dialogue(story: str) -> bool:
    return bool(re.search(r"[\"“”][^\"“”\n]*[A-Za-z][^\"“”\n]*[\"“”]", story))


_MORAL = re.compile(r"\bmoral\b|\blearn(?:ed|t|s)?\s+(?:that|how important)\b", re.I)
_LESSON = re.compile(r"\blessons?\b", re.I)
_TEACH = re.compile(r"\b(?:learn(?:ed|t|s|ing)?|taught|teach(?:es)?)\b", re.I)


def _has_moral(story: str) -> bool:
    """The story states a lesson: "moral", "learned that", or "lesson" with learn/teach in the same sentence (so
    "piano lessons" or "learned to swim" do not count)."""
    from .data import split_sentences

    if _MORAL.search(story):
        return True
    return any(_LESSON.search(s) and _TEACH.search(s) for s in split_sentences(story))


# Features of the Instruct data with a rule honest enough to label a story by; the rest are never produced.
FEATURE_RULES = {"Dialogue": _has_dialogue, "MoralValue": _has_moral}
FEATURE_NOTES = {
    "Dialogue": "a quoted utterance (text between double quotes)",
    "MoralValue": "the story states a lesson (\"moral\", \"learned that\", or \"lesson\" with learn/teach in one sentence)",
    "BadEnding": "not produced: no reliable rule for a bad ending",
    "Twist": "not produced: no reliable rule for a plot twist",
    "Foreshadowing": "not produced: no reliable rule",
    "Conflict": "not produced: no reliable rule",
}


def detect_features(story: str, features: Sequence[str] = tuple(FEATURE_RULES)) -> list[str]:
    """The features of ``features`` whose rule (:data:`FEATURE_RULES`) fires on ``story``, in the given order."""
    unknown = [f for f in features if f not in FEATURE_RULES]
    if unknown:
        raise ValueError(f"no honest detection rule for feature(s) {unknown}; available: {sorted(FEATURE_RULES)}")
    return [f for f in features if FEATURE_RULES[f](story)]


def candidate_words(story: str) -> list[str]:
    """Content words of ``story`` that may be required words: alphabetic, at least 3 letters, not a function word,
    seen in lower case (so not only as a name); one surface form per folded key, in order of first appearance."""
    seen, out = set(), []
    for m in re.finditer(r"(?<![\w'’-])([a-z]{3,})(?![\w'’-])", ascii_quotes(story)):
        w = m.group(1)
        k = fold(w)
        if w in STOPWORDS or k in seen:
            continue
        seen.add(k)
        out.append(w)
    return out


@dataclass
class InstructDocument:
    """One TinyStoriesInstruct-style document: ``fields`` ((name, value) in order) then ``Story: `` and the story."""

    fields: list[tuple[str, str]]
    story: str

    @property
    def prompt(self) -> str:
        return "".join(f"{k}: {v}\n" for k, v in self.fields) + "Story: "

    @property
    def text(self) -> str:
        return self.prompt + self.story

    @property
    def words(self) -> list[str]:
        return [w for k, v in self.fields if k == "Words" for w in split_list(v)]

    @property
    def features(self) -> list[str]:
        return [f for k, v in self.fields if k == "Features" for f in split_list(v)]


def split_list(value: str) -> list[str]:
    return [x.strip() for x in value.split(",") if x.strip()]


def build_instruct_document(story: str, rng: random.Random, n_words: int = 3, p_field: float = 0.5,
                            features: Sequence[str] = tuple(FEATURE_RULES), require: Sequence[str] = (),
                            min_sentence_words: int = 3, max_sentence_words: int = 30) -> InstructDocument:
    """An Instruct document for ``story`` with the fields it honestly supports (module docstring): every available
    field is included with probability ``p_field`` (fields in ``require`` always; at least one field), in a random
    order.  ``Words`` needs ``n_words`` candidate words, ``Features`` a detected feature, ``Random sentence`` a
    sentence of ``min_sentence_words``..``max_sentence_words`` words; a required field the story cannot give raises
    ``ValueError``."""
    from .data import split_sentences

    bad = [f for f in require if f not in DERIVED_FIELDS]
    if bad:
        raise ValueError(f"cannot require {bad}: only {DERIVED_FIELDS} are derived from the stories")
    story = story.strip()
    avail: dict[str, str] = {}
    feats = detect_features(story, features)
    if feats:
        avail["Features"] = ", ".join(feats)
    cands = candidate_words(story)
    if len(cands) >= n_words > 0:
        avail["Words"] = ", ".join(rng.sample(cands, n_words))
    sents = [s for s in split_sentences(story) if min_sentence_words <= len(s.split()) <= max_sentence_words]
    if sents:
        avail["Random sentence"] = rng.choice(sents)
    missing = [f for f in require if f not in avail]
    if missing:
        raise ValueError(f"story cannot give required field(s) {missing}: {story[:80]!r}...")
    names = [f for f in DERIVED_FIELDS if f in avail]
    chosen = [f for f in names if f in require or rng.random() < p_field]
    if not chosen and names:
        chosen = [rng.choice(names)]
    rng.shuffle(chosen)
    return InstructDocument([(f, avail[f]) for f in chosen], story)


def instruct_documents(stories: Sequence[str], seed: int, require: Sequence[str] = (), skip_unfit: bool = False,
                       **kwargs: Any) -> list[InstructDocument]:
    """One document per story, seeded (:func:`build_instruct_document` with one ``random.Random(seed)`` for the
    whole list).  With ``skip_unfit`` stories that cannot give a required field are skipped."""
    rng = random.Random(seed)
    out = []
    for s in stories:
        try:
            out.append(build_instruct_document(s, rng, require=require, **kwargs))
        except ValueError:
            if not skip_unfit:
                raise
    return out


@dataclass
class ParsedInstruct:
    fields: list[tuple[str, str]]
    story: str | None  # None for a prompt that ends at "Story:"

    def get(self, name: str) -> list[str]:
        return [v for k, v in self.fields if k == name]

    @property
    def words(self) -> list[str]:
        """Required words of every ``Words:`` line (in order, without repeats)."""
        return list(dict.fromkeys(w for v in self.get("Words") for w in split_list(v)))

    @property
    def features(self) -> list[str]:
        return list(dict.fromkeys(f for v in self.get("Features") for f in split_list(v)))


_FIELD_LINE = re.compile(r"^(Features|Words|Summary|Random sentence|Story):[ \t]?(.*)$")


def parse_instruct(text: str) -> ParsedInstruct:
    """Read an Instruct document or prompt: ``Name: value`` lines up to the first ``Story:``; what follows is the
    story (``None`` when nothing does).  Raises ``ValueError`` on a line before ``Story:`` that is not a field."""
    lines = text.split("\n")
    fields: list[tuple[str, str]] = []
    for i, line in enumerate(lines):
        m = _FIELD_LINE.match(line)
        if not m:
            if not line.strip():
                continue
            raise ValueError(f"line {i + 1} is not an Instruct field: {line[:80]!r}")
        name, value = m.group(1), m.group(2)
        if name == "Story":
            rest = "\n".join([value, *lines[i + 1 :]])
            return ParsedInstruct(fields, rest if rest.strip() else None)
        fields.append((name, value.strip()))
    raise ValueError("no 'Story:' line: not an Instruct document")


def word_used(word: str, story: str | Sequence[str]) -> bool:
    """Whether ``story`` (text, or its :func:`folded` tokens) uses ``word`` in any folded form (multi-word and
    hyphenated words must occur in sequence)."""
    toks = folded(story) if isinstance(story, str) else story
    part = tuple(folded(word))
    return bool(part) and _find(toks, part, 0) >= 0


def required_word_share(words: Sequence[str], story: str) -> float | None:
    """Share of ``words`` used by ``story`` (``None`` when there are no required words)."""
    if not words:
        return None
    toks = folded(story)
    return sum(word_used(w, toks) for w in words) / len(words)


def load_instruct_prompts(path: str | Path = INSTRUCT_PROMPTS) -> list[str]:
    """The 50 bundled TinyStoriesInstruct prompts (each ends with ``Story: ``), checksum-verified and parsed once to
    check the format."""
    from .data import read_text

    prompts = json.loads(read_text(path))
    for i, p in enumerate(prompts):
        parsed = parse_instruct(p)
        if parsed.story is not None:
            raise ValueError(f"instruct prompt {i} has text after 'Story:'")
    return prompts


def instruct_scores(rows: Iterable[Mapping[str, Any]], baseline_shift: int = 1):
    """Per completion row (``prompt``, ``completion``, plus carried columns): the required words, the share used,
    whether all were used, and a chance baseline — the share of the words of the ``baseline_shift``-th next prompt
    (with words) that this completion happens to use."""
    import pandas as pd

    rows = [dict(r) for r in rows]
    words = [parse_instruct(r["prompt"]).words for r in rows]
    uniq = list(dict.fromkeys(r["prompt"] for r, w in zip(rows, words) if w))
    other = {p: uniq[(i + baseline_shift) % len(uniq)] for i, p in enumerate(uniq)} if len(uniq) > 1 else {}
    out = []
    for r, w in zip(rows, words):
        share = required_word_share(w, r["completion"])
        o = other.get(r["prompt"])
        chance = required_word_share(parse_instruct(o).words, r["completion"]) if o else None
        out.append({**r, "words": ", ".join(w), "n_words": len(w), "share_used": share,
                    "all_used": None if share is None else share == 1.0, "chance_share": chance,
                    "story_words": len(r["completion"].split())})
    return pd.DataFrame(out)


def instruct_summary(scored, by: Sequence[str] = ("model", "prompts")):
    """Mean share of required words used, share of stories using all of them, the chance baseline and counts."""
    s = scored[scored["n_words"] > 0].copy()
    s["all_used"] = s["all_used"].astype(float)
    g = s.groupby(list(by), sort=False)
    out = g.agg(**{"stories scored": ("share_used", "size"), "share of required words used": ("share_used", "mean"),
                   "all required words used": ("all_used", "mean"), "chance (words of another prompt)": ("chance_share", "mean"),
                   "mean story words": ("story_words", "mean")})
    return out.reset_index()


def highlight_words(text: str, words: Sequence[str]) -> str:
    """HTML of ``text`` with the tokens that fold to a required word in bold."""
    keys = {tuple(folded(w)) for w in words}
    single = {k[0] for k in keys if len(k) == 1}
    out = []
    for piece in re.split(r"([A-Za-z0-9’']+)", text):
        if piece and re.fullmatch(r"[A-Za-z0-9’']+", piece) and fold(ascii_quotes(piece).lower()) in single:
            out.append(f"<b>{_html.escape(piece)}</b>")
        else:
            out.append(_html.escape(piece))
    return "".join(out)


def instruct_examples_html(rows: Sequence[Mapping[str, Any]], models: Sequence[str], caption: str | None = None) -> str:
    """A table of instruct prompts and each model's story (required words in bold)."""
    style = ("<style>table.sbi{border-collapse:collapse;font-family:sans-serif;font-size:12px}"
             "table.sbi td,table.sbi th{border:1px solid #bbb;padding:5px;vertical-align:top;text-align:left;"
             "max-width:60ch;white-space:pre-wrap}table.sbi th{background:#f3f3f3}"
             "table.sbi caption{caption-side:top;text-align:left;padding:6px 0}</style>")
    head = "<th>instructions</th>" + "".join(f"<th>{_html.escape(m)}</th>" for m in models)
    body = []
    for r in rows:
        words = parse_instruct(r["prompt"]).words
        tds = [f"<td>{_html.escape(r['prompt'])}</td>"]
        for m in models:
            tds.append(f"<td>{highlight_words(r.get(m, ''), words)}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    cap = f"<caption>{_html.escape(caption)}</caption>" if caption else ""
    return f'{style}<table class="sbi">{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


# ----------------------------------------------------------------------------- the instruct decoder
@dataclass
class InstructRun:
    """The instruct decoder of one budget, built to match the plain decoder of notebook 02 (same tokenizer, model
    spec and training config; only the documents differ)."""

    name: str
    budget: str
    tokenizer: Any
    train_data: Any
    valid_data: Any
    spec: Any
    cfg: Any
    documents: int
    valid_documents: int
    field_counts: dict
    plain_dir: Path
    differences: list[str]
    examples: list[str] = field(default_factory=list)  # the first training documents, for display

    def row(self) -> dict:
        return {"model": self.name, "budget": self.budget, "documents": self.documents,
                "train tokens": self.train_data.tokens, "blocks": len(self.train_data),
                "epochs": round(self.train_data.epochs(self.cfg.steps, self.cfg.batch_size), 2),
                "steps": self.cfg.steps, "batch": self.cfg.batch_size, "dropout": self.spec.dropout,
                "weight decay": self.cfg.weight_decay, "validation documents": self.valid_documents,
                "same spec/config as plain": not self.differences}


def field_counts(docs: Sequence[InstructDocument]) -> dict[str, Any]:
    """How often each field and feature occurs, and the mean number of fields per document."""
    counts = {f: sum(any(k == f for k, _ in d.fields) for d in docs) for f in INSTRUCT_FIELDS}
    counts.update({f"feature {f}": sum(f in d.features for d in docs) for f in FEATURE_RULES})
    counts["mean fields per document"] = sum(len(d.fields) for d in docs) / max(len(docs), 1)
    return counts


def heldout_split(heldout: Sequence[str], n_prompts: int) -> tuple[list[str], list[str]]:
    """Held-out stories split into (validation stories, evaluation stories): the evaluation prompts come from the
    *last* ``n_prompts`` stories, so the first ones (which notebook 02's validation blocks draw on) are only ever
    used for validation."""
    if n_prompts >= len(heldout):
        raise ValueError(f"asked for {n_prompts} held-out prompts but there are only {len(heldout)} held-out stories")
    return list(heldout[: len(heldout) - n_prompts]), list(heldout[len(heldout) - n_prompts :])


def plan_instruct(run_dir: str | Path, budget: str, p02: Mapping[str, Any], seed: int, n_heldout_prompts: int,
                  **doc_kwargs: Any) -> InstructRun:
    """The instruct decoder run of ``budget``: notebook 02's run for that budget (tokenizer, spec with its dropout,
    training config; :func:`helpers.training.plan_decoders` with the 02 params ``p02``), with its training stories
    and held-out validation stories turned into Instruct documents.  ``differences`` lists any way in which the
    plain decoder actually trained (``decoders/<budget>/train_state.json``) differs in spec or config."""
    from dataclasses import asdict

    from .artifacts import read_json
    from .budgets import read_corpus
    from .training import encode_blocks, plan_decoders

    run_dir = Path(run_dir)
    plain = plan_decoders(run_dir, [budget], p02["model"], p02["train"], p02.get("regularisation", "words"),
                          p02.get("word_scale", 1.0), p02.get("fixed_dropout", 0.1), p02.get("fixed_weight_decay", 0.1),
                          p02.get("valid_blocks"))[budget]
    stories = [r["text"] for r in read_corpus(run_dir / "data" / f"{budget}.jsonl")]
    heldout = [r["text"] for r in read_corpus(run_dir / "data" / "tiny-heldout.jsonl")]
    valid_stories, _ = heldout_split(heldout, n_heldout_prompts)
    docs = instruct_documents(stories, seed, **doc_kwargs)
    vdocs = instruct_documents(valid_stories, seed + 1, **doc_kwargs)
    context = plain.spec.context
    train_data = encode_blocks(plain.tokenizer, [d.text for d in docs], context, seed=plain.cfg.seed)
    valid_data = encode_blocks(plain.tokenizer, [d.text for d in vdocs], context, max_blocks=p02.get("valid_blocks"))
    plain_dir = run_dir / "decoders" / budget
    diffs = []
    state = plain_dir / "train_state.json"
    if state.is_file():
        st = read_json(state)
        want_cfg, have_cfg = asdict(plain.cfg), st.get("config", {})
        diffs += [f"config.{k}: plain {have_cfg.get(k)!r} vs instruct {v!r}" for k, v in want_cfg.items()
                  if k in have_cfg and _norm(have_cfg[k]) != _norm(v)]
        spec = st.get("extra", {}).get("spec") or {}
        diffs += [f"spec.{k}: plain {spec.get(k)!r} vs instruct {v!r}" for k, v in asdict(plain.spec).items()
                  if k in spec and _norm(spec[k]) != _norm(v)]
    else:
        diffs.append(f"no plain decoder trained in {plain_dir} (run notebook 02)")
    return InstructRun(f"{budget}-instruct", budget, plain.tokenizer, train_data, valid_data, plain.spec, plain.cfg,
                       len(docs), len(vdocs), field_counts(docs), plain_dir, diffs, [d.text for d in docs[:3]])


def _norm(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def heldout_instruct_prompts(run_dir: str | Path, n: int, seed: int, **doc_kwargs: Any):
    """Instruct prompts derived from the last ``n`` held-out stories (``Words`` always present, the other fields
    random), as :class:`~helpers.generation.Prompt` objects (``story_id`` = ``heldout-<i>``, ending = the story)."""
    from .budgets import read_corpus

    heldout = [r["text"] for r in read_corpus(Path(run_dir) / "data" / "tiny-heldout.jsonl")]
    _, eval_stories = heldout_split(heldout, n)
    docs = instruct_documents(eval_stories, seed, require=("Words",), skip_unfit=True, **doc_kwargs)
    return story_prompts([d.prompt for d in docs], [f"heldout-{i}" for i in range(len(docs))], [d.story for d in docs])


def bundled_instruct_prompts(path: str | Path = INSTRUCT_PROMPTS):
    """The 50 bundled Instruct prompts as Prompt objects (``story_id`` = ``bundled-<i>``; text ends at ``Story:``,
    see :func:`generation_text`)."""
    prompts = load_instruct_prompts(path)
    return story_prompts(prompts, [f"bundled-{i}" for i in range(len(prompts))])

