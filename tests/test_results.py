"""reports/<profile>/results.csv: every number of every table as one tidy row, with its interval, unit and n."""
from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

from helpers.core.config import repo_root
from helpers.report import results as R

PLACEHOLDERS = {"-", "–", "—", ""}


def _float(x) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(str(x).strip())
    except ValueError:
        return None
    return None if math.isnan(v) else v


def numeric_cells(df: pd.DataFrame):
    """(row, column, number) of every number a reader sees in a table: cells of numeric columns (booleans aside),
    of text columns whose every cell is a number or a dash, and both ends of every "[a, b]" interval string."""
    for c in df.columns:
        s = df[c]
        if pd.api.types.is_bool_dtype(s):
            continue
        cells = [(i, v) for i, v in enumerate(s) if not (isinstance(v, float) and math.isnan(v))]
        filled = [(i, v) for i, v in cells if str(v).strip() not in PLACEHOLDERS]
        if pd.api.types.is_numeric_dtype(s) or (filled and all(_float(v) is not None for _, v in filled)):
            for i, v in filled:
                yield i, c, _float(v)
        elif filled and all(R.parse_interval(v) for _, v in filled):
            for i, v in filled:
                for x in R.parse_interval(v):
                    if not math.isnan(x):
                        yield i, c, x


def missing_cells(tables: Path, rows: pd.DataFrame, skip: set[str] = frozenset()) -> list[str]:
    """The numeric cells of the tables under ``tables`` that no row of ``rows`` holds (as its value, interval end,
    n or seed, or as an identifier ``column=value`` in its key)."""
    held = defaultdict(lambda: (set(), set(), []))  # (table, row) -> ({(column, value)}, {other numbers}, [keys])
    cols = [rows[c].tolist() for c in ("table", "row", "column", "value", "ci_low", "ci_high", "n", "seed", "key")]
    for table, row, column, value, lo, hi, n, seed, key in zip(*cols):
        values, numbers, keys = held[(table, int(row))]
        values.add((column, value))
        numbers.update(x for x in (lo, hi, n, seed) if not math.isnan(x))
        keys.append(str(key))

    def near(x, xs):
        return x in xs or any(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) for y in xs)

    missing = []
    for path in sorted(p for p in tables.glob("*.csv") if p.stem not in skip):
        df = pd.read_csv(path)
        for i, c, x in numeric_cells(df):
            values, numbers, keys = held.get((path.stem, i), (set(), set(), []))
            if (c, x) in values or near(x, numbers) or any(f"{c}=" in k for k in keys) or \
                    near(x, {v for col, v in values if col == c and not math.isnan(v)}):
                continue
            missing.append(f"{path.stem}[{i}, {c!r}] = {x}")
    return missing


def _tables(folder: Path) -> Path:
    """Tiny tables in the layouts the real ones use."""
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"model": ["tiny-10k", "tiny-40k"], "k": [2, 3], "self-BLEU": [0.1, 0.2], "ci_low": [0.05, 0.1],
                  "ci_high": [0.15, 0.3], "prompts": [20, 20]}).to_csv(folder / "03_self_bleu.csv", index=False)
    pd.DataFrame({"model": ["a", "a (seed 7)"], "decoding": ["greedy", "greedy"], "items": [10, 10],
                  "creativity": [3.9, 4.1], "creativity low": [3.8, 4.0], "creativity high": [4.0, 4.2]}
                 ).to_csv(folder / "05b_gpteval_judge.csv", index=False)
    pd.DataFrame({"source": ["ours (smoke)", "paper"], "model": ["GPT-Neo", "GPT-Neo V2"],
                  "training data": ["tiny-10k", "5M"], "BLiMP": [51.31, 55.5], "BLiMP 95% CI": ["[50.9, 51.7]", None],
                  "paper note": ["", "printed Avg. 53.3"]}).to_csv(folder / "05_table1_decoders.csv", index=False)
    pd.DataFrame({"phenomenon": ["Binding", "Ellipsis"], "m1": [50.0, 60.0],
                  "m1 95% CI": ["[40.0, 60.0]", "[50.0, 70.0]"],
                  "m1 (seed 7)": [55.0, 65.0], "m1 (seed 7) 95% CI": ["[45.0, 65.0]", "[55.0, 75.0]"],
                  "pairs": [120, 40]}).to_csv(folder / "05_table4_blimp_phenomena.csv", index=False)
    pd.DataFrame({"model": ["m1"], "task": ["cola"], "metric": ["mcc"], "score (%)": [4.3], "CI low (%)": [-6.7],
                  "CI high (%)": [17.9], "n_test": [300], "protocol": ["standard"]}
                 ).to_csv(folder / "05_glue_runs.csv", index=False)
    pd.DataFrame({"corpus": ["tiny", "baby"], "units": [10, 20], "mean words/unit": [5.5, 6.5], "left out": ["-", 3],
                  "balanced": [True, False]}).to_csv(folder / "01_corpus_stats.csv", index=False)
    pd.DataFrame({"question": ["q1"], "task": ["BLiMP"], "A": ["a"], "B": ["b"], "seeds A": [2], "seeds B": [2],
                  "paired seeds": [2], "items": [500], "effect": [1.5], "seed CI low": [-0.5], "seed CI high": [3.5], "item CI low": [0.5],
                  "item CI high": [2.5], "McNemar p": [0.03], "unit": ["points"]}
                 ).to_csv(folder / "05_questions.csv", index=False)
    pd.DataFrame({"mix": ["baby-1M"], "paper mix": ["baby-10M"], "benchmark": ["BLiMP"], "seeds": [3],
                  "ours (cpu)": [56.6], "CI low": [55.3], "CI high": [58.0], "paper": [62.1]}
                 ).to_csv(folder / "05_ours_vs_paper.csv", index=False)
    return folder


def test_every_number_of_tiny_tables_is_a_row(tmp_path):
    tables = _tables(tmp_path / "tables")
    rows = R.tidy_results(tables)
    assert list(rows.columns) == R.RESULT_COLUMNS
    assert missing_cells(tables, rows) == []
    bleu = rows[rows.table == "03_self_bleu"]
    assert bleu[["value", "ci_low", "ci_high", "n"]].values.tolist() == [[0.1, 0.05, 0.15, 20], [0.2, 0.1, 0.3, 20]]
    assert list(bleu["key"]) == ["k=2", "k=3"] and set(bleu["metric"]) == {"self-BLEU"}
    judge = rows[rows.table == "05b_gpteval_judge"].set_index("model")
    assert judge.loc["a (seed 7)", "seed"] == 7 and math.isnan(judge.loc["a", "seed"])
    assert judge.loc["a", ["ci_low", "ci_high"]].tolist() == [3.8, 4.0] and set(judge["unit"]) == {"score 1-10"}
    assert set(judge["notebook"]) == {"05b_story_evaluation"}
    wide = rows[rows.table == "05_table4_blimp_phenomena"]
    assert len(wide) == 4 and set(wide["model"]) == {"m1", "m1 (seed 7)"} and set(wide["unit"]) == {"percent"}
    assert wide.set_index(["model", "task"]).loc[("m1 (seed 7)", "Ellipsis"), ["value", "ci_low", "ci_high", "n"]
                                                ].tolist() == [65.0, 55.0, 75.0, 40]
    glue = rows[rows.table == "05_glue_runs"].iloc[0]
    assert (glue["metric"], glue["value"], glue["ci_low"], glue["ci_high"], glue["n"]) == ("mcc", 4.3, -6.7, 17.9, 300)
    stats = rows[rows.table == "01_corpus_stats"]
    assert set(stats["metric"]) == {"units", "mean words/unit", "left out"}  # the boolean column is a label
    assert stats[stats.metric == "mean words/unit"]["unit"].tolist() == ["words", "words"]
    q = rows[rows.table == "05_questions"].set_index("metric")  # one effect, two intervals: over seeds, over items
    assert q.loc["effect", ["value", "ci_low", "ci_high"]].tolist() == [1.5, -0.5, 3.5]
    assert q.loc["effect (interval over items)", ["value", "ci_low", "ci_high"]].tolist() == [1.5, 0.5, 2.5]
    assert q.loc["effect", "unit"] == "percentage points" and q.loc["McNemar p", "unit"] == "p-value"
    assert set(q["model"]) == {"a vs b"} and q.loc["effect", "n"] == 2  # the seed interval: over 2 paired seeds
    assert q.loc["effect (interval over items)", "n"] == 500 and q.loc["items", "n"] == 500
    vs = rows[rows.table == "05_ours_vs_paper"].set_index("column")  # n: our mix's seeds, not the paper's runs
    assert vs.loc["ours (cpu)", ["value", "ci_low", "ci_high", "n"]].tolist() == [56.6, 55.3, 58.0, 3]
    assert vs.loc["paper", "value"] == 62.1 and math.isnan(vs.loc["paper", "n"])


def test_an_interval_string_becomes_ci_low_and_ci_high(tmp_path):
    assert R.parse_interval("[50.9, 51.7]") == (50.9, 51.7) and R.parse_interval("[-6.7, 17.9]") == (-6.7, 17.9)
    assert R.parse_interval("51.3") is None and R.parse_interval("scaled protocol: boolq") is None
    rows = R.tidy_results(_tables(tmp_path / "tables"))
    ours = rows[(rows.table == "05_table1_decoders") & (rows.row == 0)].iloc[0]
    assert (ours["model"], ours["task"], ours["metric"], ours["value"]) == ("tiny-10k", "BLiMP", "accuracy", 51.31)
    assert (ours["ci_low"], ours["ci_high"], ours["unit"]) == (50.9, 51.7, "percent")
    paper = rows[(rows.table == "05_table1_decoders") & (rows.row == 1)].iloc[0]
    assert paper["model"] == "GPT-Neo V2, 5M" and math.isnan(paper["ci_low"]) and "source=paper" in paper["key"]


def test_write_results_writes_csv_and_json_with_the_same_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("STORYBENCH_REPORTS", str(tmp_path / "reports"))
    tables = _tables(tmp_path / "reports" / "smoke" / "tables")
    assert R.main(["--profile", "smoke"]) == 0
    csv = pd.read_csv(tmp_path / "reports" / "smoke" / "results.csv")
    data = json.loads((tmp_path / "reports" / "smoke" / "results.json").read_text())
    assert len(csv) == len(data) == len(R.tidy_results(tables)) and list(data[0]) == R.RESULT_COLUMNS
    bleu = [d for d in data if d["table"] == "03_self_bleu"]
    assert [d["ci_low"] for d in bleu] == csv[csv.table == "03_self_bleu"]["ci_low"].tolist() == [0.05, 0.1]
    assert any(d["ci_low"] is None for d in data)  # blanks are null
    assert not list((tmp_path / "reports" / "smoke").glob(".*tmp"))  # written atomically


@pytest.mark.parametrize("profile", ["cpu", "smoke"])
def test_every_number_of_a_profiles_tables_is_a_row(profile):
    """The committed reference run (cpu) and, where this checkout ran it, the smoke run (its tables are the newest)."""
    tables = repo_root() / "reports" / profile / "tables"
    if not any(tables.glob("*.csv")):
        pytest.skip(f"no reports/{profile}/tables in this checkout")
    rows = R.tidy_results(tables)
    items = set(R.item_tables(tables))
    assert "06_neuron_pos_per_neuron" in items or profile != "cpu" or not (tables / "06_neuron_pos_per_neuron.md").exists()
    assert missing_cells(tables, rows, skip=items) == []
    with_numbers = {p.stem for p in tables.glob("*.csv")
                    if p.stem not in items and any(True for _ in numeric_cells(pd.read_csv(p)))}
    assert set(rows["table"]) == with_numbers and len(with_numbers) > 30  # text-only tables (samples) have none
    assert (rows["unit"] == "unknown").mean() < 0.01  # units are stated, not guessed, almost everywhere
    for _, r in rows.dropna(subset=["ci_low", "ci_high"]).iterrows():
        assert r["ci_low"] <= r["ci_high"] + 1e-9, (r["table"], r["row"], r["column"])


def test_item_level_tables_are_named_and_left_out(tmp_path):
    tables = tmp_path / "tables"
    tables.mkdir()
    pd.DataFrame({"model": ["a"], "accuracy": [51.0]}).to_csv(tables / "05_summary.csv", index=False)
    (tables / "05_summary.md").write_text("| model | accuracy |\n")
    pd.DataFrame({"item": [1, 2], "score": [3.0, 4.0]}).to_csv(tables / "05b_items.csv", index=False)  # no .md: item-level
    assert R.item_tables(tables) == ["05b_items"]
    assert set(R.tidy_results(tables)["table"]) == {"05_summary"}
    (tables / "05_summary.md").unlink()  # a folder without markdown copies: nothing is item-level
    assert R.item_tables(tables) == [] and set(R.tidy_results(tables)["table"]) == {"05_summary", "05b_items"}


def test_questions_rows_have_unique_keys_their_own_n_and_units():
    """05_questions in results: every (table, row, column) once; the seed interval's n counts seeds, the item
    interval's n counts items; the arms' means are accuracies in percent, the differences percentage points; the
    question in its own column (not packed into key)."""
    import pandas as pd

    q = pd.DataFrame([{"question": "D_gen: generated stories change BLiMP", "role": "question", "task": "BLiMP",
                       "A": "gen", "B": "base", "seeds A": 5, "seeds B": 5, "paired seeds": 5, "items": 2010,
                       "mean A": 57.3, "mean B": 56.3, "effect": 1.0, "seed CI low": -1.4, "seed CI high": 3.4,
                       "seed p": 0.31, "effect after Holm": "no", "seed SD": 1.9, "MDE (80 % power)": 3.3,
                       "item CI low": -0.02, "item CI high": 1.99, "item MDE (80 % power)": 1.4,
                       "δ (equivalence margin)": 2.0, "TOST 90 % CI low": -0.8, "TOST 90 % CI high": 2.9,
                       "TOST": "inconclusive", "effect (sum PLL)": -0.1, "seed CI low (sum PLL)": -2.0,
                       "seed CI high (sum PLL)": 1.7, "item CI low (sum PLL)": -1.0, "item CI high (sum PLL)": 0.8,
                       "unit": "points", "verdict": "not shown: effect +1.0 points, in [-1.4, +3.4] (95 % over 5 seeds)"}])
    rows = R.tidy_table(q, "05_questions", "05_evaluation")
    assert not rows.duplicated(["table", "row", "column"]).any()
    by = rows.set_index("column")
    assert by.at["effect", "n"] == 5 and (by.at["effect", "ci_low"], by.at["effect", "ci_high"]) == (-1.4, 3.4)
    assert by.at["effect (interval over items)", "n"] == 2010 and by.at["effect (interval over items)", "ci_low"] == -0.02
    assert by.at["effect (TOST 90 % interval)", "ci_high"] == 2.9 and by.at["effect (TOST 90 % interval)", "n"] == 5
    assert by.at["effect (sum PLL)", "ci_low"] == -2.0 and by.at["effect (interval over items) (sum PLL)", "n"] == 2010
    assert math.isnan(by.at["item MDE (80 % power)", "ci_low"])  # the item CI is not the item MDE's interval
    assert by.at["mean A", "unit"] == "percent" and by.at["effect", "unit"] == "percentage points"
    assert set(rows["question"]) == {"D_gen: generated stories change BLiMP"} and "question=" not in rows["key"].iloc[0]


def test_every_result_key_is_unique_in_the_reference_tables():
    """(table, row, column) identifies one number in results.csv, over every table of the committed reference run."""
    rows = R.tidy_results(R.reports_dir("cpu") / "tables")
    dup = rows[rows.duplicated(["table", "row", "column"], keep=False)]
    assert dup.empty, dup[["table", "row", "column"]].drop_duplicates().head().to_string()
