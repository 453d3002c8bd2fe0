"""Job functions for tests/test_parallel.py: importable by the worker processes (spawn)."""
import os


def square(x, say=""):
    if say:
        print(say)
    import torch

    return {"value": x * x, "pid": os.getpid(), "threads": torch.get_num_threads()}


def fail(x):
    raise ValueError(f"bad input {x}")
