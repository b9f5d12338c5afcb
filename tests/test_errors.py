"""Bad input gets a clear error, never a wrong answer."""

import pytest
import torch

import torch_reduce
from util import DEVICES, cuda_only, variant_names


@pytest.mark.parametrize("device", DEVICES)
def test_unknown_variant_lists_the_valid_names(device):
    with pytest.raises(ValueError, match="unknown variant 'fastest'") as info:
        torch_reduce.sum(torch.ones(4, device=device), variant="fastest")
    for name in variant_names(device):
        assert name in str(info.value)


def test_cuda_variant_on_cpu_tensor_names_the_cpu_variants():
    if "warp_shuffle" not in variant_names("cuda"):
        pytest.skip("built without CUDA")
    with pytest.raises(ValueError, match="'warp_shuffle' runs on CUDA tensors only; CPU tensors can use: serial, pairwise, auto"):
        torch_reduce.sum(torch.ones(4), variant="warp_shuffle")


@cuda_only
def test_cpu_variant_on_cuda_tensor_names_the_cuda_variants():
    with pytest.raises(ValueError, match="'pairwise' runs on CPU tensors only; CUDA tensors can use: neighbored, "):
        torch_reduce.sum(torch.ones(4, device="cuda"), variant="pairwise")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.complex64, torch.float8_e4m3fn, torch.uint16], ids=str)
def test_unsupported_input_dtype(device, dtype):
    x = torch.zeros(4, device=device).to(dtype)
    with pytest.raises(TypeError, match="input dtype .* is not supported; supported dtypes: bool, uint8"):
        torch_reduce.sum(x)


@pytest.mark.parametrize("device", DEVICES)
def test_unsupported_dtype_argument(device):
    with pytest.raises(TypeError, match="dtype= ComplexFloat is not supported"):
        torch_reduce.sum(torch.ones(4, device=device), dtype=torch.complex64)


def test_sparse_input():
    # Only strided kernels are registered, so the dispatcher refuses other layouts.
    with pytest.raises(NotImplementedError, match="Could not run 'treduce::sum' with arguments from the 'SparseCPU' backend"):
        torch_reduce.sum(torch.ones(4).to_sparse())


def test_variants_of_an_unknown_device():
    with pytest.raises(ValueError, match="expected 'cpu' or 'cuda'"):
        torch_reduce.variants("meta")


def nondeterministic_cuda_variants():
    names = [v.name for v in torch_reduce.variants("cuda") if not v.deterministic]
    return [pytest.param(n, marks=cuda_only) for n in names]


@pytest.fixture
def deterministic_mode():
    before, warn_only = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    yield
    torch.use_deterministic_algorithms(before, warn_only=warn_only)


def test_the_atomic_variants_are_the_nondeterministic_ones():
    if not torch_reduce.variants("cuda"):
        pytest.skip("built without CUDA")
    flagged = {v.name for v in torch_reduce.variants("cuda") if not v.deterministic}
    assert flagged == {"atomic", "block_atomic", "warp_shuffle"}


@pytest.mark.parametrize("variant", nondeterministic_cuda_variants())
def test_float_atomics_refused_in_deterministic_mode(variant, deterministic_mode, capfd):
    x = torch.ones(1000, device="cuda")
    torch.use_deterministic_algorithms(True)
    with pytest.raises(RuntimeError, match=f"variant '{variant}' on floating-point data.*use_deterministic_algorithms"):
        torch_reduce.sum(x, variant=variant)
    # Integer atomics are exact in any order, so they stay allowed.
    assert torch_reduce.sum(x.int(), variant=variant).item() == 1000
    # warn_only: torch's warning handler prints it (calls through torch.ops do not turn C++
    # warnings into Python ones).
    torch.use_deterministic_algorithms(True, warn_only=True)
    capfd.readouterr()
    assert torch_reduce.sum(x, variant=variant).item() == 1000
    assert f"treduce.sum with variant '{variant}' on floating-point data" in capfd.readouterr().err
