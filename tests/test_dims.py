"""treduce.sum, mean, amax and amin along dims, with torch as the reference: values, result dtypes
and shapes, layouts, errors, determinism, autograd, opcheck and torch.compile, on CPU and (when
present) CUDA.

Every call goes through `check`, which also runs torch's op on the same input: where torch raises,
ours must raise the same exception type; where it returns, ours must return a fresh tensor (not
overlapping the input's storage) of torch's dtype and shape on the input's device, and leave the
input's bytes as they were. Values:
- integer and bool results, and every amax/amin result, equal torch's exactly (NaN equal to NaN);
- float sums and means are compared with the float64 sum of the elements as the op sees them
  (cast to the result dtype first, as torch does). When those are integers whose absolute sum fits
  the accumulator's mantissa, every partial sum is exact in any order, so a sum must equal the
  float64 sum rounded once to the result dtype and a mean must be within a few roundings of it.
  Otherwise the error may be up to (n-1) u_acc sum|x_i| for n reduced elements (any order of
  additions meets it; Higham, Accuracy and Stability of Numerical Algorithms, 4.2), plus the
  final roundings, and the float64 reference's own error. torch's own float32 and float64 results are held to the same bound, so a bound
  too tight shows up as a test error, not as a bug in the op. (Not its float16 and bfloat16 ones:
  torch rounds some partial sums to the result dtype, where the op promises float accumulation.)

The CPU runs scaled-down shapes; the full-size ones (up to 32x4096x4096) run on CUDA only.
"""

from __future__ import annotations

import math

import pytest
import torch

import torch_reduce
from util import (
    DEVICES,
    FLOATING,
    UNIT_ROUNDOFF,
    cuda_only,
    device_params,
    gpu_memory,
    exact_input,
    fresh_generator,
    poison_cuda_allocator,
    storage_bytes,
    variant_names,
)

SUPPORTED = tuple(torch_reduce.SUPPORTED_DTYPES)
OPS = ("sum", "mean", "amax", "amin")
TORCH_OPS = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax, "amin": torch.amin}


# ---------------------------------------------------------------------------------------------
# Inputs


def values(shape, dtype, device, gen, kind):
    """A fresh contiguous tensor. kind "exact": integers over their whole range, bool, or floats
    holding small integers (util.exact_input); "normal": N(0,1) floats (integers as "exact");
    "moderate": integers in [-100, 100] ([0, 100] unsigned, 0/1 bool) of any dtype."""
    if kind == "normal" and dtype.is_floating_point:
        return torch.randn(shape, generator=gen, device=device, dtype=torch.float64).to(dtype)
    if kind == "moderate":
        low = 0 if dtype in (torch.bool, torch.uint8) else -100
        high = 1 if dtype == torch.bool else 100
        return torch.randint(low, high + 1, shape, generator=gen, device=device).to(dtype)
    return exact_input(math.prod(shape), dtype, device, gen).reshape(shape)


# Each layout builds its input from `f(shape)`, a fresh contiguous tensor. Lengths are odd or
# prime; the 2-D and 3-D shapes are the full-size ones below scaled down for the CPU.
LAYOUTS = {
    "0d": lambda f: f(()),
    "empty": lambda f: f((0,)),
    "empty_3x0": lambda f: f((3, 0)),
    "empty_0x4x5": lambda f: f((0, 4, 5)),
    "1": lambda f: f((1,)),
    "31": lambda f: f((31,)),
    "4099": lambda f: f((4099,)),
    "65537": lambda f: f((65537,)),
    "7x1x3": lambda f: f((7, 1, 3)),
    "3x65537": lambda f: f((3, 65537)),
    "4099x37": lambda f: f((4099, 37)),
    "37x4099": lambda f: f((37, 4099)),
    "257x263": lambda f: f((257, 263)),
    "5x67x129": lambda f: f((5, 67, 129)),
    # Views: permuted, stepped, offset, overlapping and broadcast strides.
    "transposed": lambda f: f((37, 4099)).t(),
    "step_slice": lambda f: f((129, 200))[::2, ::3],
    "offset_cols": lambda f: f((257, 264))[:, 1:],
    "offset_1d": lambda f: f((4100,))[1:],
    "column": lambda f: f((4099, 5))[:, 2],
    "permuted_3d": lambda f: f((67, 129, 5)).permute(2, 0, 1),
    "transposed_3d": lambda f: f((129, 67, 5)).transpose(0, 2),
    "hwc_as_chw": lambda f: f((17, 19, 3)).permute(2, 0, 1),
    "channels_last": lambda f: f((2, 3, 17, 19)).contiguous(memory_format=torch.channels_last),
    "expanded_rows": lambda f: f((37, 1)).expand(37, 4099),
    "expanded_3d": lambda f: f((5, 1, 129)).expand(5, 67, 129),
    "expanded_scalar": lambda f: f(()).expand(7, 9),
    "overlapping": lambda f: f((1000,)).as_strided((991, 10), (1, 1)),
    # Aligned rows whose length is not a whole number of 16-byte vectors: the CUDA column
    # kernel's vector loads stop short of the last outputs.
    "cropped_rows": lambda f: f((9, 7, 48))[:, :, :29],
}

# Full size, on CUDA only.
BIG_LAYOUTS = {
    "65536x128": lambda f: f((65536, 128)),
    # Few outputs down a long dim: one or two vectors a row, a thread across and the block's
    # other threads down the rows; 5 outputs: one vector and the last output alone.
    "262147x16": lambda f: f((262147, 16)),
    "100003x5": lambda f: f((100003, 5)),
    "128x65536": lambda f: f((128, 65536)),
    # Few rows under many outputs: over dim 0, many threads down each column, no split.
    "512x16384": lambda f: f((512, 16384)),
    # Few outputs of 2-byte types go as 8-byte vectors; the last 2 of each row as elements.
    "128x65538_cropped": lambda f: f((128, 65544))[:, :65538],
    "4096x4096": lambda f: f((4096, 4096)),
    # Rows of two or more vectors a thread of a 512-thread block, enough for every multiprocessor:
    # a block a row (4- and 2-byte types); rows that start off a 16-byte boundary.
    "600x8201": lambda f: f((600, 8201)),
    # The same of whole aligned vectors: float32 four loads a thread, 2-byte types two
    # (two_vector_rows_kernel, as float32 rows of 4096).
    "600x8192": lambda f: f((600, 8192)),
    # Whole short rows of 8 to 64 vectors (2- and 4-byte floats): a team a row, every load at
    # once (whole_rows_kernel); row counts that leave the last block part empty.
    "1031x64": lambda f: f((1031, 64)),
    "1029x256": lambda f: f((1029, 256)),
    "4096x4096_transposed": lambda f: f((4096, 4096)).t(),
    "32x4096x4096": lambda f: f((32, 4096, 4096)),
    # Narrow columns read through a step, longer than tiles take: over dim 1 a strided row a
    # result (layout.h's inner_as_rows), the rows kernel's teams.
    "narrow_strided_columns": lambda f: f((4099, 56, 7))[:, :, ::2],
}

# Gigabytes of input and reference: on one worker (util.gpu_memory).
HUGE = {"32x4096x4096"}


def make(layout, dtype, device, gen, kind):
    build = LAYOUTS.get(layout) or BIG_LAYOUTS[layout]
    return build(lambda shape: values(shape, dtype, device, gen, kind))


def layout_params(names, big=()):
    """(device, layout) pairs: every layout on the CPU, and on CUDA (skipped without a GPU) the
    same plus the full-size ones."""
    params = [pytest.param("cpu", name, id=f"cpu-{name}") for name in names]
    params += [pytest.param("cuda", name, marks=[cuda_only, *([gpu_memory] if name in HUGE else [])], id=f"cuda-{name}")
               for name in (*names, *big)]
    return params


ALL_LAYOUTS = layout_params(LAYOUTS, BIG_LAYOUTS)
# A smaller set, for checks whose cost is per layout rather than per element.
SOME_LAYOUTS = ["0d", "empty_3x0", "empty_0x4x5", "4099", "7x1x3", "257x263", "5x67x129",
                "transposed", "offset_cols", "permuted_3d", "expanded_3d", "channels_last"]


def dim_cases(ndim):
    """(dim, keepdim) pairs: None and [] (everything), each dim, negative ones, pairs, all dims
    in and out of order, and a plain int, without keepdim; a few of them with keepdim."""
    if ndim <= 1:
        dims, kept = [None, [], [0], [-1], 0], [None, [0], -1]
    elif ndim == 2:
        dims = [None, [], [0], [1], [-1], [-2], [0, 1], [1, 0], [-1, 0], 1]
        kept = [None, [], [0], [-1], [1, 0]]
    elif ndim == 3:
        dims = [None, [], [0], [1], [2], [-1], [-3], [0, 1], [0, 2], [1, 2], [-1, 0], [0, 1, 2], [2, 1, 0], -2]
        kept = [None, [1], [-1], [0, 2], [2, 1, 0]]
    else:
        dims = [None, [1], [-1], [2, 3], [3, 1], [0, 2, 3], list(range(ndim))]
        kept = [None, [1], [2, 3], [0, 2, 3]]
    return [(d, False) for d in dims] + [(d, True) for d in kept]


# ---------------------------------------------------------------------------------------------
# One checked call


def call(op, x, dim, keepdim, dtype=None, variant="auto"):
    kwargs = {"dtype": dtype} if op in ("sum", "mean") else {}
    return getattr(torch.ops.treduce, op)(x, variant, dim, keepdim, **kwargs)


def call_torch(op, x, dim, keepdim, dtype=None):
    kwargs = {"dtype": dtype} if op in ("sum", "mean") else {}
    return TORCH_OPS[op](x, dim, keepdim, **kwargs)


def describe(op, x, dim, keepdim, dtype=None, variant="auto"):
    extra = (f", dtype={dtype}" if dtype is not None else "") + (f", variant={variant!r}" if variant != "auto" else "")
    return f"{op}(x{tuple(x.shape)} {x.dtype} strides {x.stride()}, dim={dim}, keepdim={keepdim}{extra})"


def overlaps(a, b):
    if a.numel() == 0 or b.numel() == 0:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    return sa.data_ptr() < sb.data_ptr() + sb.nbytes() and sb.data_ptr() < sa.data_ptr() + sa.nbytes()


def same_or_nan(a, b):
    """Elementwise: equal, or both NaN."""
    eq = a == b
    if a.is_floating_point():
        eq |= a.isnan() & b.isnan()
    return eq


def first_difference(bad, got, want, bound=None):
    count = int(bad.sum())
    idx = tuple(bad.nonzero()[0].tolist())
    text = f"{count} of {bad.numel()} elements wrong; first at {list(idx)}: got {got[idx].item()!r}, want {want[idx].item()!r}"
    if bound is not None:
        text += f" (allowed error {bound[idx].item():.3g})"
    return text


def sum_dtype(op, x, dtype):
    """The result dtype of torch.sum or torch.mean, where they accept the arguments."""
    if dtype is not None:
        return dtype
    return torch.int64 if op == "sum" and not x.dtype.is_floating_point else x.dtype


class FloatReference:
    """x's elements cast to a float result dtype (as torch casts them before it adds), in float64,
    and the error a correct sum or mean of them may have."""

    def __init__(self, x, out_dtype):
        self.out_dtype = out_dtype
        self.x64 = x.to(out_dtype).to(torch.float64)
        self.abs64 = self.x64.abs()
        self.integers = bool(self.x64.isfinite().all() and (self.x64 == self.x64.round()).all())
        self.u_acc = UNIT_ROUNDOFF[torch.float64 if out_dtype == torch.float64 else torch.float32]
        self.u_out = UNIT_ROUNDOFF[out_dtype]

    def __call__(self, op, dim, keepdim):
        """(want, bound, exact): the float64 result, the elementwise error allowed, and whether
        the result must be exactly want rounded once to out_dtype."""
        s = self.x64.sum(dim, keepdim)
        a = self.abs64.sum(dim, keepdim)
        n = self.x64.numel() // s.numel() if s.numel() else 0
        u_acc, u_out, tiny = self.u_acc, self.u_out, torch.finfo(self.out_dtype).tiny
        # Integers whose absolute sum fits the accumulator's mantissa add exactly in any order.
        exact = self.integers and (a.numel() == 0 or a.max().item() < 1 / u_acc)
        # The op's additions, plus the float64 reference's own (as large as the op's for a float64
        # result, negligible for narrower ones).
        adds = 0.0 if exact else max(n - 1, 0) * (u_acc + UNIT_ROUNDOFF[torch.float64]) * a
        if op == "sum":
            return s, adds * (1 + u_out) + u_out * s.abs() + tiny, exact
        # A mean: the sum's error over n, a division (or a multiplication by 1/n, itself rounded)
        # in the accumulator, and at most two roundings to out_dtype (the sum's and the quotient's).
        m = s / n
        return m, adds / max(n, 1) * (1 + u_out) + (3 * u_acc + 2 * u_out) * m.abs() + tiny, False


def float_mismatch(got, want, bound, exact):
    """The elements of `got` (a float result) that the reference rejects. `want` rounded once to
    got's dtype is always right (when it overflows to inf too); when `exact`, nothing else is."""
    rounded = same_or_nan(got, want.to(got.dtype))
    if exact:
        return ~rounded
    return ~(rounded | ((got.to(torch.float64) - want).abs() <= bound))


def check(op, x, dim, keepdim, dtype=None, variant="auto", refs=None):
    """Our op against torch's on x; returns a list of what is wrong (empty when all is right).
    `refs`, a dict kept across calls on the same x, caches the float64 references."""
    what = describe(op, x, dim, keepdim, dtype, variant)
    # torch's half and bfloat16 sums round partial sums to the result dtype on some paths (its CPU
    # sum of 65537 bfloat16 integers adding up to -354 gave -352, where one rounding gives -354),
    # so there only its dtype, shape and errors are the reference: the meta device gives those
    # without running torch's slow CPU half kernels.
    low_precision = op in ("sum", "mean") and sum_dtype(op, x, dtype) in (torch.float16, torch.bfloat16)
    try:
        want = call_torch(op, x.to("meta") if low_precision else x, dim, keepdim, dtype)
    except Exception as theirs:  # noqa: BLE001 - torch's exception type is the reference
        try:
            call(op, x, dim, keepdim, dtype, variant)
        except Exception as ours:  # noqa: BLE001
            if type(ours) is type(theirs):
                return []
            return [f"{what}: torch raises {type(theirs).__name__}, ours {type(ours).__name__}: {ours}"]
        return [f"{what}: torch raises {type(theirs).__name__} ({theirs}), ours returned a result"]

    before = storage_bytes(x)
    poison_cuda_allocator(x.device.type)
    try:
        got = call(op, x, dim, keepdim, dtype, variant)
    except Exception as ours:  # noqa: BLE001
        return [f"{what}: raised {type(ours).__name__}: {ours}"]
    problems = []
    if not torch.equal(storage_bytes(x), before):
        problems.append("wrote to its input")
    if got.device != x.device:
        problems.append(f"result on {got.device}, input on {x.device}")
    if got.dtype != want.dtype:
        problems.append(f"result dtype {got.dtype}, torch's {want.dtype}")
    if got.shape != want.shape:
        problems.append(f"result shape {tuple(got.shape)}, torch's {tuple(want.shape)}")
    if overlaps(got, x):
        problems.append("result shares memory with its input")
    if problems:
        return [f"{what}: {'; '.join(problems)}"]
    if want.numel() == 0:
        return []

    if op in ("amax", "amin") or not want.is_floating_point():
        bad = ~same_or_nan(got, want)
        return [f"{what}: {first_difference(bad, got, want)}"] if bad.any() else []
    refs = {} if refs is None else refs
    if want.dtype not in refs:
        refs[want.dtype] = FloatReference(x, want.dtype)
    ref, bound, exact = refs[want.dtype](op, dim, keepdim)
    if not low_precision:
        bad = float_mismatch(want, ref, bound, exact)
        if bad.any():
            return [f"{what}: TEST ERROR, torch's own result fails the reference: {first_difference(bad, want, ref, bound)}"]
    bad = float_mismatch(got, ref, bound, exact)
    return [f"{what}: {first_difference(bad, got, ref, bound)}"] if bad.any() else []


def report(seed, failures, limit=8):
    more = f"\n... and {len(failures) - limit} more" if len(failures) > limit else ""
    return f"seed {seed}: {len(failures)} failing calls:\n" + "\n".join(failures[:limit]) + more


def check_layout(op, device, layout, dtype, kinds, out_dtype=None):
    """Every dim case on `layout`, with fresh data of each kind (the later kinds without keepdim,
    which changes only the result's shape)."""
    gen, seed = fresh_generator(device)
    failures = []
    for i, kind in enumerate(kinds):
        x = make(layout, dtype, device, gen, kind)
        refs = {}
        for dim, keepdim in dim_cases(x.dim()):
            if i == 0 or not keepdim:
                failures += check(op, x, dim, keepdim, dtype=out_dtype, refs=refs)
    assert not failures, report(seed, failures)


# ---------------------------------------------------------------------------------------------
# Values, dtypes and shapes against torch


@pytest.mark.parametrize("dtype", SUPPORTED, ids=str)
@pytest.mark.parametrize("device,layout", ALL_LAYOUTS)
def test_sum(device, layout, dtype):
    """Every dtype, layout and dim list: integers exact over their whole range; floats exact on
    integer-valued data, and within the summation bound on normal data."""
    check_layout("sum", device, layout, dtype, ("exact", "normal") if dtype.is_floating_point else ("exact",))


SUM_OVERRIDES = [
    (torch.float32, torch.float64),
    (torch.int16, torch.int8),
    (torch.float32, torch.float16),
    (torch.bool, torch.bool),
    (torch.float16, torch.float32),
    (torch.bfloat16, torch.float32),
    (torch.float64, torch.float32),
    (torch.int32, torch.float64),
    (torch.uint8, torch.int32),
    (torch.float32, torch.int32),
]


@pytest.mark.parametrize("in_dtype,out_dtype", SUM_OVERRIDES, ids=str)
@pytest.mark.parametrize("device,layout", layout_params(SOME_LAYOUTS))
def test_sum_dtype_override(device, layout, in_dtype, out_dtype):
    """dtype= casts each element to it first (integer results wrap as torch's do)."""
    kinds = ("exact", "normal") if in_dtype.is_floating_point else ("exact",)
    check_layout("sum", device, layout, in_dtype, kinds, out_dtype)


MEAN_DTYPES = [
    *[(t, None) for t in FLOATING],
    (torch.float16, torch.float32),
    (torch.float32, torch.float64),
    (torch.int32, torch.float32),
    (torch.int64, torch.float64),
    (torch.uint8, torch.float32),
    (torch.bool, torch.float64),
    (torch.int16, torch.float16),
]


@pytest.mark.parametrize("in_dtype,out_dtype", MEAN_DTYPES, ids=str)
@pytest.mark.parametrize("device,layout", ALL_LAYOUTS)
def test_mean(device, layout, in_dtype, out_dtype):
    """Floating input, and integer or bool input with a floating dtype=. Integer-valued data makes
    the sum exact, so the mean must be within a few roundings of the exact one; normal data gets
    the summation bound. A mean over no elements is NaN, as torch's."""
    kinds = ("moderate", "normal") if in_dtype.is_floating_point else ("moderate",)
    check_layout("mean", device, layout, in_dtype, kinds, out_dtype)


@pytest.mark.parametrize("dtype", SUPPORTED, ids=str)
@pytest.mark.parametrize("device,layout", ALL_LAYOUTS)
@pytest.mark.parametrize("op", ["amax", "amin"])
def test_amax_amin(op, device, layout, dtype):
    """Exactly torch's result; on empty inputs, torch's result or torch's exception type."""
    check_layout(op, device, layout, dtype, ("normal",))


@pytest.mark.parametrize("dtype", SUPPORTED, ids=str)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["amax", "amin"])
def test_amax_amin_rows_at_the_far_end(op, device, dtype):
    """Rows that hold only the far end of the range (iinfo.min, -inf, False for amax), or only
    negative finite values: a maximum started from zero instead of the identity shows."""
    gen, seed = fresh_generator(device)
    shape = (33, 65)
    if dtype == torch.bool:
        far = op == "amin"  # amax's identity is False, amin's True
    elif dtype.is_floating_point:
        far = float("-inf") if op == "amax" else float("inf")
    else:
        far = torch.iinfo(dtype).min if op == "amax" else torch.iinfo(dtype).max
    x = values(shape, dtype, device, gen, "normal")
    x[::3] = far
    if dtype.is_floating_point:  # finite, all on the far side of zero
        x[1::3] = (x[1::3].abs() + 1).to(dtype) * (-1 if op == "amax" else 1)
    elif dtype != torch.bool:  # within 3 of the far end
        step = torch.randint(0, 4, x[1::3].shape, generator=gen, device=device).to(dtype)
        x[1::3] = far + step if op == "amax" else far - step
    failures = []
    for src in (x, x.t()):
        for dim, keepdim in [(None, False), ([1], False), ([0], True), ([0, 1], True)]:
            failures += check(op, src, dim, keepdim)
    assert not failures, report(seed, failures)


@pytest.mark.parametrize("dtype", FLOATING, ids=str)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", OPS)
def test_nan_and_inf(op, device, dtype):
    """NaN in some rows (first, last, middle and random places) and in some columns, +-inf, rows
    all inf, inf next to -inf, NaN next to inf: every op gives torch's NaN, inf or number."""
    gen, seed = fresh_generator(device)
    rows, cols = 257, 263
    x = values((rows, cols), dtype, device, gen, "normal")
    nan, inf = float("nan"), float("inf")
    x[0, 0] = nan
    x[1, cols - 1] = nan
    x[2, cols // 2] = nan
    x[3, :] = nan
    x[4, 7] = inf
    x[5, 9] = -inf
    x[6, :] = -inf
    x[7, :] = inf
    x[8, 3], x[8, 200] = inf, -inf
    x[9, 10], x[9, 11] = inf, nan
    x[10, 12], x[10, 13] = nan, -inf
    picks = torch.randint(11, rows, (6,), generator=gen, device=device).tolist()
    for r, c in zip(picks, torch.randint(0, cols, (6,), generator=gen, device=device).tolist()):
        x[r, c] = nan
    y = x.clone()  # without the all-NaN and all-inf rows, so that columns differ too
    y[3, :], y[6, :], y[7, :] = 0.5, 1.0, -1.0
    failures = []
    for src in (x, y, y.t(), x.reshape(rows, cols, 1).expand(rows, cols, 3).permute(2, 0, 1)):
        for dim, keepdim in [(None, False), ([-1], False), ([0], True), ([0, 1], False), ([1, 0], True)]:
            if src.dim() == 3 and dim == [0, 1]:
                dim = [0, 2]
            failures += check(op, src, dim, keepdim)
    assert not failures, report(seed, failures)


# ---------------------------------------------------------------------------------------------
# Variants


NON_AUTO = [p for p in device_params() if p.values[1] != "auto"]
WHOLE_ONLY = [p for p in NON_AUTO if p.values[1] != "exact"]  # exact reduces over dims too (test_exact.py)
FULL_LAYOUTS = ["0d", "empty_3x0", "4099", "257x263", "transposed", "permuted_3d", "expanded_rows"]


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32], ids=str)
@pytest.mark.parametrize("layout", FULL_LAYOUTS)
@pytest.mark.parametrize("device,variant", NON_AUTO)
def test_other_sum_variants_reduce_every_dim(device, variant, layout, dtype):
    """Every variant takes dim=None, [] and the list of all dims (in any order), with keepdim."""
    gen, seed = fresh_generator(device)
    x = make(layout, dtype, device, gen, "exact")
    everything = list(range(x.dim())) or [0]
    failures = []
    for dim in (None, [], everything, everything[::-1]):
        for keepdim in (False, True):
            failures += check("sum", x, dim, keepdim, variant=variant)
    assert not failures, report(seed, failures)


@pytest.mark.parametrize("device,variant", WHOLE_ONLY)
def test_other_sum_variants_refuse_a_partial_reduction(device, variant):
    x = torch.ones(3, 4, 5, device=device)
    for dim in ([0], [-1], [0, 2], 1):
        for keepdim in (False, True):
            with pytest.raises(ValueError, match="auto"):
                call("sum", x, dim, keepdim, variant=variant)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["mean", "amax", "amin"])
def test_mean_amax_amin_take_only_auto(op, device):
    x = torch.ones(3, 4, device=device)
    for variant in [*(v for v in variant_names(device) if v != "auto"), "fastest"]:
        for dim in (None, [0]):
            with pytest.raises(ValueError):
                call(op, x, dim, False, variant=variant)


# ---------------------------------------------------------------------------------------------
# Errors


ERRORS = [
    # dim out of range: IndexError
    ("sum", (3, 4), torch.float32, {"dim": [2]}),
    ("amax", (3, 4), torch.float32, {"dim": [-3]}),
    ("mean", (5,), torch.float32, {"dim": 1}),
    ("amin", (2, 3, 4), torch.int32, {"dim": [0, 3]}),
    ("sum", (), torch.int64, {"dim": [1]}),
    ("amax", (), torch.float32, {"dim": [-2]}),
    ("mean", (2, 3, 4), torch.float64, {"dim": [-4], "keepdim": True}),
    # repeated dims: RuntimeError
    ("sum", (3, 4), torch.float32, {"dim": [0, 0]}),
    ("mean", (3, 4), torch.float32, {"dim": [1, -1]}),
    ("amax", (2, 3, 4), torch.float32, {"dim": [2, 0, -1]}),
    ("amin", (), torch.int32, {"dim": [0, -1]}),
    ("sum", (2, 3, 4), torch.uint8, {"dim": [-3, 0], "keepdim": True}),
    # mean of integer or bool input without a floating dtype=, or with a non-floating one
    ("mean", (3, 4), torch.int32, {}),
    ("mean", (3, 4), torch.int64, {"dim": [1]}),
    ("mean", (3, 4), torch.bool, {"dim": [0], "keepdim": True}),
    ("mean", (3, 4), torch.uint8, {"dim": None}),
    ("mean", (3, 4), torch.float32, {"dim": [1], "dtype": torch.int32}),
    ("mean", (3, 4), torch.int16, {"dtype": torch.int64}),
    ("mean", (3, 4), torch.float32, {"dtype": torch.bool}),
    # amax/amin over a zero-size reduced dim, or of an empty tensor with every dim reduced
    ("amax", (3, 0), torch.float32, {"dim": [1]}),
    ("amin", (3, 0), torch.int32, {"dim": [0, 1]}),
    ("amax", (0, 4, 5), torch.float32, {"dim": [0], "keepdim": True}),
    ("amin", (0,), torch.float32, {"dim": [0]}),
    ("amax", (0,), torch.float32, {}),
    ("amin", (3, 0), torch.bool, {"dim": []}),
    ("amax", (0, 4, 5), torch.uint8, {"dim": None}),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op,shape,dtype,kwargs", ERRORS, ids=str)
def test_error_type_matches_torch(op, shape, dtype, kwargs, device):
    x = torch.zeros(shape, device=device).to(dtype)
    with pytest.raises(Exception) as theirs:
        TORCH_OPS[op](x, **kwargs)
    with pytest.raises(Exception) as ours:
        getattr(torch.ops.treduce, op)(x, "auto", **kwargs)
    assert ours.type is theirs.type, f"torch raises {theirs.type.__name__}, ours {ours.type.__name__}: {ours.value}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", OPS)
def test_unsupported_dtypes_raise_type_error(op, device):
    x = torch.ones(3, 4, device=device)
    for bad in (torch.complex64, torch.uint16):
        with pytest.raises(TypeError):
            call(op, x.to(bad), [0], False)
    if op in ("sum", "mean"):
        with pytest.raises(TypeError):
            call(op, x, [1], True, dtype=torch.complex64)


# ---------------------------------------------------------------------------------------------
# Determinism


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize(
    "device,shape",
    [
        ("cpu", (4099, 37)),
        ("cpu", (3, 65537)),
        ("cpu", (5, 67, 129)),
        pytest.param("cuda", (4096, 4096), marks=cuda_only),
        pytest.param("cuda", (65536, 128), marks=cuda_only),
        pytest.param("cuda", (128, 65536), marks=cuda_only),
        pytest.param("cuda", (32, 4096, 4096), marks=[cuda_only, gpu_memory]),
    ],
    ids=str,
)
def test_repeatable_with_dims(device, shape, dtype):
    """auto gives the same bits on every call, for every dim list, contiguous or not."""
    gen, seed = fresh_generator(device)
    x = torch.randn(shape, generator=gen, device=device).to(dtype)
    dims = [[0], [-1], None] + ([[1], [0, 2]] if len(shape) == 3 else [])
    for src in (x, x.transpose(0, -1)):
        for op in ("sum", "mean"):
            for dim in dims:
                first = call(op, src, dim, False)
                for i in range(10):
                    again = call(op, src, dim, False)
                    assert torch.equal(again, first), f"seed {seed}: {describe(op, src, dim, False)} differs on call {i + 2}"


# ---------------------------------------------------------------------------------------------
# As PyTorch ops: opcheck, gradients, torch.compile


OPCHECK_CASES = [
    # (op, dtype, requires_grad, transposed, dim, keepdim, dtype=)
    ("sum", torch.float32, True, False, [1], False, None),
    ("sum", torch.float64, True, True, [0, -1], True, None),
    ("sum", torch.float32, True, False, None, True, torch.float64),
    ("sum", torch.bfloat16, False, False, [-1], False, None),
    ("sum", torch.int32, False, True, [0], False, None),
    ("sum", torch.bool, False, False, [], True, None),
    ("sum", torch.int16, False, False, [2, 0], False, torch.int8),
    ("mean", torch.float32, True, False, [1], False, None),
    ("mean", torch.float64, True, True, [0, 2], True, None),
    ("mean", torch.float32, True, False, None, False, torch.float64),
    ("mean", torch.int32, False, False, [0], True, torch.float32),
    ("mean", torch.bfloat16, False, True, [-1], False, None),
    *[(op, torch.float32, True, False, [1], False, None) for op in ("amax", "amin")],
    *[(op, torch.float64, True, True, [0, -1], True, None) for op in ("amax", "amin")],
    *[(op, torch.int8, False, False, [0], False, None) for op in ("amax", "amin")],
    *[(op, torch.bool, False, True, None, True, None) for op in ("amax", "amin")],
    *[(op, torch.float16, False, False, [2, 1], False, None) for op in ("amax", "amin")],
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op,dtype,requires_grad,transposed,dim,keepdim,out_dtype", OPCHECK_CASES, ids=str)
def test_opcheck(op, dtype, requires_grad, transposed, dim, keepdim, out_dtype, device):
    """Schema, fake kernel (shape, dtype and strides), autograd registration and AOT dispatch
    agree with the op."""
    gen, _ = fresh_generator(device)
    x = values((4, 5, 6), dtype, device, gen, "normal")
    if transposed:
        x = x.transpose(0, 2)
    x.requires_grad_(requires_grad)
    kwargs = {"dtype": out_dtype} if out_dtype is not None else {}
    torch.library.opcheck(getattr(torch.ops.treduce, op).default, (x, "auto", dim, keepdim), kwargs)


GRAD_DIMS = [(None, False), (None, True), ([], True), ([1], False), ([0, 2], True), ([-1], True), ([2, 0], False),
             ([0, 1, 2], False)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", OPS)
def test_gradcheck(op, device):
    """float64, distinct values (no ties: amax/amin are differentiable there), on a contiguous,
    a permuted and a 0-d input."""
    gen, seed = fresh_generator(device)
    distinct = torch.randperm(60, generator=gen, device=device).to(torch.float64).reshape(3, 4, 5) / 7
    for x, cases in [
        (distinct, GRAD_DIMS),
        (distinct.permute(2, 0, 1), GRAD_DIMS),
        (distinct[:, 1:2, :], [([1], False), ([1], True), ([0, 1], False)]),
        (distinct[0, 0, 0].clone(), [(None, False), ([0], True), ([-1], False)]),
    ]:
        x = x.detach().requires_grad_()
        for dim, keepdim in cases:
            f = lambda t: call(op, t, dim, keepdim)  # noqa: E731
            assert torch.autograd.gradcheck(f, (x,)), f"seed {seed}: {describe(op, x, dim, keepdim)}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", OPS)
def test_gradients_match_torch(op, device):
    """float32 and bfloat16 (the gradient takes the input's dtype), dtype= overrides, permuted
    input, and for amax/amin data full of ties (the gradient is split evenly among them)."""
    gen, seed = fresh_generator(device)
    for dtype in (torch.float32, torch.bfloat16):
        base = torch.randint(0, 4, (4, 5, 6), generator=gen, device=device).to(dtype)
        for x in (base, base.permute(2, 0, 1)):
            for dim, keepdim in GRAD_DIMS:
                for out_dtype in (None, torch.float64) if op in ("sum", "mean") else (None,):
                    what = f"seed {seed}: {describe(op, x, dim, keepdim, out_dtype)}"
                    ours_x = x.detach().requires_grad_()
                    theirs_x = x.detach().requires_grad_()
                    ours = call(op, ours_x, dim, keepdim, out_dtype)
                    theirs = call_torch(op, theirs_x, dim, keepdim, out_dtype)
                    g = torch.randn(theirs.shape, generator=gen, device=device).to(theirs.dtype)
                    (ours_grad,) = torch.autograd.grad(ours, ours_x, g)
                    (theirs_grad,) = torch.autograd.grad(theirs, theirs_x, g)
                    assert ours_grad.dtype == theirs_grad.dtype and ours_grad.shape == theirs_grad.shape, what
                    torch.testing.assert_close(ours_grad, theirs_grad, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("device", DEVICES)
def test_amax_amin_gradient_splits_ties_evenly(device):
    """By hand: each tied extremum gets the incoming gradient over the number of ties, as torch."""
    x = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [5.0, 0.0, -1.0]], dtype=torch.float64, device=device)
    cases = [
        # (op, dim, keepdim, incoming gradient, expected input gradient)
        ("amax", [1], False, [1.0, 3.0, 6.0], [[0, 0.5, 0.5], [1, 1, 1], [6, 0, 0]]),
        ("amax", [0], True, [[4.0, 4.0, 4.0]], [[0, 4, 4], [0, 0, 0], [4, 0, 0]]),
        ("amin", [-1], True, [[2.0], [9.0], [1.0]], [[2, 0, 0], [3, 3, 3], [0, 0, 1]]),
        ("amin", None, False, 10.0, [[0, 0, 0], [0, 0, 0], [0, 0, 10]]),
        ("amax", [0, 1], False, 8.0, [[0, 0, 0], [0, 0, 0], [8, 0, 0]]),
        ("amax", None, False, 8.0, [[0, 0, 0], [0, 0, 0], [8, 0, 0]]),
    ]
    ties = torch.tensor([[7.0, 1.0, 7.0, 7.0], [7.0, 7.0, 2.0, 3.0]], dtype=torch.float64, device=device)
    cases_ties = [("amax", None, False, 10.0, [[2, 0, 2, 2], [2, 2, 0, 0]]),
                  ("amax", [1, 0], True, [[5.0]], [[1, 0, 1, 1], [1, 1, 0, 0]])]
    for src, group in ((x, cases), (ties, cases_ties)):
        for op, dim, keepdim, grad_out, expected in group:
            expected = torch.tensor(expected, dtype=torch.float64, device=device)
            grad_out = torch.tensor(grad_out, dtype=torch.float64, device=device)
            for fn in (lambda t: call(op, t, dim, keepdim), lambda t: call_torch(op, t, dim, keepdim)):
                leaf = src.clone().requires_grad_()
                (grad,) = torch.autograd.grad(fn(leaf), leaf, grad_out)
                torch.testing.assert_close(grad, expected, msg=lambda m: f"{op}, dim={dim}, keepdim={keepdim}: {m}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", OPS)
def test_graph_recorded_only_when_needed(op, device):
    """A result has a grad_fn exactly when torch's would: an input that requires grad, with grad
    mode on (calls without one skip the autograd node)."""
    x = torch.randn(4, 5, device=device)
    w = x.clone().requires_grad_()
    fn = getattr(torch_reduce, op)
    plain = fn(x, 1)
    assert plain.grad_fn is None and not plain.requires_grad
    recorded = fn(w, 1)
    assert recorded.grad_fn is not None and recorded.requires_grad
    torch.testing.assert_close(recorded.detach(), plain)
    with torch.no_grad():
        assert not fn(w, 1).requires_grad
    with torch.inference_mode():
        assert not fn(w, 1).requires_grad


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device):
    """The Python API with dims inside one compiled graph: the same results as eager and torch."""

    def ours(x, y):
        return (
            torch_reduce.sum(x * 2, 1) + 1,
            torch_reduce.mean(x, (0, 2), keepdim=True),
            torch_reduce.amax(x, -1) - torch_reduce.amin(x, [-1]),
            torch_reduce.sum(y, [0, 2], dtype=torch.int32),
            torch_reduce.amax(y, dim=[1], keepdim=True),
            torch_reduce.sum(x.transpose(0, 2), None, keepdim=True),
        )

    def theirs(x, y):
        return (
            torch.sum(x * 2, 1) + 1,
            torch.mean(x, (0, 2), keepdim=True),
            torch.amax(x, -1) - torch.amin(x, [-1]),
            torch.sum(y, [0, 2], dtype=torch.int32),
            torch.amax(y, dim=[1], keepdim=True),
            torch.sum(x.transpose(0, 2), None, keepdim=True),
        )

    gen, seed = fresh_generator(device)
    x = torch.randn(5, 6, 7, generator=gen, device=device)
    y = values((5, 6, 7), torch.int16, device, gen, "exact")
    compiled = torch.compile(ours, fullgraph=True)
    for i, (c, e, t) in enumerate(zip(compiled(x, y), ours(x, y), theirs(x, y))):
        torch.testing.assert_close(c, e, msg=lambda m: f"seed {seed}, output {i}, compiled against eager: {m}")
        torch.testing.assert_close(c, t, msg=lambda m: f"seed {seed}, output {i}, compiled against torch: {m}")


@pytest.mark.parametrize("device", DEVICES)
def test_python_wrappers(device):
    """torch_reduce.sum/mean/amax/amin take dim as an int, a list, a tuple or None, keepdim, dtype=
    and variant= by keyword, as torch's functions do."""
    gen, seed = fresh_generator(device)
    xi = values((4, 5, 6), torch.int32, device, gen, "exact")
    xf = values((4, 5, 6), torch.float32, device, gen, "exact")
    cases = [
        (torch_reduce.sum(xi, 1), torch.sum(xi, 1)),
        (torch_reduce.sum(xi, (0, 2), keepdim=True), torch.sum(xi, (0, 2), keepdim=True)),
        (torch_reduce.sum(xi, [-1], True, dtype=torch.int16), torch.sum(xi, [-1], True, dtype=torch.int16)),
        (torch_reduce.sum(xi), torch.sum(xi)),
        (torch_reduce.sum(xf, dtype=torch.float64), torch.sum(xf, dtype=torch.float64)),
        (torch_reduce.sum(xi, keepdim=True), torch.sum(xi, (), keepdim=True)),
        (torch_reduce.sum(xi, variant=variant_names(device)[0]), torch.sum(xi)),
        (torch_reduce.sum(xf, dim=2, dtype=torch.float64), torch.sum(xf, dim=2, dtype=torch.float64)),
        (torch_reduce.mean(xf, -1), torch.mean(xf, -1)),
        (torch_reduce.mean(xi, (0, 1), dtype=torch.float64), torch.mean(xi, (0, 1), dtype=torch.float64)),
        (torch_reduce.mean(xf, keepdim=True), torch.mean(xf, None, keepdim=True)),
        (torch_reduce.amax(xi, dim=2, keepdim=True), torch.amax(xi, dim=2, keepdim=True)),
        (torch_reduce.amax(xf, (1, 0)), torch.amax(xf, (1, 0))),
        (torch_reduce.amin(xi), torch.amin(xi)),
        (torch_reduce.amin(xf, [], keepdim=True), torch.amin(xf, [], keepdim=True)),
        (torch_reduce.amin(xf, -3, variant="auto"), torch.amin(xf, -3)),
    ]
    for i, (got, want) in enumerate(cases):
        torch.testing.assert_close(got, want, msg=lambda m: f"seed {seed}, case {i}: {m}")



def test_every_float16_value_in_short_rows():
    """CPU short rows convert float16 through a table of all 65536 values (reduce_cpu.cpp's
    half_table): every value, subnormals, infinities and NaNs included, in rows of 2, through
    amax, amin, a float32 sum and mean, against torch."""
    h = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)
    rows = h.reshape(-1, 1).expand(65536, 2)
    for got, want in ((torch_reduce.amax(rows, 1), torch.amax(rows, 1)), (torch_reduce.amin(rows, 1), torch.amin(rows, 1)),
                      (torch_reduce.sum(rows, 1, dtype=torch.float32), rows.float().sum(1)),
                      (torch_reduce.mean(rows, 1, dtype=torch.float32), rows.float().mean(1))):
        assert got.dtype == want.dtype
        assert bool(((got == want) | (got.isnan() & want.isnan())).all())
        assert torch.equal(got.isnan(), want.isnan())


@pytest.mark.parametrize("device", DEVICES)
def test_prod_over_two_expanded_copies(device):
    """prod over an expanded dim reads each element once and raises it to the copies' count;
    for two copies that is x * x, torch's bits exactly (infinities, NaN, overflow included)."""
    gen, seed = fresh_generator("cpu")
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        x = torch.randn(4097, 1, generator=gen, dtype=torch.float64) * 2.0 ** torch.randint(-80, 80, (4097, 1), generator=gen)
        x[:4, 0] = torch.tensor([math.inf, -math.inf, math.nan, -0.0], dtype=torch.float64)
        x = x.to(dtype).to(device).expand(4097, 2)
        got, want = torch_reduce.prod(x, 1), torch.prod(x, 1)
        assert got.dtype == want.dtype and torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got[~want.isnan()], want[~want.isnan()]), f"{dtype}, seed {seed}"
