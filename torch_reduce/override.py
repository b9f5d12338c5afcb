"""torch_reduce.override(): run an unmodified model's reductions on torch_reduce.

    with torch_reduce.override() as ov:
        loss = model(x)        # x.sum(-1), torch.mean(y), y.amax(dim=1) ... run on torch_reduce
        loss.backward()        # and so do the sums autograd makes, e.g. to undo a broadcast
    print(ov.routed, ov.fallback, ov.fallback_reasons)

Two modes. Counts: ov.routed and ov.fallback count calls by function (the op's name in the op
table, torch_reduce/_table.py: "sum", "mean", ..., "argmin"; torch.norm's calls as "vector_norm"),
ov.fallback_reasons by reason.

mode="dispatcher" (the default): while a block is open, torch_reduce's kernels are aten's CPU and
CUDA kernels of sum, sum.dim_IntList, mean, mean.dim, amax, amin, the correction overloads of
var, std, var_mean and std_mean, nansum, nanmean, logsumexp, prod, prod.dim_int,
linalg_vector_norm, any and all (every dim, .dim, .dims), count_nonzero.dim_IntList, aminmax, max
and min (every dim, .dim), argmax and argmin; on CUDA also the softmax family, cross_entropy_loss
(AutogradCUDA), native_layer_norm, _fused_rms_norm and their backwards
(csrc/torch/aten_override.cpp; torch.var(x, unbiased), torch.norm's vector norms, count_nonzero(x, dim)
and the other overloads are torch's composites over these).
Every caller reaches them, C++ callers included (autograd's reductions, at::sum in other
extensions), with no Python on the way, so the rest of the model runs at its usual speed. They
sit below autograd, autocast, torch.func and tensor subclasses, which keep torch's own rules.
Calls they do not take (another dtype or dtype=, out=, named tensors) run torch's own kernel,
called directly. Sparse, nested, meta and other devices' tensors never reach them.
Scope: the registrations are process-wide. The first block to open (in any thread) installs
them and the last to close removes them, exception or not; while any block is open, every
thread's reductions are routed, and each block counts every call made in the process while it
was open (an outer block counts what a nested one routed, too). Open and close blocks while no
other thread is inside a reduction, as for any change to the dispatcher's tables. Under
torch.compile a compiled graph keeps inductor's own reductions, which fuse with the ops around
them (only an aten call that inductor leaves to eager code reaches torch_reduce).

mode="python": a TorchFunctionMode. Each op's routes in the op table (torch.sum and x.sum,
torch.mean and x.mean, ..., torch.linalg.vector_norm; torch.max and torch.min for their
reductions: max(x, other) is elementwise and stays torch's) go to the torch_reduce function of
the op's name ("auto"), with the same arguments, and so do torch.norm's vector norms (p a number
or "fro" over at most two dims) to vector_norm; every torch call passes through one Python
function, which costs eager code a few microseconds a call, and calls made inside torch (C++)
are not seen. A call the ops do not take (out=, named dims or tensors, a dtype outside
SUPPORTED_DTYPES, a device other than cpu/cuda, a tensor subclass, a sparse or nested tensor, an
argument the ops lack such as axis=, torch.sum and the others autocast runs in float32 under
autocast, torch.func transforms and forward-mode AD) goes to torch unchanged.
Blocks are per thread; nested, the innermost one routes and counts. Under torch.compile, entered
outside the compiled function, dynamo traces the routing into the graph (fullgraph=True works),
so compiled graphs call torch_reduce's ops (which do not fuse with their neighbours), and a call
is counted when it is traced, once per compilation. A block entered inside the compiled
function routes too, but counts nothing.
"""

from __future__ import annotations

import collections
import threading

import torch
from torch.overrides import TorchFunctionMode

from . import ops
from ._table import OPS

# Named tensors, which torch 2.13 removed: where they exist, a named input falls back to torch.
_NAMED_TENSORS = hasattr(torch.Tensor, "has_names")

# The torch functions we route, by the name of the torch_reduce wrapper that takes them: each op's
# routes, and torch.norm's, whose vector norms are vector_norm's.
_ROUTES = {route: op.name for op in OPS for route in op.routes}
_ROUTES.update({torch.norm: "norm", torch.Tensor.norm: "norm"})
# Each name's positional parameters (as torch's function has them) and its keyword-only ones;
# both go to the wrapper by name.
_SIGNATURES = {op.name: (op.positional, op.keyword_only) for op in OPS}
_SIGNATURES["norm"] = (("input", "p", "dim", "keepdim", "out", "dtype"), ())
# Autocast may run these in float32 (CUDA's does for aten::sum); a custom op gets no such cast.
_AUTOCAST_FP32 = frozenset([op.name for op in OPS if op.autocast_fp32] + ["norm"])

# The active overrides of this thread, innermost last (torch's mode stack is per thread too).
_local = threading.local()


def _active() -> list:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def _count(outcome: str, name: str, reason: str) -> None:
    if not _active():
        return  # a block entered inside a compiled function exists only in dynamo's trace
    ov = _active()[-1]
    getattr(ov, outcome)[name] += 1
    if reason:
        ov.fallback_reasons[reason] += 1


# What torch.compiler.assume_constant_result(_count) does, without importing dynamo (a second) and
# callable inside compiled code: dynamo runs _count when it traces a call and does not replay it.
# A counter update traced like any other would make dynamo guard on the counter's value, which
# changes every call: a recompilation each call, an error under fullgraph=True.
_count._dynamo_marked_constant = True


def _parse(name: str, args: tuple, kwargs: dict):
    """(x, the wrapper's other arguments by name) for a call torch_reduce takes as torch does, else
    why not (a str)."""
    if "out" in kwargs and kwargs["out"] is None:  # torch.norm passes out=None on
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    if "out" in kwargs or (name == "norm" and len(args) > 4 and args[4] is not None):
        return "out="
    positional, keyword_only = _SIGNATURES[name]
    # More positionals than the function has, a keyword it lacks (axis=, keepdims=, ...) or one
    # given twice: torch either raises or knows an alias, so it gets the call.
    if len(args) > len(positional) or any(
        k not in positional + keyword_only or k in positional[: len(args)] for k in kwargs
    ):
        return "arguments"
    call = dict(zip(positional, args))
    call.update(kwargs)
    x = call.pop("input", None)
    dim, keepdim = call.get("dim"), call.get("keepdim", False)
    if "keepdim" in call and "dim" not in call and name in ("sum", "mean"):
        return "arguments"  # torch.sum(x, keepdim=True) is a TypeError
    if name == "logsumexp" and "dim" not in call:
        return "arguments"  # dim is required
    if name == "prod" and (isinstance(dim, (list, tuple)) or ("keepdim" in call and dim is None)):
        return "arguments"  # one dim only; torch.prod(x, keepdim=True) is a TypeError
    if name in ("aminmax", "max", "min", "argmax", "argmin") and isinstance(dim, (list, tuple)):
        return "arguments"  # one dim only
    if name in ("max", "min") and "keepdim" in call and dim is None:
        return "arguments"  # torch.max(x, keepdim=True) is a TypeError; torch.max(x, other) is elementwise
    if name == "norm":  # torch.norm: its vector norms are torch.linalg.vector_norm's
        call.pop("out", None)
        p = call.pop("p", "fro")
        if isinstance(p, str):
            if p != "fro" or (isinstance(dim, (list, tuple)) and len(dim) > 2):
                return "matrix norm"
            p = 2
        elif p is None:
            p = 2
        call["ord"] = p
    if "ord" in call and type(call["ord"]) not in (int, float):
        return "arguments"
    if "unbiased" in positional and type(dim) is bool and "unbiased" not in call:
        call["unbiased"], dim = call.pop("dim"), None  # torch.var(x, unbiased)
    if type(x) is not torch.Tensor and type(x) is not torch.nn.Parameter:
        return "tensor type"  # subclasses keep their own __torch_function__
    dims = () if dim is None else dim if isinstance(dim, (list, tuple)) else (dim,)
    if any(isinstance(d, str) for d in dims):
        return "named dim"
    if any(type(d) is not int for d in dims) or type(keepdim) is not bool:
        return "arguments"  # bool, float or tensor dims: torch's errors or conversions
    if call.get("unbiased") is not None and type(call["unbiased"]) is not bool:
        return "arguments"
    if type(call.get("correction", 0)) not in (int, float) or ("unbiased" in call and "correction" in call):
        return "arguments"
    if x.dtype not in ops.SUPPORTED_DTYPES:
        return "input dtype"
    if call.get("dtype") is not None and call["dtype"] not in ops.SUPPORTED_DTYPES:
        return "dtype="
    if x.device.type not in ("cpu", "cuda"):
        return "device"
    if x.layout != torch.strided or x.is_nested:
        return "layout"
    # torch carries names over to the result; the ops do not. (dynamo traces no named tensors, nor
    # has_names.)
    if _NAMED_TENSORS and not torch.compiler.is_compiling() and x.has_names():
        return "named tensor"
    if name in _AUTOCAST_FP32 and torch.is_autocast_enabled(x.device.type):
        return "autocast"
    # The ops' autograd is a C++ Function: no forward-mode rule, and torch.func refuses it.
    if torch._C._are_functorch_transforms_active() or torch.autograd.forward_ad._current_level >= 0:
        return "torch.func"
    if dim is None:
        call.pop("dim", None)
    else:
        call["dim"] = dim
    return x, call


class Override(TorchFunctionMode):
    """What override(mode="python") returns; see the module docstring."""

    def __init__(self):
        super().__init__()
        self.routed = collections.Counter()
        self.fallback = collections.Counter()
        self.fallback_reasons = collections.Counter()
        self._depth = 0

    def __enter__(self):
        mode = super().__enter__()
        _active().append(self)
        self._depth = len(_active())
        return mode

    def __exit__(self, *exc):
        _active().pop()
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _ROUTES.get(func)
        # An outer override sees a call only when an inner one gave it back to torch.
        if name is None or self._depth != len(_active()):
            return func(*args, **kwargs)
        parsed = _parse(name, args, kwargs)
        wrapper = "vector_norm" if name == "norm" else name  # torch.norm counts as what it computes
        if isinstance(parsed, str):
            _count("fallback", wrapper, parsed)
            return func(*args, **kwargs)
        _count("routed", wrapper, "")
        x, call = parsed
        return getattr(ops, wrapper)(x, **call)


_OUTCOME_ROUTED = "routed"


def _counts() -> collections.Counter:
    """The process's counters of the dispatcher mode, by (function, outcome)."""
    counts = collections.Counter()
    for row in torch.ops.treduce._override_counts():
        name, outcome, count = row.split("\t")
        counts[name, outcome] = int(count)
    return counts


class DispatcherOverride:
    """What override(mode="dispatcher") returns; see the module docstring."""

    def __init__(self):
        self._start = None
        self._end = None

    def __enter__(self):
        if self._start is not None:
            raise RuntimeError("an override block can be entered only once; call override() again")
        self._start = _counts()
        torch.ops.treduce._override_enter()
        return self

    def __exit__(self, *exc):
        self._end = _counts()  # before closing, so no other block's later calls are counted
        torch.ops.treduce._override_exit()
        return False

    def _delta(self) -> collections.Counter:
        if self._start is None:
            return collections.Counter()
        end = self._end if self._end is not None else _counts()
        return collections.Counter({key: end[key] - self._start[key] for key in end if end[key] > self._start[key]})

    @property
    def routed(self) -> collections.Counter:
        return collections.Counter({name: n for (name, outcome), n in self._delta().items() if outcome == _OUTCOME_ROUTED})

    def _fallbacks_by(self, key: int) -> collections.Counter:
        """Calls left to torch, by function (key 0) or by reason (key 1)."""
        out = collections.Counter()
        for pair, n in self._delta().items():
            if pair[1] != _OUTCOME_ROUTED:
                out[pair[key]] += n
        return out

    @property
    def fallback(self) -> collections.Counter:
        return self._fallbacks_by(0)

    @property
    def fallback_reasons(self) -> collections.Counter:
        return self._fallbacks_by(1)


MODES = ("dispatcher", "python")


def override(mode: str = "dispatcher"):
    """A context manager that routes torch's reductions to torch_reduce while it is open:
    at the dispatcher (the default) or as a Python TorchFunctionMode (``mode="python"``); see the
    module docstring for what each sees and costs."""
    if mode == "dispatcher":
        return DispatcherOverride()
    if mode == "python":
        return Override()
    raise ValueError(f"override: mode must be one of {', '.join(map(repr, MODES))}, not {mode!r}")
