"""helpers.core.parallel: independent jobs in worker processes give the same results as in the caller."""
import contextlib
import os
import signal
import sys

import pytest

from helpers.core import parallel
from parallel_jobs import die, fail, square, which_gpu


def test_resolve_workers():
    assert parallel.resolve_workers("auto", jobs=5, threads=2, device="cpu") == 2
    assert parallel.resolve_workers("auto", jobs=1, threads=8, device="cpu") == 1
    assert parallel.resolve_workers("auto", jobs=5, threads=8, device="cuda:0", gpus=["0"]) == 1
    assert parallel.resolve_workers("auto", jobs=5, threads=8, device="cuda:0", gpus=["0", "1", "2", "3"]) == 4
    assert parallel.resolve_workers("auto", jobs=2, threads=8, device="cuda:0", gpus=["0", "1", "2", "3"]) == 2
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


@contextlib.contextmanager
def fails_after(seconds: int):
    """A hang fails the test instead of the suite: SIGALRM interrupts the caller's wait."""
    def stop(*_):
        raise TimeoutError(f"still waiting after {seconds} s")
    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_a_worker_killed_outright_stops_the_pool_instead_of_hanging():
    """multiprocessing.Pool replaces a killed worker and drops its job: the caller must notice and say so."""
    with fails_after(60), pytest.raises(parallel.JobError, match=r"a worker process died \(pid \d+ killed by signal 9 "
                                                                 r"\(SIGKILL: out of memory, or a kill\)\) with job\(s\) .*'b'"):
        parallel.run_jobs(die, {"a": dict(x=0), "b": dict(x=1), "c": dict(x=2)}, workers=2, threads=2, lone_tail_in_caller=False)


def test_a_job_function_the_workers_cannot_import_is_an_error_not_a_hang(tmp_path, monkeypatch):
    """The function travels by module and name and is imported in the worker: a module only the caller can see (a
    test once put another ``parallel_jobs`` first on the path) comes back as the job's error."""
    (tmp_path / "only_here.py").write_text("def f(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from only_here import f
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path)])
    with fails_after(60), pytest.raises(parallel.JobError, match=r"job 'a' failed in its worker process: "
                                                                 r"ModuleNotFoundError: No module named 'only_here'"):
        parallel.run_jobs(f, {"a": dict(x=1), "b": dict(x=2)}, workers=2, threads=2)


def test_a_lone_last_job_runs_in_the_caller_with_all_threads():
    import torch

    before = torch.get_num_threads()
    logs = []
    jobs = {f"job{i}": dict(x=i) for i in range(3)}  # rounds of 2 and 1 on 2 workers
    out = parallel.run_jobs(square, jobs, workers=2, threads=2, log=logs.append)
    assert list(out) == list(jobs) and [v["value"] for v in out.values()] == [0, 1, 4]
    assert os.getpid() not in {out["job0"]["pid"], out["job1"]["pid"]}
    assert {out["job0"]["threads"], out["job1"]["threads"]} == {1}
    assert out["job2"]["pid"] == os.getpid() and out["job2"]["threads"] == 2
    assert "'job2', alone afterwards with 2 threads" in logs[0]
    assert torch.get_num_threads() == before  # the caller's setting comes back
    off = parallel.run_jobs(square, jobs, workers=2, threads=2, log=logs.append, lone_tail_in_caller=False)
    assert off["job2"]["pid"] != os.getpid() and off["job2"]["threads"] == 1


def test_the_plan_in_words_is_the_plan_run_jobs_follows():
    names = [f"job{i}" for i in range(3)]
    assert parallel.plan_jobs(2, names, 2) == (2, 1, ["job2"])
    assert parallel.plan_jobs(2, names[:2], 2) == (2, 1, [])
    assert parallel.plan_jobs(2, names, 2, lone_tail_in_caller=False) == (2, 1, [])
    assert parallel.plan_jobs(1, names, 4) == (1, 4, [])
    assert parallel.describe_jobs(2, names[:2], 2) == "2 processes side by side, 1 thread(s) each"
    assert parallel.describe_jobs(2, names, 2) == "2 processes side by side, 1 thread(s) each; job2 alone afterwards with 2"
    assert parallel.describe_jobs("auto", names, 3, device="cuda:0", gpus=["0"]) == "one at a time, 3 thread(s)"
    assert parallel.describe_jobs("auto", names, 4, device="cuda:0", gpus=["2", "5"]) == \
        "2 processes side by side, one GPU each (2, 5)"  # no lone tail in the caller: every job keeps a GPU
    logs = []  # run_jobs announces the same plan
    parallel.run_jobs(square, {n: dict(x=1) for n in names}, workers=2, threads=2, log=logs.append)
    assert "3 jobs in 2 worker processes, 1 thread each; the last, 'job2', alone afterwards with 2 threads" == logs[0]


def test_jobs_spread_over_the_gpus_one_each(monkeypatch):
    """A simulated 2-GPU node (STORYBENCH_GPUS): "auto" gives one worker per GPU, each worker process sees only its
    own GPU (CUDA_VISIBLE_DEVICES), and the jobs run on both."""
    monkeypatch.setenv("STORYBENCH_GPUS", "0,1")
    assert parallel.visible_gpus() == ["0", "1"]
    logs = []
    jobs = {f"run{i}": dict(x=i) for i in range(4)}
    out = parallel.run_jobs(which_gpu, jobs, workers=2, threads=2, log=logs.append, gpus=["0", "1"])
    assert list(out) == list(jobs)
    by_pid = {}
    for v in out.values():
        by_pid.setdefault(v["pid"], set()).add(v["gpu"])
    assert all(len(g) == 1 for g in by_pid.values()), by_pid  # a worker keeps one GPU
    assert set().union(*by_pid.values()) == {"0", "1"} and os.getpid() not in by_pid
    assert logs[0] == "4 jobs in 2 worker processes, one GPU each (0, 1)"
