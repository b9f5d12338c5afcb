"""The torch-free layer stays torch-free: the kernels (every .cu file and what it includes), the
launch interface and planner, the operator functors, dtypes, layouts and the exact state include
no torch, ATen, c10, pybind11 or Python header, directly or through another of our headers. (The
CUDA objects are then built without torch, and the planner and kernels can be read, tested and
reused on their own.) Reads the sources only: no build needed."""

import importlib.util
import re
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parent.parent / "csrc"

# The torch-free roots; everything they include from csrc is checked too.
TORCH_FREE = ["dtype.h", "layout.h", "reduce_ops.h", "reductions.h", "exact.h", "convert.h", "variant.h",
              "cuda/launch.h", "cuda/plan.h", "cuda/plan_reduce.h", "cpu/sum_simd.h", "cpu/sum_simd.cpp"]
FORBIDDEN = re.compile(r"^(torch|ATen|c10|pybind11|Python\.h|caffe2)\b")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def roots() -> list[Path]:
    return sorted({CSRC / p for p in TORCH_FREE} | set((CSRC / "cuda").glob("*.cu")) |
                  set((CSRC / "cuda" / "kernels").glob("*.cuh")))


def includes(path: Path) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in INCLUDE.finditer(path.read_text())]


def closure(root: Path) -> dict[Path, list[str]]:
    """Our headers reached from root (quoted includes, resolved beside the includer), each with
    its system includes."""
    seen: dict[Path, list[str]] = {}
    todo = [root]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen[path] = []
        for kind, name in includes(path):
            if kind == '"':
                target = (path.parent / name).resolve()
                assert target.exists(), f"{path.relative_to(CSRC)} includes missing {name}"
                todo.append(target)
            else:
                seen[path].append(name)
    return seen


@pytest.mark.parametrize("root", roots(), ids=lambda p: str(p.relative_to(CSRC)))
def test_torch_free_sources_include_no_torch_header(root):
    for path, system in closure(root).items():
        bad = [name for name in system if FORBIDDEN.match(name)]
        assert not bad, f"{path.relative_to(CSRC)} (reached from {root.relative_to(CSRC)}) includes {bad}"


def load_cuda_units():
    spec = importlib.util.spec_from_file_location("cuda_units", CSRC.parent / "scripts" / "cuda_units.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_units_are_torch_free_and_name_what_the_headers_define(tmp_path):
    """The CUDA units the build generates (csrc/cuda/units.txt): each names a kernels header, a
    dtype.h list and an instance macro that exist, and includes nothing of torch."""
    cuda_units = load_cuda_units()
    defined = set()
    for header in [CSRC / "dtype.h", *(CSRC / "cuda" / "kernels").glob("*.cuh")]:
        defined |= set(re.findall(r"^\s*#\s*define\s+(TREDUCE_\w+)", header.read_text(), re.M))
    units = cuda_units.read_units(CSRC.parent)
    assert len({u["name"] for u in units}) == len(units), "two units of one name"
    for unit in units:
        assert (CSRC / "cuda" / "kernels" / unit["header"]).exists(), unit
        assert unit["list"] in defined and unit["instance"] in defined, unit
    for path in cuda_units.write_units(CSRC.parent, tmp_path):
        for included, system in closure(path).items():
            assert not [name for name in system if FORBIDDEN.match(name)], f"{path.name}: {included}"


def test_the_check_sees_a_torch_include(tmp_path):
    # The check itself: a header that includes a torch header through another is caught.
    (tmp_path / "a.h").write_text('#include "b.h"\n')
    (tmp_path / "b.h").write_text("#include <ATen/ATen.h>\n#include <cstdint>\n")
    found = closure(tmp_path / "a.h")
    assert found[(tmp_path / "b.h").resolve()] == ["ATen/ATen.h", "cstdint"]
    assert FORBIDDEN.match("ATen/ATen.h") and FORBIDDEN.match("torch/library.h") and not FORBIDDEN.match("cstdint")
