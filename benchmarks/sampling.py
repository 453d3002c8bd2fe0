"""Nucleus samples of a repetition fine-tuned decoder (``best/``) against its plain model (``mle-best/``).

    .venv/bin/python benchmarks/sampling.py [--profile cpu] [--budgets tiny-500k,tiny-1M] [--prompts 20] [--k 5]

Notebook 02's repetition fine-tuning (sequence-level unlikelihood) is meant for greedy decoding. This script asks what
it does to sampling, which notebook 03 uses for self-BLEU and for D_gen's nucleus corpora. For each budget, both
checkpoints complete the same ``--prompts`` prompts (official validation stories, cut at 15-30 %) ``--k`` times by
nucleus sampling (top-p 0.95, at each ``--temperatures``; 128 new tokens, the same seed). Each sample set is then
scored by the share of samples that contain byte junk (a U+FFFD replacement character: the model emitted a partial
UTF-8 byte sequence), by the mean log-probability per token the *plain* model gives the sampled tokens (a fluency
measure shared by both rows: higher is more fluent), and by self-BLEU at k (notebook 03's measure). The script prints
both rows side by side with the differences. ``helpers.generation.completions.decoding_model_dir`` applies the rule
that follows from them: sampling reads ``mle-best/``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import _common  # noqa: F401,E402  (first: puts src/ on sys.path in a checkout without the editable install)

from helpers.core import config  # noqa: E402
from helpers.core.hardware import cpu_info  # noqa: E402
from helpers.data.corpus_files import read_corpus  # noqa: E402
from helpers.data.tokenizers import end_of_text_id, load_tokenizer  # noqa: E402
from helpers.diversity.self_bleu import self_bleu_curve  # noqa: E402
from helpers.generation import completions as G  # noqa: E402
from helpers.generation.decoding import Decoding  # noqa: E402
from helpers.models.decoder import load_decoder  # noqa: E402


@torch.no_grad()
def mean_logprob(model, eot: int, prompt_ids, samples) -> float:
    """Mean log-probability (nats per token) that ``model`` gives the sampled tokens after their prompts."""
    total, n = 0.0, 0
    for p, outs in zip(prompt_ids, samples):
        for o in outs:
            if not o:
                continue
            ids = torch.tensor([[eot, *p, *o]])
            logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
            tgt = ids[0, 1:]
            lp = logp[torch.arange(len(tgt)), tgt][len(p):]
            total, n = total + float(lp.sum()), n + len(lp)
    return total / max(n, 1)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--budgets", default="tiny-500k,tiny-1M")
    ap.add_argument("--prompts", type=int, default=20)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--temperatures", default="1.0,0.8")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args(argv)
    config.set_threads(a.threads or None)
    run = config.run_dir(a.profile)
    stories = read_corpus(run / "data" / "tiny-valid.jsonl")
    prompts = G.make_prompts(stories, a.prompts, (0.15, 0.30), 20, 300, seed=3)
    rows = []
    for budget in a.budgets.split(","):
        dec = run / "decoders" / budget
        if not (dec / G.PLAIN_DIR).is_dir():
            raise SystemExit(f"{dec} has no {G.PLAIN_DIR}/ (no repetition fine-tuning): run notebook 02 of profile {a.profile}")
        tok = load_tokenizer(dec / "best")
        eot = end_of_text_id(tok)
        pids = [tok(p.prompt).input_ids for p in prompts]
        plain = load_decoder(dec / G.PLAIN_DIR).eval()
        for temperature in (float(t) for t in a.temperatures.split(",")):
            decoding = Decoding("nucleus", k=a.k, top_p=0.95, temperature=temperature)
            for label in (G.PLAIN_DIR, "best"):
                t0 = time.perf_counter()
                model = plain if label == G.PLAIN_DIR else load_decoder(dec / "best").eval()
                samples = G.generate(model, pids, decoding, eot, max_new_tokens=a.tokens, batch_size=a.prompts * a.k, seed=0)
                texts = [[tok.decode(o) for o in per_prompt] for per_prompt in samples]
                rows.append({"budget": budget, "temperature": temperature, "model": label,
                             "junk share": float(np.mean([("\ufffd" in t) for g in texts for t in g])),
                             "log p under plain": mean_logprob(plain, eot, pids, samples),
                             f"self-BLEU k={a.k}": self_bleu_curve(texts, [a.k])[a.k],
                             "seconds": time.perf_counter() - t0, "example": texts[0][0][:160].replace("\n", " ")})
    import pandas as pd

    df = pd.DataFrame(rows)
    cpu = cpu_info()
    print(f"profile {a.profile}; CPU: {cpu['label']}; {torch.get_num_threads()} torch threads; {a.prompts} prompts x "
          f"{a.k} nucleus samples (top-p 0.95) of {a.tokens} tokens; log p: nats per sampled token under the plain model")
    with pd.option_context("display.width", 250, "display.max_colwidth", 90):
        print(df.drop(columns="example").round(4).to_string(index=False))
        print()
        for (budget, temperature), g in df.groupby(["budget", "temperature"], sort=False):
            p, b = g.set_index("model").loc[G.PLAIN_DIR], g.set_index("model").loc["best"]
            print(f"{budget}, T {temperature}: fine-tuned - plain: log p {b['log p under plain'] - p['log p under plain']:+.3f} "
                  f"nats/token, junk share {b['junk share'] - p['junk share']:+.2f}, self-BLEU "
                  f"{b[f'self-BLEU k={a.k}'] - p[f'self-BLEU k={a.k}']:+.4f}")
        print()
        print(df[df.temperature == df.temperature.iloc[0]][["budget", "model", "example"]].to_string(index=False))


if __name__ == "__main__":
    main()
