""""What this run shows": sentences computed from the tables a notebook has already made.

Every notebook ends with a cell that prints these sentences, so the conclusions move with the numbers when the study is
rerun (nothing is typed by hand). Each function takes plain tables (pandas DataFrames or mappings) and returns a list of
sentences; nothing here trains, generates or scores. Item intervals (which items were drawn) never make a difference
real: only a seed-level interval does (:mod:`helpers.evaluation.comparisons`, the questions table); two item intervals
that do not overlap are called "apart on these items". Single runs without an interval are compared against a stated
noise level.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from helpers.core.stats import intervals_apart, t_interval
from helpers.diversity.self_bleu import k_choice_label
from helpers.evaluation.comparisons import arm_and_seed, seeds_per_arm
from helpers.evaluation.zero_shot import chance_verdict  # the one rule for "above chance" (also interval_table's)
from helpers.report.eval_findings import chance_words  # "above chance" through helpers.core.claims
from helpers.report.reporting import fmt_interval

CHANCE_WORDS = {"yes": "above chance", "below": "below chance", "no": "not distinguishable from chance"}


def _separated(a: pd.Series, b: pd.Series) -> bool:
    return intervals_apart((a["ci_low"], a["ci_high"]), (b["ci_low"], b["ci_high"]))


def data_budgets(stats: pd.DataFrame, repairs: pd.DataFrame, budgets_table: pd.DataFrame, mixes: pd.DataFrame,
                 tokenizers: pd.DataFrame, scale: float) -> list[str]:
    """Notebook 01: the corpora's size, repairs, what the budgets stand for, refused mixes, tokenizer round trips."""
    st = stats.set_index("corpus")
    tiny, baby, n_src = st.loc["TinyStories train"], st.loc["BabyLM (all)"], sum(c.startswith("BabyLM: ") for c in st.index)
    fixed, refused = repairs[repairs["repaired (mojibake)"] > 0], mixes[mixes["rule"] != "fits"]
    stands = next(c for c in budgets_table.columns if c.startswith("stands for"))
    paper, fails = budgets_table[budgets_table["in the paper"] == "yes"], int(tokenizers["round-trip failures"].sum())
    return [f"TinyStories: {int(tiny['units']):,} stories, {int(tiny['words']):,} words (median story "
            f"{tiny['median words/unit']:.0f} words); BabyLM-like text: {int(baby['units']):,} documents, "
            f"{int(baby['words']):,} words from {n_src} sources",
            "mojibake repaired: " + ("none" if fixed.empty else ", ".join(
                f"{int(r['repaired (mojibake)']):,} of {int(r['count']):,} {r['units']} of {r['corpus']}" for _, r in fixed.iterrows())),
            f"{len(budgets_table)} TinyStories budgets, scaled 1/{scale:g} from the paper's: "
            + ", ".join(f"{r['budget (this profile)']} stands for {r[stands]}" for _, r in budgets_table.iterrows())
            + f"; {len(paper)} of them ({', '.join(paper[stands])}) are budgets the paper trained",
            f"challenge rule: {len(mixes) - len(refused)} of {len(mixes)} mixes fit the track budget"
            + (f"; refused: {', '.join(refused['mix'])}" if len(refused) else ""),
            f"tokenizers: {tokenizers['tokens/word'].min():.2f}-{tokenizers['tokens/word'].max():.2f} tokens per word; "
            + _round_trip_sentence(tokenizers, fails)]


def _round_trip_sentence(tokenizers: pd.DataFrame, fails: int) -> str:
    sampled = tokenizers[tokenizers.get("checked", pd.Series("all stories", index=tokenizers.index)) != "all stories"]
    if fails:
        return f"{fails} stories do not decode back to themselves: generation would cut them wrongly"
    if sampled.empty:
        return "every training story decodes back to itself"
    return ("every checked story decodes back to itself (" + "; ".join(
        f"{r['corpus']}: {r['checked']}" for _, r in sampled.iterrows()) + ", a bounded sample)")


def zero_shot(intervals: pd.DataFrame, task: str = "BLiMP", across: Mapping[str, str] | None = None,
              reductions: pd.DataFrame | None = None) -> list[str]:
    """Notebook 05: per model, is ``task`` above chance (an encoder in ``reductions``, the PLL-reductions table,
    only where its mean and summed PLL agree: :func:`helpers.report.eval_findings.chance_words`); per kind
    (decoder/encoder), are the two highest models apart on these items (:func:`helpers.core.claims.apart_claim`;
    never "best": a difference is real only over seeds, in the questions table), and is ``task`` flat across the
    kind's models (no two of their intervals separated; ``across`` names what the models of a kind vary, e.g.
    ``{"decoder": "training budgets"}``). ``intervals`` has columns kind, model, task, pairs, accuracy, ci_low,
    ci_high."""
    part = intervals[intervals.task == task]
    if part.empty:
        return [f"no {task} results in this run"]
    out = []
    words = chance_words(part, reductions)
    for r, verdict in zip(part.itertuples(), words):
        out.append(f"{r.kind} {r.model}: {task} {r.accuracy:.1f} [{r.ci_low:.1f}, {r.ci_high:.1f}] on {int(r.pairs):,} "
                   f"pairs: {verdict}")
    for kind, group in part.groupby("kind", sort=False):
        if len(group) < 2:
            continue
        ranked = group.sort_values("accuracy", ascending=False)
        best, second = ranked.iloc[0], ranked.iloc[1]
        out.append(f"the two highest {kind}s: {best.model} ({best.accuracy:.1f}), {second.model} "
                   f"({second.accuracy:.1f}): " + _compare(best, second, "accuracy"))
        rows = [r for _, r in group.iterrows()]
        if not any(_separated(x, y) for i, x in enumerate(rows) for y in rows[i + 1:]):
            what = f" ({across[kind]})" if across and kind in across else ""
            out.append(f"{task} is flat across the {len(rows)} {kind}s{what}: no two of their 95 % intervals are "
                       f"separated (range {group.accuracy.min():.1f}-{group.accuracy.max():.1f})")
    return out


def glue_majority(runs: pd.DataFrame, majority: pd.DataFrame) -> list[str]:
    """Notebook 05: how many task × model fine-tuning results are at or below the majority-class baseline (always
    predicting the most frequent training label, scored on the same test examples), how many of those have the
    baseline inside their 95 % interval, which tasks they are, and how many runs predicted one class for every test
    example. ``runs``: :func:`helpers.evaluation.finetune.finetune_many`'s rows (``model``, ``task``, ``score``,
    ``ci_low``, ``ci_high``, optionally ``single_class``); ``majority``: :func:`helpers.evaluation.finetune.majority_baseline`."""
    base = majority.set_index("task")["score"]
    part = runs[runs["task"].isin(base.index)]
    if part.empty:
        return ["no fine-tuning results to set against the majority-class baseline"]
    b = part["task"].map(base)
    at_or_below = part[part["score"] <= b + 1e-12]
    above = part[part["score"] > b + 1e-12]
    # as floats: with no run above the baseline the mapped Series is empty and keeps the tasks' string dtype
    within = above[above["ci_low"] <= above["task"].map(base).astype(float)]
    beyond = above.drop(index=within.index)
    counts = [(t, int(at_or_below["task"].eq(t).sum()), int(part["task"].eq(t).sum())) for t in base.index]
    out = [f"{len(at_or_below)} of {len(part)} task × model results are at or below the majority-class baseline "
           f"(always the most frequent training label, same test examples)"
           + (": " + ", ".join(f"{t} {k} of {n}" for t, k, n in counts if k) if len(at_or_below) else "")
           + f"; {len(within)} more are above it by less than their 95 % interval allows (the baseline lies inside it), "
           f"so {len(beyond)} of {len(part)} beat the baseline beyond noise"
           + (" (" + ", ".join(f"{m} on {t}" for m, t in zip(beyond["model"], beyond["task"])) + ")" if len(beyond) else "")]
    if "single_class" in part and part["single_class"].notna().all():
        single = part[part["single_class"].astype(bool)]
        out.append(f"{len(single)} of {len(part)} runs predict a single class for every test example"
                   + (" (" + ", ".join(f"{m} on {t}" for m, t in zip(single["model"], single["task"])) + ")"
                      if len(single) else ""))
    else:
        out.append("whether a run predicts a single class is not recorded in these (older) results")
    return out


def seed_replicates(intervals: pd.DataFrame, replicates: Mapping[str, str], task: str = "BLiMP") -> list[str]:
    """Notebook 05: for each ``replicate -> original`` pair (the same mix trained with another seed), the gap
    between the two models' ``task`` accuracies set against their item intervals. The item bootstrap measures
    which pairs were drawn, not which seed trained the model: when two seeds differ by more than their intervals
    allow, gaps of that size between other models are not evidence of a difference. ``intervals`` as in
    :func:`zero_shot`."""
    part = intervals[intervals.task == task].set_index("model")
    out = []
    for rep, orig in replicates.items():
        if rep not in part.index or orig not in part.index:
            out.append(f"seed replicate {rep} of {orig}: not scored in this run")
            continue
        a, b = part.loc[orig], part.loc[rep]
        gap = abs(float(a.accuracy) - float(b.accuracy))
        half = max(float(a.ci_high - a.ci_low), float(b.ci_high - b.ci_low)) / 2
        verdict = (f"larger than the item intervals (±{half:.1f}) allow: the training seed moves {task} by this much, "
                   f"so gaps between models below ~{gap:.1f} points are not evidence (one pair of seeds: a rough "
                   "size, not an interval)" if _separated(a, b) else
                   f"within the item intervals (±{half:.1f}): this pair of seeds shows no seed effect beyond them")
        out.append(f"two seeds of {orig}: {task} {a.accuracy:.1f} and {b.accuracy:.1f} ({rep}), a gap of {gap:.1f} "
                   f"points, {verdict}")
    return out


def word_familiarity(table: pd.DataFrame, corpus: str = "its training stories") -> list[str]:
    """Notebook 05: per model, its accuracy over all scored pairs, then on the pairs whose words all occur most often
    in ``corpus`` (the highest threshold with pairs) against the other pairs of the same paradigms weighted alike,
    with the gap's 95 % interval. ``table`` as :func:`helpers.evaluation.word_familiarity.familiarity_table` makes it."""
    out = []
    part = table.rename(columns={"accuracy (%)": "accuracy"})
    for (kind, name), g in part.groupby(["kind", "model"], sort=False):
        everything = g[g["words seen at least"] == 0].iloc[0]
        familiar = g[(g["words seen at least"] > 0) & (g.pairs > 0)]
        line = (f"{kind} {name}: {everything.accuracy:.1f} % [{everything.ci_low:.1f}, {everything.ci_high:.1f}] over "
                f"all {int(everything.pairs):,} scored pairs")
        if familiar.empty:
            out.append(line + f"; no pair has all its words in {corpus}")
            continue
        top = familiar.iloc[-1]
        n_par = int(top.paradigms)
        line += (f"; {top.accuracy:.1f} % [{top.ci_low:.1f}, {top.ci_high:.1f}] on the {int(top.pairs):,} pairs "
                 f"({top['share of pairs (%)']:.1f} %, from {n_par} paradigm{'s' if n_par != 1 else ''}) whose every "
                 f"word occurs at least {int(top['words seen at least'])} times in {corpus} "
                 f"({CHANCE_WORDS[chance_verdict(top.ci_low, top.ci_high)]})")
        if top["matched pairs"] > 0:
            gap_lo, gap_hi = top["gap ci_low"], top["gap ci_high"]
            verdict = ("familiar words score higher beyond noise" if gap_lo > 0 else
                       "familiar words score lower beyond noise" if gap_hi < 0 else "the gap is within noise")
            line += (f"; against the other pairs of the same paradigms, weighted alike ({int(top['matched pairs']):,} "
                     f"familiar pairs matched): {top['familiar, matched (%)']:.1f} vs "
                     f"{top['rest, same paradigms (%)']:.1f} %, a gap of {top['gap (points)']:+.1f} points "
                     f"[{gap_lo:+.1f}, {gap_hi:+.1f}]: {verdict}")
        out.append(line)
    return out


def _compare(a: pd.Series, b: pd.Series, value: str) -> str:
    """How two estimates with 95 % intervals (``ci_low``/``ci_high``) relate: separated, each inside the other's
    interval, or overlapping."""
    if _separated(a, b):
        return ("the item intervals do not overlap: a difference on these items, which says nothing about the "
                "training seed (a difference is real only in the questions table, over seeds)")
    if a["ci_low"] <= b[value] <= a["ci_high"] and b["ci_low"] <= a[value] <= b["ci_high"]:
        return "each lies within the other's interval (no difference shown)"
    return "the intervals overlap (the gap may be noise)"


def self_bleu(curves: Mapping[str, Mapping[int, float]], chosen: Mapping[str, int | None], eps: float,
              intervals: pd.DataFrame | None = None) -> list[str]:
    """Notebook 03: the level and spread of each self-BLEU curve and the k its rule chose (None: a flat curve, or
    no knee within the curve's k range; :func:`helpers.diversity.self_bleu.k_choice_label`).
    With ``intervals`` (:func:`helpers.diversity.self_bleu.self_bleu_table`: model, k, self-BLEU, ci_low, ci_high, prompts),
    each model's value at the largest k shared by all models gets its 95 % interval over prompts, and models
    neighbouring in that ranking are compared over prompts (not over training seeds)."""
    out = []
    for name, curve in curves.items():
        vals = [float(v) for v in curve.values()]
        span = max(vals) - min(vals)
        k = chosen.get(name)
        if k is not None:
            verdict = f"the rule chooses k = {k}"
        elif k_choice_label(curve, k, eps).startswith("undefined"):
            verdict = f"the curve is flat (range below {eps}): the rule is undefined"
        else:
            verdict = (f"{k_choice_label(curve, k, eps)}: the curve still changes by more than {eps} after every k "
                       "with two later points, so the rule picks none")
        out.append(f"{name}: self-BLEU {min(vals):.3f}–{max(vals):.3f} over k = {min(curve)}..{max(curve)} (range "
                   f"{span:.3f}); " + verdict)
    if intervals is not None and len(intervals):
        part = intervals[intervals.model.isin(list(curves))]
        shared = set.intersection(*(set(g.k) for _, g in part.groupby("model"))) if len(part) else set()
        if shared:
            kmax = max(shared)
            at = part[part.k == kmax].sort_values("self-BLEU", ascending=False)
            out.append(f"self-BLEU at k = {kmax} with 95 % bootstrap intervals over {int(at.prompts.max())} prompts, "
                       "least diverse first: " + "; ".join(
                           f"{r.model} {r['self-BLEU']:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]" for _, r in at.iterrows()))
            for i in range(len(at) - 1):
                a, b = at.iloc[i], at.iloc[i + 1]
                out.append(f"{a.model} vs {b.model} at k = {kmax} ({a['self-BLEU'] - b['self-BLEU']:+.3f}): "
                           + _compare(a, b, "self-BLEU"))
            return out
    levels = {name: max(float(v) for v in c.values()) for name, c in curves.items()}
    if len(levels) > 1:
        lo, hi = min(levels, key=levels.get), max(levels, key=levels.get)
        out.append(f"least diverse completions (highest self-BLEU at the largest k): {hi} ({levels[hi]:.3f}); most "
                   f"diverse: {lo} ({levels[lo]:.3f}); self-BLEU is one sample of prompts, without an interval")
    return out


def continuation_health(health: pd.DataFrame, prompts: str, reference: str | None = None) -> list[str]:
    """Notebook 03: share of greedy continuations that end with end-of-text and that loop (a repeated 6-word run),
    with their Wilson intervals, for the rows whose ``prompts`` column equals ``prompts``; ``reference`` names the
    ``model`` of the row of real story endings (the loop measure's base rate)."""
    out = []
    ref = next((r for _, r in health[health.model == reference].iterrows()), None) if reference is not None else None
    for _, r in health[health.prompts == prompts].iterrows():
        line = (f"{r.model}: {r['ended (%)']:.0f} % [{r['ended CI low']:.0f}, {r['ended CI high']:.0f}] of greedy "
                f"continuations end with end-of-text, {r['loops (%)']:.0f} % [{r['loops CI low']:.0f}, "
                f"{r['loops CI high']:.0f}] contain a repeated 6-word run")
        if ref is not None:
            more = r["loops CI low"] > ref["loops CI high"]
            line += (f" ({'more' if more else 'not clearly more'} than real endings: {ref['loops (%)']:.0f} % "
                     f"[{ref['loops CI low']:.0f}, {ref['loops CI high']:.0f}])")
        out.append(line)
    return out


def encoders(table: pd.DataFrame, valid_blocks: int | None = None) -> list[str]:
    """Notebook 04: which mix predicts masked tokens best on held-out stories and on held-out BabyLM text.
    Columns: mix, "MLM acc (stories)", "MLM acc (BabyLM)" and, where given, their "… CI low" / "… CI high" (95 %,
    over the held-out blocks): then each sentence says whether best and lowest are apart beyond them."""
    out = []
    for col, what in (("MLM acc (stories)", "held-out stories"), ("MLM acc (BabyLM)", "held-out BabyLM documents")):
        ranked = table.sort_values(col, ascending=False)
        top, low, lo, hi = ranked.iloc[0], ranked.iloc[-1], f"{col} CI low", f"{col} CI high"
        line = f"{what}: best MLM accuracy {top[col]:.3f} ({top.mix}), lowest {low[col]:.3f} ({low.mix})"
        if {lo, hi} <= set(table.columns):
            apart = top[lo] > low[hi]
            line += (f"; intervals {fmt_interval(top[lo], top[hi], 3)} and {fmt_interval(low[lo], low[hi], 3)}: "
                     + ("apart" if apart else "overlapping, so the order of these two is not established"))
        out.append(line)
    if {"tiny-1M", "baby-1M"} <= set(table.mix):
        t = table.set_index("mix")
        out.append("each single-source encoder is better on its own domain: "
                   + ("yes" if (t.loc["tiny-1M", "MLM acc (stories)"] > t.loc["baby-1M", "MLM acc (stories)"]
                                and t.loc["baby-1M", "MLM acc (BabyLM)"] > t.loc["tiny-1M", "MLM acc (BabyLM)"]) else "no")
                   + f" (stories {t.loc['tiny-1M', 'MLM acc (stories)']:.3f} vs {t.loc['baby-1M', 'MLM acc (stories)']:.3f}; "
                   f"BabyLM {t.loc['baby-1M', 'MLM acc (BabyLM)']:.3f} vs {t.loc['tiny-1M', 'MLM acc (BabyLM)']:.3f})")
    blocks = f"{valid_blocks} validation blocks" if valid_blocks else "the validation blocks"
    cover = ("; their intervals cover the choice of blocks, not the run-to-run spread of training"
             if "MLM acc (stories) CI low" in table.columns else ", without an interval")
    seeds = seeds_per_arm(table.mix)
    runs = ("single runs with one seed" if max(seeds.values()) == 1 else
            f"{len(table)} encoders from {len(seeds)} mixes (" + ", ".join(f"{a}: {n} seed{'s' if n > 1 else ''}"
                                                                          for a, n in seeds.items())
            + "; the spread over a mix's seeds is the run-to-run noise)")
    out.append(f"{runs}: MLM accuracies are measured on {blocks} per domain{cover}; BLiMP with "
               "intervals follows in notebook 05")
    return out


def encoder_training(table: pd.DataFrame) -> list[str]:
    """Notebook 04, from its table (columns mix, steps, "best step", "MLM acc (stories)", "MLM acc (BabyLM)"):
    whether each encoder's best checkpoint is its last step (the validation loss was still falling: under-trained),
    and, for each mix that adds generated data (``<base>+gen-…``), its change in MLM accuracy against ``<base>``: over
    the seeds both arms share (``<mix> (seed N)``), a t-interval of the paired differences; with one shared seed, next
    to the seed gap of ``<base>`` (one rerun: a rough noise level)."""
    out = []
    at_end = table[table["best step"] >= table["steps"]]
    if len(at_end) == len(table):
        steps = sorted({int(x) for x in table["steps"]})
        out.append(f"best checkpoint = the last step ({', '.join(map(str, steps))}) for all {len(table)} encoders: the "
                   "validation loss was still falling when training stopped, so every encoder is under-trained here and "
                   "the comparisons are between unfinished runs")
    else:
        early = table[table["best step"] < table["steps"]]
        out.append(f"best checkpoint = the last step for {len(at_end)} of {len(table)} encoders (still improving); "
                   "earlier for " + ", ".join(f"{r.mix} (step {int(r['best step'])} of {int(r.steps)})"
                                             for _, r in early.iterrows()))
    acc = table.set_index("mix")[["MLM acc (stories)", "MLM acc (BabyLM)"]]
    arms: dict[str, dict[int, pd.Series]] = {}  # arm -> {seed: accuracies}; 0 = the name without "(seed N)"
    for mix in acc.index:
        arm, seed = arm_and_seed(mix, 0)
        arms.setdefault(arm, {})[seed] = acc.loc[mix]
    for arm, runs in arms.items():
        base = arm.split("+gen-")[0]
        if "+gen-" not in arm or base not in arms:
            continue
        shared = sorted(set(runs) & set(arms[base]))
        if len(shared) >= 2:  # paired seed by seed: a t-interval over the seeds' differences, per domain
            diffs = pd.DataFrame([runs[k] - arms[base][k] for k in shared])
            parts, real = [], []
            for col, domain in zip(diffs.columns, ("stories", "BabyLM")):
                mean, lo, hi, _, _ = t_interval(diffs[col])
                parts.append(f"{mean:+.3f} on {domain} {fmt_interval(lo, hi, 3)}")
                if lo > 0 or hi < 0:
                    real.append(domain)
            out.append(f"adding {arm[len(base) + 1:]} to {base}, paired over {len(shared)} seeds: MLM accuracy "
                       + ", ".join(parts) + " (95 % t-intervals over seeds): "
                       + (f"an effect on {' and '.join(real)}" if real else "no effect beyond seed noise in either domain"))
            continue
        if 0 not in runs or 0 not in arms[base]:
            continue
        effect = runs[0] - arms[base][0]
        line = (f"adding {arm[len(base) + 1:]} to {base}: MLM accuracy {effect.iloc[0]:+.3f} on stories, "
                f"{effect.iloc[1]:+.3f} on BabyLM")
        twin = next((k for k in arms[base] if k != 0), None)
        if twin is not None:
            gap = arms[base][twin] - arms[base][0]
            within = [abs(e) <= abs(g) for e, g in zip(effect, gap)]
            verdict = ("within the seed gap in both domains: not distinguishable from run-to-run noise" if all(within)
                       else "larger than the seed gap in both domains" if not any(within)
                       else "within the seed gap in one domain, larger in the other")
            line += (f"; the seed gap ({base} (seed {twin}) vs {base}, one rerun: a rough noise level) is "
                     f"{gap.iloc[0]:+.3f} and {gap.iloc[1]:+.3f}: "
                     f"{verdict}")
        else:
            line += " (no seed twin of the base mix in this run: no noise level to compare with)"
        out.append(line)
    return out


def decoders(table: pd.DataFrame, histories: Mapping[str, Sequence[Mapping]], budgets: Sequence[str],
             noise: float = 0.03) -> list[str]:
    """Notebook 02: does the best held-out loss fall with every step up in budget (the paper's Figure 1 ordering),
    are the steps larger than ``noise`` (single runs: a rerun moved losses by 0.01–0.015 nats), and does the
    smallest budget overfit: its validation minimum comes before its last evaluation, by how much the loss has
    risen since (``histories[budget]``: the training history, rows with step, split, loss). Then one line per
    budget: passes over its data trained, best and last step, early stop, wall time. ``table`` columns: budget,
    "passes trained" (epochs actually run, early stop included), "best step",
    "last step", "stopped early", "best valid loss", "wall time (min)"."""
    order = {b: i for i, b in enumerate(budgets)}
    ordered = table[table.budget.isin(order)].sort_values("budget", key=lambda s: s.map(order))
    if ordered.empty:
        return ["no decoder results in this run"]
    out = []
    losses = [float(x) for x in ordered["best valid loss"]]
    gaps = [a - b for a, b in zip(losses, losses[1:])]
    chain = " → ".join(f"{b} {l:.3f}" for b, l in zip(ordered.budget, losses))  # in budget order
    if gaps:
        falls = all(g > 0 for g in gaps)
        out.append(("best held-out loss falls strictly with the budget" if falls else
                    "best held-out loss does NOT fall strictly with the budget") + f": {chain}; steps between "
                   "neighbours: " + ", ".join(f"{g:+.3f}" for g in gaps)
                   + (f" (each above the ~{noise} noise level)" if all(g > noise for g in gaps)
                      else f" (some within the ~{noise} noise level: single runs, those steps may be noise)"))
    else:
        out.append(f"one budget only: {chain}")
    small = ordered.iloc[0]
    valid = sorted((int(h["step"]), float(h["loss"])) for h in histories.get(small.budget, ()) if h["split"] == "valid")
    if valid:
        best_step, best_loss = min(valid, key=lambda x: (x[1], x[0]))
        last_step, last_loss = valid[-1]
        rise = last_loss - best_loss
        if best_step < last_step:
            epochs = float(small["passes trained"]) * best_step / max(int(small["last step"]), 1)
            line = (f"{small.budget}: validation minimum {best_loss:.3f} at step {best_step}, then {last_loss:.3f} at "
                    f"its last evaluation (step {last_step}, {rise:+.3f})")
            line += (f": it overfits after {epochs:.1f} epochs" if rise > noise else
                     f": past its minimum after {epochs:.1f} epochs, the rise within the ~{noise} noise level")
        else:
            line = f"{small.budget}: validation loss lowest at its last evaluation (step {last_step}): no overfitting visible within this run"
        out.append(line)
    else:
        out.append(f"{small.budget}: no validation history, overfitting not assessed")
    for _, r in ordered.iterrows():
        out.append(f"{r.budget}: {r['passes trained']} passes over its data trained, best at step {r['best step']} of {r['last step']}"
                   f"{' (stopped early)' if r['stopped early'] == 'yes' else ''}; {r['wall time (min)']:.1f} min")
    return out + _loss_seed_gaps(table, order, noise)


def _loss_seed_gaps(table: pd.DataFrame, order: Mapping[str, int], noise: float) -> list[str]:
    """One line per budget trained under several seeds (rows ``"<budget> (seed N)"``): the best held-out losses per
    seed and their largest gap, against the single-run ``noise`` assumed above."""
    twins = table[~table.budget.isin(order)]
    out = []
    for budget in order:
        seeds = twins[twins.budget.map(lambda n: arm_and_seed(n, -1)[0]) == budget]
        if seeds.empty:
            continue
        rows = pd.concat([table[table.budget == budget], seeds])
        losses = [float(x) for x in rows["best valid loss"]]
        labels = [str(r.get("seed", arm_and_seed(r.budget, -1)[1])) for _, r in rows.iterrows()]
        gap = max(losses) - min(losses)
        out.append(f"{budget} under {len(losses)} seeds ({', '.join(labels)}): best held-out loss "
                   + " / ".join(f"{x:.3f}" for x in losses) + f", largest gap {gap:.3f} nats"
                   + (f" (above the ~{noise} assumed for single runs)" if gap > noise else f" (within the ~{noise} assumed for single runs)"))
    return out


def repetition_finetune(history: pd.DataFrame) -> list[str]:
    """Notebook 02: per budget, what repetition fine-tuning changed on its held-out probe prompts (share of greedy
    continuations that loop, with Wilson intervals, that end, and that are healthy: ended without a loop; and the
    held-out loss), from the probe of the plain model (step 0) to the probe of the checkpoint kept (step 0 again
    when no fine-tuned checkpoint was healthier). ``history``: rows of
    :func:`helpers.training.unlikelihood.history_rows` (budget, step, loops with its ``loops low``/``high``,
    ended, valid loss, chosen) and the probe size in ``probe prompts``."""
    if history.empty:
        return ["repetition fine-tuning is off in this profile: the decoders are the plain best-validation models"]
    out = []
    for budget, h in history.groupby("budget", sort=False):
        before, after = h[h.step == 0].iloc[0], h[h.chosen].iloc[0]
        n = int(h["probe prompts"].iloc[0])
        (lo_b, hi_b), (lo_a, hi_a) = ((r["loops low"], r["loops high"]) for r in (before, after))
        apart = hi_a < lo_b  # fewer loops, beyond the intervals
        out.append(f"{budget}: greedy continuations that loop {100 * before.loops:.0f} % [{100 * lo_b:.0f}, "
                   f"{100 * hi_b:.0f}] -> {100 * after.loops:.0f} % [{100 * lo_a:.0f}, {100 * hi_a:.0f}] of {n} "
                   f"held-out prompts ({'intervals apart' if apart else 'intervals overlap: not clearly fewer'}), "
                   f"that end {100 * before.ended:.0f} % -> {100 * after.ended:.0f} %, healthy (ended, no loop) "
                   f"{100 * before.healthy:.0f} % -> {100 * after.healthy:.0f} %, held-out loss "
                   f"{before['valid loss']:.3f} -> {after['valid loss']:.3f} "
                   f"({after['valid loss'] - before['valid loss']:+.3f} nats; "
                   + (f"checkpoint of step {int(after.step)})" if after.step else "no fine-tuned checkpoint was healthier: "
                      "the plain model is kept)"))
    return out
