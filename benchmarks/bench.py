"""Every treduce.sum variant against torch.sum on one device: time, GB/s and speedup.

    python benchmarks/bench.py                  # CUDA if present, else CPU
    python benchmarks/bench.py --quick          # a few small cases
    python benchmarks/bench.py --device cpu --sizes 2^16,2^24 --dtypes float32,uint8

Each candidate's result is checked against an exact or float64 reference before it is timed.
CUDA timings: "hot" replays a CUDA graph of many calls (time per call, data in L2 when it fits),
"cold" reads a buffer twice the size of L2 before each timed call (CUDA events around the call).
CPU timings: wall clock per call. Medians over repetitions; p10-p90 shown as the spread.
Bytes counted: the input read once plus the result written; torch.sum moves more for integer,
bool and dtype= sums (it widens the input first), so its GB/s there is the same bytes over its time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

import torch_reduce

INTEGRAL = {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64}
DTYPE_NAMES = {str(d).removeprefix("torch."): d for d in torch_reduce.SUPPORTED_DTYPES}
# Variants that take seconds past these sizes: one atomic per element on one address, and one
# block doing all the work.
MAX_N = {"atomic": 1 << 24, "single_block": 1 << 24}


@dataclass
class Row:
    device: str
    dtype: str
    n: int
    candidate: str  # a variant name, or "torch.sum"
    mode: str  # hot, cold (CUDA) or wall (CPU)
    median_us: float
    p10_us: float
    p90_us: float
    gbps: float
    speedup: float | None  # torch.sum's median over this one's, same mode


def parse_size(text: str) -> int:
    text = text.strip()
    if "^" in text:
        base, exp = text.split("^")
        return int(base) ** int(exp)
    return int(text)


def make_input(n: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.rand(n, device=device) < 0.5
    if dtype in INTEGRAL:
        info = torch.iinfo(dtype)
        return torch.randint(max(info.min, -1000), min(info.max, 1000) + 1, (n,), device=device, dtype=dtype)
    return torch.randn(n, device=device, dtype=torch.float32).to(dtype)


def reference(x: torch.Tensor) -> tuple[float, float]:
    """The exact (integers) or float64 sum, and the error a correct result may have: the bound
    (n-1) u sum|x| that holds for any summation order, plus rounding to x's dtype."""
    if x.dtype in INTEGRAL:
        total = sum(chunk.to(torch.int64).sum().item() for chunk in x.reshape(-1).split(1 << 26))
        return float(total), 0.0
    x64 = x.to(torch.float64)
    u_acc = 2.0**-53 if x.dtype == torch.float64 else 2.0**-24
    u_out = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}.get(x.dtype, u_acc)
    total = x64.sum().item()
    return total, (x.numel() - 1) * u_acc * x64.abs().sum().item() + u_out * abs(total)


def check(name: str, out: torch.Tensor, want: float, tol: float) -> None:
    got = out.item()
    if not abs(got - want) <= tol:  # also catches NaN
        raise AssertionError(f"{name}: got {got}, want {want} (tolerance {tol})")


def quantiles(samples: list[float]) -> tuple[float, float, float]:
    s = sorted(samples)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))]  # noqa: E731
    return statistics.median(s), pick(0.1), pick(0.9)


def time_hot(fn, reps: int) -> list[float]:
    """Microseconds per call, from replays of one CUDA graph holding enough calls to run ~1 ms."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    calls = max(1, min(200, int(1000.0 / max(start.elapsed_time(end) * 1000.0, 1e-3))))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    samples = []
    for _ in range(reps):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0 / calls)
    return samples


class L2Flush:
    """Reads a buffer twice the size of L2, leaving no line of the next input cached and none
    dirty (a write-based flush would leave lines to be written back during the timed call)."""

    def __init__(self, device: str):
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
        self.buffer = torch.ones(2 * l2 // 4, device=device)

    def __call__(self) -> None:
        self.buffer.amax()


def time_cold(fn, reps: int, flush: L2Flush) -> list[float]:
    fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        flush()
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0)
    return samples


def time_wall(fn, reps: int) -> list[float]:
    fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return samples


def environment(device: str) -> dict:
    env = {
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "device": device,
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, sm_count=props.multi_processor_count,
                   l2_bytes=getattr(props, "L2_cache_size", None),
                   driver=torch.cuda.driver_version() if hasattr(torch.cuda, "driver_version") else None)
    else:
        env.update(cpu=platform.processor() or platform.machine(), threads=torch.get_num_threads())
    return env


def run(device: str, sizes: list[int], dtypes: list[torch.dtype], variants: list[str], reps: int) -> list[Row]:
    modes = ["hot", "cold"] if device == "cuda" else ["wall"]
    flush = L2Flush(device) if device == "cuda" else None
    rows: list[Row] = []
    for dtype in dtypes:
        for n in sizes:
            x = make_input(n, dtype, device)
            want, tol = reference(x)
            candidates = {"torch.sum": lambda: torch.sum(x)}
            for v in variants:
                if n > MAX_N.get(v, n):
                    continue
                candidates[v] = lambda v=v: torch.ops.treduce.sum(x, v)
            for name, fn in candidates.items():
                check(name, fn(), want, tol)
            nbytes = x.numel() * x.element_size() + torch_reduce.result_dtype(dtype).itemsize
            for mode in modes:
                medians = {}
                for name, fn in candidates.items():  # interleaved: every candidate in each mode
                    if mode == "hot":
                        samples = time_hot(fn, reps)
                    elif mode == "cold":
                        samples = time_cold(fn, reps, flush)
                    else:
                        samples = time_wall(fn, reps)
                    med, p10, p90 = quantiles(samples)
                    medians[name] = med
                    rows.append(Row(device, str(dtype).removeprefix("torch."), n, name, mode, med, p10, p90,
                                    nbytes / med / 1e3, None))
                for row in rows[-len(candidates):]:
                    row.speedup = medians["torch.sum"] / row.median_us
    return rows


def format_table(rows: list[Row]) -> str:
    lines = [f"{'dtype':9} {'n':>11} {'candidate':17} {'mode':5} {'median us':>10} {'p10-p90 us':>17} "
             f"{'GB/s':>8} {'vs torch':>8}"]
    for r in rows:
        lines.append(f"{r.dtype:9} {r.n:>11} {r.candidate:17} {r.mode:5} {r.median_us:>10.2f} "
                     f"{f'{r.p10_us:.2f}-{r.p90_us:.2f}':>17} {r.gbps:>8.1f} {r.speedup:>7.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sizes", default=None, help="comma-separated, e.g. 2^10,2^20,1000003")
    parser.add_argument("--dtypes", default="float32,int32,uint8", help=f"comma-separated from {', '.join(DTYPE_NAMES)}")
    parser.add_argument("--variants", default=None, help="comma-separated (default: all of the device's)")
    parser.add_argument("--reps", type=int, default=None, help="timed repetitions per candidate")
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    parser.add_argument("--out", type=Path, default=None, help="write results.json here (a folder)")
    args = parser.parse_args(argv)

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA device: use --device cpu")
    if args.sizes:
        sizes = [parse_size(s) for s in args.sizes.split(",")]
    elif args.quick:
        sizes = [1 << 10, 1 << 16]
    else:
        sizes = [1 << 10, 1 << 16, 1 << 20, 1 << 24] + ([1 << 28] if args.device == "cuda" else [])
    dtypes = [DTYPE_NAMES[d.strip()] for d in args.dtypes.split(",")]
    available = [v.name for v in torch_reduce.variants(args.device)]
    variants = [v.strip() for v in args.variants.split(",")] if args.variants else available
    unknown = sorted(set(variants) - set(available))
    if unknown:
        parser.error(f"unknown {args.device} variants: {', '.join(unknown)}; available: {', '.join(available)}")
    reps = args.reps or (5 if args.quick else 30)

    if args.device == "cpu":
        print("no CUDA device: benchmarking the CPU variants against torch.sum on the CPU", file=sys.stderr)
    rows = run(args.device, sizes, dtypes, variants, reps)
    env = environment(args.device)
    print(format_table(rows))
    print(json.dumps(env))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps({"environment": env, "rows": [asdict(r) for r in rows]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
