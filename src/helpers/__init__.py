"""storybench helpers: one module per pipeline stage.

Data flows one way (``tests/test_project.py`` holds the full order; the README's "Where things live" says what each
module holds):
    config/hardware/progress/parallel/artifacts/stats -> data -> budgets -> tokenizers -> decoder/ltg_bert
    -> training -> recipes -> generation -> compressor/memory
    -> continuation_health/rouge/self_bleu/ngram_index/memorisation -> generation_views
    -> minimal_pairs -> lm_scoring -> evaluation -> glue_tasks -> finetune_setup -> classifier -> finetune
    -> judge* -> story_eval/instruct -> story_views -> lexicon -> interpret -> interpret_tables/interpret_views -> architecture
    -> reporting -> notebook -> findings -> runner
"""
__version__ = "0.1.0"

from .progress import silence_headless_warnings as _silence

_silence()  # under the runner: no "IProgress not found" warning in executed notebooks
