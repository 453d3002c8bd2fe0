"""Views of notebook 05b's story evaluation: the judge-validity matrix and chart, the themed suites' grades (chart and
colour-coded HTML table), the instruction-following chart and the HTML table of instruct stories. Each function takes
the table its notebook cell built and returns a display table, an HTML string (built by
:func:`helpers.core.html_table.styled_table`) or a matplotlib figure (saved by
:func:`helpers.report.reporting.save_figure`)."""
from __future__ import annotations

import html
import math
import re
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from helpers.core.html_table import styled_table
from helpers.core.stats import bootstrap_mean_interval
from helpers.judge.validity import VALIDITY_CRITERIA, VALIDITY_KINDS
from helpers.report.figure_layout import (FIGURE_WIDTH, columns, font_pt, legend_columns, legend_inches, panels,
                                          slant_if_crowded, wrap)
from helpers.story_eval.folding import ascii_quotes, fold, folded
from helpers.story_eval.instruct import parse_instruct
from helpers.story_eval.suites import GRADE_COLOURS, GRADES, SUITES


def validity_matrix(validity):
    """Criterion × pair kind graded (the corruptions, the decoder completions, then ``all``): the share of pairs
    (%) where the real ending got the higher grade,
    written ``"w [low, high]"`` with its 95 % interval (:func:`helpers.judge.validity.validity_table`'s columns
    ``criterion``, ``corruption``, ``real wins``, ``low``, ``high``, as fractions)."""
    cells = validity.assign(cell=[f"{100 * w:.0f} [{100 * lo:.0f}, {100 * hi:.0f}]" for w, lo, hi in
                                  zip(validity["real wins"], validity["low"], validity["high"])])
    return (cells.pivot(index="criterion", columns="corruption", values="cell")
            .reindex(index=list(VALIDITY_CRITERIA), columns=_kinds(validity)))


def _kinds(validity) -> list[str]:
    """The pair kinds of a validity table in their order (:data:`helpers.judge.validity.VALIDITY_KINDS`, any other
    kind graded, then ``all``)."""
    present = list(dict.fromkeys(validity["corruption"]))
    return ([k for k in VALIDITY_KINDS if k in present]
            + [k for k in present if k not in VALIDITY_KINDS and k != "all"] + (["all"] if "all" in present else []))


def plot_validity(validity, title: str):
    """Bars of :func:`validity_matrix`'s shares per criterion, one per corruption (``all`` in dark grey), with
    their 95 % intervals and the chance line at 0.5 (a judge that cannot tell real from corrupted endings); the
    legend (chance included) sits below the axes, where it hides no bar, and the y axis runs a little past 1 so
    that an interval ending at 1 keeps its cap."""
    kinds = _kinds(validity)
    ncol = legend_columns([*kinds, "chance (0.5)"])
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.9 + legend_inches([*kinds, "chance"], ncol)), layout="constrained")
    width = 0.8 / len(kinds)
    crit = list(VALIDITY_CRITERIA)
    for i, k in enumerate(kinds):
        t = validity[validity.corruption == k].set_index("criterion").reindex(crit)
        x = np.arange(len(crit)) + i * width
        ax.bar(x, t["real wins"], width, label=k, color="#333333" if k == "all" else None)
        ax.errorbar(x, t["real wins"], yerr=[t["real wins"] - t["low"], t["high"] - t["real wins"]], fmt="none",
                    ecolor="#555555", capsize=2, lw=1)
    ax.axhline(0.5, color="red", lw=1, ls="--", label="chance (0.5)")
    ax.set_xticks(np.arange(len(crit)) + width * (len(kinds) - 1) / 2, crit)
    ax.set(ylim=(0, 1.06), ylabel="real ending graded higher (share)",
           title=wrap(title, FIGURE_WIDTH - 0.8, font_pt(key="axes.titlesize")))
    ax.legend(ncol=ncol, loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    return fig


def plot_themed_grades(graded, models: Sequence[str], prompts_per_suite: Mapping[str, int], summary=None):
    """One panel per themed suite: per model, its answers stacked by answer-key grade (success / partial / fail).
    ``graded`` has columns ``suite``, ``model``, ``grade`` (:func:`helpers.story_eval.suites.grade_table`). With
    ``summary`` (:func:`helpers.story_eval.suites.grade_summary`: ``score``, ``score CI low``/``high`` per model and
    suite) each model's mean score is drawn on a right-hand axis (0-1) as a black point with its 95 % interval."""
    counts = (graded.groupby(["suite", "model", "grade"]).size().unstack("grade")
              .reindex(columns=list(GRADES)).fillna(0))
    fig, axes, inches = panels(len(SUITES), 2.0, 3.2, extra_height=1.1 + legend_inches(GRADES, len(GRADES), title=True))
    for ax, suite in zip(axes, SUITES):
        c = counts.loc[suite].reindex(models).fillna(0)
        bottom = np.zeros(len(c))
        for g in GRADES:
            ax.bar(c.index, c[g], bottom=bottom, color=GRADE_COLOURS[g], edgecolor="#555", label=g)
            bottom += c[g].to_numpy()
        ax.set(title=wrap(f"{suite} ({prompts_per_suite[suite]} prompts)", inches, font_pt(key="axes.titlesize")),
               ylabel="answers")
        ax.set_xticks(range(len(c)), c.index)
        slant_if_crowded(ax, c.index, inches)
        if summary is not None:
            sc = summary[summary.suite == suite].set_index("model").reindex(c.index)
            right = ax.twinx()
            right.errorbar(range(len(sc)), sc["score"], yerr=[sc["score"] - sc["score CI low"],
                                                             sc["score CI high"] - sc["score"]],
                           fmt="o", color="black", ecolor="black", capsize=3, label="score (95 % interval)")
            right.set(ylim=(0, 1), ylabel="score" if suite == SUITES[-1] else "")
            right.grid(False)
    handles, labels = axes[0].get_legend_handles_labels()
    if summary is not None:
        h2, l2 = right.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    fig.legend(handles, labels, title="answer-key grade", loc="outside lower center", ncol=len(labels), frameon=False)
    fig.suptitle(wrap("Themed prompts: first sentences of greedy completions graded by the answer keys\n"
                      + ("(bars: counts of answers; points: mean score, success 1, partial 0.5, with its 95 % interval over the prompts; "
                          "no chance level: free completions, not choices)"
                       if summary is not None else
                       "(counts of answers; each score with its 95 % interval over the prompts: table 05b_themed_summary; "
                          "no chance level: free completions, not choices)"),
                      fig.get_figwidth(), font_pt(key="figure.titlesize")))
    return fig


def instruct_intervals(scored, by: Sequence[str] = ("prompts", "model"), confidence: float = 0.95,
                       n_boot: int = 1000, seed: int = 0):
    """95 % intervals for :func:`helpers.story_eval.instruct.instruct_summary`'s ``share of required words used`` and
    ``chance (words of another prompt)``: per ``by`` group of the scored stories (``n_words`` > 0; columns
    ``prompt``, ``share_used``, ``chance_share``), a seeded percentile bootstrap over **prompts** (each prompt's
    stories averaged first: the samples of one prompt share its words, so they are not independent), the same
    resamples for both columns. Returns ``by`` plus ``required low``, ``required high``, ``chance low``,
    ``chance high`` (fractions)."""
    by = list(by)
    s = scored[scored["n_words"] > 0]
    rows = []
    for key, part in s.groupby(by, sort=False):
        per_prompt = part.groupby("prompt", sort=False)[["share_used", "chance_share"]].mean()
        lo, hi = bootstrap_mean_interval(per_prompt.to_numpy(), confidence, n_boot, seed)
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)), "required low": lo[0], "required high": hi[0],
                     "chance low": lo[1], "chance high": hi[1]})
    return pd.DataFrame(rows, columns=[*by, "required low", "required high", "chance low", "chance high"])


def plot_instruct_words(instruct_table, prompt_sets: Sequence[str]):
    """One panel per prompt set: per model, the share of required words used beside chance (the words of another
    prompt), with 95 % intervals where ``instruct_table`` has :func:`instruct_intervals`' columns.
    ``instruct_table`` is :func:`helpers.story_eval.instruct.instruct_summary` by prompts and model. Each panel's y
    axis is scaled to its data (the shares are small, and a 0-1 axis flattens them)."""
    interval = " (error bars: 95 % bootstrap intervals over prompts)" if "required low" in instruct_table else ""
    entries = ["required words used" + interval, "chance (another prompt's words)"]
    ncol = legend_columns(entries)
    fig, axes, inches = panels(len(prompt_sets), 3.2, 3.6, extra_height=legend_inches(entries, ncol))
    bars = {"share of required words used": ("required", "required words used", "#4c72b0", -0.2),
            "chance (words of another prompt)": ("chance", "chance (another prompt's words)", "#bbbbbb", 0.2)}
    for ax, set_name in zip(axes, prompt_sets):
        t = instruct_table[instruct_table.prompts == set_name]
        x = np.arange(len(t))
        top = 0.0
        for col, (key, label, colour, dx) in bars.items():
            ax.bar(x + dx, t[col], 0.4, label=label, color=colour)
            top = max(top, float(t[col].max()))
            if f"{key} low" in t:
                ax.errorbar(x + dx, t[col], yerr=[t[col] - t[f"{key} low"], t[f"{key} high"] - t[col]], fmt="none",
                            ecolor="#333333", capsize=3, lw=1)
                top = max(top, float(t[f"{key} high"].max()))
        ax.set_xticks(x, t["model"])
        slant_if_crowded(ax, t["model"], inches)
        ax.set(title=wrap(f"{set_name} prompts", inches, font_pt(key="axes.titlesize")),
               ylim=(0, top * 1.15 if top > 0 else 1), ylabel="share of required words")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, [lab + ("" if i else interval) for i, lab in enumerate(labels)], loc="outside lower center",
               ncol=ncol, frameon=False)
    return fig


JUDGE_SCALE = (1, 10)  # the judge's grades run 1-10 (:mod:`helpers.judge.rubric`)
_DECODING_MARKERS = ("o", "D", "s", "^", "v")


def judge_axis_ranges(judge_means, criteria: Sequence[str], min_span: float = 0.6) -> dict[str, tuple[float, float]]:
    """The zoomed grade axis of each criterion of :func:`plot_judge_scores`: around that criterion's intervals, all
    of one width (the widest needed, with a margin, at least ``min_span`` grade points), so that a grade point is
    as long in every panel; within the judge's 1-10 scale."""
    spans = {}
    for c in criteria:
        vals = pd.concat([judge_means[c], judge_means[f"{c} low"], judge_means[f"{c} high"]]).astype(float)
        spans[c] = (float(vals.min()), float(vals.max()))
    width = max([min_span] + [1.25 * (b - a) for a, b in spans.values()])
    width = float(np.ceil(round(width * 10, 6)) / 10)
    out = {}
    for c, (a, b) in spans.items():
        lo = float(np.floor(round(((a + b) / 2 - width / 2) * 20, 6)) / 20)  # on a 0.05 grid
        lo = min(max(JUDGE_SCALE[0], lo), JUDGE_SCALE[1] - width)
        out[c] = (lo, lo + width)
    return out


def plot_judge_scores(judge_means, models: Sequence[str], criteria: Sequence[str], title: str):
    """One panel per validated criterion: per model (a row), the judge's expected grade for each decoding (a marker)
    with its 95 % interval (a line with caps) and the value beside it
    (:func:`helpers.judge.validity.grade_interval_table`: columns ``model``, ``decoding``, ``<criterion>``,
    ``<criterion> low``, ``<criterion> high``). Each panel's grade axis is zoomed to its data
    (:func:`judge_axis_ranges`: one width for all, so a grade point is as long in every panel) so that differences
    between models and their intervals are visible; a dotted line marks the mean of the panel's rows, and a strip
    below the panels shows where the zoomed windows lie on the judge's whole 1-10 scale (its midpoint 5.5 marked)."""
    decodings = list(dict.fromkeys(judge_means["decoding"]))
    ranges = judge_axis_ranges(judge_means, criteria)
    entries = [f"{d} completions (95 % interval)" for d in decodings] + ["mean of the panel's rows"]
    ncol = legend_columns(entries)
    cols = columns(len(criteria), 3.2)
    rows = math.ceil(len(criteria) / cols)
    height = 0.8 + 0.25 * len(models) * max(2, len(decodings))
    fig = plt.figure(figsize=(FIGURE_WIDTH, rows * height + 1.7 + legend_inches(entries, ncol)), layout="constrained")
    grid = fig.add_gridspec(rows + 1, cols, height_ratios=[height] * rows + [1.0])
    inches = FIGURE_WIDTH / cols - 0.4
    y = np.arange(len(models))[::-1].astype(float)
    offsets = (np.arange(len(decodings)) - (len(decodings) - 1) / 2) * min(0.3, 0.75 / max(1, len(decodings)))
    value_fs = max(7.5, font_pt(key="ytick.labelsize") - 2)
    handles = []
    for i, c in enumerate(criteria):
        ax = fig.add_subplot(grid[i // cols, i % cols])
        lo, hi = ranges[c]
        for j, dec in enumerate(decodings):
            t = judge_means[judge_means.decoding == dec].set_index("model").reindex(models)
            yy = y - offsets[j]
            h = ax.errorbar(t[c], yy, xerr=[t[c] - t[f"{c} low"], t[f"{c} high"] - t[c]], fmt=_DECODING_MARKERS[j % 5],
                            color=f"C{j}", ms=6, capsize=3, lw=1.4)
            for v, top, yv in zip(t[c], t[f"{c} high"], yy):
                if pd.notna(v):
                    ax.text(min(top, hi) + 0.015 * (hi - lo), yv, f"{v:.2f}", va="center", ha="left",
                            fontsize=value_fs, color=f"C{j}")
            if i == 0:
                handles.append(h)
        line = ax.axvline(float(judge_means[c].mean()), color="#777777", ls=":", lw=1.2)
        if i == 0:
            handles.append(line)
        ax.set_xlim(lo, hi + 0.14 * (hi - lo))  # room for the values right of the intervals
        ax.set_ylim(-0.6, len(models) - 0.4)
        ax.set_yticks(y, models if i % cols == 0 else [])
        ax.grid(axis="y", visible=False)
        ax.set_title(wrap(c, inches, font_pt(key="axes.titlesize")))
        if i // cols == rows - 1 or i + cols >= len(criteria):
            ax.set_xlabel("expected grade (axis zoomed)")
    strip = fig.add_subplot(grid[rows, :])
    for lo, hi in ranges.values():
        strip.axvspan(lo, hi, color="#f2c14e", alpha=0.45, lw=0)
    first = min(lo for lo, _ in ranges.values())
    strip.text(first - 0.1, 0.5, "shown above →", ha="right", va="center", fontsize=value_fs)
    mid = sum(JUDGE_SCALE) / 2
    strip.axvline(mid, color="#555555", lw=1, ls="--")
    strip.text(mid + 0.08, 0.5, f"scale midpoint {mid:g}", va="center", fontsize=value_fs, color="#555555")
    strip.set(xlim=JUDGE_SCALE, ylim=(0, 1), yticks=[], xticks=range(JUDGE_SCALE[0], JUDGE_SCALE[1] + 1),
              xlabel="the judge's whole grade scale (1 = worst, 10 = best)")
    strip.grid(False)
    fig.legend(handles, entries, loc="outside lower center", ncol=ncol, frameon=False)
    fig.suptitle(wrap(title, FIGURE_WIDTH, font_pt(key="figure.titlesize")))
    return fig


def colour_table_html(graded, caption: str | None = None, extra: Mapping[tuple[str, str], str] | None = None,
                      prompt_chars: int = 160) -> str:
    """Table 1 of Yang et al. (McGill report) as HTML: one row per prompt (with the expected answer), one column per model, each cell the
    model's first sentence on a green / yellow / red background (success / partial / fail); ``extra[(model, id)]``
    is appended to a cell (e.g. a judge grade)."""
    models = list(dict.fromkeys(graded["model"]))
    ids = list(dict.fromkeys(graded["id"]))
    cell = {(r.model, r.id): r for r in graded.itertuples(index=False)}
    first = {r.id: r for r in graded.itertuples(index=False)}
    head = ["<th>prompt (expected)</th>"] + [f"<th>{html.escape(m)}</th>" for m in models]
    body = []
    for i in ids:
        f = first[i]
        p = f.prompt if len(f.prompt) <= prompt_chars else "[...] " + f.prompt[-prompt_chars:]
        tds = [f'<td class="p">{html.escape(p)}<br><small>expected: {html.escape(str(f.expected))}</small></td>']
        for m in models:
            r = cell.get((m, i))
            if r is None:
                tds.append("<td></td>")
                continue
            more = f"<br><small>{html.escape(extra[(m, i)])}</small>" if extra and (m, i) in extra else ""
            tds.append(f'<td style="background:{GRADE_COLOURS[r.grade]}" title="{html.escape(r.matched)}">'
                       f"{html.escape(r.answer) or '<i>(empty)</i>'}{more}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    legend = ("green = success (follows the prompt), yellow = partial (flawed but on the right track), "
              "red = fail (wrong or nonsensical)")
    cap = f"<caption>{html.escape(caption + ' — ' if caption else '')}{legend}</caption>"
    return styled_table("sbc", head, body, cap, cell_css="max-width:36ch",
                        th_css="table.sbc td.p{max-width:48ch;background:#fafafa}", tail_css="table.sbc small{color:#555}")


def highlight_words(text: str, words: Sequence[str]) -> str:
    """HTML of ``text`` with the tokens that fold to a required word in bold."""
    keys = {tuple(folded(w)) for w in words}
    single = {k[0] for k in keys if len(k) == 1}
    out = []
    for piece in re.split(r"([A-Za-z0-9’']+)", text):
        if piece and re.fullmatch(r"[A-Za-z0-9’']+", piece) and fold(ascii_quotes(piece).lower()) in single:
            out.append(f"<b>{html.escape(piece)}</b>")
        else:
            out.append(html.escape(piece))
    return "".join(out)


def instruct_examples_html(rows: Sequence[Mapping[str, Any]], models: Sequence[str], caption: str | None = None) -> str:
    """A table of instruct prompts and each model's story (required words in bold)."""
    head = ["<th>instructions</th>"] + [f"<th>{html.escape(m)}</th>" for m in models]
    body = []
    for r in rows:
        words = parse_instruct(r["prompt"]).words
        tds = [f"<td>{html.escape(r['prompt'])}</td>"]
        for m in models:
            tds.append(f"<td>{highlight_words(r.get(m, ''), words)}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return styled_table("sbi", head, body, cap, cell_css="max-width:60ch;white-space:pre-wrap")
