"""Timing a GPU call as kernels: the call sits behind a spin kernel, so the
CUDA events around it time what the GPU runs, not the host issuing it (the
host is its own term in the cost model). Shared by the probes here."""
import statistics

import torch

REPS = 15
WARMUP = 3


def hold_gpu(ms):
    # Keeps the GPU busy while the host issues the timed call: _sleep spins
    # for SM cycles (~2 GHz on the H200).
    torch.cuda._sleep(int(ms * 2e6))


def kernel_seconds(fn, hold_ms=1.0):
    """Median seconds of REPS calls of fn after WARMUP, each behind a
    hold_ms spin kernel."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPS):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        hold_gpu(hold_ms)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(times)
