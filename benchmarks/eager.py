"""The eager suite: what a call costs from a plain Python loop with no CUDA graph around it,
torch's function against torch_reduce's wrapper and the op itself (torch.ops.treduce), in one run.

    python benchmarks/eager.py [--reps N] [--out DIR] [--quick]

Cases: full sums of float32, bfloat16 and uint8 from 2^10 to 2^26 elements; the dims suite's
cases (benchmarks/dims.py) in float32 and bfloat16; and each other reduction the wrappers' eager
entry takes, on a small input where the host sets the pace. For each candidate:
  eager   a loop of CALLS calls between two CUDA events, us per call: what user code waits for;
  host    the same loop's wall clock up to the last call's return, before any wait: the CPU's
          cost of a call (the queue of launches is far from full after CALLS calls);
  kernel  the same call replayed in a CUDA graph (hot): the device's own time.
Candidates are interleaved sample by sample; medians of --reps samples. Every result is checked
against torch's first. Writes eager.json and eager.md to --out (default benchmarks/results/<gpu>).
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

import torch

import dims
import report
import timing
import torch_reduce

CALLS = 200
T = torch.ops.treduce

# The other reductions, host-bound: (op, input dtype, dim, torch's call, the wrapper's, the op's).
OTHER_OPS = [
    ("sum(dtype=float32)", torch.bfloat16, None, lambda x: torch.sum(x, dtype=torch.float32),
     lambda x: torch_reduce.sum(x, dtype=torch.float32), lambda x: T.sum(x, dtype=torch.float32)),
    ("mean", torch.float32, None, lambda x: torch.mean(x), lambda x: torch_reduce.mean(x), lambda x: T.mean(x)),
    ("amax", torch.float32, -1, lambda x: torch.amax(x, -1), lambda x: torch_reduce.amax(x, -1),
     lambda x: T.amax(x, "auto", [-1])),
    ("var", torch.float32, None, lambda x: torch.var(x), lambda x: torch_reduce.var(x), lambda x: T.var(x)),
    ("var(correction=0)", torch.float32, -1, lambda x: torch.var(x, -1, correction=0),
     lambda x: torch_reduce.var(x, -1, correction=0), lambda x: T.var(x, [-1], correction=0)),
    ("std_mean", torch.float32, -1, lambda x: torch.std_mean(x, -1), lambda x: torch_reduce.std_mean(x, -1),
     lambda x: T.std_mean(x, [-1])),
    ("nansum", torch.float32, None, lambda x: torch.nansum(x), lambda x: torch_reduce.nansum(x),
     lambda x: T.nansum(x)),
    ("logsumexp", torch.float32, -1, lambda x: torch.logsumexp(x, -1), lambda x: torch_reduce.logsumexp(x, -1),
     lambda x: T.logsumexp(x, [-1])),
    ("prod", torch.float32, -1, lambda x: torch.prod(x, -1), lambda x: torch_reduce.prod(x, -1),
     lambda x: T.prod(x, -1)),
    ("vector_norm", torch.float32, None, lambda x: torch.linalg.vector_norm(x),
     lambda x: torch_reduce.vector_norm(x), lambda x: T.vector_norm(x)),
    ("argmax", torch.float32, -1, lambda x: torch.argmax(x, -1), lambda x: torch_reduce.argmax(x, -1),
     lambda x: T.argmax(x, -1)),
    ("any", torch.bool, -1, lambda x: torch.any(x, -1), lambda x: torch_reduce.any(x, -1),
     lambda x: T.any(x, [-1])),
    ("count_nonzero", torch.float32, None, lambda x: torch.count_nonzero(x),
     lambda x: torch_reduce.count_nonzero(x), lambda x: T.count_nonzero(x)),
]
OTHER_SHAPE = (256, 256)


def _over_dim(op: str, dim: int) -> dict:
    """torch's function, the wrapper and the op (torch.ops) over one dim."""
    theirs, ours, through_ops = getattr(torch, op), getattr(torch_reduce, op), getattr(T, op)
    return {f"torch.{op}": lambda x: theirs(x, dim), f"torch_reduce.{op}": lambda x: ours(x, dim),
            f"torch.ops.treduce.{op}": lambda x: through_ops(x, "auto", [dim])}


def cases(quick: bool):
    """(op, shape, dtype, dim, {candidate: call}) with torch's call first, then the wrapper's, then
    the op's: full sums, then the dims suite's cases (benchmarks/dims.py: sum at every dim of
    each shape, mean, amax and amin on one inner and one outer reduction), then OTHER_OPS."""
    sizes = (10, 16, 20) if quick else (10, 12, 14, 15, 16, 17, 18, 20, 22, 24, 26)
    for dtype in (torch.float32, torch.bfloat16, torch.uint8):
        for e in sizes:
            yield "sum", (1 << e,), dtype, None, {"torch.sum": lambda x: torch.sum(x),
                                                 "torch_reduce.sum": lambda x: torch_reduce.sum(x),
                                                 "torch.ops.treduce.sum": lambda x: T.sum(x)}
    if quick:
        plan = [("sum", (256, 256), 0), ("sum", (256, 256), -1)]
    else:
        plan = [("sum", shape, d) for shape in dims.SHAPES for d in dims.default_dims(len(shape))]
        plan += [(op, shape, d) for op in dims.OPS[1:] for shape, d in dims.OTHER_OPS_CASES]
    for dtype in dims.DTYPES:
        for op, shape, d in plan:
            yield op, shape, dtype, d, _over_dim(op, d)
    for op, dtype, dim, theirs, ours, through_ops in OTHER_OPS[:2] if quick else OTHER_OPS:
        yield op, OTHER_SHAPE, dtype, dim, {f"torch.{op}": theirs, f"torch_reduce.{op}": ours,
                                            f"torch.ops.treduce.{op}": through_ops}


def check(name, got, want, dtype):
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            check(name, g, w, dtype)
        return
    if dtype in (torch.uint8, torch.bool) or not want.is_floating_point():
        ok = torch.equal(got, want)
    else:  # both reduce in float32 or wider; bfloat16 results round to 8 bits
        tol = 2e-2 if dtype == torch.bfloat16 else 1e-4
        ok = torch.allclose(got.double(), want.double(), rtol=tol, atol=tol * want.double().abs().max().item())
    if not ok:
        raise SystemExit(f"{name}: result differs from torch's")


def loop_sample(fn):
    """(eager us, host us) per call from one loop of CALLS calls."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    for _ in range(CALLS):
        fn()
    host = (time.perf_counter() - t0) * 1e6 / CALLS
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / CALLS, host


def make(shape, dtype):
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, device="cuda", dtype=dtype)
    if dtype == torch.bool:
        return torch.rand(shape, device="cuda") < 0.001
    return torch.randn(shape, device="cuda").to(dtype)


def run(reps: int, quick: bool):
    rows = []
    for op, shape, dtype, dim, calls in cases(quick):
        x = make(shape, dtype)
        fns = {name: (lambda f=f: f(x)) for name, f in calls.items()}
        names = list(fns)
        want = fns[names[0]]()
        label = "x".join(map(str, shape))
        for name, fn in fns.items():
            check(f"{name} {label} {dtype} dim={dim}", fn(), want, dtype)
            fn()
        samples = {name: ([], []) for name in fns}
        for _ in range(reps):
            for name, fn in fns.items():
                e, h = loop_sample(fn)
                samples[name][0].append(e)
                samples[name][1].append(h)
        kernel = {name: statistics.median(timing.time_hot(fn, max(5, reps // 2))) for name, fn in fns.items()}
        for name in fns:
            rows.append({"op": op, "shape": list(shape), "dtype": str(dtype).removeprefix("torch."), "dim": dim,
                         "candidate": name, "eager_us": statistics.median(samples[name][0]),
                         "host_us": statistics.median(samples[name][1]), "kernel_us": kernel[name]})
        t, o = rows[-3], rows[-2]
        print(f"{op:>13} {label:>10} {str(dtype):15} dim={str(dim):4}  eager {t['eager_us']:7.2f} / "
              f"{o['eager_us']:7.2f}  host {t['host_us']:6.2f} / {o['host_us']:6.2f}  kernel {t['kernel_us']:7.2f} / "
              f"{o['kernel_us']:7.2f}", file=sys.stderr, flush=True)
        del x
    return rows


def markdown(rows, header: str) -> str:
    """One line a case: torch's function, the wrapper and the op (candidates in that order)."""
    out = [header, "",
           "| op | shape | dtype | dim | torch eager us | torch_reduce eager us | torch.ops.treduce eager us | "
           "eager speedup | kernel speedup | target | host us: torch / torch_reduce / torch.ops.treduce |",
           "| --- " * 11 + "|"]
    keyed = {}
    for r in rows:
        keyed.setdefault((r.get("op", "sum"), tuple(r["shape"]), r["dtype"], r["dim"]), []).append(r)
    for (op, shape, dtype, dim), (t, o, through_ops) in keyed.items():
        eager, kernel = t["eager_us"] / o["eager_us"], t["kernel_us"] / o["kernel_us"]
        target = 1 / 0.9 if kernel >= 2 else 1.0  # the bar: <= 0.9x torch's time where the kernel is 2x faster
        met = "met" if eager >= target else f"miss ({eager:.2f}x < {target:.2f}x)"
        out.append(f"| {op} | {'x'.join(map(str, shape))} | {dtype} | {'-' if dim is None else dim} | "
                   f"{t['eager_us']:.2f} | {o['eager_us']:.2f} | {through_ops['eager_us']:.2f} | {eager:.2f}x | "
                   f"{kernel:.2f}x | {met} | {t['host_us']:.2f} / {o['host_us']:.2f} / {through_ops['host_us']:.2f} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--out", type=pathlib.Path, default=None)
    ap.add_argument("--quick", action="store_true", help="a few small cases, to see that it works")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("eager.py needs a CUDA device", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    rows = run(args.reps, args.quick)
    out = args.out or pathlib.Path(__file__).parent / "results" / gpu.split()[-1].lower()
    out.mkdir(parents=True, exist_ok=True)
    meta = {"gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda, "reps": args.reps, "calls": CALLS}
    report.write_summary(out / "eager.json", {"meta": meta, "rows": rows})
    header = (f"# Eager suite: {gpu}, torch {torch.__version__}; medians of {args.reps} loops of {CALLS} calls. "
              "eager: us per call from a Python loop (CUDA events); host: the loop's wall clock to the last "
              "call's return; eager and kernel speedup: torch's time over torch_reduce's (the wrapper's; "
              "kernel: CUDA-graph replay); target: eager speedup >= 1, and >= 1/0.9 where the kernel speedup "
              "is >= 2.")
    (out / "eager.md").write_text(markdown(rows, header))
    print(markdown(rows, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
