"""Word folding ("lemma-light", ``docs/methods.md#themed-suites``): one key for the forms of a word (``dog``/``dogs``,
``play``/``played``/``playing``, ``swim``/``swam``, ``Jane``/``Jane's``), typographic quotes made ASCII.  The themed
suites' answer keys (:mod:`helpers.story_eval.suites`) and the Instruct required words (:mod:`helpers.story_eval.instruct`) match on
folded tokens.
"""
from __future__ import annotations

import re
from typing import Sequence

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


def _find(toks: Sequence[str], seq: Sequence[str], start: int) -> int:
    n = len(seq)
    for i in range(start, len(toks) - n + 1):
        if tuple(toks[i : i + n]) == tuple(seq):
            return i
    return -1
