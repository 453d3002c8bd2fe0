"""Looking inside and across models: the word-class lexicon (lexicon), attention heads and MLP neurons (interpret,
interpret_tables), training memory (memory), the width/depth/heads, contrastive and compressor studies (architecture)."""
