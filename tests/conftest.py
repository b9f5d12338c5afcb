"""Workers for `pytest -n auto` (pytest-xdist): one a core, but at most 4 where a GPU is present,
since every worker holds a CUDA context and the large cases' inputs on the one device."""

import os


def pytest_xdist_auto_num_workers(config):
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        import torch

        if torch.cuda.is_available():
            return min(cores, 4)
    except ImportError:
        pass
    return cores
