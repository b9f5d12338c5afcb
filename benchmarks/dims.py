"""The dims suite: sum, mean, amax and amin over one dim, torch_reduce's "auto" against torch's
own function (and, on CUDA, torch.compile of the same call), on shapes where the reduced dim is
the inner one, the outer one or (3-D) the middle one. `python benchmarks/bench.py --dims` runs it;
this file holds its cases, checks and timing.

Every result is checked before it is timed, torch's included: amax and amin must equal the
extremum of the elements exactly; sum and mean must be within a stated bound of the float64
result (see `reference`). GB/s counts the bytes the op must move: the input read once and the
result written once.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch

import timing
import torch_reduce

OPS = ("sum", "mean", "amax", "amin")
DTYPES = (torch.float32, torch.bfloat16)
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
MODES = {"cuda": ("hot", "cold"), "cpu": ("wall",)}
# sum runs on every shape at every dim of `default_dims`; mean, amax and amin on one inner and
# one outer reduction.
SHAPES = [(65536, 128), (128, 65536), (4096, 4096), (32, 4096, 4096)]
OTHER_OPS_CASES = [((65536, 128), -1), ((4096, 4096), 0)]
# The CPU runs the same cases 16 to 256 times smaller, so a plain run takes seconds.
CPU_SHAPES = {(65536, 128): (4096, 128), (128, 65536): (128, 4096), (4096, 4096): (1024, 1024),
              (32, 4096, 4096): (32, 256, 256)}
# The unit roundoff of each float dtype; half and bfloat16 are accumulated in float, as torch does.
UNIT_ROUNDOFF = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8, torch.float32: 2.0**-24, torch.float64: 2.0**-53}


@dataclass(frozen=True)
class DimCase:
    op: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    dim: int  # as passed to the op: may be negative

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    @property
    def out_shape(self) -> tuple[int, ...]:
        out = list(self.shape)
        del out[self.dim]
        return tuple(out)

    @property
    def label(self) -> str:
        return f"{self.op} {self.dtype_name} {shape_label(self.shape)} dim={self.dim}"


@dataclass
class DimRow:
    op: str
    dtype: str  # DimCase.dtype_name
    shape: list[int]
    dim: int
    out_shape: list[int]
    candidate: str  # "torch.<op>", "torch.compile" or "auto"
    mode: str
    median_us: float
    p10_us: float
    p90_us: float
    gbps: float
    bytes: int
    speedup_vs_torch: float | None = None  # torch's time over this one's
    vs_best: float | None = None  # the faster of torch's and torch.compile's time over this one's
    samples_us: list[float] | None = None


def shape_label(shape) -> str:
    return "x".join(str(s) for s in shape)


def default_dims(ndim: int) -> list[int]:
    """The last dim, the first, and every dim between them."""
    return [-1] + list(range(ndim - 1))


def parse_shape(text: str) -> tuple[tuple[int, ...], int | None]:
    """'4096x4096' -> ((4096, 4096), None): every dim of `default_dims`; '4096x4096:0' -> one dim."""
    shape_text, _, dim_text = text.strip().partition(":")
    try:
        shape = tuple(int(s) for s in shape_text.split("x"))
        dim = int(dim_text) if dim_text else None
    except ValueError:
        raise ValueError(f"bad shape {text!r}: write sizes joined by x, and :dim to pick one dim, e.g. 4096x4096:0")
    if any(s < 1 for s in shape):
        raise ValueError(f"bad shape {text!r}: sizes must be positive")
    if dim is not None and not -len(shape) <= dim < len(shape):
        raise ValueError(f"bad shape {text!r}: dim {dim} is out of range for {len(shape)} dims")
    return shape, dim


def suite(device: str, ops=OPS, dtypes=DTYPES, shapes=None) -> list[DimCase]:
    """The cases to run. `shapes`: [(shape, dim or None)] from `parse_shape`, each op on each; or
    None for the suite's own cases (scaled down on the CPU)."""
    if shapes is None:
        plan = [("sum", s, d) for s in SHAPES for d in default_dims(len(s))]
        plan += [(op, s, d) for op in OPS if op != "sum" for s, d in OTHER_OPS_CASES]
        if device == "cpu":
            plan = [(op, CPU_SHAPES[s], d) for op, s, d in plan]
        plan = [p for p in plan if p[0] in ops]
    else:
        plan = [(op, s, d) for op in ops for s, dim in shapes
                for d in ([dim] if dim is not None else default_dims(len(s)))]
    return [DimCase(op, dtype, shape, dim) for op, shape, dim in plan for dtype in dtypes]


def bytes_moved(case: DimCase) -> int:
    """Every input element read once and every result element written once (all four ops give
    a float input's own dtype)."""
    return (math.prod(case.shape) + math.prod(case.out_shape)) * case.dtype.itemsize


def make_input(case: DimCase, device: str) -> torch.Tensor:
    return torch.randn(case.shape, device=device).to(case.dtype)


def reference(x: torch.Tensor, op: str, dim: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """What a correct result is, and how far from it it may be.

    amax, amin: the extremum of each reduced row, exactly (tolerance None). sum, mean: the
    float64 result, and per output element the bound k u sum|x| (k reduced elements, u the
    accumulator's unit roundoff: float for half and bfloat16, as torch; covers the k-1
    additions in any order and mean's division; for mean divided by k) plus two roundings to the
    result dtype (torch's CPU mean rounds the sum before it divides).
    """
    x64 = x.to(torch.float64, copy=True)  # a copy even of float64 input: it is overwritten below
    if op in ("amax", "amin"):
        return getattr(torch, op)(x64, dim=dim).to(x.dtype), None
    k = x.shape[dim]
    want = getattr(torch, op)(x64, dim=dim)
    u_acc = 2.0**-53 if x.dtype == torch.float64 else 2.0**-24
    magnitude = x64.abs_().sum(dim=dim)  # x64 is not needed after this
    if op == "mean":
        magnitude /= k
    return want, k * u_acc * magnitude + 2 * UNIT_ROUNDOFF[x.dtype] * want.abs()


def check(name: str, got: torch.Tensor, want: torch.Tensor, tol: torch.Tensor | None, dtype: torch.dtype) -> None:
    if got.shape != want.shape or got.dtype != dtype:
        raise AssertionError(f"{name}: got shape {tuple(got.shape)} {got.dtype}, want {tuple(want.shape)} {dtype}")
    if tol is None:
        bad = got != want
    else:
        bad = ~((got.to(torch.float64) - want).abs() <= tol)  # also catches NaN
    if bool(bad.any()):
        i = int(bad.reshape(-1).nonzero()[0])
        bound = "exact" if tol is None else f"tolerance {tol.reshape(-1)[i].item():.3g}"
        raise AssertionError(f"{name}: {int(bad.sum())} of {got.numel()} elements wrong; element {i}: "
                             f"got {got.reshape(-1)[i].item()}, want {want.reshape(-1)[i].item()} ({bound})")


def candidates(case: DimCase, x: torch.Tensor, compile_peer: bool = False) -> dict:
    """name -> zero-argument callable, in the order they are timed; torch's first, then with
    compile_peer torch.compile of the same call (bench.py asks for it on CUDA only)."""
    theirs, ours, dim = getattr(torch, case.op), getattr(torch_reduce, case.op), case.dim
    fns = {f"torch.{case.op}": lambda: theirs(x, dim=dim)}
    if compile_peer:
        compiled = timing.compile_once(lambda t: theirs(t, dim=dim))
        fns["torch.compile"] = lambda: compiled(x)
    fns["auto"] = lambda: ours(x, dim=dim)
    return fns


def measure(case: DimCase, fns: dict, modes: list[str], reps: int, flush, keep_samples: bool) -> list[DimRow]:
    rows = []
    nbytes = bytes_moved(case)
    for mode in modes:
        timed = {}
        for name, fn in fns.items():
            samples = timing.time_mode(mode, fn, reps, flush)
            med, p10, p90 = timing.quantiles(samples)
            timed[name] = DimRow(case.op, case.dtype_name, list(case.shape), case.dim, list(case.out_shape), name,
                                 mode, med, p10, p90, nbytes / med / 1e3, nbytes,
                                 samples_us=samples if keep_samples else None)
        best = min(timed[p].median_us for p in (f"torch.{case.op}", "torch.compile") if p in timed)
        for row in timed.values():
            row.speedup_vs_torch = timed[f"torch.{case.op}"].median_us / row.median_us
            row.vs_best = best / row.median_us
        rows += timed.values()
    return rows


def fits_in_memory(case: DimCase, device: str) -> bool:
    """The input, its float64 copy for the reference, and a few results."""
    if device != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info()
    n, out = math.prod(case.shape), math.prod(case.out_shape)
    return n * (case.dtype.itemsize + 8) + 8 * out * 8 + (256 << 20) < free


def run(cases: list[DimCase], device: str, modes: list[str], reps: int, keep_samples: bool = True,
        make_candidates=candidates, progress=None) -> list[DimRow]:
    """Check, then time, every case; `progress(label)` is called as each case starts."""
    flush = timing.L2Flush(device) if "cold" in modes else None
    rows: list[DimRow] = []
    for case in cases:
        if progress:
            progress(case.label)
        if not fits_in_memory(case, device):
            print(f"skipped {case.label}: not enough free GPU memory", file=sys.stderr)
            continue
        x = make_input(case, device)
        want, tol = reference(x, case.op, case.dim)
        fns = make_candidates(case, x)
        for name, fn in fns.items():
            check(f"{name} on {case.label}", fn(), want, tol, case.dtype)
        del want, tol
        rows += measure(case, fns, modes, reps, flush, keep_samples)
        del x, fns
    return rows
