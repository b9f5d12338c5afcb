"""torch_reduce.override(): which calls it routes, which it leaves to torch, and what they return."""

import threading

import pytest
import torch

import torch_reduce
from torch_reduce._table import OPS
from torch_reduce.override import Override
from util import DEVICES, cuda_only, fresh_generator


class Subclass(torch.Tensor):
    pass


# Named tensors exist up to torch 2.12; torch 2.13 removed them.
NAMED_TENSORS = hasattr(torch.Tensor, "has_names")
needs_named_tensors = pytest.mark.skipif(not NAMED_TENSORS, reason="this torch has no named tensors")


def namespace(device):
    """Fresh random tensors the expressions below use, with the seed for failure messages."""
    gen, seed = fresh_generator(device)
    x = torch.randn(4, 5, 6, generator=gen, device=device)
    return {
        "torch": torch,
        "x": x,  # float32
        "b": torch.rand(4, 5, 6, generator=gen, device=device) < 0.5,
        "i": torch.randint(-1000, 1000, (4, 5, 6), generator=gen, device=device, dtype=torch.int32),
        "c": x.to(torch.complex64),
        "n": x.rename("A", "B", "C") if NAMED_TENSORS else None,
        "s": x.as_subclass(Subclass),
        "sp": x.to_sparse(),
        "m": x.to("meta"),
        "out": torch.empty(0, device=device),
    }, seed


# Each calling form once: (expression, the function it is counted under).
ROUTED = [
    ("torch.sum(x)", "sum"),
    ("x.sum()", "sum"),
    ("torch.sum(x, 1)", "sum"),
    ("x.sum(-1, True)", "sum"),
    ("torch.sum(x, dim=(0, 2), keepdim=True)", "sum"),
    ("x.sum(dim=[2, 0])", "sum"),
    ("torch.sum(input=x, dim=1)", "sum"),
    ("torch.sum(x, dim=None, keepdim=True)", "sum"),
    ("x.sum(dim=[])", "sum"),
    ("x.sum(dtype=torch.float64)", "sum"),
    ("torch.sum(x, 2, dtype=torch.float64)", "sum"),
    ("b.sum(-1)", "sum"),
    ("torch.sum(i, (1, 2), keepdim=True)", "sum"),
    ("torch.mean(x)", "mean"),
    ("x.mean(1)", "mean"),
    ("x.mean(-1, True)", "mean"),
    ("torch.mean(x, dim=[0, 1], keepdim=True)", "mean"),
    ("x.mean(dtype=torch.float64)", "mean"),
    ("torch.mean(i, 1, dtype=torch.float32)", "mean"),
    ("x.mean(dim=None)", "mean"),
    ("torch.amax(x)", "amax"),
    ("x.amax(1)", "amax"),
    ("torch.amax(x, (0, 2), True)", "amax"),
    ("x.amax(dim=-1, keepdim=True)", "amax"),
    ("torch.amax(input=x, dim=())", "amax"),
    ("i.amax(0)", "amax"),
    ("torch.amin(x)", "amin"),
    ("x.amin(2)", "amin"),
    ("torch.amin(x, [1, 0], True)", "amin"),
    ("b.amin(dim=1, keepdim=True)", "amin"),
    ("torch.var(x)", "var"),
    ("x.var(1)", "var"),
    ("torch.var(x, False)", "var"),
    ("x.var(2, False, True)", "var"),
    ("torch.var(x, dim=(0, 2), correction=0.5, keepdim=True)", "var"),
    ("torch.std(x)", "std"),
    ("x.std(-1, unbiased=False)", "std"),
    ("torch.std(input=x, dim=[1], correction=2)", "std"),
    ("torch.var_mean(x, 1)", "var_mean"),
    ("torch.var_mean(x, unbiased=False)", "var_mean"),
    ("torch.std_mean(x, dim=[0, 2], keepdim=True, correction=0)", "std_mean"),
    ("torch.nansum(x)", "nansum"),
    ("x.nansum(1, keepdim=True)", "nansum"),
    ("torch.nansum(x, (0, 2), dtype=torch.float64)", "nansum"),
    ("torch.logsumexp(x, 1)", "logsumexp"),
    ("x.logsumexp((0, 2), True)", "logsumexp"),
    ("torch.logsumexp(x, dim=-1, keepdim=True)", "logsumexp"),
    ("torch.prod(x)", "prod"),
    ("x.prod(1)", "prod"),
    ("torch.prod(x, -1, True, dtype=torch.float64)", "prod"),
    ("i.prod(dim=2)", "prod"),
    ("torch.linalg.vector_norm(x)", "vector_norm"),
    ("torch.linalg.vector_norm(x, 1, (0, 2), True)", "vector_norm"),
    ("torch.linalg.vector_norm(x, ord=float('inf'), dim=-1, dtype=torch.float64)", "vector_norm"),
    ("torch.linalg.vector_norm(x, 0.5, 1)", "vector_norm"),
    ("torch.norm(x)", "vector_norm"),
    ("x.norm(3, 1, True)", "vector_norm"),
    ("torch.norm(x, p='fro', dim=(0, 1))", "vector_norm"),
    ("x.norm(p=float('-inf'), dim=2)", "vector_norm"),
    ("torch.any(x)", "any"),
    ("x.any(1)", "any"),
    ("torch.any(b, (0, 2), True)", "any"),
    ("b.all()", "all"),
    ("torch.all(i, dim=-1, keepdim=True)", "all"),
    ("x.all(dim=[1])", "all"),
    ("torch.count_nonzero(x)", "count_nonzero"),
    ("i.count_nonzero(1)", "count_nonzero"),
    ("torch.count_nonzero(b, dim=(0, 2))", "count_nonzero"),
    ("torch.aminmax(x)", "aminmax"),
    ("x.aminmax(dim=1, keepdim=True)", "aminmax"),
    ("torch.aminmax(i, dim=-1)", "aminmax"),
    ("torch.max(x)", "max"),
    ("x.max(1)", "max"),
    ("torch.min(x, dim=-1, keepdim=True)", "min"),
    ("i.min()", "min"),
    ("x.argmax()", "argmax"),
    ("torch.argmin(x, 1, True)", "argmin"),
    ("i.argmax(dim=0)", "argmax"),
]

ROUTED_TOO = "routed"  # a fallback of the Python mode that the dispatcher mode routes
UNSEEN = "unseen"  # a call that never reaches the CPU and CUDA kernels the dispatcher mode replaces


def fallback(expr, name, reason, dispatcher, *marks):
    """A call the Python mode leaves to torch: (expression, function, its reason, and what the
    dispatcher mode does with it: a reason, ROUTED_TOO or UNSEEN)."""
    return pytest.param(expr, name, reason, dispatcher, marks=marks, id=expr)


FALLBACKS = [
    fallback("torch.sum(x, 1, out=out)", "sum", "out=", "out="),
    fallback("torch.mean(x, (0, 1), out=out)", "mean", "out=", "out="),
    fallback("torch.amax(x, 1, out=out)", "amax", "out=", "out="),
    fallback("torch.amin(x, 2, True, out=out)", "amin", "out=", "out="),
    fallback("torch.var(x, 1, out=out)", "var", "out=", "out="),
    fallback("torch.std(x, (0, 1), correction=0, out=out)", "std", "out=", "out="),
    fallback("torch.var(c, 1)", "var", "input dtype", "input dtype"),
    fallback("torch.nansum(x, 1, out=out)", "nansum", "out=", "out="),
    fallback("torch.prod(x, 1, out=out)", "prod", "out=", "out="),
    fallback("torch.linalg.vector_norm(x, 2, 1, out=out)", "vector_norm", "out=", "out="),
    fallback("torch.any(x, 1, out=torch.empty(0, dtype=torch.bool, device=x.device))", "any", "out=", "out="),
    fallback("torch.aminmax(x, dim=1, out=(out, out.clone()))", "aminmax", "out=", "out="),
    fallback("torch.any(c, 1)", "any", "input dtype", "input dtype"),
    fallback("torch.argmax(x, 1, out=torch.empty(0, dtype=torch.int64, device=x.device))", "argmax", "out=", "out="),
    # torch.max(x, other) is elementwise (aten::maximum): not a reduction.
    fallback("torch.max(x, x)", "max", "arguments", UNSEEN),
    fallback("n.sum('C')", "sum", "named dim", "named tensor", needs_named_tensors),
    fallback("n.mean(['A', 'C'], keepdim=True)", "mean", "named dim", "named tensor", needs_named_tensors),
    fallback("n.sum(1)", "sum", "named tensor", "named tensor", needs_named_tensors),
    fallback("c.sum()", "sum", "input dtype", "input dtype"),
    fallback("torch.mean(c, 1)", "mean", "input dtype", "input dtype"),
    fallback("x.sum(dtype=torch.complex128)", "sum", "dtype=", "dtype="),
    # torch's argument parser knows the aliases before aten sees the call.
    fallback("torch.sum(x, axis=1)", "sum", "arguments", ROUTED_TOO),
    fallback("x.amax(1, keepdims=True)", "amax", "arguments", ROUTED_TOO),
    # A subclass without a __torch_function__ of its own reaches aten as a plain tensor.
    fallback("s.sum(1)", "sum", "tensor type", ROUTED_TOO),
    fallback("torch.amin(s)", "amin", "tensor type", ROUTED_TOO),
    # torch's sparse sum adds the values with a dense aten::sum.
    fallback("sp.sum()", "sum", "layout", ROUTED_TOO),
    fallback("torch.amax(m, 1)", "amax", "device", UNSEEN),
]


def assert_same(got, expected, seed):
    assert type(got) is type(expected), f"seed {seed}"
    if isinstance(expected, tuple):  # var_mean, std_mean
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same(g, e, seed)
        return
    if NAMED_TENSORS:
        assert got.names == expected.names, f"seed {seed}"
    if expected.device.type == "meta":
        assert got.shape == expected.shape and got.dtype == expected.dtype
        return
    if NAMED_TENSORS:
        got, expected = got.rename(None), expected.rename(None)
    torch.testing.assert_close(got, expected, msg=lambda m: f"{m} (seed {seed})")


MODES = ("dispatcher", "python")


@pytest.mark.filterwarnings("ignore:Named tensors")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr,name", ROUTED, ids=[e for e, _ in ROUTED])
def test_routed(device, expr, name, mode):
    ns, seed = namespace(device)
    expected = eval(expr, ns)
    with torch_reduce.override(mode) as ov:
        got = eval(expr, ns)
    assert ov.routed == {name: 1} and not ov.fallback and not ov.fallback_reasons
    assert_same(got, expected, seed)


@pytest.mark.filterwarnings("ignore:Named tensors", "ignore:Sparse")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr,name,reason,dispatcher", FALLBACKS)
def test_fallback(device, expr, name, reason, dispatcher, mode):
    ns, seed = namespace(device)
    expected = eval(expr, ns)  # out= calls return `out`, which the second call rewrites: copied
    expected = type(expected)([e.clone() for e in expected]) if isinstance(expected, tuple) else expected.clone()
    with torch_reduce.override(mode) as ov:
        got = eval(expr, ns)
    if mode == "dispatcher":
        reason = dispatcher
    if reason == ROUTED_TOO:
        assert ov.routed == {name: 1} and not ov.fallback and not ov.fallback_reasons
    elif reason == UNSEEN:
        assert not ov.routed and not ov.fallback and not ov.fallback_reasons
    elif mode == "python":
        assert ov.fallback == {name: 1} and ov.fallback_reasons == {reason: 1} and not ov.routed
    else:
        # torch's own kernel may reduce through aten again (CPU's mean sums into its result
        # through aten::sum.IntList_out), and the dispatcher mode counts that call too.
        assert ov.fallback[name] == 1 and reason in ov.fallback_reasons and not ov.routed
    assert_same(got, expected, seed)


# Every route of the op table: torch's function and, where torch has one, the Tensor method.
TABLE_ROUTES = [pytest.param(op.name, route, id=f"{op.name}-{('function', 'method')[k]}")
                for op in OPS for k, route in enumerate(op.routes)]


@pytest.mark.filterwarnings("ignore:Named tensors")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,route", TABLE_ROUTES)
def test_every_route_of_the_table(device, name, route):
    """The Python mode sends each route of the table, called with dim= (which the route's
    parameters in the table must name), to the op's wrapper. (The dispatcher mode counts aten's
    functions instead: torch.nanmean is torch's composite over nansum and sum.)"""
    ns, seed = namespace(device)
    expected = route(ns["x"], dim=1)
    with torch_reduce.override("python") as ov:
        got = route(ns["x"], dim=1)
    assert ov.routed == {name: 1} and not ov.fallback and not ov.fallback_reasons
    assert_same(got, expected, seed)


def test_unknown_mode():
    with pytest.raises(ValueError, match="mode must be one of 'dispatcher', 'python'"):
        torch_reduce.override("graph")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("device", DEVICES)
def test_autocast(device, mode):
    """CUDA autocast runs torch.sum in float32 and mean in the input's dtype. The Python mode leaves
    sum to torch; the dispatcher mode gets both calls after autocast has cast their inputs."""
    x = torch.randn(64, 33, device=device)
    with torch.autocast(device, dtype=torch.bfloat16):
        expected = (x @ x.T).sum(1), (x @ x.T).mean(1)
        with torch_reduce.override(mode) as ov:
            got = (x @ x.T).sum(1), (x @ x.T).mean(1)
    if mode == "python":
        assert ov.routed == {"mean": 1} and ov.fallback_reasons == {"autocast": 1}
    else:
        assert ov.routed == {"sum": 1, "mean": 1} and not ov.fallback
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("mode", MODES)
def test_autograd_transforms(mode):
    """The ops have no forward-mode rule and torch.func does not take their C++ autograd, so the
    Python mode leaves these calls to torch; the dispatcher mode is below torch.func and forward
    AD, which apply torch's own rules, and routes every reduction they make."""
    x = torch.randn(4, 5)
    with torch_reduce.override(mode) as ov:
        grad = torch.func.grad(lambda t: t.amax(1).sum())(x)
        _, tangent = torch.func.jvp(lambda t: t.sum(1), (x,), (torch.ones_like(x),))
        with torch.autograd.forward_ad.dual_level():
            dual = torch.autograd.forward_ad.make_dual(x, torch.ones_like(x))
            forward = torch.autograd.forward_ad.unpack_dual(dual.mean(0)).tangent
        batched = torch.vmap(lambda t: t.amin(0))(x)
    if mode == "python":
        assert ov.fallback == {"amax": 1, "sum": 2, "mean": 1, "amin": 1}
        assert ov.fallback_reasons == {"torch.func": 5}
    else:
        assert not ov.fallback and set(ov.routed) == {"sum", "mean", "amax", "amin"}
    torch.testing.assert_close(grad, torch.func.grad(lambda t: t.amax(1).sum())(x))
    torch.testing.assert_close(tangent, torch.full((4,), 5.0))
    torch.testing.assert_close(forward, torch.ones(5))
    torch.testing.assert_close(batched, x.amin(1))


@pytest.mark.parametrize("device", DEVICES)
def test_broadcast_backward_is_routed(device):
    """Autograd undoes a broadcast with a sum made in C++ (sum_to_size): the dispatcher mode
    routes it, the Python mode never sees it."""
    gen, seed = fresh_generator(device)
    a = torch.randn(4, 5, generator=gen, device=device, requires_grad=True)
    b = torch.randn(5, generator=gen, device=device, requires_grad=True)
    (a * b).sum().backward()
    expected = a.grad.clone(), b.grad.clone()
    a.grad = b.grad = None
    for mode, routed in (("dispatcher", 2), ("python", 1)):
        with torch_reduce.override(mode) as ov:
            (a * b).sum().backward()
        assert ov.routed == {"sum": routed} and not ov.fallback, mode
        torch.testing.assert_close((a.grad, b.grad), expected, msg=lambda m: f"{m} (seed {seed})")
        a.grad = b.grad = None


@pytest.mark.parametrize("mode", MODES)
def test_errors_are_torchs(mode):
    """Routed calls raise what torch raises. torch's argument parser rejects a call that fits no
    signature before any mode sees it."""
    x = torch.randn(3, 4)
    with torch_reduce.override(mode) as ov:
        with pytest.raises(IndexError):
            x.sum(2)
        with pytest.raises(RuntimeError):
            torch.mean(x.int())
        with pytest.raises(TypeError):
            torch.sum(x, keepdim=True)
        with pytest.raises(TypeError):
            x.amax(1, dtype=torch.float64)
    assert ov.routed == {"sum": 1, "mean": 1} and not ov.fallback


def active_overrides():
    """The open Python-mode blocks of this thread, and whether aten's sum has the dispatcher
    mode's kernel (what torch's dispatcher lists for it)."""
    modes = [m for m in torch.overrides._get_current_function_mode_stack() if isinstance(m, Override)]
    registered = "aten_override.cpp" in torch._C._dispatch_dump("aten::sum.dim_IntList")
    return modes + (["dispatcher"] if registered else [])


@pytest.mark.parametrize("mode", MODES)
def test_nothing_is_active_outside_the_block(mode):
    x = torch.randn(10)
    assert not active_overrides()  # not on import either
    with torch_reduce.override(mode) as ov:
        assert active_overrides()
        x.sum()
    x.sum()
    assert ov.routed == {"sum": 1} and not active_overrides()
    with pytest.raises(ZeroDivisionError):
        with torch_reduce.override(mode) as ov:
            x.amax()
            1 / 0
    x.amax()
    assert ov.routed == {"amax": 1} and not active_overrides()


def test_a_block_is_entered_once():
    block = torch_reduce.override()
    with block:
        pass
    with pytest.raises(RuntimeError, match="entered only once"):
        with block:
            pass
    assert not active_overrides()


@pytest.mark.parametrize("mode", MODES)
def test_nested(mode):
    """Python mode: the innermost block routes and counts; what it gives back to torch, the outer
    one leaves. Dispatcher mode: every open block counts every call; the kernels stay until the
    outer block closes."""
    x, out = torch.randn(3, 4), torch.empty(3)
    with torch_reduce.override(mode) as outer:
        x.sum()
        with torch_reduce.override(mode) as inner:
            x.sum(1)
            torch.sum(x, 1, out=out)
            assert len(active_overrides()) == (2 if mode == "python" else 1)
        assert active_overrides()
        x.amax(0)
    if mode == "python":
        assert outer.routed == {"sum": 1, "amax": 1} and not outer.fallback
    else:
        assert outer.routed == {"sum": 2, "amax": 1} and outer.fallback_reasons == {"out=": 1}
    assert inner.routed == {"sum": 1} and inner.fallback == {"sum": 1}
    assert not active_overrides()


def test_threads_share_the_dispatcher_mode():
    """The dispatcher's tables are the process's: a block open in one thread routes every
    thread's calls, and the kernels stay until the last block, in any thread, closes."""
    x = torch.randn(6, 7)
    a_entered, a_may_exit = threading.Event(), threading.Event()
    blocks = {}

    def thread_a():
        with torch_reduce.override() as ov:
            blocks["a"] = ov
            a_entered.set()
            a_may_exit.wait(10)

    def thread_b():
        with torch_reduce.override() as ov:
            blocks["b"] = ov

    a = threading.Thread(target=thread_a)
    a.start()
    assert a_entered.wait(10)
    x.sum(0)  # this thread has no block: routed while a's is open, and counted by it
    b = threading.Thread(target=thread_b)
    b.start()
    b.join(10)
    assert active_overrides() == ["dispatcher"]  # b has closed, a is open: the kernels stay
    x.amax(1)
    a_may_exit.set()
    a.join(10)
    assert not active_overrides()
    x.mean()  # no block open: torch's own kernel, counted by none
    assert blocks["a"].routed == {"sum": 1, "amax": 1} and blocks["b"].routed == {}


@cuda_only
def test_dispatcher_mode_in_a_cuda_graph():
    """torch.sum captured under the override runs torch_reduce's kernel on each replay."""
    gen, seed = fresh_generator("cuda")
    x = torch.randn(300, 257, generator=gen, device="cuda")
    with torch_reduce.override() as ov:
        torch.sum(x, -1)  # warm up outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = torch.sum(x, -1)
    assert ov.routed == {"sum": 2}
    for _ in range(3):
        x.copy_(torch.randn(x.shape, generator=gen, device="cuda"))
        graph.replay()
        torch.testing.assert_close(out, x.sum(-1), msg=lambda m: f"{m} (seed {seed})")


def model_reductions(x, mask):
    """Every routed function, in the forms models use: 4 sums, 2 means, 1 amax, 1 amin."""
    m = mask.unsqueeze(-1)
    masked_mean = (x * m).sum(1) / m.sum(1)
    peak = torch.amax(x, dim=1).sum()
    spread = torch.mean(x, (0, 1), keepdim=True).sum(dtype=torch.float64)
    return masked_mean.mean(), peak, x.amin(), spread


EXPECTED_ROUTED = {"sum": 4, "mean": 2, "amax": 1, "amin": 1}


def model_inputs(device):
    gen, seed = fresh_generator(device)
    x = torch.randn(8, 16, 32, generator=gen, device=device)
    return x, torch.rand(8, 16, generator=gen, device=device) < 0.7, seed


def check_compiled(compiled, device, mode="python"):
    """Four calls of `compiled` under one override block (CUDA graph trees warm up, record, then
    replay), on new data each, against torch."""
    runs = []
    with torch_reduce.override(mode) as ov:
        for _ in range(4):
            x, mask, seed = model_inputs(device)
            # clone: a CUDA graph's next replay writes over its outputs
            runs.append((x, mask, seed, [t.clone() for t in compiled(x, mask)]))
    for x, mask, seed, got in runs:
        # Float32 tolerances: `spread` adds float32 means, whose last bit depends on their order.
        torch.testing.assert_close(got, list(model_reductions(x, mask)), rtol=1e-5, atol=1e-5,
                                   msg=lambda m: f"{m} (seed {seed})")
    return ov


def reductions_in(gm):
    """The treduce calls and the torch reductions in a dynamo graph."""
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
    ours = [n for n in calls if "treduce" in str(n.target)]
    torchs = [n for n in calls if n.target in (torch.sum, torch.mean, torch.amax, torch.amin)
              or n.target in ("sum", "mean", "amax", "amin")]
    return len(ours), len(torchs)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_puts_the_ops_in_the_graph(device):
    """Python mode: dynamo traces the override into one graph of treduce calls, and does not
    recompile for new data or a new override block; outside the block the same function is
    torch's again."""
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(model_reductions, fullgraph=True, backend=backend)
    blocks = [check_compiled(compiled, device) for _ in range(2)]
    assert len(graphs) == 1 and reductions_in(graphs[0]) == (8, 0)
    # Counted when traced, not each time the compiled code runs.
    assert blocks[0].routed == EXPECTED_ROUTED and blocks[1].routed == {}
    compiled(*model_inputs(device)[:2])
    assert len(graphs) == 2 and reductions_in(graphs[1]) == (0, 8)


def test_compile_with_the_block_inside():
    """Python mode, entered inside the compiled function: the block routes as well, and counts
    nothing."""
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(x, mask):
        with torch_reduce.override("python") as ov:
            return model_reductions(x, mask), ov.routed

    x, mask, seed = model_inputs("cpu")
    got, routed = torch.compile(f, fullgraph=True, backend=backend)(x, mask)
    torch.testing.assert_close(got, model_reductions(x, mask), rtol=1e-5, atol=1e-5,
                               msg=lambda m: f"{m} (seed {seed})")
    assert reductions_in(graphs[0]) == (8, 0) and routed == {} and not active_overrides()


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_inductor(device):
    torch._dynamo.reset()
    ov = check_compiled(torch.compile(model_reductions, fullgraph=True), device)
    assert ov.routed == EXPECTED_ROUTED and not ov.fallback


@pytest.mark.parametrize("device", DEVICES)
def test_compile_keeps_inductors_reductions_in_dispatcher_mode(device):
    """Dispatcher mode: dynamo traces torch's reductions, and inductor generates their code with
    the ops around them, so nothing reaches torch_reduce; a backend that runs the traced graph
    eagerly calls aten, and is routed on every run."""
    torch._dynamo.reset()
    ov = check_compiled(torch.compile(model_reductions, fullgraph=True), device, "dispatcher")
    assert not ov.routed and not ov.fallback
    torch._dynamo.reset()
    ov = check_compiled(torch.compile(model_reductions, fullgraph=True, backend="eager"), device, "dispatcher")
    assert ov.routed == {name: 4 * n for name, n in EXPECTED_ROUTED.items()} and not ov.fallback


@cuda_only
def test_compile_reduce_overhead():
    """Python mode: CUDA graphs of the routed ops, replayed with new data."""
    torch._dynamo.reset()
    ov = check_compiled(torch.compile(model_reductions, mode="reduce-overhead", fullgraph=True), "cuda")
    assert ov.routed == EXPECTED_ROUTED


@pytest.mark.filterwarnings("ignore:Torchinductor does not support code generation for complex")
@pytest.mark.parametrize("device", DEVICES)
def test_compile_keeps_fallbacks_torchs(device):
    torch._dynamo.reset()
    x = torch.randn(6, 7, device=device, dtype=torch.float64)

    def f(t):
        return torch.sum(t.to(torch.complex64), 1).abs() + t.amax(1)

    with torch_reduce.override("python") as ov:
        got = torch.compile(f, fullgraph=True)(x)
    torch.testing.assert_close(got, f(x))
    assert ov.routed == {"amax": 1} and ov.fallback_reasons == {"input dtype": 1}
