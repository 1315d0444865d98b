#!/usr/bin/env python3
"""The compute profile's GEMM, grouped-GEMM and copy points, timed as kernels.

Re-times every point of a foldplan.compute-profile/v1 file (its shapes as
listed: gemm_bf16, gemm_fp8, grouped_gemm_bf16, permute_copy, the device
copy) with each timed call behind a spin kernel, so that the CUDA event pair
around it times the GPU's work alone: with the GPU idle, the first event
fires at once and the second only after the host has issued the call, so a
call of tens of microseconds is timed with its host overhead (the Python
call, the launch). A training step issues its kernels ahead of the GPU; the
host's cost is its own term (doc/cost-model-host.md).

Methods, as the profile's own notes state them: bf16 GEMM a @ b with a
[M, K], b [K, N]; fp8 torch._scaled_mm of e4m3 a [M, K] and b [K, N]
(column-major), unit scales, bf16 out; grouped torch._grouped_mm of
[experts x tokens_per_expert, K] with [experts, K, N] over equal groups;
permute_copy the Ulysses cp2hp change ([tokens, heads, d] viewed as
[tokens, C, heads / C, d], permuted to [C, tokens, heads / C, d] and made
contiguous); the device copy a 2 GiB copy_. Median of 15 calls after 3
warm-ups; random normal inputs.

Writes one JSON file (--out) with the same lists and fields as the input,
each point's time and rate replaced, and the previous time beside it
("s_unheld"), rewritten after every list so that a run cut short keeps what
it measured.
"""
import argparse
import json
import os
import time
import traceback

import torch

from held import REPS, WARMUP, kernel_seconds


def gemm_bf16(e):
    a = torch.randn(e["M"], e["K"], device="cuda", dtype=torch.bfloat16)
    b = torch.randn(e["K"], e["N"], device="cuda", dtype=torch.bfloat16)
    return lambda: a @ b, 2.0 * e["M"] * e["K"] * e["N"]


def gemm_fp8(e):
    a = torch.randn(e["M"], e["K"], device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(e["N"], e["K"], device="cuda").to(torch.float8_e4m3fn).t()  # [K, N], column-major
    one = torch.ones((), device="cuda")
    return (lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
            2.0 * e["M"] * e["K"] * e["N"])


def grouped_bf16(e):
    g, t = e["experts"], e["tokens_per_expert"]
    a = torch.randn(g * t, e["K"], device="cuda", dtype=torch.bfloat16)
    offs = torch.arange(t, g * t + 1, t, device="cuda", dtype=torch.int32)
    b = torch.randn(g, e["K"], e["N"], device="cuda", dtype=torch.bfloat16)
    try:
        torch._grouped_mm(a, b, offs=offs)
    except RuntimeError:
        # Some builds want each expert's [K, N] column-major.
        b = torch.randn(g, e["N"], e["K"], device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
    return lambda: torch._grouped_mm(a, b, offs=offs), 2.0 * g * t * e["K"] * e["N"]


def permute_copy(e):
    c, h, t, d = e["C"], e["heads"], e["tokens"], e["d"]
    x = torch.randn(t, h, d, device="cuda", dtype=torch.bfloat16)
    return lambda: x.view(t, c, h // c, d).permute(1, 0, 2, 3).contiguous(), float(e["bytes_moved"])


def measure_list(profile, key, make, rate_key, scale, out, path):
    for e in profile.get(key, []):
        f = dict(e)
        try:
            fn, work = make(e)
            s = kernel_seconds(fn)
            f["s_unheld"] = e["s"]
            f["s"] = s
            f[rate_key] = work / s / scale
        except Exception:
            f["error"] = traceback.format_exc().splitlines()[-1]
        out.setdefault(key, []).append(f)
        torch.cuda.empty_cache()
    with open(path + ".tmp", "w") as fh:
        json.dump(out, fh, indent=1)
    os.replace(path + ".tmp", path)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", required=True, help="the foldplan.compute-profile/v1 file whose points to re-time")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    with open(args.profile) as fh:
        profile = json.load(fh)
    props = torch.cuda.get_device_properties(0)
    out = {"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
           "date": time.strftime("%Y-%m-%d", time.gmtime()),
           "method": "median of %d CUDA-event-timed calls after %d warm-ups, each behind a 1 ms spin kernel so "
                     "that the events time the kernel alone; random normal inputs" % (REPS, WARMUP)}
    start = time.time()
    measure_list(profile, "gemm_bf16", gemm_bf16, "tflops", 1e12, out, args.out)
    measure_list(profile, "gemm_fp8", gemm_fp8, "tflops", 1e12, out, args.out)
    measure_list(profile, "grouped_gemm_bf16", grouped_bf16, "tflops", 1e12, out, args.out)
    measure_list(profile, "permute_copy", permute_copy, "gbps", 1e9, out, args.out)
    n = 2 << 30
    x = torch.empty(n // 2, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    s = kernel_seconds(lambda: y.copy_(x))
    out["d2d_copy_gbps"] = 2.0 * n / s / 1e9
    out["d2d_copy_gbps_unheld"] = profile.get("d2d_copy_gbps")
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)
    errors = sum(1 for k in ("gemm_bf16", "gemm_fp8", "grouped_gemm_bf16", "permute_copy")
                 for e in out.get(k, []) if "error" in e)
    print("measured in %.0f s, %d errors" % (time.time() - start, errors))
    for k in ("gemm_bf16", "gemm_fp8", "grouped_gemm_bf16"):
        pts = [e for e in out.get(k, []) if "error" not in e]
        if pts:
            ratios = sorted(e["s_unheld"] / e["s"] for e in pts)
            print("%s: %d points, unheld/held time ratio min %.2f median %.2f max %.2f" %
                  (k, len(pts), ratios[0], ratios[len(ratios) // 2], ratios[-1]))
    print("d2d %.1f GB/s (unheld %s)" % (out["d2d_copy_gbps"], out["d2d_copy_gbps_unheld"]))


if __name__ == "__main__":
    main()
