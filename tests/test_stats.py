"""var, std, var_mean and std_mean against torch's: dtypes, shapes, values (against a float64
reference, and no less accurate than torch on the same data), corrections, NaN and inf, empty
dims, errors, autograd, opcheck and torch.compile, on CPU and (when there is one) CUDA."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

import torch_reduce
from util import DEVICES, FLOATING, INTEGRAL, UNIT_ROUNDOFF, WHOLE_ROWS, BLOCK_ROWS, fresh_generator, poison_cuda_allocator, storage_bytes

OPS = {  # ours, torch's, and whether the op returns (stat, mean)
    "var": (torch_reduce.var, torch.var, False),
    "std": (torch_reduce.std, torch.std, False),
    "var_mean": (torch_reduce.var_mean, torch.var_mean, True),
    "std_mean": (torch_reduce.std_mean, torch.std_mean, True),
}

# Shapes and dims that take every kernel: the full reduction (one block and many), rows (short,
# with teams, long and few: segments), columns (wide and narrow, split along the reduced dim),
# three dims with the middle one reduced, and a transposed input.
CASES = [
    ((1,), None), ((7,), None), ((1000,), None), ((65537,), None), ((300_007,), 0),
    ((64, 33), -1), ((3000, 130), 1), ((5, 100_003), 1), ((2, 1 << 17), -1),
    *WHOLE_ROWS, *BLOCK_ROWS,
    ((33, 64), 0), ((100_003, 5), 0), ((4099, 40), 0), ((6, 513, 10), 1), ((17, 3, 129), (0, 2)),
    ((0,), None), ((4, 0), 1), ((0, 4), 1), ((), None), ((), 0),
]


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _errors(x: torch.Tensor, op: str, dim, correction) -> tuple[list[float], list[float]]:
    """Max |error| of ours and of torch's against torch's op on float64 data, per result."""
    ours, theirs, _ = OPS[op]
    ref = _as_tuple(theirs(x.double().cpu(), dim, correction=correction))
    a, b = _as_tuple(ours(x, dim, correction=correction)), _as_tuple(theirs(x, dim, correction=correction))
    for r, t in zip(a, b):
        assert r.dtype == t.dtype and r.shape == t.shape and r.device == t.device
    err = lambda rs: [(r.double().cpu() - e).abs().nan_to_num(0).max().item() if e.numel() else 0.0
                      for r, e in zip(rs, ref)]
    return err(a), err(b), ref


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape,dim", CASES, ids=[f"{s}-{d}" for s, d in CASES])
def test_values(device, dtype, op, shape, dim):
    gen, seed = fresh_generator(device)
    x = (torch.randn(shape, generator=gen, device=device) * 3 + 2).to(dtype)
    for correction in (None, 0, 2.5):
        before = storage_bytes(x)
        poison_cuda_allocator(device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # degrees of freedom <= 0: torch warns too
            ours, theirs, ref = _errors(x, op, dim, correction)
            ours_nan = [r.isnan().cpu() for r in _as_tuple(OPS[op][0](x, dim, correction=correction))]
        assert torch.equal(storage_bytes(x), before), "wrote to its input"
        for k, (e, t, r, nan) in enumerate(zip(ours, theirs, ref, ours_nan)):
            # NaN exactly where the float64 reference has one (count <= correction, empty).
            assert torch.equal(nan, r.isnan()), f"result {k}: NaN pattern, seed {seed}"
            # A float32 accumulator's rounding over a few levels of combining, plus the rounding
            # of the result to its dtype; and no worse than torch's own error on the same data.
            # (float64: the reference is itself float64, so only the bound counts, with room for
            # both computations' roundings.)
            scale = r.abs().nan_to_num(0).max().item() if r.numel() else 0.0
            if op in ("var_mean", "std_mean") and k == 1 and x.numel():
                # The mean's roundings are those of the sums of the elements: relative to the
                # mean of |x|, not to a mean that cancels to near 0 ((7,) float32 drew |mean|
                # 0.004, error 1.5e-7 against torch's 7.5e-8 on data of magnitude 2-8).
                scale = max(scale, x.double().abs().mean(dim).max().item())
            acc = 64 * UNIT_ROUNDOFF[torch.float32] if dtype != torch.float64 else 1024 * UNIT_ROUNDOFF[dtype]
            bound = (acc + 2 * UNIT_ROUNDOFF[dtype]) * max(scale, 1e-30)
            assert e <= max(bound, 2 * t), f"result {k}: error {e} (torch {t}, bound {bound}), seed {seed}"


# Data whose mean is 10^4 times its spread: the sum-of-squares formula loses every digit here;
# Welford's keeps them. Every kernel path (CASES' shapes, the whole tensor in one block and in
# many), several draws: a float32 running mean rounded at 1e4's ulp had put ours 2-4x past
# torch's error in 2 draws of 10 (benchmarks/NOTES.md at 8d99fb0); about a pivot from the data it is not.
# (The last three: small results in a team's registers, CUDA's two passes over whole vectors,
# elements down a column and several reduced runs.)
_LARGE_MEAN = [((1 << 20,), None), ((4000,), None), ((512, 2048), 1), ((64, 33), -1), ((5, 100_003), 1),
               ((2048, 512), 0), ((100_003, 5), 0), ((6, 513, 10), 1), ((40, 256), 1), ((12, 40), 0),
               ((17, 3, 129), (0, 2))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", (torch.float32, torch.float64))
@pytest.mark.parametrize("shape,dim", _LARGE_MEAN, ids=[f"{s}-{d}" for s, d in _LARGE_MEAN])
def test_large_mean(device, dtype, shape, dim):
    for _ in range(4):
        gen, seed = fresh_generator(device)
        x = (torch.randn(shape, generator=gen, device=device, dtype=dtype) + 1e4)
        for op in ("var", "var_mean"):
            ours, theirs, ref = _errors(x, op, dim, None)
            for k in range(len(ours)):
                scale = ref[k].abs().max().item()
                if dtype == torch.float32:  # against a float64 reference: torch's error is a real one
                    assert ours[k] <= max(2 * theirs[k], 16 * UNIT_ROUNDOFF[dtype] * scale), \
                        f"{op}[{k}]: {ours} vs {theirs}, seed {seed}"
            # The condition number of the variance is about mean / spread = 10^4 here.
            assert ours[0] <= 64 * UNIT_ROUNDOFF[dtype] * 1e4 * ref[0].abs().max().item(), f"{ours}, seed {seed}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,dim", _LARGE_MEAN, ids=[f"{s}-{d}" for s, d in _LARGE_MEAN])
def test_large_magnitude(device, shape, dim):
    """float32 values near 1e20 (their squares overflow float32; their deviations' do not, nor
    does M2 over 2^20 of them): a finite variance as torch's, never NaN from an overflowed square
    times an empty partial's weight of 0."""
    gen, seed = fresh_generator(device)
    x = (1 + 1e-5 * torch.randn(shape, generator=gen, device=device)) * 1e20
    ours, theirs, ref = _errors(x, "var_mean", dim, None)
    got = _as_tuple(torch_reduce.var_mean(x, dim))
    for k in range(2):
        assert got[k].isfinite().all(), f"result {k} not finite, seed {seed}"
        assert ours[k] <= max(2 * theirs[k], 64 * UNIT_ROUNDOFF[torch.float32] * ref[k].abs().max().item()), \
            f"result {k}: {ours} vs {theirs}, seed {seed}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", OPS)
def test_nan_inf(device, op):
    ours, theirs, _ = OPS[op]
    x = torch.randn(6, 70, device=device)
    x[1, 3] = float("nan")
    x[2, 5] = float("inf")
    x[3, :] = float("inf")
    x[4, 7] = float("-inf")
    for dim in (None, 1, 0):
        for r, t in zip(_as_tuple(ours(x, dim)), _as_tuple(theirs(x, dim))):
            assert torch.equal(r.isnan(), t.isnan()) and torch.equal(r.isinf(), t.isinf())
            finite = t.isfinite()
            torch.testing.assert_close(r[finite], t[finite])


# Infinities and NaN where the kernels reduce groups of loads, whole rows in a team's registers
# and rows a block each: NaN and infinities exactly where torch has them (its Welford's makes the
# mean of values with an infinity among them NaN on CUDA, as ours).
# Rows of 3 and 7 (CUDA: slabs, a row in a thread's registers in two passes, element by element
# where the mean is not finite): an infinity last in its row leaves torch's mean infinite.
_NONFINITE = [*WHOLE_ROWS, *BLOCK_ROWS, ((4096, 64), 0), ((1 << 16,), None), ((30000, 3), 1), ((20000, 7), 1)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
@pytest.mark.parametrize("shape,dim", _NONFINITE, ids=[f"{s}-{d}" for s, d in _NONFINITE])
def test_nan_inf_paths(device, dtype, shape, dim):
    gen, seed = fresh_generator(device)
    x = torch.randn(shape, generator=gen, device=device).to(dtype)
    flat = x.view(-1)
    flat[5] = float("inf")
    flat[1000], flat[1001] = float("inf"), float("-inf")
    flat[3000] = float("nan")
    if x.dim() == 2:
        x[7, :] = float("-inf")
    for op in ("var_mean", "std_mean"):
        for r, t in zip(OPS[op][0](x, dim), OPS[op][1](x, dim)):
            assert torch.equal(r.isnan(), t.isnan()) and torch.equal(r.isinf(), t.isinf()), f"{op}, seed {seed}"
            assert torch.equal(r[r.isinf()], t[t.isinf()]), f"{op}: infinities' signs, seed {seed}"
            finite = t.isfinite()
            torch.testing.assert_close(r[finite], t[finite], msg=f"{op}, seed {seed}")


@pytest.mark.parametrize("device", DEVICES)
def test_argument_forms(device):
    """torch's overloads: (x, unbiased), (x, dim, unbiased, keepdim), correction= and keepdim=."""
    x = torch.randn(5, 6, 7, device=device, dtype=torch.float64)
    torch.testing.assert_close(torch_reduce.var(x, False), torch.var(x, False))
    torch.testing.assert_close(torch_reduce.std(x, True), torch.std(x, True))
    torch.testing.assert_close(torch_reduce.var(x, (0, 2), False, True), torch.var(x, (0, 2), False, True))
    torch.testing.assert_close(torch_reduce.std(x, 1, keepdim=True, correction=0),
                               torch.std(x, 1, keepdim=True, correction=0))
    torch.testing.assert_close(torch_reduce.var(x, [], correction=3), torch.var(x, [], correction=3))
    for a, b in zip(torch_reduce.std_mean(x, -1, unbiased=False), torch.std_mean(x, -1, unbiased=False)):
        torch.testing.assert_close(a, b)
    with pytest.raises(TypeError):
        torch_reduce.var(x, 0, True, correction=1)
    # The ops themselves, as torch.ops.aten's correction overloads take them.
    torch.testing.assert_close(torch.ops.treduce.var(x, [1], correction=0.5, keepdim=True),
                               torch.ops.aten.var.correction(x, [1], correction=0.5, keepdim=True))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", OPS)
def test_errors(device, op):
    ours, theirs, _ = OPS[op]
    for dtype in INTEGRAL:
        x = torch.ones(3, dtype=dtype, device=device)
        with pytest.raises(RuntimeError) as expected:
            theirs(x)
        # torch's type and words, whichever this release has
        with pytest.raises(type(expected.value), match=re.escape(str(expected.value).splitlines()[0])) as got:
            ours(x)
        assert type(got.value) is type(expected.value)
    x = torch.ones(3, 4, device=device)
    for dim in (2, -3):
        with pytest.raises(IndexError):
            theirs(x, dim)
        with pytest.raises(IndexError):
            ours(x, dim)
    with pytest.raises(RuntimeError, match="appears multiple times"):
        ours(x, (0, 0))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), ((0, 2), True)])
def test_gradients(device, op, dim, keepdim):
    ours, theirs, pair = OPS[op]
    x = torch.randn(4, 5, 6, device=device, dtype=torch.float64, requires_grad=True)
    for correction in (None, 0, 2):
        f = lambda t: ours(t, dim, keepdim=keepdim, correction=correction)
        g = lambda t: theirs(t, dim, keepdim=keepdim, correction=correction)
        assert torch.autograd.gradcheck(f, (x,))
        outs, refs = _as_tuple(f(x)), _as_tuple(g(x))
        weights = [torch.randn_like(r) for r in refs]
        got = torch.autograd.grad(sum((o * w).sum() for o, w in zip(outs, weights)), x)[0]
        want = torch.autograd.grad(sum((r * w).sum() for r, w in zip(refs, weights)), x)[0]
        torch.testing.assert_close(got, want)
        if pair:  # only one of the two results used
            got = torch.autograd.grad(f(x)[1].sum(), x)[0]
            want = torch.autograd.grad(g(x)[1].sum(), x)[0]
            torch.testing.assert_close(got, want)
    assert torch.autograd.gradgradcheck(lambda t: ours(t, dim, keepdim=keepdim), (x,))


@pytest.mark.parametrize("device", DEVICES)
def test_gradient_edges(device):
    """std of constant data (zero std: torch's gradient is 0 there) and var with count <= correction."""
    x = torch.full((3, 4), 2.0, device=device, dtype=torch.float64, requires_grad=True)
    got = torch.autograd.grad(torch_reduce.std(x, 1).sum(), x)[0]
    want = torch.autograd.grad(torch.std(x, 1).sum(), x)[0]
    torch.testing.assert_close(got, want)
    y = torch.tensor([1.0, 3.0], device=device, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.autograd.grad(torch_reduce.var(y, correction=2), y)[0]
        want = torch.autograd.grad(torch.var(y, correction=2), y)[0]
    torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("requires_grad", (False, True))
def test_opcheck(device, op, requires_grad):
    x = torch.randn(6, 9, device=device, requires_grad=requires_grad)
    overload = getattr(torch.ops.treduce, op).default
    torch.library.opcheck(overload, (x, [1]), {"correction": 0, "keepdim": True})
    torch.library.opcheck(overload, (x,), {})


@pytest.mark.parametrize("device", DEVICES)
def test_compile(device):
    def f(x):
        v, m = torch_reduce.var_mean(x, -1, keepdim=True)
        return (x - m) / torch_reduce.std(x, -1, keepdim=True, correction=0) + v

    x = torch.randn(8, 33, device=device, requires_grad=True)
    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(x), f(x))
    g1 = torch.autograd.grad(compiled(x).sum(), x)[0]
    g2 = torch.autograd.grad(f(x).sum(), x)[0]
    torch.testing.assert_close(g1, g2)
