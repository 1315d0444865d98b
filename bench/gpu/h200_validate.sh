#!/bin/bash
# One prepared run of foldbench's GPU checks on the lent H200 (see
# ../shared/device/README.md): build with CUDA and NCCL, run the validate
# tests (nccl_ok among them), run foldbench's NCCL backend with 4 and 8
# ranks on the one GPU (NCCL_HOSTID emulation, set by the backend), time the
# Ulysses pack / unpack kernels against a device copy, and leave every
# output under $OUT (default bench/results/h200-<date>) with the commands.
#   bench/gpu/h200_validate.sh            # from the repository root
# Budget: about 5 minutes on 16 cores, most of it the build.
set -u
out=${OUT:-bench/results/h200-$(date -u +%Y-%m-%d)}
build=${BUILD:-build-gpu}
log() { echo "== $*" | tee -a "$out/commands.txt"; }
. "$(dirname "$0")/common.sh"

log "$(date -u) $(hostname) $(git rev-parse --short HEAD)"
run nvidia-smi nvidia-smi
run configure cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
run build cmake --build $build -j 16
run ctest bash -c "cd $build && ctest -R 'validate|cli_validate' --output-on-failure"

# Plans: the CI's 8-rank ones, and a 4-rank one (PP1, CP2, EP4 x ETP1 / DP2).
cp tests/data/validate/pp2_cp2_ep4.plan.json tests/data/validate/tp2_cp2_ep2_etp2.plan.json "$out/"
run plan4 $build/foldplan explain --cluster h200-dgx-1n --gpus 4 --model mixtral-8x7b \
  --layout tp=1,cp=2,pp=1,ep=4,etp=1 --global-batch 64 --allow-oom -o "$out/cp2_ep4_4ranks.plan.json"

for plan in cp2_ep4_4ranks:4 pp2_cp2_ep4:8 tp2_cp2_ep2_etp2:8; do
  name=${plan%%:*} np=${plan##*:}
  run "nccl_${name}" $mpi -np "$np" $build/foldbench --plan "$out/$name.plan.json" \
    --backend nccl --ops ulysses,dispatch,sweep,compute --sweep-max-bytes 16777216 \
    --timeout 120 -o "$out/nccl_${name}.measurements.json"
done
run nccl_gemm $mpi -np 8 $build/foldbench --plan "$out/tp2_cp2_ep2_etp2.plan.json" \
  --backend nccl --ops dispatch --expert gemm --timeout 120 \
  -o "$out/nccl_gemm.measurements.json"
run nccl_corrupt $mpi -np 8 $build/foldbench --plan "$out/pp2_cp2_ep4.plan.json" \
  --backend nccl --ops ulysses,dispatch --corrupt-rank 3 --timeout 120
run nccl_hang $mpi -np 8 $build/foldbench --plan "$out/pp2_cp2_ep4.plan.json" \
  --backend nccl --ops ulysses --hang-rank 2 --timeout 5
# The pack / unpack kernels alone on rank 0 against a copy of the same
# tensor (the >= 80 % target), at full sequence lengths; this
# needs no Google Benchmark, which the GPU machine may lack.
run plan_long $build/foldplan explain --cluster h200-dgx-1n --gpus 8 --model mixtral-8x7b \
  --layout tp=1,cp=2,pp=2,ep=4,etp=1 --seq 65536 --global-batch 64 --allow-oom -o "$out/long.plan.json"
for seq in 8192 65536; do
  run "nccl_pack_seq$seq" $mpi -np 8 $build/foldbench --plan "$out/long.plan.json" \
    --backend nccl --ops pack --max-seq $seq --iters 20 --timeout 120 \
    -o "$out/nccl_pack_seq$seq.measurements.json"
done
run pack_gpu_bench $build/validate_pack_gpu_bench --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true
log "done $(date -u)"
