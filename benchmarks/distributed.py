"""Sums across processes: torch_reduce.distributed.sum (exact and auto) against DTensor's torch.sum
and one device's sum of the whole tensor. Start it with torchrun, one process a GPU (NCCL), or on
CPUs (gloo) where there is no GPU:

    torchrun --nproc-per-node 2 benchmarks/distributed.py                  # 2^20 to 2^30 elements in all
    torchrun --nproc-per-node 4 benchmarks/distributed.py --sizes 2^20,2^24 --dtypes float32,bfloat16

Each rank holds n / world elements (N(0,1)) of one tensor; every call returns the sum of all of
them on every rank. Timed per call: a barrier, then the median over --reps calls between CUDA
events (wall clock on CPUs), the candidates interleaved. Checked first: the exact sums are the same
bits on every rank and equal to one device's exact sum of the whole tensor (gathered), which they
must be. Rank 0 writes distributed.json and distributed.md to --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

import torch_reduce
import torch_reduce.distributed as trd

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}


def parse_size(text: str) -> int:
    base, _, exp = text.strip().partition("^")
    return int(base) ** int(exp) if exp else int(base)


def timer(device: torch.device, fn, reps: int) -> float:
    """Median us per call over `reps` calls, each timed alone after a barrier."""
    samples = []
    for _ in range(reps):
        dist.barrier()
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(samples)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    view = {8: torch.int64, 4: torch.int32, 2: torch.int16}[a.element_size()]
    return torch.equal(a.reshape(1).view(view).cpu(), b.reshape(1).view(view).cpu())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2^20,2^24,2^28,2^30", help="elements in all, over every rank")
    parser.add_argument("--dtypes", default="float32", help=f"comma-separated from {', '.join(DTYPES)}")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("bench_out"))
    args = parser.parse_args(argv)

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard

    mesh = init_device_mesh(device.type, (world,))
    rows = []
    for name in args.dtypes.split(","):
        dtype = DTYPES[name.strip()]
        for n in (parse_size(s) for s in args.sizes.split(",")):
            local = n // world + (rank < n % world)
            gen = torch.Generator(device=device).manual_seed(1000 * rank + 7)
            shard = torch.randn(local, generator=gen, device=device).to(dtype)
            dt = DTensor.from_local(shard, mesh, [Shard(0)], run_check=False)
            fns = {
                "distributed.sum exact": lambda: trd.sum(shard, variant="exact"),
                "distributed.sum auto": lambda: trd.sum(shard),
                "DTensor torch.sum": lambda: torch.sum(dt).redistribute(mesh, [Replicate()]).to_local(),
                "DTensor torch_reduce.sum exact": lambda: torch_reduce.sum(dt, variant="exact").to_local(),
            }
            # The check: the same bits on every rank, and one device's exact sum of the whole.
            got = fns["distributed.sum exact"]()
            parts = [torch.empty(0)] * world
            dist.all_gather_object(parts, shard.cpu())
            whole = torch.cat(parts)
            want = torch_reduce.sum(whole, variant="exact")
            results = [torch.empty(0)] * world
            dist.all_gather_object(results, got.cpu())
            ok = all(same_bits(r, want) for r in results)
            ok = ok and same_bits(fns["DTensor torch_reduce.sum exact"]().cpu(), want)
            times = {k: timer(device, f, args.reps) for k, f in fns.items()}
            one = None
            if rank == 0:  # one device, the whole tensor
                whole_dev = whole.to(device)
                torch.sum(whole_dev)
                samples = []
                for _ in range(args.reps):
                    t0 = time.perf_counter()
                    torch.sum(whole_dev)
                    if cuda:
                        torch.cuda.synchronize()
                    samples.append((time.perf_counter() - t0) * 1e6)
                one = statistics.median(samples)
                del whole_dev
            rows.append({"dtype": name, "n": n, "world": world, "exact_bits_ok": ok, "times_us": times,
                         "one_device_torch_sum_us": one})
            if rank == 0:
                print(f"{name} n={n} world={world}: " + ", ".join(f"{k} {v:.1f} us" for k, v in times.items())
                      + f", one device {one:.1f} us, exact bits {'ok' if ok else 'DIFFER'}", flush=True)
            if not ok:
                raise SystemExit(f"exact sums differ from one device's at {name} n={n}")
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        env = {"torch": torch.__version__, "backend": dist.get_backend(), "world": world,
               "device": torch.cuda.get_device_name(device) if cuda else "cpu",
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        (args.out / "distributed.json").write_text(json.dumps({"environment": env, "rows": rows}, indent=1))
        names = list(rows[0]["times_us"])
        lines = [f"# Sums across {world} processes ({env['backend']}, {env['device']}, torch {env['torch']}, {env['date']})",
                 "", "us per call, medians; every rank gets the sum.", "",
                 "| dtype | n | " + " | ".join(names) + " | one device torch.sum | exact bits = one device |",
                 "|---|---|" + "---|" * (len(names) + 2)]
        for r in rows:
            lines.append(f"| {r['dtype']} | {r['n']} | " + " | ".join(f"{r['times_us'][k]:.1f}" for k in names)
                         + f" | {r['one_device_torch_sum_us']:.1f} | {'yes' if r['exact_bits_ok'] else 'NO'} |")
        (args.out / "distributed.md").write_text("\n".join(lines) + "\n")
    dist.barrier()
    dist.destroy_process_group()
    # Done: leave without the interpreter's teardown, where a gloo process now and then aborted
    # ("terminate called without an active exception") after its work was written.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
