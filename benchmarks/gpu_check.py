"""The paper profile's GPU path, checked and timed in one process (one call on a lent GPU machine).

Every section compares against a baseline in the same process and prints a side-by-side ratio:

1. **Decoder numerics** (the paper's GPT-Neo, 768 × 4 layers × 16 heads, context 512, window 256, vocabulary 16,384):
   our fast path on the GPU in fp32 against HF's eager GPT-Neo on the CPU in fp32 (loss, logits, gradients), and
   bf16 autocast on the GPU against fp32 on the GPU (loss, gradient cosine).
2. **Decoder training step** (forward, backward, clipping, AdamW; micro-batch 32 × 512 as ``params/paper/02``):
   HF eager fp32 (the baseline a transformers user gets) vs our fast path in fp32 and bf16, with the paper's
   dropout 0 / 0.5, and attention dropout on the GPU in SDPA's kernel vs the blocked CPU path. The best one gives
   the hours one paper decoder takes (15,000 steps × 768 × 512 tokens) on this GPU.
3. **A real run through the project's code**: a decoder tokenizer trained on the bundled TinyStories, the paper's
   model trained with ``helpers.training.recipes.train_decoder`` (``precision: auto``), the best checkpoint loaded
   with ``AutoModelForCausalLM``, greedy continuations on the GPU against the CPU, BLiMP pairs scored on the GPU
   against the CPU, and an interrupted run resumed on the GPU against an uninterrupted one.
4. **Encoder** (LTG-BERT base, blocks of 128 and the 512-token long phase, LAMB as ``params/paper/04``): GPU fp32
   against CPU fp32, bf16 against fp32, and the training step's throughput, giving the hours of one paper encoder.

    python benchmarks/gpu_check.py --out DIR          # on a machine with a CUDA GPU (~4 min on an H100)
    python benchmarks/gpu_check.py --device cpu --tiny  # the same code on small shapes (a dry run without a GPU)

Results go to ``DIR/gpu_check.json`` and a table on stdout; a section that fails is reported and the rest still run.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import platform
import statistics
import tempfile
import time
import traceback
from pathlib import Path

import torch

import _common  # noqa: F401,E402  (first: puts src/ on sys.path in a checkout without the editable install)

import transformers  # noqa: E402

from helpers.core.hardware import autocast_context, cpu_info, resolve_precision  # noqa: E402
from helpers.data.corpora import load_tinystories  # noqa: E402
from helpers.data.masking import MaskedBlocks, TokenIds, mlm_loss  # noqa: E402
from helpers.data.tokenizers import train_tokenizer  # noqa: E402
from helpers.evaluation.finetune import finetune_task  # noqa: E402
from helpers.evaluation.finetune_setup import FinetuneConfig  # noqa: E402
from helpers.evaluation.lm_scoring import causal_scores  # noqa: E402
from helpers.evaluation.zero_shot import evaluate_saved  # noqa: E402
from helpers.evaluation.minimal_pairs import load_blimp  # noqa: E402
from helpers.generation.completions import cached_completions, generate, make_prompts  # noqa: E402
from helpers.generation.decoding import Decoding  # noqa: E402
from helpers.models import decoder  # noqa: E402
from helpers.models.decoder import DecoderSpec, build_decoder, flops_per_token  # noqa: E402
from helpers.models.ltg_bert import LtgBertForMaskedLM, ltg_bert_config  # noqa: E402
from helpers.training.loop import TrainConfig, lm_loss, train  # noqa: E402
from helpers.training.optim import Lamb, param_groups  # noqa: E402
from helpers.training.recipes import encode_blocks, train_decoder  # noqa: E402

ROWS: list[dict] = []
IDS = dict(bos_token_id=0, eos_token_id=0, pad_token_id=0)  # inside every vocabulary (random-weight models)


def row(section: str, what: str, value, baseline=None, ratio=None, note: str = "") -> None:
    r = {"section": section, "what": what, "value": value, "baseline": baseline, "ratio": ratio, "note": note}
    ROWS.append(r)
    print(f"[{section}] {what}: {value}" + (f"  (baseline {baseline}, ratio {ratio})" if baseline is not None else "")
          + (f"  {note}" if note else ""), flush=True)


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().cpu(), b.double().cpu()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a.double().flatten().cpu(), b.double().flatten().cpu(), dim=0))


def grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().float().cpu().clone() for n, p in model.named_parameters() if p.grad is not None}


# ----------------------------------------------------------------------------- 1. decoder numerics


def decoder_numerics(a, spec: DecoderSpec) -> None:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, spec.vocab_size, (4, spec.context), generator=g)
    base = build_decoder(spec, seed=0, fast=False, **IDS).float()
    ref = copy.deepcopy(base).eval()  # HF eager, CPU, fp32: the reference
    out = ref(input_ids=ids, labels=ids, use_cache=False)
    out.loss.backward()
    ref_loss, ref_logits, ref_grads = float(out.loss.detach()), out.logits.detach(), grads(ref)

    ours = decoder.enable_fast_attention(copy.deepcopy(base)).to(a.device).eval()
    o = ours(input_ids=ids.to(a.device), labels=ids.to(a.device), use_cache=False)
    o.loss.backward()
    row("decoder numerics", "fast fp32 on device vs HF eager fp32 on CPU: |loss diff|", f"{abs(float(o.loss.detach()) - ref_loss):.2e}",
        note=f"loss {ref_loss:.5f}")
    row("decoder numerics", "  logits relative error", f"{rel_err(o.logits.detach(), ref_logits):.2e}", note="fp32: expect < 1e-4")
    worst = min(cosine(gr, ref_grads[n]) for n, gr in grads(ours).items() if gr.dim() == 2)
    row("decoder numerics", "  worst weight-gradient cosine", f"{worst:.6f}", note="expect > 0.9999")

    fp32 = {}
    for precision in ("fp32", "bf16"):
        m = decoder.enable_fast_attention(copy.deepcopy(base)).to(a.device).train()
        for mod in m.modules():  # compare the arithmetic, not dropout draws
            if isinstance(mod, torch.nn.Dropout):
                mod.p = 0.0
        with autocast_context(precision, a.device)():
            loss = lm_loss(m, {"input_ids": ids.to(a.device)})
        loss.float().backward()
        fp32.setdefault("loss", {})[precision] = float(loss.detach())
        fp32.setdefault("grads", {})[precision] = grads(m)
    lf, lb = fp32["loss"]["fp32"], fp32["loss"]["bf16"]
    row("decoder numerics", "bf16 autocast vs fp32 on device: relative loss diff", f"{abs(lb - lf) / lf:.2e}", note="expect < 2e-2")
    worst = min(cosine(gr, fp32["grads"]["fp32"][n]) for n, gr in fp32["grads"]["bf16"].items() if gr.dim() == 2)
    row("decoder numerics", "  worst weight-gradient cosine", f"{worst:.4f}", note="expect > 0.98")


# ----------------------------------------------------------------------------- 2. decoder training-step throughput


def step_time(model, loss_fn, batches, device, precision: str, warmup: int, repeats: int, optimizer=None) -> float:
    """Median seconds of one training step (forward, backward, clip, optimizer step) over ``repeats``."""
    opt = optimizer or torch.optim.AdamW(param_groups(model, 0.1), lr=1e-4, betas=(0.9, 0.95))
    autocast = autocast_context(precision, device)
    times = []
    for i in range(warmup + repeats):
        b = {k: v.to(device, non_blocking=True) for k, v in batches[i % len(batches)].items()}
        sync(device)
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = loss_fn(model, b)
        loss.float().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        sync(device)
        if i >= warmup:
            times.append(time.perf_counter() - t)
    if not math.isfinite(float(loss.detach())):
        raise RuntimeError(f"non-finite loss {float(loss.detach())}")
    return statistics.median(times)


def decoder_throughput(a, spec: DecoderSpec) -> float:
    g = torch.Generator().manual_seed(2)
    micro = a.micro
    batches = [{"input_ids": torch.randint(0, spec.vocab_size, (micro, spec.context), generator=g)} for _ in range(3)]
    tokens = micro * spec.context
    results = {}
    variants = [("HF eager fp32, dropout 0", False, "fp32", 0.0, True),
                ("fast fp32, dropout 0", True, "fp32", 0.0, True),
                ("fast bf16, dropout 0", True, "bf16", 0.0, True),
                ("fast bf16, dropout 0.5 (SDPA dropout)", True, "bf16", 0.5, True),
                ("fast bf16, dropout 0.5 (blocked CPU path)", True, "bf16", 0.5, False),
                ("HF eager bf16, dropout 0.5", False, "bf16", 0.5, True)]
    for name, fast, precision, p, sdpa in variants:
        if precision == "bf16" and resolve_precision("auto", a.device) != "bf16":
            continue
        m = build_decoder(dataclasses.replace(spec, dropout=p), seed=0, fast=fast, **IDS).to(a.device).train()
        decoder.SDPA_DROPOUT_ON_GPU = sdpa
        try:
            s = step_time(m, lm_loss, batches, a.device, precision, a.warmup, a.repeats)
        finally:
            decoder.SDPA_DROPOUT_ON_GPU = True
        results[name] = tokens / s
        del m
        if torch.device(a.device).type == "cuda":
            torch.cuda.empty_cache()
    base = results["HF eager fp32, dropout 0"]
    flops = flops_per_token(decoder.gpt_neo_config(spec, **IDS))
    for name, tps in results.items():
        row("decoder step", f"{name}: tokens/s", f"{tps:,.0f}", f"{base:,.0f}", f"{tps / base:.2f}x",
            note=f"{tps * flops / 1e12:.1f} TFLOP/s")
    if "fast bf16, dropout 0.5 (SDPA dropout)" in results:
        sd, bl = results["fast bf16, dropout 0.5 (SDPA dropout)"], results["fast bf16, dropout 0.5 (blocked CPU path)"]
        row("decoder step", "SDPA dropout vs blocked path, bf16 p=0.5", f"{sd:,.0f}", f"{bl:,.0f}", f"{sd / bl:.2f}x")
    best = max(v for k, v in results.items() if "fast" in k and "blocked" not in k and "0.5" in k) \
        if any("0.5" in k and "fast" in k for k in results) else max(results.values())
    hours = decoder.PAPER_TRAIN_TOKENS / best / 3600
    row("decoder step", "one paper decoder (15,000 × 768 × 512 tokens, dropout 0.5) on this device", f"{hours:.1f} h")
    return best


# ----------------------------------------------------------------------------- 3. a real run through the project's code


def real_run(a, spec: DecoderSpec, work: Path) -> None:
    t0 = time.perf_counter()
    stories = list(load_tinystories("tinystories/v1_train_prefix_2MiB.txt.gz").stories)
    stories += list(load_tinystories("tinystories/v2_train_prefix_10k_lines.txt.gz").stories)
    held, train_texts = stories[:300], stories[300:]
    tok = train_tokenizer(train_texts, "decoder", vocab_size=spec.vocab_size)
    train_data = encode_blocks(tok, train_texts, spec.context, seed=0)
    valid_data = encode_blocks(tok, held, spec.context, max_blocks=64)
    row("real run", "tokenizer + blocks", f"{len(train_data)} blocks of {spec.context}, vocab {len(tok)}",
        note=f"{time.perf_counter() - t0:.0f} s")
    spec = dataclasses.replace(spec, vocab_size=len(tok), dropout=0.1)
    cfg = TrainConfig(steps=a.real_steps, batch_size=a.real_batch, micro_batch=a.micro, lr=1e-3, min_lr=1e-4,
                      warmup=0.05, weight_decay=0.1, eval_every=max(1, a.real_steps // 4),
                      save_every=max(1, a.real_steps // 4), log_every=10, precision="auto")
    t0 = time.perf_counter()
    res = train_decoder("gpu-check", train_data, valid_data, tok, spec, cfg, work / "decoder", progress=False,
                        log=lambda *_: None)
    secs = time.perf_counter() - t0
    hist = [json.loads(line) for line in (work / "decoder" / "metrics.jsonl").read_text().splitlines()]
    tr = [h for h in hist if h["split"] == "train"]
    va = [(h["step"], round(h["loss"], 3)) for h in hist if h["split"] == "valid"]
    row("real run", f"train_decoder, {a.real_steps} steps × {a.real_batch} × {spec.context}, precision "
        f"{resolve_precision('auto', a.device)}", f"train loss {tr[0]['loss']:.2f} -> {tr[-1]['loss']:.2f}",
        note=f"valid {va}; {secs:.0f} s, {statistics.median(h['tokens_per_s'] for h in (tr[1:] or tr)):,.0f} tokens/s")
    if res.best_valid_loss >= tr[0]["loss"]:
        raise RuntimeError(f"the run did not learn: best valid {res.best_valid_loss} vs first train loss {tr[0]['loss']}")

    # the saved model as a transformers user loads it, on the device and on the CPU
    best = work / "decoder" / "best"
    gpu_m = transformers.AutoModelForCausalLM.from_pretrained(best).to(a.device).eval()
    cpu_m = transformers.AutoModelForCausalLM.from_pretrained(best).eval()
    eot = tok.convert_tokens_to_ids("<|endoftext|>")
    prompts = [ids[: max(1, min(len(ids) // 4, spec.context // 4))] for ids in (tok(s)["input_ids"] for s in held[:16])]
    outs = {}
    for name, m in (("device", gpu_m), ("cpu", cpu_m)):
        decoder.enable_fast_attention(m)
        outs[name] = generate(m, prompts, Decoding("greedy"), eot, max_new_tokens=64, batch_size=16)
    same = sum(o[0] == c[0] for o, c in zip(outs["device"], outs["cpu"]))
    agree = statistics.mean(_prefix_share(o[0], c[0]) for o, c in zip(outs["device"], outs["cpu"]))
    row("real run", "greedy continuations, device vs CPU: identical", f"{same}/16",
        note=f"mean share of tokens before the first difference {agree:.2f} (fp32 both; ties in logits can flip)")
    print("  sample (device, greedy):", tok.decode(prompts[0]) + " ||| " + tok.decode(outs["device"][0][0]), flush=True)
    nuc = generate(gpu_m, prompts[:4], Decoding("nucleus", k=2), eot, max_new_tokens=64, seed=3)
    print("  sample (device, nucleus):", tok.decode(nuc[0][1]), flush=True)

    items = load_blimp(limit_per_task=a.blimp_per_task, seed=0)
    reqs = [(None, it.good) for it in items] + [(None, it.bad) for it in items]
    s_dev, _ = causal_scores(gpu_m, tok, reqs, batch_size=128)
    s_cpu, _ = causal_scores(cpu_m, tok, reqs, batch_size=128)
    n = len(items)
    acc = lambda s: float((s[:n] > s[n:]).mean() * 100)  # noqa: E731
    row("real run", f"BLiMP log-probs ({n} pairs), device vs CPU: max |diff| nats", f"{float(abs(s_dev - s_cpu).max()):.2e}",
        note=f"accuracy device {acc(s_dev):.1f} vs CPU {acc(s_cpu):.1f}")

    # an interrupted run resumed on the device against an uninterrupted one
    small = dataclasses.replace(spec, hidden=256, heads=8)
    rcfg = TrainConfig(steps=20, batch_size=16, micro_batch=8, lr=1e-3, warmup=2, eval_every=10, save_every=5,
                       log_every=1, precision="auto")
    finals = {}
    for name, stop in (("uninterrupted", None), ("resumed", 12)):
        m = build_decoder(small, seed=0, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot)
        out = work / f"resume-{name}"
        if stop is not None:
            train(m, train_data, valid_data, out, rcfg, tok, progress=False, stop_after=stop)
            m = build_decoder(small, seed=0, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot)
        r = train(m, train_data, valid_data, out, rcfg, tok, progress=False)
        finals[name] = (r.final_valid_loss, r.resumed_from)
    d = abs(finals["uninterrupted"][0] - finals["resumed"][0])
    row("real run", "resume on device: |final valid loss diff| (resumed at step "
        f"{finals['resumed'][1]} of 20)", f"{d:.2e}", note="bitwise on CPU; GPU kernels may differ in the last bits")
    pipeline(a, best, tok, train_texts, held, work)


def pipeline(a, decoder_dir: Path, dec_tok, train_texts, held, work: Path) -> None:
    """The notebooks' helpers as they run on the paper profile, with ``device="auto"``: D_gen-style completions
    (``cached_completions``), zero-shot scoring of a saved decoder and a saved encoder (``evaluate_saved``) and GLUE
    fine-tuning (``finetune_task``), each against the CPU where a comparison means something."""
    source = [" ".join(t.split()[:50]) for t in held] if a.tiny else held  # tiny: stories that fit a 64-token context
    prompts = make_prompts(source, n=64, frac=(0.15, 0.30), seed=0)
    timings = {}
    for device in ("auto", "cpu"):
        t = time.perf_counter()
        r = evaluate_saved(decoder_dir, "causal", tasks=("blimp",), limit_per_task=a.blimp_per_task, progress=False,
                           log=lambda *_: None, device=device)
        timings[device] = (time.perf_counter() - t, float(r.summary["task"]["accuracy"].iloc[0]))
    row("pipeline", "evaluate_saved(decoder, blimp), device auto vs cpu: seconds", f"{timings['auto'][0]:.1f}",
        f"{timings['cpu'][0]:.1f}", f"{timings['cpu'][0] / timings['auto'][0]:.1f}x faster",
        note=f"accuracy {timings['auto'][1]:.2f} vs {timings['cpu'][1]:.2f}")

    # completions as notebook 03 makes D_gen: the model is loaded and moved by cached_completions itself
    t = time.perf_counter()
    rows = cached_completions(work / "gen.jsonl", decoder_dir, prompts, Decoding("nucleus", k=2),
                              model_name="gpu-check", max_new_tokens=128, progress=False, log=lambda *_: None)
    row("pipeline", f"cached_completions, {len(prompts)} prompts × 2 nucleus samples", f"{len(rows)} rows",
        note=f"{time.perf_counter() - t:.1f} s")

    # an encoder saved as notebook 04 saves it (random weights: this checks the path, not the accuracy)
    enc_tok = train_tokenizer(train_texts[:5000], "encoder", vocab_size=a.enc_vocab)
    enc_dir = work / "encoder"
    torch.manual_seed(0)
    LtgBertForMaskedLM(ltg_bert_config(a.enc_preset, len(enc_tok))).save_pretrained(enc_dir)
    enc_tok.save_pretrained(enc_dir)
    timings = {}
    for device in ("auto", "cpu"):
        t = time.perf_counter()
        r = evaluate_saved(enc_dir, "mlm", tasks=("blimp",), limit_per_task=max(2, a.blimp_per_task // 5),
                           progress=False, log=lambda *_: None, device=device)
        timings[device] = (time.perf_counter() - t, torch.tensor([x["score_good"] for x in r.rows], dtype=torch.float64))
    row("pipeline", "evaluate_saved(encoder, blimp PLL), device auto vs cpu: seconds", f"{timings['auto'][0]:.1f}",
        f"{timings['cpu'][0]:.1f}", f"{timings['cpu'][0] / timings['auto'][0]:.1f}x faster",
        note=f"max |PLL diff| {float((timings['auto'][1] - timings['cpu'][1]).abs().max()):.1e} nats")

    cfg = FinetuneConfig(epochs=2, max_train_examples=a.ft_examples, max_eval_examples=a.ft_examples // 2)
    for name, folder in (("decoder", decoder_dir), ("encoder", enc_dir)):
        t = time.perf_counter()
        res = finetune_task(folder, "mrpc", cfg, log=lambda *_: None, progress=False)
        row("pipeline", f"finetune_task({name}, mrpc), {a.ft_examples} examples × 2 epochs, device auto",
            f"{res.get('metric')} {res.get('score'):.3f}", note=f"{time.perf_counter() - t:.1f} s")


def _prefix_share(a: list[int], b: list[int]) -> float:
    n = max(len(a), len(b), 1)
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return k / n


# ----------------------------------------------------------------------------- 4. encoder


def encoder_check(a) -> None:
    vocab = a.enc_vocab
    cfg = ltg_bert_config(a.enc_preset, vocab)
    tok = TokenIds(vocab_size=vocab, mask_id=4, cls_id=1, sep_id=2, pad_id=3, special_ids=(0, 1, 2, 3, 4, 5))
    g = torch.Generator().manual_seed(5)

    def blocks(n, length):
        body = torch.randint(6, vocab, (n, length - 2), generator=g)
        return MaskedBlocks(torch.cat([torch.full((n, 1), 1), body, torch.full((n, 1), 2)], 1), tok, seed=0)

    torch.manual_seed(0)
    base = LtgBertForMaskedLM(cfg).train()
    for mod in base.modules():
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0
    data = blocks(8, 128)
    b = data.batch(0, 8)
    losses, gr = {}, {}
    for where, precision in (("cpu", "fp32"), (a.device, "fp32"), (a.device, "bf16")):
        if precision == "bf16" and resolve_precision("auto", a.device) != "bf16":
            continue
        m = copy.deepcopy(base).to(where)
        with autocast_context(precision, where)():
            loss = mlm_loss(m, {k: v.to(where) for k, v in b.items()})
        loss.float().backward()
        losses[(where, precision)], gr[(where, precision)] = float(loss.detach()), grads(m)
    ref = losses[("cpu", "fp32")]
    row("encoder numerics", "LTG-BERT fp32 device vs CPU: |loss diff|", f"{abs(losses[(a.device, 'fp32')] - ref):.2e}",
        note=f"loss {ref:.4f}")
    worst = min(cosine(g2, gr[("cpu", "fp32")][n]) for n, g2 in gr[(a.device, "fp32")].items() if g2.dim() == 2)
    row("encoder numerics", "  worst weight-gradient cosine", f"{worst:.6f}")
    if (a.device, "bf16") in losses:
        lb = losses[(a.device, "bf16")]
        row("encoder numerics", "bf16 vs fp32 on device: relative loss diff", f"{abs(lb - ref) / ref:.2e}")
        worst = min(cosine(g2, gr[(a.device, "fp32")][n]) for n, g2 in gr[(a.device, "bf16")].items() if g2.dim() == 2)
        row("encoder numerics", "  worst weight-gradient cosine", f"{worst:.4f}")

    results = {}
    for length, micro in ((128, a.enc_micro), (512, max(1, a.enc_micro // 4))):
        data = blocks(micro * 3, length)
        batches = [data.batch(s, micro) for s in range(3)]
        for precision in ("fp32", "bf16"):
            if precision == "bf16" and resolve_precision("auto", a.device) != "bf16":
                continue
            torch.manual_seed(0)
            m = LtgBertForMaskedLM(cfg).to(a.device).train()
            opt = Lamb(param_groups(m, 0.1), lr=1e-3, betas=(0.9, 0.98), eps=1e-6)
            s = step_time(m, mlm_loss, batches, a.device, precision, a.warmup, a.repeats, optimizer=opt)
            results[(length, precision)] = micro * length / s
            del m, opt
    for (length, precision), tps in results.items():
        base_tps = results[(length, "fp32")]
        row("encoder step", f"LTG-BERT {a.enc_preset}, blocks of {length}, {precision}: tokens/s", f"{tps:,.0f}",
            f"{base_tps:,.0f}", f"{tps / base_tps:.2f}x")
    prec = "bf16" if (128, "bf16") in results else "fp32"
    # params/paper/04: 15,625 steps × 256 × 128 tokens; the last 10 % as blocks of 512 with a quarter of the batch
    tokens = 15_625 * 256 * 128
    hours = (0.9 * tokens / results[(128, prec)] + 0.1 * tokens / results[(512, prec)]) / 3600
    row("encoder step", f"one paper encoder (15,625 steps × 256 × 128 tokens, {prec}) on this device", f"{hours:.1f} h")


# ----------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="small shapes and few steps (a dry run on a CPU)")
    ap.add_argument("--out", default=None, help="folder for gpu_check.json (default: a temporary folder)")
    ap.add_argument("--sections", default="numerics,step,real,encoder")
    a = ap.parse_args()
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: pass --device cpu --tiny for a dry run")
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 in the comparisons
    torch.backends.cudnn.allow_tf32 = False
    if a.tiny:
        spec = DecoderSpec(hidden=64, layers=2, heads=4, context=64, window=32, vocab_size=512)
        a.micro, a.warmup, a.repeats, a.real_steps, a.real_batch, a.blimp_per_task = 4, 1, 2, 8, 8, 2
        a.enc_preset, a.enc_vocab, a.enc_micro, a.ft_examples = "smoke", 512, 8, 32
    else:
        spec = DecoderSpec(**decoder.PRESETS["berttime-paper"], dropout=0.0)
        a.micro, a.warmup, a.repeats, a.real_steps, a.real_batch, a.blimp_per_task = 32, 3, 10, 300, 64, 50
        a.enc_preset, a.enc_vocab, a.enc_micro, a.ft_examples = "base", 16_384, 64, 1024
    env = {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version(),
           "cpu": cpu_info()["label"], "device": a.device}
    if a.device.startswith("cuda"):
        p = torch.cuda.get_device_properties(0)
        env.update(gpu=p.name, gpu_memory_gib=round(p.total_memory / 2**30, 1), sms=p.multi_processor_count,
                   cuda=torch.version.cuda, bf16=torch.cuda.is_bf16_supported())
    print(json.dumps(env), flush=True)
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="gpu_check_"))
    out.mkdir(parents=True, exist_ok=True)
    failures = []
    sections = {"numerics": lambda w: decoder_numerics(a, spec), "step": lambda w: decoder_throughput(a, spec),
                "real": lambda w: real_run(a, spec, w), "encoder": lambda w: encoder_check(a)}
    for name in a.sections.split(","):
        t = time.perf_counter()
        try:
            with tempfile.TemporaryDirectory() as work:
                sections[name](Path(work))
        except Exception:  # noqa: BLE001 - report and go on with the next section
            failures.append(name)
            traceback.print_exc()
            row(name, "FAILED", traceback.format_exc(limit=3).splitlines()[-1])
        print(f"== section {name}: {time.perf_counter() - t:.0f} s", flush=True)
        (out / "gpu_check.json").write_text(json.dumps({"env": env, "rows": ROWS, "failures": failures}, indent=1))
    print("\n| section | what | value | baseline | ratio |\n|---|---|---|---|---|")
    for r in ROWS:
        print(f"| {r['section']} | {r['what']} | {r['value']} | {r['baseline'] or ''} | {r['ratio'] or ''} |")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
