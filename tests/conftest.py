"""Shared fixtures: real stories from the bundled data, small tokenizers, one torch thread, a scratch project root
(:func:`repo`, with :func:`edit_params` to change its smoke params)."""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def real_stories() -> list[str]:
    from helpers.data.corpora import load_tinystories

    return load_tinystories("tinystories/v1_train_prefix_2MiB.txt.gz").stories[:400]


@pytest.fixture(scope="session")
def decoder_tokenizer(real_stories):
    from helpers.data.tokenizers import train_tokenizer

    return train_tokenizer(real_stories, "decoder", 1024)


@pytest.fixture(scope="session")
def encoder_tokenizer(real_stories):
    from helpers.data.tokenizers import train_tokenizer

    return train_tokenizer(real_stories, "encoder", 1024)


@pytest.fixture(autouse=True, scope="session")
def _threads():
    try:
        import torch

        torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    except ImportError:
        pass


@pytest.fixture
def one_thread():
    """One torch intra-op thread for the test (tiny models: one thread is fastest, and two collide with other jobs
    on a shared 2-core machine, where OpenMP threads waiting on each other make small ops up to 10× slower).
    Use it per file with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A scratch project root holding copies of notebooks 01, 02 and 05b and their smoke params (the runner and the
    params checks read it through ``STORYBENCH_ROOT``; runs and reports go to ``tmp_path``)."""
    root = tmp_path / "repo"
    (root / "params" / "smoke").mkdir(parents=True)
    (root / "notebooks").mkdir()
    (root / "pyproject.toml").write_text("")
    for nb in ("01_data_budgets", "02_decoder_training", "05b_story_evaluation"):
        (root / "notebooks" / f"{nb}.ipynb").write_bytes((REPO / "notebooks" / f"{nb}.ipynb").read_bytes())
        (root / "params" / "smoke" / f"{nb}.yaml").write_bytes((REPO / "params" / "smoke" / f"{nb}.yaml").read_bytes())
    monkeypatch.setenv("STORYBENCH_ROOT", str(root))
    monkeypatch.setenv("STORYBENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("STORYBENCH_REPORTS", str(tmp_path / "reports"))
    return root


def edit_params(root: Path, nb: str, text_from: str, text_to: str) -> Path:
    """Replace ``text_from`` (which must occur) by ``text_to`` in the scratch repo's smoke params of ``nb``."""
    f = next((root / "params" / "smoke").glob(f"{nb}_*.yaml"))
    text = f.read_text()
    assert text_from in text
    f.write_text(text.replace(text_from, text_to))
    return f
