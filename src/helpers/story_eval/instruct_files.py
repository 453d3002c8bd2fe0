"""The real TinyStoriesInstruct files (Eldan & Li 2023), for the paper profile's instruction-following decoder
(``docs/methods.md#instruct``); the cpu profile, which has no such file, derives Instruct documents from the stories
(:func:`helpers.story_eval.instruct.build_instruct_document`). Notebook 05b plans its instruct run
(:func:`plan_instruct_run`), draws its held-out prompts (:func:`heldout_prompts`) and completes them
(:func:`instruct_completions`) here, whichever the documents' source."""
from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from helpers.data.budgets import shuffled_order, take_prefix
from helpers.data.corpora import count_words, load_tinystories
from helpers.data.ledger import Ledger
from helpers.generation.completions import cached_completions
from helpers.story_eval.instruct import InstructDocument, field_counts, heldout_instruct_prompts, parse_instruct, plan_instruct
from helpers.story_eval.suites import fit_prompts, story_prompts
from helpers.training.recipes import encode_blocks


@dataclass
class InstructCorpus:
    """Documents of a real TinyStoriesInstruct file, parsed (``helpers.story_eval.instruct.InstructDocument``)."""

    documents: list
    n_malformed: int = 0  # documents without a ``Story:`` line or with a line that is not a field
    n_dropped_truncated: int = 0
    n_repaired: int = 0
    files: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.documents)

    @property
    def texts(self) -> list[str]:
        return [d.text for d in self.documents]


def load_tinystories_instruct(source: str | Path, limit: int | None = None) -> InstructCorpus:
    """The real TinyStoriesInstruct files (Eldan & Li 2023; ``TinyStoriesInstruct-{train,valid}.txt`` of
    ``roneneldan/TinyStoriesInstruct``): documents separated by ``<|endoftext|>``, each a few ``Features:`` /
    ``Words:`` / ``Summary:`` / ``Random sentence:`` lines and then ``Story:`` and the story. Every document is
    parsed with :func:`helpers.story_eval.instruct.parse_instruct` and kept as an ``InstructDocument`` (fields in their
    order, the story after ``Story:``, mojibake repaired); documents that do not parse are counted and skipped, a
    byte-truncated last document is dropped. ``limit`` keeps the first ``limit`` documents. (The cpu profile has no
    such file and derives its Instruct documents from the stories, ``instruct.build_instruct_document``.)"""
    corpus = load_tinystories(source)  # <|endoftext|>-separated, repaired, truncated tail dropped
    docs, bad = [], 0
    for text in corpus.stories:
        try:
            parsed = parse_instruct(text)
        except ValueError:
            bad += 1
            continue
        if parsed.story is None or not parsed.story.strip():
            bad += 1
            continue
        docs.append(InstructDocument(list(parsed.fields), parsed.story.strip()))
        if limit is not None and len(docs) >= limit:
            break
    return InstructCorpus(docs, bad, corpus.n_dropped_truncated, corpus.n_repaired, corpus.files)


def instruct_budget(documents: Sequence, budget: int, seed: int) -> list:
    """Whole Instruct documents, after one seeded shuffle, until adding the next would exceed ``budget`` words
    (instructions and story both count: the instructions are training data too); as :mod:`helpers.data.budgets`."""
    counts = [count_words(d.text) for d in documents]
    return [documents[i] for i in take_prefix(counts, shuffled_order(len(documents), seed), int(budget))]


def plan_instruct_from_files(run_dir: str | Path, budget: str, p02: dict, train_file: str | Path,
                             valid_file: str | Path, seed: int, words: int | None = None, **plan_kwargs):
    """The instruct decoder of ``budget`` trained on the **real** TinyStoriesInstruct documents: notebook 02's plain
    run for that budget (tokenizer, spec, config and the differences found; :func:`helpers.story_eval.instruct.plan_instruct`)
    with its training data replaced by documents of ``train_file`` (``words``: a seeded word budget, by default the
    plain decoder's; :func:`instruct_budget`) and its validation data by documents of ``valid_file``."""
    run = plan_instruct(run_dir, budget, p02, seed, 1, **plan_kwargs)
    if words is None:
        words = Ledger(Path(run_dir) / "data" / "ledger.json")[budget].words
    docs = instruct_budget(load_tinystories_instruct(train_file).documents, words, seed)
    vdocs = load_tinystories_instruct(valid_file).documents
    train_data = encode_blocks(run.tokenizer, [d.text for d in docs], run.spec.context, seed=run.cfg.seed)
    valid_data = encode_blocks(run.tokenizer, [d.text for d in vdocs], run.spec.context, max_blocks=p02.get("valid_blocks"))
    return replace(run, train_data=train_data, valid_data=valid_data, documents=len(docs), valid_documents=len(vdocs),
                   field_counts=field_counts(docs), examples=[d.text for d in docs[:3]])


def instruct_file_prompts(valid_file: str | Path, n: int, seed: int):
    """``n`` prompts of the real Instruct validation file that carry a ``Words:`` line (seeded choice), as
    :class:`~helpers.generation.completions.Prompt` objects (``story_id`` = ``valid-<i>``, ending = the story), to score the
    share of required words as with the derived prompts (:func:`helpers.story_eval.instruct.heldout_instruct_prompts`)."""
    docs = [(i, d) for i, d in enumerate(load_tinystories_instruct(valid_file).documents) if d.words]
    random.Random(seed).shuffle(docs)
    docs = docs[:n]
    return story_prompts([d.prompt for _, d in docs], [f"valid-{i}" for i, _ in docs], [d.story for _, d in docs])


def plan_instruct_run(run_dir: str | Path, budget: str, p02: dict, seed: int, heldout_prompts: int,
                      train_file: str | Path | None = None, valid_file: str | Path | None = None, **plan_kwargs):
    """Notebook 05b's instruct decoder: on the real TinyStoriesInstruct files when ``train_file`` is given
    (:func:`plan_instruct_from_files`; ``valid_file`` is then required), else on Instruct documents derived from the
    budget's stories (:func:`helpers.story_eval.instruct.plan_instruct`, the cpu profile's fallback)."""
    if train_file is None:
        return plan_instruct(run_dir, budget, p02, seed, heldout_prompts, **plan_kwargs)
    if valid_file is None:
        raise ValueError("instruct_train_file is set but instruct_valid_file is not: the real files need both")
    return plan_instruct_from_files(run_dir, budget, p02, train_file, valid_file, seed, **plan_kwargs)


def heldout_prompts(run_dir: str | Path, n: int, seed: int, valid_file: str | Path | None = None, **derive_kwargs):
    """Held-out Instruct prompts: ``n`` of the real validation file when ``valid_file`` is given
    (:func:`instruct_file_prompts`), else derived from held-out stories
    (:func:`helpers.story_eval.instruct.heldout_instruct_prompts`)."""
    if valid_file is None:
        return heldout_instruct_prompts(run_dir, n, seed, **derive_kwargs)
    return instruct_file_prompts(valid_file, n, seed)


def instruct_completions(gen_dir: str | Path, prompt_sets: Mapping[str, Sequence[Any]], models: Mapping[str, str | Path],
                         instruct_name: str, budget: str, tokenizer, context: int, decoding, min_new_tokens: int, *,
                         max_new_tokens: int, batch_size: int, seed: int):
    """Notebook 05b's instruction-following stories: each prompt set (name -> prompts) cut to the prompts that leave
    ``min_new_tokens`` of a ``context``-token model (:func:`helpers.story_eval.suites.fit_prompts`, with the instruct
    decoder's ``tokenizer``), completed with ``decoding`` by every model of ``models`` (label -> saved decoder: the
    instruct decoder ``instruct_name`` and the plain one), cached as
    ``<gen_dir>/instruct-<first word of the set>-<instruct|plain>-<budget>.jsonl``. Returns the completion rows, each
    with its set's name in ``prompts``, and a table of the prompts available, used and left out per set."""
    rows, fit = [], []
    for set_name, prompts in prompt_sets.items():
        kept, dropped = fit_prompts(prompts, tokenizer, context, min_new_tokens)
        fit.append({"prompts": set_name, "available": len(prompts), "used": len(kept), "left out (too long)": len(dropped)})
        for label, folder in models.items():
            tag = "instruct" if label == instruct_name else "plain"
            done = cached_completions(Path(gen_dir) / f"instruct-{set_name.split()[0]}-{tag}-{budget}.jsonl", folder, kept,
                                      decoding, model_name=label, max_new_tokens=max_new_tokens, batch_size=batch_size,
                                      seed=seed) if kept else []
            rows += [{**r, "prompts": set_name} for r in done]
    return rows, pd.DataFrame(fit)
