"""Each notebook's runs, as the runner records them: every attempt (finished, interrupted, failed or killed) with its
wall time, peak memory, revision and CPU in ``reports/<profile>/timings_history.jsonl``, the latest finished time per
notebook in ``timings.json``, and in ``manifest.json`` the notebook's cold run at the current revision summed over its
resumptions (:func:`cold_run`): a run stopped and resumed counts every attempt until the first that finished.

An attempt killed outright (SIGKILL, a session's end) cannot record itself; its heartbeat file
(``reports/<profile>/.attempt-<notebook>.json``, rewritten every 30 s by the runner's memory sampler,
:class:`helpers.core.process_memory.TreePeak`) is left behind, and the next attempt records it (:func:`start_attempt`)
with the time and peaks of its last heartbeat: at most ~30 s short.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from helpers.core.artifacts import append_jsonl, read_json, read_jsonl, write_json, write_text
from helpers.core.config import reports_dir
from helpers.core import hardware  # as a module: what runs on the machine is read at call time (and patchable)
from helpers.report.reporting import git_revision

STATUSES = ("finished", "interrupted", "failed", "killed")
HEARTBEAT_GLOB = ".attempt-*.json"


def machine() -> dict:
    """The revision and CPU fields of a history row (and GPUs where there are some)."""
    cpu = hardware.cpu_info()
    row = {"revision": git_revision(), "cpu": cpu["label"], "cpu_flags": cpu["flags"], "cores": cpu["cores"]}
    if gpus := hardware.gpu_names():
        row["gpus"] = gpus
    return row


def start_attempt(profile: str, notebook: str) -> tuple[Path, dict]:
    """Before an attempt of ``notebook``: every heartbeat file left in the profile's reports (an attempt killed
    outright; the profile's lock lets one runner at a time write there) goes into the history as ``killed``, with
    its last known seconds and peaks, and is removed. Returns this attempt's heartbeat path and the label its sampler
    writes into it (notebook, revision, CPU), so that if it is killed too, the next attempt records it likewise."""
    folder = reports_dir(profile)
    for beat in sorted(folder.glob(HEARTBEAT_GLOB)):
        try:
            row = read_json(beat)
        except (OSError, ValueError):  # cut mid-write: nothing to record
            row = None
        if isinstance(row, dict) and row.get("notebook"):
            append_jsonl(folder / "timings_history.jsonl", {**row, "status": "killed"})
        beat.unlink(missing_ok=True)
    return folder / f".attempt-{Path(notebook).stem}.json", {"notebook": notebook, **machine()}


def record_attempt(profile: str, timing: dict, status: str = "finished", label: dict | None = None) -> dict | None:
    """Append one attempt of a notebook (``timing``: ``notebook``, ``seconds``, peak memory) to the history with its
    ``status``, date, revision and CPU (``label``: :func:`start_attempt`'s, the revision the attempt started at; else
    :func:`machine` now); a finished one also updates ``timings.json`` and the notebook's manifest entry
    (``run``: :func:`cold_run`). Returns that summary (None for an unfinished attempt or a notebook without an entry)."""
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, not {status!r}")
    folder = reports_dir(profile)
    here = {k: v for k, v in label.items() if k != "notebook"} if label else machine()
    row = {**timing, "status": status, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **here}
    revision = row["revision"]
    append_jsonl(folder / "timings_history.jsonl", row)
    if status != "finished":
        return None
    timing_file = folder / "timings.json"
    try:
        old = json.loads(timing_file.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        old = {}
    old[timing["notebook"]] = timing["seconds"]
    write_text(timing_file, json.dumps(dict(sorted(old.items())), indent=2) + "\n")
    return stamp_manifest(folder, timing["notebook"], revision)


def cold_run(history: list[dict], notebook: str, revision: str) -> dict | None:
    """The run of ``notebook`` at ``revision`` from its ``history`` rows: its attempts up to and including the first
    that finished (rows written before statuses were recorded count as finished), their summed wall time and highest
    peak memory, the resumptions (attempts - 1) and the later runs at the same revision (reruns that skip cached
    work). None when no attempt at that revision finished."""
    rows = [r for r in history if r.get("notebook") == notebook and r.get("revision") == revision]
    done = next((i for i, r in enumerate(rows) if r.get("status", "finished") == "finished"), None)
    if done is None:
        return None
    cold = rows[:done + 1]
    peaks = [r["peak_rss_mib"] for r in cold if r.get("peak_rss_mib") is not None]
    anon = [r["peak_anon_mib"] for r in cold if r.get("peak_anon_mib") is not None]
    return {"revision": revision, "attempts": len(cold), "resumptions": len(cold) - 1,
            "statuses": [r.get("status", "finished") for r in cold],
            "wall_seconds": round(sum(float(r["seconds"]) for r in cold), 1),
            "peak_rss_mib": max(peaks) if peaks else None, "peak_anon_mib": max(anon) if anon else None,
            "cpu": cold[-1].get("cpu"),
            "finished": cold[-1].get("finished"), "later_runs": len(rows) - len(cold)}


def stamp_manifest(folder: Path, notebook: str, revision: str) -> dict | None:
    """Write :func:`cold_run` into the notebook's ``manifest.json`` entry as ``run`` (the notebook writes its entry in
    its last cell, so the runner adds this after it finished)."""
    key = Path(notebook).stem
    try:
        manifest = read_json(folder / "manifest.json")
        history = read_jsonl(folder / "timings_history.jsonl")
    except FileNotFoundError:
        return None
    summary = cold_run(history, Path(notebook).name if notebook.endswith(".ipynb") else f"{key}.ipynb", revision)
    if key not in manifest or summary is None:
        return None
    manifest[key]["run"] = summary
    write_json(folder / "manifest.json", dict(sorted(manifest.items())))
    return summary
