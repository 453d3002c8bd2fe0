"""Minimal-pair scoring throughput: our batched scorers (helpers.evaluation.lm_scoring) vs the obvious baselines, one process.

    .venv/bin/python benchmarks/scoring.py [--pairs 1000] [--pll-sentences 200] [--threads 1]

(a) Causal LM, BLiMP pairs/s: ``causal_scores`` (length-sorted batches of 64, attention mask, output projection at
    the scored positions only) vs a per-sentence loop (one unpadded forward per sentence, full logits), same model
    (our fast attention in both), same sentences (a seeded sample of the filtered BLiMP, every paradigm).
(b) Masked LM, PLL sentences/s: ``mlm_scores`` (masked copies of many sentences packed into forwards of at most
    2,048 tokens, MLM head at the masked positions only) vs minicons' ``scorer.MaskedLMScorer.sequence_score``
    when minicons is installed, and vs a one-mask-at-a-time loop. minicons runs all masked copies of the sentences
    of one call in one forward, padded to the call's longest sentence, with logits at every position; it is timed
    at 4 sentences per call (its fastest here: 1, 4, 8, 16, 32 and 64 were measured, 4 best, 32 ~1.5× slower,
    more padding and bigger logit tensors) and at 32 (a common choice); the ratio is given against both.
    Both call the same model object, so inference speed-ups inside the model (``helpers.models.ltg_bert``'s eval path)
    speed up minicons as much as ours; the ratio measures what the scorers themselves do.

Every baseline's scores are checked against ours (max |difference| printed) before the times are compared. Models:
the first of runs/cpu/{decoders,encoders}/*/best, else runs/smoke/..., else randomly initialised models of the cpu
profile's shapes (GPT-Neo 128 hidden, 4 layers, 4 heads, context 256; LTG-BERT preset "cpu") with a tokenizer
trained here on bundled TinyStories; the output says which. Times are the best of ``--repeats`` runs, the scorers
taking turns (a shared machine's load changes from minute to minute).

minicons (0.3.39) calls ``tokenizer.batch_encode_plus``, which transformers 5 removed; the benchmark gives the
tokenizer instance a one-line ``batch_encode_plus`` that forwards to ``__call__`` (nothing else is changed).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from helpers.core import config
from helpers.evaluation import lm_scoring as LS, minimal_pairs as MP


def timed_alternately(fns: dict, repeats: int) -> tuple[dict, dict]:
    """Run every function ``repeats`` times, interleaved (a, b, c, a, b, c, ...), so that a change in the load of a
    shared machine hits all of them alike; returns each one's output and best time."""
    out, best = {}, {k: float("inf") for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            out[k] = fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return out, best


RANDOM = False


def _first_model(kind: str) -> Path | None:
    if RANDOM:
        return None
    root = config.repo_root()
    for profile in ("cpu", "smoke"):
        found = sorted((root / "runs" / profile / kind).glob("*/best/config.json"))
        if found:
            return found[0].parent
    return None


def _tokenizer(kind: str, vocab: int):
    from helpers.data.corpora import load_tinystories
    from helpers.data.tokenizers import train_tokenizer

    stories = load_tinystories("tinystories/v1_train_prefix_2MiB.txt.gz").stories[:1500]
    return train_tokenizer(stories, kind, vocab)


def load_decoder():
    from helpers.models.decoder import DecoderSpec, build_decoder, load_decoder as load
    from helpers.data.tokenizers import load_tokenizer

    path = _first_model("decoders")
    if path is not None:
        return load(path).eval(), load_tokenizer(path), f"{path.relative_to(config.repo_root())}"
    tok = _tokenizer("decoder", 4096)
    eot = tok.eos_token_id
    spec = DecoderSpec(hidden=128, layers=4, heads=4, context=256, window=128, vocab_size=len(tok))
    model = build_decoder(spec, seed=0, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot).eval()
    return model, tok, "random init, cpu-profile shape (128 hidden, 4 layers, 4 heads, context 256, vocab 4096)"


def load_encoder():
    from helpers.models.ltg_bert import LtgBertForMaskedLM, load_model, ltg_bert_config
    from helpers.data.tokenizers import load_tokenizer

    path = _first_model("encoders")
    if path is not None:
        return load_model(path).eval(), load_tokenizer(path), f"{path.relative_to(config.repo_root())}"
    tok = _tokenizer("encoder", 4096)
    torch.manual_seed(0)
    cfg = ltg_bert_config("cpu", len(tok), pad_token_id=tok.pad_token_id, cls_token_id=tok.cls_token_id,
                          sep_token_id=tok.sep_token_id, mask_token_id=tok.mask_token_id)
    return LtgBertForMaskedLM(cfg).eval(), tok, "random init, LTG-BERT preset 'cpu' (128/341/4 heads/4 layers, vocab 4096)"


@torch.inference_mode()
def causal_loop(model, tok, texts):
    eot = tok.eos_token_id
    out = []
    for t in texts:
        ids = torch.tensor([[eot] + tok(" " + t, add_special_tokens=False)["input_ids"]])
        lp = torch.log_softmax(model(ids).logits[0, :-1].float(), -1)
        out.append(float(lp.gather(-1, ids[0, 1:].unsqueeze(-1)).sum()))
    return np.array(out)


@torch.inference_mode()
def pll_loop(model, tok, texts):
    out = []
    for t in texts:
        ids = tok(" " + t)["input_ids"]  # [CLS] x [SEP]
        total = 0.0
        for p in range(1, len(ids) - 1):
            x = torch.tensor([ids])
            x[0, p] = tok.mask_token_id
            lp = torch.log_softmax(model(input_ids=x).logits[0, p].float(), -1)
            total += float(lp[ids[p]])
        out.append(total)
    return np.array(out)


def minicons_scorer(model, tok):
    try:
        from minicons import scorer
    except ImportError:
        return None
    if not hasattr(tok, "batch_encode_plus"):  # removed in transformers 5; minicons 0.3.x still calls it
        try:
            tok.batch_encode_plus  # noqa: B018
        except AttributeError:
            tok.batch_encode_plus = lambda texts, **kw: tok(texts, **kw)
    return scorer.MaskedLMScorer(model, "cpu", tokenizer=tok)  # PLL_metric="original": one token masked per copy


def minicons_scores(mlm, texts, batch=32):
    out = []
    for s in range(0, len(texts), batch):
        out += mlm.sequence_score([" " + t for t in texts[s: s + batch]], reduction=lambda x: x.sum(0).item())
    return np.array(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=1000, help="BLiMP pairs for (a)")
    ap.add_argument("--pll-sentences", type=int, default=200, help="sentences for (b)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=2048)
    ap.add_argument("--minicons-batches", default="4,32", help="sentences per minicons call (comma-separated)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--random", action="store_true", help="random-init cpu-shaped models even if trained ones exist")
    a = ap.parse_args()
    global RANDOM
    RANDOM = a.random
    torch.set_num_threads(a.threads)
    import transformers

    transformers.logging.set_verbosity_error()
    per = max(1, -(-a.pairs // 67))
    items = MP.load_blimp(limit_per_task=per, seed=0)
    rng = np.random.default_rng(0)
    items = [items[i] for i in sorted(rng.choice(len(items), size=min(a.pairs, len(items)), replace=False))]
    texts = [t for it in items for t in (it.good, it.bad)]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); BLiMP (filtered) sample: {len(items)} pairs "
          f"from {len({i.paradigm for i in items})} paradigms; best of {a.repeats}")

    # ------------------------------------------------------------------ (a) causal
    model, tok, what = load_decoder()
    print(f"\n(a) causal LM: {what}")
    reqs = [(None, t) for t in texts]
    LS.causal_scores(model, tok, reqs[:64], batch_size=a.batch)  # warm-up
    out, t = timed_alternately({"ours": lambda: LS.causal_scores(model, tok, reqs, batch_size=a.batch)[0],
                                "loop": lambda: causal_loop(model, tok, texts)}, a.repeats)
    (ours, loop), (t_ours, t_loop) = (out["ours"], out["loop"]), (t["ours"], t["loop"])
    diff = float(np.abs(ours - loop).max())
    print(f"  {'scorer':44s} {'pairs/s':>9s} {'seconds':>8s}")
    print(f"  {'ours: causal_scores, batch ' + str(a.batch):44s} {len(items) / t_ours:9.1f} {t_ours:8.2f}")
    print(f"  {'per-sentence loop (unbatched forwards)':44s} {len(items) / t_loop:9.1f} {t_loop:8.2f}")
    print(f"  ratio ours / loop: {t_loop / t_ours:.1f}x   (max |score difference| {diff:.2e} nats)")

    # ------------------------------------------------------------------ (b) PLL
    model, tok, what = load_encoder()
    sents = texts[: a.pll_sentences]
    n_tok = sum(len(tok(" " + s, add_special_tokens=False)["input_ids"]) for s in sents)
    print(f"\n(b) masked LM PLL: {what}; {len(sents)} sentences, {n_tok} masked copies")
    reqs = [(None, s) for s in sents]
    LS.mlm_scores(model, tok, reqs[:16], max_tokens=a.max_tokens)  # warm-up
    fns = {"ours": lambda: LS.mlm_scores(model, tok, reqs, max_tokens=a.max_tokens)[0]}
    names = {"ours": f"ours: mlm_scores, <= {a.max_tokens} tokens/forward"}
    mlm = minicons_scorer(model, tok)
    if mlm is not None:
        import minicons

        for nb in (int(x) for x in a.minicons_batches.split(",")):
            fns[f"minicons{nb}"] = lambda nb=nb: minicons_scores(mlm, sents, batch=nb)
            names[f"minicons{nb}"] = f"minicons {minicons.__version__} MaskedLMScorer, {nb}/call"
    else:
        print("  minicons is not installed: comparing with the one-mask loop only")
    fns["loop"] = lambda: pll_loop(model, tok, sents)
    names["loop"] = "one-mask-at-a-time loop"
    out, t = timed_alternately(fns, a.repeats)
    t_ours = t["ours"]
    rows = [(names[k], t[k], float(np.abs(out["ours"] - out[k]).max())) for k in fns]
    print(f"  {'scorer':44s} {'sent/s':>9s} {'seconds':>8s} {'max |diff|':>11s}")
    for name, t, d in rows:
        print(f"  {name:44s} {len(sents) / t:9.1f} {t:8.2f} {d:11.2e}")
    for name, t, _ in rows[1:]:
        print(f"  ratio ours / {name}: {t / t_ours:.2f}x")


if __name__ == "__main__":
    main()
