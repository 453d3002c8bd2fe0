"""Notebook 02b's table rows (``docs/methods.md#architecture-sweeps``, ``#contrastive``): a model's BLiMP score with
its 95 % interval (:func:`blimp_columns`), one row of the plain-vs-contrastive comparison (:func:`contrastive_row`:
losses, order preference, BLiMP, training-loss spikes) and one row of the compressor-vs-GPT-Neo loss table
(:func:`compressor_row`). The measurements themselves are :mod:`helpers.analysis.architecture`,
:mod:`helpers.evaluation.zero_shot` and :mod:`helpers.models.compressor`; the sentences about these tables are
:mod:`helpers.report.architecture_findings`."""
from __future__ import annotations

from typing import Any, Mapping

from helpers.analysis.architecture import loss_spikes
from helpers.models.compressor import predicted_token_loss
from helpers.models.decoder import count_parameters


def blimp_columns(result) -> dict[str, float]:
    """``BLiMP`` (the overall score, %) and its 95 % interval (``BLiMP CI low``, ``BLiMP CI high``: the ``blimp``
    row of the task table) of a :class:`helpers.evaluation.zero_shot.EvalResult` of the BLiMP task."""
    b = result.by_task.set_index("task").loc["blimp"]
    return {"BLiMP": float(result.overall["BLiMP"].iloc[0]), "BLiMP CI low": b.ci_low, "BLiMP CI high": b.ci_high}


def contrastive_row(label: str, run: str, res, order: Mapping[str, Any], blimp: Mapping[str, float]) -> dict[str, Any]:
    """One row of the plain-vs-contrastive table: the model's ``label`` and ``run`` name, its best and final held-out
    loss (``res``: a training result with ``history``), its order preference (%, with its Wilson interval and the
    raw counts: :func:`helpers.analysis.architecture.order_preference`), its BLiMP columns (:func:`blimp_columns`)
    and how many training losses were logged and how many of them spike
    (:func:`helpers.analysis.architecture.loss_spikes`: ValueError when too few were logged to hold a spike)."""
    spikes = loss_spikes(res.history)
    return {"model": label, "run": run, "best valid loss": res.best_valid_loss,
            "final valid loss": res.final_valid_loss, "held-out loss, original order": order["loss_original"],
            "held-out loss, shuffled": order["loss_shuffled"], "prefers original (%)": 100 * order["prefers_original"],
            "prefers CI low": 100 * order["ci_low"], "prefers CI high": 100 * order["ci_high"],
            "order wins": order["wins"], "order ties": order["ties"], "order losses": order["losses"],
            **blimp, "train-loss points": sum(r["split"] == "train" for r in res.history), "train-loss spikes": len(spikes)}


def compressor_row(label: str, model, valid_data, batch_size: int, seconds: float, trained: str) -> dict[str, Any]:
    """One row of the compressor-vs-GPT-Neo table: the model's parameters, its held-out loss on the tokens both
    models predict (:func:`helpers.models.compressor.predicted_token_loss`, positions 2..T-1), its training minutes
    and how it was ``trained`` (alone, or in the sweep beside other runs: minutes measured under different
    parallelism are not a speed comparison)."""
    return {"model": label, "parameters": count_parameters(model),
            "held-out loss, tokens 2..T-1": predicted_token_loss(model, valid_data, batch_size),
            "minutes": seconds / 60, "trained": trained}
