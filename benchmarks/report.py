"""Turns benchmark rows into a terminal table, JSON, Markdown tables and PNG plots."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

HEADLINE = "auto"
REFERENCES = ("torch.sum", "torch.compile", "cub", "read_probe")


def size_label(n: int) -> str:
    e = int(math.log2(n)) if n > 0 else 0
    return f"2^{e}" if n == 1 << e else str(n)


def _fmt(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def terminal_table(rows) -> str:
    lines = [f"{'dtype':17} {'n':>7} {'candidate':17} {'mode':5} {'median us':>10} {'p10-p90 us':>17} "
             f"{'GB/s':>8} {'% read':>7} {'vs torch':>8} {'vs cub':>7} {'vs best':>7}"]
    for r in rows:
        lines.append(f"{r.dtype:17} {size_label(r.n):>7} {r.candidate:17} {r.mode:5} {r.median_us:>10.2f} "
                     f"{f'{r.p10_us:.2f}-{r.p90_us:.2f}':>17} {r.gbps:>8.1f} {_fmt(r.pct_of_read, '6.1f'):>7} "
                     f"{_fmt(r.speedup_vs_torch, '7.2f'):>7}x {_fmt(r.vs_cub, '6.2f') + ('x' if r.vs_cub else ' '):>7} "
                     f"{_fmt(r.vs_best, '6.2f') + ('x' if r.vs_best else ' '):>7}")
    return "\n".join(lines)


def _by_case(rows):
    cases = defaultdict(dict)
    for r in rows:
        cases[(r.op, r.dtype, r.n, r.offset, r.mode)][r.candidate] = r
    return cases


def ladder_table(rows, markdown: bool = False) -> str:
    """One block per ladder case: each rung's cold time and bandwidth, its speedup over the rung
    before and over the first rung (the seed 000 table's columns), and its hot time."""
    cases = _by_case(rows)
    out = []
    for (op, dtype, n, offset, mode), cands in cases.items():
        if mode != "cold":
            continue
        hot = cases.get((op, dtype, n, offset, "hot"), {})
        out.append(f"\n{op} {dtype} n={size_label(n)} ({cands['torch.sum'].bytes / 1e6:.0f} MB read)\n")
        head = ["rung", "cold us", "cold GB/s", "step", "cumulative", "hot us", "% of read"]
        body = []
        first = prev = None
        for name, r in cands.items():
            is_rung = name not in REFERENCES
            step = f"{prev.median_us / r.median_us:.2f}x" if is_rung and prev else "-"
            cum = f"{first.median_us / r.median_us:.2f}x" if is_rung and first else "-"
            label = name if is_rung else f"({name})"
            body.append([label, f"{r.median_us:.1f}", f"{r.gbps:.0f}", step, cum,
                         f"{hot[name].median_us:.1f}" if name in hot else "-", _fmt(r.pct_of_read, ".0f")])
            if is_rung:
                first = first or r
                prev = r
        out.append(_grid(head, body, markdown))
    return "\n".join(out)


def _grid(head, body, markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(str(c)) for c in col) for col in zip(head, *body)]
    fmt = lambda row: "  ".join(str(c).rjust(w) for c, w in zip(row, widths))  # noqa: E731
    return "\n".join([fmt(head)] + [fmt(row) for row in body])


def headline_markdown(rows, mode: str) -> str:
    """auto against the references, one row per dtype and size; "-" where a reference did not run
    (torch.compile and vs best peer in results from before it was added)."""
    head = ["dtype", "n", "torch.sum us", "torch.compile us", "cub us", f"{HEADLINE} us", f"{HEADLINE} GB/s",
            "% of read", f"{HEADLINE} vs torch.sum", f"{HEADLINE} vs cub", f"{HEADLINE} vs best peer"]
    body = []
    for (op, dtype, n, offset, m), cands in _by_case(rows).items():
        if m != mode or HEADLINE not in cands:
            continue
        a, t, tc, c = cands[HEADLINE], cands["torch.sum"], cands.get("torch.compile"), cands.get("cub")
        body.append([dtype, size_label(n), f"{t.median_us:.2f}", _fmt(tc and tc.median_us, ".2f"),
                     _fmt(c and c.median_us, ".2f"), f"{a.median_us:.2f}", f"{a.gbps:.0f}", _fmt(a.pct_of_read, ".0f"),
                     f"{a.speedup_vs_torch:.2f}x", _fmt(a.vs_cub, ".2f") + ("x" if c else ""),
                     _fmt(a.vs_best, ".2f") + ("x" if a.vs_best else "")])
    return _grid(head, body, markdown=True)


def full_markdown(rows, mode: str) -> str:
    """Every candidate's median time (us) per dtype and size."""
    cases = {k: v for k, v in _by_case(rows).items() if k[4] == mode}
    names = list(dict.fromkeys(name for cands in cases.values() for name in cands))
    head = ["dtype", "n"] + names
    body = [[dtype, size_label(n)] + [_fmt(c[name].median_us if name in c else None, ".2f") for name in names]
            for (op, dtype, n, offset, m), c in cases.items()]
    return _grid(head, body, markdown=True)


def environment_line(env: dict) -> str:
    if env["device"] == "cuda":
        return (f"{env.get('gpu')} ({env.get('sm_count')} SMs, {env.get('l2_bytes', 0) / 2**20:.0f} MiB L2), "
                f"driver {env.get('driver')}, torch {env['torch']}, CUDA {env['cuda']}, {env['date']}")
    return f"CPU {env.get('cpu')} ({env.get('threads')} threads), torch {env['torch']}, {env['date']}"


def markdown(kind: str, env: dict, rows) -> str:
    parts = [f"# torch_reduce benchmark: {kind}", "", environment_line(env), ""]
    if kind == "ladder":
        parts += ["Cold: the input read from DRAM (L2 flushed before each call). Step: speedup over "
                  "the rung above; cumulative: over the first rung. References in parentheses.",
                  ladder_table(rows, markdown=True)]
        return "\n".join(parts) + "\n"
    modes = list(dict.fromkeys(r.mode for r in rows))
    if any(r.candidate == HEADLINE for r in rows):
        parts += [f"vs best peer: the fastest of torch.sum, torch.compile and cub (those that ran) over "
                  f"{HEADLINE}'s time.", ""]
    for mode in modes:
        if any(r.candidate == HEADLINE for r in rows):
            parts += [f"## {HEADLINE} against the references, {mode}", "", headline_markdown(rows, mode), ""]
    for mode in modes:
        parts += [f"## Every candidate, {mode} (median us)", "", full_markdown(rows, mode), ""]
    return "\n".join(parts)


def save_figure(fig, path: Path, dpi: int = 80, colors: int = 64) -> None:
    """fig as a PNG of at most `colors` colours (a plot's lines and text need no more): a tenth of
    the bytes of the full-colour file."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, dpi=dpi, format="png")
    image = Image.open(buf).convert("RGB").quantize(colors=colors, method=Image.Quantize.MEDIANCUT)
    image.save(path, optimize=True)


def plot_sweep(rows, path: Path, mode: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = defaultdict(lambda: defaultdict(list))  # dtype -> candidate -> [(n, GB/s)]
    for r in rows:
        if r.mode == mode:
            series[r.dtype][r.candidate].append((r.n, r.gbps))
    if not series:
        return
    cols = min(4, len(series))
    rows_ = math.ceil(len(series) / cols)
    fig, axes = plt.subplots(rows_, cols, figsize=(4.2 * cols, 3.2 * rows_), squeeze=False)
    style = {"auto": dict(color="tab:red", lw=2.2), "cub": dict(color="tab:blue", lw=1.6),
             "torch.sum": dict(color="black", lw=1.6), "torch.compile": dict(color="tab:green", lw=1.6),
             "read_probe": dict(color="gray", lw=1.2, ls="--")}
    for ax, (dtype, cands) in zip(axes.flat, series.items()):
        for name, points in cands.items():
            points.sort()
            kw = style.get(name, dict(color="tab:gray", lw=0.6, alpha=0.5))
            ax.plot([p[0] for p in points], [p[1] for p in points], label=name if name in style else None, **kw)
        ax.set_xscale("log", base=2)
        ax.set_title(dtype)
        ax.set_xlabel("elements")
        ax.set_ylabel("GB/s")
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(series):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7, title="grey: other variants", title_fontsize=7)
    fig.suptitle(f"sum, {mode}: GB/s of the bytes the op must read")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def plot_ladder(rows, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = [(k, c) for k, c in _by_case(rows).items() if k[4] == "cold"]
    fig, axes = plt.subplots(len(cases), 1, figsize=(10, 2.8 * len(cases)), squeeze=False)
    for ax, ((op, dtype, n, offset, mode), cands) in zip(axes.flat, cases):
        names = list(cands)
        colors = ["tab:gray" if name in REFERENCES else "tab:red" if name == HEADLINE else "tab:blue" for name in names]
        ax.bar(range(len(names)), [cands[name].gbps for name in names], color=colors)
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("GB/s (cold)")
        ax.set_title(f"{dtype}, n = {size_label(n)}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


SAMPLE_KEYS = ("samples_us", "samples")
DIGITS = 4  # significant digits a summary keeps: far finer than a timing's run-to-run noise


def _compact(v):
    """A summary's value: floats to DIGITS significant digits, raw samples dropped."""
    if isinstance(v, float):
        return float(f"{v:.{DIGITS}g}")
    if isinstance(v, dict):
        return {k: _compact(x) for k, x in v.items() if k not in SAMPLE_KEYS}
    if isinstance(v, list):
        return [_compact(x) for x in v]
    return v


def _has_samples(v) -> bool:
    if isinstance(v, dict):
        return any((k in SAMPLE_KEYS and x is not None) or _has_samples(x) for k, x in v.items())
    return isinstance(v, list) and any(_has_samples(x) for x in v)


# Sweep and ladder rows' fields that follow from the rows of their case (bench.measure): a summary
# leaves out those it gets back from the stored medians and read_summary computes them again.
PEERS = ("torch.sum", "torch.compile", "cub")  # the lines vs_best holds a candidate against
DERIVED = ("gbps", "speedup_vs_torch", "vs_cub", "vs_best", "pct_of_read")
DERIVED_KINDS = ("sweep", "ladder")


def _round(v):
    return None if v is None else float(f"{v:.{DIGITS}g}")


def derived(med: float, nbytes: int, timed: dict) -> dict:
    """The DERIVED fields of a candidate timed `med` us moving `nbytes`, against its case's medians
    `timed` (candidate -> us): bench.measure's, and read_summary's from a summary's medians."""
    peers = [timed[p] for p in PEERS if p in timed]
    return {"gbps": nbytes / med / 1e3,
            "speedup_vs_torch": timed["torch.sum"] / med if "torch.sum" in timed else None,
            "vs_cub": timed["cub"] / med if "cub" in timed else None,
            "vs_best": min(peers) / med if peers else None,
            "pct_of_read": 100.0 * timed["read_probe"] / med if "read_probe" in timed else None}


def _derive(rows: list[dict], names) -> list[dict]:
    """rows with `names` (of DERIVED) computed from each case's medians and bytes (derived)."""
    cases = defaultdict(dict)
    for r in rows:
        cases[(r["op"], r["dtype"], r["n"], r["offset"], r["mode"])][r["candidate"]] = r["median_us"]
    out = []
    for r in rows:
        value = derived(r["median_us"], r["bytes"], cases[(r["op"], r["dtype"], r["n"], r["offset"], r["mode"])])
        out.append({**r, **{k: _round(value[k]) for k in names}})
    return out


def _derivable(rows: list[dict]) -> list[str]:
    """The DERIVED columns every row has and _derive gives back from the rows' DIGITS digits (a
    ratio of two rounded medians, rounded: within 2.5e-3 of the stored value)."""
    need = ("op", "dtype", "n", "offset", "mode", "candidate", "median_us", "bytes")
    if not all(all(k in r for k in need) and r["median_us"] for r in rows):
        return []
    names = [k for k in DERIVED if all(k in r for r in rows)]
    again = _derive(rows, names)

    def close(a, b):
        return a is b is None or (a is not None and b is not None and math.isclose(a, b, rel_tol=2.5e-3))

    return [k for k in names if all(close(r[k], g[k]) for r, g in zip(rows, again))]


def _table(rows: list[dict], derived=()) -> dict | None:
    """A list of row dicts as {"columns": [...], "rows": [[...], ...]}; "sparse": true where some
    rows lack some columns (a null cell there is a key the row does not have); "derived": the
    columns left out, computed again on reading. None where a missing key cannot be told apart
    from a null value: such a list stays a list of objects."""
    columns = [c for c in dict.fromkeys(k for r in rows for k in r) if c not in derived]
    sparse = any(len(r) != len(columns) + len(derived) for r in rows)
    if sparse and any(v is None for r in rows for v in r.values()):
        return None
    return {"columns": columns, **({"sparse": True} if sparse else {}), **({"derived": list(derived)} if derived else {}),
            "rows": [[r.get(c) for c in columns] for r in rows]}


def _untable(v):
    if isinstance(v, dict) and "columns" in v and "rows" in v and set(v) <= {"columns", "sparse", "derived", "rows"}:
        cols, sparse = v["columns"], v.get("sparse", False)
        rows = [{c: x for c, x in zip(cols, row) if not (sparse and x is None)} for row in v["rows"]]
        return _derive(rows, v["derived"]) if v.get("derived") else rows
    return v


def summary_text(payload: dict) -> str:
    """payload (already compact) as JSON: a line a value, each list of rows as a table with a row a
    line, so that a new run's diff reads case by case."""
    def line(x):
        return json.dumps(x, separators=(",", ":"))

    parts = []
    for k, v in payload.items():
        rows = isinstance(v, list) and v and all(isinstance(r, dict) for r in v)
        derived = _derivable(v) if rows and payload.get("kind") in DERIVED_KINDS and k == "rows" else []
        table = _table(v, derived) if rows else None
        if table is not None:
            head = ", ".join(f"{json.dumps(t)}: {json.dumps(x)}" for t, x in table.items() if t != "rows")
            body = ",\n".join("  " + line(r) for r in table["rows"])
            parts.append(f" {json.dumps(k)}: {{{head}, \"rows\": [\n{body}\n ]}}")
        elif rows:
            parts.append(f" {json.dumps(k)}: [\n" + ",\n".join("  " + line(r) for r in v) + "\n ]")
        else:
            parts.append(f" {json.dumps(k)}: {json.dumps(v)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def write_summary(path: Path, payload: dict) -> list[Path]:
    """payload as a compact summary at `path` (floats to DIGITS significant digits, no raw samples,
    each list of rows a table: read it back with read_summary) and, where its rows carry samples,
    the whole payload beside it as <stem>_samples.json (not kept in git: .gitignore)."""
    payload = json.loads(json.dumps(payload, default=str))
    path.write_text(summary_text(_compact(payload)))
    written = [path]
    if _has_samples(payload):
        samples = path.with_name(path.stem + "_samples.json")
        samples.write_text(json.dumps(payload, indent=1))
        written.append(samples)
    return written


def read_summary(path: Path) -> dict:
    """A summary written by write_summary, its tables back as lists of row dicts, derived columns
    computed again (a summary from before the tables, whose rows are lists of dicts, reads as it
    is)."""
    return {k: _untable(v) for k, v in json.loads(Path(path).read_text()).items()}


def summary_rows(rows: list[dict]) -> list[SimpleNamespace]:
    """A summary's sweep or ladder rows as objects for the tables and plots above (a field that a
    summary lacks, vs_best before torch.compile was timed, reads None)."""
    return [SimpleNamespace(**{**dict.fromkeys(DERIVED), **r}) for r in rows]


def plotted_modes(rows) -> list[str]:
    """A sweep's modes that get a figure: all but eager (it follows hot except for small sizes;
    the tables have it)."""
    return [m for m in dict.fromkeys(r.mode for r in rows) if m != "eager"]


def write_all(out: Path, kind: str, env: dict, rows, config: dict) -> list[Path]:
    """results.json / .md / plots for a sweep; ladder.json / .md / .png for the ladder."""
    out.mkdir(parents=True, exist_ok=True)
    stem = "ladder" if kind == "ladder" else "results"
    written = [out / f"{stem}.json", out / f"{stem}.md"]
    config = {k: v for k, v in config.items() if k != "out"}  # a local path says nothing
    payload = {"kind": kind, "environment": env, "config": config, "rows": [asdict(r) for r in rows]}
    written[1].write_text(markdown(kind, env, rows))
    written[:1] = write_summary(written[0], payload)
    if kind == "ladder":
        written.append(out / "ladder.png")
        plot_ladder(rows, written[-1])
    else:
        for mode in plotted_modes(rows):
            written.append(out / f"gbps_{mode}.png")
            plot_sweep(rows, written[-1], mode)
    return written


# The dims suite (bench.py --dims, dims.py): rows carry a shape and a dim instead of n and offset.

DIMS_MODES = {
    "hot": "hot: the median time per call over replays of a CUDA graph of many calls (inputs that fit stay in L2)",
    "cold": "cold: one call after reading a buffer twice the size of L2 (the input comes from DRAM)",
    "wall": "wall: wall clock around one call on the CPU",
}


def shape_label(shape) -> str:
    return "x".join(str(s) for s in shape)


def _by_dims_case(rows):
    cases = defaultdict(dict)
    for r in rows:
        cases[(r.op, r.dtype, tuple(r.shape), r.dim, r.mode)][r.candidate] = r
    return cases


def dims_terminal_table(rows) -> str:
    lines = [f"{'op':5} {'dtype':9} {'shape':14} {'dim':>3} {'candidate':13} {'mode':5} {'median us':>10} "
             f"{'p10-p90 us':>19} {'GB/s':>8} {'vs torch':>8} {'vs best':>7}"]
    for r in rows:
        lines.append(f"{r.op:5} {r.dtype:9} {shape_label(r.shape):14} {r.dim:>3} {r.candidate:13} {r.mode:5} "
                     f"{r.median_us:>10.2f} {f'{r.p10_us:.2f}-{r.p90_us:.2f}':>19} {r.gbps:>8.1f} "
                     f"{_fmt(r.speedup_vs_torch, '7.2f'):>7}x "
                     f"{_fmt(r.vs_best, '6.2f') + ('x' if r.vs_best else ' '):>7}")
    return "\n".join(lines)


def dims_markdown_table(rows, mode: str) -> str:
    """auto against torch's own function and torch.compile of it ("-" where that did not run), one
    row per op, dtype, shape and dim."""
    head = ["op", "dtype", "shape", "dim", "torch us", "torch.compile us", f"{HEADLINE} us", f"{HEADLINE} p10-p90 us",
            "torch GB/s", f"{HEADLINE} GB/s", f"{HEADLINE} vs torch", f"{HEADLINE} vs best peer"]
    body = []
    for (op, dtype, shape, dim, m), cands in _by_dims_case(rows).items():
        if m != mode or HEADLINE not in cands:
            continue
        a, t, tc = cands[HEADLINE], cands[f"torch.{op}"], cands.get("torch.compile")
        body.append([op, dtype, shape_label(shape), str(dim), f"{t.median_us:.2f}", _fmt(tc and tc.median_us, ".2f"),
                     f"{a.median_us:.2f}", f"{a.p10_us:.2f}-{a.p90_us:.2f}", f"{t.gbps:.0f}", f"{a.gbps:.0f}",
                     f"{a.speedup_vs_torch:.2f}x", _fmt(a.vs_best, ".2f") + ("x" if a.vs_best else "")])
    return _grid(head, body, markdown=True)


def eager_table(rows, markdown: bool = False) -> str:
    """Eager call overhead: each way of calling the sum, its time per call and its time over torch.sum's."""
    head = ["call", "median us", "p10-p90 us", "time / torch.sum's", "extra us"]
    base = rows[0].median_us
    body = [[r.candidate, f"{r.median_us:.2f}", f"{r.p10_us:.2f}-{r.p90_us:.2f}", f"{r.median_us / base:.2f}x",
             f"{r.median_us - base:+.2f}"] for r in rows]
    return _grid(head, body, markdown)


def dims_markdown(env: dict, rows, eager) -> str:
    parts = ["# torch_reduce benchmark: dims", "", environment_line(env), "",
             "Each case reduces one dim of a contiguous tensor (keepdim=False): torch's own function "
             "(torch.sum, torch.mean, torch.amax, torch.amin) and, on CUDA, torch.compile of the same call against "
             "torch_reduce's auto. GB/s counts the bytes the op must move: the input read once and the result "
             f"written once. Medians over repetitions; vs torch: torch's time over {HEADLINE}'s; vs best peer: "
             f"the faster of torch's and torch.compile's over {HEADLINE}'s. Every result was checked before it "
             "was timed.", ""]
    for mode in dict.fromkeys(r.mode for r in rows):
        parts += [f"## {HEADLINE} against torch, {mode}", "", DIMS_MODES.get(mode, mode) + ".", "",
                  dims_markdown_table(rows, mode), ""]
    if eager:
        how = "CUDA events" if env["device"] == "cuda" else "wall clock"
        parts += [f"## Eager call overhead: full sum of {size_label(eager[0].n)} {eager[0].dtype}", "",
                  f"Time per call in a plain Python loop ({how}), dispatch and launch included.", "",
                  eager_table(eager, markdown=True), ""]
    return "\n".join(parts)


def write_dims(out: Path, env: dict, rows, eager, config: dict) -> list[Path]:
    """results_dims.json (the summary, the environment; samples beside it) and results_dims.md."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "results_dims.json", out / "results_dims.md"]
    config = {k: v for k, v in config.items() if k != "out"}
    payload = {"kind": "dims", "environment": env, "config": config, "rows": [asdict(r) for r in rows],
               "eager": [asdict(r) for r in eager]}
    written[1].write_text(dims_markdown(env, rows, eager))
    written[:1] = write_summary(written[0], payload)
    return written


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="A committed summary's figures and tables again, or summaries "
                                "rewritten in the current form (read_summary reads both).")
    sub = p.add_subparsers(dest="command", required=True)
    plot = sub.add_parser("plot", help="a sweep's gbps_<mode>.png or a ladder's ladder.png, beside the summary")
    plot.add_argument("summary", type=Path)
    plot.add_argument("--out", type=Path, default=None, help="the figures' folder (default: the summary's)")
    plot.add_argument("--modes", default=None, help="a sweep's modes to plot (default: every mode but eager)")
    md = sub.add_parser("markdown", help="a sweep's, ladder's or dims suite's tables, to stdout")
    md.add_argument("summary", type=Path)
    rewrite = sub.add_parser("rewrite", help="summaries rewritten in place in the current form")
    rewrite.add_argument("summaries", type=Path, nargs="+")
    args = p.parse_args(argv)
    if args.command == "rewrite":
        for path in args.summaries:
            write_summary(path, read_summary(path))
        return 0
    payload = read_summary(args.summary)
    kind = payload.get("kind")
    if kind not in DERIVED_KINDS + ("dims",):
        raise SystemExit(f"{args.summary}: not a bench.py summary (kind {kind!r})")
    rows = summary_rows(payload["rows"])
    if args.command == "markdown":
        print(dims_markdown(payload["environment"], rows, summary_rows(payload.get("eager", []))) if kind == "dims"
              else markdown(kind, payload["environment"], rows), end="")
        return 0
    out = args.out or args.summary.parent
    out.mkdir(parents=True, exist_ok=True)
    if kind == "ladder":
        plot_ladder(rows, out / "ladder.png")
        print(out / "ladder.png")
    elif kind == "sweep":
        modes = args.modes.split(",") if args.modes else plotted_modes(rows)
        for mode in modes:
            plot_sweep(rows, out / f"gbps_{mode}.png", mode)
            print(out / f"gbps_{mode}.png")
    else:
        raise SystemExit("the dims suite has no figures")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
