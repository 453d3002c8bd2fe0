"""Sizes checked before training (helpers.training.sizes): a batch larger than the data, a micro-batch beyond memory."""
import pytest

from helpers.training import sizes

MODEL = {"hidden": 128, "layers": 4, "heads": 4, "context": 256}


def test_a_batch_larger_than_the_blocks_is_refused():
    sizes.check_batch("tiny-125k", 16, 1_000)
    with pytest.raises(sizes.SizeError, match=r"train.batch_size = 1,000,000,000 is larger than its 1,000 training blocks"):
        sizes.check_batch("tiny-125k", 1_000_000_000, 1_000)


def test_a_micro_batch_beyond_memory_is_refused_with_what_fits():
    one = sizes.activation_bytes(1, 256, 128, 4, 4, 4096, 1_300_000)
    assert sizes.activation_bytes(16, 256, 128, 4, 4, 4096, 1_300_000) > 15 * (one - 1_300_000 * 16)
    sizes.check_memory("d", 16, MODEL, 4096, 1_300_000, 24 * 2**30)  # the cpu profile's step fits 24 GiB
    sizes.check_memory("d", 10**9, MODEL, 4096, 1_300_000, None)  # memory unknown: nothing refused
    with pytest.raises(sizes.SizeError, match=r"set train.micro_batch to at most ~\d"):
        sizes.check_memory("d", 1_000_000, MODEL, 4096, 1_300_000, 24 * 2**30)
    # the estimate is an upper bound of the right order: the cpu decoder's step of 16 x 256 tokens is < 1 GiB
    assert sizes.activation_bytes(16, 256, 128, 4, 4, 4096, 1_300_000) < 2**30


def test_a_planned_decoder_run_is_checked_with_its_spec():
    from helpers.models.decoder import DecoderSpec

    spec = DecoderSpec(hidden=32, layers=2, heads=2, context=64, window=32, vocab_size=500)
    sizes.check_sizes("tiny", 16, 8, 100, spec)
    with pytest.raises(sizes.SizeError, match="larger than its 100 training blocks"):
        sizes.check_sizes("tiny", 1_000_000_000, 16, 100, spec)
    with pytest.raises(sizes.SizeError, match="GiB"):
        sizes.check_sizes("tiny", 2**40, None, 2**41, spec)  # no micro-batch: the whole batch in one step
