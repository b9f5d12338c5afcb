"""Workers for `pytest -n auto` (pytest-xdist): one a core, but at most 4 where a GPU is present,
since every worker holds a CUDA context and the large cases' inputs on the one device."""

import os

# The workers share the cores: torch's OpenMP threads spinning while they wait for work (libgomp's
# default) took them from the other workers' threads. Sleeping instead, the CPU tests of
# test_cpu_sum, test_dims, test_random_shapes, test_stats, test_logic, test_norm_prod and
# test_nan_lse took 93 s on 2 cores and 2 workers (2 threads each), not 232. Set before torch loads
# libgomp; a caller's own setting stays.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_xdist_auto_num_workers(config):
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        import torch

        if torch.cuda.is_available():
            return min(cores, 4)
    except ImportError:
        pass
    return cores
