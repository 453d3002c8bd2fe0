"""The model card (``README.md``) written into every best checkpoint folder next to the weights: what the model is,
how to load it with the Auto classes, what it was trained on and with which recipe, its best validation loss and
the project revision that trained it, so a folder copied elsewhere still says what it holds."""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCardData  # the Hub's own writer of the front matter

from helpers.core.config import repo_root
from helpers.core.digests import source_digest

#: the packages whose source a trained model's ``code_digest`` covers (what builds, feeds and trains it)
TRAINING_CODE = ("training", "models", "data")


@functools.lru_cache(maxsize=1)
def revision() -> str:
    """The git revision of the checkout (``+dirty`` with uncommitted changes outside ``reports/``), or ``unknown``
    outside git."""
    try:
        root = repo_root()
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True,
                             check=True, timeout=10).stdout.strip()
        # reports/ is what a run writes (a notebook run in JupyterLab rewrites reports/cpu): not a change of the code
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)reports"],
                               cwd=root, capture_output=True, text=True, check=True, timeout=10).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """The digest of the code that trains a model: :func:`helpers.core.digests.source_digest` of the ``.py`` files
    of the ``helpers`` packages :data:`TRAINING_CODE` (16 hex digits)."""
    helpers = Path(__file__).resolve().parents[1]
    return source_digest(helpers / name for name in TRAINING_CODE)


def provenance() -> dict[str, str]:
    """What a trained model's sidecar records about the code that trained it: ``revision`` (:func:`revision`) and
    ``code_digest`` (:func:`code_digest`)."""
    return {"revision": revision(), "code_digest": code_digest()}


def _loader(config: Any) -> str:
    arch = (getattr(config, "architectures", None) or [""])[0]
    if "MaskedLM" in arch:
        return ("from transformers import AutoModelForMaskedLM, PreTrainedTokenizerFast\n"
                "model = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True)  # LTG-BERT's code is in the folder\n"
                "tokenizer = PreTrainedTokenizerFast.from_pretrained(folder)  # AutoTokenizer reads config.json and asks for\n"
                "# remote code too (transformers 5 loads the model's config first): pass trust_remote_code=True to it")
    return ("from transformers import AutoModelForCausalLM, AutoTokenizer\n"
            "model = AutoModelForCausalLM.from_pretrained(folder)\ntokenizer = AutoTokenizer.from_pretrained(folder)")


def run_corpus(name: str) -> tuple[str, int | None]:
    """The corpus (a TinyStories budget for a decoder, a mix for an encoder) and training seed a run's folder name
    says: ``"tiny-1M (seed 7)"`` -> ``("tiny-1M", 7)``, ``"tiny-1M"`` -> ``("tiny-1M", None)`` (the profile's
    ``train.seed``)."""
    m = re.match(r"^(?P<corpus>.+?)(?: \(plain\))?(?: \(seed (?P<seed>\d+)\))?$", name)
    return m.group("corpus"), (int(m.group("seed")) if m.group("seed") else None)


def _front_matter(config: Any, name: str, metrics: list[tuple[str, str, float]], what: str) -> str:
    """The Hub model card's YAML header (``huggingface_hub.ModelCardData``): licence, language, library, datasets,
    tags, pipeline and a ``model-index`` with ``metrics`` as ``(metric type, metric name, value)`` on the run's
    held-out data."""
    masked = "MaskedLM" in ((getattr(config, "architectures", None) or [""])[0])
    corpus, _ = run_corpus(name)
    datasets = ["roneneldan/TinyStories"] + (["babylm"] if masked or "baby" in corpus else [])
    task = "fill-mask" if masked else "text-generation"
    results = [EvalResult(task_type=task, dataset_type="storybench-heldout", dataset_name=f"held-out blocks of {corpus}",
                          metric_type=mtype, metric_name=mname, metric_value=round(float(value), 6))
               for mtype, mname, value in metrics if math.isfinite(float(value))]
    data = ModelCardData(language="en", license="other", license_name="mixed-data-licences",  # data/SOURCES.md
                         library_name="transformers", pipeline_tag=task, datasets=datasets,
                         tags=["storybench", "babylm", "tinystories", config.model_type, what],
                         model_name=name if results else None, eval_results=results or None)
    return "---\n" + data.to_yaml() + "\n---\n"


def _facts(name: str, seed: int, what: str, extra: dict | None) -> list[str]:
    corpus, _ = run_corpus(name)
    prov = provenance()
    lines = [f"- budget / corpus: `{corpus}`; training seed: {seed}; what it is: {what}",
             f"- trained at revision `{prov['revision']}`, training code digest `{prov['code_digest']}`"]
    digests = {k: v for k, v in (extra or {}).items() if "sha" in k or "digest" in k}
    if digests:
        lines.append(f"- data digests: {json.dumps(digests, default=str)}")
    return lines


def model_card(model: Any, name: str, step: int, valid_loss: float, cfg: Any, extra: dict | None = None) -> str:
    """Markdown for the best checkpoint of run ``name`` (the run folder's name: a budget such as ``tiny-1M`` or an
    encoder mix), at optimizer ``step`` with validation loss ``valid_loss`` (nats per token), trained with ``cfg``
    (a :class:`~helpers.training.loop.TrainConfig`) and ``extra`` (what the run stored beside it, e.g. the model's
    spec or the mix's corpora). It opens with the Hub's YAML front matter (``huggingface_hub.ModelCard.load``
    parses it): licence, language, library, datasets, tags and a ``model-index`` holding the validation loss."""
    config = model.config
    n_params = sum(p.numel() for p in model.parameters())
    recipe = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else dict(cfg)
    what = "plain next-token training" if "MaskedLM" not in str(getattr(config, "architectures", "")) else \
        "masked-language-model pretraining"
    lines = [
        _front_matter(config, name, [("loss", "validation loss (nats per token)", valid_loss)], "pretrained"),
        f"# {name}",
        "",
        f"A `{config.model_type}` model ({n_params:,} parameters) trained by storybench, revision `{revision()}`: "
        f"run `{name}` (a TinyStories budget for a decoder, a corpus mix for an encoder; the notebook that trained it "
        "records its data files with their SHA-256 in `reports/<profile>/manifest.json`).",
        "",
        "```python",
        "folder = \"path/to/this/folder\"",
        _loader(config),
        "```",
        "",
        *_facts(name, int(recipe.get("seed", 0)), what, extra),
        f"- best checkpoint: step {int(step):,} of {int(recipe.get('steps', 0)):,}, validation loss {valid_loss:.4f} nats "
        "per token on the run's held-out blocks",
        f"- recipe: {json.dumps(recipe, default=str)}",
    ]
    if extra:
        lines.append(f"- run: {json.dumps(extra, default=str)}")
    lines += ["", "Methods, data and their licences: the storybench repository (`docs/methods.md`, `data/SOURCES.md`).", ""]
    return "\n".join(lines)


def finetuned_card(model: Any, name: str, seed: int, chosen_step: int, steps: int, before: dict, after: dict,
                   config: dict) -> str:
    """The card of a repetition fine-tuned decoder (``<decoder>/best`` after notebook 02's unlikelihood phase):
    what it was fine-tuned from (``mle-best/``, whose own card describes the plain model), the kept step, the
    probe before and after (healthy, loops, ended, held-out loss) and the phase's config; the same front matter
    as :func:`model_card`, its metrics the held-out loss and the probe's healthy share after fine-tuning."""
    what = "repetition fine-tuned (sequence-level unlikelihood) from the plain model in ../mle-best"
    metrics = [("loss", "validation loss (nats per token)", after.get("valid loss", float("nan"))),
               ("accuracy", "healthy greedy continuations (ended, no loop), probe share",
                after.get("healthy", float("nan")))]
    n_params = sum(p.numel() for p in model.parameters())
    probe = lambda d: ", ".join(f"{k} {v:.3f}" for k, v in d.items() if isinstance(v, (int, float)))  # noqa: E731
    lines = [
        _front_matter(model.config, name, metrics, "repetition-finetuned"),
        f"# {name} (repetition fine-tuned)",
        "",
        f"A `{model.config.model_type}` model ({n_params:,} parameters): the plain decoder of run `{name}` "
        "(its card and weights are in `../mle-best/`) fine-tuned by sequence-level unlikelihood on its own greedy "
        "rollouts (Welleck et al. 2020), the checkpoint with the healthiest held-out probe kept.",
        "",
        "```python",
        "folder = \"path/to/this/folder\"",
        _loader(model.config),
        "```",
        "",
        *_facts(name, seed, what, None),
        f"- kept step {int(chosen_step):,} of {int(steps):,}; probe before: {probe(before)}; after: {probe(after)}",
        f"- phase config: {json.dumps(config, default=str)}",
        "",
        "Methods, data and their licences: the storybench repository (`docs/methods.md`, `data/SOURCES.md`).",
        "",
    ]
    return "\n".join(lines)
