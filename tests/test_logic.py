"""any, all, count_nonzero, aminmax, max, min, argmax and argmin against torch's: dtypes, shapes and values (exact: counts,
truth values and extrema have one right answer), NaN, -0.0, infinities, 1-byte inputs at every
alignment, empty dims, errors, autograd, opcheck and torch.compile, on CPU and (when there is
one) CUDA."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch

import torch_reduce
from util import DEVICES, DTYPES, FLOATING, INTEGRAL, cuda_only, fresh_generator, gpu_memory, poison_cuda_allocator, storage_bytes

# Every kernel path: full (one block and many), rows (short, long: segments), columns (split and
# not), a middle dim, two dims, a transposed view, 0-d, size-1 and empty.
CASES = [
    ((7,), 0), ((1000,), 0), ((300_007,), 0), ((64, 33), -1), ((3000, 130), 1), ((5, 100_003), 1),
    ((33, 64), 0), ((100_003, 5), 0), ((4099, 40), 0), ((6, 513, 10), 1), ((17, 3, 129), (0, 2)),
    ((), 0), ((5, 1), 1), ((4, 0), 1), ((0, 4), 1),
]
IDS = [f"{s}-{d}" for s, d in CASES]


def _data(shape, dtype, device, gen, zeros=0.5):
    """Values of the whole range, about `zeros` of them 0; floats with -0.0 (a zero), NaN, inf and
    subnormals (non-zero) in them. Where there is room, one row of all zeros and one of none, so
    that any and all see both answers along any dim."""
    if dtype == torch.bool:
        x = torch.rand(shape, generator=gen, device=device) >= zeros
    elif dtype in INTEGRAL:
        info = torch.iinfo(dtype)
        hi = info.max if dtype == torch.int64 else info.max + 1
        x = torch.randint(info.min, hi, shape, generator=gen, device=device, dtype=dtype)
        x = x.masked_fill(torch.rand(shape, generator=gen, device=device) < zeros, 0)
    else:
        x = (torch.randn(shape, generator=gen, device=device) * 100).to(dtype)
        x = x.masked_fill(torch.rand(shape, generator=gen, device=device) < zeros, 0)
        flat = x.view(-1)
        n = flat.numel()
        if n >= 8:
            idx = torch.randperm(n, generator=gen, device=device)[:8]
            tiny = torch.finfo(dtype).tiny
            specials = [-0.0, float("nan"), float("inf"), -float("inf"), tiny / 4, -tiny / 2, -0.0, 1.0]
            flat[idx] = torch.tensor(specials, device=device).to(dtype)
    if x.dim() >= 2 and x.shape[0] >= 3 and x.shape[-1] > 0:
        x[0] = 0
        x[1] = 1
    return x


def _check(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape and got.device == want.device, (
        f"{what}: {got.dtype}{tuple(got.shape)} against torch's {want.dtype}{tuple(want.shape)}")
    assert torch.equal(got.isnan() if got.is_floating_point() else got, want.isnan() if want.is_floating_point() else want), what
    if got.is_floating_point():  # (0.0 == -0.0: the extremum of a tie of zeros may be either)
        assert torch.equal(got.nan_to_num(), want.nan_to_num()), what


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", CASES, ids=IDS)
def test_logic_values(device, dtype, shape, dim):
    gen, seed = fresh_generator(device)
    x = _data(shape, dtype, device, gen)
    before = storage_bytes(x)
    poison_cuda_allocator(device)
    calls = [(dim, False), (dim, True), (None, False), (None, True), ((), False), ((), True)]
    for op in ("any", "all", "count_nonzero"):
        for d, keepdim in calls:
            if op == "count_nonzero" and keepdim:
                continue  # it takes none
            what = f"{op}(dim={d}, keepdim={keepdim}) {dtype} seed {seed}"
            args = (d,) if op == "count_nonzero" else (d, keepdim)
            if d is None and op != "count_nonzero":
                args = () if not keepdim else (None, True)
            want = getattr(torch, op)(x, *args)
            got = getattr(torch_reduce, op)(x, *args)
            _check(got, want, what)
    assert torch.equal(storage_bytes(x), before), "wrote to its input"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", CASES, ids=IDS)
def test_aminmax_values(device, dtype, shape, dim):
    """Against torch's CPU kernel: torch's CUDA aminmax drops keepdim when there is no dim (a 0-d
    result where its CPU kernel keeps every dim as size 1); ours keeps them on both devices."""
    gen, seed = fresh_generator(device)
    x = _data(shape, dtype, device, gen, zeros=0.1)
    if dtype.is_floating_point and x.numel() >= 8:
        x.view(-1)[torch.randperm(x.numel(), generator=gen, device=device)[:4]] = 3.0  # no NaN in some rows
    before = storage_bytes(x)
    poison_cuda_allocator(device)
    dims = [dim] if isinstance(dim, int) else []
    for d in dims + [None]:
        for keepdim in (False, True):
            what = f"aminmax(dim={d}, keepdim={keepdim}) {dtype} seed {seed}"
            try:
                want = torch.aminmax(x.cpu(), dim=d, keepdim=keepdim)
            except (RuntimeError, IndexError) as e:  # no identity: an empty reduction
                with pytest.raises(type(e), match=re.escape(str(e).splitlines()[0])):
                    torch_reduce.aminmax(x, dim=d, keepdim=keepdim)
                continue
            got = torch_reduce.aminmax(x, dim=d, keepdim=keepdim)
            assert type(got) is type(want) and got.min.device == x.device, what
            _check(got.min.cpu(), want.min, what + " min")
            _check(got.max.cpu(), want.max, what + " max")
    assert torch.equal(storage_bytes(x), before), "wrote to its input"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", (torch.bool, torch.uint8, torch.int8))
def test_bytes_every_alignment(device, dtype):
    """1-byte inputs are counted four bytes at a time on CUDA: every byte value (0x80 alone, 0x01,
    0xff ...) at every offset from a 16-byte boundary, around the single block's size, and rows
    whose starts are not aligned."""
    gen, seed = fresh_generator(device)
    values = torch.arange(256, device=device).to(torch.uint8)
    for n in (1, 15, 16, 17, 255, 4096, 1 << 17, (1 << 17) + 3, 1_000_003):
        base = torch.randint(0, 256, (n + 16,), generator=gen, device=device).to(torch.uint8)
        base[torch.rand(n + 16, generator=gen, device=device) < 0.3] = 0
        base[: min(n, 256)] = values[: min(n, 256)]
        x = (base != 0) if dtype == torch.bool else base.view(dtype)
        for off in range(16):
            t = x[off: off + n]
            for op in ("any", "all", "count_nonzero"):
                _check(getattr(torch_reduce, op)(t), getattr(torch, op)(t), f"{op} n={n} off={off} seed {seed}")
            _check(torch_reduce.aminmax(t).min, torch.aminmax(t).min, f"aminmax n={n} off={off} seed {seed}")
            _check(torch_reduce.aminmax(t).max, torch.aminmax(t).max, f"aminmax n={n} off={off} seed {seed}")
        rows = x[: (n // 7) * 7].view(-1, 7) if n >= 7 else x[:n].view(1, -1)
        for op in ("any", "all", "count_nonzero"):
            _check(getattr(torch_reduce, op)(rows, 1), getattr(torch, op)(rows, 1), f"{op} rows n={n} seed {seed}")
            _check(getattr(torch_reduce, op)(rows, 0), getattr(torch, op)(rows, 0), f"{op} columns n={n} seed {seed}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", (torch.bool, torch.uint8, torch.int8))
def test_byte_columns_every_width_and_row_count(device, dtype):
    """Columns of 1-byte inputs (on the CPU counted in byte counters a group of 16 rows, and any
    and all OR-ed and AND-ed into the result in strips of 4096): widths around the 128-column
    blocks and the strips, row counts around the groups and the 256-row segments, every byte
    value, dense and permuted layouts; exact against torch."""
    gen, seed = fresh_generator(device)
    for rows, width in ((1, 1), (3, 127), (16, 128), (17, 129), (40, 300), (255, 257), (257, 64), (600, 33),
                        (5, 4099)):
        base = torch.randint(0, 256, (rows, width), generator=gen, device=device).to(torch.uint8)
        base[torch.rand(rows, width, generator=gen, device=device) < 0.5] = 0
        base[:, :2] = 255  # every row non-zero (all: true) in the first two columns
        x = (base != 0) if dtype == torch.bool else base.view(dtype)
        permuted = x.reshape(rows, 1, width).expand(rows, 3, width).contiguous().permute(1, 0, 2)
        for t, dim in ((x, 0), (permuted, 1)):
            for op in ("any", "all", "count_nonzero"):
                _check(getattr(torch_reduce, op)(t, dim), getattr(torch, op)(t, dim),
                       f"{op} ({rows}, {width}) dim {dim} {dtype} seed {seed}")


@pytest.mark.parametrize("device", DEVICES)
def test_special_values(device):
    """NaN is non-zero (any, count) and wins both extrema; -0.0 is zero; all of nothing is True and
    any of nothing False; a dim of size 0 among others."""
    x = torch.tensor([[0.0, -0.0, 0.0], [float("nan"), 0.0, -0.0], [1.0, float("nan"), -float("inf")]], device=device)
    for t in (x, x.t(), x.half(), x.bfloat16(), x.double()):
        for d in (None, 0, 1):
            for op in ("any", "all", "count_nonzero"):
                _check(getattr(torch_reduce, op)(t, d), getattr(torch, op)(t, d), f"{op} {t.dtype} dim={d}")
        for d in (None, 0, 1):
            got, want = torch_reduce.aminmax(t, dim=d), torch.aminmax(t, dim=d)
            _check(got.min, want.min, f"aminmax {t.dtype} dim={d}")
            _check(got.max, want.max, f"aminmax {t.dtype} dim={d}")
    for shape, d in (((0,), None), ((3, 0), 1), ((3, 0), 0), ((0, 4), (0, 1)), ((2, 0, 3), 1)):
        e = torch.zeros(shape, device=device)
        for op in ("any", "all", "count_nonzero"):
            _check(getattr(torch_reduce, op)(e, d), getattr(torch, op)(e, d), f"{op} empty {shape} dim={d}")


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    x = torch.ones(3, 4, device=device)
    for op, args in (("any", (2,)), ("all", (-3,)), ("count_nonzero", (2,)), ("any", ((0, 0),)),
                     ("count_nonzero", ((1, -1),))):
        with pytest.raises(Exception) as expected:
            getattr(torch, op)(x, *args)
        with pytest.raises(type(expected.value), match=re.escape(str(expected.value).splitlines()[0])):
            getattr(torch_reduce, op)(x, *args)
    for t, d in ((torch.empty(0, device=device), None), (torch.empty(3, 0, device=device), None),
                 (torch.empty(3, 0, device=device), 1), (x, 2)):
        with pytest.raises(Exception) as expected:
            torch.aminmax(t, dim=d)
        with pytest.raises(type(expected.value), match=re.escape(str(expected.value).splitlines()[0])):
            torch_reduce.aminmax(t, dim=d)
    with pytest.raises(TypeError, match="must be int, not tuple"):
        torch_reduce.aminmax(x, dim=(0, 1))
    with pytest.raises(TypeError, match="not supported"):
        torch_reduce.any(torch.ones(3, dtype=torch.complex64, device=device))


def _torch_aminmax_has_gradient() -> bool:
    x = torch.ones(2, requires_grad=True)
    try:
        torch.aminmax(x).max.backward()
    except RuntimeError:
        return False  # torch 2.11
    return True


@pytest.mark.parametrize("device", DEVICES)
def test_autograd(device):
    """No gradient flows through truth values and counts; aminmax's is amin's and amax's (split
    evenly among ties), torch's own from 2.12 (2.11's raises)."""
    x = torch.randn(4, 5, device=device, requires_grad=True)
    for op in ("any", "all", "count_nonzero"):
        out = getattr(torch_reduce, op)(x, 1)
        assert not out.requires_grad and torch.equal(out, getattr(torch, op)(x, 1))
    t = torch.randint(-2, 3, (4, 5, 3), device=device).double().requires_grad_()
    for dim, keepdim in ((1, False), (0, True), (None, False), (None, True)):
        lo, hi = torch_reduce.aminmax(t, dim=dim, keepdim=keepdim)
        g_lo, g_hi = torch.randn_like(lo), torch.randn_like(hi)
        got = torch.autograd.grad((lo, hi), t, (g_lo, g_hi))[0]
        dims = () if dim is None else (dim,)
        want = torch.autograd.grad((torch.amin(t, dims, keepdim), torch.amax(t, dims, keepdim)), t, (g_lo, g_hi))[0]
        assert torch.equal(got, want), (dim, keepdim)
        if _torch_aminmax_has_gradient() and not (dim is None and keepdim and device == "cuda"):
            lo_t, hi_t = torch.aminmax(t, dim=dim, keepdim=keepdim)
            assert torch.equal(torch.autograd.grad((lo_t, hi_t), t, (g_lo, g_hi))[0], got), (dim, keepdim)
    torch.autograd.gradcheck(lambda u: torch_reduce.aminmax(u, dim=1), (torch.randn(3, 4, device=device,
                             dtype=torch.float64, requires_grad=True),))
    with torch.no_grad():
        assert not torch_reduce.aminmax(x).min.requires_grad


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bool, torch.uint8, torch.int32))
def test_opcheck(device, dtype):
    x = (torch.randn(6, 9, device=device) * 3).to(dtype)
    for op in ("any", "all"):
        overload = getattr(torch.ops.treduce, op).default
        torch.library.opcheck(overload, (x,))
        torch.library.opcheck(overload, (x, [1], True))
        torch.library.opcheck(overload, (x, []))
    torch.library.opcheck(torch.ops.treduce.count_nonzero.default, (x, [0]))
    torch.library.opcheck(torch.ops.treduce.count_nonzero.default, (x,))
    torch.library.opcheck(torch.ops.treduce.aminmax.default, (x,))
    torch.library.opcheck(torch.ops.treduce.aminmax.default, (x,), {"dim": 1, "keepdim": True})


@pytest.mark.parametrize("device", DEVICES)
def test_compile(device):
    def f(x):
        lo, hi = torch_reduce.aminmax(x, dim=-1)
        mask = torch_reduce.any(x > 1, -1) & torch_reduce.all(x > -5, -1)
        return (hi - lo) * mask + torch_reduce.count_nonzero(x > 0, -1)

    x = torch.randn(8, 33, device=device)
    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(x), f(x))
    torch.testing.assert_close(f(x), (x.amax(-1) - x.amin(-1)) * ((x > 1).any(-1) & (x > -5).all(-1))
                               + (x > 0).sum(-1))


@cuda_only
@gpu_memory
@pytest.mark.parametrize("dtype", (torch.bool, torch.uint8))
def test_past_int32(dtype):
    """Counts past 2^31 (int64 throughout) and a first or last element deciding the answer."""
    n = (1 << 31) + 17
    x = torch.ones(n, dtype=dtype, device="cuda")
    assert torch_reduce.count_nonzero(x).item() == n
    assert torch_reduce.all(x).item() and torch_reduce.any(x).item()
    x[-1] = 0
    assert torch_reduce.count_nonzero(x).item() == n - 1
    assert not torch_reduce.all(x).item()
    x.zero_()
    x[n - 1] = 7 if dtype == torch.uint8 else True
    assert torch_reduce.any(x).item() and torch_reduce.count_nonzero(x).item() == 1
    lo, hi = torch_reduce.aminmax(x)
    assert lo.item() == 0 and hi.item() == (7 if dtype == torch.uint8 else 1)
    del x
    torch.cuda.empty_cache()


def _tied_data(shape, dtype, device, gen):
    """Few distinct values, so that every row has ties of its extrema; floats with NaN in a few
    places (in some rows more than one) and -0.0 beside 0.0."""
    x = torch.randint(-3, 4, shape, generator=gen, device=device)
    if dtype == torch.bool:
        return x > 0
    x = x.to(dtype)
    if dtype.is_floating_point and x.numel() >= 16:
        flat = x.view(-1)
        idx = torch.randperm(flat.numel(), generator=gen, device=device)
        flat[idx[: max(2, flat.numel() // 200)]] = float("nan")
        flat[idx[-4:]] = -0.0
    return x


ARG_OPS = ("max", "min", "argmax", "argmin")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", CASES, ids=IDS)
def test_indexed_values(device, dtype, shape, dim):
    """Values and indices equal to torch's CPU kernel's (the first extremum; the first NaN)."""
    gen, seed = fresh_generator(device)
    x = _tied_data(shape, dtype, device, gen)
    before = storage_bytes(x)
    poison_cuda_allocator(device)
    ref = x.cpu()
    dims = [dim] if isinstance(dim, int) else []
    for op in ARG_OPS:
        for d in dims + [None]:
            for keepdim in (False, True):
                if op in ("max", "min") and d is None and keepdim:
                    continue  # a TypeError in torch
                what = f"{op}(dim={d}, keepdim={keepdim}) {dtype} seed {seed}"
                args = () if d is None and not keepdim else (d, keepdim)
                try:
                    want = getattr(torch, op)(ref, *args)
                except (RuntimeError, IndexError) as e:
                    with pytest.raises(type(e), match=re.escape(str(e).splitlines()[0])):
                        getattr(torch_reduce, op)(x, *args)
                    continue
                got = getattr(torch_reduce, op)(x, *args)
                if isinstance(want, tuple):
                    assert type(got) is type(want), what
                    _check(got.values.cpu(), want.values, what + " values")
                    _check(got.indices.cpu(), want.indices, what + " indices")
                else:
                    _check(got.cpu(), want, what)
    assert torch.equal(storage_bytes(x), before), "wrote to its input"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.int32, torch.uint8))
def test_indexed_far_ties(device, dtype):
    """The same extremum at several positions far apart (other blocks, segments, tiles): the first
    one, over every dim, a transposed view and a sliced one; NaN beats them."""
    gen, seed = fresh_generator(device)
    for n in (1000, 65_537, 1_000_003):
        x = torch.randint(0, 50, (n,), generator=gen, device=device).to(dtype)
        pos = sorted(torch.randperm(n, generator=torch.Generator().manual_seed(seed + n))[:5].tolist())
        x[pos] = 100
        x[pos[2]: pos[2] + 1] = 0 if dtype == torch.uint8 else -100
        for t in (x, x[1:], x.view(-1, 1).expand(n, 3).t()):
            for op in ARG_OPS:
                want = getattr(torch, op)(t.cpu(), 0) if op in ("max", "min") else getattr(torch, op)(t.cpu())
                got = getattr(torch_reduce, op)(t, 0) if op in ("max", "min") else getattr(torch_reduce, op)(t)
                if op in ("max", "min"):
                    _check(got.indices.cpu(), want.indices, f"{op} n={n} seed {seed}")
                else:
                    _check(got.cpu(), want, f"{op} n={n} seed {seed}")
        if dtype.is_floating_point:
            x[pos[3]] = float("nan")
            x[pos[4]] = float("nan")
            assert torch_reduce.argmax(x).item() == pos[3] and torch_reduce.argmin(x).item() == pos[3]


def _check_positions(x, dim, what):
    """max and min (values and positions), argmax and argmin of x over dim: torch's answers
    (max and min alone for bool, which torch's argmax and argmin refuse)."""
    ref = x.cpu()
    for op in ARG_OPS[:2] if x.dtype == torch.bool else ARG_OPS:
        want, got = getattr(torch, op)(ref, dim), getattr(torch_reduce, op)(x, dim)
        if op in ("max", "min"):
            _check(got.values.cpu(), want.values, f"{op} {what}")
            _check(got.indices.cpu(), want.indices, f"{op} {what}")
        else:
            _check(got.cpu(), want, f"{op} {what}")


@pytest.mark.parametrize("device", DEVICES)
def test_positions_over_long_columns(device):
    """max, min, argmax and argmin over dim 0 of columns longer than the CPU's 256-row segments
    (its column extrema, then a pass for each column's first row holding them): ties in every
    column, NaN in two segments of one, -0.0 before 0.0 in another; torch's answers."""
    gen, seed = fresh_generator(device)
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.int16):
        x = torch.randint(-3, 4, (1000, 67), generator=gen, device=device).to(dtype)
        if dtype.is_floating_point:
            x[700, 5] = x[300, 5] = float("nan")
            x[:, 9] = -0.0
            x[600, 9] = 0.0
        _check_positions(x, 0, f"{dtype} seed {seed}")
        _check_positions(x[:, ::2], 0, f"{dtype} [:, ::2] seed {seed}")  # strided columns


@pytest.mark.parametrize("device", DEVICES)
def test_positions_over_strided_narrow_columns(device):
    """max, min, argmax and argmin over dim 1 of (4099, 56, 7)[:, :, ::2]: on CUDA each result's
    column a strided row (the rows kernel's teams, four results of an outer index in a warp),
    ties everywhere and NaN; torch's answers."""
    gen, seed = fresh_generator(device)
    for dtype in (torch.float32, torch.bfloat16, torch.int32):
        x = _tied_data((4099, 56, 7), dtype, device, gen)[:, :, ::2]
        if device == "cuda":
            assert [s["kernel"] for s in torch_reduce.explain(x, 1, "argmax")["plan"]["steps"]] == ["rows_kernel"]
        _check_positions(x, 1, f"{dtype} seed {seed}")


@pytest.mark.parametrize("device", DEVICES)
def test_positions_over_short_rows(device):
    """max, min, argmax and argmin over rows of 1 to 17 elements, contiguous and strided, of
    numbers of rows that leave every remainder of the CPU's four rows side by side: ties in every
    row, NaN (more than one in some rows) and -0.0; torch's answers."""
    gen, seed = fresh_generator(device)
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8,
                  torch.int16, torch.int64, torch.bool):
        for n in (1, 2, 3, 5, 8, 13, 16, 17):
            for rows in (1, 6, 67):
                x = _tied_data((rows, n), dtype, device, gen)
                if dtype == torch.uint8:
                    x = x + 3  # (-3 wraps: 253 and more)
                _check_positions(x, 1, f"{dtype} ({rows}, {n}) seed {seed}")
                _check_positions(x.t(), 0, f"{dtype} ({rows}, {n}).t() seed {seed}")


@pytest.mark.parametrize("device", DEVICES)
def test_positions_over_bool_columns(device):
    """max and min of bool over dim 0 of columns longer than the CPU's 256-row
    segments, wider than its blocks of 256 columns: columns all false, all true, with one true in
    the last row or one false in the first, random ones; and over dim 1 of the transpose."""
    gen, seed = fresh_generator(device)
    for rows, cols in ((1000, 300), (7, 5), (300, 1025)):
        x = torch.rand(rows, cols, generator=gen, device=device) < 0.3
        x[:, 0] = False
        x[:, 1] = True
        x[:, 2] = False
        x[rows - 1, 2] = True
        x[:, 3] = True
        x[0, 3] = False
        x[:, 4] = torch.rand(rows, generator=gen, device=device) < 0.002
        _check_positions(x, 0, f"({rows}, {cols}) seed {seed}")
        _check_positions(x.t(), 1, f"({rows}, {cols}).t() seed {seed}")
        _check_positions(~x, 0, f"~({rows}, {cols}) seed {seed}")


# Non-contiguous views for argmax and argmin over every dim (positions in row-major order):
# transposed, permuted, sliced, expanded, channels_last; around the 8192 elements up to which CUDA
# reads them in place, in logical order, and past the four runs an index takes.
LOGICAL_VIEWS = [
    ((3, 96, 16), lambda t: t.transpose(0, 1)),
    ((7, 5, 3), lambda t: t.permute(2, 0, 1)),
    ((40, 33), lambda t: t[::3, 1::2]),
    ((4, 1, 50), lambda t: t.expand(4, 6, 50)),
    ((2, 3, 9, 5), lambda t: t.contiguous(memory_format=torch.channels_last)),
    ((64, 128), lambda t: t.t()),             # 8192 elements: in place
    ((8193, 1), lambda t: t.t()[:, :]),       # contiguous as a view (one run): no copy either way
    ((97, 85), lambda t: t.t()),              # 8245: a copy first
    ((2, 2, 2, 2, 2, 3), lambda t: t.permute(5, 3, 1, 4, 2, 0)),  # six runs: a copy first
]


@pytest.mark.parametrize("device", DEVICES)
def test_positions_over_every_dim_of_views(device):
    """argmax and argmin over every dim of views: the first extremum in row-major order, as
    torch's, with ties everywhere and NaN; on CUDA up to 8192 elements without a copy."""
    gen, seed = fresh_generator(device)
    for dtype in (torch.float32, torch.bfloat16, torch.int8):
        for shape, view in LOGICAL_VIEWS:
            x = view(_tied_data(shape, dtype, device, gen))
            ref = x.cpu()
            for op in ("argmax", "argmin"):
                _check(getattr(torch_reduce, op)(x).cpu(), getattr(torch, op)(ref), f"{op} {shape} {dtype} seed {seed}")
            if device == "cuda":
                in_place = x.numel() <= 8192 and x.dim() <= 4
                assert torch_reduce.explain(x, None, "argmax")["copy"] is (not in_place and not x.is_contiguous()), shape


# Runs around the CPU kernels' edges: vectors of 4-16 lanes, steps of two or four vectors, the
# padded last vector, 64K-element chunks.
RUN_LENGTHS = (1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 257, 65_535, 65_537, 131_075)


def check_extrema_wide_columns(seed: int) -> None:
    """Columns of rows of 4 KB and more (taken 16 rows at a time across the row): a special value
    (above all, below all, NaN) in some columns at rows around the groups of 16, amax, amin and
    aminmax over dim 0 equal to torch's."""
    gen = torch.Generator().manual_seed(seed)
    for dtype in FLOATING + (torch.int8, torch.int32, torch.int64):
        for rows, width in ((1, 4100), (17, 2051), (40, 1100 * 4 // dtype.itemsize + 3)):
            if dtype.is_floating_point:
                x = torch.randn(rows, width, generator=gen).to(dtype)
                specials = (10.0, -10.0, float("nan"))
            else:
                info = torch.iinfo(dtype)
                x = torch.randint(max(info.min, -50), 50, (rows, width), generator=gen).to(dtype)
                specials = (info.max, info.min)
            cols = torch.randint(0, width, (12,), generator=gen).tolist() + [0, width - 1]
            for k, c in enumerate(cols):
                r = (0, 15, 16, 17, rows - 1)[k % 5] % rows
                x[r, c] = specials[k % len(specials)]
            what = f"({rows}, {width}) {dtype} seed {seed}"
            for op in ("amax", "amin"):
                _check(getattr(torch_reduce, op)(x, 0), getattr(torch, op)(x, 0), f"{op} {what}")
            got, want = torch_reduce.aminmax(x, dim=0), torch.aminmax(x, dim=0)
            _check(got.min, want.min, f"aminmax {what}")
            _check(got.max, want.max, f"aminmax {what}")


def check_logic_runs(seed: int) -> None:
    """any, all and count_nonzero over rows of RUN_LENGTHS (a block of short rows a kernel call,
    vectors of four rows, the 8- and 16-bit lanes' flushes at long ones) and over the whole
    tensor, every dtype: half the elements zero (-0.0 among them), NaN and subnormals non-zero, a
    row of all zeros and one with none."""
    gen = torch.Generator().manual_seed(seed)
    for n in RUN_LENGTHS:
        rows = 3 if n > 4096 else 70
        for dtype in DTYPES:
            x = _data((rows, n), dtype, "cpu", gen)
            if dtype.is_floating_point:
                x = x.masked_fill(torch.rand(x.shape, generator=gen) < 0.1, -0.0)
            what = f"(rows, {n}) {dtype} seed {seed}"
            for op in ("any", "all", "count_nonzero"):
                for args in ((-1,), ()):
                    _check(getattr(torch_reduce, op)(x, *args), getattr(torch, op)(x, *args), f"{op}{args} {what}")


def check_extrema_runs(seed: int) -> None:
    """Each row of a (rows, n) tensor holds a value above every other (or below, or a NaN) at
    another position (first, last, around vector and chunk edges, random), with a later copy in
    half of the rows: amax, amin, aminmax, max, min, argmax and argmin over the rows and over the
    whole tensor, equal to torch's (values, the first position, NaN wins), floats and integers."""
    gen = torch.Generator().manual_seed(seed)
    for n in RUN_LENGTHS:
        pos = sorted({p for p in (0, 1, 7, 8, 15, 16, 31, 32, 63, 64, n // 2, 65_535, 65_536, n - 2, n - 1) if 0 <= p < n}
                     | set(torch.randint(0, n, (3,), generator=gen).tolist()))
        for dtype in FLOATING + (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64):
            if dtype.is_floating_point:
                specials = (10.0, -10.0, float("nan"), None)
                base = torch.randn(len(pos), n, generator=gen).to(dtype)
            else:
                info = torch.iinfo(dtype)
                specials = (info.max, info.min, None)
                base = torch.randint(max(info.min, -50), 50, (len(pos), n), generator=gen).to(dtype)
            for special in specials:
                x = base.clone()
                if special is not None:
                    for r, p in enumerate(pos):
                        x[r, p] = special
                        if r % 2 and p + 1 < n:
                            x[r, torch.randint(p + 1, n, (1,), generator=gen).item()] = special
                what = f"n={n} {dtype} special={special} seed {seed}"
                for op in ("amax", "amin"):
                    for args in ((-1,), ()):
                        _check(getattr(torch_reduce, op)(x, *args), getattr(torch, op)(x, *args), f"{op}{args} {what}")
                for args in ({"dim": -1}, {}):
                    got, want = torch_reduce.aminmax(x, **args), torch.aminmax(x, **args)
                    _check(got.min, want.min, f"aminmax {args} {what}")
                    _check(got.max, want.max, f"aminmax {args} {what}")
                # the same values as columns (dim 0 of the transpose, made contiguous): the
                # columns kernel, its whole vectors and its padded last columns
                xt = x.t().contiguous()
                for op in ("amax", "amin"):
                    _check(getattr(torch_reduce, op)(xt, 0), getattr(torch, op)(xt, 0), f"{op} columns {what}")
                got, want = torch_reduce.aminmax(xt, dim=0), torch.aminmax(xt, dim=0)
                _check(got.min, want.min, f"aminmax columns {what}")
                _check(got.max, want.max, f"aminmax columns {what}")
                for op in ("max", "min"):
                    got, want = getattr(torch_reduce, op)(x, -1), getattr(torch, op)(x, -1)
                    _check(got.values, want.values, f"{op} {what}")
                    _check(got.indices, want.indices, f"{op} indices {what}")
                for op in ("argmax", "argmin"):
                    for args in ((-1,), ()):
                        _check(getattr(torch_reduce, op)(x, *args), getattr(torch, op)(x, *args), f"{op}{args} {what}")


@pytest.mark.parametrize("isa", ("this CPU's", "base"))
def test_cpu_extrema_runs(isa, tmp_path):
    """check_extrema_runs, check_extrema_wide_columns and check_logic_runs on the vector kernels
    this CPU gets and on the baseline build's (TREDUCE_CPU_ISA=base, in a process of its own)."""
    _, seed = fresh_generator("cpu")
    if isa != "base":
        check_extrema_runs(seed)
        check_extrema_wide_columns(seed)
        check_logic_runs(seed)
        return
    here = os.path.dirname(os.path.abspath(__file__))
    script = (f"import sys; sys.path.insert(0, {here!r}); import test_logic; test_logic.check_extrema_runs({seed}); "
              f"test_logic.check_extrema_wide_columns({seed}); test_logic.check_logic_runs({seed})")
    subprocess.run([sys.executable, "-c", script], check=True, env=dict(os.environ, TREDUCE_CPU_ISA="base"))


@pytest.mark.parametrize("device", DEVICES)
def test_indexed_errors(device):
    x = torch.ones(3, 4, device=device)
    calls = [("argmax", (torch.ones(3, dtype=torch.bool, device=device),), {}),
             ("argmin", (torch.empty(0, device=device),), {}),
             ("argmax", (torch.empty(3, 0, device=device), 1), {}),
             ("max", (torch.empty(3, 0, device=device), 1), {}),
             ("min", (torch.empty(0, device=device),), {}),
             ("max", (x, 2), {}), ("argmin", (x, -3), {})]
    for op, args, kwargs in calls:
        with pytest.raises(Exception) as expected:
            getattr(torch, op)(*args, **kwargs)
        with pytest.raises(type(expected.value), match=re.escape(str(expected.value).splitlines()[0])):
            getattr(torch_reduce, op)(*args, **kwargs)
    with pytest.raises(TypeError):
        torch_reduce.max(x, keepdim=True)


@pytest.mark.parametrize("device", DEVICES)
def test_indexed_autograd(device):
    """max and min over a dim: the gradient reaches the returned position (torch's rule); of every
    dim it is split among the ties, as torch's; argmax has none."""
    x = torch.randint(-2, 3, (5, 7), device=device).double().requires_grad_()
    for op in ("max", "min"):
        for dim, keepdim in ((1, False), (0, True), (-1, True)):
            g = torch.randn(getattr(torch, op)(x, dim, keepdim).values.shape, device=device, dtype=torch.float64)
            want = torch.autograd.grad(getattr(torch, op)(x, dim, keepdim).values, x, g)[0]
            got = torch.autograd.grad(getattr(torch_reduce, op)(x, dim, keepdim).values, x, g)[0]
            assert torch.equal(got, want), (op, dim, keepdim)
        want = torch.autograd.grad(getattr(torch, op)(x), x)[0]
        got = torch.autograd.grad(getattr(torch_reduce, op)(x), x)[0]
        assert torch.equal(got, want), op
        torch.autograd.gradcheck(lambda t: getattr(torch_reduce, op)(t, 1).values, (torch.randn(4, 6, device=device,
                                 dtype=torch.float64, requires_grad=True),))
    s = torch.tensor(3.0, device=device, requires_grad=True)
    torch_reduce.max(s, 0).values.backward()
    assert s.grad.item() == 1.0
    assert not torch_reduce.argmax(x, 1).requires_grad and not torch_reduce.max(x, 1).indices.requires_grad


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("requires_grad", (False, True))
def test_indexed_opcheck(device, requires_grad):
    x = torch.randn(6, 9, device=device, requires_grad=requires_grad)
    for op in ("max", "min"):
        overload = getattr(torch.ops.treduce, op).default
        torch.library.opcheck(overload, (x, 1))
        torch.library.opcheck(overload, (x, 0, True))
    for op in ("argmax", "argmin"):
        overload = getattr(torch.ops.treduce, op).default
        torch.library.opcheck(overload, (x,))
        torch.library.opcheck(overload, (x, 1, True))


@pytest.mark.parametrize("device", DEVICES)
def test_indexed_compile(device):
    def f(x):
        v, i = torch_reduce.max(x, -1)
        return v * torch_reduce.argmin(x, -1) + i + torch_reduce.argmax(x) + torch_reduce.min(x)

    x = torch.randn(8, 33, device=device, requires_grad=True)
    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(x), f(x))
    torch.testing.assert_close(torch.autograd.grad(compiled(x).sum(), x)[0], torch.autograd.grad(f(x).sum(), x)[0])


@cuda_only
@gpu_memory
def test_indexed_past_int32():
    """Positions past 2^31 (int64 throughout), over every dim and one."""
    n = (1 << 31) + 5
    x = torch.zeros(n, dtype=torch.uint8, device="cuda")
    x[n - 2] = 9
    assert torch_reduce.argmax(x).item() == n - 2
    v, i = torch_reduce.max(x, 0)
    assert v.item() == 9 and i.item() == n - 2
    x[n - 2] = 0
    x[-1] = 1
    assert torch_reduce.argmin(x).item() == 0 and torch_reduce.argmax(x).item() == n - 1
    del x
    torch.cuda.empty_cache()


@pytest.mark.parametrize("device", DEVICES)
def test_bool_extrema_against_torch(device):
    """amax and amin of bool (on the CPU through any's and all's kernels): every dims form,
    keepdim, an empty list of dims (every dim for amax) and the errors of an empty reduction, as
    torch's."""
    gen, seed = fresh_generator(device)
    x = torch.rand(300, 70, generator=gen, device=device) < 0.97
    for t in (x, x.t(), x[:, :0], torch.ones(4000, 3, dtype=torch.bool, device=device)):
        for d in (None, 0, 1, (0, 1), []):
            for op in ("amax", "amin"):
                for keepdim in (False, True):
                    args = () if d is None else (d, keepdim)
                    try:
                        want = getattr(torch, op)(t.cpu(), *args)
                    except (RuntimeError, IndexError) as e:
                        with pytest.raises(type(e)):
                            getattr(torch_reduce, op)(t, *args)
                        continue
                    got = getattr(torch_reduce, op)(t, *args)
                    assert got.dtype == want.dtype and torch.equal(got.cpu(), want), (op, tuple(t.shape), d, keepdim, seed)
