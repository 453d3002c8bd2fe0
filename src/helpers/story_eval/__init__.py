"""TinyStories story evaluation: GPT-Eval prompts and themed suites (suites), word folding for answer keys
(folding), TinyStoriesInstruct documents (instruct) and the real Instruct files (instruct_files)."""
