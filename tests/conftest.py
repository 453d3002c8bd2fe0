"""Shared fixtures: real stories from the bundled data, small tokenizers, one torch thread."""
from __future__ import annotations

import gzip
import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


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
