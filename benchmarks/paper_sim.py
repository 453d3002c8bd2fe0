"""The paper profile end to end at a chosen corpus size on a CPU: its data, budgets and mixes, with the models shrunk.

    python benchmarks/paper_sim.py --words 110e6 --dir /big/sim          # notebooks 01-06 (hours on 2 cores)
    python benchmarks/paper_sim.py --words 110e6 --dir /big/sim --dry    # check the overrides, print the --set line

1. Builds files of the real shape under ``--dir`` (``scale_01.build_corpus``): a TinyStories-V2-like train file of
   ``--words`` words and its valid file, and BabyLM's ``train_10M`` and ``dev`` at their real size (~10M words each,
   the six sources each in its own line format).
2. Runs the runner (what ``./run_all.sh`` runs) on the **paper** profile with ``--set`` overrides (:data:`SIM`): the
   data paths point at ``--dir``; everything about the data is the paper's (budgets 5M ... 100M words and "all of
   it", the mixes, tokenizers of 16,384 types, D_gen from the 5M-word decoder); the models, steps and sample counts
   are the smoke profile's (a 32-wide, 2-layer decoder, a dozen steps, a few prompts), so every data step runs at
   size and every model step costs little. Below ~106M words only the budgets the corpus can hold run (e.g. at 20M:
   5M, 10M and all of it; :func:`fitting_budgets`). Notebooks 03 and 05b generate with three budgets' decoders (5M, 50M and
   all of it), not seven, to bound memorisation's CPU time; 05 scores all seven. Runs and reports land in a variant
   folder under ``--dir/runs`` and ``--dir/reports``; run it again to resume (finished steps are skipped).
3. Prints each notebook's wall time and peak memory (the kernel and its worker processes together: all resident pages,
   and the anonymous ones, without the pages of memory-mapped files read, which the kernel can drop; and the largest
   single process; the runner's ``timings_history.jsonl``) and the CPU.

The equivalent command line is printed with ``--dry``; the numbers are what ``docs/running.md`` quotes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import scale_01  # noqa: E402  (the corpus generator)

THREE = ["tiny-5M", "tiny-50M", "tiny-440M"]  # 03 and 05b: the generator, the self-BLEU model and all of it
GLUE_SMOKE = {"preset": "berttime", "epochs": 1, "max_train_examples": 16, "max_eval_examples": 16}

#: the overrides of the paper profile, notebook by notebook: smoke-sized models and counts, the paper's data
SIM = {
    "02": {"model": {"hidden": 32, "layers": 2, "heads": 2, "context": 128, "window": 32},
           "train.steps": 12, "train.batch_size": 8, "train.micro_batch": 4, "train.lr": 2.0e-3, "train.min_lr": 2.0e-4,
           "train.eval_every": 6, "train.save_every": 6, "train.log_every": 3,
           "valid_blocks": 8, "official_valid_blocks": 8, "sample_tokens": 12},
    "02b": {"steps": 8, "eval_every": 2, "warmup_steps": 2, "log_every": 1,
            "sweep": [{"hidden": [16, 32], "layers": [1], "heads": [2]}], "heatmap_heads": 2, "blimp_pairs": 2,
            "contrastive_shape": {"hidden": 32, "layers": 1, "heads": 2}, "order_stories": 10, "themed_max_new_tokens": 8,
            "compressor_shape": {"hidden": 32, "layers": 1, "heads": 2}, "memory_widths": [32], "memory_batches": [2, 4],
            "memory_layers": 1, "memory_heads": 2, "memory_cap_mb": 1000, "sample_tokens": 8},
    "03": {"models": THREE, "max_words": 120, "max_new_tokens": 24, "batch_size": 16, "selfbleu_prompts": 3,
           "selfbleu_completions": 6, "selfbleu_ks": [2, 3, 4, 5, 6], "gen_max_prompts": 12, "memorisation_prompts": 4},
    "04": {"model": "smoke", "train.steps": 8, "train.batch_size": 8, "train.micro_batch": 4, "train.lr": 1.0e-3,
           "train.min_lr": 1.0e-4, "train.eval_every": 4, "train.save_every": 4, "train.log_every": 2,
           "train.long_block": 256, "train.long_from": 0.75, "valid_blocks": 8},
    "05": {"limit_per_task": 2, "encoder_limit_per_task": 2, "mlm_max_tokens": 2048, "causal_batch_size": 32,
           "glue_encoders": ["baby-10M"], "glue_tasks": ["cola", "rte"], "glue": GLUE_SMOKE},
    "05b": {"models": THREE, "batch_size": 16, "gpteval_completions": 2, "gpteval_max_new_tokens": 16,
            "gpteval_min_new_tokens": 8, "themed_max_new_tokens": 12, "instruct_steps": 12, "instruct_heldout_prompts": 10,
            "instruct_samples": 1, "instruct_max_new_tokens": 24, "instruct_min_new_tokens": 8, "instruct_examples": 2,
            "instruct_train_file": None, "instruct_valid_file": None, "judge": "none", "judge_validity_stories": 2,
            "judge_decoder_pairs": 2, "judge_prompts": 1, "judge_samples": 1},
    "06": {"n_stories": 12, "max_tokens": 128, "map_tokens": 24, "top_k": 8, "n_boot": 200, "html_neurons": 1},
}


def name(words: int) -> str:
    """Notebook 01's name of a TinyStories budget of ``words`` (whole millions here: ``tiny-5M``)."""
    return f"tiny-{words // 1_000_000}M"


def fitting_budgets(words: float, p01: dict | None = None) -> dict[str, dict]:
    """Overrides naming only the budgets a corpus of ``words`` words can hold: those below 95 % of it (the held-out
    reserve comes first), and the full budget (``tiny-440M``: all of the rest). Empty when every budget fits
    (>= ~106M words). The notebooks that list budgets by name list the kept ones; 03 and 05b's three models become the
    generator, the largest kept budget and all of it, and 02b and 03's self-BLEU use the largest kept budget. ``p01``: the paper
    profile's notebook-01 params (read here when not given)."""
    from helpers.core.config import read_yaml

    p01 = p01 or read_yaml(ROOT / "params" / "paper" / "01_data_budgets.yaml")
    full = int(p01["full_budget"])
    kept = [int(b) for b in p01["tiny_budgets"] if int(b) < 0.95 * words or int(b) == full]
    if len(kept) == len(p01["tiny_budgets"]):
        return {}
    names = [name(b) for b in kept]
    three = list(dict.fromkeys([THREE[0], names[-2], names[-1]]))
    return {"01": {"tiny_budgets": kept}, "02": {"budgets": names}, "02b": {"budget": names[-2]},
            "03": {"models": three, "selfbleu_models": [names[-2]]}, "05": {"decoders": names}, "05b": {"models": three}}


def overrides_for(root: Path, words: float = 110e6) -> dict[str, dict]:
    """:data:`SIM` plus notebook 01's data paths under ``root`` (absolute: the generated files are not in ``data/``),
    and the budgets a corpus of ``words`` words can hold (:func:`fitting_budgets`)."""
    from helpers.core.config import read_yaml

    p01 = read_yaml(ROOT / "params" / "paper" / "01_data_budgets.yaml")
    paths = {k: scale_01.absolute_paths(p01[k], root / "full")
             for k in ("tinystories_train", "tinystories_valid", "babylm_files", "babylm_heldout_files")}
    out = {"01": paths, **SIM}
    for nb, o in fitting_budgets(words, p01).items():
        out[nb] = {**out.get(nb, {}), **o}
    return out


def set_line(overrides: dict[str, dict]) -> str:
    """The ``./run_all.sh --profile paper --set ...`` line of ``overrides`` (values as YAML flow, JSON being YAML)."""
    import shlex

    return "./run_all.sh --profile paper " + " ".join(
        f"--set {shlex.quote(f'{nb}.{k}={json.dumps(v)}')}" for nb, o in overrides.items() for k, v in o.items())


def summary(reports: Path) -> list[dict]:
    """The latest row per notebook of the variant's ``timings_history.jsonl`` (wall time, peak memory, CPU)."""
    latest = {}
    for f in reports.rglob("timings_history.jsonl"):
        for line in f.read_text().splitlines():
            row = json.loads(line)
            latest[row["notebook"]] = row
    return [latest[k] for k in sorted(latest)]


def again(runner, overrides: dict[str, dict], ids: list[str]) -> None:
    """Run the notebooks ``ids`` once more in the full run's variant folders (what ``runner.run`` does for a variant,
    for a subset: its folders are named by all the overrides, so ``--only`` with fewer ``--set`` would start anew)."""
    from helpers.core.locking import ProfileLock
    from helpers.core.overrides import variant_roots

    todo = [(nb, p) for nb, p in runner.plan("paper", runner.notebooks(), overrides) if runner.nb_id(nb) in ids]
    runs, reports = variant_roots("paper", overrides)
    os.environ["STORYBENCH_RUNS"], os.environ["STORYBENCH_REPORTS"] = str(runs), str(reports)
    with ProfileLock("paper"):
        runner._run("paper", todo, False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--words", type=float, default=110e6, help="TinyStories words of the train file (default 110e6)")
    ap.add_argument("--dir", type=Path, required=True, help="where the files, runs and reports go (tens of GB at 440M)")
    ap.add_argument("--dry", action="store_true", help="check the overrides and print the --set line; run nothing")
    ap.add_argument("--again", help="comma-separated notebooks (e.g. 03) to run again in the same run folder after a "
                                    "full run (the runner itself refuses overrides of notebooks outside --only)")
    a = ap.parse_args(argv)
    root = a.dir.resolve()
    os.environ["STORYBENCH_RUNS"], os.environ["STORYBENCH_REPORTS"] = str(root / "runs"), str(root / "reports")
    from helpers import runner

    overrides = overrides_for(root, a.words)
    runner.plan("paper", runner.notebooks(), overrides)  # the runner's parameter checks, before anything is built
    if a.dry:
        print(set_line(overrides))
        return 0
    t = time.perf_counter()
    made = scale_01.build_corpus(root, int(a.words), baby_words=10e6)
    print(f"corpus under {root / 'full'}: {made or 'reused'} ({time.perf_counter() - t:.0f} s)", flush=True)
    try:
        if a.again:
            again(runner, overrides, a.again.split(","))
        else:
            runner.run("paper", overrides=overrides)
    finally:
        from helpers.core.hardware import cpu_info

        print(f"\n{cpu_info()['label']}, {os.cpu_count()} cores; {int(a.words):,} TinyStories words")
        print(f"{'notebook':<34} {'wall (min)':>10} {'peak RSS, tree (MiB)':>21} {'of it anonymous (MiB)':>22} "
              f"{'largest process (MiB)':>22}")
        for r in summary(root / "reports"):
            print(f"{r['notebook']:<34} {r['seconds'] / 60:>10.1f} {r.get('peak_rss_mib') or '-':>21} "
                  f"{r.get('peak_anon_mib') or '-':>22} {r.get('largest_process_mib') or '-':>22}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
