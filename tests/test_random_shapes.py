"""Any layout, any dims: how auto folds a tensor's strides (torch_reduce.explain), and the random
real-model-like cases of benchmarks/random_shapes.py at small sizes, every result against torch's
(values, dtype, shape and strides) and the same bits on a second call, on the CPU and (when there
is one) the GPU."""

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_reduce
from torch_reduce._table import OPS
from util import DEVICES, UNIT_ROUNDOFF, cuda_only, fresh_generator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import random_shapes  # noqa: E402
import report  # noqa: E402


def test_contiguous_layouts_fold_as_one_view():
    x = torch.empty(6, 5, 4)
    assert torch_reduce.explain(x, 1) == {
        "outer": 6, "reduced": 5, "inner": 4, "in_outer": 20, "in_reduced": 4, "in_inner": 1, "out_outer": 4,
        "out_inner": 1, "outer_runs": [], "combine": 1, "repeats": 1, "distinct": 0, "copy": False, "done": False, "plan": None}
    rows = torch_reduce.explain(x, (1, 2))  # neighbours of one kind merge
    assert (rows["outer"], rows["reduced"], rows["inner"], rows["in_reduced"]) == (6, 20, 1, 1)
    full = torch_reduce.explain(x)
    assert (full["outer"], full["reduced"], full["inner"], full["in_reduced"]) == (1, 120, 1, 1)


def test_a_dense_permuted_tensor_is_read_in_memory_order():
    x = torch.empty(6, 5, 4).permute(2, 0, 1)
    full = torch_reduce.explain(x)  # one run of storage
    assert (full["reduced"], full["in_reduced"], full["combine"], full["copy"]) == (120, 1, 1, False)
    # Kept dims in another order in memory than in the result: two outer runs, each with its own
    # output stride (the result is contiguous, as torch's).
    plan = torch_reduce.explain(torch.empty(8, 6, 5, 4).permute(3, 1, 2, 0), 2)  # sizes (4, 6, 5, 8)
    assert plan["copy"] is False and plan["combine"] == 1
    assert (plan["reduced"], plan["in_reduced"], plan["inner"], plan["in_inner"], plan["out_inner"]) == (5, 4, 4, 1, 48)
    assert plan["outer_runs"] == [[8, 120, 1], [6, 20, 8]]
    assert plan["outer"] == 48


def test_batch_norm_statistics_are_rows_then_a_combine():
    # (0, 2, 3) of NCHW: two runs of reduced dims around C. Rows of H * W for every (n, c), their
    # partials at [n][c], then each channel's N partials combined.
    plan = torch_reduce.explain(torch.empty(64, 256, 56, 56), (0, 2, 3))
    assert (plan["outer"], plan["reduced"], plan["inner"], plan["in_outer"], plan["out_outer"]) == (64 * 256, 3136, 1, 3136, 1)
    assert plan["combine"] == 64 and plan["copy"] is False
    # channels_last: N, H and W are one run of memory, C the innermost: columns, one pass.
    cl = torch_reduce.explain(torch.empty(64, 256, 56, 56).contiguous(memory_format=torch.channels_last), (0, 2, 3))
    assert (cl["outer"], cl["reduced"], cl["inner"], cl["in_reduced"], cl["combine"]) == (1, 64 * 3136, 256, 256, 1)


def test_the_longest_reduced_run_is_the_pass_over_memory():
    # (0, 2) of (4096, 77, 256): the 4096 rows are read as columns, each of the 256 positions of
    # the inner run a partial of its own, combined afterwards (256 partials, not 4096).
    plan = torch_reduce.explain(torch.empty(4096, 77, 256), (0, 2))
    assert (plan["reduced"], plan["in_reduced"], plan["inner"], plan["in_inner"], plan["combine"]) == (4096, 77 * 256, 256, 1, 256)
    # A slice's full reduction: the 1000 rows, 100 partials.
    sliced = torch.empty(1000, 200)[:, :100]
    plan = torch_reduce.explain(sliced)
    assert (plan["reduced"], plan["in_reduced"], plan["inner"], plan["combine"], plan["copy"]) == (1000, 200, 100, 100, False)


def test_expanded_dims_are_read_through_stride_zero():
    # A reduced dim expanded with stride 0 is not read at all: a sum is the sum of one copy of
    # each element, times the repeats (the projection's); a transpose of the result's run keeps
    # its stride.
    x = torch.empty(5, 1, 7).expand(5, 3, 7)
    plan = torch_reduce.explain(x, 1)
    assert (plan["reduced"], plan["repeats"], plan["copy"]) == (1, 3, False)
    assert torch_reduce.explain(x, 1, "amax")["repeats"] == 1  # the extrema ignore repeats
    # Positions are the first copy's: an expanded dim before every other reduced dim read is not
    # read either; after one (argmax over all of (5, 3, 7)), it is.
    assert torch_reduce.explain(x, 1, "argmax")["reduced"] == 1
    assert torch_reduce.explain(x, None, "argmax")["reduced"] * torch_reduce.explain(x, None, "argmax")["combine"] == 105
    got = torch_reduce.sum(torch.arange(35.0).reshape(5, 1, 7).expand(5, 3, 7), 1)
    assert torch.equal(got, torch.arange(35.0).reshape(5, 7) * 3)


def test_expanded_dims_are_the_outermost_runs():
    # sum of (3, 1, 8, 5) expanded to 1024 over dim 0 (40960 results): the expanded kept dim is
    # the outer index (its results 40 apart), the 40 contiguous elements the inner run;
    # innermost, it made neighbouring results read one element and write 40 apart.
    plan = torch_reduce.explain(torch.empty(3, 1, 8, 5).expand(3, 1024, 8, 5), 0)
    assert (plan["outer"], plan["in_outer"], plan["out_outer"], plan["distinct"]) == (1024, 0, 40, 0)
    assert (plan["reduced"], plan["in_reduced"], plan["inner"], plan["in_inner"], plan["out_inner"]) == (3, 40, 40, 1, 1)
    # From 2^16 results the kernels reduce the 3200 distinct ones, then copy them along dim 1.
    plan = torch_reduce.explain(torch.empty(3, 1, 80, 40).expand(3, 3072, 80, 40), 0)
    assert (plan["outer"], plan["reduced"], plan["in_reduced"], plan["inner"], plan["distinct"]) == (1, 3, 3200, 3200, 3200)


EXPANDED_OPS = {
    "amax": torch.amax, "amin": torch.amin, "mean": torch.mean, "nanmean": torch.nanmean, "sum": torch.sum,
    "nansum": torch.nansum, "logsumexp": torch.logsumexp,
    "var": torch.var, "std": lambda x, d: torch.std(x, d, correction=0),
    "var_mean": lambda x, d: torch.var_mean(x, d, correction=2),
    "std_mean": lambda x, d: torch.std_mean(x, d),
    "norm": lambda x, d: torch.linalg.vector_norm(x, 2, d), "norm1": lambda x, d: torch.linalg.vector_norm(x, 1, d),
    "norm0": lambda x, d: torch.linalg.vector_norm(x, 0, d), "norm_inf": lambda x, d: torch.linalg.vector_norm(x, float("inf"), d),
    "norm3": lambda x, d: torch.linalg.vector_norm(x, 3, d), "count_nonzero": torch.count_nonzero,
    "sum64": lambda x, d: torch.sum(x, d, dtype=torch.float64),
}


def call_expanded(ns, op: str, x: torch.Tensor, dim):
    """Op `op` of EXPANDED_OPS through torch (ns=torch) or torch_reduce, dims as a tuple or None."""
    f = EXPANDED_OPS[op]
    if ns is torch_reduce:
        f = {"std": lambda x, d: torch_reduce.std(x, d, correction=0),
             "var_mean": lambda x, d: torch_reduce.var_mean(x, d, correction=2),
             "norm": lambda x, d: torch_reduce.vector_norm(x, 2, d), "norm1": lambda x, d: torch_reduce.vector_norm(x, 1, d),
             "norm0": lambda x, d: torch_reduce.vector_norm(x, 0, d),
             "norm_inf": lambda x, d: torch_reduce.vector_norm(x, float("inf"), d),
             "norm3": lambda x, d: torch_reduce.vector_norm(x, 3, d),
             "sum64": lambda x, d: torch_reduce.sum(x, d, dtype=torch.float64)}.get(op) or getattr(torch_reduce, op)
    if dim is None and op in ("amax", "amin", "logsumexp", "nanmean", "nansum", "var", "var_mean", "std_mean", "mean", "sum"):
        dim = tuple(range(x.dim()))  # every dim: the same as None, through the dim argument
    return f(x, dim)


# Maps (a reduced dim of one element) whose results are transposed against the input: on the
# CPU along the result's contiguous run where that is longer than the input's inner run
# (reduce_map), else along inner; on CUDA, from a block a multiprocessor of 4096-element tiles,
# for accumulators of 8 bytes or more, transpose_map_kernel (WIDE_MAP_CASES: inner runs of 33 to
# 1100, partial tiles both ways, two outer runs, every element size); every op kind, against
# torch (values, dtype, strides).
MAP_CASES = [
    random_shapes.Case("any", [112, 1517, 1, 3], "transpose", [0, 3], 2, "float32"),
    random_shapes.Case("amax", [8, 1000, 1, 5], "transpose", [0, 3], 2, "float32"),
    random_shapes.Case("var", [16, 300, 1, 7], "transpose", [0, 3], 2, "bfloat16"),
    random_shapes.Case("max", [16, 300, 1, 7], "transpose", [0, 3], 2, "int16"),
    random_shapes.Case("logsumexp", [33, 64, 1, 2], "transpose", [0, 3], 2, "float16"),
    random_shapes.Case("prod", [20, 50, 1, 3], "permute", [3, 1, 2, 0], 2, "int32"),
    random_shapes.Case("mean", [3, 40, 1, 30], "transpose", [0, 3], 2, "float64"),  # the result's run shorter: inner
    random_shapes.Case("sum", [300, 7, 1, 2], "permute", [3, 1, 2, 0], -2, "uint8"),
]
WIDE_MAP_CASES = [
    random_shapes.Case("all", [1, 40, 331, 64], "permute", [3, 2, 1, 0], 3, "bfloat16"),
    random_shapes.Case("amin", [1, 64, 20011], "permute", [2, 0, 1], 1, "int64"),
    random_shapes.Case("var", [9000, 1, 100], "transpose", [0, 2], 1, "bfloat16"),
    random_shapes.Case("max", [9000, 1, 40], "transpose", [0, 2], 1, "int16"),
    random_shapes.Case("sum", [3000, 1, 200], "transpose", [0, 2], 1, "uint8"),
    random_shapes.Case("count_nonzero", [600, 1, 1100], "transpose", [0, 2], 1, "float16"),
    random_shapes.Case("logsumexp", [9000, 1, 33], "transpose", [0, 2], 1, "float32"),
    random_shapes.Case("std_mean", [2, 9000, 1, 40], "transpose", [1, 3], 2, "float64"),
]


@pytest.mark.parametrize("device", DEVICES)
def test_maps_of_transposed_results_against_torch(device):
    gen, seed = fresh_generator(device)
    for case in MAP_CASES + WIDE_MAP_CASES:
        x = random_shapes.make_input(case, device, gen)
        if device == "cuda" and case in WIDE_MAP_CASES:
            assert kernels(torch_reduce.explain(x, case.dim, case.op)) == ["transpose_map_kernel"], case.label()
        _, ours = random_shapes.calls(case)
        problem = random_shapes.check(case, x, ours(x), random_shapes.reference(case, x))
        assert problem is None, (case.label(), problem, seed)


@pytest.mark.parametrize("device", DEVICES)
def test_expanded_reduced_dims_against_torch(device):
    # Every op of the family over expanded (stride 0) reduced dims: the extrema, any, all and the
    # means skip them, sums, var, logsumexp, norms and products take the repeats into their
    # projection, the indexed ops skip those before every other reduced dim and read the rest;
    # against torch, a NaN in one case, and
    # full reductions (one dense run once the expanded dims are dropped) beside dims.
    gen, seed = fresh_generator(device)
    base = torch.randn(5, 1, 7, generator=gen, device=device)
    with_nan = base.clone()
    with_nan[2, 0, 3] = float("nan")
    layouts = [(base.expand(5, 6, 7), (1,)), (base.expand(5, 6, 7), (0, 1)), (base.expand(5, 6, 7), None),
               (with_nan.expand(5, 6, 7), (1,)), (with_nan.expand(5, 6, 7), (0, 1)),
               (base[:1, :, :1].expand(4, 9, 1), (0, 1)), (base[0, 0, :4].expand(3, 4), (0,)),
               (base.expand(5, 6, 7).transpose(0, 2), (1, 2)), (base.reshape(35, 1).expand(35, 300), None),
               (base.reshape(35, 1).expand(35, 300), (1,))]
    for x, dim in layouts:
        count = x.numel() // max(1, torch.sum(x, dim).numel()) if dim is not None else x.numel()
        for op in EXPANDED_OPS:
            # float32 against float64 (x.double()): a repeated sum is more accurate than torch's
            # float32 one, so the bound is the float32 sum's, 1e-5 relative and 2^-20 a term.
            tup = lambda r: r if isinstance(r, tuple) else (r,)  # noqa: E731
            want64 = tup(call_expanded(torch, op, x.double(), dim))
            got, want = tup(call_expanded(torch_reduce, op, x, dim)), tup(call_expanded(torch, op, x, dim))
            assert len(got) == len(want)
            for g, w, w64 in zip(got, want, want64):
                assert g.shape == w.shape and g.dtype == w.dtype, (op, dim, g.shape, w.shape, g.dtype, w.dtype)
                torch.testing.assert_close(g.double(), w64.double(), rtol=1e-5, atol=count * 2.0 ** -20,
                                           equal_nan=True, msg=lambda m: f"{op} {dim} seed {seed}: {m}")
        for op in ("any", "all"):
            b = x > 0
            want = getattr(torch, op)(b, dim) if dim is not None else getattr(torch, op)(b)
            got = getattr(torch_reduce, op)(b, dim) if dim is not None else getattr(torch_reduce, op)(b)
            assert torch.equal(got, want), (op, dim, seed)
        if dim is None or len(dim) == 1:
            d = None if dim is None else dim[0]
            mn, mx = torch_reduce.aminmax(x, dim=d)
            tmn, tmx = torch.aminmax(x, dim=d)
            torch.testing.assert_close((mn, mx), (tmn, tmx), equal_nan=True, msg=lambda m: f"aminmax seed {seed}: {m}")
            for op in ("argmax", "argmin"):
                assert torch.equal(getattr(torch_reduce, op)(x, d), getattr(torch, op)(x, d)), (op, dim, seed)
            if d is not None:
                for op in ("max", "min"):
                    got, want = getattr(torch_reduce, op)(x, d), getattr(torch, op)(x, d)
                    assert torch.equal(got.indices, want.indices), (op, dim, seed)
                    torch.testing.assert_close(got.values, want.values, equal_nan=True, rtol=0, atol=0)
                prod = base.clamp(-1.5, 1.5).expand_as(x) if x.shape == base.expand(5, 6, 7).shape else x
                torch.testing.assert_close(torch_reduce.prod(prod, d), torch.prod(prod, d), rtol=1e-5, atol=1e-30,
                                           equal_nan=True, msg=lambda m: f"prod {dim} seed {seed}: {m}")


@pytest.mark.parametrize("device", DEVICES)
def test_expanded_reduced_dims_of_integers_wrap_as_torch(device):
    # Integers exact: a sum of repeats wraps as the repeated additions would (int64 near its
    # limits, int32 summed in int64), products wrap as repeated products, bool sums count.
    gen, seed = fresh_generator(device)
    big = torch.randint(-(1 << 62), 1 << 62, (6, 1, 5), generator=gen, device=device)
    small = torch.randint(-9, 10, (6, 1, 5), generator=gen, device=device, dtype=torch.int32)
    flags = torch.randint(0, 2, (6, 1, 5), generator=gen, device=device).bool()
    for x in (big, small, flags):
        for dim in ((1,), (0, 1), None):
            e = x.expand(6, 13, 5)
            want = torch.sum(e, dim) if dim is not None else torch.sum(e)
            got = torch_reduce.sum(e, dim) if dim is not None else torch_reduce.sum(e)
            assert torch.equal(got, want), (x.dtype, dim, seed)
            want = torch.count_nonzero(e, dim)
            assert torch.equal(torch_reduce.count_nonzero(e, dim), want), ("count_nonzero", x.dtype, dim, seed)
        if x.dtype != torch.bool:
            e = x.expand(6, 13, 5)
            assert torch.equal(torch_reduce.prod(e, 1), torch.prod(e, 1)), ("prod", x.dtype, seed)


def kernels(plan: dict) -> list[str]:
    return [step["kernel"] for step in plan["plan"]["steps"]]


@cuda_only
def test_explain_gives_the_kernels_a_call_launches():
    # The planner's choices are values: a transposed short reduction goes to the transpose tiles;
    # NCHW statistics are rows into partials, then their combine; a full sum is one kernel in an
    # eager call (the stream's ticket); another op or dtype of the same layout may plan
    # differently, but a layout planned twice gets the same plan.
    x = torch.empty(8, 2, 1024, 2048, device="cuda").permute(0, 3, 2, 1)
    assert kernels(torch_reduce.explain(x, 3)) == ["transpose_tile_kernel"]
    bn = torch_reduce.explain(torch.empty(64, 256, 56, 56, device="cuda"), (0, 2, 3), "var_mean")
    assert kernels(bn) == ["rows_kernel", "column_partials_kernel"]
    assert bn["plan"]["steps"][0]["writes"] == "workspace+0" and bn["plan"]["steps"][1]["reads"] == "workspace+0"
    full = torch_reduce.explain(torch.empty(1 << 24, device="cuda"))
    assert kernels(full) == ["vector_sum_ticket_kernel"] and full["plan"]["workspace"] > 0
    assert kernels(torch_reduce.explain(torch.empty(4, 3, device="cuda"), 1, "argmax")) == ["small_kernel"]
    # a full reduction of up to 32 vectors (and a head and tail): one warp; of more, a block
    assert kernels(torch_reduce.explain(torch.empty(3, device="cuda"), None, "var")) == ["small_warp_kernel"]
    assert kernels(torch_reduce.explain(torch.empty(129, device="cuda"))) == ["small_warp_kernel"]
    assert kernels(torch_reduce.explain(torch.empty(132, device="cuda"))) == ["small_sum_kernel"]
    assert torch_reduce.explain(x, 3, "amax") == torch_reduce.explain(x, 3, "amax")
    with pytest.raises(ValueError, match="unknown op"):
        torch_reduce.explain(x, 3, "median")


@cuda_only
def test_transposed_short_reductions_of_short_inner_runs():
    # Transposed short reductions and maps (results transposed against the input) over inner runs
    # of 4 to 64: transpose tiles whose lanes along inner fit the run (4 to 32 lanes) from
    # Tuning::transpose_least_inner (8), the outer run of 97 cutting their 32-wide stores and
    # the runs of their results' words (tiles within the run store words, tiles across it one
    # result at a time, the last tile partly past the end); every
    # dtype width, against torch (integers and extrema exact; float sums against float64: n * u *
    # sum|x| for the float32 accumulation, then the result's rounding); argmax's first position
    # among ties (int8 has many).
    gen, seed = fresh_generator("cuda")
    for inner in (4, 8, 16, 28, 31, 64):
        for reduced in (1, 2, 5, 16):
            if inner * reduced > 512:
                continue
            for dtype in (torch.float32, torch.bfloat16, torch.int8, torch.float64):
                x = torch.randn(704, reduced, 97, inner, generator=gen, device="cuda").mul(20).to(dtype).transpose(2, 3)
                where = (inner, reduced, dtype, seed)
                if inner >= 8:
                    # (maps of 8-byte accumulators: int8's int64 sum, float64's)
                    wide = dtype in (torch.int8, torch.float64)
                    kernel = "transpose_map_kernel" if reduced == 1 and wide else "transpose_tile_kernel"
                    assert kernels(torch_reduce.explain(x, 1)) == [kernel], where
                got = torch_reduce.sum(x, 1)
                if dtype.is_floating_point:
                    want = x.double().sum(1)
                    u = UNIT_ROUNDOFF[torch.float64 if dtype == torch.float64 else torch.float32]
                    bound = reduced * u * x.double().abs().sum(1) + UNIT_ROUNDOFF[dtype] * want.abs()
                    assert got.dtype == dtype and bool(((got.double() - want).abs() <= bound).all()), where
                else:
                    assert torch.equal(got, x.sum(1)), where
                assert torch.equal(torch_reduce.amax(x, 1), x.amax(1)), where
                assert torch.equal(torch_reduce.argmax(x, 1), x.argmax(1)), where
                got, want = torch_reduce.aminmax(x, dim=1), torch.aminmax(x, dim=1)
                assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), where


def check_op_kinds(x, dim, n, where, equal_nan=False):
    """amax, argmin and any over `dim` (n elements a result) equal to torch's; the sum in x's
    dtype within n * u * sum|x| of float64's (float32 accumulation), then the result's rounding
    (integers: equal); var within 4 n u of float64's, plus two of the result's units."""
    for op in ("amax", "argmin", "any"):
        assert torch.equal(getattr(torch_reduce, op)(x, dim), getattr(torch, op)(x, dim)), (op, where)
    got = torch_reduce.sum(x, dim)
    if not x.dtype.is_floating_point:
        assert torch.equal(got, x.sum(dim)), where
        return
    want = x.double().sum(dim)
    bound = n * UNIT_ROUNDOFF[torch.float32] * x.double().abs().sum(dim) + UNIT_ROUNDOFF[x.dtype] * want.abs()
    assert got.dtype == x.dtype and bool(((got.double() - want).abs() <= bound).all()), where
    torch.testing.assert_close(torch_reduce.var(x, dim).double(), x.double().var(dim),
                               rtol=4 * n * UNIT_ROUNDOFF[torch.float32] + 2 * UNIT_ROUNDOFF[x.dtype], atol=1e-6,
                               equal_nan=equal_nan, msg=lambda m: f"{where}: {m}")


@cuda_only
def test_transposed_packed_rows():
    # Short rows packed along a kept run whose results are apart, the result's contiguous run
    # another (layout.h's packed_rows_transposed): transpose tiles along the packed run, element
    # loads; rows of one to four whole 16-byte words tiles along the result's run, a thread a row
    # (Tuning::tile_words_least_bytes). Row lengths 2-16, runs off the tile's multiples, every op kind against torch:
    # integers, extrema and positions exact (ties among int8's values), float sums against
    # float64, var against float64.
    gen, seed = fresh_generator("cuda")
    for rows, cols, width in ((1024, 1024, 3), (1000, 1030, 5), (1000, 1300, 2), (700, 1300, 16), (1024, 1030, 8)):
        base = torch.randn(rows, cols, width, generator=gen, device="cuda").mul(20)
        for dtype in (torch.float32, torch.float16, torch.int8):
            x = base.to(dtype).transpose(2, 0)
            where = (rows, cols, width, dtype, seed)
            row_bytes = width * x.element_size()
            words = row_bytes % 16 == 0
            assert kernels(torch_reduce.explain(x, 0)) == ["tile_kernel" if words else "transpose_tile_kernel"], where
            check_op_kinds(x, 0, width, where, equal_nan=True)


@cuda_only
def test_columns_of_packed_narrow_outputs():
    # Columns whose outer indexes are under a sector apart (the 3 or 7 channels of a
    # channels_last tensor, reduced over its batch): the grid takes the outer indexes of a
    # column block one after another (plan_reduce.h's columns, the step's flag), so that the
    # blocks that share a sector run together. Every op kind and count_nonzero against torch.
    gen, seed = fresh_generator("cuda")
    for n, c, h, w in ((40, 7, 3, 15193), (24, 3, 5, 20011)):
        base = torch.randn(n, c, h, w, generator=gen, device="cuda").mul(20)
        for dtype in (torch.bfloat16, torch.float32, torch.int8):
            x = base.to(dtype).contiguous(memory_format=torch.channels_last)
            where = (n, c, h, w, dtype, seed)
            steps = torch_reduce.explain(x, 0)["plan"]["steps"]
            if dtype != torch.float32:
                assert [s["kernel"] for s in steps] == ["columns_kernel"] and steps[0].get("flag"), where
            check_op_kinds(x, 0, n, where)
            assert torch.equal(torch_reduce.count_nonzero(x, 0), torch.count_nonzero(x, 0)), where


@cuda_only
def test_columns_of_merged_inner_runs():
    # Columns narrower than a line whose inner run continues in memory through kept runs that
    # hold the results in another order (layout.h's inner_merged): one inner run read in memory
    # order, each result stored through the runs; with splits, their combine too. Runs off the
    # vectors' multiples (15: element loads and stores), every op kind against torch: integers,
    # extrema and positions exact (ties among int16's values), float sums and var against
    # float64.
    gen, seed = fresh_generator("cuda")
    cases = (  # base sizes, the permutation, the reduced dim, the merged inner run
        ((3, 40, 300, 16), (0, 3, 2, 1), 3, 4800),  # (a, r, b, w).transpose(1, 3): w, then b
        ((20, 300, 16, 2), (2, 0, 1, 3), 2, 32),  # the results' order against memory's; splits
        ((700, 300, 5, 3), (2, 0, 1, 3), 2, 15),
        ((8, 40, 300, 14), (1, 0, 3, 2), 0, 4200),  # rows of 14: merged before the result's run as inner
    )
    for sizes, perm, dim, inner in cases:
        base = torch.randn(sizes, generator=gen, device="cuda").mul(20)
        for dtype in (torch.float32, torch.bfloat16, torch.int16):
            x = base.to(dtype).permute(perm)
            where = (sizes, perm, dtype, seed)
            steps = torch_reduce.explain(x, dim)["plan"]["steps"]
            assert steps[0]["kernel"] == "columns_kernel" and steps[0]["end"] == inner, (where, steps)
            check_op_kinds(x, dim, sizes[1], where, equal_nan=True)


@cuda_only
def test_columns_of_8_byte_aligned_rows():
    # Columns of 2-byte inputs whose rows (or start) are 8-byte aligned but not 16: the narrow
    # instance's 8-byte vectors (plan_reduce.h), 4 outputs a thread; rows of 28 and 12, a start 8
    # bytes in, outputs past the vectors' multiples (30: two of them by element loads). Every op kind
    # against torch: extrema and positions exact, sums and var against float64.
    gen, seed = fresh_generator("cuda")
    for sizes, start, end in (((40, 3000, 28), 0, 28), ((5, 20000, 12), 0, 12), ((6, 9000, 36), 4, 36),
                              ((9, 7000, 36), 4, 34)):
        base = torch.randn(sizes, generator=gen, device="cuda").mul(20)
        for dtype in (torch.float16, torch.bfloat16):
            x = base.to(dtype)[..., start:end]
            where = (sizes, start, end, dtype, seed)
            steps = torch_reduce.explain(x, 1)["plan"]["steps"]
            assert steps[0]["kernel"] == "columns_kernel" and steps[0]["V"] == 4 and steps[0]["U"] == 8, (where, steps)
            check_op_kinds(x, 1, sizes[1], where, equal_nan=True)


@cuda_only
def test_transposed_columns_of_a_few_elements_along_the_result():
    # Reductions over a long dim of columns 2 or 3 elements wide whose results are transposed
    # against the input (layout.h's columns_in_result_order): the result-contiguous run becomes
    # inner. Every op kind against torch: integers, extrema and positions exact (ties among
    # int16's small values), float sums against float64 (n * u * sum|x|, then the result's
    # rounding), var against float64.
    gen, seed = fresh_generator("cuda")
    for width in (2, 3):
        for rows in (40, 96):
            base = torch.randn(2, rows, 1000, width, generator=gen, device="cuda").mul(4)
            for dtype in (torch.int16, torch.float32, torch.bfloat16):
                x = base.to(dtype).transpose(3, 1)
                where = (width, rows, dtype, seed)
                plan = torch_reduce.explain(x, 3)["plan"]["steps"][0]
                assert plan["kernel"] == "columns_kernel", (where, plan)
                check_op_kinds(x, 3, rows, where)


@pytest.mark.parametrize("device", DEVICES)
def test_maps_and_short_rows_of_every_op_kind(device):
    # Maps (a size-1 reduced dim) with short inner runs through permuted outer runs: on the CPU
    # a block of outer indexes a store, the run that continues the results as the fastest digit
    # (reduce_map). Short rows (1-16 elements, contiguous or strided) in counts off multiples of
    # four (the CPU takes them four at a time). Every op kind against torch, aminmax too:
    # integers, extrema and positions exact (ties among int8's values), float sums and var
    # against float64 (var of one element: NaN, as torch's). Long maps along inner (CUDA's
    # map_kernel), rows of 4096 and 4099, in 2- and 8-byte types too.
    gen, seed = fresh_generator(device)
    long_maps = [((5, 1, 4096), (0, 1, 2), 1), ((3, 1, 4099), (0, 1, 2), 1)]
    layouts = [((3072, 3, 1, 3), (1, 0, 3, 2), 3), ((37, 5, 1, 7), (1, 0, 3, 2), 3), ((2, 41, 1, 3), (3, 1, 0, 2), 1),
               ((9, 1, 5), (2, 1, 0), 1)] + long_maps
    for rows in (1, 3, 67, 130):
        for width in (1, 2, 3, 5, 8, 12, 16):
            layouts += [((rows, width), (0, 1), 1), ((width, rows), (1, 0), 1)]
    for shape, order, dim in layouts:
        base = torch.randn(*shape, generator=gen, device=device).mul(20)
        n = shape[order[dim]]
        wide = (torch.float64, torch.int16) if (shape, order, dim) in long_maps else ()
        for dtype in (torch.float32, torch.bfloat16, torch.int8) + wide:
            x = base.to(dtype).permute(*order)
            where = (shape, order, dim, dtype, seed)
            check_op_kinds(x, dim, n, where, equal_nan=True)
            got, want = torch_reduce.aminmax(x, dim=dim), torch.aminmax(x, dim=dim)
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), where
    # Long maps of rows apart in memory: each row on whole words with a tail (4104 apart, 4100
    # or 4099 long: map_kernel's words, the last word of each row partly past its end in one
    # dtype or every one), and rows off them (4099 apart: its element loads).
    for shape, cut in (((3, 1, 4104), 4100), ((3, 1, 4104), 4099), ((3, 1, 4099), 4000)):
        base = torch.randn(*shape, generator=gen, device=device).mul(20)
        for dtype in (torch.float32, torch.bfloat16, torch.int8, torch.float64, torch.int16):
            x = base.to(dtype)[..., :cut]
            where = (shape, cut, dtype, seed)
            check_op_kinds(x, 1, 1, where, equal_nan=True)
            got, want = torch_reduce.aminmax(x, dim=1), torch.aminmax(x, dim=1)
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), where


@pytest.mark.parametrize("device", DEVICES)
def test_transposed_short_rows_of_narrow_results(device):
    # Short rows whose results are transposed against the input through two outer runs: on the
    # CPU, results of 1 and 2 bytes go as columns along the result's run (reduce_auto), so that
    # threads do not share the result's cache lines; 4- and 8-byte results stay along the input.
    # Outer runs of odd lengths (the threads' shares end anywhere), every op kind and bool's
    # against torch, the results' strides as torch's.
    gen, seed = fresh_generator(device)
    for a, b, n in ((96, 256, 3), (37, 130, 7), (5, 3, 16), (131, 67, 2)):
        base = torch.randn(a, b, n, generator=gen, device=device).mul(20)
        for dtype in (torch.float16, torch.bfloat16, torch.int8, torch.float32):
            x = base.to(dtype).transpose(0, 1)
            where = (a, b, n, dtype, seed)
            check_op_kinds(x, 2, n, where)
            for op in ("all", "amin"):
                got, want = getattr(torch_reduce, op)(x, 2), getattr(torch, op)(x, 2)
                assert torch.equal(got, want) and got.stride() == want.stride(), (op, where)
        flags = (base > 0).transpose(0, 1)
        for op in ("any", "all", "amax", "amin"):
            got, want = getattr(torch_reduce, op)(flags, 2), getattr(torch, op)(flags, 2)
            assert torch.equal(got, want) and got.stride() == want.stride(), (op, a, b, n, seed)


@pytest.mark.parametrize("device", DEVICES)
def test_extrema_over_short_rows_of_whole_vectors(device):
    # Rows of up to 32 elements, contiguous or through two outer runs, in every dtype the CPU's
    # vector extrema take: rows of whole 32-byte vectors (and float16 rows from 8) go to the
    # vector kernels' blocks of rows, the rest element by element (reduce_cpu.cpp's
    # vector_short_rows). amax, amin and aminmax against torch, exactly; NaNs in the float rows.
    gen, seed = fresh_generator(device)
    dtypes = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.int16,
              torch.int32, torch.int64)
    for width in (4, 8, 12, 16, 32):
        base = torch.randn(67, 3, width, generator=gen, device=device).mul(60)
        nan = torch.rand(67, 3, width, generator=gen, device=device) < 0.01
        for dtype in dtypes:
            x = base.to(dtype) if dtype != torch.uint8 else base.abs().to(dtype)
            if dtype.is_floating_point:
                x = x.masked_fill(nan, float("nan"))
            for view in (x.permute(1, 0, 2), x.reshape(3, 67, width)):
                where = (width, dtype, view.stride(), seed)
                for got, want in ((torch_reduce.amax(view, 2), torch.amax(view, 2)),
                                  (torch_reduce.amin(view, 2), torch.amin(view, 2))):
                    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num()), where
                got, want = torch_reduce.aminmax(view, dim=2), torch.aminmax(view, dim=2)
                for g, w in zip(got, want):
                    assert torch.equal(g.isnan(), w.isnan()) and torch.equal(g.nan_to_num(), w.nan_to_num()), where


@pytest.mark.parametrize("device", DEVICES)
def test_reductions_over_long_strided_rows(device):
    # Rows of 2500 read every second and third element: on the CPU gathered 1024 at a time into
    # a buffer for the vector kernels (reduce_cpu.cpp's chunk_reduce), the pieces combined in
    # order. Ties among small integers across the pieces (the first position), NaN in some rows
    # (in the second or third piece only in some); amax, amin, aminmax, max, min, argmax and
    # argmin and sum against torch exactly, logsumexp against float64 within 4 units of the
    # dtype; the positions also over columns of 3 results an outer index.
    gen, seed = fresh_generator(device)
    n = 2500
    for step in (2, 3):
        base = torch.randint(-3, 4, (9, step * n), generator=gen, device=device).double()
        base[1, step * 1500] = float("nan")  # the second piece only
        base[2, step * 2400] = float("nan")  # the third
        base[3, ::7] = float("nan")
        base[4, step * 2100] = 5.0  # the maximum in the third piece alone
        for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int16):
            x = (base if dtype.is_floating_point else base.nan_to_num(0, 3, -3)).to(dtype)[:, ::step]
            where = (step, dtype, seed)
            for ours, ref in ((torch_reduce.amax, torch.amax), (torch_reduce.amin, torch.amin)):
                got, want = ours(x, 1), ref(x, 1)
                assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num()), where
            for g, w in zip(torch_reduce.aminmax(x, dim=1), torch.aminmax(x, dim=1)):
                assert torch.equal(g.isnan(), w.isnan()) and torch.equal(g.nan_to_num(), w.nan_to_num()), where
            for ours, ref in ((torch_reduce.max, torch.max), (torch_reduce.min, torch.min)):
                assert torch.equal(ours(x, 1).indices, ref(x, 1).indices), where
            assert torch.equal(torch_reduce.argmax(x, 1), torch.argmax(x, 1)), where
            assert torch.equal(torch_reduce.argmin(x, 1), torch.argmin(x, 1)), where
            # Sums (every second element gathered as the low halves of words on the CPU): small
            # integers, so exact in the accumulator and rounded once, as the float64 sum rounded.
            got, want = torch_reduce.sum(x, 1), torch.sum(x.double(), 1).to(torch.sum(x[:1], 1).dtype)
            assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num()), where
            # Every second element of a tensor whose storage ends at the last one.
            tail = torch.randint(-3, 4, (2 * n - 1,), generator=gen, device=device).to(dtype)[::2]
            got = torch_reduce.sum(tail)
            assert got.item() == tail.double().sum().to(got.dtype).item(), where
            assert torch_reduce.amax(tail).item() == tail.amax().item(), where
            # Columns of 3 results an outer index (the CPU reads each as a strided row).
            cols = x.reshape(3, 3, n).transpose(1, 2).contiguous()
            for ours, ref in ((torch_reduce.max, torch.max), (torch_reduce.min, torch.min)):
                assert torch.equal(ours(cols, 1).indices, ref(cols, 1).indices), where
            assert torch.equal(torch_reduce.argmax(cols, 1), torch.argmax(cols, 1)), where
            if dtype.is_floating_point:
                got, want = torch_reduce.logsumexp(x, 1), torch.logsumexp(x.double(), 1)
                unit = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}[dtype]
                assert torch.equal(got.isnan(), want.isnan()), where
                err = (got.double() - want).nan_to_num().abs().max().item()
                assert err <= 4 * unit * want.nan_to_num().abs().max().item(), (where, err)


@pytest.mark.parametrize("device", DEVICES)
def test_positions_over_strided_rows(device):
    # max, min, argmax and argmin over rows read with a stride (every third element; on the CPU
    # the extremum by picks, then its first position: reduce_cpu.cpp's position_run) and over
    # the same elements as columns (29 and 5 of them: float16's narrow ones through
    # column_positions, groups of 16 rows), lengths
    # off the 8 lanes and past a chunk's first lanes, against torch exactly: ties among small
    # integers (the first position), signed zeros (the first zero of either sign, its own
    # sign), infinities, and NaN (the first NaN) in some rows and every element of one; integers
    # and bool (ties everywhere) too.
    gen, seed = fresh_generator(device)
    for n in (1, 2, 7, 8, 9, 17, 171):
        base = torch.randint(-3, 4, (29, 3 * n), generator=gen, device=device).double()
        base[1] = torch.where(torch.rand(3 * n, generator=gen, device=device) < 0.5, 0.0, -0.0)
        base[2] = float("inf")
        base[3] = float("-inf")
        base[4] = float("nan")
        nan = torch.rand(29, 3 * n, generator=gen, device=device) < 0.05
        nan[:5] = False
        base = base.masked_fill(nan, float("nan"))
        for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int8, torch.bool):
            rows = (base if dtype.is_floating_point else base.nan_to_num(0, 3, -3)).to(dtype)[:, ::3]
            for x, dim in ((rows, 1), (rows.t().contiguous(), 0), (rows[:5].t().contiguous(), 0)):
                where = (n, dtype, dim, seed)
                for ours, ref in ((torch_reduce.max, torch.max), (torch_reduce.min, torch.min)):
                    (got, at), (want, want_at) = ours(x, dim), ref(x, dim)
                    assert torch.equal(at, want_at), where
                    same = (got == want) & (got.signbit() == want.signbit()) | (got.isnan() & want.isnan())
                    assert bool(same.all()), where  # (a NaN's sign is not compared: torch's 16-bit ones vary)
                if dtype != torch.bool:  # (torch's argmax and argmin take no bool)
                    assert torch.equal(torch_reduce.argmax(x, dim), torch.argmax(x, dim)), where
                    assert torch.equal(torch_reduce.argmin(x, dim), torch.argmin(x, dim)), where


@pytest.mark.parametrize("device", DEVICES)
def test_integer_column_sums_at_the_extremes(device):
    # Sums over columns of 1- and 2-byte integers, every element at the type's minimum or
    # maximum: on the CPU groups of 8 to 16 rows add in 32-bit lanes before the int64
    # accumulators (reduce_cpu.cpp's kNarrowGroupSums); 3 to 40 rows, widths off multiples of 32.
    gen, seed = fresh_generator(device)
    for dtype in (torch.int8, torch.uint8, torch.int16):
        info = torch.iinfo(dtype)
        for rows in (3, 8, 15, 16, 17, 40):
            for width in (31, 32, 97):
                pick = torch.rand(rows, width, generator=gen, device=device) < 0.5
                low = torch.full((rows, width), info.min, dtype=dtype, device=device)
                x = torch.where(pick, low, torch.full_like(low, info.max))
                for view, dim in ((x, 0), (x.t().contiguous().t(), 0), (x.reshape(1, rows, width), 1)):
                    got, want = torch_reduce.sum(view, dim=dim), torch.sum(view, dim)
                    assert got.dtype == want.dtype and torch.equal(got, want), (dtype, rows, width, seed)


@cuda_only
def test_tiles_along_inner_under_short_result_runs():
    # Short reductions over a strided dim whose result's contiguous run is short (8 to 31), or
    # whose neighbouring results are a sector apart or more in the input (the last two: runs of
    # 300 and 40, 256 and 1000 elements apart), while the inner run is contiguous: tile_kernel's
    # lanes along the inner run, each result stored a result's run apart (plan_reduce.h's tiles,
    # Tuning::tiles_short_result_run, tiles_far_outer_bytes). Inner runs off the lanes'
    # multiples; every op kind against torch (integers, extrema and positions exact, ties among
    # int16's values; float sums and var against float64).
    gen, seed = fresh_generator("cuda")
    for sizes in ((7, 12, 3001), (5, 20, 1000), (3, 31, 4096), (9, 8, 20000), (5, 300, 256), (3, 40, 1000)):
        base = torch.randn(sizes, generator=gen, device="cuda").mul(20)
        for dtype in (torch.float32, torch.bfloat16, torch.int16):
            x = base.to(dtype).transpose(2, 1)
            where = (sizes, dtype, seed)
            steps = torch_reduce.explain(x, 0, "amax")["plan"]["steps"]
            if sizes[1] < 32 or dtype != torch.float32:  # (float32's far ones: transpose tiles, V = 1)
                assert [s["kernel"] for s in steps] == ["tile_kernel"] and not steps[0].get("a_is_outer"), (where, steps)
            check_op_kinds(x, 0, sizes[0], where, equal_nan=True)


@cuda_only
def test_tuning_line_from_the_environment():
    # TREDUCE_TUNING changes the planner's table for the process (trials without a rebuild); a
    # line that does not parse is reported and ignored. Under a line, the plans it gives are
    # checked against torch too (tiles under inner runs of 32, and for small slabs).
    code = """
import torch, torch_reduce
x = torch.ones(4, 3, device='cuda')
t = torch.randn(32, 3, 1024, 16, device='cuda').transpose(2, 3)
r = torch.randn(96000, 7, device='cuda').to(torch.bfloat16)
assert torch.equal(torch_reduce.amax(t, 1), t.amax(1)) and torch.equal(torch_reduce.argmin(t, 1), t.argmin(1))
assert torch.equal(torch_reduce.amax(r, 1), r.amax(1)) and torch.equal(torch_reduce.argmax(r, 1), r.argmax(1))
print(*(torch_reduce.explain(v, 1)['plan']['steps'][0]['kernel'] for v in (x, t, r)))
"""

    def kernels_with(line):
        env = dict(os.environ)
        env.pop("TREDUCE_TUNING", None)
        if line is not None:
            env["TREDUCE_TUNING"] = line
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout.split(), r.stderr

    assert kernels_with(None)[0] == ["small_kernel", "transpose_tile_kernel", "short_rows_kernel"]
    got = kernels_with("small_elements=1,small_most=1,transpose_least_inner=32,slabs_least_bytes=4194304,"
                       "short_rows_least_bytes=1099511627776")[0]
    assert got[0] != "small_kernel" and got[1:] == ["tile_kernel", "tile_kernel"], got
    got, err = kernels_with("small_elements=none")
    assert got[0] == "small_kernel" and "TREDUCE_TUNING" in err


@cuda_only
def test_few_short_reductions_spread_over_the_device():
    # Short reductions of few outputs: tile_kernel gives each thread one output and shrinks its
    # blocks (down to 64 threads) until the grid covers the multiprocessors; the results are
    # torch's (positions and integers exact, float sums against float64: n * u * sum|x| for the
    # float32 accumulation, then the result's rounding).
    gen, seed = fresh_generator("cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for shape, perm, dim in (((8, 224, 40), (0, 2, 1), 0), ((16, 96, 3, 40), (0, 3, 2, 1), 0), ((4, 3, 100, 64), (0, 3, 1, 2), 0)):
        for dtype in (torch.int64, torch.float32, torch.bfloat16):
            x = torch.randn(shape, generator=gen, device="cuda").mul(8).to(dtype).permute(perm)
            where = (shape, perm, dtype, seed)
            step = torch_reduce.explain(x, dim, "argmin")["plan"]["steps"][0]
            assert step["kernel"] == "tile_kernel" and step["loads"] == 16, (where, step)
            assert step["block"][0] < 256 and step["grid"][0] * step["grid"][1] >= min(sms, x.numel() // x.shape[dim] // step["block"][0]), (where, step)
            assert torch.equal(torch_reduce.argmin(x, dim), x.argmin(dim)), where
            assert torch.equal(torch_reduce.amax(x, dim), x.amax(dim)), where
            got = torch_reduce.sum(x, dim)
            if dtype.is_floating_point:
                want = x.double().sum(dim)
                bound = x.shape[dim] * UNIT_ROUNDOFF[torch.float32] * x.double().abs().sum(dim) + UNIT_ROUNDOFF[dtype] * want.abs()
                assert got.dtype == dtype and bool(((got.double() - want).abs() <= bound).all()), where
            else:
                assert torch.equal(got, x.sum(dim)), where


@pytest.mark.parametrize("device", DEVICES)
def test_tiny_full_reductions_against_torch(device):
    # Whole tensors of 1 to 40 elements, from aligned and misaligned starts (CUDA: one block,
    # the first warp alone where the elements fit its lanes): every op kind against torch
    # (integers, extrema and positions exact; floats against the float64 reference of
    # random_shapes.check), and a sum of negative zeros is +0 as torch's.
    gen, seed = fresh_generator(device)
    for n in (1, 2, 3, 5, 8, 17, 31, 32, 33, 40):
        for dtype in ("float32", "bfloat16", "float16", "float64", "int8", "bool"):
            for offset in (0, 1, 3):
                for op in ("sum", "mean", "var", "std_mean", "logsumexp", "amax", "aminmax", "prod", "any", "nansum", "argmax"):
                    if dtype in ("int8", "bool") and op in ("mean", "var", "std_mean", "logsumexp", "nansum"):
                        continue
                    if dtype == "bool" and op in ("aminmax", "prod", "argmax"):
                        continue
                    case = random_shapes.Case(op, [n + offset], "contiguous", [], 0 if op == "logsumexp" else None, dtype)
                    base = random_shapes.make_input(case, device, gen)
                    x = base[offset:]
                    _, ours_fn = random_shapes.calls(case)
                    problem = random_shapes.check(case, x, ours_fn(x), random_shapes.reference(case, x))
                    assert problem is None, (op, n, dtype, offset, problem, seed)
    zeros = torch.zeros(3, device=device).neg()
    for x in (zeros, zeros[:1], zeros.to(torch.bfloat16)):
        got, want = torch_reduce.sum(x), torch.sum(x)
        assert torch.equal(got.signbit(), want.signbit()), (x.dtype, x.numel(), got, want)


@cuda_only
def test_tiles_past_the_grid_along_b():
    # tile_kernel's grid stops at 65535 tiles along B; its blocks step over the rest: 600000
    # outputs along B, 8 a tile (sum and amax over the dim of 3 of a strided int8 view).
    gen, seed = fresh_generator("cuda")
    base = torch.randint(-128, 128, (600000, 3, 64), generator=gen, device="cuda", dtype=torch.int8)
    x = base[:, :, ::2]
    plan = torch_reduce.explain(x, 1)
    assert kernels(plan) == ["tile_kernel"] and plan["plan"]["steps"][0]["grid"][1] == 65535
    assert torch.equal(torch_reduce.sum(x, 1), x.sum(1)), seed
    assert torch.equal(torch_reduce.amax(x, 1), x.amax(1)), seed


def test_more_runs_than_an_outer_index_takes_are_copied():
    # Six kept dims, each apart from the others in memory: more than kMaxOuterRuns outer runs.
    x = torch.empty(2, 3, 2, 3, 2, 3, 5).permute(6, 5, 3, 1, 4, 2, 0)
    plan = torch_reduce.explain(x, 0)
    assert plan["copy"] is True
    y = torch.randn(2, 3, 2, 3, 2, 3, 5).permute(6, 5, 3, 1, 4, 2, 0)
    assert torch.allclose(torch_reduce.sum(y, 0), y.sum(0), atol=1e-5)


# Layouts past the small kernel's 2^16 elements whose reduced elements are one dense slab per
# result group (rows that are not whole vectors, short or narrow columns, expanded and permuted
# outer dims, a reduced dim of one element): on CUDA the slab kernel's, and each again from an
# odd storage offset (no 16-byte vectors), NaN included where the op is a float one.
Case = random_shapes.Case
SLAB_CASES = [
    Case("mean", [17, 1519, 7], "transpose", [2, 1], -2, "bfloat16"),
    Case("argmax", [64, 25, 31, 7], "transpose", [1, 2], 3, "bfloat16"),
    Case("amax", [64, 28, 128, 7], "contiguous", [], -2, "int8"),
    Case("argmin", [49, 80, 1, 3], "expand", [2, 64], -3, "bfloat16"),
    Case("sum", [1023, 7, 96, 1], "expand", [3, 4], -3, "int64"),
    Case("vector_norm", [16, 64, 7, 28], "transpose", [0, 1], 2, "float16", 2.0),
    Case("sum", [4096, 3, 128], "contiguous", [], -2, "int64"),
    Case("argmax", [4096, 1, 128], "contiguous", [], -2, "float32"),
    Case("max", [3000, 13, 5], "contiguous", [], 1, "float16"),
    Case("var_mean", [8192, 5, 3], "contiguous", [], 1, "float32"),
    Case("logsumexp", [20000, 6], "contiguous", [], 1, "float32"),
    Case("count_nonzero", [9000, 3, 11], "contiguous", [], 1, "int16"),
    Case("prod", [30000, 5], "contiguous", [], 1, "float32"),
    Case("nanmean", [2000, 40, 3], "contiguous", [], 1, "bfloat16"),
    Case("aminmax", [70000, 3], "contiguous", [], 1, "int32"),
    # Rows and narrow columns of up to 8 elements an output, a thread each (CUDA: in registers
    # from the slab, Welford's in two passes): 1 to 8 elements, every operator kind.
    Case("std", [20000, 3], "contiguous", [], -1, "float32"),
    Case("var_mean", [12000, 8], "contiguous", [], -1, "bfloat16"),
    Case("std_mean", [70000, 1, 2], "contiguous", [], -1, "float64"),
    Case("logsumexp", [16000, 5], "contiguous", [], -1, "float16"),
    Case("mean", [64, 128, 3, 3], "contiguous", [], -1, "bfloat16"),
    Case("amax", [6000, 3, 28], "permute", [0, 2, 1], -1, "float32"),
    Case("var", [3000, 6, 28], "permute", [0, 2, 1], -1, "float16"),
    Case("argmin", [13000, 7], "contiguous", [], -1, "int16"),
    # Dense rows whose results are in another order than memory's (CUDA: the outer runs one run
    # of memory, read as linear slabs, the results stored through the runs); the narrowed view
    # is not one run.
    Case("mean", [256, 19, 64, 12], "transpose", [0, 1], 3, "float16"),
    Case("argmax", [40, 9, 32, 20], "transpose", [0, 1], -1, "int8"),
    Case("var", [24, 33, 16, 6], "transpose", [0, 2], -1, "float32"),
    Case("aminmax", [7, 300, 10], "transpose", [0, 1], -1, "bfloat16"),
    Case("prod", [100000, 1, 1], "contiguous", [], -2, "float32"),
    # Columns whose strip ends in fewer outputs than a block of the CPU's (columns_rest).
    Case("sum", [4097, 56], "transpose", [0, 1], 1, "float32"),
    Case("nansum", [2000, 13], "contiguous", [], 0, "float64"),
    Case("var", [3000, 3], "contiguous", [], 0, "float32"),
    # Rows that are one aligned word (4, 8 or 16 bytes): on CUDA a load a row.
    Case("amax", [77, 1433, 8], "transpose", [1, 0], -1, "uint8"),
    Case("sum", [1024, 67, 8], "transpose", [0, 1], 2, "bfloat16"),
    Case("sum", [14336, 8], "contiguous", [], 1, "int16"),
    Case("argmax", [20000, 4], "contiguous", [], 1, "uint8"),
    Case("sum", [30000, 2], "contiguous", [], 1, "int64"),
    Case("var", [20000, 2], "contiguous", [], 1, "float32"),
    Case("any", [9000, 16], "contiguous", [], 1, "int8"),
    # Short rows whose neighbours in memory are results apart (tiles in the result's order).
    Case("argmin", [224, 1, 12], "expand", [1, 196], -1, "int64"),
    Case("sum", [6, 50, 80, 4], "permute", [2, 1, 0, 3], -1, "float32"),
    Case("var_mean", [96, 700, 5], "transpose", [0, 1], -1, "bfloat16"),
    # Short reductions whose result is transposed against the input (tiles through shared memory).
    Case("var_mean", [196, 1, 4915], "transpose", [0, 2], 1, "float32"),
    Case("argmin", [8, 103, 40, 96], "transpose", [2, 3], 0, "int32"),
    Case("amax", [12, 77, 512], "transpose", [2, 0], -1, "float16"),
    Case("mean", [2, 1024, 16, 28], "channels_last", [], -2, "bfloat16"),
]

# Each plan's reach at its edges (on CUDA): the small kernel past kSmallElements (a few long rows,
# columns whose adjacent results are adjacent in memory), small columns of 32 to 256 rows an
# output a thread, rows in teams of a warp (up to 40 loads a lane when not whole vectors) and a
# block a row in one kernel from half a device's rows; short columns of wide accumulators in
# slabs, a few results interleaved in a long run, and the small kernel past its sizes.
PLAN_CASES = [
    Case("sum", [64, 5120], "contiguous", [], 1, "float32"),
    Case("var_mean", [224, 512], "contiguous", [], -1, "float32"),
    Case("sum", [4, 8, 3, 3072], "contiguous", [], [0, 3], "float32"),
    Case("argmax", [97, 7, 128], "contiguous", [], -1, "float32"),
    Case("sum", [31, 5119], "contiguous", [], 1, "bfloat16"),
    Case("sum", [32, 5120], "contiguous", [], 0, "bfloat16"),
    Case("amax", [16, 12000], "contiguous", [], 0, "bfloat16"),
    Case("argmax", [2048, 64], "contiguous", [], 0, "float32"),
    Case("sum", [17, 31, 224], "contiguous", [], 1, "int32"),
    Case("logsumexp", [128, 3584], "contiguous", [], 0, "bfloat16"),
    Case("std", [64, 3072], "contiguous", [], 0, "float16"),
    Case("argmax", [256, 512], "contiguous", [], 0, "float32"),
    Case("amax", [97, 4609], "contiguous", [], 0, "bfloat16"),
    Case("mean", [2048, 4097], "permute", [1, 0], 0, "bfloat16"),
    Case("sum", [400, 2048], "contiguous", [], -1, "float32"),
    Case("var", [1031, 4097], "contiguous", [], -1, "float32"),
    Case("sum", [196, 4096], "contiguous", [], 1, "int64"),
    Case("var", [100, 16384], "contiguous", [], 1, "float32"),
    Case("mean", [224, 49152], "transpose", [1, 0], 0, "bfloat16"),
    Case("argmin", [67, 16411], "contiguous", [], 1, "float16"),
    # short reductions of few outputs: tiles of an output a thread in blocks of 64 to 256 threads
    Case("argmin", [8, 224, 40], "permute", [0, 2, 1], 0, "int64"),
    Case("var", [12, 96, 70], "transpose", [1, 2], 0, "bfloat16"),
    Case("sum", [3, 40000], "transpose", [0, 1], 1, "int8"),
    # short dense columns of wide accumulators: slabs
    Case("argmax", [4096, 7, 64, 2], "contiguous", [], 1, "int16"),
    Case("aminmax", [512, 3, 4, 128], "contiguous", [], -3, "float16"),
    Case("var", [512, 5, 256], "contiguous", [], 1, "bfloat16"),
    # a few results interleaved in a long run (from 4 MiB): folded into rows of k results
    Case("mean", [512, 512, 7], "transpose", [0, 1], [0, 1], "float32"),
    Case("var", [512, 512, 7], "contiguous", [], [0, 1], "float32"),
    Case("sum", [14, 1024, 64, 3], "transpose", [1, 0], [0, 1, 2], "bfloat16"),
    Case("sum", [512, 1024, 3], "contiguous", [], [0, 1], "int32"),
    Case("mean", [1001, 65, 3], "contiguous", [], [0, 1], "float32"),
    # several reduced runs, the contiguous one not the longest: rows first (Planner::rows_first)
    Case("mean", [16, 128, 1000], "slice", [1, 2], None, "float32"),
    Case("var", [768, 14, 128], "contiguous", [], [0, 2], "float16"),
    Case("std_mean", [17, 128, 28, 16], "slice", [1, 2], None, "bfloat16"),
    # long narrow columns of several outer indexes: split, not one pass (columns_one_pass_rows)
    Case("mean", [40, 5003, 28], "contiguous", [], -2, "float16"),
    # transposed short reductions of 1-byte inputs over inner runs of 32: tiles
    Case("amin", [2, 3001, 13, 32], "transpose", [0, 3], -1, "uint8"),
    # the small kernel past its sizes (small_beats_passes)
    Case("nansum", [16, 56, 128, 32], "contiguous", [], [1, 3], "float16"),
    Case("mean", [7, 96, 96, 8], "transpose", [1, 2], [0, 3], "float32"),
    Case("argmax", [28, 32, 77, 16], "permute", [2, 1, 3, 0], 3, "float32"),
    Case("any", [64, 200, 5, 16], "slice", [2, 3], 0, "int32"),
    Case("aminmax", [128, 256, 40], "transpose", [0, 2], -1, "int16"),
    # kept dims expanded with stride 0: reduced at index 0, the results copied along (CUDA)
    Case("var", [64, 64, 1, 7], "expand", [2, 32], -1, "float16"),
    Case("var", [4, 1, 40], "expand", [1, 2048], 0, "float32"),
    Case("argmax", [64, 1, 32, 3], "expand", [1, 64], -1, "bfloat16"),
    Case("var_mean", [256, 1, 5], "expand", [1, 512], -1, "float32"),
    # maps (a reduced dim of size 1) along inner, one run and several (map_kernel)
    Case("var", [64, 1, 3, 4096], "transpose", [1, 2], [2], "float16"),
    Case("amax", [64, 2, 4096], "slice", [1, 2], 1, "float32"),
    Case("argmax", [16, 2, 3000], "slice", [1, 2], 1, "bfloat16"),
    # results transposed against the slabs, up to 4 a slab (slab_kernel)
    Case("sum", [4096, 80, 3], "permute", [2, 0, 1], -1, "int32"),
    Case("mean", [2048, 40, 4], "permute", [2, 0, 1], -1, "bfloat16"),
    Case("argmin", [1000, 9, 2], "permute", [2, 0, 1], -1, "float16"),
    # results transposed, their contiguous run not the last outer digit (outer_in_result_order)
    Case("sum", [1, 31, 64, 3072], "permute", [3, 2, 0, 1], 2, "int16"),
    Case("amin", [12, 16, 3, 4096], "transpose", [0, 3], 2, "int8"),
    Case("var_mean", [6, 10, 4, 512], "transpose", [0, 3], 2, "float32"),
    # short reductions of results transposed against a contiguous inner run (transpose_tile_kernel):
    # 4-element words of 1- and 2-byte inputs (not where the rows are not aligned to them), maps,
    # positions, dense layouts (no slabs), inner and outer not multiples of the tile
    Case("sum", [8, 2, 256, 96], "transpose", [1, 3], -1, "float32"),
    Case("sum", [196, 1, 1000], "transpose", [0, 2], 1, "float32"),
    Case("var", [112, 32, 37, 3], "channels_last", [], -1, "float32"),
    Case("argmax", [12, 16, 3, 1000], "transpose", [0, 3], 2, "bfloat16"),
    Case("sum", [1, 31, 64, 1000], "permute", [3, 2, 0, 1], 2, "int8"),
    Case("amin", [12, 16, 3, 1001], "transpose", [0, 3], 2, "int16"),
    # ... rows of odd lengths, words from two aligned loads (1- and 2-byte elements)
    Case("amin", [14, 3, 49, 1001], "transpose", [1, 3], 0, "int8"),
    Case("sum", [5, 49, 2003], "transpose", [1, 2], 0, "bool"),
    Case("amax", [9, 7, 40, 517], "transpose", [2, 3], 1, "float16"),
    Case("var_mean", [64, 3, 200], "transpose", [0, 2], 1, "float16"),
    Case("mean", [128, 5, 512], "transpose", [0, 2], 1, "bfloat16"),
    # CPU: short rows through two outer runs in blocks along the last (17 rows: blocks end at
    # the run's end), vector kernels and the loop; column sums of 16-bit floats (sum_simd)
    Case("sum", [14, 17, 64, 32], "transpose", [0, 3], -4, "int64"),
    Case("amax", [14, 17, 40], "transpose", [0, 2], 0, "float32"),
    Case("sum", [14, 17, 9], "transpose", [0, 2], 0, "int32"),
    Case("nansum", [12, 16, 17, 100], "contiguous", [], 0, "float16"),
    Case("mean", [40, 3, 33], "contiguous", [], 0, "bfloat16"),
]


@pytest.mark.parametrize("device", DEVICES)
def test_kept_expanded_dims_repeat_one_reduction(device):
    # Two kept dims of stride 0 (64 and 128 copies), reduced dims before, between and after them,
    # keepdim both ways: the kernels reduce index 0 of each into a result of the distinct values,
    # which is then copied along both; every result must still be torch's.
    gen, seed = fresh_generator(device)
    x = torch.randn(3, 1, 7, 1, 8, generator=gen, device=device).expand(3, 64, 7, 128, 8)  # 2^16+ results
    for keepdim in (False, True):
        for dim in ([2], [0, 2], [4]):
            want = x.double().sum(dim, keepdim=keepdim)
            got = torch_reduce.sum(x, dim, keepdim=keepdim)
            assert got.shape == want.shape, (dim, keepdim, seed)
            torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5, msg=f"sum {dim} seed {seed}")
            var, mean = torch_reduce.var_mean(x, dim, keepdim=keepdim)
            want_var, want_mean = torch.var_mean(x.double(), dim, keepdim=keepdim)
            torch.testing.assert_close(var.double(), want_var, rtol=1e-4, atol=1e-5, msg=f"var {dim} seed {seed}")
            torch.testing.assert_close(mean.double(), want_mean, rtol=1e-5, atol=1e-5, msg=f"mean {dim} seed {seed}")
        for d in (0, 2, 4):
            values, indices = torch_reduce.max(x, d, keepdim=keepdim)
            want_values, want_indices = x.max(d, keepdim=keepdim)
            assert torch.equal(values, want_values) and torch.equal(indices, want_indices), (d, keepdim, seed)
            assert torch.equal(torch_reduce.argmin(x, d, keepdim=keepdim), x.argmin(d, keepdim=keepdim)), (d, seed)


@pytest.mark.parametrize("device", DEVICES)
def test_kept_expanded_dims_that_would_repeat_many_reads(device):
    # Under 2^16 results, but 2^20 elements or more read only for the repeats (treduce.cpp's
    # repeated_reads): 40 distinct results of 1031 elements, each copied 64 times, are reduced
    # once; where the repeats read little (2 copies of 64 x 8) every result is reduced.
    gen, seed = fresh_generator(device)
    base = torch.randint(-1, 2, (1031, 1, 40), generator=gen, device=device).float()
    x = base.expand(1031, 64, 40)
    assert torch_reduce.explain(x, 0, "prod")["distinct"] == 40
    assert torch_reduce.explain(torch.empty(64, 1, 8, device=device).expand(64, 2, 8), 0)["distinct"] == 0
    for op in ("sum", "prod", "amax", "argmax", "var_mean"):
        got, want = getattr(torch_reduce, op)(x, 0), getattr(torch, op)(x, 0)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert g.dtype == w.dtype and g.shape == w.shape, (op, seed)
            torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6, msg=f"{op} seed {seed}")


@pytest.mark.parametrize("device", DEVICES)
def test_kept_expanded_dims_of_every_element_size(device):
    # The distinct results copied along the repeats (CUDA: repeat_kernel, plan.h's plan_repeat)
    # for results of 1, 2, 4 and 8 bytes: runs of 56 and 64 between repeats (16-byte words of
    # results where the run holds whole words, else an element at a time), runs of 7 (elements),
    # and a repeated innermost dim (words of one result's copies). Over 2^16 results each.
    gen, seed = fresh_generator(device)
    shapes = [((8, 1, 3, 56), (8, 300, 3, 56), 2), ((8, 1, 3, 64), (8, 200, 3, 64), 2),
              ((8, 1, 3, 7), (8, 2000, 3, 7), 2), ((300, 3, 1), (300, 3, 256), 1)]
    ops = [("any", torch.bool), ("amax", torch.uint8), ("sum", torch.float16), ("sum", torch.bfloat16),
           ("sum", torch.int32), ("mean", torch.float64), ("sum", torch.int64)]
    for base, expanded, dim in shapes:
        # explain: the distinct results the kernels reduce before the copy
        distinct = torch_reduce.explain(torch.empty(base, device=device).expand(expanded), dim)["distinct"]
        assert distinct == math.prod(base) // base[dim], (expanded, distinct)
        for op, dtype in ops:
            x = torch.randint(0, 3, base, generator=gen, device=device).to(dtype).expand(expanded)
            got, want = getattr(torch_reduce, op)(x, dim), getattr(torch, op)(x, dim)
            assert got.dtype == want.dtype and got.shape == want.shape, (op, dtype, expanded, seed)
            if op == "mean":
                torch.testing.assert_close(got, want, rtol=1e-15, atol=0)
            else:  # small integers: every sum is exact in every dtype, so torch's bits
                assert torch.equal(got, want), (op, dtype, expanded, seed)
        # float32 values and int64 positions, var_mean's two results: of the expanded tensor
        # itself (x.float() of an expanded tensor is a dense copy, which repeats nothing)
        xf = torch.randint(0, 3, base, generator=gen, device=device).float().expand(expanded)
        values, indices = torch_reduce.max(xf, dim)
        want_values, want_indices = xf.max(dim)
        assert torch.equal(values, want_values) and torch.equal(indices, want_indices), (expanded, seed)
        var, mean = torch_reduce.var_mean(xf, dim)
        want_var, want_mean = torch.var_mean(xf.double(), dim)
        torch.testing.assert_close((var.double(), mean.double()), (want_var, want_mean), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_word_rows_from_misaligned_storage(device):
    # Rows of 8 elements starting one element past an aligned address: no row is a whole aligned
    # word, so the kernels load element by element.
    gen, seed = fresh_generator(device)
    for dtype in (torch.uint8, torch.int16, torch.bfloat16):
        base = torch.randint(0, 100, (20000 * 8 + 1,), generator=gen, device=device).to(dtype)
        x = base[1:].view(20000, 8)
        assert torch.equal(torch_reduce.amax(x, 1), x.amax(1)), (dtype, seed)
        assert torch.equal(torch_reduce.argmax(x, 1), x.argmax(1)), (dtype, seed)
        if dtype != torch.bfloat16:  # integer sums: exact
            assert torch.equal(torch_reduce.sum(x, 1), x.sum(1)), (dtype, seed)


@pytest.mark.parametrize("device", DEVICES)
def test_dense_short_rows_against_torch(device):
    # Dense rows of 3, 5, 6 and 7 elements, and of 2, 4 and 8 where a row is under 16 bytes or
    # whole_rows_kernel does not take the op (positions; inputs other than float32, float16 and
    # bfloat16) (CUDA: short_rows_kernel, a 16-byte vector's worth of
    # rows a thread, from 16-byte aligned inputs of 1 MiB or more), every input width and operator kind, row
    # counts that are and are not multiples of a thread's rows (2 to 16), and the same rows one
    # row in (not aligned: another kernel); with a NaN and an infinity in some rows.
    gen, seed = fresh_generator(device)
    failures = []
    ops = [("sum", "int64"), ("mean", "bfloat16"), ("var_mean", "float32"), ("argmax", "int16"), ("aminmax", "uint8"),
           ("logsumexp", "float16"), ("prod", "float64"), ("any", "bool"), ("std", "float64"), ("amin", "int8"),
           ("nansum", "bfloat16"), ("count_nonzero", "int32"), ("argmin", "float32"), ("max", "float16")]
    for k, (op, dtype) in enumerate(ops):
        itemsize = getattr(torch, dtype).itemsize
        whole = op not in ("argmax", "argmin", "max", "min") and dtype in ("float32", "float16", "bfloat16")
        for reduced in [n for n in (2, 3, 4, 5, 6, 7, 8) if n in (3, 5, 6, 7) or n * itemsize < 16 or not whole]:
            # past the small kernel's sizes and Tuning::short_rows_least_bytes (1 MiB)
            rows = (360448, 360451, 370000 + 8 * k + reduced)[(k + reduced) % 3]
            rows += max(0, (1 << 20) // (reduced * itemsize) + 64 - 360448)
            case = Case(op, [rows + 1, reduced], "contiguous", [], -1, dtype)
            x = random_shapes.make_input(case, device, gen)
            if x.dtype.is_floating_point:
                x[rows // 3, reduced // 2] = float("nan")
                x[rows // 2, 0] = float("inf")
            _, ours_fn = random_shapes.calls(case)
            for v in (x[:rows], x[1:]):
                if device == "cuda" and v.data_ptr() % 16 == 0:
                    assert kernels(torch_reduce.explain(v, -1, op)) == ["short_rows_kernel"], (op, dtype, reduced)
                problem = random_shapes.check(case, v, ours_fn(v), random_shapes.reference(case, v))
                if problem:
                    failures.append(f"{op} {dtype} {tuple(v.shape)} offset {v.storage_offset()}: {problem}")
    assert not failures, f"seed {seed}:\n" + "\n".join(failures)


SHORT_OPS = [("sum", "int64"), ("mean", "bfloat16"), ("var_mean", "float32"), ("argmax", "int16"),
             ("aminmax", "uint8"), ("logsumexp", "float16"), ("prod", "float64"), ("any", "bool"), ("std", "float16"),
             ("amin", "int8"), ("nansum", "bfloat16"), ("count_nonzero", "int32"), ("argmin", "float32"),
             ("max", "bfloat16"), ("vector_norm", "float32"), ("sum", "uint8")]
ORDS = {"vector_norm": 2.0}


def check_views(case, views, device, kernel, failures, label=""):
    """Each view against torch; on CUDA, views whose data is 16-byte aligned planned on `kernel`."""
    _, ours_fn = random_shapes.calls(case)
    for v in views:
        if device == "cuda" and kernel and v.data_ptr() % 16 == 0:
            got = kernels(torch_reduce.explain(v, case.dim, case.op))
            if got != [kernel]:
                failures.append(f"{case.label()}{label} {tuple(v.shape)} {v.stride()}: planned {got}")
        problem = random_shapes.check(case, v, ours_fn(v), random_shapes.reference(case, v))
        if problem:
            failures.append(f"{case.label()}{label} {tuple(v.shape)} {v.stride()} offset {v.storage_offset()}: {problem}")


def with_specials(x, gen, op):
    """x (contiguous) with a NaN and an infinity at random places (floats), else x. No infinity
    for the variance's operators, whose mean with one torch makes inf or NaN by the order its
    Welford's meets the values."""
    if not x.dtype.is_floating_point:
        return x
    y = x.clone().view(-1)
    at = torch.randint(0, y.numel(), (2,), generator=gen, device=x.device)
    y[at[0]] = float("nan")
    if op not in ("var", "std", "var_mean", "std_mean"):
        y[at[1]] = float("inf")
    return y.view(x.shape)


@pytest.mark.parametrize("device", DEVICES)
def test_short_columns_of_pieces_against_torch(device):
    # Columns of 2 to 8 rows whose rows are whole aligned pieces of 4 elements (2 of 8-byte
    # ones), here narrower than 128 bytes (the plan test has wide ones) (CUDA:
    # short_columns_kernel, 1 to 4 pieces of results a thread over (outer, inner) flattened):
    # every operator kind and input width (positions of 1-byte inputs too), outer counts that do
    # not fill the last block, the outer index through one run and through two (the result's
    # order differs from memory's), a view one outer index in (still aligned), one element in
    # (not aligned: another kernel), and NaN and infinity.
    gen, seed = fresh_generator(device)
    failures = []
    for k, (op, dtype) in enumerate(SHORT_OPS + [("argmax", "int8"), ("count_nonzero", "uint8")]):
        per = 2 if getattr(torch, dtype).itemsize == 8 else 4
        for reduced in (2, 3, 5, 8):
            inner = per * (1 + (k + reduced) % 3)
            # CUDA: past the small kernel's 2^19 elements and its one pass where slabs would have
            # fewer blocks than multiprocessors (the CPU has no such bound: smaller)
            outer = (1 << (21 if device == "cuda" else 14)) // (reduced * inner) + 37 + 2 * k
            case = Case(op, [outer, reduced, inner], "contiguous", [], 1, dtype, ORDS.get(op))
            x = with_specials(random_shapes.make_input(case, device, gen), gen, op)
            check_views(case, [x, x[1:]], device, "short_columns_kernel", failures)
            check_views(case, [x.view(-1)[1:1 + (outer - 1) * reduced * inner].view(outer - 1, reduced, inner)], device,
                        None, failures, " misaligned")
            # two outer runs: (a, b) in the result, b outermost in memory
            a, b = 7, outer // 7 + 1
            two = Case(op, [b, a, reduced, inner], "transpose", [0, 1], 2, dtype, ORDS.get(op))
            check_views(two, [random_shapes.make_input(two, device, gen)], device, "short_columns_kernel", failures,
                        " two runs")
    assert not failures, f"seed {seed}:\n" + "\n".join(failures)


@pytest.mark.parametrize("device", DEVICES)
def test_short_columns_in_rounds_against_torch(device):
    # Short columns of 9 to 64 rows of whole aligned pieces (CUDA: short_columns_kernel, a piece
    # a thread, its rows in rounds of 8 loads, where the pieces give 1024 threads or more a
    # multiprocessor): every operator kind, each with a row count that ends on a partial round (9,
    # 13, 28) or a whole one (64), one or two pieces a row, and NaN and infinity.
    gen, seed = fresh_generator(device)
    sms = torch.cuda.get_device_properties(0).multi_processor_count if device == "cuda" else 1
    failures = []
    for k, (op, dtype) in enumerate(SHORT_OPS):
        per = 2 if getattr(torch, dtype).itemsize == 8 else 4
        reduced, row_pieces = (9, 13, 28, 64)[k % 4], 1 + k % 2
        outer = (1100 * sms if device == "cuda" else 300) // row_pieces + 2 * k + 1
        case = Case(op, [outer, reduced, per * row_pieces], "contiguous", [], 1, dtype, ORDS.get(op))
        x = with_specials(random_shapes.make_input(case, device, gen), gen, op)
        check_views(case, [x], device, "short_columns_kernel", failures)
        del x
    assert not failures, f"seed {seed}:\n" + "\n".join(failures)


@pytest.mark.parametrize("device", DEVICES)
def test_transposed_rows_of_words_against_torch(device):
    # Short rows of 2 to 4 whole 16-byte words whose neighbours in memory are results apart
    # (CUDA: tile_kernel along the result's run, a thread a row, its words loaded at once): rows
    # of 32, 48 and 64 bytes, every operator kind, and one element in (not aligned: another
    # kernel).
    gen, seed = fresh_generator(device)
    failures = []
    for k, (op, dtype) in enumerate(SHORT_OPS):
        itemsize = getattr(torch, dtype).itemsize
        for words in (2, 3, 4):
            reduced = words * 16 // itemsize
            if reduced > 16:
                continue
            n = (1 << 16) // (16 * reduced) + 29 + k
            case = Case(op, [n, 16, reduced], "transpose", [1, 0], -1, dtype, ORDS.get(op))
            x = random_shapes.make_input(case, device, gen)
            base = x.transpose(1, 0).contiguous().view(-1)
            shifted = base[1:1 + base.numel() - 16 * reduced].view(n - 1, 16, reduced).transpose(1, 0)
            check_views(case, [x], device, "tile_kernel", failures)
            check_views(case, [shifted], device, None, failures, " misaligned")
    assert not failures, f"seed {seed}:\n" + "\n".join(failures)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cases", [SLAB_CASES, PLAN_CASES], ids=["slabs", "plans"])
def test_dense_slabs_against_torch(device, cases):
    gen, seed = fresh_generator(device)
    failures = []
    for case in cases:
        x = random_shapes.make_input(case, device, gen)
        views = [x, x.narrow(0, 1, x.shape[0] - 1)]
        if x.dtype.is_floating_point:
            with_nan = x.clone()  # the same strides, but for an expanded x (then contiguous)
            where = tuple(torch.randint(0, n, (5,), generator=gen, device=device) for n in x.shape)
            with_nan[where] = float("nan")
            views.append(with_nan)
        _, ours_fn = random_shapes.calls(case)
        for v in views:
            problem = random_shapes.check(case, v, ours_fn(v), random_shapes.reference(case, v))
            if problem:
                failures.append(f"{case.label()} {tuple(v.shape)} offset {v.storage_offset()}: {problem}")
    assert not failures, f"seed {seed}:\n" + "\n".join(failures)


CHUNKS = 6  # test ids: each a separate draw of cases, so parallel workers share them
CASES_PER_CHUNK = 50


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_cases_against_torch(device, chunk):
    gen, seed = fresh_generator(device)
    cases = random_shapes.generate(seed, CASES_PER_CHUNK, small=True)
    failures = []
    for case in cases:
        x = random_shapes.make_input(case, device, gen)
        torch_fn, ours_fn = random_shapes.calls(case)
        with torch.no_grad():
            ours = ours_fn(x)
            problem = random_shapes.check(case, x, ours, random_shapes.reference(case, x))
            if problem is None:
                again = ours_fn(x)
                firsts = ours if isinstance(ours, tuple) else (ours,)
                seconds = again if isinstance(again, tuple) else (again,)
                same = all(torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))
                           for a, b in zip(firsts, seconds))
                problem = None if same else "a second call gave other bits"
        if problem:
            failures.append(f"{case.label()}: {problem}")
    assert not failures, f"seed {seed} (TREDUCE_TEST_SEED={seed} replays it):\n" + "\n".join(failures)


def test_every_op_of_the_table_is_drawn():
    # The random cases above draw from the op table: each op, with the dims and dtypes its row
    # gives it.
    cases = random_shapes.generate(0, 10000, small=True)
    assert {case.op for case in cases} == {op.name for op in OPS}
    for op in OPS:
        dims = [case.dim for case in cases if case.op == op.name]
        lists = any(type(d) is list for d in dims)
        assert lists == op.dims.startswith("many") and (None in dims) == (op.dims in ("one", "many")), op
        dtypes = {case.dtype for case in cases if case.op == op.name}
        assert (dtypes <= {"float32", "bfloat16", "float16"}) == (op.dtypes == "float"), (op, dtypes)
        assert ("bool" in dtypes) == (op.dtypes == "any"), (op, dtypes)


def test_the_benchmark_runs_on_the_cpu(tmp_path):
    """The harness end to end at small sizes: every case checked and timed against torch, the
    summary and a line a case written."""
    assert random_shapes.main(["--device", "cpu", "--cases", "6", "--reps", "1", "--small", "--seed", "3",
                               "--out", str(tmp_path)]) == 0
    result = report.read_summary(tmp_path / "random_shapes_seed3.json")
    assert result["device"] == "cpu" and len(result["rows"]) == 6
    assert all("error" not in r and r["ours_wall"] > 0 and r["torch_wall"] > 0 for r in result["rows"])
    text = (tmp_path / "random_shapes_seed3.md").read_text()
    assert "ours / best of (torch), 6 cases" in text


def test_a_case_torch_compile_fails_on_is_compared_with_torch_alone():
    # (torch 2.11's inductor fails on argmax of a (3, 1) int32 tensor over all dims.)
    rows = [{"case": 0, "label": "a", "torch_hot": 2.0, "compile_hot": 1.0, "ours_hot": 1.0},
            {"case": 1, "label": "b", "torch_hot": 4.0, "ours_hot": 2.0, "compile_error": "InductorError"},
            {"case": 2, "label": "c", "torch_hot": 3.0, "compile_hot": 6.0, "ours_hot": 1.0}]
    text = random_shapes.summarize({"rows": rows}, ["hot"])
    assert "ours / best of (torch, compile), 3 cases" in text
    assert "| 2.00x | 1.00x | 1.00x | 0 | 0 | 0 |" in text  # ratios 1, 2 (b: against torch alone), 3
    assert "| b | 4.00 | - | 2.00 | 2.00x |" in text
    assert "1 cases torch.compile failed to compile" in text and "- b: InductorError" in text


def test_span_bytes_counts_what_a_view_spans():
    x = torch.empty(10, 8)
    assert random_shapes.span_bytes(x) == 320
    assert random_shapes.span_bytes(x[:, ::2]) == (9 * 8 + 6 + 1) * 4  # the strided slice's whole span
    assert random_shapes.span_bytes(torch.empty(5, 1).expand(5, 7)) == 20  # stride 0: one copy
