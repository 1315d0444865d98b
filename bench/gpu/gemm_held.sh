#!/bin/bash
# One prepared run on the lent H200 (../shared/device/README.md): the compute
# profile's GEMM, grouped-GEMM and copy points (data/compute/h200.json)
# re-timed as kernels, each call behind a spin kernel (gemm_probe.py).
# Everything goes to $OUT (default bench/results/h200-gemm-held-<date>).
#   bench/gpu/gemm_held.sh            # from the repository root
# Budget: about 2 minutes.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-bench/results/h200-gemm-held-$(date -u +%Y-%m-%d)}
. "$here/common.sh"
echo "== $(date -u) $(hostname) $(git rev-parse --short HEAD 2>/dev/null)" | tee -a "$out/commands.txt"
run nvidia-smi nvidia-smi
export PYTHONUNBUFFERED=1
run gemm_probe python3 "$here/gemm_probe.py" --profile data/compute/h200.json --out "$out/gemm-h200.json"
echo "== done $(date -u)" | tee -a "$out/commands.txt"
