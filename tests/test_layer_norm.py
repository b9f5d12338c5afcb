"""layer_norm and rms_norm (treduce.layer_norm, treduce.rms_norm and their forward and backward
ops): results, statistics and gradients (input, weight, bias) against torch's in float64 with a
stated bound, every float dtype, rows that CUDA holds in registers (16-byte packs or single
elements, teams of 4 to 1024 threads) and longer ones, normalized shapes of several dims,
non-contiguous and unaligned inputs; the same bits run after run; empty inputs and torch's errors;
gradcheck and gradgradcheck; opcheck, torch.compile and CUDA graphs."""

import pytest
import torch
import torch.nn.functional as F

import torch_reduce
from util import DEVICES, cuda_only, fresh_generator

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# (input shape, normalized dims): rows of 8 to 16384 elements, whole 16-byte packs or not (100,
# 1000, 4097 float32), past what a CUDA team holds (5000 float32, 16384 bfloat16), two
# normalized dims, more rows than the backward's blocks (3000 x 768).
SHAPES = [((7, 8), 1), ((5, 64), 1), ((3, 100), 1), ((4, 768), 1), ((2, 1000), 1), ((3, 2048), 1),
          ((2, 4096), 1), ((2, 4097), 1), ((2, 5000), 1), ((1, 8192), 1), ((2, 16384), 1), ((2, 3, 6, 10), 2),
          ((3000, 768), 1), ((9,), 1)]
OPS = ("layer_norm", "rms_norm")


def unit(dtype):
    return torch.finfo(dtype).eps / 2


def acc_unit(dtype):
    return unit(torch.float64 if dtype == torch.float64 else torch.float32)


def make(shape, k, dtype, device, gen, affine=True):
    x = (torch.randn(shape, generator=gen, device=device) * 2 + 0.5).to(dtype)
    ns = tuple(shape[-k:])
    w = (torch.rand(ns, generator=gen, device=device) + 0.5).to(dtype) if affine else None
    b = torch.randn(ns, generator=gen, device=device).to(dtype) if affine else None
    return x, ns, w, b


def ours(op, x, ns, w, b, **kw):
    if op == "layer_norm":
        return torch_reduce.layer_norm(x, ns, w, b, **kw)
    return torch_reduce.rms_norm(x, ns, w, **kw)


def reference(op, x, ns, w, b, **kw):
    if op == "layer_norm":
        return F.layer_norm(x, ns, w, b, **({"eps": 1e-5} | kw))
    return F.rms_norm(x, ns, w, **kw)


def bound(ref, scale, terms, dtype):
    """The result's rounding (a few units of its dtype) plus `terms` accumulated products of
    `scale`'s size in the accumulator's precision."""
    return 4 * unit(dtype) * ref.abs() + 8 * terms * acc_unit(dtype) * scale


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", OPS)
def test_forward_and_gradients_against_float64(device, dtype, op):
    gen, seed = fresh_generator(device)
    for shape, k in SHAPES:
        for affine in (True, False):
            x, ns, w, b = make(shape, k, dtype, device, gen, affine)
            n = int(torch.tensor(ns).prod())
            rows = x.numel() // n
            leaves = [t.clone().requires_grad_() if t is not None else None for t in (x, w, b)]
            got = ours(op, *[leaves[0], ns, leaves[1], leaves[2]])
            refs = [t.double().requires_grad_() if t is not None else None for t in (x, w, b)]
            ref = reference(op, refs[0], ns, refs[1], refs[2])
            what = (op, shape, dtype, affine, seed)
            assert got.dtype == dtype and got.shape == ref.shape, what
            wmax = 1 + (w.double().abs().max() if affine else 0)
            err = (got.double() - ref.detach()).abs()
            assert bool((err <= bound(ref.detach(), wmax * (1 + ref.detach().abs()), n, dtype)).all()), (
                what, err.max().item())
            g = torch.randn(ref.shape, generator=gen, device=device, dtype=torch.float64).to(dtype)
            got.backward(g)
            ref.backward(g.double())
            xhat_max = 1 + ref.detach().abs().max() + (b.double().abs().max() if affine else 0)
            gmax = g.double().abs().max()
            dx_scale = gmax * wmax * xhat_max * xhat_max * 4
            err = (leaves[0].grad.double() - refs[0].grad).abs()
            assert bool((err <= bound(refs[0].grad, dx_scale, n, dtype)).all()), (what, "dx", err.max().item())
            if affine:
                err = (leaves[1].grad.double() - refs[1].grad).abs()
                # (the rows' terms, each through its row's statistics: n terms)
                assert bool((err <= bound(refs[1].grad, gmax * xhat_max, rows + n, dtype)).all()), (
                    what, "dw", err.max().item())
                if op == "layer_norm":
                    err = (leaves[2].grad.double() - refs[2].grad).abs()
                    assert bool((err <= bound(refs[2].grad, gmax, rows, dtype)).all()), (what, "db", err.max().item())


@pytest.mark.parametrize("device", DEVICES)
def test_statistics_as_torch(device):
    """The forward ops' statistics: native_layer_norm's mean and rstd, _fused_rms_norm's rstd
    (shapes input.shape[:-k] + (1,) * k, float32 for 16-bit inputs)."""
    gen, seed = fresh_generator(device)
    for dtype in (torch.bfloat16, torch.float32, torch.float64):
        x, ns, w, b = make((4, 3, 6, 10), 2, dtype, device, gen)
        y, mean, rstd = torch_reduce.layer_norm_forward(x, ns, w, b, 1e-3)
        _, rmean, rrstd = torch.ops.aten.native_layer_norm(x.double(), list(ns), w.double(), b.double(), 1e-3)
        acc = torch.float64 if dtype == torch.float64 else torch.float32
        assert mean.shape == rmean.shape == (4, 3, 1, 1) and mean.dtype == rstd.dtype == acc, (dtype, seed)
        torch.testing.assert_close(mean.double(), rmean, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(rstd.double(), rrstd, rtol=1e-5, atol=1e-5)
        y, rstd = torch_reduce.rms_norm_forward(x, ns, w)
        xd = x.double()
        want = (xd.pow(2).mean((-2, -1), keepdim=True) + torch.finfo(acc).eps).rsqrt()
        assert rstd.shape == (4, 3, 1, 1) and rstd.dtype == acc
        torch.testing.assert_close(rstd.double(), want, rtol=1e-5, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_backward_ops_compute_what_the_mask_asks(device):
    gen, seed = fresh_generator(device)
    x, ns, w, b = make((6, 40), 1, torch.float32, device, gen)
    g = torch.randn(x.shape, generator=gen, device=device)
    _, mean, rstd = torch_reduce.layer_norm_forward(x, ns, w, b)
    full = torch_reduce.layer_norm_backward(g, x, ns, mean, rstd, w, b, [True, True, True])
    ref = torch.ops.aten.native_layer_norm_backward(g, x, list(ns), mean, rstd, w, b, [True, True, True])
    for got, want in zip(full, ref):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    for mask in ([True, False, False], [False, True, False], [False, False, True], [False, True, True]):
        part = torch_reduce.layer_norm_backward(g, x, ns, mean, rstd, w, b, mask)
        for wanted, got, want in zip(mask, part, full):
            assert (got is None) == (not wanted), (mask, seed)
            if wanted:
                assert torch.equal(got, want), (mask, seed)
    _, rstd = torch_reduce.rms_norm_forward(x, ns, w)
    dx, dw = torch_reduce.rms_norm_backward(g, x, ns, rstd, w, [True, True])
    assert dx is not None and dw is not None
    assert torch_reduce.rms_norm_backward(g, x, ns, rstd, w, [False, True])[0] is None
    assert torch_reduce.rms_norm_backward(g, x, ns, rstd, None, [True, True])[1] is None


@pytest.mark.parametrize("device", DEVICES)
def test_same_bits_run_after_run(device):
    gen, seed = fresh_generator(device)
    for op in OPS:
        x, ns, w, b = make((4096, 768), 1, torch.bfloat16, device, gen)
        g = torch.randn(x.shape, generator=gen, device=device).to(x.dtype)
        first = None
        for _ in range(3):
            leaves = [t.clone().requires_grad_() for t in (x, w, b)]
            y = ours(op, leaves[0], ns, leaves[1], leaves[2])
            y.backward(g)
            got = [y] + [t.grad for t in leaves if t.grad is not None]
            if first is None:
                first = got
            else:
                assert all(torch.equal(p, q) for p, q in zip(first, got)), (op, seed)


@pytest.mark.parametrize("device", DEVICES)
def test_layouts_read_as_torch(device):
    """A transposed input, and (CUDA) one that starts off a 16-byte boundary: single elements."""
    gen, seed = fresh_generator(device)
    for op in OPS:
        x, ns, w, b = make((64, 96), 1, torch.float32, device, gen)
        xt = x.t().contiguous().t()  # (64, 96) with strides (1, 64)
        torch.testing.assert_close(ours(op, xt, ns, w, b), reference(op, xt, ns, w, b))
        buf = torch.randn(64 * 96 + 1, generator=gen, device=device)
        xo = buf[1:].view(64, 96)
        torch.testing.assert_close(ours(op, xo, ns, w, b), reference(op, xo, ns, w, b))


@pytest.mark.parametrize("device", DEVICES)
def test_empty_inputs_as_torch(device):
    for shape, ns in (((0, 8), (8,)), ((3, 0), (0,))):
        x = torch.randn(shape, device=device)
        y, mean, rstd = torch_reduce.layer_norm_forward(x, ns)
        ry, rmean, rrstd = torch.ops.aten.native_layer_norm(x, list(ns), None, None, 1e-5)
        assert y.shape == ry.shape and mean.shape == rmean.shape and rstd.shape == rrstd.shape
        torch.testing.assert_close(mean, rmean.float(), equal_nan=True)
        torch.testing.assert_close(rstd, rrstd.float(), equal_nan=True)
        w = torch.rand(ns, device=device, requires_grad=True)
        b = torch.rand(ns, device=device, requires_grad=True)
        torch_reduce.layer_norm(x, ns, w, b).sum().backward()
        assert torch.equal(w.grad, torch.zeros_like(w)) and torch.equal(b.grad, torch.zeros_like(b))


@pytest.mark.parametrize("device", DEVICES)
def test_errors_as_torch(device):
    x = torch.randn(3, 4, device=device)
    with pytest.raises(RuntimeError, match=r"expected input with shape \[\*, 5\]"):
        torch_reduce.layer_norm(x, (5,))
    with pytest.raises(RuntimeError, match="Expected weight to be of same shape"):
        torch_reduce.layer_norm(x, (4,), torch.ones(5, device=device))
    with pytest.raises(RuntimeError, match="at least 1-dimensional"):
        torch_reduce.rms_norm(x, ())
    with pytest.raises(RuntimeError, match="floating-point input"):
        torch_reduce.layer_norm(x.to(torch.int32), (4,))
    with pytest.raises(RuntimeError, match="weight of the input's dtype"):
        torch_reduce.rms_norm(x.bfloat16(), (4,), torch.ones(4, device=device))


def test_gradcheck_and_gradgradcheck():
    gen, seed = fresh_generator("cpu")
    for shape, k in (((3, 5), 1), ((2, 3, 4), 2), ((6,), 1)):
        x, ns, w, b = make(shape, k, torch.float64, "cpu", gen)
        for t in (x, w, b):
            t.requires_grad_()
        for fn, args in ((lambda a, c, d: torch_reduce.layer_norm(a, ns, c, d, 1e-3), (x, w, b)),
                         (lambda a: torch_reduce.layer_norm(a, ns), (x,)),
                         (lambda a, c: torch_reduce.rms_norm(a, ns, c, 1e-3), (x, w)),
                         (lambda a: torch_reduce.rms_norm(a, ns), (x,))):
            assert torch.autograd.gradcheck(fn, args), (shape, seed)
            assert torch.autograd.gradgradcheck(fn, args), (shape, seed)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    x = torch.randn(6, 3, 10, device=device)
    w, b = torch.rand(3, 10, device=device), torch.randn(3, 10, device=device)
    g = torch.randn(6, 3, 10, device=device)
    _, mean, rstd = torch.ops.treduce.layer_norm_forward(x, [3, 10], w, b, 1e-5)
    _, rrstd = torch.ops.treduce.rms_norm_forward(x, [10], w[0], None)
    ops = torch.ops.treduce
    for op, args in ((ops.layer_norm.default, (x, [3, 10], w, b, 1e-5)),
                     (ops.layer_norm.default, (x, [10], None, None, 1e-5)),
                     (ops.layer_norm_forward.default, (x, [3, 10], w, None, 1e-3)),
                     (ops.layer_norm_backward.default, (g, x, [3, 10], mean, rstd, w, b, [True, True, True])),
                     (ops.rms_norm.default, (x, [10], w[0], None)),
                     (ops.rms_norm_forward.default, (x, [3, 10], None, 1e-6)),
                     (ops.rms_norm_backward.default, (g, x, [10], rrstd, w[0], [True, True]))):
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


def test_compiles():
    x, w, b = torch.randn(8, 33), torch.rand(33), torch.randn(33)
    fn = torch.compile(lambda a: torch_reduce.layer_norm(a, (33,), w, b) + torch_reduce.rms_norm(a, (33,), w),
                       fullgraph=True)
    torch.testing.assert_close(fn(x), F.layer_norm(x, (33,), w, b) + F.rms_norm(x, (33,), w))


@cuda_only
def test_cuda_graph_replay():
    x = torch.randn(64, 3000, device="cuda")
    w = torch.rand(3000, device="cuda")
    torch_reduce.rms_norm(x, (3000,), w)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = torch_reduce.rms_norm(x, (3000,), w)
    x.copy_(torch.randn(64, 3000, device="cuda"))
    graph.replay()
    torch.testing.assert_close(y, F.rms_norm(x, (3000,), w))


@cuda_only
def test_override_routes_the_norms_and_their_backwards():
    gen, seed = fresh_generator("cuda")
    for dtype in (torch.bfloat16, torch.float32):
        x, ns, w, b = make((256, 1024), 1, dtype, "cuda", gen)
        g = torch.randn(x.shape, generator=gen, device="cuda").to(dtype)
        leaves = [t.clone().requires_grad_() for t in (x, w, b)]
        want = [F.layer_norm(*[leaves[0], ns, leaves[1], leaves[2]]), F.rms_norm(leaves[0], ns, leaves[1])]
        torch.autograd.backward(want, [g, g])
        want += [t.grad for t in leaves]
        leaves = [t.clone().requires_grad_() for t in (x, w, b)]
        with torch_reduce.override() as ov:
            got = [F.layer_norm(leaves[0], ns, leaves[1], leaves[2]), F.rms_norm(leaves[0], ns, leaves[1])]
            torch.autograd.backward(got, [g, g])
        got += [t.grad for t in leaves]
        for p, q in zip(got, want):
            torch.testing.assert_close(p, q, rtol=2e-2 if dtype == torch.bfloat16 else 1e-4, atol=1e-3)
        for name in ("layer_norm", "layer_norm_backward"):
            assert ov.routed[name] == 1, (name, dict(ov.routed), dict(ov.fallback_reasons), seed)
        # (torch.rms_norm reaches _fused_rms_norm on CUDA where the release has it so)
        assert ov.routed["rms_norm"] == ov.routed["rms_norm_backward"], dict(ov.routed)
    # A float32 weight and bias over a bfloat16 input: torch's own kernel, counted, with its
    # result or its error (torch 2.11's CUDA kernel takes one dtype only).
    x, ns, w, b = make((64, 512), 1, torch.bfloat16, "cuda", gen)
    try:
        want, want_error = F.layer_norm(x, ns, w.float(), b.float()), None
    except RuntimeError as e:
        want, want_error = None, str(e)
    with torch_reduce.override() as ov:
        if want_error is None:
            torch.testing.assert_close(F.layer_norm(x, ns, w.float(), b.float()), want, rtol=0, atol=0)
        else:
            with pytest.raises(RuntimeError) as got:
                F.layer_norm(x, ns, w.float(), b.float())
            assert str(got.value) == want_error
    assert ov.fallback["layer_norm"] == 1 and ov.fallback_reasons["input dtype"] >= 1
    # Rows of 16384 bfloat16 forward (1024 threads of 2 packs, measured faster); rows past what a
    # team holds: torch's kernels (layer_norm_cuda_wins).
    x, ns, w, b = make((8, 16384), 1, torch.bfloat16, "cuda", gen)
    with torch_reduce.override() as ov:
        torch.testing.assert_close(F.layer_norm(x, ns, w, b), torch_reduce.layer_norm(x, ns, w, b), rtol=0, atol=0)
    assert ov.routed["layer_norm"] == 1, dict(ov.routed)
    x, ns, w, b = make((8, 32768), 1, torch.bfloat16, "cuda", gen)
    with torch_reduce.override() as ov:
        torch.testing.assert_close(F.layer_norm(x, ns, w, b), torch_reduce.layer_norm(x, ns, w, b), rtol=2e-2, atol=2e-2)
    assert ov.fallback["layer_norm"] == 1 and ov.fallback_reasons["slower here"] == 1, dict(ov.fallback_reasons)
