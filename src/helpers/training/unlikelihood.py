"""Repetition fine-tuning: sequence-level unlikelihood training (Welleck et al. 2020, "Neural Text Generation with
Unlikelihood Training") of a trained decoder, so that its greedy continuations stop looping
(``docs/methods.md#repetition-fine-tuning``).

Each step completes a batch of training-story prompts greedily (no gradient), marks every token of the
continuation that lies in an ``ngram``-token run seen earlier in that continuation, and lowers the probability the
model gives those tokens (``-log(1 - p)``), beside the ordinary next-token loss on a batch of training blocks. Every
``probe_every`` steps the model completes held-out prompts greedily: the checkpoint with the most healthy
continuations (ended with ``<|endoftext|>``, no loop; ties: the lower held-out loss) is kept, the starting model
included, so the phase can never make the probe worse. :func:`finetune_decoder` runs the phase on a decoder of notebook 02 in place: the model the study
uses stays ``<decoder>/best`` (the fine-tuned one), the best-validation model of plain training moves to
``<decoder>/mle-best``.
"""
from __future__ import annotations

import copy
import math
import random
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

import torch

from helpers.core.artifacts import atomic_path, fingerprint, read_json, stamp_model_folder, write_json
from helpers.core.config import model_folder_problem, shown_path
from helpers.core.hardware import autocast_context, compute_device, resolve_precision
from helpers.core.parallel import run_jobs
from helpers.core.progress import progress as progress_bar
from helpers.core.seeding import seed_everything
from helpers.core.stats import wilson_interval
from helpers.data.blocks import PackedBlocks
from helpers.data.corpus_files import read_corpus
from helpers.data.text_stats import repeated_run
from helpers.data.tokenizers import end_of_text_id, save_for_model
from helpers.generation import completions as G  # rollouts and probes: the one batched decoding loop (against the flow)
from helpers.generation.decoding import Decoding
from helpers.models.decoder import load_decoder
from helpers.training.loop import evaluate, lm_loss
from helpers.training.model_card import finetuned_card, provenance
from helpers.training.optim import param_groups

GREEDY = Decoding("greedy")
MARKER = "unlikelihood.json"  # in the decoder's folder: the finished phase's fingerprint and probe history
SCHEDULES = ("constant", "cosine")


@dataclass(frozen=True)
class UnlikelihoodConfig:
    """One repetition fine-tuning phase; ``steps: 0`` turns it off (the paper profile)."""

    steps: int = 0
    batch_size: int = 32  # prompts completed (and penalised) per step
    rollout_tokens: int = 128  # new tokens per greedy rollout
    ngram: int = 4  # a token is penalised when it lies in a run of this many tokens seen earlier in the rollout
    alpha: float = 1.0  # weight of the unlikelihood term beside the next-token loss
    token_alpha: float = 0.0  # weight of token-level unlikelihood on the training blocks (0: plain next-token loss)
    lr: float = 5e-5  # AdamW with the decoder's betas and weight decay
    schedule: str = "constant"  # "constant" lr, or "cosine": from ``lr`` down to 0 at ``steps``
    mle_batch: int = 16  # training blocks of the next-token loss per step
    probe_every: int = 25
    probe_prompts: int = 64  # held-out prompts completed greedily at each probe
    probe_tokens: int = 256
    patience: int = 0  # stop once this many probes in a row were no better than the best so far (0: never stop early)
    loop_words: int = 6  # a probe continuation loops when a run of this many words repeats (notebook 03's rule)
    prompt_frac: tuple[float, float] = (0.15, 0.30)  # prompts: stories cut as notebook 03 cuts them
    min_words: int = 20
    max_words: int = 300
    seed: int = 0

    def __post_init__(self):
        if self.steps < 0 or self.batch_size < 1 or self.rollout_tokens < 1 or self.ngram < 1 or self.mle_batch < 0:
            raise ValueError(f"invalid repetition fine-tuning config: {self}")
        if (self.alpha < 0 or self.token_alpha < 0 or self.lr <= 0 or self.probe_every < 1 or self.probe_prompts < 1
                or self.probe_tokens < 1 or self.patience < 0):
            raise ValueError(f"invalid repetition fine-tuning config: {self}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown repetition fine-tuning schedule {self.schedule!r}; one of {SCHEDULES}")
        object.__setattr__(self, "prompt_frac", tuple(self.prompt_frac))  # a params file gives a list


@dataclass
class UnlikelihoodResult:
    name: str
    steps: int
    chosen_step: int
    seconds: float
    history: list[dict] = field(default_factory=list)  # one row per probe: step, ended, loops, valid loss
    stopped_early: bool = False  # ``steps`` is then the step of the last probe, before ``cfg.steps``

    def probe(self, step: int) -> dict:
        return next(h for h in self.history if h["step"] == step)

    @property
    def before(self) -> dict:
        return self.probe(0)

    @property
    def after(self) -> dict:
        return self.probe(self.chosen_step)


def phase_lr(cfg: UnlikelihoodConfig, step: int) -> float:
    """The learning rate of step ``step`` (0-based) of the phase: ``cfg.lr`` throughout, or a cosine from ``cfg.lr``
    at step 0 towards 0 at ``cfg.steps``."""
    if cfg.schedule == "constant" or cfg.steps <= 0:
        return cfg.lr
    return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * min(step, cfg.steps) / cfg.steps))


def repeated_ngram_mask(ids: Sequence[int], n: int) -> list[bool]:
    """``mask[i]`` is True when token ``i`` lies in a run of ``n`` tokens that already occurred earlier in ``ids``
    (the candidates of sequence-level unlikelihood: every token of a repeated n-gram, from its second occurrence)."""
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    mask, seen = [False] * len(ids), set()
    for i in range(len(ids) - n + 1):
        gram = tuple(ids[i : i + n])
        if gram in seen:
            mask[i : i + n] = [True] * n
        seen.add(gram)
    return mask


def unlikelihood_loss(model, prompts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]], n: int,
                      pad_id: int) -> tuple[torch.Tensor, int]:
    """Mean ``-log(1 - p(token))`` over the continuation tokens in repeated ``n``-grams
    (:func:`repeated_ngram_mask`), ``p`` from ``model`` reading prompt + continuation; and the number of such tokens
    (the loss is 0 when there is none). Prompts include their leading ``<|endoftext|>``."""
    seqs = [list(p) + list(c) for p, c in zip(prompts, continuations)]
    width = max(len(s) for s in seqs)
    device = next(model.parameters()).device
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)  # padded on the right: causal attention
    target = torch.zeros((len(seqs), width), dtype=torch.bool)
    for r, (p, c, s) in enumerate(zip(prompts, continuations, seqs)):
        ids[r, : len(s)] = torch.tensor(s)
        target[r, len(p) : len(s)] = torch.tensor(repeated_ngram_mask(c, n), dtype=torch.bool)
    count = int(target.sum())
    if count == 0:
        return torch.zeros((), device=device), 0
    ids, target = ids.to(device), target.to(device)
    h = model.transformer(input_ids=ids, use_cache=False).last_hidden_state  # real tokens never see the padding
    rows, cols = target[:, 1:].nonzero(as_tuple=True)  # position t predicts token t + 1
    logits = model.lm_head(h[rows, cols]).float()
    logp = torch.log_softmax(logits, -1).gather(-1, ids[rows, cols + 1][:, None]).squeeze(-1)
    one_minus = (-torch.expm1(logp)).clamp(min=1e-5)  # 1 - p, computed stably
    return -torch.log(one_minus).mean(), count


def token_unlikelihood_losses(model, ids: torch.Tensor, eot_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-token loss and token-level unlikelihood (Welleck et al. 2020, section 5.1) of training blocks ``ids``
    [B, T], from one forward pass. The candidates at a position are the tokens seen earlier in the same story (after
    the block's last ``<|endoftext|>`` so far), the true next token excluded; the unlikelihood is
    ``-sum log(1 - p(c))`` over them, averaged over the predicted positions like the next-token loss."""
    h = model.transformer(input_ids=ids, use_cache=False).last_hidden_state[:, :-1]
    logp = torch.log_softmax(model.lm_head(h).float(), -1)  # [B, T-1, V]: position t predicts token t + 1
    target = ids[:, 1:]
    mle = -logp.gather(-1, target[..., None]).mean()
    # candidate triples (row, position, token), built sparsely: position t of row b sees the tokens at s <= t of
    # its story (s after the last <|endoftext|> at or before t); ~B * T^2 / 2 pairs instead of a dense [B, T, V] mask
    T, V = target.shape[1], logp.shape[-1]
    pos = torch.arange(T, device=ids.device)
    story_start = torch.where(ids[:, :-1] == eot_id, pos + 1, 0).cummax(1).values  # [B, T-1]
    s_idx = pos[None, None, :]  # [1, 1, T-1]
    visible = (s_idx <= pos[None, :, None]) & (s_idx >= story_start[:, :, None])  # [B, T-1 (t), T-1 (s)]
    b_i, t_i, s_i = visible.nonzero(as_tuple=True)
    c_i = ids[b_i, s_i]
    keep = c_i != target[b_i, t_i]
    key = torch.unique((b_i[keep] * T + t_i[keep]) * V + c_i[keep])  # one term per distinct candidate
    lp = logp.reshape(-1)[key]  # (b * T + t) * V + c indexes the flattened [B, T-1, V]
    ul = -torch.log((-torch.expm1(lp)).clamp(min=1e-5)).sum() / target.numel()
    return mle, ul


def probe(model, prompt_ids: Sequence[Sequence[int]], tokenizer, valid_data: PackedBlocks | None, cfg: UnlikelihoodConfig,
          batch_size: int = 64) -> dict:
    """Greedy continuations of ``prompt_ids``: the share that end with ``<|endoftext|>`` before the cap, the share
    with a repeated ``loop_words``-word run, the share that do both right (*healthy*: ended, no loop), and the
    held-out loss on ``valid_data``."""
    eot = end_of_text_id(tokenizer)
    was = model.training
    model.eval()
    outs = G.generate(model, prompt_ids, GREEDY, eot, max_new_tokens=cfg.probe_tokens, batch_size=batch_size,
                      seed=cfg.seed, keep_eot=True)
    ended = [o[0][-1:] == [eot] for o in outs]
    loops = [repeated_run(tokenizer.decode([t for t in o[0] if t != eot]), cfg.loop_words) for o in outs]
    n = len(outs)
    row = {"ended": sum(ended) / n, "loops": sum(loops) / n,
           "healthy": sum(e and not lp for e, lp in zip(ended, loops)) / n, "probe prompts": n}
    if valid_data is not None:
        row["valid loss"] = evaluate(model, valid_data, 16, device=next(model.parameters()).device)
    model.train(was)
    return row


def healthier_probe(a: dict, b: dict) -> bool:
    """Is probe ``a`` better than ``b``: more healthy continuations (ended, no loop), then the lower held-out loss.
    Counting the healthy ones, not just the loops, keeps a checkpoint that loops less only because it stopped
    ending its stories (seen on a small budget: loops 72 % -> 55 %, ended 88 % -> 50 %) from being chosen."""
    return (-a["healthy"], a.get("valid loss", 0.0)) < (-b["healthy"], b.get("valid loss", 0.0))


def finetune(model, tokenizer, train_prompts: Sequence[Sequence[int]], train_data: PackedBlocks,
             probe_prompts: Sequence[Sequence[int]], valid_data: PackedBlocks | None, cfg: UnlikelihoodConfig,
             weight_decay: float = 0.0, betas: tuple[float, float] = (0.9, 0.95), precision: str = "fp32",
             device: str = "auto", name: str = "decoder", progress: bool = True) -> UnlikelihoodResult:
    """Run the phase on ``model`` (changed in place to the chosen checkpoint) and return its probe history.
    ``train_prompts``/``probe_prompts`` are token ids without the leading ``<|endoftext|>``."""
    if len(train_prompts) < cfg.batch_size:
        raise ValueError(
            f"{name}: repetition fine-tuning found {len(train_prompts)} training prompts for a batch of "
            f"{cfg.batch_size}: only stories of {cfg.min_words}-{cfg.max_words} words become prompts "
            f"(repetition_finetune.min_words / max_words); widen that range for this corpus, or lower "
            f"repetition_finetune.batch_size to at most {len(train_prompts)}")
    t0 = time.time()
    dev = compute_device(device)
    model.to(dev)
    autocast = autocast_context(resolve_precision(precision, dev), dev)
    eot = end_of_text_id(tokenizer)
    seed_everything(cfg.seed)
    opt = torch.optim.AdamW(param_groups(model, weight_decay), lr=cfg.lr, betas=betas)
    probe_ids = list(probe_prompts)[: cfg.probe_prompts]
    history = [{"step": 0, **probe(model, probe_ids, tokenizer, valid_data, cfg)}]
    best_row, best_state = history[0], copy.deepcopy(model.state_dict())
    bar = progress_bar(total=cfg.steps, desc=f"{name} (repetition)", unit="step") if progress else None
    stats = {"ul": 0.0, "mle": 0.0, "token ul": 0.0, "penalised": 0, "tokens": 0}
    since_best, steps_run = 0, cfg.steps
    for step in range(cfg.steps):
        rng = random.Random(cfg.seed * 1_000_003 + step)  # a step's prompts depend on (seed, step) only
        chosen = [train_prompts[i] for i in rng.sample(range(len(train_prompts)), cfg.batch_size)]
        model.eval()
        rollouts = G.generate(model, chosen, GREEDY, eot, max_new_tokens=cfg.rollout_tokens,
                              batch_size=cfg.batch_size, seed=cfg.seed, keep_eot=True)  # generate adds the EOT
        model.train()
        with autocast():
            ul, count = unlikelihood_loss(model, [[eot, *p] for p in chosen], [r[0] for r in rollouts], cfg.ngram, eot)
            mle = tul = torch.zeros((), device=dev)  # tul: token-level unlikelihood (cfg.token_alpha)
            if cfg.mle_batch:
                blocks = {k: v.to(dev) for k, v in train_data.batch(step, cfg.mle_batch).items()}
                if cfg.token_alpha:
                    mle, tul = token_unlikelihood_losses(model, blocks["input_ids"], eot)
                else:
                    mle = lm_loss(model, blocks)
            loss = mle + cfg.alpha * ul + cfg.token_alpha * tul
        if not torch.isfinite(loss):
            raise FloatingPointError(f"{name}: repetition fine-tuning loss became {float(loss)} at step {step}")
        for group in opt.param_groups:
            group["lr"] = phase_lr(cfg, step)
        opt.zero_grad(set_to_none=True)
        loss.float().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        stats["ul"] += float(ul.detach())
        stats["mle"] += float(mle.detach())
        stats["token ul"] += float(tul.detach())
        stats["penalised"] += count
        stats["tokens"] += sum(len(r[0]) for r in rollouts)
        if (step + 1) % cfg.probe_every == 0 or step + 1 == cfg.steps:
            k = (step % cfg.probe_every) + 1
            row = {"step": step + 1, **probe(model, probe_ids, tokenizer, valid_data, cfg),
                   "unlikelihood": stats["ul"] / k, "next-token loss": stats["mle"] / k,
                   "penalised share": stats["penalised"] / max(1, stats["tokens"])}
            if cfg.token_alpha:
                row["token unlikelihood"] = stats["token ul"] / k
            stats = {"ul": 0.0, "mle": 0.0, "token ul": 0.0, "penalised": 0, "tokens": 0}
            history.append(row)
            if healthier_probe(row, best_row):
                best_row, best_state, since_best = row, copy.deepcopy(model.state_dict()), 0
            else:
                since_best += 1
            if bar is not None:
                bar.set_postfix(healthy=f"{row['healthy']:.2f}", loops=f"{row['loops']:.2f}")
            if cfg.patience and since_best >= cfg.patience and step + 1 < cfg.steps:
                steps_run = step + 1  # the best checkpoint is what is kept: later steps could only be compared with it
                break
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    model.load_state_dict(best_state)
    model.eval()
    return UnlikelihoodResult(name, steps_run, best_row["step"], time.time() - t0, history,
                              stopped_early=steps_run < cfg.steps)


def phase_prompts(train_stories: Sequence[dict] | Sequence[str], probe_stories: Sequence[dict] | Sequence[str],
                  cfg: UnlikelihoodConfig) -> tuple[list, list]:
    """The phase's prompts: every eligible story of ``train_stories`` and ``cfg.probe_prompts`` held-out ones of
    ``probe_stories``, cut at a fraction drawn from ``cfg.prompt_frac`` (:func:`helpers.generation.completions.make_prompts`)."""
    prompts = G.make_prompts(train_stories, None, cfg.prompt_frac, cfg.min_words, cfg.max_words, cfg.seed)
    probes = G.make_prompts(probe_stories, cfg.probe_prompts, cfg.prompt_frac, cfg.min_words, cfg.max_words, cfg.seed + 1)
    return prompts, probes


def finetune_planned(model, run, prompts: Sequence, probes: Sequence, cfg: UnlikelihoodConfig,
                     progress: bool = True) -> UnlikelihoodResult:
    """:func:`finetune` of ``model`` with notebook 02's plan ``run`` of its budget (tokenizer, training and held-out
    blocks, weight decay, betas, precision, device) on the prompts of :func:`phase_prompts`."""
    tok = run.tokenizer
    return finetune(model, tok, [tok(p.prompt).input_ids for p in prompts], run.train_data,
                    [tok(p.prompt).input_ids for p in probes], run.valid_data, cfg, run.cfg.weight_decay,
                    tuple(run.cfg.betas), run.cfg.precision, run.cfg.device, run.name, progress)


def finetune_decoder(decoder_dir: str | Path, run, train_stories: Sequence[dict] | Sequence[str],
                     probe_stories: Sequence[dict] | Sequence[str], cfg: UnlikelihoodConfig, progress: bool = True,
                     log: Callable[[str], None] = print) -> UnlikelihoodResult | None:
    """Fine-tune notebook 02's decoder in ``decoder_dir`` (its plan ``run``: tokenizer, training blocks, held-out
    blocks, config) against repetition, or skip when it was already done with the same inputs. Prompts are cut
    from ``train_stories`` (the budget's own stories) and, for the probes, from ``probe_stories`` (held out), at a
    fraction drawn from ``cfg.prompt_frac``. ``cfg.steps == 0``: nothing is done and None is returned.

    Files: ``best/`` becomes the fine-tuned model (what every later notebook loads), ``mle-best/`` keeps the
    best-validation model of plain training, ``unlikelihood.json`` the fingerprint and the probe history. Both model
    folders are written atomically (``mle-best/`` as a copy of plain training's ``best/``, before anything replaces
    it), and a run interrupted at any point starts the phase again from ``mle-best/``."""
    if cfg.steps == 0:
        return None
    out = Path(decoder_dir)
    state = read_json(out / "train_state.json")  # plain training must be finished
    mle_fp = state.get("extra", {}).get("fingerprint")
    prompts, probes = phase_prompts(train_stories, probe_stories, cfg)
    settings = {k: v for k, v in asdict(cfg).items() if not (k == "token_alpha" and v == 0)}  # phases run before it existed
    fp = fingerprint("unlikelihood-v2", mle_fp, settings, [p.prompt for p in prompts], [p.prompt for p in probes])
    marker, best, mle_best = out / MARKER, out / "best", out / G.PLAIN_DIR
    if marker.is_file() and best.is_dir():
        done = read_json(marker)
        damaged = model_folder_problem(best)
        if done.get("fingerprint") == fp and damaged:  # mle-best/ is the source: the phase is run again
            log(f"[redo] {run.name}: {damaged}; repetition fine-tuning again")
        elif done.get("fingerprint") == fp:
            log(f"[skip] {run.name}: repetition fine-tuning done already with these inputs ({fp})")
            return UnlikelihoodResult(run.name, done["steps"], done["chosen_step"], done["seconds"], done["history"],
                                      done.get("stopped_early", False))
    # the source is plain training's best model: in mle-best/ when a fine-tuned model (of other params) replaced it
    stamp = mle_best / "mle_fingerprint.txt"
    if mle_best.is_dir() and (not stamp.is_file() or stamp.read_text().strip() != mle_fp):
        shutil.rmtree(mle_best)  # left from plain training that has since been redone
    if not mle_best.is_dir():
        with atomic_path(mle_best) as tmp:
            shutil.copytree(best, tmp)
            (tmp / "mle_fingerprint.txt").write_text(str(mle_fp))
    if marker.is_file():
        marker.unlink()
    log(f"[run ] {run.name}: repetition fine-tuning, {cfg.steps} steps of {cfg.batch_size} greedy rollouts "
        f"({len(prompts):,} training prompts, {len(probes)} held-out probe prompts)")
    tok = run.tokenizer
    model = load_decoder(mle_best)
    res = finetune_planned(model, run, prompts, probes, cfg, progress)
    model.to("cpu")
    with atomic_path(best) as tmp:  # replaces best/ in one rename; mle-best/ is the source of any rerun
        model.save_pretrained(tmp)
        save_for_model(tok, tmp, model.config.max_position_embeddings)
        write_json(tmp / "best.json", {"repetition_finetuned": True, "chosen_step": res.chosen_step,
                                       "probe": res.after})
        (tmp / "README.md").write_text(finetuned_card(model, run.name, run.cfg.seed, res.chosen_step, res.steps,
                                                      res.before, res.after, asdict(cfg)), encoding="utf-8")
        stamp_model_folder(tmp, **provenance())
    write_json(marker, {"fingerprint": fp, "config": asdict(cfg), "steps": res.steps, "chosen_step": res.chosen_step,
                        "stopped_early": res.stopped_early, "seconds": res.seconds, "history": res.history})
    b, a = res.before, res.after
    log(f"[done] {run.name}: probe healthy {100 * b['healthy']:.0f} % -> {100 * a['healthy']:.0f} %, loops "
        f"{100 * b['loops']:.0f} % -> {100 * a['loops']:.0f} %, ended "
        f"{100 * b['ended']:.0f} % -> {100 * a['ended']:.0f} %, held-out loss {b['valid loss']:.3f} -> "
        f"{a['valid loss']:.3f} (step {res.chosen_step} of {res.steps}"
        + (f", stopped after {cfg.patience} probes without a better one" if res.stopped_early else "")
        + f"; {res.seconds / 60:.1f} min; plain model kept in "
        f"{shown_path(mle_best)})")
    return res


def finetune_decoders(run_dir: str | Path, runs: dict, cfg: UnlikelihoodConfig, workers: int | str = 1,
                      probe_corpus: str = "tiny-valid") -> dict[str, UnlikelihoodResult | None]:
    """:func:`finetune_decoder` of each of notebook 02's decoders (``runs``: budget name -> its plan) under
    ``run_dir``: prompts from the budget's own stories (``<run_dir>/data/<budget>.jsonl``; a seed replicate reads its
budget's), probes from
    ``<run_dir>/data/<probe_corpus>.jsonl``. The phases run side by side in ``workers`` processes
    (:func:`helpers.core.parallel.run_jobs`; one when ``cfg.steps`` is 0), the largest budget (the longest job)
    first; the results come back in the order of ``runs``."""
    run_dir = Path(run_dir)
    data = run_dir / "data"
    probe_stories = read_corpus(data / f"{probe_corpus}.jsonl")
    jobs = {name: dict(decoder_dir=run_dir / "decoders" / name, run=runs[name],
                       train_stories=read_corpus(data / f"{_budget(runs[name], name)}.jsonl"), probe_stories=probe_stories,
                       cfg=_seeded(cfg, runs[name], name), progress=False)
            for name in sorted(runs, key=lambda n: len(runs[n].train_data), reverse=True)}
    done = run_jobs(finetune_decoder, jobs, workers if cfg.steps else 1, desc="repetition fine-tuning runs")
    return {name: done[name] for name in runs}


def _budget(run, name: str) -> str:
    return getattr(run, "budget", None) or name


def _seeded(cfg: UnlikelihoodConfig, run, name: str) -> UnlikelihoodConfig:
    """A seed replicate (``"<budget> (seed N)"``) draws its rollout prompts with ``cfg.seed + N``, so that the whole
    pipeline, not only the initialisation, varies with the seed; the budget's own run keeps ``cfg.seed``."""
    return cfg if _budget(run, name) == name else replace(cfg, seed=cfg.seed + int(run.cfg.seed))


def used_valid_losses(results: dict[str, UnlikelihoodResult | None]) -> dict[str, float]:
    """The held-out loss of the checkpoint each phase kept, by decoder (decoders without a phase are left out)."""
    return {name: res.after["valid loss"] for name, res in results.items() if res is not None}


def history_rows(results: dict[str, UnlikelihoodResult | None], confidence: float = 0.95) -> list[dict]:
    """One row per (decoder, probe) for a table or a figure; the chosen step is flagged, and the shares that loop
    and that end carry their Wilson ``confidence`` interval over the probe's prompts (``loops low``/``high``,
    ``ended low``/``high``)."""
    rows = []
    for name, res in results.items():
        if res is None:
            continue
        for h in res.history:
            row = {"budget": name, **h, "chosen": h["step"] == res.chosen_step}
            n = int(h["probe prompts"])
            for key in ("loops", "ended"):
                row[f"{key} low"], row[f"{key} high"] = wilson_interval(h[key] * n, n, confidence)
            rows.append(row)
    return rows
