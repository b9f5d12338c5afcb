"""The committed results and the tree that holds them: every suite's summary reads back through
report.read_summary (and is in the form report.write_summary writes), the summaries keep what
they are given to 4 significant digits, the tracked files stay under 5 MB, and every relative link
of the docs leads to a file. Needs neither torch nor the library."""

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import report  # noqa: E402

LIMIT_BYTES = 5_000_000


def _close(a, b, rel=2.5e-3):
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and (a == b or math.isclose(a, b, rel_tol=rel))
    if isinstance(a, dict):
        return isinstance(b, dict) and set(a) == set(b) and all(_close(a[k], b[k], rel) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b))
    return a == b


def test_a_summary_reads_back_what_it_was_given(tmp_path):
    """Floats to 4 significant digits, every other value as it was; rows as a table, a row a
    line; rows that lack some keys (a random_shapes.py case torch.compile failed on) read back
    without them; raw samples beside the summary, not in it."""
    rows = [{"case": 0, "label": "sum((3, 5), dim=0) int8", "shape": [3, 5], "torch_hot": 1.23456789, "ours_hot": 0.5,
             "plan": None, "samples_us": [1.0, 2.0]},
            {"case": 1, "label": "amax((7,), dim=None) bool", "shape": [7], "torch_hot": 1234567.0, "ours_hot": 2e-7,
             "plan": "rows 1x7", "samples_us": [3.0]}]
    sparse = [{"case": 0, "torch_wall": 2.0, "ours_wall": 1.0}, {"case": 1, "error": "differs"}]
    payload = {"seed": 7, "gpu": None, "environment": {"torch": "2.x", "l2_bytes": 52428800, "scale": 0.123456},
               "rows": rows, "sparse": sparse, "empty": [], "mixed": [{"a": None}, {"b": 1}]}
    path = tmp_path / "suite.json"
    written = report.write_summary(path, payload)
    assert written == [path, tmp_path / "suite_samples.json"]
    assert json.loads(written[1].read_text()) == payload  # the whole payload, samples included
    text = path.read_text()
    assert "samples_us" not in text and '\n  [0,"sum((3, 5), dim=0) int8",[3,5],1.235,0.5,null],\n' in text
    lines = text.splitlines()
    assert sum(line.startswith("  [") for line in lines) == 4 and sum(line.startswith("  {") for line in lines) == 2
    got = report.read_summary(path)
    assert got["rows"] == [{k: v for k, v in r.items() if k != "samples_us"} | {"torch_hot": t}
                           for r, t in zip(rows, (1.235, 1235000.0))]
    assert got["rows"][1]["ours_hot"] == 2e-7 and got["environment"]["scale"] == 0.1235
    assert got["sparse"] == sparse and got["mixed"] == [{"a": None}, {"b": 1}] and got["empty"] == []
    assert got["seed"] == 7 and got["gpu"] is None
    report.write_summary(path, got)  # written again: the same text, and no samples file for rows without them
    assert path.read_text() == text
    assert report.write_summary(tmp_path / "plain.json", {"rows": sparse}) == [tmp_path / "plain.json"]


def test_a_summary_of_lists_of_objects_reads_as_it_is(tmp_path):
    """A summary from before the tables (rows a list of objects) reads as plain JSON does."""
    old = {"meta": {"gpu": "x"}, "rows": [{"n": 1, "us": 1.23456789}, {"n": 2, "us": None}]}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old, indent=1))
    assert report.read_summary(path) == old


def _sweep_rows(medians: dict, mode="hot", n=1024, bytes_=4096, dtype="float32"):
    """A sweep case's rows as bench.measure makes them."""
    best = min(medians[p] for p in report.PEERS if p in medians)
    return [{"op": "sum", "dtype": dtype, "n": n, "offset": 0, "candidate": name, "mode": mode, "median_us": med,
             "p10_us": med * 0.99, "p90_us": med * 1.01, "gbps": bytes_ / med / 1e3, "bytes": bytes_,
             "torch_bytes": bytes_, "speedup_vs_torch": medians["torch.sum"] / med,
             "vs_cub": medians["cub"] / med if "cub" in medians else None, "vs_best": best / med,
             "pct_of_read": 100.0 * medians["read_probe"] / med if "read_probe" in medians else None}
            for name, med in medians.items()]


def test_a_sweep_summary_leaves_out_what_it_can_compute_again(tmp_path):
    """GB/s and the ratios follow from the medians and bytes of a case's rows: the summary leaves
    them out and read_summary computes them again from the medians' 4 digits (a ratio of two
    such and its rounding: within 2.5e-3 of the stored value's 4 digits); a column that does not follow (here a hand-made vs_cub) is kept."""
    rows = (_sweep_rows({"torch.sum": 4.0657, "torch.compile": 1.2121, "cub": 2.5, "auto": 1.1234567, "read_probe": 1.0})
            + _sweep_rows({"torch.sum": 300.0, "auto": 250.0}, mode="cold", n=1 << 20, bytes_=1 << 22))
    path = tmp_path / "results.json"
    report.write_summary(path, {"kind": "sweep", "environment": {}, "rows": rows})
    table = json.loads(path.read_text())["rows"]
    assert table["derived"] == list(report.DERIVED) and not set(report.DERIVED) & set(table["columns"])
    assert _close(report.read_summary(path)["rows"], report._compact(rows))
    rows[0]["vs_cub"] = 7.0
    report.write_summary(path, {"kind": "sweep", "environment": {}, "rows": rows})
    table = json.loads(path.read_text())["rows"]
    assert "vs_cub" in table["columns"] and "vs_cub" not in table["derived"]
    assert report.read_summary(path)["rows"][0]["vs_cub"] == 7.0
    report.write_summary(path, {"kind": "dims", "rows": rows})  # another suite's rows keep every column
    assert "derived" not in json.loads(path.read_text())["rows"]


def _tracked() -> list[Path] | None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [ROOT / p for p in out.decode().split("\0") if p]


def test_committed_summaries_read_and_are_in_the_current_form(tmp_path):
    """Every committed suite summary reads through read_summary into lists of row objects, and
    is what write_summary writes of that (so that a summary committed by hand in another form, or
    with raw samples, fails here: `python benchmarks/report.py rewrite FILE`)."""
    tracked = _tracked()
    tracked = None if tracked is None else set(tracked)  # (a checkout's ignored local runs are not committed)
    files = sorted(p for p in (ROOT / "benchmarks" / "results").rglob("*.json") if tracked is None or p in tracked)
    if not files:
        pytest.skip("no committed results here")
    for path in files:
        assert not path.name.endswith("_samples.json"), path
        payload = report.read_summary(path)
        assert isinstance(payload.get("rows"), list) and all(isinstance(r, dict) for r in payload["rows"]), path
        again = tmp_path / path.name
        assert report.write_summary(again, payload) == [again], path
        assert again.read_text() == path.read_text(), f"{path}: not in write_summary's form"


def test_tracked_files_stay_under_5_mb():
    """The tree git tracks (not its history) under 5 MB: results as compact summaries, raw samples
    and superseded runs out of it (docs/performance.md, "Running the suites")."""
    tracked = _tracked()
    if tracked is None:
        pytest.skip("not a git checkout")
    sizes = {p: p.stat().st_size for p in tracked if p.is_file()}
    total = sum(sizes.values())
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
    assert total < LIMIT_BYTES, f"{total} bytes tracked; the largest: " + ", ".join(
        f"{p.relative_to(ROOT)} {n}" for p, n in largest)


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_relative_links_of_the_docs_lead_to_files():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    if not all(p.exists() for p in pages):
        pytest.skip("the docs are not here")
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (page.parent / target.split("#")[0]).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken
