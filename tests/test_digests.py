"""helpers.core.digests: the one place a hash is computed. Digests key caches (step stamps, fingerprints, the judge's
cache, the zero-shot and fine-tuning caches), so their values must never change: the literals below were computed
by the code each digest had before it moved here (``hashlib`` calls in artifacts, zero_shot, finetune, interpret,
recipes, rubric, overrides, corpora and local_model), on small fixed inputs; a change reruns every cached result."""
import hashlib
import types
from pathlib import Path

import pytest
import torch

from helpers.core import artifacts as A
from helpers.core import digests as D
from helpers.core import overrides as O
from helpers.data import corpora as C
from helpers.data.blocks import PackedBlocks
from helpers.evaluation import zero_shot as Z
from helpers.judge import local_model, rubric as RB
from helpers.training import recipes as R


class Tiny(torch.nn.Module):
    """Fixed weights of three dtypes (float32, bfloat16, an empty int64 buffer) and a config with a JSON form."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 3)
        with torch.no_grad():
            self.lin.weight.copy_(torch.arange(6, dtype=torch.float32).view(3, 2) / 7)
            self.lin.bias.copy_(torch.tensor([0.5, -1.0, 2.25]))
        self.register_buffer("bf", (torch.arange(4, dtype=torch.float32) / 3).to(torch.bfloat16))
        self.register_buffer("empty", torch.zeros(0, 2, dtype=torch.int64))
        self.config = types.SimpleNamespace(to_json_string=lambda use_diff=True: '{"hidden": 2}')


class _Tok:
    special_tokens_map = {"eos_token": "<|endoftext|>", "pad_token": "<pad>"}

    def get_vocab(self):
        return {"a": 0, "b": 1, "<|endoftext|>": 2}


def _old_model_digest(model) -> str:
    """``evaluation.zero_shot.model_digest`` as it was, for a model whose config JSON changes with transformers."""
    h = hashlib.sha256(type(model).__name__.encode())
    cfg = getattr(model, "config", None)
    if cfg is not None and hasattr(cfg, "to_json_string"):
        h.update(cfg.to_json_string(use_diff=False).encode())
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode() + str(t.dtype).encode())
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:16]


def test_file_text_and_fingerprint_digests_are_unchanged(tmp_path):
    f = tmp_path / "f.bin"
    f.write_bytes(b"storybench\n")
    assert D.sha256_file(f) == "2f2464abec895d5725f4f20f8a99530c3aae6928f1c4238fde11da5af2b23eca"
    assert D.sha256_file(f, chunk=3) == D.sha256_file(f) == D.bytes_digest(b"storybench\n")
    assert D.text_digest("storybench\n", 16) == "2f2464abec895d57"
    assert A.fingerprint({"b": 1, "a": [1, 2.5]}, "x", Path("p/q")) == "35ce1881be205696"
    h = D.sha256_stream()
    for block in (b"story", b"bench\n"):
        h.update(block)
    assert h.hexdigest() == D.sha256_file(f)


def test_model_digests_are_unchanged(tmp_path):
    assert D.model_digest(Tiny()) == "5c7706a45c5a1bf8"
    lin = torch.nn.Linear(1, 1)
    torch.nn.init.constant_(lin.weight, 0.25)
    torch.nn.init.constant_(lin.bias, -0.5)
    assert D.model_digest(lin) == "06f39adea47e7fc0"  # no config
    assert Z.tokenizer_digest(_Tok()) == "d577c8331e81b46c"
    # a real Hugging Face model (its config JSON names the transformers version, so compared with the old code)
    from helpers.models.decoder import build_decoder
    dec = build_decoder(dict(hidden=8, layers=1, heads=2, context=16, window=8, vocab_size=11), seed=0,
                        bos_token_id=0, eos_token_id=0, pad_token_id=0)
    assert D.model_digest(dec) == _old_model_digest(dec)


def test_a_model_digest_does_not_depend_on_the_folder_it_was_loaded_from(tmp_path, monkeypatch):
    import shutil

    from helpers.models.decoder import build_decoder, load_decoder

    dec = build_decoder(dict(hidden=8, layers=1, heads=2, context=16, window=8, vocab_size=11), seed=0,
                        bos_token_id=0, eos_token_id=0, pad_token_id=0)
    dec.save_pretrained(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "moved" / "b")
    monkeypatch.chdir(tmp_path)
    loaded = [load_decoder(tmp_path / "a"), load_decoder("a"), load_decoder(tmp_path / "moved" / "b")]
    assert {m.config._name_or_path for m in loaded} == {str(tmp_path / "a"), "a", str(tmp_path / "moved" / "b")}
    assert len({D.model_digest(m) for m in loaded}) == 1
    assert len({_old_model_digest(m) for m in loaded}) == 3  # the old digest named the folder
    other = build_decoder(dict(hidden=8, layers=1, heads=2, context=16, window=8, vocab_size=11), seed=1,
                          bos_token_id=0, eos_token_id=0, pad_token_id=0)
    other.save_pretrained(tmp_path / "c")
    assert D.model_digest(load_decoder(tmp_path / "c")) != D.model_digest(loaded[0])  # other weights still count


def test_model_folder_digests_are_unchanged(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "config.json").write_text('{"a": 1}')
    (tmp_path / "other.txt").write_text("not part of it")
    want = {"model.safetensors": "9a129038d9a00aed0cf6a7ea059ca50a813449061ab87848cf1a13eafdf33b2c",
            "config.json": "f9d86028c6e0d64e225186f96acb69338b2c59764df79162107f5c4bb34d1310"}
    got = D.model_files_digest(tmp_path)
    assert got == want and list(got) == list(want)  # fine-tuning's and the interpretation's cache keys
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="no model weights"):
        D.model_files_digest(tmp_path)


def test_keys_of_caches_and_runs_are_unchanged(tmp_path):
    assert R.blocks_digest(PackedBlocks(torch.arange(8).view(2, 4))) == "fece8d601cd4c902"
    coins = [Z.tie_coin(s, "blimp", "p", str(i)) for s in (0, 1) for i in range(8)]
    assert coins == [False, False, True, True, False, True, False, False,
                     False, True, True, False, True, True, True, False]
    assert RB.protocol_version(None, "story") == "ef21bc1257"
    assert RB.protocol_version(types.SimpleNamespace(two_turn=False, backend="remote"), "instruct") == "3b6d038952"
    assert RB.protocol_version(types.SimpleNamespace(backend="local", gguf_file="x.gguf"), "story") == "ad6e91d533"

    class Judge(RB._CachedJudge):
        cfg = types.SimpleNamespace(model="judge-x", two_turn=True, backend="remote")

    assert Judge().cache_key("Once upon", "a time é", "story") == \
        "7e6f35d91c576022fc62e1dea80c6fa5ee80f281f380caab9be2b76b009028f6"
    assert O.variant_id("cpu", {"02": {"train.lr": 0.001}}) == "cpu-e6b3e10d"


def test_a_story_file_is_hashed_in_the_pass_that_indexes_it(tmp_path):
    f = tmp_path / "s.txt"
    f.write_bytes("One day.<|endoftext|>Tim ran.<|endoftext|>".encode())
    C.index_story_file(f, chunk_bytes=7)
    assert C._LOADED[str(C.resolve(f))] == D.sha256_file(f) == \
        "e0757ddfa41c243faf1b1518cd6fa1fb73e3edab9d16b1345ffe7046d4acc25c"


def test_the_judge_model_check_uses_the_file_digest(tmp_path, monkeypatch):
    f = tmp_path / local_model.GGUF_NAME
    f.write_bytes(b"gguf")
    monkeypatch.setattr(local_model, "GGUF_SIZE", 4)
    monkeypatch.setattr(local_model, "GGUF_SHA256", D.sha256_file(f))
    assert local_model.gguf_problem(f) is None
    f.write_bytes(b"ggux")
    assert "SHA-256 differs" in local_model.gguf_problem(f)
