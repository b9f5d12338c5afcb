"""Runs every CUDA variant over a few dtypes and sizes and checks each result: the workload that
scripts/gpu_check.sh runs under compute-sanitizer (memcheck, racecheck, synccheck, initcheck).

Sizes cover one block, several blocks, and enough blocks for the partials to need two more levels;
auto also from misaligned starts.
Then auto over dims, for every op (the statistics too): each kernel of kernels/dims.cuh (teams per row, row segments
with their combine, columns with and without splits, vector and element loads, strided views).
Then variant="exact" over the same dims and sizes, with data over many binades (kernels/exact.cuh).
Then any, all, count_nonzero, aminmax, max, min, argmax and argmin over the same dims and sizes.
(`python scripts/sanitize_cases.py exact` or `... logic` runs those only.) Exits non-zero if any
result is wrong.
"""

import sys

import torch

import torch_reduce

SIZES = [0, 1, 257, 4097, 65537, 300007]
SHORT_SIZES = [2, 3, 5, 6, 61, 126]
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
    (torch.bfloat16, torch.float64),
    (torch.uint8, torch.float64),
    (torch.int32, torch.float16),
]


def _small_ints(shape, dtype):
    return torch.randint(0, 4, shape, device="cuda").to(dtype)


# (name, input maker, dims): one case per kernel path of kernels/dims.cuh.
DIMS_CASES = [
    ("short rows (teams of 2)", lambda d: _small_ints((300, 7), d), -1),
    ("rows of 32 loads of 4-byte types (teams of 8)", lambda d: _small_ints((300, 128), d), -1),
    # Whole rows of 8 to 64 vectors of floats: a team a row, all loads at once (whole_rows_kernel).
    ("whole short rows", lambda d: _small_ints((301, 64), d), -1),
    ("whole short rows, longer", lambda d: _small_ints((299, 256), d), -1),
    # Whole rows of a count of vectors that is not a power of two: the last slots load nothing.
    ("whole short rows of 7 and 14 vectors", lambda d: _small_ints((301, 56), d), -1),
    ("whole short rows of 24 and 12 vectors", lambda d: _small_ints((299, 96), d), -1),
    ("rows (teams of 32)", lambda d: _small_ints((37, 1000), d), -1),
    ("long rows (segments + combine)", lambda d: _small_ints((3, 70001), d), -1),
    # Enough rows of at least 1024 vectors for every multiprocessor: a block a row, of whole
    # vectors (two loads a thread, two_vector_rows_kernel: float32 rows of 4096, 2-byte rows of
    # 8192; float32 rows of 8192 four), then not whole.
    ("many rows of two vectors a thread (a block a row)", lambda d: _small_ints((600, 4096), d), -1),
    ("many long rows (a block a row)", lambda d: _small_ints((600, 8192), d), -1),
    ("many long rows, not whole vectors", lambda d: _small_ints((600, 8201), d), -1),
    ("misaligned rows", lambda d: _small_ints((40, 301), d)[:, 1:], 1),
    ("strided rows", lambda d: _small_ints((300, 50), d).t(), 1),
    ("columns (splits + combine)", lambda d: _small_ints((5000, 130), d), 0),
    ("columns (one split)", lambda d: _small_ints((130, 5000), d), 0),
    ("3-D middle dim", lambda d: _small_ints((33, 65, 17), d), 1),
    ("misaligned columns", lambda d: _small_ints((64, 34), d)[:, 1:], 0),
    # Rows of few outputs: fewer than 32 threads across, the rows of a warp combined by shuffles.
    ("columns of few outputs", lambda d: _small_ints((20000, 16), d), 0),
    ("columns of few outputs, not vectors", lambda d: _small_ints((3001, 5), d), 0),
    ("columns, a partial vector last", lambda d: _small_ints((40, 9, 32), d)[:, :, :29], 1),
    # Few long rows: 2-byte types take 8-byte vectors here; the last 2 outputs are elements.
    ("columns, 8-byte vectors, a partial vector last", lambda d: _small_ints((16, 65544), d)[:, :65538], 0),
    ("two dims", lambda d: _small_ints((6, 7, 8), d), (0, 2)),
    # Any layout (layout.h): two reduced runs, rows then the partials' combine (batch-norm
    # statistics of NCHW) and columns then the combine; kept dims in another order in memory than
    # in the result (outer runs); short reductions over many outputs (tile_kernel), the result
    # transposed against the input; a stride-0 dim.
    ("two reduced runs, rows first", lambda d: _small_ints((5, 6, 40, 41), d), (0, 2, 3)),
    ("two reduced runs, columns first", lambda d: _small_ints((300, 7, 33), d), (0, 2)),
    ("kept dims out of order", lambda d: _small_ints((9, 70, 6, 5), d).permute(3, 1, 2, 0), 2),
    ("short reduction, many outputs", lambda d: _small_ints((1100, 3, 16), d), 1),
    ("short reduction, transposed result", lambda d: _small_ints((3000, 7, 5), d).transpose(0, 2), 1),
    # ... transpose tiles whose lanes along inner fit short inner runs (4 to 32 lanes).
    ("short reduction, transposed, inner 12", lambda d: _small_ints((40000, 3, 12), d).transpose(0, 2), 1),
    ("transposed map, inner 28", lambda d: _small_ints((20000, 1, 28), d).transpose(0, 2), 1),
    ("long map, aligned rows", lambda d: _small_ints((64, 1, 4096), d), 1),
    ("long map, rows of 4099", lambda d: _small_ints((3, 1, 4099), d), 1),
    ("stride-0 reduced dim", lambda d: _small_ints((40, 1, 33), d).expand(40, 9, 33), 1),
    # Kept dims of stride 0 over 2^16 results: the distinct results copied along them
    # (repeat_kernel): words of a run, of one result's copies, and elements.
    ("stride-0 kept dim, runs of 64", lambda d: _small_ints((4, 1, 3, 64), d).expand(4, 300, 3, 64), 2),
    ("stride-0 kept dim innermost", lambda d: _small_ints((300, 3, 1), d).expand(300, 3, 256), 1),
    ("stride-0 kept dim, runs of 7", lambda d: _small_ints((4, 1, 3, 7), d).expand(4, 2500, 3, 7), 2),
    # Dense short rows: a vector's worth of rows a thread, the last rows an element a load
    # (short_rows_kernel); unaligned, slabs. Dense slabs of narrow columns of up to 8 elements
    # an output: an output a thread from shared memory; short reductions of few outputs: tiles
    # in blocks under 256 threads.
    ("dense short rows", lambda d: _small_ints((400001, 3), d), -1),  # 1 MiB and more
    ("dense rows of 7", lambda d: _small_ints((150011, 7), d), -1),
    ("dense short rows, unaligned (slabs)", lambda d: _small_ints((70002, 3), d)[1:], -1),
    # Several reduced runs whose contiguous one is first (rows, then each result's partials);
    # long narrow columns of several outer indexes (split, then their combine).
    ("several reduced runs, rows first", lambda d: _small_ints((16, 64, 300), d)[:, ::2], None),
    ("long narrow columns", lambda d: _small_ints((5, 20011, 28), d), 1),
    ("narrow columns (slabs)", lambda d: _small_ints((3001, 3, 28), d).permute(0, 2, 1), -1),
    ("dense rows, results transposed (slabs read as one run)", lambda d: _small_ints((64, 19, 32, 12), d).transpose(0, 1), -1),
    ("few short reductions (small tiles)", lambda d: _small_ints((8, 224, 40), d).permute(0, 2, 1), 0),
    # Short columns of whole pieces (short_columns_kernel: 4 elements, 2 of 8-byte ones), the
    # outer index through one run and two, rows of one piece; transposed rows of two and four
    # 16-byte words (tile_kernel, a row's words at once).
    ("short columns of vectors", lambda d: _small_ints((45001, 3, 16), d)[1:], 1),
    ("short columns of one piece", lambda d: _small_ints((90001, 2, 4), d)[1:], 1),
    ("short columns, two outer runs", lambda d: _small_ints((6500, 7, 2, 16), d).transpose(0, 1), 2),
    ("transposed rows of 8", lambda d: _small_ints((20000, 16, 8), d).transpose(1, 0), -1),
    ("transposed rows of 16", lambda d: _small_ints((20000, 16, 16), d).transpose(1, 0), -1),
    # argmax and argmin over every dim of a view, read in logical order (no copy); over a dim of
    # one element (zeros, a kernel).
    ("every dim of a transposed view", lambda d: _small_ints((3, 96, 17), d).transpose(0, 1), None),
    ("a dim of one element", lambda d: _small_ints((1, 4099), d), 0),
]


def _dims_and_full_inputs(offsets):
    """(name, input maker, dims): every DIMS_CASES path, then full reductions of every size from
    each of `offsets` elements past the allocation's start."""
    return list(DIMS_CASES) + [(f"n={n} offset={o}", (lambda d, n=n, o=o: _small_ints((n + o,), d)[o:]), None)
                               for n in SIZES[1:] + SHORT_SIZES for o in offsets]


def _sum_is_exact(x: torch.Tensor, variant: str, out_dtype, label: str) -> bool:
    """Small integers: every variant's accumulation is exact, so the result is the exact sum
    rounded once to the result dtype."""
    got = torch.ops.treduce.sum(x, variant, dtype=out_dtype)
    exact = torch.tensor(float(x.cpu().to(torch.int64).sum().item()), dtype=torch.float64)
    want = exact.to(got.dtype).item()
    got = got.item()
    if got != want:
        print(f"WRONG {variant} {x.dtype} dtype={out_dtype} {label}: got {got}, want {want}")
    return got == want


def main(only_exact: bool = False) -> int:
    failures = 0
    checked = 0
    if only_exact:
        return exact_cases()
    for variant in (v.name for v in torch_reduce.variants("cuda")):
        for dtype, out_dtype in CASES:
            for n in SIZES:
                x = torch.randint(0, 4, (n,), device="cuda").to(dtype)
                checked += 1
                failures += not _sum_is_exact(x, variant, out_dtype, f"n={n}")
    # auto from a misaligned start: its vectors begin at the next 128-byte boundary; the head
    # is loaded by elements, or 4-byte words for 1- and 2-byte types, and the tail by elements.
    # Each view ends where its allocation ends (no caching allocator under the sanitizer), so a
    # read past the last element is out of bounds. The short sizes end inside the first line.
    for dtype, out_dtype in CASES:
        size = torch.empty((), dtype=dtype).element_size()
        for n in SIZES + SHORT_SIZES:
            for offset in (1, 2, 3, 128 // size - 1):
                x = torch.randint(0, 4, (n + offset,), device="cuda").to(dtype)[offset:]
                checked += 1
                failures += not _sum_is_exact(x, "auto", out_dtype, f"n={n} offset={offset}")
    for name, make, dims in DIMS_CASES:
        for dtype in (torch.float32, torch.bfloat16, torch.uint8, torch.int64):
            x = make(dtype)
            for op in ("sum", "mean", "amax", "amin"):
                if op == "mean" and not dtype.is_floating_point:
                    continue
                got = getattr(torch_reduce, op)(x, dims)
                # The reference on the CPU: torch's CUDA reductions read scratch they never
                # initialised, which initcheck would report among ours.
                xc = x.cpu()
                want = getattr(torch, op)(xc.double() if op in ("sum", "mean") else xc, dims).to(got.dtype)
                checked += 1
                # Small integers: exact except for mean's division and bfloat16 rounding.
                ok = torch.allclose(got.cpu().double(), want.double(), rtol=1e-2, atol=1e-3)
                if not ok:
                    failures += 1
                    print(f"WRONG {op} {name} {dtype} dim={dims}")
    # The statistics and the other struct accumulators (Welford's; nanmean's sum and count;
    # logsumexp's maximum and sum) and nansum: every dims path, and full reductions of every size
    # from aligned and misaligned starts.
    stat_inputs = _dims_and_full_inputs((0, 1))
    for name, make, dims in stat_inputs:
        for dtype in (torch.float32, torch.bfloat16, torch.float64):
            x = make(dtype)
            calls = [(op, (dims if dims is not None or op != "logsumexp" else 0,))
                     for op in ("var", "std_mean", "nansum", "nanmean", "logsumexp")]
            # vector_norm's orders: a sum of squares, a maximum, a count, a sum of |x|^p
            calls += [("vector_norm", (ord, dims)) for ord in (2, float("inf"), 0, 0.5)]
            if dims is None or isinstance(dims, int):
                calls.append(("prod", () if dims is None else (dims,)))
            for op, args in calls:
                got = getattr(torch_reduce, op)(x, *args)
                ref = torch.linalg.vector_norm if op == "vector_norm" else getattr(torch, op)
                want = ref(x.cpu().double(), *args)
                got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
                checked += 1
                # (the reference rounded to the result's dtype: a float32 product may overflow)
                ok = all(torch.allclose(g.cpu().double(), w.to(g.dtype).double(), rtol=1e-2, atol=1e-3, equal_nan=True)
                         for g, w in zip(got, want))
                if not ok:
                    failures += 1
                    print(f"WRONG {op}{args} {name} {dtype}")
    print(f"sanitize_cases: {checked - failures} passed, {failures} failed (all but exact)")
    return max(1 if failures else 0, logic_cases(), exact_cases())


def logic_cases() -> int:
    """any, all, count_nonzero (sums of x != 0, 1-byte inputs counted four at a time), aminmax and
    the indexed max, min, argmax, argmin: every dims path and full reductions from aligned and
    misaligned starts, against torch's CPU results (exact)."""
    failures = 0
    checked = 0
    inputs = _dims_and_full_inputs((0, 1, 3))
    for name, make, dims in inputs:
        for dtype in (torch.bool, torch.uint8, torch.int8, torch.int64, torch.bfloat16, torch.float32, torch.float64):
            x = make(dtype)
            xc = x.cpu()
            one = dims if isinstance(dims, int) else None  # the ops of one dim
            calls = [(op, (dims,) if dims is not None else ()) for op in ("any", "all", "count_nonzero")]
            calls += [("aminmax", {"dim": one})]
            if one is not None:
                calls += [(op, (one,)) for op in ("max", "min")]
            if dtype != torch.bool:
                calls += [(op, (one,)) for op in ("argmax", "argmin")]
            for op, args in calls:
                if isinstance(args, dict):
                    got, want = getattr(torch_reduce, op)(x, **args), getattr(torch, op)(xc, **args)
                else:
                    got, want = getattr(torch_reduce, op)(x, *args), getattr(torch, op)(xc, *args)
                got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
                checked += 1
                if not all(g.dtype == w.dtype and torch.equal(g.cpu(), w) for g, w in zip(got, want)):
                    failures += 1
                    print(f"WRONG {op}{args} {name} {dtype}")
    print(f"sanitize_cases: {checked - failures} passed, {failures} failed (logic and indexed)")
    return 1 if failures else 0


def exact_cases() -> int:
    failures = 0
    checked = 0
    # variant="exact" (kernels/exact.cuh): every dims path above and full sums of every size, from
    # aligned and misaligned starts, on data whose binades move the windows; results and states
    # against the CPU's exact bits.
    exact_inputs = _dims_and_full_inputs((0, 1, 3))
    for name, make, dims in exact_inputs:
        for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            x = make(dtype)
            wide = (x.double() - 1.5) * torch.exp2(torch.randint(-60, 60, x.shape, device="cuda").double())
            for data in (x, wide.to(dtype)):
                checked += 1
                got = torch_reduce.sum(data, dims, variant="exact")
                state = torch.ops.treduce._exact_state(data, None if dims is None else dims)
                want = torch_reduce.sum(data.cpu(), dims, variant="exact")
                ok = torch.equal(got.cpu().view(-1).view(torch.uint8), want.view(-1).view(torch.uint8)) and \
                    torch.equal(state.cpu(), torch.ops.treduce._exact_state(data.cpu(), None if dims is None else dims))
                if not ok:
                    failures += 1
                    print(f"WRONG exact {name} {dtype}")
    print(f"sanitize_cases: {checked - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["logic"]:
        sys.exit(logic_cases())
    sys.exit(main(only_exact=sys.argv[1:] == ["exact"]))
