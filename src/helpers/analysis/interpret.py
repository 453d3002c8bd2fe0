"""What a GPT-Neo decoder's attention heads and MLP neurons do over held-out stories
(``docs/methods.md#interpretability``; Eldan & Li 2023; Rathod et al. 2024, §5): stories as tokens mapped to their
words (:func:`encode_story`), exact attention weights and per-head statistics (:func:`story_attention_stats`, with
the statistics of :mod:`helpers.analysis.attention_stats`),
hooked MLP activations (:func:`mlp_activations`) and each neuron's top-k tokens in context, and
:func:`analyse_model`, which runs a decoder once over the stories and caches all of it under
``runs/<profile>/interpret/<model>/`` keyed by the weights' SHA-256 and the parameters; :func:`analyse_untrained`, the
same for an untrained model of the same architecture (the baseline of every head and neuron statistic). Tables from its result are
in :mod:`helpers.analysis.interpret_tables`, HTML and figures in :mod:`helpers.report.interpret_views`.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch

from helpers.analysis.attention_stats import (allowed_mask, attention_evenness, distance_correlation,
                                             offset_eta_squared, sink_share)
from helpers.analysis.lexicon import LexiconTagger, Word, split_words
from helpers.core.artifacts import atomic_path, fingerprint, read_json, run_step, write_json
from helpers.core.digests import model_files_digest
from helpers.core.config import shown_path
from helpers.data.corpora import EOT
from helpers.data.tokenizers import end_of_text_id, load_tokenizer
from helpers.evaluation.comparisons import arm_and_seed
from helpers.models.decoder import build_decoder, context_length, load_decoder

CACHE_VERSION = 3  # 2: offset η² and evenness per head; 3: η² of √weights, sink share, MLP inputs

# ----------------------------------------------------------------------------- stories as tokens

@dataclass
class StoryTokens:
    """One story as model input: ``ids[0]`` is ``<|endoftext|>`` (the context a story has in training), then the
    story's tokens (truncated to ``max_tokens`` in all). ``word_of[t]`` is the index in ``words`` of the word token
    ``t`` belongs to (-1 for the start token and for line breaks)."""

    text: str
    ids: list[int]
    offsets: list[tuple[int, int]]
    words: list[Word]
    word_of: list[int]
    word_classes: list[str] = field(default_factory=list)

    def token_classes(self) -> list[str]:
        """Class per token: its word's class; "start" for the start token; line breaks count as punctuation."""
        out = ["start"]
        for t in range(1, len(self.ids)):
            k = self.word_of[t]
            out.append("punctuation" if k < 0 else self.word_classes[k] if self.word_classes else "other")
        return out


def encode_story(tokenizer, text: str, max_tokens: int, tagger=None) -> StoryTokens:
    """Tokenise ``text`` after a start token (``<|endoftext|>``), map tokens to words, classify words."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    start = end_of_text_id(tokenizer, fallback=True)
    keep = max(0, max_tokens - 1)
    ids = [int(start)] + list(enc["input_ids"][:keep])
    offsets = [(0, 0)] + [tuple(o) for o in enc["offset_mapping"][:keep]]
    words = split_words(text)
    starts = np.array([w.start for w in words], dtype=np.int64)
    word_of = [-1]
    for s, e in offsets[1:]:
        piece = text[s:e]
        lead = len(piece) - len(piece.lstrip())
        if lead == len(piece):  # whitespace only: a lone space belongs to the next word, a line break to none
            if "\n" in piece or not words:
                word_of.append(-1)
                continue
            c = e
            k = int(np.searchsorted(starts, c, side="left"))
            word_of.append(k if k < len(words) else -1)
            continue
        c = s + lead
        k = int(np.searchsorted(starts, c, side="right")) - 1
        word_of.append(k if k >= 0 and words[k].start <= c < words[k].end else -1)
    st = StoryTokens(text, ids, offsets, words, word_of)
    if tagger is not None:
        st.word_classes = tagger.tag(text, words)
    return st


def display_token(tokenizer, token_id: int) -> str:
    """A readable label for one token: the decoded piece; a leading space is dropped (``Ġthe`` → ``the``), a line
    break is ``↵``, a lone space ``␣`` and the start token ``<eot>``."""
    raw = tokenizer.convert_ids_to_tokens(int(token_id))
    if raw == EOT or int(token_id) in (tokenizer.all_special_ids or []):
        return "<eot>" if "endoftext" in str(raw) else str(raw)
    piece = tokenizer.decode([int(token_id)], clean_up_tokenization_spaces=False)
    if "\n" in piece:
        return "↵"
    s = piece.strip()
    return s if s else "␣"


# ----------------------------------------------------------------------------- attention

def attention_maps(model, ids) -> np.ndarray:
    """Attention weights ``[layers, heads, T, T]`` of one sequence (exact eager computation)."""
    x = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1)
    with torch.no_grad():
        out = model(x, output_attentions=True)
    return np.stack([a[0].float().numpy() for a in out.attentions])


def layer_types(model) -> list[str]:
    return list(model.config.attention_layers)


MAX_OFFSET = 32


def story_attention_stats(att: np.ndarray, types: Sequence[str], window: int) -> dict[str, np.ndarray]:
    """Per-head statistics of one story's attention ``[L, H, T, T]`` (position 0 = start token, left out):

    * ``r_lower`` / ``r_full``: :func:`distance_correlation` over the allowed entries / the whole matrix;
    * ``r_uniform``: the same for uniform attention over the allowed keys (per layer; the normalisation baseline);
    * ``sink``: mean attention on the start token; ``mean_dist``: mean distance of the attention on story tokens;
    * ``eta2``: :func:`offset_eta_squared` of √weights (the head statistic), ``eta2_raw`` of raw weights;
      ``evenness``: :func:`attention_evenness`; ``sink_share``: :func:`sink_share` (they give the head's class);
    * ``offset_sum``: attention at each offset ``d = i − j`` (0…:data:`MAX_OFFSET`) summed over queries, and
      ``offset_n`` the number of queries per offset;
    * ``target``: per query ``i ≥ 2``, the story token (index from 0 = first story token) with the largest
      weight (the start token left out); -1 for the start token and the first story token (only one candidate).
    """
    L, H, T, _ = att.shape
    i, j = np.indices((T, T))
    dist = (i - j).astype(np.float64)
    r_lower = np.full((L, H), np.nan)
    r_full = np.full((L, H), np.nan)
    r_uni = np.full(L, np.nan)
    sink = att[:, :, 1:, 0].mean(axis=-1) if T > 1 else np.full((L, H), np.nan)
    mean_dist = np.full((L, H), np.nan)
    eta2 = np.full((L, H), np.nan)
    eta2_raw = np.full((L, H), np.nan)
    evenness = np.full((L, H), np.nan)
    sinks = np.full((L, H), np.nan)
    D = MAX_OFFSET + 1
    offset_sum = np.zeros((L, H, D))
    offset_n = np.zeros(D)
    target = np.full((L, H, T), -1, dtype=np.int32)
    for d in range(min(D, T - 1)):
        q = np.arange(1 + d, T)
        offset_n[d] = len(q)
        offset_sum[:, :, d] = att[:, :, q, q - d].sum(axis=-1)
    for layer in range(L):
        w = window if types[layer] == "local" else None
        a = att[layer]
        r_lower[layer] = distance_correlation(a, True, w, first=1)
        eta2[layer] = offset_eta_squared(a, w, first=1)
        eta2_raw[layer] = offset_eta_squared(a, w, first=1, root=False)
        evenness[layer] = attention_evenness(a, w, first=1)
        sinks[layer] = sink_share(a, w)
        r_full[layer] = distance_correlation(a, False, None, first=1)
        m = allowed_mask(T, w, 0)
        uni = m / np.maximum(m.sum(axis=1, keepdims=True), 1)
        r_uni[layer] = float(distance_correlation(uni, True, w, first=1))
        story = allowed_mask(T, w, 1)
        a_story = np.where(story, a, 0.0)
        mass = a_story.sum(axis=-1)  # [H, T]
        with np.errstate(invalid="ignore", divide="ignore"):
            md = (a_story * dist).sum(axis=-1) / mass
        mean_dist[layer] = np.nanmean(md[:, 2:], axis=-1) if T > 2 else np.nan
        if T > 2:
            masked = np.where(story, a, -np.inf)
            t = masked.argmax(axis=-1) - 1  # story-token index
            t[:, :2] = -1
            target[layer] = t
    return {"r_lower": r_lower, "r_full": r_full, "r_uniform": r_uni, "sink": sink, "mean_dist": mean_dist,
            "eta2": eta2, "eta2_raw": eta2_raw, "evenness": evenness, "sink_share": sinks, "offset_sum": offset_sum, "offset_n": offset_n, "target": target}


# ----------------------------------------------------------------------------- MLP activations

class MLPRecorder:
    """Forward hooks on each chosen layer's MLP activation module (``transformer.h[l].mlp.act``): the true
    activations after the pre-MLP LayerNorm, ``c_fc`` and the nonlinearity. Use as a context manager; after a
    forward, ``recorder.acts[l]`` is a ``[batch, T, intermediate]`` tensor and ``recorder.inputs[l]`` the MLP's input
    ``[batch, T, hidden]`` (the pre-MLP LayerNorm's output: what a random-weight control layer is fed)."""

    def __init__(self, model, layers: Sequence[int] | None = None):
        self.blocks = model.transformer.h
        self.layers = list(range(len(self.blocks))) if layers is None else [int(x) for x in layers]
        bad = [x for x in self.layers if not 0 <= x < len(self.blocks)]
        if bad:
            raise ValueError(f"layers {bad} do not exist (the model has {len(self.blocks)} layers)")
        self.acts: dict[int, Any] = {}
        self.inputs: dict[int, Any] = {}
        self._handles: list = []

    def __enter__(self):
        for layer in self.layers:
            act = self.blocks[layer].mlp.act

            def hook(_module, _inputs, output, layer=layer):
                self.acts[layer] = output.detach()

            def pre_hook(_module, inputs, layer=layer):
                self.inputs[layer] = inputs[0].detach()

            self._handles.append(act.register_forward_hook(hook))
            self._handles.append(self.blocks[layer].mlp.register_forward_pre_hook(pre_hook))
        return self

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()
        self._handles.clear()
        return False


def mlp_activations(model, ids, layers: Sequence[int] | None = None) -> dict[int, np.ndarray]:
    """MLP activations ``{layer: [T, intermediate]}`` of one sequence, recorded with forward hooks."""
    x = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1)
    with MLPRecorder(model, layers) as rec, torch.no_grad():
        model(x)
    return {layer: a[0].float().numpy() for layer, a in rec.acts.items()}


def _top_columns(vals: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``vals [I, N]`` the ``k`` largest columns, best first (ties: lower column first)."""
    k = min(int(k), vals.shape[1])
    if k <= 0:
        raise ValueError("k must be positive and there must be at least one token")
    part = np.argpartition(-vals, k - 1, axis=1)[:, :k]
    kth = np.take_along_axis(vals, part, axis=1).min(axis=1)
    idx = np.empty((vals.shape[0], k), dtype=np.int64)
    for r in range(vals.shape[0]):  # everything above the k-th value, then the lowest columns equal to it
        above = np.flatnonzero(vals[r] > kth[r])
        sel = np.concatenate([above, np.flatnonzero(vals[r] == kth[r])[: k - len(above)]])
        idx[r] = sel[np.lexsort((sel, -vals[r, sel]))]
    return idx, np.take_along_axis(vals, idx, axis=1)


def top_activations(acts: np.ndarray, k: int, ids: np.ndarray | None = None, chunk: int = 256
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per neuron (column of ``acts [N, I]``) the ``k`` rows with the largest activation, best first:
    ``(rows [I, k], values [I, k])``, ties broken by the lower row.

    With ``ids`` (the token id of each row): the top-``k`` **distinct tokens**, each represented by the row of its
    strongest occurrence (so a neuron that fires on every "." lists "." once, then its next-best tokens).
    Neurons are processed ``chunk`` at a time (``acts`` may be a memory-mapped float16 array)."""
    I_ = acts.shape[1]
    if ids is not None:
        ids = np.asarray(ids)
        if len(ids) != acts.shape[0]:
            raise ValueError(f"{len(ids)} token ids for {acts.shape[0]} rows")
        order = np.argsort(ids, kind="stable")
        sid = ids[order]
        starts = np.flatnonzero(np.r_[True, sid[1:] != sid[:-1]])
        counts = np.diff(np.r_[starts, len(sid)])
        rank = (len(sid) - np.arange(len(sid))).astype(np.int64)
    rows, vals = [], []
    for c0 in range(0, I_, chunk):
        v = np.ascontiguousarray(np.asarray(acts[:, c0:c0 + chunk], dtype=np.float32).T)  # [chunk, N]
        if ids is None:
            r, x = _top_columns(v, k)
        else:
            v = v[:, order]
            gmax = np.maximum.reduceat(v, starts, axis=1)  # [chunk, U] each token's best activation
            score = np.where(v == np.repeat(gmax, counts, axis=1), rank, 0)
            first = len(sid) - np.maximum.reduceat(score, starts, axis=1)  # first best row (position in `order`)
            gsel, x = _top_columns(gmax, k)
            r = order[np.take_along_axis(first, gsel, axis=1)]
        rows.append(r)
        vals.append(x)
    return np.concatenate(rows), np.concatenate(vals)


def story_bounds(story_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of a token stream whose stories are contiguous runs of ``story_of``: the first row of its
    story and one past the last."""
    story_of = np.asarray(story_of)
    n = len(story_of)
    change = np.flatnonzero(np.diff(story_of)) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [n]])
    run = np.repeat(np.arange(len(starts)), ends - starts)
    return starts[run], ends[run]


def context_bounds(story_of: np.ndarray, n: int, width: int = 5) -> tuple[int, int]:
    """Rows ``[lo, hi)`` of the ±``width`` tokens around row ``n`` that lie in the same story (fewer at a story's
    edges; never crossing into a neighbouring story)."""
    story_of = np.asarray(story_of)
    s = story_of[n]
    lo = n
    while lo > 0 and n - lo < width and story_of[lo - 1] == s:
        lo -= 1
    hi = n + 1
    while hi < len(story_of) and hi - n <= width and story_of[hi] == s:
        hi += 1
    return lo, hi


# ----------------------------------------------------------------------------- one model over held-out stories

@dataclass
class ModelAnalysis:
    """A decoder's activations and attention statistics over held-out stories (see :func:`analyse_model`).

    The *stream* lists every story token (the start tokens left out) of every analysed story in order:
    ``ids``, ``story`` (index into ``stories``), ``pos`` (0 = first story token). ``acts[layer]`` is
    ``[N, intermediate]`` (float16, memory-mapped), ``mlp_inputs[layer]`` the MLP's input ``[N, hidden]`` (the
    pre-MLP LayerNorm's output); ``targets[layer, head, n]`` is the stream row of the strongest attention target of
    query row ``n`` (-1 where undefined)."""

    name: str
    path: Path
    tokenizer: Any
    model: Any
    stories: list[StoryTokens]
    ids: np.ndarray
    story: np.ndarray
    pos: np.ndarray
    classes: np.ndarray
    acts: dict[int, np.ndarray]
    stats: dict[str, np.ndarray]
    targets: np.ndarray
    layer_types: list[str]
    window: int
    heads: int
    cache: Path
    tagger_name: str = ""
    mlp_inputs: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def n_tokens(self) -> int:
        return int(len(self.ids))

    def labels(self, rows: Iterable[int]) -> list[str]:
        return [display_token(self.tokenizer, int(self.ids[n])) for n in rows]


def analysis_fingerprint(path: Path, texts: Sequence[str], max_tokens: int, layers: Sequence[int] | None) -> str:
    return fingerprint("interpret", CACHE_VERSION, model_files_digest(path), fingerprint(list(texts)),
                       int(max_tokens), None if layers is None else sorted(int(x) for x in layers))


def _compute(model, stories: list[StoryTokens], layers: list[int], out: Path, log: Callable[[str], None]) -> None:
    types = layer_types(model)
    window = int(model.config.window_size)
    L, H = model.config.num_layers, model.config.num_heads
    S = len(stories)
    keys = ("r_lower", "r_full", "sink", "mean_dist", "eta2", "eta2_raw", "evenness", "sink_share")
    per_story = {k: np.full((S, L, H), np.nan) for k in keys}
    r_uniform = np.full((S, L), np.nan)
    offset_sum = np.zeros((L, H, MAX_OFFSET + 1))
    offset_n = np.zeros(MAX_OFFSET + 1)
    acts: dict[int, list[np.ndarray]] = {layer: [] for layer in layers}
    inputs: dict[int, list[np.ndarray]] = {layer: [] for layer in layers}
    targets: list[np.ndarray] = []
    base = 0
    for s, st in enumerate(stories):
        x = torch.tensor([st.ids], dtype=torch.long)
        with MLPRecorder(model, layers) as rec, torch.no_grad():
            o = model(x, output_attentions=True)
        att = np.stack([a[0].float().numpy() for a in o.attentions])
        stats = story_attention_stats(att, types, window)
        for k in keys:
            per_story[k][s] = stats[k]
        r_uniform[s] = stats["r_uniform"]
        offset_sum += stats["offset_sum"]
        offset_n += stats["offset_n"]
        t = stats["target"][:, :, 1:]  # story rows
        targets.append(np.where(t >= 0, t + base, -1).astype(np.int32))
        for layer in layers:
            acts[layer].append(rec.acts[layer][0, 1:].numpy().astype(np.float16))
            inputs[layer].append(rec.inputs[layer][0, 1:].float().numpy().astype(np.float16))
        base += len(st.ids) - 1
    with atomic_path(out) as tmp:
        tmp.mkdir()
        np.savez(tmp / "attention.npz", **per_story, r_uniform=r_uniform, offset_sum=offset_sum, offset_n=offset_n,
                 targets=np.concatenate(targets, axis=-1) if targets else np.zeros((L, H, 0), np.int32))
        for layer in layers:
            np.save(tmp / f"acts_layer{layer}.npy", np.concatenate(acts[layer]) if acts[layer] else
                    np.zeros((0, model.config.intermediate_size), np.float16))
            np.save(tmp / f"mlp_in_layer{layer}.npy", np.concatenate(inputs[layer]) if inputs[layer] else
                    np.zeros((0, model.config.hidden_size), np.float16))
        write_json(tmp / "info.json", {"stories": S, "tokens": base, "layers": layers, "layer_types": types,
                                       "window": window})
    log(f"  {S} stories, {base:,} tokens, {len(layers)} layers of MLP activations cached in {shown_path(out)}")


def analyse_model(path: str | Path, texts: Sequence[str], max_tokens: int, layers: Sequence[int] | None = None,
                  cache: str | Path | None = None, tagger=None, name: str | None = None,
                  log: Callable[[str], None] = print) -> ModelAnalysis:
    """Run the decoder at ``path`` over ``texts`` (each after a start token, truncated to ``max_tokens``), record
    MLP activations and inputs of ``layers`` (default all) and attention statistics, cache them in ``cache`` (a
    folder; by default ``<path>/../interpret``) keyed by the weights' SHA-256, the texts and the parameters, and return
    a :class:`ModelAnalysis` (reusing the cache when nothing changed)."""
    path = Path(path)
    name = name or path.parent.name
    model = load_decoder(path).eval()
    tokenizer = load_tokenizer(path)
    max_tokens = min(int(max_tokens), context_length(model))
    n_layers = model.config.num_layers
    layers = list(range(n_layers)) if layers is None else sorted({int(x) for x in layers})
    if any(not 0 <= x < n_layers for x in layers):
        raise ValueError(f"layers {layers} out of range for {name} ({n_layers} layers)")
    tagger = tagger or LexiconTagger()
    stories = [encode_story(tokenizer, t, max_tokens, tagger) for t in texts]
    stories = [st for st in stories if len(st.ids) >= 3]
    cache = Path(cache) if cache is not None else path.parent / "interpret"
    fp = analysis_fingerprint(path, [st.text for st in stories], max_tokens, layers)
    return _cached_analysis(model, tokenizer, stories, layers, cache, fp, name, path,
                            getattr(tagger, "name", type(tagger).__name__), log)


def _cached_analysis(model, tokenizer, stories: list[StoryTokens], layers: list[int], cache: Path, fp: str, name: str,
                     path: Path, tagger_name: str, log: Callable[[str], None]) -> ModelAnalysis:
    """Compute (or reuse) the cached analysis of ``model`` over ``stories`` and load it as a :class:`ModelAnalysis`."""
    run_step(f"interpret {name}", cache, fp, lambda: _compute(model, stories, layers, cache, log), log=log)
    info = read_json(cache / "info.json")
    if info["tokens"] != sum(len(st.ids) - 1 for st in stories):
        raise RuntimeError(f"cache {cache} does not match the stories (delete it to recompute)")
    with np.load(cache / "attention.npz") as z:
        stats = {k: z[k] for k in z.files if k != "targets"}
        targets = z["targets"]
    acts = {layer: np.load(cache / f"acts_layer{layer}.npy", mmap_mode="r") for layer in layers}
    inputs = {layer: np.load(cache / f"mlp_in_layer{layer}.npy", mmap_mode="r") for layer in layers}
    ids = np.concatenate([np.asarray(st.ids[1:], dtype=np.int64) for st in stories])
    story = np.concatenate([np.full(len(st.ids) - 1, s, dtype=np.int32) for s, st in enumerate(stories)])
    pos = np.concatenate([np.arange(len(st.ids) - 1, dtype=np.int32) for st in stories])
    classes = np.array([c for st in stories for c in st.token_classes()[1:]], dtype=object)
    return ModelAnalysis(name, path, tokenizer, model, stories, ids, story, pos, classes, acts, stats, targets,
                         info["layer_types"], int(info["window"]), int(model.config.num_heads), cache, tagger_name,
                         inputs)


def untrained_model(config, seed: int = 0):
    """A freshly initialised GPT-Neo of ``config`` (a copy), its weights drawn from a private torch stream seeded with
    ``seed`` (the global streams are left as they were), in eval mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return build_decoder(copy.deepcopy(config)).eval()


def analyse_untrained(trained: ModelAnalysis, seed: int = 0, cache: str | Path | None = None, name: str | None = None,
                      log: Callable[[str], None] = print) -> ModelAnalysis:
    """The baseline of ``trained``: an untrained model of the same architecture (:func:`untrained_model` of its
    config, ``seed`` fixed) run over the same stories and tokens, cached like :func:`analyse_model` (keyed by the
    config, the seed and the token ids; by default in ``<trained cache>-untrained``). Named ``"<arm> (untrained)"``
    unless ``name`` is given (the seeds of an arm share its architecture, tokenizer and so this baseline)."""
    name = name or f"{arm_and_seed(trained.name, 0)[0]} (untrained)"
    model = untrained_model(trained.model.config, seed)
    cache = Path(cache) if cache is not None else trained.cache.with_name(trained.cache.name + "-untrained")
    fp = fingerprint("interpret-untrained", CACHE_VERSION, trained.model.config.to_dict(), int(seed),
                     [list(map(int, st.ids)) for st in trained.stories], sorted(trained.acts))
    return _cached_analysis(model, trained.tokenizer, trained.stories, sorted(trained.acts), cache, fp, name,
                            trained.path, trained.tagger_name, log)
