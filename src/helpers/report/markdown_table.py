"""Tables as text for people: the cells of the Markdown table that :func:`helpers.report.reporting.save_table`
writes next to each CSV (numbers, thousands separators, durations, readable headers; the rules are in
``save_table``'s docstring; text HTML-escaped by :func:`md_text`), and :func:`fmt_number`, one float for people. The CSV itself is never touched here."""
from __future__ import annotations

import html
import math
import numbers
import re
from typing import Any

import pandas as pd

LARGE = 1e5  # from here on a float is written with thousands separators and no decimals, never as 1.89e+11
SEPARATED = 10_000  # in a Markdown table, a number column reaching this gets thousands separators (1,348,864)
# the last word of a column name that makes it an identifier or a position, never given separators (seed 20240101,
# step 12000, story_id 10423): singular on purpose, so ``steps``/``pairs``/``heads`` (counts) are not among them
IDENTIFIER_WORDS = frozenset({"id", "seed", "step", "epoch", "index", "year", "layer", "head", "neuron", "sample", "pair"})
# a column of durations, shown with one decimal in Markdown: "(min)" or "(s)" as a unit, "minutes" or "seconds"
_DURATION = re.compile(r"(?:^|\s)\((?:min|s)\)|\b(?:minutes|seconds)\b", re.IGNORECASE)
# Markdown header names for people (the CSV keeps the machine names); any other header that is one snake_case
# word gets its underscores as spaces (``dev_metric`` -> ``dev metric``), and ``ci_low``/``ci_high`` inside a longer
# header are spelled out too (``gap ci_low`` -> ``gap CI low``); every other header is shown as it is
HEADER_NAMES = {"ci_low": "CI low", "ci_high": "CI high", "n_train": "training examples", "n_dev": "dev examples",
                "n_test": "test examples", "r2": "R²", "story_id": "story ID"}
_SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
_CI_WORD = re.compile(r"(?<![\w])ci_(?:low|high)(?![\w])")


def fmt_number(x: Any, digits: int = 4) -> str:
    """A float for people, never in scientific notation when large: ``189247000000.0`` -> ``'189,247,000,000'``,
    ``12345.678`` -> ``'12,345.68'``, ``6.330892`` -> ``'6.3309'``, ``0.00031`` -> ``'0.00031'``; integers with
    thousands separators; anything else as ``str``."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return str(x)
    if isinstance(x, numbers.Integral):
        return f"{int(x):,}"
    v = float(x)
    if not math.isfinite(v):
        return str(v)
    if abs(v) >= LARGE:
        return f"{v:,.0f}"
    if abs(v) >= 1000:
        return f"{v:,.2f}"
    if v == 0 or abs(v) >= 1:
        return f"{v:.{digits}f}"
    s = f"{v:.{digits}g}"
    return s if "e" not in s else f"{v:.2e}"  # only tiny values (below 1e-4) keep an exponent


_FIXED = re.compile(r"^\.(\d+)f$")


def md_text(v: Any) -> str:
    """A text cell for a Markdown table: HTML escaped (``&``, ``<``, ``>`` as entities, so a ``<script>`` or any
    tag in a story or corpus text shows as text and is never run or rendered by a Markdown viewer), newlines as
    ``<br>`` (a row stays on one line; the one tag the cell holds), ``|`` escaped as ``\\|``."""
    return html.escape(str(v), quote=False).replace("\r\n", "\n").replace("\n", "<br>").replace("|", "\\|")


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _is_missing(v: Any) -> bool:
    return v is None or v is pd.NA or v is pd.NaT or (_is_number(v) and math.isnan(float(v)))


def header_name(name: Any) -> str:
    """A column name as a Markdown table shows it, by the rule in ``save_table``'s docstring: ``ci_low`` -> ``CI low``,
    ``n_train`` -> ``training examples``, ``best_epoch`` -> ``best epoch``, ``gap ci_low`` -> ``gap CI low``;
    ``wall time (min)`` or ``baby:children_stories`` as they are."""
    text = str(name)
    if text in HEADER_NAMES:
        return HEADER_NAMES[text]
    if _SNAKE.fullmatch(text):
        return text.replace("_", " ")
    return _CI_WORD.sub(lambda m: HEADER_NAMES[m.group(0)], text)


def _is_identifier(name: Any) -> bool:
    """Whether a column holds identifiers or positions (``seed``, ``best step``, ``story_id``): its name's last word,
    a parenthesis aside, is one of ``IDENTIFIER_WORDS``."""
    words = re.split(r"[\s_]+", re.sub(r"\([^)]*\)", " ", str(name)).strip().lower())
    return words[-1] in IDENTIFIER_WORDS


def _is_duration(name: Any) -> bool:
    """Whether a column holds minutes or seconds (``wall time (min)``, ``minutes``, ``seconds``, ``load (s)``)."""
    return bool(_DURATION.search(str(name)))


def _float_column(values: list[float], floatfmt: str, separators: bool = False, duration: bool = False) -> list[str]:
    """Floats of one column as text, by the rule in ``save_table``'s docstring; ``separators``: thousands separators
    (a column reaching ``SEPARATED``), ``duration``: one decimal (minutes or seconds)."""
    finite = [v for v in values if math.isfinite(v)]
    fixed = _FIXED.match(floatfmt)
    if duration:
        decimals = 1
    elif finite and all(v == int(v) for v in finite):  # counts stored as floats: 13.0 -> "13"
        decimals = 0
    elif fixed and finite:  # as many decimals as the column needs, at most the format's
        most = int(fixed.group(1))
        decimals = max(len(f"{v:.{most}f}".rstrip("0").split(".")[1]) for v in finite)
    else:
        decimals = None
    big = bool(finite) and max(abs(v) for v in finite) >= LARGE and not duration
    sep = "," if separators or big else ""
    out = []
    for v in values:
        if not math.isfinite(v):
            out.append(str(v))
        elif big:
            out.append(f"{v:,.0f}")
        elif decimals is not None:
            out.append(f"{v:{sep}.{decimals}f}")
        else:  # a general (g/e) format: never an exponent for ordinary values
            out.append(_no_exponent(format(v, floatfmt), v))
    return out


def _int_text(v: Any, separators: bool) -> str:
    return f"{int(v):,}" if separators else str(int(v))


def markdown_cells(df, floatfmt: str):
    """``df`` as a frame of text cells for tabulate, plus each column's alignment (numbers right, text left).

    Every cell is written here (tabulate is told not to re-parse numbers): text (cells, headers, the index) by
    :func:`md_text`, HTML escaped, ``|`` escaped and newlines as ``<br>``; missing values (NaN, None) blank; numbers
    and headers by ``save_table``'s rules.
    """
    shown = pd.DataFrame(index=df.index)
    align = []
    for i, c in enumerate(df.columns):
        col = df.iloc[:, i]
        values = list(col)
        present = [v for v in values if not _is_missing(v)]
        numbers_ = [float(v) for v in present if _is_number(v)]
        separators = (not _is_identifier(c) and any(math.isfinite(v) and abs(v) >= SEPARATED for v in numbers_))
        duration = _is_duration(c)
        if pd.api.types.is_bool_dtype(col):
            cells, right = [str(v) for v in values], False
        elif present and all(_is_number(v) for v in present):
            right = True
            if all(isinstance(v, numbers.Integral) for v in present):
                cells = ["" if _is_missing(v) else _int_text(v, separators) for v in values]
            else:
                floats = [v for v in values if not _is_missing(v)]
                texts = iter(_float_column([float(v) for v in floats], floatfmt, separators, duration))
                cells = ["" if _is_missing(v) else next(texts) for v in values]
        else:  # text, or text mixed with numbers: each number alone by the same rules
            right = False
            cells = ["" if _is_missing(v)
                     else _int_text(v, separators) if isinstance(v, numbers.Integral) and _is_number(v)
                     else _float_column([float(v)], floatfmt, separators, duration)[0] if _is_number(v)
                     else md_text(v) for v in values]
        shown[i] = cells
        align.append("right" if right else "left")
    names = [header_name(c) for c in df.columns]
    # a readable name that another column already has (or gets) would make two columns look alike: keep the raw one
    names = [n if names.count(n) == 1 and (n == str(c) or n not in map(str, df.columns)) else str(c)
             for n, c in zip(names, df.columns)]
    shown.columns = [md_text(n) for n in names]
    shown.index = [md_text(v) for v in df.index]
    shown.index.name = None if df.index.name is None else md_text(header_name(df.index.name))
    return shown, align


def _no_exponent(text: str, v: float) -> str:
    return text if "e" not in text.lower() or abs(v) < 1e-4 else fmt_number(v)
