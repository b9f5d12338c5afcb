"""The normalizing ops (softmax, log_softmax, their backwards, cross_entropy, layer_norm, rms_norm)
against torch eager and torch.compile, on the GPU, with the memory floor beside each case.

    python benchmarks/normalizing.py [--out bench_out] [--reps 11] [--quick] [--check-only]

Each case is checked against torch first, then timed hot (CUDA graph replays) and in an eager
loop (what a Python caller sees, launches included), medians of --reps samples. The floor is the
bytes the op must move at the read probe's rate in the same run (torch.ops.treduce._read_probe):
softmax forward reads x and writes y (2 passes of its bytes), its backward reads g and y and
writes the gradient (3); cross_entropy forward reads the logits once (1), forward and backward
three times (read, then read and write); layer_norm and rms_norm forward 2 (read x, write y),
forward and backward 5 (then read x and g, write dx; the weight's bytes are not counted).
--check-only runs the checks alone (any device).
Writes normalizing.json and normalizing.md to --out.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report  # noqa: E402
import timing  # noqa: E402

import torch_reduce  # noqa: E402

# (op, shape, dtype, dim): rows of LLaMA vocabularies, attention rows, short rows, columns.
SOFTMAX_CASES = [
    ((4096, 32000), torch.bfloat16, -1), ((4096, 32000), torch.float32, -1), ((4096, 128256), torch.float32, -1),
    ((2048, 128256), torch.bfloat16, -1), ((16384, 1024), torch.bfloat16, -1), ((65536, 128), torch.float32, -1),
    ((64, 16, 128, 128), torch.float16, -1), ((32, 12, 197, 197), torch.float32, -1), ((1000, 4096), torch.float32, 0),
    ((32, 1000, 49), torch.float32, 1),
]
XENT_CASES = [((4096, 128256), torch.float32), ((4096, 32000), torch.float32), ((2048, 32000), torch.bfloat16),
              ((8192, 1000), torch.float32), ((8, 21, 128, 128), torch.float32)]
# (shape, dtype): LLaMA hidden sizes over 4096 tokens, ViT-B/16's 197 tokens x 64 images, a
# float32 BERT-large, rows longer than a CUDA team holds (16384 bfloat16).
NORM_CASES = [((4096, 2048), torch.bfloat16), ((4096, 4096), torch.bfloat16), ((12608, 768), torch.bfloat16),
              ((8192, 1024), torch.float32), ((2048, 8192), torch.bfloat16), ((1024, 16384), torch.bfloat16)]
QUICK_BYTES = 1 << 26


def small(shape, dtype):
    n = 1
    for s in shape:
        n *= s
    return n * torch.finfo(dtype).bits // 8 <= QUICK_BYTES


def median_us(fn, mode, reps):
    return statistics.median(timing.time_hot(fn, reps) if mode == "hot" else timing.time_eager(fn, reps))


def softmax_rows(device, reps, quick, check_only):
    rows = []
    backward = {"softmax": torch.ops.aten._softmax_backward_data, "log_softmax": torch.ops.aten._log_softmax_backward_data}
    for shape, dtype, dim in SOFTMAX_CASES:
        if quick and not small(shape, dtype):
            continue
        if check_only:
            shape = tuple(min(s, 300) for s in shape)
        x = torch.randn(shape, device=device).to(dtype)
        for name in ("softmax", "log_softmax"):
            ours = lambda: getattr(torch_reduce, name)(x, dim)  # noqa: E731
            ref = lambda: getattr(torch, name)(x, dim)  # noqa: E731
            torch.testing.assert_close(ours().float(), ref().float(), rtol=2e-2, atol=1e-4)
            y = ref()
            g = torch.randn_like(y)
            ours_b = lambda: getattr(torch_reduce, name + "_backward")(g, y, dim, dtype)  # noqa: E731
            ref_b = lambda: backward[name](g, y, dim, dtype)  # noqa: E731
            torch.testing.assert_close(ours_b().float(), ref_b().float(), rtol=2e-2, atol=1e-3)
            if check_only:
                continue
            for op, (o, r, passes) in {name: (ours, ref, 2), name + "_backward": (ours_b, ref_b, 3)}.items():
                c = timing.compile_once(r)
                for mode in ("hot", "eager"):
                    rows.append({"op": op, "shape": list(shape), "dtype": str(dtype)[6:], "dim": dim, "mode": mode,
                                 "ours": median_us(o, mode, reps), "torch": median_us(r, mode, reps),
                                 "compile": median_us(c, mode, reps), "passes": passes,
                                 "bytes": x.numel() * x.element_size()})
    return rows


def xent_rows(device, reps, quick, check_only):
    rows = []
    for shape, dtype in XENT_CASES:
        if quick and not small(shape, dtype):
            continue
        if check_only:
            shape = tuple(min(s, 300) for s in shape)
        x = torch.randn(shape, device=device).to(dtype)
        t = torch.randint(0, shape[1], (shape[0],) + tuple(shape[2:]), device=device)
        ours = lambda: torch_reduce.cross_entropy(x, t)  # noqa: E731
        ref = lambda: F.cross_entropy(x, t)  # noqa: E731
        # (torch's 16-bit loss rounds each log-probability to the dtype first)
        tol = dict(rtol=1e-3, atol=1e-3) if dtype in (torch.float32, torch.float64) else dict(rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(ours().float(), ref().float(), **tol)
        xg = x.clone().requires_grad_()

        def step(fn):
            def run():
                xg.grad = None
                fn(xg, t).backward()
            return run

        ours_b = step(torch_reduce.cross_entropy)
        ref_b = step(F.cross_entropy)
        ours_b()
        got = xg.grad.clone()
        ref_b()
        torch.testing.assert_close(got.float(), xg.grad.float(), **tol)
        if check_only:
            continue
        compiled = torch.compile(F.cross_entropy)
        comp_b = step(compiled)
        comp_b()
        common = {"shape": list(shape), "dtype": str(dtype)[6:], "dim": 1, "bytes": x.numel() * x.element_size()}
        for mode in ("hot", "eager"):
            rows.append({"op": "cross_entropy", **common, "mode": mode, "passes": 1, "ours": median_us(ours, mode, reps),
                         "torch": median_us(ref, mode, reps),
                         "compile": median_us(timing.compile_once(ref), mode, reps)})
        # forward and backward: autograd's eager loop (a graph would hold the grad's allocation)
        rows.append({"op": "cross_entropy+backward", **common, "mode": "eager", "passes": 3,
                     "ours": median_us(ours_b, "eager", reps), "torch": median_us(ref_b, "eager", reps),
                     "compile": median_us(comp_b, "eager", reps)})
    return rows


def norm_rows(device, reps, quick, check_only):
    rows = []
    for shape, dtype in NORM_CASES:
        if quick and not small(shape, dtype):
            continue
        if check_only:
            shape = (min(shape[0], 300), shape[1])
        x = torch.randn(shape, device=device).to(dtype)
        w = (torch.rand(shape[-1], device=device) + 0.5).to(dtype)
        b = torch.randn(shape[-1], device=device).to(dtype)
        g = torch.randn(shape, device=device).to(dtype)
        ns = (shape[-1],)
        for name in ("layer_norm", "rms_norm"):
            if name == "layer_norm":
                ours = lambda a, c, d: torch_reduce.layer_norm(a, ns, c, d)  # noqa: E731
                ref = lambda a, c, d: F.layer_norm(a, ns, c, d)  # noqa: E731
            else:
                ours = lambda a, c, d: torch_reduce.rms_norm(a, ns, c)  # noqa: E731
                ref = lambda a, c, d: F.rms_norm(a, ns, c)  # noqa: E731
            torch.testing.assert_close(ours(x, w, b).float(), ref(x, w, b).float(), rtol=2e-2, atol=2e-2)
            leaves = [t.clone().requires_grad_() for t in (x, w, b)]

            def step(fn):
                def run():
                    for t in leaves:
                        t.grad = None
                    fn(*leaves).backward(g)
                return run

            ours_b, ref_b = step(ours), step(ref)
            ours_b()
            got = [t.grad.clone() for t in leaves if t.grad is not None]
            # The gradients against torch's in float64 (torch's own in a 16-bit dtype sum the
            # weight's gradient with that dtype's rounding: 12% off over 300 rows on the CPU).
            wide = [t.detach().double().requires_grad_() for t in leaves]
            ref(*wide).backward(g.double())
            for p, q in zip(got, [t.grad for t in wide if t.grad is not None]):
                torch.testing.assert_close(p.double(), q, rtol=3e-2, atol=1e-2 * (1 + q.abs().max().item()))
            if check_only:
                continue
            common = {"shape": list(shape), "dtype": str(dtype)[6:], "dim": -1, "bytes": x.numel() * x.element_size()}
            fwd, fwd_ref = (lambda: ours(x, w, b)), (lambda: ref(x, w, b))
            for mode in ("hot", "eager"):
                rows.append({"op": name, **common, "mode": mode, "passes": 2, "ours": median_us(fwd, mode, reps),
                             "torch": median_us(fwd_ref, mode, reps),
                             "compile": median_us(timing.compile_once(fwd_ref), mode, reps)})
            comp_b = step(timing.compile_once(ref))
            comp_b()
            rows.append({"op": name + "+backward", **common, "mode": "eager", "passes": 5,
                         "ours": median_us(ours_b, "eager", reps), "torch": median_us(ref_b, "eager", reps),
                         "compile": median_us(comp_b, "eager", reps)})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("bench_out"))
    parser.add_argument("--reps", type=int, default=11)
    parser.add_argument("--quick", action="store_true", help=f"cases of up to {QUICK_BYTES >> 20} MiB")
    parser.add_argument("--check-only", action="store_true", help="check every case against torch, time nothing")
    parser.add_argument("--suites", default="softmax,cross_entropy,norms",
                        help="comma-separated: softmax, cross_entropy, norms (layer_norm and rms_norm)")
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.check_only:
        print("normalizing.py times CUDA only; --check-only runs the checks on the CPU", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    suites = {"softmax": softmax_rows, "cross_entropy": xent_rows, "norms": norm_rows}
    rows = []
    for name in args.suites.split(","):
        rows += suites[name](device, args.reps, args.quick, args.check_only)
    if args.check_only:
        print(f"every case agrees with torch on {device}")
        return 0
    probe_x = torch.empty(1 << 28, dtype=torch.uint8, device=device)
    per_byte = median_us(lambda: torch.ops.treduce._read_probe(probe_x), "hot", args.reps) / (1 << 28)
    for r in rows:
        r["floor"] = r["bytes"] * r["passes"] * per_byte
    env = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "cuda": torch.version.cuda}
    args.out.mkdir(parents=True, exist_ok=True)
    report.write_summary(args.out / "normalizing.json", {"environment": env, "rows": rows})
    lines = [f"# Normalizing ops ({env['gpu']}, torch {env['torch']}), us, medians", "",
             "| op | shape | dtype | dim | mode | ours | torch | compile | floor | best peer / ours | ours / floor |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        best = min(r["torch"], r["compile"])
        lines.append(f"| {r['op']} | {tuple(r['shape'])} | {r['dtype']} | {r['dim']} | {r['mode']} | {r['ours']:.1f} | "
                     f"{r['torch']:.1f} | {r['compile']:.1f} | {r['floor']:.1f} | {best / r['ours']:.2f} | "
                     f"{r['ours'] / r['floor']:.2f} |")
    (args.out / "normalizing.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
