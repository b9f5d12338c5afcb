"""Builds torch_reduce._C, the treduce ops library, with torch's extension builder.

The CUDA kernels are built whenever the CUDA toolkit is found (a GPU need not
be visible); without a toolkit, or with TREDUCE_CUDA=0, the build is CPU-only.
TORCH_CUDA_ARCH_LIST selects the GPU architectures (default 8.0;9.0;10.0+PTX).
Sources and flags come from csrc/build.txt, shared with CMakeLists.txt.
"""

import os
from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

ROOT = Path(__file__).resolve().parent


def read_build_manifest():
    entries = {}
    for line in (ROOT / "csrc" / "build.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            kind, value = line.split(maxsplit=1)
            entries.setdefault(kind, []).append(value)
    return entries


def extension():
    build = read_build_manifest()
    with_cuda = CUDA_HOME is not None and os.environ.get("TREDUCE_CUDA", "1") != "0"
    sources = build["source"] + (build["cuda_source"] if with_cuda else [])
    args = {"cxx": build.get("cxx_flag", [])}
    link = build.get("link_flag", [])
    if not with_cuda:
        return CppExtension(
            "torch_reduce._C", sources, extra_compile_args=args, extra_link_args=link, py_limited_api=True
        )
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "8.0;9.0;10.0+PTX")
    args["nvcc"] = build.get("nvcc_flag", [])
    return CUDAExtension(
        "torch_reduce._C",
        sources,
        extra_compile_args=args,
        extra_link_args=link,
        define_macros=[("TREDUCE_WITH_CUDA", None)],
        py_limited_api=True,
    )


setup(
    name="torch_reduce",
    version="0.1.0",
    description="Fast, exact reductions for PyTorch, and every classic CUDA reduction technique as a variant",
    packages=["torch_reduce"],
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildExtension},
    options={"bdist_wheel": {"py_limited_api": "cp39"}},
    python_requires=">=3.9",
    install_requires=["torch>=2.11"],
)
