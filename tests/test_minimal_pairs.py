"""The minimal-pair task registry (helpers.evaluation.minimal_pairs): a task registered with a loader and a data folder is
loadable through ``load_task`` and ``task_files``, and an unknown task is refused with the names of the known ones."""
from __future__ import annotations

import gzip
import json

import pytest

from helpers.evaluation import minimal_pairs as MP

# two files shaped like the supplement's: one task per file, sentence_good / sentence_bad plus per-task metadata
TOY = {
    "colour_words": [("The sky is blue.", "The sky is loud."), ("Grass is green.", "Grass is tall green the.")],
    "plural_nouns": [("Two cats sat.", "Two cat sat."), ("Three dogs ran.", "Three dog ran."),
                     ("Many birds sang.", "Many bird sang.")],
}


def _write_toy(folder):
    folder.mkdir()
    for name, pairs in TOY.items():
        lines = [json.dumps({"sentence_good": g, "sentence_bad": b, "row": i, "template": name})
                 for i, (g, b) in enumerate(pairs)]
        with gzip.open(folder / f"{name}.jsonl.gz", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


def test_registered_toy_task_loads_through_the_registry(tmp_path, monkeypatch):
    folder = tmp_path / "toy_filtered"
    _write_toy(folder)
    calls = []

    def load_toy(limit_per_task, seed, blimp_version):
        calls.append((limit_per_task, seed, blimp_version))
        items = []
        for f in MP.task_files("toy"):
            name = f.name.split(".jsonl")[0]
            with gzip.open(f, "rt", encoding="utf-8") as fh:
                rows = [json.loads(line) for line in fh if line.strip()]
            items += [MP.Item("toy", name, name.replace("_", " "), str(i), r["sentence_good"], r["sentence_bad"])
                      for i, r in enumerate(rows)]
        return items

    monkeypatch.setitem(MP.TASK_REGISTRY, "toy", MP.MinimalPairTask("Toy", load_toy, lambda version: str(folder)))
    assert [f.name for f in MP.task_files("toy")] == ["colour_words.jsonl.gz", "plural_nouns.jsonl.gz"]
    items = MP.load_task("toy", limit_per_task=5, seed=3)
    assert calls == [(5, 3, "filtered")]  # load_task hands its arguments to the registered loader
    assert len(items) == 5 and {i.task for i in items} == {"toy"}
    assert [(i.paradigm, i.pair_id) for i in items[:3]] == [("colour_words", "0"), ("colour_words", "1"),
                                                           ("plural_nouns", "0")]
    assert (items[2].good, items[2].bad, items[2].context) == ("Two cats sat.", "Two cat sat.", None)
    # the bundled tasks are untouched by the registration
    assert MP.TASKS == ("blimp", "supplement", "ewok") and list(MP.TASK_REGISTRY)[:3] == list(MP.TASKS)
    assert MP.TASK_NAMES == {"blimp": "BLiMP", "supplement": "Supp.", "ewok": "EWoK"}


def test_a_task_stored_like_the_supplement_is_one_registry_entry(tmp_path, monkeypatch):
    """pair_file_task: the data plus one entry, and the task is scored and summarised by zero_shot like the bundled ones."""
    from helpers.evaluation import zero_shot

    folder = tmp_path / "toy_pairs"
    _write_toy(folder)
    monkeypatch.setitem(MP.TASK_REGISTRY, "toy", MP.pair_file_task("toy", "Toy", str(folder), {"plural_nouns": "Plurals"}))
    items = MP.load_task("toy")
    assert [(i.task, i.paradigm, i.phenomenon, i.pair_id) for i in items] == [
        ("toy", "colour_words", "colour_words", "0"), ("toy", "colour_words", "colour_words", "1"),
        ("toy", "plural_nouns", "Plurals", "0"), ("toy", "plural_nouns", "Plurals", "1"), ("toy", "plural_nouns", "Plurals", "2")]
    assert MP.load_task("toy", limit_per_task=1, seed=0) == MP.load_pair_files("toy", str(folder), 1, 0, {"plural_nouns": "Plurals"})

    def longer_is_better(reqs):  # a scorer that prefers the longer sentence
        return [float(len(t)) for _, t in reqs]

    rows = zero_shot.score_items(items, longer_is_better)
    summary = zero_shot.summarise(rows)
    assert MP.task_display("toy") == "Toy" and "Toy" in summary["overall"].columns
    by_paradigm = summary["paradigm"].set_index("paradigm")["accuracy"]
    assert by_paradigm["plural_nouns"] == 100  # the good sentence is longer in all three
    assert [r["correct"] for r in rows][1] is False  # "Grass is tall green the." is the longer one
    # the bundled supplement is itself such an entry: same items as its named loader
    assert MP.load_task("supplement", limit_per_task=2, seed=1) == MP.load_supplement(2, 1)


def test_unknown_task_errors_name_the_known_tasks(tmp_path, monkeypatch):
    for fn in (MP.load_task, MP.task_files):
        with pytest.raises(ValueError, match=r"unknown task 'glue'; choose from \('blimp', 'supplement', 'ewok'\)"):
            fn("glue")
    monkeypatch.setitem(MP.TASK_REGISTRY, "toy", MP.MinimalPairTask("Toy", lambda *a: [], lambda v: str(tmp_path)))
    with pytest.raises(ValueError, match=r"choose from \('blimp', 'supplement', 'ewok', 'toy'\)"):
        MP.load_task("glue")


def test_registry_points_at_the_bundled_folders():
    assert MP.task_files("blimp")[0].parent.name == "blimp_filtered"
    assert MP.task_files("blimp", "full")[0].parent.as_posix().endswith("blimp/data")
    assert {f.parent.name for t in ("supplement", "ewok") for f in MP.task_files(t)} == {"supplement_filtered",
                                                                                       "ewok_filtered"}
    assert len(MP.task_files("blimp")) == 67 and len(MP.task_files("supplement")) == 5
    assert len(MP.task_files("ewok")) == 11


def test_a_limit_per_task_is_one_number_or_one_per_task():
    assert MP.task_limit(30, "ewok") == 30 and MP.task_limit(None, "blimp") is None
    limits = {"blimp": 1, "supplement": 3, "ewok": None}
    assert [MP.task_limit(limits, t) for t in MP.TASKS] == [1, 3, None]
    # each task draws its own sample, the same one a plain number would draw
    assert MP.load_task("supplement", limits, seed=2) == MP.load_task("supplement", 3, seed=2)
    assert len(MP.load_task("blimp", limits)) == 67
    with pytest.raises(ValueError, match="gives no limit for 'ewok'"):  # never every pair by omission
        MP.load_task("ewok", {"blimp": 1})
    with pytest.raises(ValueError, match=r"unknown task\(s\) \['ewk'\]"):
        MP.task_limit({"ewk": 5, "blimp": 1}, "blimp")
    for bad in (0, -2, 2.5, True, "30"):
        with pytest.raises(ValueError, match="whole number >= 1 or None"):
            MP.task_limit({"blimp": bad}, "blimp")
