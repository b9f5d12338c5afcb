"""The treduce ops, each once, as the Python side needs them (csrc/torch/ops.h is the C++ side's
table; tests/test_library.py checks that both name the same ops and that the library registers
them). From this table come override(mode="python")'s routes, signatures and autocast rule, the
package's exports, the overloads ops.py calls and the fakes it registers, and the draws and
checks of benchmarks/random_shapes.py (which the tests run too). The wrappers stay hand-written:
their signatures are torch's, which differ op by op."""

from __future__ import annotations

from typing import NamedTuple

import torch


class Op(NamedTuple):
    """One op of the family."""

    # The treduce op, its torch_reduce wrapper, and what override() counts its calls under.
    name: str
    # What override(mode="python") sends to the wrapper: torch's function first (the tests' and
    # benchmarks' reference), then the Tensor method of that name where torch has one.
    routes: tuple
    # The parameters of torch's function: positional ones in order, then keyword-only ones.
    positional: tuple[str, ...]
    keyword_only: tuple[str, ...]
    # random_shapes: the dims it takes ("many": a list, or None for all; "one": one dim, or None;
    # "one!": one dim, always given; "many!": a list, always given), its dtypes ("float", "any",
    # "nobool") and how often it is drawn (the sums and statistics that models use most, more).
    dims: str
    dtypes: str
    weight: int
    # Its results of integer-valued inputs are exact (sums, extrema, positions, products, logic):
    # random_shapes holds them to the result's rounding, the others to a bound.
    exact: bool = False
    # Autocast may run torch's function in float32 (CUDA's does for aten::sum); a custom op gets
    # no such cast, so override(mode="python") leaves these calls to torch under autocast.
    autocast_fp32: bool = False

    @property
    def reference(self):
        """torch's function."""
        return self.routes[0]


_T = torch.Tensor
_REDUCE = ("input", "dim", "keepdim")
_STATS = ("input", "dim", "unbiased", "keepdim")
_DTYPE = ("dtype",)
_CORRECTION = ("correction",)

# In csrc/torch/ops.h's order.
OPS = (
    Op("sum", (torch.sum, _T.sum), _REDUCE, _DTYPE, "many", "any", 6, exact=True, autocast_fp32=True),
    Op("mean", (torch.mean, _T.mean), _REDUCE, _DTYPE, "many", "float", 5),
    Op("amax", (torch.amax, _T.amax), _REDUCE, (), "many", "any", 3, exact=True),
    Op("amin", (torch.amin, _T.amin), _REDUCE, (), "many", "any", 1, exact=True),
    Op("var", (torch.var, _T.var), _STATS, _CORRECTION, "many", "float", 3),
    Op("std", (torch.std, _T.std), _STATS, _CORRECTION, "many", "float", 1),
    Op("var_mean", (torch.var_mean,), _STATS, _CORRECTION, "many", "float", 2),
    Op("std_mean", (torch.std_mean,), _STATS, _CORRECTION, "many", "float", 1),
    Op("nansum", (torch.nansum, _T.nansum), _REDUCE, _DTYPE, "many", "float", 1, exact=True),
    Op("nanmean", (torch.nanmean, _T.nanmean), _REDUCE, _DTYPE, "many", "float", 1),
    Op("logsumexp", (torch.logsumexp, _T.logsumexp), _REDUCE, (), "many!", "float", 2, autocast_fp32=True),
    Op("prod", (torch.prod, _T.prod), _REDUCE, _DTYPE, "one", "any", 1, exact=True, autocast_fp32=True),
    Op("vector_norm", (torch.linalg.vector_norm,), ("input", "ord", "dim", "keepdim"), _DTYPE, "many", "float", 2,
       autocast_fp32=True),
    Op("any", (torch.any, _T.any), _REDUCE, (), "many", "any", 1, exact=True),
    Op("all", (torch.all, _T.all), _REDUCE, (), "many", "any", 1, exact=True),
    Op("count_nonzero", (torch.count_nonzero, _T.count_nonzero), ("input", "dim"), (), "many", "any", 1, exact=True),
    Op("aminmax", (torch.aminmax, _T.aminmax), ("input",), ("dim", "keepdim"), "one", "any", 1, exact=True),
    Op("max", (torch.max, _T.max), _REDUCE, (), "one!", "any", 2, exact=True),
    Op("min", (torch.min, _T.min), _REDUCE, (), "one!", "any", 1, exact=True),
    Op("argmax", (torch.argmax, _T.argmax), _REDUCE, (), "one", "nobool", 2, exact=True),
    Op("argmin", (torch.argmin, _T.argmin), _REDUCE, (), "one", "nobool", 1, exact=True),
)

BY_NAME = {op.name: op for op in OPS}


class NormalizingOp(NamedTuple):
    """One op of the normalizing table (csrc/torch/ops.h's TREDUCE_NORMALIZING_OPS): softmax's
    family, cross_entropy, layer_norm and rms_norm. Its wrapper takes torch's arguments; `reference` is torch's function (the tests')."""

    name: str
    reference: object


# In csrc/torch/ops.h's order.
NORMALIZING_OPS = (
    NormalizingOp("softmax", torch.softmax),
    NormalizingOp("log_softmax", torch.log_softmax),
    NormalizingOp("softmax_backward", torch.ops.aten._softmax_backward_data.default),
    NormalizingOp("log_softmax_backward", torch.ops.aten._log_softmax_backward_data.default),
    NormalizingOp("cross_entropy", torch.nn.functional.cross_entropy),
    NormalizingOp("cross_entropy_forward", None),
    NormalizingOp("cross_entropy_backward", None),
    NormalizingOp("layer_norm", torch.nn.functional.layer_norm),
    NormalizingOp("layer_norm_forward", torch.ops.aten.native_layer_norm.default),
    NormalizingOp("layer_norm_backward", torch.ops.aten.native_layer_norm_backward.default),
    NormalizingOp("rms_norm", torch.nn.functional.rms_norm),
    NormalizingOp("rms_norm_forward", None),
    NormalizingOp("rms_norm_backward", None),
)
