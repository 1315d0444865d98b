#!/bin/bash
# One prepared run on the lent H200 (../shared/device/README.md) of what the
# host model and the attention backends read (doc/cost-model-host.md,
# doc/cost-model-compute.md): the CUDA runtime's launch, graph and sync
# costs (launch_probe.cu), PyTorch's eager-op, autograd, CUDA-graph and
# .item() costs and SDPA's flash and cuDNN attention (host_probe.py).
# Everything goes to $OUT (default bench/results/h200-host-attention-<date>)
# with the commands and versions.
#   bench/gpu/host_attention.sh            # from the repository root
# Budget: under 8 minutes (the attention cases stop starting after
# ATTENTION_SECONDS, default 300).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-bench/results/h200-host-attention-$(date -u +%Y-%m-%d)}
. "$here/common.sh"
echo "== $(date -u) $(hostname) $(git rev-parse --short HEAD 2>/dev/null)" | tee -a "$out/commands.txt"
run nvidia-smi nvidia-smi
run lscpu lscpu
run build_probe nvcc -O2 -arch=sm_90 "$here/launch_probe.cu" -o /tmp/launch_probe
run launch_probe /tmp/launch_probe
sed -n '/^{/,/^}/p' "$out/launch_probe.txt" >"$out/launch-probe-cuda.json"
export PYTHONUNBUFFERED=1
run host_probe python3 "$here/host_probe.py" --out "$out" --parts host
run attention_probe python3 "$here/host_probe.py" --out "$out" --parts attention --hold-gpu \
  --attention-seconds "${ATTENTION_SECONDS:-300}"
echo "== done $(date -u)" | tee -a "$out/commands.txt"
