"""torch_reduce: reductions for PyTorch, and every classic CUDA reduction technique as a variant.

Importing the package loads the compiled ops library (torch_reduce._C), which
registers ``torch.ops.treduce.*``; the Python wrappers below call through those ops.
"""

import importlib.util
import json
import warnings
from pathlib import Path

import torch

from ._version import TORCH_REQUIREMENT, __version__, minor_release

_REBUILD = "rebuild it against this torch: pip install --no-build-isolation ."


def _library_path() -> Path:
    spec = importlib.util.find_spec("torch_reduce._C")
    if spec is None or spec.origin is None:
        raise ImportError(f"torch_reduce._C is not built; install torch ({TORCH_REQUIREMENT}), then: "
                          "pip install --no-build-isolation -e .")
    return Path(spec.origin)


def build_info() -> dict:
    """What the compiled library was built with, and so is tied to: the torch release ("torch"; it
    runs with that minor release only), the CUDA release of that torch ("torch_cuda") and of the
    compiler ("cuda", None for a CPU-only build; it runs with torch builds of that CUDA major), the
    GPU architectures ("cuda_archs"; "cuda_check_only" where the kernels were compiled as CI's check
    only, unoptimized PTX), and the platform."""
    return dict(_BUILD_INFO)


def _check_build(library: Path) -> dict:
    """The library's build record, after checking that it can run with this torch: a clear error
    here instead of an undefined symbol from the loader."""
    record = library.parent / "_C.build.json"
    if not record.exists():
        raise ImportError(f"{library} has no build record ({record.name}); {_REBUILD}")
    info = json.loads(record.read_text())
    if minor_release(info["torch"]) != minor_release(torch.__version__):
        raise ImportError(f"torch_reduce was built against torch {info['torch']} and cannot run with torch "
                          f"{torch.__version__} (torch's C++ ABI changes between minor releases); {_REBUILD}, "
                          f"or install torch=={'.'.join(map(str, minor_release(info['torch'])))}.*")
    if info["cuda"] is not None:
        if torch.version.cuda is None:
            raise ImportError(f"torch_reduce was built with CUDA {info['cuda']}, and this torch "
                              f"({torch.__version__}) has no CUDA; {_REBUILD}")
        if info["cuda"].split(".")[0] != torch.version.cuda.split(".")[0]:
            raise ImportError(f"torch_reduce was built with CUDA {info['cuda']} and this torch with CUDA "
                              f"{torch.version.cuda}: the CUDA major releases must match; {_REBUILD}")
        if info.get("cuda_check_only") and torch.cuda.is_available():
            warnings.warn("torch_reduce's CUDA kernels were compiled as a check only (TREDUCE_CUDA_CHECK_ONLY: "
                          f"unoptimized PTX), and run slowly on this GPU; {_REBUILD}", stacklevel=3)
    return info


def _load_ops_library() -> dict:
    library = _library_path()
    info = _check_build(library)
    torch.ops.load_library(str(library))
    return info


_BUILD_INFO = _load_ops_library()

from .ops import (  # noqa: E402
    SUPPORTED_DTYPES, Variant, all, amax, amin, aminmax, any, argmax, argmin, count_nonzero, cross_entropy,
    cross_entropy_backward, cross_entropy_forward, explain, layer_norm, layer_norm_backward, layer_norm_forward,
    log_softmax, log_softmax_backward, logsumexp, max, mean, min, nanmean, nansum, prod, result_dtype, softmax, softmax_backward,
    rms_norm, rms_norm_backward, rms_norm_forward, std, std_mean, sum, var, var_mean, variants, vector_norm,
)
from .override import override  # noqa: E402
from . import distributed  # noqa: E402  (registers the ops' DTensor shardings)

# Every op of the table (_table.py) is exported by name (tests/test_library.py checks it); the names
# are spelled out so that editors and type checkers see them.
__all__ = [
    "SUPPORTED_DTYPES", "Variant", "__version__", "all", "amax", "amin", "aminmax", "any", "argmax", "argmin",
    "build_info", "count_nonzero", "cross_entropy", "cross_entropy_backward", "cross_entropy_forward",
    "distributed", "explain", "layer_norm", "layer_norm_backward", "layer_norm_forward", "max", "mean", "min",
    "override", "log_softmax", "log_softmax_backward", "logsumexp", "nanmean", "nansum", "prod", "result_dtype",
    "rms_norm", "rms_norm_backward", "rms_norm_forward", "softmax", "softmax_backward", "std", "std_mean", "sum", "var", "var_mean", "variants", "vector_norm",
]
