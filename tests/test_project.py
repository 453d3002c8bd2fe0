"""Project hygiene: dependencies agree, notebooks are committed clean and thin, layout is as specified."""
import ast
import json
import re
import tomllib

import nbformat
import yaml

from helpers.core.config import repo_root

ROOT = repo_root()


def _names(specs):
    return {re.split(r"[<>=!~ \[]", s.strip())[0].lower() for s in specs}


def test_environment_yml_matches_pyproject():
    """The conda environment holds the runtime dependencies and the [dev] extra (the tests run in it), with the
    same bounds, and takes PyTorch from pip with PyTorch's CPU index beside PyPI (not PyPI's CUDA build)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["dev"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda, pip, pip_options = [], [], []
    for d in env["dependencies"]:
        if isinstance(d, dict):
            pip += [x for x in d["pip"] if not x.startswith("-")]
            pip_options += [x for x in d["pip"] if x.startswith("-")]
        else:
            conda.append(d)
    assert "torch" in _names(pip) and pip_options == ["--extra-index-url https://download.pytorch.org/whl/cpu"]
    assert not {"torch", "pytorch", "accelerate"} & _names(conda)  # conda-forge's accelerate pulls its pytorch
    conda = [c for c in conda if not c.startswith(("python", "pip"))]
    assert _names(conda + pip) == _names(deps)
    pins = {(_names([d]).pop(), d.split(_names([d]).pop(), 1)[1]) for d in deps}
    env_pins = {(_names([d]).pop(), d.split(_names([d]).pop(), 1)[1]) for d in conda + pip}
    assert pins == env_pins  # same version bounds too


def test_runtime_and_dev_dependencies_and_the_storybench_command():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime, dev = _names(project["dependencies"]), _names(project["optional-dependencies"]["dev"])
    assert {"pytest", "nbstripout"} <= dev and not {"pytest", "nbstripout"} & runtime and not runtime & dev
    assert 'pip" install -q -e ".[dev]"' in (ROOT / "run_all.sh").read_text()  # what the tests need
    import importlib

    module, _, func = project["scripts"]["storybench"].partition(":")

    assert callable(getattr(importlib.import_module(module), func))


def test_license_and_citation_agree_with_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert project["license"] == {"text": "MIT"} and cff["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n\nCopyright (c) 2026 storybench contributors\n")
    assert str(cff["version"]) == project["version"] and re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(cff["date-released"]))
    cited = {(r["authors"][0]["family-names"], r.get("year")) for r in cff["references"]}
    assert {("Theodoropoulos", 2024), ("Eldan", 2023), ("Rathod", 2024)} <= cited


def _run_all(*args, venv):
    import os
    import subprocess
    import time

    t0 = time.monotonic()
    done = subprocess.run(["bash", str(ROOT / "run_all.sh"), *args], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "STORYBENCH_VENV": str(venv)})
    return done, time.monotonic() - t0


def test_run_all_help_and_list_answer_before_any_setup(tmp_path):
    from helpers import runner

    venv = tmp_path / "venv"
    listed, seconds = _run_all("--profile", "smoke", "--list", venv=venv)
    assert listed.returncode == 0 and seconds < 2, (listed.stderr, seconds)
    assert listed.stdout.split() == [p.name for p in runner.notebooks()] and listed.stdout.split()
    for args in (["--help"], ["-h"], ["--only", "01", "--help"]):
        shown, seconds = _run_all(*args, venv=venv)
        assert shown.returncode == 0 and seconds < 2 and not shown.stderr, (args, shown.stderr, seconds)
        assert {"--tests", "--setup", "--list", "TORCH_SPEC", "TORCH_INDEX_URL"} <= set(
            re.findall(r"--[a-z-]+|TORCH_[A-Z_]+", shown.stdout))
    assert not venv.exists()  # nothing was set up


def test_run_all_reinstalls_torch_when_its_spec_or_index_changes(tmp_path):
    """The set-up stamp records what PyTorch was asked for: the same request installs nothing, another
    TORCH_SPEC or TORCH_INDEX_URL uninstalls and reinstalls it (a fake venv whose pip only logs its arguments)."""
    import os
    import subprocess

    venv, log = tmp_path / "venv", tmp_path / "calls.log"
    (venv / "bin").mkdir(parents=True)
    (venv / "share/jupyter/kernels/storybench").mkdir(parents=True)
    (venv / "share/jupyter/kernels/storybench/kernel.json").write_text("{}")
    fakes = {"pip": 'echo "pip $*" >> "$CALLS"',
             "python": 'case "$1" in -) cat > /dev/null; exit 1 ;; esac  # the index probe: unreachable\n'
                       'case "$*" in *print*) echo "# installed: torch 0.0" ;; esac'}
    for name, body in fakes.items():
        (venv / "bin" / name).write_text(f"#!/bin/sh\n{body}\nexit 0\n")
        (venv / "bin" / name).chmod(0o755)

    def setup(**env):
        log.write_text("")
        done = subprocess.run(["bash", str(ROOT / "run_all.sh"), "--setup"], capture_output=True, text=True,
                              timeout=60, env={**{k: v for k, v in os.environ.items() if not k.startswith("TORCH_")},
                                               "STORYBENCH_VENV": str(venv), "CALLS": str(log), **env})
        assert done.returncode == 0, done.stderr
        return [line for line in log.read_text().splitlines()], done.stderr

    stamp = venv / ".storybench-installed"
    stamp.write_text("torch torch==2.13.0 auto\n")
    assert setup() == ([], "")  # the same request, a stamp newer than pyproject.toml: nothing to do
    calls, err = setup(TORCH_SPEC="torch==2.12.0")
    assert calls[0] == "pip uninstall -q -y torch" and "pip install -q torch==2.12.0" in calls, calls
    assert 'pip install -q -e .[dev]' in calls and "reinstalling it" in err
    assert stamp.read_text().splitlines() == ["torch torch==2.12.0 auto", "# installed: torch 0.0"]
    calls, _ = setup(TORCH_SPEC="torch==2.12.0", TORCH_INDEX_URL="https://example.invalid/whl/cu130")
    assert "pip install -q torch==2.12.0 --index-url https://example.invalid/whl/cu130" in calls, calls
    assert setup(TORCH_SPEC="torch==2.12.0", TORCH_INDEX_URL="https://example.invalid/whl/cu130")[0] == []
    stamp.write_text("")  # a stamp from before it recorded PyTorch: a working torch is kept, the request recorded
    calls, _ = setup()
    assert not any("torch" in c for c in calls) and stamp.read_text().startswith("torch torch==2.13.0 auto\n")


def test_run_all_help_names_every_runner_option(capsys):
    from helpers import runner

    import pytest

    with pytest.raises(SystemExit):
        runner.main(["--help"])
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", capsys.readouterr().out)) - {"--help"}
    assert options >= {"--profile", "--only", "--from", "--list"}
    shown = _run_all("--help", venv=ROOT / "no-such-venv")[0].stdout
    assert options <= set(re.findall(r"--[a-z-]+", shown)), options - set(re.findall(r"--[a-z-]+", shown))


def test_layout():
    for p in ["notebooks", "src/helpers", "params", "reports", "environment.yml", "run_all.sh", "tests", "data",
              "pyproject.toml", "README.md", ".ci/run", "data/SOURCES.md", "data/CHECKSUMS.sha256"]:
        assert (ROOT / p).exists(), p


def test_notebooks_committed_without_outputs_and_thin():
    nbs = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert nbs
    for nb_path in nbs:
        nb = nbformat.read(nb_path, as_version=4)
        params_cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(params_cells) == 1, f"{nb_path.name}: exactly one parameters cell"
        raw = json.loads(nb_path.read_text())  # nbformat 4.5 cells carry a unique id (nbformat fills missing ones in)
        ids = [c.get("id") for c in raw["cells"]]
        assert all(ids) and len(set(ids)) == len(ids), f"{nb_path.name}: every cell needs its own id"
        for c in nb.cells:
            if c.cell_type != "code":
                continue
            assert not c.get("outputs") and c.get("execution_count") is None, f"{nb_path.name} has outputs"
            tree = ast.parse(c.source)
            defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
            assert not defs, f"{nb_path.name}: function/class definitions belong in src/helpers"
        # the parameters cell holds plain assignments of literals only (values are derived after it)
        for node in ast.parse(params_cells[0].source).body:
            assert isinstance(node, ast.Assign), f"{nb_path.name}: parameters cell must only assign"
            ast.literal_eval(node.value)


#: the most non-blank lines (comments count) a notebook code cell may hold; the parameters cell is exempt: it
#: mirrors params/cpu/<notebook>.yaml line for line
CELL_LINES = 20
#: cells that break the rule above or write a file themselves, allowed until their notebook is thinned:
#: (notebook, index in ``nb.cells``, markdown cells counted) -> what is wrong. Empty it, cell by cell: a listed cell
#: that passes fails the test too, so the list never outlives its cells.
THICK_CELLS: dict[tuple[str, int], str] = {}
#: calls that write a file: notebooks save through helpers.report.reporting (save_table, save_figure) or the
#: atomic writers of helpers.core.artifacts (write_text, write_json, write_jsonl)
_WRITER_METHODS = {"to_csv", "to_json", "to_parquet", "to_excel", "savefig", "write_text", "write_bytes"}
_WRITER_FUNCTIONS = {("json", "dump"), ("torch", "save"), ("pickle", "dump"), ("np", "save"), ("plt", "savefig")}


def _direct_writes(source: str) -> list[str]:
    """The direct file writes of a cell's code: a pandas/matplotlib/pathlib writer method (``.to_csv(``,
    ``.savefig(``, ``.write_text(``, ...), ``json.dump(``, ``torch.save(`` and the like, and ``open(``/``.open(``
    with a write, append or create mode. A helper called by name (``write_text(path, text)``) is not one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
        what = None
        if (owner, name) in _WRITER_FUNCTIONS:
            what = f"{owner}.{name}("
        elif isinstance(f, ast.Attribute) and name in _WRITER_METHODS:
            what = f".{name}("
        elif name == "open":
            pos = 1 if isinstance(f, ast.Name) else 0  # open(path, mode) or path.open(mode)
            mode = next((k.value for k in node.keywords if k.arg == "mode"),
                        node.args[pos] if len(node.args) > pos else None)
            if mode is not None and not (isinstance(mode, ast.Constant) and not set(str(mode.value)) & set("wax+")):
                what = f"open(mode={ast.unparse(mode)})"
        if what:
            found.append((node.lineno, node.col_offset, what))
    return [what for *_, what in sorted(found)]


def test_direct_write_detector():
    assert _direct_writes("df.to_csv(p, index=False)\nfig.savefig('a.png')\njson.dump(x, f)\ntorch.save(m, p)") == [
        ".to_csv(", ".savefig(", "json.dump(", "torch.save("]
    assert _direct_writes("open(p, 'w').write(s)\nPath(p).open(mode='a')\nPath(p).write_text(s)") == [
        "open(mode='w')", "open(mode='a')", ".write_text("]
    assert _direct_writes("open(p)\nopen(p, 'rb')\nwrite_text(p, df.to_string())\nreporting.save_table(df, 'x', profile)") == []


def test_notebook_cells_are_short_and_write_through_helpers():
    """Every code cell of every notebook (its parameters cell aside) holds at most :data:`CELL_LINES` non-blank
    lines and no direct file write (:func:`_direct_writes`): a cell reads as a step of the story ("compute X with a
    helper; save and show its table; plot"), the work is in src/helpers, and every file a notebook writes goes
    through the helpers that write atomically into reports/ (``reporting.save_table``, ``save_figure``) or the run
    folder (``helpers.core.artifacts``). :data:`THICK_CELLS` lists the cells still waiting to be thinned."""
    bad, passing = [], []
    for nb_path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        for i, c in enumerate(nb.cells):
            if c.cell_type != "code" or "parameters" in c.metadata.get("tags", []):
                continue
            lines = sum(1 for line in c.source.splitlines() if line.strip())
            problems = ([f"{lines} non-blank lines (at most {CELL_LINES})"] if lines > CELL_LINES else []) + [
                f"writes a file itself: {w}" for w in _direct_writes(c.source)]
            key = (nb_path.stem, i)
            if key in THICK_CELLS:
                if not problems:
                    passing.append(f"{nb_path.stem} cell {i}")
            elif problems:
                bad.append(f"{nb_path.stem} cell {i} ({c.source.splitlines()[0][:60]!r}...): {'; '.join(problems)}")
    assert not bad, "thin these cells (a helper in src/helpers, a table or figure saved by reporting):\n" + "\n".join(bad)
    assert not passing, f"these cells pass now: remove them from THICK_CELLS: {passing}"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./run_all.sh --tests" in readme and "exec ./run_all.sh --tests" in ci


#: the pipeline's stages, in the order data flows (``src/helpers/<stage>/``; the runner sits on top)
STAGES = ["core", "data", "models", "training", "generation", "diversity", "evaluation", "judge", "story_eval",
          "analysis", "report", "runner"]
#: the imports against the flow: the compressor samples with the one next-token rule, a leaf module (torch only); and
#: repetition fine-tuning (a training loop) is trained on the decoder's own greedy rollouts and probes its
#: continuations, so it decodes with the one batched loop and cuts prompts as notebook 03 does (nothing in
#: ``generation`` imports ``training``: no cycle)
AGAINST_THE_FLOW = {("models.compressor", "generation.decoding"),
                    ("training.unlikelihood", "generation.completions"),
                    ("training.unlikelihood", "generation.decoding")}


def _helpers_imports() -> dict[str, set[str]]:
    """Each helpers module (``"data.corpora"``) -> the helpers modules it imports (same form)."""
    root = ROOT / "src" / "helpers"
    mods = {".".join(p.relative_to(root).with_suffix("").parts): p for p in root.rglob("*.py") if p.name != "__init__.py"}
    graph = {}
    for name, path in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("helpers."):
                target = node.module.removeprefix("helpers.")
                deps |= {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods}
                if target in mods:
                    deps.add(target)
            assert not (isinstance(node, ast.ImportFrom) and node.level), f"{name}: absolute helpers imports only"
        graph[name] = deps - {name}
    return graph


def test_helpers_import_order_has_no_cycles():
    """Data flows one way: a module imports only modules of its own or an earlier stage, and no import cycle."""
    graph = _helpers_imports()
    assert len(graph) > 40
    for mod, deps in graph.items():
        stage = mod.split(".")[0]
        assert stage in STAGES, f"add the stage of helpers.{mod} to STAGES"
        for dep in deps:
            ok = STAGES.index(dep.split(".")[0]) <= STAGES.index(stage) or (mod, dep) in AGAINST_THE_FLOW
            assert ok, f"helpers.{mod} imports helpers.{dep}, a later stage"
    done, active = set(), []

    def visit(m):
        assert m not in active, f"import cycle: {' -> '.join(active[active.index(m):] + [m])}"
        if m not in done:
            active.append(m)
            for d in sorted(graph[m]):
                visit(d)
            active.pop()
            done.add(m)

    for m in sorted(graph):
        visit(m)


def test_benchmark_scripts_import():
    """Every benchmark script imports (its work runs only under __main__), so a renamed helper breaks a test."""
    import importlib.util
    import sys
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "benchmarks"
    scripts = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    assert scripts, "no benchmark scripts found"
    sys.path.insert(0, str(folder))
    try:
        for p in scripts:
            spec = importlib.util.spec_from_file_location(f"bench_{p.stem}", p)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # as an import does (a dataclass looks its module up there)
            try:
                spec.loader.exec_module(module)
            finally:
                sys.modules.pop(spec.name, None)
    finally:
        sys.path.remove(str(folder))


def test_gpu_notebooks_script_parses_and_asks_for_its_folder():
    """``benchmarks/gpu_notebooks.sh`` (run on a lent GPU machine) is valid bash and stops with its usage line
    when no output folder is given, before it installs or runs anything."""
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_notebooks.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert proc.returncode != 0 and "usage: bash benchmarks/gpu_notebooks.sh OUTDIR" in proc.stderr


def test_gpu_check_dry_run_on_cpu(tmp_path):
    """``benchmarks/gpu_check.py`` (run on a lent GPU, where a broken section costs device time) runs every section
    end to end on tiny shapes on the CPU: same code, no failure, every section reported."""
    import json
    import subprocess
    import sys

    script = ROOT / "benchmarks" / "gpu_check.py"
    r = subprocess.run([sys.executable, str(script), "--device", "cpu", "--tiny", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=900, cwd=ROOT)  # a hang guard: shared cores slow it many-fold
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads((tmp_path / "gpu_check.json").read_text())
    assert res["failures"] == []
    sections = {row["section"] for row in res["rows"]}
    assert {"decoder numerics", "decoder step", "real run", "encoder numerics", "encoder step"} <= sections


# ------------------------------------------------------------------ the repository stands alone
_PRIVATE_DOC = re.compile("STUDY" + r"\.md", re.I)  # the private specification, not part of the repository
_SEED_REF = re.compile(r"\bseeds?[ _-]0\d\d\b", re.I)  # "seed" + a three-digit id: the private papers' numbering
_ISSUE_REF = re.compile(r"\bissues? #?\d+\b|(?<![\w&/])#1\d\b", re.I)  # the developers' tracker, which a reader cannot open
_DOC_LINK = re.compile(r"\bdocs/([A-Za-z0-9_./-]+?\.md)(?:#([A-Za-z0-9_-]+))?")
_BINARY_SUFFIXES = {".gz", ".zip", ".png", ".jpg", ".jpeg", ".gif", ".pdf", ".svg", ".pt", ".bin", ".safetensors",
                    ".npy", ".npz", ".parquet", ".pkl", ".xz", ".bz2", ".whl"}


def _tracked_text_files():
    """(relative path, text) of every tracked text file outside ``reports/`` (generated outputs)."""
    import subprocess

    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        paths = [p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: walk the tree
        skip = {".git", ".venv", "runs", "reports", "__pycache__", ".pytest_cache", ".ipynb_checkpoints"}
        paths = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                 if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]
    for rel in sorted(paths):
        p = ROOT / rel
        if rel.startswith("reports/") or p.suffix.lower() in _BINARY_SUFFIXES or not p.is_file():
            continue
        raw = p.read_bytes()
        if b"\0" in raw[:8192]:
            continue
        try:
            yield rel, raw.decode("utf-8")
        except UnicodeDecodeError:
            continue


def _anchors(markdown: str) -> set[str]:
    ids = set(re.findall(r"""<a\s+(?:id|name)=["']([^"']+)["']""", markdown))
    for heading in re.findall(r"^#+\s+(.+?)\s*$", markdown, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        ids.add(slug)
    return ids


def test_no_reference_to_documents_outside_the_repository():
    """The methods live in docs/methods.md; nothing may cite the developers' private specification, the private
    papers' numbers (the word seed followed by a zero-padded id) or the developers' issue tracker (the word issue and a number),
    which a reader of the repository cannot open."""
    assert _ISSUE_REF.search("the target of issue #" + "14") and _ISSUE_REF.search("until #" + "14)")
    assert not _ISSUE_REF.search("colour #1a2b3c, &#10;, page#12")
    bad = []
    for rel, text in _tracked_text_files():
        for n, line in enumerate(text.splitlines(), 1):
            if _PRIVATE_DOC.search(line) or _SEED_REF.search(line) or _ISSUE_REF.search(line):
                bad.append(f"{rel}:{n}: {line.strip()[:100]}")
    assert not bad, "references to documents that are not in the repository:\n" + "\n".join(bad)


def test_cited_docs_exist_with_their_anchors():
    """Every ``docs/<name>.md`` (and ``docs/<name>.md#anchor``) cited by a tracked file exists, anchor included."""
    assert (ROOT / "docs" / "methods.md").is_file() and (ROOT / "CITATION.cff").is_file()
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["title"] == "storybench" and cff["type"] == "software"
    assert cff["authors"] == [{"name": "storybench contributors"}] and len(cff["references"]) >= 2
    anchors: dict[str, set[str]] = {}
    missing = []
    for rel, text in _tracked_text_files():
        for name, anchor in _DOC_LINK.findall(text):
            doc = ROOT / "docs" / name
            if not doc.is_file():
                missing.append(f"{rel}: docs/{name}")
                continue
            if anchor:
                if name not in anchors:
                    anchors[name] = _anchors(doc.read_text(encoding="utf-8"))
                if anchor not in anchors[name]:
                    missing.append(f"{rel}: docs/{name}#{anchor}")
    assert not missing, "cited documents or anchors that do not exist:\n" + "\n".join(sorted(set(missing)))


def test_readme_tree_lists_every_helpers_module():
    """docs/architecture.md's "where things live" tree names every module of src/helpers (and no other), stage by stage."""
    readme = (ROOT / "docs" / "architecture.md").read_text()
    listed: dict[str, set[str]] = {}
    stage = None
    for line in readme.splitlines():
        m = re.match(r"^  (\w+)/\s+(.*)$", line)
        if m:
            stage = m.group(1)
            listed[stage] = set(m.group(2).split())
        elif stage and re.match(r"^ {10,}\w", line):  # a stage's continuation line
            listed[stage] |= set(line.split())
        else:
            stage = None
    src = ROOT / "src" / "helpers"
    actual = {d.name: {p.stem for p in d.glob("*.py") if p.stem != "__init__"}
              for d in src.iterdir() if d.is_dir() and (d / "__init__.py").is_file()}
    assert listed == actual


def test_only_the_reference_run_of_reports_is_tracked():
    """reports/<profile>/ of every profile but cpu (smoke, paper, a user's params/<name>/) is git-ignored; reports/cpu
    is not (it is the committed reference run)."""
    import subprocess

    root = repo_root()
    for path, ignored in (("reports/smoke/x.csv", True), ("reports/paper-100m/x.csv", True),
                          ("reports/my-profile/tables/x.csv", True), ("reports/variants/a/x.csv", True),
                          ("reports/cpu/tables/05_questions.csv", False)):
        rc = subprocess.run(["git", "check-ignore", "-q", path], cwd=root).returncode
        assert (rc == 0) == ignored, path
