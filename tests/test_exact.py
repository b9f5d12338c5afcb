"""variant="exact": the exact sum of the elements, rounded once to the result dtype (to nearest,
ties to even), against a reference computed here in Python integers (every element as an
integer multiple of 2^-1074) and rounded by Fraction arithmetic; IEEE's NaN, infinity and signed
zero rules; the same bits for any order, split, layout and thread count."""

import math
import random
from fractions import Fraction

import pytest
import torch

import torch_reduce
from util import INTEGRAL, fresh_generator

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


def _check(x, dtype=None, what=""):
    got = exact(x, dtype=dtype) if dtype else exact(x)
    want = reference(x, dtype)
    assert same_bits(got, want), f"{what}: got {got.item()!r}, want {want.item()!r}"


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


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("n", [0, 1, 2, 17, 1000, 65536 + 3, 200_003])
def test_random_sums_match_the_reference(dtype, n):
    gen, seed = fresh_generator("cpu")
    scale = torch.pow(2.0, torch.randint(-20, 20, (n,), generator=gen).double())
    x = (torch.randn(n, generator=gen, dtype=torch.float64) * scale).to(dtype)
    _check(x, what=f"seed {seed}")


def _t(values, dtype):
    return torch.tensor(values, dtype=torch.float64).to(dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_adversarial_cases(dtype):
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
        _check(x, what=name)
        _check(x.flip(0), what=name + ", reversed")


def test_every_exponent_at_once():
    """Every power of two a double has, and every float32 one, in one sum."""
    doubles = [2.0**e for e in range(-1074, 1024)]
    x = torch.tensor(doubles + [-d for d in doubles[::3]], dtype=torch.float64)
    _check(x, what="float64")
    floats = [2.0**e for e in range(-149, 128)]
    _check(torch.tensor(floats + [-f for f in floats[1::2]], dtype=torch.float32), what="float32")
    _check(torch.tensor(floats[:-1], dtype=torch.float32), dtype=torch.float64, what="float32 into float64")


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


@pytest.mark.parametrize(
    "shape,dim,keepdim",
    [((37, 53), 0, False), ((37, 53), -1, True), ((5, 6, 7), (0, 2), False), ((5, 6, 7), 1, False), ((4, 0), 1, False)],
)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_dims_match_the_reference(dtype, shape, dim, keepdim):
    gen, seed = fresh_generator("cpu")
    x = (torch.randn(shape, generator=gen, dtype=torch.float64) * 1e3).to(dtype)
    for t in (x, x.transpose(0, -1).contiguous().transpose(0, -1)):  # contiguous and not
        got = exact(t, dim, keepdim)
        want = torch.sum(t, dim, keepdim)  # shape and dtype
        assert got.shape == want.shape and got.dtype == want.dtype
        dims = [dim] if isinstance(dim, int) else list(dim)
        rows = t.movedim(dims, list(range(-len(dims), 0))).flatten(-len(dims)).flatten(0, -2)
        flat_got = got.reshape(-1)
        for j in range(flat_got.numel()):
            ref = reference(rows[j])
            assert same_bits(flat_got[j], ref), f"seed {seed}, output {j}: got {flat_got[j].item()}, want {ref.item()}"


@pytest.mark.parametrize(
    "src,dtype", [(torch.float32, torch.float64), (torch.float64, torch.float32), (torch.float32, torch.float16),
                  (torch.bfloat16, torch.float32)], ids=str)
def test_dtype_converts_the_elements_first(src, dtype):
    gen, seed = fresh_generator("cpu")
    x = (torch.randn(5000, generator=gen, dtype=torch.float64) * 100).to(src)
    got = exact(x, dtype=dtype)
    assert got.dtype == dtype
    assert same_bits(got, reference(x, dtype)), f"seed {seed}"


@pytest.mark.parametrize("dtype", INTEGRAL, ids=str)
def test_integers_are_autos_sums(dtype):
    gen, _ = fresh_generator("cpu")
    x = torch.randint(0, 2 if dtype == torch.bool else 100, (1000,), generator=gen).to(dtype)
    assert torch.equal(exact(x), torch.sum(x))
    assert torch.equal(exact(x, dtype=torch.float64), torch.sum(x, dtype=torch.float64))


def test_exact_is_a_sum_only():
    with pytest.raises(ValueError, match="computes sums only"):
        torch.ops.treduce.mean(torch.ones(3), "exact")
