"""Typed Python wrappers for the treduce ops, with their fake (meta) and autograd rules."""

from __future__ import annotations

from typing import NamedTuple

import torch

# The dtypes the ops accept, as input and as dtype=.
SUPPORTED_DTYPES = (
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64,
)
_INTEGRAL = frozenset(SUPPORTED_DTYPES[:6])


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


def sum(x: torch.Tensor, variant: str = "auto", *, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The sum of all elements of ``x``, as ``torch.sum(x, dtype=dtype)`` gives it.

    ``variant`` names the technique (see :func:`variants`); ``"auto"`` is the fastest one.
    """
    return torch.ops.treduce.sum(x, variant, dtype=dtype)


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


@torch.library.register_fake("treduce::sum")
def _sum_fake(x, variant="auto", *, dtype=None):
    return x.new_empty((), dtype=result_dtype(x.dtype, dtype))


def _sum_setup_context(ctx, inputs, keyword_only_inputs, output):
    x = inputs[0]
    ctx.input_shape = x.shape
    ctx.input_dtype = x.dtype


def _sum_backward(ctx, grad):
    # d(sum x)/dx_i = 1: every element receives the incoming gradient.
    return grad.to(ctx.input_dtype).expand(ctx.input_shape), None


torch.library.register_autograd("treduce::sum", _sum_backward, setup_context=_sum_setup_context)
