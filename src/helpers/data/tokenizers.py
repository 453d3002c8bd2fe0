"""Byte-level BPE tokenizers trained per corpus (``docs/methods.md#tokenizers``).

* NFD normalisation, digits split one by one, byte-level pre-tokenisation (no prefix space).
* Decoder variant: specials ``[UNK] <|endoftext|>``; bos = eos = pad = ``<|endoftext|>``.
* Encoder variant: specials ``[UNK] [CLS] [SEP] [PAD] [MASK] [PAR]``; single sentences are
  wrapped as ``[CLS] x [SEP]``.
* Exported as :class:`transformers.PreTrainedTokenizerFast` (``save_pretrained``/``from_pretrained``).

Round trip: ``decode(encode(x)) == unicodedata.normalize("NFD", x)`` for any text without
special-token strings (identical to ``x`` for ASCII and already-decomposed text).

Scale: :func:`train_tokenizer` streams its texts into the trainer (which keeps only counts of
pre-tokenised words), :func:`encoding_check` counts tokens and round-trip failures batch by batch (optionally on a bounded first
sample), so neither holds a corpus or its token ids in memory, and :func:`iter_story_ids` yields a corpus's ids story
by story for packing into blocks (only the packed ids are kept).
"""
from __future__ import annotations

import unicodedata
from pathlib import Path
from itertools import islice
from typing import Iterable, Iterator, Literal

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from helpers.core.config import require_output
from helpers.data.corpora import EOT  # noqa: F401  (re-exported: the decoders' end-of-text token)

DECODER_SPECIALS = ["[UNK]", EOT]
ENCODER_SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "[PAR]"]

Kind = Literal["decoder", "encoder"]


def default_vocab_size(corpus_words: int, paper_rule: bool = True) -> int:
    """The paper's code uses 6,144 for corpora of at most 10M words and 16,384 above."""
    return 6_144 if paper_rule and corpus_words <= 10_000_000 else 16_384


def _base_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.NFD()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


def train_tokenizer(
    texts: Iterable[str],
    kind: Kind = "decoder",
    vocab_size: int = 16_384,
    min_frequency: int = 2,
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on ``texts`` and wrap it for transformers. ``texts`` may be any iterable
    (e.g. :func:`helpers.data.corpus_files.iter_texts` of a corpus file): it is streamed, never listed."""
    if kind not in ("decoder", "encoder"):
        raise ValueError(f"kind must be 'decoder' or 'encoder', not {kind!r}")
    specials = DECODER_SPECIALS if kind == "decoder" else ENCODER_SPECIALS
    tok = _base_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    nonblank = 0

    def counted():
        nonlocal nonblank
        for t in texts:
            nonblank += bool(t.strip())
            yield t

    tok.train_from_iterator(counted(), trainer=trainer, length=len(texts) if hasattr(texts, "__len__") else None)
    if not nonblank:
        raise ValueError("cannot train a tokenizer on an empty corpus")
    if kind == "encoder":
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
        )
        return PreTrainedTokenizerFast(
            tokenizer_object=tok,
            unk_token="[UNK]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            pad_token="[PAD]",
            mask_token="[MASK]",
            additional_special_tokens=["[PAR]"],
            clean_up_tokenization_spaces=False,
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        bos_token=EOT,
        eos_token=EOT,
        pad_token=EOT,
        clean_up_tokenization_spaces=False,
    )


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:

    path = Path(path)
    require_output(path, "tokenizer")
    if not (path / "tokenizer.json").is_file():
        raise FileNotFoundError(f"no tokenizer at {path} (expected {path / 'tokenizer.json'})")
    return PreTrainedTokenizerFast.from_pretrained(str(path))


def round_trip_ok(tokenizer: PreTrainedTokenizerFast, text: str) -> bool:
    """True when decoding the encoding of ``text`` gives back ``text`` (up to NFD)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False) == unicodedata.normalize(
        "NFD", text
    )


def encoding_check(tokenizer: PreTrainedTokenizerFast, texts: Iterable[str], batch_size: int = 1000,
                   max_words: int | None = None, total_words: int | None = None) -> dict[str, int]:
    """``{"texts", "words", "tokens", "round-trip failures"}`` over ``texts`` (any iterable, streamed ``batch_size``
    at a time): tokens without special tokens (as :func:`encode_stories` with ``add_eot=False``) and the number of
    texts for which :func:`round_trip_ok` is False, encoded and decoded in batches (the same ids and strings as one by
    one). With ``max_words`` only the first texts are checked, up to and including the one that reaches that many
    (whitespace) words: a bounded sample for corpora where encoding everything costs more than the check is worth
    (the paper profile's 440M-word budget: ~20 minutes on two cores (2.9 s per million words, AMD EPYC Zen 3)).
    With ``total_words`` as well (the corpus's words, from the ledger), the sample is spread over the whole corpus
    instead: every k-th text, k = ⌈total_words / max_words⌉ (``"every"`` in the result), so nested budgets are not all
    checked on the same first stories and a larger budget's later stories are read too."""
    if max_words is not None and max_words <= 0:
        raise ValueError(f"max_words must be a positive number of words or None (all), not {max_words!r}")
    every = 1
    if max_words is not None and total_words is not None and total_words > max_words:
        every = -(-int(total_words) // int(max_words))
        texts, max_words = islice(texts, 0, None, every), None  # the stride bounds the sample
    it = iter(texts)
    n = words = tokens = failures = 0
    while (max_words is None or words < max_words) and (batch := list(islice(it, batch_size))):
        if max_words is not None:
            cut = len(batch)
            for i, t in enumerate(batch):
                words += len(t.split())
                if words >= max_words:
                    cut = i + 1
                    break
            batch = batch[:cut]
        else:
            words += sum(len(t.split()) for t in batch)
        ids = tokenizer(batch, add_special_tokens=False)["input_ids"]
        back = tokenizer.batch_decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        n += len(batch)
        tokens += sum(map(len, ids))
        failures += sum(b != unicodedata.normalize("NFD", t) for b, t in zip(back, batch))
    return {"texts": n, "words": words, "tokens": tokens, "round-trip failures": failures, "every": every}


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``12th``, ``13th``, ``21st``, ``1,002nd``."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"


def tokenizer_row(name: str, tokenizer: PreTrainedTokenizerFast, check: dict[str, int], corpus_words: int) -> dict:
    """Notebook 01's row for one decoder tokenizer from its :func:`encoding_check`: the vocabulary, tokens per word of
    the checked stories, the corpus's tokens (counted when every story was checked; otherwise estimated as tokens per
    word × the corpus's words, and said so in ``tokens counted``), round-trip failures and what was checked."""
    per_word = check["tokens"] / check["words"] if check["words"] else float("nan")
    whole = check["words"] >= corpus_words
    if whole:
        checked = "all stories"
    elif check.get("every", 1) > 1:
        checked = (f"every {ordinal(check['every'])} story over the whole budget ({check['texts']:,} stories, "
                   f"{check['words']:,} words)")
    else:
        checked = f"first {check['words']:,} words ({check['texts']:,} stories)"
    return {"corpus": name, "vocab": len(tokenizer),
            "tokens": check["tokens"] if whole else int(round(per_word * corpus_words)),
            "tokens counted": "all" if whole else "estimated: tokens/word of the checked stories × the budget's words",
            "tokens/word": per_word, "round-trip failures": check["round-trip failures"], "checked": checked}


def end_of_text_id(tokenizer, fallback: bool = False) -> int:
    """The id of ``<|endoftext|>`` (the decoders' story separator, start and pad token). A tokenizer without it
    raises ValueError, unless ``fallback``: then its BOS (else EOS) token, for code that only needs a start token."""
    eot = tokenizer.convert_tokens_to_ids(EOT)
    if eot is None or eot == tokenizer.unk_token_id:
        other = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        if not fallback or other is None:
            raise ValueError("tokenizer has no <|endoftext|> token (is it a decoder tokenizer?)")
        return int(other)
    return int(eot)


def iter_story_ids(tokenizer: PreTrainedTokenizerFast, stories: Iterable[str], add_eot: bool = True,
                   batch_size: int = 2048) -> Iterator[list[int]]:
    """Token ids per story, as :func:`encode_stories`, tokenised ``batch_size`` stories at a time and yielded one by
    one: only a batch's encodings are held, never a corpus's (a fast tokenizer's encodings keep tokens and offsets
    beside the ids, many times the ids' size). The ids do not depend on ``batch_size``: each text is tokenised on
    its own."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    eot = end_of_text_id(tokenizer) if add_eot else None
    it = iter(stories)
    while batch := list(islice(it, batch_size)):
        for ids in tokenizer(batch, add_special_tokens=False)["input_ids"]:
            yield ids + [eot] if add_eot else ids


def encode_stories(tokenizer: PreTrainedTokenizerFast, stories: Iterable[str], add_eot: bool = True) -> list[list[int]]:
    """Token ids per story (or any text: prompts too), without special tokens; with ``add_eot`` each ends with
    ``<|endoftext|>`` (decoder packing). For a corpus, :func:`iter_story_ids` streams the same ids."""
    return list(iter_story_ids(tokenizer, stories, add_eot))


def save_for_model(tokenizer: PreTrainedTokenizerFast, folder, context: int | None) -> None:
    """Save ``tokenizer`` into a model's ``folder`` with ``model_max_length`` set to the model's ``context`` (its
    position table; the trained tokenizer's default is ~1e30, "no limit"), so that truncation in other tools stops
    where the model does. The caller's tokenizer object is left as it was."""
    old = tokenizer.model_max_length
    try:
        if context:
            tokenizer.model_max_length = int(context)
        tokenizer.save_pretrained(folder)
    finally:
        tokenizer.model_max_length = old
