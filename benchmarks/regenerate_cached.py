"""Generate a cached completions file of a finished run again with the current code and count identical rows.

    .venv/bin/python benchmarks/regenerate_cached.py FILE MODEL DECODING [--runs runs/cpu] [--seed 42] [--batch 128]
    # e.g. tiny-500k-nucleus-1 tiny-500k nucleus-1 --seed 42   (notebook 03's D_gen run)

FILE is a ``<runs>/generations/<FILE>.jsonl`` written by ``helpers.generation.completions.cached_completions``,
MODEL the decoder that wrote it and DECODING its name (``greedy``, ``nucleus-1``, ...); seed, batch and
``--max-new`` must be the ones the notebook used (notebook 03: seed 42, batch 128, 256 tokens). Prompts are taken
from the file, in its order, so the batches are the same. Prints how many completions are identical, the time, and
where the first few differing ones part from the cached text. The cache itself is not touched.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from helpers.core import config
from helpers.data.tokenizers import load_tokenizer
from helpers.generation import completions as G, decoding as D
from helpers.models.registry import load_saved


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("model")
    ap.add_argument("decoding")
    ap.add_argument("--runs", default="runs/cpu")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--max-new", type=int, default=256)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    config.set_threads(a.threads or None)
    runs = Path(a.runs) if Path(a.runs).is_absolute() else config.repo_root() / a.runs
    path = runs / "generations" / f"{a.file}.jsonl"
    if not path.is_file():
        raise SystemExit(f"no cached completions at {path}")
    decoding = D.decoding_from_name(a.decoding, a.top_p, 1.0)
    if decoding.k != 1:
        raise SystemExit("only files of one completion per prompt (greedy, nucleus-1) are compared here")
    rows = [json.loads(line) for line in path.open()]
    prompts = [G.Prompt(r["story_id"], r["prompt"], "", 0.0, r["prompt_words"], 0) for r in rows]
    model_dir = G.decoding_model_dir(runs / "decoders" / a.model / "best", decoding)
    model, tok = load_saved(model_dir).eval(), load_tokenizer(model_dir)
    t0 = time.perf_counter()
    texts = G.complete_prompts(model, tok, prompts, decoding, a.max_new, a.batch, a.seed)
    seconds = time.perf_counter() - t0
    differ = [(i, t[0], r["completion"]) for i, (t, r) in enumerate(zip(texts, rows)) if t[0] != r["completion"]]
    print(f"{a.file} by {model_dir}: {len(rows) - len(differ)} of {len(rows)} completions identical ({seconds:.1f} s)")
    for i, new, old in differ[:5]:
        at = next((j for j in range(min(len(new), len(old))) if new[j] != old[j]), min(len(new), len(old)))
        print(f"  row {i}: parts at character {at} of {len(old)}: cached {old[max(0, at - 30):at + 30]!r} / "
              f"now {new[max(0, at - 30):at + 30]!r}")


if __name__ == "__main__":
    main()
