"""vector_norm and prod against torch's: dtypes, shapes, values (against a float64 reference, or
exact), NaN, infinities and zeros, empty dims, errors, autograd, opcheck and torch.compile, on
CPU and (when there is one) CUDA."""

from __future__ import annotations

import math
import re

import pytest
import torch

import torch_reduce
from util import DEVICES, DTYPES, FLOATING, INTEGRAL, UNIT_ROUNDOFF, WHOLE_ROWS, BLOCK_ROWS, fresh_generator, poison_cuda_allocator, storage_bytes

INF = math.inf
ORDERS = (2, 1, INF, -INF, 0, 3, 0.5, -1.5)

# Every kernel path: full (one block and many), rows (short, long: segments), columns (split and
# not), a middle dim, two dims, a transposed view, 0-d, size-1 and empty.
CASES = [
    ((7,), 0), ((1000,), 0), ((300_007,), 0), ((64, 33), -1), ((3000, 130), 1), ((5, 100_003), 1),
    *WHOLE_ROWS, *BLOCK_ROWS,
    ((33, 64), 0), ((100_003, 5), 0), ((4099, 40), 0), ((6, 513, 10), 1), ((17, 3, 129), (0, 2)),
    ((), 0), ((5, 1), 1), ((4, 0), 1), ((0, 4), 1),
]
IDS = [f"{s}-{d}" for s, d in CASES]


def _same_error(call, expected: Exception):
    with pytest.raises(type(expected), match=re.escape(str(expected).splitlines()[0])) as raised:
        call()
    assert type(raised.value) is type(expected)


def _close(got, want64, bound, what, floor=1e-300):
    """|got - want| <= bound * |want| (relative), NaN and inf where the reference rounded to got's
    dtype has them (a norm may overflow float16)."""
    g, ref = got.double().cpu(), want64.cpu().to(got.dtype).double().where(want64.cpu().isinf() | want64.cpu().to(got.dtype).isinf(), want64.cpu())
    assert torch.equal(g.isnan(), ref.isnan()), what
    assert torch.equal(g.isinf(), ref.isinf()) and torch.equal(g[g.isinf()], ref[ref.isinf()]), what
    fin = ref.isfinite()
    err = (g[fin] - ref[fin]).abs()
    assert bool((err <= bound * ref[fin].abs() + floor).all()), f"{what}: rel error {(err / ref[fin].abs()).max().item():.3g}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("ord", ORDERS, ids=[str(o) for o in ORDERS])
@pytest.mark.parametrize("shape,dim", CASES, ids=IDS)
def test_norm_values(device, dtype, ord, shape, dim):
    gen, seed = fresh_generator(device)
    x = (torch.randn(shape, generator=gen, device=device) * 4).to(dtype)
    if x.numel() > 3:
        x.view(-1)[:: max(x.numel() // 3, 1)] = 0  # zeros: counted by order 0, infinite |x|^p for p < 0
    before = storage_bytes(x)
    poison_cuda_allocator(device)
    for d, keepdim in ((dim, False), (dim, True), (None, False)):
        what = f"vector_norm ord={ord} dim={d} keepdim={keepdim} seed {seed}"
        try:
            want = torch.linalg.vector_norm(x, ord, d, keepdim)
        except RuntimeError as e:  # no identity for inf and negative orders on empty dims
            _same_error(lambda: torch_reduce.vector_norm(x, ord, d, keepdim), e)
            continue
        got = torch_reduce.vector_norm(x, ord, d, keepdim)
        assert got.dtype == want.dtype and got.shape == want.shape and got.device == want.device, what
        if ord in (INF, -INF, 0):  # a value of the input, or a count: exact
            assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num()), what
            continue
        want64 = torch.linalg.vector_norm(x.double(), ord, d, keepdim)
        n = x.numel() // max(want.numel(), 1)
        acc_u = UNIT_ROUNDOFF[torch.float64 if dtype == torch.float64 else torch.float32]
        # n roundings of a sum of non-negative terms (each term within 4 of its own), the root
        # scales a relative error by 1/p, then one rounding to dtype
        bound = (n + 4) * acc_u * max(1.0, 1 / abs(ord)) + 2 * UNIT_ROUNDOFF[dtype]
        # (float16 results below its smallest normal number are spaced 2^-24 apart)
        _close(got, want64, bound, what, torch.finfo(dtype).tiny * torch.finfo(dtype).eps)
    assert torch.equal(storage_bytes(x), before), "wrote to its input"


@pytest.mark.parametrize("device", DEVICES)
def test_norm_edges(device):
    """NaN wins every order (order 0 counts it); inf; a zero vector; overflow of x^2 as torch;
    size-1 dims and 0-d give |x| (order 0: x != 0)."""
    x = torch.randn(6, 300, device=device)
    x[0, 5] = float("nan")
    x[1, 7] = float("inf")
    x[2, :] = 0
    x[3, 9] = float("-inf")
    x[3, 10] = float("nan")
    x[4, :] = 1e30  # x^2 overflows float32: torch's 2-norm is inf too
    for ord in ORDERS:
        for dim in (1, 0, None):
            got, want = torch_reduce.vector_norm(x, ord, dim), torch.linalg.vector_norm(x, ord, dim)
            assert torch.equal(got.isnan(), want.isnan()), (ord, dim)
            assert torch.equal(got.isinf(), want.isinf()), (ord, dim)
            fin = want.isfinite()
            torch.testing.assert_close(got[fin], want[fin], rtol=1e-5, atol=0)
    big = torch.tensor([[1e30], [-3.0]], device=device)
    for ord in ORDERS:
        for t, dim in ((big, 1), (big[0], 0), (big[0, 0], None), (big[1, 0], 0)):
            got, want = torch_reduce.vector_norm(t, ord, dim), torch.linalg.vector_norm(t, ord, dim)
            assert got.dtype == want.dtype and torch.equal(got, want), (ord, t, dim)


@pytest.mark.parametrize("device", DEVICES)
def test_norm_types_and_errors(device):
    x = torch.randn(5, 6, device=device)
    for t in INTEGRAL:
        i = torch.ones(5, 6, device=device, dtype=t)
        for dtype in (None, torch.float32):
            with pytest.raises(RuntimeError) as expected:
                torch.linalg.vector_norm(i, dtype=dtype)
            _same_error(lambda: torch_reduce.vector_norm(i, dtype=dtype), expected.value)
    for src, dtype in ((torch.float32, torch.float64), (torch.float16, torch.float32), (torch.bfloat16, torch.float64)):
        got = torch_reduce.vector_norm(x.to(src), 2, 1, dtype=dtype)
        want = torch.linalg.vector_norm(x.to(src), 2, 1, dtype=dtype)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want)
    for src, dtype in ((torch.float32, torch.int64), (torch.float64, torch.float32), (torch.bfloat16, torch.float16)):
        with pytest.raises(RuntimeError) as expected:
            torch.linalg.vector_norm(x.to(src), dtype=dtype)
        _same_error(lambda: torch_reduce.vector_norm(x.to(src), dtype=dtype), expected.value)
    e = torch.empty(3, 0, device=device)
    for ord, dim in ((INF, None), (-1, (0, 1)), (-INF, -1), (-2.5, ())):
        with pytest.raises(RuntimeError) as expected:
            torch.linalg.vector_norm(e, ord, dim)
        _same_error(lambda: torch_reduce.vector_norm(e, ord, dim), expected.value)
    with pytest.raises(IndexError):
        torch_reduce.vector_norm(x, 2, 2)
    with pytest.raises(RuntimeError, match="appears multiple times"):
        torch_reduce.vector_norm(x, 2, (0, 0))


def _prod_data(shape, dtype, device, gen):
    if dtype in INTEGRAL:
        x = torch.randint(-3, 4, shape, generator=gen, device=device)
        return x.to(dtype)
    # factors near 1, with random signs: long products neither overflow nor vanish
    n = max(math.prod(shape), 1)
    x = 1 + torch.randn(shape, generator=gen, device=device) * min(0.3, 1 / math.sqrt(n))
    sign = torch.where(torch.rand(shape, generator=gen, device=device) < 0.5, -1.0, 1.0)
    return (x * sign).to(dtype)


PROD_CASES = [(s, d if isinstance(d, int) else None) for s, d in CASES]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", PROD_CASES, ids=[f"{s}-{d}" for s, d in PROD_CASES])
def test_prod_values(device, dtype, shape, dim):
    gen, seed = fresh_generator(device)
    x = _prod_data(shape, dtype, device, gen)
    before = storage_bytes(x)
    poison_cuda_allocator(device)
    calls = [((), {}), ((dim,), {}), ((dim, True), {})] if dim is not None else [((), {})]
    for args, kwargs in calls:
        what = f"prod{args} seed {seed}"
        want = torch.prod(x, *args, **kwargs)
        got = torch_reduce.prod(x, *args, **kwargs)
        assert got.dtype == want.dtype and got.shape == want.shape and got.device == want.device, what
        if dtype in INTEGRAL:  # int64 products wrap to the same bits in any order
            assert torch.equal(got, want), what
            continue
        n = x.numel() // max(want.numel(), 1)
        acc_u = UNIT_ROUNDOFF[torch.float64 if dtype == torch.float64 else torch.float32]
        want64 = torch.prod(x.double(), *args, **kwargs)
        # each multiplication rounds once; below the smallest normal number (of the float
        # accumulator, or of float16 results) the error is absolute
        floor = torch.finfo(dtype).tiny + torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).tiny
        _close(got, want64, (n + 1) * acc_u * 1.01 + 2 * UNIT_ROUNDOFF[dtype], what, floor)
    assert torch.equal(storage_bytes(x), before), "wrote to its input"


@pytest.mark.parametrize("device", DEVICES)
def test_prod_types_and_edges(device):
    """Every dtype= for several input dtypes; zeros, NaN, inf and overflow. Floating results against
    the float64 product of the converted elements: torch's CPU kernel multiplies float16 and
    bfloat16 results in their own precision (its products of integers as float16 overflow to inf
    and meet a zero: NaN where the product is 0), ours in float as torch's CUDA kernel."""
    gen, _ = fresh_generator(device)
    i = torch.where(torch.rand(7, 40, generator=gen, device=device) < 0.5, -1, 1).int()
    i[:, 7] = torch.randint(-3, 4, (7,), generator=gen, device=device).int()  # one factor in -3..3 a row
    f = torch.randn(7, 40, generator=gen, device=device) * 2
    f[0, 3] = 0
    f[1, 4] = float("nan")
    f[2, 5] = float("inf")
    f[3, :] = 1e10  # overflows float32: inf, as torch
    for x in (i, f, i.bool(), i.abs().to(torch.uint8), f.half()):
        for dtype in DTYPES:
            for args in ((), (1,), (0, True)):
                want = torch.prod(x, *args, dtype=dtype)
                got = torch_reduce.prod(x, *args, dtype=dtype)
                what = (x.dtype, dtype, args)
                assert got.dtype == want.dtype and got.shape == want.shape, what
                if dtype in INTEGRAL:
                    assert torch.equal(got, want), what
                else:
                    want64 = torch.prod(x.to(dtype).double(), *args)
                    _close(got, want64, 41 * 2.0**-24 + 2 * UNIT_ROUNDOFF[dtype], str(what), torch.finfo(dtype).tiny)
    # empty products are 1; 0-d takes dim 0
    for t, args in ((torch.empty(0, 3, device=device), (0,)), (torch.empty(0, device=device, dtype=torch.int8), ()),
                    (torch.tensor(2.5, device=device), (0,)), (torch.tensor(3, device=device), (-1, True))):
        got, want = torch_reduce.prod(t, *args), torch.prod(t, *args)
        assert got.dtype == want.dtype and torch.equal(got, want)
    with pytest.raises(IndexError):
        torch_reduce.prod(f, 2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("ord", ORDERS, ids=[str(o) for o in ORDERS])
@pytest.mark.parametrize("dim,keepdim", [(1, False), ((0, 2), True), (None, False)])
def test_norm_gradients(device, ord, dim, keepdim):
    """As torch's, zeros and ties included (a whole zero row: no NaN for order 2, as torch)."""
    x = torch.randn(4, 5, 6, device=device, dtype=torch.float64)
    x[1] = 0
    x[2, 3, :] = 0
    x[3, 0, 0] = x[3, 0, 1] = x[3, 0, 2] = 9.0  # ties for the inf norm
    x.requires_grad_(True)
    w = torch.randn_like(torch.linalg.vector_norm(x, ord, dim, keepdim))
    got = torch.autograd.grad((torch_reduce.vector_norm(x, ord, dim, keepdim) * w).sum(), x, allow_unused=True)[0]
    want = torch.autograd.grad((torch.linalg.vector_norm(x, ord, dim, keepdim) * w).sum(), x, allow_unused=True)[0]
    if want is None:
        want = torch.zeros_like(x)
    torch.testing.assert_close(got, want, equal_nan=True)
    # dtype=: the gradient comes back in the input's dtype
    y = x.detach().float().requires_grad_(True)
    g = torch.autograd.grad(torch_reduce.vector_norm(y, ord, dim, keepdim, dtype=torch.float64).sum(), y, allow_unused=True)[0]
    assert g is None or g.dtype == torch.float32
    if ord in (2, 3, 1.5):
        z = torch.randn(4, 5, 6, device=device, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda t: torch_reduce.vector_norm(t, ord, dim, keepdim), (z,))
        assert torch.autograd.gradgradcheck(lambda t: torch_reduce.vector_norm(t, ord, dim, keepdim), (z,))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), (-1, True), (0, False)])
def test_prod_gradients(device, dim, keepdim):
    """Zeros in the input, one or several in a run, as torch."""
    x = torch.randn(4, 5, 6, device=device, dtype=torch.float64)
    x[0, 1, 2] = 0
    x[1, 2, 3] = x[1, 2, 4] = 0
    x.requires_grad_(True)
    args = () if dim is None else (dim, keepdim)
    w = torch.randn_like(torch.prod(x, *args))
    got = torch.autograd.grad((torch_reduce.prod(x, *args) * w).sum(), x)[0]
    want = torch.autograd.grad((torch.prod(x, *args) * w).sum(), x)[0]
    torch.testing.assert_close(got, want)
    z = torch.randn(3, 4, 5, device=device, dtype=torch.float64)
    z[0, 0, 0] = 0
    z.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: torch_reduce.prod(t, *args), (z,))
    assert torch.autograd.gradgradcheck(lambda t: torch_reduce.prod(t, *args), (z,))
    s = torch.tensor(1.5, device=device, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: torch_reduce.prod(t), (s,))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("requires_grad", (False, True))
def test_opcheck(device, requires_grad):
    x = torch.randn(6, 9, device=device, requires_grad=requires_grad)
    norm, prod = torch.ops.treduce.vector_norm.default, torch.ops.treduce.prod.default
    torch.library.opcheck(norm, (x,))
    torch.library.opcheck(norm, (x, 3.0, [1], True), {"dtype": torch.float64})
    torch.library.opcheck(norm, (x, INF, [0]))
    torch.library.opcheck(prod, (x,))
    torch.library.opcheck(prod, (x, 1, True), {"dtype": torch.float64})


@pytest.mark.parametrize("device", DEVICES)
def test_compile(device):
    def f(x):
        return torch_reduce.vector_norm(x, 2, -1) + torch_reduce.vector_norm(x, INF, -1) + torch_reduce.prod(x, -1)

    x = torch.randn(8, 33, device=device, requires_grad=True)
    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(x), f(x))
    torch.testing.assert_close(torch.autograd.grad(compiled(x).sum(), x)[0], torch.autograd.grad(f(x).sum(), x)[0])


def test_override_python_matrix_norms_fall_back():
    """torch.norm's matrix norms are not vector norms: the Python mode gives them to torch."""
    x = torch.randn(4, 5)
    with torch_reduce.override("python") as ov:
        got = torch.norm(x, "nuc")
        fro = torch.norm(x, "fro", dim=(0, 1))
    assert ov.fallback == {"vector_norm": 1} and ov.fallback_reasons == {"matrix norm": 1}
    assert ov.routed == {"vector_norm": 1}
    torch.testing.assert_close(got, torch.norm(x, "nuc"))
    torch.testing.assert_close(fro, torch.linalg.vector_norm(x))
