"""treduce.sum against torch.sum: every variant, dtype and size, on CPU and (when present) CUDA."""

import pytest
import torch

from util import (
    DEVICES,
    DTYPES,
    FLOATING,
    INTEGRAL,
    checked_sum,
    device_params,
    exact_input,
    exact_reference,
    float_error_bound,
    fresh_generator,
    gpu_memory,
    same_value,
    variant_names,
)

# Edges of every block, tile and unroll width the variants use (256 threads, 2 to 8 elements
# per thread), primes, and a size past 2^24.
SIZES = [0, 1, 2, 31, 32, 33, 255, 256, 257, 1023, 1025, 4097, 65537, 1000003, 2**24 + 7]
VARIANTS = device_params()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("device,variant", VARIANTS)
def test_exact(device, variant, dtype, n):
    """Integers over their full range, and floats holding small integers, sum to exactly
    torch.sum's result: any dropped, repeated or misplaced element shows."""
    gen, seed = fresh_generator(device)
    x = exact_input(n, dtype, device, gen)
    got = checked_sum(x, variant)
    want = exact_reference(x, got.dtype)
    assert same_value(got, want), f"seed {seed}: got {got.item()}, want {want.item()}"


@pytest.mark.parametrize("n", [n for n in SIZES if n <= 65537])
@pytest.mark.parametrize("dtype", FLOATING, ids=str)
@pytest.mark.parametrize("device,variant", VARIANTS)
def test_random_floats(device, variant, dtype, n):
    """Normal data against the float64 sum, within the bound any summation order meets
    (util.float_error_bound; it grows with n, so large sizes are left to test_exact)."""
    gen, seed = fresh_generator(device)
    x = torch.randn(n, generator=gen, device=device, dtype=torch.float64).to(dtype)
    got = checked_sum(x, variant)
    x64 = x.to(torch.float64)
    err = abs(got.item() - x64.sum().item())
    bound = float_error_bound(x64, dtype)
    assert err <= bound, f"seed {seed}: error {err} over bound {bound}"


def override_input(n, in_dtype, out_dtype, device, gen):
    """Data that exercises the cast to out_dtype and still has an exact answer: floats on a 1/16
    grid (truncated by integer results), integers past 2^11 and 2^8 (rounded by half and
    bfloat16 results), values inside out_dtype's range where C++ leaves float to integer
    undefined outside it. Every partial sum needs under 24 bits, so float accumulation is exact
    too. For half and bfloat16 results 98% of the elements are zero, keeping the sum in range."""
    if in_dtype in (torch.bool, torch.uint8, torch.int8):
        x = exact_input(n, in_dtype, device, gen)
    elif in_dtype in INTEGRAL:
        x = torch.randint(-3000, 3001, (n,), generator=gen, device=device).to(in_dtype)
    else:
        low, high = {torch.uint8: (0, 255), torch.int8: (-128, 127)}.get(out_dtype, (-1000, 1000))
        x = torch.randint(16 * low, 16 * high, (n,), generator=gen, device=device) / 16
        x = x.to(in_dtype)
    if out_dtype in (torch.float16, torch.bfloat16):
        keep = torch.rand(n, generator=gen, device=device) < 0.02
        x = torch.where(keep, x, torch.zeros_like(x))
    return x


@pytest.mark.parametrize("n", [0, 1, 4099])
@pytest.mark.parametrize("out_dtype", DTYPES, ids=str)
@pytest.mark.parametrize("in_dtype", DTYPES, ids=str)
@pytest.mark.parametrize("device,variant", VARIANTS)
def test_dtype_override(device, variant, in_dtype, out_dtype, n):
    """dtype= casts each element to out_dtype (torch's cast is the reference), sums in
    out_dtype's accumulator and rounds or wraps once to out_dtype."""
    gen, seed = fresh_generator(device)
    x = override_input(n, in_dtype, out_dtype, device, gen)
    got = checked_sum(x, variant, out_dtype)
    want = exact_reference(x.cpu().to(out_dtype), out_dtype)
    assert same_value(got, want), f"seed {seed}: got {got.item()}, want {want.item()}"


# (input dtype, dtype=, a, b): a and -b round apart when cast to dtype=, so the sum of 32 pairs
# differs from the rounded exact sum unless each element is cast before it is added.
CAST_FIRST_CASES = [
    *[(t, torch.float16, 2049, 2051) for t in (torch.int16, torch.int32, torch.int64, torch.float32, torch.float64)],
    *[(t, torch.bfloat16, 257, 259) for t in (torch.int16, torch.int32, torch.int64, torch.float32, torch.float64)],
    (torch.bfloat16, torch.float16, 2.0**-26, 0.0),  # under float16's smallest subnormal
    (torch.float16, torch.bfloat16, 1 + 2.0**-9, 1.0),  # under half a bfloat16 ulp
    *[(t, torch.bool, 1, 1) for t in (torch.int8, torch.int16, torch.int32, torch.int64, torch.float32)],  # 1 + -1
    *[(t, torch.int32, 0.5, -0.75) for t in (torch.float16, torch.bfloat16, torch.float32, torch.float64)],
]


@pytest.mark.parametrize("in_dtype,out_dtype,a,b", CAST_FIRST_CASES, ids=str)
@pytest.mark.parametrize("device,variant", VARIANTS)
def test_dtype_override_casts_each_element(device, variant, in_dtype, out_dtype, a, b):
    x = torch.tensor([a, -b] * 32, device=device).to(in_dtype)
    got = checked_sum(x, variant, out_dtype)
    want = exact_reference(x.cpu().to(out_dtype), out_dtype)
    uncast = x.cpu().to(torch.float64).sum().to(out_dtype)
    assert not same_value(want, uncast), "the case does not tell the two apart"
    assert same_value(got, want), f"got {got.item()}, want {want.item()}"


@pytest.mark.parametrize("dtype", FLOATING, ids=str)
@pytest.mark.parametrize("device,variant", VARIANTS)
def test_nan_and_inf(device, variant, dtype):
    gen, seed = fresh_generator(device)
    n = 5000
    x = torch.randn(n, generator=gen, device=device).to(dtype)
    i, j = torch.randint(0, n, (2,), generator=gen, device=device).tolist()
    y = x.clone()
    y[i] = float("inf")
    assert checked_sum(y, variant).item() == float("inf"), f"seed {seed}"
    y[j if j != i else (i + 1) % n] = float("-inf")
    assert checked_sum(y, variant).isnan().item(), f"seed {seed}"
    y = x.clone()
    y[i] = float("nan")
    assert checked_sum(y, variant).isnan().item(), f"seed {seed}"


def layouts(device):
    base = torch.arange(3 * 5 * 7 * 11, device=device)
    return {
        "every_third": base[::3],
        "storage_offset": base[5:],
        "transposed": base.reshape(33, 35).t(),
        "channels_last": base.reshape(3, 5, 7, 11).contiguous(memory_format=torch.channels_last),
        "expanded": torch.arange(7, device=device).expand(5, 7),
        "zero_dim": torch.tensor(42, device=device),
        "empty_2d": torch.empty(0, 5, device=device, dtype=torch.int64),
        "column": base.reshape(-1, 5)[:, 2],
    }


@pytest.mark.parametrize("layout", list(layouts("cpu")))
@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("device,variant", VARIANTS)
def test_layouts(device, variant, dtype, layout):
    """Views, offsets, permuted and broadcast strides give the sum of their elements."""
    x = layouts(device)[layout].to(dtype)
    got = checked_sum(x, variant)
    want = exact_reference(x.contiguous(), got.dtype)
    assert same_value(got, want), f"got {got.item()}, want {want.item()}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("device,variant", VARIANTS)
def test_repeatable(device, variant, dtype):
    """Variants without float atomics give the same bits on every call."""
    import torch_reduce

    if not {v.name: v for v in torch_reduce.variants(device)}[variant].deterministic:
        pytest.skip("float atomics: the rounding depends on the order the hardware picks")
    gen, _ = fresh_generator(device)
    x = torch.randn(3_000_017, generator=gen, device=device).to(dtype)
    first = checked_sum(x, variant)
    for _ in range(10):
        assert torch.equal(checked_sum(x, variant), first)


@pytest.mark.slow
@gpu_memory
@pytest.mark.parametrize("device", DEVICES)
def test_past_int32_indexing(device):
    """n >= 2^31: any 32-bit index or size in a kernel wraps and loses elements. Every variant of
    the device on one input: drawing it and its reference took longer than a variant's sum (CPU,
    15 and 11 s against 4-20)."""
    n = 2**31 + 17
    gen, seed = fresh_generator(device)
    x = torch.randint(0, 256, (n,), generator=gen, device=device, dtype=torch.uint8)
    want = sum(chunk.sum(dtype=torch.int64) for chunk in x.split(1 << 28)).item()
    got = {variant: torch.ops.treduce.sum(x, variant).item() for variant in variant_names(device)}
    wrong = {variant: value for variant, value in got.items() if value != want}
    assert not wrong, f"seed {seed}: want {want}, got {wrong}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("device", DEVICES)
def test_every_half_and_bfloat16_value_converts_exactly(device, dtype):
    """All 65536 bit patterns, one per call, widened to float32 as torch does it."""
    x = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(dtype).to(device)
    got = torch.stack([torch.ops.treduce.sum(x[i : i + 1], "auto", dtype=torch.float32) for i in range(x.numel())])
    want = x.float()
    # -0.0 sums to +0.0 (the sum starts from +0.0), as torch.sum gives it.
    same = (got.view(torch.int32) == want.view(torch.int32)) | (got.isnan() & want.isnan()) | ((got == 0) & (want == 0))
    assert same.all(), f"{(~same).sum().item()} values differ, first at bits {(~same).nonzero()[0].item():#06x}"
