"""nansum, nanmean and logsumexp against torch's: dtypes, shapes, values (against a float64
reference), NaN and infinities, empty dims, errors, autograd, opcheck and torch.compile, on CPU
and (when there is one) CUDA."""

from __future__ import annotations

import re

import pytest
import torch

import torch_reduce
from util import DEVICES, FLOATING, INTEGRAL, UNIT_ROUNDOFF, WHOLE_ROWS, BLOCK_ROWS, fresh_generator, poison_cuda_allocator, storage_bytes

# Every kernel path: full (one block and many), rows (short, long: segments), columns (split and
# not), a middle dim, two dims, a transposed view, 0-d and empty.
CASES = [
    ((7,), 0), ((1000,), 0), ((300_007,), 0), ((64, 33), -1), ((3000, 130), 1), ((5, 100_003), 1),
    *WHOLE_ROWS, *BLOCK_ROWS,
    ((33, 64), 0), ((100_003, 5), 0), ((4099, 40), 0), ((6, 513, 10), 1), ((17, 3, 129), (0, 2)),
    ((), 0), ((4, 0), 1), ((0, 4), 1),
]
IDS = [f"{s}-{d}" for s, d in CASES]


def _data(shape, dtype, device, gen, nan_fraction=0.0):
    x = torch.randn(shape, generator=gen, device=device) * 4
    if nan_fraction:
        x[torch.rand(shape, generator=gen, device=device) < nan_fraction] = float("nan")
    return x.to(dtype)


def _check(got, want, x, dtype, seed, what):
    assert got.dtype == want.dtype and got.shape == want.shape and got.device == want.device, what
    ref = want.double().cpu()
    g = got.double().cpu()
    assert torch.equal(g.isnan(), ref.isnan()), f"{what}: NaN pattern, seed {seed}"
    assert torch.equal(g.isinf(), ref.isinf()), f"{what}: inf pattern, seed {seed}"
    finite = ref.isfinite()
    if finite.any():
        scale = x.double().abs().nan_to_num(0).amax().item() if x.numel() else 1.0
        n = max(x.numel() // max(ref.numel(), 1), 1)
        acc_u = UNIT_ROUNDOFF[torch.float64 if dtype == torch.float64 else torch.float32]
        # the float accumulator's rounding (n terms of up to `scale`), then one rounding to dtype
        tol = n * acc_u * scale + 2 * UNIT_ROUNDOFF[dtype] * ref[finite].abs()
        err = (g[finite] - ref[finite]).abs()
        assert bool((err <= tol).all()), f"{what}: error {err.max().item():.3g}, seed {seed}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("op", ("nansum", "nanmean"))
@pytest.mark.parametrize("shape,dim", CASES, ids=IDS)
def test_nan_values(device, dtype, op, shape, dim):
    gen, seed = fresh_generator(device)
    x = _data(shape, dtype, device, gen, nan_fraction=0.2)
    before = storage_bytes(x)
    poison_cuda_allocator(device)
    for d, keepdim in ((dim, False), (dim, True), (None, False)):
        got = getattr(torch_reduce, op)(x, d, keepdim)
        want = getattr(torch, op)(x.double(), d, keepdim).to(got.dtype) if x.numel() else getattr(torch, op)(x, d, keepdim)
        assert got.dtype == getattr(torch, op)(x, d, keepdim).dtype
        _check(got, want, x, dtype, seed, f"{op} dim={d}")
    assert torch.equal(storage_bytes(x), before), "wrote to its input"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("shape,dim", CASES, ids=IDS)
def test_logsumexp_values(device, dtype, shape, dim):
    gen, seed = fresh_generator(device)
    x = (_data(shape, torch.float32, device, gen) * 10 + 30).to(dtype)  # exp(x) overflows float32 at ~88
    before = storage_bytes(x)
    poison_cuda_allocator(device)
    for keepdim in (False, True):
        got = torch_reduce.logsumexp(x, dim, keepdim)
        want = torch.logsumexp(x.double(), dim, keepdim).to(got.dtype)
        assert got.dtype == torch.logsumexp(x, dim, keepdim).dtype
        _check(got, want, x.double().exp().log(), dtype, seed, f"logsumexp dim={dim}")
    assert torch.equal(storage_bytes(x), before), "wrote to its input"


@pytest.mark.parametrize("device", DEVICES)
def test_logsumexp_edges(device):
    """NaN anywhere: NaN; +inf without NaN: +inf; all -inf: -inf; -inf among finite values adds 0;
    integers give float32."""
    x = torch.randn(6, 300, device=device)
    x[0, 5] = float("nan")
    x[1, 7] = float("inf")
    x[2, :] = float("-inf")
    x[3, 9] = float("-inf")
    x[4, 3] = float("inf")
    x[4, 4] = float("nan")
    x[5, :] = float("inf")
    for dim in (1, 0, (0, 1)):
        got, want = torch_reduce.logsumexp(x, dim), torch.logsumexp(x, dim)
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
        assert torch.equal(got[got.isinf()], want[want.isinf()])
        fin = want.isfinite()
        torch.testing.assert_close(got[fin], want[fin])
    i = torch.arange(12, device=device).reshape(3, 4)
    torch.testing.assert_close(torch_reduce.logsumexp(i, 1), torch.logsumexp(i, 1))
    b = torch.ones(3, 4, device=device, dtype=torch.bool)
    torch.testing.assert_close(torch_reduce.logsumexp(b, 0), torch.logsumexp(b, 0))


@pytest.mark.parametrize("dtype", FLOATING)
def test_logsumexp_cpu_runs_to_a_few_ulps(dtype):
    """The CPU's vector exp (sum_simd's exp_sum and exp_sum_columns) over rows and columns: lengths around its vector
    rows, 16-row blocks and 64K chunks, elements spread from the maximum down past exp's normal
    range (spreads of 1 to 30), -inf among them; each row within a few rounding units of a float64 logsumexp: the
    float (double) sum of exp(x - max) >= 1 then log, so 2u relative for the two roundings
    to the result plus (the cascade's depth + exp's error) u absolute, with u the accumulator's."""
    gen, seed = fresh_generator("cpu")
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    u, out_u = UNIT_ROUNDOFF[acc], UNIT_ROUNDOFF[dtype]
    for n in (1, 2, 7, 8, 31, 32, 33, 100, 127, 128, 129, 511, 512, 513, 4096 + 5, 65535, 65536, 65537):
        rows = 3 if n > 4096 else 17
        # spreads of 1 (many terms near the maximum's) to 30 (down past exp's range)
        spread = torch.tensor([1.0, 4.0, 30.0], dtype=torch.float64).repeat(rows)[:rows, None]
        x = torch.randn(rows, n, generator=gen, dtype=torch.float64) * spread
        x[torch.rand(rows, n, generator=gen) < 0.05] = float("-inf")
        x[:, 0] = 0.0  # a finite maximum in every row
        x = x.to(dtype)
        # rows, and the same as columns of (n, rows) (its columns kernel, 16 or 3 wide: a vector
        # block and a padded tail), and (n, 37) columns
        y = torch.randn(n, 37, generator=gen, dtype=torch.float64).mul(spread[:1].item() * 4).to(dtype)
        for what, data, dim in (("rows", x, 1), ("columns", x.t().contiguous(), 0), ("37 columns", y, 0)):
            got = torch_reduce.logsumexp(data, dim).double()
            want = torch.logsumexp(data.double(), dim)
            tol = 2 * out_u * want.abs() + 64 * u
            err = (got - want).abs()
            assert bool((err <= tol).all()), (
                f"n={n} {what}: error {err.max().item():.3g} (bound {tol.min().item():.3g}), seed {seed}")


@pytest.mark.parametrize("device", DEVICES)
def test_nan_types_and_errors(device):
    x = torch.randn(5, 6, device=device)
    x[0, 0] = float("nan")
    # integers: nansum is torch.sum (int64); nanmean refuses them
    i = torch.randint(-50, 50, (5, 6), device=device, dtype=torch.int32)
    for t in INTEGRAL:
        got, want = torch_reduce.nansum(i.to(t), 1), torch.nansum(i.to(t), 1)
        assert got.dtype == want.dtype and torch.equal(got, want)
        with pytest.raises(RuntimeError) as expected:
            torch.nanmean(i.to(t))
        with pytest.raises(RuntimeError, match="nanmean\\(\\): expected input to have floating point") as got:
            torch_reduce.nanmean(i.to(t))
        assert type(got.value) is type(expected.value)  # RuntimeError, or NotImplementedError from torch 2.15
    # dtype=: floating converts first; an integer dtype is what this torch makes of it (an error
    # up to torch 2.14; from 2.15 nansum truncates each element, and nanmean raises another error)
    y = torch.randn(5, 6, device=device) * 3
    y[1, 2] = float("nan")
    for op in ("nansum", "nanmean"):
        got = getattr(torch_reduce, op)(x.half(), 1, dtype=torch.float32)
        want = getattr(torch, op)(x.half(), 1, dtype=torch.float32)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, equal_nan=True)
        try:
            want = getattr(torch, op)(y, 1, dtype=torch.int32)
        except RuntimeError as e:
            with pytest.raises(type(e), match=re.escape(str(e).splitlines()[0])) as raised:
                getattr(torch_reduce, op)(y, 1, dtype=torch.int32)
            assert type(raised.value) is type(e)
        else:
            got = getattr(torch_reduce, op)(y, 1, dtype=torch.int32)
            assert got.dtype == want.dtype and torch.equal(got, want)
    # all NaN: nansum 0, nanmean NaN
    n = torch.full((3, 4), float("nan"), device=device)
    assert torch.equal(torch_reduce.nansum(n, 1), torch.zeros(3, device=device))
    assert torch_reduce.nanmean(n, 1).isnan().all()
    with pytest.raises(IndexError):
        torch_reduce.logsumexp(x, 2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ("nansum", "nanmean", "logsumexp"))
@pytest.mark.parametrize("dim,keepdim", [(1, False), ((0, 2), True), (-1, True)])
def test_gradients(device, op, dim, keepdim):
    x = torch.randn(4, 5, 6, device=device, dtype=torch.float64)
    if op != "logsumexp":
        x[0, 1, 2] = x[3, 4, 5] = float("nan")
    x.requires_grad_(True)
    ours, theirs = getattr(torch_reduce, op), getattr(torch, op)
    w = torch.randn_like(theirs(x, dim, keepdim)).nan_to_num(0)
    got = torch.autograd.grad((ours(x, dim, keepdim).nan_to_num(0) * w).sum(), x)[0]
    want = torch.autograd.grad((theirs(x, dim, keepdim).nan_to_num(0) * w).sum(), x)[0]
    torch.testing.assert_close(got, want, equal_nan=True)
    y = torch.randn(4, 5, 6, device=device, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: ours(t, dim, keepdim), (y,))
    assert torch.autograd.gradgradcheck(lambda t: ours(t, dim, keepdim), (y,))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ("nansum", "nanmean", "logsumexp"))
@pytest.mark.parametrize("requires_grad", (False, True))
def test_opcheck(device, op, requires_grad):
    x = torch.randn(6, 9, device=device, requires_grad=requires_grad)
    overload = getattr(torch.ops.treduce, op).default
    torch.library.opcheck(overload, (x, [1], True))
    if op != "logsumexp":
        torch.library.opcheck(overload, (x,), {"dtype": torch.float64})


@pytest.mark.parametrize("device", DEVICES)
def test_compile(device):
    def f(x):
        return torch_reduce.logsumexp(x, -1) + torch_reduce.nansum(x, -1) + torch_reduce.nanmean(x, -1)

    x = torch.randn(8, 33, device=device, requires_grad=True)
    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(x), f(x))
    torch.testing.assert_close(torch.autograd.grad(compiled(x).sum(), x)[0], torch.autograd.grad(f(x).sum(), x)[0])
