"""The CMake build for LibTorch users: configure, build, and run its CTest program (CPU, and CUDA
where a GPU is present) in a scratch folder."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


def run(cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout


def cuda_toolkit_found() -> bool:
    return shutil.which("nvcc") is not None or (Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda") / "bin" / "nvcc").exists()


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
@pytest.mark.skipif(torch.version.cuda is not None and not cuda_toolkit_found(),
                    reason="LibTorch's CMake config of a CUDA build of torch stops without the CUDA toolkit")
def test_cmake_build_and_ctest(tmp_path):
    build = tmp_path / "build"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    # CI builds twice, against each end of the torch range: with TREDUCE_NVCC_CACHE set the CUDA
    # objects (no torch header in them) are compiled once (scripts/nvcc_cache.py).
    # TREDUCE_CUDA_CHECK_ONLY's compile check goes through the same script.
    launcher = ([f"-DCMAKE_CUDA_COMPILER_LAUNCHER={sys.executable};{ROOT / 'scripts' / 'nvcc_cache.py'}"]
                if os.environ.get("TREDUCE_NVCC_CACHE") or os.environ.get("TREDUCE_CUDA_CHECK_ONLY") == "1" else [])
    # The C++ sources at -O0 (CMakeLists.txt, TREDUCE_CXX_OPT): this test is of the build and the
    # C++ API; the optimized CPU kernels are the Python build's, run by the rest of the suite.
    # The generated CUDA units where setup.py writes them (the same bytes and paths: reused).
    run(["cmake", "-S", ROOT, "-B", build, *generator, *launcher, "-DTREDUCE_CXX_OPT=-O0",
         f"-DTREDUCE_UNITS_DIR={ROOT / 'build' / 'units'}",
         f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}"])
    run(["cmake", "--build", build, "-j", str(os.cpu_count() or 2)])
    log = run(["ctest", "--test-dir", build, "--verbose"])
    assert "100% tests passed" in log and " 0 failed" in log
    if torch.cuda.is_available():
        assert "CUDA cases not run" not in log
