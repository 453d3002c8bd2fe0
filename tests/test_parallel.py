"""helpers.parallel: independent jobs in worker processes give the same results as in the caller."""
import os

import pytest

from helpers import parallel
from parallel_jobs import fail, square


def test_resolve_workers():
    assert parallel.resolve_workers("auto", jobs=5, threads=2, device="cpu") == 2
    assert parallel.resolve_workers("auto", jobs=1, threads=8, device="cpu") == 1
    assert parallel.resolve_workers("auto", jobs=5, threads=8, device="cuda:0") == 1
    assert parallel.resolve_workers(3, jobs=2, threads=8) == 2
    for bad in (0, -1, "many", True, 1.5):
        with pytest.raises(ValueError, match="workers"):
            parallel.resolve_workers(bad, jobs=2, threads=2)


def test_inline_when_one_worker():
    out = parallel.run_jobs(square, {"a": dict(x=2), "b": dict(x=3)}, workers=1)
    assert [v["value"] for v in out.values()] == [4, 9]
    assert {v["pid"] for v in out.values()} == {os.getpid()}


def test_workers_match_inline_and_forward_output(capfd):
    jobs = {f"job{i}": dict(x=i, say=f"hello from {i}") for i in range(4)}
    out = parallel.run_jobs(square, jobs, workers=2, threads=2, desc="squares")
    assert list(out) == list(jobs)  # the caller's order, whatever finished first
    assert [v["value"] for v in out.values()] == [0, 1, 4, 9]
    assert os.getpid() not in {v["pid"] for v in out.values()}
    assert {v["threads"] for v in out.values()} == {1}  # 2 threads shared by 2 workers
    printed = capfd.readouterr().out
    for i in range(4):
        assert f"job{i} | hello from {i}" in printed  # a worker's print reaches the caller, tagged with its job


def test_a_failing_job_names_itself():
    with pytest.raises(parallel.JobError, match=r"job 'b' failed in its worker process: ValueError: bad input 2"):
        parallel.run_jobs(fail, {"b": dict(x=2), "c": dict(x=3)},
                          workers=2, threads=2)
