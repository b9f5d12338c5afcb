"""Sums across processes, and torch_reduce's ops on DTensors.

:func:`sum` is an all-reduce of sums: every rank passes its shard and gets the sum over all shards,
through torch.distributed's own collectives (NCCL on CUDA, gloo on the CPU). With
``variant="exact"`` the ranks exchange exact states (csrc/core/exact.h: integer words that add without
rounding), so the result is correctly rounded and the same bits for any number of ranks, any
sharding and any device: the single-device exact sum of the whole tensor.

DTensor: the ops' sharding is registered with DTensor, so ``torch_reduce.sum`` of a DTensor works
under every placement. A sum over a sharded dim is a partial sum that DTensor adds across ranks in
the result's dtype; with ``variant="exact"`` it is the exact state that DTensor adds (in int64), so
the guarantee above holds for DTensors too.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from . import ops

__all__ = ["sum"]


def _exact_applies(x: torch.Tensor, dtype: torch.dtype | None) -> bool:
    return x.dtype.is_floating_point and (dtype or x.dtype).is_floating_point


def sum(x: torch.Tensor, dim: ops.Dims = None, keepdim: bool = False, *, dtype: torch.dtype | None = None,
        group: dist.ProcessGroup | None = None, variant: str = "auto") -> torch.Tensor:
    """The sum over every rank of ``group`` of ``torch_reduce.sum(x, dim, keepdim, dtype=dtype)``,
    returned on every rank (all-reduce semantics). Every rank passes a tensor whose result has the
    same shape (its shard; the reduced dims may differ in size).

    ``variant="exact"``: each rank's exact state, added across ranks by one int64 all-reduce and
    rounded once: bitwise the single-device exact sum of all shards, for any world size and any
    split. Integer sums are exact for any variant. Other variants: each rank's sum by that variant,
    then one all-reduce of the results in their dtype (the collective's order of additions).
    Not differentiable.
    """
    if variant == "exact" and _exact_applies(x, dtype):
        state = torch.ops.treduce._exact_state(x, ops._dim_list(dim), keepdim, dtype=dtype)
        dist.all_reduce(state, op=dist.ReduceOp.SUM, group=group)
        return torch.ops.treduce._exact_round(state, dtype or x.dtype)
    local = ops.sum(x, dim, keepdim, dtype=dtype, variant="auto" if variant == "exact" else variant)
    dist.all_reduce(local, op=dist.ReduceOp.SUM, group=group)
    return local


# DTensor ---------------------------------------------------------------------------------------

def _reduced(ndim: int, dim) -> set[int]:
    if not dim:
        return set(range(ndim))
    return {d % max(ndim, 1) for d in dim} if ndim else set()


def _out_dim(d: int, reduced: set[int], keepdim: bool) -> int:
    return d if keepdim else d - len([r for r in reduced if r < d])


def _sum_shardings(ndim: int, dim, keepdim: bool, partial_ok: bool, extra_inputs: int, extra_out_dims: int = 0):
    """(output placements, input placements) pairs for one mesh dim of a sum over `dim`: replicated;
    sharded on a kept dim (the result sharded on its dim); sharded on a reduced dim (a partial
    sum) when `partial_ok`."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    reduced = _reduced(ndim, dim)
    none = [None] * extra_inputs
    out = [([Replicate()], [Replicate()] + none)]
    for d in range(ndim):
        if d not in reduced:
            out.append(([Shard(_out_dim(d, reduced, keepdim))], [Shard(d)] + none))
        elif partial_ok:
            out.append(([Partial("sum")], [Shard(d)] + none))
    return out


def _register_dtensor_shardings() -> None:
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.experimental import register_sharding

    @register_sharding(torch.ops.treduce.sum.default)
    def _sum(x, variant="auto", dim=None, keepdim=False, *, dtype=None):
        # An exact sum is not a sum of rounded partial sums: its reduced dims are gathered
        # (torch_reduce.sum of a DTensor takes the exact state's way instead, below).
        return _sum_shardings(x.ndim, dim, keepdim, variant != "exact", extra_inputs=4)

    @register_sharding(torch.ops.treduce._exact_state.default)
    def _state(x, dim=None, keepdim=False, *, dtype=None):
        # Partial states add exactly (int64 words): DTensor's all-reduce of a Partial("sum").
        return _sum_shardings(x.ndim, dim, keepdim, True, extra_inputs=2)

    @register_sharding(torch.ops.treduce._exact_round.default)
    def _round(state, dtype):
        out = [([Replicate()], [Replicate(), None])]
        out += [([Shard(d)], [Shard(d), None]) for d in range(state.ndim - 1)]
        return out


def _is_dtensor(x) -> bool:
    if not _DTENSOR_READY:
        return False
    from torch.distributed.tensor import DTensor

    return isinstance(x, DTensor)


def _exact_sum_of_dtensor(x, dim, keepdim, dtype):
    """torch_reduce.sum(x, ..., variant="exact") of a DTensor: the exact state, its partials
    added by DTensor in int64, rounded once."""
    state = torch.ops.treduce._exact_state(x, ops._dim_list(dim), keepdim, dtype=dtype)
    return torch.ops.treduce._exact_round(state, dtype or x.dtype)


_DTENSOR_READY = False
if dist.is_available():
    try:
        _register_dtensor_shardings()
        _DTENSOR_READY = True
    except ImportError:  # a torch without DTensor's experimental API
        pass
