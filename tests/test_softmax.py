"""softmax, log_softmax and their backwards (treduce.softmax, ...): values against float64 with a
stated bound on every path (warp rows, block rows, columns; CPU rows and strips), dtypes and
dtype=, special values as torch's, gradients (first and second order), errors, opcheck,
torch.compile and CUDA graphs."""

import pytest
import torch

import torch_reduce
from util import DEVICES, cuda_only, fresh_generator

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# (shape, dim): rows of every warp size and past them (block rows), columns (blocks of 8, 16 and
# 32 of them on CUDA), a single element.
SHAPES = [
    ((7, 1), -1), ((5, 5), 1), ((3, 32), -1), ((9, 33), -1), ((4, 100), 1), ((6, 1000), -1), ((2, 1024), -1),
    ((3, 1025), 1), ((2, 4099), -1), ((1, 40000), -1), ((3, 7, 5), 1), ((2, 300, 17), 1), ((1000, 6), 0),
    ((2, 3, 70, 3), 2), ((3, 4500), 0), ((20, 9000), 0), ((13,), 0), ((), 0),
    # long columns (1100-2100 rows)
    ((2100, 7), 0), ((2, 1100, 33), 1),
]
FORWARD = [("softmax", torch.softmax), ("log_softmax", torch.log_softmax)]


def unit(dtype):
    return torch.finfo(dtype).eps / 2


def acc_unit(dtype):
    return unit(torch.float64 if dtype == torch.float64 else torch.float32)


def check_forward(name, got, x, dim, out_dtype):
    """|got - ref| <= (n u_acc + 4 u_out) (1 + |ref|) elementwise, ref in float64 from the same
    (converted) input: n terms summed in the accumulator, then the result's rounding."""
    ref = getattr(torch, name)(x.to(out_dtype).double(), dim)
    n = x.shape[dim] if x.dim() else 1
    bound = (n * acc_unit(out_dtype) + 4 * unit(out_dtype)) * (1 + ref.abs())
    assert got.dtype == out_dtype and got.shape == x.shape and got.is_contiguous()
    err = (got.double() - ref).abs()
    assert bool((err <= bound).all()), (name, tuple(x.shape), dim, out_dtype, err.max().item())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,torch_fn", FORWARD)
def test_forward_against_float64(device, dtype, name, torch_fn):
    gen, seed = fresh_generator(device)
    for shape, dim in SHAPES:
        x = (torch.randn(shape, generator=gen, device=device) * 4).to(dtype)
        got = getattr(torch_reduce, name)(x, dim)
        check_forward(name, got, x, dim, dtype)
        # a transposed (non-contiguous) input: the same values
        if x.dim() >= 2:
            t = x.transpose(0, -1)
            d = dim % x.dim()
            d = {0: x.dim() - 1, x.dim() - 1: 0}.get(d, d)
            check_forward(name, getattr(torch_reduce, name)(t, d), t, d, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,torch_fn", FORWARD)
def test_dtype_argument(device, name, torch_fn):
    # 16-bit floats read straight into float32 results; other requests convert the input first
    gen, seed = fresh_generator(device)
    for dtype, to in ((torch.bfloat16, torch.float32), (torch.float16, torch.float32), (torch.float32, torch.float64),
                      (torch.float32, torch.float16), (torch.float64, torch.float32)):
        for shape, dim in (((6, 1000), 1), ((3, 4100), -1), ((40, 3, 5), 0)):
            x = (torch.randn(shape, generator=gen, device=device) * 3).to(dtype)
            got = getattr(torch_reduce, name)(x, dim, dtype=to)
            check_forward(name, got, x, dim, to)
            want = torch_fn(x, dim, dtype=to)
            assert got.dtype == want.dtype


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,torch_fn", FORWARD)
def test_special_values_as_torch(device, name, torch_fn):
    # -inf masks an element (0, or -inf in log space); a row of -inf only, or with +inf or NaN, is
    # NaN throughout; on every path (warp rows, block rows, columns). The special values as
    # torch's; finite bfloat16 results against float64's within 2 eps relative (0.5 measured on
    # the CPU; torch 2.11's own CPU bfloat16 log_softmax is off by up to 6.7, past a 2e-2 bound
    # against it), float32 against torch's.
    inf, nan = float("inf"), float("nan")
    for n in (5, 700, 3000):
        rows = torch.randn(6, n, device=device)
        rows[0, 1] = -inf
        rows[1, :] = -inf
        rows[2, 3] = inf
        rows[3, n - 1] = nan
        rows[4, :n // 2] = -inf
        rows[5, 0] = inf
        rows[5, 2] = -inf
        for dtype in (torch.float32, torch.bfloat16):
            x = rows.to(dtype)
            for xx, dim in ((x, 1), (x.t().contiguous(), 0)):
                got, want = getattr(torch_reduce, name)(xx, dim), torch_fn(xx, dim)
                assert torch.equal(got.isnan(), want.isnan()), (name, n, dtype)
                assert torch.equal(got.isinf(), want.isinf()), (name, n, dtype)
                finite = want.isfinite()
                if dtype == torch.bfloat16:
                    exact = torch_fn(xx.double(), dim)
                    torch.testing.assert_close(got[finite].double(), exact[finite], rtol=2 * torch.finfo(dtype).eps, atol=1e-5)
                else:
                    torch.testing.assert_close(got[finite], want[finite], rtol=2e-2, atol=1e-5)


def check_backward(name, got, g, y, dim, input_dtype):
    """The backward of y (the forward's result) for incoming g against float64: softmax's
    y (g - sum(g y)), log_softmax's g - exp(y) sum(g); bound (n u_acc + 4 u) (|g| + |sum| + 1)."""
    gd, yd = g.double(), y.double()
    if name == "softmax":
        s = (gd * yd).sum(dim, keepdim=True)
        ref = yd * (gd - s)
    else:
        s = gd.sum(dim, keepdim=True)
        ref = gd - yd.exp() * s
    n = y.shape[dim] if y.dim() else 1
    u = max(unit(input_dtype), unit(y.dtype))
    bound = (n * acc_unit(y.dtype) + 4 * u) * (gd.abs() + s.abs() + 1) * (1 + yd.abs().clamp(max=1e3))
    assert got.dtype == input_dtype and got.shape == y.shape
    err = (got.double() - ref).abs()
    assert bool((err <= bound).all()), (name, tuple(y.shape), dim, input_dtype, err.max().item())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_backward_ops_against_float64(device, dtype, name):
    gen, seed = fresh_generator(device)
    backward = getattr(torch_reduce, name + "_backward")
    for shape, dim in SHAPES:
        x = (torch.randn(shape, generator=gen, device=device) * 3).to(dtype)
        y = getattr(torch, name)(x, dim)
        g = torch.randn(shape, generator=gen, device=device).to(dtype)
        check_backward(name, backward(g, y, dim, dtype), g, y, dim, dtype)
    # a float32 result of a 16-bit input: the gradient in the input's dtype
    if dtype in (torch.float16, torch.bfloat16):
        x = torch.randn(5, 3000, generator=gen, device=device).to(dtype)
        y = getattr(torch, name)(x, 1, dtype=torch.float32)
        g = torch.randn(5, 3000, generator=gen, device=device)
        check_backward(name, backward(g, y, 1, dtype), g, y, 1, dtype)


# Rows held on chip (kernels/normalize.cuh's on_chip_rows_kernel): a block holds 64 KiB of a
# forward's row (32 KiB of each input of a backward, and of a float64 forward), a cluster up to
# 8 blocks. Rows ending anywhere in a cluster of every size, at the last size on chip and just
# past it, and the packs a block not a multiple of its threads.
def on_chip_sizes(dtype, backward):
    per_block = (32 << 10 if backward or dtype == torch.float64 else 64 << 10) // dtype.itemsize
    return [k * per_block - 8 * (2 * k + 1) for k in range(1, 9)] + [8 * per_block, 8 * per_block + 8]


@cuda_only
@pytest.mark.parametrize("dtype", FLOATS)
def test_cuda_rows_on_chip_every_cluster_size(dtype):
    gen, seed = fresh_generator("cuda")
    inf, nan = float("inf"), float("nan")
    for name, _ in FORWARD:
        fn, backward = getattr(torch_reduce, name), getattr(torch_reduce, name + "_backward")
        for n in on_chip_sizes(dtype, backward=False):
            x = (torch.randn(3, n, generator=gen, device="cuda") * 4).to(dtype)
            check_forward(name, fn(x, 1), x, 1, dtype)
            if dtype == torch.bfloat16:  # a float32 result of 16-bit rows (wider stores)
                check_forward(name, fn(x, 1, dtype=torch.float32), x, 1, torch.float32)
            # special values in the last block of the row and across blocks, as torch's
            x[0, n - 3] = nan
            x[1, : n // 2] = -inf
            x[2, n // 3] = inf
            got, want = fn(x, 1), getattr(torch, name)(x.double(), 1)
            assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf()), (name, n, seed)
            torch.testing.assert_close(fn(x, 1), got, rtol=0, atol=0, equal_nan=True)  # the same bits run to run
        for n in on_chip_sizes(dtype, backward=True):
            x = (torch.randn(2, n, generator=gen, device="cuda") * 3).to(dtype)
            y = getattr(torch, name)(x, 1)
            g = torch.randn(2, n, generator=gen, device="cuda").to(dtype)
            check_backward(name, backward(g, y, 1, dtype), g, y, 1, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,torch_fn", FORWARD)
def test_autograd_as_torch(device, name, torch_fn):
    gen, seed = fresh_generator(device)
    for dtype, to in ((torch.float32, None), (torch.bfloat16, torch.float32), (torch.float32, torch.float64)):
        for shape, dim in (((4, 1000), 1), ((3, 5000), -1), ((30, 4, 6), 0)):
            x = torch.randn(shape, generator=gen, device=device).to(dtype)
            a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
            ya, yb = getattr(torch_reduce, name)(a, dim, dtype=to), torch_fn(b, dim, dtype=to)
            g = torch.randn(ya.shape, generator=gen, device=device).to(ya.dtype)
            ya.backward(g)
            yb.backward(g)
            assert a.grad.dtype == b.grad.dtype == dtype
            tol = 1e-4 if dtype == torch.float32 else 2e-2
            torch.testing.assert_close(a.grad, b.grad, rtol=tol, atol=tol, msg=lambda m: f"{name} seed {seed}: {m}")


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_gradcheck_and_gradgradcheck(name):
    fn = getattr(torch_reduce, name)
    for shape, dim in (((3, 5), 1), ((4, 3, 2), 0), ((2, 40), -1)):
        x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda t: fn(t, dim), (x,))
        assert torch.autograd.gradgradcheck(lambda t: fn(t, dim), (x,))


@pytest.mark.parametrize("device", DEVICES)
def test_empty_and_scalar_inputs(device):
    for name, torch_fn in FORWARD:
        for shape, dim in (((0, 5), 1), ((4, 0), 1), ((4, 0), 0), ((), -1)):
            x = torch.randn(shape, device=device)
            got, want = getattr(torch_reduce, name)(x, dim), torch_fn(x, dim)
            assert got.shape == want.shape and got.dtype == want.dtype
            torch.testing.assert_close(got, want)


@pytest.mark.parametrize("device", DEVICES)
def test_errors_as_torch(device):
    x = torch.randn(3, 4, device=device)
    with pytest.raises(IndexError):
        torch_reduce.softmax(x, 2)
    with pytest.raises(RuntimeError, match="floating"):
        torch_reduce.softmax(torch.arange(6, device=device), 0)
    with pytest.raises(RuntimeError, match="differ"):
        torch_reduce.softmax_backward(x, x[:, :2], 1, torch.float32)
    # an integer input with a floating dtype= is converted first, as torch's
    ints = torch.arange(12, device=device).view(3, 4)
    torch.testing.assert_close(torch_reduce.softmax(ints, 1, dtype=torch.float32),
                               torch.softmax(ints, 1, dtype=torch.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    x = torch.randn(3, 70, device=device)
    y = torch.softmax(x, 1)
    for op, args in ((torch.ops.treduce.softmax.default, (x, 1, None)),
                     (torch.ops.treduce.log_softmax.default, (x, 0, torch.float64)),
                     (torch.ops.treduce.softmax_backward.default, (x, y, 1, torch.float32)),
                     (torch.ops.treduce.log_softmax_backward.default, (x, y, -1, torch.float32))):
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


def test_compiles():
    fn = torch.compile(lambda t: torch_reduce.log_softmax(t, -1) + torch_reduce.softmax(t, 0), fullgraph=True)
    x = torch.randn(8, 33)
    torch.testing.assert_close(fn(x), torch.log_softmax(x, -1) + torch.softmax(x, 0))


@cuda_only
def test_cuda_graph_replay():
    x = torch.randn(64, 3000, device="cuda")
    torch_reduce.softmax(x, 1)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = torch_reduce.softmax(x, 1)
    x.copy_(torch.randn(64, 3000, device="cuda"))
    graph.replay()
    torch.testing.assert_close(y, torch.softmax(x, 1))


@pytest.mark.parametrize("device", DEVICES)
def test_override_routes_softmax_and_its_backward(device):
    # aten's _softmax, _log_softmax and their _backward_data become ours while a block is open
    # (autograd's backward included); out= stays torch's, counted.
    gen, seed = fresh_generator(device)
    x = torch.randn(6, 300, generator=gen, device=device)
    for fn, name in ((torch.softmax, "softmax"), (torch.log_softmax, "log_softmax")):
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        with torch_reduce.override() as ov:
            ya = fn(a, 1)
            ya.backward(torch.ones_like(ya))
        yb = fn(b, 1)
        yb.backward(torch.ones_like(yb))
        if device == "cpu":  # torch's, by choice (csrc/torch/aten_override.cpp: slower here)
            assert not ov.routed and ov.fallback == {name: 1, name + "_backward": 1}, (ov.routed, ov.fallback)
            assert ov.fallback_reasons == {"slower here": 2}
        else:
            assert ov.routed[name] == 1 and ov.routed[name + "_backward"] == 1 and not ov.fallback, ov.fallback
        torch.testing.assert_close(ya, yb)
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5)
    out = torch.empty(6, 300, device=device)
    with torch_reduce.override() as ov:
        torch.ops.aten._softmax.out(x, 1, False, out=out)
    assert ov.fallback_reasons == {"out=": 1}
    torch.testing.assert_close(out, torch.softmax(x, 1))
    if device == "cuda":  # a 16-bit input widened (half_to_float): our float32 result
        h = torch.randn(6, 304, generator=gen, device=device).half()
        with torch_reduce.override() as ov:
            got = torch.softmax(h, 1, dtype=torch.float32)
        assert ov.routed["softmax"] == 1 and got.dtype == torch.float32
        torch.testing.assert_close(got, torch.softmax(h, 1, dtype=torch.float32))
        # where ours measured slower than torch's kernel, torch's (core/normalize.h's normalize_cuda_wins)
        # (rows of 197 elements: not whole packs; 2-byte rows past what the chip holds, forward
        # and log_softmax's backward: read twice)
        y = torch.log_softmax(torch.randn(2, 262152, device=device).bfloat16(), 1)
        with torch_reduce.override() as ov:
            torch.softmax(torch.randn(4, 197, device=device), 1)
            torch.softmax(torch.randn(2, 262152, device=device).bfloat16(), 1)
            torch.ops.aten._log_softmax_backward_data(torch.ones_like(y), y, 1, torch.bfloat16)
        assert not ov.routed and ov.fallback_reasons == {"slower here": 3}, (ov.routed, ov.fallback_reasons)
        # rows held on chip: ours, forward and backward, 2-byte rows too; float32 log_softmax's
        # backward past the chip (its first read g alone)
        y = torch.log_softmax(torch.randn(4, 4096, device=device), 1)
        z = torch.log_softmax(torch.randn(2, 131080, device=device), 1)
        with torch_reduce.override() as ov:
            torch.softmax(torch.randn(4, 4096, device=device).bfloat16(), 1)
            torch.ops.aten._log_softmax_backward_data(torch.ones_like(y), y, 1, torch.float32)
            got = torch.ops.aten._log_softmax_backward_data(torch.ones_like(z), z, 1, torch.float32)
        assert ov.routed == {"softmax": 1, "log_softmax_backward": 2} and not ov.fallback, (ov.routed, ov.fallback)
        torch.testing.assert_close(got, torch.ops.aten._log_softmax_backward_data(torch.ones_like(z), z, 1, torch.float32))
