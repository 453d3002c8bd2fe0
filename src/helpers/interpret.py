"""Interpretability of the GPT-Neo decoders (``docs/methods.md#interpretability``; Eldan & Li 2023; Yang et al.,
McGill report, part E; Rathod et al. 2024, §5 and Figures 20–21).

**Tokens and words.** Decoder tokens are byte-level BPE pieces (a leading space is ``Ġ`` in the raw token). Every
analysis classifies a token by the *word* it belongs to: the story is split into words and punctuation marks
(:func:`split_words`), each token is mapped to the word under its first non-space character through the
tokenizer's character offsets, and the word gets one class (:data:`CLASSES`). Display labels are the decoded piece.

**Word classes.** Offline by default: the bundled BLiMP vocabulary (``data/lexicon/blimp_vocabulary.csv.gz``,
4,216 words with noun/verb/adjective features) for open-class words, with a light morphology fallback
(plural/3sg ``-s``, ``-ed``, ``-ing``, ``-ly``), and hand-listed closed classes (determiners, pronouns, prepositions,
conjunctions, auxiliaries, a few adverbs). A *name* is a capitalised word that is not sentence-initial, a word that
occurs so elsewhere in the same story, or one from a small list (plus the lexicon's proper nouns). When spaCy and an
English model are installed, ``make_tagger("auto")`` uses spaCy's contextual part-of-speech tags instead
(never required).

**Attention.** :func:`attention_maps` returns the exact eager attention weights (``output_attentions=True``).
:func:`distance_correlation` is the Pearson correlation between attention weight and token distance over the
entries a head can attend to (the causal lower triangle, and for local layers only the window): the structural
zeros above the diagonal (and outside a local window) say nothing about what the head learnt and pull the value
towards a negative number for every head. |r| > 0.5 → "positional", otherwise "semantic" (Rathod et al. 2024, §5.1).

**Neurons.** :func:`mlp_activations` records the true MLP activations (the output of the activation module, i.e.
after the pre-MLP LayerNorm, ``c_fc`` and the nonlinearity) with forward hooks. :func:`top_activations` gives
each neuron's top-k tokens and :func:`context_bounds` their ±w tokens of context within the same story.

:func:`analyse_model` runs a decoder once over held-out stories and caches the activation arrays and attention
statistics under ``runs/<profile>/interpret/<model>/`` keyed by the weights' SHA-256 and the parameters.
"""
from __future__ import annotations

import html as _html
import io
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .artifacts import atomic_path, fingerprint, read_json, run_step, sha256_file, write_json
from .config import shown_path
from .data import EOT

CACHE_VERSION = 1
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
    """The bundled lexicon, read through :func:`helpers.data.read_text` (checksum-verified, recorded)."""
    import pandas as pd

    from .data import read_text

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
        from collections import Counter, defaultdict

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


# ----------------------------------------------------------------------------- stories as tokens

@dataclass
class StoryTokens:
    """One story as model input: ``ids[0]`` is ``<|endoftext|>`` (the context a story has in training), then the
    story's tokens (truncated to ``max_tokens`` in all). ``word_of[t]`` is the index in ``words`` of the word token
    ``t`` belongs to (-1 for the start token and for line breaks)."""

    text: str
    ids: list[int]
    offsets: list[tuple[int, int]]
    words: list[Word]
    word_of: list[int]
    word_classes: list[str] = field(default_factory=list)

    def token_classes(self) -> list[str]:
        """Class per token: its word's class; "start" for the start token; line breaks count as punctuation."""
        out = ["start"]
        for t in range(1, len(self.ids)):
            k = self.word_of[t]
            out.append("punctuation" if k < 0 else self.word_classes[k] if self.word_classes else "other")
        return out


def encode_story(tokenizer, text: str, max_tokens: int, tagger=None) -> StoryTokens:
    """Tokenise ``text`` after a start token (``<|endoftext|>``), map tokens to words, classify words."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    start = tokenizer.convert_tokens_to_ids(EOT)
    if start is None or start == tokenizer.unk_token_id:
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    keep = max(0, max_tokens - 1)
    ids = [int(start)] + list(enc["input_ids"][:keep])
    offsets = [(0, 0)] + [tuple(o) for o in enc["offset_mapping"][:keep]]
    words = split_words(text)
    starts = np.array([w.start for w in words], dtype=np.int64)
    word_of = [-1]
    for s, e in offsets[1:]:
        piece = text[s:e]
        lead = len(piece) - len(piece.lstrip())
        if lead == len(piece):  # whitespace only: a lone space belongs to the next word, a line break to none
            if "\n" in piece or not words:
                word_of.append(-1)
                continue
            c = e
            k = int(np.searchsorted(starts, c, side="left"))
            word_of.append(k if k < len(words) else -1)
            continue
        c = s + lead
        k = int(np.searchsorted(starts, c, side="right")) - 1
        word_of.append(k if k >= 0 and words[k].start <= c < words[k].end else -1)
    st = StoryTokens(text, ids, offsets, words, word_of)
    if tagger is not None:
        st.word_classes = tagger.tag(text, words)
    return st


def display_token(tokenizer, token_id: int) -> str:
    """A readable label for one token: the decoded piece; a leading space is dropped (``Ġthe`` → ``the``), a line
    break is ``↵``, a lone space ``␣`` and the start token ``<eot>``."""
    raw = tokenizer.convert_ids_to_tokens(int(token_id))
    if raw == EOT or int(token_id) in (tokenizer.all_special_ids or []):
        return "<eot>" if "endoftext" in str(raw) else str(raw)
    piece = tokenizer.decode([int(token_id)], clean_up_tokenization_spaces=False)
    if "\n" in piece:
        return "↵"
    s = piece.strip()
    return s if s else "␣"


# ----------------------------------------------------------------------------- attention

def attention_maps(model, ids) -> np.ndarray:
    """Attention weights ``[layers, heads, T, T]`` of one sequence (exact eager computation)."""
    import torch

    x = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1)
    with torch.no_grad():
        out = model(x, output_attentions=True)
    return np.stack([a[0].float().numpy() for a in out.attentions])


def layer_types(model) -> list[str]:
    return list(model.config.attention_layers)


def allowed_mask(T: int, window: int | None = None, first: int = 0) -> np.ndarray:
    """Entries ``(i, j)`` a causal head may attend to: ``j ≤ i`` (and ``i − j < window`` for a local layer), with
    ``i, j ≥ first`` (``first = 1`` leaves out the start token)."""
    i, j = np.indices((T, T))
    m = (j <= i) & (i >= first) & (j >= first)
    if window is not None:
        m &= (i - j) < window
    return m


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row of ``x`` (``[..., n]``) with ``y`` (``[n]``); NaN for a constant row."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean()
    num = (xc * yc).sum(axis=-1)
    den = np.sqrt((xc ** 2).sum(axis=-1) * (yc ** 2).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        r = num / den
    return np.where(den > 1e-12, r, np.nan)


def distance_correlation(att: np.ndarray, lower: bool = True, window: int | None = None, first: int = 0) -> np.ndarray:
    """Correlation between attention weight and token distance of ``att`` (``[..., T, T]``, rows = queries).

    ``lower=True``: over the causal lower triangle only (distance ``i − j ≥ 0``; with ``window``, only the entries a
    local layer can see); ``lower=False``: over the whole matrix with distance ``|i − j|``, as a naive computation
    on the heat map would do (the zeros above the diagonal then bias the value). ``first`` leaves out the first
    rows/columns (the start token)."""
    att = np.asarray(att)
    T = att.shape[-1]
    i, j = np.indices((T, T))
    if lower:
        m = allowed_mask(T, window, first)
        dist = (i - j)[m]
    else:
        m = (i >= first) & (j >= first)
        dist = np.abs(i - j)[m]
    return _pearson(att[..., m], dist)


def positional_label(r: float | np.ndarray, threshold: float = 0.5):
    """``"positional"`` if |r| > threshold, else ``"semantic"`` (Rathod et al. 2024, §5.1); NaN r → ``"undefined"``."""
    r_arr = np.asarray(r, dtype=float)
    out = np.where(np.isnan(r_arr), "undefined", np.where(np.abs(r_arr) > threshold, "positional", "semantic"))
    return str(out) if out.ndim == 0 else out


def reference_correlations(T: int, window: int | None = None) -> dict[str, float]:
    """r (lower triangle, start token excluded as in the analysis) of idealised heads on a story of ``T`` tokens
    after the start token: uniform attention, attention to the previous token, to the token itself, to the first
    story token. Shows what the |r| > 0.5 criterion can and cannot detect."""
    n = T + 1
    m = allowed_mask(n, window, 0)
    uni = m / m.sum(axis=1, keepdims=True)
    prev = np.eye(n, k=-1)
    prev[0, 0] = prev[1, 1] = 1.0
    selfa = np.eye(n)
    first = np.zeros((n, n))
    first[1:, 1] = 1.0
    first[0, 0] = 1.0
    pats = {"uniform": uni, "previous token": prev, "self": selfa, "first story token": first}
    return {k: float(distance_correlation(v, True, window, first=1)) for k, v in pats.items()}


MAX_OFFSET = 32


def story_attention_stats(att: np.ndarray, types: Sequence[str], window: int) -> dict[str, np.ndarray]:
    """Per-head statistics of one story's attention ``[L, H, T, T]`` (position 0 = start token, left out):

    * ``r_lower`` / ``r_full``: :func:`distance_correlation` over the allowed entries / the whole matrix;
    * ``r_uniform``: the same for uniform attention over the allowed keys (per layer; the normalisation baseline);
    * ``sink``: mean attention on the start token; ``mean_dist``: mean distance of the attention on story tokens;
    * ``offset_sum``: attention at each offset ``d = i − j`` (0…:data:`MAX_OFFSET`) summed over queries, and
      ``offset_n`` the number of queries per offset;
    * ``target``: per query ``i ≥ 2``, the story token (index from 0 = first story token) with the largest
      weight (the start token left out); -1 for the start token and the first story token (only one candidate).
    """
    L, H, T, _ = att.shape
    i, j = np.indices((T, T))
    dist = (i - j).astype(np.float64)
    r_lower = np.full((L, H), np.nan)
    r_full = np.full((L, H), np.nan)
    r_uni = np.full(L, np.nan)
    sink = att[:, :, 1:, 0].mean(axis=-1) if T > 1 else np.full((L, H), np.nan)
    mean_dist = np.full((L, H), np.nan)
    D = MAX_OFFSET + 1
    offset_sum = np.zeros((L, H, D))
    offset_n = np.zeros(D)
    target = np.full((L, H, T), -1, dtype=np.int32)
    for d in range(min(D, T - 1)):
        q = np.arange(1 + d, T)
        offset_n[d] = len(q)
        offset_sum[:, :, d] = att[:, :, q, q - d].sum(axis=-1)
    for layer in range(L):
        w = window if types[layer] == "local" else None
        a = att[layer]
        r_lower[layer] = distance_correlation(a, True, w, first=1)
        r_full[layer] = distance_correlation(a, False, None, first=1)
        m = allowed_mask(T, w, 0)
        uni = m / np.maximum(m.sum(axis=1, keepdims=True), 1)
        r_uni[layer] = float(distance_correlation(uni, True, w, first=1))
        story = allowed_mask(T, w, 1)
        a_story = np.where(story, a, 0.0)
        mass = a_story.sum(axis=-1)  # [H, T]
        with np.errstate(invalid="ignore", divide="ignore"):
            md = (a_story * dist).sum(axis=-1) / mass
        mean_dist[layer] = np.nanmean(md[:, 2:], axis=-1) if T > 2 else np.nan
        if T > 2:
            masked = np.where(story, a, -np.inf)
            t = masked.argmax(axis=-1) - 1  # story-token index
            t[:, :2] = -1
            target[layer] = t
    return {"r_lower": r_lower, "r_full": r_full, "r_uniform": r_uni, "sink": sink, "mean_dist": mean_dist,
            "offset_sum": offset_sum, "offset_n": offset_n, "target": target}


# ----------------------------------------------------------------------------- MLP activations

class MLPRecorder:
    """Forward hooks on each chosen layer's MLP activation module (``transformer.h[l].mlp.act``): the true
    activations after the pre-MLP LayerNorm, ``c_fc`` and the nonlinearity. Use as a context manager; after a
    forward, ``recorder.acts[l]`` is a ``[batch, T, intermediate]`` tensor."""

    def __init__(self, model, layers: Sequence[int] | None = None):
        self.blocks = model.transformer.h
        self.layers = list(range(len(self.blocks))) if layers is None else [int(x) for x in layers]
        bad = [x for x in self.layers if not 0 <= x < len(self.blocks)]
        if bad:
            raise ValueError(f"layers {bad} do not exist (the model has {len(self.blocks)} layers)")
        self.acts: dict[int, Any] = {}
        self._handles: list = []

    def __enter__(self):
        for layer in self.layers:
            act = self.blocks[layer].mlp.act

            def hook(_module, _inputs, output, layer=layer):
                self.acts[layer] = output.detach()

            self._handles.append(act.register_forward_hook(hook))
        return self

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()
        self._handles.clear()
        return False


def mlp_activations(model, ids, layers: Sequence[int] | None = None) -> dict[int, np.ndarray]:
    """MLP activations ``{layer: [T, intermediate]}`` of one sequence, recorded with forward hooks."""
    import torch

    x = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1)
    with MLPRecorder(model, layers) as rec, torch.no_grad():
        model(x)
    return {layer: a[0].float().numpy() for layer, a in rec.acts.items()}


def _top_columns(vals: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``vals [I, N]`` the ``k`` largest columns, best first (ties: lower column first)."""
    k = min(int(k), vals.shape[1])
    if k <= 0:
        raise ValueError("k must be positive and there must be at least one token")
    part = np.argpartition(-vals, k - 1, axis=1)[:, :k]
    kth = np.take_along_axis(vals, part, axis=1).min(axis=1)
    idx = np.empty((vals.shape[0], k), dtype=np.int64)
    for r in range(vals.shape[0]):  # everything above the k-th value, then the lowest columns equal to it
        above = np.flatnonzero(vals[r] > kth[r])
        sel = np.concatenate([above, np.flatnonzero(vals[r] == kth[r])[: k - len(above)]])
        idx[r] = sel[np.lexsort((sel, -vals[r, sel]))]
    return idx, np.take_along_axis(vals, idx, axis=1)


def top_activations(acts: np.ndarray, k: int, ids: np.ndarray | None = None, chunk: int = 256
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per neuron (column of ``acts [N, I]``) the ``k`` rows with the largest activation, best first:
    ``(rows [I, k], values [I, k])``, ties broken by the lower row.

    With ``ids`` (the token id of each row): the top-``k`` **distinct tokens**, each represented by the row of its
    strongest occurrence (so a neuron that fires on every "." lists "." once, then its next-best tokens).
    Neurons are processed ``chunk`` at a time (``acts`` may be a memory-mapped float16 array)."""
    I_ = acts.shape[1]
    if ids is not None:
        ids = np.asarray(ids)
        if len(ids) != acts.shape[0]:
            raise ValueError(f"{len(ids)} token ids for {acts.shape[0]} rows")
        order = np.argsort(ids, kind="stable")
        sid = ids[order]
        starts = np.flatnonzero(np.r_[True, sid[1:] != sid[:-1]])
        counts = np.diff(np.r_[starts, len(sid)])
        rank = (len(sid) - np.arange(len(sid))).astype(np.int64)
    rows, vals = [], []
    for c0 in range(0, I_, chunk):
        v = np.ascontiguousarray(np.asarray(acts[:, c0:c0 + chunk], dtype=np.float32).T)  # [chunk, N]
        if ids is None:
            r, x = _top_columns(v, k)
        else:
            v = v[:, order]
            gmax = np.maximum.reduceat(v, starts, axis=1)  # [chunk, U] each token's best activation
            score = np.where(v == np.repeat(gmax, counts, axis=1), rank, 0)
            first = len(sid) - np.maximum.reduceat(score, starts, axis=1)  # first best row (position in `order`)
            gsel, x = _top_columns(gmax, k)
            r = order[np.take_along_axis(first, gsel, axis=1)]
        rows.append(r)
        vals.append(x)
    return np.concatenate(rows), np.concatenate(vals)


def story_bounds(story_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of a token stream whose stories are contiguous runs of ``story_of``: the first row of its
    story and one past the last."""
    story_of = np.asarray(story_of)
    n = len(story_of)
    change = np.flatnonzero(np.diff(story_of)) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [n]])
    run = np.repeat(np.arange(len(starts)), ends - starts)
    return starts[run], ends[run]


def context_bounds(story_of: np.ndarray, n: int, width: int = 5) -> tuple[int, int]:
    """Rows ``[lo, hi)`` of the ±``width`` tokens around row ``n`` that lie in the same story (fewer at a story's
    edges; never crossing into a neighbouring story)."""
    story_of = np.asarray(story_of)
    s = story_of[n]
    lo = n
    while lo > 0 and n - lo < width and story_of[lo - 1] == s:
        lo -= 1
    hi = n + 1
    while hi < len(story_of) and hi - n <= width and story_of[hi] == s:
        hi += 1
    return lo, hi


# ----------------------------------------------------------------------------- one model over held-out stories

@dataclass
class ModelAnalysis:
    """A decoder's activations and attention statistics over held-out stories (see :func:`analyse_model`).

    The *stream* lists every story token (the start tokens left out) of every analysed story in order:
    ``ids``, ``story`` (index into ``stories``), ``pos`` (0 = first story token). ``acts[layer]`` is
    ``[N, intermediate]`` (float16, memory-mapped); ``targets[layer, head, n]`` is the stream row of the strongest
    attention target of query row ``n`` (-1 where undefined)."""

    name: str
    path: Path
    tokenizer: Any
    model: Any
    stories: list[StoryTokens]
    ids: np.ndarray
    story: np.ndarray
    pos: np.ndarray
    classes: np.ndarray
    acts: dict[int, np.ndarray]
    stats: dict[str, np.ndarray]
    targets: np.ndarray
    layer_types: list[str]
    window: int
    heads: int
    cache: Path
    tagger_name: str = ""

    @property
    def n_tokens(self) -> int:
        return int(len(self.ids))

    def labels(self, rows: Iterable[int]) -> list[str]:
        return [display_token(self.tokenizer, int(self.ids[n])) for n in rows]


def _model_files_sha(path: Path) -> dict[str, str]:
    out = {}
    for name in ("model.safetensors", "pytorch_model.bin", "config.json", "tokenizer.json"):
        f = path / name
        if f.is_file():
            out[name] = sha256_file(f)
    if not any(k in out for k in ("model.safetensors", "pytorch_model.bin")):
        raise FileNotFoundError(f"no model weights in {path}")
    return out


def analysis_fingerprint(path: Path, texts: Sequence[str], max_tokens: int, layers: Sequence[int] | None) -> str:
    return fingerprint("interpret", CACHE_VERSION, _model_files_sha(Path(path)), fingerprint(list(texts)),
                       int(max_tokens), None if layers is None else sorted(int(x) for x in layers))


def _compute(model, stories: list[StoryTokens], layers: list[int], out: Path, log: Callable[[str], None]) -> None:
    import torch

    types = layer_types(model)
    window = int(model.config.window_size)
    L, H = model.config.num_layers, model.config.num_heads
    S = len(stories)
    keys = ("r_lower", "r_full", "sink", "mean_dist")
    per_story = {k: np.full((S, L, H), np.nan) for k in keys}
    r_uniform = np.full((S, L), np.nan)
    offset_sum = np.zeros((L, H, MAX_OFFSET + 1))
    offset_n = np.zeros(MAX_OFFSET + 1)
    acts: dict[int, list[np.ndarray]] = {layer: [] for layer in layers}
    targets: list[np.ndarray] = []
    base = 0
    for s, st in enumerate(stories):
        x = torch.tensor([st.ids], dtype=torch.long)
        with MLPRecorder(model, layers) as rec, torch.no_grad():
            o = model(x, output_attentions=True)
        att = np.stack([a[0].float().numpy() for a in o.attentions])
        stats = story_attention_stats(att, types, window)
        for k in keys:
            per_story[k][s] = stats[k]
        r_uniform[s] = stats["r_uniform"]
        offset_sum += stats["offset_sum"]
        offset_n += stats["offset_n"]
        t = stats["target"][:, :, 1:]  # story rows
        targets.append(np.where(t >= 0, t + base, -1).astype(np.int32))
        for layer in layers:
            acts[layer].append(rec.acts[layer][0, 1:].numpy().astype(np.float16))
        base += len(st.ids) - 1
    with atomic_path(out) as tmp:
        tmp.mkdir()
        np.savez(tmp / "attention.npz", **per_story, r_uniform=r_uniform, offset_sum=offset_sum, offset_n=offset_n,
                 targets=np.concatenate(targets, axis=-1) if targets else np.zeros((L, H, 0), np.int32))
        for layer in layers:
            np.save(tmp / f"acts_layer{layer}.npy", np.concatenate(acts[layer]) if acts[layer] else
                    np.zeros((0, model.config.intermediate_size), np.float16))
        write_json(tmp / "info.json", {"stories": S, "tokens": base, "layers": layers, "layer_types": types,
                                       "window": window})
    log(f"  {S} stories, {base:,} tokens, {len(layers)} layers of MLP activations cached in {shown_path(out)}")


def analyse_model(path: str | Path, texts: Sequence[str], max_tokens: int, layers: Sequence[int] | None = None,
                  cache: str | Path | None = None, tagger=None, name: str | None = None,
                  log: Callable[[str], None] = print) -> ModelAnalysis:
    """Run the decoder at ``path`` over ``texts`` (each after a start token, truncated to ``max_tokens``), record
    MLP activations of ``layers`` (default all) and attention statistics, cache them in ``cache`` (a folder; by
    default ``<path>/../interpret``) keyed by the weights' SHA-256, the texts and the parameters, and return a
    :class:`ModelAnalysis` (reusing the cache when nothing changed)."""
    from .decoder import load_decoder
    from .tokenizers import load_tokenizer

    path = Path(path)
    name = name or path.parent.name
    model = load_decoder(path).eval()
    tokenizer = load_tokenizer(path)
    max_tokens = min(int(max_tokens), int(model.config.max_position_embeddings))
    n_layers = model.config.num_layers
    layers = list(range(n_layers)) if layers is None else sorted({int(x) for x in layers})
    if any(not 0 <= x < n_layers for x in layers):
        raise ValueError(f"layers {layers} out of range for {name} ({n_layers} layers)")
    tagger = tagger or LexiconTagger()
    stories = [encode_story(tokenizer, t, max_tokens, tagger) for t in texts]
    stories = [st for st in stories if len(st.ids) >= 3]
    cache = Path(cache) if cache is not None else path.parent / "interpret"
    fp = analysis_fingerprint(path, [st.text for st in stories], max_tokens, layers)
    run_step(f"interpret {name}", cache, fp, lambda: _compute(model, stories, layers, cache, log), log=log)
    info = read_json(cache / "info.json")
    if info["tokens"] != sum(len(st.ids) - 1 for st in stories):
        raise RuntimeError(f"cache {cache} does not match the stories (delete it to recompute)")
    with np.load(cache / "attention.npz") as z:
        stats = {k: z[k] for k in z.files if k != "targets"}
        targets = z["targets"]
    acts = {layer: np.load(cache / f"acts_layer{layer}.npy", mmap_mode="r") for layer in layers}
    ids = np.concatenate([np.asarray(st.ids[1:], dtype=np.int64) for st in stories])
    story = np.concatenate([np.full(len(st.ids) - 1, s, dtype=np.int32) for s, st in enumerate(stories)])
    pos = np.concatenate([np.arange(len(st.ids) - 1, dtype=np.int32) for st in stories])
    classes = np.array([c for st in stories for c in st.token_classes()[1:]], dtype=object)
    return ModelAnalysis(name, path, tokenizer, model, stories, ids, story, pos, classes, acts, stats, targets,
                         info["layer_types"], int(info["window"]), int(model.config.num_heads), cache,
                         getattr(tagger, "name", type(tagger).__name__))


# ----------------------------------------------------------------------------- tables

def head_table(a: ModelAnalysis, threshold: float = 0.5) -> "pd.DataFrame":  # noqa: F821
    """One row per (layer, head): r over the lower triangle (mean ± sd over stories), r over the full matrix,
    r of uniform attention, the label, mean attention distance, attention on the start token, and the offset
    (0…32) that gets the most attention with its mean weight."""
    import pandas as pd

    s = a.stats
    prof = s["offset_sum"] / np.maximum(s["offset_n"], 1)
    rows = []
    L, H = s["r_lower"].shape[1:]
    for layer in range(L):
        for h in range(H):
            r = float(np.nanmean(s["r_lower"][:, layer, h]))
            d = int(np.argmax(prof[layer, h]))
            rows.append({"model": a.name, "layer": layer, "layer type": a.layer_types[layer], "head": h,
                         "r (lower triangle)": r, "r sd": float(np.nanstd(s["r_lower"][:, layer, h])),
                         "r (full matrix)": float(np.nanmean(s["r_full"][:, layer, h])),
                         "r (uniform attention)": float(np.nanmean(s["r_uniform"][:, layer])),
                         "label": positional_label(r, threshold),
                         "mean distance": float(np.nanmean(s["mean_dist"][:, layer, h])),
                         "start-token weight": float(np.nanmean(s["sink"][:, layer, h])),
                         "top offset": d, "weight at top offset": float(prof[layer, h, d])})
    return pd.DataFrame(rows)


def target_class_table(a: ModelAnalysis, heads: "pd.DataFrame") -> "pd.DataFrame":  # noqa: F821
    """Per head, the share of its strongest targets (over all queries) in each class of :data:`ATTENTION_CLASSES`
    (joined to ``heads`` from :func:`head_table`), plus ``n targets``."""
    import pandas as pd

    cls = np.array([attention_class(c) for c in a.classes], dtype=object)
    rows = []
    for r in heads.itertuples(index=False):
        t = a.targets[r.layer, r.head]
        t = t[t >= 0]
        c = cls[t]
        row = {"model": a.name, "layer": r.layer, "head": r.head, "n targets": len(t)}
        row.update({k: float(np.mean(c == k)) if len(c) else np.nan for k in ATTENTION_CLASSES})
        rows.append(row)
    return heads.merge(pd.DataFrame(rows), on=["model", "layer", "head"])


def class_base_rates(classes: Sequence[str], kinds: Sequence[str] = ATTENTION_CLASSES,
                     fold: Callable[[str], str] | None = attention_class) -> dict[str, float]:
    """Share of each class in ``kinds`` among ``classes`` (folded with ``fold``; ``None``: as they are)."""
    c = np.array([fold(x) if fold else x for x in classes], dtype=object)
    return {k: float(np.mean(c == k)) if len(c) else np.nan for k in kinds}


def group_target_classes(targets: "pd.DataFrame", base: dict[str, dict[str, float]]) -> "pd.DataFrame":  # noqa: F821
    """Mean class shares of strongest targets per model and head group, for three groupings: the paper's label
    (positional/semantic), GPT-Neo's layer type (global/local) and attention span (heads whose mean distance is
    below / at or above the model's median: short-range / long-range); with each model's base rate (class shares
    among all story tokens) as a reference row."""
    import pandas as pd

    t = targets.copy()
    med = t.groupby("model")["mean distance"].transform("median")
    t["span"] = np.where(t["mean distance"] < med, "short-range", "long-range")
    rows = []
    for model, g in t.groupby("model", sort=False):
        rows.append({"model": model, "grouping": "reference", "group": "all tokens (base rate)", "heads": np.nan,
                     **base[model]})
        for grouping, col in [("paper label", "label"), ("layer type", "layer type"), ("span", "span")]:
            for value, gg in g.groupby(col, sort=True):
                rows.append({"model": model, "grouping": grouping, "group": value, "heads": len(gg),
                             **{k: float(gg[k].mean()) for k in ATTENTION_CLASSES}})
    return pd.DataFrame(rows)


def paper_observation(grouped: "pd.DataFrame", grouping: str = "span", near: str = "short-range",
                      far: str = "long-range", min_diff: float = 0.02) -> "pd.DataFrame":  # noqa: F821
    """The TinyStories observation, checked per model on :func:`group_target_classes` output: distance-based
    (``near``) heads should target articles/determiners and punctuation more than ``far`` heads, which should target
    names and nouns (the story's characters and topics) more. Shares are of strongest targets; base = all tokens.
    Each half of the observation counts as seen when the difference is at least ``min_diff`` (2 points)."""
    import pandas as pd

    rows = []
    grouped = grouped.rename(columns={c: c.replace(" ", "_") for c in grouped.columns})
    for model, g in grouped.groupby("model", sort=False):
        pick = {r.group: r for r in g[g.grouping.isin([grouping, "reference"])].itertuples(index=False)}
        if near not in pick or far not in pick:
            continue
        get = lambda grp, cols: float(sum(getattr(pick[grp], c) for c in cols))
        base = next(r for k, r in pick.items() if k.startswith("all tokens"))
        fn, ct = ["determiner", "punctuation"], ["name", "noun"]
        row = {"model": model, "grouping": grouping,
               f"{near}: determiner+punctuation": get(near, fn), f"{far}: determiner+punctuation": get(far, fn),
               "base: determiner+punctuation": float(sum(getattr(base, c) for c in fn)),
               f"{near}: name+noun": get(near, ct), f"{far}: name+noun": get(far, ct),
               "base: name+noun": float(sum(getattr(base, c) for c in ct))}
        row["function words nearer"] = row[f"{near}: determiner+punctuation"] - row[f"{far}: determiner+punctuation"] >= min_diff
        row["names/nouns farther"] = row[f"{far}: name+noun"] - row[f"{near}: name+noun"] >= min_diff
        rows.append(row)
    return pd.DataFrame(rows)


def neuron_class_shares(a: ModelAnalysis, layer: int, k: int, distinct: bool = False
                        ) -> tuple["pd.DataFrame", np.ndarray, np.ndarray]:  # noqa: F821
    """Part-of-speech breakdown of every neuron of ``layer``: the share of its top-``k`` tokens (``distinct``: top-k
    distinct tokens, see :func:`top_activations`) in each class of :data:`CLASSES`, its dominant class and share.
    Returns ``(table, top rows [I, k], top values [I, k])``."""
    import pandas as pd

    idx, vals = top_activations(a.acts[layer], k, a.ids if distinct else None)
    code = {c: i for i, c in enumerate(CLASSES)}
    cls = np.array([code.get(c, code["other"]) for c in a.classes], dtype=np.int64)[idx]  # [I, k]
    shares = np.stack([(cls == i).mean(axis=1) for i in range(len(CLASSES))], axis=1)
    dom = shares.argmax(axis=1)
    df = pd.DataFrame(shares, columns=CLASSES)
    df.insert(0, "neuron", np.arange(len(df)))
    df.insert(0, "layer", layer)
    df.insert(0, "top tokens", "distinct" if distinct else "all")
    df.insert(0, "model", a.name)
    df["dominant class"] = [CLASSES[i] for i in dom]
    df["dominant share"] = shares.max(axis=1)
    df["max activation"] = vals[:, 0]
    return df, idx, vals


def chance_specialists(base_rates: dict[str, float], k: int, threshold: float) -> dict[str, float]:
    """Probability that a neuron is a specialist of each class if its top-``k`` tokens were ``k`` independent draws
    from the base rates: P(Binomial(k, p_c) ≥ ⌈threshold · k⌉)."""
    from scipy.stats import binom

    need = math.ceil(threshold * k - 1e-9)
    return {c: float(binom.sf(need - 1, k, p)) for c, p in base_rates.items()}


def token_base_rates(a: ModelAnalysis) -> dict[str, dict[str, float]]:
    """Base rates of :data:`CLASSES` for both top-token modes: ``"all"``, over token occurrences; ``"distinct"``,
    over distinct tokens (each token id counted once, with its most frequent class)."""
    import pandas as pd

    occ = class_base_rates(a.classes, CLASSES, fold=None)
    per_id = pd.DataFrame({"id": a.ids, "cls": a.classes}).groupby("id")["cls"].agg(lambda c: c.value_counts().index[0])
    return {"all": occ, "distinct": class_base_rates(list(per_id), CLASSES, fold=None)}


def specialist_table(shares: "pd.DataFrame", threshold: float, base_rates: dict[str, dict[str, dict[str, float]]],
                     k: int) -> "pd.DataFrame":  # noqa: F821
    """Per model, top-token mode and layer: neurons whose top-k tokens are at least ``threshold`` in one class,
    counted by class (:data:`SPECIALIST_CLASSES`, any other class as "other class"), the total, the fraction of
    neurons, and the number expected if top tokens were independent draws at the base rates
    (``base_rates[model][mode]``, see :func:`token_base_rates` and :func:`chance_specialists`)."""
    import pandas as pd

    rows = []
    for (model, mode, layer), g in shares.groupby(["model", "top tokens", "layer"], sort=False):
        spec = g[g["dominant share"] >= threshold]
        row = {"model": model, "top tokens": mode, "layer": layer, "neurons": len(g)}
        for c in SPECIALIST_CLASSES:
            row[c] = int((spec["dominant class"] == c).sum())
        row["other class"] = int((~spec["dominant class"].isin(SPECIALIST_CLASSES)).sum())
        row["specialists"] = len(spec)
        row["share of neurons"] = len(spec) / max(len(g), 1)
        p = chance_specialists(base_rates[model][mode], k, threshold)
        row["expected by chance"] = len(g) * sum(p.values())
        rows.append(row)
    return pd.DataFrame(rows)


def neuron_examples(a: ModelAnalysis, layer: int, neuron: int, idx: np.ndarray, vals: np.ndarray,
                    width: int = 5) -> list[dict]:
    """The top tokens of one neuron with ±``width`` tokens of context (same story): one dict per example with
    ``rank``, ``activation``, ``token`` (display), ``word``, ``class``, ``left``/``right`` (decoded context),
    ``row`` and the context rows' activations (for highlighting)."""
    out = []
    acts = a.acts[layer]
    for rank, (n, v) in enumerate(zip(idx[neuron], vals[neuron]), 1):
        n = int(n)
        lo, hi = context_bounds(a.story, n, width)
        st = a.stories[int(a.story[n])]
        wk = st.word_of[int(a.pos[n]) + 1]
        dec = lambda rows: a.tokenizer.decode([int(a.ids[r]) for r in rows], clean_up_tokenization_spaces=False)
        out.append({"rank": rank, "activation": float(v), "token": display_token(a.tokenizer, int(a.ids[n])),
                    "word": st.words[wk].text if wk >= 0 else "", "class": a.classes[n],
                    "left": dec(range(lo, n)), "piece": dec([n]), "right": dec(range(n + 1, hi)), "row": n,
                    "context rows": list(range(lo, hi)),
                    "context acts": [float(acts[r, neuron]) for r in range(lo, hi)]})
    return out


_HTML_STYLE = ("<style>.sbn{font-family:sans-serif;font-size:13px;margin-bottom:18px}"
               ".sbn table{border-collapse:collapse}.sbn td,.sbn th{border:1px solid #ddd;padding:3px 6px;"
               "text-align:left;vertical-align:top}.sbn th{background:#f3f3f3}.sbn .ctx{font-family:monospace;"
               "white-space:pre-wrap}.sbn .top{outline:2px solid #c00;font-weight:bold}.sbn h4{margin:6px 0}</style>")


def neuron_html(a: ModelAnalysis, layer: int, neuron: int, examples: list[dict], shares: dict[str, float] | None = None,
                title: str | None = None, width: int = 5) -> str:
    """One neuron's top tokens as in Rathod et al. 2024, Figures 20–21: each row shows the activation, the token and its
    context, every context token shaded by this neuron's activation on it (relative to the neuron's maximum) and
    the top token outlined."""
    vmax = max([e["activation"] for e in examples] + [1e-9])
    head = title or f"{a.name} · layer {layer} · neuron {neuron}"
    if shares:
        top = sorted(((v, c) for c, v in shares.items() if v > 0), reverse=True)[:4]
        head += " — top tokens: " + ", ".join(f"{c} {v:.0%}" for v, c in top)
    rows = []
    for e in examples:
        spans = []
        for r, v in zip(e["context rows"], e["context acts"]):
            piece = a.tokenizer.decode([int(a.ids[r])], clean_up_tokenization_spaces=False).replace("\n", "↵ ")
            alpha = max(0.0, min(1.0, v / vmax))
            cls = ' class="top"' if r == e["row"] else ""
            spans.append(f'<span{cls} style="background:rgba(255,140,0,{alpha:.2f})" title="{v:.3f}">'
                         f"{_html.escape(piece)}</span>")
        token = e["token"] if not e["word"] or e["word"] == e["token"] else f"{e['token']} ({e['word']})"
        rows.append(f"<tr><td>{e['rank']}</td><td>{e['activation']:.3f}</td><td>{_html.escape(token)}</td>"
                    f"<td>{_html.escape(e['class'])}</td><td class=\"ctx\">{''.join(spans)}</td></tr>")
    return (f'<div class="sbn"><h4>{_html.escape(head)}</h4><table><thead><tr><th>#</th><th>activation</th>'
            f"<th>token</th><th>class</th><th>context (±{width} tokens, shaded by activation)</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def html_page(parts: Sequence[str], title: str = "") -> str:
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{_html.escape(title)}</title>{_HTML_STYLE}"
            f"</head><body>{'<h3>' + _html.escape(title) + '</h3>' if title else ''}{''.join(parts)}</body></html>")


def showcase_neurons(shares: "pd.DataFrame", first: int, last_layer: int) -> list[tuple[int, int, str]]:  # noqa: F821
    """Neurons to show for one model: the first ``first`` neurons of ``last_layer`` (an arbitrary choice, since
    neurons are permutation-invariant, as in TinyStories), the neuron with the largest activation, and the most
    specialised neuron of each class in :data:`SPECIALIST_CLASSES`. ``(layer, neuron, why)``, no duplicates."""
    picks: list[tuple[int, int, str]] = []
    seen = set()

    def add(layer, neuron, why):
        if (layer, neuron) not in seen:
            seen.add((layer, neuron))
            picks.append((int(layer), int(neuron), why))

    shares = shares.reset_index(drop=True)
    for n in range(first):
        add(last_layer, n, f"neuron {n} of the last layer")
    r = shares.loc[shares["max activation"].idxmax()]
    add(r["layer"], r["neuron"], "largest activation of all neurons")
    for c in SPECIALIST_CLASSES:
        g = shares[shares["dominant class"] == c]
        if len(g):
            r = g.sort_values(["dominant share", "max activation"], ascending=False).iloc[0]
            add(r["layer"], r["neuron"], f"most {c}-specialised ({r['dominant share']:.0%} of top tokens)")
    return picks


# ----------------------------------------------------------------------------- figures

def plot_attention_grid(att: np.ndarray, labels: Sequence[str], types: Sequence[str], title: str = "", n: int | None = None):
    """Heat maps of every layer (rows) × head (columns) of one story's attention ``[L, H, T, T]``, the first ``n``
    tokens, with token labels (queries down, keys across). Colour: attention weight, square-root scale."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import PowerNorm

    L, H, T, _ = att.shape
    n = min(n or T, T)
    labels = list(labels)[:n]
    size = max(2.6, min(4.0, 0.11 * n))
    fig, axes = plt.subplots(L, H, figsize=(size * H + 1, size * L + 0.6), squeeze=False, layout="constrained")
    fs = max(3.0, min(7.0, 220 / max(n, 1)))
    im = None
    for layer in range(L):
        for h in range(H):
            ax = axes[layer, h]
            im = ax.imshow(att[layer, h, :n, :n], cmap="viridis", norm=PowerNorm(0.5, vmin=0, vmax=1),
                           interpolation="nearest")
            ax.set_xticks(range(n))
            ax.set_yticks(range(n))
            ax.set_xticklabels(labels if layer == L - 1 else [], rotation=90, fontsize=fs)
            ax.set_yticklabels(labels if h == 0 else [], fontsize=fs)
            ax.tick_params(length=0)
            ax.grid(False)
            ax.set_title(f"layer {layer} ({types[layer]}) · head {h}", fontsize=8)
    fig.colorbar(im, ax=axes, shrink=0.6, label="attention weight (√ scale)")
    if title:
        fig.suptitle(title)
    return fig


def plot_correlation_grid(heads: "pd.DataFrame", threshold: float = 0.5):  # noqa: F821
    """r (lower triangle) per layer × head, one panel per model; cells with |r| > threshold are marked P."""
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(heads["model"]))
    n_heads, n_layers = heads["head"].nunique(), heads["layer"].nunique()
    fig, axes = plt.subplots(1, len(models), figsize=(len(models) * (2.2 + 0.75 * n_heads) + 1.2, 2.0 + 0.6 * n_layers),
                             squeeze=False, layout="constrained")
    im = None
    for ax, m in zip(axes[0], models):
        g = heads[heads["model"] == m]
        piv = g.pivot(index="layer", columns="head", values="r (lower triangle)")
        im = ax.imshow(piv.values, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
        for (li, hi), v in np.ndenumerate(piv.values):
            ax.text(hi, li, f"{v:+.2f}" + ("\nP" if abs(v) > threshold else ""), ha="center", va="center", fontsize=8)
        types = g.drop_duplicates("layer").set_index("layer")["layer type"]
        ax.set_yticks(range(len(piv.index)))
        ax.set_yticklabels([f"{li} ({types[li]})" for li in piv.index])
        ax.set_xticks(range(len(piv.columns)))
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(m)
        ax.grid(False)
    fig.colorbar(im, ax=axes, shrink=0.9, label="r (lower triangle)")
    fig.suptitle(f"Correlation of attention weight with distance per head (P: |r| > {threshold} → positional)")
    return fig
