"""Training decoders outside the notebook: a job array of one budget per task (its plan by dry run, its lock beside
other budgets' and against ./run_all.sh's) and the torchrun entry point."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from helpers.core import locking
from helpers.core.config import load_params
from helpers.training import launch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def reports(tmp_path, monkeypatch):
    monkeypatch.setenv("STORYBENCH_REPORTS", str(tmp_path / "reports"))
    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    return tmp_path / "reports"


def test_the_array_tasks_cover_every_budget_once_by_dry_run(reports, capsys):
    """--array-tasks gives the count for #SBATCH --array; task N's dry run names the N-th budget, all its seeds, their
    folders and its lock, and trains nothing; the tasks together are exactly the profile's runs."""
    p = load_params("smoke", "02")
    assert launch.main(["--profile", "smoke", "--array-tasks"]) == 0
    n = int(capsys.readouterr().out)
    assert n == len(p["budgets"])
    runs = []
    for task in range(n):
        assert launch.main(["--profile", "smoke", "--array-task", str(task), "--dry-run"]) == 0
        out = capsys.readouterr().out
        budget = p["budgets"][task]
        assert out.startswith(f"budget {budget}: ") and f".train-{budget}.lock" in out
        runs += re.findall(r"^  (.+) -> runs/smoke/decoders/\1$", out, flags=re.M)
    seeds = p.get("seeds") or {}
    expected = list(p["budgets"]) + [f"{b} (seed {s})" for b in p["budgets"] for s in seeds.get(b, [])
                                     if s != p["train"]["seed"]]
    assert sorted(runs) == sorted(expected)
    assert not (reports.parent / "runs" / "smoke" / "decoders").exists()  # nothing trained


def test_a_wrong_task_is_refused_in_one_line(reports, capsys):
    assert launch.main(["--profile", "smoke", "--array-task", "99", "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "out of range" in err and "--array=0-" in err
    assert launch.main(["--profile", "smoke", "--array-task", "0", "--budgets", "tiny-10k"]) == 1
    assert "drop --budgets" in capsys.readouterr().err


def test_budget_locks_run_side_by_side_but_never_beside_the_profiles_own(reports):
    with locking.ProfileLock("smoke", budget="tiny-10k"), locking.ProfileLock("smoke", budget="tiny-20k"):
        with pytest.raises(locking.ProfileBusy, match="budget 'tiny-10k'"):
            locking.ProfileLock("smoke", budget="tiny-10k").__enter__()  # the same budget twice
        with pytest.raises(locking.ProfileBusy, match=r"\.train-tiny-10k\.lock"):
            locking.ProfileLock("smoke").__enter__()  # ./run_all.sh while an array task trains
        assert not (reports / "smoke" / ".run.lock").exists()  # the refused lock was released
    with locking.ProfileLock("smoke"):
        with pytest.raises(locking.ProfileBusy, match=r"\.run\.lock"):
            locking.ProfileLock("smoke", budget="tiny-10k").__enter__()  # an array task while ./run_all.sh runs
        assert not (reports / "smoke" / ".train-tiny-10k.lock").exists()
    with locking.ProfileLock("smoke", budget="tiny-10k"):
        pass  # all released


def test_a_lock_taken_on_another_host_is_never_taken_over(reports):
    """On a shared file system a lock from another machine's process cannot be checked from here: refused, with the
    host named, even when a process of that pid does not exist here."""
    lock = reports / "smoke" / ".run.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text(json.dumps({"pid": 2**22 + 12345, "host": "node-17", "started": "then"}))
    with pytest.raises(locking.ProfileBusy, match="on host node-17"):
        locking.ProfileLock("smoke").__enter__()
    with pytest.raises(locking.ProfileBusy, match="on host node-17"):
        locking.ProfileLock("smoke", budget="tiny-10k").__enter__()
    lock.write_text(json.dumps({"pid": 2**22 + 12345, "host": locking.HOST}))  # this host, a dead pid: stale
    with locking.ProfileLock("smoke") as again:
        assert json.loads(again.path.read_text())["host"] == locking.HOST


def test_the_slurm_example_runs_the_tested_command():
    """docs/running.md's SLURM array script calls exactly the entry point tested above, with the task id."""
    doc = (ROOT / "docs" / "running.md").read_text()
    script = re.search(r"```bash\n(#!/bin/bash\n#SBATCH[^`]*?)```", doc).group(1)
    assert "python -m helpers.training.launch --profile paper --array-task \"$SLURM_ARRAY_TASK_ID\"" in script
    assert "#SBATCH --array=0-6" in script and len(load_params("paper", "02")["budgets"]) == 7


def test_torchrun_entry_point_opens_the_process_group_for_the_params_device(monkeypatch, reports):
    """Under torchrun: a params file that trains on the CPU gets gloo, not the NCCL group a GPU machine would
    otherwise open before the first decoder (whose own call then finds it open)."""
    from helpers.training.loop import Dist

    seen = []
    params = {"budgets": ["tiny-10k"], "model": {}, "train": {"steps": 1, "device": "cpu", "seed": 42}}
    monkeypatch.setattr(launch, "load_params", lambda profile, nb: params)
    monkeypatch.setattr(launch, "plan_decoders", lambda *a, **k: {})
    monkeypatch.setattr(launch, "init_distributed", lambda device="auto": seen.append(device) or Dist())
    assert launch.main(["--profile", "smoke"]) == 0
    assert seen == ["cpu"]
    params["train"].pop("device")
    launch.main(["--profile", "smoke"])
    assert seen == ["cpu", "auto"]
    assert os.environ.get("RANK", "0") == "0"
