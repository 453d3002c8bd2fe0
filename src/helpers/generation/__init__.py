"""Generating stories: the one next-token rule for every model (decoding), prompts, completions and D_gen (completions)."""
