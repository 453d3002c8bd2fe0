"""Architectures only, Hugging Face compatible: the GPT-Neo decoders (decoder), LTG-BERT encoders (ltg_bert), the
memory-saving compressor model (compressor)."""
