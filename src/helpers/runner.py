"""Run the study's notebooks headlessly with papermill.

    python -m helpers.runner [--profile smoke|cpu|paper|paper-100m] [--only 01,03] [--from 02] [--list]

Each ``notebooks/NN_*.ipynb`` gets ``params/<profile>/NN_*.yaml`` injected into its ``parameters`` cell (plus
``profile``); the executed copy is written to ``reports/<profile>/notebooks/``. Everything is validated before
anything runs: unknown profile, missing params file, or a params key the notebook does not declare.
A failing notebook stops the run with a message naming the notebook and the failing cell; its partial
executed copy is kept.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from helpers.core.artifacts import remove_unwritten, write_text
from helpers.core.locking import ProfileBusy, ProfileLock
from helpers.core.process_memory import TreePeak
from helpers.core.progress import show_cell_output
from helpers.core.overrides import (parse_overrides, set_arguments, shown_variant_path,  # noqa: F401
                                    variant_id, variant_roots, variant_text)  # (variant_id: tests)
from helpers.core.config import (ParamsError, apply_overrides, check_params, check_profile, params_file, profiles, read_yaml,
                                 repo_root, reports_dir, run_dir, shown_path)
from helpers.core.secrets import mask_secrets, redact, secret_values
from helpers.training.seed_axis import DECODER_PARAMS, named_decoder_problems


class RunnerError(RuntimeError):
    pass


class RunInterrupted(RunnerError):
    """Ctrl-C during a notebook: one line naming it, what is kept and how to resume (exit status 130)."""


def notebooks() -> list[Path]:
    return sorted((repo_root() / "notebooks").glob("[0-9][0-9]*_*.ipynb"))


def nb_id(path: Path) -> str:
    return path.name.split("_")[0]


def select(all_nbs: list[Path], only: str | None, start: str | None) -> list[Path]:
    ids = [nb_id(p) for p in all_nbs]
    if only is not None:
        wanted = [x.strip().zfill(2) if x.strip().isdigit() else x.strip() for x in only.split(",") if x.strip()]
        if not wanted:
            raise RunnerError(f"--only {only!r} names no notebook; give numbers such as 01,03 (available: {', '.join(ids)})")
        unknown = [w for w in wanted if w not in ids]
        if unknown:
            raise RunnerError(f"--only names unknown notebook(s) {unknown}; available: {', '.join(ids)}")
        return [p for p in all_nbs if nb_id(p) in wanted]
    if start is not None:
        if not start.strip():
            raise RunnerError(f"--from names no notebook; available: {', '.join(ids)}")
        s = start.zfill(2) if start.isdigit() else start
        if s not in ids:
            raise RunnerError(f"--from names unknown notebook {start!r}; available: {', '.join(ids)}")
        return [p for p in all_nbs if nb_id(p) >= s]
    return all_nbs


def declared_parameters(nb: Path) -> dict:
    import papermill as pm

    params = pm.inspect_notebook(str(nb))
    if not params:
        raise RunnerError(f"{nb.name} has no cell tagged 'parameters'")
    return params


def declared_defaults(declared: dict) -> dict:
    """The literal default of each declared parameter (those that are not plain literals are left out)."""
    out = {}
    for name, info in declared.items():
        try:
            out[name] = ast.literal_eval(str(info.get("default")))
        except (ValueError, SyntaxError, TypeError):
            pass
    return out


def _running_cell(out: Path) -> str:
    """'cell N (first line)' of the cell an executed copy was running when the kernel died; when papermill had not
    saved a started cell yet (an interrupt while the kernel starts), says so instead."""
    early = "before its first cell: the kernel was starting"
    try:
        nb = json.loads(out.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return early
    except (OSError, json.JSONDecodeError):
        return f"a cell that its unreadable executed copy {_short(out)} does not name"
    cells = nb.get("cells", [])
    meta = [c.get("metadata", {}).get("papermill", {}) for c in cells]
    # papermill marks the cell it was in "running", or (after the kernel died) "completed": the last one started
    hits = [i for i, m in enumerate(meta) if m.get("status") == "running"] or [i for i, m in enumerate(meta) if m.get("start_time")]
    if not hits:
        return early
    i = hits[-1]
    src = "".join(cells[i].get("source", "")).strip().splitlines()
    return f"cell {i}" + (f" ({src[0][:60]!r})" if src else "")


def plan(profile: str, nbs: list[Path], overrides: dict[str, dict[str, Any]] | None = None) -> list[tuple[Path, dict]]:
    """Validate every notebook's params (with the ``--set`` overrides applied) before running anything."""
    check_profile(profile)
    overrides = overrides or {}
    out, errors = [], []
    chosen = {nb_id(nb).split("_")[0] for nb in nbs}
    for key in sorted(set(overrides) - chosen):
        errors.append(f"--set {key}.…: notebook {key} is not part of this run (--only/--from); nothing would use it")
    for nb in nbs:
        try:
            pf = params_file(profile, nb_id(nb))
        except (FileNotFoundError, ValueError) as e:
            errors.append(str(e))
            continue
        try:
            params = read_yaml(pf) or {}
        except ParamsError as e:
            errors.append(str(e))
            continue
        if not isinstance(params, dict):
            errors.append(f"{pf} must hold a mapping of parameter names to values")
            continue
        mine = overrides.get(nb_id(nb).split("_")[0], {})
        if mine:
            try:
                params = apply_overrides(params, mine, nb_id(nb).split("_")[0])
            except ParamsError as e:
                errors.append(str(e))
                continue
        declared = declared_parameters(nb)
        source = str(pf.relative_to(repo_root()))
        if mine:  # a problem may come from the command line, not the file: name both
            source += " with --set " + ", ".join(f"{nb_id(nb).split('_')[0]}.{k}" for k in mine)
        try:
            check_params(params, declared_defaults(declared), source=source, notebook=nb_id(nb),
                         text=None if mine else pf.read_text(encoding="utf-8"))  # lines of the file's own keys
        except ParamsError as e:
            errors += str(e).splitlines()
        unknown = sorted(set(params) - set(declared))
        if unknown:
            errors.append(
                f"{pf.relative_to(repo_root())}: key(s) {unknown} are not declared in the parameters cell of {nb.name} "
                f"(declared: {', '.join(sorted(declared))})"
            )
        if "profile" not in declared:
            errors.append(f"{nb.name}: the parameters cell must declare `profile`")
        out.append((nb, {**params, "profile": profile}))
    named = {nb_id(nb).split("_")[0]: p for nb, p in out}
    if not errors and set(named) & set(DECODER_PARAMS):  # the decoders 03-06 name: does notebook 02 train them?
        with contextlib.suppress(FileNotFoundError, ValueError, ParamsError):  # 02's file when 02 is not in this run
            errors += named_decoder_problems(named, named.get("02") or read_yaml(params_file(profile, "02")))
    if errors:
        if len(errors) == 1:
            raise RunnerError(f"parameter check failed: {errors[0]}")
        raise RunnerError("parameter check failed:\n  - " + "\n  - ".join(errors))
    return out


def run(profile: str = "cpu", only: str | None = None, start: str | None = None, log_output: bool = False,
        overrides: dict[str, dict[str, Any]] | None = None) -> list[dict]:
    todo = plan(profile, select(notebooks(), only, start), overrides)
    rerun = set_arguments(overrides)  # a variant's hints carry its --set arguments: following them reruns it
    if overrides:  # a variant: its own run and report folders, the overrides written beside the reports
        runs, reports = variant_roots(profile, overrides)
        os.environ["STORYBENCH_RUNS"], os.environ["STORYBENCH_REPORTS"] = str(runs), str(reports)
        where = f"runs in {_short(runs / profile)}, reports in {_short(reports / profile)}"
        write_text(reports_dir(profile) / "overrides.json", json.dumps({"profile": profile, "set": overrides},
                                                                       indent=1, sort_keys=True) + "\n")
        print(f"storybench: a variant of {profile} ({', '.join(f'{k}.{kk}={v!r}' for k, o in overrides.items() for kk, v in o.items())}): "
              f"{where}; the same --set arguments rerun or resume it", flush=True)
    try:
        lock = ProfileLock(profile).__enter__()
    except ProfileBusy as e:
        raise RunnerError(variant_text(str(e), profile, rerun)) from None
    try:
        return _run(profile, todo, log_output, **({"rerun": rerun} if rerun else {}))  # the profile's run: as before
    finally:
        lock.__exit__(None, None, None)


KERNEL_NAME = "storybench"  # registered by ./run_all.sh's set-up (ipykernel install --sys-prefix)
KERNEL_DISPLAY_NAMES = {KERNEL_NAME: "Python (storybench)"}  # as run_all.sh registers it
FALLBACK_KERNEL = "python3"  # ipykernel's own kernel of the running Python
# the kernel's own log (a Ctrl-C as it starts printed a ZMQError traceback: the runner says what failed), and asyncio's
# "Task was destroyed but it is pending!" for ipykernel's control task when a finished kernel is shut down
KERNEL_ARGS = ["--IPKernelApp.log_level=CRITICAL",
               "--IPKernelApp.exec_lines=__import__('logging').getLogger('asyncio').setLevel(50)"]


def kernel_name() -> str | None:
    """``storybench`` when that Jupyter kernel is installed (found on the venv's Jupyter path), else ``python3``
    (the notebooks name ``storybench`` in their kernelspec, for JupyterLab users; a bare checkout without the
    set-up's kernel still runs them); None when jupyter_client cannot list kernels (papermill then uses the
    notebook's own kernelspec)."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        return KERNEL_NAME if KERNEL_NAME in KernelSpecManager().find_kernel_specs() else FALLBACK_KERNEL
    except Exception:  # noqa: BLE001 - no jupyter_client, unreadable kernel folders: use the notebook's kernel
        return None


def headless_environment() -> None:
    """Set before papermill starts a kernel (which inherits the environment): helpers.core.progress draws plain, rare
    bars; Hugging Face libraries draw none."""
    os.environ["STORYBENCH_HEADLESS"] = "1"
    for var in ("HF_DATASETS_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS"):
        os.environ.setdefault(var, "1")


_CR = re.compile(r"[^\n]*\r(?=[^\n])")


def _collapse_streams(nb: dict) -> bool:
    """Collapse carriage-return redraws in the stream outputs of an executed notebook (what a terminal would show
    at the end), merging consecutive outputs of the same stream first. True when something changed."""
    changed = False
    for cell in nb.get("cells", []):
        outs, new = cell.get("outputs") or [], []
        for o in outs:
            if o.get("output_type") == "stream":
                text = o.get("text", "")
                text = "".join(text) if isinstance(text, list) else text
                if new and new[-1].get("output_type") == "stream" and new[-1].get("name") == o.get("name"):
                    new[-1]["text"] += text
                    changed = True
                    continue
                o = {**o, "text": text}
            new.append(o)
        for o in new:
            if o.get("output_type") == "stream" and "\r" in o["text"]:
                o["text"] = _CR.sub("", o["text"]).replace("\r\n", "\n").replace("\r", "")
                changed = True
        if outs:
            cell["outputs"] = new
    return changed


def _relative_metadata(nb: dict) -> bool:
    """papermill records the paths it was given (``metadata.papermill.input_path``/``output_path``): make them
    repository-relative (``notebooks/01_x.ipynb``, ``reports/cpu/notebooks/01_x.ipynb``), as ``shown_path`` does.
    True when something changed."""
    meta = (nb.get("metadata") or {}).get("papermill")
    if not isinstance(meta, dict):
        return False
    changed = False
    for key in ("input_path", "output_path", "cwd"):
        v = meta.get(key)
        if isinstance(v, str) and v and Path(v).is_absolute():
            meta[key] = shown_path(v)
            changed = True
    return changed


_KERNEL_CELL = re.compile(r"/[^\s:'\"]*/ipykernel_\d+/\d+\.py")  # a cell's code as ipykernel files it


def _relative_outputs(nb: dict, root: str | None = None) -> bool:
    """Outputs that name a file of the repository by its absolute path (a warning's ``/…/src/helpers/x.py:12:``,
    a traceback) name it relative to the repository instead, and a notebook cell's file in the kernel's temporary
    folder (``/tmp/ipykernel_123/456.py:5:``, where a warning raised by a cell points) becomes ``<cell>``. True when
    something changed."""
    prefix = str(root or repo_root()).rstrip("/") + "/"

    def fix(x: str) -> str:
        return _KERNEL_CELL.sub("<cell>", x.replace(prefix, ""))

    def relative(v):  # a str or a list of str, machine paths removed; None when it has none
        if isinstance(v, str):
            return fix(v) if fix(v) != v else None
        if isinstance(v, list) and any(isinstance(x, str) and fix(x) != x for x in v):
            return [fix(x) if isinstance(x, str) else x for x in v]
        return None

    changed = False
    for cell in nb.get("cells", []):
        for o in cell.get("outputs") or []:
            fields = [(o, key) for key in ("text", "traceback")]
            data = o.get("data") or {}
            fields += [(data, mime) for mime in data if mime.startswith("text/")]
            for holder, key in fields:
                new = relative(holder.get(key))
                if new is not None:
                    holder[key], changed = new, True
    return changed


def _mask_all(obj, secrets) -> tuple[object, bool]:
    """``obj`` (a notebook's JSON) with every secret in any string replaced by ``***``; True when one was found."""
    if isinstance(obj, str):
        new = mask_secrets(obj, secrets)
        return new, new != obj
    if isinstance(obj, list):
        pairs = [_mask_all(v, secrets) for v in obj]
        return [v for v, _ in pairs], any(c for _, c in pairs)
    if isinstance(obj, dict):
        pairs = {k: _mask_all(v, secrets) for k, v in obj.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(c for _, c in pairs.values())
    return obj, False


def tidy_report(path: Path, kernel: str | None = None, secrets: list[str] | tuple[str, ...] = ()) -> None:
    """Make an executed notebook fit to commit, in one atomic rewrite: stream redraws collapsed, no absolute path
    in papermill's metadata, repository files named relative to the repository in outputs, and the kernel it ran on
    (``kernel``, when the runner chose one) in its kernelspec (papermill keeps the source notebook's). Called after
    every execution, finished or failed."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return
    changed = _collapse_streams(nb)
    if kernel is not None and nb.setdefault("metadata", {}).get("kernelspec", {}).get("name") != kernel:
        nb["metadata"]["kernelspec"] = {"name": kernel, "display_name": KERNEL_DISPLAY_NAMES.get(kernel, kernel),
                                        "language": "python"}
        changed = True
    changed = _relative_metadata(nb) or changed
    changed = _relative_outputs(nb) or changed
    if secrets:  # the judge's key (the value of the variable its config names), wherever an output printed it
        nb, masked = _mask_all(nb, list(secrets))
        changed = changed or masked
    if changed:
        try:
            write_text(path, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        except OSError as e:  # e.g. disk full: the executed copy is left as papermill wrote it, and the run goes on
            print(f"run_all: warning: could not tidy {_short(path)} ({e}); it is kept as papermill wrote it",
                  file=sys.stderr, flush=True)


clean_streams = tidy_report  # the former name


def kernel_transport() -> dict:
    """papermill keyword arguments that start the notebook's kernel on local IPC sockets (files in Jupyter's
    runtime folder, readable by this user only) instead of TCP on localhost: the kernel and the runner share this
    machine, and ipykernel ≥ 7 warns at every start that TCP carries code and outputs unencrypted. Windows has no
    IPC transport: there (and where ``STORYBENCH_KERNEL_TRANSPORT=tcp``) the default TCP stays."""
    transport = os.environ.get("STORYBENCH_KERNEL_TRANSPORT", "tcp" if os.name == "nt" else "ipc")
    if transport not in ("ipc", "tcp"):
        raise ValueError(f"STORYBENCH_KERNEL_TRANSPORT must be ipc or tcp, not {transport!r}")
    if transport == "tcp":
        return {}
    from traitlets.config import Config

    return {"config": Config({"KernelManager": {"transport": "ipc"}})}


def machine_note(profile: str) -> str | None:
    """A warning before a cpu-profile run on a machine without a GPU or native bf16 (an AVX2-only CPU): the
    profile's training runs in fp32 there, and the whole run takes hours rather than about an hour (README, "Time, on named CPUs")."""
    if profile != "cpu":
        return None
    from helpers.core.hardware import cpu_info, gpu_names, native_bf16

    if gpu_names() or native_bf16("cpu"):
        return None
    return (f"note: {cpu_info()['label']} has no native bf16 (AMX or AVX512-BF16) and no GPU is visible, so training "
            f"runs in fp32: expect the cpu profile to take several times the reference run's hour (README, 'Time, "
            f"on named CPUs', estimates it: ~5 h). An interrupted run resumes where it stopped: run the same command "
            f"again")


def _run(profile: str, todo: list[tuple[Path, dict]], log_output: bool, rerun: str = "") -> list[dict]:
    """Execute ``todo`` in order; ``rerun``: a variant's ``--set`` arguments, carried into every hint
    (:func:`helpers.core.overrides.variant_text`)."""
    import papermill as pm
    from nbclient.exceptions import DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    out_dir = reports_dir(profile) / "notebooks"
    timings = []
    if log_output:  # every cell's output on the terminal, as it comes
        show_cell_output()
    env_root = os.environ.setdefault("STORYBENCH_ROOT", str(repo_root()))
    headless_environment()
    kernel = kernel_name()
    print(f"storybench: profile {profile}, {len(todo)} notebook(s): {', '.join(p.name for p, _ in todo)}", flush=True)
    if note := machine_note(profile):
        print(note, flush=True)
    for nb, params in todo:
        out = out_dir / nb.name
        secrets = secret_values(params)
        beat, label = run_history().start_attempt(profile, nb.name)  # an attempt killed before this one: recorded
        t0, mem = time.time(), TreePeak(heartbeat=beat, label=label).__enter__()  # memory, sampled as it runs
        print(f"\n=== {nb.name} ({profile}) -> {_short(out)}", flush=True)
        status = "interrupted"  # what this attempt is unless it finishes or fails (the history keeps every attempt)
        try:
            pm.execute_notebook(
                str(nb), str(out), parameters=params, kernel_name=kernel, cwd=str(Path(env_root) / "notebooks"),
                progress_bar=False, log_output=log_output, request_save_on_cell_execute=True,
                extra_arguments=KERNEL_ARGS, **kernel_transport(),
            )
            status = "finished"
        except PapermillExecutionError as e:
            status = "failed"
            raise RunnerError(variant_text(redact(mask_secrets(
                f"notebook {nb.name} failed in cell {e.cell_index} (execution count {e.exec_count}): {e.ename}: {e.evalue}; "
                f"the partial executed copy is kept at {_short(out)}", secrets)), profile, rerun)
            ) from None
        except KeyboardInterrupt:
            raise RunInterrupted(
                f"interrupted in notebook {nb.name} ({_running_cell(out)}); the notebooks finished before it and every "
                f"step it completed in {_short(run_dir(profile))}/ "
                f"are kept, its partial executed copy is at {_short(out)}; resume with "
                f"./run_all.sh --profile {profile} --from {nb_id(nb)}{rerun}"
            ) from None
        except DeadKernelError:
            status = "failed"
            raise RunnerError(
                f"notebook {nb.name}: the kernel died in {_running_cell(out)} (killed, or out of memory); "
                f"the partial executed copy is kept at {_short(out)}"
            ) from None
        finally:  # finished, failed or interrupted: the executed copy holds no absolute path and no secret
            mem.__exit__(None, None, None)
            tidy_report(out, kernel, secrets)
            if status != "finished":  # its time counts in the notebook's run summed over resumptions
                run_history().record_attempt(profile, {"notebook": nb.name, "seconds": round(time.time() - t0, 1),
                                                       **mem.peaks()}, status, label)
        dt = time.time() - t0
        stale = remove_unwritten([out_dir.parent / "tables", out_dir.parent / "figures"], f"{nb_id(nb)}_", t0)
        if stale:  # an earlier version's outputs this notebook no longer writes: results.csv must not read them
            print(f"removed {len(stale)} output(s) {nb.name} no longer writes: {', '.join(f.name for f in stale)}", flush=True)
        timings.append({"notebook": nb.name, "seconds": round(dt, 1), **mem.peaks()})
        run_history().record_attempt(profile, timings[-1], label=label)  # at once (a later failure does not lose it)
        print(f"=== {nb.name} done in {dt / 60:.1f} min", flush=True)
    from helpers.report.reporting import write_requirements_lock  # lazily, as below: reporting imports torch (~2 s)
    from helpers.report.results import write_results

    write_requirements_lock(profile)
    results = reports_dir(profile) / "results.csv"  # its line names the variant's folder, not reports/<profile>/
    write_results(profile, log=lambda line: print(line.replace(shown_path(results), _short(results), 1), flush=True))
    return timings


def run_history():
    """:mod:`helpers.report.run_history`, imported when a notebook starts: it imports torch (~2 s); --help does not."""
    from helpers.report import run_history as module

    return module


def _short(p: Path) -> str:
    """``p`` as reports show it, a variant's folders as themselves (:func:`helpers.core.overrides.shown_variant_path`)."""
    return shown_variant_path(p)


def main(argv: list[str] | None = None) -> int:
    prog = "storybench" if Path(sys.argv[0]).name == "storybench" else "run_all.sh"  # the console command, or the script
    ap = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu", help=f"one of {', '.join(profiles())} (default cpu; a user profile is a "
                                                     "folder params/<name>/)")
    ap.add_argument("--set", action="append", metavar="NN.KEY=VALUE", dest="overrides",
                    help="override one parameter of notebook NN for this run, e.g. 02.train.lr=1e-3 (repeatable; "
                         "the run goes to runs/variants/ and reports/variants/, never the profile's own folders)")
    ap.add_argument("--only", help="comma-separated notebook numbers, e.g. 01,03")
    ap.add_argument("--from", dest="start", help="run from this notebook number on")
    ap.add_argument("--list", action="store_true", help="list the notebooks and exit")
    ap.add_argument("--log-output", action="store_true", help="stream cell output to the terminal")
    a = ap.parse_args(argv)
    try:
        if a.list:
            for p in notebooks():
                print(p.name)
            return 0
        overrides = parse_overrides(a.overrides)
        timings = run(a.profile, a.only, a.start, a.log_output, overrides)
    except RunInterrupted as e:
        print(f"\nrun_all: {e}", file=sys.stderr, flush=True)
        return 130
    except KeyboardInterrupt:
        print("\nrun_all: interrupted before any notebook ran; nothing was changed", file=sys.stderr, flush=True)
        return 130
    except (RunnerError, ValueError, FileNotFoundError, OSError) as e:
        print(f"run_all: error: {e}", file=sys.stderr)
        return 1
    total = sum(t["seconds"] for t in timings)
    print(f"\nall done: {len(timings)} notebook(s) in {total / 60:.1f} min; reports in {_short(reports_dir(a.profile))}/")
    return 0


if __name__ == "__main__":
    rc = main()
    if rc == 130:  # interrupted: the one line is printed; leave before asyncio's and papermill's teardown prints more
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    sys.exit(rc)
