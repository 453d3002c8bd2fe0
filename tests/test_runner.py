import pytest
import yaml

from helpers import config, runner


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
