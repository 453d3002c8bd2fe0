"""BabyLM-format predictions and an lm-eval-style results JSON of a saved model (helpers.evaluation.export)."""
from __future__ import annotations

import gzip
import json
import math
import re

import pytest
import torch

from helpers.core.artifacts import read_jsonl
from helpers.evaluation import babylm_format as BF
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


@pytest.fixture(scope="module")
def saved_encoder(encoder_tokenizer, tmp_path_factory):
    """A tiny random LTG-BERT saved where notebook 04 saves an encoder: ``runs/p/encoders/tiny/best``."""
    from helpers.models.ltg_bert import LtgBertForMaskedLM, ltg_bert_config

    torch.manual_seed(0)
    model = LtgBertForMaskedLM(ltg_bert_config("smoke", vocab_size=len(encoder_tokenizer))).eval()
    folder = tmp_path_factory.mktemp("runs") / "p" / "encoders" / "tiny" / "best"
    model.save_pretrained(folder)
    encoder_tokenizer.save_pretrained(folder)
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
    assert set(collated) == {"blimp", "blimp_supplement", "ewok"}  # the pipeline's groups
    assert len(collated["blimp"]) == 67 and len(collated["blimp_supplement"]) == 5 and len(collated["ewok"]) == 11
    BF.verify_predictions(collated, complete=False)  # a sample: ids, keys and types as the pipeline's
    with pytest.raises(ValueError, match="examples missing"):
        BF.verify_predictions(collated)  # but not a whole submission
    for task, group in (("blimp", "blimp"), ("supplement", "blimp_supplement"), ("ewok", "ewok")):
        for paradigm, body in collated[group].items():
            assert json.loads((tmp_path / "out" / "predictions" / group / f"{paradigm}.json").read_text()) == body
            (p,) = body["predictions"]  # one item per file under limit 1
            name, line = p["id"].rsplit("_", 1)
            assert name == paradigm and p["pred"].startswith(" ")
            src = _lines(task, paradigm)[int(line)]
            keys = ("Target1", "Target2") if task == "ewok" else ("sentence_good", "sentence_bad")
            good, bad = src[keys[0]], src[keys[1]]
            assert p["pred"][1:] == (good if rows[(task, paradigm)]["correct"] else bad)
    # lm-eval's schema: tasks named as the pipeline's task files name them, fractions with their standard errors
    BF.verify_results(res)
    r = res["results"]
    subs = res["group_subtasks"]["blimp_filtered"]
    assert set(res["group_subtasks"]) == {"blimp_filtered", "blimp_supplement", "ewok_filtered"}
    assert "blimp_adjunct_island_filtered" in subs and "blimp_supplement_hypernym" in r
    assert "ewok_agent-properties_filtered" in res["group_subtasks"]["ewok_filtered"]
    assert len(subs) == 67 and all(r[s]["acc,none"] in (0.0, 1.0) and r[s]["acc_stderr,none"] == "N/A" for s in subs)
    assert all(res["n-samples"][s]["effective"] == 1 for s in subs) and res["n-shot"]["blimp_filtered"] == 0
    assert r["blimp_filtered"]["acc,none"] == pytest.approx(sum(r[s]["acc,none"] for s in subs) / 67)
    assert r["blimp_filtered"]["acc_stderr,none"] == "N/A"  # as lm-eval pools a group with an "N/A" subtask
    cfg = res["configs"]["ewok_agent-properties_filtered"]
    assert cfg["group"] == "ewok_filtered" and cfg["doc_to_text"] == "{{Context1}}" and cfg["num_fewshot"] == 0
    assert cfg["dataset_kwargs"]["data_files"].endswith("ewok_filtered/agent-properties.jsonl.gz")
    assert res["config"]["model_path"] == str(saved) and res["config"]["kind"] == "causal"
    assert res["config"]["limit"] == 1 and len(res["config"]["model_sha256"]) == 64
    assert res["n-samples"][subs[0]]["effective"] == 1 and res["n-samples"][subs[0]]["original"] > 1
    assert sum(res["ties"][s] for s in subs) == res["ties"]["blimp_filtered"]
    on_disk = json.loads((tmp_path / "out" / "results.json").read_text())
    assert on_disk["results"]["ewok_filtered"]["acc,none"] == pytest.approx(r["ewok_filtered"]["acc,none"])
    assert any("export:" in line for line in logs)


def test_a_whole_export_of_a_decoder_and_an_encoder_passes_the_pipeline_rules(saved, saved_encoder, tmp_path):
    """The decoder scored on every line of the supplement's files (BLiMP and EWoK sampled, to keep the test short):
    the collated predictions pass ``verify_dict``'s rules with the count rule on for the unsampled groups. The
    encoder (PLL, ~25 s per 1,000 pairs here) on a sample of every file: groups, names, ids, keys and types. Both
    results pass lm-eval's schema; the standard errors are lm-eval's for a mean of 0/1 scores."""
    for folder, kind, limits in ((saved, "causal", {"blimp": 1, "supplement": None, "ewok": 1}),
                                 (saved_encoder, "mlm", 2)):
        out = tmp_path / kind
        res = X.export(folder, out, TASKS, limit_per_task=limits, batch_size=256, progress=False,
                       log=lambda line: None)
        collated = json.loads((out / "all_predictions.json").read_text())
        assert set(collated) == set(BF.ZERO_SHOT_GROUPS)
        BF.verify_predictions(collated, complete=False)
        if kind == "causal":  # complete: one prediction per line, in file order
            BF.verify_predictions({"blimp_supplement": collated["blimp_supplement"]}, ("blimp_supplement",))
            with pytest.raises(ValueError, match="ewok/agent-properties: examples missing"):
                BF.verify_predictions({"ewok": collated["ewok"]}, ("ewok",))  # sampled: not a whole group
        BF.verify_results(json.loads((out / "results.json").read_text()))
        assert res["config"]["kind"] == kind and res["config"]["reduction"] == ("mean" if kind == "mlm" else "sum")
    name = "blimp_supplement_turn_taking"  # the decoder's
    res = json.loads((tmp_path / "causal" / "results.json").read_text())
    acc, n = res["results"][name]["acc,none"], res["n-samples"][name]["effective"]
    lines = BF.file_lines(BF.submission_files("blimp_supplement")["turn_taking"])
    assert n == res["n-samples"][name]["original"] == lines
    assert res["results"][name]["acc_stderr,none"] == pytest.approx(math.sqrt(acc * (1 - acc) / (n - 1)))


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


def test_the_model_revision_comes_from_the_folder(saved, tmp_path, decoder_tokenizer):
    """The sidecar's training revision first (a fine-tuned decoder's ``best/`` has no model card), else the card's,
    ``unknown`` only when the folder says neither; the export's ``config`` carries it."""
    from helpers.core.artifacts import save_pretrained_atomic, stamp_model_folder
    from helpers.models.decoder import load_decoder

    folder = tmp_path / "runs" / "p" / "decoders" / "ft" / "best"
    save_pretrained_atomic(folder, load_decoder(saved), decoder_tokenizer,
                           info={"revision": "abc1234", "code_digest": "0" * 16})
    assert not (folder / "README.md").exists() and X.model_revision(folder) == "abc1234"
    res = X.export(folder, tmp_path / "out", ("supplement",), limit_per_task=1, progress=False, log=lambda line: None)
    assert res["config"]["model_revision"] == "abc1234"
    assert X.model_revision(saved) == "unknown"  # neither a sidecar nor a card
    (folder / "README.md").write_text("A `gpt_neo` model trained by storybench, revision `def5678+dirty`: ...\n")
    assert X.model_revision(folder) == "abc1234"  # the sidecar wins
    stamp_model_folder(folder, revision="unknown")  # trained outside git: the card may still say
    assert X.model_revision(folder) == "def5678+dirty"
    (folder / "README.md").unlink()
    assert X.model_revision(folder) == "unknown"


def test_without_a_terminal_the_cli_logs_progress_lines_with_a_rate(saved, tmp_path, capsys):
    assert X.main(["--model", str(saved), "--out", str(tmp_path / "x"), "--tasks", "supplement", "--limit", "20",
                   "--progress-every", "50", "--no-cache"]) == 0  # captured stdout is not a terminal
    out = capsys.readouterr().out.splitlines()
    lines = [line for line in out if " seq/s" in line]
    counts = [int(re.search(r": (\d+)/200 seq \(\d+%\), [\d.,]+ seq/s", line).group(1)) for line in lines]
    # a line each time the count passes a multiple of 50 (the scorer counts a batch at a time), the last at 200
    assert counts[-1] == 200 and [n // 50 for n in counts] == sorted(set(n // 50 for n in counts)), out
    assert len(lines) >= 3 and all(line.startswith("export ") for line in lines) and out[-1].startswith("export: ")
