"""Notebook 06's sentences: what its head and neuron tables show (the conventions of
:mod:`helpers.report.findings`: computed from the tables, nothing typed by hand; the words of every claim come from
:mod:`helpers.core.claims`: the paper's pattern "holds" only with an interval that excludes 0
(:func:`~helpers.core.claims.pattern_claim`), two shares "apart" only where their intervals do not overlap and never
"as many" where they do (:func:`~helpers.core.claims.apart_claim`); word-class specialisation only beyond every
neuron control).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from helpers.analysis.attention_stats import HEAD_KINDS
from helpers.analysis.lexicon import SPECIALIST_CLASSES
from helpers.core.claims import apart_claim, pattern_claim
from helpers.evaluation.comparisons import arm_and_seed


def check_passed(check: pd.DataFrame | None) -> bool:
    """Whether the head classes got every synthetic head of the known-answer check right."""
    return check is None or bool((check["kind (η² rule)"] == check["expected"]).all())


def _counts(h: pd.DataFrame) -> str:
    """"n positional (layers), n sink, ..." in :data:`HEAD_KINDS` order, classes with no head left out."""
    parts = []
    for k in HEAD_KINDS:
        g = h[h.label == k]
        if len(g):
            layers = ", ".join(str(int(x)) for x in sorted(g.layer.unique()))
            parts.append(f"{len(g)} {k} (layer{'s' if g.layer.nunique() > 1 else ''} {layers})")
    return "; ".join(parts) or "none"


def attention_heads(heads: pd.DataFrame, check: pd.DataFrame | None = None) -> list[str]:
    """Notebook 06: heads per model in each graded class (``label``: positional, sink, content, mixed, diffuse) and the
    layers that hold them, then per budget over its training seeds whether the counts hold. With ``check``
    (:func:`helpers.analysis.attention_stats.reference_heads`), counts are given only when every synthetic head got
    its expected class; otherwise the sentence says the instrument failed its check."""
    if not check_passed(check):
        wrong = check[check["kind (η² rule)"] != check["expected"]]["ideal head"]
        return [f"the head classes misclassify synthetic heads ({', '.join(wrong)}), so no head counts are reported"]
    out = [f"{name}: {len(h)} heads: {_counts(h)}" for name, h in heads.groupby("model", sort=False)]
    arms = heads.assign(arm=heads.model.map(lambda m: arm_and_seed(m, -1)[0]))
    for arm, g in arms.groupby("arm", sort=False):
        per_seed = {m: hh.label.value_counts() for m, hh in g.groupby("model", sort=False)}
        if len(per_seed) > 1:  # the same budget under several training seeds: do the counts hold?
            kinds = [k for k in HEAD_KINDS if any(c.get(k, 0) for c in per_seed.values())]
            same = all(all(c.get(k, 0) == next(iter(per_seed.values())).get(k, 0) for k in kinds)
                       for c in per_seed.values())
            out.append(f"{arm} over {len(per_seed)} training seeds: " + "; ".join(
                f"{k} " + " / ".join(str(int(c.get(k, 0))) for c in per_seed.values()) for k in kinds)
                + f" of {len(g) // len(per_seed)} heads" + (" (the same in every seed)" if same else
                                                             " (the counts move with the seed)"))
    return out


def eta2_question(questions: pd.DataFrame) -> list[str]:
    """Notebook 06's questions table (:func:`helpers.evaluation.comparisons.questions_table` on per-story layer-0 η²)
    in words: the question, the effect with its seed-level and item-level intervals, and the table's verdict."""
    out = []
    for q in questions.to_dict("records"):
        ci = lambda lo, hi: (f"[{q[lo]:+.3f}, {q[hi]:+.3f}]" if np.isfinite(q.get(lo, np.nan)) else "none")
        eff = q.get("effect", np.nan)
        out.append(f"{q['question']}: {q['A']} − {q['B']} = {eff:+.3f} {q.get('unit', '')} (seed interval "
                   f"{ci('seed CI low', 'seed CI high')}, story interval {ci('item CI low', 'item CI high')}): "
                   f"{q['verdict']}" if np.isfinite(eff) else f"{q['question']}: {q['verdict']}")
    return out


def specialists(summary: pd.DataFrame) -> list[str]:
    """Notebook 06: MLP neurons whose top tokens are dominated by one word class, against the number expected by
    chance. Columns: model, "top tokens", specialists, neurons, "expected neurons by chance" and, where present, "other
    class" (specialists of a class outside the named ones, e.g. determiners), said when it is the bulk. In the
    ``all`` list a neuron that fires on one token is trivially a specialist, so its chance figure is a floor, not a
    fair null (notebook 06's markdown): that comparison is worded as such and given no verdict; the ``distinct``
    list is compared with chance ("more than" where the count is over twice the expected)."""
    out = []
    for _, r in summary.iterrows():
        spec, n, exp = int(r["specialists"]), int(r["neurons"]), float(r["expected neurons by chance"])
        head = f"{r.model} ({r['top tokens']} top tokens): {spec} of {n} neurons are word-class specialists ({100 * spec / n:.0f} %)"
        if "random-direction share" in summary.columns:
            exp_r, p = float(r["expected neurons, random directions"]), float(r["p vs random directions"])
            beyond = p < 0.05
            s = head + (f", against {exp_r:.1f} among as many random directions of the same activations "
                        f"(Fisher p = {p:.2g}): " + ("more than random directions" if beyond and spec > exp_r else
                                                    "fewer than random directions" if beyond else
                                                    "not more than random directions give")
                        + " (one of three controls; whether this is word-class specialisation is the controls' "
                        f"verdict; independent draws at the base rates would give {exp:.1f}, too easy a null)")
        elif r["top tokens"] == "all":
            s = head + f", against a floor of {exp:.1f} expected by chance (a floor, not a fair null: a neuron firing on one token is trivially a specialist)"
        else:
            s = head + f", {exp:.1f} expected by chance" + (": more than chance" if spec > 2 * exp else ": not clearly more than chance")
        if "other class" in summary.columns and spec:
            other = int(r["other class"])
            named = [int(r[c]) for c in SPECIALIST_CLASSES if c in summary.columns]
            if (other > max(named)) if named else (other >= spec / 2):
                s += (f"; the largest group, {other} of the {spec} ({100 * other / spec:.0f} %), are \"other class\" "
                      f"specialists (a class other than {', '.join(SPECIALIST_CLASSES)}, e.g. determiner or pronoun)")
        out.append(s)
    return out


def head_lines(heads: pd.DataFrame, threshold: float, references: pd.DataFrame | None = None,
               median_len: int | None = None) -> list[str]:
    """Per model, the head table in words (notebook 06's head table: model, layer, head, label, "offset η²" with "η² CI
    low"/"η² CI high", "label (|r| > 0.5 rule)", "r (lower triangle)", "r (full matrix)", "weight at top offset",
    "top offset", "start-token weight"): the η² range and the widest interval over stories, how many heads Rathod et
    al.'s |r| rule calls positional, the range of r, the heads that put at least half their attention on one fixed
    offset, and the mean weight on the start token. ``references``:
    :func:`helpers.analysis.attention_stats.reference_heads` for a story of ``median_len`` tokens (the known-answer
    check of both statistics), printed first."""
    out = []
    if references is not None and len(references):
        ok = int((references["kind (η² rule)"] == references["expected"]).sum())
        r_ok = int(((references["label (|r| > 0.5 rule)"] == "positional")
                    == (references["expected"] == "positional")).sum())
        out.append(f"known-answer check on synthetic heads ({median_len} tokens): the graded classes get {ok} of "
                   f"{len(references)} right; the |r| > 0.5 rule gets {r_ok} of {len(references)} positional-or-not "
                   "right (" + ", ".join(f"{v['ideal head']}: {v['kind (η² rule)']}, η² = {v['offset η²']:.2f}"
                                         for v in references.to_dict("records")) + ")")
    for name, h in heads.groupby("model", sort=False):
        n_pos_r = int((h["label (|r| > 0.5 rule)"] == "positional").sum()) if "label (|r| > 0.5 rule)" in h else 0
        fixed = h[h["weight at top offset"] >= 0.5]
        offsets = ", ".join(f"L{r['layer']}H{r['head']}: {r['top offset']} back"
                            for r in fixed.to_dict("records")) or "none"
        width = ""
        if "η² CI low" in h and np.isfinite(h["η² CI low"]).any():
            w = (h["η² CI high"] - h["η² CI low"]).max()
            width = f", intervals over stories at most {w:.2f} wide"
        out.append(f"{name}: offset η² {h['offset η²'].min():.2f} … {h['offset η²'].max():.2f}{width} "
                   f"(positional from {threshold}); {n_pos_r} positional by |r| > 0.5; r ranges "
                   f"{h['r (lower triangle)'].min():+.2f} … {h['r (lower triangle)'].max():+.2f} (full-matrix r: "
                   f"{h['r (full matrix)'].min():+.2f} … {h['r (full matrix)'].max():+.2f}); {len(fixed)} heads put "
                   f"≥ 50 % of their attention on one fixed offset ({offsets}); mean start-token weight "
                   f"{h['start-token weight'].mean():.2f}")
    return out


def paper_pattern(check: pd.DataFrame) -> list[str]:
    """The TinyStories observation per model and grouping (:func:`helpers.analysis.interpret_tables.paper_observation`
    rows): determiners + punctuation among the nearer heads' strongest targets, names + nouns among the farther
    heads'; each half is read from its bootstrap interval over stories by :func:`helpers.core.claims.pattern_claim`
    ("holds" only where the interval excludes 0), and the whole pattern holds only where both halves do."""
    if check.empty:
        return ["no model has both groups of heads, so the paper's observation cannot be checked here"]
    out = []
    for v in check.to_dict("records"):
        near, far = ("short-range", "long-range") if v["grouping"] == "span" else ("positional", "content")
        halves = [pattern_claim(f"determiners+punctuation nearer ({v[f'{near}: determiner+punctuation']:.0%} of "
                                f"{near} heads' strongest targets vs {v[f'{far}: determiner+punctuation']:.0%}, base "
                                f"{v['base: determiner+punctuation']:.0%})", v["function words nearer"],
                                v.get("function words nearer CI low"), v.get("function words nearer CI high")),
                  pattern_claim(f"names+nouns farther ({v[f'{far}: name+noun']:.0%} vs {v[f'{near}: name+noun']:.0%}, "
                                f"base {v['base: name+noun']:.0%})", v["names/nouns farther"],
                                v.get("names/nouns farther CI low"), v.get("names/nouns farther CI high"))]
        held = sum(": holds," in h for h in halves)
        whole = ("the paper's pattern holds" if held == 2 else "the paper's pattern holds in one half only"
                 if held == 1 else "the paper's pattern is not shown")
        out.append(f"{v['model']} ({v['grouping']}, differences of shares with 95 % intervals over stories): "
                   + "; ".join(halves) + f" → {whole}")
    return out


def specialist_lines(summary: pd.DataFrame) -> list[str]:
    """Per model and top-token list, the specialist counts by class (notebook 06's specialist summary: model, "top
    tokens", the :data:`~helpers.analysis.lexicon.SPECIALIST_CLASSES` columns, "other class", specialists, neurons,
    "expected neurons by chance", "share of neurons": :func:`helpers.analysis.interpret_tables.specialist_totals`)."""
    out = []
    for v in summary.to_dict("records"):
        by_class = ", ".join(f"{c} {v[c]}" for c in SPECIALIST_CLASSES + ["other class"] if c in v)
        out.append(f"{v['model']} ({v['top tokens']} top tokens): {v['specialists']} of {v['neurons']} neurons are "
                   f"specialists ({v['share of neurons']:.0%}; {v['expected neurons by chance']:.1f} expected by "
                   f"chance): {by_class}")
    return out


def specialist_comparison(summary: pd.DataFrame, small: str, large: str,
                          lists: Sequence[str] = ("all", "distinct")) -> list[str]:
    """Does the larger model have more specialist neurons per neuron than the smaller, per top-token list? Reads the
    shares and their intervals from :func:`helpers.analysis.interpret_tables.specialist_totals` ("share of
    neurons", "share CI low"/"share CI high") through :func:`helpers.core.claims.apart_claim`: "above"/"below" only
    where the two intervals do not overlap, said to hold on these neurons (an interval over neurons does not cover
    the training seed); overlap is "not shown apart", never "as many"."""
    out = []
    for mode in lists:
        t = summary[summary["top tokens"] == mode].set_index("model")
        if small not in t.index or large not in t.index:
            continue
        ci = {m: (float(t.at[m, "share CI low"]), float(t.at[m, "share CI high"])) for m in (small, large)}
        share = {m: t.at[m, "share of neurons"] for m in (small, large)}
        words = apart_claim(f"the larger model ({large})", ci[large], f"the smaller ({small})", ci[small],
                            "neurons (one training seed each: the intervals say which neurons, not which seed)")
        out.append(f"{mode} top tokens, specialists per neuron: {words}: {share[large]:.0%} [{ci[large][0]:.0%}, "
                   f"{ci[large][1]:.0%}] vs {share[small]:.0%} [{ci[small][0]:.0%}, {ci[small][1]:.0%}] (95 % Wilson "
                   "intervals over neurons)")
    return out


def control_lines(controls: pd.DataFrame) -> list[str]:
    """Notebook 06's neuron controls (:func:`helpers.analysis.interpret_tables.neuron_controls`) in words: per model and
    top-token list, the trained model's specialists beside each control's, the Fisher p values, and the verdict
    (word-class specialisation only beyond every control)."""
    names = [("random-weight specialists", "random-weight layer"), ("random-direction specialists", "random directions"),
             ("untrained-model specialists", "untrained model")]
    out = []
    for v in controls.to_dict("records"):
        ctl = ", ".join(f"{label} {int(v[col])} (p = {v[f'p vs {label}']:.2g})" for col, label in names
                        if col in v and pd.notna(v.get(col)))
        out.append(f"{v['model']} ({v['top tokens']} top tokens): {int(v['trained specialists'])} of {int(v['neurons'])} "
                   f"neurons are specialists against {ctl}: {v['verdict']}")
    return out
