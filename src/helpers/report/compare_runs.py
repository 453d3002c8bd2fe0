"""Are two runs' tables equal in every number, and where not, by how much? Compares the CSV tables of two report
folders (or of a git revision and the working tree), leaving out columns that measure time or memory, which differ
from run to run; ``--deltas`` lists every changed number with its old interval and whether the new value lies in it.

    python -m helpers.report.compare_runs HEAD~1              # reports/cpu/tables at HEAD~1 vs the working tree
    python -m helpers.report.compare_runs OLD_DIR NEW_DIR     # two tables folders (e.g. a --set variant's)
    python -m helpers.report.compare_runs OLD_DIR NEW_DIR --deltas
"""
from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path
from typing import Mapping

import pandas as pd

from helpers.core.config import repo_root

# a column whose name contains one of these measures the machine, not the study
MACHINE_COLUMNS = ("wall time", "minutes", "seconds", "(min)", "(s)", "s/item", "tok/s", "tokens/s", "RSS", "MB",
                   "peak", "load s")


def study_columns(df: pd.DataFrame) -> list[str]:
    """The columns of ``df`` that are results of the study (every column but :data:`MACHINE_COLUMNS`)."""
    return [c for c in df.columns if not any(m.lower() in str(c).lower() for m in MACHINE_COLUMNS)]


def compare_tables(old: Mapping[str, pd.DataFrame], new: Mapping[str, pd.DataFrame], rtol: float = 0.0) -> dict:
    """``{"same": [...], "differ": {name: why}, "new": [...], "gone": [...]}`` for tables by name; two tables are the
    same when their study columns have the same names, shape and values (numbers within ``rtol``, 0: exactly)."""
    out = {"same": [], "differ": {}, "new": sorted(set(new) - set(old)), "gone": sorted(set(old) - set(new))}
    for name in sorted(set(old) & set(new)):
        a, b = old[name], new[name]
        ca, cb = study_columns(a), study_columns(b)
        if ca != cb:
            out["differ"][name] = f"columns: -{sorted(set(ca) - set(cb))} +{sorted(set(cb) - set(ca))}"
        elif a.shape[0] != b.shape[0]:
            out["differ"][name] = f"rows: {a.shape[0]} -> {b.shape[0]}"
        else:
            bad = [c for c in ca if not _column_equal(a[c], b[c], rtol)]
            if bad:
                out["differ"][name] = "values in: " + ", ".join(map(str, bad))
            else:
                out["same"].append(name)
    return out


def _column_equal(a: pd.Series, b: pd.Series, rtol: float) -> bool:
    a, b = a.reset_index(drop=True), b.reset_index(drop=True)
    if pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
        both_nan = a.isna() & b.isna()
        close = (a - b).abs() <= rtol * b.abs() if rtol else a == b
        return bool((both_nan | close).all())
    return bool(a.fillna("").astype(str).equals(b.fillna("").astype(str)))


def interval_columns(df: pd.DataFrame, col: str) -> tuple[str, str] | None:
    """The columns holding the 95 % interval of ``col`` in the project's tables: ``"<col> low"``/``"<col> high"``
    (or ``"<col> CI low"``/``"<col> CI high"``), else ``ci_low``/``ci_high`` or ``CI low``/``CI high`` when they
    directly follow ``col`` (an estimate, then its interval); None when the table gives ``col`` no interval."""
    cols = [str(c) for c in df.columns]
    for lo, hi in ((f"{col} low", f"{col} high"), (f"{col} CI low", f"{col} CI high")):
        if lo in cols and hi in cols:
            return lo, hi
    i = cols.index(col) if col in cols else -1
    for lo, hi in (("ci_low", "ci_high"), ("CI low", "CI high")):
        if 0 <= i < len(cols) - 2 and cols[i + 1] == lo and cols[i + 2] == hi:
            return lo, hi
    return None


def deltas(name: str, a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Every number that changed between two tables of the same shape and study columns: the row (its text
    columns), the column, old, new, the change, the old 95 % interval where the table has one
    (:func:`interval_columns`) and whether the new value lies inside it."""
    a, b = a.reset_index(drop=True), b.reset_index(drop=True)
    cols = [c for c in study_columns(a) if c in b.columns]
    keys = [c for c in cols if not pd.api.types.is_numeric_dtype(a[c])]
    rows = []
    for c in cols:
        if c in keys or not pd.api.types.is_numeric_dtype(b[c]):
            continue
        iv = interval_columns(a, c)
        for i in range(min(len(a), len(b))):
            x, y = a.at[i, c], b.at[i, c]
            if (pd.isna(x) and pd.isna(y)) or x == y:
                continue
            lo, hi = (a.at[i, iv[0]], a.at[i, iv[1]]) if iv else (float("nan"), float("nan"))
            rows.append({"table": name, "row": " · ".join(str(a.at[i, k]) for k in keys[:3]) or str(i), "column": c,
                         "old": x, "new": y, "change": float(y) - float(x), "old CI low": lo, "old CI high": hi,
                         "within old interval": (bool(lo <= y <= hi) if iv and pd.notna(lo) else None)})
    return pd.DataFrame(rows, columns=["table", "row", "column", "old", "new", "change", "old CI low", "old CI high",
                                       "within old interval"])


def read_tables(folder: str | Path) -> dict[str, pd.DataFrame]:
    """Every ``*.csv`` of a tables folder, by file name."""
    return {p.name: pd.read_csv(p) for p in sorted(Path(folder).glob("*.csv"))}


def read_tables_at(revision: str, folder: str = "reports/cpu/tables") -> dict[str, pd.DataFrame]:
    """Every ``*.csv`` of ``folder`` as committed at git ``revision``."""
    root = repo_root()
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{revision}:{folder}"], cwd=root, capture_output=True,
                           text=True, check=True).stdout.split()
    # bytes, as read_tables reads a file: text mode would turn a "\r" inside a quoted completion into "\n"
    return {n: pd.read_csv(io.BytesIO(subprocess.run(["git", "show", f"{revision}:{folder}/{n}"], cwd=root,
                                                     capture_output=True, check=True).stdout))
            for n in names if n.endswith(".csv")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", help="a git revision (its reports/<profile>/tables) or a tables folder")
    ap.add_argument("new", nargs="?", help="a tables folder (default: reports/<profile>/tables of the working tree)")
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--rtol", type=float, default=0.0, help="relative tolerance for numbers (default: exact)")
    ap.add_argument("--deltas", action="store_true",
                    help="list every changed number with its old 95 %% interval and whether the new one is inside it")
    args = ap.parse_args(argv)
    folder = f"reports/{args.profile}/tables"
    old = read_tables(args.old) if Path(args.old).is_dir() else read_tables_at(args.old, folder)
    new = read_tables(args.new or repo_root() / folder)
    res = compare_tables(old, new, args.rtol)
    print(f"same in every study column: {len(res['same'])} of {len(set(old) & set(new))} tables")
    for name, why in res["differ"].items():
        print(f"  differs: {name} ({why})")
    for key in ("new", "gone"):
        if res[key]:
            print(f"  {key}: {', '.join(res[key])}")
    if args.deltas:
        changed = [deltas(n, old[n], new[n]) for n in res["differ"] if old[n].shape[0] == new[n].shape[0]]
        table = pd.concat(changed, ignore_index=True) if changed else pd.DataFrame()
        if len(table):
            inside = table["within old interval"].dropna()
            print(f"\n{len(table)} changed numbers; {int(inside.sum())} of {len(inside)} with an interval lie inside "
                  "the old run's 95 % interval")
            with pd.option_context("display.max_rows", 200, "display.width", 160):
                print(table.to_string(index=False))
    return 1 if res["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
