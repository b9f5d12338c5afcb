"""Shared by the tests: devices, fresh random inputs, references, poisoning and checked calls."""

from __future__ import annotations

import os

import pytest
import torch

import torch_reduce

HAS_CUDA = torch.cuda.is_available()
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
cuda_only = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
# CUDA tests whose inputs take gigabytes: under pytest-xdist's --dist loadgroup (the README's
# command) they all run on one worker, one at a time. Beside 14 other workers on an 80 GB
# H100 they ran out of memory together (708 failures, two workers holding 22 GB each).
gpu_memory = pytest.mark.xdist_group("gpu_memory")

INTEGRAL = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
DTYPES = INTEGRAL + FLOATING
# (shape, dim) cases of whole aligned rows of 7 to 64 16-byte vectors (float32 and 2-byte floats):
# a team a row, every load of a lane at once (CUDA's whole_rows_kernel), for every operator's
# case list. Rows of 56 and 96 are not a power of two of vectors (float32 14 and 24, 2-byte 7 and
# 12): the instance's last slots load nothing.
WHOLE_ROWS = [((1031, 56), -1), ((1031, 96), -1), ((515, 256), -1)]
# Rows enough to fill the device, each of at least two vectors a thread of a 512-thread block: a
# block a row (two_vector_rows_kernel for float32 rows of 4096 and 2-byte rows of 8192; then
# row_segments_kernel with one segment, whole vectors or not), for every operator's case list.
BLOCK_ROWS = [((600, 4096), -1), ((600, 8192), -1), ((600, 8201), -1)]


def variant_names(device: str) -> list[str]:
    return [v.name for v in torch_reduce.variants(device)]


def device_params():
    """(device, variant) pairs for parametrize: every variant of every device; the CUDA ones are
    collected from the build's table and skipped where there is no GPU."""
    params = []
    for device in ("cpu", "cuda"):
        for name in variant_names(device):
            marks = [cuda_only] if device == "cuda" else []
            params.append(pytest.param(device, name, marks=marks, id=f"{device}-{name}"))
    return params


def fresh_generator(device: str) -> tuple[torch.Generator, int]:
    """A generator with a new random seed for each check; the seed goes into failure messages, and
    TREDUCE_TEST_SEED=<seed> replays it."""
    seed = int(os.environ.get("TREDUCE_TEST_SEED") or int.from_bytes(os.urandom(6), "little"))
    return torch.Generator(device=device).manual_seed(seed), seed


def exact_input(n: int, dtype: torch.dtype, device: str, gen: torch.Generator) -> torch.Tensor:
    """Random data whose sum every variant must reproduce exactly: integers over their whole
    range, floats as small integers (their partial sums stay exact in the accumulator)."""
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=gen, device=device).bool()
    if dtype in INTEGRAL:
        info = torch.iinfo(dtype)
        if dtype == torch.int64:  # randint's high bound is exclusive and an int64
            return torch.randint(info.min, info.max, (n,), generator=gen, device=device, dtype=dtype)
        return torch.randint(info.min, info.max + 1, (n,), generator=gen, device=device, dtype=dtype)
    # +-2 keeps half and bfloat16 results of 2^24 elements inside their range.
    bound = 2 if dtype in (torch.float16, torch.bfloat16) else 8
    return torch.randint(-bound, bound + 1, (n,), generator=gen, device=device).to(dtype)


def exact_reference(x: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """torch.sum's answer for exact-valued data, computed in int64 or float64 on the CPU."""
    x = x.cpu()
    if out_dtype == torch.bool:
        return (x != 0).any()
    if out_dtype in INTEGRAL:
        total = torch.zeros((), dtype=torch.int64)
        for chunk in x.reshape(-1).split(1 << 27):  # bounds the widened copy torch makes
            total += chunk.to(torch.int64).sum()
        return total.to(out_dtype)
    return x.to(torch.float64).sum().to(out_dtype)


UNIT_ROUNDOFF = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8, torch.float32: 2.0**-24,
                 torch.float64: 2.0**-53}


def float_error_bound(x64: torch.Tensor, out_dtype: torch.dtype) -> float:
    """A bound no correct summation order can exceed: (n-1) u_acc sum|x_i| for the additions
    (Higham, Accuracy and Stability of Numerical Algorithms, 4.2), plus one rounding of the
    result to out_dtype, plus the float64 reference sum's own error (as large as the op's for a
    float64 result). Accumulation is in float, or double for float64 results."""
    n = x64.numel()
    u_acc = UNIT_ROUNDOFF[torch.float64 if out_dtype == torch.float64 else torch.float32]
    u_ref = UNIT_ROUNDOFF[torch.float64]
    total = x64.sum().abs().item()
    return max(n - 1, 0) * (u_acc + u_ref) * x64.abs().sum().item() + UNIT_ROUNDOFF[out_dtype] * total


def poison_cuda_allocator(device: str) -> None:
    """Fill freed caching-allocator memory with 0xFF bytes (NaN for floats, -1 for integers), so a
    result the op never writes shows up as wrong instead of as a leftover zero."""
    if device != "cuda":
        return
    for nbytes in (1 << 20, 64 << 20):  # one block from the small pool, one from the large
        torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(0xFF)


def storage_bytes(x: torch.Tensor) -> torch.Tensor:
    """A copy of every byte of x's storage, to check afterwards that nothing was written to it."""
    return torch.tensor([], dtype=torch.uint8, device=x.device).set_(x.untyped_storage()).clone()


def checked_sum(x: torch.Tensor, variant: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """torch.ops.treduce.sum with the checks every call gets: poisoned scratch, input untouched,
    result a 0-d tensor of torch.sum's dtype on x's device."""
    before = storage_bytes(x)
    poison_cuda_allocator(x.device.type)
    out = torch.ops.treduce.sum(x, variant, dtype=dtype)
    assert torch.equal(storage_bytes(x), before), f"{variant} wrote to its input"
    assert out.shape == () and out.device == x.device
    assert out.dtype == torch_reduce.result_dtype(x.dtype, dtype)
    return out


def same_value(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal dtype and value, NaN equal to NaN."""
    a, b = a.cpu(), b.cpu()
    return a.dtype == b.dtype and bool(torch.equal(a, b) or (a.isnan() & b.isnan()).all())
