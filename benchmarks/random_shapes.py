"""Random reductions of the shapes real models have, torch_reduce against torch eager and
torch.compile (CUDA) or torch (CPU), in one run: the cases no suite was tuned on.

    python benchmarks/random_shapes.py [--seed S] [--cases N] [--device cuda|cpu] [--out DIR]
                                       [--modes hot,eager] [--reps R] [--small] [--resume PARTIAL]

A seeded generator draws each case: an op of the family, a shape of rank 1-4 whose sizes come from
pools of model sizes (vocabularies, hidden sizes, head dims, sequence lengths, image sides,
channels, batches) and odd sizes, a random set of reduced dims, a layout (contiguous; transposed or
permuted; sliced; expanded with stride 0; channels_last) and a dtype the op takes. Every result is
checked against torch's before it is timed (values, dtype, shape, strides). Prints the distribution
of ours / best peer (median, 10th percentile, minimum, counts below 1.0x and 0.9x, cases slower
than torch eager) and the worst 20, and writes random_shapes.json (one summary line a case) and
random_shapes.md to --out (default benchmarks/results/<gpu or cpu>). While it runs, the rows so far
are in random_shapes_seedS.partial.json there; `--resume` that file (the same code) runs the rest.

tests/test_random_shapes.py runs the same generator at small sizes (--small) against torch.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import random
import sys
from dataclasses import asdict, dataclass, field

import torch

import torch_reduce
from torch_reduce._table import BY_NAME, OPS

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import report  # noqa: E402

# Size pools: (model sizes, small sizes with the same character for the tests).
POOLS = {
    "vocab": ([32000, 50257, 49152, 128256, 151936, 32064], [97, 250, 1000, 1031]),
    "hidden": ([768, 1024, 2048, 3072, 4096, 5120, 8192, 11008, 14336], [32, 48, 64, 96, 128, 130]),
    "head": ([64, 80, 96, 128], [8, 16, 24, 32]),
    "heads": ([8, 12, 16, 32, 40], [2, 3, 4, 8]),
    "seq": ([77, 128, 196, 197, 256, 512, 1024, 2048, 4096], [7, 16, 33, 64, 77, 128]),
    "batch": ([1, 2, 3, 4, 8, 16, 32, 64], [1, 2, 3, 4, 8]),
    "image": ([7, 14, 28, 56, 112, 224], [3, 7, 14, 28]),
    "channels": ([3, 64, 128, 256, 512, 1024], [3, 4, 16, 32, 64]),
    "odd": ([1, 3, 5, 7, 13, 17, 31, 49, 97, 1000, 1023, 1025, 4097], [1, 3, 5, 7, 13, 17, 31, 49, 97, 257]),
}
ROLES = list(POOLS)

FLOATS = (torch.float32, torch.bfloat16, torch.float16)
INTS = (torch.int32, torch.int64, torch.int8, torch.uint8, torch.int16)

# The order generate() draws the ops of the table in (rng.choices maps a draw through it): the
# order of the runs so far, so that their seeds give the same cases; ops not in it follow in the
# table's order. Each op's dims, dtypes, weight and exactness are its row's (torch_reduce/_table.py).
DRAW_ORDER = ("sum", "mean", "amax", "var", "var_mean", "vector_norm", "logsumexp", "argmax", "max", "count_nonzero",
              "any", "all", "std", "std_mean", "nansum", "nanmean", "prod", "amin", "aminmax", "min", "argmin")
DRAWN = sorted(OPS, key=lambda op: DRAW_ORDER.index(op.name) if op.name in DRAW_ORDER else len(DRAW_ORDER))


@dataclass
class Case:
    op: str
    base: list[int]  # the shape allocated (contiguous), before the layout's view
    layout: str  # contiguous, transpose, permute, slice, expand, channels_last
    view: list[int] = field(default_factory=list)  # the layout's argument (dims, or the slice's dim)
    dim: object = None  # as passed: None, an int, or a list
    dtype: str = "float32"
    extra: float | None = None  # vector_norm's ord

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def label(self) -> str:
        v = self.view
        view = {"contiguous": lambda: "", "transpose": lambda: f".transpose{tuple(v)}",
                "permute": lambda: f".permute{tuple(v)}", "slice": lambda: f"[dim {v[0]} step {v[1]}]",
                "expand": lambda: f".expand(dim {v[0]} to {v[1]})",
                "channels_last": lambda: ".channels_last"}[self.layout]()
        extra = f", ord={self.extra:g}" if self.extra is not None else ""
        return f"{self.op}({tuple(self.base)}{view}, dim={self.dim}{extra}) {self.dtype}"


def _shape(rng: random.Random, small: bool, most: int) -> list[int]:
    while True:
        rank = rng.choices([1, 2, 3, 4], weights=[1, 4, 4, 3])[0]
        shape = [rng.choice(POOLS[rng.choice(ROLES)][1 if small else 0]) for _ in range(rank)]
        if 1 <= math.prod(shape) <= most:
            return shape


def generate(seed: int, count: int, small: bool = False) -> list[Case]:
    """`count` cases from `seed`; small: sizes from the small pools, at most 2^15 elements."""
    rng = random.Random(seed)
    most = (1 << 15) if small else (1 << 27)
    ops, weights = [op.name for op in DRAWN], [op.weight for op in DRAWN]
    cases = []
    while len(cases) < count:
        op = rng.choices(ops, weights=weights)[0]
        dims_kind, dtypes_kind = BY_NAME[op].dims, BY_NAME[op].dtypes
        base = _shape(rng, small, most)
        rank = len(base)
        # The layout: half contiguous, a quarter transposed, the rest the other kinds.
        kind = rng.choices(["contiguous", "transpose", "permute", "slice", "expand", "channels_last"],
                           weights=[8, 4, 1, 1, 1, 1])[0]
        view: list[int] = []
        shape = list(base)
        if kind in ("transpose", "permute") and rank < 2:
            kind = "contiguous"
        if kind == "channels_last" and rank != 4:
            kind = "contiguous"
        if kind == "transpose":
            a, b = rng.sample(range(rank), 2)
            view = [a, b]
            shape[a], shape[b] = shape[b], shape[a]
        elif kind == "permute":
            view = list(range(rank))
            while view == list(range(rank)):
                rng.shuffle(view)
            shape = [base[p] for p in view]
        elif kind == "slice":
            d = rng.randrange(rank)
            if base[d] < 2:
                kind = "contiguous"
            else:
                step = rng.choice([2, 3])
                view = [d, step]
                shape[d] = (base[d] + step - 1) // step
        elif kind == "expand":
            d = rng.randrange(rank)
            view = [d, base[d]]  # the dim, and its size as a stride-0 view of one element
            base[d] = 1
        # The reduced dims.
        if dims_kind in ("one", "one!"):
            dim = None if dims_kind == "one" and rng.random() < 0.15 else rng.randrange(-rank, rank)
        else:
            u = rng.random()
            if u < 0.15 and dims_kind == "many":
                dim = None
            elif u < 0.65 or rank == 1:
                dim = rng.randrange(-rank, rank)
            else:
                dim = sorted(rng.sample(range(rank), rng.randrange(1, rank + 1)))
        # The dtype.
        if dtypes_kind == "float":
            dtype = rng.choices(FLOATS, weights=[4, 3, 2])[0]
        else:
            dtype = rng.choices(FLOATS + INTS + (torch.bool,), weights=[4, 3, 2, 1, 1, 1, 1, 1, 1])[0]
            if dtype == torch.bool and dtypes_kind == "nobool":
                dtype = torch.int32
        extra = rng.choice([2.0, 1.0, math.inf]) if op == "vector_norm" else None
        cases.append(Case(op, base, kind, view, dim, str(dtype).removeprefix("torch."), extra))
    return cases


def make_input(case: Case, device: str, gen: torch.Generator) -> torch.Tensor:
    """The case's input: random values in its layout. Floats are small integers (most sums are
    then exact in float32, so results can be compared exactly), with fractions for the
    statistics; integers small enough that no sum wraps; +-1 for products."""
    dtype = case.torch_dtype
    if dtype == torch.bool:
        x = torch.rand(case.base, generator=gen, device=device) < 0.5
    elif case.op == "prod":  # +-1: no product overflows, in any accumulator
        x = (torch.randint(0, 2, case.base, generator=gen, device=device) * 2 - 1).to(dtype)
    elif dtype.is_floating_point:
        x = torch.randint(-4, 5, case.base, generator=gen, device=device).to(dtype)
        if case.op in ("var", "std", "var_mean", "std_mean", "logsumexp", "vector_norm"):
            x = x + torch.rand(case.base, generator=gen, device=device).to(dtype)
    else:
        low = 0 if dtype == torch.uint8 else -8
        x = torch.randint(low, 9, case.base, generator=gen, device=device).to(dtype)
    if case.layout == "transpose":
        return x.transpose(*case.view)
    if case.layout == "permute":
        return x.permute(case.view)
    if case.layout == "slice":
        d, step = case.view
        return x[(slice(None),) * d + (slice(None, None, step),)]
    if case.layout == "expand":
        d, size = case.view
        return x.expand(list(x.shape[:d]) + [size] + list(x.shape[d + 1:]))
    if case.layout == "channels_last":
        return x.contiguous(memory_format=torch.channels_last)
    return x


def calls(case: Case):
    """(torch's function, torch_reduce's), each x -> result(s)."""
    op, dim = case.op, case.dim
    torch_fn, ours_fn = BY_NAME[op].reference, getattr(torch_reduce, op)
    if op == "vector_norm":  # the order first
        args, kwargs = (case.extra, dim), {}
    elif op == "aminmax":  # dim is keyword-only
        args, kwargs = (), {"dim": dim}
    else:
        args, kwargs = () if dim is None else (dim,), {}
    return (lambda x: torch_fn(x, *args, **kwargs), lambda x: ours_fn(x, *args, **kwargs))


UNIT = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8, torch.float32: 2.0**-24, torch.float64: 2.0**-53}


def reduced_count(case: Case, x: torch.Tensor) -> int:
    if case.dim is None:
        return x.numel()
    dims = [case.dim] if isinstance(case.dim, int) else case.dim
    return math.prod(x.shape[d] for d in dims) if x.dim() else 1


def check(case: Case, x: torch.Tensor, ours, want) -> str | None:
    """None if `ours` is torch's result `want` (same dtype, shape and strides; integers, indices,
    extrema and exact float sums equal; other floats within the bound below), else what differs."""
    ours = ours if isinstance(ours, tuple) else (ours,)
    want = want if isinstance(want, tuple) else (want,)
    if len(ours) != len(want):
        return f"{len(ours)} results, torch {len(want)}"
    n = max(1, reduced_count(case, x))
    for k, (a, b) in enumerate(zip(ours, want)):
        if a.dtype != b.dtype or a.shape != b.shape or a.device != b.device:
            return f"result {k}: {a.dtype} {tuple(a.shape)} {a.device}, torch {b.dtype} {tuple(b.shape)} {b.device}"
        if a.numel() > 1 and a.stride() != b.stride():
            return f"result {k}: strides {a.stride()}, torch {b.stride()}"
        a, b = a.cpu(), b.cpu()
        if not a.dtype.is_floating_point:
            if not torch.equal(a, b):
                bad = (a != b).nonzero()[:3].tolist()
                return f"result {k}: differs at {bad}"
            continue
        # Float results of integer-valued data: sums, extrema and products exact in the
        # accumulator up to the result's rounding (one ulp of torch's, which may round twice);
        # means one division more; the statistics within 64 units of the accumulator times the
        # result's magnitude, plus 4 ulps of the result dtype.
        a64, b64 = a.double(), b.double()
        both_nan = a64.isnan() & b64.isnan()
        same_inf = (a64 == b64) & a64.isinf()
        u_out = UNIT.get(a.dtype, 2.0**-24)
        u_acc = 2.0**-53 if a.dtype == torch.float64 else 2.0**-24
        if BY_NAME[case.op].exact:
            tol = 2 * u_out * b64.abs()
        else:
            tol = (4 * u_out + 64 * u_acc * math.log2(n + 1)) * b64.abs() + 64 * u_acc
        ok = both_nan | same_inf | ((a64 - b64).abs() <= tol)
        if not bool(ok.all()):
            i = (~ok).nonzero()[0].tolist()
            return f"result {k}: {a64[tuple(i)].item()!r} against torch's {b64[tuple(i)].item()!r} at {i}"
    return None


def reference(case: Case, x: torch.Tensor):
    """torch's result, computed in float64 for float ops other than extrema, positions and
    products, then cast to torch's result dtype: torch's own result in float16 or bfloat16 rounds
    intermediate steps (its CPU nansum of a bfloat16 (14, 33, 4), all of it: -412 for a sum of
    small integers whose value is -462)."""
    torch_fn, _ = calls(case)
    want = torch_fn(x)
    in_float64 = not BY_NAME[case.op].exact or case.op in ("sum", "nansum")
    if x.dtype.is_floating_point and in_float64 and x.dtype != torch.float64:
        precise = torch_fn(x.double())
        as_tuple = lambda r: r if isinstance(r, tuple) else (r,)  # noqa: E731
        cast = tuple(p.to(w.dtype) if w.dtype.is_floating_point else w for p, w in zip(as_tuple(precise), as_tuple(want)))
        want = cast if isinstance(want, tuple) else cast[0]
    return want


# ---------------------------------------------------------------------------------------------
# Timing.


def _gpu_name() -> str:
    return torch.cuda.get_device_name().replace("NVIDIA ", "").split()[0].lower()


def span_bytes(x: torch.Tensor) -> int:
    """The bytes of storage a view spans: what a reduction of it reads from memory (all of a
    dense tensor; the whole span of a strided slice, whose sectors are read anyway; the one copy
    of an expanded dim)."""
    if x.numel() == 0:
        return 0
    return (sum((n - 1) * abs(s) for n, s in zip(x.shape, x.stride())) + 1) * x.element_size()


def plan_text(plan: dict) -> str:
    """torch_reduce.explain's layout in a few words: rows or columns, the sizes, outer runs, the
    partials' combine, a copy; on CUDA, the kernels launched."""
    kind = "rows" if plan["inner"] == 1 else "columns"
    text = f"{kind} {plan['outer']}x{plan['reduced']}x{plan['inner']}"
    if plan["outer_runs"]:
        text += f" outer runs {len(plan['outer_runs'])}"
    if plan["combine"] > 1:
        text += f" combine {plan['combine']}"
    text += " copy" if plan["copy"] else ""
    if plan.get("plan"):
        text += ": " + " + ".join(step["kernel"].removesuffix("_kernel") for step in plan["plan"]["steps"])
    return text


def precompile(args) -> None:
    """torch.compile of every case's torch call, in `args.precompile` processes at once: each
    compiles its share, which fills inductor's on-disk caches (the FX graph and Triton caches),
    so that the timing process's compiles find their kernels there (a compile a case, one after
    another, took most of a run)."""
    import subprocess

    workers = [subprocess.Popen([sys.executable, __file__, "--compile-only", f"{k}/{args.precompile}",
                                 "--seed", str(args.seed), "--cases", str(args.cases)] +
                                (["--small"] if args.small else []))
               for k in range(args.precompile)]
    for w in workers:
        w.wait()


def compile_share(args) -> None:
    import timing

    k, of = map(int, args.compile_only.split("/"))
    for index, case in enumerate(generate(args.seed, args.cases, small=args.small)):
        if index % of != k:
            continue
        x = make_input(case, "cuda", torch.Generator(device="cuda").manual_seed(index))
        torch_fn, _ = calls(case)
        try:
            timing.compile_once(lambda t: torch_fn(t))(x)
        except Exception:  # the timing process records it (run)
            pass
        del x


def run(args, partial: pathlib.Path | None = None) -> dict:
    """Every case in order; with `partial`, the rows so far are written there after each case
    (a run cut short keeps them), and rows already there are taken as they are (--resume: the
    inputs of those cases are drawn again, to keep the generator's sequence, but not timed)."""
    import datetime

    import timing

    cases = generate(args.seed, args.cases, small=args.small)
    device = args.device
    gen = torch.Generator(device=device).manual_seed(args.seed)
    rows = []
    if args.resume:
        rows = report.read_summary(args.resume)["rows"]
        labels = [c.label() for c in cases[:len(rows)]]
        if [r["label"] for r in rows] != labels:
            raise SystemExit(f"{args.resume}: its cases are not the first {len(rows)} of seed {args.seed}")
    info = {"seed": args.seed, "cases": args.cases, "device": device,
            "gpu": torch.cuda.get_device_name() if device == "cuda" else None, "torch": torch.__version__,
            "date": datetime.date.today().isoformat(), "small": args.small, "threads": torch.get_num_threads()}
    for index, case in enumerate(cases):
        x = make_input(case, device, gen)
        if index < len(rows):
            continue
        torch_fn, ours_fn = calls(case)
        problem = check(case, x, ours_fn(x), reference(case, x))
        if problem:
            print(f"case {index}: {case.label()}: {problem}", file=sys.stderr)
            rows.append({"case": index, "label": case.label(), "error": problem})
            continue
        row = {"case": index, "label": case.label(), "bytes": span_bytes(x), "plan": plan_text(torch_reduce.explain(x, case.dim, case.op))}
        if device == "cuda":
            peers = [("torch", torch_fn)]
            try:
                compiled = timing.compile_once(lambda t: torch_fn(t))
                compiled(x)
                peers.append(("compile", compiled))
            except Exception as e:  # torch.compile's own failure: the case is compared with torch alone
                row["compile_error"] = type(e).__name__
            for mode in args.modes:
                for name, fn in peers + [("ours", ours_fn)]:
                    row[f"{name}_{mode}"] = timing.quantiles(timing.time_mode(mode, lambda: fn(x), args.reps))[0]
            if row["bytes"] >= 64 << 20 and "hot" in args.modes:  # the read probe over as many bytes
                flat = torch.empty(row["bytes"] // 16 * 16, dtype=torch.uint8, device=device)
                probe = torch.ops.treduce._read_probe
                row["probe_hot"] = timing.quantiles(timing.time_hot(lambda: probe(flat), args.reps))[0]
                del flat
        else:
            for name, fn in (("torch", torch_fn), ("ours", ours_fn)):
                row[f"{name}_wall"] = timing.quantiles(timing.time_wall(lambda: fn(x), args.reps))[0]
        rows.append(row)
        print(json.dumps(row), flush=True)
        if partial is not None:
            write_json(partial, {**info, "partial": True, "rows": rows})
        del x
    return {**info, "rows": rows}


def summarize(result: dict, modes: list[str]) -> str:
    """The distribution of ours / best peer per mode, and the worst 20 cases, as markdown."""
    lines = []
    rows = [r for r in result["rows"] if "error" not in r]
    errors = [r for r in result["rows"] if "error" in r]
    for mode in modes:
        peers = ["torch", "compile"] if any(f"compile_{mode}" in r for r in rows) else ["torch"]
        ratios = []
        for r in rows:
            best = min(r[f"{p}_{mode}"] for p in peers if f"{p}_{mode}" in r)
            ratios.append((best / r[f"ours_{mode}"], r[f"torch_{mode}"] / r[f"ours_{mode}"], r))
        if not ratios:
            continue
        vs_best = sorted(t[0] for t in ratios)
        pick = lambda q: vs_best[min(len(vs_best) - 1, max(0, round(q * (len(vs_best) - 1))))]  # noqa: E731
        lines += [f"### {mode}: ours / best of ({', '.join(peers)}), {len(ratios)} cases", "",
                  "| median | 10th percentile | minimum | below 1.0x | below 0.9x | slower than torch eager |",
                  "| --- | --- | --- | --- | --- | --- |",
                  f"| {pick(0.5):.2f}x | {pick(0.1):.2f}x | {vs_best[0]:.2f}x | {sum(v < 1.0 for v in vs_best)} | "
                  f"{sum(v < 0.9 for v in vs_best)} | {sum(t[1] < 1.0 for t in ratios)} |", ""]
        lines += ["| case | " + " | ".join(peers) + " | ours (us) | vs best |", "|" + " --- |" * (len(peers) + 3)]
        for best, _, r in sorted(ratios, key=lambda t: t[0])[:20]:
            lines.append(f"| {r['label']} | " + " | ".join(f"{r[f'{p}_{mode}']:.2f}" if f"{p}_{mode}" in r else "-"
                                                           for p in peers) +
                         f" | {r[f'ours_{mode}']:.2f} | {best:.2f}x |")
        lines.append("")
    big = [r for r in rows if "probe_hot" in r]
    if big:
        over = sorted(big, key=lambda r: r["probe_hot"] / r["ours_hot"])
        within = sum(r["ours_hot"] <= 1.15 * r["probe_hot"] for r in big)
        lines += [f"Cases of 64 MiB or more: {len(big)}; within 1.15x of the read probe over their bytes: {within}. "
                  "Furthest:", "", "| case | MiB | probe (us) | ours (us) | ours / probe |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {r['label']} | {r['bytes'] / 2**20:.0f} | {r['probe_hot']:.1f} | {r['ours_hot']:.1f} | "
                  f"{r['ours_hot'] / r['probe_hot']:.2f} |" for r in over[:5]] + [""]
    failed = [r for r in rows if "compile_error" in r]
    if failed:
        lines += [f"{len(failed)} cases torch.compile failed to compile, compared with torch eager alone:", ""] + \
                 [f"- {r['label']}: {r['compile_error']}" for r in failed] + [""]
    if errors:
        lines += [f"{len(errors)} cases failed their check:", ""] + [f"- {r['label']}: {r['error']}" for r in errors]
    return "\n".join(lines)


def write_json(path: pathlib.Path, result: dict) -> None:
    """The run's summary (report.write_summary: its settings, then a line a case, medians in us to
    4 significant digits; report.read_summary reads it)."""
    report.write_summary(path, result)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--cases", type=int, default=300)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--modes", default=None, help="hot,eager on CUDA (wall on the CPU)")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--small", action="store_true", help="the tests' sizes")
    p.add_argument("--out", type=pathlib.Path, default=None)
    p.add_argument("--resume", type=pathlib.Path, default=None,
                   help="a run's .partial.json (the same seed, cases, device and code): its rows kept, the rest run")
    p.add_argument("--precompile", type=int, default=0, help="processes that compile the peers' kernels first")
    p.add_argument("--compile-only", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.modes = (args.modes or ("hot,eager" if args.device == "cuda" else "wall")).split(",")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.compile_only:
        compile_share(args)
        return 0
    if args.precompile and args.device == "cuda":
        precompile(args)
    name = _gpu_name() if args.device == "cuda" else "cpu"
    out = args.out or pathlib.Path(__file__).resolve().parent / "results" / name
    out.mkdir(parents=True, exist_ok=True)
    stem = f"random_shapes_seed{args.seed}"
    partial = out / f"{stem}.partial.json"
    result = run(args, partial)
    text = summarize(result, args.modes)
    print(text)
    write_json(out / f"{stem}.json", result)
    partial.unlink(missing_ok=True)
    where = result["gpu"] or f"CPU, {result['threads']} threads"
    (out / f"{stem}.md").write_text(f"# Random shapes, seed {args.seed}, {args.cases} cases: {where}, torch "
                                    f"{result['torch']}, {result['date']}\n\n" + text + "\n")
    return 1 if any("error" in r for r in result["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
