"""Notebooks 02 and 03's corpus-sized steps at a chosen size: the peak memory of each, in this process.

    python benchmarks/scale_02_03.py --step pack --words 4e6 --json          # 02: a budget tokenised into blocks
    python benchmarks/scale_02_03.py --step memorisation --words 4e6 --json  # 03: memorisation against the budget

* ``pack``: notebook 02's first run of a budget (``recipes.plan_decoders``): the budget file streamed through
  ``tokenizers.iter_story_ids`` into ``blocks.cached_blocks`` (a memory-mapped ``.npy`` written as the ids come),
  with a byte-level BPE of 2,048 types trained on the first 100k words. Nothing of the budget should stay in memory.
* ``memorisation``: notebook 03's memorisation of one model (``memorisation.memorisation_rows``) against the budget's
  stories read as the notebook reads them (``corpus_files.CorpusRows``: from disk, one byte offset per story held),
  with shards of ``--shard-words`` words (default 1M): the n-gram indexes (~154 bytes per word) are held for one
  shard at a time, so memory does not grow with the budget. ``--workers N`` searches N shards side by side in worker
  processes, as notebook 03 does (``memorisation_workers``, capped by the memory available and the cores).

At the paper's size, as ``docs/running.md`` quotes it (the budget file is kept in ``--dir`` and reused by the second)::

    python benchmarks/scale_02_03.py --step pack --words 440e6 --vocab 16384 --dir /big/s440
    python benchmarks/scale_02_03.py --step memorisation --words 440e6 --shard-words 20e6 --workers 2 --dir /big/s440

Prints the step's seconds, the process's peak RSS (VmHWM), the peak over it and its workers (all resident and
anonymous, sampled from ``/proc``) and the corpus size; ``tests/test_scale_02_03.py`` runs it at
two sizes and bounds the growth. The stories are ``scale_01``'s generator's (distinct, growing vocabulary).
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import scale_01  # noqa: E402  (the story generator and the VmHWM reader)
from helpers.core.hardware import cpu_info  # noqa: E402
from helpers.core.process_memory import TreePeak  # noqa: E402


def budget_file(folder: Path, words: int, seed: int = 0) -> Path:
    """A notebook-01-style budget file (one JSON row per story, ``text``) of ~``words`` words (reused when there)."""
    out = folder / f"tiny-budget-{words}-{seed}.jsonl"
    if out.exists():
        return out
    raw = folder / "stories.txt"
    scale_01.write_stories(raw, words, seed)
    tmp = out.with_suffix(".tmp")
    with open(raw, encoding="utf-8") as f, open(tmp, "w", encoding="utf-8") as g:
        story = []
        for line in f:
            if line.strip() == "<|endoftext|>":
                g.write(json.dumps({"text": "\n".join(story)}) + "\n")
                story = []
            else:
                story.append(line.rstrip("\n"))
    raw.unlink()
    tmp.replace(out)
    return out


def pack(corpus: Path, folder: Path, vocab: int = 2048) -> dict:
    from helpers.data.blocks import cached_blocks
    from helpers.data.corpus_files import iter_texts
    from helpers.data.tokenizers import iter_story_ids, train_tokenizer

    def head():
        n = 0
        for t in iter_texts(corpus, verify=False):
            n += len(t.split())
            yield t
            if n > 100_000:
                return

    tok = train_tokenizer(head(), "decoder", vocab_size=vocab)
    (folder / "blocks.npy").unlink(missing_ok=True)  # packed anew each time: this is the step measured
    blocks = cached_blocks(folder / "blocks.npy", "fp", lambda: iter_story_ids(tok, iter_texts(corpus, verify=False)),
                           "blocks", log=lambda *_: None, block=128)
    return {"rows": int(blocks.shape[0])}


def memorise(corpus: Path, shard_words: int, workers: int = 1) -> dict:
    from helpers.data.corpus_files import CorpusRows
    from helpers.diversity import memorisation

    log = (lambda *a: print(*a, file=sys.stderr, flush=True)) if workers > 1 else (lambda *_: None)
    texts = CorpusRows(corpus).texts()  # as notebook 03 reads the budget: from disk, one offset per story held
    rng = random.Random(0)
    picks = [texts[rng.randrange(len(texts))] for _ in range(4)]
    comps = [" ".join(t.split()[len(t.split()) // 2:]) for t in picks]  # "completions" that copy training text
    ends = [" ".join(t.split()[-20:]) for t in picks]
    summary, _ = memorisation.memorisation_rows("m", texts, {"train": (comps, ends)}, shard_words=shard_words,
                                                workers=workers, log=log)
    return {"stories": len(texts), "exact copies": summary[0][next(k for k in summary[0] if k.startswith("exact copies"))]}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--step", choices=["pack", "memorisation"], required=True)
    ap.add_argument("--words", type=float, default=4e6)
    ap.add_argument("--shard-words", type=float, default=1e6, help="memorisation: words per shard of the indexes")
    ap.add_argument("--workers", type=int, default=1, help="memorisation: shards searched side by side (processes)")
    ap.add_argument("--vocab", type=int, default=2048, help="pack: the BPE's types (the paper profile's: 16384)")
    ap.add_argument("--dir", type=Path, default=None, help="kept, with the budget file (reused by a later run)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    folder = a.dir or Path(tempfile.mkdtemp(prefix="scale0203-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        corpus = budget_file(folder, int(a.words))
        before = scale_01.vm_hwm_bytes()
        t = time.perf_counter()
        with TreePeak() as tree:  # the worker processes, which VmHWM cannot see
            extra = (pack(corpus, folder, a.vocab) if a.step == "pack"
                     else memorise(corpus, int(a.shard_words), a.workers))
        mine = scale_01.vm_hwm_bytes()
        out = {"step": a.step, "words": int(a.words), "corpus_bytes": corpus.stat().st_size,
               "seconds": round(time.perf_counter() - t, 1), "peak_before_mib": round(before / 2**20),
               "peak_rss_mib": round(mine / 2**20), "workers_peak_mib": tree.peak_mib,
               "workers_peak_anon_mib": tree.peak_anon_mib, "cpu": cpu_info()["label"], **extra}
    finally:
        if not a.dir:
            shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(out) if a.json else
          f"{a.step}: {out['words']:,} words ({out['corpus_bytes'] / 2**20:.0f} MiB), {out['seconds']} s, "
          f"peak RSS {out['peak_rss_mib']:,} MiB ({out['peak_before_mib']:,} MiB before the step); worker processes "
          f"at most {out['workers_peak_mib']} MiB together ({out['workers_peak_anon_mib']} anonymous); {out['cpu']}")
    return out


if __name__ == "__main__":
    main()
