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
    assert note and "no native bf16" in note and "fp32" in note
    assert runner.machine_note("smoke") is None  # seconds either way
    monkeypatch.setattr(hardware, "native_bf16", lambda device="cpu": True)
    assert runner.machine_note("cpu") is None
    monkeypatch.setattr(hardware, "native_bf16", lambda device="cpu": False)
    monkeypatch.setattr(hardware, "gpu_names", lambda: ["Some GPU"])
    assert runner.machine_note("cpu") is None
