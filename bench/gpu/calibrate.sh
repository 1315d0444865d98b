#!/bin/bash
# One prepared run of the calibration's GPU check on the lent H200 (see
# ../shared/device/README.md); NOT YET RUN. Builds, runs foldbench's NCCL sweep at 4 and 8 ranks (on the
# one GPU, so NCCL's socket transport between ranks: these fits describe
# that emulated fabric, not NVLink) and the compute op on 1 rank (ranks
# sharing a GPU give contended GEMM times, which calibrate refuses), then
# calibrates with a 25% hold-out and compares. Everything goes to $OUT
# (default bench/results/h200-calibration-<date>) with the commands; the
# target is a held-out median error within 10%.
#   bench/gpu/calibrate.sh            # from the repository root
# Budget: about 6 minutes on 16 cores, most of it the build.
set -u
out=${OUT:-bench/results/h200-calibration-$(date -u +%Y-%m-%d)}
build=${BUILD:-build-gpu}
. "$(dirname "$0")/common.sh"
echo "== $(date -u) $(hostname) $(git rev-parse --short HEAD)" | tee -a "$out/commands.txt"
run nvidia-smi nvidia-smi
run configure cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DFOLDPLAN_BUILD_TESTS=OFF
run build cmake --build $build -j 16 --target foldplan foldbench

F=$build/foldplan
run plan1 $F explain --cluster h200-dgx-1n --gpus 1 --model mixtral-8x7b --layout tp=1,cp=1,pp=1,ep=1,etp=1 \
  --global-batch 8 --allow-oom -o "$out/w1.plan.json"
run plan4 $F explain --cluster h200-dgx-1n --gpus 4 --model mixtral-8x7b --layout tp=1,cp=2,pp=1,ep=4,etp=1 \
  --global-batch 64 --allow-oom -o "$out/w4.plan.json"
cp tests/data/validate/pp2_cp2_ep4.plan.json "$out/w8.plan.json"
for np in 4 8; do
  run "sweep_$np" $mpi -np $np $build/foldbench --plan "$out/w$np.plan.json" --backend nccl --ops sweep \
    --sweep-min-bytes 1024 --sweep-max-bytes 67108864 --sweep-step 2 --warmup 5 --iters 20 --timeout 300 \
    -o "$out/sweep_$np.measurements.json"
done
run compute_1 $mpi -np 1 $build/foldbench --plan "$out/w1.plan.json" --backend nccl --ops compute --iters 20 \
  --timeout 300 -o "$out/compute_1.measurements.json"
# One calibration per rank count: 4 and 8 ranks on one GPU load its
# loopback differently, and calibrate warns when it merges such series.
for np in 4 8; do
  run "calibrate_$np" $F calibrate --cluster h200-dgx-1n --measurements "$out/sweep_$np.measurements.json" \
    "$out/compute_1.measurements.json" -o "$out/calibration_$np.json" --report
  run "calibrate_${np}_json" $F calibrate --cluster h200-dgx-1n --measurements "$out/sweep_$np.measurements.json" \
    "$out/compute_1.measurements.json" --json
done
run compare_8 $F compare --plan "$out/w8.plan.json" --measurements "$out/sweep_8.measurements.json" \
  --calibration "$out/calibration_8.json"
run collective $F collective --cluster h200-dgx-1n --op all_reduce --ranks 8 --calibration "$out/calibration_8.json"
echo "== done $(date -u)" | tee -a "$out/commands.txt"
