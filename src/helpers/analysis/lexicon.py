"""Words and their classes: a story split into words and punctuation marks (:func:`split_words`), one class per
word (:data:`CLASSES`) from the bundled BLiMP vocabulary, hand-listed closed classes, morphology and capitalisation
(:class:`LexiconTagger`, offline, the default) or from spaCy when installed (:class:`SpacyTagger`); see
``docs/methods.md#interpretability``.
"""
from __future__ import annotations

import io
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from helpers.data.corpora import read_text

LEXICON = "lexicon/blimp_vocabulary.csv.gz"

# ----------------------------------------------------------------------------- word classes

#: fine classes, for neurons (part-of-speech breakdown); "start" is the <|endoftext|> put before every story
CLASSES = ["noun", "verb", "adjective", "adverb", "name", "pronoun", "determiner", "preposition", "conjunction",
           "auxiliary", "number", "punctuation", "other"]
#: the classes of the attention-target analysis (the issue's list); other fine classes fold into "other"
ATTENTION_CLASSES = ["punctuation", "determiner", "pronoun", "name", "noun", "verb", "adjective", "other"]
#: the classes counted as neuron specialisms in the summary (any other dominant class is "other class")
SPECIALIST_CLASSES = ["noun", "verb", "adjective", "name", "punctuation"]
FUNCTION_CLASSES = ["determiner", "pronoun", "preposition", "conjunction", "auxiliary"]

_CLOSED_LISTS = {
    "determiner": """the a an this that these those my your his her its our their some any no every each all both
        another either neither many much few several such what which whose""",
    "pronoun": """i me you he him she it we us they them myself yourself himself herself itself ourselves yourselves
        themselves mine yours hers ours theirs who whom someone somebody something everyone everybody everything
        anyone anybody anything nobody nothing none i'm i'll i've i'd you're you'll you've you'd he's he'll he'd
        she's she'll she'd it's it'll we're we'll we've we'd they're they'll they've they'd let's that's there's
        what's who's""",
    "preposition": """in on at to of with for from by about into onto over under up down out off through across
        around behind near inside outside after before like past between along toward towards upon without above
        below beside besides beneath among against during except until till within""",
    "conjunction": """and but or nor so because if when while than as though although unless whether whenever
        wherever since""",
    "auxiliary": """am is are was were be been being do does did have has had will would can could shall should may
        might must don't doesn't didn't can't cannot couldn't won't wouldn't isn't aren't wasn't weren't haven't
        hasn't hadn't shouldn't mustn't""",
    "adverb": """not very too also then now there here just again always never soon away back together really once
        still only even yet ever later today tomorrow yesterday more most often sometimes almost already quickly
        slowly suddenly finally carefully happily sadly loudly quietly maybe perhaps instead forward everywhere
        somewhere anywhere home how why where""",
    "number": "one two three four five six seven eight nine ten hundred first second third",
}
CLOSED_CLASS: dict[str, str] = {w: cls for cls, words in _CLOSED_LISTS.items() for w in words.split()}

#: irregular verb forms (morphology the lexicon's regular fallback cannot derive)
IRREGULAR_VERBS = frozenset("""went gone ran run came come gave given took taken saw seen said made found got gotten
    knew known thought felt left kept brought bought caught taught sat stood fell fallen held hid hidden ate eaten
    drank swam sang sung began begun broke broken built drew drawn drove forgot forgotten grew grown heard hit hurt
    lay laid led lost meant met paid read rode rang rose sent shook shot shut slept slid spoke spent spun stole
    stuck swung threw thrown tore torn understood woke wore won wrote written dug fed fought hung blew blown bit
    bent chose dealt dove froze lit sold sank sprang stung struck wept told became become flew flown let put set
    cut go goes run runs give gives come comes get gets make makes take takes""".split())

#: frequent TinyStories character names (names are also detected from capitalisation; this covers sentence starts)
NAMES = frozenset("""Lily Tim Timmy Tom Tommy Ben Sue Sam Max Mia Anna Lucy Jack Sara Sarah Bob Billy Spot Kitty
    Molly Jane Joe Amy Emma Jake Mark Mary Sally Lisa Tina Bella Daisy Rosie Zoe Jill Kim Mike Ducky Buddy Fluffy
    Rex Pip Ellie Ollie Leo Luna Mittens Whiskers Benny Jenny Johnny Susie Mommy Daddy Mom Dad Grandma Grandpa
    Mama Papa""".split())

_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)*|[^\w\s]|_")
_QUOTES = set("\"“”‘’'«»")
_SENTENCE_END = set(".!?:")


@dataclass
class Word:
    text: str
    start: int
    end: int
    sentence_initial: bool


def split_words(text: str) -> list[Word]:
    """Words (letters/digits, with inner apostrophes: ``didn't``, ``Lily's``) and single punctuation marks, with
    character spans and whether each word starts a sentence (story start, after ``. ! ? :``, a line break, or an
    opening quote)."""
    words: list[Word] = []
    boundary, prev_end = True, 0
    for m in _WORD_RE.finditer(text):
        tok, s, e = m.group(), m.start(), m.end()
        if "\n" in text[prev_end:s]:
            boundary = True
        is_word = tok[0].isalnum()
        words.append(Word(tok, s, e, boundary and is_word))
        if is_word:
            boundary = False
        elif tok in _SENTENCE_END:
            boundary = True
        elif tok in _QUOTES:
            if e < len(text) and text[e].isalnum() and (s == 0 or not text[s - 1].isalnum()):
                boundary = True  # an opening quote: direct speech starts a sentence
        else:
            boundary = False
        prev_end = e
    return words


def _norm(word: str) -> str:
    return word.replace("’", "'").lower()


def _strip_clitic(low: str) -> str:
    for suf in ("'s", "'ll", "'re", "'ve", "'d", "'m", "n't", "'"):
        if low.endswith(suf) and len(low) > len(suf):
            return low[: -len(suf)]
    return low


@dataclass
class Lexicon:
    """Word → set of open classes (noun/verb/adjective/adverb) from the BLiMP vocabulary, and its proper names."""

    classes: dict[str, set[str]]
    primary: dict[str, str]
    names: frozenset[str]

    def lookup(self, low: str) -> str | None:
        return self.primary.get(low)

    def has(self, low: str, cls: str) -> bool:
        return cls in self.classes.get(low, ())


_PRIORITY = ["adjective", "noun", "verb", "adverb"]  # tie-break when a word has as many rows in two classes


def lexicon_from_frame(df) -> Lexicon:
    """Build a :class:`Lexicon` from the BLiMP vocabulary table (columns ``expression``, ``category_2``, ``verb``,
    ``noun``, ``properNoun``). A word's class is the one most of its rows have (ties: adjective, noun, verb)."""
    counts: dict[str, dict[str, int]] = {}
    names = set()
    for expr, cat2, verb, noun, proper in zip(df["expression"], df["category_2"], df["verb"], df["noun"], df["properNoun"]):
        if not isinstance(expr, str) or " " in expr.strip():
            continue
        w = _norm(expr.strip())
        cat2 = cat2 if isinstance(cat2, str) else ""
        if proper == 1 and expr[:1].isupper():
            names.add(expr.strip())
        if verb == 1 or cat2.startswith(("V_", "IV", "TV")):
            cls = "verb"
        elif noun == 1 or cat2 in ("N", "RelN", "N_embedding", "N_pred"):
            cls = "noun"
        elif cat2.lower().startswith("adj"):
            cls = "adjective"
        elif cat2 == "Adv":
            cls = "adverb"
        else:
            continue
        counts.setdefault(w, {}).setdefault(cls, 0)
        counts[w][cls] += 1
    classes = {w: set(c) for w, c in counts.items()}
    primary = {w: max(c, key=lambda k: (c[k], -_PRIORITY.index(k))) for w, c in counts.items()}
    return Lexicon(classes, primary, frozenset(names))


@lru_cache(maxsize=4)
def load_lexicon(path: str = LEXICON) -> Lexicon:
    """The bundled lexicon, read through :func:`helpers.data.corpora.read_text` (checksum-verified, recorded)."""
    return lexicon_from_frame(pd.read_csv(io.StringIO(read_text(path))))


def _morph_class(low: str, lex: Lexicon) -> str | None:
    """Class of an out-of-lexicon word from its stem: plural/3sg -s, past -ed, -ing, comparative -er/-est, -ly."""
    def any_of(stems: Iterable[str], cls: str) -> bool:
        return any(s and (lex.has(s, cls) or CLOSED_CLASS.get(s) == cls) for s in stems)

    def dedouble(s: str) -> list[str]:
        return [s, s + "e"] + ([s[:-1]] if len(s) > 2 and s[-1] == s[-2] else [])

    if low.endswith("ies") and any_of([low[:-3] + "y"], "noun"):
        return "noun"
    if low.endswith("ies") and any_of([low[:-3] + "y"], "verb"):
        return "verb"
    if low.endswith("s") and len(low) > 3:
        stems = [low[:-1]] + ([low[:-2]] if low.endswith("es") else [])
        for cls in ("noun", "verb"):
            if any_of(stems, cls):
                return cls
    if low.endswith("ied") and any_of([low[:-3] + "y"], "verb"):
        return "verb"
    if low.endswith("ed") and len(low) > 4 and any_of(dedouble(low[:-2]) + [low[:-1]], "verb"):
        return "verb"
    if low.endswith("ing") and len(low) > 5 and any_of(dedouble(low[:-3]), "verb"):
        return "verb"
    if low.endswith("ily") and any_of([low[:-3] + "y"], "adjective"):
        return "adverb"
    if low.endswith("ly") and len(low) > 4 and any_of([low[:-2], low[:-2] + "le"], "adjective"):
        return "adverb"
    for suf in ("est", "er"):
        if low.endswith(suf) and len(low) > len(suf) + 2 and any_of(dedouble(low[: -len(suf)]), "adjective"):
            return "adjective"
    return None


def word_class(word: str, lexicon: Lexicon, sentence_initial: bool = False, names: set[str] | frozenset[str] = frozenset(),
               inferred: dict[str, str] | None = None) -> str:
    """The class of one word (see :data:`CLASSES`), context-free apart from capitalisation.

    Order: punctuation/number, hand-listed closed classes, names (capitalised and not sentence-initial, or known:
    ``names`` such as the capitalised mid-sentence words of the same story, :data:`NAMES`, the lexicon's proper
    nouns), irregular verb forms, the lexicon, morphology, then ``inferred`` (classes learnt from contexts by
    :meth:`LexiconTagger.fit`), else "other"."""
    if not word or not any(ch.isalnum() for ch in word):
        return "punctuation"
    if word.isdigit():
        return "number"
    low = _norm(word)
    if low in CLOSED_CLASS and not (low == "i" and word != "I"):
        return CLOSED_CLASS[low]
    base = _strip_clitic(low)
    cap_base = word[: len(base)] if len(base) <= len(word) else word
    if word[0].isupper():
        if not sentence_initial or cap_base in NAMES or cap_base in lexicon.names or cap_base in names:
            if base not in CLOSED_CLASS:
                return "name"
    if base in CLOSED_CLASS:
        return CLOSED_CLASS[base]
    if base in IRREGULAR_VERBS:
        return "verb"
    for w in (low, base):
        cls = lexicon.lookup(w)
        if cls:
            return cls
    return _morph_class(base, lexicon) or (inferred or {}).get(base, "other")


def story_names(words: Sequence[Word]) -> set[str]:
    """Capitalised words that occur somewhere in the story *not* at a sentence start (without a possessive)."""
    out = set()
    for w in words:
        if w.text[:1].isupper() and not w.sentence_initial and w.text[0].isalpha():
            base = w.text[: len(_strip_clitic(_norm(w.text)))]
            if _norm(base) not in CLOSED_CLASS:
                out.add(base)
    return out


_SUBJECTS = frozenset("i you he she it we they".split())
_DEGREE = frozenset("very so too really more most".split())
_COPULA = frozenset("am is are was were be been being feel feels felt look looks looked seem seems seemed".split())


class LexiconTagger:
    """Word classes from the bundled lexicon + hand-listed closed classes + capitalisation (offline, default).

    :meth:`fit` optionally learns classes of words the lexicon lacks (the BLiMP vocabulary has no "day", "ball",
    "park", …) from their contexts in a set of stories, by type: evidence for *noun* is a preceding determiner,
    possessive or number ("the park", "one day") or determiner + adjective, unless another open-class word follows
    (then it is evidence for *adjective*: "a sunny day"); for *verb* a preceding subject pronoun,
    name, "to" or auxiliary ("he went", "to share", "can jump"); for *adjective* a preceding degree adverb or a
    copula followed by punctuation/"and" ("very shiny", "was loud."). A word gets the class with at least
    ``min_count`` pieces of evidence and at least half of its occurrences' evidence; otherwise it stays "other"."""

    def __init__(self, lexicon: Lexicon | None = None):
        self.lexicon = lexicon or load_lexicon()
        self.inferred: dict[str, str] = {}
        self.name = "lexicon (BLiMP vocabulary, hand-listed closed classes, capitalisation for names)"

    def _classes(self, words: Sequence[Word], inferred: dict[str, str] | None) -> list[str]:
        names = story_names(words)
        return [word_class(w.text, self.lexicon, w.sentence_initial, names, inferred) for w in words]

    def fit(self, texts: Iterable[str], min_count: int = 2) -> "LexiconTagger":
        evidence: dict[str, Counter] = defaultdict(Counter)
        seen: Counter = Counter()
        for text in texts:
            words = split_words(text)
            cls = self._classes(words, None)
            low = [_norm(w.text) for w in words]
            for k, (w, c) in enumerate(zip(words, cls)):
                if c != "other" or not w.text.isalpha():
                    continue
                seen[low[k]] += 1
                p = cls[k - 1] if k else None
                pw = low[k - 1] if k else ""
                nxt = cls[k + 1] if k + 1 < len(cls) else "punctuation"
                if p in ("determiner", "number") or (p == "adjective" and k > 1 and cls[k - 2] == "determiner"):
                    # "the park ." → noun; "a sunny day" (another open-class word follows) → adjective
                    before_noun = nxt in ("noun", "other") and words[k + 1].text.isalpha()
                    evidence[low[k]]["adjective" if before_noun else "noun"] += 1
                elif pw in _SUBJECTS or p in ("name", "auxiliary") or pw == "to":
                    evidence[low[k]]["verb"] += 1
                elif pw in _DEGREE or (pw in _COPULA and (nxt == "punctuation" or low[k + 1:k + 2] == ["and"])):
                    evidence[low[k]]["adjective"] += 1
        self.inferred = {}
        for word, ev in evidence.items():
            best, n = ev.most_common(1)[0]
            if n >= min_count and n >= 0.5 * sum(ev.values()):
                self.inferred[word] = best
        self.name = (f"lexicon (BLiMP vocabulary, hand-listed closed classes, capitalisation for names; "
                     f"{len(self.inferred)} more words classed from their contexts)")
        return self

    def tag(self, text: str, words: Sequence[Word]) -> list[str]:
        return self._classes(words, self.inferred)


_UPOS = {"NOUN": "noun", "PROPN": "name", "VERB": "verb", "AUX": "auxiliary", "ADJ": "adjective", "ADV": "adverb",
         "DET": "determiner", "PRON": "pronoun", "ADP": "preposition", "CCONJ": "conjunction",
         "SCONJ": "conjunction", "PUNCT": "punctuation", "NUM": "number", "PART": "other", "INTJ": "other",
         "SYM": "punctuation", "X": "other", "SPACE": "punctuation"}


class SpacyTagger:
    """Contextual classes from a spaCy pipeline (Universal POS → :data:`CLASSES`); used only when installed."""

    def __init__(self, nlp, name: str = "spaCy"):
        self.nlp = nlp
        self.name = name

    def fit(self, texts: Iterable[str]) -> "SpacyTagger":
        return self  # contextual already

    def tag(self, text: str, words: Sequence[Word]) -> list[str]:
        doc = self.nlp(text)
        starts = np.array([t.idx for t in doc], dtype=np.int64)
        out = []
        for w in words:
            if not w.text[0].isalnum():
                out.append("punctuation")
                continue
            k = int(np.searchsorted(starts, w.start, side="right")) - 1
            pos = doc[k].pos_ if 0 <= k < len(doc) else "X"
            out.append(_UPOS.get(pos, "other"))
        return out


def installed_spacy_model() -> str | None:
    """The name of an installed spaCy English pipeline (``en_core_web_*``), or None."""
    try:
        import spacy  # noqa: F401
        from spacy.util import get_installed_models
    except ImportError:
        return None
    models = sorted(m for m in get_installed_models() if m.startswith("en_"))
    return models[0] if models else None


def make_tagger(kind: str = "auto", lexicon: Lexicon | None = None):
    """``"lexicon"``, ``"spacy"`` (fails if no English spaCy model is installed) or ``"auto"`` (spaCy when present)."""
    if kind not in ("auto", "lexicon", "spacy"):
        raise ValueError(f"pos tagger must be 'auto', 'lexicon' or 'spacy', not {kind!r}")
    model = installed_spacy_model() if kind != "lexicon" else None
    if kind == "spacy" and model is None:
        raise RuntimeError("pos_tagger='spacy' needs spaCy with an English model (e.g. en_core_web_sm) installed")
    if model is not None:
        import spacy

        return SpacyTagger(spacy.load(model, exclude=["ner", "parser", "lemmatizer"]), name=f"spaCy {model}")
    return LexiconTagger(lexicon)


def attention_class(cls: str) -> str:
    """Fold a fine class into the attention-analysis classes (:data:`ATTENTION_CLASSES`)."""
    return cls if cls in ATTENTION_CLASSES else "other"
