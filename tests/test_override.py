"""torch_reduce.override(): which calls it routes, which it leaves to torch, and what they return."""

import pytest
import torch

import torch_reduce
from torch_reduce.override import Override
from util import DEVICES, cuda_only, fresh_generator


class Subclass(torch.Tensor):
    pass


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
        "n": x.rename("A", "B", "C"),
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
]

# Calls torch_reduce does not take: (expression, function, reason).
FALLBACKS = [
    ("torch.sum(x, 1, out=out)", "sum", "out="),
    ("torch.mean(x, (0, 1), out=out)", "mean", "out="),
    ("torch.amax(x, 1, out=out)", "amax", "out="),
    ("torch.amin(x, 2, True, out=out)", "amin", "out="),
    ("n.sum('C')", "sum", "named dim"),
    ("n.mean(['A', 'C'], keepdim=True)", "mean", "named dim"),
    ("n.sum(1)", "sum", "named tensor"),
    ("c.sum()", "sum", "input dtype"),
    ("torch.mean(c, 1)", "mean", "input dtype"),
    ("x.sum(dtype=torch.complex128)", "sum", "dtype="),
    ("torch.sum(x, axis=1)", "sum", "arguments"),
    ("x.amax(1, keepdims=True)", "amax", "arguments"),
    ("s.sum(1)", "sum", "tensor type"),
    ("torch.amin(s)", "amin", "tensor type"),
    ("sp.sum()", "sum", "layout"),
    ("torch.amax(m, 1)", "amax", "device"),
]


def assert_same(got, expected, seed):
    assert type(got) is type(expected), f"seed {seed}"
    assert got.names == expected.names, f"seed {seed}"
    if expected.device.type == "meta":
        assert got.shape == expected.shape and got.dtype == expected.dtype
    else:
        torch.testing.assert_close(got.rename(None), expected.rename(None),
                                   msg=lambda m: f"{m} (seed {seed})")


@pytest.mark.filterwarnings("ignore:Named tensors")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr,name", ROUTED, ids=[e for e, _ in ROUTED])
def test_routed(device, expr, name):
    ns, seed = namespace(device)
    expected = eval(expr, ns)
    with torch_reduce.override() as ov:
        got = eval(expr, ns)
    assert ov.routed == {name: 1} and not ov.fallback and not ov.fallback_reasons
    assert_same(got, expected, seed)


@pytest.mark.filterwarnings("ignore:Named tensors", "ignore:Sparse")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr,name,reason", FALLBACKS, ids=[e for e, _, _ in FALLBACKS])
def test_fallback(device, expr, name, reason):
    ns, seed = namespace(device)
    expected = eval(expr, ns).clone()  # out= calls return `out`, which the second call rewrites
    with torch_reduce.override() as ov:
        got = eval(expr, ns)
    assert ov.fallback == {name: 1} and ov.fallback_reasons == {reason: 1} and not ov.routed
    assert_same(got, expected, seed)


@pytest.mark.parametrize("device", DEVICES)
def test_sum_under_autocast_is_left_to_torch(device):
    """CUDA autocast runs torch.sum in float32 and mean in the input's dtype."""
    x = torch.randn(64, 33, device=device)
    with torch.autocast(device, dtype=torch.bfloat16):
        expected = (x @ x.T).sum(1), (x @ x.T).mean(1)
        with torch_reduce.override() as ov:
            got = (x @ x.T).sum(1), (x @ x.T).mean(1)
    assert ov.routed == {"mean": 1} and ov.fallback_reasons == {"autocast": 1}
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)


def test_autograd_transforms_are_left_to_torch():
    """The ops have no forward-mode rule and torch.func does not take their C++ autograd."""
    x = torch.randn(4, 5)
    with torch_reduce.override() as ov:
        grad = torch.func.grad(lambda t: t.amax(1).sum())(x)
        _, tangent = torch.func.jvp(lambda t: t.sum(1), (x,), (torch.ones_like(x),))
        with torch.autograd.forward_ad.dual_level():
            dual = torch.autograd.forward_ad.make_dual(x, torch.ones_like(x))
            forward = torch.autograd.forward_ad.unpack_dual(dual.mean(0)).tangent
    assert ov.fallback == {"amax": 1, "sum": 2, "mean": 1} and ov.fallback_reasons == {"torch.func": 4}
    torch.testing.assert_close(grad, torch.func.grad(lambda t: t.amax(1).sum())(x))
    torch.testing.assert_close(tangent, torch.full((4,), 5.0))
    torch.testing.assert_close(forward, torch.ones(5))


def test_errors_are_torchs():
    """Routed calls raise what torch raises. torch's argument parser rejects a call that fits no
    signature before any mode sees it."""
    x = torch.randn(3, 4)
    with torch_reduce.override() as ov:
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
    return [m for m in torch.overrides._get_current_function_mode_stack() if isinstance(m, Override)]


def test_nothing_is_active_outside_the_block():
    x = torch.randn(10)
    assert not active_overrides()  # not on import either
    with torch_reduce.override() as ov:
        x.sum()
    x.sum()
    assert ov.routed == {"sum": 1} and not active_overrides()
    with pytest.raises(ZeroDivisionError):
        with torch_reduce.override() as ov:
            x.amax()
            1 / 0
    x.amax()
    assert ov.routed == {"amax": 1} and not active_overrides()


def test_nested():
    """The innermost block routes and counts; what it gives back to torch, the outer one leaves."""
    x, out = torch.randn(3, 4), torch.empty(3)
    with torch_reduce.override() as outer:
        x.sum()
        with torch_reduce.override() as inner:
            x.sum(1)
            torch.sum(x, 1, out=out)
            assert len(active_overrides()) == 2
        x.amax(0)
    assert outer.routed == {"sum": 1, "amax": 1} and not outer.fallback
    assert inner.routed == {"sum": 1} and inner.fallback == {"sum": 1}
    assert not active_overrides()


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


def check_compiled(compiled, device):
    """Four calls of `compiled` under one override block (CUDA graph trees warm up, record, then
    replay), on new data each, against torch."""
    runs = []
    with torch_reduce.override() as ov:
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
    """dynamo traces the override into one graph of treduce calls, and does not recompile for new
    data or a new override block; outside the block the same function is torch's again."""
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
    """Entered inside the compiled function, the block routes as well, and counts nothing."""
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(x, mask):
        with torch_reduce.override() as ov:
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


@cuda_only
def test_compile_reduce_overhead():
    """CUDA graphs of the routed ops, replayed with new data."""
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

    with torch_reduce.override() as ov:
        got = torch.compile(f, fullgraph=True)(x)
    torch.testing.assert_close(got, f(x))
    assert ov.routed == {"amax": 1} and ov.fallback_reasons == {"input dtype": 1}
