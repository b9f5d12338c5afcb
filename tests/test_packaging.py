"""The torch releases torch_reduce supports, said once and kept: requirements, the build's refusal of
other releases, the build record and the import-time check against the running torch."""

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
