"""The CUDA instantiation units, generated at build time: each line of csrc/core/cuda/units.txt
through the template csrc/core/cuda/unit.cu.in. setup.py calls write_units; CMakeLists.txt does the
same in CMake's language (configure_file), and both give the same bytes, so that
scripts/nvcc_cache.py reuses one build's objects in the other when both write to one folder."""

from pathlib import Path


def read_units(root: Path) -> list[dict]:
    """units.txt's lines: name, header (in csrc/core/cuda/kernels), dtype list, instance macro."""
    units = []
    for line in (root / "csrc" / "core" / "cuda" / "units.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, header, dtypes, instance = line.split()
            units.append({"name": name, "header": header, "list": dtypes, "instance": instance})
    return units


def unit_text(root: Path, template: str, unit: dict) -> str:
    """unit.cu.in's text (`template`) for one unit."""
    values = {"UNIT_NAME": unit["name"], "UNIT_HEADER": (root / "csrc" / "core" / "cuda" / "kernels" / unit["header"]).as_posix(),
              "UNIT_LIST": unit["list"], "UNIT_INSTANCE": unit["instance"]}
    for key, value in values.items():
        template = template.replace(f"@{key}@", value)
    return template


def write_units(root: Path, folder: Path) -> list[Path]:
    """Writes each unit into folder (only where its text changed, so that a build does not compile
    it again) and returns their paths, in units.txt's order."""
    folder.mkdir(parents=True, exist_ok=True)
    template = (root / "csrc" / "core" / "cuda" / "unit.cu.in").read_text()
    paths = []
    for unit in read_units(root):
        path, text = folder / f"{unit['name']}.cu", unit_text(root, template, unit)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        paths.append(path)
    return paths
