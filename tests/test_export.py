"""BabyLM-format predictions and an lm-eval-style results JSON of a saved model (helpers.evaluation.export)."""
from __future__ import annotations

import gzip
import json
import math

import pytest

from helpers.core.artifacts import read_jsonl
from helpers.evaluation import export as X
from helpers.evaluation import minimal_pairs as MP
from helpers.evaluation import zero_shot as ev
from helpers.models.decoder import DecoderSpec, build_decoder

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py
TASKS = ("blimp", "supplement", "ewok")


@pytest.fixture(scope="module")
def saved(decoder_tokenizer, tmp_path_factory):
    """A tiny random GPT-Neo saved where notebook 02 saves a decoder: ``runs/p/decoders/tiny/best``."""
    tok = decoder_tokenizer
    spec = DecoderSpec(hidden=32, layers=2, heads=2, context=128, window=8, vocab_size=len(tok), dropout=0.0)
    eot = tok.eos_token_id
    model = build_decoder(spec, seed=0, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot).eval()
    folder = tmp_path_factory.mktemp("runs") / "p" / "decoders" / "tiny" / "best"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _lines(task: str, paradigm: str) -> list[dict]:
    folder = MP.task_files(task)[0].parent
    path = next(p for p in MP.task_files(task) if p.name.split(".jsonl")[0] == paradigm)
    assert path.parent == folder
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_predictions_name_each_item_by_its_line_and_the_sentence_preferred(saved, tmp_path):
    logs = []
    res = X.export(saved, tmp_path / "out", TASKS, limit_per_task=1, progress=False, log=logs.append)
    rows = {(r["task"], r["paradigm"]): r for t in TASKS  # the per-item scores, as cached beside the export
            for r in read_jsonl(tmp_path / "out" / "cache" / f"{t}.jsonl")}
    collated = json.loads((tmp_path / "out" / "all_predictions.json").read_text())
    assert set(collated) == {"blimp_filtered", "blimp_supplement", "ewok_filtered"}
    assert len(collated["blimp_filtered"]) == 67 and len(collated["blimp_supplement"]) == 5
    for task, group in (("blimp", "blimp_filtered"), ("supplement", "blimp_supplement"), ("ewok", "ewok_filtered")):
        for paradigm, body in collated[group].items():
            assert json.loads((tmp_path / "out" / "predictions" / group / f"{paradigm}.json").read_text()) == body
            (p,) = body["predictions"]  # one item per file under limit 1
            name, line = p["id"].rsplit("_", 1)
            assert name == paradigm and p["pred"].startswith(" ")
            src = _lines(task, paradigm)[int(line)]
            keys = ("Target1", "Target2") if task == "ewok" else ("sentence_good", "sentence_bad")
            good, bad = src[keys[0]], src[keys[1]]
            assert p["pred"][1:] == (good if rows[(task, paradigm)]["correct"] else bad)
    # lm-eval style: subtasks as fractions with their standard errors, groups as the mean over subtasks
    r = res["results"]
    subs = res["group_subtasks"]["blimp_filtered"]
    assert len(subs) == 67 and all(r[s]["n"] == 1 and r[s]["acc,none"] in (0.0, 1.0) for s in subs)
    assert r["blimp_filtered"]["acc,none"] == pytest.approx(sum(r[s]["acc,none"] for s in subs) / 67)
    sup = res["group_subtasks"]["blimp_supplement"]
    assert r["blimp_supplement"]["acc_stderr,none"] == pytest.approx(
        math.sqrt(sum(r[s]["acc_stderr,none"] ** 2 for s in sup)) / len(sup), nan_ok=True)
    assert res["config"]["model_path"] == str(saved) and res["config"]["kind"] == "causal"
    assert res["config"]["limit"] == 1 and len(res["config"]["model_sha256"]) == 64
    assert res["n-samples"][subs[0]]["effective"] == 1 and res["n-samples"][subs[0]]["original"] > 1
    on_disk = json.loads((tmp_path / "out" / "results.json").read_text())
    assert on_disk["results"]["ewok_filtered"]["acc,none"] == pytest.approx(r["ewok_filtered"]["acc,none"])
    assert any("export:" in line for line in logs)


def test_notebook_scores_are_reused_and_never_changed(saved, tmp_path):
    """Notebook 05's cache beside the run (``runs/p/eval/decoders/tiny``) is read when the settings match; other
    settings are scored into the export's own cache."""
    cache = saved.parents[2] / "eval" / "decoders" / "tiny"
    ev.evaluate_saved(saved, "causal", ("supplement",), out_dir=cache, limit_per_task=2, progress=False,
                      log=lambda line: None)
    before = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    logs = []
    X.export(saved, tmp_path / "same", ("supplement",), limit_per_task=2, progress=False, log=logs.append)
    assert any(line.startswith("[skip]") for line in logs), logs
    logs.clear()
    X.export(saved, tmp_path / "other", ("supplement",), limit_per_task=1, progress=False, log=logs.append)
    assert any(line.startswith("[run ]") for line in logs), logs
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == before


def test_the_kind_comes_from_the_saved_config(tmp_path):
    (tmp_path / "enc").mkdir()
    (tmp_path / "enc" / "config.json").write_text(json.dumps({"model_type": "ltgbert"}))
    (tmp_path / "dec").mkdir()
    (tmp_path / "dec" / "config.json").write_text(json.dumps({"model_type": "gpt_neo"}))
    assert X.saved_kind(tmp_path / "enc") == "mlm" and X.saved_kind(tmp_path / "dec") == "causal"
    with pytest.raises(FileNotFoundError):
        X.saved_kind(tmp_path / "none")
    assert X.main(["--model", str(tmp_path / "none"), "--out", str(tmp_path / "x")]) == 1
