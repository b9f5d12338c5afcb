"""A trial of other planner tuning values on the cases of a random_shapes seed, without a rebuild.

    python benchmarks/tuning_trial.py --seed S --plans PLANS.json                      # baseline
    TREDUCE_TUNING="name=value,..." python benchmarks/tuning_trial.py --seed S --plans PLANS.json \\
        [--against random_shapes_seedS.json]

The first call (no PLANS.json yet) writes every case's plan under the process's tuning (normally
the built-in table). A call under another TREDUCE_TUNING line (csrc/core/cuda/tuning.h's Tuning) re-plans
every case and times ours alone on the cases whose plan changed, each result checked against
torch first; with --against (random_shapes.py's JSON of the same seed, device and cases) it prints
ours / best peer before and after for those cases. Hot (CUDA graph replays) on CUDA, wall time on
the CPU.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import random_shapes  # noqa: E402
import report  # noqa: E402
import timing  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--cases", type=int, default=300)
    p.add_argument("--small", action="store_true", help="the tests' sizes")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--plans", type=pathlib.Path, required=True, help="the baseline's plans (written if missing)")
    p.add_argument("--against", type=pathlib.Path, default=None, help="random_shapes.py's JSON of the same cases")
    p.add_argument("--reps", type=int, default=9)
    return p.parse_args(argv)


def main(argv=None) -> int:
    import torch_reduce

    args = parse_args(argv)
    baseline = not args.plans.exists()
    plans = {} if baseline else json.loads(args.plans.read_text())
    peers = {}
    if args.against is not None:
        peers = {r["case"]: r for r in report.read_summary(args.against)["rows"]}
    mode = "hot" if args.device == "cuda" else "wall"
    gen = torch.Generator(device=args.device).manual_seed(args.seed)
    seen, changed, failed = {}, [], 0
    for index, case in enumerate(random_shapes.generate(args.seed, args.cases, small=args.small)):
        x = random_shapes.make_input(case, args.device, gen)
        plan = json.dumps(torch_reduce.explain(x, case.dim, case.op), sort_keys=True)
        seen[str(index)] = plan
        if baseline or plans.get(str(index)) == plan:
            continue
        torch_fn, ours_fn = random_shapes.calls(case)
        problem = random_shapes.check(case, x, ours_fn(x), random_shapes.reference(case, x))
        if problem:
            print(f"case {index}: {case.label()}: {problem}", file=sys.stderr)
            failed += 1
            continue
        ours = timing.quantiles(timing.time_mode(mode, lambda: ours_fn(x), args.reps))[0]
        changed.append((index, case.label(), ours))
    if baseline:
        args.plans.write_text(json.dumps(seen))
        print(f"plans of {len(seen)} cases written to {args.plans}")
        return 0
    print(f"{len(changed)} of {len(seen)} cases planned differently")
    ratios = []
    for index, label, ours in changed:
        row = peers.get(index, {})
        old = row.get(f"ours_{mode}")
        best = min([row[k] for k in (f"torch_{mode}", f"compile_{mode}") if k in row] or [float("nan")])
        if old:
            ratios.append((best / old, best / ours))
            print(f"  case {index} {label}: {old:.2f} -> {ours:.2f} us ({best / old:.2f}x -> {best / ours:.2f}x the best peer)")
        else:
            print(f"  case {index} {label}: {ours:.2f} us")
    if ratios:
        before, after = [r[0] for r in ratios], [r[1] for r in ratios]
        print(f"ours / best peer on them: median {statistics.median(before):.2f}x -> {statistics.median(after):.2f}x; "
              f"below 1.0x {sum(v < 1 for v in before)} -> {sum(v < 1 for v in after)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
