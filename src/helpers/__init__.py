"""storybench helpers: one module per pipeline stage.

Data flows one way:
    config/artifacts -> data -> budgets -> tokenizers -> decoder/ltg_bert -> training
    -> generation -> continuation_health/rouge/self_bleu/ngram_index/memorisation
    -> evaluation/finetune/judge -> lexicon -> interpret -> interpret_tables/interpret_views
    -> reporting
"""
__version__ = "0.1.0"

from .progress import silence_headless_warnings as _silence

_silence()  # under the runner: no "IProgress not found" warning in executed notebooks
