"""The wrappers' eager entry (torch_reduce._C.reduce, csrc/torch/python_entry.cpp): the same op, the
same results, gradients and errors as through torch.ops; declined whenever torch.ops would do
something else with the call (subclasses, modes, tracing)."""

import gc
import sys
import threading
import time
import warnings
import weakref

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import torch_reduce
from torch_reduce import _C, ops
from util import DEVICES, fresh_generator

T = torch.ops.treduce
# Each row of the entry's table: the op through torch.ops with the arguments the entry fills in,
# the wrapper, what its dim is (a list, a required list, one int) and its input dtype.
ROWS = {
    "SUM": (lambda x, d, k: T.sum(x, "auto", d, k), torch_reduce.sum, "list", torch.float32),
    "MEAN": (lambda x, d, k: T.mean(x, "auto", d, k), torch_reduce.mean, "list", torch.float32),
    "AMAX": (lambda x, d, k: T.amax(x, "auto", d, k), torch_reduce.amax, "list", torch.float32),
    "AMIN": (lambda x, d, k: T.amin(x, "auto", d, k), torch_reduce.amin, "list", torch.float32),
    "VAR": (lambda x, d, k: T.var(x, d, keepdim=k), torch_reduce.var, "list", torch.float32),
    "STD": (lambda x, d, k: T.std(x, d, keepdim=k), torch_reduce.std, "list", torch.float32),
    "VAR_MEAN": (lambda x, d, k: T.var_mean(x, d, keepdim=k), torch_reduce.var_mean, "list", torch.float32),
    "STD_MEAN": (lambda x, d, k: T.std_mean(x, d, keepdim=k), torch_reduce.std_mean, "list", torch.float32),
    "NANSUM": (lambda x, d, k: T.nansum(x, d, k), torch_reduce.nansum, "list", torch.float32),
    "NANMEAN": (lambda x, d, k: T.nanmean(x, d, k), torch_reduce.nanmean, "list", torch.float32),
    "LOGSUMEXP": (lambda x, d, k: T.logsumexp(x, d, k), torch_reduce.logsumexp, "required", torch.float32),
    "PROD": (lambda x, d, k: T.prod(x, d, k), torch_reduce.prod, "int", torch.float64),
    "VECTOR_NORM": (lambda x, d, k: T.vector_norm(x, 2, d, k), torch_reduce.vector_norm, "list", torch.float32),
    "ANY": (lambda x, d, k: T.any(x, d, k), torch_reduce.any, "list", torch.uint8),
    "ALL": (lambda x, d, k: T.all(x, d, k), torch_reduce.all, "list", torch.uint8),
    "COUNT_NONZERO": (lambda x, d, k: T.count_nonzero(x, d), torch_reduce.count_nonzero, "list", torch.int32),
    "ARGMAX": (lambda x, d, k: T.argmax(x, d, k), torch_reduce.argmax, "int", torch.float32),
    "ARGMIN": (lambda x, d, k: T.argmin(x, d, k), torch_reduce.argmin, "int", torch.float32),
    "AMINMAX": (lambda x, d, k: T.aminmax(x, dim=d, keepdim=k), torch_reduce.aminmax, "int", torch.float32),
    "MAX": (lambda x, d, k: T.max(x, d, k), torch_reduce.max, "required int", torch.float32),
    "MIN": (lambda x, d, k: T.min(x, d, k), torch_reduce.min, "required int", torch.float32),
}


def _dims(kind):
    if kind in ("int", "required int"):
        return [0, -1, 2] if kind == "required int" else [None, 0, -1, 2]
    lists = [0, -1, (0, 2), [1, -1], [], (2, 0, 1)]
    return lists if kind == "required" else [None] + lists


def _input(dtype, device, gen):
    x = torch.randn(5, 6, 7, generator=gen, device=device)
    if dtype == torch.uint8:
        return (x > 0.5).to(dtype)
    if dtype == torch.int32:
        return (x * 2).round().to(dtype)
    return x.to(dtype)


def _wrapper_call(name, wrapper, x, dim, keepdim):
    if name == "COUNT_NONZERO":
        return wrapper(x, dim)
    if name == "LOGSUMEXP":
        return wrapper(x, dim, keepdim)
    if name == "VECTOR_NORM":
        return wrapper(x, 2, dim, keepdim)
    if name == "AMINMAX":
        return wrapper(x, dim=dim, keepdim=keepdim)
    return wrapper(x, dim, keepdim=keepdim)


def _same(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for u, v in zip(a, b):
            _same(u, v)
        return
    assert a.dtype == b.dtype and a.shape == b.shape and a.device == b.device
    assert torch.equal(a, b) or (a.isnan() == b.isnan()).all() and torch.equal(a.nan_to_num(), b.nan_to_num())


def test_every_row_is_tested():
    rows = {name for name in dir(_C) if name.isupper()}
    assert rows == set(ROWS)
    assert sorted(getattr(_C, name) for name in rows) == list(range(len(rows)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(ROWS))
def test_entry_equals_torch_ops(device, name):
    """Every dims form and keepdim: the entry's result is torch.ops' bit for bit, and the wrapper
    takes the entry (its torch.ops overload is made to fail)."""
    through_ops, wrapper, kind, dtype = ROWS[name]
    gen, seed = fresh_generator(device)
    x = _input(dtype, device, gen)
    for dim in _dims(kind):
        for keepdim in (False, True):
            if name == "COUNT_NONZERO" and keepdim:
                assert _C.reduce(_C.COUNT_NONZERO, x, dim, True, None, None) is NotImplemented
                continue
            expected = through_ops(x, dim, keepdim)
            _same(_C.reduce(getattr(_C, name), x, dim, keepdim, None, None), expected)
            _same(_wrapper_call(name, wrapper, x, dim, keepdim), expected)


@pytest.fixture
def torch_ops_fail(monkeypatch):
    """Every torch.ops overload that ops.py calls, replaced by one that fails."""

    def fails(*args, **kwargs):
        raise AssertionError("called through torch.ops")

    for attr, value in list(vars(ops).items()):
        if isinstance(value, torch._ops.OpOverload):
            monkeypatch.setattr(ops, attr, fails)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_wrapper_takes_the_entry(torch_ops_fail, name):
    """With every torch.ops overload in ops.py replaced by one that fails, a plain call still works
    (it went through the entry) and a declined one fails (it went through torch.ops)."""
    through_ops, wrapper, kind, dtype = ROWS[name]
    x = _input(dtype, "cpu", fresh_generator("cpu")[0])
    dim = 0 if kind != "list" else None
    _wrapper_call(name, wrapper, x, dim, False)
    with pytest.raises(AssertionError, match="through torch.ops"):
        _wrapper_call(name, wrapper, x.as_subclass(_Sub), dim, False)


class _Sub(torch.Tensor):
    pass


def test_declined_calls():
    x = torch.randn(4, 5)

    def r(op, t, dim, keepdim, dtype=None, scalar=None):
        return _C.reduce(op, t, dim, keepdim, dtype, scalar)

    assert r(_C.SUM, x.as_subclass(_Sub), None, False) is NotImplemented
    assert r(_C.SUM, x.to("meta"), None, False) is NotImplemented
    assert r(_C.SUM, x, True, False) is NotImplemented  # a bool dim
    assert r(_C.SUM, x, [0, True], False) is NotImplemented
    assert r(_C.SUM, x, 2**70, False) is NotImplemented
    assert r(_C.SUM, x, 0, 1) is NotImplemented  # keepdim not a bool
    assert r(_C.SUM, x, 0.0, False) is NotImplemented
    assert r(_C.SUM, [1.0, 2.0], None, False) is NotImplemented
    assert r(_C.PROD, x, [0], False) is NotImplemented  # prod takes one int
    assert r(_C.LOGSUMEXP, x, None, False) is NotImplemented  # logsumexp needs dims
    assert r(_C.MAX, x, None, False) is NotImplemented  # max over a dim needs it
    assert r(_C.MIN, x, [0], False) is NotImplemented  # one int
    assert r(_C.AMINMAX, x, (0,), False) is NotImplemented
    assert r(_C.SUM, x, None, False, torch.complex64) is NotImplemented  # not a dtype of ours
    assert r(_C.SUM, x, None, False, "float64") is NotImplemented
    assert r(_C.AMAX, x, None, False, torch.float64) is NotImplemented  # amax takes no dtype
    assert r(_C.SUM, x, None, False, None, 1) is NotImplemented  # sum takes no scalar
    assert r(_C.VAR, x, None, False, None, True) is NotImplemented  # a bool correction
    assert r(_C.VAR, x, None, False, None, torch.tensor(1.0)) is NotImplemented
    with TorchFunctionMode():
        assert r(_C.SUM, x, None, False) is NotImplemented
    with TorchDispatchMode():
        assert r(_C.SUM, x, None, False) is NotImplemented
    assert r(_C.SUM, torch.nn.Parameter(x), None, False) is not NotImplemented
    with pytest.raises(ValueError):
        r(len(ROWS), x, None, False)
    with pytest.raises(TypeError):
        _C.reduce(_C.SUM, x, None, False)


@pytest.mark.parametrize("device", DEVICES)
def test_dtype_and_scalar_arguments(device):
    """dtype= (sum, mean, nansum, nanmean, prod, vector_norm), var's correction and vector_norm's
    order through the entry: torch.ops' results bit for bit, and the wrappers take the entry."""
    gen, seed = fresh_generator(device)
    x = torch.randn(6, 7, generator=gen, device=device)
    xi = (x * 3).round().to(torch.int16)
    R = _C.reduce
    cases = [
        (R(_C.SUM, x, None, False, torch.float64, None), T.sum(x, dtype=torch.float64)),
        (R(_C.SUM, xi, 1, True, torch.int8, None), T.sum(xi, "auto", [1], True, dtype=torch.int8)),
        (R(_C.MEAN, xi, 0, False, torch.float32, None), T.mean(xi, "auto", [0], dtype=torch.float32)),
        (R(_C.NANSUM, x, -1, False, torch.bfloat16, None), T.nansum(x, [-1], dtype=torch.bfloat16)),
        (R(_C.NANMEAN, x, None, False, torch.float64, None), T.nanmean(x, dtype=torch.float64)),
        (R(_C.PROD, xi, 0, False, torch.float64, None), T.prod(xi, 0, dtype=torch.float64)),
        (R(_C.VAR, x, 1, True, None, 0), T.var(x, [1], correction=0, keepdim=True)),
        (R(_C.STD, x, None, False, None, 2.5), T.std(x, correction=2.5)),
        (R(_C.VAR_MEAN, x, 0, False, None, 0), T.var_mean(x, [0], correction=0)),
        (R(_C.STD_MEAN, x, None, False, None, 3), T.std_mean(x, correction=3)),
        (R(_C.VECTOR_NORM, x, -1, False, None, 1), T.vector_norm(x, 1, [-1])),
        (R(_C.VECTOR_NORM, x, None, False, torch.float64, float("inf")), T.vector_norm(x, float("inf"), dtype=torch.float64)),
        (R(_C.VECTOR_NORM, x, 0, True, None, 3.5), T.vector_norm(x, 3.5, [0], True)),
    ]
    for got, expected in cases:
        _same(got, expected)
    # and through the wrappers (which take the entry: the next test)
    _same(torch_reduce.sum(x, dtype=torch.float64), cases[0][1])
    _same(torch_reduce.var(x, 1, keepdim=True, correction=0), cases[6][1])
    _same(torch_reduce.vector_norm(x, 3.5, 0, True), cases[12][1])


def test_wrappers_take_the_entry_with_dtype_and_scalar(torch_ops_fail):
    x = torch.randn(5, 6)
    torch_reduce.sum(x, 0, dtype=torch.float64)
    torch_reduce.mean(x.to(torch.int32), dtype=torch.float32)
    torch_reduce.var(x, 1, correction=0)
    torch_reduce.std_mean(x, correction=2.5)
    torch_reduce.vector_norm(x, float("inf"), dim=1)
    torch_reduce.prod(x, 1, dtype=torch.float64)
    with pytest.raises(AssertionError, match="through torch.ops"):
        torch_reduce.var(x, 1, True)  # unbiased=: through torch.ops
    with pytest.raises(AssertionError, match="through torch.ops"):
        torch_reduce.sum(x, variant="pairwise")


def test_extrema_wrappers_take_the_entry(torch_ops_fail):
    """max and min over every dim (amax's and amin's rows), over a dim, and aminmax: through the
    entry, with torch's named tuples and the values of torch's own functions."""
    x = torch.randn(5, 6)
    assert torch.equal(torch_reduce.max(x), torch.max(x)) and torch.equal(torch_reduce.min(x), torch.min(x))
    for ours, theirs in ((torch_reduce.max(x, 1), torch.max(x, 1)), (torch_reduce.min(x, 0, True), torch.min(x, 0, True)),
                         (torch_reduce.aminmax(x, dim=-1), torch.aminmax(x, dim=-1)),
                         (torch_reduce.aminmax(x), torch.aminmax(x))):
        assert type(ours) is type(theirs)
        for a, b in zip(ours, theirs):
            assert a.dtype == b.dtype and torch.equal(a, b)
    with pytest.raises(AssertionError, match="through torch.ops"):
        torch_reduce.max(x, True)  # a bool dim: through torch.ops


class _Counting(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_modes_still_see_the_wrappers_calls():
    x = torch.randn(8, 3)
    with _Counting() as mode:
        out = torch_reduce.sum(x, 0)
    assert "treduce.sum.default" in mode.ops
    _same(out, T.sum(x, "auto", 0))


@pytest.mark.parametrize("device", DEVICES)
def test_errors_are_torch_ops_errors(device):
    x = torch.randn(3, 4, device=device)
    for call, through_ops in [
        (lambda: torch_reduce.sum(x, 2), lambda: T.sum(x, "auto", 2)),
        (lambda: torch_reduce.amax(x, [0, 0]), lambda: T.amax(x, "auto", [0, 0])),
        (lambda: torch_reduce.argmax(x, -3), lambda: T.argmax(x, -3)),
        (lambda: torch_reduce.mean(x.int()), lambda: T.mean(x.int())),
        (lambda: torch_reduce.amax(x[:, :0], 1), lambda: T.amax(x[:, :0], "auto", 1)),
    ]:
        with pytest.raises(Exception) as ours:
            call()
        with pytest.raises(Exception) as theirs:
            through_ops()
        assert type(ours.value) is type(theirs.value)
        assert str(ours.value) == str(theirs.value)


def test_warnings_reach_python():
    """As torch.var's: a Python UserWarning (torch.ops leaves C++ warnings to stderr), with the same
    text up to the C++ source location."""
    x = torch.randn(1)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        out = torch_reduce.var(x)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        expected = torch.var(x)
    _same(out, expected)
    assert len(ours) == len(theirs) == 1 and ours[0].category is theirs[0].category is UserWarning
    assert str(ours[0].message).split(" (Triggered")[0] == str(theirs[0].message).split(" (Triggered")[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="degrees of freedom"):
            torch_reduce.var(x)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_and_modes_through_the_entry(device):
    x = torch.randn(6, 5, device=device, dtype=torch.float64, requires_grad=True)
    out = torch_reduce.sum(x, 1)
    assert out.grad_fn is not None
    out.backward(torch.arange(6.0, device=device, dtype=torch.float64))
    assert torch.equal(x.grad, torch.arange(6.0, device=device, dtype=torch.float64)[:, None].expand(6, 5))
    with torch.no_grad():
        assert torch_reduce.sum(x, 1).grad_fn is None
    with torch.inference_mode():
        y = torch_reduce.amax(x, 0)
    assert y.is_inference() and not y.requires_grad


def test_no_reference_leaks():
    x = torch.randn(64)
    before = sys.getrefcount(x)
    for _ in range(1000):
        out = torch_reduce.sum(x)
        pair = torch_reduce.var_mean(x)
    refs = (sys.getrefcount(x) - before, sys.getrefcount(out), sys.getrefcount(pair[0]))
    assert refs == (0, 2, 2)  # (the name or the tuple, and getrefcount's argument)
    alive = weakref.ref(x)
    del x, out, pair
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize("name", ["SUM", "VAR_MEAN", "ARGMAX", "LOGSUMEXP", "ANY"])
def test_dynamo_traces_the_wrappers(name):
    """Under torch.compile the wrappers call torch.ops (dynamo cannot trace the entry): fullgraph
    compiles, and the graph holds the op."""
    through_ops, wrapper, kind, dtype = ROWS[name]
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    torch._dynamo.reset()
    compiled = torch.compile(lambda t: _wrapper_call(name, wrapper, t, 1, False), backend=backend, fullgraph=True)
    x = _input(dtype, "cpu", fresh_generator("cpu")[0])
    _same(compiled(x), through_ops(x, 1, False))
    assert any(f"treduce.{name.lower()}" in str(node.target) for node in graphs[0].graph.nodes)


def test_the_gil_is_released_during_the_call():
    """As torch's own ops: another Python thread runs while a long reduction runs in the entry.
    The main thread's longest pause stays under the worker's shortest call (with the GIL held
    it spans a whole call: ratio >= 1). Best of five tries, for a busy machine."""
    threads, interval = torch.get_num_threads(), sys.getswitchinterval()
    torch.set_num_threads(1)  # one core for the reduction, the other for this thread
    sys.setswitchinterval(1e-4)  # the GIL handed over within 0.1 ms of a request, not 5
    try:
        x = torch.randn(2**25)
        ratios = []
        for _ in range(5):
            calls = []
            done = threading.Event()

            def work():
                for _ in range(4):
                    start = time.perf_counter()
                    torch_reduce.sum(x)
                    calls.append(time.perf_counter() - start)
                done.set()

            worker = threading.Thread(target=work)
            longest, last = 0.0, time.perf_counter()
            worker.start()
            while not done.is_set():
                now = time.perf_counter()
                longest, last = max(longest, now - last), now
            worker.join()
            ratios.append(longest / min(calls))
            if ratios[-1] < 0.75:
                break
    finally:
        torch.set_num_threads(threads)
        sys.setswitchinterval(interval)
    assert min(ratios) < 0.75, ratios


def test_tracers_record_the_op():
    """torch.jit.trace (the dispatcher's Tracer key), torch.export strict (dynamo) and not strict
    (fake tensors: declined), make_fx (a dispatch mode: declined) and torch.fx (proxies: declined)
    all see treduce's ops in a wrapper's call."""
    from torch.fx.experimental.proxy_tensor import make_fx

    class M(torch.nn.Module):
        def forward(self, x):
            return torch_reduce.sum(x, -1) + torch_reduce.amax(x)

    x = torch.randn(4, 5)
    expected = M()(x)
    traced = torch.jit.trace(M(), (x,))
    assert "treduce::sum" in str(traced.graph) and "treduce::amax" in str(traced.graph)
    assert torch.equal(traced(torch.ones(4, 5)), M()(torch.ones(4, 5)))
    for strict in (True, False):
        ep = torch.export.export(M(), (x,), strict=strict)
        targets = {str(n.target) for n in ep.graph.nodes}
        assert {"treduce.sum.default", "treduce.amax.default"} <= targets, strict
        _same(ep.module()(x), expected)
    for gm in (make_fx(M())(x), torch.fx.symbolic_trace(M())):
        assert {"treduce.sum.default", "treduce.amax.default"} <= {str(n.target) for n in gm.graph.nodes}
        _same(gm(x), expected)
