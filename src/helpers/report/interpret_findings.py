"""Notebook 06's sentences: what its head and neuron tables show (the conventions of
:mod:`helpers.report.findings`: computed from the tables, nothing typed by hand; two shares are called apart only
where their 95 % intervals do not overlap, and that says which heads or neurons were measured, not which training
seed made the model).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from helpers.evaluation.comparisons import arm_and_seed
from helpers.analysis.lexicon import SPECIALIST_CLASSES
from helpers.core.stats import intervals_apart


def attention_heads(heads: pd.DataFrame, check: pd.DataFrame | None = None) -> list[str]:
    """Notebook 06: how many heads per model are positional (label column) and which layers hold them. With
    ``check`` (:func:`helpers.analysis.attention_stats.reference_heads`), the counts are given only when the statistic
    classified every synthetic ideal head right; otherwise the sentence says the instrument failed its check."""
    if check is not None and not (check["kind (η² rule)"] == check["expected"]).all():
        wrong = check[check["kind (η² rule)"] != check["expected"]]["ideal head"]
        return [f"the head statistic misclassifies synthetic ideal heads ({', '.join(wrong)}), so no head counts are "
                "reported"]
    out = []
    for name, h in heads.groupby("model", sort=False):
        pos = h[h.label == "positional"]
        where = ", ".join(f"layer {l}" for l in sorted(pos.layer.unique())) if len(pos) else "none"
        other = h[h.label != "positional"].label.value_counts()
        rest = ", ".join(f"{int(n)} {k}" for k, n in other.items()) or "none other"
        out.append(f"{name}: {len(pos)} of {len(h)} heads positional ({where}); {rest}")
    arms = heads.assign(arm=heads.model.map(lambda m: arm_and_seed(m, -1)[0]))
    for arm, g in arms.groupby("arm", sort=False):
        per_seed = g.groupby("model", sort=False).label.apply(lambda x: int((x == "positional").sum()))
        if len(per_seed) > 1:  # the same budget under several training seeds: does the count hold?
            out.append(f"{arm} over {len(per_seed)} training seeds: " + " / ".join(map(str, per_seed))
                       + f" positional heads of {len(g) // len(per_seed)}"
                       + (" (the same in every seed)" if per_seed.nunique() == 1 else " (the count moves with the seed)"))
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
                                                    "not more than random directions give, so not evidence of "
                                                    "neurons with a word-class role")
                        + f" (independent draws at the base rates would give {exp:.1f}, too easy a null)")
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
    """Per model, the head table in words (notebook 06's head table: model, layer, head, label, "offset η²",
    "label (|r| > 0.5 rule)", "r (lower triangle)", "r (full matrix)", "weight at top offset", "top offset",
    "start-token weight"): how many heads are positional by offset η² and by Rathod et al.'s |r| rule, the range of
    r, the heads that put at least half their attention on one fixed offset, and the mean weight on the start token.
    ``references``: :func:`helpers.analysis.attention_stats.reference_heads` for a story of ``median_len`` tokens (the
    known-answer check of both statistics), printed first."""
    out = []
    if references is not None and len(references):
        ok = int((references["kind (η² rule)"] == references["expected"]).sum())
        r_ok = int(((references["label (|r| > 0.5 rule)"] == "positional")
                    == (references["expected"] == "positional")).sum())
        out.append(f"known-answer check on synthetic heads ({median_len} tokens): offset η² classifies {ok} of "
                   f"{len(references)} right; the |r| > 0.5 rule gets {r_ok} of {len(references)} positional-or-not "
                   "right (" + ", ".join(f"{v['ideal head']} η² = {v['offset η²']:.2f}, r = {v['r (lower triangle)']:+.2f}"
                                         for v in references.to_dict("records")) + ")")
    for name, h in heads.groupby("model", sort=False):
        n_pos = int((h.label == "positional").sum())
        n_pos_r = int((h["label (|r| > 0.5 rule)"] == "positional").sum()) if "label (|r| > 0.5 rule)" in h else 0
        fixed = h[h["weight at top offset"] >= 0.5]
        offsets = ", ".join(f"L{r['layer']}H{r['head']}: {r['top offset']} back"
                            for r in fixed.to_dict("records")) or "none"
        out.append(f"{name}: {n_pos} of {len(h)} heads positional (offset η² > {threshold}; η² "
                   f"{h['offset η²'].min():.2f} … {h['offset η²'].max():.2f}), {n_pos_r} by |r| > 0.5; r ranges "
                   f"{h['r (lower triangle)'].min():+.2f} … {h['r (lower triangle)'].max():+.2f} (full-matrix r: "
                   f"{h['r (full matrix)'].min():+.2f} … {h['r (full matrix)'].max():+.2f}); {len(fixed)} heads put "
                   f"≥ 50 % of their attention on one fixed offset ({offsets}); mean start-token weight "
                   f"{h['start-token weight'].mean():.2f}")
    return out


def paper_pattern(check: pd.DataFrame) -> list[str]:
    """The TinyStories observation per model and grouping (:func:`helpers.analysis.interpret_tables.paper_observation`
    rows): determiners + punctuation among the nearer heads' strongest targets, names + nouns among the farther
    heads', each half seen when the difference reaches the table's 2-point rule (shares of one model's heads, no
    interval over training runs)."""
    if check.empty:
        return ["no model has both groups of heads, so the paper's observation cannot be checked here"]
    out = []
    for v in check.to_dict("records"):
        near, far = ("short-range", "long-range") if v["grouping"] == "span" else ("positional", "semantic")
        both = int(v["function words nearer"]) + int(v["names/nouns farther"])
        out.append(f"{v['model']} ({v['grouping']}): determiners+punctuation are {v[f'{near}: determiner+punctuation']:.0%} "
                   f"of {near} heads' strongest targets vs {v[f'{far}: determiner+punctuation']:.0%} for {far} heads "
                   f"(base {v['base: determiner+punctuation']:.0%}); names+nouns {v[f'{near}: name+noun']:.0%} vs "
                   f"{v[f'{far}: name+noun']:.0%} (base {v['base: name+noun']:.0%}) → the paper's pattern "
                   f"{['does not hold', 'holds in part', 'holds'][both]}")
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
    neurons", "share CI low"/"share CI high"); "more"/"fewer" only where the two intervals do not overlap, and then
    said to hold on these neurons (one model per size: the intervals do not cover the training seed)."""
    out = []
    for mode in lists:
        t = summary[summary["top tokens"] == mode].set_index("model")
        if small not in t.index or large not in t.index:
            continue
        ci = {m: (t.at[m, "share CI low"], t.at[m, "share CI high"]) for m in (small, large)}
        share = {m: t.at[m, "share of neurons"] for m in (small, large)}
        if intervals_apart(ci[small], ci[large]):
            word = "more" if share[large] > share[small] else "fewer"
            head = (f"the larger model ({large}) has {word} specialists per neuron than the smaller ({small}) on these "
                    "neurons (an interval over neurons says which neurons, not which training seed: one seed each)")
        else:
            head = (f"the larger model ({large}) and the smaller ({small}) have as many specialists per neuron within "
                    "their intervals")
        out.append(f"{mode} top tokens: {head}: {share[large]:.0%} [{ci[large][0]:.0%}, {ci[large][1]:.0%}] vs "
                   f"{share[small]:.0%} [{ci[small][0]:.0%}, {ci[small][1]:.0%}] (95 % Wilson intervals over neurons)")
    return out
