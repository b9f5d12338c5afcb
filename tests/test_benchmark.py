"""The benchmark harness, on the CPU: argument parsing, byte accounting, the result checks, and a
whole run writing every output file."""

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import bench  # noqa: E402


def test_sizes_and_dtypes_parse():
    assert [bench.parse_size(s) for s in ("2^10", "1000003", " 4^3 ")] == [1024, 1000003, 64]
    assert bench.parse_dtype("float32>float64") == (torch.float32, torch.float64)
    assert bench.parse_dtype("bool") == (torch.bool, None)
    with pytest.raises(ValueError, match="unknown dtype 'float33'"):
        bench.parse_dtype("float33")


def test_arguments():
    args = bench.parse_args(["--device", "cpu", "--quick"])
    assert args.sizes == [1 << 10, 1 << 16, 1 << 20] and args.reps == 5 and args.modes == ["wall"]
    assert args.variants == ["serial", "pairwise", "auto"]
    args = bench.parse_args(["--device", "cpu", "--sizes", "2^4,7", "--dtypes", "int8,float32>float64", "--reps", "3"])
    assert args.sizes == [16, 7] and args.dtypes == [(torch.int8, None), (torch.float32, torch.float64)]
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
    assert tol == pytest.approx(999 * 2.0**-24 * y.abs().sum().item() + 2.0**-24 * abs(want))


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
    data = json.loads((out / "results.json").read_text())
    assert data["environment"]["device"] == "cpu" and data["kind"] == "sweep"
    rows = data["rows"]
    assert len(rows) == 4 * 2 * 4  # dtypes x sizes x (torch.sum + 3 variants)
    assert all(r["median_us"] > 0 and r["gbps"] > 0 and len(r["samples_us"]) == 2 for r in rows)
    assert {r["dtype"] for r in rows} == {"float32", "int16", "bool", "float32>float64"}
    md = (out / "results.md").read_text()
    assert "## auto against the references, wall" in md and "| float32>float64 | 4097 |" in md
    assert (out / "gbps_wall.png").stat().st_size > 10_000
