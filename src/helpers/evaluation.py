"""Zero-shot minimal-pair evaluation (``docs/methods.md#minimal-pairs``): BLiMP, the BLiMP supplement and EWoK.

Data (bundled, checksum-verified through :func:`helpers.data.read_text`):

* BLiMP, BabyLM vocabulary-filtered: ``data/babylm_eval/blimp_filtered/*.jsonl.gz`` (67 paradigms, 59,875 pairs;
  fields ``sentence_good``/``sentence_bad``/``field``/``linguistics_term``/``UID``/``pair_id``); the full BLiMP
  (``data/blimp/data``, 67,000 pairs, ``pairID``) with ``blimp_version="full"``.
* The supplement: ``data/babylm_eval/supplement_filtered/*.jsonl.gz`` (5 tasks, 5,218 pairs). Only
  ``sentence_good``/``sentence_bad`` are common to the five files (the rest are per-task metadata: ``row``,
  ``contrast``, ``fragment``, ``pair_ID``, ``template``, ``quad``, ...), so the pair id is the line number.
* EWoK, BabyLM-filtered: ``data/babylm_eval/ewok_filtered/*.jsonl.gz`` (11 domains = files, 7,618 items; fields
  ``Context1``/``Context2``/``Target1``/``Target2`` + metadata); pair id = line number.

**Scores.** Every item is a pair (good, bad) of continuations, each with an optional context; the item is right
when ``score(good) > score(bad)``. Exact ties are broken by a seeded coin per item (a hash of seed, task, paradigm
and pair id, so the outcome does not depend on which other items are scored) and counted (``tie`` column).

* Causal LMs (:func:`causal_scores`): the sum of token log-probabilities of the continuation given
  ``<|endoftext|>`` + context. The continuation is ``delimiter + text`` with ``delimiter = " "`` as in the
  BabyLM 2024 pipeline (an lm-eval-harness fork whose ``multiple_choice`` requests are ``(context,
  target_delimiter + choice)`` with the default ``target_delimiter = " "``). With a context the split is
  lm-eval's: ``tok(context + " " + text)`` minus the first ``len(tok(context))`` tokens. Departure: lm-eval uses the
  end-of-text token only when the context is empty; we always put it first (our decoders saw every story after
  ``<|endoftext|>``). It only conditions; it is never scored.
* Masked LMs (:func:`mlm_scores`): pseudo-log-likelihood (Salazar et al. 2020): ``[CLS] context text [SEP]``, each
  token of ``text`` masked in turn with everything else visible, [CLS]/[SEP] (and the context) never masked;
  ``reduction="sum"`` (the BabyLM 2023 pipeline, and the ``hf-mlm`` code of the 2024 lm-eval fork we could read:
  ``float(s.sum())`` of log2 probabilities, the same ranking as nats) or ``"mean"`` over the scored tokens (the
  per-token PLL we understand the 2024 pipeline to use). Always say which one a table used.

**EWoK protocol.** The 2024 pipeline's template (``lm_eval/tasks/ewok_filtered/_template_yaml``) is
``doc_to_text: "{{Context1}}"``, ``doc_to_choice: [Target1, Target2]``, ``doc_to_target: 0``: an item is right when
``log P(" " + Target1 | Context1) > log P(" " + Target2 | Context1)`` (sum over the target tokens, no length
normalisation); Context2 is not used. The filtered files hold every item twice, the second time with the contexts
and the targets swapped, so both directions are tested. We do the same for causal LMs. For masked LMs the context is
visible and only the target tokens are masked and scored (``ewok_context=True``, the default; the 2025 pipeline
scores EWoK the same way). **Caveat:** the 2024 ``hf-mlm`` wrapper scored only the continuation and dropped the
context, and with the swapped twins any context-free score is right on exactly one item of each twin pair: 50 %
by construction on these files (a test checks it). The LTG-BERT baselines' EWoK of 48.9 / 51.9 in the paper's
Tables 2–3, printed beside "/63.0" and "/65.6" (in line with the authors' own encoders), look like this effect; that
is our reading, the paper does not explain the two values. ``ewok_context=False`` gives the context-free variant.

**Data quirks** (kept as they are): 7 filtered BLiMP pairs have identical good and bad sentences (passive_1 ×2,
principle_A_case_2 ×5), so every model ties on them; in EWoK physical-relations, 10 (context, target) strings are
the right answer of one item and the wrong one of another, so no scorer of (context, target) alone reaches 100 %.

**Averages.** The 2024 task groups aggregate their subtasks with ``weight_by_size: false``: the BLiMP score is the
unweighted mean over the 67 paradigms (not over pairs, not over phenomena), the supplement the mean over its 5
tasks, EWoK the mean over its 11 domains. The paper's Table 4 groups paradigms by BLiMP's ``linguistics_term`` into
the 12 phenomena of the BLiMP paper (``s-selection``, 2 paradigms, belongs to *argument structure* there); its
"Accuracy" row is the per-paradigm mean (69.2 for the LTG-BERT baseline, whereas the mean of its 12 phenomenon rows
is 66.7). A phenomenon's accuracy here is the mean of its paradigms' accuracies. :func:`summarise` reports the
paradigm mean (``accuracy``, the headline), the phenomenon mean and the pooled pair accuracy side by side.

:func:`evaluate_model` runs it all with a progress bar and caches the per-item rows as JSONL per task (skipped when
the weights, the tokenizer, the settings and the data did not change).
"""
from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .data import DataError, read_jsonl_rows, resolve
from .decoder import context_length
from .stats import percentile_interval

if TYPE_CHECKING:  # annotations only (pandas is imported where it is used)
    import pandas as pd

TASKS = ("blimp", "supplement", "ewok")
SCORING_VERSION = "minimal-pairs-v1"  # part of every cache fingerprint: bump when scores would change

DATA_DIRS = {
    "blimp": "babylm_eval/blimp_filtered",
    "blimp_full": "blimp/data",
    "supplement": "babylm_eval/supplement_filtered",
    "ewok": "babylm_eval/ewok_filtered",
}

# BLiMP linguistics_term -> the phenomenon rows of the BERTtime paper's Table 4 (the BLiMP paper's 12 phenomena)
BLIMP_PHENOMENA: dict[str, str] = {
    "anaphor_agreement": "Anaphor Agreement",
    "argument_structure": "Argument Structure",
    "s-selection": "Argument Structure",
    "binding": "Binding",
    "control_raising": "Control/Raising",
    "determiner_noun_agreement": "Determiner-Noun-Agr.",
    "ellipsis": "Ellipsis",
    "filler_gap_dependency": "Filler Gap",
    "irregular_forms": "Irregular Forms",
    "island_effects": "Island Effects",
    "npi_licensing": "NPI Licensing",
    "quantifiers": "Quantifiers",
    "subject_verb_agreement": "Subject-verb Agr.",
}
# supplement file -> Table 6 row
SUPPLEMENT_NAMES: dict[str, str] = {
    "hypernym": "Hypernym",
    "qa_congruence_easy": "Question-Ans. Congr. (easy)",
    "qa_congruence_tricky": "Question-Ans. Congr. (tricky)",
    "subject_aux_inversion": "Subject-Auxiliary Inversion",
    "turn_taking": "Turn-taking",
}
TASK_NAMES = {"blimp": "BLiMP", "supplement": "Supp.", "ewok": "EWoK"}


def ewok_domain_name(stem: str) -> str:
    """``agent-properties`` -> ``agent properties`` (the row names of Table 5)."""
    return stem.replace("-", " ")


# ============================================================================================ items and loaders


@dataclass(frozen=True)
class Item:
    """One minimal pair. ``good``/``bad`` are the continuations compared; ``context`` (EWoK) conditions both."""

    task: str  # blimp | supplement | ewok
    paradigm: str  # BLiMP UID, supplement file, EWoK domain (file)
    phenomenon: str  # Table 4 phenomenon, Table 6 task name, Table 5 domain name
    pair_id: str
    good: str
    bad: str
    context: str | None = None
    term: str = ""  # BLiMP linguistics_term as in the data (empty elsewhere)


def _jsonl_rows(path: Path) -> list[dict]:
    return read_jsonl_rows(path)


def _files(sub: str) -> list[Path]:
    folder = resolve(sub)
    files = sorted(folder.glob("*.jsonl.gz")) or sorted(folder.glob("*.jsonl"))
    if not files:
        raise DataError(f"no *.jsonl(.gz) files in {folder}")
    return files


def _stem(p: Path) -> str:
    return p.name.split(".jsonl")[0]


def _need(row: dict, keys: Sequence[str], where: str) -> None:
    missing = [k for k in keys if k not in row]
    if missing:
        raise DataError(f"{where}: missing field(s) {missing}; found {sorted(row)}")


def _subsample(items: list[Item], limit: int | None, seed: int, key: str) -> list[Item]:
    """At most ``limit`` items, a seeded sample that keeps the file order (per paradigm / file)."""
    if limit is None or len(items) <= limit:
        return items
    rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
    keep = np.sort(rng.choice(len(items), size=int(limit), replace=False))
    return [items[i] for i in keep]


def load_blimp(version: Literal["filtered", "full"] = "filtered", limit_per_task: int | None = None,
               seed: int = 0) -> list[Item]:
    """BLiMP pairs, one paradigm per file. ``version="filtered"``: the BabyLM vocabulary-filtered set (59,875 pairs);
    ``"full"``: the original 67 × 1,000."""
    if version not in ("filtered", "full"):
        raise ValueError(f"BLiMP version must be 'filtered' or 'full', not {version!r}")
    sub = DATA_DIRS["blimp" if version == "filtered" else "blimp_full"]
    id_key = "pair_id" if version == "filtered" else "pairID"
    out: list[Item] = []
    for f in _files(sub):
        items = []
        for i, r in enumerate(_jsonl_rows(f)):
            _need(r, ("sentence_good", "sentence_bad", "linguistics_term", "UID"), f"{f.name} line {i + 1}")
            term = r["linguistics_term"]
            if term not in BLIMP_PHENOMENA:
                raise DataError(f"{f.name}: unknown BLiMP linguistics_term {term!r}")
            items.append(Item("blimp", r["UID"], BLIMP_PHENOMENA[term], str(r.get(id_key, i)),
                              r["sentence_good"], r["sentence_bad"], None, term))
        out += _subsample(items, limit_per_task, seed, f"blimp/{_stem(f)}")
    return out


def load_supplement(limit_per_task: int | None = None, seed: int = 0) -> list[Item]:
    """The BLiMP supplement (5 tasks). Pair id = line number in the file."""
    out: list[Item] = []
    for f in _files(DATA_DIRS["supplement"]):
        name = _stem(f)
        items = []
        for i, r in enumerate(_jsonl_rows(f)):
            _need(r, ("sentence_good", "sentence_bad"), f"{f.name} line {i + 1}")
            items.append(Item("supplement", name, SUPPLEMENT_NAMES.get(name, name), str(i),
                              r["sentence_good"], r["sentence_bad"]))
        out += _subsample(items, limit_per_task, seed, f"supplement/{name}")
    return out


def load_ewok(limit_per_task: int | None = None, seed: int = 0) -> list[Item]:
    """EWoK (11 domains, one file each): good = Target1, bad = Target2, context = Context1 (the 2024 template).
    Pair id = line number in the file."""
    out: list[Item] = []
    for f in _files(DATA_DIRS["ewok"]):
        name = _stem(f)
        items = []
        for i, r in enumerate(_jsonl_rows(f)):
            _need(r, ("Context1", "Target1", "Target2"), f"{f.name} line {i + 1}")
            items.append(Item("ewok", name, ewok_domain_name(name), str(i), r["Target1"], r["Target2"],
                              r["Context1"]))
        out += _subsample(items, limit_per_task, seed, f"ewok/{name}")
    return out


def load_task(task: str, limit_per_task: int | None = None, seed: int = 0,
              blimp_version: Literal["filtered", "full"] = "filtered") -> list[Item]:
    if task == "blimp":
        return load_blimp(blimp_version, limit_per_task, seed)
    if task == "supplement":
        return load_supplement(limit_per_task, seed)
    if task == "ewok":
        return load_ewok(limit_per_task, seed)
    raise ValueError(f"unknown task {task!r}; choose from {TASKS}")


def task_files(task: str, blimp_version: str = "filtered") -> list[Path]:
    sub = DATA_DIRS["blimp_full"] if task == "blimp" and blimp_version == "full" else DATA_DIRS[task]
    return _files(sub)


# ============================================================================================ encoding


def _split_encode(tokenizer, context: str | None, text: str, delimiter: str) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) without special tokens, split as lm-eval does: the continuation is what
    ``tok(context + delimiter + text)`` adds after ``tok(context)``."""
    cont = delimiter + text
    if not context:
        return [], tokenizer(cont, add_special_tokens=False)["input_ids"]
    n_sp = len(context) - len(context.rstrip())
    if n_sp:  # lm-eval moves trailing spaces of the context onto the continuation
        context, cont = context[:-n_sp], context[-n_sp:] + cont
    whole = tokenizer(context + cont, add_special_tokens=False)["input_ids"]
    ctx = tokenizer(context, add_special_tokens=False)["input_ids"]
    return whole[: len(ctx)], whole[len(ctx):]


def _encode_all(tokenizer, requests: Sequence["Request"], delimiter: str) -> list[tuple[list[int], list[int]]]:
    """:func:`_split_encode` for many requests, with one batched tokenizer call per kind of input."""
    out: list = [None] * len(requests)
    free = [i for i, (c, _) in enumerate(requests) if not c]
    if free:
        ids = tokenizer([delimiter + requests[i][1] for i in free], add_special_tokens=False)["input_ids"]
        for i, t in zip(free, ids):
            out[i] = ([], t)
    ctx = [i for i, (c, _) in enumerate(requests) if c]
    if ctx:
        pairs = []
        for i in ctx:
            c, t = requests[i]
            cont = delimiter + t
            n_sp = len(c) - len(c.rstrip())
            if n_sp:
                c, cont = c[:-n_sp], c[-n_sp:] + cont
            pairs.append((c, cont))
        whole = tokenizer([c + t for c, t in pairs], add_special_tokens=False)["input_ids"]
        head = tokenizer([c for c, _ in pairs], add_special_tokens=False)["input_ids"]
        for i, w, h in zip(ctx, whole, head):
            out[i] = (w[: len(h)], w[len(h):])
    return out


Request = tuple  # (context or None, text)


def _unique(requests: Sequence[Request]) -> tuple[list[Request], np.ndarray]:
    index: dict[Request, int] = {}
    inv = np.empty(len(requests), dtype=np.int64)
    for i, r in enumerate(requests):
        inv[i] = index.setdefault(r, len(index))
    return list(index), inv


def _bar(total: int, desc: str, progress: bool | Any):
    if progress is False or progress is None:
        return None
    if progress is not True:  # a bar handed in by the caller
        return progress
    from .progress import progress as progress_bar

    return progress_bar(total=total, desc=desc, unit="seq")


# ============================================================================================ causal LMs


@torch.inference_mode()
def causal_scores(
    model,
    tokenizer,
    requests: Sequence[Request],
    *,
    batch_size: int = 64,
    delimiter: str = " ",
    eot_id: int | None = None,
    mask_padding: bool = False,
    progress: bool | Any = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Sum of log-probabilities (nats) of each continuation and its token count.

    ``requests`` are ``(context, text)`` pairs (``context`` may be ``None``). The model reads
    ``<|endoftext|> context`` and scores ``delimiter + text``. Sequences are sorted by length (longest first) and
    run ``batch_size`` at a time, right-padded; the output projection runs only at the scored positions. Too long
    inputs are cut on the left (the context loses its start), as lm-eval does.

    Padding: rows are padded on the right, so in a causal model no real position ever attends to a pad (pads come
    after it) and positions count from 0 in every row: the attention mask changes nothing at the real positions.
    By default it is therefore not passed, which lets our GPT-Neo use SDPA's causal kernel (~25 % faster than the
    masked path here); ``mask_padding=True`` passes it anyway (for models where padding is not causal-safe). Both
    are tested against one-sentence forwards."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    uniq, inv = _unique([(c or None, t) for c, t in requests])
    eot = eot_id if eot_id is not None else (tokenizer.eos_token_id if tokenizer.eos_token_id is not None
                                             else tokenizer.bos_token_id)
    if eot is None:
        raise ValueError("the tokenizer has no end-of-text token; pass eot_id")
    max_len = context_length(model)
    seqs, starts = [], []  # full token sequences; index of the first scored token in each
    for (ctx, text), (c_ids, t_ids) in zip(uniq, _encode_all(tokenizer, uniq, delimiter)):
        if not t_ids:
            raise ValueError(f"continuation {text!r} encodes to no tokens")
        full = [eot] + c_ids + t_ids
        if max_len is not None and len(full) > max_len + 1:
            if len(t_ids) > max_len:
                raise ValueError(f"continuation of {len(t_ids)} tokens does not fit the model's context {max_len}")
            full = full[-(max_len + 1):]
        seqs.append(full)
        starts.append(len(full) - len(t_ids))
    # inputs are full[:-1]; the logits at input position j predict full[j + 1]
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    sums = np.zeros(len(uniq), dtype=np.float64)
    counts = np.array([len(s) - st for s, st in zip(seqs, starts)], dtype=np.int64)
    weight = np.bincount(inv, minlength=len(uniq))  # requests served by each unique sequence
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eot
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    base = getattr(model, "base_model", None)
    split_head = head is not None and base is not None and base is not model
    bar = _bar(len(requests), "score (causal)", progress)
    try:
        for b in range(0, len(order), batch_size):
            idx = order[b: b + batch_size]
            T = len(seqs[idx[0]]) - 1
            ids = torch.full((len(idx), T), pad, dtype=torch.long)
            tgt = torch.zeros((len(idx), T), dtype=torch.long)
            att = torch.zeros((len(idx), T), dtype=torch.long)
            scored = torch.zeros((len(idx), T), dtype=torch.bool)
            for r, i in enumerate(idx):
                full = seqs[i]
                n = len(full) - 1
                ids[r, :n] = torch.tensor(full[:-1])
                tgt[r, :n] = torch.tensor(full[1:])
                att[r, :n] = 1
                scored[r, starts[i] - 1:n] = True
            ids, att, scored, tgt = ids.to(device), att.to(device), scored.to(device), tgt.to(device)
            mask = att if mask_padding else None
            if split_head:
                hidden = base(input_ids=ids, attention_mask=mask).last_hidden_state
                logits = head(hidden[scored])
            else:
                logits = model(input_ids=ids, attention_mask=mask).logits[scored]
            lp = F.log_softmax(logits.float(), dim=-1).gather(-1, tgt[scored].unsqueeze(-1)).squeeze(-1)
            rows = torch.arange(len(idx), device=device).unsqueeze(1).expand(-1, T)[scored]
            per_row = torch.zeros(len(idx), dtype=torch.float64, device=device).index_add_(0, rows, lp.double())
            sums[idx] = per_row.cpu().numpy()
            if bar is not None:
                bar.update(int(weight[idx].sum()))
    finally:
        if bar is not None and progress is True:
            bar.close()
        model.train(was_training)
    return sums[inv], counts[inv]


# ============================================================================================ masked LMs


@dataclass
class _MlmPlan:
    seqs: list[list[int]]  # [CLS] context text [SEP]
    positions: list[list[int]]  # positions to mask (the text's tokens)


def _mlm_plan(tokenizer, uniq: Sequence[Request], delimiter: str) -> _MlmPlan:
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    if cls is None or sep is None or tokenizer.mask_token_id is None:
        raise ValueError("a masked-LM tokenizer needs [CLS], [SEP] and [MASK] tokens")
    seqs, positions = [], []
    for (ctx, text), (c_ids, t_ids) in zip(uniq, _encode_all(tokenizer, uniq, delimiter)):
        if not t_ids:
            raise ValueError(f"text {text!r} encodes to no tokens")
        seqs.append([cls] + c_ids + t_ids + [sep])
        positions.append(list(range(1 + len(c_ids), 1 + len(c_ids) + len(t_ids))))
    return _MlmPlan(seqs, positions)


def mlm_batches(lengths: Sequence[int], n_masks: Sequence[int], max_tokens: int,
                fill: float = 0.5) -> list[list[tuple[int, int]]]:
    """Pack the masked copies of many sequences into forward batches of at most ``max_tokens`` padded tokens.

    Sequences are taken longest first; a batch is a list of ``(sequence, k)`` (the k-th masked copy of that
    sequence), padded to the length of its first (longest) sequence, so ``len(batch) * that length <=
    max_tokens``. A shorter sequence opens a new batch when the current one is at least ``fill`` full, so most
    batches hold a single length (no padding, no attention mask) and few are small."""
    if lengths and max(lengths) > max_tokens:
        raise ValueError(f"a sequence of {max(lengths)} tokens exceeds max_tokens={max_tokens}; raise max_tokens")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches, cur, cur_len = [], [], 0
    for i in order:
        for k in range(n_masks[i]):
            full = (len(cur) + 1) * cur_len > max_tokens
            if cur and (full or (lengths[i] != cur_len and len(cur) * cur_len >= fill * max_tokens)):
                batches.append(cur)
                cur = []
            if not cur:
                cur_len = lengths[i]
            cur.append((i, k))
    if cur:
        batches.append(cur)
    return batches


def _supports_masked_only(model) -> bool:
    return bool(getattr(model, "supports_masked_only", False))


@torch.inference_mode()
def mlm_scores(
    model,
    tokenizer,
    requests: Sequence[Request],
    *,
    max_tokens: int = 2048,
    delimiter: str = " ",
    progress: bool | Any = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Pseudo-log-likelihood (sum of log-probabilities in nats, each text token masked in turn) and the number of
    masked tokens, per ``(context, text)`` request. Divide by the count for the per-token mean.

    The masked copies of all sentences are packed into forwards of at most ``max_tokens`` padded tokens
    (``rows × padded length``; :func:`mlm_batches`), longest first, right-padded with an attention mask. Models
    with ``supports_masked_only`` (our :class:`~helpers.ltg_bert.LtgBertForMaskedLM`) run the MLM head at the masked
    positions only; others return full logits, which ``max_tokens`` also bounds (``max_tokens × vocab`` floats).
    The default 2,048 was the fastest on CPU for the cpu-preset encoder (1,024 … 4,096 within noise, 8,192 ~15 %
    slower: a forward's activations stay in cache; ``benchmarks/scoring.py``)."""
    uniq, inv = _unique([(c or None, t) for c, t in requests])
    plan = _mlm_plan(tokenizer, uniq, delimiter)
    lengths = [len(s) for s in plan.seqs]
    n_masks = [len(p) for p in plan.positions]
    batches = mlm_batches(lengths, n_masks, max_tokens)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    mask_id = tokenizer.mask_token_id
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    masked_only = _supports_masked_only(model)
    # all sequences as one padded matrix (longest first); a batch gathers rows from it
    T_all = max(lengths) if lengths else 0
    base = torch.full((len(plan.seqs), T_all), pad, dtype=torch.long)
    for i, s in enumerate(plan.seqs):
        base[i, : len(s)] = torch.tensor(s)
    lens_t = torch.tensor(lengths, dtype=torch.long)
    sums = torch.zeros(len(plan.seqs), dtype=torch.float64)
    done = np.zeros(len(plan.seqs), dtype=np.int64)
    weight = np.bincount(inv, minlength=len(uniq))  # requests served by each unique sequence
    bar = _bar(len(requests), f"score (PLL, ≤{max_tokens} tok/forward)", progress)
    try:
        for batch in batches:
            seq = torch.tensor([i for i, _ in batch], dtype=torch.long)
            pos = torch.tensor([plan.positions[i][k] for i, k in batch], dtype=torch.long)
            T = int(lens_t[seq].max())
            ids = base[seq, :T].clone()
            target = ids[torch.arange(len(batch)), pos].clone()
            ids[torch.arange(len(batch)), pos] = mask_id
            att = (torch.arange(T).unsqueeze(0) < lens_t[seq].unsqueeze(1)).long()
            ids, att = ids.to(device), att.to(device)
            if masked_only:
                labels = torch.full_like(ids, -100)
                labels[torch.arange(len(batch)), pos] = target.to(device)
                logits = model(input_ids=ids, attention_mask=att, labels=labels, masked_only=True).logits
            else:
                logits = model(input_ids=ids, attention_mask=att).logits[torch.arange(len(batch)), pos.to(device)]
            lp = F.log_softmax(logits.float(), dim=-1).gather(-1, target.to(device).unsqueeze(-1)).squeeze(-1)
            sums.index_add_(0, seq, lp.double().cpu())
            if bar is not None:
                for i, _ in batch:
                    done[i] += 1
                    if done[i] == n_masks[i]:
                        bar.update(int(weight[i]))
    finally:
        if bar is not None and progress is True:
            bar.close()
        model.train(was_training)
    counts = np.array(n_masks, dtype=np.int64)
    return sums.numpy()[inv], counts[inv]


# ============================================================================================ pairs -> rows


def tie_coin(seed: int, task: str, paradigm: str, pair_id: str) -> bool:
    """The seeded coin that decides a tie: the same item and seed always give the same answer."""
    h = hashlib.sha256(f"{seed}\x1f{task}\x1f{paradigm}\x1f{pair_id}".encode()).digest()
    return bool(h[0] & 1)


Scorer = Callable[[Sequence[Request]], "tuple[np.ndarray, np.ndarray] | np.ndarray"]


def score_items(items: Sequence[Item], scorer: Scorer, *, reduction: Literal["sum", "mean"] = "sum",
                seed: int = 0, ewok_context: bool = True) -> list[dict]:
    """Per-item rows from any scorer (``requests -> scores`` or ``(sums, counts)``).

    ``reduction="mean"`` divides each score by its token count (needs a scorer that returns counts)."""
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction must be 'sum' or 'mean', not {reduction!r}")
    reqs: list[Request] = []
    for it in items:
        ctx = it.context if ewok_context else None
        reqs += [(ctx, it.good), (ctx, it.bad)]
    out = scorer(reqs) if reqs else (np.zeros(0), np.zeros(0))
    if isinstance(out, tuple):
        sums, counts = np.asarray(out[0], dtype=np.float64), np.asarray(out[1], dtype=np.int64)
    else:
        sums, counts = np.asarray(out, dtype=np.float64), None
    if len(sums) != len(reqs):
        raise ValueError(f"scorer returned {len(sums)} scores for {len(reqs)} requests")
    if reduction == "mean":
        if counts is None:
            raise ValueError("reduction='mean' needs a scorer that returns (sums, counts)")
        scores = sums / np.maximum(counts, 1)
    else:
        scores = sums
    rows = []
    for j, it in enumerate(items):
        g, b = float(scores[2 * j]), float(scores[2 * j + 1])
        tie = g == b
        correct = tie_coin(seed, it.task, it.paradigm, it.pair_id) if tie else g > b
        row = {"task": it.task, "paradigm": it.paradigm, "phenomenon": it.phenomenon, "term": it.term,
               "pair_id": it.pair_id, "score_good": g, "score_bad": b}
        if counts is not None:
            row["n_good"], row["n_bad"] = int(counts[2 * j]), int(counts[2 * j + 1])
        row["correct"], row["tie"] = bool(correct), bool(tie)
        rows.append(row)
    return rows


# ============================================================================================ aggregation


BOOTSTRAP_SAMPLES = 2000


def paradigm_mean_interval(pairs: Sequence[int], correct: Sequence[int], confidence: float = 0.95,
                           samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile interval (in %) of the mean over paradigms of their accuracies, by a seeded bootstrap over
    items stratified by paradigm: resampling a paradigm's ``n`` items with replacement gives
    ``Binomial(n, correct / n)`` right answers, so each replicate draws one binomial per paradigm."""
    n = np.asarray(pairs, dtype=np.int64)
    k = np.asarray(correct, dtype=np.int64)
    if n.size == 0 or (n <= 0).any() or (k < 0).any() or (k > n).any():
        raise ValueError("every paradigm needs pairs > 0 and 0 <= correct <= pairs")
    rng = np.random.default_rng(seed)
    draws = rng.binomial(n[None, :], (k / n)[None, :], size=(samples, n.size)) / n[None, :]
    lo, hi = percentile_interval(100.0 * draws.mean(axis=1), confidence)
    return float(lo), float(hi)


def summarise(rows: Iterable[dict] | "pd.DataFrame", confidence: float = 0.95, seed: int = 0) -> dict[str, "pd.DataFrame"]:
    """Accuracies (in %) from per-item rows, with ``confidence`` intervals of the headline accuracies
    (:func:`paradigm_mean_interval`: a seeded bootstrap over items, stratified by paradigm; columns ``ci_low``,
    ``ci_high``; the ``overall`` row's interval is that of the mean over tasks, every task's paradigm weighted
    as in that mean).

    * ``paradigm``: task, paradigm, phenomenon, pairs, correct, ties, accuracy;
    * ``phenomenon``: task, phenomenon, paradigms, pairs, accuracy = mean of its paradigms' accuracies;
    * ``task``: task, paradigms, phenomena, pairs, ties, ``accuracy`` = mean over paradigms (the BabyLM 2024 group
      score, the headline), ``accuracy_phenomena`` = mean over phenomena, ``accuracy_pairs`` = pooled pairs;
    * ``overall``: one row, the unweighted mean of the tasks' headline accuracies (as the papers' "Avg." over the
      zero-shot columns) and each task's accuracy as a column."""
    import pandas as pd

    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if df.empty:
        raise ValueError("no rows to summarise")
    df = df.assign(correct=df["correct"].astype(bool), tie=df["tie"].astype(bool))
    order = {t: i for i, t in enumerate(TASKS)}
    par = (df.groupby(["task", "paradigm", "phenomenon"], sort=False)
             .agg(pairs=("correct", "size"), correct=("correct", "sum"), ties=("tie", "sum")).reset_index())
    par["accuracy"] = 100.0 * par["correct"] / par["pairs"]
    par = par.sort_values(["task", "paradigm"], key=lambda s: s.map(order) if s.name == "task" else s,
                          kind="stable").reset_index(drop=True)
    phe = (par.groupby(["task", "phenomenon"], sort=False)
              .agg(paradigms=("paradigm", "size"), pairs=("pairs", "sum"), accuracy=("accuracy", "mean"))
              .reset_index())
    phe = phe.sort_values(["task", "phenomenon"], key=lambda s: s.map(order) if s.name == "task" else s,
                          kind="stable").reset_index(drop=True)
    tasks = []
    for task, g in par.groupby("task", sort=False):
        p = phe[phe["task"] == task]
        lo, hi = paradigm_mean_interval(g["pairs"], g["correct"], confidence, seed=seed)
        tasks.append({"task": task, "paradigms": len(g), "phenomena": len(p), "pairs": int(g["pairs"].sum()),
                      "ties": int(g["ties"].sum()), "accuracy": float(g["accuracy"].mean()), "ci_low": lo, "ci_high": hi,
                      "accuracy_phenomena": float(p["accuracy"].mean()),
                      "accuracy_pairs": float(100.0 * g["correct"].sum() / g["pairs"].sum())})
    task_df = pd.DataFrame(tasks).sort_values("task", key=lambda s: s.map(order)).reset_index(drop=True)
    overall = {TASK_NAMES.get(t, t): a for t, a in zip(task_df["task"], task_df["accuracy"])}
    # the average over tasks weights each paradigm by 1 / (tasks × its task's paradigms): one bootstrap per task,
    # drawn with the same seed sequence, then averaged replicate by replicate
    rng = np.random.default_rng(seed)
    reps = []
    for task, g in par.groupby("task", sort=False):
        n, k = g["pairs"].to_numpy(), g["correct"].to_numpy()
        reps.append(100.0 * (rng.binomial(n[None, :], (k / n)[None, :], size=(BOOTSTRAP_SAMPLES, len(n))) / n).mean(axis=1))
    avg = np.mean(reps, axis=0)
    alpha = (1.0 - confidence) / 2.0
    overall_df = pd.DataFrame([{**overall, "average": float(task_df["accuracy"].mean()),
                                "average_ci_low": float(np.quantile(avg, alpha)),
                                "average_ci_high": float(np.quantile(avg, 1.0 - alpha)),
                                "ties": int(task_df["ties"].sum()), "pairs": int(task_df["pairs"].sum())}])
    return {"paradigm": par, "phenomenon": phe, "task": task_df, "overall": overall_df}


# ============================================================================================ top level


@dataclass
class EvalSettings:
    kind: Literal["causal", "mlm"]
    reduction: Literal["sum", "mean"] = "sum"
    delimiter: str = " "
    ewok_context: bool = True
    seed: int = 0
    limit_per_task: int | None = None
    blimp_version: Literal["filtered", "full"] = "filtered"
    batch_size: int = 64
    max_tokens: int = 2048
    scoring_version: str = SCORING_VERSION

    def cache_key(self) -> dict:
        d = asdict(self)
        d.pop("batch_size")  # exact batching: the batch shape does not change scores beyond float noise
        d.pop("max_tokens")
        return d


@dataclass
class EvalResult:
    rows: list[dict]
    summary: dict[str, Any] = field(default_factory=dict)  # DataFrames from :func:`summarise`
    settings: EvalSettings | None = None
    files: dict[str, Path] = field(default_factory=dict)  # task -> per-item JSONL (when cached)

    @property
    def by_paradigm(self):
        return self.summary["paradigm"]

    @property
    def by_phenomenon(self):
        return self.summary["phenomenon"]

    @property
    def by_task(self):
        return self.summary["task"]

    @property
    def overall(self):
        return self.summary["overall"]


def chance_verdict(ci_low: float, ci_high: float, chance: float = 50.0) -> str:
    """``"yes"`` when the whole interval lies above ``chance``, ``"below"`` when it lies below, else ``"no"``."""
    return "yes" if ci_low > chance else ("below" if ci_high < chance else "no")


def interval_table(results: Mapping[tuple[str, str], "EvalResult"], chance: float = 50.0) -> "pd.DataFrame":
    """One row per (kind, model, task) of ``results`` (``{(kind, name): EvalResult}``): pairs, accuracy and its
    paradigm-stratified bootstrap interval (``ci_low``/``ci_high``, percent), and ``above chance`` ("yes" when the
    interval lies above ``chance``, "below" when under it, "no" when it contains it)."""
    import pandas as pd

    rows = []
    for (kind, name), res in results.items():
        for r in res.by_task.itertuples():
            verdict = chance_verdict(r.ci_low, r.ci_high, chance)
            rows.append({"kind": kind, "model": name, "task": TASK_NAMES.get(r.task, r.task), "pairs": r.pairs,
                         "accuracy": r.accuracy, "ci_low": r.ci_low, "ci_high": r.ci_high, "above chance": verdict})
    return pd.DataFrame(rows)


def average_note(row: Mapping[str, Any], benchmarks: Sequence[str] = ("BLiMP", "Supp.", "EWoK", "GLUE")) -> str:
    """What an average over ``benchmarks`` in a row of ours (``source`` not "paper") leaves out or scales: "over 3
    of 4 benchmarks (GLUE missing)" when some are absent, and "GLUE includes <protocol>" when GLUE ran a scaled
    protocol (its ``GLUE protocol`` column). Paper rows keep the paper's own average: empty note."""
    import math

    if row.get("source") == "paper":
        return ""
    missing = [b for b in benchmarks if row.get(b) is None or (isinstance(row.get(b), float) and math.isnan(row[b]))]
    parts = []
    if missing and len(missing) < len(benchmarks):
        parts.append(f"over {len(benchmarks) - len(missing)} of {len(benchmarks)} benchmarks ({', '.join(missing)} missing)")
    protocol = row.get("GLUE protocol") or ""
    if "GLUE" not in missing and protocol not in ("", "standard", "not fine-tuned"):
        parts.append("GLUE includes " + protocol)
    return "; ".join(parts)


def model_digest(model) -> str:
    """SHA-256 (16 hex) of a model's class, config and weights (every tensor of the state dict)."""
    h = hashlib.sha256(type(model).__name__.encode())
    cfg = getattr(model, "config", None)
    if cfg is not None and hasattr(cfg, "to_json_string"):
        h.update(cfg.to_json_string(use_diff=False).encode())
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode() + str(t.dtype).encode())
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:16]


def tokenizer_digest(tokenizer) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    blob = backend.to_str() if backend is not None else json.dumps(tokenizer.get_vocab(), sort_keys=True)
    specials = json.dumps({k: str(v) for k, v in sorted(tokenizer.special_tokens_map.items())})
    return hashlib.sha256((blob + specials).encode()).hexdigest()[:16]


def make_scorer(model, tokenizer, settings: EvalSettings, progress: bool | Any = False) -> Scorer:
    if settings.kind == "causal":
        return lambda reqs: causal_scores(model, tokenizer, reqs, batch_size=settings.batch_size,
                                          delimiter=settings.delimiter, progress=progress)
    if settings.kind == "mlm":
        return lambda reqs: mlm_scores(model, tokenizer, reqs, max_tokens=settings.max_tokens,
                                       delimiter=settings.delimiter, progress=progress)
    raise ValueError(f"kind must be 'causal' or 'mlm', not {settings.kind!r}")


def evaluate_model(
    model,
    tokenizer,
    kind: Literal["causal", "mlm"] = "causal",
    tasks: Sequence[str] = TASKS,
    *,
    reduction: Literal["sum", "mean"] | None = None,
    out_dir: str | Path | None = None,
    name: str | None = None,
    batch_size: int = 64,
    max_tokens: int = 2048,
    limit_per_task: int | None = None,
    seed: int = 0,
    blimp_version: Literal["filtered", "full"] = "filtered",
    ewok_context: bool = True,
    delimiter: str = " ",
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> EvalResult:
    """Score ``model`` on the minimal-pair ``tasks`` and summarise (see the module docstring for the protocol).

    ``reduction`` (masked LMs): ``"sum"`` or ``"mean"`` PLL; decoders always use the summed log-probability, so
    anything but ``None``/``"sum"`` is refused for ``kind="causal"``. With ``out_dir`` the per-item rows of each
    task are cached in ``out_dir/<task>.jsonl`` (skipped when the weights, tokenizer, settings and data files are
    unchanged). ``limit_per_task`` takes a seeded sample of at most that many pairs per paradigm / file."""
    from .artifacts import fingerprint, read_jsonl, run_step, sha256_file, write_jsonl

    if kind not in ("causal", "mlm"):
        raise ValueError(f"kind must be 'causal' or 'mlm', not {kind!r}")
    if kind == "causal" and reduction not in (None, "sum"):
        raise ValueError("decoders are scored with the summed log-probability; reduction applies to masked LMs")
    bad = [t for t in tasks if t not in TASKS]
    if bad:
        raise ValueError(f"unknown task(s) {bad}; choose from {TASKS}")
    settings = EvalSettings(kind=kind, reduction=reduction or "sum", delimiter=delimiter, ewok_context=ewok_context,
                            seed=seed, limit_per_task=limit_per_task, blimp_version=blimp_version,
                            batch_size=batch_size, max_tokens=max_tokens)
    items = {t: load_task(t, limit_per_task, seed, blimp_version) for t in tasks}
    total = sum(2 * len(v) for v in items.values())
    bar = _bar(total, f"{name or 'model'}: {'+'.join(tasks)}", progress) if progress else None
    scorer = make_scorer(model, tokenizer, settings, progress=bar if bar is not None else False)
    digests = None
    rows: list[dict] = []
    files: dict[str, Path] = {}
    try:
        for task in tasks:
            def run(task=task) -> list[dict]:
                return score_items(items[task], scorer, reduction=settings.reduction, seed=seed,
                                   ewok_context=ewok_context)

            if out_dir is None:
                rows += run()
                continue
            if digests is None:
                digests = (model_digest(model), tokenizer_digest(tokenizer))
            out = Path(out_dir) / f"{task}.jsonl"
            data = {p.name: sha256_file(p) for p in task_files(task, blimp_version)}
            fp = fingerprint(task, digests, settings.cache_key(), data)
            ran = run_step(f"{name or 'model'} {task}", out, fp, lambda out=out, run=run: write_jsonl(out, run()),
                           log=log)
            if not ran and bar is not None:
                bar.update(2 * len(items[task]))
            rows += read_jsonl(out)
            files[task] = out
    finally:
        if bar is not None:
            bar.close()
    return EvalResult(rows=rows, summary=summarise(rows), settings=settings, files=files)


# ----------------------------------------------------------------------------- published numbers beside ours
PAPER_BENCHMARKS = {"BLiMP": "blimp", "Supp.": "supplement", "EWoK": "ewok", "GLUE": "glue"}


def paper_authors_row(table: "pd.DataFrame", training_data: str, *, plus_512: bool = False) -> "pd.Series | None":
    """The BERTtime Stories authors' own row of Table 2 or 3 (``params/paper_reference``) for a mix: model
    ``LTG-BERT (ours)``, never the organisers' baselines (``LTG-BERT (baseline)``, ``BabyLlama (baseline)``), which
    share the ``baby-10M`` / ``baby-100M`` data with the authors' own run; ``plus_512`` picks the "+512 training" row
    instead. None when the table has no such row."""
    model = "LTG-BERT (ours) +512 training" if plus_512 else "LTG-BERT (ours)"
    rows = table[(table["training_data"] == training_data) & (table["model"] == model)]
    return None if rows.empty else rows.iloc[0]


def paper_ewok_has_context(row: "pd.Series") -> bool:
    """Whether a published EWoK number conditions on the item's context, as ours does (``ewok_context=True``).
    The organisers' baseline numbers (48.9, 51.9, 50.7, 52.1: rows whose model says "baseline") come from the 2024
    pipeline's masked-LM wrapper, which we read as dropping the context (50 % by construction on the swapped-twin
    files; see the module docstring); the authors' own rows are taken to be context-conditioned
    unless their ``note`` says "without context"."""
    return "baseline" not in str(row.get("model", "")).lower() and "without context" not in str(row.get("note", "")).lower()


def compare_with_paper(ours: "pd.DataFrame", table: "pd.DataFrame", equivalents: dict[str, str],
                       ours_label: str = "ours") -> "pd.DataFrame":
    """One row per (our mix, benchmark): our score beside the authors' own row for the mix it stands for
    (:func:`paper_authors_row`). ``ours``: one row per mix with ``training data`` and the columns of
    :data:`PAPER_BENCHMARKS`; ``table``: a paper table as stored in ``params/paper_reference``. An EWoK number
    computed without the context (:func:`paper_ewok_has_context`) is replaced by the row's ``ewok_alt`` when it has
    one, else left out, and the ``note`` says which; a missing paper cell is NaN with a note."""
    import pandas as pd

    out = []
    for name, paper_mix in equivalents.items():
        mine = ours[ours["training data"] == name]
        if mine.empty:
            continue
        row = paper_authors_row(table, paper_mix)
        for bench, col in PAPER_BENCHMARKS.items():
            paper, note = float("nan"), ""
            if row is None:
                note = f"no authors' row for {paper_mix}"
            else:
                paper = row.get(col, float("nan"))
                if bench == "EWoK" and not paper_ewok_has_context(row):
                    alt = row.get("ewok_alt", float("nan"))
                    paper, note = (alt, "paper's context-conditioned value (ewok_alt)") if pd.notna(alt) else \
                        (float("nan"), "paper EWoK computed without context: not compared")
                if pd.isna(paper) and not note:
                    note = "not printed in the paper"
            out.append({"mix": name, "paper mix": paper_mix, "paper row": None if row is None else row["model"],
                        "benchmark": bench, ours_label: float(mine[bench].iloc[0]) if pd.notna(mine[bench].iloc[0]) else float("nan"),
                        "paper": float(paper) if pd.notna(paper) else float("nan"), "note": note})
    return pd.DataFrame(out)
