"""Every CUDA path of the normalizing ops once, for compute-sanitizer (scripts/gpu_check.sh runs
scripts/sanitize_cases.py for the reductions):

    compute-sanitizer --tool memcheck python scripts/sanitize_normalizing.py

softmax family: rows in registers (packs and elements), rows on chip (clusters of 1 to 8
blocks), block rows (cached, not cached, elements), columns (short and long); cross_entropy: rows (packs and elements), columns, the reduction, backwards;
layer_norm and rms_norm: teams of 4 to 1024 threads (packs and elements, several teams a block),
more rows than the backward's blocks, a block a row, with and without weight and bias, masks."""
import torch, torch.nn.functional as F, torch_reduce
torch.manual_seed(3)
def close(a, b, tol=2e-2):
    torch.testing.assert_close(a.float(), b.float(), rtol=tol, atol=tol, equal_nan=True)
cases = [((37, 128), torch.float32, -1), ((9, 1024), torch.bfloat16, -1), ((50, 40), torch.float16, 1),
         ((7, 33), torch.float32, 1), ((5, 999), torch.float32, -1), ((3, 32000), torch.float32, -1),
         ((4, 2000), torch.bfloat16, -1), ((3, 4099), torch.float32, -1), ((70, 3, 50), torch.float32, 0),
         ((2, 300, 17), torch.bfloat16, 1), ((3, 20000), torch.float64, -1), ((6, 100), torch.float64, 1),
         ((2, 131072), torch.float32, -1), ((3, 100008), torch.bfloat16, -1), ((2, 131080), torch.float32, -1),
         ((1500, 9), torch.float32, 0)]
for shape, dtype, dim in cases:
    x = torch.randn(shape, device="cuda").to(dtype)
    for name in ("softmax", "log_softmax"):
        y = getattr(torch_reduce, name)(x, dim); close(y, getattr(torch, name)(x, dim))
        g = torch.randn_like(y)
        close(getattr(torch_reduce, name + "_backward")(g, y, dim, dtype),
              (torch.ops.aten._softmax_backward_data if name == "softmax" else torch.ops.aten._log_softmax_backward_data)(g, y, dim, dtype))
    if dtype != torch.float32 and dtype != torch.float64:
        close(torch_reduce.softmax(x, dim, dtype=torch.float32), torch.softmax(x, dim, dtype=torch.float32))
for shape, dtype in [((16, 1000), torch.float32), ((5, 32001), torch.bfloat16), ((4, 32000), torch.bfloat16),
                     ((3, 7, 9, 9), torch.float32), ((10,), torch.float16), ((6, 50), torch.float64)]:
    x = torch.randn(shape, device="cuda").to(dtype)
    C = shape[0] if len(shape) == 1 else shape[1]
    t = torch.randint(0, C, () if len(shape) == 1 else (shape[0],) + shape[2:], device="cuda")
    if t.dim(): t.view(-1)[::3] = -100
    w = (torch.rand(C, device="cuda") + 0.5).to(dtype)
    for red in ("none", "mean", "sum"):
        for kw in (dict(), dict(weight=w, label_smoothing=0.1)):
            a = x.clone().requires_grad_(); b = x.double().clone().requires_grad_()
            la = torch_reduce.cross_entropy(a, t, reduction=red, **kw)
            lb = F.cross_entropy(b, t, reduction=red, **{k: (v.double() if torch.is_tensor(v) else v) for k, v in kw.items()})
            close(la, lb); la.sum().backward(); lb.sum().backward(); close(a.grad, b.grad)
for shape, dtype in [((7, 8), torch.bfloat16), ((9, 64), torch.float16), ((5, 200), torch.bfloat16),
                     ((3, 768), torch.bfloat16), ((2, 2048), torch.float32), ((3, 4096), torch.float32),
                     ((2, 8192), torch.bfloat16), ((4, 100), torch.float32), ((3, 1000), torch.float32),
                     ((2, 3000), torch.float32), ((2, 4097), torch.float32), ((2, 5000), torch.float64),
                     ((3000, 256), torch.bfloat16), ((700, 33), torch.float32), ((2, 16384), torch.bfloat16)]:
    ns = shape[-1:]
    x = torch.randn(shape, device="cuda").to(dtype)
    w = (torch.rand(ns, device="cuda") + 0.5).to(dtype); bias = torch.randn(ns, device="cuda").to(dtype)
    g = torch.randn(shape, device="cuda").to(dtype)
    for ww, bb in ((w, bias), (None, None)):
        leaves = [x.clone().requires_grad_()] + [t.clone().requires_grad_() for t in (ww, bb) if t is not None]
        refs = [t.detach().double().requires_grad_() for t in leaves]
        args = lambda L: (L[0], ns, *(L[1:] if ww is not None else (None, None)))
        ya = torch_reduce.layer_norm(*args(leaves)); yb = F.layer_norm(*args(refs)); close(ya, yb)
        ya.backward(g); yb.backward(g.double())
        for p, q in zip(leaves, refs): close(p.grad, q.grad, 5e-2 * (1 + q.grad.abs().max().item()))
        ra = torch_reduce.rms_norm(x, ns, ww); close(ra, F.rms_norm(x.double(), ns, None if ww is None else ww.double()))
    _, mean, rstd = torch_reduce.layer_norm_forward(x, ns, w, bias)
    for mask in ([True, False, False], [False, True, True]):
        torch_reduce.layer_norm_backward(g, x, ns, mean, rstd, w, bias, mask)
    xo = torch.randn(x.numel() + 1, device="cuda").to(dtype)[1:].view(shape)  # off 16 bytes: elements
    close(torch_reduce.rms_norm(xo, ns, w), F.rms_norm(xo.double(), ns, w.double()))
torch.cuda.synchronize(); print("sanitize_normalizing: every path ran")
