"""The CPU sweep: torch.sum against torch_reduce.sum (auto) on CPU tensors, time and accuracy, with
one thread and with every core.

    python benchmarks/cpu.py [--reps N] [--out DIR] [--threads 1,16] [--quick] [--ops]

Cases: full sums of 2^10 to 2^26 elements (steps of 4x) of every dtype, and dims 0 and -1 of
(4096, 4096) and (65536, 128) in float32 and bfloat16. Time: wall clock of one call, the two
candidates interleaved sample by sample, medians. Error (floating dtypes): |result - float64 sum|
(math.fsum's for float64 input) summed over the outputs, over several fresh N(0, 1) inputs,
relative to the sum of |reference|;
integer results must be equal. Writes cpu.json and cpu.md to --out (default
benchmarks/results/cpu-<cores>).

--ops: every other op against torch's own function instead (time only; results checked equal, or
close for floating statistics): (4096, 4096) over dims 0, -1 and all, (65536, 128) over dims 0 and
-1, float32, bfloat16 and int32 where torch takes them. Writes cpu_ops.json and cpu_ops.md.
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import platform
import statistics
import sys
import time

import torch

import torch_reduce

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import report  # noqa: E402

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


def _dim_call(f, **kw):
    return lambda x, d: f(x, d, **kw) if d is not None else f(x, **kw)


# name: (torch's function, ours, floating inputs only). Each takes (x, dim or None).
OPS = {
    "sum": (_dim_call(torch.sum), _dim_call(torch_reduce.sum), False),
    "mean": (_dim_call(torch.mean), _dim_call(torch_reduce.mean), True),
    "amax": (_dim_call(torch.amax), _dim_call(torch_reduce.amax), False),
    "amin": (_dim_call(torch.amin), _dim_call(torch_reduce.amin), False),
    "aminmax": (lambda x, d: torch.aminmax(x, dim=d), lambda x, d: torch_reduce.aminmax(x, dim=d), False),
    "max": (_dim_call(torch.max), _dim_call(torch_reduce.max), False),
    "min": (_dim_call(torch.min), _dim_call(torch_reduce.min), False),
    "argmax": (_dim_call(torch.argmax), _dim_call(torch_reduce.argmax), False),
    "argmin": (_dim_call(torch.argmin), _dim_call(torch_reduce.argmin), False),
    "prod": (_dim_call(torch.prod), _dim_call(torch_reduce.prod), True),
    "var": (_dim_call(torch.var), _dim_call(torch_reduce.var), True),
    "std": (_dim_call(torch.std), _dim_call(torch_reduce.std), True),
    "var_mean": (_dim_call(torch.var_mean), _dim_call(torch_reduce.var_mean), True),
    "nansum": (_dim_call(torch.nansum), _dim_call(torch_reduce.nansum), True),
    "nanmean": (_dim_call(torch.nanmean), _dim_call(torch_reduce.nanmean), True),
    "logsumexp": (lambda x, d: torch.logsumexp(x, d if d is not None else (0, 1)),
                  lambda x, d: torch_reduce.logsumexp(x, d if d is not None else (0, 1)), True),
    "vector_norm": (lambda x, d: torch.linalg.vector_norm(x, dim=d),
                    lambda x, d: torch_reduce.vector_norm(x, dim=d), True),
    "any": (_dim_call(torch.any), _dim_call(torch_reduce.any), False),
    "all": (_dim_call(torch.all), _dim_call(torch_reduce.all), False),
    "count_nonzero": (_dim_call(torch.count_nonzero), _dim_call(torch_reduce.count_nonzero), False),
}


def _same(got, want) -> bool:
    if isinstance(want, tuple):
        return all(_same(g, w) for g, w in zip(got, want))
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if not want.is_floating_point():
        return torch.equal(got, want)
    return torch.allclose(got.double(), want.double(), rtol=1e-2, atol=1e-3, equal_nan=True)


def _cast_like(want, got):
    if isinstance(want, tuple):
        return tuple(_cast_like(w, g) for w, g in zip(want, got))
    return want.to(got.dtype)


def run_ops(threads: int, reps: int, quick: bool, gen):
    torch.set_num_threads(threads)
    rows = []
    shapes = (((256, 256), (0, -1, None)), ((4096, 32), (0, -1))) if quick else \
        (((4096, 4096), (0, -1, None)), ((65536, 128), (0, -1)))
    for shape, dims in shapes:
        for dt in (torch.float32, torch.bfloat16, torch.int32):
            x = torch.randn(shape, generator=gen).mul(100).to(dt)
            for name, (ft, fo, floating) in OPS.items():
                if floating and not dt.is_floating_point:
                    continue
                xo = x
                if name == "prod" and dt.is_floating_point:  # near 1, so that products stay finite
                    xo = (1 + x.float() / 6400).to(dt)
                for dim in dims:
                    got = fo(xo, dim)
                    # torch's bfloat16 prod rounds its running product to bfloat16 (0.19 relative
                    # error over 256 elements near 1): there, the float64 result is the reference.
                    if not _same(got, ft(xo, dim)) and not (xo.is_floating_point() and _same(
                            got, _cast_like(ft(xo.double(), dim), got))):
                        raise AssertionError(f"{name} {dt} {shape} dim={dim}: result differs from torch's")
                    t_torch, t_ours = interleaved([lambda: ft(xo, dim), lambda: fo(xo, dim)], reps, budget_s=1.0)
                    rows.append(dict(op=name, shape=list(shape), dtype=str(dt).replace("torch.", ""), dim=dim,
                                     threads=threads, torch_us=t_torch, ours_us=t_ours, speedup=t_torch / t_ours))
                    print(f"{threads:2d} thr {name:13} {'x'.join(map(str, shape)):>10} {rows[-1]['dtype']:8} "
                          f"dim={str(dim):4} torch {t_torch:10.1f} us  ours {t_ours:10.1f} us  "
                          f"{rows[-1]['speedup']:5.2f}x", flush=True)
    return rows


def markdown_ops(rows, header):
    out = [header, "", "| threads | op | shape | dtype | dim | torch us | torch_reduce us | speedup |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append(f"| {r['threads']} | {r['op']} | {'x'.join(map(str, r['shape']))} | {r['dtype']} | {r['dim']} | "
                   f"{r['torch_us']:.1f} | {r['ours_us']:.1f} | {r['speedup']:.2f}x |")
    return "\n".join(out) + "\n"


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


def cpu_name() -> str:
    """The processor's model name (from /proc/cpuinfo where there is one)."""
    try:
        return next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=31)
    ap.add_argument("--out", type=pathlib.Path, default=None)
    ap.add_argument("--threads", default=None, help="comma-separated thread counts (default: 1 and every core)")
    ap.add_argument("--quick", action="store_true", help="small cases only (a smoke test)")
    ap.add_argument("--ops", action="store_true", help="every other op against torch's (time only)")
    args = ap.parse_args(argv)
    cores = os.cpu_count() or 1
    threads = [int(t) for t in args.threads.split(",")] if args.threads else sorted({1, cores})
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(6), "little"))
    rows = [r for t in threads for r in (run_ops if args.ops else run)(t, args.reps, args.quick, gen)]
    cpu = cpu_name()
    meta = dict(cpu=cpu, cores=cores, torch=torch.__version__, reps=args.reps)
    out = args.out or pathlib.Path(__file__).parent / "results" / f"cpu-{cores}"
    out.mkdir(parents=True, exist_ok=True)
    if args.ops:
        report.write_summary(out / "cpu_ops.json", dict(meta=meta, rows=rows))
        (out / "cpu_ops.md").write_text(markdown_ops(rows, f"# CPU ops: {cpu}, {cores} cores, torch "
                                                    f"{torch.__version__}; medians of interleaved wall-clock samples."))
        return 0
    report.write_summary(out / "cpu.json", dict(meta=meta, rows=rows))
    header = (f"# CPU sweep: {cpu}, {cores} cores, torch {torch.__version__}; medians of interleaved "
              "wall-clock samples; error: |result - float64 sum| over fresh N(0, 1) inputs, relative "
              "to |float64 sum|.")
    (out / "cpu.md").write_text(markdown(rows, header))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
