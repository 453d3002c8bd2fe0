"""Reliability probes: each fault, the command a user runs into it, and the one line that command prints.

    .venv/bin/python benchmarks/reliability_probes.py                        # a new scratch folder, smoke run ~6 min
    .venv/bin/python benchmarks/reliability_probes.py --scratch /tmp/sbp     # reuse (or create) a scratch folder
    .venv/bin/python benchmarks/reliability_probes.py --scratch /tmp/sbp --only 2,3,4   # some probes only

Everything happens in a scratch folder: ``STORYBENCH_RUNS`` and ``STORYBENCH_REPORTS`` point into it for every
command, so the checkout's ``runs/`` and ``reports/`` are never touched. A smoke run of notebooks 01 and 02 is made
there once (``python -m helpers.runner --profile smoke --only 01,02``); a rerun with the same ``--scratch`` reuses it.
Then each probe damages what it needs (weights overwritten with NaN, a garbled ``config.json``, a corpus with NUL
bytes, a judge server on 127.0.0.1 that drips or floods), runs the command, and keeps the last meaningful line of its
output, the exit status and the wall time. Each probe states what it expects (a regular expression on that line, the
exit status, text that must appear nowhere in the output, such as a traceback or the key); the script prints
PASS/FAIL per probe and writes the table to ``docs/reliability_probes.md`` (``--out`` elsewhere), headed by the
revision, the CPU and the date.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
PY = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
sys.path.insert(0, str(ROOT / "src"))

DECODERS = ROOT / "params" / "smoke" / "02_decoder_training.yaml"


@dataclass
class Probe:
    key: str
    fault: str
    shown: str  # the command as a user types it ($SCRATCH: the scratch folder)
    argv: list[str] | None = None  # what runs (None: ``run`` does it)
    expect: str = ""  # a regular expression the line must match (re.search)
    rc: int | tuple[int, ...] = 1
    forbid: tuple[str, ...] = ("Traceback",)  # regular expressions that must match nowhere in the output
    pick: str | None = None  # the line: the last one matching this (default: the last non-empty line, stderr first)
    max_seconds: float | None = None
    prepare: Callable[[], None] | None = None
    run: Callable[["Probe", dict], tuple[int, str, str]] | None = None  # returns (rc, stdout, stderr)
    derive: Callable[[str, str], str] | None = None  # the line from (stdout, stderr), when it is not printed as such
    first: bool = False  # pick: the first matching line, not the last
    timeout: float = 1200
    result: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------- small library-level snippets
# a local judge that answers every request with HANDLER(conn), and one chat request to it with a deadline of
# TIMEOUT s; prints "<outcome> after <s> s: ..." (the probes pick that line)
_SERVE_AND_ASK = r"""
def serve():
    for _ in range(600):  # bounded: at most ~2 min of accepting
        if stop.is_set(): return
        try: conn, _ = srv.accept()
        except OSError: continue
        threading.Thread(target=HANDLER, args=(conn,), daemon=True).start()
threading.Thread(target=serve, daemon=True).start()
cfg = JudgeConfig(base_url=f"http://127.0.0.1:{srv.getsockname()[1]}/v1", model="m", api_key_env="NO_SUCH_KEY_ENV",
                  timeout=TIMEOUT)
t0 = time.monotonic()
try:
    JudgeClient(cfg).chat([{"role": "user", "content": "grade this"}]); print("a reply, after", time.monotonic() - t0)
except Exception as e:
    print(f"{type(e).__name__} after {time.monotonic() - t0:.1f} s: {e}"); stop.set(); sys.exit(1)
"""


def _judge_script(server: str, handler: str, timeout: float) -> str:
    """A ``python -c`` script: ``server`` (sets up ``srv``, ``stop`` and the ``handler`` function), then
    :data:`_SERVE_AND_ASK` with that handler and deadline."""
    return server + _SERVE_AND_ASK.replace("HANDLER", handler).replace("TIMEOUT", repr(timeout))


DRIP = _judge_script(r"""
import socket, sys, threading, time
from helpers.judge.client import JudgeClient, JudgeConfig
body = b'{"choices": [{"message": {"content": "Grammar: 8/10"}}]}'
reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
srv = socket.create_server(("127.0.0.1", 0)); srv.settimeout(0.2); stop = threading.Event()
def drip(conn):  # one byte every 0.5 s (the whole reply would take ~50 s)
    with conn:
        try:
            conn.recv(65536)
            for i in range(len(reply)):
                if stop.is_set(): return
                conn.sendall(reply[i:i + 1]); time.sleep(0.5)
        except OSError: pass
""", "drip", 2)


def flood_script(announce: bool) -> str:
    """A judge that sends 50 MB (with or without Content-Length) to one request with a 30 s deadline."""
    return _judge_script(r"""
import socket, sys, threading, time
from helpers.judge.client import JudgeClient, JudgeConfig
ANNOUNCE = """ + repr(announce) + r"""
size = 50_000_000
head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
head += (b"Content-Length: %d\r\n" % size if ANNOUNCE else b"Connection: close\r\n") + b"\r\n"
srv = socket.create_server(("127.0.0.1", 0)); srv.settimeout(0.2); stop = threading.Event()
def flood(conn):  # 50 MB of JSON-ish bytes, 64 KiB at a time, until sent or the client hangs up
    with conn:
        try:
            conn.recv(65536); conn.sendall(head); chunk = b"x" * 65536
            for _ in range(size // len(chunk) + 1):
                if stop.is_set(): return
                conn.sendall(chunk)
        except OSError: pass
""", "flood", 30)

ESCAPE = r"""
import pandas as pd
from helpers.report import reporting
csv = reporting.save_table(pd.DataFrame({"story": ["<script>alert(1)</script> | the end"]}), "99_probe_escape", "smoke")
md = csv.with_suffix(".md").read_text(encoding="utf-8")
print(next(line for line in md.splitlines() if "script" in line))
"""


# ----------------------------------------------------------------------------- the scratch run and its damage
class Scratch:
    def __init__(self, path: Path):
        self.path = path
        self.runs, self.reports = path / "runs", path / "reports"
        self.env = {**os.environ, "STORYBENCH_RUNS": str(self.runs), "STORYBENCH_REPORTS": str(self.reports),
                    "STORYBENCH_ROOT": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.env.pop("OPENAI_API_KEY", None)

    def decoder(self, name: str) -> Path:
        return self.runs / "smoke" / "decoders" / name / "best"

    def ready(self) -> bool:
        names = ["tiny-10k", "tiny-20k", "tiny-40k", "tiny-10k (seed 7)", "tiny-40k (seed 7)"]
        return (self.runs / "smoke" / "data" / "ledger.json").is_file() and all(
            (self.runs / "smoke" / "decoders" / n / "train_state.json").is_file() for n in names)

    def prepare(self) -> None:
        if self.ready():
            print(f"reusing the smoke run in {self.path}", flush=True)
            return
        print(f"preparing the smoke run in {self.path} (python -m helpers.runner --profile smoke --only 01,02, "
              f"~6 min on 2 cores)", flush=True)
        t0 = time.time()
        p = subprocess.run([PY, "-m", "helpers.runner", "--profile", "smoke", "--only", "01,02"], cwd=ROOT,
                           env=self.env, capture_output=True, text=True)
        if p.returncode != 0 or not self.ready():
            sys.exit(f"the smoke run failed (rc {p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        print(f"  done in {(time.time() - t0) / 60:.1f} min", flush=True)

    def forget_variant(self, *sets: str) -> None:
        """Remove the scratch folders of the variant these --set arguments make (a rerun starts it afresh)."""
        import shutil

        from helpers.core.overrides import parse_overrides, variant_id

        vid = variant_id("smoke", parse_overrides(list(sets)))
        for root in (self.runs, self.reports):
            shutil.rmtree(root / "variants" / vid, ignore_errors=True)

    # damage --------------------------------------------------------------------------------------------------------
    def nan_weights(self, name: str, update_sidecar: bool = False) -> None:
        """Overwrite the decoder's weights with NaN at the same size (same header, same tensors); with
        ``update_sidecar`` the sidecar's SHA-256 is made to match (what a run that trained to NaN would have saved)."""
        from safetensors import safe_open
        from safetensors.torch import save_file

        from helpers.core.digests import sha256_file
        from helpers.core.integrity import SIDECAR

        f = self.decoder(name) / "model.safetensors"
        size = f.stat().st_size
        with safe_open(str(f), framework="pt") as sf:
            meta = sf.metadata()
            tensors = {k: sf.get_tensor(k) for k in sf.keys()}
        for k, t in tensors.items():
            if t.is_floating_point():
                tensors[k] = t.clone().fill_(float("nan"))
        tmp = f.with_name("model.nan.tmp")
        save_file(tensors, str(tmp), metadata=meta)
        os.replace(tmp, f)
        if f.stat().st_size != size:
            raise SystemExit(f"NaN weights of {name}: {f.stat().st_size} bytes, not {size}: the probe needs the same size")
        if update_sidecar:
            side = self.decoder(name) / SIDECAR
            info = json.loads(side.read_text())
            info["sha256"]["model.safetensors"] = sha256_file(f)
            side.write_text(json.dumps(info, indent=1))

    def garble_config(self, name: str) -> None:
        f = self.decoder(name) / "config.json"
        f.write_text(f.read_text()[: len(f.read_text()) // 2])

    def nul_corpus(self) -> Path:
        """The smoke profile's TinyStories file with NUL bytes inside three stories and one story of over 100,000
        characters (130 stories whose separators were lost)."""
        import gzip

        out = self.path / "stories_with_nul.txt"
        text = gzip.open(ROOT / "data" / "tinystories" / "v1_train_prefix_2MiB.txt.gz", "rt", encoding="utf-8").read()
        sep = "<|endoftext|>"
        stories = text.split(sep)
        for i in (3, 10, 20):
            s = stories[i]
            stories[i] = s[: len(s) // 2] + "\x00\x00" + s[len(s) // 2:]
        long = " ".join(s.strip() for s in stories[100:230])
        stories[100:230] = [long]
        out.write_text(sep.join(stories), encoding="utf-8")
        return out


# ----------------------------------------------------------------------------- running
def run_command(argv: list[str], env: dict, timeout: float) -> tuple[int, str, str]:
    try:
        p = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
                           start_new_session=True)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return -9, out, err + f"\n(probe: still running after {timeout:.0f} s: killed)"


def _default_sigint() -> None:
    """SIGINT as a terminal's foreground job has it: a script started in the background by a non-interactive shell
    (``nohup ... &``) inherits SIGINT ignored, and so would every command it starts (Python then installs no
    KeyboardInterrupt handler and Ctrl-C would do nothing)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_after(argv: list[str], env: dict, marker: str, delay: float, timeout: float = 600) -> tuple[int, str, str]:
    """Start ``argv`` in its own process group, wait for ``marker`` in its stdout, then ``delay`` seconds, then send
    SIGINT to the whole group (what Ctrl-C in a terminal does) and collect what it prints until it exits."""
    p = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=_default_sigint)
    out, err, seen = [], [], threading.Event()

    def pump(stream, sink, watch):
        for line in stream:
            sink.append(line)
            if watch and marker in line:
                seen.set()

    threads = [threading.Thread(target=pump, args=(p.stdout, out, True), daemon=True),
               threading.Thread(target=pump, args=(p.stderr, err, False), daemon=True)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    while not seen.wait(0.5) and p.poll() is None and time.monotonic() - t0 < timeout:
        pass
    if not seen.is_set():  # it ended (or hung) before the marker: what it printed is the result
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            err.append(f"\n(probe: {marker!r} never appeared in {timeout:.0f} s: killed)")
        rc = p.wait()
        for t in threads:
            t.join(5)
        return rc, "".join(out), "".join(err)
    time.sleep(delay)
    os.killpg(p.pid, signal.SIGINT)
    try:
        rc = p.wait(120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        rc = -9
        err.append("\n(probe: still running 120 s after SIGINT: killed)")
    for t in threads:
        t.join(5)
    return rc, "".join(out), "".join(err)


def last_line(stdout: str, stderr: str, pick: str | None, first: bool = False) -> str:
    lines = [x.strip() for x in (stdout + "\n" + stderr).splitlines() if x.strip()]
    if pick:
        hits = [x for x in lines if re.search(pick, x)]
        if hits:
            return hits[0] if first else hits[-1]
    for text in (stderr, stdout):
        rows = [x.strip() for x in text.splitlines() if x.strip()]
        if rows:
            return rows[-1]
    return "(nothing printed)"


def execute(probe: Probe, scratch: Scratch) -> dict:
    if probe.prepare:
        probe.prepare()
    t0 = time.monotonic()
    if probe.run:
        rc, out, err = probe.run(probe, scratch.env)
    else:
        rc, out, err = run_command(probe.argv, scratch.env, probe.timeout)
    seconds = time.monotonic() - t0
    line = probe.derive(out, err) if probe.derive else last_line(out, err, probe.pick, probe.first)
    why = []
    if not re.search(probe.expect, line):
        why.append(f"the line does not match {probe.expect!r}")
    if rc not in (probe.rc if isinstance(probe.rc, tuple) else (probe.rc,)):
        why.append(f"exit status {rc}, expected {probe.rc}")
    for bad in probe.forbid:
        if re.search(bad, out + err):
            why.append(f"the output holds {bad!r}")
    if probe.max_seconds is not None and seconds > probe.max_seconds:
        why.append(f"took {seconds:.1f} s, more than {probe.max_seconds:g} s")
    return {"rc": rc, "seconds": seconds, "line": line, "ok": not why, "why": "; ".join(why), "stdout": out,
            "stderr": err}


# ----------------------------------------------------------------------------- the probes
def probes(s: Scratch) -> list[Probe]:
    runner = [PY, "-m", "helpers.runner"]
    export = [PY, "-m", "helpers.evaluation.export"]
    ex_out = str(s.path / "export")
    sh = ROOT / "run_all.sh"

    def variant_of(stdout: str) -> Path | None:
        m = re.search(r"reports in reports/variants/([\w-]+)/smoke", stdout)
        return s.reports / "variants" / m.group(1) / "smoke" if m else None

    def repairs(out: str, err: str) -> str:
        import csv

        where = variant_of(out)
        f = where / "tables" / "01_mojibake_repairs.csv" if where else None
        if f is None or not f.is_file():
            return last_line(out, err, None)
        row = next(r for r in csv.DictReader(f.open(encoding="utf-8")) if r["corpus"] == "TinyStories train")
        long = next(k for k in row if k.startswith("over "))
        return (f"{f.relative_to(s.reports.parent).as_posix()}: TinyStories train, NUL bytes removed = "
                f"{row['NUL bytes removed']}, {long} = {row[long]}")

    def redo_line(out: str, err: str) -> str:
        """Probe 1a's line: the first [redo]/[skip] line of tiny-20k that --log-output printed; when it printed none,
        the same line from the executed notebook, said so."""
        line = last_line(out, err, REDO_20K, first=True)
        if re.search(REDO_20K, line):
            return line
        hits = [x for x in executed_lines(s.reports / "smoke" / "notebooks" / "02_decoder_training.ipynb")
                if re.search(REDO_20K, x)]
        return (hits[0] + "   (not printed by --log-output: read from the executed notebook)") if hits else line

    lr = "02.train.lr=1e-3"
    return [
        Probe("1a", "decoder weights overwritten with NaN at the same size: notebook 02 rerun",
              "python -m helpers.runner --profile smoke --only 02 --log-output   # after NaN weights in tiny-20k/best",
              runner + ["--profile", "smoke", "--only", "02", "--log-output"],
              expect=r"^\[redo\] tiny-20k: runs/smoke/decoders/tiny-20k/best/model\.safetensors is damaged: its SHA-256 "
                     r"differs .*; training it again", rc=0, pick=REDO_20K, first=True, derive=redo_line,
              forbid=("Traceback", r"\[skip\] tiny-20k: trained already"),
              prepare=lambda: s.nan_weights("tiny-20k")),
        Probe("1b", "the same NaN weights: the export CLI",
              f"python -m helpers.evaluation.export --model $SCRATCH/runs/smoke/decoders/tiny-20k/best --out $SCRATCH/export",
              export + ["--model", str(s.decoder("tiny-20k")), "--out", ex_out],
              expect=r"^export: error: .*runs/smoke/decoders/tiny-20k/best/model\.safetensors is damaged: .*SHA-256",
              prepare=lambda: s.nan_weights("tiny-20k")),
        Probe("1c", "NaN weights whose sidecar SHA-256 matches (a run that trained to NaN): the export CLI",
              "python -m helpers.evaluation.export --model '$SCRATCH/runs/smoke/decoders/tiny-40k (seed 7)/best' --out $SCRATCH/export",
              export + ["--model", str(s.decoder("tiny-40k (seed 7)")), "--out", ex_out],
              expect=r"^export: error: .*tiny-40k \(seed 7\)/best/model\.safetensors is damaged: tensor \S+ holds "
                     r"non-finite values",
              prepare=lambda: s.nan_weights("tiny-40k (seed 7)", update_sidecar=True)),
        Probe("2", "an API key inside judge_base_url",
              "./run_all.sh --profile smoke --set '05b.judge_base_url=https://h/v1?api_key=sk-test123'",
              [str(sh), "--profile", "smoke", "--set", "05b.judge_base_url=https://h/v1?api_key=sk-test123"],
              expect=r"^run_all: error: parameter check failed: .*judge_base_url carries a credential in its URL "
                     r"\(its query parameter api_key=; not shown\)", forbid=("Traceback", "sk-test123", r"^=== ")),
        Probe("3", "a judge server dripping one byte every 0.5 s, judge_timeout 2",
              "python -c '<drip server on 127.0.0.1>; JudgeClient(JudgeConfig(..., timeout=2)).chat(...)'",
              [PY, "-c", DRIP], pick=r"^\w+ after \d", expect=r"^JudgeUnreachable after \d+\.\d s: judge endpoint .* cannot be reached: 3 "
                                       r"requests in a row failed \(last: no whole reply within the deadline of 2",
              max_seconds=30, timeout=180),
        Probe("4a", "a 50 MB judge reply (Content-Length announced)",
              "python -c '<server sending 50 MB on 127.0.0.1>; JudgeClient(JudgeConfig(...)).chat(...)'",
              [PY, "-c", flood_script(True)], pick=r"^\w+ after \d",
              expect=r"^JudgeError after \d+\.\d s: judge reply refused: 50,000,000 bytes announced, over the cap of "
                     r"1,000,000 bytes", max_seconds=30, timeout=180),
        Probe("4b", "a 50 MB judge reply (no Content-Length)",
              "python -c '<server streaming 50 MB on 127.0.0.1, no length>; JudgeClient(...).chat(...)'",
              [PY, "-c", flood_script(False)], pick=r"^\w+ after \d",
              expect=r"^JudgeError after \d+\.\d s: judge reply refused: more than 1,000,000 bytes sent, over the cap",
              max_seconds=30, timeout=180),
        Probe("5", "an absurd batch: --set 02.train.batch_size=1000000000",
              "python -m helpers.runner --profile smoke --only 01,02 --set 02.train.batch_size=1000000000",
              runner + ["--profile", "smoke", "--only", "01,02", "--set", "02.train.batch_size=1000000000"],
              expect=r"^run_all: error: notebook 02_decoder_training\.ipynb failed in cell \d+ .*SizeError: tiny-10k: "
                     r"train\.batch_size = 1,000,000,000 is larger than its [\d,]+ training blocks",
              forbid=("Traceback", r"\bstep +\d+/")),
        Probe("6", "an empty override value: --set 02.train.lr=",
              "./run_all.sh --profile smoke --only 02 --set 02.train.lr=",
              [str(sh), "--profile", "smoke", "--only", "02", "--set", "02.train.lr="],
              expect=r"^run_all: error: --set '02\.train\.lr=': no value after '='", forbid=("Traceback", r"^=== ")),
        Probe("7", "an unknown budget name: --set 02.budgets=[tiny-9Z]",
              "python -m helpers.runner --profile smoke --only 01,02 --set '02.budgets=[tiny-9Z]'",
              runner + ["--profile", "smoke", "--only", "01,02", "--set", "02.budgets=[tiny-9Z]"],
              expect=r"tiny-9Z.{0,4} (is|are) not in the budget ledger"),
        Probe("8", "a garbled config.json of a decoder: the export CLI",
              "python -m helpers.evaluation.export --model $SCRATCH/runs/smoke/decoders/tiny-10k/best --out $SCRATCH/export",
              export + ["--model", str(s.decoder("tiny-10k")), "--out", ex_out],
              expect=r"^export: error: .*runs/smoke/decoders/tiny-10k/best/config\.json(:| is damaged:) (not valid JSON|unreadable "
                     r"\(JSONDecodeError\)); rebuild it: rerun notebook 02",
              prepare=lambda: s.garble_config("tiny-10k")),
        Probe("9a", "a variant (--set) run: its messages name its own folders",
              f"python -m helpers.runner --profile smoke --only 02 --set {lr}   # notebook 01 not run for the variant",
              runner + ["--profile", "smoke", "--only", "02", "--set", lr], prepare=lambda: s.forget_variant(lr),
              expect=r"runs/variants/smoke-[0-9a-f]{8}/smoke/data/.*--set 02\.train\.lr=0\.001\).*kept at "
                     r"reports/variants/smoke-[0-9a-f]{8}/smoke/notebooks/02_decoder_training\.ipynb$"),
        Probe("9b", "following that failure's hint (run notebook 01 for the variant)",
              "python -m helpers.runner --profile smoke --only 01 --set 02.train.lr=0.001   # the hint of 9a, as printed",
              None, expect=r"^=== 01_data_budgets\.ipynb done in [\d.]+ min$", rc=(0, 130), pick=r"^=== 01_\w+\.ipynb done",
              run=lambda p, env: follow_hint(p, env, s)),
        Probe("10", "a corpus with NUL bytes (3 stories) and a story of over 100,000 characters",
              "python -m helpers.runner --profile smoke --only 01 --set '01.tinystories_train=[$SCRATCH/stories_with_nul.txt]'",
              runner + ["--profile", "smoke", "--only", "01", "--set",
                        f"01.tinystories_train=[{s.path / 'stories_with_nul.txt'}]"],
              expect=r"NUL bytes removed = 3, over 100,000 characters \(kept\) = 1$", rc=0, derive=repairs,
              prepare=s.nul_corpus),
        Probe("11", "a <script> in a table cell (save_table's Markdown)",
              "python -c 'reporting.save_table(pd.DataFrame({\"story\": [\"<script>alert(1)</script> | the end\"]}), ...)'",
              [PY, "-c", ESCAPE], expect=r"&lt;script&gt;alert\(1\)&lt;/script&gt; \\\| the end", rc=0,
              forbid=("Traceback", "<script>alert\\(1\\)</script> \\\\\\|")),
        Probe("12", "Ctrl-C (SIGINT to the runner's process group 8 s into a notebook)",
              "python -m helpers.runner --profile smoke --only 02   # then Ctrl-C",
              runner + ["--profile", "smoke", "--only", "02"],
              expect=r"^run_all: interrupted in notebook 02_decoder_training\.ipynb .*resume with \./run_all\.sh "
                     r"--profile smoke --from 02$", rc=130, forbid=("Traceback", "ZMQError"),
              run=lambda p, env: interrupt_after(p.argv, env, "=== 02_", 8)),
    ]


REDO_20K = r"^\[(redo|skip)\] tiny-20k: "


def executed_lines(nb: Path) -> list[str]:
    """The stream output lines of an executed notebook."""
    try:
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return []
    text = "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []) if o.get("output_type") == "stream")
    return [x.strip() for x in text.splitlines() if x.strip()]


def follow_hint(probe: Probe, env: dict, s: Scratch) -> tuple[int, str, str]:
    """Run the './run_all.sh --profile smoke --only NN ...' hint that probe 9a's line printed, as printed."""
    import shlex

    line = PROBE_LINES.get("9a", "")
    m = re.search(r"\(\./run_all\.sh (--profile smoke --only [^)]*)\)", line)
    if not m:
        return -1, "", "(probe: probe 9a printed no ./run_all.sh hint to follow)"
    args = shlex.split(m.group(1))
    probe.shown = "python -m helpers.runner " + m.group(1) + "   # the hint of 9a, as printed; Ctrl-C once 01 is done"
    return interrupt_after([PY, "-m", "helpers.runner", *args], env, "=== 02_", 1)  # 01 done: enough to know


PROBE_LINES: dict[str, str] = {}
RUN_ORDER = ["2", "6", "3", "4a", "4b", "11", "1b", "1c", "8", "1a", "12", "9a", "9b", "5", "7", "10"]


# what the first run of these probes found (the rows that failed then), kept under the table
FOUND = """The first run of these probes (before c8a485e) failed four rows, each fixed in c8a485e:

* 7, an unknown budget: notebook 02 said `ValueError: seeds given for budgets that are not trained: tiny-10k, tiny-40k
  (budgets: tiny-9Z)`, and with no seeds `no tokenizer at runs/smoke/tokenizers/decoder-tiny-9Z; it is made by notebook
  01: run notebook 01 ... first`, which sends the user back to a notebook that has run; now `Ledger.require` names the
  budget and the ledger's budgets before anything is looked for.
* 8, a garbled `config.json`: the export CLI printed `export: error: Expecting property name enclosed in double quotes:
  line 29 column 1 (char 404)`, naming no file; it now reads the file with `read_json` (the file and its rebuild hint).
* 9b, a variant's hint: `(./run_all.sh --profile smoke --only 01 --set 02.train.lr=0.001)` was refused when followed
  (`--set 02.…: notebook 02 is not part of this run`); the hint now reads `--only 01,02 --set …`.
* 1a: `--log-output` printed none of the cells' output (papermill logs it at INFO to a logger without a handler), so
  the `[redo]` line could only be read in the executed notebook; the runner now gives that logger a handler.

Row 12 once read "ignored" (the run went on to `all done`, exit status 0): the probe itself had started the runner
with SIGINT ignored, inherited from a background shell (`nohup ... &`); the probes now start it with SIGINT as a
terminal has it.

Row 9b had a fault of its own: its Ctrl-C came 1 s after notebook 02 started (the kernel answering its first
request), and above the runner's one line the kernel printed `[IPKernelApp] ERROR | Exception in message handler:`
and a traceback ending in `zmq.error.ZMQError: Socket operation on non-socket` (it answered on a socket the runner
had closed). The runner now starts kernels with `--IPKernelApp.log_level=CRITICAL`: the kernel's own log stays quiet
and the runner's line says what happened. The hint itself works: notebook 01 of the variant ran."""


# ----------------------------------------------------------------------------- the table
def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def write_table(rows: list[tuple[Probe, dict]], out: Path, scratch: Path) -> None:
    from helpers.core.hardware import cpu_info
    from helpers.report.markdown_table import md_text

    rev = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "src", "notebooks", "params", "run_all.sh")
    state = (f"{rev}, with uncommitted changes in {len(dirty.splitlines())} file(s) of src/, notebooks/ or params/ in "
             f"the working tree") if dirty else rev
    passed = sum(r["ok"] for _, r in rows)
    lines = [
        "# Reliability probes",
        "",
        "Each reliability fault (the hostile-user review of the pipeline), the command a user runs into it, and the one line that command prints, as "
        "measured by `benchmarks/reliability_probes.py` (rerun it to refresh this file). Every command ran in a "
        "scratch folder (`$SCRATCH`: `STORYBENCH_RUNS` and `STORYBENCH_REPORTS` pointing there) after a smoke run of "
        "notebooks 01 and 02; the checkout's `runs/` and `reports/` were not touched. \"as expected\" compares the "
        "line with the probe's expectation (a regular expression in the script), the exit status, and text that "
        "must appear nowhere in the output (a traceback, the key, a `[skip]`, a `ZMQError`).",
        "",
        f"* revision: {state}",
        f"* CPU: {cpu_info()['label']} ({os.cpu_count()} cores visible, shared with other work)",
        f"* date: {datetime.date.today().isoformat()}",
        f"* {passed} of {len(rows)} probes as expected",
        "",
        "| # | fault | command | rc | seconds | the line it prints | as expected |",
        "|---|---|---|---|---|---|---|",
    ]
    for p, r in rows:
        verdict = "yes" if r["ok"] else f"**no**: {r['why']}"
        lines.append(f"| {p.key} | {md_text(p.fault)} | `{p.shown.replace('|', chr(92) + '|')}` | {r['rc']} | "
                     f"{r['seconds']:.1f} | {md_text(r['line'].replace(str(scratch), '$SCRATCH'))} | {md_text(verdict)} |")
    lines += ["", FOUND, ""]
    out.write_text("\n".join(lines), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scratch", type=Path, help="the scratch folder (created; a smoke run in it is reused)")
    ap.add_argument("--only", help="comma-separated probe keys, e.g. 2,3,4a (default: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "reliability_probes.md",
                    help="the Markdown table (default docs/reliability_probes.md; '-' for none)")
    a = ap.parse_args(argv)
    path = (a.scratch or Path(tempfile.mkdtemp(prefix="storybench-probes-"))).resolve()
    if path == ROOT or ROOT in path.parents:
        sys.exit(f"the scratch folder must lie outside the checkout, not {path}")
    path.mkdir(parents=True, exist_ok=True)
    s = Scratch(path)
    s.prepare()
    chosen = probes(s)
    if a.only:
        keys = {k.strip() for k in a.only.split(",")}
        chosen = [p for p in chosen if p.key in keys or p.key.rstrip("abc") in keys]
    rows = []
    order = {k: i for i, k in enumerate(RUN_ORDER)}  # the export probes damage first, notebook 02's rerun repairs
    for p in sorted(chosen, key=lambda p: order.get(p.key, len(order))):
        print(f"[{p.key}] {p.fault} ...", flush=True)
        r = execute(p, s)
        PROBE_LINES[p.key] = r["line"]
        rows.append((p, r))
        print(f"  {'PASS' if r['ok'] else 'FAIL'} rc={r['rc']} {r['seconds']:.1f} s: {r['line']}", flush=True)
        if not r["ok"]:
            print(f"  why: {r['why']}", flush=True)
            (path / f"probe-{p.key}.log").write_text(f"$ {p.shown}\n--- stdout\n{r['stdout']}\n--- stderr\n{r['stderr']}")
            print(f"  output: {path / f'probe-{p.key}.log'}", flush=True)
    keys = [p.key for p in chosen]
    rows.sort(key=lambda pr: keys.index(pr[0].key))
    if str(a.out) != "-":
        write_table(rows, a.out, path)
        print(f"table: {a.out}")
    bad = [p.key for p, r in rows if not r["ok"]]
    print(f"{len(rows) - len(bad)} of {len(rows)} probes as expected" + (f"; not: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
