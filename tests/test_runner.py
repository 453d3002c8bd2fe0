import json
import os

import pytest
import yaml

from helpers.core import config
from helpers import runner


def test_unknown_profile():
    with pytest.raises(ValueError, match="unknown profile 'gpu'"):
        runner.plan("gpu", runner.notebooks())


def test_every_notebook_has_params_for_every_profile():
    for profile in config.PROFILES:
        runner.plan(profile, runner.notebooks())  # raises on missing files or undeclared keys


def test_undeclared_key_and_missing_file(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "params" / "smoke").mkdir(parents=True)
    (root / "notebooks").mkdir()
    (root / "pyproject.toml").write_text("")
    src = config.repo_root() / "notebooks" / "01_data_budgets.ipynb"
    (root / "notebooks" / src.name).write_bytes(src.read_bytes())
    monkeypatch.setenv("STORYBENCH_ROOT", str(root))
    with pytest.raises(runner.RunnerError, match="no params file"):
        runner.plan("smoke", runner.notebooks())
    (root / "params" / "smoke" / "01_data_budgets.yaml").write_text(yaml.safe_dump({"seed": 1, "sede": 2}))
    with pytest.raises(runner.RunnerError, match=r"key\(s\) \['sede'\] are not declared"):
        runner.plan("smoke", runner.notebooks())


def test_selection():
    nbs = runner.notebooks()
    assert runner.select(nbs, "1", None) == nbs[:1]
    assert runner.select(nbs, None, "01") == nbs
    with pytest.raises(runner.RunnerError, match="unknown notebook"):
        runner.select(nbs, "99", None)


def test_cli_error_exit_code(capsys):
    assert runner.main(["--profile", "nope"]) == 1
    assert "unknown profile" in capsys.readouterr().err


def test_kernels_start_on_ipc_sockets_without_the_tcp_warning(tmp_path, monkeypatch, capfd):
    import nbformat
    import papermill as pm

    from helpers.runner import kernel_transport

    monkeypatch.setenv("STORYBENCH_KERNEL_TRANSPORT", "tcp")
    assert kernel_transport() == {}
    monkeypatch.setenv("STORYBENCH_KERNEL_TRANSPORT", "zmq")
    with pytest.raises(ValueError, match="ipc or tcp"):
        kernel_transport()
    monkeypatch.delenv("STORYBENCH_KERNEL_TRANSPORT")
    if os.name == "nt":
        assert kernel_transport() == {}
        return
    kw = kernel_transport()
    assert kw["config"]["KernelManager"]["transport"] == "ipc"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "in.ipynb")
    capfd.readouterr()
    pm.execute_notebook(str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"), progress_bar=False, **kw)
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert out.cells[0].outputs[0]["text"] == "42\n"
    assert "without encryption" not in capfd.readouterr().err
    # the same kernel on TCP prints the warning (ipykernel >= 7), so the check above can fail
    import ipykernel

    if int(ipykernel.__version__.split(".")[0]) >= 7:
        pm.execute_notebook(str(tmp_path / "in.ipynb"), str(tmp_path / "out2.ipynb"), progress_bar=False)
        assert "without encryption" in capfd.readouterr().err


def test_machine_note_warns_a_cpu_run_without_bf16_or_gpu(monkeypatch):
    from helpers.core import hardware

    monkeypatch.setattr(hardware, "gpu_names", lambda: [])
    monkeypatch.setattr(hardware, "native_bf16", lambda device="cpu": False)
    note = runner.machine_note("cpu")
    assert note and "no native bf16" in note and "fp32" in note and "resumes" in note
    assert runner.machine_note("smoke") is None  # seconds either way
    monkeypatch.setattr(hardware, "native_bf16", lambda device="cpu": True)
    assert runner.machine_note("cpu") is None
    monkeypatch.setattr(hardware, "native_bf16", lambda device="cpu": False)
    monkeypatch.setattr(hardware, "gpu_names", lambda: ["Some GPU"])
    assert runner.machine_note("cpu") is None


def test_set_overrides_a_nested_parameter_and_refuses_what_nothing_declares(repo):
    over = runner.parse_overrides(["02.train.lr=1e-3", "02.sample_tokens=7"])
    assert over == {"02": {"train.lr": 0.001, "sample_tokens": 7}}  # YAML 1.2 numbers, as in the params files
    nbs = runner.select(runner.notebooks(), "01,02", None)
    params = dict((nb.name, p) for nb, p in runner.plan("smoke", nbs, over))
    assert params["02_decoder_training.ipynb"]["train"]["lr"] == 0.001
    assert params["02_decoder_training.ipynb"]["train"]["steps"] > 0  # the rest of the mapping kept
    with pytest.raises(runner.RunnerError, match=r"with --set 02\.train\.lrr: train\.lrr is not a parameter of train"):
        runner.plan("smoke", nbs, runner.parse_overrides(["02.train.lrr=1"]))
    with pytest.raises(runner.RunnerError, match="notebook 05 is not part of this run"):
        runner.plan("smoke", nbs, runner.parse_overrides(["05.seed=1"]))
    with pytest.raises(config.ParamsError, match="expected NN.key=value"):
        runner.parse_overrides(["train.lr=1"])
    with pytest.raises(runner.RunnerError, match="sample_tokens is not a mapping"):
        runner.plan("smoke", nbs, runner.parse_overrides(["02.sample_tokens.x=1"]))
    with pytest.raises(runner.RunnerError, match=r"key\(s\) \['seedz'\] are not declared"):
        runner.plan("smoke", nbs, runner.parse_overrides(["02.seedz=1"]))


def test_a_set_run_writes_a_variant_and_never_the_profiles_own_folders(repo, tmp_path, monkeypatch, capsys):
    """./run_all.sh --set 02.train.lr=1e-3 --profile smoke --only 01,02: the notebooks run into runs/variants/<id>/
    and reports/variants/<id>/ with the override injected; runs/smoke and reports/smoke (and cpu) stay untouched."""
    seen = {}

    def fake_run(profile, todo, log_output, rerun=""):
        seen.update(runs=os.environ["STORYBENCH_RUNS"], reports=os.environ["STORYBENCH_REPORTS"],
                    params={nb.name: p for nb, p in todo}, rerun=rerun,
                    # another notebook reading 02's params inside the variant (05b's instruct recipe) sees the override
                    p02=config.load_params(profile, "02"), p01=config.load_params(profile, "01"))
        return [{"notebook": nb.name, "seconds": 1.0} for nb, _ in todo]

    monkeypatch.setattr(runner, "_run", fake_run)
    assert runner.main(["--set", "02.train.lr=1e-3", "--profile", "smoke", "--only", "01,02"]) == 0
    assert seen["p02"]["train"]["lr"] == 0.001 and seen["p02"]["train"]["steps"] == config.load_params("smoke", "02")["train"]["steps"]
    p01 = config.load_params("smoke", "01")
    assert seen["p01"] == p01, {k: (v, p01.get(k)) for k, v in seen["p01"].items() if v != p01.get(k)}
    vid = runner.variant_id("smoke", {"02": {"train.lr": 0.001}})
    assert seen["runs"] == str(tmp_path / "runs" / "variants" / vid)
    assert seen["reports"] == str(tmp_path / "reports" / "variants" / vid)
    assert seen["params"]["02_decoder_training.ipynb"]["train"]["lr"] == 0.001
    written = json.loads((tmp_path / "reports" / "variants" / vid / "smoke" / "overrides.json").read_text())
    assert written == {"profile": "smoke", "set": {"02": {"train.lr": 0.001}}}
    assert not (tmp_path / "reports" / "smoke").exists() and not (tmp_path / "runs" / "smoke").exists()
    assert seen["rerun"] == " --set train.lr=0.001".replace(" --set ", " --set 02.")
    out = capsys.readouterr().out
    assert f"runs in runs/variants/{vid}/smoke, reports in reports/variants/{vid}/smoke" in out
    assert out.rstrip().endswith(f"reports in reports/variants/{vid}/smoke/")  # the closing line names the variant too


def test_an_empty_set_value_is_refused_in_one_line(capsys):
    with pytest.raises(config.ParamsError, match=r"--set '02\.train\.lr=': no value after '='.*02\.train\.lr=null"):
        runner.parse_overrides(["02.train.lr="])
    with pytest.raises(config.ParamsError, match="no value"):
        runner.parse_overrides(["02.seed=  "])
    assert runner.main(["--set", "02.train.lr=", "--profile", "smoke", "--only", "02"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no value after '='" in err
    assert runner.parse_overrides(["02.x=null"]) == {"02": {"x": None}}  # null on purpose is still a value


def test_set_arguments_give_the_same_variant_back():
    import shlex
    from helpers.core.overrides import set_arguments

    items = ["02.train.lr=1e-3", "02.sample_tokens=7", "05.name=tiny 1M", "05.x=[1, 2]", "05.y=null", "05.z='3'"]
    over = runner.parse_overrides(items)
    args = set_arguments(over)
    assert args.startswith(" --set 02.train.lr=0.001 --set 02.sample_tokens=7 --set '05.name=tiny 1M'")
    back = runner.parse_overrides([t for t in shlex.split(args) if t != "--set"])
    assert back == over and runner.variant_id("cpu", back) == runner.variant_id("cpu", over)
    assert set_arguments({}) == set_arguments(None) == ""


def test_a_variants_messages_and_hints_name_the_variant(repo, tmp_path, monkeypatch):
    """Under --set, an interrupt, a failure and the hints raised inside a notebook name the variant's folders and carry
    the --set arguments, so following a hint reruns the variant; the profile's own run is left as it was."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError
    from helpers.report import reporting, results

    over = {"02": {"train.lr": 0.001}}
    runs, reports = runner.variant_roots("smoke", over)
    monkeypatch.setenv("STORYBENCH_RUNS", str(runs))
    monkeypatch.setenv("STORYBENCH_REPORTS", str(reports))
    vid = runner.variant_id("smoke", over)
    rerun = runner.set_arguments(over)
    nb02 = [p for p in runner.notebooks() if p.name.startswith("02_")]
    monkeypatch.setattr(runner, "tidy_report", lambda *a, **k: None)
    monkeypatch.setattr(runner, "kernel_name", lambda: None)
    monkeypatch.setattr(reporting, "write_requirements_lock", lambda profile: None)
    hint = ("no tokenizer at runs/smoke/tokenizers/tiny-10k; it is made by notebook 01: run notebook 01 for profile smoke "
            "first (./run_all.sh --profile smoke --only 01)")

    def fail(nb, out, **kw):
        raise PapermillExecutionError(3, 4, "load()", "FileNotFoundError", hint, [])

    monkeypatch.setattr(pm, "execute_notebook", fail)
    with pytest.raises(runner.RunnerError) as e:
        runner._run("smoke", [(nb02[0], {})], False, rerun=rerun)
    msg = str(e.value)
    assert f"no tokenizer at runs/variants/{vid}/smoke/tokenizers/tiny-10k" in msg
    # the hint runs notebook 01 and the variant's 02: '--only 01 --set 02.…' alone would be refused (not part of this run)
    assert "(./run_all.sh --profile smoke --only 01,02 --set 02.train.lr=0.001)" in msg
    assert f"kept at reports/variants/{vid}/smoke/notebooks/02_decoder_training.ipynb" in msg
    monkeypatch.setattr(pm, "execute_notebook", lambda nb, out, **kw: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(runner.RunInterrupted) as e:
        runner._run("smoke", [(nb02[0], {})], False, rerun=rerun)
    msg = str(e.value)
    assert f"every step it completed in runs/variants/{vid}/smoke/ are kept" in msg
    assert msg.endswith("resume with ./run_all.sh --profile smoke --from 02 --set 02.train.lr=0.001")
    # the results line names the variant's results file
    lines = []
    monkeypatch.setattr(pm, "execute_notebook", lambda nb, out, **kw: None)
    monkeypatch.setattr("builtins.print", lambda *a, **k: lines.append(" ".join(map(str, a))))
    runner._run("smoke", [(nb02[0], {})], False, rerun=rerun)
    assert any(f"-> reports/variants/{vid}/smoke/results.csv" in x for x in lines), lines
    # the profile itself: messages as they were
    assert runner.variant_text(hint, "smoke", "") == hint


def test_a_params_folder_is_a_user_profile(repo):
    (repo / "params" / "mine").mkdir()
    (repo / "params" / "mine" / "01_data_budgets.yaml").write_bytes((repo / "params" / "smoke" / "01_data_budgets.yaml").read_bytes())
    assert "mine" in config.profiles() and config.check_profile("mine") == "mine"
    assert runner.plan("mine", runner.select(runner.notebooks(), "01", None))[0][1]["profile"] == "mine"
    with pytest.raises(ValueError, match="a user profile is a folder params/<name>/"):
        config.check_profile("nope")


def test_a_finished_notebook_leaves_no_output_of_an_earlier_version(tmp_path, monkeypatch):
    """Tables and figures under a notebook's prefix that its run did not rewrite (renamed since, or written only under
    a condition that no longer holds) are removed once it finishes; other notebooks' outputs and the outputs of a
    notebook that did not finish stay."""
    import papermill as pm
    from helpers.report import reporting, results

    monkeypatch.setenv("STORYBENCH_REPORTS", str(tmp_path / "reports"))
    reports = config.reports_dir("smoke")
    old = [reports / "tables" / "05_old_table.csv", reports / "figures" / "05_old_figure.png",
           reports / "tables" / "05b_other_notebook.csv", reports / "tables" / "06_other.csv"]
    for f in old:
        f.write_text("x")
        os.utime(f, (1e9, 1e9))  # written long before this run
    fail = {"now": False}

    def fake_execute(nb, out, **kw):
        if fail["now"]:
            raise KeyboardInterrupt
        (reports / "tables" / "05_kept.csv").write_text("y")

    monkeypatch.setattr(pm, "execute_notebook", fake_execute)
    monkeypatch.setattr(runner, "tidy_report", lambda *a, **k: None)
    monkeypatch.setattr(runner, "kernel_name", lambda: None)
    monkeypatch.setattr(reporting, "write_requirements_lock", lambda profile: None)
    monkeypatch.setattr(results, "write_results", lambda profile, **kw: None)
    nb05 = [p for p in runner.notebooks() if p.name.startswith("05_")]
    fail["now"] = True
    with pytest.raises(runner.RunInterrupted):
        runner._run("smoke", [(nb05[0], {})], False)
    assert all(f.exists() for f in old)  # an interrupted notebook removes nothing
    fail["now"] = False
    runner._run("smoke", [(nb05[0], {})], False)
    assert not old[0].exists() and not old[1].exists()
    assert old[2].exists() and old[3].exists() and (reports / "tables" / "05_kept.csv").exists()


def test_an_interrupt_names_the_cell_it_stopped_in_or_says_none_had_started(tmp_path):
    out = tmp_path / "05_evaluation.ipynb"
    assert runner._running_cell(out) == "before its first cell: the kernel was starting"  # nothing saved yet
    cells = [{"cell_type": "code", "source": "import pandas as pd", "metadata": {"papermill": {}}},
             {"cell_type": "code", "source": "zero = score()\nmore", "metadata": {"papermill": {}}}]
    out.write_text(json.dumps({"cells": cells}))
    assert runner._running_cell(out) == "before its first cell: the kernel was starting"  # none started
    cells[0]["metadata"]["papermill"] = {"start_time": "t", "status": "completed"}
    cells[1]["metadata"]["papermill"] = {"start_time": "t", "status": "running"}
    out.write_text(json.dumps({"cells": cells}))
    assert runner._running_cell(out) == "cell 1 ('zero = score()')"
    out.write_text("{not json")
    assert "unreadable executed copy" in runner._running_cell(out)


def test_log_output_shows_what_the_cells_print(repo, tmp_path, monkeypatch, capsys):
    import logging

    import papermill as pm

    from helpers.report import reporting

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("STORYBENCH_REPORTS", str(tmp_path / "reports"))
    monkeypatch.setattr(runner, "tidy_report", lambda *a, **k: None)
    monkeypatch.setattr(runner, "kernel_name", lambda: None)
    monkeypatch.setattr(reporting, "write_requirements_lock", lambda profile: None)
    # papermill hands a cell's stdout to its logger at INFO when log_output is set
    monkeypatch.setattr(pm, "execute_notebook", lambda nb, out, **kw: logging.getLogger("papermill").info(
        "[redo] tiny-10k: damaged; training it again\n"))
    nb01 = [p for p in runner.notebooks() if p.name.startswith("01_")]
    runner._run("smoke", [(nb01[0], {})], True)
    assert "[redo] tiny-10k: damaged; training it again" in capsys.readouterr().out



def test_kernels_start_quiet_about_their_own_shutdown(tmp_path):
    """The runner's kernels log nothing of their own (a Ctrl-C as one starts printed a ZMQError traceback) and silence
    asyncio's "Task was destroyed but it is pending!" that a finished kernel printed when shut down (seen after 02b),
    without adding a name to the notebook's namespace."""
    import nbformat
    import papermill as pm

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "print('logging' in dir())\nimport logging\nprint(logging.getLogger('asyncio').level)")])
    nbformat.write(nb, tmp_path / "in.ipynb")
    pm.execute_notebook(str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"), kernel_name=runner.kernel_name(),
                        progress_bar=False, extra_arguments=runner.KERNEL_ARGS)
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[0].outputs
    assert out[0]["text"].split() == ["False", "50"]
    assert "--IPKernelApp.log_level=CRITICAL" in runner.KERNEL_ARGS
