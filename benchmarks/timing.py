"""How the benchmark times one candidate: CUDA-graph replay (hot), after an L2 flush (cold),
a plain Python loop (eager), or wall clock on the CPU. Every timer returns microseconds per call,
one sample per repetition."""

from __future__ import annotations

import time

import torch

# A graph or eager loop holds enough calls to run about this long, so launch gaps and event
# resolution stay small against it.
TARGET_US = 1000.0
MAX_CALLS = 200


def _events():
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def _one_call_us(fn) -> float:
    start, end = _events()
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0


def _calls_for(fn) -> int:
    return max(1, min(MAX_CALLS, int(TARGET_US / max(_one_call_us(fn), 1e-3))))


# A hot graph's length comes from the time per call in a short graph of PROBE_CALLS calls. Taken
# from one eager call (mostly launch latency, which varies) it could differ between runs of the
# same code, and with it the share of each replay's own start-up in the time per call.
PROBE_CALLS = 8


def _graph_of(fn, calls: int) -> torch.cuda.CUDAGraph:
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    return graph


def _replay_us(graph: torch.cuda.CUDAGraph) -> float:
    start, end = _events()
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0


def time_hot(fn, reps: int) -> list[float]:
    """Replays of one CUDA graph holding many calls: no launch gaps, and inputs that fit stay
    in L2 (a 60 MB L2 keeps inputs under about 30 MB)."""
    fn()
    per_call = _replay_us(_graph_of(fn, PROBE_CALLS)) / PROBE_CALLS
    calls = max(1, min(MAX_CALLS, int(TARGET_US / max(per_call, 1e-3))))
    graph = _graph_of(fn, calls)
    return [_replay_us(graph) / calls for _ in range(reps)]


class L2Flush:
    """Reads a buffer twice the size of L2 before each timed call, so no line of the input is
    cached and none is dirty (a write-based flush would leave lines to be written back while
    the call runs)."""

    def __init__(self, device: str = "cuda"):
        props = torch.cuda.get_device_properties(device)
        l2 = getattr(props, "L2_cache_size", 0) or (64 << 20)
        self.buffer = torch.ones(2 * l2 // 4, device=device)

    def __call__(self) -> None:
        self.buffer.amax()


def _sleep_cycles_per_us() -> float:
    """How many cycles of torch.cuda._sleep take a microsecond on this device."""
    global _CYCLES_PER_US
    if _CYCLES_PER_US is None:
        cycles = 1 << 20
        torch.cuda._sleep(cycles)  # warm
        start, end = _events()
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        _CYCLES_PER_US = cycles / (start.elapsed_time(end) * 1000.0)
    return _CYCLES_PER_US


_CYCLES_PER_US = None


def time_cold(fn, reps: int, flush: L2Flush) -> list[float]:
    """CUDA events around one call, each after a flush: the input comes from DRAM. The device
    spins (torch.cuda._sleep, no memory traffic) after the flush for longer than the host takes
    to issue the call, so the start event runs when the call's kernels are already queued: the
    sample is the device's time, as hot's is. Without it a call whose host side outlasts the
    flush (a torch.compile'd function's guards and wrapper: 75-125 us a call, against a 33 us
    flush on an H100) was charged the idle gap too. The spin has a millisecond to spare: with
    50 us, two runs of the dims suite on the H100 each had one case whose samples jumped for a
    dozen calls in a row (27 -> 270-400 us; 670 -> 740-850), most likely host stalls longer
    than the spin, the device idling until the call arrived; the next two runs had none."""
    fn()
    t0 = time.perf_counter()
    fn()
    host_us = (time.perf_counter() - t0) * 1e6
    torch.cuda.synchronize()
    sleep = int((2 * host_us + 1000) * _sleep_cycles_per_us())
    start, end = _events()
    samples = []
    for _ in range(reps):
        flush()
        torch.cuda._sleep(sleep)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0)
    return samples


def time_eager(fn, reps: int) -> list[float]:
    """A plain Python loop of calls between two events: what a user's code sees, dispatch and
    launch overhead included."""
    fn()
    calls = _calls_for(fn)
    start, end = _events()
    samples = []
    for _ in range(reps):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0 / calls)
    return samples


def time_wall(fn, reps: int) -> list[float]:
    """CPU: wall clock around each call."""
    fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return samples


def time_eager_wall(fn, reps: int) -> list[float]:
    """CPU: wall clock around a plain Python loop of calls, the eager timer's CPU counterpart."""
    fn()
    t0 = time.perf_counter()
    fn()
    calls = max(1, min(MAX_CALLS, int(TARGET_US / max((time.perf_counter() - t0) * 1e6, 1e-3))))
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) * 1e6 / calls)
    return samples


def time_mode(mode: str, fn, reps: int, flush: L2Flush | None = None) -> list[float]:
    """The timer a mode names: hot, cold (needs `flush`), eager (CUDA) or wall (CPU)."""
    if mode == "hot":
        return time_hot(fn, reps)
    if mode == "cold":
        return time_cold(fn, reps, flush)
    if mode == "eager":
        return time_eager(fn, reps)
    if mode == "wall":
        return time_wall(fn, reps)
    raise ValueError(f"unknown mode {mode!r}")


def compile_once(call):
    """torch.compile of `call` for one case (it compiles at the first call). Dynamo's caches are
    emptied first: every case's `call` comes from one lambda, so shares one code object, and past 8
    recompiles of one code object dynamo silently runs it eagerly. Static shapes; fullgraph, so a
    graph break raises instead of running part of the call eagerly."""
    torch._dynamo.reset()
    return torch.compile(call, dynamic=False, fullgraph=True)


def quantiles(samples: list[float]) -> tuple[float, float, float]:
    """Median, 10th and 90th percentile (nearest rank)."""
    s = sorted(samples)
    pick = lambda q: s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]  # noqa: E731
    mid = len(s) // 2
    median = s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
    return median, pick(0.1), pick(0.9)
