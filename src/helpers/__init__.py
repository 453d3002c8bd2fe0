"""storybench helpers: one subpackage per pipeline stage, one concept per module.

Data flows one way, stage by stage (``tests/test_project.py`` checks it; ``docs/architecture.md`` says what
each module holds)::

    core -> data -> models -> training -> generation -> diversity -> evaluation -> judge -> story_eval
         -> analysis -> report -> runner

Import a module from its stage: ``from helpers.data import budgets``, ``from helpers.training import recipes``.
"""
__version__ = "0.1.0"

from helpers.core.progress import silence_headless_warnings as _silence

_silence()  # under the runner: no "IProgress not found" warning in executed notebooks
