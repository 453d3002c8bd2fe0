"""Which differences are real: one comparison of two arms (sets of models that differ in one thing, each trained from
one or more seeds) on the same items, used by every "A vs B" sentence of the reports.

Evaluations feed it **tidy per-item rows** — columns ``model``, ``arm``, ``seed``, ``task``, ``item``, ``value`` (one
score per item: 1/0 for a minimal pair, a grade, a loss) — made by :func:`tidy_zero_shot` (minimal pairs) or
:func:`tidy_rows` (any list of per-item dicts: judge grades, suites, GLUE examples, continuation health).
:func:`compare_arms` then measures the difference twice:

* **over items**: both arms' scores averaged over their seeds, item by item, and a paired bootstrap of the mean
  difference over the shared items (with McNemar's exact test when each arm has one seed and 0/1 scores). This
  says which items were drawn, not which seed trained the model;
* **over seeds**: one mean per (arm, seed) on the shared items; with seeds shared by both arms (the same
  initialisation seed used across the arms of a comparison) a Student-t interval of the per-seed differences
  (paired), otherwise Welch's interval of the two arms' seed means. ``n`` is stated.

A difference is called an **effect** only when the seed-level interval excludes 0 and the item-level interval
excludes 0 on the same side: the seeds say it is not one lucky initialisation, the items that it is not one lucky
draw of items (a question about a task is about its items as much as its models). Seeds apart but items not is
"not shown beyond these items". Otherwise the verdict reads the result's own interval, "not shown: effect in [L, U]
(95 % over n seeds)" (:func:`helpers.core.claims.interval_null`), and equivalence only by two one-sided tests
against the margin δ the question set before the run (``delta``): "equivalent within ±δ" when the 90 % seed-level
interval lies inside ±δ, else "inconclusive" (:func:`helpers.core.claims.equivalence_claim`). The minimum detectable
effect at 80 % power (exact, by the noncentral t: :func:`helpers.core.stats.minimum_detectable_effect`) is a column
describing the design, never a verdict. With one seed in an arm nothing can be said about seed noise: the verdict
is "untestable here". A question with ``role: positive control`` (a contrast with a large expected effect through
the same pipeline and seeds) is shown beside the questions, outside Holm's family; a sensitivity set of rows (the
encoders under the summed PLL) recomputes each question beside the pre-registered one and a verdict that flips
under it says so. :func:`above_chance_holm` counts "above chance" cells of a model × task grid after Holm's
correction.

The module runs past the 500-line mark on purpose: the verdict, the positive control, the summed-PLL sensitivity
and the design tables (:func:`item_budget`, :func:`seed_budget`) all read one items × (arm, seed) matrix
(``_arm_matrix``) and one choice of paired or Welch design, and split apart they would drift.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import norm, t as student_t

from helpers.core.claims import equivalence_claim, interval_null
from helpers.core.config import load_params
from helpers.core.stats import (binomial_p_above, detectable_shift, holm, items_for_tolerance, mcnemar_exact,
                                minimum_detectable_effect, paired_bootstrap_difference, seed_item_components,
                                seeds_to_detect, t_interval, tost_interval, wilson_interval)
from helpers.evaluation.minimal_pairs import task_display

TIDY_COLUMNS = ["model", "arm", "seed", "task", "item", "value"]
#: the ``role`` of a question that is a positive control (outside Holm's family; its verdict must be an effect)
POSITIVE_CONTROL = "positive control"
QUESTIONS_CAPTION = ("Each question: arm A minus arm B in points (accuracy × 100) on the items both arms scored. Seed CI: "
                     "Student-t 95 % interval over training seeds (paired seed by seed where the arms share seeds, "
                     "Welch otherwise); MDE: the design's minimum detectable effect, the smallest true difference a "
                     "two-sided 5 % test detects with 80 % power at this seed SD and n, exact by the noncentral t "
                     "(paired: df n − 1; unpaired: pooled SD, df 2n − 2; item MDE: the same over items, from the item "
                     "CI's standard error, normal); seed p: the t-test's two-sided p-value, 'effect after Holm' whether "
                     "it stays below 0.05 after Holm's correction over the questions (role 'question'; the positive "
                     "control is outside the family); item CI: paired bootstrap 95 % over items (seed noise not "
                     "included); δ: the equivalence margin set in the params before the run, TOST 90 % CI: the "
                     "seed-level interval two one-sided 5 % tests read (equivalent when it lies inside ±δ); "
                     "'under sum PLL': the same question with the encoders' summed PLL (a sensitivity check; the "
                     "pre-registered reduction is the mean). Chance: none applies to a difference (0 = no difference); "
                     "the verdict reads both CIs (an effect needs both to exclude 0, and Holm); a difference not shown "
                     "reads its own seed interval, never the MDE.")
ITEM_BUDGET_CAPTION = ("How many scored pairs each question needs. The seed-to-seed spread of the effect is split into seed noise "
                       "and item noise (per-item variance over seeds vs variance of the seed means; paired questions use "
                       "the per-item differences A − B). Pairs for ±10 %: the number of pairs at which item noise adds "
                       "at most 10 % to the seed-level SD. Estimated from few seeds, so read the order of magnitude. "
                       "Chance: none applies (a count of pairs).")
SEED_BUDGET_CAPTION = ("How many training seeds each question needs. MDE with the first k seeds: the minimum detectable "
                       "effect (80 % power, two-sided 5 %, exact by the noncentral t) that the questions table would "
                       "report had the profile trained only the first k seeds of each arm (the models are the same: a "
                       "profile with k seeds trains the first k of its list); projected: the same at the SD of all the "
                       "run's seeds. The rule: no question whose MDE exceeds twice its observed effect keeps paying for "
                       "seeds ('pays for seeds'; the fewest seeds that bring the projected MDE within 2 × |effect|). "
                       "Paired questions only. Chance: none applies (a size of effect in points).")
ARM_CAPTION = ("Per arm (one recipe, one model per training seed): the mean of its models' accuracies (%) over seeds, "
               "the Student-t 95 % interval of that mean over seeds (none with one seed; clipped to 0-100), the seed SD and the "
               "range. "
               "The interval covers the training seed and, within each model, the items drawn. Chance: 50 %.")
SEED_SUFFIX = re.compile(r"^(?P<arm>.+?) \(seed (?P<seed>\d+)\)$")


def arm_and_seed(model: str, default_seed: int) -> tuple[str, int]:
    """A model's arm and training seed from the project's naming: ``"<arm> (seed N)"`` is seed ``N`` of ``<arm>``;
    a name without the suffix is ``default_seed`` (the profile's ``train.seed``)."""
    m = SEED_SUFFIX.match(str(model))
    return (m.group("arm"), int(m.group("seed"))) if m else (str(model), int(default_seed))


def seeds_per_arm(models: Iterable[str]) -> Counter:
    """How many models (training seeds) each arm has, arms in the order they first appear."""
    return Counter(arm_and_seed(m, 0)[0] for m in models)


def corpus_of(model: str) -> str:
    """The corpus (notebook 01's budget, notebook 04's mix) a model was trained on, from its name: without
    ``" (seed N)"`` and a decoder's ``" (plain)"`` (``"tiny-1M (plain) (seed 7)"`` -> ``"tiny-1M"``)."""
    arm = arm_and_seed(model, 0)[0]
    return arm[: -len(" (plain)")] if arm.endswith(" (plain)") else arm


def training_seeds(profile: str) -> dict[str, int]:
    """The training seed of a model named without ``(seed N)``, per kind: notebook 02's ``train.seed`` for decoders,
    notebook 04's for encoders (what :func:`tidy_zero_shot` takes as ``default_seed``)."""
    return {"decoder": int(load_params(profile, "02")["train"]["seed"]),
            "encoder": int(load_params(profile, "04")["train"]["seed"])}


def tidy_rows(rows: Iterable[Mapping[str, Any]], model: str, task: str, item_key: str | Sequence[str],
              value_key: str, default_seed: int, seed: int | None = None) -> pd.DataFrame:
    """Per-item dicts of one model on one task → tidy rows (:data:`TIDY_COLUMNS`). ``item_key`` names the field (or
    fields, joined) that identifies an item across models; ``value_key`` the score; the arm and seed come from the
    model's name (:func:`arm_and_seed`) unless ``seed`` is given."""
    keys = [item_key] if isinstance(item_key, str) else list(item_key)
    arm, s = arm_and_seed(model, default_seed)
    s = s if seed is None else int(seed)
    out = [{"model": model, "arm": arm, "seed": s, "task": task,
            "item": "/".join(str(r[k]) for k in keys), "value": float(r[value_key])} for r in rows]
    return pd.DataFrame(out, columns=TIDY_COLUMNS)


def summed_pll_correct(rows: pd.DataFrame) -> np.ndarray:
    """Whether each pair is right under the **summed** PLL, recomputed from rows scored with the per-token mean
    (``score_* × n_*``: the mean times the scored tokens); an exact tie counts half."""
    sg, sb = rows["score_good"] * rows["n_good"], rows["score_bad"] * rows["n_bad"]
    return np.where(sg == sb, 0.5, (sg > sb).astype(float))


def tidy_zero_shot(results: Mapping[tuple[str, str], Any], default_seed: int | Mapping[str, int],
                   reduction: str | None = None) -> pd.DataFrame:
    """Tidy rows of zero-shot minimal-pair results (``{(kind, model): EvalResult}``, as
    :func:`helpers.evaluation.zero_shot.evaluate_many` returns them): one row per scored pair, value 1 when the good
    sentence scored higher (ties as the result's coin decided), item = ``paradigm/pair_id``, task by its display name
    (BLiMP, Supp., EWoK), plus a ``kind`` column (decoder / encoder: a decoder and an encoder may share a name).
    ``default_seed``: the training seed of a model named without ``(seed N)``, one number or one per kind.
    ``reduction="sum"``: the encoders' pairs (rows scored with the mean PLL and carrying token counts) are judged by
    the summed PLL instead (:func:`summed_pll_correct`; ties half; an encoder scored with the sum already is kept as
    scored), the sensitivity check of the questions table; decoders (one reduction) and rows without token counts
    are left out."""
    if reduction not in (None, "sum"):
        raise ValueError(f"reduction must be None (as scored) or 'sum', not {reduction!r}")
    frames = []
    for (kind, model), res in results.items():
        rows = pd.DataFrame(res.rows)
        if rows.empty:
            continue
        if reduction == "sum":
            if kind == "decoder" or "n_good" not in rows.columns:
                continue  # one reduction only: a decoder's summed log-probability
            if getattr(getattr(res, "settings", None), "reduction", "mean") == "mean":
                rows = rows.assign(correct=summed_pll_correct(rows))
        seed = default_seed[kind] if isinstance(default_seed, Mapping) else default_seed
        for task, g in rows.groupby("task", sort=False):
            t = tidy_rows(g.to_dict("records"), model, task_display(task), ["paradigm", "pair_id"], "correct", seed)
            t.insert(0, "kind", kind)
            frames.append(t)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["kind", *TIDY_COLUMNS])


def _welch(a: np.ndarray, b: np.ndarray, confidence: float) -> tuple[float, float, float, float, float, float]:
    """Welch's interval of mean(a) − mean(b), its two-sided p-value (NaN when both arms have no spread), standard
    error and Welch–Satterthwaite df."""
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    diff, se = float(a.mean() - b.mean()), math.sqrt(va + vb)
    if se == 0:
        return diff, diff, diff, float("nan"), 0.0, float("nan")
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = float(student_t.ppf(0.5 + confidence / 2, df)) * se
    return diff, diff - half, diff + half, float(2 * student_t.sf(abs(diff) / se, df)), se, float(df)


def _question_rows(rows: pd.DataFrame, q: Mapping[str, Any]) -> pd.DataFrame:
    """The rows of a question's kind of model (decoder / encoder) where both the question and the rows name one."""
    return rows[rows["kind"] == q["kind"]] if "kind" in q and "kind" in rows.columns else rows


def _arm_matrix(rows: pd.DataFrame, arm_a: str, arm_b: str, task: str,
                scale: float) -> tuple[pd.DataFrame, dict[str, list[int]], list[int]]:
    """Two arms on ``task``: items × (arm, seed) values times ``scale``, on the items every (arm, seed) scored (the
    comparison is on the same items throughout); each arm's seeds; the seeds they share."""
    part = rows[(rows["task"] == task) & rows["arm"].isin([arm_a, arm_b])]
    per_model_items = part.groupby(["arm", "seed"])["item"].apply(set)
    shared = set.intersection(*per_model_items) if len(per_model_items) else set()
    part = part[part["item"].isin(shared)]
    wide = (part.pivot_table(index="item", columns=["arm", "seed"], values="value", aggfunc="mean") * scale
            if len(part) else pd.DataFrame())
    seeds = {arm: sorted(int(s) for a, s in wide.columns if a == arm) for arm in (arm_a, arm_b)}
    return wide, seeds, sorted(set(seeds[arm_a]) & set(seeds[arm_b]))


def compare_arms(rows: pd.DataFrame, arm_a: str, arm_b: str, task: str, *, scale: float = 100.0,
                 unit: str = "points", confidence: float = 0.95, power: float = 0.8, n_boot: int = 2000,
                 seed: int = 0, delta: float | None = None) -> dict[str, Any]:
    """Arm ``arm_a`` minus arm ``arm_b`` on ``task`` from tidy ``rows``, over the items both arms scored with every
    seed: the effect, its seed-level interval (paired t over shared seeds, else Welch), the seed SD, the minimum
    detectable effect at ``power`` (exact: :func:`helpers.core.stats.minimum_detectable_effect`), the item-level
    interval (paired bootstrap of the seed-averaged scores), the TOST interval (1 − 2α with α = 1 − ``confidence``:
    the 90 % interval of two one-sided 5 % tests) against the equivalence margin ``delta`` (in ``unit``, set before the run; None: equivalence not tested), the
    seeds per arm at which the design would detect twice the observed effect, and the verdict. Values are multiplied
    by ``scale`` (100: shares to points)."""
    alpha = 1 - confidence  # each one-sided test of TOST at this level: a (1 − 2α) interval
    out: dict[str, Any] = {"task": task, "A": arm_a, "B": arm_b, "unit": unit,
                           "δ (equivalence margin)": float(delta) if delta is not None else np.nan}
    wide, seeds, paired = _arm_matrix(rows, arm_a, arm_b, task, scale)
    if not seeds[arm_a] or not seeds[arm_b]:
        missing = [arm for arm in (arm_a, arm_b) if not seeds[arm]]
        return {**out, "seeds A": 0, "seeds B": 0, "paired seeds": 0, "items": 0, "effect": np.nan,
                "seed CI low": np.nan, "seed CI high": np.nan, "seed SD": np.nan, "MDE (80 % power)": np.nan,
                "item CI low": np.nan, "item CI high": np.nan, "McNemar p": np.nan, "TOST 90 % CI low": np.nan,
                "TOST 90 % CI high": np.nan, "TOST": "", "seeds to detect 2 × |effect|": np.nan,
                "verdict": f"untestable here: {', '.join(missing)} not scored on {task} in this run"}
    means = wide.mean(axis=0)
    a_by_seed = np.array([means[(arm_a, s)] for s in seeds[arm_a]])
    b_by_seed = np.array([means[(arm_b, s)] for s in seeds[arm_b]])
    # over items: each arm's seeds averaged item by item, then a paired bootstrap over items
    ia, ib = wide[arm_a].mean(axis=1).to_numpy(), wide[arm_b].mean(axis=1).to_numpy()
    _, item_lo, item_hi = paired_bootstrap_difference(ia, ib, confidence, n_boot, seed)
    z = norm.ppf(1 - (1 - confidence) / 2)
    # the item CI's standard error, at the same power: thousands of items, so the test statistic is normal
    item_mde = detectable_shift((item_hi - item_lo) / (2 * z), float("inf"), 1 - confidence, power)
    mc_p = np.nan
    if len(seeds[arm_a]) == len(seeds[arm_b]) == 1 and np.isin(ia / scale, (0.0, 1.0)).all() \
            and np.isin(ib / scale, (0.0, 1.0)).all():
        mc_p = mcnemar_exact(ia / scale, ib / scale)[2]
    # over seeds
    if len(paired) >= 2:
        diffs = np.array([means[(arm_a, s)] - means[(arm_b, s)] for s in paired])
        effect, lo, hi, n, sd = t_interval(diffs, confidence)
        p = float(2 * student_t.sf(abs(effect) / (sd / math.sqrt(n)), n - 1)) if sd > 0 else float("nan")
        mde = minimum_detectable_effect(sd, n, paired=True, alpha=1 - confidence, power=power)
        tost = tost_interval(effect, sd / math.sqrt(n), n - 1, alpha)
        need = seeds_to_detect(sd, effect, paired=True, alpha=1 - confidence, power=power)
        design = f"paired over {n} seeds"
    elif len(a_by_seed) >= 2 and len(b_by_seed) >= 2:
        effect, lo, hi, p, se, df = _welch(a_by_seed, b_by_seed, confidence)
        sd = float(np.sqrt((a_by_seed.var(ddof=1) + b_by_seed.var(ddof=1)) / 2))
        n = min(len(a_by_seed), len(b_by_seed))
        mde = minimum_detectable_effect(sd, n, paired=False, alpha=1 - confidence, power=power)
        tost = tost_interval(effect, se, df, alpha) if se > 0 else (np.nan, np.nan)
        need = seeds_to_detect(sd, effect, paired=False, alpha=1 - confidence, power=power)
        design = f"{len(a_by_seed)} vs {len(b_by_seed)} seeds, unpaired"
    else:
        effect, lo, hi, sd, mde, p = float(a_by_seed.mean() - b_by_seed.mean()), np.nan, np.nan, np.nan, np.nan, np.nan
        tost, need = (np.nan, np.nan), np.nan
        design = f"{len(a_by_seed)} vs {len(b_by_seed)} seed{'s' if max(len(a_by_seed), len(b_by_seed)) > 1 else ''}"
    out.update({"seeds A": len(seeds[arm_a]), "seeds B": len(seeds[arm_b]), "paired seeds": len(paired),
                "items": len(wide), "A": arm_a, "B": arm_b, "mean A": float(a_by_seed.mean()),
                "mean B": float(b_by_seed.mean()), "effect": float(effect), "seed CI low": float(lo),
                "seed CI high": float(hi), "seed p": float(p), "seed SD": float(sd), "MDE (80 % power)": float(mde),
                "item CI low": float(item_lo), "item CI high": float(item_hi), "item MDE (80 % power)": item_mde,
                "McNemar p": float(mc_p), "design": design, "TOST 90 % CI low": float(tost[0]),
                "TOST 90 % CI high": float(tost[1]), "seeds to detect 2 × |effect|": float(need)})
    out["TOST"] = ("" if not (np.isfinite(lo) and np.isfinite(hi)) else
                   "not tested: no spread over seeds, so the interval has no width" if sd == 0 else  # same models?
                   equivalence_claim(tost[0], tost[1], delta, unit, digits=1 if unit == "points" else 3, alpha=alpha))
    out["verdict"] = verdict(out)
    return out


def item_budget(rows: pd.DataFrame, questions: Sequence[Mapping[str, Any]], tolerance: float = 0.1,
                scale: float = 100.0) -> pd.DataFrame:
    """Per question, whether more (or fewer) scored pairs would change its seed-level interval: the seed and item
    components of the effect's seed-to-seed variance (:func:`helpers.core.stats.seed_item_components`, on the
    per-item differences of the shared seeds when the arms share at least two, else per arm and averaged, as
    :func:`compare_arms` pools the Welch SD) and the pairs at which item noise adds at most ``tolerance`` to the SD."""
    out = []
    for q in questions:
        row: dict[str, Any] = {"question": q["question"], "task": q["task"], "A": q["a"], "B": q["b"]}
        wide, seeds, paired = _arm_matrix(_question_rows(rows, q), q["a"], q["b"], q["task"], scale)
        if not seeds[q["a"]] or not seeds[q["b"]]:
            missing = [arm for arm in (q["a"], q["b"]) if not seeds[arm]]
            out.append({**row, "design": "", "seeds A": len(seeds[q["a"]]), "seeds B": len(seeds[q["b"]]), "pairs": 0,
                        "reading": f"untestable here: {', '.join(missing)} not scored on {q['task']} in this run"})
            continue
        if len(paired) >= 2:
            design = f"paired over {len(paired)} seeds"
            comps = [seed_item_components(np.array([wide[(q["a"], s)] - wide[(q["b"], s)] for s in paired]))]
        else:
            design = f"{len(seeds[q['a']])} vs {len(seeds[q['b']])} seeds, per arm"
            comps = [seed_item_components(np.array([wide[(arm, s)] for s in seeds[arm]])) for arm in (q["a"], q["b"])]
        seed_var = float(np.mean([c[0] for c in comps]))
        item_var = float(np.mean([c[1] for c in comps]))
        n, need = len(wide), items_for_tolerance(seed_var, item_var, tolerance)
        now = seed_var + item_var / n if n else float("nan")
        if seed_var == 0 and item_var == 0:
            reading = "not measurable: no spread over seeds or items (are the arms the same models?)"
        elif not np.isfinite(need):
            reading = ("untestable here: fewer than two seeds in an arm" if np.isnan(need) else
                       "no seed noise beyond the item noise was measured: more pairs would narrow the interval")
        elif need <= n:
            reading = f"enough: {need:,.0f} of the {n:,} pairs would do"
        else:
            reading = f"more pairs would narrow the interval: {need:,.0f} needed, {n:,} scored"
        row.update({"design": design, "seeds A": len(seeds[q["a"]]), "seeds B": len(seeds[q["b"]]), "pairs": n,
                    "seed SD without item noise": math.sqrt(seed_var) if np.isfinite(seed_var) else np.nan,
                    "item SD per pair": math.sqrt(item_var) if np.isfinite(item_var) else np.nan,
                    "item share of the variance (%)": 100 * (item_var / n) / now if n and now > 0 else np.nan,
                    f"pairs for ±{100 * tolerance:.0f} %": need, "reading": reading})
        out.append(row)
    return pd.DataFrame(out)


def seed_budget(rows: pd.DataFrame, questions: Sequence[Mapping[str, Any]], most: int | None = None,
                scale: float = 100.0, power: float = 0.8) -> pd.DataFrame:
    """Per paired question and k = 2, 3, ... seeds per arm: the seed SD and the minimum detectable effect of the
    questions table computed on the first k paired seeds only (seeds in their order of first appearance in ``rows``,
    the order a profile lists and trains them), and the MDE projected at k from the SD of all paired seeds. Rows go
    up to ``most`` seeds (default: the seeds the run has); beyond them only the projection is filled. The budget
    rule beside them: no question whose MDE exceeds twice its observed effect keeps paying for seeds (``pays for
    seeds``: the projected MDE at k is at most 2 × |observed effect|; ``seeds for MDE ≤ 2 × |effect|``: the fewest k
    that does, :func:`helpers.core.stats.seeds_to_detect`). Questions whose arms share fewer than two seeds get one
    row saying so."""
    out = []
    for q in questions:
        base = {"question": q["question"], "task": q["task"], "A": q["a"], "B": q["b"]}
        sub = _question_rows(rows, q)
        wide, _, paired = _arm_matrix(sub, q["a"], q["b"], q["task"], scale)
        if len(paired) < 2:
            out.append({**base, "seeds per arm": len(paired),
                        "reading": "untestable here: the arms share fewer than two training seeds"})
            continue
        seen = pd.unique(sub.loc[(sub["arm"] == q["a"]) & (sub["task"] == q["task"]), "seed"].astype(int))
        order = [int(s) for s in seen if int(s) in paired]
        means = wide.mean(axis=0)
        diffs = np.array([means[(q["a"], s)] - means[(q["b"], s)] for s in order])
        sd_all = float(diffs.std(ddof=1))
        effect = float(diffs.mean())
        need = seeds_to_detect(sd_all, effect, paired=True, power=power)
        base.update({"observed effect": effect, "seeds for MDE ≤ 2 × |effect|": need})
        for k in range(2, max(len(order), most or 0) + 1):
            sd_k = float(diffs[:k].std(ddof=1)) if k <= len(order) else float("nan")
            out.append({**base, "seeds per arm": k, "first seeds": ", ".join(map(str, order[:k])) if k <= len(order) else "",
                        "seed SD (first k)": sd_k,
                        "MDE with the first k seeds": minimum_detectable_effect(sd_k, k, paired=True, power=power),
                        "MDE projected from all seeds": minimum_detectable_effect(sd_all, k, paired=True, power=power),
                        "pays for seeds (MDE ≤ 2 × |effect|)": "yes" if minimum_detectable_effect(
                            sd_all, k, paired=True, power=power) <= 2 * abs(effect) else "no",
                        "reading": f"measured on {k} of the run's {len(order)} seeds" if k <= len(order)
                        else f"projected from the SD of the run's {len(order)} seeds"})
    # every column present whatever the run (with one seed per arm, as the paper profile, no row has an MDE)
    return pd.DataFrame(out, columns=list(dict.fromkeys([*SEED_BUDGET_COLUMNS, *(k for r in out for k in r)])))


#: the columns of :func:`seed_budget`, in order
SEED_BUDGET_COLUMNS = ("question", "task", "A", "B", "observed effect", "seeds for MDE ≤ 2 × |effect|", "seeds per arm",
                       "first seeds", "seed SD (first k)", "MDE with the first k seeds", "MDE projected from all seeds",
                       "pays for seeds (MDE ≤ 2 × |effect|)", "reading")


def arm_summary(intervals: pd.DataFrame, confidence: float = 0.95,
                bounds: tuple[float, float] = (0.0, 100.0)) -> pd.DataFrame:
    """Per (kind, arm, task): the models of the arm (one per training seed), their mean accuracy, its Student-t
    interval over seeds (:func:`helpers.core.stats.t_interval`; NaN with one seed; clipped to ``bounds``, the scale
    of an accuracy in %, which a t-interval over two seeds can overshoot), the seed SD, lowest and highest.
    ``intervals``: :func:`helpers.evaluation.zero_shot.interval_table` (kind, model, task, pairs, accuracy, ...)."""
    rows = []
    df = intervals.copy()
    df["arm"] = [arm_and_seed(m, 0)[0] for m in df["model"]]  # the arm does not depend on the default seed
    for (kind, arm, task), g in df.groupby(["kind", "arm", "task"], sort=False):
        mean, lo, hi, n, sd = t_interval(g["accuracy"].to_numpy(dtype=float), confidence)
        rows.append({"kind": kind, "arm": arm, "task": task, "seeds": n, "pairs per model": int(g["pairs"].max()),
                     "accuracy": mean, "seed CI low": max(lo, bounds[0]) if np.isfinite(lo) else lo,
                     "seed CI high": min(hi, bounds[1]) if np.isfinite(hi) else hi, "seed SD": sd,
                     "lowest": float(g["accuracy"].min()), "highest": float(g["accuracy"].max())})
    return pd.DataFrame(rows)


#: seeds per arm beyond which a question is not worth paying seeds for (the budget rule of ``docs/reference_runs.md``)
SEED_BUDGET_LIMIT = 10


def verdict(row: Mapping[str, Any]) -> str:
    """The words for one comparison (a :func:`compare_arms` row): an effect only when the seed-level interval
    excludes 0 and the item-level one (where given) excludes it on the same side; "not shown beyond these items"
    when only the seeds separate; when the seeds do not, the result's own interval
    (:func:`helpers.core.claims.interval_null`: "not shown: effect E, in [L, U] (95 % over n seeds)"), the TOST
    reading against the question's margin (``TOST``: "equivalent within ±δ" or "inconclusive") and the seeds per arm
    at which the design's MDE would reach twice the observed effect (the rule that decides whether a question keeps
    paying for seeds); never "no effect larger than" (the MDE describes the design, not the result). "untestable
    here" with fewer than two seeds in an arm (the item interval is then named, and said not to be enough)."""
    unit = row.get("unit", "points")
    d = 1 if unit == "points" else 3  # decimals: accuracy points, or a share such as η²
    lo, hi, mde = row.get("seed CI low"), row.get("seed CI high"), row.get("MDE (80 % power)")
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        items = ""
        if np.isfinite(row.get("item CI low", np.nan)):
            items = (f"; the item interval [{row['item CI low']:+.{d}f}, {row['item CI high']:+.{d}f}] measures which items "
                     "were drawn, not seed noise")
        return (f"untestable here: {row.get('seeds A', 0)} vs {row.get('seeds B', 0)} seeds per arm, a seed-level "
                f"interval needs at least two in each{items}")
    if row.get("seed SD") == 0:  # every seed gave the same difference: no spread to build an interval from
        same = "the same scores in every seed" if row.get("effect") == 0 else f"the same difference ({row['effect']:+.{d}f} {unit}) in every seed"
        return (f"not measurable over seeds: {same} ({row.get('design', '')}), so the seed-level interval has no width; "
                "are the arms the same models?")
    ilo, ihi = row.get("item CI low", np.nan), row.get("item CI high", np.nan)
    side = "higher" if lo > 0 else "lower"
    if (lo > 0 or hi < 0) and np.isfinite(ilo) and np.isfinite(ihi) and not (ilo > 0 if lo > 0 else ihi < 0):
        return (f"not shown beyond these items: {row['A']} {side} than {row['B']} by {abs(row['effect']):.{d}f} {unit} "
                f"over seeds on the {int(row.get('items', 0)):,} items scored, but the item interval "
                f"[{ilo:+.{d}f}, {ihi:+.{d}f}] includes 0 (another draw of items could change the sign)")
    if lo > 0 or hi < 0:
        return f"effect: {row['A']} {side} than {row['B']} by {abs(row['effect']):.{d}f} {unit}"
    paired = int(row.get("paired seeds", 0) or 0)
    if paired >= 2:
        n, over = paired, "seeds"
    else:
        n, over = int(min(row.get("seeds A", 0), row.get("seeds B", 0))), "seeds per arm, unpaired"
    words = interval_null(float(row["effect"]), float(lo), float(hi), n, over=over, unit=unit, digits=d)
    if row.get("TOST"):
        words += f"; {row['TOST']}"
    need = row.get("seeds to detect 2 × |effect|", np.nan)
    if need is not None and not np.isnan(need) and need > n:
        words += (f"; seeds will not detect an effect this small (an MDE of 2 × |effect| needs "
                  f"{'more than 10,000' if np.isinf(need) else f'{need:,.0f}'} seeds per arm)"
                  if need > SEED_BUDGET_LIMIT else
                  f"; {need:.0f} seeds per arm would bring the MDE within 2 × |effect| (now {mde:.{d}f} {unit})")
    return words


#: a verdict's kind, by how it begins (what a flip under a sensitivity check compares)
VERDICT_KINDS = (("effect:", "effect"), ("not shown beyond these items", "not shown beyond these items"),
                 ("not shown", "not shown"), ("untestable", "untestable"), ("not measurable", "not measurable"))


def verdict_kind(words: str) -> str:
    """The kind of a :func:`verdict`: effect, not shown beyond these items, not shown, untestable, not measurable."""
    return next((kind for start, kind in VERDICT_KINDS if str(words).startswith(start)), "other")


def _short(row: Mapping[str, Any]) -> str:
    """A sensitivity row in a few words: its kind, effect and seed interval."""
    kind = verdict_kind(row["verdict"])
    if not np.isfinite(row.get("seed CI low", np.nan)):
        return kind
    return (f"{kind}, {row['effect']:+.1f} [{row['seed CI low']:+.1f}, {row['seed CI high']:+.1f}]"
            + (f" (item interval [{row['item CI low']:+.1f}, {row['item CI high']:+.1f}])"
               if kind == "not shown beyond these items" else ""))


def questions_table(rows: pd.DataFrame, questions: Sequence[Mapping[str, Any]],
                    sensitivity: tuple[str, pd.DataFrame] | None = None, **kw) -> pd.DataFrame:
    """One :func:`compare_arms` row per question (``{"question", "a", "b", "task"}``, optionally ``"kind"``:
    decoder / encoder, when the rows have a ``kind`` column; ``"delta"``: the equivalence margin set before the run;
    ``"role"``: "question" (default) or "positive control"), question first. The questions form one family: their
    seed-level p-values get Holm's correction (``effect after Holm``), and an effect's verdict says whether it
    survives it; a positive control (a contrast whose large effect is expected, through the same pipeline and
    seeds) is outside the family, and its verdict says whether it passed (an effect) or failed (then no null of the
    table can be read as an absence). ``sensitivity``: ``(name, rows)``, the same items scored another way (the
    encoders under the summed PLL, :func:`tidy_zero_shot` with ``reduction="sum"``): questions of the kinds it holds
    get its effect, seed interval and verdict kind in ``… (<name>)`` columns, and a verdict whose kind differs under
    it says so ("…; under <name>: …")."""
    out = []
    for q in questions:
        r = compare_arms(_question_rows(rows, q), q["a"], q["b"], q["task"], delta=q.get("delta"), **kw)
        out.append({"question": q["question"], "role": q.get("role", "question"), **r})
        if sensitivity is not None:
            name, srows = sensitivity
            sub = _question_rows(srows, q)
            if len(sub) and (q.get("kind") is None or "kind" not in srows.columns or (srows["kind"] == q["kind"]).any()):
                sr = compare_arms(sub, q["a"], q["b"], q["task"], delta=q.get("delta"), **kw)
                out[-1].update({f"effect ({name})": sr["effect"], f"seed CI low ({name})": sr["seed CI low"],
                                f"seed CI high ({name})": sr["seed CI high"],
                                f"item CI low ({name})": sr["item CI low"], f"item CI high ({name})": sr["item CI high"],
                                f"verdict ({name})": _short(sr), "_sens_kind": verdict_kind(sr["verdict"])})
    sens = [f"{c} ({sensitivity[0]})" for c in ("effect", "seed CI low", "seed CI high", "item CI low", "item CI high",
                                                 "verdict")] if sensitivity is not None else []
    cols = ["question", "role", "task", "A", "B", "seeds A", "seeds B", "paired seeds", "items", "mean A", "mean B",
            "effect", "seed CI low", "seed CI high", "seed p", "effect after Holm", "seed SD", "MDE (80 % power)",
            "item CI low", "item CI high", "item MDE (80 % power)", "McNemar p", "δ (equivalence margin)",
            "TOST 90 % CI low", "TOST 90 % CI high", "TOST", "seeds to detect 2 × |effect|", *sens, "unit", "verdict"]
    df = pd.DataFrame(out)
    family = (df["role"] == "question").to_numpy()
    if "seed p" in df.columns:  # the questions are one family: Holm's correction over those with a seed-level p-value
        tested = int((df["seed p"].notna() & family).sum())
        kept = holm(df["seed p"].where(family).to_numpy(), 0.05) & df["verdict"].str.startswith("effect:").to_numpy()
        df["effect after Holm"] = np.where(df["seed p"].notna() & family, np.where(kept, "yes", "no"), "")
        for i in df.index[df["verdict"].str.startswith("effect:") & family]:
            kept = df.at[i, "effect after Holm"] == "yes"
            df.at[i, "verdict"] += (f"; {'it survives' if kept else 'not after'} Holm's correction over the {tested} "
                                    "questions tested")
    for i in df.index[~family]:
        passed = verdict_kind(df.at[i, "verdict"]) == "effect"
        df.at[i, "verdict"] += ("; the positive control passed (outside Holm's family): the pipeline finds the large "
                                "effect it should with these seeds and items" if passed else
                                "; the positive control FAILED: the pipeline did not find the large effect it should, "
                                "so no null of this table reads as an absence")
    if "_sens_kind" in df.columns:
        for i in df.index[df["_sens_kind"].notna()]:
            if df.at[i, "_sens_kind"] != verdict_kind(df.at[i, "verdict"]):
                df.at[i, "verdict"] += f"; under {sensitivity[0]}: {df.at[i, f'verdict ({sensitivity[0]})']}"
    return df[[c for c in cols if c in df.columns]]


def above_chance_holm(rows: pd.DataFrame, chance: float = 0.5, alpha: float = 0.05,
                      sensitivity: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every model × task cell of 0/1 tidy rows tested against ``chance`` (one-sided exact binomial test over items)
    and corrected for the family with Holm: columns (kind,) model, task, items, accuracy (%), p, above chance (Holm).
    The test treats items as independent draws (a cell's paradigms are not modelled). ``sensitivity``: the same
    cells scored another way (the encoders under the summed PLL, :func:`tidy_zero_shot` with ``reduction="sum"``):
    a cell in it is above chance only under both, an intersection-union test whose p is the larger of the two
    (``p`` then; ``p (sensitivity)`` beside it), before Holm over the cells."""
    keys = ["kind", "model", "task"] if "kind" in rows.columns else ["model", "task"]
    other = {}
    if sensitivity is not None and len(sensitivity):
        for key, g in sensitivity.groupby(keys, sort=False):
            v = g["value"].to_numpy(dtype=float)
            other[key] = binomial_p_above(float(v.sum()), len(v), chance)
    cells = []
    for key, g in rows.groupby(keys, sort=False):
        v = g["value"].to_numpy(dtype=float)
        p = binomial_p_above(float(v.sum()), len(v), chance)
        cell = {**dict(zip(keys, key)), "items": len(v), "accuracy (%)": 100 * float(v.mean()), "p": p}
        if other:
            cell["p (sensitivity)"] = other.get(key, np.nan)
            cell["p"] = max(p, other[key]) if key in other else p
        cells.append(cell)
    df = pd.DataFrame(cells, columns=[*keys, "items", "accuracy (%)", "p", *(["p (sensitivity)"] if other else [])])
    df["above chance (Holm)"] = holm(df["p"].to_numpy(), alpha) if len(df) else []
    return df


def check_questions(questions: Sequence[Mapping[str, Any]], models: Mapping[str, Sequence[str]]) -> None:
    """Refuse a malformed question before anything is scored: each needs ``question``, ``a``, ``b``, ``task`` and a
    ``kind`` of ``models`` (e.g. ``{"decoder": [...], "encoder": [...]}``), and its arms must be among that kind's
    model names (an arm is a name without ``(seed N)``); ``delta`` (the equivalence margin), where given, is a
    positive number and ``role`` is "question" or "positive control"."""
    for i, q in enumerate(questions):
        missing = [k for k in ("question", "a", "b", "task", "kind") if k not in q]
        if missing:
            raise ValueError(f"questions[{i}]: missing {', '.join(missing)} (each question needs question, a, b, task, kind)")
        if q.get("delta") is not None and not (isinstance(q["delta"], (int, float)) and q["delta"] > 0):
            raise ValueError(f"questions[{i}] ({q['question']}): delta (the equivalence margin) must be a positive "
                             f"number, not {q['delta']!r}")
        if q.get("role", "question") not in ("question", POSITIVE_CONTROL):
            raise ValueError(f"questions[{i}] ({q['question']}): role must be 'question' or {POSITIVE_CONTROL!r}, "
                             f"not {q['role']!r}")
        if q["kind"] not in models:
            raise ValueError(f"questions[{i}] ({q['question']}): kind must be one of {', '.join(models)}, not {q['kind']!r}")
        arms = {arm_and_seed(m, 0)[0] for m in models[q["kind"]]}
        for side in ("a", "b"):
            if q[side] not in arms:
                raise ValueError(f"questions[{i}] ({q['question']}): {side} = {q[side]!r} is not a {q['kind']} of this "
                                 f"profile (arms: {', '.join(sorted(arms))})")


def holm_sentence(cells: pd.DataFrame, alpha: float = 0.05) -> str:
    """How many of the tested model × task cells are above chance after Holm's correction."""
    k = int(cells["above chance (Holm)"].sum())
    both = ("; an encoder cell only where its mean and summed PLL both are (the larger p of the two)"
            if "p (sensitivity)" in cells.columns else "")
    return (f"{k} of {len(cells)} model × task cells are above chance after Holm's correction for {len(cells)} tests "
            f"(family-wise α = {alpha:g}; one-sided exact binomial tests over items{both})")


def pll_reductions(results: Mapping[tuple[str, str], Any], kind: str = "encoder", confidence: float = 0.95,
                   chance: float = 0.5) -> pd.DataFrame:
    """The encoders' instrument check: per model and task, accuracy under the per-token mean PLL (how they were
    scored), under the summed PLL (recomputed from the same rows: mean × tokens) and on the pairs whose two sentences
    have the same number of scored tokens (where the two reductions agree by construction), each with its Wilson
    interval (ties count half). ``above chance (both)`` is "yes" only when the mean's and the sum's lower bounds are
    both above ``chance``: a claim that does not hang on the reduction."""
    rows_out = []
    for (k, model), res in results.items():
        if k != kind:
            continue
        rows = pd.DataFrame(res.rows)
        if rows.empty or "n_good" not in rows.columns:
            continue
        for task, g in rows.groupby("task", sort=False):
            by = {"mean": g["correct"].astype(float).to_numpy(),
                  "sum": summed_pll_correct(g),
                  "equal length": g.loc[g["n_good"] == g["n_bad"], "correct"].astype(float).to_numpy()}
            row: dict[str, Any] = {"kind": kind, "model": model, "task": task_display(task), "pairs": len(g),
                                   "equal-length pairs": len(by["equal length"])}
            for name, v in by.items():
                n = len(v)
                lo, hi = wilson_interval(float(v.sum()), n, confidence) if n else (np.nan, np.nan)
                row[f"{name} (%)"] = 100 * float(v.mean()) if n else np.nan
                row[f"{name} low"], row[f"{name} high"] = 100 * lo, 100 * hi
            both = row["mean low"] > 100 * chance and row["sum low"] > 100 * chance
            either = row["mean low"] > 100 * chance or row["sum low"] > 100 * chance
            row["above chance (both)"] = "yes" if both else ("one reduction only" if either else "no")
            rows_out.append(row)
    return pd.DataFrame(rows_out)
