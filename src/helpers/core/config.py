"""Profiles, paths and parameter files.

A *profile* (``smoke``, ``cpu``, ``paper``) selects one folder of parameter files,
``params/<profile>/<NN>_<name>.yaml``, one per notebook.  Artefacts go to
``runs/<profile>/`` (git-ignored) and reports to ``reports/<profile>/``.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

from helpers.core.integrity import damaged_file
from helpers.core.secrets import secret_name_problem, url_credential_problem

PROFILES = ("smoke", "cpu", "paper", "paper-100m")  # paper-100m: the 100M-word strict track (Tables 3-7)


def repo_root() -> Path:
    """The project root: ``$STORYBENCH_ROOT`` or the first parent holding ``pyproject.toml`` and ``params/``."""
    env = os.environ.get("STORYBENCH_ROOT")
    if env:
        return Path(env).resolve()
    candidates = [Path.cwd(), *Path.cwd().parents, Path(__file__).resolve().parent, *Path(__file__).resolve().parents]
    for c in candidates:
        if (c / "pyproject.toml").is_file() and (c / "params").is_dir():
            return c
    raise FileNotFoundError(
        "cannot find the storybench root (a folder with pyproject.toml and params/); "
        "run from inside the repository or set STORYBENCH_ROOT"
    )


def shown_path(path: str | os.PathLike) -> str:
    """``path`` as a reader of a report should see it: relative to the repository (``runs/cpu/...``), or to the
    runs/reports folder set by ``$STORYBENCH_RUNS``/``$STORYBENCH_REPORTS``; never this machine's absolute path."""
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    p = p.resolve()
    roots = []
    for env, name in (("STORYBENCH_RUNS", "runs"), ("STORYBENCH_REPORTS", "reports")):
        if os.environ.get(env):
            roots.append((Path(os.environ[env]).resolve(), name))
    try:
        roots.append((repo_root(), ""))
    except FileNotFoundError:
        pass
    for root, name in roots:
        if p.is_relative_to(root):
            rel = p.relative_to(root).as_posix()
            return f"{name}/{rel}" if name else (rel or ".")
    return f".../{p.name}"


def shown_paths_in(text: str) -> str:
    """``text`` (an error message) with every absolute path under the repository or the runs/reports folders
    written as :func:`shown_path` writes it, so messages name files the way a report reader sees them."""
    roots = [(os.environ.get("STORYBENCH_RUNS"), "runs/"), (os.environ.get("STORYBENCH_REPORTS"), "reports/")]
    try:
        roots.append((str(repo_root()), ""))
    except FileNotFoundError:
        pass
    for root, name in roots:
        if root:
            for form in dict.fromkeys((str(Path(root)), str(Path(root).resolve()))):
                text = text.replace(form.rstrip("/") + "/", name)
    return text


NOT_PROFILES = ("paper_reference",)  # folders of params/ that hold no profile


def profiles() -> tuple[str, ...]:
    """The built-in profiles, then every user profile: a folder ``params/<name>/`` (letters, digits, ``-``, ``_``)
    holding ``NN_*.yaml`` files, checked against the notebooks' declared parameters like the built-in ones; its
    runs and reports go to ``runs/<name>/`` and ``reports/<name>/``."""
    root = repo_root() / "params"
    users = sorted(d.name for d in root.iterdir() if d.is_dir() and d.name not in PROFILES + NOT_PROFILES
                   and re.fullmatch(r"[A-Za-z0-9_-]+", d.name) and any(d.glob("[0-9][0-9]*_*.yaml"))) \
        if root.is_dir() else []
    return PROFILES + tuple(users)


def check_profile(profile: str) -> str:
    known = profiles()
    if profile not in known:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(known)} (a user profile is a folder "
                         "params/<name>/ with one NN_*.yaml per notebook)")
    return profile


def data_dir() -> Path:
    return repo_root() / "data"


def run_dir(profile: str) -> Path:
    """``runs/<profile>/``: datasets, tokenizers, models, generations, scores (git-ignored)."""
    d = Path(os.environ.get("STORYBENCH_RUNS", repo_root() / "runs")) / check_profile(profile)
    d.mkdir(parents=True, exist_ok=True)
    return d


def reports_dir(profile: str) -> Path:
    d = Path(os.environ.get("STORYBENCH_REPORTS", repo_root() / "reports")) / check_profile(profile)
    for sub in ("notebooks", "figures", "tables"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    return d


def params_file(profile: str, notebook: str) -> Path:
    """The params file of ``notebook`` (``"01"`` or ``"01_data_budgets"``) for ``profile``."""
    check_profile(profile)
    prefix = notebook.split("_")[0]
    folder = repo_root() / "params" / profile
    hits = sorted(folder.glob(f"{prefix}_*.yaml"))
    if not hits:
        raise FileNotFoundError(f"no params file {folder}/{prefix}_*.yaml for notebook {notebook!r}, profile {profile!r}")
    if len(hits) > 1:
        raise ValueError(f"several params files match notebook {notebook!r}: {[h.name for h in hits]}")
    return hits[0]


class ParamsError(ValueError):
    """A params file that cannot be read, or a value of the wrong type or out of range (one line, naming the file)."""


class _Yaml12Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 floats: ``1e-3`` and ``2E5`` are numbers, not strings."""


_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+
                   |[-+]?\.[0-9_]+[eE][-+]?[0-9]+)$""", re.X),
    list("-+0123456789."),
)


def _no_duplicate_keys(loader: _Yaml12Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    """A mapping whose keys are unique: YAML lets a repeated key silently win over the first, a params file may not."""
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
            seen.setdefault(key, key_node.start_mark.line)
        except TypeError:  # an unhashable key: the base constructor reports it
            continue
        if first is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first given at line {first + 1}); keep one of the two",
                key_node.start_mark)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_Yaml12Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicate_keys)


def parse_value(text: str) -> Any:
    """A value given on the command line (``--set 02.train.lr=1e-3``), read as YAML 1.2 like the params files:
    ``1e-3`` a float, ``[a, b]`` a list, ``null`` None, anything else a string."""
    try:
        return yaml.load(text, Loader=_Yaml12Loader)
    except yaml.YAMLError as e:
        raise ParamsError(f"cannot read {text!r} as a value: {str(e).splitlines()[0]}") from None


def read_yaml(path: str | os.PathLike, text: str | None = None) -> Any:
    """Parse a YAML file with YAML 1.2 number rules (``1e-3`` a float), refusing a repeated key; a syntax error is one
    line naming the file, line and column. The one YAML reader: ``text`` is the file's content where the caller read
    it already (a checksum-verified or gzip data file, ``data.corpora.read_text``); ``path`` then names it in errors."""
    path = Path(path)
    try:
        if text is not None:
            return yaml.load(text, Loader=_Yaml12Loader)
        with open(path, encoding="utf-8") as f:
            return yaml.load(f, Loader=_Yaml12Loader)
    except yaml.YAMLError as e:
        pm, cm = getattr(e, "problem_mark", None), getattr(e, "context_mark", None)
        mark = pm or cm
        where = f"{_rel(path)}:{mark.line + 1}:{mark.column + 1}" if mark else str(_rel(path))
        what = getattr(e, "problem", None) or str(e)
        context = getattr(e, "context", None)
        if context and cm is not None and pm is not None:
            what += f" ({context.replace('while ', '')} at line {cm.line + 1}, column {cm.column + 1})"
        elif context:
            what = f"{context}: {what}"
        raise ParamsError(f"{where}: YAML syntax error: {' '.join(what.split())}") from None


def _rel(path: Path) -> Path:
    try:
        return path.resolve().relative_to(repo_root())
    except (ValueError, FileNotFoundError):
        return path


# (check, what is expected) per key, wherever it occurs (top level or in a dict such as ``train``); lists: per element
_POS = (lambda v: v > 0, "a number > 0")
_whole = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1  # noqa: E731
_NONNEG = (lambda v: v >= 0, "a number >= 0")
_PROB = (lambda v: 0 < v <= 1, "a number in (0, 1]")
_FRAC = (lambda v: 0 <= v < 1, "a number in [0, 1)")
RANGES: dict[str, tuple] = {
    "lr": (lambda v: 0 < v <= 1, "a learning rate in (0, 1]"),
    "min_lr": (lambda v: 0 <= v <= 1, "a learning rate in [0, 1]"),
    **{k: _POS for k in (
        "steps", "batch_size", "micro_batch", "eval_every", "save_every", "log_every", "grad_clip", "eps",
        "hidden", "layers", "heads", "context", "window", "block", "vocab_size", "decoder_vocab_size",
        "tiny_budgets", "baby_budgets", "track_budget", "paper_track_budget", "valid_max_words", "babylm_chunk_lines",
        "word_scale", "valid_blocks", "official_valid_blocks", "causal_batch_size", "mlm_max_tokens",
        "max_new_tokens", "gpteval_max_new_tokens", "instruct_max_new_tokens", "themed_max_new_tokens",
        "judge_max_concurrency", "judge_timeout", "judge_max_reply_bytes", "n_stories", "max_tokens", "epochs", "stop_patience", "instruct_steps", "warmup_steps",
        "memory_cap_mb", "memory_widths", "memory_batches", "memory_layers", "memory_heads", "heatmap_heads",
        "selfbleu_prompts", "selfbleu_completions", "max_train_examples", "max_eval_examples", "min_words", "max_words",
        "tokenizer_min_frequency", "tokenizer_check_words", "min_frequency", "index_n", "top_k",
    )},
    **{k: _NONNEG for k in (
        "threads", "seed", "instruct_seed", "qualitative_seed", "judge_retries", "judge_retry_after_max",
        "judge_temperature", "temperature",
        "gpteval_temperature", "instruct_temperature", "weight_decay", "sample_tokens", "gpteval_min_new_tokens",
        "instruct_min_new_tokens", "memorisation_prompts", "example_story", "stop_margin",
    )},
    **{k: _PROB for k in ("top_p", "gpteval_top_p", "instruct_top_p", "confidence", "prompt_frac", "qualitative_frac")},
    **{k: _FRAC for k in ("warmup", "fixed_dropout", "fixed_weight_decay", "instruct_field_p", "betas")},
    **{k: _POS for k in ("judge_validity_stories", "judge_prompts")},
    **{k: _NONNEG for k in ("judge_samples", "judge_decoder_pairs")},
    # a choice among strings (the third element marks it)
    "judge": (lambda v: v in ("local", "openai-compatible", "none"), "one of local, openai-compatible, none", str),
    # a number or a word (the third element ``object`` marks it: no type check against the notebook's default)
    **dict.fromkeys(("workers", "memorisation_workers"), (lambda v: v == "auto" or _whole(v), "a whole number >= 1 or 'auto'", object)),
    "memorisation_memory_gb": (lambda v: v == "auto" or (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0),
                               "a number of GB > 0 or 'auto'", object),
    **dict.fromkeys(("limit_per_task", "encoder_limit_per_task"), (lambda v: _whole(v) or (isinstance(v, dict) and all(
        x is None or _whole(x) for x in v.values())), "a whole number >= 1, or a mapping task -> that or null", object)),
}


def _kind(v: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a mapping"}.get(type(v), type(v).__name__)


def _type_ok(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    if isinstance(default, int):
        return isinstance(value, int)
    if isinstance(default, (list, tuple)):
        return isinstance(value, (list, tuple))
    return isinstance(value, type(default))


def check_value(key: str, value: Any, default: Any = None, where: str = "") -> list[str]:
    """Problems of one params value: its type against the notebook's ``default`` (skipped where that is None),
    nested mappings key by key, list elements against the default's first element, and :data:`RANGES`."""
    errors: list[str] = []
    if value is None:
        return errors
    if problem := secret_name_problem(key, value, where) or url_credential_problem(key, value, where):
        return [problem]
    mixed = key in RANGES and RANGES[key][2:] == (object,)
    if default is not None and not mixed and not _type_ok(value, default):
        return [f"{where}{key} = {value!r} is {_kind(value)}; expected {_kind(default)} (like the default {default!r})"]
    if isinstance(value, dict) and not mixed:
        for k, v in value.items():
            d = default.get(k) if isinstance(default, dict) else None
            errors += check_value(str(k), v, d, f"{where}{key}.")
        return errors
    if isinstance(value, (list, tuple)):
        elem = None
        if isinstance(default, (list, tuple)) and default and all(type(x) is type(default[0]) for x in default):
            elem = default[0]
        for i, v in enumerate(value):
            if isinstance(v, (dict, list)) or elem is not None:
                errors += check_value(f"{key}[{i}]", v, elem, where)
            elif key in RANGES:
                errors += _range(f"{key}[{i}]", key, v, where)
        return errors
    if key.split("[")[0] in RANGES:
        errors += _range(key, key.split("[")[0], value, where)
    return errors


def _range(label: str, key: str, value: Any, where: str) -> list[str]:
    ok, expected, *kind = RANGES[key]
    if kind and kind[0] in (str, object):
        if (kind[0] is str and not isinstance(value, str)) or not ok(value):
            return [f"{where}{label} = {value!r} is not allowed; expected {expected}"]
        return []
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return [f"{where}{label} = {value!r} is {_kind(value)}; expected {expected}"]
    if value != value or not ok(value):
        return [f"{where}{label} = {value!r} is out of range; expected {expected}"]
    return []


# the mappings of a params file and what consumes them, so that a typo in a nested key (``train: {lrr: ...}``) is
# refused before anything runs: (notebook, key) -> (dataclass "module:Class" or None, extra keys, keys left out)
NESTED_SCHEMAS: dict[tuple[str, str], tuple[str | None, tuple[str, ...], tuple[str, ...]]] = {
    ("02", "train"): ("helpers.training.loop:TrainConfig", (), ("weight_decay",)),  # weight decay: `regularisation`
    ("02", "model"): ("helpers.models.decoder:DecoderSpec", (), ("vocab_size", "dropout")),
    ("02", "repetition_finetune"): ("helpers.training.unlikelihood:UnlikelihoodConfig", (), ()),
    ("04", "train"): ("helpers.training.loop:TrainConfig", ("long_block", "long_from", "long_batch_fraction"), ()),
    ("05", "glue"): ("helpers.evaluation.finetune_setup:FinetuneConfig", ("preset",), ()),
    ("04", "mixes"): (None, ("name", "corpora", "balanced", "seed", "seeds", "allow_over_budget"), ()),
    ("05", "questions"): (None, ("question", "a", "b", "task", "kind", "delta"), ()),  # delta: the equivalence margin
    ("02b", "sweep"): (None, ("hidden", "layers", "heads"), ()),
    ("02b", "contrastive_shape"): (None, ("hidden", "layers", "heads"), ()),
    ("02b", "compressor_shape"): (None, ("hidden", "layers", "heads"), ()),
}


def allowed_nested_keys(notebook: str, key: str) -> list[str] | None:
    """The keys the mapping ``key`` of ``notebook``'s params may hold (:data:`NESTED_SCHEMAS`), None if unchecked."""
    schema = NESTED_SCHEMAS.get((notebook.split("_")[0], key))
    if schema is None:
        return None
    target, extra, left_out = schema
    names: set[str] = set(extra)
    if target:
        module, cls = target.split(":")
        names |= {f.name for f in dataclasses.fields(getattr(importlib.import_module(module), cls))}
    return sorted(names - set(left_out))


def key_line(text: str, key: str) -> int | None:
    """The first line (1-based) of a YAML ``text`` where ``key`` is written as a mapping key (block or flow style:
    ``lrr: 1`` or ``{lrr: 1, ...}``), or None."""
    pattern = re.compile(rf"(?:^|[{{,\s]){re.escape(str(key))}\s*:")
    return next((n for n, line in enumerate(text.splitlines(), 1) if pattern.search(line.split("#", 1)[0])), None)


def check_nested_keys(params: dict, notebook: str, source: str = "", text: str | None = None) -> list[str]:
    """One problem per unknown key inside a checked mapping of ``params`` (or inside each mapping of a list),
    naming the file, the key and the keys allowed there; with the file's ``text``, the line the key is on."""
    errors = []
    for key, value in params.items():
        allowed = allowed_nested_keys(notebook, str(key)) if isinstance(value, (dict, list)) else None
        if allowed is None:
            continue
        for label, m in ([(str(key), value)] if isinstance(value, dict) else
                         [(f"{key}[{i}]", m) for i, m in enumerate(value) if isinstance(m, dict)]):
            for k in m:
                if k not in allowed:
                    line = key_line(text, k) if text is not None else None
                    errors.append(f"{source + ': ' if source else ''}{f'line {line}: ' if line else ''}{label}.{k} is "
                                  f"not a parameter of {key} (allowed: {', '.join(allowed)})")
    return errors


def check_params(params: dict, defaults: dict | None = None, source: str = "", notebook: str | None = None,
                 text: str | None = None) -> None:
    """Raise :class:`ParamsError` listing every value of ``params`` of the wrong type or out of range, one per line
    (``defaults``: the notebook's declared parameter defaults), and, given ``notebook``, every unknown key inside
    its checked mappings (:data:`NESTED_SCHEMAS`; with the file's ``text``, each with its line)."""
    errors = []
    for k, v in params.items():
        errors += check_value(str(k), v, (defaults or {}).get(k))
    if notebook is not None:
        errors += check_nested_keys(params, notebook, text=text)
    if errors:
        raise ParamsError("\n".join(f"{source}: {e}" if source else e for e in errors))


def load_params(profile: str, notebook: str) -> dict[str, Any]:
    pf = params_file(profile, notebook)
    params = read_yaml(pf) or {}
    if not isinstance(params, dict):
        raise ParamsError(f"{_rel(pf)} must hold a mapping of parameter names to values")
    check_params(params, source=str(_rel(pf)), notebook=pf.name, text=pf.read_text(encoding="utf-8"))
    return variant_params(profile, notebook, params)


def apply_overrides(params: dict, overrides: dict[str, Any], where: str) -> dict:
    """``params`` with each dotted key of ``overrides`` set (a copy; nested mappings copied on the way down). A key
    whose parent is not a mapping is refused; unknown keys are left to the parameter checks that follow."""
    out = dict(params)
    for key, value in overrides.items():
        *path, last = key.split(".")
        node = out
        for i, part in enumerate(path):
            child = node.get(part, {})
            if not isinstance(child, dict):
                raise ParamsError(f"--set {where}.{key}: {'.'.join(path[:i + 1])} is not a mapping in the params")
            node[part] = dict(child)
            node = node[part]
        node[last] = value
    return out


def variant_params(profile: str, notebook: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` of ``notebook`` as a ``--set`` variant's run sees them: inside a variant (the runner points
    ``$STORYBENCH_REPORTS`` at its folder and writes ``overrides.json`` there) its overrides of that notebook applied,
    so a notebook reading another's params (05b reads 02's recipe) trains what the variant asked for."""
    f = Path(os.environ.get("STORYBENCH_REPORTS", repo_root() / "reports")) / profile / "overrides.json"
    if not f.is_file():
        return params
    data = json.loads(f.read_text(encoding="utf-8"))
    nb = notebook.split("_")[0]
    sets = data.get("set", {}).get(nb) if data.get("profile") == profile else None
    return apply_overrides(params, sets, nb) if sets else params


def set_threads(n: int | None = None) -> int:
    """Use ``n`` CPU threads for torch; ``0``/``None``: ``$OMP_NUM_THREADS`` when set, else all. Returns the number set."""
    import torch

    if not n:
        env = os.environ.get("OMP_NUM_THREADS", "").strip()
        try:
            n = int(env) if env else 0
        except ValueError:
            raise ValueError(f"OMP_NUM_THREADS={env!r} is not a whole number of threads") from None
    n = n if n and n > 0 else os.cpu_count() or 1
    torch.set_num_threads(n)
    return n


# which notebook writes each folder of runs/<profile>/
PRODUCERS = {"data": "01", "tokenizers": "01", "decoders": "02", "architecture": "02b", "generations": "03",
             "encoders": "04"}


def require_output(path: str | os.PathLike, what: str = "model") -> Path:
    """``path`` if it exists; else a :class:`FileNotFoundError` that names the notebook (and profile) producing it,
    e.g. ``run notebook 02 for profile smoke first`` (read from ``runs/<profile>/<folder>/…``)."""
    path = Path(path)
    if path.exists():
        if problem := model_folder_problem(path):
            raise ArtifactDamaged(f"{what} at {shown_path(path)} cannot be loaded: {problem}{rebuild_hint(path)}")
        return path
    hint = ""
    if producer := _producer(path):
        nb, profile = producer
        prof = f" for profile {profile}" if profile else ""
        flag = f" (./run_all.sh --profile {profile} --only {nb})" if profile else ""
        hint = f"; it is made by notebook {nb}: run notebook {nb}{prof} first{flag}"
    raise FileNotFoundError(f"no {what} at {shown_path(path)}{hint}")


def model_folder_problem(folder: str | os.PathLike) -> str | None:
    """``<file> is damaged: <why>`` for a saved model folder that cannot be loaded (a truncated safetensors file, an
    unreadable config.json; :func:`helpers.core.integrity.damaged_file`), None when whole."""
    found = damaged_file(folder)
    return f"{shown_path(found[0])} is damaged: {found[1]}" if found else None


def rebuild_hint(path: str | os.PathLike) -> str:
    """``; rebuild it: rerun notebook NN (./run_all.sh --profile P --only NN), which redoes what is damaged`` for an
    artefact under ``runs/<profile>/<folder>/`` (:data:`PRODUCERS`), else ``""``."""
    producer = _producer(Path(path))
    if producer is None:
        return ""
    nb, profile = producer
    return (f"; rebuild it: rerun notebook {nb}" + (f" (./run_all.sh --profile {profile} --only {nb}), which redoes "
                                                    f"what is damaged" if profile else ""))


class ArtifactDamaged(OSError):
    """An artefact that exists but cannot be used (truncated, edited): one line naming it and how to rebuild it."""


def _producer(path: Path) -> tuple[str, str | None] | None:
    """(notebook, profile or None) that makes ``path`` (``runs/<profile>/<folder>/…``), None when unknown."""
    parts = Path(path).parts
    hits = [i for i in range(len(parts) - 1, 0, -1) if parts[i] in PRODUCERS]
    known = profiles()
    hits = [i for i in hits if parts[i - 1] in known] or hits
    for i in hits[:1]:
        return PRODUCERS[parts[i]], parts[i - 1] if parts[i - 1] in known else None
    return None


def is_local_path(path: str | os.PathLike) -> bool:
    """True for what must be a folder on disk (absolute, ./…, or more than ``owner/name`` deep), False for what
    may be a model-hub id such as ``roneneldan/TinyStories-33M``."""
    p = Path(path)
    return p.is_absolute() or str(path).startswith(".") or len(p.parts) > 2 or isinstance(path, Path)
