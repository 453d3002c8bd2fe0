"""(Super)GLUE fine-tuning: task table on the real bundled files, templates, carved splits, metrics, a training
loop that learns, checkpoint selection on dev only, and the results cache."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from helpers.evaluation import classifier as clf, finetune as ft, finetune_setup as fs, glue_tasks as gt
from helpers.data.corpora import DataError
from helpers.evaluation.finetune_setup import FinetuneConfig, TaskData, finetune_config
from helpers.evaluation.glue_tasks import SCALED, STANDARD, TASK_NAMES, TASKS, Example, accuracy, carve_splits, f1_binary, mcc, render

ALL_TASKS = ["boolq", "cola", "mnli", "mnli-mm", "mrpc", "multirc", "qnli", "qqp", "rte", "sst2", "wsc"]
WITH_TRAIN = {"cola", "mrpc", "rte", "wsc"}


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


# --------------------------------------------------------------------------------------------- synthetic task

_SUBJ = ["the cat", "a dog", "my friend", "the little girl", "tom", "the old man", "a bird", "the teacher"]
_VERB = ["was", "felt", "looked", "seemed"]
_TAIL = ["today", "at the park", "in the morning", "after lunch", "with his mother", "near the river", ""]


def synthetic(n: int, seed: int, prefix: str) -> list[Example]:
    """Sentences that contain "good" (label 1) or "bad" (label 0), otherwise random filler."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = i % 2
        s = f"{rng.choice(_SUBJ)} {rng.choice(_VERB)} {'good' if label else 'bad'} {rng.choice(_TAIL)}".strip()
        out.append(Example(f"{prefix}:{i}", s, None, label, f"{prefix}:{i}"))
    return out


def synthetic_data(n_train=240, n_dev=64, n_test=64) -> TaskData:
    return TaskData("syn", 2, "accuracy", STANDARD, synthetic(n_train, 1, "tr"), synthetic(n_dev, 2, "dev"),
                    {"syn": synthetic(n_test, 3, "te")}, {"syn": "accuracy"},
                    {"train": "synthetic", "dev": "synthetic", "syn": "synthetic"}, ("bad", "good"))


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    """A randomly initialised smoke-size LTG-BERT MLM folder with an encoder tokenizer (vocab 512)."""
    from helpers.models.ltg_bert import LtgBertForMaskedLM, ltg_bert_config
    from helpers.data.tokenizers import train_tokenizer

    texts = [e.a for e in synthetic(300, 0, "tok")]
    texts += [e.a + " " + (e.b or "") for e in gt.load_examples("rte", "valid")[:100]]
    tok = train_tokenizer(texts, "encoder", 512)
    torch.manual_seed(0)
    model = LtgBertForMaskedLM(ltg_bert_config("smoke", vocab_size=len(tok)))
    d = tmp_path_factory.mktemp("tiny_ltgbert")
    model.save_pretrained(d)
    tok.save_pretrained(str(d))
    return d


# --------------------------------------------------------------------------------------------- task table


def test_task_table_matches_the_pipeline():
    assert list(TASK_NAMES) == ALL_TASKS
    assert TASKS["mnli-mm"].trained_as == "mnli"
    assert {t for t in TASKS if TASKS[t].has_train} == WITH_TRAIN
    for t in ALL_TASKS:
        assert TASKS[t].protocol == (STANDARD if t in WITH_TRAIN else SCALED)
    assert TASKS["cola"].metric == "mcc"
    assert TASKS["mrpc"].metric == TASKS["qqp"].metric == "f1"
    assert {t for t in ALL_TASKS if TASKS[t].metric == "accuracy"} == set(ALL_TASKS) - {"cola", "mrpc", "qqp"}
    assert TASKS["mnli"].num_labels == 3 and TASKS["mnli"].label_names[0] == "entailment"
    assert TASKS["mrpc"].label_names[1] == "equivalent" and TASKS["qqp"].label_names[1] == "duplicate"


@pytest.mark.parametrize("task,split", [(t, "valid") for t in ALL_TASKS] + [(t, "train") for t in sorted(WITH_TRAIN)])
def test_loader_reads_real_file(task, split):
    ex = gt.load_examples(task, split)
    spec = TASKS[task]
    assert len(ex) > 20
    labels = {e.label for e in ex}
    assert labels == set(range(spec.num_labels))  # every class occurs, nothing else
    assert all(e.a for e in ex)
    pair = len(spec.fields) > 1
    assert all((e.b is not None and e.b != "") == pair for e in ex)
    assert len({e.uid for e in ex}) == len(ex)


def test_missing_train_file_is_refused():
    with pytest.raises(DataError, match="no bundled train file"):
        gt.load_examples("qqp", "train")
    with pytest.raises(ValueError, match="unknown task"):
        gt.load_examples("wnli", "valid")


def test_templates_on_hand_made_rows():
    multirc = {"paragraph": "Tom had a red ball. He lost it. ", "question": "What did Tom lose?", "answer": "A ball",
               "idx": {"paragraph": 1, "question": 2, "answer": 3}, "label": 1}
    assert render("multirc", multirc) == ("Tom had a red ball. He lost it.", "What did Tom lose? A ball")
    wsc = {"text": "Mark told Pete many lies about himself. He should have been more skeptical.",
           "span1_index": 0, "span2_index": 7, "span1_text": "Mark", "span2_text": "He", "label": 0}
    assert render("wsc", wsc) == ("Mark told Pete many lies about himself. He should have been more skeptical.",
                                  'Does "He" refer to "Mark"?')
    assert render("boolq", {"question": "is it red", "passage": "It is red."}) == ("is it red", "It is red.")
    assert render("qnli", {"question": "q?", "sentence": "s."}) == ("q?", "s.")
    assert render("mnli", {"premise": "p.", "hypothesis": "h. "}) == ("p.", "h.")
    assert render("sst2", {"sentence": "a fine film . "}) == ("a fine film .", None)


def test_encoder_pair_encoding_truncates_longest_first(tiny_model_dir):
    from helpers.data.tokenizers import load_tokenizer

    tok = load_tokenizer(tiny_model_dir)
    long_a = " ".join(["the little girl was good at the park"] * 40)
    ex = [Example("x", long_a, "Does the cat look bad?", 1, "x")]
    ids = clf.encode(tok, ex, 32, "encoder")[0]
    assert len(ids) == 32
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id and ids.count(tok.sep_token_id) == 2
    assert tok.decode(ids[ids.index(tok.sep_token_id) + 1:-1]).strip() == "Does the cat look bad?"  # b intact
    a, b = clf._truncate_pair(list(range(10)), list(range(4)), 8)
    assert (len(a), len(b)) == (4, 4)
    a, b = clf._truncate_pair(list(range(3)), list(range(4)), 5)
    assert (len(a), len(b)) == (2, 3)  # the longer one first, the first one on ties


# --------------------------------------------------------------------------------------------- splits


def test_carve_splits_disjoint_seeded_covering():
    groups = [f"g{i // 3}" for i in range(300)]  # groups of three
    fr = {"train": 0.7, "dev": 0.1, "test": 0.2}
    s1 = carve_splits(groups, fr, (0, "x"))
    s2 = carve_splits(groups, fr, (0, "x"))
    s3 = carve_splits(groups, fr, (1, "x"))
    allidx = np.concatenate(list(s1.values()))
    assert sorted(allidx.tolist()) == list(range(300))  # disjoint and covering
    assert all(np.array_equal(s1[k], s2[k]) for k in fr)  # seeded
    assert not np.array_equal(s1["test"], s3["test"])
    assert abs(len(s1["dev"]) - 30) <= 2 and abs(len(s1["test"]) - 60) <= 2
    for k in fr:  # no group is split
        gs = {groups[i] for i in s1[k]}
        assert all({groups[i] for i in s1[j]}.isdisjoint(gs) for j in fr if j != k)


@pytest.mark.parametrize("task", [t for t in ALL_TASKS if t != "mnli-mm"])
def test_prepared_splits_are_disjoint_and_cover_what_they_should(task):
    cfg = FinetuneConfig()
    d = fs.prepare_task(task, cfg)
    d.check_disjoint()
    assert d.protocol == (STANDARD if task in WITH_TRAIN else SCALED)
    train_uids, dev_uids = {e.uid for e in d.train}, {e.uid for e in d.dev}
    for name, test in d.tests.items():
        test_uids = {e.uid for e in test}
        assert test_uids.isdisjoint(dev_uids) and test_uids.isdisjoint(train_uids)
    valid = gt.load_examples(task, "valid")
    if task in WITH_TRAIN:
        pool = gt.load_examples(task, "train")
        assert train_uids | dev_uids == {e.uid for e in pool}
        assert {e.uid for e in d.tests[task]} == {e.uid for e in valid}  # reported: the whole validation file
        assert 0.08 < len(d.dev) / len(pool) < 0.12
    else:
        assert train_uids | dev_uids | {e.uid for e in d.tests[task]} == {e.uid for e in valid}
        assert 0.17 < len(d.tests[task]) / len(valid) < 0.23 and 0.07 < len(d.dev) / len(valid) < 0.13
    if task == "mnli":
        assert set(d.tests) == {"mnli", "mnli-mm"}
        assert {e.uid for e in d.tests["mnli-mm"]} == {e.uid for e in gt.load_examples("mnli-mm", "valid")}
    # seeded: same split twice; subsets are drawn from the same splits
    again = fs.prepare_task(task, cfg)
    assert [e.uid for e in again.dev] == [e.uid for e in d.dev]
    small = fs.prepare_task(task, finetune_config(max_train_examples=20, max_eval_examples=15))
    assert len(small.train) == 20 and len(small.dev) == 15 and all(len(v) == 15 for v in small.tests.values())
    assert {e.uid for e in small.train} <= train_uids and {e.uid for e in small.dev} <= dev_uids
    assert {e.uid for e in small.tests[d.task]} <= {e.uid for e in d.tests[d.task]}


def test_grouped_tasks_keep_groups_together():
    d = fs.prepare_task("multirc", FinetuneConfig())
    paragraphs = [{e.a for e in s} for s in (d.train, d.dev, d.tests["multirc"])]
    assert paragraphs[0].isdisjoint(paragraphs[1]) and paragraphs[0].isdisjoint(paragraphs[2])
    assert paragraphs[1].isdisjoint(paragraphs[2])
    w = fs.prepare_task("wsc", FinetuneConfig())
    assert {e.a for e in w.train}.isdisjoint({e.a for e in w.dev})


# --------------------------------------------------------------------------------------------- metrics


def test_metrics_against_hand_computed_values():
    y, p = [1, 1, 1, 0, 0], [1, 1, 0, 0, 1]  # TP 2, FN 1, FP 1, TN 1
    assert accuracy(y, p) == pytest.approx(0.6)
    assert f1_binary(y, p) == pytest.approx(2 / 3)
    assert f1_binary(y, p, positive=0) == pytest.approx(0.5)  # TP 1, FP 1, FN 1
    assert mcc(y, p) == pytest.approx((2 * 1 - 1 * 1) / math.sqrt(3 * 3 * 2 * 2))
    assert mcc(y, y) == pytest.approx(1.0)
    assert mcc([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)
    # degenerate: one predicted class, or one true class → 0 (sklearn's convention), never NaN
    assert mcc([1, 0, 1, 0, 1], [1, 1, 1, 1, 1]) == 0.0
    assert mcc([1, 1, 1], [1, 0, 1]) == 0.0
    assert mcc([0, 0, 0], [0, 0, 0]) == 0.0
    assert f1_binary([0, 0, 0], [0, 0, 0]) == 0.0 and f1_binary([1, 0], [0, 0]) == 0.0
    # multi-class MCC (Gorodkin): confusion [[1,1,0],[0,2,0],[1,0,1]] → 12 / sqrt(22 · 24)
    assert mcc([0, 0, 1, 1, 2, 2], [0, 1, 1, 1, 2, 0]) == pytest.approx(12 / math.sqrt(22 * 24))
    s = gt.score_all([0, 1, 2, 2], [0, 1, 2, 1], 3)
    assert s["accuracy"] == 0.75 and "f1" not in s and s["macro_f1"] == pytest.approx((1 + 2 / 3 + 2 / 3) / 3)
    with pytest.raises(ValueError):
        accuracy([1, 0], [1])


def test_metrics_match_sklearn_when_available():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    for _ in range(20):
        y, p = rng.integers(0, 3, 50), rng.integers(0, 3, 50)
        assert mcc(y, p) == pytest.approx(metrics.matthews_corrcoef(y, p))
        yb, pb = y % 2, p % 2
        assert f1_binary(yb, pb) == pytest.approx(metrics.f1_score(yb, pb))


def test_config_presets_and_schedule():
    assert finetune_config("berttime").lr == 3e-5 and finetune_config("berttime").patience is None
    b = finetune_config("babylm")
    assert (b.lr, b.patience, b.epochs, b.batch_size, b.max_length) == (5e-5, 3, 10, 32, 128)
    assert finetune_config({"preset": "babylm", "epochs": 2}).epochs == 2
    with pytest.raises(ValueError, match="unknown fine-tuning parameter"):
        finetune_config(learning_rate=1e-3)
    assert FinetuneConfig().scale_note() == ""
    assert "1 epoch" in finetune_config(epochs=1, max_train_examples=64).scale_note()
    assert clf.lr_multiplier(0, 100, 10) == pytest.approx(0.1)
    assert clf.lr_multiplier(9, 100, 10) == pytest.approx(1.0)
    assert clf.lr_multiplier(55, 100, 10) == pytest.approx(0.5)
    assert clf.lr_multiplier(100, 100, 10) == 0.0
    assert clf.lr_multiplier(55, 100, 10, "cosine") == pytest.approx(0.5)


# --------------------------------------------------------------------------------------------- training


def test_tiny_classifier_learns_and_is_deterministic(tiny_model_dir):
    data = synthetic_data()
    cfg = finetune_config(epochs=3, lr=1e-3, batch_size=16, seed=3)
    model, tok, kind = clf.load_classifier(tiny_model_dir, 2, ("bad", "good"), seed=cfg.seed)
    before = clf.evaluate_examples(model, tok, data.dev, cfg, kind, 2)["accuracy"]
    res = clf.fit(model, tok, data.train, data.dev, cfg, "accuracy", 2, kind, progress=False, log=lambda s: None)
    after = clf.evaluate_examples(model, tok, data.tests["syn"], cfg, kind, 2)["accuracy"]
    assert before < 0.8  # a random head does not already solve it
    assert res.best_dev["accuracy"] >= 0.95 and after >= 0.9
    assert res.history[-1]["train_loss"] < res.history[0]["train_loss"]
    # same seed → identical run
    model2, tok2, _ = clf.load_classifier(tiny_model_dir, 2, ("bad", "good"), seed=cfg.seed)
    res2 = clf.fit(model2, tok2, data.train, data.dev, cfg, "accuracy", 2, kind, progress=False, log=lambda s: None)
    assert [h["train_loss"] for h in res2.history] == [h["train_loss"] for h in res.history]


def test_selection_uses_dev_only_and_restores_best_epoch(tiny_model_dir, monkeypatch):
    data = synthetic_data(64, 16, 16)
    cfg = finetune_config(epochs=6, lr=1e-3, batch_size=16, patience=2)
    scripted = iter([0.5, 0.8, 0.7, 0.6, 0.9, 0.9])  # best epoch 2, stop after epoch 4
    calls, snapshots = [], []
    real = clf.evaluate_examples

    def flat(model):
        return torch.cat([p.detach().flatten() for p in model.parameters()]).clone()

    def spy(model, tokenizer, examples, *args, **kwargs):
        out = real(model, tokenizer, examples, *args, **kwargs)
        uids = {e.uid for e in examples}
        calls.append(uids)
        if uids == {e.uid for e in data.dev}:
            snapshots.append(flat(model))
            out = dict(out, accuracy=next(scripted))
        return out

    monkeypatch.setattr(clf, "evaluate_examples", spy)  # fit's dev evaluations
    monkeypatch.setattr(ft, "evaluate_examples", spy)  # finetune_prepared's reported split
    rec = ft.finetune_prepared(tiny_model_dir, data, cfg, progress=False, log=lambda s: None)
    dev, test = {e.uid for e in data.dev}, {e.uid for e in data.tests["syn"]}
    assert rec["epochs_run"] == 4 and rec["early_stopped"] and rec["best_epoch"] == 2
    assert rec["dev_metric"] == 0.8
    assert calls[:4] == [dev] * 4  # selection: dev only, once per epoch
    assert calls[4:] == [test]  # the reported split: once, after training
    assert all(c.isdisjoint(test) for c in calls[:4])

    # fit hands back the weights of the best epoch (2), not the last one (4)
    scripted = iter([0.5, 0.8, 0.7, 0.6])
    snapshots.clear()
    model, tok, kind = clf.load_classifier(tiny_model_dir, 2, seed=0)
    res = clf.fit(model, tok, data.train, data.dev, cfg, "accuracy", 2, kind, progress=False, log=lambda s: None)
    assert res.best_epoch == 2 and len(snapshots) == 4
    assert torch.equal(flat(model), snapshots[1]) and not torch.equal(snapshots[1], snapshots[3])


def test_finetune_all_caches_and_reports_mnli_mm_with_mnli_model(tiny_model_dir, tmp_path, monkeypatch):
    cfg = finetune_config(epochs=1, max_train_examples=16, max_eval_examples=16, batch_size=8)
    logs: list[str] = []
    df = ft.finetune_all(tiny_model_dir, ["mnli-mm", "rte", "mnli"], cfg, tmp_path / "cache", progress=False,
                         log=logs.append)
    assert list(df["task"]) == ["mnli-mm", "rte", "mnli"]
    assert list(df["train_task"]) == ["mnli", "rte", "mnli"]
    assert list(df["protocol"]) == [SCALED, STANDARD, SCALED]
    assert df.loc[0, "dev_metric"] == df.loc[2, "dev_metric"]  # one mnli run serves both rows
    assert df.loc[0, "reported_on"].startswith("mnli-mm validation file")
    assert (df["n_train"] == 16).all() and (df["n_test"] == 16).all() and (df["epochs_run"] == 1).all()
    assert df["score"].between(0, 1).all() and "1 epoch" in df.loc[1, "scale_note"]
    assert any("scaled-down" in s for s in logs)
    for r in df.itertuples():  # the predicted classes are counted over the reported split
        assert sum(r.predicted_counts) == r.n_test and len(r.predicted_counts) == TASKS[r.task].num_labels
        assert r.top_prediction_share == max(r.predicted_counts) / r.n_test
        assert r.single_class == (max(r.predicted_counts) == r.n_test)
    # one line per run by default (mnli once, rte once) beside the scale note: its model and scores
    assert len(logs) == 3 and sum(s.startswith(("[mnli] encoder ", "[rte] encoder ")) for s in logs) == 2, logs
    assert not any("[run ]" in s or " epoch 1:" in s for s in logs)
    assert not list((tmp_path / "cache").glob("*/model"))  # weights are not kept by default

    def boom(*a, **k):
        raise AssertionError("cached result not reused")

    real_fit = ft.fit
    monkeypatch.setattr(ft, "fit", boom)
    logs.clear()
    again = ft.finetune_all(tiny_model_dir, ["rte", "mnli-mm"], cfg, tmp_path / "cache", progress=False,
                            log=logs.append)
    assert sum("[skip]" in s for s in logs) == 2
    assert again.set_index("task").loc["rte", "score"] == df.set_index("task").loc["rte", "score"]
    with pytest.raises(AssertionError, match="not reused"):  # another config is another cache entry
        ft.finetune_all(tiny_model_dir, ["rte"], finetune_config(cfg, seed=7), tmp_path / "cache", progress=False,
                        log=logs.append)
    monkeypatch.setattr(ft, "fit", real_fit)
    logs.clear()  # verbose: the [run ] line, the split sizes and a line per epoch as well
    ft.finetune_all(tiny_model_dir, ["rte"], finetune_config(cfg, epochs=2), tmp_path / "cache", progress=False,
                    log=logs.append, verbose=True, log_scale_note=False)
    assert [s.split()[0] for s in logs] == ["[run", "[rte]", "rte", "rte", "[rte]"], logs


def test_metric_interval_bootstrap():
    """The percentile bootstrap of accuracy is close to the normal-approximation binomial interval (n = 400,
    p = 0.7: ±4.5 points), contains the point estimate, is reproducible by seed, and exists for F1 and MCC."""
    import math

    import numpy as np

    from helpers.evaluation.glue_tasks import accuracy, mcc, metric_interval

    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 400)
    p = np.where(rng.random(400) < 0.7, y, 1 - y)
    acc = accuracy(y, p)
    lo, hi = metric_interval(y, p, "accuracy", seed=1)
    half = 1.96 * math.sqrt(acc * (1 - acc) / len(y))
    assert lo < acc < hi
    assert lo == pytest.approx(acc - half, abs=0.012) and hi == pytest.approx(acc + half, abs=0.012)
    assert metric_interval(y, p, "accuracy", seed=1) == (lo, hi)
    m = mcc(y, p)
    mlo, mhi = metric_interval(y, p, "mcc", seed=1)
    assert mlo < m < mhi and mhi - mlo < 0.25
    flo, fhi = metric_interval(y, p, "f1", seed=1)
    assert 0 <= flo < fhi <= 1
    with pytest.raises(KeyError):
        metric_interval(y, p, "bleu")


def test_majority_baseline_is_the_constant_training_majority_on_the_reported_examples():
    assert gt.majority_label([0, 1, 1, 2]) == 1 and gt.majority_label([2, 0]) == 0  # ties: the smallest label
    y = [1, 0, 0, 0]
    assert gt.constant_score(y, 0, "accuracy") == 0.75 and gt.constant_score(y, 1, "accuracy") == 0.25
    assert gt.constant_score(y, 0, "mcc") == 0.0 and gt.constant_score(y, 0, "f1") == 0.0
    assert gt.constant_score(y, 1, "f1") == pytest.approx(2 / 5)  # TP 1, FP 3
    cfg = finetune_config(epochs=2, max_train_examples=64, max_eval_examples=50)
    base = ft.majority_baseline(["rte", "mrpc", "cola", "mnli-mm"], cfg).set_index("task")
    for task in ("rte", "mrpc", "cola", "mnli-mm"):
        data = fs.prepare_task(task, cfg)
        train = [e.label for e in data.train]
        test = np.array([e.label for e in data.tests[task]])
        label = max(set(train), key=lambda c: (train.count(c), -c))
        row = base.loc[task]
        assert row["majority label"] == TASKS[task].label_names[label] and row["n_test"] == len(test)
        assert row["train share"] == pytest.approx(train.count(label) / len(train))
        assert row["test share"] == pytest.approx(float((test == label).mean()))
    assert base.loc["cola", "score"] == 0.0  # MCC of a constant prediction
    assert base.loc["rte", "score"] == base.loc["rte", "test share"]  # accuracy = the label's share
    mrpc_share = base.loc["mrpc", "test share"]
    if base.loc["mrpc", "majority label"] == "equivalent":  # F1 of always predicting the positive class
        assert base.loc["mrpc", "score"] == pytest.approx(2 * mrpc_share / (1 + mrpc_share))


def test_scaled_protocol_tasks_counts_mnli_mm_with_mnli():
    scaled = ft.scaled_protocol_tasks(ALL_TASKS, finetune_config())
    assert scaled == [t for t in ALL_TASKS if t not in WITH_TRAIN] and len(scaled) == 7 and "mnli-mm" in scaled


def test_a_decoder_with_a_short_context_fine_tunes_on_what_fits(tmp_path):
    """A decoder whose context (16 tokens) is shorter than ``max_length`` (128) reads the first 16 tokens of each
    example (its position table has no more rows) and says so, instead of failing inside the embedding."""
    from helpers.data.tokenizers import train_tokenizer
    from helpers.models.decoder import build_decoder

    texts = [e.a + " " + (e.b or "") for e in gt.load_examples("rte", "valid")[:200]]
    tok = train_tokenizer(texts, "decoder", 512)
    eot = tok.convert_tokens_to_ids("<|endoftext|>")
    spec = dict(hidden=32, layers=2, heads=2, context=16, window=8, vocab_size=len(tok), dropout=0.0)
    build_decoder(spec, seed=0, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot).save_pretrained(tmp_path)
    tok.save_pretrained(str(tmp_path))
    data = fs.prepare_task("rte", finetune_config(max_train_examples=16, max_eval_examples=16))
    logs: list[str] = []
    rec = ft.finetune_prepared(tmp_path, data, finetune_config(epochs=1, batch_size=8, max_length=128), log=logs.append,
                               progress=False)
    assert rec["config"]["max_length"] == 16 and rec["kind"] == "decoder"
    assert any("cut to the model's context of 16 tokens" in s for s in logs)
