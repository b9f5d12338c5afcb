"""Runs every CUDA variant over a few dtypes and sizes and checks each result: the workload that
scripts/gpu_check.sh runs under compute-sanitizer (memcheck, racecheck, synccheck, initcheck).

Sizes cover one block, several blocks, and enough blocks for the partials to need two more levels.
Exits non-zero if any result is wrong.
"""

import sys

import torch

import torch_reduce

SIZES = [0, 1, 257, 4097, 65537, 300007]
# (input dtype, dtype=): 1-, 2-, 4- and 8-byte inputs, all three accumulators, a cast on load.
CASES = [
    (torch.bool, None),
    (torch.uint8, None),
    (torch.int16, None),
    (torch.int32, None),
    (torch.int64, None),
    (torch.float16, None),
    (torch.bfloat16, None),
    (torch.float32, None),
    (torch.float64, None),
    (torch.float32, torch.float64),
    (torch.int32, torch.float16),
]


def main() -> int:
    failures = 0
    checked = 0
    for variant in (v.name for v in torch_reduce.variants("cuda")):
        for dtype, out_dtype in CASES:
            for n in SIZES:
                # Small integers: every variant's accumulation is exact, so the result is the
                # exact sum rounded once to the result dtype.
                x = torch.randint(0, 4, (n,), device="cuda").to(dtype)
                got = torch.ops.treduce.sum(x, variant, dtype=out_dtype)
                exact = torch.tensor(float(x.to(torch.int64).sum().item()), dtype=torch.float64)
                want = exact.to(got.dtype).item()
                got = got.item()
                checked += 1
                if got != want:
                    failures += 1
                    print(f"WRONG {variant} {dtype} dtype={out_dtype} n={n}: got {got}, want {want}")
    print(f"sanitize_cases: {checked - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
