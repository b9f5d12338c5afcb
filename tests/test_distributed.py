"""torch_reduce.distributed.sum and DTensor: 1, 2, 3, 4 and 8 CPU processes over gloo (and every GPU
over NCCL where a machine has two or more). Each rank holds a shard of one tensor, split unevenly; the
exact sum over the ranks must be bitwise the single-process exact sum of the whole tensor, for
every world size; integer sums exact; other variants close to torch.sum."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import torch_reduce
from util import fresh_generator

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    view = {8: torch.int64, 4: torch.int32, 2: torch.int16}[a.element_size()]
    return torch.equal(a.contiguous().view(view), b.contiguous().view(view))


def _data(seed: int, n: int, cols: int, dtype: torch.dtype) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(n, cols, generator=gen, dtype=torch.float64)
    return (z * 2.0 ** torch.randint(-30, 30, (n, cols), generator=gen)).to(dtype)


def _cuts(seed: int, n: int, world: int) -> list[int]:
    """Uneven shard boundaries of n rows: world + 1 increasing numbers from 0 to n (shards may be empty)."""
    gen = torch.Generator().manual_seed(seed + 1)
    inner = sorted(torch.randint(0, n + 1, (world - 1,), generator=gen).tolist())
    return [0] + inner + [n]


def _worker(rank: int, world: int, init: str, seed: int, backend: str) -> None:
    device = "cuda" if backend == "nccl" else "cpu"
    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world)
    try:
        n, cols = 40_009, 3
        cuts = _cuts(seed, n, world)
        for dtype in FLOATS:
            x = _data(seed, n, cols, dtype)
            shard = x[cuts[rank]:cuts[rank + 1]].to(device)
            what = f"seed {seed}, world {world}, rank {rank}, {dtype}, cuts {cuts}"
            got = torch_reduce.distributed.sum(shard, variant="exact")
            assert same_bits(got.cpu(), torch_reduce.sum(x, variant="exact")), what
            got = torch_reduce.distributed.sum(shard, 0, variant="exact")
            assert same_bits(got.cpu(), torch_reduce.sum(x, 0, variant="exact")), what + ", dim 0"
            got = torch_reduce.distributed.sum(shard, 0, True, dtype=torch.float64, variant="exact")
            assert same_bits(got.cpu(), torch_reduce.sum(x, 0, True, dtype=torch.float64, variant="exact")), what
            if dtype in (torch.float32, torch.float64):
                got = torch_reduce.distributed.sum(shard)
                torch.testing.assert_close(got.cpu(), torch.sum(x), rtol=1e-5 if dtype == torch.float32 else 1e-12,
                                           atol=1e-6 * x.abs().sum().item())
        ints = torch.randint(-(2**40), 2**40, (n, cols), generator=torch.Generator().manual_seed(seed))
        shard = ints[cuts[rank]:cuts[rank + 1]].to(device)
        for variant in ("auto", "exact"):
            assert torch.equal(torch_reduce.distributed.sum(shard, variant=variant).cpu(), ints.sum())
            assert torch.equal(torch_reduce.distributed.sum(shard.int() % 7, 0, variant=variant).cpu(),
                               (ints.int() % 7).sum(0))
        _dtensor_checks(rank, world, seed, device)
        dist.barrier()  # no rank tears its group down while another is still in a collective
    finally:
        dist.destroy_process_group()
    # Every check passed: leave without the interpreter's teardown, where a gloo process once
    # aborted ("terminate called without an active exception", one run in about twenty) after
    # all of its work was done.
    os._exit(0)


def _dtensor_checks(rank: int, world: int, seed: int, device: str) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh(device, (world,))
    x = _data(seed, 1000 * world + 7, 5, torch.float32)
    whole = torch_reduce.sum(x, variant="exact")
    dt = distribute_tensor(x.to(device), mesh, [Shard(0)])
    what = f"seed {seed}, world {world}, rank {rank}"
    got = torch_reduce.sum(dt, variant="exact")
    assert got.placements == (Replicate(),), got.placements
    assert same_bits(got.full_tensor().cpu(), whole), what
    # Over the kept dim's complement: the result stays sharded, each row exact.
    got = torch_reduce.sum(dt, 1, variant="exact")
    assert same_bits(got.full_tensor().cpu(), torch_reduce.sum(x, 1, variant="exact")), what
    # The op called directly: its registered sharding gathers what an exact sum reduces.
    got = torch.ops.treduce.sum(dt, "exact", [0])
    assert same_bits(got.full_tensor().cpu(), torch_reduce.sum(x, 0, variant="exact")), what
    # auto: a partial sum per shard, added by DTensor. Float32 additions in any order are within
    # (n - 1) u sum|x| of the exact sum, and the float64 reference's own error is far below that
    # (the data spans 2^60, so a bound relative to the result is no bound: it failed one seed).
    got = torch_reduce.sum(dt, 0).full_tensor().cpu().double()
    ref = torch.sum(x.double(), 0)
    u = 2.0**-24
    bound = (x.shape[0] - 1) * u * x.double().abs().sum(0) + u * ref.abs()
    assert ((got - ref).abs() <= bound).all(), (what, got, ref, bound)
    # The state's own sharding: partial states, added in int64 when replicated.
    state = torch.ops.treduce._exact_state(dt)
    assert same_bits(torch.ops.treduce._exact_round(state, torch.float32).full_tensor().cpu(), whole), what


def _run(world: int, backend: str = "gloo") -> None:
    _, seed = fresh_generator("cpu")
    with tempfile.TemporaryDirectory() as tmp:
        init = "file://" + os.path.join(tmp, "store")
        mp.spawn(_worker, args=(world, init, seed, backend), nprocs=world, join=True)


@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
def test_gloo_exact_sums_equal_one_process(world):
    _run(world)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2 or not dist.is_nccl_available(),
                    reason="needs 2 GPUs and NCCL")
def test_nccl_exact_sums_equal_one_process():
    _run(torch.cuda.device_count(), "nccl")


def test_benchmark_runs_on_gloo(tmp_path):
    """benchmarks/distributed.py under torchrun, 3 CPU processes (the uneven split leaves rank 1
    empty): it checks every split's exact sums, the DTensor's and the integer sums against one
    process's before timing, writes its tables, and --scaling puts the runs of 1 and 3 processes
    side by side with their bits equal."""
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "distributed.py"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    for world in (1, 3):
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world), str(script),
                        "--sizes", "2^12,4194307", "--dtypes", "float32,bfloat16,int64", "--reps", "2",
                        "--out", str(tmp_path)], check=True, env=env, capture_output=True)
    table = (tmp_path / "distributed_w3.md").read_text()
    # Per float case: even, uneven, DTensor and CPU; per integer case: even and uneven.
    assert table.count(" yes") == 2 * 2 * 4 + 2 * 2 and " NO" not in table, table
    assert table.count("| float32 | 4194307 |") == 2, table  # checked, then timed
    done = subprocess.run([sys.executable, str(script), "--scaling", str(tmp_path)], env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    scaling = (tmp_path / "scaling.md").read_text()
    assert scaling.count("| yes (") == 6 and "worlds 1, 3" in scaling, scaling
