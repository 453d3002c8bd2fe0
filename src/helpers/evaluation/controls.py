"""The positive control of notebook 05's questions table: a contrast whose effect is large and expected, measured
through the same pipeline, items and seeds as the questions, so that the table shows it can find an effect where
one exists (a table of nulls alone cannot tell "no effect" from "a pipeline that finds nothing").

The control pairs an arm of trained encoders (one per training seed, e.g. the D_gen B arm
``baby-500k+tiny-500k``) with **untrained** encoders of the same architecture and tokenizer, each initialised
exactly as its trained twin was before its first step (``seed_everything(seed)`` then the model, as
``helpers.training.recipes.train_or_skip`` does): trained minus its own initialisation, paired seed by seed. An
untrained encoder costs no training, only scoring (``untrained_encoders`` saves it under
``<run>/encoders/<arm> (seed N)/best`` with its sidecar, so :func:`helpers.evaluation.zero_shot.evaluate_many` scores
and caches it like any encoder). The control is a question with ``role: positive control``
(:data:`helpers.evaluation.comparisons.POSITIVE_CONTROL`), outside Holm's family.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from helpers.core.artifacts import fingerprint, run_step, save_pretrained_atomic
from helpers.core.digests import sha256_file
from helpers.core.seeding import seed_everything
from helpers.data.tokenizers import load_tokenizer
from helpers.evaluation.comparisons import POSITIVE_CONTROL, arm_and_seed
from helpers.evaluation.minimal_pairs import task_display
from helpers.evaluation.zero_shot import evaluate_many
from helpers.models.ltg_bert import LtgBertConfig, LtgBertForMaskedLM


def check_control(control: Mapping[str, Any] | None, encoders: Sequence[str]) -> None:
    """Refuse a malformed positive control before anything is scored: ``question``, ``a`` (an arm of ``encoders``
    with at least two seeds), ``b`` (the untrained arm's name, not an encoder of the profile), ``task``, ``kind:
    encoder`` and ``role: positive control``. None (no control) passes."""
    if not control:
        return
    missing = [k for k in ("question", "a", "b", "task", "kind") if k not in control]
    if missing:
        raise ValueError(f"positive_control: missing {', '.join(missing)}")
    if control["kind"] != "encoder" or control.get("role") != POSITIVE_CONTROL:
        raise ValueError(f"positive_control: needs kind: encoder and role: {POSITIVE_CONTROL!r} (untrained encoders "
                         f"against a trained arm), not kind {control['kind']!r}, role {control.get('role')!r}")
    arms = [arm_and_seed(m, 0)[0] for m in encoders]
    if arms.count(control["a"]) < 2:
        raise ValueError(f"positive_control: a = {control['a']!r} needs at least two seeds among the encoders "
                         f"(it has {arms.count(control['a'])})")
    if control["b"] in arms:
        raise ValueError(f"positive_control: b = {control['b']!r} is a trained encoder of this profile; name the "
                         "untrained arm something else")


def untrained_encoders(run_dir: str | Path, trained: Sequence[str], arm: str, default_seed: int,
                       log: Callable[[str], None] = print) -> list[str]:
    """For each trained encoder in ``trained`` (``<mix>`` or ``<mix> (seed N)``; a name without the suffix is
    ``default_seed``, notebook 04's ``train.seed``), its untrained twin ``"<arm> (seed N)"``: the trained model's
    config and tokenizer, weights from ``seed_everything(N)`` and a fresh ``LtgBertForMaskedLM`` (the
    initialisation training started from), saved atomically with its sidecar under ``<run_dir>/encoders/<name>/best``
    (skipped when made already from the same config, tokenizer and seed). Returns the names, in ``trained``'s
    order."""
    run_dir = Path(run_dir)
    names = []
    for name in trained:
        seed = arm_and_seed(name, default_seed)[1]
        src = run_dir / "encoders" / name / "best"
        out = run_dir / "encoders" / f"{arm} (seed {seed})" / "best"
        fp = fingerprint("untrained-encoder-v1", seed, sha256_file(src / "config.json"), sha256_file(src / "tokenizer.json"))

        def make(src: Path = src, out: Path = out, seed: int = seed, name: str = name) -> None:
            config = LtgBertConfig.from_pretrained(str(src))
            seed_everything(seed)
            model = LtgBertForMaskedLM(config).eval()
            save_pretrained_atomic(out, model, load_tokenizer(src),
                                   info={"untrained": True, "initialised like": name, "seed": seed})

        run_step(f"untrained encoder {arm} (seed {seed})", out, fp, make, log)
        names.append(f"{arm} (seed {seed})")
    return names


def score_positive_control(run_dir: str | Path, control: Mapping[str, Any] | None, encoders: Sequence[str],
                           tasks: Sequence[str], workers: int | str, default_seed: int,
                           encoder_kwargs: Mapping[str, Any] | None = None) -> dict[tuple[str, str], Any]:
    """The untrained twins of the control's trained arm (``control["a"]``'s encoders), made
    (:func:`untrained_encoders`) and scored on the control's task only, with the questions' scoring settings
    (``encoder_kwargs``, as notebook 05 scores its encoders): ``{("encoder", name): EvalResult}``; empty without a
    control."""
    if not control:
        return {}
    check_control(control, encoders)
    trained = [m for m in encoders if arm_and_seed(m, default_seed)[0] == control["a"]]
    names = untrained_encoders(run_dir, trained, control["b"], default_seed)
    on = [t for t in tasks if task_display(t) == control["task"]]
    if not on:
        raise ValueError(f"positive_control: task {control['task']!r} is none of the scored tasks "
                         f"({', '.join(task_display(t) for t in tasks)})")
    return evaluate_many(run_dir, [], names, on, workers, encoder_kwargs=encoder_kwargs)


def as_questions(control: Mapping[str, Any] | None) -> list[dict]:
    """The control as a list of questions for :func:`helpers.evaluation.comparisons.questions_table` (empty without
    one)."""
    return [dict(control)] if control else []
