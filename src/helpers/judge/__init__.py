"""The LLM judge of story completions: rubric, prompts, parsing and cache (rubric), the OpenAI-compatible client
(client), the bundled local judge (local), running it from a notebook (runs), its validity check (validity)."""
