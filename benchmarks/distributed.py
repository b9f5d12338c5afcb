"""Sums across processes: torch_reduce.distributed.sum (exact and auto) against DTensor's torch.sum
and one device's sums of the whole tensor. Start it with torchrun, one process a GPU (NCCL), or on
CPUs (gloo) where there is no GPU; then put the runs of several world sizes side by side:

    torchrun --nproc-per-node 2 benchmarks/distributed.py                  # 2^20 to 2^32 elements in all
    torchrun --nproc-per-node 4 benchmarks/distributed.py --sizes 2^20,2^24 --dtypes float32,bfloat16
    python benchmarks/distributed.py --scaling bench_out                   # every world size run into it

The whole tensor is a function of each element's index alone (chunks of 2^22 elements, each drawn
from a seed of its own, on the device), so every world size and every split sums the same numbers.
Two splits: "even" (torch.chunk's, as DTensor's Shard(0): the DTensor inputs take it) and "uneven"
(rank r holds a share in proportion to r + 1, rank 1 none: an empty shard).

Checked first, for every case: each rank's exact sum of either split, and the exact sum of the
DTensor, is the same bits as one device's exact sum of the whole tensor (made on rank 0) and as
the CPU's; integer sums (auto and exact) equal torch.sum of the whole. Timed, on the even split:
a barrier, then one call between CUDA events (wall clock on CPUs), medians over --reps calls, one
candidate after another; beside them the all-reduce alone (of the exact state, and of one value:
the collectives of exact and auto) and, on rank 0 alone, one device's sums of the whole tensor.
Rank 0 writes distributed_w<world>.json and .md to --out; --scaling reads every such file there,
checks that the exact sums are the same bits at every world size, and writes scaling.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

import torch_reduce
import torch_reduce.distributed as trd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # also under PYTHONSAFEPATH (scripts/check_torch.sh)
import report  # noqa: E402
from cpu import cpu_name  # noqa: E402

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
          "float64": torch.float64, "int64": torch.int64}
CHUNK = 1 << 22
SEED = 7


def parse_size(text: str) -> int:
    base, _, exp = text.strip().partition("^")
    return int(base) ** int(exp) if exp else int(base)


def size_name(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else str(n)


def elements(lo: int, hi: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Elements lo..hi-1 of the whole tensor: chunk k holds CHUNK elements drawn from seed k alone
    (N(0, 1); integers uniform in +-2^40)."""
    out = torch.empty(hi - lo, dtype=dtype, device=device)
    gen = torch.Generator(device=device)
    for k in range(lo // CHUNK, (hi + CHUNK - 1) // CHUNK):
        a, b = max(lo, k * CHUNK), min(hi, (k + 1) * CHUNK)
        gen.manual_seed(SEED * 1_000_003 + k)
        if dtype.is_floating_point:
            draw = torch.randn(CHUNK, generator=gen, device=device,
                               dtype=torch.float64 if dtype == torch.float64 else torch.float32)
        else:
            draw = torch.randint(-(2**40), 2**40, (CHUNK,), generator=gen, device=device, dtype=torch.int64)
        out[a - lo:b - lo] = draw[a - k * CHUNK:b - k * CHUNK]
    return out


def bounds(n: int, world: int, split: str) -> list[int]:
    """world + 1 shard boundaries of n elements."""
    if split == "even":  # torch.chunk's: ceil(n / world) each, the last ones short or empty
        q = -(-n // world)
        return [min(r * q, n) for r in range(world + 1)]
    weights = [0 if r == 1 else r + 1 for r in range(world)]
    cum = [sum(weights[:r]) for r in range(world + 1)]
    return [n * c // cum[-1] for c in cum]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timer(device: torch.device, fn, reps: int, barrier: bool = True) -> float:
    """Median us per call over `reps` calls, each timed alone (after a barrier, if `barrier`)."""
    fn()
    sync(device)
    samples = []
    for _ in range(reps):
        if barrier:
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


def bits(t: torch.Tensor) -> str:
    """A one-element tensor's bits in hex, as its dtype's width stores them."""
    width = t.element_size()
    view = {8: torch.int64, 4: torch.int32, 2: torch.int16}[width]
    return f"{t.detach().reshape(1).cpu().view(view).item() & ((1 << 8 * width) - 1):0{2 * width}x}"


def check_case(dtype: torch.dtype, whole, shards: dict, dt, rank: int, world: int) -> dict:
    """Every rank's sums of every split and of the DTensor `dt` (None for integers) against rank
    0's sums of the whole tensor."""
    want = [None]
    if rank == 0:
        if dtype.is_floating_point:
            dev = torch_reduce.sum(whole, variant="exact")
            cpu = torch_reduce.sum(whole.cpu(), variant="exact")
            want = [{"exact": bits(dev), "cpu_exact": bits(cpu)}]
        else:
            want = [{"exact": bits(torch.sum(whole))}]
    dist.broadcast_object_list(want, src=0)
    want = want[0]
    mine = {}
    for split, shard in shards.items():
        if dtype.is_floating_point:
            mine[split] = bits(trd.sum(shard, variant="exact"))
        else:  # integer sums: exact for every variant
            mine[split] = ",".join({bits(trd.sum(shard, variant=v)) for v in ("auto", "exact")})
    if dt is not None:
        mine["DTensor"] = bits(torch_reduce.sum(dt, variant="exact").to_local())
    every = [None] * world
    dist.all_gather_object(every, mine)
    checks = {key: all(r[key] == want["exact"] for r in every) for key in mine}
    if "cpu_exact" in want:
        checks["CPU"] = want["cpu_exact"] == want["exact"]
    return {"exact_bits": want["exact"], "checks": checks}


def case(name: str, n: int, mesh, device: torch.device, reps: int) -> dict:
    """One dtype and size: made, checked and (floating dtypes) timed. Its tensors are this call's
    locals, freed when it returns."""
    from torch.distributed.tensor import DTensor, Replicate, Shard

    rank, world = dist.get_rank(), dist.get_world_size()
    dtype = DTYPES[name]
    # Rank 0 makes the whole tensor and takes its shards as views of it; the others make theirs.
    whole = elements(0, n, dtype, device) if rank == 0 else None
    shards = {}
    for split in ["even"] + (["uneven"] if world > 1 else []):
        b = bounds(n, world, split)
        shards[split] = whole[b[rank]:b[rank + 1]] if rank == 0 else elements(b[rank], b[rank + 1], dtype, device)
    shard = shards["even"]
    dt = None
    if dtype.is_floating_point:  # the even split is DTensor's own (torch.chunk's)
        dt = DTensor.from_local(shard, mesh, [Shard(0)], run_check=False, shape=torch.Size([n]), stride=(1,))
    row = {"dtype": name, "n": n, "world": world}
    row.update(check_case(dtype, whole, shards, dt, rank, world))
    row["exact_bits_ok"] = all(row["checks"].values())
    if not dtype.is_floating_point:
        return row
    state = torch.ops.treduce._exact_state(shard).clone()
    one = torch.zeros(1, dtype=dtype, device=device)
    fns = {
        "distributed.sum exact": lambda: trd.sum(shard, variant="exact"),
        "distributed.sum auto": lambda: trd.sum(shard),
        "DTensor torch.sum": lambda: torch.sum(dt).redistribute(mesh, [Replicate()]).to_local(),
        "DTensor torch_reduce.sum exact": lambda: torch_reduce.sum(dt, variant="exact").to_local(),
        "all-reduce of the exact state": lambda: dist.all_reduce(state),
        "all-reduce of one value": lambda: dist.all_reduce(one),
    }
    row["times_us"] = {k: timer(device, f, reps) for k, f in fns.items()}
    if rank == 0:  # one device, the whole tensor; the other ranks wait at the caller's barrier
        row["one_device_us"] = {
            "torch.sum": timer(device, lambda: torch.sum(whole), reps, barrier=False),
            "torch_reduce auto": timer(device, lambda: torch_reduce.sum(whole), reps, barrier=False),
            "torch_reduce exact": timer(device, lambda: torch_reduce.sum(whole, variant="exact"), reps, barrier=False),
        }
    return row


def run(args) -> int:
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device.type, (world,))
    rows = []
    for name in (d.strip() for d in args.dtypes.split(",")):
        for n in (parse_size(s) for s in args.sizes.split(",")):
            row = case(name, n, mesh, device, args.reps)
            rows.append(row)
            ok = row["exact_bits_ok"]
            if rank == 0:
                timed = ", ".join(f"{k} {v:.1f} us" for k, v in row.get("times_us", {}).items())
                print(f"{name} n={size_name(n)} world={world}: exact bits {row['exact_bits']} "
                      f"{'ok' if ok else 'DIFFER'} {row['checks']}" + (f"; {timed}" if timed else ""), flush=True)
            if cuda:
                torch.cuda.empty_cache()
            dist.barrier()
            if not ok:
                raise SystemExit(f"sums differ from one device's exact sum at {name} n={n}: {row['checks']}")
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        env = {"torch": torch.__version__, "backend": dist.get_backend(), "world": world,
               "device": torch.cuda.get_device_name(device) if cuda else f"{cpu_name()}, {os.cpu_count()} cores",
               "threads": torch.get_num_threads(),
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        report.write_summary(args.out / f"distributed_w{world}.json", {"environment": env, "rows": rows})
        (args.out / f"distributed_w{world}.md").write_text(world_table(env, rows))
    dist.barrier()
    dist.destroy_process_group()
    # Done: leave without the interpreter's teardown, where a gloo process now and then aborted
    # ("terminate called without an active exception") after its work was written.
    sys.stdout.flush()
    os._exit(0)


def world_table(env: dict, rows: list[dict]) -> str:
    lines = [f"# Sums across {env['world']} processes ({env['backend']}, {env['device']}, torch {env['torch']}, "
             f"{env['date']})", "",
             "Every rank gets the sum. Checks: each rank's exact sum of the even and the uneven split (an empty",
             "shard included) and of the DTensor against one device's exact sum of the whole tensor (its bits",
             "below), and that against the CPU's; integer sums, auto and exact, against torch.sum.", "",
             "| dtype | n | exact sum's bits | checks |", "|---|---|---|---|"]
    for r in rows:
        checks = ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in r["checks"].items())
        lines.append(f"| {r['dtype']} | {size_name(r['n'])} | {r['exact_bits']} | {checks} |")
    timed = [r for r in rows if "times_us" in r]
    if timed:
        names = list(timed[0]["times_us"])
        ones = list(timed[0].get("one_device_us", {}))
        lines += ["", "us per call, medians, the even split; the all-reduces alone are the collectives of exact",
                  "(the state) and auto (one value); share: the state's all-reduce / the exact sum.", "",
                  "| dtype | n | " + " | ".join(names) + " | share | " + " | ".join(f"one device {k}" for k in ones)
                  + " |", "|---|---|" + "---|" * (len(names) + 1 + len(ones))]
        for r in timed:
            t = r["times_us"]
            share = t["all-reduce of the exact state"] / t["distributed.sum exact"]
            lines.append(f"| {r['dtype']} | {size_name(r['n'])} | " + " | ".join(f"{t[k]:.1f}" for k in names)
                         + f" | {share:.2f} | " + " | ".join(f"{r['one_device_us'][k]:.1f}" for k in ones) + " |")
    return "\n".join(lines) + "\n"


def scaling(folder: Path) -> int:
    """scaling.md from every distributed_w<world>.json in `folder`: the exact distributed sum's time
    at each world size beside one device's, and whether its bits are the same at every world size."""
    runs = {}
    for path in folder.glob("distributed_w*.json"):
        match = re.fullmatch(r"distributed_w(\d+)\.json", path.name)
        if match:
            runs[int(match.group(1))] = report.read_summary(path)
    if not runs:
        print(f"no distributed_w<world>.json in {folder}", file=sys.stderr)
        return 1
    worlds = sorted(runs)
    cases = {}
    for w in worlds:
        for r in runs[w]["rows"]:
            cases.setdefault((r["dtype"], r["n"]), {})[w] = r
    env = runs[worlds[-1]]["environment"]
    lines = [f"# The exact distributed sum on {', '.join(map(str, worlds))} processes ({env['backend']}, "
             f"{env['device']}, torch {env['torch']})", "",
             "us per call of `torch_reduce.distributed.sum(shard, variant=\"exact\")`, the even split, medians;",
             "one device: `torch.sum` and the exact sum of the whole tensor on one process (the largest run's",
             "rank 0). Same bits: the exact sum's bits at every world size listed, and every check of each run.", "",
             "| dtype | n | " + " | ".join(f"{w} {'process' if w == 1 else 'processes'}" for w in worlds)
             + " | one device torch.sum | one device exact | same bits |",
             "|---|---|" + "---|" * (len(worlds) + 3)]
    all_same = True
    for (dtype, n), by_world in cases.items():
        seen = {r["exact_bits"] for r in by_world.values()}
        same = len(seen) == 1 and all(r["exact_bits_ok"] for r in by_world.values())
        all_same &= same
        times = [f"{by_world[w]['times_us']['distributed.sum exact']:.1f}" if "times_us" in by_world.get(w, {})
                 else ("-" if w not in by_world else "checked") for w in worlds]
        last = by_world[max(by_world)]
        one = last.get("one_device_us", {})
        one_cells = [f"{one[k]:.1f}" if k in one else "-" for k in ("torch.sum", "torch_reduce exact")]
        lines.append(f"| {dtype} | {size_name(n)} | " + " | ".join(times) + " | " + " | ".join(one_cells)
                     + f" | {'yes' if same else 'NO'} ({', '.join(sorted(seen))}; worlds {', '.join(map(str, sorted(by_world)))}) |")
    (folder / "scaling.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all_same else 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2^20,2^24,2^28,2^30,2^32", help="elements in all, over every rank")
    parser.add_argument("--dtypes", default="float32,bfloat16,float64,int64",
                        help=f"comma-separated from {', '.join(DTYPES)}; integer ones are checked, not timed")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("bench_out"))
    parser.add_argument("--scaling", type=Path, metavar="FOLDER",
                        help="no sums: the table across the world sizes run into FOLDER")
    args = parser.parse_args(argv)
    if args.scaling:
        return scaling(args.scaling)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
