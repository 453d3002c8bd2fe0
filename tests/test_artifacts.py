from pathlib import Path

import pytest

from helpers.core import artifacts as A


def test_atomic_file_and_failure(tmp_path):
    p = tmp_path / "x.json"
    A.write_json(p, {"a": 1})
    with pytest.raises(RuntimeError):
        with A.atomic_path(p) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert A.read_json(p) == {"a": 1}  # the old file survives an interrupted write
    assert [x.name for x in tmp_path.iterdir()] == ["x.json"]  # no temp litter


def test_atomic_folder_replace(tmp_path):
    d = tmp_path / "model"
    for v in ("1", "2"):
        with A.atomic_path(d) as tmp:
            tmp.mkdir()
            (tmp / "w").write_text(v)
    assert (d / "w").read_text() == "2"


def test_run_step_skips(tmp_path):
    out, calls = tmp_path / "out", []

    def make():
        calls.append(1)
        out.mkdir(exist_ok=True)

    logs = []
    assert A.run_step("s", out, "fp1", make, log=logs.append)
    assert not A.run_step("s", out, "fp1", make, log=logs.append)
    assert A.run_step("s", out, "fp2", make, log=logs.append)
    assert len(calls) == 2 and logs[1].startswith("[skip]")


def test_run_step_with_a_relative_file_path_stamps_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "eval").mkdir()
    out = Path("eval") / "blimp.jsonl"  # relative to the working folder, as a script passing "runs/cpu/..." makes it
    assert A.run_step("s", out, "fp1", lambda: A.write_jsonl(out, [{"a": 1}]), log=lambda m: None)
    assert A.step_problem(out, "fp1") is None and A.step_problem(tmp_path / out, "fp1") is None
    assert not A.run_step("s", out, "fp1", lambda: 1 / 0, log=lambda m: None)


def test_remove_unwritten_takes_only_old_files_of_the_prefix(tmp_path):
    import os
    import time

    for name in ("05_a.csv", "05_b.csv", "05b_c.csv", "06_d.csv"):
        (tmp_path / name).write_text("x")
        os.utime(tmp_path / name, (1e9, 1e9))
    os.utime(tmp_path / "05_b.csv")  # rewritten by this run: now
    gone = A.remove_unwritten([tmp_path, tmp_path / "missing"], "05_", time.time() - 1)
    assert [f.name for f in gone] == ["05_a.csv"]
    assert sorted(f.name for f in tmp_path.iterdir()) == ["05_b.csv", "05b_c.csv", "06_d.csv"]


def test_jsonl_malformed(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text('{"a": 1}\nnot json\n')
    with pytest.raises(ValueError, match="r.jsonl:2"):
        A.read_jsonl(p)


def test_fingerprint_stable():
    assert A.fingerprint({"b": 1, "a": 2}) == A.fingerprint({"a": 2, "b": 1}) != A.fingerprint({"a": 3})


def test_atomic_writes_get_the_usual_modes(tmp_path):
    """A file or folder written atomically is readable like an ordinary write (0644 / 0755 under umask 022), not
    private like the temporaries it was made in (a model folder's weights were 0600)."""
    import os
    import stat

    from helpers.core.artifacts import atomic_path

    old = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "model") as tmp:
            tmp.mkdir()
            fd = os.open(tmp / "model.safetensors", os.O_CREAT | os.O_WRONLY, 0o600)  # as a library's temporary
            os.close(fd)
        with atomic_path(tmp_path / "a.json") as tmp:
            tmp.write_text("{}")
            os.chmod(tmp, 0o600)
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(tmp_path / "model") == 0o755 and mode(tmp_path / "model" / "model.safetensors") == 0o644
    assert mode(tmp_path / "a.json") == 0o644


def test_a_garbled_json_file_is_named(tmp_path):
    from helpers.core.artifacts import read_json

    (tmp_path / "config.json").write_text('{"model_type": "gpt_neo",,}')
    with pytest.raises(ValueError, match=r"config.json: not valid JSON; .*: line 1 column \d+"):
        read_json(tmp_path / "config.json")
