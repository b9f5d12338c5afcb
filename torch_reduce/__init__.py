"""torch_reduce: reductions for PyTorch, and every classic CUDA reduction technique as a variant.

Importing the package loads the compiled ops library (torch_reduce._C), which
registers ``torch.ops.treduce.*``; the Python wrappers below call through those ops.
"""

import importlib.util

import torch


def _load_ops_library():
    spec = importlib.util.find_spec("torch_reduce._C")
    if spec is None or spec.origin is None:
        raise ImportError(
            "torch_reduce._C is not built; install with: pip install --no-build-isolation -e ."
        )
    torch.ops.load_library(spec.origin)


_load_ops_library()

from .ops import SUPPORTED_DTYPES, Variant, amax, amin, mean, result_dtype, sum, variants  # noqa: E402
from .override import override  # noqa: E402

__all__ = ["SUPPORTED_DTYPES", "Variant", "amax", "amin", "mean", "override", "result_dtype", "sum", "variants"]
