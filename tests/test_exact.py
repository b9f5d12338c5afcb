"""variant="exact": the exact sum of the elements, rounded once to the result dtype (to nearest,
ties to even), against a reference computed here in Python integers (every element as an
integer multiple of 2^-1074) and rounded by Fraction arithmetic; IEEE's NaN, infinity and signed
zero rules; the same bits for any order, split, layout, thread count and device (CUDA against
the CPU where the reference would be slow); the exact state (_exact_state, _exact_round) that
partial sums exchange."""

import math
import os
import random
import subprocess
import sys
import textwrap
from fractions import Fraction

import pytest
import torch

import torch_reduce
from util import DEVICES, INTEGRAL, cuda_only, fresh_generator, gpu_memory

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# (significand bits, exponent of the smallest normal, largest finite value) of each result dtype
FORMAT = {
    torch.float16: (11, -14, torch.finfo(torch.float16).max),
    torch.bfloat16: (8, -126, torch.finfo(torch.bfloat16).max),
    torch.float32: (24, -126, torch.finfo(torch.float32).max),
    torch.float64: (53, -1022, torch.finfo(torch.float64).max),
}


def scaled(v: float) -> int:
    """v as an integer multiple of 2^-1074 (exact for every double)."""
    m, e = math.frexp(v)
    return int(m * 2**53) * 2 ** (e - 53 + 1074) if e - 53 + 1074 >= 0 else int(m * 2**53) >> (53 - e - 1074)


def round_to(x: Fraction, dtype: torch.dtype) -> float:
    """x rounded to nearest, ties to even, in dtype's format (with its subnormals and overflow)."""
    precision, min_exp, largest = FORMAT[dtype]
    if x == 0:
        return 0.0
    sign, a = (-1 if x < 0 else 1), abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    lsb = max(e, min_exp) - (precision - 1)
    r = round(a / Fraction(2) ** lsb)  # Fraction's round: to nearest, ties to even
    value = Fraction(r) * Fraction(2) ** lsb
    if value > largest:
        return sign * math.inf
    return sign * float(value)


def reference(x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The exact sum of x's elements (converted to dtype first, as torch.sum does), rounded once."""
    out = dtype or x.dtype
    vals = x.to(out).double().flatten().tolist() if x.numel() else []
    if any(math.isnan(v) for v in vals) or (math.inf in vals and -math.inf in vals):
        return torch.tensor(math.nan, dtype=out)
    if math.inf in vals or -math.inf in vals:
        return torch.tensor(math.inf if math.inf in vals else -math.inf, dtype=out)
    if vals and all(v == 0 and math.copysign(1, v) < 0 for v in vals):
        return torch.tensor(-0.0, dtype=out)
    total = sum(scaled(v) for v in vals)
    return torch.tensor(round_to(Fraction(total, 2**1074), out), dtype=out)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == torch.float64:
        return torch.equal(a.view(torch.int64), b.view(torch.int64))
    if a.dtype == torch.float32:
        return torch.equal(a.view(torch.int32), b.view(torch.int32))
    return torch.equal(a.view(torch.int16), b.view(torch.int16))


def exact(x, *args, **kwargs):
    return torch_reduce.sum(x, *args, variant="exact", **kwargs)


def _check(x, dtype=None, what="", device="cpu"):
    xd = x.to(device)
    got = (exact(xd, dtype=dtype) if dtype else exact(xd)).cpu()
    want = reference(x, dtype)
    assert same_bits(got, want), f"{device} {what}: got {got.item()!r}, want {want.item()!r}"


def test_reference_rounds_as_ieee():
    """The test's own rounding against the hardware's, where both apply: double sums of two
    doubles, and float32 / float16 roundings of doubles."""
    rnd = random.Random(1)
    for _ in range(2000):
        a, b = rnd.uniform(-1e3, 1e3), rnd.uniform(-1e-3, 1e-3)
        assert round_to(Fraction(a) + Fraction(b), torch.float64) == a + b
        v = rnd.uniform(-70000, 70000) * 2.0 ** rnd.randint(-30, 0)
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            assert round_to(Fraction(v), dt) == torch.tensor(v, dtype=torch.float64).to(dt).item()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("n", [0, 1, 2, 17, 1000, 65536 + 3, 200_003])
def test_random_sums_match_the_reference(device, dtype, n):
    gen, seed = fresh_generator("cpu")
    scale = torch.pow(2.0, torch.randint(-20, 20, (n,), generator=gen).double())
    x = (torch.randn(n, generator=gen, dtype=torch.float64) * scale).to(dtype)
    _check(x, what=f"seed {seed}", device=device)


def _t(values, dtype):
    return torch.tensor(values, dtype=torch.float64).to(dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_adversarial_cases(device, dtype):
    big = float(FORMAT[dtype][2])
    tiny = 2.0 ** (FORMAT[dtype][1] - FORMAT[dtype][0] + 1)  # the smallest subnormal
    cases = {
        "cancellation": [big / 2, 1.0, -big / 2],
        "alternating": [big / 4, tiny, -big / 4, tiny, big / 4, -tiny, -big / 4],
        "subnormals": [tiny] * 7 + [-tiny * 3],
        "halfway, to even": [2.0 ** FORMAT[dtype][0], 1.0],
        "halfway, then up": [2.0 ** FORMAT[dtype][0], 1.0, tiny],
        "overflow": [big, big],
        "just below overflow": [big, -tiny, tiny],
        "signed zeros": [-0.0, -0.0],
        "mixed zeros": [-0.0, 0.0],
        "cancels to zero": [1.0, -1.0],
        "nan": [1.0, math.nan],
        "infinities": [math.inf, 1.0],
        "both infinities": [math.inf, -math.inf],
        "negative infinity": [-math.inf, -big],
    }
    for name, values in cases.items():
        x = _t(values, dtype)
        _check(x, what=name, device=device)
        _check(x.flip(0), what=name + ", reversed", device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_every_exponent_at_once(device):
    """Every power of two a double has, and every float32 one, in one sum."""
    doubles = [2.0**e for e in range(-1074, 1024)]
    x = torch.tensor(doubles + [-d for d in doubles[::3]], dtype=torch.float64)
    _check(x, what="float64", device=device)
    floats = [2.0**e for e in range(-149, 128)]
    _check(torch.tensor(floats + [-f for f in floats[1::2]], dtype=torch.float32), what="float32", device=device)
    _check(torch.tensor(floats[:-1], dtype=torch.float32), dtype=torch.float64, what="float32 into float64",
           device=device)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_order_split_layout_and_threads_do_not_matter(dtype):
    gen, seed = fresh_generator("cpu")
    n = 3 * 65536 + 11
    x = (torch.randn(n, generator=gen, dtype=torch.float64) * 2.0 ** torch.randint(-30, 30, (n,), generator=gen)).to(dtype)
    first = exact(x)
    perm = torch.randperm(n, generator=gen)
    assert same_bits(exact(x[perm]), first), f"seed {seed}: a permutation changed the bits"
    padded = torch.zeros(n + 5, dtype=dtype)
    padded[5:] = x
    assert same_bits(exact(padded[5:]), first), f"seed {seed}: a storage offset changed the bits"
    assert same_bits(exact(torch.stack([x, x], 1)[:, 1]), first), f"seed {seed}: a stride changed the bits"
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert same_bits(exact(x), first), f"seed {seed}: one thread changed the bits"
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_blocks_of_every_kind(device, dtype):
    """Runs of several of the CPU's blocks of 2048 elements (sum_simd's exact_blocks), each of
    another kind: moderate data (no split), data spread over 2^+-40 (splits), only -0.0, -0.0
    with one +0.0, subnormals, values near the largest finite (no window fits), an infinity, a
    NaN; the last block partial. Each run against the reference, and the blocks in reverse."""
    gen, seed = fresh_generator("cpu")
    precision, min_exp, big = FORMAT[dtype]
    tiny = 2.0 ** (min_exp - precision + 1)
    block = 2048

    def normal():
        return torch.randn(block, generator=gen, dtype=torch.float64)

    kinds = {
        "moderate": normal,
        "spread": lambda: normal() * 2.0 ** torch.randint(-40, 40, (block,), generator=gen),
        "negative zeros": lambda: torch.full((block,), -0.0, dtype=torch.float64),
        "one positive zero": lambda: torch.full((block,), -0.0, dtype=torch.float64).index_fill(0, torch.tensor([77]), 0.0),
        "subnormals": lambda: torch.randint(-64, 64, (block,), generator=gen).double() * tiny,
        "near the largest": lambda: torch.rand(block, generator=gen, dtype=torch.float64).sub(0.5) * big,
        "an infinity": lambda: normal().index_fill(0, torch.tensor([5]), math.inf),
        "a nan": lambda: normal().index_fill(0, torch.tensor([2047]), math.nan),
    }
    names = list(kinds)
    for first in range(len(names)):
        run = [names[(first + k) % len(names)] for k in range(3)]
        parts = [kinds[k]() for k in run] + [normal()[:311]]
        x = torch.cat(parts).to(dtype)
        _check(x, what=f"{run}, seed {seed}", device=device)
        _check(torch.cat([p for p in reversed(parts)]).to(dtype), what=f"{run} reversed, seed {seed}", device=device)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_cpu_block_ranges_read_ahead(dtype):
    """The CPU reads a block's range while the block before it is being added (exact_blocks'
    pipeline): one element far out of its neighbours' range (the format's smallest subnormal or a
    large value), at any position of the second or third block, must still set that block's plan.
    The rest cancels exactly, so a lost or rounded element shows in the result."""
    gen, seed = fresh_generator("cpu")
    precision, min_exp, big = FORMAT[dtype]
    block = 2048
    extremes = {"tiny": 2.0 ** (min_exp - precision + 1), "large": 2.0 ** (math.frexp(big)[1] - 3)}
    for name, e in extremes.items():
        for j in (1, 2):
            for p in (0, 1, 31, 32, 33, 1000, 2016, 2047):
                v = torch.randn(block, generator=gen, dtype=torch.float64).to(dtype).double()
                u = v[: block // 2].flip(0)
                blocks = [v.clone(), -v, torch.cat([u, -u])]
                blocks[j][p] = e
                if j == 1:
                    blocks[0][p] = 0.0  # e's partner gone: the three blocks sum to e
                else:
                    blocks[2][block - 1 - p] = 0.0
                w = torch.randn(100, generator=gen, dtype=torch.float64).to(dtype).double()
                tail = torch.cat([torch.tensor([-e]), w, -w])
                _check(torch.cat(blocks + [tail]).to(dtype), what=f"{name} in block {j} at {p}, seed {seed}")


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_cpu_column_blocks_out_of_the_guessed_range(dtype):
    """Columns go through the CPU's column windows a block of 2048 rows at a time, each block's
    plan guessed from the range of the blocks before it and checked by the block's own range
    (sum_simd's exact_columns): one element out of that range (the smallest subnormal, or a large
    value) in the second or third block of one column must still be added exactly. Each column
    cancels exactly but for it, so a lost or rounded element shows; every column against the
    reference."""
    gen, seed = fresh_generator("cpu")
    precision, min_exp, big = FORMAT[dtype]
    block, width = 2048, 40  # 40: full groups of adjacent columns and a partial one
    extremes = {"tiny": 2.0 ** (min_exp - precision + 1), "large": 2.0 ** (math.frexp(big)[1] - 3)}
    for name, e in extremes.items():
        for j in (1, 2):
            cols = []
            for c in range(width):
                v = torch.randn(block, generator=gen, dtype=torch.float64).to(dtype).double()
                u = v[: block // 2].flip(0)
                blocks = [v.clone(), -v, torch.cat([u, -u]), torch.zeros(77, dtype=torch.float64)]
                if c in (3, 33):  # in a full group and in the partial one
                    p = int(torch.randint(0, block, (1,), generator=gen))
                    blocks[j][p] = e
                    if j == 1:
                        blocks[0][p] = 0.0
                    else:
                        blocks[2][block - 1 - p] = 0.0
                cols.append(torch.cat(blocks))
            x = torch.stack(cols, 1).to(dtype)
            got = exact(x, 0)
            for c in range(width):
                want = reference(x[:, c])
                assert same_bits(got[c], want), f"{name} in block {j}, column {c}: got {got[c].item()}, want {want.item()}, seed {seed}"


def test_cpu_flush_denormal_does_not_change_the_sum():
    """torch.set_flush_denormal(True) sets the CPU's flush-to-zero and denormals-are-zero bits;
    the exact sum's lanes must still see subnormals (exact_blocks clears them for its call)."""
    gen, seed = fresh_generator("cpu")
    for dtype in FLOATS:
        precision, min_exp, _ = FORMAT[dtype]
        tiny = 2.0 ** (min_exp - precision + 1)
        x = (torch.randint(-1000, 1000, (5000,), generator=gen).double() * tiny).to(dtype)
        want = reference(x)
        if not torch.set_flush_denormal(True):
            pytest.skip("this CPU has no flush-to-zero mode")
        try:
            got = exact(x)
            rounded = torch.ops.treduce._exact_round(torch.ops.treduce._exact_state(x), dtype)
        finally:
            torch.set_flush_denormal(False)
        assert same_bits(got, want), f"{dtype}: got {got.item()!r}, want {want.item()!r}, seed {seed}"
        assert same_bits(rounded, want), f"{dtype} state rounded: got {rounded.item()!r}, seed {seed}"


def test_cpu_bits_do_not_depend_on_the_instruction_set(tmp_path):
    """The exact windows of sum_simd built for the baseline ISA (TREDUCE_CPU_ISA=base) against the
    build this CPU gets: the same words, as both are exact (data of moderate and of wide range,
    rows and whole tensors, every float dtype)."""
    gen, seed = fresh_generator("cpu")
    inputs = []
    for dtype in FLOATS:
        z = torch.randn(70_001, generator=gen, dtype=torch.float64)
        inputs.append((z.to(dtype), None))
        inputs.append(((z * 2.0 ** torch.randint(-60, 60, z.shape, generator=gen)).to(dtype), None))
        inputs.append((z[:70_000].reshape(70, 1000).to(dtype), 1))
    torch.save(inputs, tmp_path / "inputs.pt")
    script = textwrap.dedent(f"""
        import torch, torch_reduce
        inputs = torch.load({str(tmp_path / 'inputs.pt')!r})
        torch.save([torch.ops.treduce._exact_state(x, None if d is None else [d]) for x, d in inputs],
                   {str(tmp_path / 'base.pt')!r})
    """)
    subprocess.run([sys.executable, "-c", script], check=True, env=dict(os.environ, TREDUCE_CPU_ISA="base"))
    base = torch.load(tmp_path / "base.pt")
    for (x, d), b in zip(inputs, base):
        assert torch.equal(state(x, None if d is None else [d]), b), f"{x.dtype} dim={d}: seed {seed}"


def _short_rows(dtype, n, gen):
    """Rows of n elements (float64 values exact in dtype) whose sums test each way a short row
    can be rounded (reduce_cpu.cpp's exact_sum, sum_simd's exact_short): ties to even, ties
    broken by an element far below (past a double's reach, so that adding the row in double
    rounds), sums near overflow and below the normal range, signed zeros, specials, moderate and
    spread random data. The non-zero elements at random places, zeros elsewhere; rows near
    overflow, with infinities or NaN last (the CPU's columns of a group with one take another path)."""
    precision, min_exp, big = FORMAT[dtype]
    tiny = 2.0 ** (min_exp - precision + 1)
    top = 2.0 ** precision  # 1 is half its ulp
    half_ulp_big = 2.0 ** (math.frexp(big)[1] - 1 - precision)
    rows = [[top, 1.0], [top, 3.0], [-top, -1.0], [tiny] * 3 + [-tiny], [2.0**min_exp, tiny - 2.0**min_exp],
            [-0.0, -0.0], [-0.0, 0.0], [1.0, -1.0]]
    # Last, a group of their own: sums near overflow (no window takes them) and specials.
    specials = [[big, half_ulp_big], [big, half_ulp_big, -tiny], [big, big], [1.0, math.nan], [math.inf, -big],
                [math.inf, -math.inf]]
    for k in range(0, 140, 3):  # the tie broken far below, both ways, as far as dtype reaches
        if 2.0**-k >= tiny:
            rows += [[top, 1.0, 2.0**-k], [top, 1.0, -(2.0**-k)], [-top, 3.0, 2.0**-k]]
    for a in (2.0**-5, 2.0**-20):  # the same by a last bit that only the smallest level holds
        if a * 2.0 ** (1 - precision) >= tiny:
            rows += [[top, 1.0, a + a * 2.0 ** (1 - precision), -a], [top, 1.0, -a - a * 2.0 ** (1 - precision), a]]
    rows = [r[:n] for r in rows if len(r) <= n or n == 1]
    for scale in (0, 20, 40):  # random data: one window level, splits, the accumulator
        for _ in range(6):
            z = torch.randn(n, generator=gen, dtype=torch.float64)
            rows.append((z * 2.0 ** torch.randint(-scale, scale + 1, (n,), generator=gen)).to(dtype).double().tolist())
    rows += [r[:n] for r in specials]
    x = torch.zeros(len(rows), n, dtype=torch.float64)
    for i, r in enumerate(rows):
        x[i, torch.randperm(n, generator=gen)[: len(r)]] = torch.tensor(r, dtype=torch.float64)
    return x.to(dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_short_rows_round_once(device, dtype):
    """Sums over the last dim and over dim 0 (strided: the CPU copies them) of rows of 1 to 2049
    elements (2048: the CPU's short rows, taken without an accumulator where they can be), each
    row against the reference."""
    gen, seed = fresh_generator("cpu")
    for n in (1, 3, 32, 33, 128, 2048, 2049):
        x = _short_rows(dtype, n, gen)
        want = [reference(r) for r in x]
        for what, got in (("rows", exact(x.to(device), -1)), ("columns", exact(x.t().contiguous().to(device), 0))):
            for j, ref in enumerate(want):
                assert same_bits(got[j].cpu(), ref), (
                    f"{what} of {n}, row {j} ({x[j][x[j] != 0][:4].tolist()}...), seed {seed}: "
                    f"got {got[j].item()!r}, want {ref.item()!r}")


@pytest.mark.parametrize(
    "shape,dim,keepdim",
    [((37, 53), 0, False), ((37, 53), -1, True), ((5, 6, 7), (0, 2), False), ((5, 6, 7), 1, False), ((4, 0), 1, False)],
)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_dims_match_the_reference(device, dtype, shape, dim, keepdim):
    gen, seed = fresh_generator("cpu")
    x = (torch.randn(shape, generator=gen, dtype=torch.float64) * 1e3).to(dtype).to(device)
    for t in (x, x.transpose(0, -1).contiguous().transpose(0, -1)):  # contiguous and not
        got = exact(t, dim, keepdim)
        want = torch.sum(t, dim, keepdim)  # shape and dtype
        assert got.shape == want.shape and got.dtype == want.dtype
        dims = [dim] if isinstance(dim, int) else list(dim)
        rows = t.cpu().movedim(dims, list(range(-len(dims), 0))).flatten(-len(dims)).flatten(0, -2)
        flat_got = got.reshape(-1).cpu()
        for j in range(flat_got.numel()):
            ref = reference(rows[j])
            assert same_bits(flat_got[j], ref), f"seed {seed}, output {j}: got {flat_got[j].item()}, want {ref.item()}"


@pytest.mark.parametrize(
    "src,dtype", [(torch.float32, torch.float64), (torch.float64, torch.float32), (torch.float32, torch.float16),
                  (torch.bfloat16, torch.float32)], ids=str)
@pytest.mark.parametrize("device", DEVICES)
def test_dtype_converts_the_elements_first(device, src, dtype):
    gen, seed = fresh_generator("cpu")
    x = (torch.randn(5000, generator=gen, dtype=torch.float64) * 100).to(src)
    got = exact(x.to(device), dtype=dtype).cpu()
    assert got.dtype == dtype
    assert same_bits(got, reference(x, dtype)), f"seed {seed}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INTEGRAL, ids=str)
def test_integers_are_autos_sums(device, dtype):
    gen, _ = fresh_generator("cpu")
    x = torch.randint(0, 2 if dtype == torch.bool else 100, (1000,), generator=gen).to(dtype).to(device)
    assert torch.equal(exact(x), torch.sum(x))
    assert torch.equal(exact(x, dtype=torch.float64), torch.sum(x, dtype=torch.float64))


def test_exact_is_a_sum_only():
    with pytest.raises(ValueError, match="computes sums only"):
        torch.ops.treduce.mean(torch.ones(3), "exact")


# The exact state: what partial sums exchange (distributed sums, DTensor).
EXACT_CHUNKS = 68  # exact.h's kExactChunks: the state's words before its five counts


def state(x, *args, **kwargs):
    return torch.ops.treduce._exact_state(x, *args, **kwargs)


def round_state(s, dtype):
    return torch.ops.treduce._exact_round(s, dtype)


def normalized(words):
    """Exact states added word-wise, carried as exact.h's exact_normalize does (its unique form),
    their counts as one state has them (0 or 1)."""
    w = words.clone()
    for k in range(EXACT_CHUNKS - 1):
        carry = w[..., k] >> 32
        w[..., k] -= carry << 32
        w[..., k + 1] += carry
    w[..., EXACT_CHUNKS:] = w[..., EXACT_CHUNKS:].clamp(max=1)
    return w


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_cpu_strided_sums_through_copies(dtype):
    """Strided elements are copied a block at a time, a line of neighbouring outputs together,
    and reduced elements past 2^14 split into ranges merged after (reduce_cpu.cpp's exact_sum):
    the states equal those of the same data as contiguous rows under 2^14 elements (in place,
    one range each), added (full and partial groups of outputs, several copies and ranges,
    outputs not next to each other, a whole strided tensor). Data over 2^+-40: blocks split."""
    gen, seed = fresh_generator("cpu")

    def data(*shape):
        z = torch.randn(shape, generator=gen, dtype=torch.float64)
        return (z * 2.0 ** torch.randint(-40, 40, shape, generator=gen)).to(dtype)

    def halves(rows):  # rows: contiguous, reduced along the last dim
        n = rows.shape[-1] // 2
        return normalized(state(rows[..., :n].contiguous(), [-1]) + state(rows[..., n:].contiguous(), [-1]))

    cols = data(20000, 37)  # dim 0: a run of 37 outputs, each 20000 elements 37 apart
    assert torch.equal(state(cols, [0]), halves(cols.t().contiguous())), f"columns, seed {seed}"
    apart = data(7, 3000, 5).permute(2, 1, 0)  # dim 1: stride 5; neighbouring outputs 15000 apart
    assert torch.equal(state(apart, [1]), state(apart.permute(0, 2, 1).contiguous(), [2])), f"apart, seed {seed}"
    every_other = data(40000)[::2]
    assert torch.equal(state(every_other), halves(every_other.contiguous())), f"strided whole, seed {seed}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_states_add_up_to_the_whole(device, dtype):
    """The word-wise sum of the states of any split rounds to the exact sum of the whole."""
    gen, seed = fresh_generator("cpu")
    n = 100_003
    x = (torch.randn(n, generator=gen, dtype=torch.float64) * 2.0 ** torch.randint(-40, 40, (n,), generator=gen)).to(dtype)
    x[int(torch.randint(0, n, (1,), generator=gen))] = 0.0
    xd = x.to(device)
    whole = exact(xd)
    s = state(xd)
    assert s.dtype == torch.int64 and s.shape == (73,)
    assert same_bits(round_state(s, dtype), whole), f"seed {seed}"
    cuts = sorted(torch.randint(0, n, (5,), generator=gen).tolist())
    parts = [xd[a:b] for a, b in zip([0] + cuts, cuts + [n])]
    total = torch.stack([state(p) for p in parts]).sum(0)
    assert same_bits(round_state(total, dtype), whole), f"seed {seed}: cuts {cuts}"
    assert same_bits(whole.cpu(), reference(x)), f"seed {seed}"


@pytest.mark.parametrize("device", DEVICES)
def test_states_keep_the_ieee_rules(device):
    """NaN, infinities and -0.0 travel in the state's counts."""
    f = torch.float32
    cases = [([-0.0], [-0.0], -0.0), ([-0.0], [0.0], 0.0), ([-0.0], [], -0.0), ([], [], 0.0),
             ([math.inf], [1.0], math.inf), ([math.inf], [-math.inf], math.nan), ([1.0], [math.nan], math.nan),
             ([2.0**127, 2.0**127], [-(2.0**127)], 2.0**127), ([2.0**127], [2.0**127], math.inf)]
    for a, b, want in cases:
        s = state(torch.tensor(a, dtype=f, device=device)) + state(torch.tensor(b, dtype=f, device=device))
        got = round_state(s, f).item()
        assert (math.isnan(got) and math.isnan(want)) or (got == want and math.copysign(1, got) == math.copysign(1, want)), (a, b, got)


@pytest.mark.parametrize("device", DEVICES)
def test_state_over_dims_and_dtype(device):
    gen, seed = fresh_generator("cpu")
    x = torch.randn(6, 50, 7, generator=gen, dtype=torch.float64).to(torch.float32).to(device)
    s = state(x, [1], True, dtype=torch.float64)
    assert s.shape == (6, 1, 7, 73)
    assert same_bits(round_state(s, torch.float64), exact(x, 1, True, dtype=torch.float64)), f"seed {seed}"
    halves = state(x[:, :20], [1], True, dtype=torch.float64) + state(x[:, 20:], [1], True, dtype=torch.float64)
    assert same_bits(round_state(halves, torch.float64), exact(x, 1, True, dtype=torch.float64)), f"seed {seed}"


def test_state_errors():
    with pytest.raises(TypeError, match="integer sums are exact already"):
        state(torch.ones(3, dtype=torch.int32))
    with pytest.raises(TypeError, match="integer sums are exact already"):
        state(torch.ones(3), dtype=torch.int64)
    with pytest.raises(ValueError, match="73 words"):
        round_state(torch.zeros(3, 5, dtype=torch.int64), torch.float32)
    with pytest.raises(TypeError, match="int64 state"):
        round_state(torch.zeros(73), torch.float32)
    with pytest.raises(TypeError, match="float16, bfloat16, float32 or float64"):
        round_state(torch.zeros(73, dtype=torch.int64), torch.int32)


def test_state_fake_and_compile():
    x = torch.randn(4, 9)
    f = torch.compile(lambda t: round_state(state(t, [1]), torch.float32), fullgraph=True, backend="eager")
    assert same_bits(f(x), exact(x, 1))
    torch.library.opcheck(torch.ops.treduce._exact_state.default, (x, [1]))
    torch.library.opcheck(torch.ops.treduce._exact_round.default, (state(x), torch.float32))


# CUDA: the same bits as the CPU's exact sums, which match the reference above; sizes where the
# reference would take too long, data that moves the windows of kernels/exact.cuh.
def _spread(dtype):
    return {torch.float16: (-24, 14), torch.bfloat16: (-130, 120), torch.float32: (-140, 120),
            torch.float64: (-1060, 1000)}[dtype]


def _data(n, dtype, kind, gen):
    z = torch.randn(n, generator=gen, dtype=torch.float64)
    if kind == "normal":
        return z.to(dtype)
    if kind == "wide":  # every binade of the dtype, NaN-free
        lo, hi = _spread(dtype)
        return (z * 2.0 ** torch.randint(lo, hi, (n,), generator=gen)).to(dtype)
    if kind == "sorted":  # the scale drifts through the tensor: windows move
        lo, hi = _spread(dtype)
        return (z.sign() * 2.0 ** torch.linspace(lo, hi, n, dtype=torch.float64)).to(dtype)
    if kind == "sparse":  # zeros, then runs of values far apart
        x = z * (torch.rand(n, generator=gen) < 0.1)
        return (x * 2.0 ** (20 * torch.randint(-2, 3, (n,), generator=gen))).to(dtype)
    raise ValueError(kind)


@cuda_only
@pytest.mark.parametrize("kind", ["normal", "wide", "sorted", "sparse"])
@pytest.mark.parametrize("n", [255, 4099, 65536 + 3, 2**20 + 7, 2**24 + 3])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_cuda_matches_the_cpu(dtype, n, kind):
    gen, seed = fresh_generator("cpu")
    x = _data(n, dtype, kind, gen)
    want = exact(x)
    got = exact(x.cuda())
    assert same_bits(got.cpu(), want), f"seed {seed}: got {got.item()!r}, want {want.item()!r}"
    assert torch.equal(state(x.cuda()).cpu(), state(x)), f"seed {seed}: states differ"


@cuda_only
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_cuda_order_offset_and_layout_do_not_matter(dtype):
    gen, seed = fresh_generator("cpu")
    n = 3 * 65536 + 11
    x = _data(n, dtype, "wide", gen).cuda()
    first = exact(x)
    assert same_bits(exact(x[torch.randperm(n, generator=gen).cuda()]), first), f"seed {seed}: permutation"
    for offset in (1, 3, 7):
        padded = torch.zeros(n + offset, dtype=dtype, device="cuda")
        padded[offset:] = x
        assert same_bits(exact(padded[offset:]), first), f"seed {seed}: offset {offset}"
    assert same_bits(exact(torch.stack([x, x], 1)[:, 1]), first), f"seed {seed}: stride"
    m = x[: 311 * 631].reshape(311, 631)
    for view in (m, m.t(), m.t().contiguous()):  # rows, columns, both layouts
        assert same_bits(exact(view).cpu(), exact(m.cpu())), f"seed {seed}"
        assert same_bits(exact(view, 0).cpu(), exact(view.cpu(), 0)), f"seed {seed}"
        assert same_bits(exact(view, 1).cpu(), exact(view.cpu(), 1)), f"seed {seed}"


@cuda_only
@pytest.mark.parametrize(
    "shape,dim", [((70000, 3), 0), ((3, 70000), 1), ((1000, 33), 1), ((33, 1000), 0), ((9, 10, 11), (0, 2)),
                  ((2, 300000), 1), ((100000, 2), 1)])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_cuda_dims_match_the_cpu(dtype, shape, dim):
    gen, seed = fresh_generator("cpu")
    x = _data(math.prod(shape), dtype, "wide", gen).reshape(shape)
    got = exact(x.cuda(), dim)
    assert same_bits(got.cpu(), exact(x, dim)), f"seed {seed}"
    assert torch.equal(state(x.cuda(), dim).cpu(), state(x, dim)), f"seed {seed}: states differ"


@cuda_only
@pytest.mark.parametrize(
    "src,dtype", [(torch.float16, torch.float32), (torch.float16, torch.float64), (torch.bfloat16, torch.float32),
                  (torch.bfloat16, torch.float64), (torch.float32, torch.float64)], ids=str)
def test_cuda_widening_dtype_reads_the_input_as_it_is(src, dtype):
    """dtype= wider than the input (each element exact in it): the kernels read the input and
    round to the result's format; the bits and states of the converted copy's sums."""
    gen, seed = fresh_generator("cpu")
    x = _data(2**20 + 7, src, "wide", gen)
    want = exact(x.to(dtype))
    got = exact(x.cuda(), dtype=dtype)
    assert got.dtype == dtype and same_bits(got.cpu(), want), f"seed {seed}: got {got.item()!r}, want {want.item()!r}"
    assert torch.equal(state(x.cuda(), dtype=dtype).cpu(), state(x.to(dtype))), f"seed {seed}: states differ"
    m = x[: 1000 * 333].reshape(1000, 333)
    for dim in (0, 1):
        assert same_bits(exact(m.cuda(), dim, dtype=dtype).cpu(), exact(m.to(dtype), dim)), f"seed {seed}: dim {dim}"


@cuda_only
def test_cuda_nan_inf_and_zeros_anywhere():
    gen, seed = fresh_generator("cpu")
    n = 2**22 + 5
    for dtype in FLOATS:
        x = _data(n, dtype, "normal", gen).cuda()
        for special, want in ((math.nan, math.nan), (math.inf, math.inf), (-math.inf, -math.inf)):
            y = x.clone()
            y[int(torch.randint(0, n, (1,), generator=gen))] = special
            got = exact(y).item()
            assert (math.isnan(got) and math.isnan(want)) or got == want, f"seed {seed} {dtype} {special}"
        assert math.copysign(1, exact(torch.full((n,), -0.0, dtype=dtype, device="cuda")).item()) < 0
        assert math.copysign(1, exact(torch.zeros(n, dtype=dtype, device="cuda")).item()) > 0
        y = torch.full((n,), -0.0, dtype=dtype, device="cuda")
        y[n // 2] = 0.0
        assert math.copysign(1, exact(y).item()) > 0


@cuda_only
@gpu_memory
def test_cuda_past_2_to_the_31():
    """int64 sizes: 2^31 + 5 bfloat16 elements (4 GiB), a known exact sum."""
    n = 2**31 + 5
    try:
        x = torch.ones(n, dtype=torch.bfloat16, device="cuda")
    except torch.OutOfMemoryError:
        pytest.skip("not enough GPU memory")
    x[0], x[-1] = 3.0, -7.0
    want = round_to(Fraction(n - 2 + 3 - 7), torch.bfloat16)
    assert exact(x).item() == want
    assert exact(x, dtype=torch.float32).item() == round_to(Fraction(n - 6), torch.float32)
    del x
    torch.cuda.empty_cache()


@cuda_only
def test_cuda_exact_in_a_graph():
    gen, seed = fresh_generator("cpu")
    x = _data(2**20 + 3, torch.float32, "wide", gen).cuda()
    want = exact(x)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        exact(x)  # warm-up
        with torch.cuda.graph(g, stream=s):
            got = exact(x)
    for _ in range(3):
        got.fill_(math.nan)
        g.replay()
        torch.cuda.synchronize()
        assert same_bits(got, want), f"seed {seed}"
