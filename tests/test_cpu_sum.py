"""The CPU's auto: the same bits whatever the thread count and the instruction set it runs on,
and float sums at least as accurate as torch.sum's against a float64 reference."""

import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_reduce
from util import UNIT_ROUNDOFF, fresh_generator

# Full sums around the SIMD kernels' 32-element rows and 64K chunks; dims through the rows and
# the columns kernels (strips of 16 KB of accumulators, segments of 256 rows).
CASES = [((1,), None), ((31,), None), ((65536 * 3 + 33,), None), ((1 << 20,), None),
         ((1031, 4099), 0), ((1031, 4099), -1), ((700, 5000), 0), ((3, 600, 37), 1), ((65536, 128), -1),
         # short rows (logsumexp's exp_sum_rows), columns of few outputs (sums' and extrema's kernels)
         ((4099, 5), -1), ((2053, 16), -1), ((1031, 17), -1), ((300, 7), 0), ((196, 80, 7), 1), ((64, 3, 1027), 1),
         # rows whose last elements are read in place (sum_simd's in_place_tail_sum): past a row of
         # lanes (the window ending at the row's end), and under one (the last vector rotated)
         ((1025, 49), -1), ((515, 13), -1)]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32]


def _data(shape, dtype, gen):
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    return torch.randint(-(1 << 40) if dtype == torch.int64 else -1000, 1000, shape, generator=gen, dtype=dtype)


def _results(x, dim):
    ops = [torch_reduce.sum(x) if dim is None else torch_reduce.sum(x, dim)]
    if x.dtype.is_floating_point:
        ops += [torch_reduce.mean(x, dim), torch_reduce.amax(x, dim), torch_reduce.var(x, dim),
                torch_reduce.logsumexp(x, tuple(range(x.dim())) if dim is None else dim),
                torch_reduce.prod(1 + x * 0.01) if dim is None else torch_reduce.prod(1 + x * 0.01, dim)]
    return ops


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", CASES, ids=str)
def test_bits_do_not_depend_on_threads(shape, dim, dtype):
    gen, seed = fresh_generator("cpu")
    x = _data(shape, dtype, gen)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _results(x, dim)
        torch.set_num_threads(max(2, os.cpu_count() or 2))
        many = _results(x, dim)
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(one, many):
        assert torch.allclose(a, b, rtol=0, atol=0, equal_nan=True), f"seed {seed}"


def _isa_ops(x, d):
    """The ops whose runs sum_simd takes: sum, nansum (with NaNs put in), vector_norm,
    logsumexp (its exp in vectors), prod (of values near 1) and var_mean (its two passes)."""
    args = () if d is None else (d,)
    out = [torch_reduce.sum(x, *args)]
    if x.is_floating_point():
        y = x.clone()
        y.view(-1)[::7] = float("nan")
        out += [torch_reduce.nansum(y, *args), torch_reduce.vector_norm(x, dim=d),
                torch_reduce.logsumexp(x * 8, tuple(range(x.dim())) if d is None else d),
                torch_reduce.prod(1 + x * 0.01, *args), *torch_reduce.var_mean(x * 3 + 2, d)]
    return out


def test_bits_do_not_depend_on_the_instruction_set(tmp_path):
    """The baseline build of the SIMD sums (TREDUCE_CPU_ISA=base) against the one this CPU gets:
    sums, nansums, 2-norms, logsumexp, prod and var_mean."""
    gen, seed = fresh_generator("cpu")
    inputs = [(_data(shape, dtype, gen), dim) for shape, dim in CASES for dtype in DTYPES[:5]]
    torch.save(inputs, tmp_path / "inputs.pt")
    here = os.path.dirname(os.path.abspath(__file__))
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {here!r})
        from test_cpu_sum import _isa_ops
        inputs = torch.load({str(tmp_path / 'inputs.pt')!r})
        torch.save([_isa_ops(x, d) for x, d in inputs], {str(tmp_path / 'base.pt')!r})
    """)
    env = dict(os.environ, TREDUCE_CPU_ISA="base")
    subprocess.run([sys.executable, "-c", script], check=True, env=env)
    base = torch.load(tmp_path / "base.pt")
    for (x, d), b in zip(inputs, base):
        for here_v, base_v in zip(_isa_ops(x, d), b):
            assert torch.equal(here_v.isnan(), base_v.isnan()) and torch.equal(here_v.nan_to_num(), base_v.nan_to_num()), (
                f"{x.dtype} {tuple(x.shape)} dim={d}: seed {seed}")


def test_int64_column_sums_wrap_as_torch():
    """int64 sums over columns (sum_simd's columns kernel, as the floats'): widths on and off the
    vector's 4 or 2 lanes, row counts on and off its groups of 16 and segments of 256, a slab
    layout (each outer index's rows one contiguous block) and a transposed one, values near 2^62
    so that the sums wrap, against torch's (which wrap the same way: integers, any order)."""
    gen, seed = fresh_generator("cpu")
    big = 1 << 62
    for rows, width in ((1, 5), (15, 33), (16, 64), (257, 7), (300, 130)):
        x = torch.randint(-big, big, (3, rows, width), generator=gen, dtype=torch.int64)
        for v, d in ((x, 1), (x.transpose(0, 2), 1), (x[:, :, 1:], -2)):
            assert torch.equal(torch_reduce.sum(v, d), v.sum(d)), (rows, width, tuple(v.stride()), d, seed)
    x = torch.randint(-big, big, (64, 8, 64, 64), generator=gen, dtype=torch.int64).transpose(1, 2)
    assert torch.equal(torch_reduce.sum(x, -3), x.sum(-3)), seed


@pytest.mark.parametrize("shape,dim", [((1 << 10,), None), ((1 << 16,), None), ((1 << 20,), None),
                                       ((1 << 22,), None), ((2048, 2048), 0), ((2048, 2048), -1),
                                       ((65536, 128), 0), ((65536, 128), -1)], ids=str)
def test_float32_as_accurate_as_torch(shape, dim):
    """The error of our float32 sums against a float64 sum, summed over fresh N(0, 1) inputs, is
    at most torch.sum's. Whole sums add in double after groups of eight in float (sum_simd.h's
    sum_f32_wide): 0.3-0.5x torch's error on average, so at most 1.0x over 16-64 inputs; over
    dims both add in a float cascade, and the thousands of outputs average to within 1.1. (The
    float cascade on whole sums: 0.7-1.4x torch's over the same inputs; before the cascade,
    float32 2^24 had 6x torch's error.)"""
    gen, seed = fresh_generator("cpu")
    n = shape[0] if dim is None else 0
    samples = 64 if n <= 1 << 16 else 32 if n <= 1 << 20 else 16
    ours = theirs = 0.0
    for _ in range(samples if dim is None else 8):
        x = torch.randn(shape, generator=gen)
        ref = x.double().sum() if dim is None else x.double().sum(dim)
        got = torch_reduce.sum(x) if dim is None else torch_reduce.sum(x, dim)
        want = x.sum() if dim is None else x.sum(dim)
        ours += (got.double() - ref).abs().sum().item()
        theirs += (want.double() - ref).abs().sum().item()
    bound = 1.0 if dim is None else 1.1
    assert ours <= bound * theirs, f"error {ours:.3g} against torch's {theirs:.3g} (seed {seed})"


@pytest.mark.parametrize("n", [1000, (1 << 16) + 33, 1 << 20, 3 * (1 << 20) + 5, 1 << 22], ids=str)
def test_float64_whole_sums_keep_what_partials_lose(n):
    """float64 whole sums carry their rounding errors (sum_simd.h's sum_f64_compensated, two-sums
    across chunks). The data: doubles holding N(0, 1) float32 values (the CPU sweep's data), the
    few below 2^-20 in magnitude zeroed, so every element is a multiple of 2^-43. The cascade's
    low and middle levels then add exactly (their partials stay far below 2^10) and the two-sums
    keep everything above them, so the result is the correctly rounded sum (math.fsum). A plain
    double cascade (torch.sum) misses it by a few ulps in 113 of 300 draws at 2^22, where the
    partials grow to thousands. Without the zeroing, a tiny element's last bits go at the low
    levels, and 2 draws in 300 at 2^22 were 1 ulp off."""
    gen, seed = fresh_generator("cpu")
    for _ in range(4):
        x = torch.randn(n, generator=gen).double()
        x[x.abs() < 2.0**-20] = 0
        want = math.fsum(x.tolist())
        assert torch_reduce.sum(x).item() == want, f"n={n} seed {seed}"
        assert torch_reduce.mean(x).item() == want / n, f"n={n} seed {seed}"


def _float16_rounding_pairs(seed):
    # Every float16 value (NaN and the infinities among them) beside a random one: their float
    # sums round into float16 at every exponent, subnormal, past the range, and to even on ties.
    gen = torch.Generator().manual_seed(seed)
    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)
    other = every[torch.randperm(every.numel(), generator=gen)]
    return torch.stack([every, other])


def _float16_rounding_check(seed):
    x = _float16_rounding_pairs(seed)
    problems = []
    for name, ours, theirs in (("sum", torch_reduce.sum(x, 0), x.sum(0)), ("mean", torch_reduce.mean(x, 0), x.mean(0)),
                               ("amax", torch_reduce.amax(x, 0), x.amax(0))):
        nan = theirs.isnan()
        if not torch.equal(ours.isnan(), nan) or not torch.equal(ours[~nan].view(torch.int16), theirs[~nan].view(torch.int16)):
            problems.append(name)
    return problems


@pytest.mark.parametrize("isa", ["this CPU's", "base"])
def test_float16_results_round_as_torch(isa):
    """float16 results (sum_simd's f16_from_f32: F16C where the CPU has it) bit for bit as torch
    rounds them, on this CPU's build and the baseline's."""
    _, seed = fresh_generator("cpu")
    if isa == "base":
        here = os.path.dirname(os.path.abspath(__file__))
        script = f"import sys; sys.path.insert(0, {here!r}); from test_cpu_sum import _float16_rounding_check as c; print(c({seed}))"
        out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True,
                             env=dict(os.environ, TREDUCE_CPU_ISA="base")).stdout
        assert out.strip() == "[]", f"seed {seed}: {out}"
    else:
        assert _float16_rounding_check(seed) == [], f"seed {seed}"


def _cascade_columns(x, nan_as_zero):
    # The order the CPU adds columns in (up to 256 rows, one segment): each group of 16 rows
    # summed in float from 0, row by row, and the groups' sums added in turn to 0.
    x = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
    if nan_as_zero:
        x = torch.where(x.isnan(), torch.zeros_like(x), x)
    acc = torch.zeros_like(x[0])
    for r1 in range(0, x.shape[0], 16):
        low = torch.zeros_like(x[0])
        for r in range(r1, min(r1 + 16, x.shape[0])):
            low = low + x[r]
        acc = acc + low
    return acc


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_column_sums_add_in_the_cascade_order(dtype):
    """Sums and nansums over dim 0 (sum_simd's columns kernels on both builds) bit for bit as the
    cascade adds them, rows 1 to 256 (one segment), widths off the vectors' multiples."""
    gen, seed = fresh_generator("cpu")
    for rows, width in ((1, 37), (7, 4099), (16, 33), (17, 5003), (200, 130), (256, 1027),
                        # widths under a vector's and between: the last columns read from the rows
                        (1, 2), (2, 7), (7, 3), (80, 7), (17, 9), (33, 15), (256, 17), (5, 31), (250, 33)):
        x = torch.randn(rows, width, generator=gen).to(dtype)
        y = x.clone()
        y.view(-1)[::5] = float("nan")
        got = torch_reduce.sum(x, 0)
        assert torch.equal(got, _cascade_columns(x, False).to(dtype)), f"sum {rows}x{width} seed {seed}"
        got = torch_reduce.nansum(y, 0)
        want = _cascade_columns(y, True).to(dtype)
        assert torch.equal(got, want), f"nansum {rows}x{width} seed {seed}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_narrow_column_sums_in_the_cascade_order(dtype):
    """Columns of 2 to 33 outputs in every layout sum_simd's columns kernel reads past a row's last
    column in: the rows of each outer index back to back (the next outer index's rows follow),
    rows apart (a slice of wider rows). Bit for bit as the cascade adds them (sums and nansums),
    the rows' counts around its groups of 16 and one segment of 256. And one row repeated (stride
    0), which is read once: the row times the rows, correctly rounded (exact in float64, so
    x.double() * rows rounded to the dtype)."""
    gen, seed = fresh_generator("cpu")
    for outer, rows, width in ((196, 80, 7), (5, 1, 3), (9, 2, 5), (7, 7, 2), (3, 16, 8), (4, 17, 9), (2, 255, 31),
                               (3, 256, 33), (2, 250, 7)):
        sources = [torch.randn(outer, rows, width, generator=gen).to(dtype),
                   torch.randn(outer, rows, width + 5, generator=gen).to(dtype),
                   torch.randn(outer, 1, width, generator=gen).to(dtype)]
        with_nan = [s.clone() for s in sources]
        for s in with_nan:
            s.view(-1)[::3] = float("nan")

        def layouts(x, wide, one):
            return (("contiguous", x), ("slice", wide[:, :, 2:width + 2]), ("expanded", one.expand(outer, rows, width)))

        for (what, data), (_, y) in zip(layouts(*sources), layouts(*with_nan)):
            got = torch_reduce.sum(data, 1)
            if what == "expanded":
                want = (data[:, 0].double() * rows).to(dtype)
            else:
                want = _cascade_columns(data.transpose(0, 1), False).to(dtype)
            assert torch.equal(got, want), f"sum {what} {outer}x{rows}x{width} seed {seed}"
            got = torch_reduce.nansum(y, 1)
            if what == "expanded":
                want = (y[:, 0].double().nan_to_num(nan=0.0) * rows).to(dtype)
            else:
                want = _cascade_columns(y.transpose(0, 1), True).to(dtype)
            assert torch.equal(got, want), f"nansum {what} {outer}x{rows}x{width} seed {seed}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int16, torch.int64],
                         ids=str)
def test_strided_columns(dtype):
    """Columns whose outputs are 2 to 4 elements apart (a slice ::k of the last dim), read as the
    dense run that holds them (sums, nansums and products through sum_simd's columns kernel, other
    operators through blocks of the run, float16's converted a block at a time): sums and nansums
    bit for bit as the cascade adds them, products and 2-norms against float64, amax, amin and
    int results equal to torch's. The elements between the outputs hold NaN and infinities, which
    must not reach any result; widths around the blocks of accumulators (32 float32 lanes) and
    under one, rows around the groups of 16 and past a segment of 256."""
    gen, seed = fresh_generator("cpu")
    rtol = {torch.float64: 1e-12, torch.float32: 1e-5}.get(dtype, 4e-3)
    for rows, width, k in ((3, 2, 2), (16, 17, 3), (17, 33, 2), (40, 45, 4), (257, 171, 3), (5, 2, 3), (2, 700, 4),
                           (272, 10, 3), (265, 5, 4)):
        where = f"{rows}x{width}::{k} seed {seed}"
        if dtype.is_floating_point:
            full = torch.randn(rows, width * k, generator=gen).to(dtype)
            full[:, 1::k] = float("nan")
            full[:, k - 1::k] = float("inf") if k > 2 else float("nan")
        else:
            full = torch.randint(-1000, 1000, (rows, width * k), generator=gen, dtype=dtype)
        x = full[:, ::k]
        got = torch_reduce.sum(x, 0)
        if dtype.is_floating_point:
            assert torch.equal(got, _cascade_columns(x, False).to(dtype)), f"sum {where}"
            # The whole sum (the strided columns' partials, then their combine) against float64.
            torch.testing.assert_close(torch_reduce.sum(x).double(), x.double().sum(), rtol=1e-2, atol=1e-2,
                                       msg=lambda m: f"full sum {where}: {m}")
            with_nan = full.clone()
            y = with_nan[:, ::k]
            y[torch.rand(y.shape, generator=gen) < 0.2] = float("nan")
            assert torch.equal(torch_reduce.nansum(y, 0), _cascade_columns(y, True).to(dtype)), f"nansum {where}"
            near_one = 1 + full * 0.01  # NaN and infinities stay between the outputs
            torch.testing.assert_close(torch_reduce.prod(near_one[:, ::k], 0).double(),
                                       near_one[:, ::k].double().prod(0), rtol=rtol, atol=0,
                                       msg=lambda m: f"prod {where}: {m}")
            torch.testing.assert_close(torch_reduce.vector_norm(x, 2, 0).double(), x.double().norm(dim=0),
                                       rtol=rtol, atol=0, msg=lambda m: f"2-norm {where}: {m}")
        else:
            assert torch.equal(got, torch.sum(x, 0)), f"sum {where}"
            assert torch.equal(torch_reduce.sum(x), torch.sum(x)), f"full sum {where}"
        for op in ("amax", "amin"):
            got, want = getattr(torch_reduce, op)(x, 0), getattr(torch, op)(x, 0)
            torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{op} {where}: {m}")


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_transposed_maps(dtype):
    """Reductions over a size-1 dim whose results are transposed against the input (tiles of
    outer x inner indexes, stored along the results' run): sums, extrema, aminmax and any equal
    to torch's; runs off the tiles' multiples, two outer runs, a slice."""
    gen, seed = fresh_generator("cpu")
    for sizes, perm in (((1, 256, 1023), (0, 2, 1)), ((1, 33, 65), (0, 2, 1)), ((7, 1, 40, 3), (1, 3, 2, 0)),
                        ((1, 64, 31), (2, 1, 0))):
        base = torch.randint(-100, 100, sizes, generator=gen).to(dtype)
        x = base.permute(*perm)
        dim = x.shape.index(1)
        wide = max(range(x.dim()), key=lambda d: x.shape[d])
        for what, x in (("permuted", x), ("slice", x.narrow(wide, 1, x.shape[wide] - 1))):
            for op in ("sum", "amax", "amin", "any"):
                got, want = getattr(torch_reduce, op)(x, dim), getattr(torch, op)(x, dim)
                assert got.dtype == want.dtype and torch.equal(got, want), f"{op} {what} {sizes} seed {seed}"
            for g, w in zip(torch_reduce.aminmax(x, dim=dim), torch.aminmax(x, dim=dim)):
                assert torch.equal(g, w), f"aminmax {what} {sizes} seed {seed}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64], ids=str)
def test_short_row_extrema(dtype):
    """amax, amin and aminmax over rows of 1 to 7 (four rows a vector's lanes for float results),
    contiguous and strided, row counts off the multiples of 4 and 64; NaN and infinities: equal to
    torch's, NaN where torch's is."""
    gen, seed = fresh_generator("cpu")
    for rows, n in ((14336, 3), (6, 1), (67, 2), (130, 5), (1027, 7), (9, 4)):
        x = (torch.randn(rows, n + 1, generator=gen) * 100).to(dtype)
        flat = x.view(-1)
        k = torch.randint(0, flat.numel(), (max(3, flat.numel() // 50),), generator=gen)
        flat[k[0::3]] = float("nan")
        flat[k[1::3]] = float("inf")
        flat[k[2::3]] = float("-inf")
        for what, data in (("contiguous", x[:, :n].contiguous()), ("slice", x[:, 1:]), ("transposed", x[:, :n].t().contiguous().t())):
            for op in ("amax", "amin"):
                torch.testing.assert_close(getattr(torch_reduce, op)(data, 1), getattr(torch, op)(data, 1), rtol=0, atol=0,
                                           equal_nan=True, msg=lambda m: f"{op} {what} {rows}x{n} seed {seed}: {m}")
            for g, w in zip(torch_reduce.aminmax(data, dim=1), torch.aminmax(data, dim=1)):
                torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True,
                                           msg=lambda m: f"aminmax {what} {rows}x{n} seed {seed}: {m}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                                   torch.int8, torch.int64, torch.bool], ids=str)
def test_column_extrema_of_few_rows(dtype):
    """amax, amin and aminmax over the middle dim through sum_simd's extremum_columns_to (into the
    results themselves where the result dtype is the accumulator's, else into the accumulators):
    rows of 1, 2, 3, 7, 8, 16, 17, 20, 40 (rows of 4 KB: groups of 16) and past a segment (300,
    513), widths under a vector (its padded copy taken 16 rows at a time), off its multiples
    (the last vector overlapping the one before), a strip and more; NaN (any row, the last row,
    a column's only element), infinities; a transposed input whose results are not contiguous in
    the strip. Extrema round nothing: equal to torch's, NaN where torch's is."""
    gen, seed = fresh_generator("cpu")
    floating = dtype.is_floating_point
    for outer, rows, width in ((3, 1, 37), (5, 2, 7), (2, 3, 5120), (4, 7, 9), (3, 8, 1024), (2, 16, 33), (3, 17, 8),
                               (2, 300, 31), (1, 513, 70), (6, 3, 1), (4, 2, 2), (2, 5, 4097), (2, 40, 1030), (2, 20, 2053), (2, 20, 4101),
                               (3, 17, 5), (2, 40, 3), (2, 300, 6)):
        if floating:
            x = (torch.randn(outer, rows, width, generator=gen) * 100).to(dtype)
            flat = x.view(-1)
            k = torch.randint(0, flat.numel(), (max(1, flat.numel() // 97),), generator=gen)
            flat[k[0::3]] = float("nan")
            flat[k[1::3]] = float("inf")
            flat[k[2::3]] = float("-inf")
            x[:, -1, -1] = float("nan")  # the last row's last column: the overlapping or padded vector
        elif dtype == torch.bool:  # (aminmax as uint8's bytes; amax and amin as any and all)
            x = torch.rand(outer, rows, width, generator=gen) < (0.02 if rows > 3 else 0.5)
        else:
            info = torch.iinfo(dtype)
            x = torch.randint(info.min, info.max, (outer, rows, width), generator=gen, dtype=dtype)
        t = x.transpose(0, 2).contiguous().transpose(0, 2)  # the same values, outer dim innermost in memory
        for what, data in (("contiguous", x), ("transposed", t)):
            for op in ("amax", "amin"):
                got, want = getattr(torch_reduce, op)(data, 1), getattr(torch, op)(data, 1)
                assert got.dtype == want.dtype and got.shape == want.shape
                torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True,
                                           msg=lambda m: f"{op} {what} {outer}x{rows}x{width} seed {seed}: {m}")
            if dtype not in (torch.float16, torch.bfloat16) or width < 16:  # (a few cases of each)
                got, want = torch_reduce.aminmax(data, dim=1), torch.aminmax(data, dim=1)
                for g, w in zip(got, want):
                    torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True,
                                               msg=lambda m: f"aminmax {what} {outer}x{rows}x{width} seed {seed}: {m}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_logsumexp_narrow_columns(dtype):
    """logsumexp over the middle dim of narrow columns (sum_simd's exp_sum_columns: the last
    columns, under a vector, through a padded copy; on the stack up to 64 rows, on the heap past
    them), against float64 torch: at most 256 exps a segment, each within 2u, summed in order then
    combined, relative error well under 300u of the accumulator (float32), then the result's
    rounding."""
    gen, seed = fresh_generator("cpu")
    u, out_u = UNIT_ROUNDOFF[torch.float32], UNIT_ROUNDOFF[dtype]
    for outer, rows, width in ((5, 3, 5), (3, 64, 3), (3, 65, 9), (2, 300, 6), (4, 17, 1)):
        x = (torch.randn(outer, rows, width, generator=gen) * 4).to(dtype)
        x[0, rows // 2, 0] = float("-inf")
        got = torch_reduce.logsumexp(x, 1)
        want = torch.logsumexp(x.double(), 1)
        assert got.dtype == dtype and got.shape == want.shape
        bound = (300 * u + out_u) * want.abs() + 300 * u
        err = (got.double() - want).abs()
        assert bool((err <= bound).all()), f"{outer}x{rows}x{width} seed {seed}: worst {float((err - bound).max())}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_logsumexp_short_rows(dtype):
    """logsumexp over contiguous short rows (sum_simd's exp_sum_rows, a block of rows a call; rows
    of 1 and 2 the scalar loop), rows back to back, apart (a slice: the lanes past a row hold the
    gap's values) and one repeated (stride 0: each from a copy). Against float64 torch: the sum of
    at most 32 exps (each within 2u of exp) as a tree of depth 5 relative error under 8u, so
    2 * u_out * |want| + 16u absolute (u the accumulator's roundoff, u_out the result dtype's).
    Rows of -inf beside rows of NaN and of large values, so that a lane read past a row's end
    and not masked would show: NaN anywhere gives NaN, +inf +inf, all -inf -inf."""
    gen, seed = fresh_generator("cpu")
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    u, out_u = UNIT_ROUNDOFF[acc], UNIT_ROUNDOFF[dtype]
    inf, nan = float("inf"), float("nan")
    for n in (1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33):
        rows = 259  # four blocks of 64 and three rows
        spread = torch.tensor([1.0, 4.0, 30.0], dtype=torch.float64).repeat(rows)[:rows, None]
        x = torch.randn(rows, n, generator=gen, dtype=torch.float64) * spread
        x[torch.rand(rows, n, generator=gen) < 0.05] = -inf
        # a cycle of 8 rows: all -inf; NaN last; +inf first; large values; -inf but the last;
        # NaN and +inf; all -inf; all +inf
        x[0::8] = -inf
        x[1::8, -1] = nan
        x[2::8, 0] = inf
        x[3::8] = 1e4 if dtype != torch.float16 else 6e4
        x[4::8] = -inf
        x[4::8, -1] = 3.0
        x[5::8, n // 2] = nan
        x[5::8, 0] = inf
        x[6::8] = -inf
        x[7::8] = inf
        x = x.to(dtype)
        wide = torch.full((rows, n + 3), nan, dtype=dtype)
        wide[:, 1:n + 1] = x
        for what, data in (("contiguous", x), ("slice", wide[:, 1:n + 1]), ("expanded", x[3:4].expand(70, n)),
                           ("expanded -inf", x[0:1].expand(70, n))):
            got = torch_reduce.logsumexp(data, 1)
            want = torch.logsumexp(data.double(), 1)
            assert got.dtype == dtype and got.shape == want.shape
            assert torch.equal(got.isnan(), want.isnan()), f"n={n} {what}: NaN pattern, seed {seed}"
            assert torch.equal(got.isinf() & (got > 0), want.isinf() & (want > 0)), f"n={n} {what}: +inf, seed {seed}"
            assert torch.equal(got.isinf() & (got < 0), want.isinf() & (want < 0)), f"n={n} {what}: -inf, seed {seed}"
            fin = want.isfinite()
            err = (got.double()[fin] - want[fin]).abs()
            tol = 2 * out_u * want[fin].abs() + 16 * u
            assert bool((err <= tol).all()), (
                f"n={n} {what}: error {err.max().item():.3g} (bound {tol.min().item():.3g}), seed {seed}")
