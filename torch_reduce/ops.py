"""Typed Python wrappers for the treduce ops, and their fake (meta) rules.

The autograd formulas are registered in C++ (csrc/torch/autograd.cpp): on the Autograd key a Python
function would cost every call, with or without gradients, a trip through the interpreter.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from typing import NamedTuple, Union

import torch

from . import _C
from ._table import NORMALIZING_OPS, OPS

# The dtypes the ops accept, as input and as dtype=.
SUPPORTED_DTYPES = (
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64,
)
_INTEGRAL = frozenset(SUPPORTED_DTYPES[:6])

Dims = Union[int, Sequence[int], None]

# The ops' overloads, resolved once: calling torch.ops.treduce.sum looks up the namespace, the
# packet and then the overload on every call. _SUM is torch.ops.treduce.sum.default, and so for
# every op of the table; module globals, as a wrapper looks them up (and tests replace them).
globals().update({f"_{op.name.upper()}": getattr(torch.ops.treduce, op.name).default for op in OPS + NORMALIZING_OPS})

# The eager entry (csrc/torch/python_entry.cpp): _eager(_C.SUM, x, dim, keepdim, dtype, scalar) is the op's
# result for a plain eager call (a torch.Tensor, no torch function or dispatch mode; the variant
# "auto"; scalar: var's correction or vector_norm's order), else NotImplemented. It reaches the same op through the same dispatcher, without
# torch.ops' generic argument parser (about 1 us a call, as much as a small reduction's kernel).
# Under torch.compile the wrappers call the ops as before, which dynamo traces: dynamo reads
# is_dynamo_compiling() as True (in eager it is a function returning False, 25 ns; is_compiling()
# costs 90). Other tracers (make_fx, export) run with modes or tensor subclasses, which the entry
# declines.
_C._init(torch.Tensor, torch.nn.Parameter, SUPPORTED_DTYPES)
_eager = _C.reduce
_compiling = torch.compiler.is_dynamo_compiling


class Variant(NamedTuple):
    """One technique, as listed by :func:`variants`."""

    name: str
    technique: str
    seed: str
    fixes: str
    kernel: str
    deterministic: bool


def result_dtype(input_dtype: torch.dtype, dtype: torch.dtype | None = None) -> torch.dtype:
    """The dtype of ``sum(x, dtype=dtype)``, as torch.sum gives it: bool and integers widen to int64."""
    if dtype is not None:
        return dtype
    return torch.int64 if input_dtype in _INTEGRAL else input_dtype


def _dim_list(dim: Dims) -> int | list[int] | None:
    """dim as the schemas' int[1]? takes it: an int as it is (a one-element list cost the
    dispatcher's argument parser about 0.3 us more a call), other dims as a list."""
    if dim is None or type(dim) is int:
        return dim
    if isinstance(dim, int):  # bool and other int subclasses, as before
        return [dim]
    return list(dim)


def _call(op, x, variant, dim, keepdim, dtype=None, default="auto"):
    """op(x, ...) with only the arguments that differ from the schema's defaults: each argument
    the dispatcher converts from Python costs about half a microsecond, as much as a small
    reduction's kernel. `variant` is the op's second argument (vector_norm's order), `default`
    its schema default."""
    if dtype is not None:
        return op(x, variant, _dim_list(dim), keepdim, dtype=dtype)
    if keepdim:
        return op(x, variant, _dim_list(dim), keepdim)
    if dim is not None:
        return op(x, variant, _dim_list(dim))
    if variant != default:
        return op(x, variant)
    return op(x)


def sum(x: torch.Tensor, dim: Dims = None, keepdim: bool = False, *,
        dtype: torch.dtype | None = None, variant: str = "auto") -> torch.Tensor:
    """``torch.sum(x, dim, keepdim, dtype=dtype)``: same result dtype, shape and values.

    ``variant`` names the technique (see :func:`variants`); ``"auto"``, the fastest, is the one
    that reduces over dims, the others reduce whole tensors; ``"exact"`` (floats) is the exact sum
    rounded once, the same bits on every device, also over dims and for DTensors (whose shards
    then exchange exact states: torch_reduce.distributed).
    """
    if variant == "auto" and not _compiling():
        out = _eager(_C.SUM, x, dim, keepdim, dtype, None)
        if out is not NotImplemented:
            return out
    if variant == "exact" and type(x) is not torch.Tensor and x.dtype.is_floating_point:
        from .distributed import _exact_sum_of_dtensor, _is_dtensor

        if _is_dtensor(x) and (dtype or x.dtype).is_floating_point:
            return _exact_sum_of_dtensor(x, dim, keepdim, dtype)
    return _call(_SUM, x, variant, dim, keepdim, dtype)


def mean(x: torch.Tensor, dim: Dims = None, keepdim: bool = False, *,
         dtype: torch.dtype | None = None, variant: str = "auto") -> torch.Tensor:
    """``torch.mean(x, dim, keepdim, dtype=dtype)``. Integer inputs need a floating ``dtype``."""
    if variant == "auto" and not _compiling():
        out = _eager(_C.MEAN, x, dim, keepdim, dtype, None)
        if out is not NotImplemented:
            return out
    return _call(_MEAN, x, variant, dim, keepdim, dtype)


def amax(x: torch.Tensor, dim: Dims = None, keepdim: bool = False, *, variant: str = "auto") -> torch.Tensor:
    """``torch.amax(x, dim, keepdim)``, NaN propagating; ``dim=None`` reduces every dim."""
    if variant == "auto" and not _compiling():
        out = _eager(_C.AMAX, x, dim, keepdim, None, None)
        if out is not NotImplemented:
            return out
    return _call(_AMAX, x, variant, dim, keepdim)


def amin(x: torch.Tensor, dim: Dims = None, keepdim: bool = False, *, variant: str = "auto") -> torch.Tensor:
    """``torch.amin(x, dim, keepdim)``, NaN propagating; ``dim=None`` reduces every dim."""
    if variant == "auto" and not _compiling():
        out = _eager(_C.AMIN, x, dim, keepdim, None, None)
        if out is not NotImplemented:
            return out
    return _call(_AMIN, x, variant, dim, keepdim)


def _correction(name: str, dim, unbiased, correction):
    """torch's overloads of var and std: (x, dim=None, *, correction=1), (x, dim, unbiased) and
    (x, unbiased); returns (dim, correction)."""
    if isinstance(dim, bool):  # var(x, unbiased)
        if unbiased is not None:
            raise TypeError(f"{name}() received an invalid combination of arguments: unbiased given twice")
        dim, unbiased = None, dim
    if unbiased is not None:
        if correction is not None:
            raise TypeError(f"{name}() received an invalid combination of arguments: both correction and unbiased")
        correction = 1 if unbiased else 0
    return _dim_list(dim), correction


def _stat_call(op, eager_op, name, x, dim, unbiased, keepdim, correction):
    if unbiased is None and not _compiling():
        out = _eager(eager_op, x, dim, keepdim, None, correction)
        if out is not NotImplemented:
            return out
    dim, correction = _correction(name, dim, unbiased, correction)
    if correction is None and not keepdim:
        return op(x, dim)
    return op(x, dim, correction=correction, keepdim=keepdim)


def var(x: torch.Tensor, dim: Dims | bool = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: int | float | None = None) -> torch.Tensor:
    """``torch.var``: ``var(x, dim, correction=1, keepdim)``, also ``var(x, dim, unbiased, keepdim)``
    and ``var(x, unbiased)``. Welford's method: one read of the input."""
    return _stat_call(_VAR, _C.VAR, "var", x, dim, unbiased, keepdim, correction)


def std(x: torch.Tensor, dim: Dims | bool = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: int | float | None = None) -> torch.Tensor:
    """``torch.std``, with the arguments of :func:`var`."""
    return _stat_call(_STD, _C.STD, "std", x, dim, unbiased, keepdim, correction)


def var_mean(x: torch.Tensor, dim: Dims | bool = None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: int | float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.var_mean``: (var, mean) from one read of the input."""
    return _stat_call(_VAR_MEAN, _C.VAR_MEAN, "var_mean", x, dim, unbiased, keepdim, correction)


def std_mean(x: torch.Tensor, dim: Dims | bool = None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: int | float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.std_mean``: (std, mean) from one read of the input."""
    return _stat_call(_STD_MEAN, _C.STD_MEAN, "std_mean", x, dim, unbiased, keepdim, correction)


def _nan_call(op, eager_op, x, dim, keepdim, dtype):
    if not _compiling():
        out = _eager(eager_op, x, dim, keepdim, dtype, None)
        if out is not NotImplemented:
            return out
    if dtype is not None:
        return op(x, _dim_list(dim), keepdim, dtype=dtype)
    if keepdim:
        return op(x, _dim_list(dim), keepdim)
    if dim is not None:
        return op(x, _dim_list(dim))
    return op(x)


def nansum(x: torch.Tensor, dim: Dims = None, keepdim: bool = False, *,
           dtype: torch.dtype | None = None) -> torch.Tensor:
    """``torch.nansum``: NaN counts as zero; integers and bool as ``torch.sum``."""
    return _nan_call(_NANSUM, _C.NANSUM, x, dim, keepdim, dtype)


def nanmean(x: torch.Tensor, dim: Dims = None, keepdim: bool = False, *,
            dtype: torch.dtype | None = None) -> torch.Tensor:
    """``torch.nanmean``: the mean of the elements that are not NaN (NaN where all are)."""
    return _nan_call(_NANMEAN, _C.NANMEAN, x, dim, keepdim, dtype)


def logsumexp(x: torch.Tensor, dim: int | Sequence[int], keepdim: bool = False) -> torch.Tensor:
    """``torch.logsumexp``: log(sum(exp(x))) over ``dim`` without overflow, from one read (a running
    maximum and a rescaled sum). Integer inputs give float32, as torch. ``dim=()`` reduces every dim."""
    if not _compiling():
        out = _eager(_C.LOGSUMEXP, x, dim, keepdim, None, None)
        if out is not NotImplemented:
            return out
    return _LOGSUMEXP(x, _dim_list(dim), keepdim) if keepdim else _LOGSUMEXP(x, _dim_list(dim))


def prod(x: torch.Tensor, dim: int | None = None, keepdim: bool = False, *,
         dtype: torch.dtype | None = None) -> torch.Tensor:
    """``torch.prod``: over every dim, or over one ``dim``; dtypes as ``torch.sum`` (integers and
    bool give int64, each element converted to ``dtype`` first)."""
    if not _compiling():
        out = _eager(_C.PROD, x, dim, keepdim, dtype, None)
        if out is not NotImplemented:
            return out
    if dtype is not None:
        return _PROD(x, dim, keepdim, dtype=dtype)
    if keepdim:
        return _PROD(x, dim, keepdim)
    return _PROD(x) if dim is None else _PROD(x, dim)


def vector_norm(x: torch.Tensor, ord: float = 2, dim: Dims = None, keepdim: bool = False, *,
                dtype: torch.dtype | None = None) -> torch.Tensor:
    """``torch.linalg.vector_norm``: ``ord`` 2, 1, inf, -inf, 0 (the count of non-zeros) or any
    other float; ``dim=None`` or ``()`` reduces every dim; ``dtype`` converts the input first."""
    if not _compiling():
        out = _eager(_C.VECTOR_NORM, x, dim, keepdim, dtype, ord)
        if out is not NotImplemented:
            return out
    return _call(_VECTOR_NORM, x, ord, dim, keepdim, dtype, default=2)


def _logic_call(op, eager_op, x, dim, keepdim):
    if not _compiling():
        out = _eager(eager_op, x, dim, keepdim, None, None)
        if out is not NotImplemented:
            return out
    if keepdim:
        return op(x, _dim_list(dim), keepdim)
    return op(x) if dim is None else op(x, _dim_list(dim))


def any(x: torch.Tensor, dim: Dims = None, keepdim: bool = False) -> torch.Tensor:
    """``torch.any``: whether any element is non-zero (NaN is), bool (uint8 for uint8 input);
    ``dim=None`` reduces every dim and ``dim=()`` none, as torch."""
    return _logic_call(_ANY, _C.ANY, x, dim, keepdim)


def all(x: torch.Tensor, dim: Dims = None, keepdim: bool = False) -> torch.Tensor:
    """``torch.all``: whether every element is non-zero, bool (uint8 for uint8 input); ``dim=None``
    reduces every dim and ``dim=()`` none, as torch."""
    return _logic_call(_ALL, _C.ALL, x, dim, keepdim)


def count_nonzero(x: torch.Tensor, dim: Dims = None) -> torch.Tensor:
    """``torch.count_nonzero``: the int64 count of non-zero elements over ``dim`` (an int or a
    tuple; ``None`` or ``()``: every dim)."""
    if not _compiling():
        out = _eager(_C.COUNT_NONZERO, x, dim, False, None, None)
        if out is not NotImplemented:
            return out
    return _COUNT_NONZERO(x) if dim is None else _COUNT_NONZERO(x, _dim_list(dim))


def aminmax(x: torch.Tensor, *, dim: int | None = None, keepdim: bool = False):
    """``torch.aminmax``: ``(min, max)`` from one read, NaN propagating, as
    ``torch.return_types.aminmax``; gradients as ``amin``'s and ``amax``'s (torch's from 2.12)."""
    if dim is not None and type(dim) is not int:  # as torch's argument parser
        raise TypeError(f"aminmax(): argument 'dim' must be int, not {type(dim).__name__}")
    if not _compiling():
        out = _eager(_C.AMINMAX, x, dim, keepdim, None, None)
        if out is not NotImplemented:
            return torch.return_types.aminmax(out)
    if keepdim:
        lo, hi = _AMINMAX(x, dim=dim, keepdim=keepdim)
    else:
        lo, hi = _AMINMAX(x) if dim is None else _AMINMAX(x, dim=dim)
    return torch.return_types.aminmax((lo, hi))


def _extremum(name, rows, all_dims, op, result, x, dim, keepdim):
    """max and min: over every dim (amax's row and op), or over `dim` (max's), through the eager
    entry where it takes the call."""
    if dim is None:
        if keepdim:
            raise TypeError(f"{name}() received an invalid combination of arguments: keepdim without dim")
        if x.numel() == 0:  # torch's error: no identity
            raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                               "Specify the reduction dim with the 'dim' argument.")
        if not _compiling():
            out = _eager(rows[0], x, None, False, None, None)
            if out is not NotImplemented:
                return out
        return all_dims(x)
    if not _compiling():
        out = _eager(rows[1], x, dim, keepdim, None, None)
        if out is not NotImplemented:
            return result(out)
    return result(op(x, dim, keepdim) if keepdim else op(x, dim))


def max(x: torch.Tensor, dim: int | None = None, keepdim: bool = False):
    """``torch.max``: without ``dim`` the largest element (NaN propagating, as ``amax``); with
    ``dim`` the named tuple ``(values, indices)`` of ``torch.return_types.max``, the index of the
    first largest element (NaN counts as the largest)."""
    return _extremum("max", (_C.AMAX, _C.MAX), _AMAX, _MAX, torch.return_types.max, x, dim, keepdim)


def min(x: torch.Tensor, dim: int | None = None, keepdim: bool = False):
    """``torch.min``: as :func:`max`, for the smallest element."""
    return _extremum("min", (_C.AMIN, _C.MIN), _AMIN, _MIN, torch.return_types.min, x, dim, keepdim)


def argmax(x: torch.Tensor, dim: int | None = None, keepdim: bool = False) -> torch.Tensor:
    """``torch.argmax``: the int64 index of the first largest element (NaN counts as the largest)
    over ``dim``, or in the flattened tensor for ``dim=None``."""
    if not _compiling():
        out = _eager(_C.ARGMAX, x, dim, keepdim, None, None)
        if out is not NotImplemented:
            return out
    if keepdim:
        return _ARGMAX(x, dim, keepdim)
    return _ARGMAX(x) if dim is None else _ARGMAX(x, dim)


def argmin(x: torch.Tensor, dim: int | None = None, keepdim: bool = False) -> torch.Tensor:
    """``torch.argmin``: as :func:`argmax`, for the smallest element."""
    if not _compiling():
        out = _eager(_C.ARGMIN, x, dim, keepdim, None, None)
        if out is not NotImplemented:
            return out
    if keepdim:
        return _ARGMIN(x, dim, keepdim)
    return _ARGMIN(x) if dim is None else _ARGMIN(x, dim)


def variants(device: str | torch.device = "cuda") -> list[Variant]:
    """The variants that tensors on ``device`` ('cpu' or 'cuda') can use, in ladder order.

    On a build without CUDA, the 'cuda' list is empty.
    """
    rows = torch.ops.treduce.variants(torch.device(device).type)
    out = []
    for row in rows:
        name, technique, seed, fixes, kernel, determinism = row.split("\t")
        out.append(Variant(name, technique, seed, fixes, kernel, determinism == "deterministic"))
    return out


def explain(x: torch.Tensor, dim: Dims = None, op: str = "sum") -> dict:
    """How ``auto`` reduces ``x`` over ``dim`` for ``op`` (a name of the family: "sum", "var",
    "argmax", ...), without running anything. The folded layout of what the kernels read
    (csrc/core/layout.h): outputs = outer x inner / combine; ``outer_runs`` lists [size, input stride,
    output stride] of each run an outer index stands for when there are several; ``combine`` > 1
    means the reduced dims were several runs of memory, reduced in two passes; ``copy`` means the
    kernels read a copy of ``x`` (more separate runs than they index, or another dtype);
    ``repeats`` counts the copies of each element along expanded (stride 0) reduced dims, which
    are not read; ``distinct`` > 0 means kept dims expanded in ``x`` repeat the results, so the
    kernels reduce that many distinct ones and a copy kernel repeats them (CUDA). On CUDA, ``plan`` is what a call launches (csrc/core/cuda/plan.h), as an eager call on the current
    stream takes it: ``workspace`` bytes and the ``steps``, each a kernel with its grid, block,
    whether it launches with programmatic dependence, what it reads and writes (the input, the
    result, or partials in the workspace) and its parameters. The plan depends only on the
    device, op, dtypes, layout and alignment: the same on every call. On the CPU, ``plan`` is None."""
    return json.loads(torch.ops.treduce._plan(x, _dim_list(dim), op))


# Shape rules, shared by the fake kernels. Errors are left to the real kernels, which check
# exactly what torch checks; these only need to be right for valid arguments.
def _reduced_shape(x: torch.Tensor, dim: list[int] | None, keepdim: bool) -> list[int]:
    ndim = x.dim()
    if not dim:
        reduced = set(range(ndim))
    else:
        reduced = {d % builtins.max(ndim, 1) for d in dim} if ndim else set()
    return [1 if i in reduced else s for i, s in enumerate(x.shape) if keepdim or i not in reduced]


def _sum_fake(x, variant="auto", dim=None, keepdim=False, *, dtype=None):
    return x.new_empty(_reduced_shape(x, dim, keepdim), dtype=result_dtype(x.dtype, dtype))


def _mean_fake(x, variant="auto", dim=None, keepdim=False, *, dtype=None):
    return x.new_empty(_reduced_shape(x, dim, keepdim), dtype=dtype or x.dtype)


def _extremum_fake(x, variant="auto", dim=None, keepdim=False):
    return x.new_empty(_reduced_shape(x, dim, keepdim))


def _stat_fake(x, dim=None, *, correction=None, keepdim=False):
    return x.new_empty(_reduced_shape(x, dim, keepdim))


def _stat_pair_fake(x, dim=None, *, correction=None, keepdim=False):
    shape = _reduced_shape(x, dim, keepdim)
    return x.new_empty(shape), x.new_empty(shape)


def _nansum_fake(x, dim=None, keepdim=False, *, dtype=None):
    return x.new_empty(_reduced_shape(x, dim, keepdim), dtype=result_dtype(x.dtype, dtype))


def _nanmean_fake(x, dim=None, keepdim=False, *, dtype=None):
    return x.new_empty(_reduced_shape(x, dim, keepdim), dtype=dtype or x.dtype)


def _logsumexp_fake(x, dim, keepdim=False):
    dtype = x.dtype if x.dtype.is_floating_point else torch.float32
    return x.new_empty(_reduced_shape(x, dim, keepdim), dtype=dtype)


def _prod_fake(x, dim=None, keepdim=False, *, dtype=None):
    return x.new_empty(_reduced_shape(x, None if dim is None else [dim], keepdim), dtype=result_dtype(x.dtype, dtype))


def _vector_norm_fake(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    return x.new_empty(_reduced_shape(x, dim, keepdim), dtype=dtype or x.dtype)


def _logic_fake(x, dim=None, keepdim=False):
    shape = list(x.shape) if dim is not None and len(dim) == 0 else _reduced_shape(x, dim, keepdim)
    return x.new_empty(shape, dtype=torch.uint8 if x.dtype == torch.uint8 else torch.bool)


def _count_nonzero_fake(x, dim=None):
    return x.new_empty(_reduced_shape(x, dim, False), dtype=torch.int64)


def _aminmax_fake(x, *, dim=None, keepdim=False):
    shape = _reduced_shape(x, None if dim is None else [dim], keepdim)
    return x.new_empty(shape), x.new_empty(shape)


def _max_dim_fake(x, dim, keepdim=False):
    shape = _reduced_shape(x, [dim], keepdim)
    return x.new_empty(shape), x.new_empty(shape, dtype=torch.int64)


def _arg_fake(x, dim=None, keepdim=False):
    return x.new_empty(_reduced_shape(x, None if dim is None else [dim], keepdim), dtype=torch.int64)


def softmax(x: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``torch.softmax``: exp(x) / sum(exp(x)) along ``dim``, from the row's maximum; ``dtype``
    converts the input first (a 16-bit float read straight into a float32 result)."""
    return _SOFTMAX(x, dim, dtype)


def log_softmax(x: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``torch.log_softmax``: x - max - log(sum(exp(x - max))) along ``dim``."""
    return _LOG_SOFTMAX(x, dim, dtype)


def softmax_backward(grad_output: torch.Tensor, output: torch.Tensor, dim: int,
                     input_dtype: torch.dtype) -> torch.Tensor:
    """aten's ``_softmax_backward_data``: output * (grad - sum(grad * output)) along ``dim``, in
    ``input_dtype``."""
    return _SOFTMAX_BACKWARD(grad_output, output, dim, input_dtype)


def log_softmax_backward(grad_output: torch.Tensor, output: torch.Tensor, dim: int,
                         input_dtype: torch.dtype) -> torch.Tensor:
    """aten's ``_log_softmax_backward_data``: grad - exp(output) * sum(grad) along ``dim``, in
    ``input_dtype``."""
    return _LOG_SOFTMAX_BACKWARD(grad_output, output, dim, input_dtype)


_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def cross_entropy(input: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None,
                  ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0) -> torch.Tensor:
    """``F.cross_entropy`` with class-index targets (int64), fused: each sample's logits read once
    forward (their logsumexp kept, no log-probabilities stored) and once backward. Logits (C,),
    (N, C) or (N, C, d1, ...); ``weight``, ``ignore_index``, ``reduction`` and ``label_smoothing``
    as torch's. The reduced loss is summed in a fixed order: the same bits run after run. On CUDA a
    target out of range gives NaN (torch's device assert would stop the process)."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _CROSS_ENTROPY(input, target, weight, _REDUCTIONS[reduction], ignore_index, label_smoothing)


def cross_entropy_forward(input, target, weight=None, reduction: int = 1, ignore_index: int = -100,
                          label_smoothing: float = 0.0):
    """cross_entropy's forward op: (loss, each sample's logsumexp, the mean's divisor)."""
    return _CROSS_ENTROPY_FORWARD(input, target, weight, reduction, ignore_index, label_smoothing)


def cross_entropy_backward(grad_output, input, target, weight, reduction: int, ignore_index: int,
                           label_smoothing: float, lse, total_weight):
    """cross_entropy's backward op: the logits' gradient from cross_entropy_forward's results."""
    return _CROSS_ENTROPY_BACKWARD(grad_output, input, target, weight, reduction, ignore_index, label_smoothing, lse,
                                   total_weight)


def layer_norm(input: torch.Tensor, normalized_shape, weight: torch.Tensor | None = None,
               bias: torch.Tensor | None = None, eps: float = 1e-5) -> torch.Tensor:
    """``F.layer_norm`` over the last ``len(normalized_shape)`` dims: (x - mean) / sqrt(var + eps)
    * weight + bias, the variance biased, summed about the mean from the row held once. Weight and
    bias of the input's dtype; their gradients are column sums in a fixed order."""
    return _LAYER_NORM(input, _shape_list(normalized_shape), weight, bias, eps)


def layer_norm_forward(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """layer_norm's forward op, as aten's ``native_layer_norm``: (y, mean, rstd), the statistics
    float32 (float64 for float64) of shape input.shape[:-k] + (1,) * k."""
    return _LAYER_NORM_FORWARD(input, _shape_list(normalized_shape), weight, bias, eps)


def layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    """layer_norm's backward op, as aten's ``native_layer_norm_backward``: (dx, dw, db), those the
    mask asks for (None otherwise)."""
    return _LAYER_NORM_BACKWARD(grad_out, input, _shape_list(normalized_shape), mean, rstd, weight, bias,
                                list(output_mask))


def rms_norm(input: torch.Tensor, normalized_shape, weight: torch.Tensor | None = None,
             eps: float | None = None) -> torch.Tensor:
    """``F.rms_norm``: x / sqrt(mean(x^2) + eps) * weight over the last dims; ``eps`` None is the
    machine epsilon of the accumulator (float32's, float64's for float64), as torch's."""
    return _RMS_NORM(input, _shape_list(normalized_shape), weight, eps)


def rms_norm_forward(input, normalized_shape, weight=None, eps: float | None = None):
    """rms_norm's forward op, as aten's ``_fused_rms_norm``: (y, rstd)."""
    return _RMS_NORM_FORWARD(input, _shape_list(normalized_shape), weight, eps)


def rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask):
    """rms_norm's backward op, as aten's ``_fused_rms_norm_backward``: (dx, dw) as the mask asks."""
    return _RMS_NORM_BACKWARD(grad_out, input, _shape_list(normalized_shape), rstd, weight, list(output_mask))


def _shape_list(shape) -> list[int]:
    return [int(shape)] if isinstance(shape, int) else [int(s) for s in shape]


def _xent_acc(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _cross_entropy_fake(x, target, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0):
    return x.new_empty(target.shape if reduction == 0 else ())


def _cross_entropy_forward_fake(x, target, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0):
    return (x.new_empty(target.shape if reduction == 0 else ()), x.new_empty(target.shape, dtype=_xent_acc(x.dtype)),
            x.new_empty((), dtype=_xent_acc(x.dtype)))


def _cross_entropy_backward_fake(grad, x, target, weight, reduction, ignore_index, label_smoothing, lse, total_weight):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _softmax_fake(x, dim, dtype=None):
    torch._check(x.dim() == 0 and -1 <= dim <= 0 or -x.dim() <= dim < x.dim(), lambda: f"dim {dim} out of range")
    return torch.empty(x.shape, dtype=dtype or x.dtype, device=x.device)


def _softmax_backward_fake(grad_output, output, dim, input_dtype):
    return torch.empty(output.shape, dtype=input_dtype, device=output.device)


def _norm_stats_shape(x, normalized_shape):
    k = len(normalized_shape)
    return list(x.shape[:x.dim() - k]) + [1] * k


def _layer_norm_fake(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _layer_norm_forward_fake(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    stats = _norm_stats_shape(x, normalized_shape)
    return (torch.empty(x.shape, dtype=x.dtype, device=x.device), x.new_empty(stats, dtype=_xent_acc(x.dtype)),
            x.new_empty(stats, dtype=_xent_acc(x.dtype)))


def _layer_norm_backward_fake(grad, x, normalized_shape, mean, rstd, weight, bias, output_mask):
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device) if output_mask[0] else None
    dw = x.new_empty(normalized_shape) if output_mask[1] and weight is not None else None
    db = x.new_empty(normalized_shape) if output_mask[2] and bias is not None else None
    return dx, dw, db


def _rms_norm_fake(x, normalized_shape, weight=None, eps=None):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _rms_norm_forward_fake(x, normalized_shape, weight=None, eps=None):
    return (torch.empty(x.shape, dtype=x.dtype, device=x.device),
            x.new_empty(_norm_stats_shape(x, normalized_shape), dtype=_xent_acc(x.dtype)))


def _rms_norm_backward_fake(grad, x, normalized_shape, rstd, weight, output_mask):
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device) if output_mask[0] else None
    dw = x.new_empty(normalized_shape) if output_mask[1] and weight is not None else None
    return dx, dw


# Each op's fake, registered for every op of the table: one without a fake fails here, at import.
_FAKES = {
    "sum": _sum_fake, "mean": _mean_fake, "amax": _extremum_fake, "amin": _extremum_fake,
    "var": _stat_fake, "std": _stat_fake, "var_mean": _stat_pair_fake, "std_mean": _stat_pair_fake,
    "nansum": _nansum_fake, "nanmean": _nanmean_fake, "logsumexp": _logsumexp_fake, "prod": _prod_fake,
    "vector_norm": _vector_norm_fake, "any": _logic_fake, "all": _logic_fake, "count_nonzero": _count_nonzero_fake,
    "aminmax": _aminmax_fake, "max": _max_dim_fake, "min": _max_dim_fake, "argmax": _arg_fake, "argmin": _arg_fake,
}
_FAKES.update({"softmax": _softmax_fake, "log_softmax": _softmax_fake,
               "softmax_backward": _softmax_backward_fake, "log_softmax_backward": _softmax_backward_fake,
               "cross_entropy": _cross_entropy_fake, "cross_entropy_forward": _cross_entropy_forward_fake,
               "cross_entropy_backward": _cross_entropy_backward_fake,
               "layer_norm": _layer_norm_fake, "layer_norm_forward": _layer_norm_forward_fake,
               "layer_norm_backward": _layer_norm_backward_fake, "rms_norm": _rms_norm_fake,
               "rms_norm_forward": _rms_norm_forward_fake, "rms_norm_backward": _rms_norm_backward_fake})
for _op in OPS + NORMALIZING_OPS:
    torch.library.register_fake(f"treduce::{_op.name}")(_FAKES[_op.name])


@torch.library.register_fake("treduce::_exact_state")
def _exact_state_fake(x, dim=None, keepdim=False, *, dtype=None):
    return x.new_empty(_reduced_shape(x, dim, keepdim) + [EXACT_STATE_WORDS], dtype=torch.int64)


@torch.library.register_fake("treduce::_exact_round")
def _exact_round_fake(state, dtype):
    return state.new_empty(state.shape[:-1], dtype=dtype)


# The words of an exact state (csrc/core/exact.h), as the library makes them.
EXACT_STATE_WORDS = torch.ops.treduce._exact_state(torch.zeros(1)).shape[-1]
