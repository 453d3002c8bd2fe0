"""Self-distillation against loops (a prototype that did not work): fine-tune a plain decoder on its own greedy
continuations decoded with n-gram blocking, keeping only the healthy ones, then score notebook 03's targets.

The idea: the repetition phase of notebook 02 (sequence-level unlikelihood) cuts the loops but moves probability to
the tail (``sampling.py``). Here the model is instead trained, by plain next-token loss, on continuations it would
write itself if it could not repeat: greedy decoding where any token that would repeat an ``--ngram``-token run of
the prompt + continuation is banned, kept only when it ends with ``<|endoftext|>`` and contains no repeated 6-word
run (notebook 03's loop test). The loss is taken on the continuation tokens, beside the next-token loss on
``--mle`` training blocks, at a constant learning rate; probes as in the repetition phase (64 official-validation
prompts every 25 steps). Both the last step and the healthiest probe are scored on notebook 03's 300 prompts.

    .venv/bin/python benchmarks/recipe.py --recipes profile     # notebook 02's plain tiny-1M decoder (once)
    .venv/bin/python benchmarks/self_distill.py                 # runs/cpu/distill/<name>/
"""
from __future__ import annotations

import argparse
import copy
import json
import random
import time

import torch
import torch.nn.functional as F

import _common  # noqa: F401  (first: puts src/ on sys.path in a checkout without the editable install)

from helpers.core import config  # noqa: E402
from helpers.core.hardware import autocast_context, cpu_info, resolve_precision  # noqa: E402
from helpers.data.corpus_files import read_corpus  # noqa: E402
from helpers.data.tokenizers import end_of_text_id  # noqa: E402
from helpers.training import unlikelihood as U  # noqa: E402
from helpers.data.text_stats import repeated_run  # noqa: E402
from helpers.models.decoder import cache_kwarg, context_length, load_decoder, output_cache  # noqa: E402
from helpers.training.loop import lm_loss  # noqa: E402
from helpers.training.optim import param_groups  # noqa: E402
from recipe import RECIPES, recipe_dir, run_recipe, target_scores  # noqa: E402


@torch.inference_mode()
def blocked_greedy(model, prompts: list[list[int]], eot: int, n: int, max_new: int = 256, batch: int = 64) -> list[list[int]]:
    """Greedy continuations (ids, ending with ``eot`` when the model ended) in which no ``n``-token run of the
    prompt + continuation occurs twice: the tokens that would complete a repeat are banned at each step."""
    ctx = context_length(model)
    out: list = [None] * len(prompts)
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    for s in range(0, len(order), batch):
        idx = order[s: s + batch]
        seqs = [[eot, *prompts[i]] for i in idx]
        L = max(len(x) for x in seqs)
        ids = torch.full((len(idx), L), eot)
        mask = torch.zeros((len(idx), L), dtype=torch.long)
        for r, x in enumerate(seqs):
            ids[r, L - len(x):], mask[r, L - len(x):] = torch.tensor(x), 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        o = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
        cache, logits, last = output_cache(o), o.logits[:, -1].float(), pos[:, -1]
        gen: list[list[int]] = [[] for _ in idx]
        done = [False] * len(idx)
        for _ in range(min(max_new, ctx - L)):
            nxt = []
            for r, x in enumerate(seqs):
                if done[r]:
                    nxt.append(eot)
                    continue
                key = tuple(x[-(n - 1):])
                banned = {x[j + n - 1] for j in range(len(x) - n + 1) if tuple(x[j: j + n - 1]) == key}
                if banned:
                    logits[r, sorted(banned)] = -float("inf")
                t = int(logits[r].argmax())
                x.append(t), gen[r].append(t), nxt.append(t)
                done[r] = t == eot
            if all(done):
                break
            mask = torch.cat([mask, torch.ones((len(idx), 1), dtype=mask.dtype)], 1)
            last = last + 1
            o = model(input_ids=torch.tensor(nxt)[:, None], attention_mask=mask, position_ids=last[:, None],
                      use_cache=True, **cache_kwarg(model, cache))
            cache, logits = output_cache(o), o.logits[:, -1].float()
        for r, i in enumerate(idx):
            out[i] = gen[r]
    return out


def continuation_loss(model, pairs: list, eot: int) -> torch.Tensor:
    """Mean next-token loss on the continuation tokens of ``[eot] + prompt + continuation`` (right-padded)."""
    L = max(1 + len(p) + len(c) for p, c in pairs)
    ids = torch.full((len(pairs), L), eot)
    labels = torch.full((len(pairs), L), -100)
    for r, (p, c) in enumerate(pairs):
        x = [eot, *p, *c]
        ids[r, : len(x)] = torch.tensor(x)
        labels[r, 1 + len(p): len(x)] = torch.tensor(c)
    logits = model(input_ids=ids).logits[:, :-1]
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1), ignore_index=-100)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--budget", default="tiny-1M")
    ap.add_argument("--source", default="profile", help="the recipe of benchmarks/recipe.py whose decoder is fine-tuned")
    ap.add_argument("--name", default="ngram6")
    ap.add_argument("--ngram", type=int, default=6, help="tokens of the run that may not repeat while decoding")
    ap.add_argument("--prompts", type=int, default=1024, help="training-story prompts decoded for targets")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--mle", type=int, default=16, help="training blocks of next-token loss per step (0: none)")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args(argv)
    config.set_threads(a.threads or None)
    src = recipe_dir(a.profile, a.budget, a.source)
    if not (src / "train_state.json").is_file():
        raise SystemExit(f"no finished decoder in {src}: run benchmarks/recipe.py --recipes {a.source}")
    _, run = run_recipe(a.profile, a.budget, a.source, RECIPES[a.source][1], train_missing=False)
    tok, out = run.tokenizer, config.run_dir(a.profile) / "distill" / a.budget / a.name
    out.mkdir(parents=True, exist_ok=True)
    eot = end_of_text_id(tok)
    settings = {**config.load_params(a.profile, "02")["repetition_finetune"], "seed": a.seed}
    cfg = U.UnlikelihoodConfig(**settings)
    data = config.run_dir(a.profile) / "data"
    prompts, probes = U.phase_prompts(read_corpus(data / f"{a.budget}.jsonl"), read_corpus(data / "tiny-valid.jsonl"), cfg)
    prompts = random.Random(a.seed).sample(prompts, min(a.prompts, len(prompts)))
    model = load_decoder(src / "best").eval()
    t0 = time.time()
    cached = out / f"targets-n{a.ngram}-p{a.prompts}-s{a.seed}.json"
    if cached.is_file():
        targets = json.loads(cached.read_text())
    else:
        ids = [tok(p.prompt).input_ids for p in prompts]
        conts = blocked_greedy(model, ids, eot, a.ngram)
        targets = [[p, c] for p, c in zip(ids, conts)
                   if c and c[-1] == eot and not repeated_run(tok.decode([t for t in c if t != eot]), cfg.loop_words)]
        cached.write_text(json.dumps(targets))
    print(f"[{a.name}] targets: {len(targets)} healthy of {len(prompts)} blocked-greedy continuations "
          f"({time.time() - t0:.0f} s)", flush=True)
    autocast = autocast_context(resolve_precision(run.cfg.precision, torch.device("cpu")), torch.device("cpu"))
    opt = torch.optim.AdamW(param_groups(model, run.cfg.weight_decay), lr=a.lr, betas=tuple(run.cfg.betas))
    probe_ids = [tok(p.prompt).input_ids for p in probes][: cfg.probe_prompts]
    history = [{"step": 0, **U.probe(model, probe_ids, tok, run.valid_data, cfg)}]
    best_row, best_state = history[0], copy.deepcopy(model.state_dict())
    for step in range(a.steps):
        rng = random.Random(a.seed * 1_000_003 + step)
        pairs = [targets[i] for i in rng.sample(range(len(targets)), a.batch)]
        model.train()
        with autocast():
            loss = continuation_loss(model, pairs, eot)
            if a.mle:
                loss = loss + lm_loss(model, run.train_data.batch(step, a.mle))
        opt.zero_grad(set_to_none=True)
        loss.float().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (step + 1) % cfg.probe_every == 0 or step + 1 == a.steps:
            row = {"step": step + 1, **U.probe(model, probe_ids, tok, run.valid_data, cfg)}
            history.append(row)
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
            if U.healthier_probe(row, best_row):
                best_row, best_state = row, copy.deepcopy(model.state_dict())
    model.eval()
    rows = []
    for label, state in (("last step", None), ("healthiest probe", best_state)):
        if state is not None:
            model.load_state_dict(state)
        folder = out / label.replace(" ", "-")
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
        rows.append({"model": label, **target_scores(a.profile, folder, folder / "targets")})
    rows.insert(0, {"model": "plain (source)", **target_scores(a.profile, src / "best", src / "targets")})
    import pandas as pd

    cpu = cpu_info()
    print(f"\n{a.budget}, CPU: {cpu['label']}, {torch.get_num_threads()} threads; n-gram {a.ngram}, {a.steps} steps x "
          f"{a.batch} targets + {a.mle} blocks, lr {a.lr}, seed {a.seed}; kept probe step {best_row['step']}; "
          f"{(time.time() - t0) / 60:.1f} min")
    print(pd.DataFrame(rows).to_string(index=False))
    print(pd.DataFrame(history).round(3).to_string(index=False))


if __name__ == "__main__":
    main()
