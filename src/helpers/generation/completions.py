"""Story completion: prompts cut from training stories, batched greedy / nucleus decoding
(``docs/methods.md#generation``).

* **Prompts** (:func:`make_prompts`): training stories with ``min_words ≤ words ≤ max_words`` are shuffled with a
  seed and cut after a random fraction (``frac``, default 15–30 %) of their words. The prompt is the original
  text up to the end of that word; the *ending* is the rest of the story (for ROUGE against completions).
  The prompt is tokenised on its own, so the prompt/completion boundary is a token boundary: the completion is
  the decoding of the generated ids only, never a character slice of a decoded whole.
* **Decoding** (:func:`generate`): greedy or nucleus (top-p, temperature; the rule itself, :class:`Decoding` and
  ``sample_next``, is :mod:`helpers.generation.decoding`), ``k`` completions per prompt, for every model of
  :mod:`helpers.models.registry` (GPT-Neo, the compressor) through the same calls.
  Prompts are sorted by length and batched; in the shared loop (GPT-Neo) a batch is left-padded, each prompt is
  *prefilled once* and its KV cache repeated ``k`` times; a model with its own loop (the compressor's two tokens per
  step) decodes the batch its way. Decoding stops at ``<|endoftext|>`` or after ``max_new_tokens`` (or the model's
  context). Sampling draws from a generator seeded per batch, so a rerun with the same parameters gives identical text.
* **Corpora** (:func:`completion_rows`, :func:`register_generated`): JSONL rows with prompt, completion, story id,
  model, decoding settings and seed, registered in the budget ledger as D_gen with word counts; notebook 03 makes
  D_gen with :func:`nested_completions` and :func:`write_generated_corpora`.
"""
from __future__ import annotations

import random
import re
import time
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd
import torch

from helpers.core.artifacts import fingerprint, read_jsonl, run_step, write_jsonl
from helpers.core.digests import sha256_file
from helpers.core.hardware import compute_device
from helpers.core.progress import progress as progress_bar
from helpers.core.seeding import generator
from helpers.data.corpus_files import write_corpus
from helpers.data.ledger import CorpusEntry
from helpers.data.corpora import EOT  # noqa: F401 - the end-of-text token, also completions.EOT
from helpers.data.tokenizers import encode_stories, end_of_text_id, load_tokenizer
from helpers.generation.decoding import Decoding, sample_next
from helpers.models.decoder import cache_kwarg, context_length, output_cache
from helpers.models.decoder_step import stepper_for
from helpers.models.registry import load_saved, own_generate


# ----------------------------------------------------------------------------- prompts


@dataclass
class Prompt:
    story_id: Any
    prompt: str  # the story's first words, exactly as written
    ending: str  # the rest of the story
    frac: float  # the fraction of words kept
    n_words: int  # words in the prompt
    story_words: int


def truncate_story(story: str, frac: float) -> tuple[str, str, int]:
    """Cut ``story`` after ``max(1, round(frac · words))`` words; returns (prompt, ending, words kept)."""
    spans = [m.span() for m in re.finditer(r"\S+", story)]
    if not spans:
        raise ValueError("cannot truncate an empty story")
    n = min(len(spans), max(1, round(frac * len(spans))))
    end = spans[n - 1][1]
    return story[:end], story[end:].strip(), n


def make_prompts(
    stories: Sequence[dict] | Sequence[str],
    n: int | None = None,
    frac: tuple[float, float] = (0.15, 0.30),
    min_words: int = 20,
    max_words: int = 512,
    seed: int = 0,
) -> list[Prompt]:
    """Up to ``n`` prompts from ``stories`` (rows ``{"id", "text"}`` or plain strings), seeded.

    Stories outside ``[min_words, max_words]`` are skipped; each kept story is cut after a fraction drawn
    uniformly from ``frac`` (use ``(0.4, 0.5)`` for the paper's qualitative Table 8)."""
    lo, hi = frac
    if not 0 < lo <= hi < 1:
        raise ValueError(f"frac must satisfy 0 < low <= high < 1, got {frac}")
    if min_words < 1 or max_words < min_words:
        raise ValueError(f"need 1 <= min_words <= max_words, got {min_words}, {max_words}")
    # story numbers, not rows: ``stories`` may be read from disk (CorpusRows), and only the chosen ones are read again
    eligible = [i for i, s in enumerate(stories)
                if min_words <= len((s["text"] if isinstance(s, dict) else s).split()) <= max_words]
    rng = random.Random(seed)
    rng.shuffle(eligible)  # the same permutation as shuffling the rows themselves
    if n is not None:
        if n > len(eligible):
            raise ValueError(f"asked for {n} prompts but only {len(eligible)} stories have {min_words}-{max_words} words")
        eligible = eligible[:n]
    out = []
    for i in eligible:
        s = stories[i]
        r = s if isinstance(s, dict) else {"id": i, "text": s}
        f = rng.uniform(lo, hi)
        prompt, ending, k = truncate_story(r["text"], f)
        out.append(Prompt(r["id"], prompt, ending, f, k, len(r["text"].split())))
    return out


#: added to a notebook's seed for the continuation-health prompts, so they are not the generation prompts' draw
HEALTH_SEED_OFFSET = 3
PLAIN_DIR = "mle-best"  # beside a decoder's best/: its plain model, once repetition fine-tuning replaced best/


def health_prompts(train_stories: Sequence[dict] | Sequence[str], heldout_stories: Sequence[dict] | Sequence[str],
                   n: int, frac: tuple[float, float], min_words: int, max_words: int, seed: int) -> dict[str, list[Prompt]]:
    """The prompts whose greedy continuations are checked for endings and loops (notebook 03's continuation health,
    and the recipe benchmark's targets): ``n`` from training stories and ``n`` from held-out ones, drawn as
    :func:`make_prompts` with ``seed + HEALTH_SEED_OFFSET``. Returns ``{"train": [...], "held-out": [...]}``."""
    return {split: make_prompts(stories, n, tuple(frac), min_words, max_words, seed + HEALTH_SEED_OFFSET)
            for split, stories in (("train", train_stories), ("held-out", heldout_stories))}


# drop finished rows from a batch (and its KV cache) once at most this share of its rows still runs
SHRINK_AT = 7 / 8


@torch.no_grad()
def generate(
    model,
    prompt_ids: Sequence[Sequence[int]],
    decoding: Decoding,
    eot_id: int,
    max_new_tokens: int = 256,
    batch_size: int = 64,
    seed: int = 0,
    bos: bool = True,
    progress: bool = False,
    desc: str = "generate",
    keep_eot: bool = False,
) -> list[list[list[int]]]:
    """Completions as token ids: ``out[i][j]`` is the j-th of ``decoding.k`` completions of prompt ``i``
    (without the final ``<|endoftext|>``, unless ``keep_eot``: then a completion that ended by itself, rather
    than at the length cap, ends with it). With ``bos`` every prompt is preceded by ``<|endoftext|>``, the
    context a story has in the packed training stream.

    ``batch_size`` counts rows (prompts × k). A batch's new tokens are limited by the model's context minus its
    longest prompt. A model registered with its own decoding loop (:func:`helpers.models.registry.own_generate`: the
    compressor) decodes each batch with it, every other one with the shared KV-cache loop."""
    model.eval()
    device = next(model.parameters()).device
    decode_batch = own_generate(model) or _generate_batch
    k = decoding.k
    per_batch = max(1, batch_size // k)
    ctx = context_length(model) or 1 << 30  # a model without a stated context: no limit
    prompts = [([eot_id] if bos else []) + list(p) for p in prompt_ids]
    if any(len(p) == 0 for p in prompts):
        raise ValueError("empty prompt (pass bos=True or give at least one token)")
    too_long = [i for i, p in enumerate(prompts) if len(p) >= ctx]
    if too_long:
        raise ValueError(f"{len(too_long)} prompt(s) fill the model's context of {ctx} tokens (first: #{too_long[0]})")
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    out: list[list[list[int]]] = [[] for _ in prompts]
    bar = None
    if progress:
        bar = progress_bar(total=len(prompts) * k, desc=desc, unit="story")
    for b, start in enumerate(range(0, len(order), per_batch)):
        chunk = order[start : start + per_batch]
        gen = generator(seed * 1_000_003 + b)
        seqs = decode_batch(model, [prompts[i] for i in chunk], decoding, eot_id,
                            min(max_new_tokens, ctx - max(len(prompts[i]) for i in chunk)), gen, device, keep_eot)
        for r, i in enumerate(chunk):
            out[i] = seqs[r * k : (r + 1) * k]
        if bar is not None:
            bar.update(len(chunk) * k)
    if bar is not None:
        bar.close()
    return out


def _generate_batch(model, prompts, decoding: Decoding, eot_id: int, max_new: int, gen, device,
                    keep_eot: bool = False) -> list[list[int]]:
    k = decoding.k
    L = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), L), eot_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), L), dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, L - len(p) :] = torch.tensor(p)
        mask[r, L - len(p) :] = 1
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    ids, mask, pos = ids.to(device), mask.to(device), pos.to(device)
    outputs = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
    cache = output_cache(outputs)
    # GPT-Neo decodes the new tokens through the lean incremental forward (same logits up to float rounding)
    stepper = stepper_for(model, cache, mask, L + max(0, max_new)) if max_new > 1 else None
    cache = stepper or cache
    logits = outputs.logits[:, -1, :]
    if k > 1:
        cache.batch_repeat_interleave(k)
        logits = logits.repeat_interleave(k, dim=0)
        mask = mask.repeat_interleave(k, dim=0)
        pos = pos.repeat_interleave(k, dim=0)
    rows = logits.size(0)
    last_pos = pos[:, -1]
    done = torch.zeros(rows, dtype=torch.bool, device=device)
    active = torch.arange(rows, device=device)  # batch row -> original row; finished rows are dropped
    produced: list[torch.Tensor] = []
    for t in range(max(0, max_new)):
        # one uniform per original row and step whether or not the row is still running, so dropping finished
        # rows leaves every other row's draws (and so its completion) unchanged
        u = torch.rand(rows, 1, generator=gen)[active.cpu()] if decoding.method != "greedy" else None
        nxt = sample_next(logits, decoding, gen, u).to(device)
        nxt = torch.where(done[active], torch.full_like(nxt, eot_id), nxt)
        step = torch.full((rows,), eot_id, dtype=torch.long, device=device)
        step[active] = nxt
        produced.append(step)
        done |= step == eot_id
        if bool(done.all()) or t == max_new - 1:
            break
        running = ~done[active]
        if int(running.sum()) <= len(active) * SHRINK_AT:  # enough rows finished: shrink the batch
            keep = running.nonzero().squeeze(-1)
            cache.batch_select_indices(keep)
            active, mask, last_pos, nxt = active[keep], mask[keep], last_pos[keep], nxt[keep]
        last_pos = last_pos + 1
        if stepper is not None:
            logits = stepper.step(nxt, last_pos)
            continue
        mask = torch.cat([mask, torch.ones((len(active), 1), dtype=mask.dtype, device=device)], dim=1)
        outputs = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=last_pos[:, None],
                        use_cache=True, **cache_kwarg(model, cache))
        cache = output_cache(outputs)
        logits = outputs.logits[:, -1, :]
    if not produced:
        return [[] for _ in range(rows)]
    toks = torch.stack(produced, dim=1).tolist()
    res = []
    for row in toks:
        res.append(row[: row.index(eot_id) + int(keep_eot)] if eot_id in row else row)
    return res


# ----------------------------------------------------------------------------- corpora


def complete_prompts(
    model,
    tokenizer,
    prompts: Sequence[Prompt],
    decoding: Decoding,
    max_new_tokens: int = 256,
    batch_size: int = 64,
    seed: int = 0,
    progress: bool = False,
    desc: str = "generate",
    return_ended: bool = False,
):
    """Texts of ``decoding.k`` completions per prompt (each the decoding of the generated ids alone); with
    ``return_ended`` also, per completion, whether it ended with ``<|endoftext|>`` before the length cap."""
    eot = end_of_text_id(tokenizer)
    ids = encode_stories(tokenizer, [p.prompt for p in prompts], add_eot=False)
    out = generate(model, ids, decoding, eot, max_new_tokens, batch_size, seed, progress=progress, desc=desc, keep_eot=True)
    ended = [[bool(c) and c[-1] == eot for c in cs] for cs in out]
    # the tokenizer works in NFD; completions are brought back to NFC like the (NFC) stories they continue
    texts = [[unicodedata.normalize("NFC", tokenizer.decode(c[:-1] if e else c, skip_special_tokens=True,
                                                            clean_up_tokenization_spaces=False))
              for c, e in zip(cs, es)] for cs, es in zip(out, ended)]
    return (texts, ended) if return_ended else texts


def completion_rows(prompts: Sequence[Prompt], completions: Sequence[Sequence[str]], model_name: str,
                    decoding: Decoding, seed: int, ended: Sequence[Sequence[bool]] | None = None) -> Iterable[dict]:
    """JSONL rows of a generated corpus: one per completion; ``text`` = prompt + completion; ``ended`` (when
    given): the completion closed the story with ``<|endoftext|>`` before the length cap."""
    for i, (p, cs) in enumerate(zip(prompts, completions)):
        for j, c in enumerate(cs):
            row = {"story_id": p.story_id, "sample": j, "prompt": p.prompt, "completion": c, "text": p.prompt + c,
                   "model": model_name, "decoding": decoding.name, "settings": decoding.settings(), "seed": seed,
                   "prompt_words": p.n_words, "completion_words": len(c.split())}
            if ended is not None:
                row["ended"] = bool(ended[i][j])
            yield row


def register_generated(ledger, name: str, rows: Sequence[dict], generator_corpus: str, path: str, seed: int,
                       note: str = "") -> None:
    """Enter a generated corpus in the budget ledger (D_gen): words of prompts and of completions."""
    words = {"prompt": sum(len(r["prompt"].split()) for r in rows),
             "completion": sum(len(r["completion"].split()) for r in rows)}
    ledger.add(CorpusEntry(name, "gen", words, seed, {}, None, generator_corpus, path, note))


def decoding_model_dir(model_dir: str | Path, decoding: Decoding) -> Path:
    """The checkpoint that ``decoding`` reads. Greedy decoding reads ``model_dir``. Sampling reads the plain model
    kept in ``mle-best/`` beside ``model_dir`` when ``model_dir`` is a decoder's ``best/`` that notebook 02's
    repetition fine-tuning replaced, and ``model_dir`` otherwise. Unlikelihood training mends greedy loops but
    moves probability into the tail: nucleus samples of the fine-tuned tiny-1M score about -4.9 nats/token under
    the plain model against -2.3 for the plain model's own, and 40 % of them contain byte junk
    (``benchmarks/sampling.py``)."""
    model_dir = Path(model_dir)
    plain = model_dir.parent / PLAIN_DIR
    if decoding.method != "greedy" and model_dir.name == "best" and plain.is_dir():
        return plain
    return model_dir


def cached_completions(
    path,
    model_dir,
    prompts: Sequence[Prompt],
    decoding: Decoding,
    *,
    model_name: str,
    max_new_tokens: int = 256,
    batch_size: int = 64,
    seed: int = 0,
    progress: bool = True,
    log=print,
    device: str = "auto",
) -> list[dict]:
    """Completion rows of ``prompts`` by the checkpoint in ``model_dir`` (for sampling, by the plain model beside a
    repetition fine-tuned decoder: :func:`decoding_model_dir`), generated once and kept as JSONL at ``path``; a rerun
    with the same weights, prompts and settings reads the file instead (``[skip]``). The model runs on ``device``
    (``"auto"``: the GPU when there is one, see :func:`helpers.core.hardware.compute_device`)."""
    model_dir, path = decoding_model_dir(model_dir, decoding), Path(path)
    weights = sorted(model_dir.glob("*.safetensors")) or sorted(model_dir.glob("*.bin"))
    if not weights:
        raise FileNotFoundError(f"no model weights in {model_dir} (train the decoder first: notebook 02)")
    fp = fingerprint([sha256_file(w) for w in weights], [asdict(p) for p in prompts], decoding.settings(),
                     max_new_tokens, batch_size, seed, "rows-v2")

    def work():
        model, tok = load_saved(model_dir).to(compute_device(device)), load_tokenizer(model_dir)
        comps, ended = complete_prompts(model, tok, prompts, decoding, max_new_tokens, batch_size, seed, progress,
                                        desc=f"{model_name} {decoding.name}", return_ended=True)
        write_jsonl(path, completion_rows(prompts, comps, model_name, decoding, seed, ended))

    which = "" if model_dir.name != PLAIN_DIR else (f", read from {PLAIN_DIR}/" if "plain" in model_name
                                                    else f" (the plain model, read from {PLAIN_DIR}/)")
    run_step(f"{decoding.name} completions of {len(prompts)} prompts by {model_name}{which}", path, fp, work, log)
    return read_jsonl(path)


def group_completions(rows: Sequence[dict], k: int | None = None) -> list[list[str]]:
    """Completions grouped per prompt (in the order prompts first appear), the first ``k`` samples of each."""
    groups: dict[Any, list[tuple[int, str]]] = {}
    for r in rows:
        groups.setdefault(r["story_id"], []).append((r["sample"], r["completion"]))
    return [[c for _, c in sorted(v)][:k] for v in groups.values()]


def nested_completions(gen_dir: str | Path, generator_name: str, model_dir: str | Path, prompts: Sequence[Prompt],
                       plan: Mapping[str, tuple[Decoding, int]], *, max_new_tokens: int, batch_size: int, seed: int,
                       log=print) -> tuple[dict[str, list[dict]], pd.DataFrame]:
    """The runs a plan of nested decodings needs (:func:`helpers.generation.decoding.nested_decodings`: decoding name ->
    (run, samples kept)), each generated once by the generator's decoder in ``model_dir`` and cached as
    ``<gen_dir>/<generator_name>-<run>.jsonl`` (:func:`cached_completions`). Returns the rows per run name and a table
    of the runs (``run``, ``completions``, ``seconds``)."""
    generated, runs = {}, []
    for d in sorted({run for run, _ in plan.values()}, key=lambda d: d.name):
        t0 = time.time()
        generated[d.name] = cached_completions(Path(gen_dir) / f"{generator_name}-{d.name}.jsonl", model_dir, prompts, d,
                                               model_name=generator_name, max_new_tokens=max_new_tokens,
                                               batch_size=batch_size, seed=seed, log=log)
        runs.append({"run": d.name, "completions": len(generated[d.name]), "seconds": round(time.time() - t0, 1)})
    return generated, pd.DataFrame(runs)


def write_generated_corpora(data_dir: str | Path, ledger, plan: Mapping[str, tuple[Decoding, int]],
                            generated: Mapping[str, Sequence[dict]], generator_corpus: str, n_prompts: int,
                            seed: int) -> pd.DataFrame:
    """D_gen: for each decoding of ``plan`` (name -> (run, samples kept)), the first samples of its run's rows
    (``generated``, :func:`nested_completions`) written as ``<data_dir>/gen-<generator_corpus>-<name>.jsonl``, entered
    in the budget ledger (:func:`register_generated`) and the ledger saved. Returns one row per corpus: prompts,
    completions, words of prompts, completions and both, mean completion words."""
    rows_out = []
    for name, (run, keep) in plan.items():
        rows = [r for r in generated[run.name] if r["sample"] < keep]
        cname = f"gen-{generator_corpus}-{name}"
        write_corpus(Path(data_dir) / f"{cname}.jsonl", rows)
        register_generated(ledger, cname, rows, generator_corpus, f"{cname}.jsonl", seed,
                           note=f"{name} completions of {n_prompts} {generator_corpus} training stories")
        e = ledger[cname]
        rows_out.append({"corpus": cname, "prompts": n_prompts, "completions": len(rows),
                         "words (prompt)": e.words_by_source["prompt"], "words (completion)": e.words_by_source["completion"],
                         "words (total)": e.words, "mean completion words": e.words_by_source["completion"] / max(len(rows), 1)})
    ledger.save()
    return pd.DataFrame(rows_out)
