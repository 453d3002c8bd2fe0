"""Memorisation against the training set (``docs/methods.md#memorisation``): each completion's highest ROUGE-2
against any training story (:func:`max_rouge2_train`, a shortlist from :class:`~helpers.diversity.ngram_index.NGramIndex`),
and the template check — proper names of the corpus (:func:`corpus_names`) masked (:func:`mask_names`) so that a
story retold with its characters renamed is still found as a copy (:func:`template_matches`); notebook 03's table
of all of them, per model and prompt split: :func:`memorisation_rows`."""
from __future__ import annotations

import os
import re
from typing import Iterable, Sequence

import numpy as np

from helpers.core.hardware import available_memory
from helpers.core.parallel import resolve_workers, run_jobs
from helpers.data.corpus_files import CorpusRows
from helpers.diversity.ngram_index import NGramIndex
from helpers.diversity.rouge import max_pairwise_rouge2, rouge2_pairs, rouge_n_matrix


def max_rouge2_train(
    completions: Sequence[str],
    index: NGramIndex,
    *,
    shortlist: int = 20,
    n: int = 2,
    score: str = "fmeasure",
    use_stemmer: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """For each completion, its highest ROUGE-n against any training story of ``index`` and that story's id (-1 when
    the completion shares no n-gram of the index's order with any story, score 0).

    Scoring every (completion, story) pair is quadratic; the stories scored are a **shortlist**: the ``shortlist``
    stories sharing the most distinct n-grams with each completion (:meth:`NGramIndex.closest`), pooled over all
    completions (every completion is scored against the union of the shortlists: one sparse matrix product). A story
    outside every shortlist shares fewer of the completion's n-grams than the shortlisted ones, so the maximum is a
    lower bound that is exact unless the best story ranks below ``shortlist`` on n-gram overlap."""
    if shortlist < 1:
        raise ValueError(f"shortlist must be >= 1; got {shortlist}")
    cand = sorted({m.story_id for c in completions for m in index.closest(c, shortlist)})
    return _best_rouge(completions, cand, index.stories, n=n, score=score, use_stemmer=use_stemmer)


def _best_rouge(completions: Sequence[str], cand: Sequence[int], stories: Sequence[str], **rouge) -> tuple[np.ndarray, np.ndarray]:
    """Each completion's highest ROUGE against the candidate stories ``cand`` (ids into ``stories``) and its id."""
    best = np.zeros(len(completions))
    best_id = np.full(len(completions), -1, dtype=np.int64)
    if len(cand) and len(completions):
        m = rouge_n_matrix(list(completions), [stories[j] for j in cand], **rouge)
        arg = m.argmax(axis=1)
        best = m[np.arange(len(completions)), arg]
        best_id = np.where(best > 0, np.asarray(cand, dtype=np.int64)[arg], -1)
    return best, best_id


_CAP = re.compile(r"[A-Z][a-z]+")
_SENT_END = re.compile(r"[.!?\"”:]\s*$")
NAME = "Xname"  # a placeholder no story uses (the index lower-cases it)


def corpus_names(texts: Iterable[str], min_count: int = 1) -> set[str]:
    """Words used as proper names in ``texts``: capitalised words seen at least ``min_count`` times in the middle of a
    sentence (not after ``.!?:`` or an opening quote) and never lower-cased. "Lily", "Tom", "Max" qualify; "Once" or
    "The" (sentence starts) and "I" do not."""
    cap: dict[str, int] = {}
    lower: set[str] = set()
    for t in texts:
        words = t.split()
        for j, w in enumerate(words):
            core = w.strip(".,!?;:\"'“”‘’()")
            if not core:
                continue
            if core.islower():
                lower.add(core)
            elif _CAP.fullmatch(core) and j > 0 and not _SENT_END.search(words[j - 1]) and not w[0] in "\"“‘'":
                cap[core] = cap.get(core, 0) + 1
    return {w for w, c in cap.items() if c >= min_count and w.lower() not in lower}


def mask_names(text: str, names: set[str] | frozenset[str]) -> str:
    """``text`` with every occurrence of a word of ``names`` (whole word, any position) replaced by :data:`NAME`, so that
    two stories that differ only by their characters' names become identical."""
    if not names:
        return text
    return re.sub(r"\b[A-Z][a-z]+\b", lambda m: NAME if m.group(0) in names else m.group(0), text)


def template_matches(
    completions: Sequence[str],
    stories: Sequence[str],
    *,
    names: set[str] | None = None,
    n: int = 3,
    min_words: int = 20,
    index: NGramIndex | None = None,
    masked_index: NGramIndex | None = None,
    plain_runs: Sequence[int] | None = None,
) -> list[dict]:
    """The template check of memorisation: a completion that retells a training story with the names swapped is a
    copy that :meth:`NGramIndex.longest_shared_run` misses, because every name breaks the run. Names (``names``, by
    default :func:`corpus_names` of stories and completions) are masked in both, and the longest shared run is
    measured again. Per completion: ``run`` (words shared, names kept), ``masked_run`` (names masked), ``story_id``
    (of the masked match) and ``template`` (True when the masked run reaches ``min_words`` and the plain one does
    not: a copy hidden only by names). Pass ``index`` (an :class:`NGramIndex` of the *unmasked* stories) and
    ``masked_index`` (one of the stories after :func:`mask_names` with the same ``names``) to reuse them, and
    ``plain_runs`` (the completions' longest shared runs with the unmasked stories) when they are known already."""
    if names is None:
        names = corpus_names([*stories, *completions])
    if masked_index is None:
        masked_index = NGramIndex([mask_names(s, names) for s in stories], n=n)
    if plain_runs is None:
        plain_index = index if index is not None else NGramIndex(list(stories), n=n)
        plain_runs = [plain_index.longest_shared_run(c).length for c in completions]
    out = []
    for c, plain in zip(completions, plain_runs):
        masked = masked_index.longest_shared_run(mask_names(c, names))
        out.append({"run": int(plain), "masked_run": masked.length, "story_id": masked.story_id,
                    "template": masked.length >= min_words > plain})
    return out


SHARD_WORDS = 20_000_000  # training words per pair of indexes held at once by memorisation_rows (~3.6 GB measured)
#: a worker's peak bytes per training word of its shard: the two indexes (~154 bytes a word) plus the shard's stories
#: and the worker's own copies (~3.6 GB measured at 20M words, benchmarks/memorisation_memory.py)
WORKER_BYTES_PER_WORD = 180


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity where the system says, else all)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def memory_workers(requested: int, shard_words: Sequence[int], budget: int | None,
                   bytes_per_word: int = WORKER_BYTES_PER_WORD) -> tuple[int, str]:
    """How many shards to search side by side within ``budget`` bytes: ``requested`` (already resolved to a number),
    lowered until that many of the largest shards fit (each worker holds one shard's indexes), at least 1. Returns
    the number and a sentence saying why (the budget, a shard's estimated bytes, and a warning when even one shard
    does not fit: lower ``shard_words`` then). ``budget`` None: no limit known, ``requested`` stands."""
    if requested < 1:
        raise ValueError(f"requested workers must be >= 1; got {requested}")
    if not shard_words:
        return 1, "no shards"
    need = sorted((int(w) * bytes_per_word for w in shard_words), reverse=True)
    gb = lambda b: f"{b / 1e9:.1f} GB"  # noqa: E731 (a local formatter)
    if budget is None:
        return requested, f"{requested} worker(s); memory not known, the largest shard needs ~{gb(need[0])}"
    n = requested
    while n > 1 and sum(need[:n]) > budget:
        n -= 1
    line = (f"{n} worker(s) of the {requested} asked: {len(need)} shards, the largest ~{gb(need[0])} each, within a "
            f"memory budget of {gb(budget)}")
    if need[0] > budget:
        line += f"; even one shard may not fit: lower shard_words (now ~{max(shard_words):,} words at most)"
    return n, line


def _shards(texts: Sequence[str], shard_words: int, sizes: list[int] | None = None) -> list[tuple[int, int]]:
    """``(start, stop)`` ranges of ``texts`` holding at most ``shard_words`` words each (whitespace words; a story
    longer than that is a shard of its own): a story never straddles two shards. ``sizes``: a list the shards' word
    counts are appended to (one pass over ``texts``, which may be read from disk)."""
    out, start, words = [], 0, 0
    sizes = [] if sizes is None else sizes
    for i, t in enumerate(texts):
        w = t.count(" ") + 1
        if words and words + w > shard_words:
            out.append((start, i))
            sizes.append(words)
            start, words = i, 0
        words += w
    if len(texts):
        sizes.append(words)
    return out + [(start, len(texts))] if len(texts) else out


def shard_matches(texts: Sequence[str], start: int, names: set[str], comps: dict[str, list[str]],
                  masked_comps: dict[str, list[str]], n: int, shortlist: int) -> dict[str, tuple]:
    """One shard's part of :func:`memorisation_rows`: its two indexes (order ``n``, plain and with ``names``
    masked) built over ``texts`` (the stories from number ``start`` on), and per split, for each completion, the
    longest run shared with a story of the shard, the same with names masked, and the ``shortlist`` closest stories
    as ``(-overlap, story number, score)``. A module-level function, so that shards can run in worker processes."""
    texts = list(texts)  # one shard's stories, read once (from disk when they are CorpusRows)
    index = NGramIndex(texts, n=n)
    masked_index = NGramIndex([mask_names(t, names) for t in texts], n=n)
    return {split: ([index.longest_shared_run(c).length for c in cs],
                    [masked_index.longest_shared_run(m).length for m in masked_comps[split]],
                    [[(-m.overlap, start + m.story_id, m.score) for m in index.closest(c, shortlist)] for c in cs])
            for split, cs in comps.items()}


def memorisation_rows(model: str, train_texts: Sequence[str], splits, *, n: int = 3, shortlist: int = 20,
                      min_words: int = 20, shard_words: int = SHARD_WORDS, workers: int | str = 1,
                      memory_budget: int | str | None = "auto", log=print,
                      cores: int | None = None) -> tuple[list[dict], list[dict]]:
    """Notebook 03's memorisation measures of one model's greedy completions. ``splits``: prompt split name ->
    (completions, the real endings of their prompts). Against the ``train_texts`` (one :class:`NGramIndex` of order
    ``n``, and one with the corpus' names masked) each completion gets its ROUGE-2 against the real ending, its
    highest ROUGE-2 against the other completions and against any training story (:func:`max_rouge2_train`,
    ``shortlist``), its longest run of words shared with a training story, with names masked too
    (:func:`template_matches`), and its n-gram overlap with the closest story. Returns one summary row per split
    (means, maxima, the median shared run, exact copies of ``min_words`` words or more and template copies) and the
    per-completion rows.

    **Memory.** The two indexes take ~154 bytes per training word together (measured at 10M words,
    ``benchmarks/memorisation_memory.py``), so they are built over at most ``shard_words`` words of stories at a time
    (a story never straddles two shards) and dropped before the next shard: the paper profile's 440M-word budget
    would otherwise need ~63 GB. Every measure is exact under sharding
    (each is a maximum, or a top-k by shared n-grams with ties to the lower story id, over single stories), so the
    rows are the same for any ``shard_words`` (tested); the cpu profile's budgets fit in one shard. With several
    shards, ``workers`` processes (a number, or ``"auto"``: one per CPU thread, but one where a GPU is present;
    :func:`helpers.core.parallel.run_jobs`) build and search shards side by side, each holding one shard's indexes:
    memory grows with the workers, the rows do not change. ``memory_budget`` (bytes, or ``"auto"``: 80 % of the memory
    available now, :func:`helpers.core.hardware.available_memory`; None: no limit) caps the workers so that the
    shards searched side by side fit (:func:`memory_workers`), and ``log`` says how many run and why. The workers
    never outnumber the CPU cores this process may use (``cores``; default all of them): more would hold more shards
    in memory without searching any faster.
    ``train_texts`` as :class:`helpers.data.corpus_files.CorpusRows` (notebook 03) are read from disk: each shard
    reads its own stories when it is searched, so no whole budget is held (the paper's tiny-440M: ~5 GB as rows)."""
    if shard_words < 1:
        raise ValueError(f"shard_words must be >= 1; got {shard_words}")
    names = corpus_names(train_texts)
    comps = {split: list(c) for split, (c, _) in splits.items()}
    masked_comps = {split: [mask_names(c, names) for c in cs] for split, cs in comps.items()}  # once, not per shard
    runs = {split: np.zeros(len(c), dtype=np.int64) for split, c in comps.items()}
    masked_runs = {split: np.zeros(len(c), dtype=np.int64) for split, c in comps.items()}
    near: dict[str, list[list[tuple[int, int, float]]]] = {split: [[] for _ in c] for split, c in comps.items()}
    lazy = isinstance(train_texts, CorpusRows)  # read from disk: each job (process) reads its own shard when it runs
    shard_sizes: list[int] = []
    jobs = {f"shard {k + 1} (stories {start:,}-{stop - 1:,})": dict(
        texts=train_texts[start:stop] if lazy else list(train_texts[start:stop]), start=start, names=names, comps=comps,
        masked_comps=masked_comps, n=n, shortlist=shortlist)
        for k, (start, stop) in enumerate(_shards(train_texts, shard_words, shard_sizes))}
    if len(jobs) > 1:
        if memory_budget == "auto":
            avail = available_memory()
            memory_budget = None if avail is None else int(0.8 * avail)
        asked, cores = resolve_workers(workers, len(jobs)), cores or usable_cores()
        workers, why = memory_workers(min(asked, cores), shard_sizes,  # more processes than cores: memory, no speed
                                      None if memory_budget is None else int(memory_budget))
        log(f"memorisation of {model}: {why}" + (f" ({asked} asked: at most one per CPU core, {cores})" if asked > cores else ""))
    found = run_jobs(shard_matches, jobs, workers, desc=f"memorisation shards of {model}", log=log) \
        if len(jobs) > 1 else {name: shard_matches(**kw) for name, kw in jobs.items()}
    for shard in found.values():  # maxima and a pooled shortlist: the order of the shards does not matter
        for split, (plain, masked, closest) in shard.items():
            np.maximum(runs[split], plain, out=runs[split])
            np.maximum(masked_runs[split], masked, out=masked_runs[split])
            for i, c in enumerate(closest):
                near[split][i] += c
    summary, per_completion = [], []
    for split, (_, endings) in splits.items():
        cs = comps[split]
        r2 = rouge2_pairs(cs, list(endings))
        maxr2 = max_pairwise_rouge2(cs)
        top = [sorted(found)[:shortlist] for found in near[split]]  # the global shortlist: most shared n-grams first
        r2_train, _ = _best_rouge(cs, sorted({j for t in top for _, j, _ in t}), train_texts, n=2, score="fmeasure",
                                  use_stemmer=True)
        plain, masked = runs[split], masked_runs[split]
        for i in range(len(cs)):
            per_completion.append({"model": model, "prompts": split, "rouge2_vs_ending": r2[i], "max_rouge2_others": maxr2[i],
                                   "max_rouge2_train": r2_train[i], "masked_shared_run": int(masked[i]),
                                   "longest_shared_run": int(plain[i]),
                                   "closest_story_overlap": top[i][0][2] if top[i] else 0.0})
        summary.append({"model": model, "prompts": split, "completions": len(cs),
                        "mean ROUGE-2 vs ending": float(np.mean(r2)), "max ROUGE-2 vs ending": float(np.max(r2)),
                        "mean max ROUGE-2 among generations": float(np.mean(maxr2)),
                        "mean max ROUGE-2 vs training stories": float(np.mean(r2_train)),
                        "max ROUGE-2 vs training stories": float(np.max(r2_train)),
                        "median longest shared run (words)": float(np.median(plain)),
                        f"exact copies (≥ {min_words} words)": int(np.sum(plain >= min_words)),
                        "template copies (names swapped)": int(np.sum((masked >= min_words) & (plain < min_words)))})
    return summary, per_completion
