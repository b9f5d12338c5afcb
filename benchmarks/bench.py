"""The comparison benchmark: every treduce variant against torch.sum, CUB and the GPU's measured
read bandwidth, as a terminal table, JSON, Markdown and PNG plots.

    python benchmarks/bench.py                       # full sweep on the GPU (CPU if there is none)
    python benchmarks/bench.py --quick               # a few cases, to see that it works
    python benchmarks/bench.py --ladder              # the seed 000 optimisation table on this GPU
    python benchmarks/bench.py --dtypes float32,uint8,float32>float64 --sizes 2^20,2^28 --modes hot
    python benchmarks/bench.py --dims                # sum/mean/amax/amin over one dim (dims.py)
    python benchmarks/bench.py --dims --ops amax,amin --shapes 4096x4096:0,32x4096x4096

On CUDA the sweep and --dims also time "torch.compile": torch.compile of the same torch call,
compiled once per case with static shapes (--no-compile leaves it out; --ladder never has it);
"vs best peer" is the fastest of torch.sum, torch.compile and cub (where present) over a
candidate's time.

A dtype written "a>b" sums a with dtype=b. Every candidate's result is checked (exactly for
integer results, against the float64 sum with a stated bound for floats) before it is timed.
Modes (CUDA): hot replays a CUDA graph of many calls (time per call; inputs under ~30 MB stay in
L2), cold reads a buffer twice the size of L2 before each timed call, eager times a plain Python
loop (dispatch included). On the CPU: wall clock. Candidates are interleaved within each case;
medians over repetitions, p10-p90 as the spread. GB/s counts the bytes the op must move (input
read once, result written); where torch.sum moves more (it first widens integer, bool and
dtype= inputs to the result dtype), `torch_bytes` in the JSON says how much. "read_probe" is the
project's own kernel that only reads the input: the ceiling for that size.

--dims runs the dims suite instead (dims.py): torch.sum/mean/amax/amin(x, dim=d) against
torch_reduce's auto on 2-D and 3-D shapes, hot and cold on CUDA, wall clock on the CPU (at smaller
shapes), and the eager call overhead of a 2^10-element float32 sum through torch.sum,
torch_reduce.sum and torch.ops.treduce.sum. It writes results_dims.json and results_dims.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import sys
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import torch

import torch_reduce

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dims  # noqa: E402
import report  # noqa: E402
import timing  # noqa: E402

DTYPES = {str(d).removeprefix("torch."): d for d in torch_reduce.SUPPORTED_DTYPES}
INTEGRAL = {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64}
OPS = ("sum",)
# The reference lines a candidate is held against (vs_best): whichever of these ran.
PEERS = report.PEERS
MODES = {"cuda": ("hot", "cold", "eager"), "cpu": ("wall",)}
# Variants that take seconds past these sizes: one atomic per element on one address, and one
# block doing all the work.
MAX_N = {"atomic": 1 << 24, "single_block": 1 << 24}
# The seed 000 table's sizes (2^24 int32 in seed 003/004, 2^23 float32 in seed 001) and 2^28.
LADDER_CASES = [("int32", 1 << 24), ("float32", 1 << 23), ("int32", 1 << 28), ("float32", 1 << 28)]
LADDER_RUNGS = ["neighbored", "strided_index", "sequential", "first_add", "unroll4", "unroll8",
                "unroll_last_warp", "complete_unroll", "two_pass", "block_atomic", "warp_shuffle", "auto"]
# --data wide: the binades the floats span (exact sums stay exact; their speed is reported too).
WIDE = {torch.float16: (-20, 4), torch.bfloat16: (-100, 100), torch.float32: (-100, 100), torch.float64: (-120, 120)}
# The eager call-overhead measurement of --dims: a full float32 sum this small is all overhead.
EAGER_N = 1 << 10


@dataclass(frozen=True)
class Case:
    op: str
    dtype: torch.dtype
    out_dtype: torch.dtype | None  # dtype=, or None for torch.sum's own result dtype
    n: int
    offset: int = 0  # elements between a 16-byte boundary and the first element
    data: str = "normal"  # floats: "normal" N(0,1); "wide" N(0,1) times 2^k, k uniform over WIDE's range

    @property
    def label(self) -> str:
        name = str(self.dtype).removeprefix("torch.")
        name += f">{str(self.out_dtype).removeprefix('torch.')}" if self.out_dtype else ""
        return name + (" wide" if self.data == "wide" and self.dtype.is_floating_point else "")

    @property
    def result_dtype(self) -> torch.dtype:
        return torch_reduce.result_dtype(self.dtype, self.out_dtype)


@dataclass
class Row:
    op: str
    dtype: str  # Case.label
    n: int
    offset: int
    candidate: str  # a variant, "torch.sum", "torch.compile" or "read_probe"
    mode: str
    median_us: float
    p10_us: float
    p90_us: float
    gbps: float
    bytes: int
    torch_bytes: int
    speedup_vs_torch: float | None = None
    vs_cub: float | None = None  # cub's time over this one's
    vs_best: float | None = None  # the fastest peer's (PEERS) time over this one's
    pct_of_read: float | None = None  # GB/s as a share of read_probe's on the same bytes
    samples_us: list[float] | None = None


def parse_size(text: str) -> int:
    text = text.strip()
    if "^" in text:
        base, exp = text.split("^")
        return int(base) ** int(exp)
    return int(text)


def parse_dtype(text: str) -> tuple[torch.dtype, torch.dtype | None]:
    names = text.strip().split(">")
    if len(names) > 2 or any(n not in DTYPES for n in names):
        raise ValueError(f"unknown dtype {text!r}: use names from {', '.join(DTYPES)}, or a>b for dtype=b")
    return DTYPES[names[0]], DTYPES[names[1]] if len(names) == 2 else None


def bytes_moved(case: Case) -> int:
    """What the op must move: every input element read once, the result written once."""
    return case.n * case.dtype.itemsize + case.result_dtype.itemsize


def torch_bytes_moved(case: Case) -> int:
    """What torch.sum moves: when the result dtype differs from the input's it first writes a
    converted copy of the whole input and reads it back (s + 2 * result size bytes per element)."""
    if case.result_dtype == case.dtype:
        return bytes_moved(case)
    return case.n * (case.dtype.itemsize + 2 * case.result_dtype.itemsize) + case.result_dtype.itemsize


def make_input(case: Case, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Fresh random data for the case, starting `offset` elements past a 16-byte boundary; also
    returns the aligned buffer it lives in."""
    n = case.n + case.offset
    if case.dtype == torch.bool:
        base = torch.rand(n, device=device) < 0.5
    elif case.dtype in INTEGRAL:
        info = torch.iinfo(case.dtype)
        base = torch.randint(max(info.min, -1000), min(info.max, 1000) + 1, (n,), device=device, dtype=case.dtype)
    elif case.data == "wide":
        lo, hi = WIDE[case.dtype]
        base = (torch.randn(n, device=device) * torch.exp2(torch.randint(lo, hi + 1, (n,), device=device).float()))
        base = base.to(case.dtype)
    else:
        base = torch.randn(n, device=device).to(case.dtype)
    return base[case.offset :], base


def reference(x: torch.Tensor, out_dtype: torch.dtype) -> tuple[float, float]:
    """The exact sum (integer results: each element cast first, as torch does, then summed in
    int64 and wrapped) or the float64 sum of the cast elements, and the error a correct float
    result may have: (n-1) u sum|x| for any summation order plus one rounding to out_dtype, plus
    the float64 reference's own (n-1) u64 sum|x|."""
    cast = x.to(out_dtype) if x.dtype != out_dtype else x
    if out_dtype == torch.bool:
        return float(bool((cast != 0).any())), 0.0
    if out_dtype in INTEGRAL:
        total = torch.zeros((), dtype=torch.int64, device=x.device)
        for chunk in cast.reshape(-1).split(1 << 26):
            total += chunk.to(torch.int64).sum()
        return float(total.to(out_dtype).item()), 0.0
    x64 = cast.to(torch.float64)
    u_acc = 2.0**-53 if out_dtype == torch.float64 else 2.0**-24
    u_out = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}.get(out_dtype, u_acc)
    total = x64.sum().item()
    return total, (x.numel() - 1) * (u_acc + 2.0**-53) * x64.abs().sum().item() + u_out * abs(total)


def check(name: str, out: torch.Tensor, want: float, tol: float) -> None:
    got = float(out.item())
    if out.dtype.is_floating_point and got in (math.inf, -math.inf):
        # A sum past the result dtype's largest value is rightly +-inf (float16 at 2^30 elements
        # of N(0,1) data: |sum| ~ 2^15, over 65504 in about one draw in twenty).
        if (got > 0) == (want > 0) and abs(want) + tol >= torch.finfo(out.dtype).max:
            return
    if not abs(got - want) <= tol:  # also catches NaN
        raise AssertionError(f"{name}: got {got}, want {want} (tolerance {tol:.3g})")


def candidates(case: Case, x: torch.Tensor, base: torch.Tensor, variants: list[str],
               compile_peer: bool = False) -> dict:
    """name -> zero-argument callable, in the order they are timed. compile_peer: torch.compile of
    the same torch.sum call, right after it (main asks for it on CUDA only)."""
    kw = {"dtype": case.out_dtype} if case.out_dtype else {}
    fns = {"torch.sum": lambda: torch.sum(x, **kw)}
    if compile_peer:
        compiled = timing.compile_once(lambda t: torch.sum(t, **kw))
        fns["torch.compile"] = lambda: compiled(x)
    for v in variants:
        if case.n <= MAX_N.get(v, case.n):
            fns[v] = lambda v=v: torch.ops.treduce.sum(x, v, **kw)
    if x.is_cuda:
        aligned = base.view(torch.uint8)[: x.numel() * x.element_size() // 16 * 16]
        fns["read_probe"] = lambda: torch.ops.treduce._read_probe(aligned)
    return fns


def measure(case: Case, fns: dict, modes: list[str], reps: int, flush, keep_samples: bool) -> list[Row]:
    rows = []
    nbytes, tbytes = bytes_moved(case), torch_bytes_moved(case)
    for mode in modes:
        timed = {}
        for name, fn in fns.items():
            samples = timing.time_mode(mode, fn, reps, flush)
            med, p10, p90 = timing.quantiles(samples)
            row = Row(case.op, case.label, case.n, case.offset, name, mode, med, p10, p90,
                      nbytes / med / 1e3, nbytes, tbytes, samples_us=samples if keep_samples else None)
            timed[name] = row
            rows.append(row)
        medians = {name: row.median_us for name, row in timed.items()}
        for row in timed.values():
            for field, value in report.derived(row.median_us, row.bytes, medians).items():
                setattr(row, field, value)
    return rows


def eager_overhead(device: str, reps: int, keep_samples: bool = True) -> list[Row]:
    """The cost of one call from Python: a full float32 sum of EAGER_N elements through torch.sum,
    torch_reduce.sum and the op itself, each timed around a plain Python loop (events on CUDA,
    wall clock on the CPU), each result checked first."""
    case = Case("sum", torch.float32, None, EAGER_N)
    x, _ = make_input(case, device)
    want, tol = reference(x, torch.float32)
    fns = {"torch.sum": lambda: torch.sum(x), "torch_reduce.sum": lambda: torch_reduce.sum(x),
           "torch.ops.treduce.sum": lambda: torch.ops.treduce.sum(x)}
    rows = []
    for name, fn in fns.items():
        check(f"{name} on float32 n={EAGER_N}", fn(), want, tol)
        samples = timing.time_eager(fn, reps) if device == "cuda" else timing.time_eager_wall(fn, reps)
        med, p10, p90 = timing.quantiles(samples)
        nbytes = bytes_moved(case)
        rows.append(Row(case.op, case.label, case.n, 0, name, "eager", med, p10, p90, nbytes / med / 1e3, nbytes,
                        nbytes, samples_us=samples if keep_samples else None))
    for row in rows:
        row.speedup_vs_torch = rows[0].median_us / row.median_us
    return rows


def fits_in_memory(case: Case, device: str) -> bool:
    if device != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info()
    return torch_bytes_moved(case) + bytes_moved(case) + (256 << 20) < free


class Progress:
    def __init__(self, total: int):
        try:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="case", file=sys.stderr, dynamic_ncols=True)
        except ImportError:
            self.bar, self.done, self.total = None, 0, total

    def step(self, label: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(label)
            self.bar.update()
        else:
            self.done += 1
            print(f"[{self.done}/{self.total}] {label}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run(cases: list[Case], device: str, variants: list[str], modes: list[str], reps: int,
        keep_samples: bool = True, make_candidates=candidates) -> list[Row]:
    flush = timing.L2Flush(device) if "cold" in modes else None
    rows: list[Row] = []
    progress = Progress(len(cases))
    for case in cases:
        progress.step(f"{case.label} n={case.n}")
        if not fits_in_memory(case, device):
            print(f"skipped {case.label} n={case.n}: not enough free GPU memory", file=sys.stderr)
            continue
        x, base = make_input(case, device)
        want, tol = reference(x, case.result_dtype)
        fns = make_candidates(case, x, base, variants)
        for name, fn in fns.items():
            if name != "read_probe":
                check(f"{name} on {case.label} n={case.n}", fn(), want, tol)
        rows += measure(case, fns, modes, reps, flush, keep_samples)
        del x, base, fns
    progress.close()
    return rows


def environment(device: str) -> dict:
    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "device": device,
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, sm_count=props.multi_processor_count,
                   l2_bytes=getattr(props, "L2_cache_size", None), memory_bytes=props.total_memory)
        try:
            import subprocess

            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            env["driver"] = None
    else:
        env.update(cpu=platform.processor() or platform.machine(), threads=torch.get_num_threads())
    return env


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--ops", help=f"comma-separated from {', '.join(OPS)} (default sum); "
                        f"with --dims from {', '.join(dims.OPS)} (default all)")
    parser.add_argument("--sizes", help="comma-separated element counts, e.g. 2^10,2^20,1000003 "
                        "(default: 2^10 to 2^30 in steps of 4x on CUDA, to 2^24 on the CPU)")
    parser.add_argument("--dtypes", help="comma-separated; a>b sums a with dtype=b (default: every dtype, and "
                        "float32>float64); with --dims float dtypes only (default float32,bfloat16)")
    parser.add_argument("--variants", help="comma-separated (default: all of the device's)")
    parser.add_argument("--modes", help=f"comma-separated from {', '.join(MODES['cuda'])} (CUDA; with --dims "
                        f"{', '.join(dims.MODES['cuda'])}) or wall (CPU)")
    parser.add_argument("--data", choices=["normal", "wide"], default="normal",
                        help="float inputs: N(0,1), or N(0,1) scaled by powers of two over a wide range")
    parser.add_argument("--offset", type=int, default=0, help="start the input this many elements past a 16-byte boundary")
    parser.add_argument("--reps", type=int, help="timed repetitions per candidate and mode (default 20; 5 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a few small cases, hot mode only, 5 repetitions")
    parser.add_argument("--ladder", action="store_true", help="the seed 000 optimisation table (CUDA), instead of the sweep")
    parser.add_argument("--no-compile", action="store_true",
                        help="CUDA: leave out the torch.compile peer (it compiles once per case)")
    parser.add_argument("--dims", action="store_true", help="the dims suite (sum, mean, amax, amin over one dim, "
                        "against torch's own; dims.py) and the eager call overhead, instead of the sweep")
    parser.add_argument("--shapes", help="with --dims: comma-separated shapes such as 4096x4096 (reduced at dims -1, 0 "
                        "and every middle dim) or 4096x4096:0 (at dim 0 only); every op runs on every shape "
                        "(default: the suite's cases, smaller on the CPU)")
    parser.add_argument("--out", type=Path, default=Path("bench_out"),
                        help="folder for results.json, results.md and the plots (results_dims.* with --dims)")
    args = parser.parse_args(argv)

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA device: use --device cpu")
    if args.ladder and args.device != "cuda":
        parser.error("--ladder needs a CUDA device")
    if args.dims:
        return _dims_args(parser, args)
    if args.shapes:
        parser.error("--shapes needs --dims")
    args.ops = [o.strip() for o in (args.ops or "sum").split(",")]
    if unknown := sorted(set(args.ops) - set(OPS)):
        parser.error(f"unknown ops: {', '.join(unknown)}; available: {', '.join(OPS)}")
    available = [v.name for v in torch_reduce.variants(args.device)]
    args.variants = [v.strip() for v in args.variants.split(",")] if args.variants else available
    if unknown := sorted(set(args.variants) - set(available)):
        parser.error(f"unknown {args.device} variants: {', '.join(unknown)}; available: {', '.join(available)}")
    try:
        if args.sizes:
            args.sizes = [parse_size(s) for s in args.sizes.split(",")]
        elif args.quick:
            args.sizes = [1 << 10, 1 << 16, 1 << 20]
        else:
            top = 30 if args.device == "cuda" else 24
            args.sizes = [1 << e for e in range(10, top + 1, 2)]
        if args.dtypes:
            args.dtypes = [parse_dtype(d) for d in args.dtypes.split(",")]
        elif args.quick:
            args.dtypes = [parse_dtype(d) for d in ("float32", "int32", "uint8")]
        else:
            args.dtypes = [(d, None) for d in torch_reduce.SUPPORTED_DTYPES] + [(torch.float32, torch.float64)]
    except ValueError as e:
        parser.error(str(e))
    return _modes_and_reps(parser, args, MODES[args.device], "modes")


def _modes_and_reps(parser: argparse.ArgumentParser, args: argparse.Namespace, modes, what: str) -> argparse.Namespace:
    """--modes (checked against the device's `modes`; hot only with --quick on CUDA) and --reps."""
    if args.modes:
        args.modes = [m.strip() for m in args.modes.split(",")]
        if unknown := sorted(set(args.modes) - set(modes)):
            parser.error(f"{what} on {args.device}: {', '.join(modes)}; not {', '.join(unknown)}")
    else:
        args.modes = ["hot"] if args.quick and args.device == "cuda" else list(modes)
    args.reps = args.reps or (5 if args.quick else 20)
    return args


def _dims_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """parse_args for --dims: ops, shapes, float dtypes, hot/cold or wall."""
    if args.ladder:
        parser.error("--dims and --ladder are separate runs")
    for flag, given in (("--sizes", args.sizes), ("--variants", args.variants), ("--offset", args.offset)):
        if given:
            parser.error(f"{flag} does not apply to --dims (it times auto on --shapes)")
    args.variants = ["auto"]
    args.ops = [o.strip() for o in args.ops.split(",")] if args.ops else list(dims.OPS)
    if unknown := sorted(set(args.ops) - set(dims.OPS)):
        parser.error(f"unknown ops: {', '.join(unknown)}; available with --dims: {', '.join(dims.OPS)}")
    try:
        args.shapes = [dims.parse_shape(s) for s in args.shapes.split(",")] if args.shapes else None
        args.dtypes = ([parse_dtype(d) for d in args.dtypes.split(",")] if args.dtypes
                       else [(d, None) for d in dims.DTYPES])
    except ValueError as e:
        parser.error(str(e))
    if bad := [d for d, o in args.dtypes if o is not None or d not in dims.FLOATS]:
        parser.error(f"--dims takes float dtypes ({', '.join(str(d).removeprefix('torch.') for d in dims.FLOATS)}), "
                     f"not {', '.join(str(d).removeprefix('torch.') for d in bad)} or a>b")
    return _modes_and_reps(parser, args, dims.MODES[args.device], "modes with --dims")


def main_dims(args: argparse.Namespace) -> int:
    cases = dims.suite(args.device, args.ops, [d for d, _ in args.dtypes], args.shapes)
    progress = Progress(len(cases))
    make = partial(dims.candidates, compile_peer=args.device == "cuda" and not args.no_compile)
    rows = dims.run(cases, args.device, args.modes, args.reps, make_candidates=make, progress=progress.step)
    progress.close()
    eager = eager_overhead(args.device, args.reps)
    env = environment(args.device)
    report.write_dims(args.out, env, rows, eager, vars(args))
    print(report.dims_terminal_table(rows))
    print(f"\neager call overhead, full sum of {report.size_label(EAGER_N)} float32:\n{report.eager_table(eager)}")
    print(f"\n{env.get('gpu', env.get('cpu'))}, torch {env['torch']}, CUDA {env['cuda']}; results in {args.out}/")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dims:
        if args.device == "cpu":
            print("no CUDA device: the dims suite on the CPU" + ("" if args.shapes else ", at smaller shapes"),
                  file=sys.stderr)
        return main_dims(args)
    if args.device == "cpu":
        print("no CUDA device: benchmarking the CPU variants against torch.sum on the CPU", file=sys.stderr)
    if args.ladder:
        cases = [Case("sum", DTYPES[d], None, n) for d, n in LADDER_CASES]
        variants = [v for v in LADDER_RUNGS + ["cub"] if v in args.variants]
        modes = ["cold", "hot"]
    else:
        cases = [Case(op, d, o, n, args.offset, args.data) for op in args.ops for d, o in args.dtypes
                 for n in args.sizes]
        variants, modes = args.variants, args.modes
    # The seed table stays as it was: no torch.compile there.
    compile_peer = args.device == "cuda" and not args.ladder and not args.no_compile
    rows = run(cases, args.device, variants, modes, args.reps,
               make_candidates=partial(candidates, compile_peer=compile_peer))
    env = environment(args.device)
    kind = "ladder" if args.ladder else "sweep"
    report.write_all(args.out, kind, env, rows, vars(args))
    print(report.ladder_table(rows) if args.ladder else report.terminal_table(rows))
    print(f"\n{env.get('gpu', env.get('cpu'))}, torch {env['torch']}, CUDA {env['cuda']}; results in {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
