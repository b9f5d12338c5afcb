"""What the LibTorch stable ABI would cost torch_reduce per call: one small op written both ways
(unstable.cpp: torch's C++ API with a C++ autograd kernel, as csrc/ is; stable.cpp: the stable ABI,
whose gradient must come from Python), timed call by call on the CPU, where the host cost is all
there is. Builds both with torch.utils.cpp_extension (about a minute each).

    python benchmarks/stable_abi/probe.py [--calls 20000] [--reps 9]
"""

import argparse
import statistics
import time
from pathlib import Path

import torch
from torch.utils.cpp_extension import load

HERE = Path(__file__).resolve().parent


def build():
    for name in ("unstable", "stable"):
        load(name=f"treduce_probe_{name}", sources=[str(HERE / f"{name}.cpp")], is_python_module=False,
             extra_cflags=["-O3"], verbose=False)

    def backward(ctx, grad):
        return grad.expand(ctx.shape)

    def setup_context(ctx, inputs, output):
        ctx.shape = inputs[0].shape

    torch.library.register_autograd("treduce_probe_stable::sum", backward, setup_context=setup_context)


def per_call_us(fn, x, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - start) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()
    build()
    unstable = torch.ops.treduce_probe_unstable.sum.default
    stable = torch.ops.treduce_probe_stable.sum.default
    stable_plain = torch.ops.treduce_probe_stable.sum_plain.default
    x = torch.randn(16)
    xg = x.clone().requires_grad_()
    cases = {
        "torch.sum (reference)": (torch.sum, x),
        "full API, C++ autograd": (unstable, x),
        "stable ABI, no autograd": (stable_plain, x),
        "stable ABI, Python autograd": (stable, x),
        "full API, C++ autograd, input requires grad": (unstable, xg),
        "stable ABI, Python autograd, input requires grad": (stable, xg),
    }
    for fn, t in cases.values():  # right answers, and warm
        torch.testing.assert_close(fn(t), x.sum())
    for fn, t in cases.values():
        per_call_us(fn, t, 1000)
    samples = {name: [] for name in cases}
    for _ in range(args.reps):  # interleaved, so drifts of the host hit every case alike
        for name, (fn, t) in cases.items():
            samples[name].append(per_call_us(fn, t, args.calls))
    print(f"torch {torch.__version__}, {args.calls} calls x {args.reps} reps, 16 float32 elements on the CPU")
    print(f"| case | median us/call | min | max |\n|---|---|---|---|")
    for name, s in samples.items():
        print(f"| {name} | {statistics.median(s):.2f} | {min(s):.2f} | {max(s):.2f} |")


if __name__ == "__main__":
    main()
