"""Peak memory of turning a corpus into training blocks: one tokenizer call over every story (the code before
``iter_story_ids``) vs the streamed path that notebooks 02, 02b and 04 use now (``training.recipes.encode_blocks``).

    python benchmarks/pack_memory.py                  # ~10M words: the bundled stories repeated
    python benchmarks/pack_memory.py --words 2e6      # a quicker one

Each path runs in its own fresh process on the same texts (the bundled TinyStories prefix, repeated with a counter
so that no two stories are the same) and the same decoder tokenizer (trained here on the first 2,000 stories,
4,096 entries: the cpu profile's size). Printed per path: the peak RSS (VmHWM) above the process's RSS once the
texts are loaded, the seconds, and a check that both paths give the same blocks (their SHA-256: a finished run's
fingerprint does not move). Memory is the number to quote: seconds depend on how busy the cores are.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts this checkout's src on sys.path when helpers is not installed)


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status (Linux only)")


def _texts(words: float) -> list[str]:
    from helpers.data import corpora

    base = [s for s in corpora.load_tinystories("tinystories/v1_train_prefix_2MiB.txt.gz").stories]
    per = sum(len(s.split()) for s in base) / len(base)
    n = int(words / per)
    return [f"{base[i % len(base)]} ({i})" for i in range(n)]


def _child(path: str, tokenizer_dir: str, words: float, block: int) -> None:
    """One path, in this process: print a JSON line with its peak RSS above the loaded texts, seconds, digest."""
    from helpers.data.blocks import PackedBlocks, pack_blocks
    from helpers.data.tokenizers import end_of_text_id, load_tokenizer
    from helpers.training.recipes import blocks_digest, encode_blocks

    tok = load_tokenizer(tokenizer_dir)
    texts = _texts(words)
    base = _rss_kib("VmRSS")
    t = time.perf_counter()
    if path == "one call":
        eot = end_of_text_id(tok)
        ids = tok(texts, add_special_tokens=False)["input_ids"]
        data = PackedBlocks(pack_blocks([x + [eot] for x in ids], block))
    else:
        data = encode_blocks(tok, texts, block)
    seconds = time.perf_counter() - t
    print(json.dumps({"path": path, "peak above texts (MiB)": (_rss_kib("VmHWM") - base) / 1024,
                      "RSS before (MiB)": base / 1024, "seconds": seconds, "tokens": int(data.tokens),
                      "words": sum(len(x.split()) for x in texts), "digest": blocks_digest(data)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--words", type=float, default=10e6)
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--child", nargs=2, metavar=("PATH", "TOKENIZER"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(a.child[0], a.child[1], a.words, a.block)
        return
    from helpers.data.tokenizers import train_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        train_tokenizer(_texts(2e5)[:2000], "decoder", vocab_size=4096).save_pretrained(tmp)
        rows = []
        for path in ("one call", "streamed"):
            out = subprocess.run([sys.executable, __file__, "--words", str(a.words), "--block", str(a.block),
                                  "--child", path, tmp], check=True, capture_output=True, text=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
    old, new = rows
    print(f"{old['words']:,} words, {old['tokens']:,} tokens in blocks of {a.block}; process RSS before packing "
          f"(imports and texts): {old['RSS before (MiB)']:.0f} MiB")
    print(f"{'path':<10} {'peak above texts':>18} {'seconds':>8}")
    for r in rows:
        print(f"{r['path']:<10} {r['peak above texts (MiB)']:>14,.0f} MiB {r['seconds']:>8.1f}")
    print(f"ratio one call / streamed: {old['peak above texts (MiB)'] / max(new['peak above texts (MiB)'], 1e-9):.1f}x "
          f"less memory; the same blocks: {old['digest'] == new['digest']}")


if __name__ == "__main__":
    main()
