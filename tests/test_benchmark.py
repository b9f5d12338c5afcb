"""The benchmark harness, on the CPU: argument parsing, byte accounting, the result checks, and a
whole run writing every output file; the same for the dims suite (--dims)."""

import json
import math
import sys
from functools import partial
from pathlib import Path

import pytest
import torch

import torch_reduce

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import bench  # noqa: E402
import dims  # noqa: E402
import report  # noqa: E402


def test_sizes_and_dtypes_parse():
    assert [bench.parse_size(s) for s in ("2^10", "1000003", " 4^3 ")] == [1024, 1000003, 64]
    assert bench.parse_dtype("float32>float64") == (torch.float32, torch.float64)
    assert bench.parse_dtype("bool") == (torch.bool, None)
    with pytest.raises(ValueError, match="unknown dtype 'float33'"):
        bench.parse_dtype("float33")


def test_arguments():
    args = bench.parse_args(["--device", "cpu", "--quick"])
    assert args.sizes == [1 << 10, 1 << 16, 1 << 20] and args.reps == 5 and args.modes == ["wall"]
    assert args.variants == ["serial", "pairwise", "auto", "exact"]
    args = bench.parse_args(["--device", "cpu", "--sizes", "2^4,7", "--dtypes", "int8,float32>float64", "--reps", "3"])
    assert args.sizes == [16, 7] and args.dtypes == [(torch.int8, None), (torch.float32, torch.float64)]
    assert not args.no_compile and bench.parse_args(["--device", "cpu", "--no-compile"]).no_compile
    for bad, message in [(["--variants", "warp_shuffle"], "unknown cpu variants: warp_shuffle"),
                         (["--modes", "hot"], "modes on cpu: wall; not hot"),
                         (["--ops", "prod"], "unknown ops: prod"),
                         (["--ladder"], "--ladder needs a CUDA device")]:
        with pytest.raises(SystemExit):
            bench.parse_args(["--device", "cpu", *bad])


def test_byte_accounting():
    case = bench.Case("sum", torch.int32, None, 1000)
    assert bench.bytes_moved(case) == 1000 * 4 + 8  # int32 in, one int64 out
    assert bench.torch_bytes_moved(case) == 1000 * (4 + 8 + 8) + 8  # widened copy written and read
    same = bench.Case("sum", torch.float16, None, 1000)
    assert bench.bytes_moved(same) == bench.torch_bytes_moved(same) == 2000 + 2
    up = bench.Case("sum", torch.float32, torch.float64, 10)
    assert up.label == "float32>float64" and bench.torch_bytes_moved(up) == 10 * 20 + 8


def test_reference_is_exact_for_integer_results_and_bounded_for_floats():
    x = torch.full((1000,), 100, dtype=torch.int32)
    assert bench.reference(x, torch.int64) == (100000.0, 0.0)
    assert bench.reference(x, torch.int8)[0] == torch.sum(x, dtype=torch.int8).item()  # wraps as torch does
    assert bench.reference(torch.tensor([1, -1], dtype=torch.int8), torch.bool) == (1.0, 0.0)
    y = torch.randn(1000).double()  # float32 values, held in float64
    want, tol = bench.reference(y.float(), torch.float32)
    assert want == y.sum().item()
    assert tol == pytest.approx(999 * (2.0**-24 + 2.0**-53) * y.abs().sum().item() + 2.0**-24 * abs(want))


def test_check_takes_inf_only_for_a_sum_past_the_dtype_range():
    big = -66023.06  # past float16's largest finite value, 65504
    bench.check("past", torch.tensor(-math.inf, dtype=torch.float16), big, 1.0)
    for got, want in ((math.inf, big), (-math.inf, -1000.0), (math.nan, big), (-65504.0, big)):
        with pytest.raises(AssertionError):
            bench.check("wrong", torch.tensor(got, dtype=torch.float16), want, 1.0)


def test_a_wrong_result_stops_the_run():
    def with_a_wrong_candidate(case, x, base, variants):
        fns = bench.candidates(case, x, base, variants)
        fns["off_by_one"] = lambda: torch.sum(x) + 1
        return fns

    case = bench.Case("sum", torch.int32, None, 100)
    with pytest.raises(AssertionError, match="off_by_one on int32 n=100: got"):
        bench.run([case], "cpu", ["auto"], ["wall"], 2, make_candidates=with_a_wrong_candidate)


def test_cpu_run_writes_every_output(tmp_path, capsys):
    out = tmp_path / "bench"
    assert bench.main(["--device", "cpu", "--sizes", "1000,4097", "--dtypes", "float32,int16,bool,float32>float64",
                       "--reps", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "vs torch" in printed and "pairwise" in printed
    data = report.read_summary(out / "results.json")
    assert data["environment"]["device"] == "cpu" and data["kind"] == "sweep"
    rows = data["rows"]
    assert len(rows) == 4 * 2 * (1 + len(torch_reduce.variants("cpu")))  # dtypes x sizes x (torch.sum + variants)
    # the summary has no raw samples; they lie beside it (not kept in git), row for row
    assert all(r["median_us"] > 0 and r["gbps"] > 0 and "samples_us" not in r for r in rows)
    full = json.loads((out / "results_samples.json").read_text())["rows"]
    assert [len(r["samples_us"]) for r in full] == [2] * len(rows)
    assert [(r["dtype"], r["n"], r["candidate"]) for r in full] == [(r["dtype"], r["n"], r["candidate"]) for r in rows]
    assert {r["dtype"] for r in rows} == {"float32", "int16", "bool", "float32>float64"}
    md = (out / "results.md").read_text()
    assert "## auto against the references, wall" in md and "| float32>float64 | 4097 |" in md
    assert (out / "gbps_wall.png").stat().st_size > 5_000  # a 64-colour PNG of four panels


@pytest.fixture
def compiled_graphs(monkeypatch):
    """torch.compile through a backend that records each graph dynamo hands it and runs it as
    traced (no inductor, so the CUDA-only torch.compile peer runs here in seconds); yields the
    graphs, and the keyword arguments torch.compile was called with."""
    graphs, calls = [], []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    real = torch.compile

    def recording_compile(fn, **kw):
        calls.append(kw)
        return real(fn, backend=backend, **kw)

    monkeypatch.setattr(torch, "compile", recording_compile)
    yield graphs, calls
    torch._dynamo.reset()


def _check_vs_best(rows, key, peers):
    """Each row's vs_best is the fastest peer's median over its own, within its case and mode."""
    cases = {}
    for r in rows:
        cases.setdefault(key(r), {})[r.candidate] = r
    for cands in cases.values():
        best = min(cands[p].median_us for p in peers if p in cands)
        assert all(r.vs_best == pytest.approx(best / r.median_us) for r in cands.values())
    return cases


def test_compile_peer_compiles_every_case(compiled_graphs):
    """The sweep's torch.compile peer (main adds it on CUDA): compiled once per case, also past
    dynamo's 8 recompiles of one function (where it would run eagerly unless reset), checked like
    every candidate, timed right after torch.sum, and in vs_best."""
    graphs, calls = compiled_graphs
    cases = [bench.Case("sum", d, o, n) for d, o in [(torch.float32, None), (torch.int8, None), (torch.bool, None),
                                                      (torch.float32, torch.float64), (torch.int16, torch.int32)]
             for n in (100, 1000)]
    rows = bench.run(cases, "cpu", ["auto"], ["wall"], 2, make_candidates=partial(bench.candidates, compile_peer=True))
    assert len(graphs) == len(calls) == len(cases) > 8
    assert all(kw == {"dynamic": False, "fullgraph": True} for kw in calls)
    per_case = _check_vs_best(rows, lambda r: (r.dtype, r.n, r.mode), bench.PEERS)
    assert len(per_case) == len(cases)
    assert all(list(cands) == ["torch.sum", "torch.compile", "auto"] for cands in per_case.values())
    md = report.markdown("sweep", {"device": "cpu", "torch": "x", "date": "d"}, rows)
    assert "| torch.sum us | torch.compile us | cub us |" in md and "auto vs best peer |" in md
    line = next(line for line in md.splitlines() if line.startswith("| int16>int32 | 1000 |"))
    assert line.split(" | ")[3] != "-" and line.endswith("x |")  # torch.compile's time, vs best peer
    assert "torch.compile" in report.terminal_table(rows)


def test_dims_compile_peer_compiles_every_case(compiled_graphs):
    graphs, calls = compiled_graphs
    cases = dims.suite("cpu", dims.OPS, (torch.float32,), [((24, 40), None), ((6, 5, 7), None)])
    rows = dims.run(cases, "cpu", ["wall"], 2, make_candidates=partial(dims.candidates, compile_peer=True))
    assert len(graphs) == len(calls) == len(cases) > 8
    per_case = _check_vs_best(rows, lambda r: (r.op, tuple(r.shape), r.dim, r.mode),
                              ["torch.sum", "torch.mean", "torch.amax", "torch.amin", "torch.compile"])
    assert len(per_case) == len(cases)
    assert all(list(cands) == [f"torch.{r.op}", "torch.compile", "auto"] for cands in per_case.values()
               for r in cands.values())
    md = report.dims_markdown({"device": "cpu", "torch": "x", "date": "d"}, rows, [])
    line = next(line for line in md.splitlines() if line.startswith("| amin | float32 | 6x5x7 | 1 |"))
    assert line.split(" | ")[5] != "-" and line.endswith("x |")
    assert "torch.compile" in report.dims_terminal_table(rows)


def test_results_without_compile_still_render():
    """Rows from before torch.compile and vs_best were added (JSON without them) render with "-"."""
    old = dict(op="sum", dtype="float32", n=1024, offset=0, mode="hot", p10_us=1.0, p90_us=2.0, gbps=1.0,
               bytes=4100, torch_bytes=4100, pct_of_read=50.0)
    rows = [bench.Row(candidate="torch.sum", median_us=2.0, speedup_vs_torch=1.0, **old),
            bench.Row(candidate="auto", median_us=1.0, speedup_vs_torch=2.0, **old)]
    md = report.markdown("sweep", {"device": "cpu", "torch": "x", "date": "d"}, rows)
    assert "| float32 | 2^10 | 2.00 | - | - | 1.00 | 1 | 50 | 2.00x | - | - |" in md
    assert report.terminal_table(rows).splitlines()[-1].split()[-3:] == ["2.00x", "-", "-"]  # vs cub, vs best
    old = dict(op="amax", dtype="float32", shape=[8, 4], dim=0, out_shape=[4], mode="hot", p10_us=1.0, p90_us=2.0,
               gbps=1.0, bytes=144)
    rows = [dims.DimRow(candidate="torch.amax", median_us=2.0, speedup_vs_torch=1.0, **old),
            dims.DimRow(candidate="auto", median_us=1.0, speedup_vs_torch=2.0, **old)]
    table = report.dims_markdown_table(rows, "hot")
    assert "| amax | float32 | 8x4 | 0 | 2.00 | - | 1.00 | 1.00-2.00 | 1 | 1 | 2.00x | - |" in table
    assert report.dims_terminal_table(rows).splitlines()[-1].split()[-2:] == ["2.00x", "-"]


# The dims suite (bench.py --dims): sum, mean, amax, amin over one dim against torch's own.


def test_dims_suite_has_every_case():
    cases = dims.suite("cuda")
    got = {(c.op, c.dtype, c.shape, c.dim) for c in cases}
    assert len(got) == len(cases) == 2 * (2 + 2 + 2 + 3 + 3 * 2)
    for dtype in (torch.float32, torch.bfloat16):
        for shape, dims_ in [((65536, 128), (-1, 0)), ((128, 65536), (-1, 0)), ((4096, 4096), (-1, 0)),
                             ((32, 4096, 4096), (-1, 0, 1))]:
            assert all(("sum", dtype, shape, d) in got for d in dims_)
        for op in ("mean", "amax", "amin"):
            assert {(op, dtype, (65536, 128), -1), (op, dtype, (4096, 4096), 0)} <= got
    cpu = dims.suite("cpu")
    assert [(c.op, c.dtype, c.dim) for c in cpu] == [(c.op, c.dtype, c.dim) for c in cases]
    assert all(math.prod(c.shape) <= 1 << 21 for c in cpu)
    assert [c.op for c in dims.suite("cuda", ops=["amax"])] == ["amax"] * 4


def test_dims_arguments():
    args = bench.parse_args(["--device", "cpu", "--dims"])
    assert args.ops == ["sum", "mean", "amax", "amin"] and args.modes == ["wall"] and args.shapes is None
    assert args.dtypes == [(torch.float32, None), (torch.bfloat16, None)] and args.reps == 20
    args = bench.parse_args(["--device", "cpu", "--dims", "--ops", "amax", "--shapes", "64x8:0,3x4x5,7:-1",
                             "--dtypes", "float16", "--reps", "3"])
    assert args.shapes == [((64, 8), 0), ((3, 4, 5), None), ((7,), -1)]
    assert [(c.shape, c.dim) for c in dims.suite("cpu", args.ops, [torch.float16], args.shapes)] == [
        ((64, 8), 0), ((3, 4, 5), -1), ((3, 4, 5), 0), ((3, 4, 5), 1), ((7,), -1)]
    for bad in (["--dims", "--variants", "serial"], ["--dims", "--sizes", "2^10"], ["--dims", "--dtypes", "int32"],
                ["--dims", "--dtypes", "float32>float64"], ["--dims", "--ops", "prod"], ["--dims", "--modes", "hot"],
                ["--dims", "--shapes", "4x0"], ["--dims", "--shapes", "4x4:2"], ["--shapes", "4x4"]):
        with pytest.raises(SystemExit):
            bench.parse_args(["--device", "cpu", *bad])


def test_dims_reference_is_exact_for_extrema_and_bounded_for_sums():
    x = torch.randn(50, 30)
    want, tol = dims.reference(x, "amax", 0)
    assert tol is None and want.dtype == torch.float32 and torch.equal(want, x.amax(0))
    want, tol = dims.reference(x, "sum", -1)
    assert want.dtype == torch.float64 and torch.allclose(want, x.double().sum(-1))
    assert torch.allclose(tol, 30 * 2.0**-24 * x.double().abs().sum(-1) + 2 * 2.0**-24 * want.abs())
    want, tol = dims.reference(x.bfloat16(), "mean", 0)
    assert torch.allclose(tol, 2.0**-24 * x.bfloat16().double().abs().sum(0) + 2 * 2.0**-8 * want.abs())
    assert dims.bytes_moved(dims.DimCase("sum", torch.bfloat16, (32, 64, 16), 1)) == (32 * 64 * 16 + 32 * 16) * 2
    y = -torch.rand(20, 10, dtype=torch.float64)
    kept = y.clone()
    dims.reference(y, "sum", 1)
    assert torch.equal(y, kept)  # the input is not overwritten


def test_a_wrong_dims_result_stops_the_run():
    def with_a_wrong_candidate(case, x):
        fns = dims.candidates(case, x)
        fns["one_off"] = lambda: torch.amax(x, dim=case.dim).index_fill(0, torch.tensor([3]), 0.5)
        return fns

    case = dims.DimCase("amax", torch.float32, (16, 8), -1)
    with pytest.raises(AssertionError, match="one_off on amax float32 16x8 dim=-1: 1 of 16 elements wrong; element 3"):
        dims.run([case], "cpu", ["wall"], 2, make_candidates=with_a_wrong_candidate)


def test_cpu_dims_run_writes_every_output(tmp_path, capsys):
    out = tmp_path / "bench"
    shapes = "96x40,40x96,6x20x24,33x17:0"
    assert bench.main(["--device", "cpu", "--dims", "--shapes", shapes, "--reps", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "vs torch" in printed and "torch.ops.treduce.sum" in printed
    cases = dims.suite("cpu", dims.OPS, dims.DTYPES, [dims.parse_shape(s) for s in shapes.split(",")])
    assert len(cases) == 4 * 2 * (2 + 2 + 3 + 1)
    data = report.read_summary(out / "results_dims.json")
    assert data["kind"] == "dims" and data["environment"]["device"] == "cpu"
    rows = data["rows"]
    assert all(r["median_us"] > 0 and r["gbps"] > 0 and "samples_us" not in r and r["mode"] == "wall" for r in rows)
    full = json.loads((out / "results_dims_samples.json").read_text())["rows"]
    assert [len(r["samples_us"]) for r in full] == [2] * len(rows)
    got = {(r["op"], r["dtype"], tuple(r["shape"]), r["dim"], r["candidate"]) for r in rows}
    assert len(got) == len(rows) == 2 * len(cases)
    md = (out / "results_dims.md").read_text()
    assert "## auto against torch, wall" in md
    for c in cases:
        assert {(c.op, c.dtype_name, c.shape, c.dim, name) for name in (f"torch.{c.op}", "auto")} <= got
        assert f"| {c.op} | {c.dtype_name} | {dims.shape_label(c.shape)} | {c.dim} |" in md
    eager = data["eager"]
    assert [r["candidate"] for r in eager] == ["torch.sum", "torch_reduce.sum", "torch.ops.treduce.sum"]
    assert all(r["n"] == 1 << 10 and r["dtype"] == "float32" and r["median_us"] > 0 for r in eager)
    assert "## Eager call overhead: full sum of 2^10 float32" in md and "| torch_reduce.sum |" in md
    assert not (out / "results.json").exists()  # the sweep's outputs are left alone


def test_cpu_sweep_writes_every_case(tmp_path, capsys):
    """benchmarks/cpu.py, small: every dtype and both dims, each with its time and (floats) error."""
    import cpu

    assert cpu.main(["--quick", "--threads", "1", "--reps", "3", "--out", str(tmp_path)]) == 0
    rows = report.read_summary(tmp_path / "cpu.json")["rows"]
    assert len(rows) == len(list(cpu.cases(True)))
    for r in rows:
        assert r["torch_us"] > 0 and r["ours_us"] > 0
        floating = r["dtype"] in ("float32", "bfloat16", "float16", "float64")
        assert (r["ours_error"] is not None) == floating
    assert "| 1 | 256x256 | float32 | 0 |" in (tmp_path / "cpu.md").read_text()


def test_tuning_trial_times_the_cases_planned_differently(tmp_path, capsys):
    """benchmarks/tuning_trial.py on the CPU, small: the baseline writes every case's plan; a
    later call times (and checks) only the cases whose plan differs, against random_shapes.py's
    run of the same cases."""
    import random_shapes
    import tuning_trial

    common = ["--seed", "7", "--cases", "6", "--small", "--device", "cpu"]
    assert random_shapes.main(common + ["--reps", "3", "--out", str(tmp_path)]) == 0
    plans = tmp_path / "plans.json"
    assert tuning_trial.main(common + ["--plans", str(plans)]) == 0
    seen = json.loads(plans.read_text())
    assert sorted(seen, key=int) == [str(k) for k in range(6)]
    assert tuning_trial.main(common + ["--plans", str(plans), "--reps", "3"]) == 0
    assert "0 of 6 cases planned differently" in capsys.readouterr().out
    seen["2"] = "another plan"
    plans.write_text(json.dumps(seen))
    against = tmp_path / "random_shapes_seed7.json"
    assert tuning_trial.main(common + ["--plans", str(plans), "--reps", "3", "--against", str(against)]) == 0
    out = capsys.readouterr().out
    assert "1 of 6 cases planned differently" in out and "  case 2 " in out and "the best peer" in out


def test_retime_times_the_committed_cases_behind_their_peers(tmp_path, capsys):
    """benchmarks/retime.py on the CPU, small: the cases of a random_shapes.py run whose ratio was
    below the limit, drawn again (the same labels, checked against torch), ours (and torch) timed
    again; a run whose cases are not the generator's any more is refused."""
    import random_shapes
    import retime

    assert random_shapes.main(["--seed", "5", "--cases", "6", "--small", "--device", "cpu", "--reps", "3",
                               "--out", str(tmp_path)]) == 0
    common = ["--device", "cpu", "--results", str(tmp_path), "--reps", "3", "--torch"]
    assert retime.main(common + ["--limit", "1e9"]) == 0
    out = capsys.readouterr().out
    assert sum(" 5:" in line for line in out.splitlines()) == 6 and "6 cases:" in out
    assert retime.main(common + ["--limit", "0"]) == 0
    assert " 5:" not in capsys.readouterr().out
    path = tmp_path / "random_shapes_seed5.json"
    run = report.read_summary(path)
    run["rows"][1]["label"] = "another case"
    report.write_summary(path, run)
    with pytest.raises(SystemExit, match="case 1 is"):
        retime.main(common + ["--limit", "1e9"])


def test_random_shapes_keeps_partial_rows_and_resumes(tmp_path):
    """benchmarks/random_shapes.py on the CPU, small: a finished run leaves its JSON and no
    .partial.json; a run resumed from the first rows of another (its partial file) keeps those
    rows as they are and runs the rest, the same cases in the same order; a partial file of other
    cases is refused."""
    import random_shapes

    common = ["--seed", "11", "--cases", "5", "--small", "--device", "cpu", "--reps", "3"]
    assert random_shapes.main(common + ["--out", str(tmp_path)]) == 0
    full = report.read_summary(tmp_path / "random_shapes_seed11.json")
    assert not (tmp_path / "random_shapes_seed11.partial.json").exists() and len(full["rows"]) == 5
    cut = dict(full, partial=True, rows=full["rows"][:2])
    for row in cut["rows"]:
        row["ours_wall"] = 1234.0  # kept as it is (4 significant digits), not timed again
    resume = tmp_path / "cut.json"
    resume.write_text(json.dumps(cut))
    again = tmp_path / "again"
    assert random_shapes.main(common + ["--out", str(again), "--resume", str(resume)]) == 0
    rows = report.read_summary(again / "random_shapes_seed11.json")["rows"]
    assert [r["label"] for r in rows] == [r["label"] for r in full["rows"]]
    assert [r["ours_wall"] for r in rows[:2]] == [1234.0, 1234.0] and rows[2]["ours_wall"] != 1234.0
    with pytest.raises(SystemExit, match="not the first 2"):
        random_shapes.main(["--seed", "12"] + common[2:] + ["--out", str(again), "--resume", str(resume)])


def test_cpu_ops_write_every_case(tmp_path):
    """benchmarks/cpu.py --ops, small: every op of its table, each dtype torch takes and every dim,
    checked against torch's result before it is timed."""
    import cpu

    assert cpu.main(["--quick", "--ops", "--threads", "1", "--reps", "3", "--out", str(tmp_path)]) == 0
    rows = report.read_summary(tmp_path / "cpu_ops.json")["rows"]
    per_shape = {"256x256": 3, "4096x32": 2}  # dims each
    floating_only = sum(1 for _, _, f in cpu.OPS.values() if f)
    want = sum(d * (3 * len(cpu.OPS) - floating_only) for d in per_shape.values())
    assert len(rows) == want
    assert {r["op"] for r in rows} == set(cpu.OPS)
    assert all(r["torch_us"] > 0 and r["ours_us"] > 0 for r in rows)
    assert "| 1 | argmax | 256x256 | bfloat16 | -1 |" in (tmp_path / "cpu_ops.md").read_text()
    assert not (tmp_path / "cpu.json").exists()


def _eager_rows(torch_eager, ours_eager, torch_kernel, ours_kernel):
    common = {"op": "sum", "shape": [1024], "dtype": "float32", "dim": None, "host_us": 1.0}
    return [dict(common, candidate="torch.sum", eager_us=torch_eager, kernel_us=torch_kernel),
            dict(common, candidate="torch_reduce.sum", eager_us=ours_eager, kernel_us=ours_kernel),
            dict(common, candidate="torch.ops.treduce.sum", eager_us=ours_eager, kernel_us=ours_kernel)]


def test_eager_table_applies_the_issue_bar():
    """benchmarks/eager.py's target: eager time at most torch's, and at most 0.9x where the kernel
    alone is 2x faster."""
    import eager

    assert "| met |" in eager.markdown(_eager_rows(10.0, 9.9, 4.0, 3.0), "")  # kernel 1.33x: 1.01x is enough
    assert "miss (1.01x < 1.11x)" in eager.markdown(_eager_rows(10.0, 9.9, 4.0, 2.0), "")  # kernel 2x
    assert "| met |" in eager.markdown(_eager_rows(10.0, 9.0, 4.0, 2.0), "")
    assert "miss (0.91x < 1.00x)" in eager.markdown(_eager_rows(10.0, 11.0, 4.0, 3.0), "")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_eager_suite_writes_every_case(tmp_path, capsys):
    import eager

    assert eager.main(["--quick", "--reps", "2", "--out", str(tmp_path)]) == 0
    rows = report.read_summary(tmp_path / "eager.json")["rows"]
    assert len(rows) == 3 * len(list(eager.cases(True)))
    assert all(r["eager_us"] > 0 and r["host_us"] > 0 and r["kernel_us"] > 0 for r in rows)


@pytest.mark.parametrize("suite", ["stats", "logic"])
def test_stats_suites_check_on_the_cpu(suite):
    """Every case of stats.py's suites, on a small CPU input of its dtype and rank: torch_reduce's
    call passes the check the GPU run makes (exact for the logic suite), and a wrong result fails it."""
    import stats  # noqa: E402

    cases = stats.cases(suite)
    assert cases
    for case in cases:
        shape = tuple(min(s, 37) for s in case.shape)
        x = torch.randn(shape)
        if not case.dtype.is_floating_point:
            x = (x * 50).masked_fill(x.abs() < 0.125, 0)
        x = x.to(case.dtype)
        want = tuple(w.double() for w in stats._as_tuple(case.torch_fn(x.double())))
        stats._check(case.label, case.ours_fn(x), want, case.rtol, x)
        wrong = tuple(w + 1 for w in want)
        with pytest.raises(AssertionError):
            stats._check(case.label, case.ours_fn(x), wrong, case.rtol, x)


def test_normalizing_suite_checks_every_case(capsys, monkeypatch):
    """benchmarks/normalizing.py --check-only: every case of the suite (at the tests' sizes) agrees
    with torch; a wrong softmax stops it."""
    import normalizing

    assert normalizing.main(["--check-only"]) == 0
    assert "agrees with torch" in capsys.readouterr().out
    monkeypatch.setattr(torch_reduce, "softmax", lambda x, dim, dtype=None: torch.softmax(x, dim) + 0.01)
    with pytest.raises(AssertionError):
        normalizing.main(["--check-only"])
