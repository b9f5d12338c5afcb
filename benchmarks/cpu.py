"""The CPU sweep: torch.sum against torch_reduce.sum (auto) on CPU tensors, time and accuracy, with
one thread and with every core.

    python benchmarks/cpu.py [--reps N] [--out DIR] [--threads 1,16] [--quick]

Cases: full sums of 2^10 to 2^26 elements (steps of 4x) of every dtype, and dims 0 and -1 of
(4096, 4096) and (65536, 128) in float32 and bfloat16. Time: wall clock of one call, the two
candidates interleaved sample by sample, medians. Error (floating dtypes): |result - float64 sum|
(math.fsum's for float64 input) summed over the outputs, over several fresh N(0, 1) inputs,
relative to the sum of |reference|;
integer results must be equal. Writes cpu.json and cpu.md to --out (default
benchmarks/results/cpu-<cores>).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import platform
import statistics
import time

import torch

import torch_reduce

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool]


def cases(quick: bool):
    """--quick: the same kinds of case, small (a smoke test)."""
    top = 14 if quick else 26
    for e in range(10, top + 1, 4):
        for dt in FLOATS + INTS:
            yield (1 << e,), dt, None
    for shape in ((256, 256), (4096, 32)) if quick else ((4096, 4096), (65536, 128)):
        for dt in (torch.float32, torch.bfloat16):
            for d in (0, -1):
                yield shape, dt, d


def data(shape, dtype, gen):
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) < 0.5
    return torch.randint(0, 100, shape, generator=gen, dtype=dtype)


def interleaved(fns, reps: int, budget_s: float = 2.0):
    """Median microseconds a call of each fn, sampled alternately."""
    for f in fns:
        f()
    samples = [[] for _ in fns]
    start = time.perf_counter()
    for r in range(reps):
        for i, f in enumerate(fns):
            t = time.perf_counter()
            f()
            samples[i].append((time.perf_counter() - t) * 1e6)
        if r >= 4 and time.perf_counter() - start > budget_s:
            break
    return [statistics.median(s) for s in samples]


def error(fn, x, dim):
    """fn's absolute error and the reference's magnitude. The reference is a float64 sum, or for
    float64 input (full sums) math.fsum's correctly rounded one."""
    if x.dtype == torch.float64:
        assert dim is None, "float64 is swept as full sums only"
        ref = torch.tensor(math.fsum(x.tolist()), dtype=torch.float64)
    else:
        ref = x.double().sum() if dim is None else x.double().sum(dim)
    got = fn(x)
    return (got.double() - ref).abs().sum().item(), ref.abs().sum().item()


def run(threads: int, reps: int, quick: bool, gen):
    torch.set_num_threads(threads)
    rows = []
    for shape, dt, dim in cases(quick):
        ft = (lambda x: torch.sum(x)) if dim is None else (lambda x, d=dim: torch.sum(x, d))
        fo = (lambda x: torch_reduce.sum(x)) if dim is None else (lambda x, d=dim: torch_reduce.sum(x, d))
        x = data(shape, dt, gen)
        want, got = ft(x), fo(x)
        if not dt.is_floating_point and not torch.equal(want, got):
            raise AssertionError(f"{dt} {shape} dim={dim}: result differs from torch.sum")
        t_torch, t_ours = interleaved([lambda: ft(x), lambda: fo(x)], reps)
        err_t = err_o = None
        if dt.is_floating_point:
            et = eo = norm = 0.0
            n = x.numel()
            for _ in range(16 if n <= 1 << 20 else 4 if dt != torch.float64 else 1):
                xx = data(shape, dt, gen)
                a, norm_a = error(ft, xx, dim)
                b, _ = error(fo, xx, dim)
                et, eo, norm = et + a, eo + b, norm + norm_a
            err_t, err_o = et / norm, eo / norm
        rows.append(dict(shape=list(shape), dtype=str(dt).replace("torch.", ""), dim=dim, threads=threads,
                         torch_us=t_torch, ours_us=t_ours, speedup=t_torch / t_ours,
                         torch_error=err_t, ours_error=err_o))
        r = rows[-1]
        print(f"{threads:2d} thr {'x'.join(map(str, shape)):>10} {r['dtype']:8} dim={str(dim):4} "
              f"torch {t_torch:10.1f} us  ours {t_ours:10.1f} us  {r['speedup']:5.2f}x"
              + (f"  error {err_t:.2e} / {err_o:.2e}" if err_t is not None else ""), flush=True)
    return rows


def markdown(rows, header):
    out = [header, "",
           "| threads | shape | dtype | dim | torch.sum us | torch_reduce us | speedup | torch error | torch_reduce error |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        e = (lambda v: "-" if v is None else f"{v:.2e}")
        out.append(f"| {r['threads']} | {'x'.join(map(str, r['shape']))} | {r['dtype']} | {r['dim']} | "
                   f"{r['torch_us']:.1f} | {r['ours_us']:.1f} | {r['speedup']:.2f}x | {e(r['torch_error'])} | "
                   f"{e(r['ours_error'])} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=31)
    ap.add_argument("--out", type=pathlib.Path, default=None)
    ap.add_argument("--threads", default=None, help="comma-separated thread counts (default: 1 and every core)")
    ap.add_argument("--quick", action="store_true", help="small cases only (a smoke test)")
    args = ap.parse_args(argv)
    cores = os.cpu_count() or 1
    threads = [int(t) for t in args.threads.split(",")] if args.threads else sorted({1, cores})
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(6), "little"))
    rows = [r for t in threads for r in run(t, args.reps, args.quick, gen)]
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    meta = dict(cpu=cpu, cores=cores, torch=torch.__version__, reps=args.reps)
    out = args.out or pathlib.Path(__file__).parent / "results" / f"cpu-{cores}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "cpu.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
    header = (f"# CPU sweep: {cpu}, {cores} cores, torch {torch.__version__}; medians of interleaved "
              "wall-clock samples; error: |result - float64 sum| over fresh N(0, 1) inputs, relative "
              "to |float64 sum|.")
    (out / "cpu.md").write_text(markdown(rows, header))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
