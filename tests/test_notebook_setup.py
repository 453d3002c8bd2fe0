"""helpers.report.notebook: the setup cell's parameters, run folder, threads and decoder check.  The params it collects are
what each notebook's manifest records: they must be the ones the notebooks used to retype by hand."""
import json

import pytest

from helpers.core import config
from helpers.core.config import load_params, repo_root
from helpers.report import notebook as N
from helpers import runner

NOTEBOOKS = [p.name.removesuffix(".ipynb") for p in runner.notebooks()]


def _injected(nb: str, profile: str) -> dict:
    """The notebook's globals after its parameters cell and papermill's injection of params/<profile>/<nb>.yaml."""
    cell = next(c for c in json.loads(N.notebook_path(nb).read_text())["cells"]
                if "parameters" in (c["metadata"].get("tags") or []))
    ns: dict = {}
    exec("".join(cell["source"]), ns)
    ns.update({**(config.read_yaml(config.params_file(profile, nb)) or {}), "profile": profile})
    return ns


@pytest.fixture
def setup_calls(tmp_path, monkeypatch):
    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    calls = []
    monkeypatch.setattr(N, "set_threads", lambda n=None: calls.append(n) or 3)
    return calls


@pytest.mark.parametrize("profile", ["smoke", "cpu", "paper"])
@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_setup_collects_every_declared_parameter_in_order(nb, profile, setup_calls, tmp_path):
    ns = _injected(nb, profile)
    params, run, threads = N.notebook_setup(nb.split("_")[0], {**ns, "unrelated": 1, "PARAMS": None})
    declared = list(runner.declared_parameters(N.notebook_path(nb)))  # papermill's reading of the cell
    assert list(params) == N.parameter_names(nb) == declared
    assert params == {k: ns[k] for k in declared}
    assert run == tmp_path / "runs" / profile and run.is_dir()
    if "threads" in params:
        assert threads == 3 and setup_calls == [params["threads"] or None]
    else:
        assert threads is None and setup_calls == []


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_setup_records_what_the_committed_cpu_manifest_records(nb, setup_calls):
    """reports/cpu/manifest.json was written by the notebooks' hand-typed PARAMS: the same names, order and values."""
    manifest = json.loads((config.repo_root() / "reports" / "cpu" / "manifest.json").read_text())
    if nb not in manifest:
        pytest.skip(f"no cpu manifest entry for {nb}")
    old = manifest[nb]["params"]
    yaml_now = json.loads(json.dumps(config.read_yaml(config.params_file("cpu", nb)) or {}))
    if any(old.get(k) != v for k, v in yaml_now.items()) or set(old) != set(N.parameter_names(nb)):
        pytest.skip(f"reports/cpu ran {nb} with other params (or another parameters cell) than it has now")
    params = N.notebook_setup(nb.split("_")[0], _injected(nb, "cpu")).params
    new = json.loads(json.dumps(params))
    assert list(new) == list(old) and new == old


def test_no_notebook_retypes_its_parameters():
    for nb in NOTEBOOKS:
        cells = ["".join(c["source"]) for c in json.loads(N.notebook_path(nb).read_text())["cells"]
                 if c["cell_type"] == "code" and "parameters" not in (c["metadata"].get("tags") or [])]
        call = f'notebook_setup("{nb.split("_")[0]}", globals())'
        at = next((i for i, c in enumerate(cells) if call in c), None)
        assert at is not None, nb
        code = cells[at]  # the setup cell; only imports may come before it
        assert all(line.startswith(("import ", "from ")) for c in cells[:at] for line in c.splitlines() if line.strip()), nb
        assert "PARAMS = " not in code and "config.run_dir(" not in code and "set_threads(" not in code, nb
        assert "decoders missing" not in code, nb


def test_setup_names_an_undefined_parameter(setup_calls):
    ns = _injected("06", "smoke")
    del ns["top_k"]
    with pytest.raises(NameError, match="top_k .*run the parameters cell first"):
        N.notebook_setup("06", ns)


def test_require_decoders(tmp_path):
    run = tmp_path / "runs" / "smoke"
    (run / "decoders" / "tiny-1" / "best").mkdir(parents=True)
    assert N.require_decoders(run, ["tiny-1"]) == {"tiny-1": run / "decoders" / "tiny-1" / "best"}
    with pytest.raises(FileNotFoundError, match=r"decoder\(s\) tiny-2, tiny-3 missing .*tiny-2/best.*"
                                                r"run notebook 02 for profile smoke first \(./run_all.sh --profile smoke --only 02\)"):
        N.require_decoders(run, ["tiny-1", "tiny-2", "tiny-3"])


@pytest.mark.parametrize("nb", [p.stem for p in sorted((repo_root() / "notebooks").glob("*.ipynb"))])
def test_parameters_cell_is_the_cpu_profile(nb):
    """A notebook opened in JupyterLab and run as it is computes what ``./run_all.sh`` computes for the cpu profile:
    its parameters cell holds ``params/cpu`` (``python -m helpers.report.notebook`` writes it)."""
    cell = N.parameters_cell_values(nb)
    want = {"profile": "cpu", **load_params("cpu", nb)}
    wrong = {k: (cell.get(k), v) for k, v in want.items() if cell.get(k) != v}
    assert not wrong, f"{nb}: parameters cell differs from params/cpu (cell, yaml): {wrong}"


def test_render_parameters_cell_keeps_comments_and_unchanged_lines():
    src = "# header\nprofile = \"cpu\"\nsteps = 10  # how many\nnames = [\"a\",\n         \"b\"]\n"
    out = N.render_parameters_cell(src, {"profile": "cpu", "steps": 20, "names": ["a", "b"], "new": None})
    assert out.splitlines() == ["# header", 'profile = "cpu"', "steps = 20  # how many", 'names = ["a",',
                                '         "b"]', "new = None"]
