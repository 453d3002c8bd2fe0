"""Reliability, "nothing lost, nothing silent": one test per fault found in a review of the pipeline, each named by
the behaviour it checks.

Everything runs in tmp folders (``STORYBENCH_ROOT``/``STORYBENCH_RUNS``/``STORYBENCH_REPORTS``), the judge against
a server on 127.0.0.1; no notebook is executed (kernel death is simulated at papermill's boundary)."""
from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch
import yaml

from helpers.core import artifacts, config
from helpers.data import budgets
from helpers.data.corpus_files import prepare_corpora, read_corpus
from helpers.data.ledger import Ledger
from conftest import edit_params
from helpers import runner

sys.path.insert(0, str(Path(__file__).parent))
import train_worker as W  # noqa: E402

REPO = config.repo_root()




# ----------------------------------------------------------------------------- rows 1, 12: training artefacts
def _train_or_skip(out, cfg, loss_fn=None, log=None):
    from helpers.training.recipes import train_or_skip
    from helpers.training.loop import lm_loss

    tr, va = W.make_data()
    return train_or_skip("tiny", lambda: W.make_model(), {"hidden": 32}, tr, va, None, cfg, out,
                         loss_fn=loss_fn or lm_loss, progress=False, log=log or (lambda m: None))


def test_changed_params_never_delete_the_finished_run_first(tmp_path, one_thread):
    from helpers.training.loop import TrainingDiverged, lm_loss

    out = tmp_path / "decoders" / "tiny-10k"
    good = W.make_config(steps=4, save_every=2, eval_every=2)
    _train_or_skip(out, good)
    weights = (out / "best" / "model.safetensors").read_bytes()

    def nan_loss(model, batch):
        return lm_loss(model, batch) * float("nan")

    lines: list[str] = []
    with pytest.raises(TrainingDiverged, match=r"The previous run is untouched, kept as .*tiny-10k\.kept-"):
        _train_or_skip(out, W.make_config(steps=4, save_every=2, eval_every=2, lr=0.5), nan_loss, lines.append)
    kept = list(out.parent.glob("tiny-10k.kept-*"))
    assert len(kept) == 1 and (kept[0] / "best" / "model.safetensors").read_bytes() == weights
    assert any(kept[0].name in m and "kept" in m for m in lines), lines
    # the old params back: the finished run is restored, not retrained
    lines.clear()
    res = _train_or_skip(out, good, log=lines.append)
    assert lines[0].startswith("[restore]") and lines[-1].startswith("[skip]") and res.steps == 4
    assert (out / "best" / "model.safetensors").read_bytes() == weights and not list(out.parent.glob("*.kept-*"))
    # a change that trains: the old run is dropped only once the new run has its first checkpoint
    res = _train_or_skip(out, W.make_config(steps=4, save_every=2, eval_every=2, lr=1e-3))
    assert res.steps == 4 and not list(out.parent.glob("*.kept-*")) and not (out / "_replaces.json").exists()


def test_disk_full_while_saving_is_one_line_naming_the_path(tmp_path, monkeypatch, one_thread):
    from helpers.training import loop as training

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path))  # paths in messages: runs/..., never this machine's

    model = W.make_model()
    cfg = W.make_config(steps=2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    ckpt = tmp_path / "run" / "checkpoint"
    training._save_checkpoint(ckpt, model, opt, sched, {"step": 1}, cfg, None)

    def full(*a, **k):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing file "
                           "data/0: file write failed")

    monkeypatch.setattr(training.torch, "save", full)
    with pytest.raises(OSError, match=r"cannot save the checkpoint to .*checkpoint .*disk full\?.*previous checkpoint"
                                      r" \(if any\) is kept") as e:
        training._save_checkpoint(ckpt, model, opt, sched, {"step": 2}, cfg, None)
    assert "\n" not in str(e.value) and "cannot save the checkpoint to runs/run/checkpoint " in str(e.value)
    assert str(tmp_path) not in str(e.value)
    assert json.loads((ckpt / "step.json").read_text())["step"] == 1  # the previous checkpoint is intact

    def no_space(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    (tmp_path / "table.csv").write_text("old")
    monkeypatch.setattr(Path, "write_text", no_space)
    with pytest.raises(OSError, match=r"cannot write runs/table\.csv: no space left .*previous table\.csv .* is kept"):
        artifacts.write_text(tmp_path / "table.csv", "new")
    monkeypatch.undo()
    assert (tmp_path / "table.csv").read_text() == "old"


# ----------------------------------------------------------------------------- rows 2, 3, 10: params checks
def test_params_read_1e_3_as_a_number_as_yaml_1_2_does(repo):
    edit_params(repo, "02", "lr: 2.0e-3", "lr: 1e-3")
    p = config.load_params("smoke", "02")
    assert p["train"]["lr"] == 0.001 and isinstance(p["train"]["lr"], float)
    todo = runner.plan("smoke", runner.notebooks())
    assert dict((nb.name, pp) for nb, pp in todo)["02_decoder_training.ipynb"]["train"]["lr"] == 0.001


@pytest.mark.parametrize("old, new, message", [
    ("steps: 12,", 'steps: "abc",', r"02_decoder_training.yaml: train.steps = 'abc' is a string; expected an integer"),
    ("lr: 2.0e-3", "lr: -2e-3", r"train.lr = -0.002 is out of range; expected a learning rate in \(0, 1\]"),
    ("lr: 2.0e-3", "lr: 1.0e6", r"train.lr = 1000000.0 is out of range"),
    ("threads: 0", "threads: -1", r"threads = -1 is out of range; expected a number >= 0"),
    ("batch_size: 8", "batch_size: 0", r"train.batch_size = 0 is out of range"),
    ("budgets: [tiny-10k", "budgets: [10", r"budgets\[0\] = 10 is an integer; expected a string"),
])
def test_wrong_type_or_range_is_refused_before_anything_runs(repo, old, new, message):
    edit_params(repo, "02", old, new)
    with pytest.raises(runner.RunnerError, match=message):
        runner.plan("smoke", runner.notebooks())
    assert not (repo.parent / "runs").exists()  # nothing was touched


@pytest.mark.parametrize("new, message", [
    ("encoder_limit_per_task: 0", r"encoder_limit_per_task = 0 is not allowed; expected a whole number >= 1"),
    ("encoder_limit_per_task: {blimp: 2, ewok: 0}", r"encoder_limit_per_task = \{'blimp': 2, 'ewok': 0\} is not allowed"),
    ("encoder_limit_per_task: {blimp: 2, ewok: many}", r"is not allowed; expected a whole number >= 1, or a mapping"),
])
def test_a_bad_limit_per_task_is_refused_before_anything_runs(repo, new, message):
    for sub, ext in (("notebooks", "ipynb"), ("params/smoke", "yaml")):  # notebook 05 beside the scratch repo's three
        (repo / sub / f"05_evaluation.{ext}").write_bytes((REPO / sub / f"05_evaluation.{ext}").read_bytes())
    edit_params(repo, "05", "encoder_limit_per_task: 2", new)
    with pytest.raises(runner.RunnerError, match=message):
        runner.plan("smoke", runner.notebooks())
    edit_params(repo, "05", new, "encoder_limit_per_task: {blimp: 2, supplement: 3, ewok: null}")
    runner.plan("smoke", runner.notebooks())  # one number per task (null: every pair) is a valid limit


def test_a_decoder_notebook_02_does_not_train_is_refused_before_anything_runs():
    """The real smoke profile: 03-06 name decoders of 02's budgets; a budget dropped from 02 is named at once (a
    run once reached notebook 03 and stopped there on a KeyError)."""
    runner.plan("smoke", runner.notebooks())
    with pytest.raises(runner.RunnerError) as e:
        runner.plan("smoke", runner.notebooks(), {"02": {"budgets": ["tiny-10k", "tiny-20k"], "seeds": {"tiny-10k": [42, 7]}}})
    lines = str(e.value).splitlines()[1:]
    assert any(x.startswith("  - 03.models: 'tiny-40k' not trained by notebook 02") for x in lines), lines
    assert any(x.startswith("  - 05.decoders: 'tiny-40k', 'tiny-40k (seed 7)', 'tiny-40k (plain)'") for x in lines), lines
    with pytest.raises(runner.RunnerError, match=r"03.selfbleu_models: 'tiny-40k' not among 03.models"):
        runner.plan("smoke", runner.select(runner.notebooks(), "03", None), {"03": {"models": ["tiny-10k"]}})


def test_yaml_syntax_error_is_one_line_naming_file_and_line(repo, capsys):
    edit_params(repo, "02", "valid_blocks: 8\n", "valid_blocks: [8\n")
    with pytest.raises(runner.RunnerError, match=r"params/smoke/02_decoder_training.yaml:\d+:\d+: YAML syntax error"):
        runner.plan("smoke", runner.notebooks())
    with pytest.raises(config.ParamsError, match=r"02_decoder_training.yaml:\d+:\d+: YAML syntax error"):
        config.load_params("smoke", "02")
    assert runner.main(["--profile", "smoke", "--only", "02"]) == 1
    err = capsys.readouterr().err
    assert "YAML syntax error" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- runner: rows 9, 11, 14
def test_an_empty_notebook_selection_is_refused():
    for only in (",", " , ", ""):
        with pytest.raises(runner.RunnerError, match="names no notebook"):
            runner.select(runner.notebooks(), only, None)


def test_kernel_death_names_notebook_and_cell(repo, monkeypatch):
    import papermill as pm
    from nbclient.exceptions import DeadKernelError

    def dies(src, out, **kw):
        nb = json.loads(Path(src).read_text())
        for i, cell in enumerate(nb["cells"]):  # what papermill leaves when the kernel dies in cell 3
            cell.setdefault("metadata", {})["papermill"] = (
                {"status": "completed", "start_time": "2026-01-01T00:00:00"} if i <= 3 else {"status": "pending"})
        Path(out).write_text(json.dumps(nb))
        raise DeadKernelError("Kernel died")

    monkeypatch.setattr(pm, "execute_notebook", dies)
    with pytest.raises(runner.RunnerError, match=r"notebook 02_decoder_training.ipynb: the kernel died in cell 3 ") as e:
        runner.run("smoke", only="02")
    assert "\n" not in str(e.value).split(" the partial")[0]
    assert not (repo.parent / "reports" / "smoke" / ".run.lock").exists()  # the lock is released


def test_a_second_run_of_a_profile_is_refused(repo, monkeypatch):
    ran = []
    monkeypatch.setattr(runner, "_run", lambda profile, todo, log_output: ran.append(profile) or [])
    lock = repo.parent / "reports" / "smoke" / ".run.lock"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text(json.dumps({"pid": other.pid, "started": "earlier"}))
        with pytest.raises(runner.RunnerError, match=rf"profile 'smoke' is being run by pid {other.pid} \(started "
                                                     r"earlier, lock reports/smoke/\.run\.lock\)"):
            runner.run("smoke", only="01")
        assert ran == [] and lock.exists()
    finally:
        other.kill()
        other.wait()
    runner.run("smoke", only="01")  # the holder is gone: its stale lock is taken over
    assert ran == ["smoke"] and not lock.exists()


# ----------------------------------------------------------------------------- row 15: threads
def test_threads_0_honours_omp_num_threads(monkeypatch):
    before = torch.get_num_threads()
    want = (os.cpu_count() or 1) + 1  # not what "all CPUs" would give
    monkeypatch.setenv("OMP_NUM_THREADS", str(want))
    try:
        assert config.set_threads(0) == want and torch.get_num_threads() == want
        assert config.set_threads(1) == 1
        monkeypatch.delenv("OMP_NUM_THREADS")
        assert config.set_threads(0) == (os.cpu_count() or 1)
    finally:
        torch.set_num_threads(before)


# ----------------------------------------------------------------------------- row 13: missing upstream output
def test_missing_decoder_names_the_notebook_to_run(tmp_path, monkeypatch):
    from helpers.models.decoder import load_decoder
    from helpers.models.ltg_bert import load_model
    from helpers.data.tokenizers import load_tokenizer

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    missing = tmp_path / "runs" / "smoke" / "decoders" / "tiny-10k" / "best"
    for load in (load_decoder, load_tokenizer):
        with pytest.raises(FileNotFoundError, match=r"^no \w+ at runs/smoke/decoders/tiny-10k/best; .*"
                                                    r"run notebook 02 for profile smoke first") as e:
            load(missing)
        assert str(tmp_path) not in str(e.value)  # the path as the reader sees it, not this machine's
    # notebook 02 (or any reader of a corpus) before notebook 01 ever ran
    with pytest.raises(FileNotFoundError, match=r"^no corpus at runs/smoke/data/tiny-valid.jsonl; it is made by notebook "
                                                r"01: run notebook 01 for profile smoke first"):
        read_corpus(tmp_path / "runs" / "smoke" / "data" / "tiny-valid.jsonl")
    with pytest.raises(FileNotFoundError, match=r"run notebook 04 for profile paper first"):
        load_model(tmp_path / "runs" / "paper" / "encoders" / "baby-10M" / "best")


# ----------------------------------------------------------------------------- rows 6, 7, 8: data and ledger
def _corpora(tmp_path) -> Path:
    stories = [f"Once upon a time there was a cat number {i} who liked to play in the sun all day long." for i in range(60)]
    data = tmp_path / "runs" / "smoke" / "data"
    prepare_corpora(data, stories, {"x.txt.gz": "abc"}, [], {}, [200, 400], [], seed=1, heldout_max_words=100)
    return data


def test_truncated_corpus_stops_instead_of_training_on_less(tmp_path, monkeypatch):
    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    data = _corpora(tmp_path)
    f = data / "tiny-400.jsonl"
    rows = read_corpus(f)
    lines = f.read_text().splitlines(keepends=True)
    f.write_text("".join(lines[: len(lines) // 2]))  # cut at a line end: still valid JSONL
    with pytest.raises(budgets.BudgetError, match=r"runs/smoke/data/tiny-400.jsonl does not match the budget ledger "
                                                  r".*truncated.*rerun notebook 01 for profile smoke"):
        read_corpus(f)
    ledger = Ledger(data / "ledger.json")
    with pytest.raises(budgets.BudgetError, match=r"^corpus 'tiny-400': runs/smoke/data/tiny-400.jsonl does not match"
                                                  r" the budget ledger") as e:
        ledger.verify("tiny-400")
    assert str(tmp_path) not in str(e.value) and "\n" not in str(e.value)  # one line, no machine path
    ledger = Ledger(data / "ledger.json")
    assert ledger["tiny-400"].sha256 and ledger["tiny-400"].words == sum(len(r["text"].split()) for r in rows)
    h = data / "tiny-heldout.jsonl"  # files outside the ledger's corpora are recorded too
    h.write_text(h.read_text()[:-5])
    with pytest.raises(budgets.BudgetError, match="tiny-heldout.jsonl does not match the budget ledger"):
        read_corpus(h)


def test_a_damaged_output_reruns_its_step(tmp_path):
    out = tmp_path / "data"
    calls = []

    def make():
        calls.append(1)
        artifacts.write_jsonl(out / "tiny-1k.jsonl", [{"text": f"story {i}"} for i in range(20)])
        artifacts.write_json(out / "ledger.json", {"corpora": []})

    assert artifacts.run_step("budgets", out, "fp1", make, log=lambda m: None, mutable=["ledger.json"])
    assert not artifacts.run_step("budgets", out, "fp1", make, log=lambda m: None, mutable=["ledger.json"])
    artifacts.write_json(out / "ledger.json", {"corpora": [{"a later notebook": "adds a corpus"}]})
    assert not artifacts.run_step("budgets", out, "fp1", make, log=lambda m: None, mutable=["ledger.json"])
    f = out / "tiny-1k.jsonl"
    f.write_text(f.read_text()[:-7])  # cut mid-line
    lines: list[str] = []
    assert artifacts.run_step("budgets", out, "fp1", make, log=lines.append, mutable=["ledger.json"])
    assert lines[0].startswith("[redo] budgets: its output") and "truncated" in lines[0]
    assert len(artifacts.read_jsonl(f)) == 20 and len(calls) == 2
    f.write_text(f.read_text().replace("story 3", "story 9"))  # same size, edited
    assert artifacts.run_step("budgets", out, "fp1", make, log=lines.append) and len(calls) == 3
    f.unlink()
    assert artifacts.run_step("budgets", out, "fp1", make, log=lines.append) and len(calls) == 4
    single = tmp_path / "rows.jsonl"  # a step whose output is one file
    assert artifacts.run_step("rows", single, "fp", lambda: artifacts.write_jsonl(single, [{"a": 1}]), log=print)
    single.write_text("")
    assert artifacts.run_step("rows", single, "fp", lambda: artifacts.write_jsonl(single, [{"a": 1}]), log=print)


def test_the_track_budget_has_one_owner(tmp_path):
    data = _corpora(tmp_path)
    ledger = Ledger(data / "ledger.json")
    ledger.set_track_budget(400)  # notebook 01
    again = Ledger(data / "ledger.json")  # notebook 04 reads the ledger
    assert again.check_mix(["tiny-400"], 400)["tiny"] <= 400
    with pytest.raises(budgets.BudgetError, match=r"track_budget 800 differs from the ledger's 400, which notebook 01 set"):
        again.check_mix(["tiny-400"], 800)


# ----------------------------------------------------------------------------- rows 4, 5: the judge
class _Server:
    """A chat-completions server on 127.0.0.1 replying ``reply(completion)`` (None: a usable grade)."""

    GOOD = "Grammar: 8/10\nCreativity: 6/10\nConsistency: 7/10\nPlot: 5/10\nAge group: B"

    def __init__(self, reply):
        self.calls = 0
        srv = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                srv.calls += 1
                content = reply(body["messages"][0]["content"]) or srv.GOOD
                data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _items(n):
    return [{"model": "m", "prompt": "Once upon a time, Lily", "completion": f"story {i}"} for i in range(n)]


def test_an_unreachable_judge_stops_after_a_few_failures(tmp_path):
    from helpers.judge import runs as JR
    from helpers.judge.rubric import JudgeUnreachable
    from helpers.judge.client import JudgeClient
    from helpers.judge.runs import grade_completions

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = JR.judge_config(f"http://127.0.0.1:{port}/v1", "judge", cache_dir=tmp_path / "judge", timeout=2.5,
                          max_retries=8, max_concurrency=2, backoff_base=0.001, backoff_max=0.01)
    assert cfg.timeout == 2.5 and cfg.max_retries == 8
    client = JudgeClient(cfg, sleep=lambda s: None)
    with pytest.raises(JudgeUnreachable, match=rf"judge endpoint http://127.0.0.1:{port}/v1 cannot be reached: 3 "
                                               r"requests in a row failed .*stay cached"):
        grade_completions(cfg, _items(20), progress=False, client=client)
    assert client.requests <= 3 + cfg.max_concurrency  # not 20 items x 9 attempts
    # the notebook takes the timeout and the retries from its params
    declared = runner.declared_parameters(REPO / "notebooks" / "05b_story_evaluation.ipynb")
    assert {"judge_timeout", "judge_retries"} <= set(declared)
    for profile in config.PROFILES:
        p = config.load_params(profile, "05b")
        assert p["judge_timeout"] > 0 and p["judge_retries"] >= 0


def test_no_usable_grade_fails_loudly_and_partial_results_stay_cached(tmp_path):
    from helpers.judge.rubric import JudgeError
    from helpers.judge.client import JudgeConfig
    from helpers.judge.runs import grade_completions

    server = _Server(lambda first: None if "story 0" in first else "What a lovely story! I would not grade it.")
    try:
        cfg = JudgeConfig(base_url=server.url, model="judge", api_key_env="NO_SUCH_KEY_ENV", cache_dir=tmp_path / "c",
                          max_retries=1, backoff_base=0.001, backoff_max=0.01, two_turn=False)
        with pytest.raises(JudgeError, match=r"none of the 3 item\(s\) got a usable grade"):
            grade_completions(cfg, _items(4)[1:], progress=False)
        df = grade_completions(cfg, _items(4), progress=False)  # one usable: a partial result, not an error
        assert df["status"].tolist() == ["graded", "failed", "failed", "failed"]
        calls = server.calls
        df = grade_completions(cfg, _items(1), progress=False)
        assert df["status"].tolist() == ["cached"] and server.calls == calls
    finally:
        server.close()


def test_data_errors_name_files_relative_to_the_repository(tmp_path, monkeypatch):
    """A DataError never shows this machine's absolute path of a file in the repository or the runs folder."""
    from helpers.core.config import repo_root
    from helpers.data.story_files import DataError

    inside = repo_root() / "data" / "missing.txt"
    assert str(DataError(f"cannot read {inside}: gone")) == "cannot read data/missing.txt: gone"
    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "r"))
    msg = str(DataError(f"{tmp_path / 'r' / 'cpu' / 'data' / 'tiny-1M.jsonl'} is empty"))
    assert msg == "runs/cpu/data/tiny-1M.jsonl is empty" and str(tmp_path) not in msg


def test_a_read_only_reports_folder_is_one_clear_line(tmp_path, monkeypatch):
    """reports/ on a read-only file system (or not writable): the lock says which folder and what to do, not a raw
    '[Errno 30]' on its temporary file."""
    import errno
    import pathlib

    from helpers.core.locking import ProfileLock

    monkeypatch.setenv("STORYBENCH_REPORTS", str(tmp_path / "reports"))

    def read_only(self, *a, **k):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(pathlib.Path, "write_text", read_only)
    with pytest.raises(OSError) as e:
        ProfileLock("smoke").__enter__()
    msg = str(e.value)
    assert msg.startswith("cannot write reports/smoke/ (Read-only file system)") and "STORYBENCH_REPORTS" in msg
    assert "Errno" not in msg and ".tmp" not in msg
