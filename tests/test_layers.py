"""csrc/core stays torch-free: the kernels, the launch interface and planner, the operator
functors, the dtype switch, dtypes, layouts and the exact state include no torch, ATen, c10,
pybind11 or Python header, directly or through another of our headers, and nothing of
csrc/torch. (The CUDA objects are then built without torch and shared by the builds against
every torch release, and the planner and kernels can be read, tested and reused on their own.)
csrc/torch holds the schemas, the dispatcher's kernels, autograd, the override and the Python
entry. Reads the sources only: no build needed."""

import importlib.util
import re
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parent.parent / "csrc"
CORE = CSRC / "core"
SOURCE_SUFFIXES = {".h", ".cuh", ".cu", ".cpp", ".in"}
FORBIDDEN = re.compile(r"^(torch|ATen|c10|pybind11|Python\.h|caffe2)\b")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def roots() -> list[Path]:
    """Every core source but the units' template (its include is a placeholder; the generated
    units are checked below)."""
    return sorted(p for p in CORE.rglob("*") if p.suffix in SOURCE_SUFFIXES - {".in"})


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
def test_core_sources_include_no_torch_header(root):
    for path, system in closure(root).items():
        bad = [name for name in system if FORBIDDEN.match(name)]
        assert not bad, f"{path.relative_to(CSRC)} (reached from {root.relative_to(CSRC)}) includes {bad}"
        assert path.is_relative_to(CORE), f"{root.relative_to(CSRC)} reaches {path.relative_to(CSRC)}, outside core"


def test_every_source_is_core_or_torch():
    """Two folders, no third place: what includes torch lives in csrc/torch, the rest in csrc/core."""
    sources = [p for p in CSRC.rglob("*") if p.suffix in SOURCE_SUFFIXES]
    assert len(roots()) > 20 and any(p.is_relative_to(CSRC / "torch") for p in sources)
    assert [p for p in sources if not (p.is_relative_to(CORE) or p.is_relative_to(CSRC / "torch"))] == []


def load_cuda_units():
    spec = importlib.util.spec_from_file_location("cuda_units", CSRC.parent / "scripts" / "cuda_units.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_units_are_torch_free_and_name_what_the_headers_define(tmp_path):
    """The CUDA units the build generates (csrc/core/cuda/units.txt): each names a kernels header, a
    dtype.h list and an instance macro that exist, and includes nothing of torch."""
    cuda_units = load_cuda_units()
    defined = set()
    for header in [CORE / "dtype.h", *(CORE / "cuda" / "kernels").glob("*.cuh")]:
        defined |= set(re.findall(r"^\s*#\s*define\s+(TREDUCE_\w+)", header.read_text(), re.M))
    units = cuda_units.read_units(CSRC.parent)
    assert len({u["name"] for u in units}) == len(units), "two units of one name"
    for unit in units:
        assert (CORE / "cuda" / "kernels" / unit["header"]).exists(), unit
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
