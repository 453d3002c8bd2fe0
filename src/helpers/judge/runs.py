"""Running the LLM judge from a notebook (``docs/methods.md#gpt-eval``): the judge of the notebook parameters
(:func:`judge_config`: local, OpenAI-compatible or none), its client (:func:`make_client`), the items to grade
(:func:`judge_prompt_ids`, :func:`judge_items`, and notebook 03's continuations for the validity check:
:func:`decoder_continuations`), concurrent grading with the cache (:func:`grade_completions`),
per-model means (:func:`judge_summary`) and the themed answers' consistency grade (:func:`judge_themed_answers`).
"""
from __future__ import annotations

import logging
import random
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from helpers.core.artifacts import read_jsonl
from helpers.core.progress import progress as progress_bar
from helpers.judge.client import JudgeClient, JudgeConfig
from helpers.judge.local import LocalJudgeClient, LocalJudgeConfig
from helpers.judge.rubric import CATEGORIES, JudgeConfigError, JudgeError, _CachedJudge, get_protocol, judge_status

log = logging.getLogger(__name__)

JUDGE_BACKENDS = ("local", "openai-compatible", "none")


def make_client(cfg: "JudgeConfig | LocalJudgeConfig") -> _CachedJudge:
    """The client of a judge configuration: remote (HTTP) or local (in-process)."""
    if isinstance(cfg, LocalJudgeConfig):
        return LocalJudgeClient(cfg)
    return JudgeClient(cfg)


# ----------------------------------------------------------------------------- batch grading
def grade_completions(
    cfg: JudgeConfig | None,
    items: Iterable[Mapping[str, Any]] | Any,
    progress: bool = True,
    client: JudgeClient | None = None,
    keep_text: bool = False,
    kind: str = "story",
):
    """Grade many (prompt, completion) items concurrently; returns one row per item (a pandas DataFrame).

    ``kind``: ``"story"`` (GPT-Eval of a completed beginning) or ``"instruct"`` (a story written to instructions;
    adds the ``instructions`` grade).

    ``items``: dicts (or a DataFrame) with ``prompt`` and ``completion``; other columns (model, prompt_id, sample,
    ...) are carried through.  Output columns add ``grammar``, ``creativity``, ``consistency``, ``plot`` (1–10),
    ``age_group`` (A–F), ``status`` (``graded``/``cached``/``failed``), ``retries`` and ``error``; ``assessment``
    and ``reply`` are included with ``keep_text=True``.  Identical (prompt, completion) pairs are graded once.
    Failed items get NaN scores and are not cached, so a rerun retries them.  A configuration error
    (401/403/404) aborts the run; items graded so far stay cached.
    """
    if cfg is None and client is None:
        raise ValueError("no judge endpoint is configured (JudgeConfig is None); skip judge scores rather than inventing them")
    client = client or make_client(cfg)  # type: ignore[arg-type]
    cfg = client.cfg
    proto = get_protocol(kind)
    rows = items.to_dict("records") if hasattr(items, "to_dict") else [dict(r) for r in items]
    for i, r in enumerate(rows):
        if not isinstance(r.get("prompt"), str) or not isinstance(r.get("completion"), str):
            raise ValueError(f"item {i} needs string fields 'prompt' and 'completion' (got keys {sorted(r)})")
    if hasattr(client, "load") and any(client.cached(r["prompt"], r["completion"], kind) is None for r in rows):
        client.load(kind)  # a local judge: load it (once) before items are timed
    if cfg.cache_dir is None:
        log.warning("judge: no cache_dir set; an interrupted run will pay for every item again")
    unique: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(rows):
        unique.setdefault((r["prompt"], r["completion"]), []).append(i)
    results: dict[tuple[str, str], dict[str, Any]] = {}

    def work(pc: tuple[str, str]) -> dict[str, Any]:
        try:
            return client.grade(*pc, kind=kind)
        except JudgeConfigError:
            raise
        except JudgeError as e:
            return {"error": client.scrub(str(e)), "failed": True}

    with ThreadPoolExecutor(max_workers=int(cfg.max_concurrency)) as pool:
        futures = {pool.submit(work, pc): pc for pc in unique}
        try:
            for fut in progress_bar(as_completed(futures), total=len(futures), desc=f"judge {cfg.model}", unit="item",
                                    disable=not progress):
                results[futures[fut]] = fut.result()
        except JudgeConfigError:
            for f in futures:
                f.cancel()
            raise
    out = []
    for r in rows:
        rec = results[(r["prompt"], r["completion"])]
        row = dict(r)
        for c in proto.categories:
            row[c] = rec.get(c, float("nan"))
        row["age_group"] = rec.get("age_group")
        row["status"] = "failed" if rec.get("failed") else ("cached" if rec.get("cached") else "graded")
        row["retries"] = rec.get("retries", float("nan"))
        row["seconds"] = rec.get("seconds", float("nan"))
        for k, v in (rec.get("extra") or {}).items():
            if not isinstance(v, (list, dict)):
                row[k] = v
        row["error"] = rec.get("error")
        if keep_text:
            row["assessment"] = rec.get("assessment")
            row["reply"] = rec.get("reply")
        out.append(row)
    df = pd.DataFrame(out)
    n_failed = int((df["status"] == "failed").sum()) if len(df) else 0
    if n_failed and n_failed == len(df):
        errors = df["error"].dropna()
        raise JudgeError(
            f"judge {cfg.model} at {cfg.describe().get('base_url', 'local')}: none of the {len(df)} item(s) got a usable grade "
            f"(first error: {errors.iat[0] if len(errors) else '?'}); nothing is reported — check the judge model "
            f"(does it follow the grading format?) and rerun: failed items are retried, graded ones stay cached"
        )
    if n_failed:
        log.warning("judge: %d of %d items failed (scores NaN); rerun to retry them", n_failed, len(df))
    return df


# ----------------------------------------------------------------------------- the judge, from notebook parameters
def judge_config(base_url: str | None = None, model: str | None = None, api_key_env: str | None = None,
                 cache_dir: str | Path | None = None, backend: str = "openai-compatible", **settings: Any):
    """The judge of notebook parameters.  ``backend`` (the ``judge`` parameter): ``"local"`` gives a
    :class:`helpers.judge.local.LocalJudgeConfig` (the in-process SmolLM2 judge; an endpoint named by ``base_url``
    or ``model`` is refused, the other settings are the endpoint's and unused), ``"none"`` gives ``None``, ``"openai-compatible"`` a
    :class:`helpers.judge.client.JudgeConfig` from flat notebook parameters (``judge_base_url``, ``judge_model``,
    ``judge_api_key_env`` and other settings), falling back to the environment, or ``None`` when no endpoint is
    configured (judge scores are then skipped, never invented)."""
    if backend not in JUDGE_BACKENDS:
        raise ValueError(f"judge = {backend!r}; choose one of {', '.join(JUDGE_BACKENDS)}")
    if backend == "none":
        return None
    if backend == "local":
        endpoint = [k for k, v in (("judge_base_url", base_url), ("judge_model", model)) if v is not None]
        if endpoint:
            raise ValueError(f"judge = 'local' runs the in-process SmolLM2 judge, but {' and '.join(endpoint)} name an "
                             "endpoint: set judge: openai-compatible to grade with it, or set them to null")
        return LocalJudgeConfig(cache_dir=Path(cache_dir) if cache_dir else None)

    p = {"base_url": base_url, "model": model, **settings}
    if api_key_env:
        p["api_key_env"] = api_key_env
    return JudgeConfig.from_params(p, cache_dir=cache_dir)  # the judge block itself, not wrapped


def judge_prompt_ids(kept: Mapping[str, Iterable[Any]], n: int, seed: int) -> list[Any]:
    """``n`` prompt ids (seeded, sorted) among those that every model kept (see
    :func:`helpers.story_eval.suites.fit_prompts`): the judged prompts are the same for every model."""
    sets = [set(v) for v in kept.values()]
    common = sorted(set.intersection(*sets)) if sets else []
    return sorted(random.Random(seed).sample(common, min(int(n), len(common))))


def decoder_continuations(gen_dir: str | Path, models: Sequence[str], split: str = "held-out") -> tuple[list[dict], list[str]]:
    """Notebook 03's greedy continuations of ``split`` stories (its continuation-health prompts,
    ``generations/continuations-<split>-<model>.jsonl``) for the judge's real-vs-decoder pairs
    (:func:`helpers.judge.validity.decoder_items`): the rows of every model whose file exists, and the models
    without one."""
    rows, missing = [], []
    for name in models:
        path = Path(gen_dir) / f"continuations-{split}-{name}.jsonl"
        if path.is_file():
            rows += [{**r, "model": r.get("model", name)} for r in read_jsonl(path)]
        else:
            missing.append(name)
    return rows, missing


def judge_items(nucleus, greedy, prompt_ids: Sequence[Any], samples: int):
    """The completions to grade: for each judged prompt, the greedy completion (``greedy`` rows, may be None) and
    the first ``samples`` nucleus samples; a ``decoding`` column says which."""
    cols = ["model", "story_id", "sample", "prompt", "completion"]
    parts = []
    if greedy is not None and len(greedy):
        g = greedy[greedy["story_id"].isin(prompt_ids)][cols].copy()
        g["decoding"] = "greedy"
        parts.append(g)
    if samples and nucleus is not None and len(nucleus):
        s = nucleus[nucleus["story_id"].isin(prompt_ids) & (nucleus["sample"] < samples)][cols].copy()
        s["decoding"] = "nucleus"
        parts.append(s)
    if not parts:
        return pd.DataFrame(columns=[*cols, "decoding"])
    return pd.concat(parts, ignore_index=True)


def judge_summary(grades, by: Sequence[str] = ("model",), categories: Sequence[str] | None = None):
    """Mean, standard error and count of every judge category per group (failed items excluded and counted)."""
    cats = [c for c in (categories or CATEGORIES) if c in grades.columns]
    ok = grades[grades["status"] != "failed"]
    g = ok.groupby(list(by), sort=False)
    out = g[cats].mean()
    for c in cats:
        out[f"{c} sem"] = g[c].sem()
    out["graded"] = g.size()
    failed = grades[grades["status"] == "failed"].groupby(list(by), sort=False).size()
    out["failed"] = failed.reindex(out.index).fillna(0).astype(int)
    out["age group (mode)"] = g["age_group"].agg(lambda s: s.mode().iat[0] if len(s.mode()) else None)
    return out.reset_index()


#: why the local judge does not grade the themed answers
LOCAL_THEMED_NOTE = ("themed answers are not judged: the local judge's validity is measured on story endings only (GPT-Eval), "
                     "and grading them too would add to its time")


def judge_themed_answers(cfg, graded, client: JudgeClient | None = None):
    """The themed answers (:func:`helpers.story_eval.suites.grade_table`'s rows: ``model``, ``id``, ``prompt``,
    ``answer``) graded by a remote judge: returns ``graded`` with a ``judge consistency`` column (its consistency
    grade of each answer), the labels shown beside the answers (``{(model, id): "judge consistency 7/10"}``, failed
    items left out) and ``None``. Without a judge (``cfg`` None) or with the local one, whose validity is measured on
    story endings only, nothing is graded: ``graded`` unchanged, ``{}`` and the sentence that says why."""
    if cfg is None:
        return graded, {}, judge_status(None)
    if isinstance(cfg, LocalJudgeConfig):
        return graded, {}, LOCAL_THEMED_NOTE
    items = graded.rename(columns={"answer": "completion"})[["model", "id", "prompt", "completion"]]
    grades = grade_completions(cfg, items, client=client)
    labels = {(r.model, r.id): f"judge consistency {r.consistency:g}/10" for r in grades.itertuples() if r.status != "failed"}
    return graded.assign(**{"judge consistency": grades["consistency"].to_numpy()}), labels, None
