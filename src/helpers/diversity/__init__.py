"""What the generations look like: endings and loops (continuation_health), ROUGE (rouge), self-BLEU (self_bleu),
the n-gram index (ngram_index), memorisation against the training stories (memorisation)."""
