"""The eager suite: what a call costs from a plain Python loop with no CUDA graph around it,
torch.sum against torch_reduce.sum and the op itself, in one run.

    python benchmarks/eager.py [--reps N] [--out DIR] [--quick]

Cases: full sums of float32, bfloat16 and uint8 from 2^10 to 2^26 elements, and sums over dim 0
and -1 of (4096, 4096) and (65536, 128) in float32 and bfloat16. For each candidate:
  eager   a loop of CALLS calls between two CUDA events, us per call: what user code waits for;
  host    the same loop's wall clock up to the last call's return, before any wait: the CPU's
          cost of a call (the queue of launches is far from full after CALLS calls);
  kernel  the same call replayed in a CUDA graph (hot): the device's own time.
Candidates are interleaved sample by sample; medians of --reps samples. Every result is checked
against torch's first. Writes eager.json and eager.md to --out (default benchmarks/results/<gpu>).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

import torch

import timing
import torch_reduce

CALLS = 200


def cases(quick: bool):
    sizes = (10, 16, 20) if quick else (10, 12, 14, 15, 16, 17, 18, 20, 22, 24, 26)
    for dtype in (torch.float32, torch.bfloat16, torch.uint8):
        for e in sizes:
            yield (1 << e,), dtype, None
    shapes = ((256, 256),) if quick else ((4096, 4096), (65536, 128))
    for shape in shapes:
        for dtype in (torch.float32, torch.bfloat16):
            for dim in (0, -1):
                yield shape, dtype, dim


def make(shape, dtype):
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, device="cuda", dtype=dtype)
    return torch.randn(shape, device="cuda").to(dtype)


def check(name, got, want, dtype):
    if dtype == torch.uint8:
        ok = torch.equal(got, want)
    else:  # both sum in float32 or wider; bfloat16 results round to 8 bits
        tol = 2e-2 if dtype == torch.bfloat16 else 1e-4
        ok = torch.allclose(got.double(), want.double(), rtol=tol, atol=tol * want.double().abs().max().item())
    if not ok:
        raise SystemExit(f"{name}: result differs from torch.sum's")


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


def run(reps: int, quick: bool):
    rows = []
    for shape, dtype, dim in cases(quick):
        x = make(shape, dtype)
        if dim is None:
            fns = {"torch.sum": lambda: torch.sum(x), "torch_reduce.sum": lambda: torch_reduce.sum(x),
                   "torch.ops.treduce.sum": lambda: torch.ops.treduce.sum(x)}
        else:
            fns = {"torch.sum": lambda: torch.sum(x, dim), "torch_reduce.sum": lambda: torch_reduce.sum(x, dim),
                   "torch.ops.treduce.sum": lambda: torch.ops.treduce.sum(x, "auto", [dim])}
        want = fns["torch.sum"]()
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
            rows.append({"shape": list(shape), "dtype": str(dtype).removeprefix("torch."), "dim": dim,
                         "candidate": name, "eager_us": statistics.median(samples[name][0]),
                         "host_us": statistics.median(samples[name][1]), "kernel_us": kernel[name]})
        r = {row["candidate"]: row for row in rows[-len(fns):]}
        t, o = r["torch.sum"], r["torch_reduce.sum"]
        print(f"{label:>10} {str(dtype):15} dim={str(dim):4}  eager {t['eager_us']:7.2f} / {o['eager_us']:7.2f}  "
              f"host {t['host_us']:6.2f} / {o['host_us']:6.2f}  kernel {t['kernel_us']:7.2f} / {o['kernel_us']:7.2f}",
              file=sys.stderr, flush=True)
        del x
    return rows


def markdown(rows, header: str) -> str:
    out = [header, "",
           "| shape | dtype | dim | torch.sum eager us | torch_reduce.sum eager us | torch.ops.treduce.sum eager us | "
           "eager speedup | kernel speedup | target | torch.sum host us | torch.ops.treduce.sum host us |",
           "| --- " * 11 + "|"]
    keyed = {}
    for r in rows:
        keyed.setdefault((tuple(r["shape"]), r["dtype"], r["dim"]), {})[r["candidate"]] = r
    for (shape, dtype, dim), c in keyed.items():
        t, o, op = c["torch.sum"], c["torch_reduce.sum"], c["torch.ops.treduce.sum"]
        eager, kernel = t["eager_us"] / o["eager_us"], t["kernel_us"] / o["kernel_us"]
        target = 1 / 0.9 if kernel >= 2 else 1.0  # the bar: <= 0.9x torch's time where the kernel is 2x faster
        met = "met" if eager >= target else f"miss ({eager:.2f}x < {target:.2f}x)"
        out.append(f"| {'x'.join(map(str, shape))} | {dtype} | {'-' if dim is None else dim} | {t['eager_us']:.2f} | "
                   f"{o['eager_us']:.2f} | {op['eager_us']:.2f} | {eager:.2f}x | {kernel:.2f}x | {met} | "
                   f"{t['host_us']:.2f} | {op['host_us']:.2f} |")
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
    (out / "eager.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    header = (f"# Eager suite: {gpu}, torch {torch.__version__}; medians of {args.reps} loops of {CALLS} calls. "
              "eager: us per call from a Python loop (CUDA events); host: the loop's wall clock to the last "
              "call's return; kernel speedup: torch.sum's CUDA-graph time over torch_reduce.sum's; target: "
              "eager speedup >= 1, and >= 1/0.9 where the kernel speedup is >= 2.")
    (out / "eager.md").write_text(markdown(rows, header))
    print(markdown(rows, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
