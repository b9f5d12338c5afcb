"""The torch releases torch_reduce supports, said once and kept: requirements, the build's refusal of
other releases, the build record and the import-time check against the running torch."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_reduce
from torch_reduce import _version

ROOT = Path(__file__).resolve().parent.parent


def test_requirements_repeat_the_supported_range():
    requirement = _version.TORCH_REQUIREMENT
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert [line for line in lines if line.startswith("torch")] == [requirement]
    assert f'"{requirement}"' in (ROOT / "pyproject.toml").read_text()


def test_running_torch_is_supported():
    release = _version.minor_release(torch.__version__)
    assert _version.TORCH_OLDEST <= release <= _version.TORCH_NEWEST


@pytest.mark.parametrize("version,release", [
    ("2.15.0+cu132", (2, 15)), ("2.11.0", (2, 11)), ("2.12.1+cpu", (2, 12)), ("2.16.0a0+git1234", (2, 16)),
    ("3.0.0rc1", (3, 0)),
])
def test_minor_release(version, release):
    assert _version.minor_release(version) == release


def test_build_record_matches_the_running_torch():
    info = torch_reduce.build_info()
    assert _version.minor_release(info["torch"]) == _version.minor_release(torch.__version__)
    assert info["torch_reduce"] == torch_reduce.__version__
    built_with_cuda = bool(torch_reduce.variants("cuda"))
    assert (info["cuda"] is not None) == built_with_cuda
    if built_with_cuda:
        assert info["cuda"].split(".")[0] == torch.version.cuda.split(".")[0]
        assert info["cuda_archs"]


def write_record(tmp_path, **changes):
    record = {**torch_reduce.build_info(), **changes}
    (tmp_path / "_C.build.json").write_text(json.dumps(record))
    return tmp_path / "_C.abi3.so"


def test_import_refuses_a_library_built_for_another_torch(tmp_path):
    major, minor = _version.minor_release(torch.__version__)
    other = f"{major}.{minor - 1}.0"
    with pytest.raises(ImportError, match=rf"built against torch {re.escape(other)} and cannot run with torch"):
        torch_reduce._check_build(write_record(tmp_path, torch=other))
    # Another patch release of the same minor release is fine.
    assert torch_reduce._check_build(write_record(tmp_path, torch=f"{major}.{minor}.9"))["torch"] == f"{major}.{minor}.9"


@pytest.mark.skipif(torch.version.cuda is None, reason="a CPU-only torch")
def test_import_refuses_another_cuda_major(tmp_path):
    other = f"{int(torch.version.cuda.split('.')[0]) + 1}.0"
    with pytest.raises(ImportError, match="CUDA major releases must match"):
        torch_reduce._check_build(write_record(tmp_path, cuda=other))


def test_import_refuses_a_library_without_record(tmp_path):
    with pytest.raises(ImportError, match="no build record"):
        torch_reduce._check_build(tmp_path / "_C.abi3.so")


def fake_torch(tmp_path, version):
    """A folder that makes `import torch` find a stand-in of the given version (None: no torch)."""
    package = tmp_path / "torch"
    package.mkdir()
    if version is None:
        (package / "__init__.py").write_text("raise ImportError('no torch here')\n")
    else:
        (package / "__init__.py").write_text(f"__version__ = {version!r}\n")
    return tmp_path


@pytest.mark.parametrize("version", ["2.10.2", "2.16.0", "1.13.1", None])
def test_build_refuses_an_unsupported_torch(tmp_path, version):
    env = {**os.environ, "PYTHONPATH": str(fake_torch(tmp_path, version))}
    env.pop("TREDUCE_ANY_TORCH", None)
    result = subprocess.run([sys.executable, str(ROOT / "setup.py"), "--name"], cwd=ROOT, env=env,
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert _version.TORCH_REQUIREMENT in result.stderr
    if version is not None:
        assert f"the installed torch is {version}" in result.stderr


@pytest.mark.skipif(not os.environ.get("TREDUCE_EXPECT_INSTALLED"), reason="set by scripts/check_torch.sh")
def test_tests_import_the_installed_package():
    """scripts/check_torch.sh tests an installed wheel: the package must not come from the source tree."""
    assert ROOT not in Path(torch_reduce.__file__).resolve().parents
    assert "site-packages" in Path(torch_reduce.__file__).parts


FAKE_NVCC = r'''
import hashlib, os, re, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("fake nvcc 1.0")
    sys.exit(0)
source = next(a for a in args if a.endswith(".cu"))
headers = [os.path.join(os.path.dirname(source), name)
           for name in re.findall(r'#include "(.+)"', open(source).read())]
if "-M" in args:
    print(args[args.index("-MT") + 1] + " : " + " ".join([source, *headers]))
    sys.exit(0)
text = "".join(open(path).read() for path in [source, *headers])
if "#error" in text:
    sys.exit(1)
with open(os.environ["FAKE_NVCC_LOG"], "a") as log:
    log.write(source + "\n")
flags = [a for a in args if a.startswith("-O")]
output = args[args.index("-o") + 1]
open(output, "w").write(hashlib.sha256((text + " ".join(flags)).encode()).hexdigest())
if "-MF" in args:
    open(args[args.index("-MF") + 1], "w").write(output + " : " + " ".join([source, *headers]) + "\n")
'''


def test_nvcc_cache_reuses_an_object_only_for_the_same_inputs(tmp_path):
    """scripts/nvcc_cache.py (CUDA objects shared by builds against different torch releases): a
    different output path, dependency file and rule target (CMake's -MT) or include folder reuses
    the object; a changed header, flag or compiler compiles again; a failed compilation is not
    kept."""
    nvcc = tmp_path / "nvcc.py"
    nvcc.write_text(FAKE_NVCC)
    source, header = tmp_path / "k.cu", tmp_path / "k.h"
    source.write_text('#include "k.h"\nkernel\n')
    header.write_text("one\n")
    log = tmp_path / "compiled.log"
    env = {**os.environ, "TREDUCE_NVCC_CACHE": str(tmp_path / "cache"), "FAKE_NVCC_LOG": str(log)}
    compiler = [sys.executable, str(nvcc)]

    def build(name, *extra, compiler=compiler, env=env):
        out = tmp_path / f"{name}.o"
        wrapper = [sys.executable, str(ROOT / "scripts" / "nvcc_cache.py")]
        # nvcc_cache.py takes nvcc as one program path: a shell script runs the fake one
        script = tmp_path / f"nvcc_{len(compiler)}_{compiler[-1][-8:].replace('/', '_')}.sh"
        script.write_text("#!/bin/sh\nexec " + " ".join(compiler) + ' "$@"\n')
        script.chmod(0o755)
        rc = subprocess.run([*wrapper, str(script), "-MD", "-MF", f"{out}.d", "-O3", *extra, "-c", str(source),
                             "-o", str(out)], env=env).returncode
        compiled = log.read_text().count("\n") if log.exists() else 0
        return rc, out, compiled

    rc, first, compiled = build("first", "-I/torch-2.11/include")
    assert (rc, compiled) == (0, 1)
    rc, second, compiled = build("second", "-I", "/torch-2.15/include", "-isystem", "/other", "-MT", "second.o")
    assert (rc, compiled) == (0, 1), "same source, headers and flags: reused"
    assert second.read_text() == first.read_text()
    assert Path(f"{second}.d").read_text().split(":")[0].strip() == str(second)
    # Arguments as the object sees them (CMake's and torch's builders spell the same build
    # differently): a macro no file names, diagnostics, a flag's spelling, order and repeats.
    rc, _, compiled = build("cmake", "-forward-unknown-to-host-compiler", "-DNOT_NAMED_ANYWHERE=1", "-Xcudafe",
                            "--diag_suppress=cc_clobber_ignored", "-O3", "-x", "cu")
    assert (rc, compiled) == (0, 1), "the same build spelled otherwise: reused"
    rc, _, compiled = build("named", "-Done=2")
    assert (rc, compiled) == (0, 2), "a macro the header names: compiled"

    header.write_text("two\n")
    rc, third, compiled = build("third", "-I/torch-2.11/include")
    assert (rc, compiled) == (0, 3) and third.read_text() != first.read_text()
    rc, fourth, compiled = build("fourth", "-I/torch-2.11/include", "-O1")
    assert (rc, compiled) == (0, 4) and fourth.read_text() != third.read_text()

    # another compiler version
    other = tmp_path / "nvcc2.py"
    other.write_text(FAKE_NVCC.replace("fake nvcc 1.0", "fake nvcc 2.0"))
    rc, _, compiled = build("fifth", compiler=[sys.executable, str(other)])
    assert (rc, compiled) == (0, 5)
    # no cache folder: nvcc as given
    rc, _, compiled = build("sixth", env={k: v for k, v in env.items() if k != "TREDUCE_NVCC_CACHE"})
    assert (rc, compiled) == (0, 6)

    kept = len(list((tmp_path / "cache").iterdir()))
    header.write_text("#error\n")
    rc, _, compiled = build("broken")
    assert rc != 0 and compiled == 6 and len(list((tmp_path / "cache").iterdir())) == kept


def test_cuda_check_only_compiles_ptx_without_device_optimization():
    """TREDUCE_CUDA_CHECK_ONLY (CI's compile check): each -gencode, in either spelling, builds
    its architecture's PTX only, cicc does not optimize, and nvcc's other calls are unchanged."""
    spec = importlib.util.spec_from_file_location("nvcc_cache", ROOT / "scripts" / "nvcc_cache.py")
    nvcc_cache = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nvcc_cache)
    args = ["-c", "k.cu", "-o", "k.o", "-gencode=arch=compute_90,code=sm_90", "-gencode",
            "arch=compute_80,code=[sm_80,compute_80]", "--generate-code=arch=compute_100a,code=sm_100a", "-O3"]
    assert nvcc_cache.check_only(args) == [
        "-c", "k.cu", "-o", "k.o", "-gencode=arch=compute_90,code=compute_90", "-gencode",
        "arch=compute_80,code=compute_80", "--generate-code=arch=compute_100a,code=compute_100a", "-O3",
        "-Xcicc", "-O0"]
    assert nvcc_cache.check_only(["-M", "k.cu", "-gencode=arch=compute_90,code=sm_90"])[-1] == \
        "-gencode=arch=compute_90,code=compute_90"
