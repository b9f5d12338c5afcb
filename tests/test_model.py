"""A small torch.nn model trained with and without torch_reduce.override(); the ops with dims in
CUDA graphs, on a side stream and on a second GPU."""

import contextlib
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch_reduce
from util import DEVICES, cuda_only, fresh_generator

BATCH, TOKENS, VOCAB, CLASSES, STEPS = 8, 12, 64, 5, 5


class TokenClassifier(nn.Module):
    """Embedding, one transformer encoder layer and LayerNorm, then the two poolings sequence
    classifiers use: the mean over each row's real tokens and the max over them."""

    def __init__(self, width=32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        # GELU, not ReLU: a ReLU input within rounding of 0 flips its gradient between two runs
        # that differ only in summation order, and five steps carry that far past any rounding
        # bound (seed 186673570916691 did, torch 2.15 on the CPU).
        self.encoder = nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=64, dropout=0.0,
                                                  activation="gelu", batch_first=True)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(2 * width, CLASSES)

    def forward(self, tokens, mask):
        h = self.norm(self.encoder(self.embed(tokens), src_key_padding_mask=~mask))
        m = mask.unsqueeze(-1)
        mean = (h * m).sum(dim=1) / m.sum(dim=1)  # bool sum: the token count of each row
        peak = h.masked_fill(~m, float("-inf")).amax(dim=1)
        return self.head(torch.cat([mean, peak], dim=-1))


def loss_fn(model, tokens, mask, labels):
    return F.cross_entropy(model(tokens, mask), labels, reduction="none").mean()


def batches(device, gen):
    """STEPS batches of random tokens, each row with 1 to TOKENS real ones, and random labels."""
    out = []
    for _ in range(STEPS):
        lengths = torch.randint(1, TOKENS + 1, (BATCH, 1), generator=gen, device=device)
        mask = torch.arange(TOKENS, device=device) < lengths
        tokens = torch.randint(0, VOCAB, (BATCH, TOKENS), generator=gen, device=device)
        out.append((tokens, mask, torch.randint(0, CLASSES, (BATCH,), generator=gen, device=device)))
    return out


def train(model, data, step, context):
    """SGD over the batches; the losses, and what `context` yielded."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    with context as ov:
        for tokens, mask, labels in data:
            opt.zero_grad()
            loss = step(tokens, mask, labels)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
    return torch.stack(losses), ov


def model_and_data(device):
    gen, seed = fresh_generator(device)
    torch.manual_seed(seed)
    return TokenClassifier().to(device), batches(device, gen), seed


def assert_same_training(a, b, losses_a, losses_b, seed):
    tol = dict(rtol=1e-4, atol=1e-5)  # summation order differs, and five steps compound it
    torch.testing.assert_close(losses_a, losses_b, **tol, msg=lambda m: f"{m} (seed {seed})")
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(p, q, **tol, msg=lambda m: f"{name}: {m} (seed {seed})")


@pytest.mark.parametrize("mode", ["dispatcher", "python"])
@pytest.mark.parametrize("device", DEVICES)
def test_training_matches_torch(device, mode):
    reference, data, seed = model_and_data(device)
    model = copy.deepcopy(reference)
    expected, _ = train(reference, data, lambda *b: loss_fn(reference, *b), contextlib.nullcontext())
    got, ov = train(model, data, lambda *b: loss_fn(model, *b), torch_reduce.override(mode))
    assert_same_training(model, reference, got, expected, seed)
    # Each step: the two sums and the amax of the pooling, the loss's mean; maybe more inside nn
    # (and, in the dispatcher mode, the sums of the backward: the bias gradients of every Linear).
    assert ov.routed["sum"] >= 2 * STEPS and ov.routed["amax"] >= STEPS and ov.routed["mean"] >= STEPS
    if mode == "dispatcher":
        assert ov.routed["sum"] >= 2 * STEPS + 4 * STEPS
    # (the loss's softmax family stays torch's on the CPU, by choice: "slower here")
    assert set(ov.fallback_reasons) <= ({"slower here"} if device == "cpu" else set()), ov.fallback_reasons


@pytest.mark.slow  # inductor compiles a forward and a backward: 20 s on two cores, 100 s cold
def test_compiled_training_matches_torch():
    """The whole forward and loss compiled as one graph under the Python-mode override, trained
    on the CPU."""
    torch._dynamo.reset()
    reference, data, seed = model_and_data("cpu")
    model = copy.deepcopy(reference)
    expected, _ = train(reference, data, lambda *b: loss_fn(reference, *b), contextlib.nullcontext())
    compiled = torch.compile(lambda *b: loss_fn(model, *b), fullgraph=True)
    got, ov = train(model, data, compiled, torch_reduce.override("python"))
    assert_same_training(model, reference, got, expected, seed)
    # Counted once, when traced.
    assert ov.routed["sum"] >= 2 and ov.routed["amax"] >= 1 and ov.routed["mean"] >= 1
    assert not ov.fallback


OPS = ["sum", "mean", "amax", "amin"]


def exact_floats(shape, device, gen):
    """Random small integers as float32: every order of adding them gives the same sum, so sums
    compare exactly and means to one rounding."""
    return torch.randint(-8, 9, shape, generator=gen, device=device).float()


@cuda_only
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dim", [-1, 0, (0, 2)], ids=str)
def test_cuda_graph_replay_with_new_data(op, dim):
    """Captured with dims, replayed on new data copied into the static input."""
    gen, seed = fresh_generator("cuda")
    static_x = exact_floats((64, 33, 257), "cuda", gen)
    fn, reference = getattr(torch_reduce, op), getattr(torch, op)
    fn(static_x, dim=dim)  # warm up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = fn(static_x, dim=dim)
    for _ in range(3):
        static_x.copy_(exact_floats(static_x.shape, "cuda", gen))
        graph.replay()
        torch.testing.assert_close(static_out, reference(static_x, dim=dim),
                                   msg=lambda m: f"{m} (seed {seed})")


@cuda_only
@pytest.mark.parametrize("op", OPS)
def test_runs_on_the_current_stream(op):
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        # Written and reduced on `side`: an op on another stream could read x before the writes.
        x = torch.empty(4096, 8191, device="cuda")
        x.fill_(2.0)
        x.add_(1.0)
        out = getattr(torch_reduce, op)(x, dim=-1)
    side.synchronize()
    expected = 3.0 * x.shape[-1] if op == "sum" else 3.0
    assert torch.equal(out, torch.full((4096,), expected, device="cuda"))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("op", OPS)
def test_second_device(op):
    gen, seed = fresh_generator("cuda:1")
    x = exact_floats((100, 301), "cuda:1", gen)
    out = getattr(torch_reduce, op)(x, dim=1)
    assert out.device == x.device
    torch.testing.assert_close(out, getattr(torch, op)(x, dim=1), msg=lambda m: f"{m} (seed {seed})")
