"""Run recipes: the decoder and encoder runs of the study, planned from a notebook's params and trained by
:func:`helpers.training.loop.train`.

* **Skip or resume**: :func:`train_or_skip` trains one named model, resumes it from its checkpoint, or skips it
  when a finished run was made from the same spec, config and token data (their fingerprint); a run made from
  other inputs is set aside, never deleted first.
* **Decoders** (notebook 02): :func:`plan_decoders` gives each budget its tokenizer, packed blocks (streamed into a
  memory-mapped file), held-out blocks, regularisation and a size check; :func:`train_decoder` trains one GPT-Neo.
* **Encoders** (notebook 04): :func:`plan_encoders` checks each mix against the challenge rule, trains its
  tokenizer and cuts masked blocks (balanced by :func:`balance_blocks`, with LTG-BERT's long phase by
  :func:`long_phase_data`); :func:`train_encoder` pretrains one LTG-BERT.
* Outside the notebook (torchrun over several GPUs, one SLURM array task per budget): :mod:`helpers.training.launch`.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import time as _time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from helpers.training.seed_axis import decoder_seeds, expand_seeds
import torch

from helpers.core.artifacts import (fingerprint, read_json, read_jsonl, run_step, save_pretrained_atomic, write_json,
                                    write_jsonl, write_text)
from helpers.core.config import load_params, run_dir, shown_path
from helpers.core.digests import bytes_digest, sha256_file
from helpers.core.hardware import resolve_precision
from helpers.core.seeding import generator, seed_everything
from helpers.data.blocks import PackedBlocks, cached_blocks, pack_blocks
from helpers.data.budgets import fmt_words
from helpers.data.corpus_files import iter_texts, read_corpus
from helpers.data.ledger import Ledger
from helpers.data.masking import LongPhaseBlocks, MaskedBlocks, MaskingConfig, TokenIds, encode_encoder_blocks, mlm_loss
from helpers.data.normalisation import encoder_segments
from helpers.data.tokenizers import end_of_text_id, iter_story_ids, load_tokenizer, train_tokenizer
from helpers.models.decoder import (FAST_PATH_VERSION, DecoderSpec, build_decoder, count_parameters, load_decoder,
                                    regularisation_for_budget, regularisation_for_epochs)
from helpers.models.ltg_bert import LtgBertForMaskedLM, ltg_bert_config
from helpers.training.sizes import check_sizes
from helpers.training.acceptance import damaged_run, settle_replacement, vocab_size
from helpers.training.loop import (Placement, TrainConfig, TrainingDiverged, TrainResult, _ckpt_step, evaluate,
                                   lm_loss, placement, read_metrics, train)


# ----------------------------------------------------------------------------- the decoder stage
def encode_blocks(tokenizer, texts: Sequence[str], block: int, max_blocks: int | None = None, seed: int = 0) -> PackedBlocks:
    """Stories → token ids, each closed by ``<|endoftext|>`` → packed blocks of ``block`` tokens (first
    ``max_blocks`` kept, for bounded validation cost)."""
    blocks = pack_blocks(iter_story_ids(tokenizer, texts, add_eot=True), block)
    return PackedBlocks(blocks if max_blocks is None else blocks[:max_blocks], seed)


def blocks_digest(data: PackedBlocks) -> str:
    """SHA-256 of the packed token ids (what a run was trained on, whatever produced it)."""
    return bytes_digest(memoryview(data.blocks.contiguous().numpy()).cast("B"), 16)  # no copy of a mapped file


def train_or_skip(
    name: str,
    build_model: Callable[[], torch.nn.Module],
    spec: dict,
    train_data,
    valid_data,
    tokenizer,
    cfg: TrainConfig,
    out_dir: str | Path,
    loss_fn: Callable[[torch.nn.Module, dict], torch.Tensor] = lm_loss,
    progress: bool = True,
    log: Callable[[str], None] = print,
    extra: dict | None = None,
    place: Placement | None = None,
) -> TrainResult:
    """Train (or resume, or skip) one model; the best checkpoint lands in ``<out_dir>/best`` with its tokenizer.
    ``place``: the device and precision resolved for ``cfg`` (:func:`helpers.training.loop.placement`), handed to the
    loop (resolved there when not given).

    A finished run whose ``spec``, config and token data are unchanged is skipped. A run (finished or a checkpoint)
    made from other inputs is never deleted first: it is moved aside to ``<out_dir>.kept-<date>`` (said in the
    output), dropped only once the new run has finished with a sane model (held-out loss finite and below a uniform
    guess; else the old run is moved back and :class:`TrainingRejected` says so), and moved back if the old params
    return first. A finished run with a damaged model (:func:`~helpers.training.acceptance.damaged_run`: truncated,
    edited since saved, NaN/inf weights) is trained again, never skipped. ``extra`` (e.g. the words per source of an encoder's mix) is stored with
    the run."""

    out = Path(out_dir)
    fp = fingerprint(spec, asdict(cfg), blocks_digest(train_data), blocks_digest(valid_data), *([extra] if extra else []))
    state_file = out / "train_state.json"
    ck = out / "checkpoint" / "state.pt"

    def run_fp(folder: Path) -> str | None:  # the fingerprint of a finished run in ``folder``
        try:
            return read_json(folder / "train_state.json").get("extra", {}).get("fingerprint")
        except (FileNotFoundError, json.JSONDecodeError, AttributeError):
            return None

    # a run set aside when the params changed (see below) whose params are back: restore it instead of retraining
    if not ck.is_file() and run_fp(out) != fp:
        for kept in sorted(out.parent.glob(f"{out.name}.kept-*"), reverse=True):
            if run_fp(kept) == fp and (kept / "best").is_dir():
                if out.exists():
                    shutil.rmtree(out)  # holds no checkpoint and no finished run: the remains of a failed attempt
                os.replace(kept, out)
                log(f"[restore] {name}: the finished run kept at {shown_path(kept)} matches these params again; moved back to {shown_path(out)}")
                break
    if state_file.is_file() and (out / "best").is_dir():
        st = read_json(state_file)
        same = st.get("extra", {}).get("fingerprint") == fp
        if damaged := same and damaged_run(out):  # not done: trained again (nothing in it is usable)
            log(f"[redo] {name}: {damaged}; training it again")
            shutil.rmtree(out)
        elif same:
            log(f"[skip] {name}: trained already with these inputs and params ({fp})")
            return TrainResult(str(out), st["steps"], st["tokens_seen"], st["best_valid_loss"], st["best_step"],
                               st["final_valid_loss"], st["seconds"], None, read_metrics(out / "metrics.jsonl"),
                               st.get("stopped_early"))
    try:
        old = torch.load(ck, map_location="cpu", weights_only=False).get("extra", {}).get("fingerprint") if ck.is_file() else None
    except (RuntimeError, EOFError, OSError, ValueError) as e:  # a damaged checkpoint cannot be resumed: start again
        log(f"[redo] {name}: the checkpoint {shown_path(ck)} cannot be read ({type(e).__name__}); training from the start")
        old = shutil.rmtree(out / "checkpoint")
    kept = None
    if ck.is_file() and old == fp:
        log(f"[resume] {name} from step {_ckpt_step(out / 'checkpoint')}")
    elif ck.is_file() or state_file.is_file() or (out / "best").is_dir():
        # never delete a result before its replacement exists: the old run is set aside under a dated name and
        # dropped once the new run has finished and proved sane (acceptance.settle_replacement), else moved back
        kept = out.with_name(f"{out.name}.kept-{_time.strftime('%Y%m%d-%H%M%S')}")
        for i in range(2, 1000):
            if not kept.exists():
                break
            kept = out.with_name(f"{out.name}.kept-{_time.strftime('%Y%m%d-%H%M%S')}-{i}")
        os.replace(out, kept)
        out.mkdir(parents=True)
        write_text(out / "_replaces.json", json.dumps({"kept": kept.name}))  # a sibling of out: no machine path
        what = "finished run" if state_file.name in os.listdir(kept) else f"checkpoint (step {_ckpt_step(kept / 'checkpoint')})"
        log(f"[new ] {name}: the {what} in {shown_path(out)} was made from other inputs/params; it is kept as {shown_path(kept)} until the "
            f"new run has finished with a sane model (and restored if it does not, or if these params are put back before then)")
    elif out.exists():
        marker = out / "_replaces.json"  # a run set aside earlier stays set aside until a checkpoint replaces it
        pending = marker.read_text() if marker.is_file() else None
        shutil.rmtree(out)  # no checkpoint, no model, no finished run: nothing to keep
        if pending:
            out.mkdir(parents=True)
            write_text(out / "_replaces.json", pending)
            kept = Path(json.loads(pending).get("kept", ""))
            kept = kept if kept.is_absolute() else out.parent / kept
    seed_everything(cfg.seed)
    model = build_model()
    log(f"[run ] {name}: {len(train_data)} blocks × {train_data.blocks.shape[1]} tokens, {cfg.steps} steps of "
        f"{cfg.batch_size} ({train_data.epochs(cfg.steps, cfg.batch_size):.2f} epochs)")
    try:
        result = train(model, train_data, valid_data, out, cfg, tokenizer=tokenizer, loss_fn=loss_fn, progress=progress,
                       extra_state={"fingerprint": fp, "name": name, "spec": spec, **(extra or {})}, place=place)
    except TrainingDiverged as e:
        if kept is not None and kept.exists():
            raise TrainingDiverged(f"{e} The previous run is untouched, kept as {shown_path(kept)} (moved back by itself "
                                   f"when its params are restored).") from None
        raise
    return settle_replacement(name, out, result, vocab_size(model, spec, tokenizer), log)


def train_decoder(name: str, train_data: PackedBlocks, valid_data: PackedBlocks, tokenizer, spec, cfg: TrainConfig,
                  out_dir: str | Path, progress: bool = True, log: Callable[[str], None] = print,
                  loss_fn: Callable[[torch.nn.Module, dict], torch.Tensor] = lm_loss, extra: dict | None = None,
                  place: Placement | None = None) -> TrainResult:
    """One GPT-Neo decoder (``spec``: a :class:`~helpers.models.decoder.DecoderSpec` or its dict) via :func:`train_or_skip`.

    The fast path's version is part of the run's fingerprint: a change of its numerics retrains rather than
    silently reusing models trained by other code. ``loss_fn``/``extra``: another objective (e.g. the contrastive
    one of :mod:`helpers.analysis.architecture`) and what identifies it. The device and precision of ``cfg`` are
    resolved once, here (or given as ``place``: :func:`helpers.training.loop.placement`), and passed down to the loop."""
    spec = spec if isinstance(spec, DecoderSpec) else DecoderSpec(**spec)
    place = place or placement(cfg.device, cfg.precision)
    eot = end_of_text_id(tokenizer)
    return train_or_skip(name, lambda: build_decoder(spec, seed=cfg.seed, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot),
                         asdict(spec), train_data, valid_data, tokenizer, cfg, out_dir, loss_fn, progress, log,
                         extra={"fast_path": FAST_PATH_VERSION, **(extra or {})}, place=place)


def decoder_rows(results: dict[str, TrainResult], runs: dict, run_dir: str | Path, official_text: str,
                 official_blocks: int | None, used_valid_loss: dict[str, float] | None = None) -> list[dict]:
    """Notebook 02's results table, one row per budget: size, tokens and passes, best step, early stop, the best
    held-out loss of plain training and its perplexity, the held-out loss of the model later notebooks use
    (``used_valid_loss[name]`` after repetition fine-tuning, else the plain best), and that model's loss on the
    official validation text (``official_text`` as running text, at most ``official_blocks`` blocks)."""
    used_valid_loss = used_valid_loss or {}
    rows = []
    for name, res in results.items():
        r = runs[name]
        used = load_decoder(Path(run_dir) / "decoders" / name / "best")  # what every later notebook loads
        official = encode_blocks(r.tokenizer, [official_text], r.spec.context, max_blocks=official_blocks)
        rows.append({"budget": name, "seed": r.seed, "parameters": count_parameters(used),
                     "non-embedding parameters": count_parameters(used, non_embedding=True),
                     "tokens seen": res.tokens_seen,
                     "passes trained": round(r.train_data.epochs(res.steps, r.cfg.batch_size), 2),
                     "best step": res.best_step, "last step": res.steps,
                     "stopped early": "yes" if res.stopped_early else "no", "best valid loss": res.best_valid_loss,
                     "valid perplexity": math.exp(res.best_valid_loss),
                     "held-out loss of the model used": used_valid_loss.get(name, res.best_valid_loss),
                     "official valid loss": evaluate(used, official, r.cfg.micro_batch or r.cfg.batch_size),
                     "precision": resolve_precision(r.cfg.precision), "wall time (min)": res.seconds / 60})
    return rows


@dataclass
class DecoderRun:
    """Everything one budget's decoder run needs (see :func:`plan_decoders`)."""

    name: str
    tokenizer: Any
    train_data: PackedBlocks
    valid_data: PackedBlocks
    spec: Any
    cfg: TrainConfig
    words: int
    epochs: float
    budget: str = ""  # the corpus (notebook 01's budget name); the run's name adds " (seed N)" for another seed

    def __post_init__(self):
        self.budget = self.budget or self.name

    @property
    def seed(self) -> int:
        return int(self.cfg.seed)

    def row(self, word_scale: float = 1.0) -> dict:
        """The plan's row: the budget's size (corpus tokens, blocks) and the schedule over it (passes if all steps
        run; early stopping may end sooner)."""
        return {"budget": self.name, "seed": self.seed, "words": self.words, "stands for": fmt_words(self.words * word_scale, digits=3),
                "corpus tokens": self.train_data.tokens, "blocks": len(self.train_data),
                "passes if all steps run": round(self.epochs, 2), "dropout": self.spec.dropout,
                "weight decay": self.cfg.weight_decay}


def plan_decoders(
    run_dir: str | Path,
    budgets: Sequence[str],
    model: dict,
    train: dict,
    regularisation: str = "words",
    word_scale: float = 1.0,
    fixed_dropout: float = 0.1,
    fixed_weight_decay: float = 0.1,
    valid_blocks: int | None = None,
    seeds: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, DecoderRun]:
    """The decoder runs of notebook 02's parameters: per budget, its tokenizer (notebook 01), packed training
    blocks, held-out validation blocks, and the regularisation chosen by ``regularisation``:
    ``"words"`` (the paper's table at the budget × ``word_scale``), ``"epochs"`` (the paper's value for the budget
    that would see as many passes under the paper's schedule) or ``"fixed"``. ``seeds`` (budget -> training seeds)
    adds a run per further seed, named ``"<budget> (seed N)"`` (:func:`decoder_seeds`): same data and recipe, the
    seed setting the initialisation and the order of the blocks."""
    run_dir = Path(run_dir)
    data = run_dir / "data"
    if not (data / "ledger.json").is_file():
        raise FileNotFoundError(f"no budget ledger in {data}: run notebook 01 for this profile first")
    ledger = Ledger(data / "ledger.json")
    ledger.require(budgets)  # an unknown budget said as such, before its tokenizer is looked for (notebook 01 made the rest)
    heldout = [r["text"] for r in read_corpus(data / "tiny-heldout.jsonl")]
    runs = {}
    encoded: dict[str, tuple] = {}  # budget -> (tokenizer, train blocks, valid blocks): a budget's seeds share them
    for name, budget, run_seed in decoder_seeds(budgets, seeds, train.get("seed", 0)):
        if budget not in encoded:  # the budget's blocks are tokenised once, then memory-mapped from runs/<profile>/blocks
            tok_dir, stories = run_dir / "tokenizers" / f"decoder-{budget}", data / f"{budget}.jsonl"
            tok = load_tokenizer(tok_dir)
            fp = fingerprint("decoder-blocks-v1", sha256_file(tok_dir / "tokenizer.json"), sha256_file(stories), model["context"])
            blocks = cached_blocks(run_dir / "blocks" / f"decoder-{budget}.npy", fp, lambda: iter_story_ids(  # streamed:
                tok, iter_texts(stories), add_eot=True), f"decoder blocks {budget}", block=model["context"])  # none held
            encoded[budget] = (tok, blocks, encode_blocks(tok, heldout, model["context"], max_blocks=valid_blocks))
        tok, blocks, valid_data = encoded[budget]
        train_data = PackedBlocks(blocks, run_seed)  # the seed orders the blocks; the tensor is shared
        epochs = train_data.epochs(train["steps"], train["batch_size"])
        words = ledger[budget].words
        if regularisation == "words":
            dropout, wd = regularisation_for_budget(words, word_scale)
        elif regularisation == "epochs":
            dropout, wd = regularisation_for_epochs(epochs)
        elif regularisation == "fixed":
            dropout, wd = fixed_dropout, fixed_weight_decay
        else:
            raise ValueError(f"regularisation must be words, epochs or fixed, not {regularisation!r}")
        spec = DecoderSpec(**model, vocab_size=len(tok), dropout=dropout)
        cfg = TrainConfig(**{**train, "seed": run_seed}, weight_decay=wd)
        check_sizes(name, cfg.batch_size, cfg.micro_batch, len(train_data), spec)  # before anything trains
        runs[name] = DecoderRun(name, tok, train_data, valid_data, spec, cfg, words, epochs, budget)
    return runs


# ----------------------------------------------------------------------------- the encoder stage
@dataclass
class EncoderRun:
    """One encoder's mix, tokenizer, masked data and configs (see :func:`plan_encoders`)."""

    name: str
    corpora: list[str]
    balanced: bool
    tokenizer: Any
    train_data: Any  # masking.MaskedBlocks
    valid_data: dict  # "tiny" / "baby" held-out MaskedBlocks (and "all", their union, used during training)
    config: Any  # ltg_bert.LtgBertConfig
    cfg: TrainConfig
    words: dict  # words per kind and per source of the mix
    blocks: dict  # training blocks per group before/after balancing

    def row(self) -> dict:
        kind = self.words["by_kind"]
        return {"mix": self.name, "corpora": " + ".join(self.corpora), "balanced": self.balanced,
                **{f"words {k}": kind.get(k, 0) for k in ("baby", "tiny", "gen")},
                "words (rule)": self.words.get("rule", kind.get("baby", 0) + kind.get("tiny", 0)),
                **{f"blocks {g}": self.blocks.get(f"{g} (raw)", 0) for g in ("baby", "stories")},
                "blocks (trained on)": self.blocks["total"], "seed": self.cfg.seed,
                "epochs": round(self.train_data.epochs(self.cfg.steps, self.cfg.batch_size), 2)}


def encoder_documents(run_dir: str | Path, corpus: str, log: Callable[[str], None] = print) -> list[str]:
    """Normalised, sentence-segmented documents of a ledger corpus (``data/<corpus>.jsonl``), each closed by
    ``[PAR]`` (``docs/methods.md#normalisation``); computed once and kept in ``encoder_data/<corpus>.jsonl``."""
    run_dir = Path(run_dir)
    src = run_dir / "data" / f"{corpus}.jsonl"
    if not src.is_file():
        raise FileNotFoundError(f"no corpus {src} (notebooks 01 and 03 write the corpora of the ledger)")
    out = run_dir / "encoder_data" / f"{corpus}.jsonl"
    run_step(f"encoder text of {corpus}", out, fingerprint(sha256_file(src), "encoder_segments-v1"),
             lambda: write_jsonl(out, ({"text": t} for t in encoder_segments(r["text"] for r in read_corpus(src)))), log)
    return [r["text"] for r in read_jsonl(out)]


def balance_blocks(groups: dict[str, torch.Tensor], seed: int) -> torch.Tensor:
    """Rows of every group, the smaller groups repeated (whole copies, then a seeded sample of the rest) up to
    the largest one, so that uniform sampling over the result gives each group the same total probability."""
    n = max(len(g) for g in groups.values())
    out = []
    gen = generator(seed)
    for g in groups.values():
        reps, rest = divmod(n, len(g))
        out += [g] * reps + [g[torch.randperm(len(g), generator=gen)[:rest]]]
    return torch.cat(out)


def long_phase_data(tok, short, texts: dict[str, list[str]], balanced: bool, steps: int, seed: int, long_block: int = 512,
                    long_from: float = 0.9, long_batch_fraction: float = 0.25):
    """LTG-BERT's "+512" schedule around the short-block training data ``short`` (``masking.LongPhaseBlocks``): the
    same documents packed into ``long_block``-token blocks (balanced like the short ones when ``balanced``), used
    from step ``int(steps * long_from)`` with ``long_batch_fraction`` of the batch. Set by ``long_block``,
    ``long_from`` and ``long_batch_fraction`` in the ``train`` params of notebook 04 (``docs/methods.md#encoder-training``)."""
    groups = {g: encode_encoder_blocks(tok, t, int(long_block)).blocks for g, t in texts.items()}
    blocks = balance_blocks(groups, seed) if balanced and len(groups) > 1 else torch.cat(list(groups.values()))
    long = MaskedBlocks(blocks, short.tok, seed=seed + 1, masking=short.masking)
    return LongPhaseBlocks(short, long, steps, long_from, long_batch_fraction)


def encoder_model(model: str | dict, dropout: float | None = None) -> str | dict:
    """Notebook 04's ``model`` (an LTG-BERT preset name or spec dict) with its ``model_dropout`` applied: ``None``
    keeps the preset's dropout, a number overrides both dropouts (``ltg_bert.ltg_bert_config``'s ``dropout``)."""
    if dropout is None:
        return model
    return {**model, "dropout": dropout} if isinstance(model, dict) else {"preset": model, "dropout": dropout}


def plan_encoders(
    run_dir: str | Path,
    mixes: Sequence[dict],
    model: str | dict,
    block: int,
    train: dict,
    vocab_size: int,
    track_budget: int,
    min_frequency: int = 2,
    valid_blocks: int | None = None,
    log: Callable[[str], None] = print,
    masking: dict | None = None,
) -> dict[str, EncoderRun]:
    """The encoder runs of notebook 04: for every mix ``{"name", "corpora", "balanced"}`` the challenge rule is
    checked through the ledger (a mix that breaks it raises :class:`~helpers.data.budgets.BudgetError` unless it says
    ``allow_over_budget: true``), its documents are normalised and segmented, an encoder tokenizer is trained on
    them, and the token stream is cut into ``[CLS] … [SEP]`` blocks of ``block`` tokens; with ``balanced`` the BabyLM
    blocks and the TinyStories(+generated) blocks get equal total sampling probability; with ``seed`` the mix trains
    with its own seed (initialisation, data order, masks), e.g. a replicate of another mix, and with ``seeds`` it is
    trained once per seed (:func:`expand_seeds`). Validation: held-out
    TinyStories stories and held-out BabyLM documents (the same for every mix), masked once with the reference's masking (so validation
    losses compare across ``masking`` settings). ``masking`` overrides :class:`~helpers.data.masking.MaskingConfig`
    fields for the training data (e.g. ``{"mask_p": 0.3}``)."""
    run_dir = Path(run_dir)
    mixes = expand_seeds(mixes, int(train.get("seed", 0)))
    train_masking = MaskingConfig(**(masking or {}))
    train = dict(train)
    long_phase = {k: train.pop(k) for k in ("long_block", "long_from", "long_batch_fraction") if k in train}
    ledger = Ledger(run_dir / "data" / "ledger.json")
    held = {"tiny": encoder_documents(run_dir, "tiny-heldout", log), "baby": encoder_documents(run_dir, "baby-heldout", log)}
    runs = {}
    for mix in mixes:
        name, corpora, balanced = mix["name"], list(mix["corpora"]), bool(mix.get("balanced", False))
        seed = int(mix.get("seed", train.get("seed", 0)))  # a mix may train with its own seed (a replicate)
        by_kind = ledger.check_mix(corpora, track_budget, allow_over_budget=bool(mix.get("allow_over_budget", False)))
        by_source: dict[str, int] = {}
        for c in corpora:
            for src, w in ledger[c].words_by_source.items():
                key = f"{ledger[c].kind}:{src}"
                by_source[key] = by_source.get(key, 0) + w
        docs = {c: encoder_documents(run_dir, c, log) for c in corpora}
        tok_dir = run_dir / "tokenizers" / f"encoder-{name}"
        all_docs = [d for c in corpora for d in docs[c]]
        run_step(f"encoder tokenizer {name}", tok_dir, fingerprint(corpora, [len(docs[c]) for c in corpora], vocab_size, min_frequency,
                                                                    [ledger[c].words for c in corpora]),
                 lambda: save_pretrained_atomic(tok_dir, train_tokenizer(all_docs, "encoder", vocab_size, min_frequency)), log)
        tok = load_tokenizer(tok_dir)
        ids = TokenIds.from_tokenizer(tok)
        groups = {}
        for group, kinds in (("baby", ("baby",)), ("stories", ("tiny", "gen"))):
            texts = [d for c in corpora if ledger[c].kind in kinds for d in docs[c]]
            if texts:
                groups[group] = encode_encoder_blocks(tok, texts, block).blocks
        counts = {f"{g} (raw)": len(b) for g, b in groups.items()}
        blocks = balance_blocks(groups, seed) if balanced and len(groups) > 1 else torch.cat(list(groups.values()))
        counts["total"] = len(blocks)
        train_data = MaskedBlocks(blocks, ids, seed=seed, masking=train_masking)
        if long_phase.get("long_block"):
            texts = {g: [d for c in corpora if ledger[c].kind in kinds for d in docs[c]]
                     for g, kinds in (("baby", ("baby",)), ("stories", ("tiny", "gen")))}
            train_data = long_phase_data(tok, train_data, {g: t for g, t in texts.items() if t}, balanced,
                                         int(train["steps"]), seed, **long_phase)
            counts["long phase"] = {"block": int(long_phase["long_block"]), "blocks": len(train_data.long.blocks),
                                    "from step": train_data.switch_step, "batch fraction": train_data.long_batch_fraction}
        valid = {k: encode_encoder_blocks(tok, v, block, max_blocks=valid_blocks, seed=train.get("seed", 0)) for k, v in held.items()}
        valid["all"] = MaskedBlocks(torch.cat([valid["tiny"].blocks, valid["baby"].blocks]), ids, seed=train.get("seed", 0))
        config = ltg_bert_config(model, vocab_size=len(tok), pad_token_id=ids.pad_id, cls_token_id=ids.cls_id,
                                 sep_token_id=ids.sep_id, mask_token_id=ids.mask_id)
        runs[name] = EncoderRun(name, corpora, balanced, tok, train_data, valid, config, TrainConfig(**{**train, "seed": seed}),
                                {"by_kind": {k: v for k, v in by_kind.items() if v}, "by_source": by_source,
                                                 "rule": ledger.rule_words(corpora)["counted"]}, counts)
    return runs


def train_encoder(run: EncoderRun, out_dir: str | Path, progress: bool = True, log: Callable[[str], None] = print) -> TrainResult:
    """Pretrain one LTG-BERT encoder on its mix (MLM with span masking) via :func:`train_or_skip`; the mix's
    words per source are stored with the run (``train_state.json``) and next to the model (``best/mix.json``)."""
    mix = {"corpora": run.corpora, "balanced": run.balanced, "words": run.words, "blocks": run.blocks}
    spec = {k: v for k, v in run.config.to_dict().items() if k not in ("transformers_version", "architectures", "auto_map")}
    masking = getattr(run.train_data, "short", run.train_data).masking
    if masking != MaskingConfig():  # only a departure enters the fingerprint (runs with the reference's stay valid)
        spec["masking"] = asdict(masking)
    res = train_or_skip(run.name, lambda: LtgBertForMaskedLM(run.config), spec, run.train_data,
                        run.valid_data["all"], run.tokenizer, run.cfg, out_dir, mlm_loss, progress, log, extra={"mix": mix})
    write_json(Path(out_dir) / "best" / "mix.json", mix)
    return res
