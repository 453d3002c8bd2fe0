"""TinyStoriesInstruct (``docs/methods.md#instruct``): Instruct documents derived from the stories, reading them
back, the share of required words a story uses, and the plan of the instruct decoder (notebook 02's recipe on
Instruct documents; the real Instruct files are :mod:`helpers.story_eval.instruct_files`).

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

import json
import random
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from helpers.core.artifacts import read_json
from helpers.data.corpora import read_text
from helpers.data.corpus_files import read_corpus
from helpers.data.normalisation import split_sentences
from helpers.story_eval.folding import _find, ascii_quotes, fold, folded
from helpers.story_eval.suites import story_prompts
from helpers.training.recipes import encode_blocks, plan_decoders

INSTRUCT_PROMPTS = "prompts/instruct_prompts_50.json"
INSTRUCT_FIELDS = ("Features", "Words", "Summary", "Random sentence")
DERIVED_FIELDS = ("Features", "Words", "Random sentence")  # what the bundled stories let us derive honestly


# ----------------------------------------------------------------------------- derived Instruct documents
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
    """Whether ``story`` (text, or its :func:`helpers.story_eval.folding.folded` tokens) uses ``word`` in any folded form
    (multi-word and hyphenated words must occur in sequence)."""
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
    """Mean share of required words used, share of stories using all of them, the chance baseline and counts:
    ``stories`` (every completion), ``stories scored`` (those whose prompt has a ``Words:`` line) and ``not scored
    (prompt without Words:)`` (the rest: a prompt that asks only for features, a summary or a sentence has no
    required words to count)."""
    by = list(by)
    s = scored[scored["n_words"] > 0].copy()
    s["all_used"] = s["all_used"].astype(float)
    g = s.groupby(by, sort=False)
    out = g.agg(**{"stories scored": ("share_used", "size"), "share of required words used": ("share_used", "mean"),
                   "all required words used": ("all_used", "mean"), "chance (words of another prompt)": ("chance_share", "mean"),
                   "mean story words": ("story_words", "mean")}).reset_index()
    counts = scored.groupby(by, sort=False).agg(**{"stories": ("n_words", "size"),
                                                   "no_words": ("n_words", lambda n: int((n == 0).sum()))}).reset_index()
    out = out.merge(counts.rename(columns={"no_words": "not scored (prompt without Words:)"}), on=by, how="left")
    front = by + ["stories", "stories scored", "not scored (prompt without Words:)"]
    return out[front + [c for c in out.columns if c not in front]]


def unscored_notes(scored) -> list[str]:
    """One sentence per prompt set (``prompts`` column of :func:`instruct_scores`' table) holding prompts without a
    ``Words:`` line (only features, a summary or a random sentence): how many prompts and stories (of how many
    models) :func:`instruct_summary` cannot score for required words."""
    notes = []
    for set_name, part in scored.groupby("prompts", sort=False):
        no_words = part[part["n_words"] == 0]
        if len(no_words):
            notes.append(f"{set_name}: {no_words['prompt'].nunique()} of {part['prompt'].nunique()} prompts have no Words: line "
                         f"(only features, a summary or a random sentence), so {len(no_words)} of {len(part)} stories "
                         f"({no_words['model'].nunique()} models) are not scored for required words")
    return notes


# ----------------------------------------------------------------------------- the instruct decoder
@dataclass
class InstructRun:
    """The instruct decoder of one budget, built like the plain decoder of notebook 02: the same tokenizer and model
    spec, and notebook 02's training config unless the caller changed it (e.g. fewer steps); ``differences`` lists
    every way in which the plain decoder actually trained differently (``spec.…`` or ``config.…``)."""

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
                "same model spec as plain": not any(d.startswith(("spec.", "no plain")) for d in self.differences),
                "training differences from plain": "; ".join(d.removeprefix("config.") for d in self.differences
                                                             if not d.startswith("spec.")) or "none"}


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
    training config; :func:`helpers.training.recipes.plan_decoders` with the 02 params ``p02``), with its training stories
    and held-out validation stories turned into Instruct documents.  ``differences`` lists any way in which the
    plain decoder actually trained (``decoders/<budget>/train_state.json``) differs in spec or config."""
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
    random), as :class:`~helpers.generation.completions.Prompt` objects (``story_id`` = ``heldout-<i>``, ending = the story)."""
    heldout = [r["text"] for r in read_corpus(Path(run_dir) / "data" / "tiny-heldout.jsonl")]
    _, eval_stories = heldout_split(heldout, n)
    docs = instruct_documents(eval_stories, seed, require=("Words",), skip_unfit=True, **doc_kwargs)
    return story_prompts([d.prompt for d in docs], [f"heldout-{i}" for i in range(len(docs))], [d.story for d in docs])


def bundled_instruct_prompts(path: str | Path = INSTRUCT_PROMPTS):
    """The 50 bundled Instruct prompts as Prompt objects (``story_id`` = ``bundled-<i>``; text ends at ``Story:``,
    see :func:`helpers.story_eval.suites.generation_text`)."""
    prompts = load_instruct_prompts(path)
    return story_prompts(prompts, [f"bundled-{i}" for i in range(len(prompts))])
