"""Text normalisation: the encoder's normalisation of its input text and the project's one sentence splitter.

:func:`normalise_text` (ftfy, Moses punctuation normalisation, punctuation spacing, abbreviations) and
:func:`encoder_segments` (one sentence a line, ``[PAR]`` closing paragraphs) prepare the encoder's text
(``docs/methods.md#normalisation``); :func:`split_sentences` is used by every stage that cuts text into sentences.
"""
from __future__ import annotations

import re
from typing import Iterable

import ftfy
from sacremoses import MosesPunctNormalizer


_ABBREV = {r"\bMr\s*\.": "Mr.", r"\bMrs\s*\.": "Mrs.", r"\bDr\s*\.": "Dr.", r"\bSt\s*\.": "St."}
_SENT_END = re.compile(r"(?<=[.!?…])([\"”’']*)\s+(?=[\"“‘']*[A-Z0-9])")


def normalise_text(text: str) -> str:
    """Encoder-side normalisation (docs/methods.md#normalisation): ftfy, Moses punctuation normalisation, punctuation spacing
    (``word , word`` → ``word, word``, as in the tokenised BabyLM sources), abbreviation fixes."""
    text = ftfy.fix_text(text)
    text = re.sub(r"^[AB]:\t", "", text, flags=re.M)  # Switchboard speaker tags
    text = MosesPunctNormalizer(lang="en", pre_replace_unicode_punct=True).normalize(text)
    text = re.sub(r" +([,.;:!?%)\]}])", r"\1", text)
    text = re.sub(r"([(\[{]) +", r"\1", text)
    text = re.sub(r" +n't\b", "n't", text)
    text = re.sub(r" +'(s|re|ve|ll|d|m)\b", r"'\1", text)
    text = re.sub(r"`` *| *''", '"', text)
    for pat, rep in _ABBREV.items():
        text = re.sub(pat, rep, text)
    return re.sub(r"[ \t]+", " ", text).strip()


def split_sentences(text: str) -> list[str]:
    """The project's one sentence splitter (encoder segments, instruction summaries, contrastive shuffles, the
    judge's story endings): a sentence ends at a line break, or at ``.``/``!``/``?``/``…`` (closing quotes kept
    with it) followed by a space and a word that starts with a capital or a digit (opening quotes allowed), so
    ``"Stop!" said Mom.`` stays one sentence; ``Mr.``, ``Mrs.``, ``Ms.``, ``Dr.``, ``St.``, ``Jr.``, ``Sr.``,
    ``vs.`` and ``etc.`` never end one; a last sentence without a stop is kept."""
    protected = re.sub(r"\b(Mr|Mrs|Ms|Dr|St|Jr|Sr|vs|etc)\.", r"\1<DOT>", text)
    out = []
    for line in protected.splitlines():
        for s in _SENT_END.sub(lambda m: m.group(1) + "\n", line).split("\n"):
            s = s.replace("<DOT>", ".").strip()
            if s:
                out.append(s)
    return out


def encoder_segments(texts: Iterable[str], par: str = "[PAR]") -> list[str]:
    """Normalised, one-sentence-per-line text per document; paragraphs (and documents) are closed by ``[PAR]``,
    which is how TinyStories' ``<|endoftext|>`` is rendered for the encoder."""
    segs = []
    for t in texts:
        paras = [p for p in re.split(r"\n\s*\n", t) if p.strip()]
        body = f"\n{par}\n".join("\n".join(split_sentences(normalise_text(p))) for p in paras)
        segs.append(body + f"\n{par}")
    return segs
