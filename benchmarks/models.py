"""What torch_reduce.override() does to whole eager models: the check a user would run before
trusting it. Two workloads, written here (no downloads), each timed without the override, with
the dispatcher mode (the default) and with the Python mode, interleaved:

- llama: a LLaMA-style decoder (RMSNorm, rotary attention through scaled_dot_product_attention,
  SwiGLU MLP), random weights, one forward + backward step of a next-token loss; bfloat16 and
  float32. Few of its calls are reductions: the override must not slow it down.
- pooling: an eager workload made of reductions: masked mean pooling of token states, the token
  count of a bool mask, the per-row max; the override must make it faster.

    python benchmarks/models.py [--out bench_out] [--reps 15] [--quick] [--cases llama,pooling,llama-32k,llama-128k,vit]

- llama-32k, llama-128k: the LLaMA-style configurations where the loss dominates (hidden 1024,
  vocab 32000, 4 x 512 tokens; hidden 2048, vocab 128256, 4 x 1024 tokens; 4 layers, bfloat16):
  their float32 cross-entropy over the vocabulary is F.cross_entropy, which the dispatcher mode
  routes whole to treduce.cross_entropy (one read of the logits forward, one backward).
- vit: a ViT with ViT-B/16's widths (4 blocks, 64 images of 197 tokens, bfloat16 and float32):
  its nn.LayerNorm calls are native_layer_norm and its backward, which the dispatcher mode routes
  to treduce.layer_norm's ops.

Each sample is the median time of one step over a run of steps (CUDA events), after warm-up;
the table gives the median and the p10-p90 of the samples. Results and gradients are checked
against the run without the override first. Writes models.json and models.md to --out.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torch_reduce  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report  # noqa: E402

MODES = {"torch": contextlib.nullcontext, "dispatcher": lambda: torch_reduce.override("dispatcher"),
         "python": lambda: torch_reduce.override("python")}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        # As LLaMA's reference code: the mean of squares in float32, one reduction per call.
        h = x.float()
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rotary(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Block(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.attn_norm, self.mlp_norm = RMSNorm(dim), RMSNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.gate_up = nn.Linear(dim, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, t, 3, self.heads, d // self.heads).transpose(1, 3).unbind(2)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Decoder(nn.Module):
    def __init__(self, vocab=8192, dim=1024, layers=4, heads=8, hidden=2816, tokens=512):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        pos = torch.arange(tokens, dtype=torch.float32)[:, None]
        freq = 10000.0 ** (-torch.arange(0, dim // heads, 2, dtype=torch.float32) / (dim // heads))
        self.register_buffer("cos", torch.cos(pos * freq), persistent=False)
        self.register_buffer("sin", torch.sin(pos * freq), persistent=False)

    def forward(self, tokens):
        t = tokens.shape[1]
        cos, sin = self.cos[:t].to(self.embed.weight.dtype), self.sin[:t].to(self.embed.weight.dtype)
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.head(self.norm(x))


class VitBlock(nn.Module):
    """A pre-norm ViT encoder block: nn.LayerNorm (aten's native_layer_norm and its backward),
    attention through scaled_dot_product_attention, a GELU MLP."""

    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).transpose(1, 3).unbind(2)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Vit(nn.Module):
    """ViT-B/16's widths (768, 12 heads, MLP 3072) over 196 patches of a 224 image and a class
    token, `layers` blocks, 1000 classes."""

    def __init__(self, layers=4, dim=768, heads=12, hidden=3072, classes=1000):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 16, 16)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, 197, dim) * 0.02)
        self.blocks = nn.ModuleList(VitBlock(dim, heads, hidden) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, images):
        x = self.patch(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


def vit_step(model, images, labels):
    loss = F.cross_entropy(model(images).float(), labels)
    loss.backward()
    return loss.detach()


def check_vit(model, images, labels):
    results = {}
    for mode in MODES:
        model.zero_grad()
        with MODES[mode]():
            loss = vit_step(model, images, labels)
        results[mode] = (loss, [p.grad.clone() for p in model.parameters()])
    loss, grads = results["torch"]
    tol = dict(rtol=5e-2, atol=5e-2) if model.head.weight.dtype == torch.bfloat16 else dict(rtol=1e-3, atol=1e-4)
    for mode in ("dispatcher", "python"):
        torch.testing.assert_close(results[mode][0], loss, **tol)
        for g, h in zip(results[mode][1], grads):
            torch.testing.assert_close(g, h, **tol)


# The loss-heavy configurations: (vocab, hidden, heads, MLP hidden, batch, tokens).
LOSS_CASES = {"llama-32k": (32000, 1024, 8, 2816, 4, 512), "llama-128k": (128256, 2048, 16, 5632, 4, 1024)}


def llama_step(model, tokens):
    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
    loss.backward()
    return loss.detach()


def pooling_step(x, mask):
    """Masked mean pooling, the token count of each row and of the whole mask, the per-row max:
    the reductions of a sequence classifier's pooling and of its bookkeeping."""
    m = mask.unsqueeze(-1)
    counts = mask.sum(1)  # bool -> int64
    pooled = (x * m).sum(1) / counts.unsqueeze(-1)
    peak = x.amax(1)
    score = x.mean(-1).amax(-1)
    return pooled, peak, counts, mask.sum(), score


def time_steps(step, steps: int) -> float:
    """Milliseconds per step over `steps` back-to-back steps (CUDA events)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / steps


def quantiles(samples):
    s = sorted(samples)
    q = lambda p: s[min(len(s) - 1, max(0, math.ceil(p * len(s)) - 1))]  # noqa: E731
    return {"median": statistics.median(s), "p10": q(0.1), "p90": q(0.9)}


def run_case(name, make_step, check, reps, steps, routed_counts):
    """Times the case in every mode, interleaved; returns a result row per mode, with the peak
    memory of a step (MiB) in that mode."""
    check()
    samples = {mode: [] for mode in MODES}
    peak = {}
    for mode in MODES:
        with MODES[mode]():
            make_step()()
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            make_step()()
            torch.cuda.synchronize()
            peak[mode] = torch.cuda.max_memory_allocated() / 2**20
    for mode in MODES:  # warm-up, and what each mode routes in one step
        with MODES[mode]() as ov:
            for _ in range(3):
                make_step()()
            torch.cuda.synchronize()
        if ov is not None:
            routed_counts[f"{name}/{mode}"] = {"routed": dict(ov.routed), "fallback": dict(ov.fallback)}
    for _ in range(reps):
        for mode, ctx in MODES.items():
            step = make_step()
            with ctx():
                samples[mode].append(time_steps(step, steps))
    return {mode: {"case": name, "mode": mode, **quantiles(s), "peak_mib": peak[mode], "samples": s}
            for mode, s in samples.items()}


def check_llama(model, tokens):
    """Loss and every gradient with the override against without it."""
    results = {}
    for mode in MODES:
        model.zero_grad()
        with MODES[mode]():
            loss = llama_step(model, tokens)
        results[mode] = (loss, [p.grad.clone() for p in model.parameters()])
    loss, grads = results["torch"]
    tol = dict(rtol=2e-2, atol=2e-2) if tokens.device.type == "cuda" and model.embed.weight.dtype == torch.bfloat16 \
        else dict(rtol=1e-3, atol=1e-4)
    for mode in ("dispatcher", "python"):
        torch.testing.assert_close(results[mode][0], loss, **tol)
        for g, h in zip(results[mode][1], grads):
            torch.testing.assert_close(g, h, **tol)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("bench_out"))
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="smaller models, 3 repetitions")
    parser.add_argument("--cases", default="llama,pooling", help="from llama, pooling, llama-32k, llama-128k, vit")
    args = parser.parse_args(argv)
    cases = set(args.cases.split(","))
    if not torch.cuda.is_available():
        print("models.py needs a CUDA device", file=sys.stderr)
        return 1
    reps = 3 if args.quick else args.reps
    torch.manual_seed(0)
    rows, routed = [], {}
    batch, tokens_per_row = (2, 128) if args.quick else (8, 512)
    for case, (vocab, dim, heads, hidden, batch_n, tokens_n) in LOSS_CASES.items():
        if case not in cases:
            continue
        if args.quick:
            batch_n, tokens_n = 1, 128
        model = Decoder(vocab=vocab, dim=dim, heads=heads, hidden=hidden, tokens=tokens_n).to("cuda", torch.bfloat16)
        tokens = torch.randint(0, vocab, (batch_n, tokens_n + 1), device="cuda")
        name = f"{case} bfloat16 {batch_n}x{tokens_n}"
        result = run_case(name, lambda: (lambda: llama_step(model, tokens)), lambda: check_llama(model, tokens),
                          reps, 3, routed)
        rows += result.values()
        del model
        torch.cuda.empty_cache()
    for dtype in (torch.bfloat16, torch.float32) if "vit" in cases else ():
        model = Vit().to("cuda", dtype)
        n = 8 if args.quick else 64
        images = torch.randn(n, 3, 224, 224, device="cuda", dtype=dtype)
        labels = torch.randint(0, 1000, (n,), device="cuda")
        name = f"vit {str(dtype).removeprefix('torch.')} {n}x197"
        result = run_case(name, lambda: (lambda: vit_step(model, images, labels)),
                          lambda: check_vit(model, images, labels), reps, 3, routed)
        rows += result.values()
        del model
        torch.cuda.empty_cache()
    for dtype in (torch.bfloat16, torch.float32) if "llama" in cases else ():
        model = Decoder(tokens=tokens_per_row).to("cuda", dtype)
        tokens = torch.randint(0, 8192, (batch, tokens_per_row + 1), device="cuda")
        name = f"llama {str(dtype).removeprefix('torch.')} {batch}x{tokens_per_row}"
        result = run_case(name, lambda: (lambda: llama_step(model, tokens)), lambda: check_llama(model, tokens),
                          reps, 5, routed)
        rows += result.values()
        del model
    for dtype, shape in ((torch.bfloat16, (64, 512, 768)), (torch.float32, (64, 512, 768))) if "pooling" in cases else ():
        x = torch.randn(shape, device="cuda", dtype=dtype)
        mask = torch.rand(shape[:2], device="cuda") < 0.8

        def check(x=x, mask=mask):
            expected = pooling_step(x, mask)
            for mode in ("dispatcher", "python"):
                with MODES[mode]():
                    got = pooling_step(x, mask)
                torch.testing.assert_close(got, expected, rtol=1e-2 if dtype == torch.bfloat16 else 1e-5, atol=1e-3)

        name = f"pooling {str(dtype).removeprefix('torch.')} {'x'.join(map(str, shape))}"
        result = run_case(name, lambda x=x, mask=mask: (lambda: pooling_step(x, mask)), check, reps, 20, routed)
        rows += result.values()

    args.out.mkdir(parents=True, exist_ok=True)
    env = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "cuda": torch.version.cuda}
    report.write_summary(args.out / "models.json", {"environment": env, "rows": rows, "calls": routed})
    lines = [f"# override() on whole eager steps ({env['gpu']}, torch {env['torch']})", "",
             "| case | torch ms | dispatcher ms | python ms | torch / dispatcher | torch / python | peak MiB torch / dispatcher |",
             "|---|---|---|---|---|---|---|"]
    by_case = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["mode"]] = r
    for case, m in by_case.items():
        cell = lambda r: f"{r['median']:.3f} ({r['p10']:.3f}-{r['p90']:.3f})"  # noqa: E731
        lines.append(f"| {case} | {cell(m['torch'])} | {cell(m['dispatcher'])} | {cell(m['python'])} | "
                     f"{m['torch']['median'] / m['dispatcher']['median']:.3f} | "
                     f"{m['torch']['median'] / m['python']['median']:.3f} | "
                     f"{m['torch']['peak_mib']:.0f} / {m['dispatcher']['peak_mib']:.0f} |")
    lines += ["", "Calls in three warm-up steps, by mode:", ""]
    lines += [f"- {k}: routed {v['routed']}, fallback {v['fallback']}" for k, v in routed.items()]
    (args.out / "models.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
