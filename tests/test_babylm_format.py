"""The export formats' rules (helpers.evaluation.babylm_format): the BabyLM 2024 pipeline's ``verify_dict`` on a whole
submission built from the bundled data files, each rule broken once, and lm-eval 0.4's results schema."""
from __future__ import annotations

import copy
import re

import pytest

from helpers.data.corpora import read_jsonl_rows
from helpers.evaluation import babylm_format as BF

# the pipeline's collect_results.TEXT_TASKS (BLiMP: the stems of its blimp_filtered folder, 67 files)
SUPPLEMENT = ["hypernym", "qa_congruence_easy", "qa_congruence_tricky", "subject_aux_inversion", "turn_taking"]
EWOK = ["agent-properties", "material-dynamics", "material-properties", "physical-dynamics", "physical-interactions",
        "physical-relations", "quantitative-properties", "social-interactions", "social-properties",
        "social-relations", "spatial-relations"]
GLUE = ["cola", "sst2", "mrpc", "qqp", "mnli", "mnli-mm", "qnli", "rte", "boolq", "multirc", "wsc"]


@pytest.fixture(scope="module")
def submission() -> dict:
    """A whole text-only submission: every line of every bundled file, the good sentence (EWoK: Target1) after one
    space, GLUE label 0, ids ``<subtask>_<line>``."""
    out: dict = {}
    for group in BF.TEXT_GROUPS:
        out[group] = {}
        for sub, path in BF.submission_files(group).items():
            rows = read_jsonl_rows(path)
            pred = (lambda r: 0) if group == "glue" else (
                (lambda r: " " + r["Target1"]) if group == "ewok" else (lambda r: " " + r["sentence_good"]))
            out[group][sub] = {"predictions": [{"id": f"{sub}_{i}", "pred": pred(r)} for i, r in enumerate(rows)]}
    return out


def test_the_subtasks_are_the_pipelines(submission):
    assert sorted(BF.submission_files("blimp_supplement")) == SUPPLEMENT
    assert sorted(BF.submission_files("ewok")) == EWOK
    assert sorted(BF.submission_files("glue")) == sorted(GLUE) and len(BF.submission_files("blimp")) == 67
    assert "adjunct_island" in BF.submission_files("blimp") and BF.submission_files("nonsense") == {}
    assert sum(len(s["predictions"]) for s in submission["blimp"].values()) == 59_875  # minimal_pairs' counts
    assert sum(len(s["predictions"]) for s in submission["blimp_supplement"].values()) == 5_218
    assert sum(len(s["predictions"]) for s in submission["ewok"].values()) == 7_618


def test_a_whole_submission_passes_and_each_broken_rule_is_named(submission):
    BF.verify_predictions(submission, BF.TEXT_GROUPS)
    BF.verify_predictions({g: submission[g] for g in BF.ZERO_SHOT_GROUPS})  # what an export writes

    def broken(edit, group: str | None = None, sub: str | None = None) -> str:
        """The message for ``submission`` after ``edit`` (which changes only ``group``/``sub``, copied first)."""
        bad = dict(submission)
        if group:
            bad[group] = dict(bad[group])
            if sub:
                bad[group][sub] = copy.deepcopy(bad[group][sub])
        edit(bad)
        with pytest.raises(ValueError) as e:
            BF.verify_predictions(bad, BF.TEXT_GROUPS)
        return str(e.value)

    # the names our export used before: the pipeline stops at "Error: blimp not present."
    assert "blimp not present" in broken(lambda d: d.update(blimp_filtered=d.pop("blimp")))
    assert "blimp_filtered: no such group" in broken(lambda d: d.update(blimp_filtered=d.pop("blimp")))
    assert "glue not present" in broken(lambda d: d.pop("glue"))
    assert "adjunct_island not present under blimp" in broken(lambda d: d["blimp"].pop("adjunct_island"), "blimp")
    assert "no data file" in broken(lambda d: d["blimp"].update(
        blimp_adjunct_island_filtered=d["blimp"].pop("adjunct_island")), "blimp")
    assert "blimp_full: no such group" in broken(lambda d: d.update(blimp_full={}))
    assert "examples missing (1 predictions, 2210 lines" in broken(
        lambda d: d["ewok"]["agent-properties"]["predictions"].__delitem__(slice(1, None)), "ewok", "agent-properties")
    assert "examples missing" in broken(lambda d: d["blimp_supplement"]["hypernym"]["predictions"].pop(),
                                        "blimp_supplement", "hypernym")
    assert "no list of predictions" in broken(lambda d: d["ewok"]["agent-properties"].update(predictions=[]),
                                              "ewok", "agent-properties")
    assert "should be strs" in broken(lambda d: d["blimp"]["passive_1"]["predictions"][-1].update(pred=1),
                                      "blimp", "passive_1")
    assert "should be ints" in broken(lambda d: d["glue"]["rte"]["predictions"][3].update(pred="1"), "glue", "rte")
    assert "should be ints" in broken(lambda d: d["glue"]["rte"]["predictions"][3].update(pred=True), "glue", "rte")
    assert "exactly {'id', 'pred'}" in broken(lambda d: d["ewok"]["social-relations"]["predictions"][0].update(x=1),
                                              "ewok", "social-relations")
    assert "is not turn_taking_<index>" in broken(lambda d: d["blimp_supplement"]["turn_taking"]["predictions"][0]
                                                  .update(id="turn_taking-0"), "blimp_supplement", "turn_taking")
    assert "in file order" in broken(lambda d: d["blimp_supplement"]["turn_taking"]["predictions"].reverse(),
                                     "blimp_supplement", "turn_taking")


def test_a_sample_needs_distinct_lines_in_order_but_not_every_line(submission):
    sample = {g: {s: {"predictions": b["predictions"][1::7]} for s, b in subs.items()}
              for g, subs in submission.items() if g != "glue"}
    BF.verify_predictions(sample, complete=False)
    with pytest.raises(ValueError, match="examples missing"):
        BF.verify_predictions(sample)
    p = sample["ewok"]["agent-properties"]["predictions"]
    p[1] = dict(p[0])
    with pytest.raises(ValueError, match="distinct lines"):
        BF.verify_predictions(sample, complete=False)
    p[1] = {"id": f"agent-properties_{10 ** 6}", "pred": " x"}  # past the end of the file
    with pytest.raises(ValueError, match="distinct lines"):
        BF.verify_predictions(sample, complete=False)


def test_names_are_the_pipelines_lm_eval_tasks():
    assert BF.lm_eval_task("blimp", "adjunct_island") == "blimp_adjunct_island_filtered"
    assert BF.lm_eval_task("blimp", "adjunct_island", "full") == "blimp_adjunct_island"
    assert BF.lm_eval_task("supplement", "hypernym") == "blimp_supplement_hypernym"
    assert BF.lm_eval_task("ewok", "agent-properties") == "ewok_agent-properties_filtered"
    assert [BF.lm_eval_group(t) for t in ("blimp", "supplement", "ewok")] == ["blimp_filtered", "blimp_supplement",
                                                                             "ewok_filtered"]
    assert [BF.submission_group(t) for t in ("blimp", "supplement", "ewok")] == ["blimp", "blimp_supplement", "ewok"]
    assert BF.submission_group("blimp", "full") == "blimp_full"


def _results() -> dict:
    """A small results dict in lm-eval 0.4's shape (one group of two tasks)."""
    tasks = ["blimp_supplement_hypernym", "blimp_supplement_turn_taking"]
    res = {t: {"alias": f" - {t}", "acc,none": 0.5 + 0.1 * i, "acc_stderr,none": 0.01} for i, t in enumerate(tasks)}
    res["blimp_supplement"] = {"alias": "blimp_supplement", "acc,none": 0.55, "acc_stderr,none": 0.007}
    names = list(res)
    return {"results": res, "groups": {"blimp_supplement": dict(res["blimp_supplement"])},
            "group_subtasks": {"blimp_supplement": tasks},
            "configs": {t: {"task": t, "output_type": "multiple_choice", "num_fewshot": 0,
                            "metric_list": [{"metric": "acc"}]} for t in tasks},
            "versions": {n: 1.0 for n in names}, "n-shot": {n: 0 for n in names},
            "higher_is_better": {n: {"acc": True} for n in names},
            "n-samples": {t: {"original": 800, "effective": 800} for t in tasks},
            "config": {"model": "m", "model_args": "pretrained=x", "batch_size": 1, "limit": None},
            "git_hash": "abc", "date": 0.0}


@pytest.mark.parametrize("edit, message", [
    (lambda r: r.pop("n-shot"), "missing key"),  # lm-eval 0.4.2's make_table: KeyError: 'n-shot'
    (lambda r: r["n-shot"].pop("blimp_supplement_hypernym"), "n-shot has no number"),
    (lambda r: r["versions"].pop("blimp_supplement"), "versions has no entry"),
    (lambda r: r["results"]["blimp_supplement_hypernym"].update({"acc,none": "0.5"}), "is not a number"),
    (lambda r: r["results"]["blimp_supplement_hypernym"].update({"ties": 3}), "is not '<metric>,<filter>'"),
    (lambda r: r["results"]["blimp_supplement_hypernym"].update({"acc_stderr,none": float("nan")}),
     "neither a finite number nor 'N/A'"),
    (lambda r: r["results"]["blimp_supplement_hypernym"].update({"f1_stderr,none": 0.1}), "without its metric"),
    (lambda r: r["higher_is_better"]["blimp_supplement"].pop("acc"), "does not say for 'acc'"),
    (lambda r: r["group_subtasks"]["blimp_supplement"].append("ewok_x_filtered"), "which results lacks"),
    (lambda r: r["group_subtasks"]["blimp_supplement"].pop(), "neither a group nor in one"),
    (lambda r: r["configs"]["blimp_supplement_hypernym"].update(task="hypernym"), "names another task"),
    (lambda r: r["configs"]["blimp_supplement_hypernym"].update(num_fewshot=5), "differs from n-shot"),
    (lambda r: r["n-samples"]["blimp_supplement_hypernym"].update(effective=801), "effective <= original"),
    (lambda r: r["config"].pop("model_args"), "config has no 'model_args'"),
    (lambda r: r["groups"]["blimp_supplement"].update(alias=3), "alias is not a string"),
])
def test_results_departing_from_lm_evals_schema_are_named(edit, message):
    BF.verify_results(_results())
    res = _results()
    edit(res)
    with pytest.raises(ValueError, match="not an lm-eval results dict: .*" + re.escape(message)):
        BF.verify_results(res)


def test_stderr_may_be_na_as_lm_eval_writes_it():
    res = _results()
    res["results"]["blimp_supplement_hypernym"]["acc_stderr,none"] = "N/A"
    res["results"]["blimp_supplement"]["acc_stderr,none"] = "N/A"
    BF.verify_results(res)
