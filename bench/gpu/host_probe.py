#!/usr/bin/env python3
"""What the host costs a PyTorch training step, and which attention kernel runs how fast.

Measured on one GPU with PyTorch alone (bench/gpu/host_attention.sh runs it):

host   the CPU time of one eager op issued from Python (a small elementwise op,
       a small linear, a module call), of one autograd node in backward, of one
       CUDA-graph replay, and the GPU time each kernel occupies (eager and in a
       graph); the round trip of a device-to-host read (.item()) and the GPU
       time it leaves idle at the end of a queue of work.
attention
       causal (and some non-causal) scaled-dot-product attention through torch
       SDPA's flash backend (FlashAttention-2) and its cuDNN backend (what
       Transformer Engine's fused attention runs), forward and forward +
       backward, at the sizes of data/compute/h200.json's table plus the short
       blocks ring attention runs (512, 1024 tokens).

Writes JSON files into the folder given (--out), one per part, rewritten after
every measurement so that a run cut short keeps what it measured. FLOPs are
counted as data/compute/h200.json counts them: causal forward 2 heads S^2 d,
non-causal 4 heads S^2 d, forward + backward 3.5 x forward.
"""
import argparse
import json
import math
import os
import platform
import statistics
import time
import traceback

import torch
import torch.nn.functional as F

FWD_BWD_RATIO = 3.5


def now():
    return time.perf_counter()


def write(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def environment():
    props = torch.cuda.get_device_properties(0)
    return {
        "gpu": props.name,
        "sms": props.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }


def gpu_seconds(body):
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    a.record()
    body()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e-3


def hold_gpu(ms=20):
    # A spin kernel that keeps the GPU busy while the host enqueues, so that
    # GPU times are of a full queue. _sleep counts SM cycles (~2 GHz).
    torch.cuda._sleep(int(ms * 2e6))


def median(xs):
    return statistics.median(xs)


# ---------------------------------------------------------------- host ----

def eager_cost(op, n=20000, reps=7):
    """Host microseconds to issue one call of `op`, the wall per call when
    the host and the GPU run together, and the GPU microseconds per call
    with the queue full."""
    for _ in range(200):
        op()
    torch.cuda.synchronize()
    host, wall, gpu = [], [], []
    for _ in range(reps):
        t0 = now()
        for _ in range(n):
            op()
        t1 = now()
        torch.cuda.synchronize()
        t2 = now()
        host.append((t1 - t0) / n * 1e6)
        wall.append((t2 - t0) / n * 1e6)
    for _ in range(reps):
        k = 500
        hold_gpu()
        gpu.append(gpu_seconds(lambda: [op() for _ in range(k)]) / k * 1e6)
    return {"host_us": median(host), "wall_us": median(wall), "gpu_us": median(gpu)}


def kernels_of(fn):
    """CUDA kernels launched by fn(), counted with torch.profiler."""
    try:
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    except Exception as e:  # the count is informative only
        return "unavailable: %s" % e


def autograd_cost(nodes=200, reps=7):
    """A chain of `nodes` small autograd ops (y = y * w_i): host microseconds
    per node in forward and in backward, with tiny tensors so that the GPU
    work is negligible, and the kernels each direction launches."""
    ws = [torch.randn(256, device="cuda", requires_grad=True) for _ in range(nodes)]
    x = torch.randn(256, device="cuda", requires_grad=True)

    def forward():
        y = x
        for w in ws:
            y = y * w
        return y.sum()

    for _ in range(3):
        forward().backward()
    torch.cuda.synchronize()
    fwd_host, fwd_wall, bwd_wall = [], [], []
    for _ in range(reps):
        t0 = now()
        loss = forward()
        t1 = now()
        torch.cuda.synchronize()
        t2 = now()
        loss.backward()
        torch.cuda.synchronize()
        t3 = now()
        fwd_host.append((t1 - t0) / nodes * 1e6)
        fwd_wall.append((t2 - t0) / nodes * 1e6)
        bwd_wall.append((t3 - t2) / nodes * 1e6)
    loss = forward()
    torch.cuda.synchronize()
    fwd_kernels = kernels_of(forward)
    bwd_kernels = kernels_of(lambda: forward().backward())
    return {
        "nodes": nodes,
        "forward_host_us_per_node": median(fwd_host),
        "forward_wall_us_per_node": median(fwd_wall),
        "backward_wall_us_per_node": median(bwd_wall),
        "forward_kernels": fwd_kernels,
        "forward_and_backward_kernels": bwd_kernels,
    }


def graph_cost(nodes=100, reps=7):
    """The same small op captured `nodes` times in one CUDA graph: host
    microseconds per replay, GPU microseconds per captured kernel."""
    x = torch.zeros(1024, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            x.add_(1.0)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(nodes):
            x.add_(1.0)
    for _ in range(20):
        g.replay()
    torch.cuda.synchronize()
    host, gpu = [], []
    for _ in range(reps):
        k = 200
        hold_gpu()
        box = {}

        def body():
            t0 = now()
            for _ in range(k):
                g.replay()
            box["host"] = now() - t0

        gpu.append(gpu_seconds(body) / (k * nodes) * 1e6)
        host.append(box["host"] / k * 1e6)
    return {"nodes": nodes, "replay_host_us": median(host), "node_gpu_us": median(gpu)}


def sync_cost(reps=7):
    """.item() of a one-element tensor: its round trip on an idle GPU, and
    the GPU time a read at the end of ~200 us of queued work leaves idle
    (wall per [work; .item()] iteration less the work alone)."""
    t = torch.zeros(1, device="cuda")
    for _ in range(50):
        t.item()
    trips = []
    for _ in range(300):
        t0 = now()
        t.item()
        trips.append((now() - t0) * 1e6)
    cycles = int(200e-6 * 2e9)
    alone, synced = [], []
    for _ in range(reps):
        k = 100
        alone.append(gpu_seconds(lambda: [torch.cuda._sleep(cycles) for _ in range(k)]) / k * 1e6)
        torch.cuda.synchronize()
        t0 = now()
        for _ in range(k):
            torch.cuda._sleep(cycles)
            t.item()
        synced.append((now() - t0) / k * 1e6)
    a, s = median(alone), median(synced)
    return {"item_roundtrip_idle_us": median(trips[20:]), "work_gpu_us": a, "work_then_item_wall_us": s,
            "item_exposed_us": s - a}


def collective_cost(reps=7):
    """Host microseconds of one torch.distributed call on a one-rank NCCL
    group (all-reduce of 1 KiB; all-to-all-v with split sizes, as Megatron's
    alltoall dispatcher calls it): the host side of a collective launch."""
    import torch.distributed as dist
    if not dist.is_initialized():
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29517", rank=0, world_size=1)
    x = torch.zeros(256, device="cuda")
    y = torch.zeros(256, device="cuda")
    return {
        "all_reduce": eager_cost(lambda: dist.all_reduce(x), n=5000, reps=reps),
        "all_to_all_single_splits": eager_cost(
            lambda: dist.all_to_all_single(y, x, output_split_sizes=[256], input_split_sizes=[256]),
            n=5000, reps=reps),
    }


def host_part(out):
    result = {"environment": environment(),
              "method": "medians of 7 repetitions; host times from time.perf_counter around the issuing loop, "
                        "GPU times from CUDA events with the queue held full by a spin kernel first"}
    path = os.path.join(out, "host-probe-torch.json")
    x = torch.zeros(1024, device="cuda")
    a = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    lin = torch.nn.Linear(64, 64, device="cuda", dtype=torch.bfloat16)
    probes = [
        ("eager_add", lambda: x.add_(1.0)),
        ("eager_linear", lambda: F.linear(a, w)),
        ("eager_module_linear", lambda: lin(a)),
    ]
    for name, op in probes:
        try:
            result[name] = eager_cost(op)
        except Exception:
            result[name] = {"error": traceback.format_exc()}
        write(path, result)
    for name, fn in (("autograd_chain", autograd_cost), ("graph_add", graph_cost), ("sync_item", sync_cost),
                     ("collective_one_rank", collective_cost)):
        try:
            with torch.no_grad() if name != "autograd_chain" else torch.enable_grad():
                result[name] = fn()
        except Exception:
            result[name] = {"error": traceback.format_exc()}
        write(path, result)
    return result


# ----------------------------------------------------------- attention ----

# data/compute/h200.json's table: (heads, kv_heads, S) at head dim 128, causal.
TABLE = [(h, h, s) for h in (8, 16, 32, 64) for s in (2048, 4096, 8192, 16384, 32768, 65536)]
TABLE += [(128, 128, s) for s in (2048, 4096, 8192, 16384, 32768)]
TABLE += [(h, 8, s) for h in (8, 16, 32, 64) for s in (2048, 4096, 8192, 16384, 32768, 65536)]
TABLE += [(128, 8, s) for s in (2048, 4096, 8192, 16384, 32768)]
# Short blocks (ring attention's S/cp): 512 and 1024 tokens.
SHORT = [(h, kv, s) for (h, kv) in ((8, 8), (32, 8), (64, 8), (128, 8), (32, 32), (128, 128)) for s in (512, 1024)]
# Non-causal kernels (ring attention's off-diagonal steps), square blocks.
NONCAUSAL = [(h, kv, s) for (h, kv) in ((32, 8), (64, 8), (128, 8)) for s in (512, 1024, 2048, 4096, 8192, 16384)]
# MLA's head dims (DeepSeek-V3: q/k 192, v 128), causal.
MLA = [(h, h, s) for h in (16, 32, 64, 128) for s in (1024, 4096, 16384)]


def attention_flops(heads, s, d_qk, d_v, causal):
    full = 2.0 * heads * s * s * (d_qk + d_v)  # QK^T + PV, 2 FLOPs per MAC
    return full / 2 if causal else full


# --hold-gpu: each timed attention call starts behind a 20 ms spin kernel, so
# that the call's host time (Python, SDPA's dispatch, autograd) overlaps it
# and the events time the GPU work alone. Without it an event pair around a
# call on an idle GPU also times the host until the first kernel starts:
# 65-130 us forward on the H200, most of a short call
# (bench/results/h200-attention-held-2026-12-04).
HOLD_GPU = False


def timed(fn):
    if HOLD_GPU:
        hold_gpu(20)
    return gpu_seconds(fn)


def time_call(fn, budget_s=0.25, max_reps=10, min_reps=3):
    fn()  # warm-up (and the first call's setup)
    torch.cuda.synchronize()
    first = timed(fn)
    reps = max(min_reps, min(max_reps, int(budget_s / max(first, 1e-6))))
    return median([first] + [timed(fn) for _ in range(reps - 1)])


def attention_case(backend, heads, kv_heads, s, d_qk, d_v, causal):
    from torch.nn.attention import sdpa_kernel
    q = torch.randn(1, heads, s, d_qk, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, kv_heads, s, d_qk, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, kv_heads, s, d_v, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    gqa = "native"

    def call(kk, vv, **kw):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, kk, vv, is_causal=causal, **kw)

    kw = {"enable_gqa": True} if kv_heads != heads else {}
    kk, vv = k, v
    try:
        out = call(kk, vv, **kw)
    except Exception:
        if kv_heads == heads:
            raise
        # The backend refuses GQA: K and V expanded to every head outside the
        # timed calls (the kernel's work is the same).
        gqa = "expanded"
        kk = k.detach().repeat_interleave(heads // kv_heads, dim=1).requires_grad_()
        vv = v.detach().repeat_interleave(heads // kv_heads, dim=1).requires_grad_()
        kw = {}
        out = call(kk, vv)
    grad = torch.randn_like(out)

    def fwd():
        with torch.no_grad():
            call(kk, vv, **kw)

    def fwd_bwd():
        o = call(kk, vv, **kw)
        o.backward(grad)

    fwd_s = time_call(fwd)
    fwd_bwd_s = time_call(fwd_bwd)
    flops = attention_flops(heads, s, d_qk, d_v, causal)
    del q, k, v, kk, vv, out, grad
    return {
        "heads": heads, "kv_heads": kv_heads, "S": s, "d": d_qk, "d_v": d_v, "causal": causal, "gqa": gqa,
        "fwd_s": fwd_s, "fwd_tflops": flops / fwd_s / 1e12,
        "fwd_bwd_s": fwd_bwd_s, "fwd_bwd_tflops": FWD_BWD_RATIO * flops / fwd_bwd_s / 1e12,
    }


def attention_part(out, deadline):
    from torch.nn.attention import SDPBackend
    path = os.path.join(out, "attention-h200.json")
    method = ("median of 3-10 CUDA-event-timed calls after one warm-up (as many as fit 0.25 s); "
              "random normal bf16 inputs, batch 1, [B, H, S, D] layout; FLOPs: causal forward "
              "heads S^2 (d_qk + d_v), non-causal twice that, forward + backward 3.5 x forward")
    if HOLD_GPU:
        method += ("; each timed call after a 20 ms spin kernel (hold_gpu), so that the events time the GPU "
                   "work alone, not the host time of the call")
    result = {"environment": environment(),
              "method": method,
              "flash": [], "cudnn": [], "errors": []}
    backends = (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION))
    cases = [(h, kv, s, 128, 128, True) for (h, kv, s) in SHORT + TABLE]
    cases += [(h, kv, s, 128, 128, False) for (h, kv, s) in NONCAUSAL]
    cases += [(h, kv, s, 192, 128, True) for (h, kv, s) in MLA]
    for case in cases:
        for name, backend in backends:
            if now() > deadline:
                result["errors"].append("deadline reached before %s %s" % (name, case))
                write(path, result)
                return result
            try:
                result[name].append(attention_case(backend, *case))
            except Exception as e:
                result["errors"].append("%s %s: %s" % (name, case, str(e).splitlines()[0] if str(e) else repr(e)))
            torch.cuda.empty_cache()
            write(path, result)
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--parts", default="host,attention")
    p.add_argument("--attention-seconds", type=float, default=300,
                   help="stop starting attention cases after this many seconds")
    p.add_argument("--hold-gpu", action="store_true",
                   help="time each attention call behind a spin kernel: the GPU work alone (HOLD_GPU)")
    args = p.parse_args()
    global HOLD_GPU
    HOLD_GPU = args.hold_gpu
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    parts = args.parts.split(",")
    if "host" in parts:
        r = host_part(args.out)
        print(json.dumps({k: v for k, v in r.items() if k != "environment"}, indent=1))
    if "attention" in parts:
        r = attention_part(args.out, now() + args.attention_seconds)
        print("attention: %d flash, %d cudnn cases, %d errors" % (len(r["flash"]), len(r["cudnn"]), len(r["errors"])))
        for e in r["errors"][:20]:
            print("  ", e)


if __name__ == "__main__":
    main()
