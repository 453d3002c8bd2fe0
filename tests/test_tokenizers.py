import pytest

from helpers.data import tokenizers as tk


def test_decoder_specials_and_roundtrip(decoder_tokenizer, real_stories):
    tok = decoder_tokenizer
    assert tok.convert_ids_to_tokens([0, 1]) == ["[UNK]", "<|endoftext|>"]
    assert tok.bos_token_id == tok.eos_token_id == tok.pad_token_id == 1
    for s in real_stories[:200] + ['He said, "I have 12 apples!"  Two  spaces.\n\nNew para — café, naïve ☺']:
        assert tk.round_trip_ok(tok, s), s


def test_digits_split(decoder_tokenizer):
    toks = decoder_tokenizer.convert_ids_to_tokens(decoder_tokenizer("in 2024")["input_ids"])
    assert toks[-4:] == ["2", "0", "2", "4"]


def test_encoder_specials(encoder_tokenizer):
    tok = encoder_tokenizer
    assert tok.convert_ids_to_tokens(list(range(6))) == ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "[PAR]"]
    ids = tok("Hello there")["input_ids"]
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    assert tok.convert_tokens_to_ids("[PAR]") == 5 and tok("a [PAR] b", add_special_tokens=False)["input_ids"].count(5) == 1


def test_save_load(tmp_path, decoder_tokenizer):
    decoder_tokenizer.save_pretrained(tmp_path)
    again = tk.load_tokenizer(tmp_path)
    assert again("Once upon a time")["input_ids"] == decoder_tokenizer("Once upon a time")["input_ids"]
    with pytest.raises(FileNotFoundError):
        tk.load_tokenizer(tmp_path / "nope")


def test_encode_stories_appends_eot(decoder_tokenizer):
    ids = tk.encode_stories(decoder_tokenizer, ["a b", "c"])
    assert all(x[-1] == 1 for x in ids)


def test_story_ids_stream_in_batches_with_the_ids_of_one_call(decoder_tokenizer, encoder_tokenizer):
    """A corpus is tokenised batch by batch and packed as it streams: the ids, and so the blocks and their digest
    (a finished run's fingerprint), are those of tokenising every story in one call."""
    import types

    from helpers.data.blocks import pack_blocks
    from helpers.data.masking import TokenIds, pack_encoder_blocks

    stories = [f"Once upon a time {i} cats sat." * (1 + i % 3) for i in range(23)] + [""]
    whole = [x + [1] for x in decoder_tokenizer(stories, add_special_tokens=False)["input_ids"]]
    for size in (1, 5, 24, 100):
        streamed = tk.iter_story_ids(decoder_tokenizer, iter(stories), batch_size=size)
        assert isinstance(streamed, types.GeneratorType)
        assert list(streamed) == whole
    assert tk.encode_stories(decoder_tokenizer, stories) == whole
    assert pack_blocks(tk.iter_story_ids(decoder_tokenizer, stories, batch_size=3), 8).equal(pack_blocks(whole, 8))
    tok = TokenIds.from_tokenizer(encoder_tokenizer)
    plain = encoder_tokenizer(stories, add_special_tokens=False)["input_ids"]
    assert pack_encoder_blocks(tk.iter_story_ids(encoder_tokenizer, stories, add_eot=False, batch_size=4), 8, tok.cls_id,
                               tok.sep_id).equal(pack_encoder_blocks(plain, 8, tok.cls_id, tok.sep_id))
    with pytest.raises(ValueError, match="batch_size"):
        list(tk.iter_story_ids(decoder_tokenizer, stories, batch_size=0))


def test_end_of_text_id(decoder_tokenizer, encoder_tokenizer):
    assert tk.end_of_text_id(decoder_tokenizer) == 1
    with pytest.raises(ValueError, match="no <\\|endoftext\\|> token"):
        tk.end_of_text_id(encoder_tokenizer)  # an encoder tokenizer has none
    with pytest.raises(ValueError, match="no <\\|endoftext\\|> token"):
        tk.encode_stories(encoder_tokenizer, ["a b"])
    # a start token where only one is needed: BOS, else EOS, and still an error when there is neither
    other = encoder_tokenizer.bos_token_id if encoder_tokenizer.bos_token_id is not None else encoder_tokenizer.eos_token_id
    if other is None:
        with pytest.raises(ValueError):
            tk.end_of_text_id(encoder_tokenizer, fallback=True)
    else:
        assert tk.end_of_text_id(encoder_tokenizer, fallback=True) == other

    class NoEot:  # a tokenizer whose <|endoftext|> is unknown, with only an EOS
        unk_token_id, bos_token_id, eos_token_id = 0, None, 7

        def convert_tokens_to_ids(self, token):
            return self.unk_token_id

    assert tk.end_of_text_id(NoEot(), fallback=True) == 7
    with pytest.raises(ValueError):
        tk.end_of_text_id(NoEot())


def test_bad_input():
    with pytest.raises(ValueError, match="empty corpus"):
        tk.train_tokenizer(["", "  "], "decoder", 300)
    with pytest.raises(ValueError, match="kind"):
        tk.train_tokenizer(["a"], "both", 300)
    assert tk.default_vocab_size(10_000_000) == 6_144 and tk.default_vocab_size(10_000_001) == 16_384


def test_a_tokenizer_saved_with_a_model_knows_its_context(decoder_tokenizer, tmp_path):
    """model_max_length = the model's context in the saved folder (not ~1e30), the caller's tokenizer untouched."""
    import json

    before = decoder_tokenizer.model_max_length
    tk.save_for_model(decoder_tokenizer, tmp_path, 256)
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["model_max_length"] == 256
    assert decoder_tokenizer.model_max_length == before
