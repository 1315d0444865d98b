#!/usr/bin/env python3
"""Memory-bound kernels as a training layer runs them, timed as kernels.

The cost model times a layer's memory-bound passes (norms, activations,
residual adds, the router's scores, permutes, casts) as bytes read and
written at a bandwidth. This measures what one such kernel achieves on the
GPU by its size: a plain device copy, an elementwise add, RMSNorm over the
hidden dimension, the SwiGLU product (silu(a) * b, eagerly two kernels),
a softmax over expert scores in fp32, each at tensors of 64 Ki to 256 Mi
elements. Each timed call sits behind a spin kernel so that the CUDA
events time the kernels alone (the host is its own term). Median of 15
calls after 3 warm-ups; bf16 inputs but the softmax (fp32).

Writes one JSON file (--out): per op, its points {bytes_moved, kernels, s,
gbps}, bytes_moved counting every tensor each kernel reads and writes once.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

from held import REPS, WARMUP, kernel_seconds

HIDDEN = 4096


def ops(elements):
    """(name, make) where make() returns (fn, bytes_moved, kernels) for a
    tensor of `elements` bf16 elements ([elements / HIDDEN, HIDDEN])."""
    rows = max(1, elements // HIDDEN)

    def copy():
        x = torch.randn(rows, HIDDEN, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        return (lambda: y.copy_(x)), 2 * 2 * rows * HIDDEN, 1

    def add():
        x = torch.randn(rows, HIDDEN, device="cuda", dtype=torch.bfloat16)
        y = torch.randn_like(x)
        return (lambda: x + y), 3 * 2 * rows * HIDDEN, 1

    def rms_norm():
        x = torch.randn(rows, HIDDEN, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(HIDDEN, device="cuda", dtype=torch.bfloat16)
        return (lambda: F.rms_norm(x, (HIDDEN,), w)), 2 * 2 * rows * HIDDEN, 1

    def swiglu():
        a = torch.randn(rows, HIDDEN, device="cuda", dtype=torch.bfloat16)
        b = torch.randn_like(a)
        # silu: read a, write t; mul: read t and b, write out.
        return (lambda: F.silu(a) * b), 5 * 2 * rows * HIDDEN, 2

    def softmax_fp32():
        experts = 128
        r = max(1, elements // experts)
        x = torch.randn(r, experts, device="cuda", dtype=torch.float32)
        return (lambda: torch.softmax(x, dim=-1)), 2 * 4 * r * experts, 1

    return [("copy", copy), ("add", add), ("rms_norm", rms_norm), ("swiglu", swiglu), ("softmax_fp32", softmax_fp32)]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    args = p.parse_args()
    props = torch.cuda.get_device_properties(0)
    out = {"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
           "date": time.strftime("%Y-%m-%d", time.gmtime()),
           "method": "median of %d CUDA-event-timed calls after %d warm-ups, each behind a 1 ms spin kernel; "
                     "bytes_moved counts every tensor each kernel reads and writes once; [n / %d, %d] bf16 tensors "
                     "(softmax: [n / 128, 128] fp32)" % (REPS, WARMUP, HIDDEN, HIDDEN),
           "ops": {}}
    start = time.time()
    sizes = [1 << k for k in range(16, 29)]  # 64 Ki .. 256 Mi elements of the main tensor
    for name, _ in ops(1):
        out["ops"][name] = []
    for elements in sizes:
        for name, make in ops(elements):
            try:
                fn, moved, kernels = make()
                s = kernel_seconds(fn)
                out["ops"][name].append({"elements": elements, "bytes_moved": moved, "kernels": kernels, "s": s,
                                         "gbps": moved / s / 1e9})
            except Exception as e:
                out["ops"][name].append({"elements": elements, "error": str(e).splitlines()[0]})
            torch.cuda.empty_cache()
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1)
    print("measured in %.0f s" % (time.time() - start))
    for name, pts in out["ops"].items():
        print(name, " ".join("%.0fMB:%.0f" % (e["bytes_moved"] / 1e6, e["gbps"]) for e in pts if "gbps" in e))


if __name__ == "__main__":
    main()
