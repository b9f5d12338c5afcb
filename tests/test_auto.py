"""What `auto` (and the `cub` reference) promise beyond the shared suite in test_sum.py:
vector loads at any alignment, bitwise-reproducible results, float32 accuracy no worse than
torch.sum's, and exact 1-byte sums past 2^32."""

import pytest
import torch

import torch_reduce
from util import (DTYPES, HAS_CUDA, checked_sum, cuda_only, device_params, exact_input, exact_reference, fresh_generator,
                  gpu_memory, same_value)

FAST = [p for p in device_params() if p.values[1] in ("auto", "cub")]


@pytest.mark.parametrize("n", [1, 17, 100_003, 1_000_003])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("device,variant", device_params())
def test_storage_offsets(device, variant, dtype, n):
    """Every start 1 to 15 bytes past a 16-byte boundary (in whole elements): the misaligned
    head is peeled, and nothing is read twice or skipped. CUDA auto: every start in a 128-byte
    line, since its vectors begin at the next 128-byte boundary."""
    gen, seed = fresh_generator(device)
    size = torch.empty((), dtype=dtype).element_size()
    line = 128 if (device, variant) == ("cuda", "auto") else 16
    base = exact_input(n + line, dtype, device, gen)
    assert base.data_ptr() % line == 0
    for offset in range(1, line // size):
        x = base[offset : offset + n]
        got = checked_sum(x, variant)
        want = exact_reference(x, got.dtype)
        assert same_value(got, want), f"seed {seed}, offset {offset * size} bytes: got {got.item()}, want {want.item()}"


@cuda_only
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_single_block_tile_counts(dtype):
    """auto's one-block kernel loads one to four tiles of 32 KiB at once, a code path for each
    count: sizes at the edges of each count, aligned and from misaligned starts, up to the
    first size that takes the grid kernels."""
    gen, seed = fresh_generator("cuda")
    size = torch.empty((), dtype=dtype).element_size()
    tile = 32768 // size
    sizes = sorted({k * tile + d for k in range(1, 5) for d in (-1, 0, 1)})
    base = exact_input(sizes[-1] + 128, dtype, "cuda", gen)
    for n in sizes:
        for offset in (0, 1, 128 // size - 1):
            x = base[offset : offset + n]
            got = checked_sum(x, "auto")
            want = exact_reference(x, got.dtype)
            assert same_value(got, want), f"seed {seed}, n {n}, offset {offset}: got {got.item()}, want {want.item()}"


@cuda_only
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_short_inputs_from_every_start(dtype):
    """Inputs that end inside their first 128-byte line or just past it, from every start in the
    line. auto loads the head of 1- and 2-byte types as 4-byte words (the first reaching back to
    the start of its word, the last ending at the last whole word before the tensor's end), so
    here a word could take in bytes from outside the tensor. Sums against exact references,
    amax and amin against torch on the CPU: the data spans the dtype's range, so a byte from
    outside the tensor would most often change them too."""
    gen, seed = fresh_generator("cuda")
    size = torch.empty((), dtype=dtype).element_size()
    line = 128 // size
    sizes = list(range(line + 16 // size + 2)) + [2 * line - 1, 2 * line, 2 * line + 1]
    base = exact_input(line + sizes[-1], dtype, "cuda", gen)
    assert base.data_ptr() % 128 == 0
    host = base.cpu()
    cases, got, want = [], {"sum": [], "amax": [], "amin": []}, {"sum": [], "amax": [], "amin": []}
    for offset in range(line):
        for n in sizes:
            x, xh = base[offset : offset + n], host[offset : offset + n]
            cases.append((offset, n))
            got["sum"].append(torch_reduce.sum(x))
            want["sum"].append(exact_reference(xh, got["sum"][-1].dtype))
            for op in ("amax", "amin"):  # over no elements these raise, as torch's do
                got[op].append(getattr(torch_reduce, op)(x) if n else torch.zeros((), dtype=dtype, device="cuda"))
                want[op].append(getattr(torch, op)(xh) if n else torch.zeros((), dtype=dtype))
    for op in got:
        ours, theirs = torch.stack(got[op]).cpu(), torch.stack(want[op])
        bad = (ours != theirs).nonzero().flatten().tolist()
        first = f"offset {cases[bad[0]][0]}, n {cases[bad[0]][1]}: got {ours[bad[0]].item()}, want {theirs[bad[0]].item()}" if bad else ""
        assert not bad, f"seed {seed}, {op}: {len(bad)} of {len(cases)} wrong; first at {first}"


@pytest.mark.parametrize("n", [1000, 300_007, 5_000_017])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64], ids=str)
@pytest.mark.parametrize("device,variant", FAST)
def test_bitwise_reproducible(device, variant, dtype, n):
    gen, _ = fresh_generator(device)
    x = torch.randn(n, generator=gen, device=device).to(dtype)
    first = torch.ops.treduce.sum(x, variant)
    for _ in range(100):
        assert torch.equal(torch.ops.treduce.sum(x, variant), first)


@cuda_only
@pytest.mark.parametrize("n", [1000, 300_007, 5_000_017])
@pytest.mark.parametrize("variant", ["auto", "cub"])
def test_graph_replays_bitwise_identical(variant, n):
    gen, _ = fresh_generator("cuda")
    x = torch.randn(n, generator=gen, device="cuda")
    eager = torch.ops.treduce.sum(x, variant)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = torch.ops.treduce.sum(x, variant)
    for _ in range(100):
        graph.replay()
        assert torch.equal(out, eager)


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _assert_eager_repeats_and_graph_agree(fn, x, seed, between=lambda k: None):
    """fn(x) eagerly, 20 more times (between(k) before each), then captured in a CUDA graph and
    replayed 3 times: every result bitwise equal to the first."""
    eager = _as_tuple(fn(x))
    for k in range(20):
        between(k)
        again = _as_tuple(fn(x))
        assert all(torch.equal(a, b) for a, b in zip(again, eager)), f"seed {seed}: an eager call differed"
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = _as_tuple(fn(x))
    for _ in range(3):
        graph.replay()
        assert all(torch.equal(a, b) for a, b in zip(out, eager)), f"seed {seed}: graph {out}, eager {eager}"


# Full reductions of every operator family, for the one-kernel / two-kernel check below.
_FULL_OPS = {
    "sum": torch_reduce.sum,
    "sum_f64": lambda x: torch_reduce.sum(x, dtype=torch.float64),  # widened: float32 grouped, bfloat16 3 blocks/SM
    "mean": torch_reduce.mean,
    "amax": torch_reduce.amax,
    "var": torch_reduce.var,
    "var_mean": torch_reduce.var_mean,
    "logsumexp": lambda x: torch_reduce.logsumexp(x, 0),
    "nanmean": torch_reduce.nanmean,
    "prod": torch_reduce.prod,
    "vector_norm": torch_reduce.vector_norm,
}


@cuda_only
@pytest.mark.parametrize("n", [2**16 + 1, 300_007, 5_000_017])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("op", list(_FULL_OPS))
def test_eager_and_graph_give_the_same_bits(op, dtype, n):
    """Past one block, an eager call runs one kernel whose last block adds the block partials
    (a ticket in the stream's scratch), a call captured in a graph a second kernel for that:
    the same partials in the same order, so the same bits. Repeated eager calls check that
    each call leaves the ticket at 0 for the next."""
    gen, seed = fresh_generator("cuda")
    x = (torch.rand(n, generator=gen, device="cuda") + 0.5).to(dtype)  # positive: prod and the norms stay finite
    _assert_eager_repeats_and_graph_agree(_FULL_OPS[op], x, seed)


@cuda_only
def test_float_welford_full_reductions_fill_the_device():
    """Full var / std_mean in float (kernels/vector.cuh's kFloatWelford): few tiles take quarter
    blocks, as sums do, and past that as many blocks as three a multiprocessor hold, so that
    (1024, 3072) float32 (384 tiles) runs one round of tiles. The bits of these grids: above,
    test_eager_and_graph_give_the_same_bits (var and var_mean at 2^16 + 1 and 5000017)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    few = torch_reduce.explain(torch.ones(28, 56, 64, device="cuda", dtype=torch.bfloat16), None, "var")["plan"]
    grid = [s for s in few["steps"] if s["kernel"] in ("vector_partials_kernel", "vector_sum_ticket_kernel")]
    assert grid and grid[0]["block"][0] == 128 and grid[0]["grid"][0] > 7, few
    many = torch_reduce.explain(torch.ones(1024, 3072, device="cuda"), None, "std_mean")["plan"]
    grid = [s for s in many["steps"] if s["kernel"] in ("vector_partials_kernel", "vector_sum_ticket_kernel")]
    assert grid and grid[0]["block"][0] == 512 and grid[0]["grid"][0] == min(384, 3 * sms), many


# Reductions over the last dim, for the row-segments check below.
_ROW_OPS = {
    "sum": lambda x: torch_reduce.sum(x, -1),
    "mean": lambda x: torch_reduce.mean(x, -1),
    "amax": lambda x: torch_reduce.amax(x, -1),
    "argmax": lambda x: torch_reduce.argmax(x, -1),
    "var_mean": lambda x: torch_reduce.var_mean(x, -1),
    "logsumexp": lambda x: torch_reduce.logsumexp(x, -1),
    "prod": lambda x: torch_reduce.prod(x, -1),
    "vector_norm": lambda x: torch_reduce.vector_norm(x, dim=-1),
    "nansum": lambda x: torch_reduce.nansum(x, -1),
}

# Few long rows, which auto cuts into segments, a block each (kernels/dims.cuh), on any GPU.
_SEGMENTED_ROWS = [(128, 65536), (7, 300_007), (3, 5, 100_003), (1, 2**20 + 7)]


@cuda_only
@pytest.mark.parametrize("shape", _SEGMENTED_ROWS, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("op", list(_ROW_OPS))
def test_segmented_rows_eager_and_graph_give_the_same_bits(op, dtype, shape):
    """Rows cut into segments: eagerly, each row's last segment block combines the row's
    partials (a ticket per row in the stream's scratch); in a graph a second kernel does. The
    same partials in the same order, so the same bits. Between the repeated eager calls, other
    calls on the stream take the same ticket words (a full sum: the first; rows of another
    count): each call must leave every word it took at 0."""
    gen, seed = fresh_generator("cuda")
    x = (torch.rand(shape, generator=gen, device="cuda") + 0.5).to(dtype)  # positive: prod and the norms stay finite
    others = [torch.rand(2**20 + 3, generator=gen, device="cuda"), torch.rand(40, 90_001, generator=gen, device="cuda")]
    between = lambda k: torch_reduce.sum(others[k % 2], -1 if k % 4 == 1 else None)  # noqa: E731
    _assert_eager_repeats_and_graph_agree(_ROW_OPS[op], x, seed, between)


# Eager calls past one block that run one kernel, its last block(s) combining: the input, the
# dim, and the kernel's name.
_ONE_KERNEL_CALLS = {
    "full": ((2**22 + 5,), None, "vector_sum_ticket_kernel"),
    "full_few_tiles": ((2**18 + 3,), None, "vector_sum_ticket_kernel"),
    # (16 rows: fewer than half the multiprocessors of any GPU it runs on, so segments; from
    # half as many rows as multiprocessors each row is one block, nothing to combine)
    "segmented_rows": ((16, 65536), -1, "row_segments_ticket_kernel"),
}


@cuda_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", list(_ONE_KERNEL_CALLS))
def test_eager_calls_take_one_kernel(case, dtype):
    """An eager full sum of 2^22 elements, one of 2^18 (few tiles: blocks of 128 threads where
    the GPU has 128 multiprocessors or more), and a sum over (16, 65536)'s rows, each launch one
    kernel, the one whose last block combines the partials itself, and the result is right: the
    one-kernel path is taken, not just allowed."""
    shape, dim, name = _ONE_KERNEL_CALLS[case]
    x = torch.randn(shape, device="cuda").to(dtype)
    torch_reduce.sum(x, dim)  # scratch allocated before the profile
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        got = torch_reduce.sum(x, dim)
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert len(kernels) == 1 and name in kernels[0], kernels
    want = x.double().sum(dim)
    # float32: 2^22 N(0,1) terms, rounding ~ sqrt(n) * |sum| * 2^-24 is far under 1e-2; bfloat16
    # results round to 8 bits (|sum| ~ 2^11 at 2^22: steps of 8)
    atol = 1e-2 if dtype == torch.float32 else max(2.0, 0.01 * want.abs().max().item())
    assert torch.allclose(got.double(), want, rtol=0, atol=atol)


@cuda_only
def test_streams_keep_their_own_scratch():
    """Eager calls on several streams at once, each stream's calls using that stream's scratch
    and ticket: exact integer sums of inputs of different sizes (so different grids), queued
    without waiting between streams, against int64 sums on the CPU."""
    gen, seed = fresh_generator("cuda")
    sizes = [2**16 + 5, 300_007, 2**20 + 3, 5_000_017]
    inputs = [torch.randint(-1000, 1000, (n,), generator=gen, device="cuda", dtype=torch.int32) for n in sizes]
    want = [x.cpu().sum() for x in inputs]
    streams = [torch.cuda.Stream() for _ in sizes]
    results = [[] for _ in sizes]
    torch.cuda.synchronize()
    for _ in range(50):
        for x, stream, got in zip(inputs, streams, results):
            with torch.cuda.stream(stream):
                got.append(torch_reduce.sum(x))
    torch.cuda.synchronize()
    for n, w, got in zip(sizes, want, results):
        values = torch.stack(got).cpu()
        assert torch.equal(values, w.expand_as(values)), f"seed {seed}, n {n}: {values.unique().tolist()} against {w.item()}"


@cuda_only
def test_streams_keep_their_own_row_tickets():
    """The same with few long rows (a ticket word a row, kernels/dims.cuh), full sums (the first
    word) on the same streams in between: exact integer sums against the CPU's."""
    gen, seed = fresh_generator("cuda")
    shapes = [(128, 65536 + 3), (7, 300_007), (40, 90_001), (3, 2**20 + 1)]
    inputs = [torch.randint(-1000, 1000, s, generator=gen, device="cuda", dtype=torch.int32) for s in shapes]
    full = torch.randint(-1000, 1000, (2**20 + 3,), generator=gen, device="cuda", dtype=torch.int32)
    want = [x.cpu().to(torch.int64).sum(-1) for x in inputs]
    streams = [torch.cuda.Stream() for _ in shapes]
    results = [[] for _ in shapes]
    torch.cuda.synchronize()
    for _ in range(30):
        for x, stream, got in zip(inputs, streams, results):
            with torch.cuda.stream(stream):
                got.append(torch_reduce.sum(x, -1))
                torch_reduce.sum(full)
    torch.cuda.synchronize()
    for shape, w, got in zip(shapes, want, results):
        for g in got:
            assert torch.equal(g.cpu(), w), f"seed {seed}, shape {shape}"


@cuda_only
def test_more_streams_than_scratch_blocks():
    """Past the 256 (device, stream) pairs that keep a scratch block of their own (torch/cuda/ops.cpp),
    calls on further streams take the caching allocator's memory and two kernels: still right,
    interleaved with calls on the streams that have a block."""
    gen, seed = fresh_generator("cuda")
    x = torch.randint(-1000, 1000, (2**20 + 3,), generator=gen, device="cuda", dtype=torch.int32)
    want = x.cpu().sum()
    streams = [torch.cuda.Stream() for _ in range(300)]
    torch.cuda.synchronize()
    got = []
    for _ in range(2):
        for stream in streams:
            with torch.cuda.stream(stream):
                got.append(torch_reduce.sum(x))
    torch.cuda.synchronize()
    values = torch.stack(got).cpu()
    assert torch.equal(values, want.expand_as(values)), f"seed {seed}: {values.unique().tolist()} against {want.item()}"


def _chain(x, op, steps=4):
    """Each step: a kernel writes x, `op` sums it, and the next kernel reads that sum."""
    sums = []
    for _ in range(steps):
        x.add_(1)
        s = op(x)
        sums.append(s)
        x.sub_((s % 5).to(x.dtype))
    return torch.stack(sums)


@cuda_only
@pytest.mark.parametrize("offset", [0, 1])
@pytest.mark.parametrize("n", [1000, 2**14 + 3, 300_007, 2**22])
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_each_call_sees_the_kernel_before(graph, n, offset):
    """auto's kernels launch before the kernel ahead of them on the stream has finished
    (programmatic dependent launch) and must wait for it before reading: a chain of writes,
    sums and reads of the sums, eagerly and in a replayed graph, against the same chain in
    int64 on the CPU."""
    gen, _ = fresh_generator("cuda")
    start = torch.randint(-3, 4, (n + offset,), generator=gen, device="cuda", dtype=torch.int32)[offset:]
    want = _chain(start.cpu().to(torch.int64), torch.sum)
    x = torch.empty(n + offset, dtype=torch.int32, device="cuda")[offset:]
    x.copy_(start)
    if graph:
        _chain(x, torch_reduce.sum)  # warm up outside the capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            got = _chain(x, torch_reduce.sum)
        for _ in range(3):
            x.copy_(start)
            g.replay()
            assert torch.equal(got.cpu(), want)
    else:
        assert torch.equal(_chain(x, torch_reduce.sum).cpu(), want)


@cuda_only
@pytest.mark.parametrize("n", [2**20, 2**26])
def test_float32_error_at_most_twice_torch(n):
    """On N(0,1) data, auto's float32 error against the float64 sum is no worse than twice
    torch.sum's on the same data. Both errors are around one unit in the last place of the
    result, so one draw decides little: the mean over 16 draws is compared."""
    ours, theirs = [], []
    for _ in range(16):
        gen, _ = fresh_generator("cuda")
        x = torch.randn(n, generator=gen, device="cuda")
        exact = x.double().sum().item()
        ours.append(abs(torch.ops.treduce.sum(x, "auto").item() - exact))
        theirs.append(abs(x.sum().item() - exact))
    mean_ours, mean_theirs = sum(ours) / len(ours), sum(theirs) / len(theirs)
    assert mean_ours <= 2 * mean_theirs, f"auto mean error {mean_ours:.3g}, torch.sum {mean_theirs:.3g}"


@pytest.mark.parametrize(
    "dtype,value,n",
    [(torch.uint8, 255, 2**25 + 3), (torch.int8, -128, 2**25 + 5), (torch.int16, -32768, 2**17 + 1)],
    ids=str,
)
@pytest.mark.parametrize("device,variant", FAST)
def test_narrow_sums_past_32_bits(device, variant, dtype, value, n):
    """Sums of 1- and 2-byte inputs whose total does not fit 32 bits come out exact."""
    x = torch.full((n,), value, dtype=dtype, device=device)
    got = torch.ops.treduce.sum(x, variant)
    assert abs(value * n) >= 2**31 and got.item() == value * n


@pytest.mark.slow
@gpu_memory
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device with 5 GB free")
def test_bool_count_past_2_32():
    """More true values than a 32-bit counter holds (4 GiB of bool)."""
    n = 2**32 + 7
    x = torch.ones(n, dtype=torch.bool, device="cuda")
    x[::1000] = False
    got = torch.ops.treduce.sum(x, "auto")
    assert got.item() == n - len(range(0, n, 1000))


def whole_short_rows_case(dtype, row_bytes, view, device, gen):
    """1031 rows of row_bytes (3 to 64 16-byte vectors) of small integers: contiguous ("whole"),
    a slice of wider rows, 16-byte aligned with a gap between rows ("gaps"), or a view one
    element in ("one_in", not aligned)."""
    cols = row_bytes // dtype.itemsize
    extra = {"whole": 0, "gaps": 16 // dtype.itemsize, "one_in": 1}[view]
    base = torch.randint(-8, 9, (1031, cols + extra), device=device, generator=gen).to(dtype)
    return base[:, 1:] if view == "one_in" else base[:, :cols]


@cuda_only
@pytest.mark.parametrize("view", ["whole", "gaps", "one_in"])
@pytest.mark.parametrize("row_bytes", [48, 112, 128, 208, 256, 384, 512, 720, 1024], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_whole_short_rows(dtype, row_bytes, view):
    """Rows of 3 to 64 whole aligned 16-byte vectors of floats take a team a row with every load
    issued at once (whole_rows_kernel; counts that are not a power of two leave the instance's
    last slots without a load), rows with gaps between them too; 1031 rows leave the last
    block part empty; the view one element in takes the general rows kernel. Small integers: the
    sums are exact (16-bit floats summed to float32, which holds them), the extrema too."""
    gen, seed = fresh_generator("cuda")
    x = whole_short_rows_case(dtype, row_bytes, view, "cuda", gen)
    want = torch.sum(x.double(), -1)
    wide = {"dtype": torch.float32} if dtype != torch.float32 else {}
    assert torch.equal(torch_reduce.sum(x, -1, **wide).double(), want), f"seed {seed}"
    for op in ("amax", "amin"):
        got = getattr(torch_reduce, op)(x, -1)
        assert got.dtype == dtype and torch.equal(got.double(), getattr(torch, op)(x.double(), -1)), f"{op}, seed {seed}"
    rtol = 1e-6 if dtype == torch.float32 else 2.0**-7
    got = torch_reduce.mean(x, -1)
    assert got.dtype == dtype and torch.allclose(got.double(), want / x.shape[-1], rtol=rtol, atol=1e-6), f"seed {seed}"


@pytest.mark.slow
@gpu_memory
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device with 5 GB free")
def test_whole_short_rows_past_2_31_elements():
    """2^24 + 3 rows of 128 bfloat16 (2^31 + 384 elements): rows past element 2^31 are reached
    with 64-bit offsets."""
    rows = 2**24 + 3
    x = torch.ones((rows, 128), dtype=torch.bfloat16, device="cuda")
    x[-1] = 2
    x[2**24 - 1, 5] = 3
    x[2**24 + 1, 127] = -4
    got = torch_reduce.sum(x, -1, dtype=torch.float32)
    assert (got[-1].item(), got[2**24 - 1].item(), got[2**24 + 1].item()) == (256.0, 130.0, 123.0)
    assert int((got == 128).sum().item()) == rows - 3
    top = torch_reduce.amax(x, -1)
    assert (top[-1].item(), top[2**24 - 1].item(), top[2**24 + 1].item(), top[0].item()) == (2.0, 3.0, 1.0, 1.0)
    assert torch_reduce.amin(x, -1)[2**24 + 1].item() == -4.0


@cuda_only
@pytest.mark.parametrize("view", ["whole", "one_in"])
@pytest.mark.parametrize("cols", [4096, 8196], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int32], ids=str)
def test_many_long_rows(dtype, cols, view):
    """Many rows of two or more vectors a thread take a block each; rows of whole aligned vectors
    (float32 and int32 here; 2-byte types at 8196 columns are not) skip the head and tail, the
    others (and a view one element in) do not. Small integers: the sums are exact (16-bit floats
    summed to float32, which holds them)."""
    gen, seed = fresh_generator("cuda")
    one_in = view == "one_in"
    x = torch.randint(-8, 9, (600, cols + one_in), device="cuda", generator=gen).to(dtype)[:, int(one_in):]
    want = torch.sum(x.double(), -1)
    wide = {"dtype": torch.float32} if dtype in (torch.bfloat16, torch.float16) else {}
    assert torch.equal(torch_reduce.sum(x, -1, **wide).double(), want), f"seed {seed}"
    assert torch.equal(torch_reduce.amax(x, -1).double(), torch.amax(x.double(), -1)), f"seed {seed}"
    if dtype.is_floating_point:  # the mean rounded to the input's dtype
        rtol = 1e-6 if dtype == torch.float32 else 2.0**-7
        assert torch.allclose(torch_reduce.mean(x, -1).double(), want / cols, rtol=rtol, atol=1e-6), f"seed {seed}"
