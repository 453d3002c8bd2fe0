"""Zero-shot minimal pairs (docs/methods.md#minimal-pairs): batched causal scores against plain one-sentence forwards, PLL against a
one-mask-at-a-time loop (both reductions, mixed lengths, both MLM code paths), the token cap per forward, seeded
ties, aggregation on hand-made rows, the bundled data (counts, EWoK's swapped twins), oracle/reversed scorers,
caching, and the transcribed paper tables."""
from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import transformers

from helpers.evaluation import zero_shot as ev, lm_scoring as LS, minimal_pairs as MP
from helpers.models.decoder import DecoderSpec, build_decoder, disable_fast_attention
from helpers.models.ltg_bert import LtgBertForMaskedLM, ltg_bert_config

transformers.logging.set_verbosity_error()
REPO = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


# ----------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def some_items() -> list[MP.Item]:
    """A few real pairs of every task, of clearly different lengths."""
    b = MP.load_blimp(limit_per_task=1, seed=3)[:6]
    s = MP.load_supplement(limit_per_task=1, seed=3)[:3]
    e = MP.load_ewok(limit_per_task=1, seed=3)[:3]
    return b + s + e


@pytest.fixture(scope="module")
def decoder(decoder_tokenizer):
    tok = decoder_tokenizer
    spec = DecoderSpec(hidden=32, layers=2, heads=2, context=128, window=8, vocab_size=len(tok), dropout=0.0)
    eot = tok.eos_token_id
    return build_decoder(spec, seed=0, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot).eval()


@pytest.fixture(scope="module")
def encoder(encoder_tokenizer):
    torch.manual_seed(0)
    cfg = ltg_bert_config("smoke", len(encoder_tokenizer), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                          pad_token_id=encoder_tokenizer.pad_token_id, cls_token_id=encoder_tokenizer.cls_token_id,
                          sep_token_id=encoder_tokenizer.sep_token_id, mask_token_id=encoder_tokenizer.mask_token_id)
    return LtgBertForMaskedLM(cfg).eval()


def _requests(items, context=True):
    return [(it.context if context else None, t) for it in items for t in (it.good, it.bad)]


# ----------------------------------------------------------------------------------------------- causal


def _plain_causal(model, tok, ctx, text):
    c, t = LS._split_encode(tok, ctx, text, " ")
    ids = torch.tensor([[tok.eos_token_id] + c + t])
    with torch.no_grad():
        lp = torch.log_softmax(model(ids).logits[0].double(), -1)
    n0 = 1 + len(c)
    return sum(float(lp[n0 - 1 + j, t[j]]) for j in range(len(t))), len(t)


def test_causal_batched_matches_plain_forward(decoder, decoder_tokenizer, some_items):
    reqs = _requests(some_items)
    lens = [len(LS._split_encode(decoder_tokenizer, c, t, " ")[0] + LS._split_encode(decoder_tokenizer, c, t, " ")[1])
            for c, t in reqs]
    assert max(lens) > 3 * min(lens) and max(lens) > 8  # padding in a batch, and longer than the local window
    sums, counts = LS.causal_scores(decoder, decoder_tokenizer, reqs, batch_size=5)
    masked, _ = LS.causal_scores(decoder, decoder_tokenizer, reqs, batch_size=5, mask_padding=True)
    eager = disable_fast_attention(copy.deepcopy(decoder)).eval()  # HF's own attention, one sentence at a time
    for (c, t), s, m, n in zip(reqs, sums, masked, counts):
        ref, ref_n = _plain_causal(eager, decoder_tokenizer, c, t)
        assert n == ref_n
        assert s == pytest.approx(ref, abs=1e-4) and m == pytest.approx(ref, abs=1e-4)
    # batch size does not matter; a repeated request gets the same score
    again, _ = LS.causal_scores(decoder, decoder_tokenizer, reqs + reqs[:2], batch_size=64)
    np.testing.assert_allclose(again[: len(reqs)], sums, atol=1e-4)
    assert again[-2:].tolist() == again[:2].tolist()


def test_causal_context_split_follows_lm_eval(decoder_tokenizer):
    tok = decoder_tokenizer
    c, t = LS._split_encode(tok, "The cat sat on the mat.", "It was happy.", " ")
    assert t == tok(" It was happy.", add_special_tokens=False)["input_ids"]
    assert c + t == tok("The cat sat on the mat. It was happy.", add_special_tokens=False)["input_ids"]
    assert LS._split_encode(tok, None, "It was happy.", " ")[0] == []
    reqs = [("The cat sat on the mat.", "It was happy."), (None, "It was happy."), ("A dog ran.  ", "Then it slept.")]
    assert LS._encode_all(tok, reqs, " ") == [LS._split_encode(tok, c, t, " ") for c, t in reqs]


# ----------------------------------------------------------------------------------------------- masked LMs


def _one_mask_loop(model, tok, ctx, text):
    c, t = LS._split_encode(tok, ctx, text, " ")
    ids = [tok.cls_token_id] + c + t + [tok.sep_token_id]
    total = 0.0
    for j in range(len(t)):
        p = 1 + len(c) + j
        x = torch.tensor([ids])
        x[0, p] = tok.mask_token_id
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=x, attention_mask=torch.ones_like(x)).logits[0, p].double(), -1)
        total += float(lp[ids[p]])
    return total, len(t)


class Counting(torch.nn.Module):
    """Forwards to an MLM without its masked-only head path (so the generic path runs) and records the number of
    tokens (rows × padded length) of every forward."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.tokens: list[int] = []

    def forward(self, input_ids=None, attention_mask=None, **kw):
        self.tokens.append(input_ids.numel())
        return self.inner(input_ids=input_ids, attention_mask=attention_mask)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_pll_matches_one_mask_loop(encoder, encoder_tokenizer, some_items, reduction):
    items = some_items
    rows = ev.score_items(items, lambda r: LS.mlm_scores(encoder, encoder_tokenizer, r, max_tokens=4096),
                         reduction=reduction)
    generic = ev.score_items(items, lambda r: LS.mlm_scores(Counting(encoder), encoder_tokenizer, r, max_tokens=4096),
                             reduction=reduction)
    lengths = set()
    for it, row, grow in zip(items, rows, generic):
        for text, key, nkey in ((it.good, "score_good", "n_good"), (it.bad, "score_bad", "n_bad")):
            s, n = _one_mask_loop(encoder, encoder_tokenizer, it.context, text)
            ref = s / n if reduction == "mean" else s
            assert row[nkey] == n
            lengths.add(n)
            assert row[key] == pytest.approx(ref, abs=1e-4)
            assert grow[key] == pytest.approx(ref, abs=1e-4)
    assert len(lengths) > 4  # sentences of many lengths went through the same batches


def test_pll_token_cap_per_forward(encoder, encoder_tokenizer, some_items):
    reqs = _requests(some_items)
    free, n_free = LS.mlm_scores(encoder, encoder_tokenizer, reqs, max_tokens=100_000)
    for cap in (64, 97):
        counted = Counting(encoder)
        capped, n_capped = LS.mlm_scores(counted, encoder_tokenizer, reqs, max_tokens=cap)
        assert max(counted.tokens) <= cap
        assert len(counted.tokens) > 10
        np.testing.assert_allclose(capped, free, atol=1e-4)
        assert n_capped.tolist() == n_free.tolist()
    with pytest.raises(ValueError, match="max_tokens"):
        LS.mlm_scores(encoder, encoder_tokenizer, reqs, max_tokens=8)


def test_mlm_batches_pack_all_copies_under_the_cap():
    lengths, n_masks = [5, 12, 7, 30, 3], [3, 10, 5, 28, 1]
    batches = LS.mlm_batches(lengths, n_masks, 60)
    flat = [job for b in batches for job in b]
    assert sorted(flat) == sorted((i, k) for i in range(5) for k in range(n_masks[i]))
    for b in batches:
        assert len(b) * max(lengths[i] for i, _ in b) <= 60


# ----------------------------------------------------------------------------------------------- pairs and ties


def _items(n, task="blimp", paradigm="p"):
    return [MP.Item(task, paradigm, "X", str(i), f"good {i}", f"bad {i}") for i in range(n)]


def test_ties_counted_and_broken_by_seed():
    items = _items(400)
    const = lambda reqs: np.zeros(len(reqs))  # noqa: E731
    a = ev.score_items(items, const, seed=1)
    b = ev.score_items(items, const, seed=1)
    c = ev.score_items(items, const, seed=2)
    assert all(r["tie"] for r in a)
    assert [r["correct"] for r in a] == [r["correct"] for r in b]
    assert [r["correct"] for r in a] != [r["correct"] for r in c]
    acc = np.mean([r["correct"] for r in a])
    assert 0.4 < acc < 0.6
    # the coin of an item does not depend on the other items scored with it
    sub = ev.score_items(items[100:150], const, seed=1)
    assert [r["correct"] for r in sub] == [r["correct"] for r in a[100:150]]
    assert ev.summarise(a)["task"].loc[0, "ties"] == 400
    # no tie when the scores differ, even by a hair
    d = ev.score_items(items[:3], lambda reqs: np.array([1.0, 1.0 - 1e-12] * 3))
    assert [r["tie"] for r in d] == [False] * 3 and all(r["correct"] for r in d)


def test_mean_reduction_needs_counts_and_divides():
    items = _items(2)
    with pytest.raises(ValueError, match="counts"):
        ev.score_items(items, lambda reqs: np.zeros(len(reqs)), reduction="mean")
    rows = ev.score_items(items, lambda reqs: (np.array([-6.0, -4.0, -6.0, -4.0]), np.array([3, 1, 6, 1])),
                          reduction="mean")
    assert [r["score_good"] for r in rows] == [-2.0, -1.0] and [r["score_bad"] for r in rows] == [-4.0, -4.0]
    assert [r["correct"] for r in rows] == [True, True]  # per token the good sentences win ...
    summed = ev.score_items(items, lambda reqs: (np.array([-6.0, -4.0, -6.0, -4.0]), np.array([3, 1, 6, 1])))
    assert [r["correct"] for r in summed] == [False, False]  # ... summed, the shorter bad ones do


# ----------------------------------------------------------------------------------------------- aggregation


def _row(task, paradigm, phen, i, correct, tie=False):
    return {"task": task, "paradigm": paradigm, "phenomenon": phen, "pair_id": str(i), "score_good": 0.0,
            "score_bad": 0.0, "correct": correct, "tie": tie}


def test_summarise_hand_made_rows():
    rows = ([_row("blimp", "A", "X", i, c) for i, c in enumerate([1, 1, 0, 0])]  # 50 %
            + [_row("blimp", "B", "X", i, c) for i, c in enumerate([1, 1, 1, 1])]  # 100 %
            + [_row("blimp", "C", "Y", i, c, tie=(i == 0)) for i, c in enumerate([1, 0])]  # 50 %, one tie
            + [_row("ewok", "d1", "d 1", i, c) for i, c in enumerate([1, 0, 0, 0])]  # 25 %
            + [_row("ewok", "d2", "d 2", i, c) for i, c in enumerate([1, 1])])  # 100 %
    s = ev.summarise(rows)
    par = s["paradigm"].set_index("paradigm")
    assert par.loc["A", "accuracy"] == 50 and par.loc["B", "accuracy"] == 100 and par.loc["C", "ties"] == 1
    phe = s["phenomenon"].set_index(["task", "phenomenon"])
    assert phe.loc[("blimp", "X"), "accuracy"] == 75 and phe.loc[("blimp", "X"), "paradigms"] == 2
    assert phe.loc[("blimp", "Y"), "accuracy"] == 50
    task = s["task"].set_index("task")
    assert task.loc["blimp", "accuracy"] == pytest.approx(200 / 3)  # mean over paradigms
    assert task.loc["blimp", "accuracy_phenomena"] == pytest.approx(62.5)
    assert task.loc["blimp", "accuracy_pairs"] == pytest.approx(70.0)
    assert task.loc["blimp", "ties"] == 1 and task.loc["blimp", "pairs"] == 10
    assert task.loc["ewok", "accuracy"] == pytest.approx(62.5) and task.loc["ewok", "accuracy_pairs"] == pytest.approx(50)
    assert list(s["task"]["task"]) == ["blimp", "ewok"]  # TASKS order
    ov = s["overall"].iloc[0]
    assert ov["BLiMP"] == pytest.approx(200 / 3) and ov["EWoK"] == pytest.approx(62.5)
    assert ov["average"] == pytest.approx((200 / 3 + 62.5) / 2)


# ----------------------------------------------------------------------------------------------- bundled data


@pytest.fixture(scope="module")
def all_items() -> dict[str, list[MP.Item]]:
    return {t: MP.load_task(t) for t in MP.TASKS}


def test_loaders_read_the_bundled_files(all_items):
    from helpers.data.corpora import loaded_files

    counts = {t: (len({i.paradigm for i in v}), len(v)) for t, v in all_items.items()}
    assert counts == {"blimp": (67, 59_875), "supplement": (5, 5_218), "ewok": (11, 7_618)}
    blimp = all_items["blimp"]
    assert {i.phenomenon for i in blimp} == set(MP.BLIMP_PHENOMENA.values()) and len(set(MP.BLIMP_PHENOMENA.values())) == 12
    first = next(i for i in blimp if i.paradigm == "adjunct_island")
    assert (first.good, first.bad, first.pair_id) == ("Who should Derek hug after shocking Richard?",
                                                     "Who should Derek hug Richard after shocking?", "0")
    assert {i.phenomenon for i in all_items["supplement"]} == set(MP.SUPPLEMENT_NAMES.values())
    ewok = all_items["ewok"]
    assert all(i.context for i in ewok) and "agent properties" in {i.phenomenon for i in ewok}
    assert sum(f.startswith("data/babylm_eval/") for f in loaded_files()) >= 67 + 5 + 11
    # paradigm ids are unique within a paradigm
    for t, v in all_items.items():
        assert len({(i.paradigm, i.pair_id) for i in v}) == len(v), t


def test_full_blimp_and_subsampling():
    full = MP.load_blimp("full")
    assert len(full) == 67_000 and len({i.paradigm for i in full}) == 67
    a = MP.load_task("ewok", limit_per_task=7, seed=5)
    b = MP.load_task("ewok", limit_per_task=7, seed=5)
    c = MP.load_task("ewok", limit_per_task=7, seed=6)
    assert a == b and a != c and len(a) == 77
    assert max(pd.Series([i.paradigm for i in a]).value_counts()) == 7
    # a sample keeps the file order
    ids = [int(i.pair_id) for i in a if i.paradigm == "agent-properties"]
    assert ids == sorted(ids)


def test_oracle_and_reversed_scorers(all_items):
    items = [i for v in all_items.values() for i in v]
    oracle = lambda reqs: np.tile([1.0, 0.0], len(reqs) // 2)  # noqa: E731  requests come as (good, bad) per item
    s = ev.summarise(ev.score_items(items, oracle))
    assert (s["paradigm"]["accuracy"] == 100).all() and s["overall"].loc[0, "average"] == 100
    rev = ev.summarise(ev.score_items(items, lambda reqs: -oracle(reqs)))
    assert (rev["paradigm"]["accuracy"] == 0).all() and rev["overall"].loc[0, "ties"] == 0


def test_context_free_ewok_scores_exactly_half(all_items):
    """Every EWoK item appears again with contexts and targets swapped: a score that ignores the context (the 2024
    hf-mlm wrapper) is right on exactly one of each twin pair."""
    import zlib

    free = lambda reqs: np.array([zlib.crc32(t.encode()) for _, t in reqs], dtype=float)  # noqa: E731
    s = ev.summarise(ev.score_items(all_items["ewok"], free))
    assert (s["paradigm"]["accuracy"] == 50).all()
    same = ev.summarise(ev.score_items(all_items["ewok"], free, ewok_context=False))
    assert (same["paradigm"]["accuracy"] == 50).all()


# ----------------------------------------------------------------------------------------------- top level


def test_evaluate_model_caches_per_task(decoder, decoder_tokenizer, tmp_path):
    logs: list[str] = []
    kw = dict(tasks=("supplement", "ewok"), limit_per_task=2, out_dir=tmp_path, name="tiny", progress=False,
              log=logs.append)
    res = ev.evaluate_model(decoder, decoder_tokenizer, "causal", **kw)
    assert len(res.rows) == 5 * 2 + 11 * 2 and set(res.files) == {"supplement", "ewok"}
    assert set(res.by_task["task"]) == {"supplement", "ewok"} and len(res.by_paradigm) == 16
    assert sum(l.startswith("[run ]") for l in logs) == 2
    logs.clear()
    again = ev.evaluate_model(decoder, decoder_tokenizer, "causal", **kw)
    assert sum(l.startswith("[skip]") for l in logs) == 2 and again.rows == res.rows
    changed = copy.deepcopy(decoder)
    with torch.no_grad():
        changed.transformer.ln_f.weight.add_(0.5)
    logs.clear()
    ev.evaluate_model(changed, decoder_tokenizer, "causal", **kw)
    assert sum(l.startswith("[run ]") for l in logs) == 2
    logs.clear()
    ev.evaluate_model(decoder, decoder_tokenizer, "causal", **{**kw, "seed": 1})
    assert sum(l.startswith("[run ]") for l in logs) == 2
    with pytest.raises(ValueError, match="reduction"):
        ev.evaluate_model(decoder, decoder_tokenizer, "causal", reduction="mean", **kw)
    with pytest.raises(ValueError, match="unknown task"):
        ev.evaluate_model(decoder, decoder_tokenizer, "causal", tasks=("glue",), progress=False)


def test_a_limit_per_task_keys_each_tasks_cache_by_its_own_number(decoder, decoder_tokenizer, tmp_path):
    logs: list[str] = []
    kw = dict(tasks=("supplement", "ewok"), out_dir=tmp_path, name="tiny", progress=False, log=logs.append)
    before = ev.evaluate_model(decoder, decoder_tokenizer, "causal", limit_per_task=2, **kw)
    logs.clear()  # raising one task's sample re-scores that task only; the other keeps its cached rows
    after = ev.evaluate_model(decoder, decoder_tokenizer, "causal", limit_per_task={"supplement": 2, "ewok": 3}, **kw)
    steps = [m.groups() for m in (re.match(r"\[(skip|run )\] tiny (\w+)", l) for l in logs) if m]
    assert steps == [("skip", "supplement"), ("run ", "ewok")]
    counts = after.by_task.set_index("task")["pairs"]
    assert counts["supplement"] == 5 * 2 and counts["ewok"] == 11 * 3
    assert [r for r in after.rows if r["task"] == "supplement"] == [r for r in before.rows if r["task"] == "supplement"]
    with pytest.raises(ValueError, match="gives no limit for 'ewok'"):
        ev.evaluate_model(decoder, decoder_tokenizer, "causal", limit_per_task={"supplement": 2}, **kw)


def test_evaluate_model_mlm_rows_are_auditable(encoder, encoder_tokenizer):
    res = ev.evaluate_model(encoder, encoder_tokenizer, "mlm", tasks=("blimp",), reduction="mean", limit_per_task=1,
                            max_tokens=512, progress=False)
    assert len(res.rows) == 67 and res.settings.reduction == "mean"
    r = res.rows[0]
    assert set(r) >= {"task", "paradigm", "phenomenon", "pair_id", "score_good", "score_bad", "correct", "tie"}
    assert r["correct"] == (r["score_good"] > r["score_bad"]) or r["tie"]
    assert len(res.by_phenomenon) == 12



def test_evaluate_saved_scores_a_saved_folder_as_the_model_in_memory(decoder, decoder_tokenizer, encoder,
                                                                    encoder_tokenizer, tmp_path):
    """The folder-based entry point (what notebook 05 hands to worker processes) gives the same rows as scoring the
    model object: a decoder and an LTG-BERT encoder saved with their tokenizers."""
    for kind, model, tok in [("causal", decoder, decoder_tokenizer), ("mlm", encoder, encoder_tokenizer)]:
        folder = tmp_path / kind
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
        kw = dict(tasks=("supplement",), limit_per_task=1, progress=False)
        if kind == "mlm":
            kw.update(reduction="mean", max_tokens=512)
        ours = ev.evaluate_saved(folder, kind, **kw)
        direct = ev.evaluate_model(model, tok, kind, **kw)
        assert ours.rows == direct.rows and len(ours.rows) == 5


def test_evaluate_many_scores_a_runs_decoders_and_encoders_as_one_by_one(decoder, decoder_tokenizer, encoder,
                                                                         encoder_tokenizer, tmp_path):
    """Notebook 05's zero-shot step: every ``decoders/<name>/best`` and ``encoders/<name>/best`` of a run folder,
    keyed ``(kind, name)``, each as :func:`evaluate_saved` scores it, items cached under ``eval/``."""
    for folder, model, tok in (("decoders/d1", decoder, decoder_tokenizer), ("decoders/d2", decoder, decoder_tokenizer),
                               ("encoders/e1", encoder, encoder_tokenizer)):
        model.save_pretrained(tmp_path / folder / "best")
        tok.save_pretrained(tmp_path / folder / "best")
    enc_kw = dict(reduction="mean", max_tokens=512, limit_per_task=1)
    zero = ev.evaluate_many(tmp_path, ["d2", "d1"], ["e1"], ("supplement",), 1,
                            decoder_kwargs=dict(limit_per_task=1), encoder_kwargs=enc_kw)
    assert list(zero) == [("decoder", "d2"), ("decoder", "d1"), ("encoder", "e1")]
    alone = ev.evaluate_saved(tmp_path / "encoders/e1/best", "mlm", ("supplement",), progress=False, **enc_kw)
    assert zero[("encoder", "e1")].rows == alone.rows and len(alone.rows) == 5
    assert zero[("decoder", "d1")].rows == zero[("decoder", "d2")].rows  # the same weights under two names
    assert (tmp_path / "eval" / "decoders" / "d1" / "supplement.jsonl").is_file()


# ----------------------------------------------------------------------------------------------- paper tables

REF = REPO / "params" / "paper_reference"
TABLE_COLUMNS = {
    "table1_gpt_neo_decoders.csv": {"table", "model", "training_data", "total_words", "blimp", "supplement", "ewok",
                                   "average", "marked_old", "note"},
    "table2_strict_small_10m.csv": {"table", "track", "model", "training_data", "total_words", "blimp", "supplement",
                                    "ewok", "ewok_alt", "glue", "average", "average_alt", "marked_old", "note"},
    "table3_strict_100m.csv": {"table", "track", "model", "training_data", "total_words", "blimp", "supplement",
                               "ewok", "ewok_alt", "glue", "average", "average_alt", "marked_old", "note"},
    "table4_blimp_phenomena_100m.csv": {"table", "track", "phenomenon", "ltg_bert_baseline", "baby_100m", "tiny_100m",
                                        "tiny_100m_gen_100m", "baby_50m_tiny_50m", "baby_50m_tiny_50m_gen_50m"},
    "table5_ewok_domains_100m.csv": {"table", "track", "domain", "ltg_bert_baseline", "baby_100m", "tiny_100m",
                                     "tiny_100m_gen_100m", "baby_50m_tiny_50m", "baby_50m_tiny_50m_gen_50m"},
    "table6_supplement_100m.csv": {"table", "track", "task", "ltg_bert_baseline", "baby_100m", "tiny_100m",
                                   "tiny_100m_gen_100m", "baby_50m_tiny_50m", "baby_50m_tiny_50m_gen_50m"},
    "table7_glue_100m.csv": {"table", "track", "model", "training_data", "cola", "sst2", "mrpc", "qqp", "mnli",
                             "mnli-mm", "qnli", "rte", "boolq", "multirc", "wsc"},
    "babylm2024_baselines.csv": {"track", "model", "training_data", "total_words", "blimp", "supplement", "ewok",
                                 "glue", "average", "source"},
}


def test_paper_reference_tables():
    files = {p.name for p in REF.glob("*.csv")}
    assert files == set(TABLE_COLUMNS)
    t = {name: pd.read_csv(REF / name) for name in files}
    for name, cols in TABLE_COLUMNS.items():
        assert set(t[name].columns) == cols, name
    base = t["babylm2024_baselines.csv"].set_index(["model", "track"])
    assert base.loc[("LTG-BERT", "strict-small"), ["blimp", "supplement", "ewok", "glue"]].tolist() == [60.6, 60.8, 48.9, 60.3]
    assert base.loc[("LTG-BERT", "strict"), ["blimp", "supplement", "ewok", "glue"]].tolist() == [69.2, 66.5, 51.9, 68.4]
    assert base.loc[("BabyLlama", "strict-small"), ["blimp", "supplement", "ewok", "glue"]].tolist() == [69.8, 59.5, 50.7, 63.3]
    assert base.loc[("BabyLlama", "strict"), ["blimp", "supplement", "ewok", "glue"]].tolist() == [73.1, 60.6, 52.1, 69.0]
    t1 = t["table1_gpt_neo_decoders.csv"].set_index("training_data")
    assert t1.loc["5M", ["blimp", "supplement", "ewok", "average"]].tolist() == [55.5, 53.8, 51.1, 53.5]
    assert t1.loc["373M (full)", "blimp"] == 64.8 and len(t1) == 8
    t2 = t["table2_strict_small_10m.csv"]
    lb = t2[t2["model"] == "LTG-BERT (baseline)"].iloc[0]
    assert (lb["blimp"], lb["ewok"], lb["ewok_alt"], lb["average_alt"]) == (60.6, 48.9, 63.0, 61.1)
    nuc5 = t2[t2["training_data"] == "baby-5M + tiny-5M + gen-nucleus-5"].iloc[0]
    assert (nuc5["total_words"], nuc5["glue"], nuc5["average"]) == ("33M", 69.4, 64.4)
    t4 = t["table4_blimp_phenomena_100m.csv"].set_index("phenomenon")
    assert len(t4) == 13 and t4.loc["Ellipsis", "tiny_100m"] == 38.8 and t4.loc["Accuracy", "ltg_bert_baseline"] == 69.2
    assert set(t4.index[:-1]) == set(MP.BLIMP_PHENOMENA.values())
    # the baseline's "Accuracy" is the per-paradigm mean, not the mean of its phenomenon rows
    assert t4["ltg_bert_baseline"].iloc[:-1].mean() == pytest.approx(66.69, abs=0.01)
    t5 = t["table5_ewok_domains_100m.csv"].set_index("domain")
    assert len(t5) == 12 and t5.loc["physical dynamics", "ltg_bert_baseline"] == 41.7
    assert set(t5.index[:-1]) == {MP.ewok_domain_name(p.name.split(".")[0]) for p in MP.task_files("ewok")}
    t6 = t["table6_supplement_100m.csv"].set_index("task")
    assert t6.loc["Subject-Auxiliary Inversion", "ltg_bert_baseline"] == 87.5
    assert set(t6.index[:-1]) == set(MP.SUPPLEMENT_NAMES.values())
    assert t6["ltg_bert_baseline"].iloc[:-1].mean() == pytest.approx(t6.loc["Average", "ltg_bert_baseline"], abs=0.05)
    t7 = t["table7_glue_100m.csv"].iloc[0]
    assert (t7["cola"], t7["wsc"]) == (44.1, 62.0)
    # averages printed with a row agree with its columns where all four are given (Tables 2-3)
    for name in ("table2_strict_small_10m.csv", "table3_strict_100m.csv"):
        full = t[name].dropna(subset=["blimp", "supplement", "ewok", "glue", "average"])
        assert len(full) >= 6
        mean = full[["blimp", "supplement", "ewok", "glue"]].mean(axis=1)
        assert (mean - full["average"]).abs().max() <= 0.06, name


# ----------------------------------------------------------------------------- intervals


def test_paradigm_mean_interval_matches_an_item_bootstrap():
    """The binomial shortcut equals a bootstrap that resamples items within each paradigm (same distribution:
    the two intervals agree to within Monte-Carlo noise), is seeded, and narrows with more items."""
    rng = np.random.default_rng(5)
    pairs, correct = np.array([40, 60, 100]), np.array([22, 40, 51])
    lo, hi = ev.paradigm_mean_interval(pairs, correct, seed=1)
    assert (lo, hi) == ev.paradigm_mean_interval(pairs, correct, seed=1)
    point = 100 * np.mean(correct / pairs)
    assert lo < point < hi
    items = [np.r_[np.ones(k), np.zeros(n - k)] for n, k in zip(pairs, correct)]
    reps = [100 * np.mean([rng.choice(x, len(x)).mean() for x in items]) for _ in range(4000)]
    ref_lo, ref_hi = np.quantile(reps, [0.025, 0.975])
    assert abs(lo - ref_lo) < 0.8 and abs(hi - ref_hi) < 0.8
    lo10, hi10 = ev.paradigm_mean_interval(pairs * 10, correct * 10, seed=1)
    assert hi10 - lo10 < (hi - lo) / 2
    with pytest.raises(ValueError):
        ev.paradigm_mean_interval([5], [6])


def test_summarise_reports_intervals():
    rows = [{"task": "blimp", "paradigm": p, "phenomenon": "x", "correct": i % 3 != 0, "tie": False}
            for p in ("a", "b") for i in range(30)]
    s = ev.summarise(rows)
    t = s["task"].iloc[0]
    assert t.ci_low < t.accuracy < t.ci_high
    o = s["overall"].iloc[0]
    assert o.average_ci_low < o.average < o.average_ci_high


def test_a_plain_decoder_name_is_read_from_mle_best_beside_its_tuned_best():
    from helpers.evaluation import zero_shot as Z
    assert Z.model_folder("R", "decoder", "tiny-1M") == Path("R/decoders/tiny-1M/best")
    assert Z.model_folder("R", "decoder", "tiny-1M (plain)") == Path("R/decoders/tiny-1M/mle-best")
    assert Z.model_folder("R", "decoder", "tiny-1M (plain) (seed 7)") == Path("R/decoders/tiny-1M (seed 7)/mle-best")
    assert Z.model_folder("R", "encoder", "x (plain)") == Path("R/encoders/x (plain)/best")  # encoders have no plain model
