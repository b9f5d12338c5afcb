"""Re-time ours on the committed random_shapes cases that were behind their peers when committed:
the regressions and the gains of the code since, over every seed at once, without running the
peers again.

    python benchmarks/retime.py [--device cuda|cpu] [--limit 1.0] [--seeds S ...] [--torch]

Reads each seed's committed JSON (benchmarks/results/h200 on CUDA, results/cpu-dev on the CPU, or
--results DIR; runs of the tests' sizes too), draws the same cases and inputs again
(random_shapes.generate and make_input, in order; a case whose label changed stops it), and times ours on the cases whose ratio was below --limit: hot (CUDA graph replays)
against the peers stored with the case, which were measured on a GPU of the same kind; wall time
on the CPU, where --torch times torch again in the same run (the machine's noise is larger than
the stored times' spread). Each result is checked against torch before it is timed. Prints one
line a case, `ratio_now ratio_then ours_now ours_then peer seed:case label [plan]`, then the
counts; the lines the most changed first with --sort.

The tree keeps a few seeds a folder; earlier ones are in git history (docs/performance.md lists
every seed used). To re-time those, write them into a folder and pass it:

    mkdir -p old; for s in 48337 13579; do f=random_shapes_seed$s.json
        git show 8d99fb0:benchmarks/results/h200/$f > old/$f; done
    python benchmarks/retime.py --results old
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import random_shapes  # noqa: E402
import report  # noqa: E402
import timing  # noqa: E402

import torch_reduce  # noqa: E402

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--results", type=pathlib.Path, default=None, help="the committed JSONs' folder")
    p.add_argument("--seeds", type=int, nargs="*", default=None, help="default: every seed there")
    p.add_argument("--limit", type=float, default=1.0, help="cases whose committed ratio was below this")
    p.add_argument("--torch", action="store_true", help="CPU: time torch again too")
    p.add_argument("--sort", action="store_true", help="the most changed cases first")
    p.add_argument("--reps", type=int, default=15)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    cuda = args.device == "cuda"
    folder = args.results or RESULTS / ("h200" if cuda else "cpu-dev")
    files = sorted(folder.glob("random_shapes_seed*.json"))
    if args.seeds:
        files = [folder / f"random_shapes_seed{s}.json" for s in args.seeds]
    mode = "hot" if cuda else "wall"
    time = timing.time_hot if cuda else timing.time_wall
    lines = []
    for path in files:
        committed = report.read_summary(path)
        if committed["device"] != args.device:
            continue
        seed = committed["seed"]
        wanted = {}
        for row in committed["rows"]:
            if f"ours_{mode}" not in row:
                continue
            peer = min(row[f"torch_{mode}"], row.get(f"compile_{mode}", float("inf")))
            if peer / row[f"ours_{mode}"] < args.limit:
                wanted[row["case"]] = (row, peer, peer / row[f"ours_{mode}"])
        gen = torch.Generator(device=args.device).manual_seed(seed)
        for index, case in enumerate(random_shapes.generate(seed, committed["cases"], small=committed["small"])):
            x = random_shapes.make_input(case, args.device, gen)  # every input, to keep the sequence
            if index not in wanted:
                continue
            row, peer, then = wanted[index]
            if row["label"] != case.label():
                raise SystemExit(f"{path.name}: case {index} is {case.label()} now, {row['label']} then")
            torch_fn, ours_fn = random_shapes.calls(case)
            problem = random_shapes.check(case, x, ours_fn(x), random_shapes.reference(case, x))
            if problem:
                print(f"{seed}:{index} {case.label()}: {problem}", file=sys.stderr)
                continue
            ours = timing.quantiles(time(lambda: ours_fn(x), args.reps))[0]
            if not cuda and args.torch:
                peer = timing.quantiles(time(lambda: torch_fn(x), args.reps))[0]
            plan = random_shapes.plan_text(torch_reduce.explain(x, case.dim, case.op)) if cuda else row.get("plan", "")
            lines.append((peer / ours, then, ours, row[f"ours_{mode}"], peer, f"{seed}:{index}", case.label(), plan))
            del x
    if args.sort:
        lines.sort(key=lambda line: line[2] / line[3], reverse=True)
    for line in lines:
        print("%.2f %.2f %9.2f %9.2f %9.2f %s %s [%s]" % line)
    ratios = sorted(line[0] for line in lines)
    if ratios:
        print(f"{len(ratios)} cases: {sum(r < 1 for r in ratios)} below 1.0x now, {sum(r < 0.9 for r in ratios)} "
              f"below 0.9x, median {ratios[len(ratios) // 2]:.2f}x; {sum(l[2] > 1.25 * l[3] for l in lines)} "
              f"1.25x slower than then, {sum(l[2] < 0.8 * l[3] for l in lines)} 0.8x or less")
    return 0


if __name__ == "__main__":
    sys.exit(main())
