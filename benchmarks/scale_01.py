"""Notebook 01 at a chosen corpus size: time and peak memory (RSS) per step.

    python benchmarks/scale_01.py --words 440e6 --dir /big/tmp/scale   # the paper's size (~2.3 GB of stories)
    python benchmarks/scale_01.py --words 20e6 --json                  # a quick one (tests/test_scale_01.py)

1. Builds files of the paper profile's shape under ``--dir`` (kept with ``--keep``; reused when already there): a
   TinyStories-V2-like train file (``<|endoftext|>`` between stories, ~``--words`` words) and valid file, and
   BabyLM-like ``train_10M`` and ``dev`` files, each of the six sources in its own line format (``A:\t`` turns in
   switchboard, ``*CHI:\t`` tiers in childes, wrapped paragraphs and chapter lines in gutenberg, ``= = = Title = = =``
   headings in simple_wiki, short ``- `` lines in open_subtitles, bare utterances in bnc_spoken), so the whitespace
   count includes speaker tags as the real files' does. The stories are the bundled ones with their sentences
   rotated, made-up names put in and one content word per story replaced by a made-up word drawn log-uniformly from
   a pool of a million, so no two stories are the same and the vocabulary keeps growing sub-linearly, as in the
   real corpus.
2. Runs the code cells of ``notebooks/01_data_budgets.ipynb`` in this process, in order (as papermill would, with the
   paper profile's parameters scaled to the corpus: budgets ``--words``/440M times the paper's, the largest being
   "all of it"), runs and reports in a scratch folder (``$STORYBENCH_RUNS``/``$STORYBENCH_REPORTS`` under ``--dir``),
   and prints per cell its seconds and the peak RSS sampled while it ran, then the process's peak RSS (VmHWM) and
   the disk used by the run folder.

The measured peak RSS is the number to quote: times depend on how busy the machine's cores are.
"""
from __future__ import annotations

import argparse
import functools
import gzip
import json
import os
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's helpers (also when another one is installed)

PAPER_BUDGETS = [5_000_000, 10_000_000, 25_000_000, 50_000_000, 75_000_000, 100_000_000, 440_000_000]
SYLLABLES = ["ba", "be", "bi", "bo", "da", "de", "di", "do", "ka", "ke", "ki", "ko", "la", "le", "li", "lo", "ma", "me",
             "mi", "mo", "na", "ne", "ni", "no", "ra", "re", "ri", "ro", "sa", "se", "si", "so", "ta", "te", "ti", "to",
             "va", "ve", "vi", "vo", "za", "ze", "zi", "zo"]


# ----------------------------------------------------------------------------- the corpus
@functools.lru_cache(maxsize=1)
def _bundled_stories() -> list[list[str]]:
    from helpers.data import corpora, normalisation

    out = []
    for f in ("tinystories/v1_train_prefix_2MiB.txt.gz", "tinystories/v2_train_prefix_10k_lines.txt.gz"):
        for s in corpora.load_tinystories(f).stories:
            sents = normalisation.split_sentences(s.replace("\n", " "))
            if len(sents) >= 2:
                out.append(sents)
    return out


@functools.lru_cache(maxsize=1)
def _bundled_lines() -> list[str]:
    lines = []
    for f in sorted((ROOT / "data" / "babylm_corpus").rglob("*.gz")):
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            lines += [ln.strip() for ln in fh if ln.strip()]
    return lines


@functools.lru_cache(maxsize=4)
def _names(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = set()
    while len(out) < n:
        out.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))).capitalize())
    return sorted(out)


FUNCTION_WORDS = frozenset(
    "the a an and or but so then when while with without from into onto over under after before about they them their "
    "there here this that these those what which who whom whose she he her his him it its you your we our us was were "
    "have has had been being very just also not all some many much more most one two three day once time upon little "
    "said says said went came could would should will shall can did does done".split())
POOL_WORDS = 1_000_000  # made-up content words: one per story, log-uniform over the pool (new types ever rarer)


def substitute_content_word(words: list[str], rng: random.Random, pool: int = POOL_WORDS) -> list[str]:
    """``words`` with every occurrence of one content word (lower-case, alphabetic, 4+ letters, not a function word)
    replaced by a made-up one (``pool`` possible, index drawn log-uniformly), as a real corpus keeps adding rare words."""
    content = sorted({w for w in words if len(w) >= 4 and w.isalpha() and w.islower() and w not in FUNCTION_WORDS})
    if not content:
        return words
    old = content[rng.randrange(len(content))]
    i = int(pool ** rng.random())  # 1 .. pool, log-uniform
    new, r = "", random.Random(i)
    for _ in range(3 + i % 3):
        new += r.choice(SYLLABLES)
    return [new if w == old else w for w in words]


def write_stories(path: Path, words: int, seed: int, n_names: int = 200_000) -> int:
    """~``words`` words of distinct stories, ``<|endoftext|>`` after each (as in TinyStoriesV2-GPT4-train.txt)."""
    rng = random.Random(seed)
    base = _bundled_stories()
    names = _names(n_names, seed)
    n = 0
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8", buffering=1 << 22) as f:
        batch = []
        while n < words:
            sents = base[rng.randrange(len(base))]
            k = rng.randrange(len(sents))
            name, other = names[rng.randrange(n_names)], names[rng.randrange(n_names)]
            body = " ".join(substitute_content_word(" ".join(sents[k:] + sents[:k]).split(" "), rng))
            story = f"Once upon a time, there was {name} and {other}.\n{body}\n{name} smiled at {other}."
            n += len(story.split())
            batch.append(story)
            if len(batch) == 4096:
                f.write("\n<|endoftext|>\n".join(batch) + "\n<|endoftext|>\n")
                batch = []
        if batch:
            f.write("\n<|endoftext|>\n".join(batch) + "\n<|endoftext|>\n")
    tmp.replace(path)
    return n


def _format_line(source: str, text: str, rng: random.Random, names: list[str], i: int) -> str:
    """One line (or block) of ``text`` in the line format of BabyLM 2024's ``source`` file."""
    if source == "switchboard":
        return f"{'AB'[i % 2]}:\t{text}"
    if source == "childes":
        return f"*{rng.choice(['CHI', 'MOT', 'FAT', 'INV'])}:\t{text.lower()}"
    if source == "gutenberg":
        if i % 400 == 0:
            return f"\nCHAPTER {i // 400 + 1}\n"
        words, out, line = text.split(), [], ""
        for w in words:  # hard-wrapped at ~70 characters, as Project Gutenberg's files are
            if len(line) + len(w) > 70:
                out.append(line)
                line = ""
            line = f"{line} {w}".strip()
        return "\n".join(out + [line])
    if source == "simple_wiki":
        return f"= = = {names[rng.randrange(len(names))]} = = =\n{text}" if i % 25 == 0 else text
    if source == "open_subtitles":
        return f"- {text}" if i % 3 == 0 else text
    return text  # bnc_spoken: bare utterances


def _untagged(line: str) -> str:
    """A bundled line without its own speaker tag (the bundled switchboard's ``A:\t``): each source adds its own."""
    return re.sub(r"^\*?[A-Z]{1,3}:\s+", "", line)


def write_lines(path: Path, words: int, seed: int, source: str = "bnc_spoken") -> int:
    """~``words`` words of BabyLM-like text in ``source``'s line format (:func:`_format_line`; blank lines between
    blocks of 200); the count is whitespace words of the file as written, speaker tags and headings included."""
    rng = random.Random(seed)
    lines = _bundled_lines()
    names = _names(20_000, seed)
    n, i = 0, 0
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8", buffering=1 << 22) as f:
        while n < words:
            text = _untagged(lines[rng.randrange(len(lines))])
            if source == "gutenberg":  # paragraphs: several lines joined
                text = " ".join([text] + [_untagged(lines[rng.randrange(len(lines))]) for _ in range(4)])
            ln = _format_line(source, text, rng, names, i)
            n += len(ln.split())
            i += 1
            f.write(ln + ("\n\n" if i % 200 == 0 else "\n"))
    tmp.replace(path)
    return n


BABY_SOURCES = ["bnc_spoken", "childes", "gutenberg", "open_subtitles", "simple_wiki", "switchboard"]


def build_corpus(root: Path, words: int, seed: int = 0, baby_words: float | None = None) -> dict:
    """The paper profile's files under ``root`` (``full/TinyStories/…``, ``full/babylm/…``) at ``words`` TinyStories
    words; BabyLM scaled alike (10M and ~9M dev words at the paper's 440M), or ``baby_words`` in train_10M whatever
    ``words`` (10e6: the real size). Reuses files already there."""
    scale = words / 440e6
    baby_scale = baby_words / 10e6 if baby_words else scale
    ts = root / "full" / "TinyStories"
    ts.mkdir(parents=True, exist_ok=True)
    made = {}
    train = ts / "TinyStoriesV2-GPT4-train.txt"
    if not train.is_file():
        made["train words"] = write_stories(train, words, seed)
    valid = ts / "TinyStoriesV2-GPT4-valid.txt"
    if not valid.is_file():
        write_stories(valid, max(50_000, int(5e6 * scale)), seed + 1)
    for split, ext, total in (("train_10M", "train", 10e6), ("dev", "dev", 9e6)):
        d = root / "full" / "babylm" / split
        d.mkdir(parents=True, exist_ok=True)
        for j, src in enumerate(BABY_SOURCES):
            f = d / f"{src}.{ext}"
            if not f.is_file():
                write_lines(f, max(5_000, int(total * baby_scale / len(BABY_SOURCES))), seed + 10 * j + (ext == "dev"), src)
    return made


def absolute_paths(x, full: Path):
    """A params value with its data paths (``full/...``, as the paper profile names them) under ``full`` instead: a
    string, or the strings inside lists and mappings; anything else as it is."""
    if isinstance(x, str):
        return str(full / x.removeprefix("full/"))
    if isinstance(x, list):
        return [absolute_paths(v, full) for v in x]
    if isinstance(x, dict):
        return {k: absolute_paths(v, full) for k, v in x.items()}
    return x


def params_for(root: Path, words: int, budgets: list[float] | None = None, fixed: list[int] | None = None) -> dict:
    """Notebook 01's parameters for the files of :func:`build_corpus`: the paper profile's, with its budgets scaled
    by ``words``/440M (or ``budgets``, fractions of ``words``; the last is the full budget). ``fixed``: budgets of
    that many words whatever the corpus size, and no full budget (the steps that read the whole corpus still do;
    the tokenizers then train on small corpora only: the scale test)."""
    from helpers.core.config import read_yaml  # the one YAML reader (YAML 1.2 numbers, no repeated key)

    p = read_yaml(ROOT / "params" / "paper" / "01_data_budgets.yaml")
    scale = words / 440e6
    fracs = budgets or [b / 440e6 for b in PAPER_BUDGETS]
    tiny = sorted({int(round(f * words)) for f in fracs})
    absolute = functools.partial(absolute_paths, full=root / "full")
    p.update(profile="paper", tinystories_train=absolute(p["tinystories_train"]),
             tinystories_valid=absolute(p["tinystories_valid"]), babylm_files=absolute(p["babylm_files"]),
             babylm_heldout_files=absolute(p["babylm_heldout_files"]), tiny_budgets=tiny, full_budget=tiny[-1],
             valid_max_words=max(10_000, int(p["valid_max_words"] * scale)),
             baby_budgets=[max(1_000, int(b * scale)) for b in p["baby_budgets"]],
             baby_full_budget=max(1_000, int(p["baby_full_budget"] * scale)),
             track_budget=max(1_000, int(p["track_budget"] * scale)))
    p["baby_budgets"][-1] = p["baby_full_budget"]
    if p.get("tokenizer_check_words"):
        p["tokenizer_check_words"] = max(10_000, int(p["tokenizer_check_words"] * scale))
    if fixed:
        p.update(tiny_budgets=sorted(fixed), full_budget=None)
    return p


# ----------------------------------------------------------------------------- measuring
def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def vm_hwm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


class PeakSampler:
    """Samples this process's RSS every ``interval`` seconds in a thread; ``reset()`` starts a new window."""

    def __init__(self, interval: float = 0.02):
        self.interval, self.peak, self._stop = interval, rss_bytes(), threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_bytes())

    def reset(self) -> int:
        old, self.peak = max(self.peak, rss_bytes()), rss_bytes()
        return old

    def stop(self):
        self._stop.set()
        self._t.join()


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run_notebook01(params: dict, notebook: Path = ROOT / "notebooks" / "01_data_budgets.ipynb") -> list[dict]:
    """Execute the notebook's code cells in order in a fresh namespace (parameters cell, then ``params`` injected
    after it, as papermill does); one row per cell: label, seconds, peak RSS while it ran."""
    import matplotlib

    matplotlib.use("Agg")
    nb = json.loads(notebook.read_text())
    ns: dict = {"__name__": "__main__"}
    sampler = PeakSampler()
    rows = []
    try:
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"])
            if "parameters" in cell.get("metadata", {}).get("tags", []):
                exec(compile(src, f"<01 cell {i}>", "exec"), ns)
                ns.update(params)
                continue
            first = next((ln.strip() for ln in src.splitlines() if ln.strip() and not ln.strip().startswith("#")), "")
            sampler.reset()
            t = time.perf_counter()
            exec(compile(src, f"<01 cell {i}>", "exec"), ns)
            rows.append({"cell": i, "step": first[:70], "seconds": round(time.perf_counter() - t, 1),
                         "peak_rss_mib": round(sampler.reset() / 2**20)})
            import matplotlib.pyplot as plt

            plt.close("all")
    finally:
        sampler.stop()
    return rows


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--words", type=float, default=20e6, help="TinyStories words (440e6: the paper's size)")
    ap.add_argument("--dir", type=Path, default=None, help="scratch folder (default: a new temp folder)")
    ap.add_argument("--budgets", default=None,
                    help="comma-separated fractions of --words (the last: the full budget); default the paper's scaled")
    ap.add_argument("--fixed-budgets", default=None,
                    help="comma-separated budgets in words, the same at every corpus size, and no full budget")
    ap.add_argument("--keep", action="store_true", help="keep the generated files and runs")
    ap.add_argument("--json", action="store_true", help="print one JSON object at the end")
    a = ap.parse_args(argv)
    words = int(a.words)
    root = a.dir or Path(tempfile.mkdtemp(prefix="scale01-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        t = time.perf_counter()
        build_corpus(root, words)
        build_s = time.perf_counter() - t
        train = root / "full" / "TinyStories" / "TinyStoriesV2-GPT4-train.txt"
        os.environ["STORYBENCH_RUNS"] = str(root / "runs")
        os.environ["STORYBENCH_REPORTS"] = str(root / "reports")
        shutil.rmtree(root / "runs", ignore_errors=True)
        params = params_for(root, words, [float(x) for x in a.budgets.split(",")] if a.budgets else None,
                            [int(float(x)) for x in a.fixed_budgets.split(",")] if a.fixed_budgets else None)
        base_rss = rss_bytes()
        t = time.perf_counter()
        rows = run_notebook01(params)
        out = {"words": words, "train_file_bytes": train.stat().st_size, "build_seconds": round(build_s, 1),
               "baseline_rss_mib": round(base_rss / 2**20), "seconds": round(time.perf_counter() - t, 1),
               "peak_rss_mib": round(vm_hwm_bytes() / 2**20), "run_disk_bytes": du(root / "runs"),
               "tiny_budgets": params["tiny_budgets"], "steps": rows}
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    if a.json:
        print(json.dumps(out))
    else:
        print(f"{words:,} words ({out['train_file_bytes'] / 1e9:.2f} GB train file; built in {out['build_seconds']} s), "
              f"budgets {params['tiny_budgets']}")
        for r in rows:
            print(f"  cell {r['cell']:>2}  {r['seconds']:>8.1f} s  peak {r['peak_rss_mib']:>6,} MiB  {r['step']}")
        print(f"notebook 01: {out['seconds']} s, peak RSS {out['peak_rss_mib']:,} MiB (VmHWM; {out['baseline_rss_mib']} MiB "
              f"before the first cell), run folder {out['run_disk_bytes'] / 1e9:.2f} GB")
    return out


if __name__ == "__main__":
    main()
