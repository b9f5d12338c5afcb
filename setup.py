"""Builds torch_reduce._C, the treduce ops library, with torch's extension builder.

It builds against the torch that is installed (pip install --no-build-isolation .), which must be
one of the supported releases (torch_reduce/_version.py), and the result runs with that torch
minor release only: the package requires it, and records what it was built with next to the
library (_C.build.json, read by torch_reduce.build_info()).

The CUDA kernels are built whenever the CUDA toolkit is found (a GPU need not
be visible); without a toolkit, or with TREDUCE_CUDA=0, the build is CPU-only.
TORCH_CUDA_ARCH_LIST selects the GPU architectures (default 8.0;9.0;10.0+PTX).
Sources and flags come from csrc/build.txt, shared with CMakeLists.txt.
TREDUCE_ANY_TORCH=1 builds against a torch outside the supported range, untested.
TREDUCE_NVCC_CACHE=FOLDER keeps the CUDA objects there and reuses them in a build against another
torch (they include no torch header; scripts/nvcc_cache.py says when one is reused).
TREDUCE_LINEINFO=0 leaves out the CUDA line tables (-lineinfo): the same kernels, without the
source lines compute-sanitizer and ncu name; compressed, the library is several times smaller.
TREDUCE_CUDA_CHECK_ONLY=1 compiles the CUDA sources as a check only (PTX, device code not
optimized; scripts/nvcc_cache.py): for CI, which has no GPU; not a library to run kernels with.
"""

import json
import os
import platform
import sys
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent

VERSION = {}
exec((ROOT / "torch_reduce" / "_version.py").read_text(), VERSION)


def supported_torch():
    """The installed torch, if it is in the supported range; else the build stops here, saying why."""
    supported = VERSION["TORCH_REQUIREMENT"]
    try:
        import torch
    except ImportError:
        sys.exit(f"torch_reduce builds against the installed torch, and none is installed: install "
                 f"one first ({supported}, e.g. pip install -r requirements.txt), then build with "
                 f"pip install --no-build-isolation .")
    release = VERSION["minor_release"](torch.__version__)
    if not VERSION["TORCH_OLDEST"] <= release <= VERSION["TORCH_NEWEST"] and os.environ.get("TREDUCE_ANY_TORCH") != "1":
        sys.exit(f"torch_reduce supports {supported} (every minor release from "
                 f"{'.'.join(map(str, VERSION['TORCH_OLDEST']))} to {'.'.join(map(str, VERSION['TORCH_NEWEST']))}); "
                 f"the installed torch is {torch.__version__}. Install a supported one "
                 f"(pip install -r requirements.txt), or set TREDUCE_ANY_TORCH=1 to build anyway, untested.")
    return torch, release


torch, TORCH_RELEASE = supported_torch()
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension  # noqa: E402


def read_build_manifest():
    entries = {}
    for line in (ROOT / "csrc" / "build.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            kind, value = line.split(maxsplit=1)
            entries.setdefault(kind, []).append(value)
    return entries


def nvcc_version():
    import re
    import subprocess

    out = subprocess.run([os.path.join(CUDA_HOME, "bin", "nvcc"), "--version"], capture_output=True, text=True).stdout
    match = re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else None


WITH_CUDA = CUDA_HOME is not None and os.environ.get("TREDUCE_CUDA", "1") != "0"

CHECK_ONLY = WITH_CUDA and os.environ.get("TREDUCE_CUDA_CHECK_ONLY") == "1"

if WITH_CUDA and (os.environ.get("TREDUCE_NVCC_CACHE") or CHECK_ONLY) and "PYTORCH_NVCC" not in os.environ:
    # CUDA objects reused across builds against different torch releases, and CI's compile check
    # (scripts/nvcc_cache.py)
    import shlex

    if os.environ.get("TREDUCE_NVCC_CACHE"):
        os.environ["TREDUCE_NVCC_CACHE"] = os.path.abspath(os.environ["TREDUCE_NVCC_CACHE"])
    os.environ["PYTORCH_NVCC"] = " ".join(shlex.quote(part) for part in (
        sys.executable, str(ROOT / "scripts" / "nvcc_cache.py"), os.path.join(CUDA_HOME, "bin", "nvcc")))


def cuda_units():
    """The generated instantiation units (csrc/core/cuda/units.txt, scripts/cuda_units.py), written into
    build/units: one folder for every torch's build, so that their objects are reused."""
    namespace = {}
    exec((ROOT / "scripts" / "cuda_units.py").read_text(), namespace)
    return [str(p.relative_to(ROOT)) for p in namespace["write_units"](ROOT, ROOT / "build" / "units")]


def extension():
    build = read_build_manifest()
    sources = build["source"] + build["python_source"] + (build["cuda_source"] + cuda_units() if WITH_CUDA else [])
    args = {"cxx": build.get("cxx_flag", [])}
    link = build.get("link_flag", [])
    # THPVariable_Wrap, for the eager entry's results (torch's builder links it only into
    # extensions that are not abi3)
    libraries = ["torch_python"]
    if not WITH_CUDA:
        return CppExtension(
            "torch_reduce._C", sources, extra_compile_args=args, extra_link_args=link, libraries=libraries,
            py_limited_api=True,
        )
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "8.0;9.0;10.0+PTX")
    # One C++ standard for the CUDA sources whichever torch builds them (torch 2.15's builder
    # would pass C++20, 2.11's C++17; CMakeLists.txt sets 17 too): they include no torch header,
    # so their objects are the same for every torch, and TREDUCE_NVCC_CACHE can reuse them.
    args["nvcc"] = build.get("nvcc_flag", []) + ["-std=c++17"]
    if os.environ.get("TREDUCE_LINEINFO") == "0":
        args["nvcc"] = [flag for flag in args["nvcc"] if flag != "-lineinfo"]
    return CUDAExtension(
        "torch_reduce._C",
        sources,
        extra_compile_args=args,
        extra_link_args=link,
        libraries=libraries,
        define_macros=[("TREDUCE_WITH_CUDA", None)],
        py_limited_api=True,
    )


class BuildWithInfo(BuildExtension):
    """torch's BuildExtension, then _C.build.json beside the library: what the binary is tied to,
    checked when the package is imported."""

    def run(self):
        super().run()
        info = {
            "torch_reduce": VERSION["__version__"],
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "cuda": nvcc_version() if WITH_CUDA else None,
            "cuda_archs": os.environ["TORCH_CUDA_ARCH_LIST"] if WITH_CUDA else None,
            # the kernels compiled as a check only (PTX, not optimized): torch_reduce warns on a GPU
            "cuda_check_only": CHECK_ONLY,
            "platform": f"{platform.system()}-{platform.machine()}",
        }
        library = Path(self.get_ext_fullpath("torch_reduce._C"))
        library.parent.mkdir(parents=True, exist_ok=True)
        (library.parent / "_C.build.json").write_text(json.dumps(info, indent=1) + "\n")

    def get_outputs(self):
        # Listed, so that editable installs and wheels carry it with the library.
        return super().get_outputs() + [str(Path(self.get_ext_fullpath("torch_reduce._C")).parent / "_C.build.json")]


setup(
    name="torch_reduce",
    version=VERSION["__version__"],
    description="Fast, exact reductions for PyTorch, and every classic CUDA reduction technique as a variant",
    packages=["torch_reduce"],
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildWithInfo},
    options={
        "bdist_wheel": {"py_limited_api": "cp310"},
        # One build folder per torch: objects compiled against one torch's headers are never
        # linked into a build for another.
        "build": {"build_base": f"build/torch-{torch.__version__}"},
    },
    python_requires=">=3.10",
    # The library runs only with the torch minor release it was compiled against.
    install_requires=[f"torch=={TORCH_RELEASE[0]}.{TORCH_RELEASE[1]}.*"],
)
