"""Variants of a profile without editing its params: ``--set NN.key=value`` overrides (:func:`parse_overrides`,
:func:`helpers.core.config.apply_overrides`) and the folders a variant runs into (:func:`variant_roots`: ``runs/variants/<id>/`` and
``reports/variants/<id>/``, never the profile's own), named by :func:`variant_id`; how a variant names itself in
messages and hints (:func:`set_arguments`, :func:`shown_variant_path`, :func:`variant_text`)."""
from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

from helpers.core.config import ParamsError, parse_value, repo_root, shown_path
from helpers.core.digests import text_digest


def parse_overrides(items: list[str] | None) -> dict[str, dict[str, Any]]:
    """``["02.train.lr=1e-3", "05.seed=1"]`` → ``{"02": {"train.lr": 0.001}, "05": {"seed": 1}}``: notebook number,
    dotted key, value read as YAML (:func:`helpers.core.config.parse_value`). An empty value (``02.train.lr=``, what a
    shell leaves of ``02.train.lr=$UNSET``) is refused: YAML would read it as null and the run would silently lose the
    profile's value; ``null`` says so on purpose."""
    out: dict[str, dict[str, Any]] = {}
    for item in items or []:
        m = re.fullmatch(r"(\d+[a-z]?)\.([A-Za-z_][\w.]*)=(.*)", item, flags=re.S)
        if not m:
            raise ParamsError(f"--set {item!r}: expected NN.key=value, e.g. 02.train.lr=1e-3 (a nested key with dots)")
        if not m.group(3).strip():
            raise ParamsError(f"--set {item!r}: no value after '=' (an unset shell variable?); give one, e.g. "
                              f"{m.group(1)}.{m.group(2)}=1e-3, write {m.group(1)}.{m.group(2)}=null for no value, or "
                              "leave this --set out to keep the profile's")
        try:
            out.setdefault(m.group(1), {})[m.group(2)] = parse_value(m.group(3))
        except ParamsError as e:
            raise ParamsError(f"--set {item!r}: {e}") from None
    return out


def variant_id(profile: str, overrides: dict[str, dict[str, Any]]) -> str:
    """A short, stable name for a profile run with ``--set`` overrides: ``<profile>-<8 hex of the overrides>``."""
    blob = json.dumps(overrides, sort_keys=True, default=str)
    return f"{profile}-{text_digest(blob, 8)}"


def variant_roots(profile: str, overrides: dict[str, dict[str, Any]]) -> tuple[Path, Path]:
    """Where a ``--set`` run writes: ``runs/variants/<id>/`` and ``reports/variants/<id>/`` (under the current runs
    and reports roots), so a variant never touches ``runs/<profile>/`` or the committed ``reports/<profile>/``."""
    vid = variant_id(profile, overrides)
    runs = Path(os.environ.get("STORYBENCH_RUNS", repo_root() / "runs")) / "variants" / vid
    reports = Path(os.environ.get("STORYBENCH_REPORTS", repo_root() / "reports")) / "variants" / vid
    return runs, reports


def set_arguments(overrides: dict[str, dict[str, Any]] | None) -> str:
    """The ``--set`` arguments that give ``overrides`` again (``" --set 02.train.lr=0.001"``; ``""`` for none), shell
    quoted, for the hints a variant prints (resume, rerun a notebook): following them reruns the same variant, into
    the same folders (:func:`parse_overrides` reads them back to the same mapping, so :func:`variant_id` is the same)."""
    args = []
    for nb, keys in (overrides or {}).items():
        for key, value in keys.items():
            text = value if isinstance(value, str) and value.strip() and parse_value(value) == value else json.dumps(value)
            args.append(f"--set {shlex.quote(f'{nb}.{key}={text}')}")
    return "".join(" " + a for a in args)


def shown_variant_path(p: str | os.PathLike) -> str:
    """``p`` as reports show it (:func:`helpers.core.config.shown_path`: relative to the repository or to
    ``$STORYBENCH_REPORTS``/``$STORYBENCH_RUNS``), except inside a variant's folders (:func:`variant_roots`, the roots
    while it runs): there ``shown_path`` would show ``reports/<profile>/…`` (relative to the variant's root, the
    profile's own folder's name), so they are shown as ``reports/variants/<id>/<profile>/…`` and
    ``runs/variants/<id>/…``."""
    p = Path(p)
    if p.is_absolute():
        q = p.resolve()
        for env, name in (("STORYBENCH_RUNS", "runs"), ("STORYBENCH_REPORTS", "reports")):
            root = Path(os.environ[env]).resolve() if os.environ.get(env) else None
            if root is not None and root.parent.name == "variants" and q.is_relative_to(root):
                rel = q.relative_to(root).as_posix()
                return f"{name}/variants/{root.name}" + ("" if rel == "." else f"/{rel}")
    return shown_path(p)


def variant_text(text: str, profile: str, rerun: str) -> str:
    """A message from inside a variant's run (its roots set) made to name the variant (``rerun``: its ``--set``
    arguments, ``""`` for the profile itself, which leaves ``text`` as it is). Inside the kernel a path shows relative
    to the variant's roots, so ``runs/<profile>/…`` and ``reports/<profile>/…`` there are the variant's folders:
    written out as ``runs/variants/<id>/<profile>/…``; and every ``./run_all.sh --profile P --only/--from NN`` hint gets the
    ``--set`` arguments, so following it reruns the variant, not the profile."""
    if not rerun:
        return text
    for env, name in (("STORYBENCH_RUNS", "runs"), ("STORYBENCH_REPORTS", "reports")):
        root = shown_variant_path(Path(os.environ[env])) if os.environ.get(env) else name
        if root != name:  # runs/variants/<id>
            text = re.sub(rf"(?<![\w/.-]){name}/{re.escape(profile)}(?=/|\b)", f"{root}/{profile}", text)
    return re.sub(rf"(\./run_all\.sh --profile {re.escape(profile)} --(?:only|from) [\w,]+)(?![\w,]| --set)",
                  lambda m: with_set_notebooks(m.group(1), rerun) + rerun, text)


def with_set_notebooks(hint: str, rerun: str) -> str:
    """``hint``'s ``--only`` list with the notebooks the variant's ``--set`` arguments (``rerun``) set: a run without
    them refuses those arguments ('not part of this run'), so ``--only 01`` of a ``--set 02.…`` variant becomes
    ``--only 01,02`` (notebook 01 writes what 02 reads, then 02 runs as the variant asks)."""
    m = re.fullmatch(r"(.* --only )([\w,]+)", hint)
    listed = m.group(2).split(",") if m else []
    missing = [nb for nb in dict.fromkeys(re.findall(r"--set '?(\w+)\.", rerun)) if nb not in listed]
    return m.group(1) + ",".join(sorted(listed + missing)) if m and missing else hint
