"""treduce.sum as a PyTorch op: schema, fake tensors, autograd, torch.compile, CUDA graphs, streams."""

import re
from pathlib import Path

import pytest
import torch

import torch_reduce
from torch_reduce import _C
from torch_reduce._table import NORMALIZING_OPS, OPS
from util import DEVICES, cuda_only, exact_input, fresh_generator, variant_names


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "dtype,requires_grad,kwargs",
    [
        (torch.float32, True, {}),
        (torch.float64, True, {}),
        (torch.bfloat16, False, {}),
        (torch.int32, False, {}),
        (torch.bool, False, {}),
        (torch.float32, True, {"dtype": torch.float64}),
        (torch.int16, False, {"dtype": torch.int8}),
    ],
    ids=str,
)
def test_opcheck(device, dtype, requires_grad, kwargs):
    """Schema, fake (meta) kernel, autograd registration and AOT dispatch all agree with the op."""
    gen, _ = fresh_generator(device)
    for variant in ("auto", variant_names(device)[0]):
        x = exact_input(1000, dtype, device, gen).requires_grad_(requires_grad)
        torch.library.opcheck(torch.ops.treduce.sum.default, (x, variant), kwargs)


@pytest.mark.parametrize("device", DEVICES)
def test_gradient_is_the_broadcast_incoming_gradient(device):
    x = torch.randn(3, 4, device=device, requires_grad=True)
    (torch_reduce.sum(x, dtype=torch.float64) * 2.5).backward()
    assert x.grad.dtype == torch.float32
    assert torch.equal(x.grad, torch.full((3, 4), 2.5, device=device))


def test_gradcheck():
    x = torch.randn(17, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: torch_reduce.sum(t, variant="pairwise"), (x,))


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device):
    def f(x):
        return torch_reduce.sum(x * 2, variant="auto") + 1

    compiled = torch.compile(f, fullgraph=True)
    x = torch.randn(10_000, device=device)
    torch.testing.assert_close(compiled(x), f(x))
    gen, _ = fresh_generator(device)
    y = exact_input(20_001, torch.int32, device, gen)
    assert torch.equal(torch.compile(lambda t: torch_reduce.sum(t), fullgraph=True)(y), y.sum())


@cuda_only
@pytest.mark.parametrize("variant", variant_names("cuda"))
def test_cuda_graph_replay_with_new_data(variant):
    """Capturable (no host sync, no allocation outside the graph pool) and correct on replay."""
    gen, seed = fresh_generator("cuda")
    static_x = exact_input(1_000_003, torch.int32, "cuda", gen)
    torch.ops.treduce.sum(static_x, variant)  # warm up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = torch.ops.treduce.sum(static_x, variant)
    for _ in range(3):
        static_x.copy_(exact_input(static_x.numel(), torch.int32, "cuda", gen))
        graph.replay()
        assert static_out.item() == static_x.sum().item(), f"seed {seed}"


@cuda_only
def test_runs_on_the_current_stream():
    gen, _ = fresh_generator("cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        # Input produced and consumed on `side`: if the op ran on another stream it could read
        # x before the fill finishes.
        x = torch.empty(50_000_000, device="cuda", dtype=torch.int32)
        x.fill_(3)
        out = torch.ops.treduce.sum(x, "auto")
    side.synchronize()
    assert out.item() == 150_000_000


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_device():
    x = torch.arange(1000, device="cuda:1")
    out = torch_reduce.sum(x)
    assert out.device == x.device and out.item() == 499500


def test_readme_variant_table_matches_the_library():
    """README.md lists every variant, with the seed the library reports for it."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    rows = {(m.group(1), m.group(2)) for m in re.finditer(r"^\| (CPU|CUDA) \| `(\w+)` \|", readme, re.M)}
    for device in ("cpu", "cuda"):
        for v in torch_reduce.variants(device):
            if v.name == "auto":
                continue
            assert (device.upper(), v.name) in rows, f"README lacks {device} variant {v.name}"


def test_the_op_table_names_every_op():
    """The Python op table (torch_reduce/_table.py) names the ops of the C++ one (csrc/torch/ops.h's
    TREDUCE_OPS), those the library registers under torch.ops.treduce (but for `variants`, the
    list of techniques, and the private `_` ops) and those the eager entry takes, each once: an op
    added to one of them and not to the table fails here."""
    names = [op.name for op in OPS]
    normalizing = [op.name for op in NORMALIZING_OPS]
    everything = names + normalizing
    assert len(set(everything)) == len(everything), everything
    header = (Path(__file__).resolve().parent.parent / "csrc" / "torch" / "ops.h").read_text()
    start, second = header.index("#define TREDUCE_OPS(X)"), header.index("#define TREDUCE_NORMALIZING_OPS(X)")
    in_header = re.findall(r"\bX\((\w+),", header[start:second])
    assert len(in_header) == len(set(in_header)) and set(in_header) == set(names), (in_header, names)
    in_second = re.findall(r"\bX\((\w+),", header[second:])
    assert in_second == normalizing, (in_second, normalizing)
    registered = {op.split("::")[1].split(".")[0] for op in torch._C._dispatch_get_all_op_names()
                  if op.startswith("treduce::")}
    assert {name for name in registered if not name.startswith("_")} - {"variants"} == set(everything), registered
    # The eager entry takes the reductions (the normalizing ops' wrappers call the ops).
    assert {name.lower() for name in dir(_C) if name.isupper()} == set(names)
    # ... and torch_reduce exports each one's wrapper.
    assert set(everything) <= set(torch_reduce.__all__), set(everything) - set(torch_reduce.__all__)
    assert all(callable(getattr(torch_reduce, name)) for name in everything)
