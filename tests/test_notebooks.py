"""Run every notebook on the smoke profile with papermill, in order, in a scratch run/report folder."""
from pathlib import Path

import pytest

from helpers import runner

NOTEBOOKS = [p.name for p in runner.notebooks()]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory, monkeypatch_module=None):
    return tmp_path_factory.mktemp("smoke")


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_smoke(name, scratch, monkeypatch):
    monkeypatch.setenv("STORYBENCH_RUNS", str(scratch / "runs"))
    monkeypatch.setenv("STORYBENCH_REPORTS", str(scratch / "reports"))
    timings = runner.run("smoke", only=name.split("_")[0])
    assert [t["notebook"] for t in timings] == [name]
    out = scratch / "reports" / "smoke"
    assert (out / "notebooks" / name).is_file()
    assert (out / "manifest.json").is_file()
    import json

    manifest = json.loads((out / "manifest.json").read_text())
    key = name.removesuffix(".ipynb")
    assert key in manifest and manifest[key]["inputs_sha256"], "the notebook must record its inputs"
    run = manifest[key]["run"]  # stamped by the runner: the cold run at this revision, summed over resumptions
    assert run["attempts"] >= 1 and run["wall_seconds"] > 0 and run["revision"] == manifest[key]["git_revision"]
    last = json.loads((out / "timings_history.jsonl").read_text().splitlines()[-1])
    assert last["notebook"] == name and last["seconds"] > 0 and last["revision"]
    if Path("/proc/self/stat").exists():  # the kernel's memory, sampled while it ran (a kernel holds > 50 MiB)
        assert last["peak_rss_mib"] >= last["largest_process_mib"] > 50, last
    if name.startswith("01_"):  # every derived file a later notebook reads is checked through the ledger
        ledger = json.loads((scratch / "runs" / "smoke" / "data" / "ledger.json").read_text())
        assert {"tiny-heldout.jsonl", "tiny-valid.jsonl"} <= set(ledger["checksums"]), sorted(ledger["checksums"])
    meta = json.loads((out / "notebooks" / name).read_text())["metadata"]["papermill"]
    assert (meta["input_path"], meta["output_path"]) == (f"notebooks/{name}", f"reports/smoke/notebooks/{name}")
