"""Every number of a profile's tables as one tidy file: ``reports/<profile>/results.csv`` and ``results.json``.

The tables under ``reports/<profile>/tables/*.csv`` are written for people: intervals sit in columns named
``ci_low``/``ci_high``, ``CI low (%)``, ``creativity low`` or ``BLiMP CI low``, or in one string column
``"BLiMP 95% CI" = "[50.9, 51.7]"``; percent sits beside fractions; some tables are wide (one column per model or
per task). :func:`tidy_table` turns one table into rows of :data:`RESULT_COLUMNS`, one per number:

* ``table`` (the CSV's stem), ``notebook`` (the notebook that wrote it), ``row`` and ``column`` (where the number
  is in that table);
* ``model``, ``arm`` (the model without ``(seed N)``: one recipe), ``seed``, ``task``, ``question`` (a questions
  table's question) and ``key`` (the row's other labels, ``"k=2; prompts=train"``) say what was measured;
* ``metric``, ``value``, ``ci_low``, ``ci_high`` (the interval printed beside it, blank where none), ``unit``
  (``percent``, ``fraction``, ``nats``, ``words``, ``count``, ``score 1-10``, ...; ``unknown`` where neither the
  table nor the column name says) and ``n`` (the sample size the table gives, e.g. pairs or items).

A table is read by explicit knowledge where it needs some (:data:`SPECS`: which columns name the model and the
task, which numeric columns are identifiers, wide layouts, units) and by a generic rule otherwise: numeric
columns are metrics, ``X low``/``X high`` (``X CI low``, ``X ci_low``, a bare ``ci_low`` after X) are the interval
of X, an ``"X 95% CI"`` string ``"[a, b]"`` is parsed into the interval of X, a ``seed`` column and ``(seed N)`` in
a model's name give the seed, an ``n``/``pairs``/``items`` column gives ``n``. Every numeric cell of every table
lands in a row: as a value, an interval end, ``n``, ``seed`` or an identifier in ``key`` — except in the
item-level tables (:func:`item_tables`), which are one row per item already.

:func:`write_results` writes both files atomically; the runner calls it after every run, and
``python -m helpers.report.results --profile cpu`` rebuilds them from the tables without running anything.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from helpers.core.artifacts import write_json, write_text
from helpers.core.config import repo_root, reports_dir, shown_path
from helpers.evaluation.glue_tasks import TASKS as GLUE_TASKS

RESULT_COLUMNS = ["table", "notebook", "row", "column", "model", "arm", "seed", "task", "question", "key", "metric",
                  "value", "ci_low", "ci_high", "unit", "n"]

MODEL_COLUMNS = ("model", "run", "budget", "mix")  # the first one present (text) names the model
DATA_TABLES = ("01_",)  # notebook 01 describes corpora: no model (its "budget" is a word budget)
TASK_COLUMNS = ("task", "benchmark", "suite", "phenomenon", "domain", "criterion")
N_COLUMNS = ("n", "pairs", "items")
#: numeric columns that identify a row rather than measure it (they go to ``key``)
ID_COLUMNS = ("k", "layer", "head", "neuron", "step", "width", "batch", "sample", "story_id", "pair", "id",
              "words seen at least", "budget (TFLOP)")
PLACEHOLDERS = {"-", "–", "—", ""}
KEY_TEXT_MAX = 60  # label cells longer than this (prompts, completions, notes) are not copied into ``key``
_INTERVAL = re.compile(r"^\s*\[\s*([-+0-9.eE]+|nan)\s*,\s*([-+0-9.eE]+|nan)\s*\]\s*$")
_BOUND = re.compile(r"^(?:(?P<x>.*?)[\s_]+)?(?:ci[\s_]+)?(?P<side>low|high)(?:\s*\(%\))?$", re.I)
_SEED_IN_NAME = re.compile(r"\(seed (\d+)\)")
_GLUE_UNITS = {"mcc": "MCC x 100", "f1": "F1 percent", "accuracy": "percent"}

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Spec:
    """What a table's layout needs beyond the generic rule (every field optional)."""

    model: str | Callable[[Row], str] | None = None  # the column naming the model, or a function of the row
    task: str | None = None  # the column naming the task
    ids: tuple[str, ...] = ()  # numeric columns that identify the row (to ``key``)
    n: str | None = None  # the column holding the sample size
    n_not: tuple[str, ...] = ()  # value columns that sample size does not describe (their rows' n is blank)
    wide: str | None = None  # "model" | "task" | a key name: the value columns' headers are models / tasks / keys
    metric: str | Callable[[Row, str], str] | None = None  # the metric name (a function of row and column)
    unit: str | Callable[[Row, str], str] | None = None  # the unit of every value column (or a function)
    units: Mapping[str, str] = field(default_factory=dict)  # column -> unit, before the generic rule
    intervals: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # value column -> (low, high) columns
    also: Mapping[str, tuple[str, str, str]] = field(default_factory=dict)  # metric -> (value, low, high): 2nd interval
    ns: Mapping[str, str] = field(default_factory=dict)  # value column or ``also`` metric -> its own n column


def _paper_model(r: Row) -> str:
    """Tables 1 and 2: our rows are named by their training data (as everywhere else), the paper's by model and data."""
    return str(r["training data"]) if str(r["source"]).startswith("ours") else f"{r['model']}, {r['training data']}"


def _zero_shot_metric(r: Row, col: str) -> str:
    return {"GLUE": "GLUE score", "Avg.": "average", "Avg. zero-shot": "zero-shot average"}.get(col, "accuracy")


def _glue_metric(task: str) -> str:
    return GLUE_TASKS[task].metric if task in GLUE_TASKS else "score"


def _glue_row_metric(r: Row, col: str) -> str:
    return str(r["metric"]) if col.startswith("score") else re.sub(r"\s*\(%\)$", "", col)


def _glue_run_unit(r: Row, col: str) -> str | None:
    if col.startswith("score"):
        return _GLUE_UNITS.get(str(r["metric"]), "percent")
    return None


_PAPER_TABLE = Spec(model=_paper_model, wide="task", metric=_zero_shot_metric, unit="percent")
_CRITERIA = {c: "score 1-10" for c in ("grammar", "creativity", "consistency", "plot", "instructions")}
_ITEMS = Spec(ids=("story_id", "sample", "pair"),
              units={**_CRITERIA, **{f"{c}_argmax": "score 1-10" for c in _CRITERIA}, "valid_mass": "fraction",
                     "age_expected": "age group (A=1 .. F=6)"})
_BY_MODEL = Spec(wide="model", metric="accuracy", unit="percent", n="pairs")
_WORD_CLASSES = ("punctuation", "determiner", "pronoun", "name", "noun", "verb", "adjective", "other")
_CLASS_SHARES = Spec(unit=lambda r, c: "fraction" if c in _WORD_CLASSES else None, ids=("layer", "head"))

_SUM = " (sum PLL)"


def _question_unit(r: Row, c: str) -> str | None:
    """05/06_questions: counts, p-values, accuracies in percent (the arms' means) and differences in percentage
    points (everything else on the ``points`` scale); another scale (η²) keeps its own unit."""
    if c.startswith(("seeds", "paired", "items")):
        return "count"
    if c.endswith(" p"):
        return "p-value"
    if r.get("unit") != "points":
        return str(r.get("unit") or "unknown")
    return "percent" if c in ("mean A", "mean B") else "percentage points"


#: the questions tables: the seed interval over paired seeds (n = paired seeds), the item interval over items (n =
#: items), TOST's 90 % interval beside them, the summed-PLL sensitivity (encoders) as metrics of their own, every
#: column once (no (table, row, column) twice)
_QUESTIONS = Spec(model=lambda r: f"{r['A']} vs {r['B']}", n="paired seeds",
                  intervals={"effect": ("seed CI low", "seed CI high"), f"effect{_SUM}": (f"seed CI low{_SUM}",
                                                                                          f"seed CI high{_SUM}")},
                  also={"effect (interval over items)": ("effect", "item CI low", "item CI high"),
                        "effect (TOST 90 % interval)": ("effect", "TOST 90 % CI low", "TOST 90 % CI high"),
                        f"effect (interval over items){_SUM}": (f"effect{_SUM}", f"item CI low{_SUM}",
                                                                f"item CI high{_SUM}")},
                  ns={"mean A": "seeds A", "mean B": "seeds B", "items": "items", "item MDE (80 % power)": "items",
                      "effect (interval over items)": "items", f"effect (interval over items){_SUM}": "items",
                      "seeds A": "seeds A", "seeds B": "seeds B"},
                  n_not=("paired seeds", "seeds to detect 2 × |effect|", "δ (equivalence margin)"),
                  unit=_question_unit)

SPECS: dict[str, Spec] = {
    "05_table1_decoders": _PAPER_TABLE,
    "05_table2_encoders": _PAPER_TABLE,
    "05_table4_blimp_phenomena": _BY_MODEL, "05_table5_ewok_domains": _BY_MODEL, "05_table6_supplement": _BY_MODEL,
    "05_table4_blimp_phenomena_paper": _BY_MODEL, "05_table5_ewok_domains_paper": _BY_MODEL,
    "05_table6_supplement_paper": _BY_MODEL,
    "05_table7_glue": Spec(wide="task", metric=lambda r, c: _glue_metric(c) if c in GLUE_TASKS else "GLUE average",
                           unit=lambda r, c: _GLUE_UNITS.get(_glue_metric(c), "percent")),
    "05_glue_runs": Spec(n="n_test", metric=_glue_row_metric, unit=_glue_run_unit,
                         units={"dev_metric": "fraction (MCC for cola)", "top prediction (%)": "percent"}),
    "05_glue_majority": Spec(model=lambda r: "majority class", n="n_test", metric=_glue_row_metric,
                             unit=lambda r, c: None if c != "score" else "MCC" if r["metric"] == "mcc" else "fraction"),
    "05_ours_vs_paper": Spec(unit="percent", n="seeds", n_not=("paper",)),  # our mix's seeds, not the paper's runs
    "02b_memory_table": Spec(model="kind", ids=("width",), wide="batch", metric="peak training-step memory",
                             unit="MB"),
    "02b_memory_ratio": Spec(ids=("width", "batch"), units={"compressor": "MB", "gpt-neo": "MB",
                                                            "compressor / GPT-Neo": "ratio"}),
    "02b_power_law_fit": Spec(units={"a": "unknown", "exponent": "exponent", "confidence": "fraction", "r2": "R^2"}),
    "03_self_bleu": Spec(n="prompts", unit="fraction (BLEU 0-1)"),
    "02_repetition_probes": Spec(n="probe prompts", units={"ended": "fraction", "loops": "fraction",
                                                          "healthy": "fraction", "unlikelihood": "nats"}),
    "05b_gpteval_judge": Spec(n="items", unit="score 1-10"),
    "05b_gpteval_judge_all_criteria": Spec(n="items", unit="score 1-10"),
    "05b_gpteval_judge_items": _ITEMS,
    "05b_judge_validity_items": _ITEMS,
    "05b_judge_validity": Spec(n="pairs", units={"real wins": "fraction", "mean difference": "score 1-10 difference"}),
    "05b_themed_summary": Spec(units={"score": "fraction"}),
    "05b_themed_answers": Spec(units={"score": "fraction"}),
    "05b_instruct_items": Spec(ids=("sample",), units={"ended": "fraction"}),
    "05b_instruct_words": Spec(n="stories scored",
                               intervals={"share of required words used": ("required low", "required high"),
                                          "chance (words of another prompt)": ("chance low", "chance high")},
                               units={"share of required words used": "fraction", "all required words used": "fraction",
                                      "chance (words of another prompt)": "fraction",
                                      "not scored (prompt without Words:)": "count"}),
    "04_mix_words_by_source": Spec(unit="words"),
    "05_questions": _QUESTIONS,
    "06_questions": _QUESTIONS,
    "05_arm_means": Spec(model="arm", n="seeds", intervals={"accuracy": ("seed CI low", "seed CI high")},
                         units={"pairs per model": "count", "accuracy": "percent", "seed SD": "percentage points",
                                "lowest": "percent", "highest": "percent"}),
    "05_item_budget": Spec(model=lambda r: f"{r['A']} vs {r['B']}", n="pairs",
                           unit=lambda r, c: "count" if c.startswith(("pairs", "seeds")) else "percent" if c.endswith("(%)")
                           else "percentage points"),
    "05_seed_budget": Spec(model=lambda r: f"{r['A']} vs {r['B']}", ids=("seeds per arm",), unit="percentage points"),
    "06_attention_target_classes": Spec(unit=lambda r, c: "count" if c == "heads" else "fraction"),
    "06_attention_target_classes_per_head": _CLASS_SHARES,
    "06_attention_paper_observation": Spec(unit="fraction"),
    "06_neuron_pos_by_layer": Spec(unit="fraction", ids=("layer",)),
    "06_neuron_pos_per_neuron": Spec(ids=("layer", "neuron"),
                                     unit=lambda r, c: {"max activation": "activation"}.get(c, "fraction")),
    "06_neuron_specialists": Spec(ids=("layer",), unit=lambda r, c: "fraction" if "share" in c else "count"),
    "06_neuron_specialists_summary": Spec(unit=lambda r, c: "fraction" if "share" in c else "count"),
}


# ============================================================================================ cells and columns


def parse_interval(text: Any) -> tuple[float, float] | None:
    """``"[50.9, 51.7]"`` -> ``(50.9, 51.7)``; None for anything else (blank, a number, prose)."""
    m = _INTERVAL.match(text) if isinstance(text, str) else None
    return (float(m.group(1)), float(m.group(2))) if m else None


def _number(x: Any) -> float | None:
    """A finite or NaN float for a numeric cell (int, float, a numeric string); None for text, booleans, blanks."""
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, (int, float)):
        return None if isinstance(x, float) and math.isnan(x) else float(x)
    try:
        return float(str(x).strip().replace(",", "")) if str(x).strip() not in PLACEHOLDERS else None
    except ValueError:
        return None


def numeric_columns(df: pd.DataFrame) -> list[str]:
    """Columns holding numbers: a numeric dtype (booleans aside), or text whose every non-blank cell is a number
    (``"-"``/``"–"`` stand for none)."""
    out = []
    for c in df.columns:
        s = df[c]
        if pd.api.types.is_bool_dtype(s):
            continue
        if pd.api.types.is_numeric_dtype(s):
            out.append(c)
            continue
        cells = [v for v in s.dropna() if str(v).strip() not in PLACEHOLDERS]
        if cells and all(_number(v) is not None for v in cells):
            out.append(c)
    return out


def interval_columns(df: pd.DataFrame) -> list[str]:
    """Text columns whose every non-blank cell is an interval ``"[a, b]"``."""
    out = []
    for c in df.columns:
        if pd.api.types.is_object_dtype(df[c]) or pd.api.types.is_string_dtype(df[c]):
            cells = [v for v in df[c].dropna() if str(v).strip() not in PLACEHOLDERS]
            if cells and all(parse_interval(v) for v in cells):
                out.append(c)
    return out


def _strip_unit(name: str) -> str:
    return re.sub(r"\s*\((?:%|min|s)\)$", "", name).strip()


def _pick(target: str, candidates: list[str], before: str, columns: list[str], df: pd.DataFrame,
          lo: str, hi: str) -> str | None:
    """The value column an interval named ``target`` belongs to: the same name, else one starting with / holding
    it (an empty name: any value column); among several, those the interval contains in most rows, then the
    nearest one before the interval's column."""
    t = target.lower()
    tiers = [[c for c in candidates if c.lower() == t or _strip_unit(c).lower() == t],
             [c for c in candidates if t and c.lower().startswith(t)], [c for c in candidates if t and t in c.lower()]]
    if not t:
        tiers = [list(candidates)]
    pos = columns.index(before)
    for tier in tiers:
        tier = [c for c in tier if columns.index(c) < pos] or tier
        if not tier:
            continue

        def inside(c: str) -> int:
            v, a, b = (pd.to_numeric(df[x], errors="coerce") for x in (c, lo, hi))
            return int(((a <= v + 1e-9) & (v <= b + 1e-9)).sum())

        return max(tier, key=lambda c: (inside(c), columns.index(c) - pos if columns.index(c) < pos else -10**6))
    return None


def pair_intervals(df: pd.DataFrame, numeric: list[str], exclude: set[str],
                   explicit: Mapping[str, tuple[str, str]] = {}) -> dict[str, tuple[str, str]]:
    """Value column -> (low column, high column), from ``explicit`` and from the names of ``numeric``."""
    pairs = dict(explicit)
    used = {c for lo_hi in pairs.values() for c in lo_hi}
    bounds: dict[tuple[str, str], dict[str, str]] = {}
    for c in numeric:
        m = _BOUND.match(c)
        if m and c not in used:
            x = (m.group("x") or "").strip()
            x = "" if x.lower() in ("ci", "95% ci") else x
            suffix = "(%)" if c.endswith("(%)") else ""
            bounds.setdefault((x, suffix), {})[m.group("side").lower()] = c
    bound_cols = {c for b in bounds.values() for c in b.values()}
    candidates = [c for c in numeric if c not in bound_cols and c not in exclude and c not in used]
    columns = list(df.columns)
    for (x, _), b in bounds.items():
        if set(b) != {"low", "high"}:
            continue
        free = [c for c in candidates if c not in pairs]
        target = _pick(x, free, b["low"], columns, df, b["low"], b["high"])
        if target is not None:
            pairs[target] = (b["low"], b["high"])
    return pairs


_COUNTS = ("pairs", "items", "prompts", "completions", "stories", "count", "steps", "step", "blocks", "vocab", "units",
           "heads", "layers", "hidden", "neurons", "points", "wins", "ties", "losses", "spikes", "copies", "failures",
           "repaired", "dropped", "success", "partial", "fail", "retries", "specialists", "documents", "parameters",
           "non-embedding", "paradigms", "threads", "n_", "window", "context", "left out", "features", "fields",
           "summary", "random sentence", "dialogue", "moralvalue", "n targets", "width", "batch")


def unit_of(column: str, values: pd.Series) -> str:
    """A unit from a column's name (and, for accuracies, its range); ``unknown`` where nothing says."""
    c = column.lower()
    top = pd.to_numeric(values, errors="coerce").abs().max()
    rules = [  # the first that holds
        ("%" in c, "percent"), (c in ("blimp", "supp.", "ewok"), "percent"), ("themed" in c, "fraction"),
        ("η²" in c, "fraction (share of variance)"), ("evenness" in c, "index 0-1"),
        ("dropout" in c, "probability"), ("weight decay" in c, "coefficient"), ("losses" in c, "count"),
        ("loss" in c, "nats"), ("perplexity" in c, "perplexity"), ("minutes" in c or "(min)" in c, "minutes"),
        ("seconds" in c or c.endswith(" s") or "s/item" in c, "seconds"), ("tflop" in c, "TFLOP"),
        ("mflop" in c, "MFLOP per token"), ("tokens/word" in c or "type/token" in c, "ratio"),
        ("share" in c or "ratio" in c, "fraction"), ("rouge" in c or "bleu" in c, "fraction"),
        ("acc" in c, "percent" if top > 1 else "fraction"), (c.startswith("r ") or c == "r2", "correlation"),
        ("weight" in c, "fraction"), ("distance" in c or "offset" in c, "tokens"),
        ("words" in c or c.startswith("|d_") or "budget" in c, "words"), ("tokens" in c, "tokens"),
        ("epoch" in c or "passes" in c, "epochs"), (any(w in c for w in _COUNTS), "count"),
    ]
    return next((unit for hit, unit in rules if hit), "unknown")


# ============================================================================================ one table


def notebook_of(table: str, notebooks: list[str] | None = None) -> str:
    """The notebook (stem) whose number prefixes ``table`` (``05b_x`` -> ``05b_story_evaluation``)."""
    if notebooks is None:
        notebooks = sorted(p.stem for p in (repo_root() / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
    prefix = table.split("_", 1)[0]
    return next((nb for nb in notebooks if nb.split("_", 1)[0] == prefix), prefix)


def _seed(model: str, row: Row) -> float:
    m = _SEED_IN_NAME.search(model)
    if m:
        return float(m.group(1))
    s = _number(row.get("seed"))
    return s if s is not None else math.nan


def tidy_table(df: pd.DataFrame, table: str, notebook: str = "", spec: Spec | None = None) -> pd.DataFrame:
    """The rows of :data:`RESULT_COLUMNS` for one table (``spec``: :data:`SPECS` of ``table``, else the generic
    rule)."""
    spec = spec or SPECS.get(table, Spec())
    columns = list(df.columns)
    numeric = numeric_columns(df)
    ids = [c for c in numeric if c in spec.ids or c in ID_COLUMNS]
    n_col = next((c for c in (spec.n, *N_COLUMNS) if c in numeric), None)
    seed_col = "seed" if "seed" in numeric else None
    strings = interval_columns(df)
    text = [c for c in columns if c not in numeric and c not in strings]
    model_col = spec.model if spec.model is not None else None if table.startswith(DATA_TABLES) else \
        next((c for c in MODEL_COLUMNS if c in text), None)
    task_col = spec.task or next((c for c in TASK_COLUMNS if c in text), None)
    if spec.wide == "model" and task_col is None:
        task_col = text[0] if text else None
    reserved = {c for _, *lo_hi in spec.also.values() for c in lo_hi}  # an ``also`` interval is no other column's
    explicit = {c: lo_hi for c, lo_hi in spec.intervals.items() if {c, *lo_hi} <= set(numeric)}  # the columns it has
    pairs = pair_intervals(df, [c for c in numeric if c not in reserved], set(ids) | {n_col, seed_col}, explicit)
    for c in strings:  # "X 95% CI" holds the interval of X
        base = re.sub(r"\s*95\s*% CI$", "", c).strip()
        if base in numeric:
            pairs[base] = (c, c)
    bounds = {c for lo_hi in pairs.values() for c in lo_hi} | {c for _, *lo_hi in spec.also.values() for c in lo_hi}
    values = [c for c in numeric if c not in bounds and c not in ids and c not in (n_col, seed_col)]
    values += [c for c in spec.ns if c == n_col and c in numeric]  # the n column itself, as a count, where named
    entries = [(c, None, *pairs.get(c, (None, None))) for c in values] + \
        [(c, metric, lo, hi) for metric, (c, lo, hi) in spec.also.items() if {c, lo, hi} <= set(numeric)]
    question_col = "question" if "question" in text else None
    labels = [c for c in text if c not in (model_col, task_col, question_col)]
    units = {c: unit_of(c, df[c]) for c in values}
    records = df.to_dict("records")
    out = []
    for i, r in enumerate(records):
        model = model_col(r) if callable(model_col) else \
            str(r[model_col]) if model_col and pd.notna(r[model_col]) else ""
        task = str(r[task_col]) if task_col and pd.notna(r[task_col]) else ""
        key = [f"{c}={' '.join(str(r[c]).split())}" for c in labels  # one line: line breaks become spaces
               if pd.notna(r[c]) and len(str(r[c])) <= KEY_TEXT_MAX and not (spec.wide == "model" and c == task_col)]
        key += [f"{c}={_fmt(_number(r[c]))}" for c in ids if _number(r[c]) is not None]
        row_n = _number(r[n_col]) if n_col else None
        for c, name, a, b in entries:
            own = spec.ns.get(name or c)
            n = _number(r[own]) if own in r else row_n
            v = _number(r[c])
            lo = hi = None
            if a is not None and a == b:
                lo, hi = parse_interval(r[a]) or (None, None)
            elif a is not None:
                lo, hi = _number(r[a]), _number(r[b])
            if v is None and lo is None and hi is None:
                continue
            m, t, k = model, task, list(key)
            if spec.wide == "model":
                m = c
            elif spec.wide == "task":
                t = c
            elif spec.wide:
                k.append(f"{spec.wide}={c}")
            metric = name or (spec.metric(r, c) if callable(spec.metric) else (spec.metric or _strip_unit(c)))
            unit = spec.unit(r, c) if callable(spec.unit) else spec.unit
            unit = unit or spec.units.get(c) or units.get(c) or unit_of(c, df[c])
            out.append({"table": table, "notebook": notebook, "row": i, "column": name or c, "model": m,
                        "arm": _SEED_IN_NAME.sub("", m).strip(), "seed": _seed(m, r), "task": t,
                        "question": str(r[question_col]) if question_col else "", "key": "; ".join(k), "metric": metric,
                        "value": math.nan if v is None else v, "ci_low": math.nan if lo is None else lo,
                        "ci_high": math.nan if hi is None else hi, "unit": unit,
                        "n": math.nan if n is None or c in spec.n_not else n})
    return pd.DataFrame(out, columns=RESULT_COLUMNS)


def _fmt(x: float | None) -> str:
    return "" if x is None else (str(int(x)) if float(x).is_integer() else repr(x))


# ============================================================================================ a profile


def item_tables(tables_dir: str | Path) -> list[str]:
    """The item-level tables of a folder: CSVs written without a markdown copy (``save_table(..., markdown=False)``:
    per item, per neuron, per answer), in a folder whose other tables have one. They are already one row per item
    and would multiply the summary many times over (the cpu run's per-neuron table alone: 122,880 numbers), so
    :func:`tidy_results` leaves them out and names them."""
    tables_dir = Path(tables_dir)
    if not any(tables_dir.glob("*.md")):
        return []
    return sorted(p.stem for p in tables_dir.glob("*.csv") if not p.with_suffix(".md").exists())


def tidy_results(tables_dir: str | Path) -> pd.DataFrame:
    """The rows of every ``*.csv`` table under ``tables_dir`` except the item-level ones (:func:`item_tables`),
    table by table in name order."""
    tables_dir = Path(tables_dir)
    parts = []
    notebooks = sorted(p.stem for p in (repo_root() / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
    skip = set(item_tables(tables_dir))
    for path in sorted(p for p in tables_dir.glob("*.csv") if p.stem not in skip):
        try:
            df = pd.read_csv(path)
        except pd.errors.EmptyDataError:
            continue
        parts.append(tidy_table(df, path.stem, notebook_of(path.stem, notebooks)))
    if not parts:
        return pd.DataFrame(columns=RESULT_COLUMNS)
    return pd.concat([p for p in parts if not p.empty] or parts, ignore_index=True)


def write_results(profile: str, tables_dir: str | Path | None = None, out_dir: str | Path | None = None,
                  log: Callable[[str], None] | None = print) -> pd.DataFrame:
    """Write ``results.csv`` and ``results.json`` (the same rows: a list of objects, blanks and infinities as null) of ``profile``
    beside its ``tables/`` (atomically); returns the rows."""
    base = reports_dir(profile)
    rows = tidy_results(tables_dir or base / "tables")
    out = Path(out_dir or base)
    write_text(out / "results.csv", rows.to_csv(index=False))
    records = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
               for r in rows.to_dict("records")]
    write_json(out / "results.json", records, indent=None)
    if log:
        items = item_tables(tables_dir or base / "tables")
        log(f"results: {len(rows):,} numbers from {rows['table'].nunique()} tables -> "
            f"{shown_path(out / 'results.csv')} (+ results.json)"
            + (f"; item-level tables left as they are: {', '.join(items)}" if items else ""))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.report.results", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu", help="the profile whose reports/<profile>/tables are read")
    ap.add_argument("--tables", help="read the tables from this folder instead")
    ap.add_argument("--out", help="write results.csv/results.json here instead of reports/<profile>/")
    a = ap.parse_args(argv)
    try:
        write_results(a.profile, a.tables, a.out)
    except (ValueError, OSError) as e:
        print(f"results: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
