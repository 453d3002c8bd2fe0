"""Text in, token ids out: the bundled corpora and the one sentence splitter (corpora), word budgets and the
challenge rule (budgets), tokenizers and every text->ids encoding (tokenizers), MLM masking (masking)."""
