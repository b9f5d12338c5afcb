"""cross_entropy with class-index targets (treduce.cross_entropy): loss and gradient against
torch's F.cross_entropy in float64 with a stated bound, for every reduction, with and without
weight, ignore_index and label smoothing, logits (C,), (N, C) and (N, C, d...) of every float
dtype; the same bits run after run; torch's errors; double backward; opcheck and torch.compile."""

import pytest
import torch
import torch.nn.functional as F

import torch_reduce
from util import DEVICES, cuda_only, fresh_generator

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# (logits shape): rows of classes (adjacent, block a sample on CUDA; 16-byte packs or not), one
# sample, classes inner apart (segmentation)
SHAPES = [(7, 5), (33, 1000), (3, 32001), (4, 32000), (10,), (4, 19, 8, 8), (2, 3, 5)]
CASES = [  # (reduction, weighted, ignore_index, label_smoothing)
    ("mean", False, -100, 0.0), ("sum", True, -100, 0.0), ("none", False, 2, 0.0), ("mean", True, 1, 0.1),
    ("none", True, -100, 0.2), ("sum", False, 0, 0.05),
]


def unit(dtype):
    return torch.finfo(dtype).eps / 2


def acc_unit(dtype):
    return unit(torch.float64 if dtype == torch.float64 else torch.float32)


def make(shape, dtype, device, gen, ignore_index, weighted):
    x = (torch.randn(shape, generator=gen, device=device) * 3).to(dtype)
    classes = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0],) + tuple(shape[2:])
    t = torch.randint(0, classes, tshape, generator=gen, device=device)
    t = t.masked_fill(t == ignore_index, (ignore_index + 1) % classes)  # only the samples chosen below ignored
    if t.dim():
        t.view(-1)[::3] = ignore_index  # every third sample ignored
    w = (torch.rand(classes, generator=gen, device=device) + 0.5).to(dtype) if weighted else None
    return x, t, w


def bound(x, ref, dtype, samples):
    """(C + N) u_acc (1 + max|x| + |ref|) + 4 u |ref|: each sample's C terms, then N samples,
    accumulated, then the result's rounding (weights within [0.5, 1.5])."""
    classes = x.shape[0] if x.dim() == 1 else x.shape[1]
    scale = 1 + x.double().abs().max() + ref.abs()
    return 2 * (classes + samples) * acc_unit(dtype) * scale + 4 * unit(dtype) * ref.abs()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_loss_and_gradient_against_float64(device, dtype):
    gen, seed = fresh_generator(device)
    for shape in SHAPES:
        for reduction, weighted, ignore_index, smoothing in CASES:
            x, t, w = make(shape, dtype, device, gen, ignore_index, weighted)
            kw = dict(weight=w, ignore_index=ignore_index, reduction=reduction, label_smoothing=smoothing)
            a = x.clone().requires_grad_()
            got = torch_reduce.cross_entropy(a, t, **kw)
            ref_x = x.double().requires_grad_()
            ref = F.cross_entropy(ref_x, t, **dict(kw, weight=None if w is None else w.double()))
            what = (shape, dtype, reduction, weighted, ignore_index, smoothing, seed)
            assert got.dtype == dtype and got.shape == ref.shape, what
            err = (got.double() - ref.detach()).abs()
            assert bool((err <= bound(x, ref.detach(), dtype, t.numel())).all()), (what, err.max().item())
            g = torch.rand(ref.shape, generator=gen, device=device, dtype=torch.float64)
            got.backward(g.to(dtype))
            ref.backward(g)
            gerr = (a.grad.double() - ref_x.grad).abs()
            gb = 4 * (x.shape[0 if x.dim() == 1 else 1] * acc_unit(dtype) + unit(dtype)) * (1 + x.double().abs().max())
            assert a.grad.dtype == dtype and bool((gerr <= gb * (g.abs().max() + 1)).all()), (what, gerr.max().item())


@pytest.mark.parametrize("device", DEVICES)
def test_special_logits_as_torch(device):
    # NaN, +inf and -inf logits anywhere in a row (rows of several rounds of loads a thread on
    # CUDA): the loss NaN where torch's is, finite and close elsewhere (-inf masks a class).
    inf, nan = float("inf"), float("nan")
    gen, seed = fresh_generator(device)
    for classes in (300, 20000):
        x = torch.randn(6, classes, generator=gen, device=device) * 3
        x[0, classes - 2] = nan
        x[1, : classes // 2] = -inf
        x[2, classes // 3] = inf
        x[3, :] = -inf
        x[4, 7] = -inf
        t = torch.tensor([1, classes - 1, 0, 2, 3, 5], device=device)
        for dtype in (torch.float32, torch.bfloat16):
            got = torch_reduce.cross_entropy(x.to(dtype), t, reduction="none")
            want = F.cross_entropy(x.to(dtype).double(), t, reduction="none")
            assert torch.equal(got.isnan(), want.isnan()), (classes, dtype, seed, got, want)
            ok = want.isfinite()
            torch.testing.assert_close(got.double()[ok], want[ok], rtol=2e-2, atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_same_bits_run_after_run(device):
    gen, seed = fresh_generator(device)
    x, t, w = make((4096, 1000), torch.float32, device, gen, -100, True)
    first = torch_reduce.cross_entropy(x, t, weight=w, label_smoothing=0.1)
    for _ in range(3):
        assert torch.equal(torch_reduce.cross_entropy(x, t, weight=w, label_smoothing=0.1), first), seed


@pytest.mark.parametrize("device", DEVICES)
def test_every_target_ignored_and_empty_batches_as_torch(device):
    x = torch.randn(5, 7, device=device)
    t = torch.full((5,), -100, device=device)
    for reduction in ("mean", "sum", "none"):
        got, want = torch_reduce.cross_entropy(x, t, reduction=reduction), F.cross_entropy(x, t, reduction=reduction)
        torch.testing.assert_close(got, want, equal_nan=True)
        e = torch.randn(0, 7, device=device)
        et = torch.zeros(0, dtype=torch.long, device=device)
        torch.testing.assert_close(torch_reduce.cross_entropy(e, et, reduction=reduction),
                                   F.cross_entropy(e, et, reduction=reduction), equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
def test_errors_as_torch(device):
    x = torch.randn(4, 5, device=device)
    t = torch.tensor([0, 1, 2, 3], device=device)
    with pytest.raises(RuntimeError, match="Long"):
        torch_reduce.cross_entropy(x, t.int())
    with pytest.raises(RuntimeError, match="target size"):
        torch_reduce.cross_entropy(x, t[:3])
    with pytest.raises(RuntimeError, match="label_smoothing"):
        torch_reduce.cross_entropy(x, t, label_smoothing=1.5)
    with pytest.raises(ValueError):
        torch_reduce.cross_entropy(x, t, reduction="average")
    with pytest.raises(RuntimeError, match="weight"):
        torch_reduce.cross_entropy(x, t, weight=torch.ones(3, device=device))
    if device == "cpu":
        with pytest.raises(IndexError, match="out of bounds"):
            torch_reduce.cross_entropy(x, torch.tensor([0, 1, 2, 5]))
    else:  # no host synchronisation to look: NaN
        assert torch_reduce.cross_entropy(x, torch.tensor([0, 1, 2, 5], device=device)).isnan().item()


def test_gradcheck_and_gradgradcheck():
    gen, seed = fresh_generator("cpu")
    for shape in ((3, 5), (6,), (2, 4, 3)):
        for reduction, weighted, ignore_index, smoothing in CASES[:4]:
            x, t, w = make(shape, torch.float64, "cpu", gen, ignore_index, weighted)
            x.requires_grad_()
            fn = lambda a: torch_reduce.cross_entropy(a, t, weight=w, ignore_index=ignore_index, reduction=reduction,
                                                      label_smoothing=smoothing)
            assert torch.autograd.gradcheck(fn, (x,))
            assert torch.autograd.gradgradcheck(fn, (x,))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    x = torch.randn(6, 9, device=device)
    t = torch.randint(0, 9, (6,), device=device)
    w = torch.rand(9, device=device)
    loss, lse, tw = torch.ops.treduce.cross_entropy_forward(x, t, w, 1, -100, 0.1)
    for op, args in ((torch.ops.treduce.cross_entropy.default, (x, t, w, 1, -100, 0.1)),
                     (torch.ops.treduce.cross_entropy.default, (x, t, None, 0, 3, 0.0)),
                     (torch.ops.treduce.cross_entropy_forward.default, (x, t, None, 2, -100, 0.0)),
                     (torch.ops.treduce.cross_entropy_backward.default, (torch.ones((), device=device), x, t, w, 1,
                                                                         -100, 0.1, lse, tw))):
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


def test_compiles():
    fn = torch.compile(lambda a, b: torch_reduce.cross_entropy(a, b, label_smoothing=0.1), fullgraph=True)
    x, t = torch.randn(8, 33), torch.randint(0, 33, (8,))
    torch.testing.assert_close(fn(x, t), F.cross_entropy(x, t, label_smoothing=0.1))


@cuda_only
def test_cuda_graph_replay():
    x = torch.randn(64, 3000, device="cuda")
    t = torch.randint(0, 3000, (64,), device="cuda")
    torch_reduce.cross_entropy(x, t)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = torch_reduce.cross_entropy(x, t)
    x.copy_(torch.randn(64, 3000, device="cuda"))
    graph.replay()
    torch.testing.assert_close(y, F.cross_entropy(x, t))


@pytest.mark.parametrize("device", DEVICES)
def test_override_routes_the_loss_whole(device):
    # F.cross_entropy (aten's composite cross_entropy_loss) with class indices becomes ours,
    # forward and backward (no log_softmax, nll_loss or their backwards of torch's), while a block
    # is open; class probabilities take torch's composite, counted.
    gen, seed = fresh_generator(device)
    x, t, w = make((64, 500), torch.float32, device, gen, -100, True)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    with torch_reduce.override() as ov:
        la = F.cross_entropy(a, t, weight=w, label_smoothing=0.1)
        la.backward()
    lb = F.cross_entropy(b, t, weight=w, label_smoothing=0.1)
    lb.backward()
    if device == "cpu":  # torch's composite, its log_softmax counted (slower here)
        assert "cross_entropy" not in ov.routed and ov.fallback_reasons == {"slower here": 2}, ov.fallback_reasons
    else:
        assert ov.routed == {"cross_entropy": 1} and not ov.fallback, (ov.routed, ov.fallback)
    torch.testing.assert_close(la, lb)
    torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-6)
    probabilities = torch.softmax(torch.randn(64, 500, generator=gen, device=device), 1)
    with torch_reduce.override() as ov:
        got = F.cross_entropy(x, probabilities)
    assert ov.fallback_reasons["class probabilities"] == (0 if device == "cpu" else 1), ov.fallback_reasons
    torch.testing.assert_close(got, F.cross_entropy(x, probabilities))
