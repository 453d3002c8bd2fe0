"""The provenance of the models a notebook used or produced, for its entry in ``reports/<profile>/manifest.json``
(:func:`helpers.report.reporting.write_manifest`): every saved model folder, with the git revision and the digest of
the training code that made it, as its sidecar recorded them when it was trained
(:func:`helpers.training.model_card.provenance`, :func:`helpers.core.integrity.read_sidecar`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from helpers.core.config import PRODUCERS, run_dir, shown_path
from helpers.core.digests import WEIGHT_FILES
from helpers.core.integrity import read_sidecar


def _model_folders(run: Path, paths: Iterable[Path]) -> set[Path]:
    """The saved model folders (holding a weight file) among ``paths`` (a folder, or a file inside one) and below
    them; runs set aside (``*.kept-*``, ``*.rejected-*``), hidden temporaries and checkpoints left out."""
    found = set()
    for p in paths:
        d = p if p.is_dir() else p.parent
        candidates = [d] + ([w.parent for n in WEIGHT_FILES for w in d.rglob(n)] if p.is_dir() else [])
        for c in candidates:
            rel = c.relative_to(run).parts if c.is_relative_to(run) else c.parts
            if (any((c / n).is_file() for n in WEIGHT_FILES) and "checkpoint" not in rel
                    and not any(part.startswith(".") or ".kept-" in part or ".rejected-" in part for part in rel)):
                found.add(c)
    return found


def model_provenance(profile: str, notebook: str, inputs: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """``{"runs/<profile>/<folder>": {"revision", "code_digest"}}`` for every saved model folder a notebook used
    (a file of it among ``inputs``, the keys of :func:`run_inputs`) or produced (the model folders under the run
    folders :data:`helpers.core.config.PRODUCERS` assigns to ``notebook``): the git revision and code digest that
    trained it, read from the folder's sidecar (:func:`helpers.core.integrity.read_sidecar`); both None for a folder
    saved before the sidecar recorded them."""
    run, prefix = run_dir(profile), f"runs/{profile}/"
    used = [run / k[len(prefix):] for k in inputs if k.startswith(prefix)]
    nb = notebook.split("_")[0]
    made = [run / folder for folder, producer in PRODUCERS.items() if producer == nb and (run / folder).is_dir()]
    out = {}
    for folder in sorted(_model_folders(run, [*used, *made])):
        try:
            info = read_sidecar(folder) or {}
        except ValueError:
            info = {}
        rel = folder.relative_to(run).as_posix() if folder.is_relative_to(run) else shown_path(folder)
        out[prefix + rel] = {"revision": info.get("revision"), "code_digest": info.get("code_digest")}
    return out
