"""Architectures only, Hugging Face compatible: the GPT-Neo decoders (decoder), LTG-BERT encoders (ltg_bert), the
memory-saving compressor model (compressor), and the registry of the causal LMs by name (registry: config, build,
load, decoding loop), through which generation and scoring treat GPT-Neo and the compressor alike."""
