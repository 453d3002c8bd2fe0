"""Job functions for tests/test_parallel.py: importable by the worker processes (spawn)."""
import os


def square(x, say=""):
    if say:
        print(say)
    import torch

    return {"value": x * x, "pid": os.getpid(), "threads": torch.get_num_threads()}


def fail(x):
    raise ValueError(f"bad input {x}")


def which_gpu(x):
    """The GPU a worker process was given (CUDA_VISIBLE_DEVICES), and the process."""
    import time

    time.sleep(0.3)  # long enough that both workers take jobs
    return {"gpu": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid(), "x": x}


def die(x):
    """Job 1 kills its own worker process outright (as the out-of-memory killer does); the others return."""
    import signal
    import time

    if x == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    return x
