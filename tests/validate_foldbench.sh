#!/bin/sh
# foldbench end to end under mpirun (CTest runs this; see CMakeLists.txt).
#   validate_foldbench.sh CASE FOLDBENCH MPIRUN DATADIR WORKDIR
# Plans (DATADIR): pp2_cp2_ep4 (PP2, DP2 x CP2 for attention, EP4 for
# experts) and tp2_cp2_ep2_etp2 (TP2 x CP2, EP2 x ETP2), 8 ranks each.
# CASE ok:          pp2_cp2_ep4: ulysses, dispatch, pack and a short sweep verified,
#                   exit 0, measurements JSON written
# CASE etp2:        tp2_cp2_ep2_etp2: ulysses and dispatch (with the all-gather-v
#                   and reduce-scatter-v over ETP) verified
# CASE gemm:        tp2_cp2_ep2_etp2: dispatch with --expert gemm (two real
#                   bf16 GEMMs per local expert on the MPI backend's host
#                   loop, rows sorted by expert and back) verified exactly;
#                   --max-seq 64, no warm-up, one timed run, to keep the host
#                   GEMMs (about 0.8 GFLOP per rank per run) short
# CASE corrupt:     one element flipped on rank 3 after every case must be
#                   caught in every case: exit 1 + message
# CASE wrong_world: -np 4 on the 8-rank plan must be refused: exit 2 + message
# CASE bad_args:    an unknown op, and compute without the nccl backend, are
#                   refused before anything runs: exit 2 + message
# CASE no_memory:   a sweep size of 1 TiB is refused by the free-memory check
#                   before anything is allocated: exit 3 + message
# CASE hang:        rank 2 never joins a collective: the watchdog must end the
#                   job with a message naming the op and the group
# CASE nccl_ok:     (builds with NCCL, where a GPU is listed) pp2_cp2_ep4 with
#                   --backend nccl: ulysses verified on the GPU(s), exit 0;
#                   8 ranks share the GPUs there are (NCCL_HOSTID emulation)
# CASE nccl_no_gpu: (builds with NCCL, no GPU) --backend nccl must fail
#                   cleanly: exit non-zero + "no CUDA device visible to rank"
# Sizes are scaled down (--max-seq 512, sweep up to 16 KiB) to keep CI fast.
set -u
case_name=$1 foldbench=$2 mpirun=$3 datadir=$4 workdir=$5

flags=""
if "$mpirun" --version 2>&1 | grep -Eq "Open MPI|OpenRTE|open-mpi"; then
  # CI machines have fewer cores than ranks, and containers run as root.
  flags="--oversubscribe --allow-run-as-root"
fi
out="$workdir/validate_foldbench_$case_name.out"
json="$workdir/validate_foldbench_$case_name.json"
rm -f "$json"
small="--max-seq 512 --warmup 1 --iters 2 --sweep-max-bytes 16384"

run() {  # run NP PLAN [extra foldbench args]
  np=$1 plan=$datadir/$2.plan.json
  shift 2
  # shellcheck disable=SC2086
  "$mpirun" $flags -np "$np" "$foldbench" --plan "$plan" $small "$@" >"$out" 2>&1
  rc=$?
  cat "$out"
  return $rc
}

fail() { echo "FAIL: $*"; exit 1; }

case "$case_name" in
  ok)
    run 8 pp2_cp2_ep4 --ops ulysses,dispatch,sweep,pack -o "$json"; rc=$?
    [ $rc -eq 0 ] || fail "expected exit 0, got $rc"
    grep -q "correctness: every element checked, 0 wrong" "$out" || fail "no correctness line"
    grep -q '"schema": "foldplan.measurements/v1"' "$json" || fail "no measurements file"
    for op in ulysses dispatch pack all_to_all all_to_all_v all_gather reduce_scatter all_reduce \
              send_recv; do
      grep -q "\"op\": \"$op\"" "$json" || fail "op $op missing from the measurements"
    done
    grep -q "dispatch over ep groups (2 groups of 4" "$out" || fail "dispatch did not run on ep"
    grep -q "all_reduce over dp_cp groups (2 groups of 4" "$out" || fail "no dp_cp sweep"
    grep -q '"wrong_elements": 0' "$json" || fail "measurements do not say 0 wrong"
    ;;
  etp2)
    run 8 tp2_cp2_ep2_etp2 --ops ulysses,dispatch; rc=$?
    [ $rc -eq 0 ] || fail "expected exit 0, got $rc"
    grep -q "etp 2" "$out" || fail "dispatch did not see etp 2"
    grep -q "correctness: every element checked, 0 wrong" "$out" || fail "no correctness line"
    ;;
  gemm)
    run 8 tp2_cp2_ep2_etp2 --ops dispatch --expert gemm --max-seq 64 --warmup 0 --iters 1 \
      -o "$json"; rc=$?
    [ $rc -eq 0 ] || fail "expected exit 0, got $rc"
    grep -q "expert function: two bf16 GEMMs per local expert" "$out" || fail "no GEMM note"
    grep -q "expert GEMM FLOPs per run" "$out" || fail "no GEMM FLOPs note"
    grep -q "correctness: every element checked, 0 wrong" "$out" || fail "no correctness line"
    grep -q '"wrong_elements": 0' "$json" || fail "measurements do not say 0 wrong"
    ;;
  corrupt)
    run 8 pp2_cp2_ep4 --ops ulysses,dispatch,sweep --corrupt-rank 3 -o "$json"; rc=$?
    [ $rc -eq 1 ] || fail "a corrupted element was not caught (expected exit 1, got $rc)"
    grep -q "correctness: FAILED" "$out" || fail "no FAILED line"
    # Rank 3 is in a group of every kind, so every case must count it.
    if grep -q '"wrong_elements": 0' "$json"; then fail "a case missed the corruption"; fi
    # The pack op runs on rank 0 alone: corrupt there.
    run 8 pp2_cp2_ep4 --ops pack --corrupt-rank 0; rc=$?
    [ $rc -eq 1 ] || fail "a corrupted pack output was not caught (expected exit 1, got $rc)"
    ;;
  wrong_world)
    run 4 pp2_cp2_ep4 --ops ulysses; rc=$?
    [ $rc -eq 2 ] || fail "a wrong world size was not refused with exit 2 (got $rc)"
    grep -q "the plan is for 8 ranks but MPI started 4" "$out" || fail "no world-size message"
    ;;
  bad_args)
    run 8 pp2_cp2_ep4 --ops ulysses,nope; rc=$?
    [ $rc -eq 2 ] || fail "an unknown op was not refused with exit 2 (got $rc)"
    grep -q 'foldbench: --ops: unknown op "nope"; known ops: ulysses, dispatch, sweep, compute' \
      "$out" || fail "no unknown-op message"
    run 8 pp2_cp2_ep4 --ops compute; rc=$?
    [ $rc -eq 2 ] || fail "compute on the mpi backend was not refused with exit 2 (got $rc)"
    grep -q "it needs --backend nccl" "$out" || fail "no compute-backend message"
    ;;
  no_memory)
    run 8 pp2_cp2_ep4 --ops sweep --sweep-min-bytes 1099511627776 \
      --sweep-max-bytes 1099511627776; rc=$?
    [ $rc -eq 3 ] || fail "a size beyond free memory was not refused with exit 3 (got $rc)"
    grep -q 'op all_to_all, case "1048576 MiB", on [a-z_]* group [0-9]* (world ranks [0-9, ]*): needs [0-9]* bytes per rank, only [0-9]* free on this rank' \
      "$out" || fail "no free-memory message"
    ;;
  hang)
    run 8 pp2_cp2_ep4 --ops ulysses --hang-rank 2 --timeout 3; rc=$?
    [ $rc -ne 0 ] || fail "a hang was not turned into an error"
    # Rank 3 waits for rank 2 in their cp group; the others wait for rank 2
    # in the next world step. Whichever watchdog fires first names both.
    grep -q 'of op ulysses, case "q seq->heads", on cp group [0-9] (world ranks [0-9, ]*) did not finish within 3 s' \
      "$out" || fail "no watchdog message naming the op and the group"
    ;;
  nccl_ok)
    run 8 pp2_cp2_ep4 --backend nccl --ops ulysses -o "$json"; rc=$?
    [ $rc -eq 0 ] || fail "expected exit 0, got $rc"
    grep -q "correctness: every element checked, 0 wrong" "$out" || fail "no correctness line"
    grep -q '"backend": "nccl"' "$json" || fail "the measurements do not name the nccl backend"
    ;;
  nccl_no_gpu)
    run 8 pp2_cp2_ep4 --backend nccl --ops ulysses; rc=$?
    [ $rc -ne 0 ] || fail "--backend nccl without a GPU exited 0"
    grep -q "no CUDA device visible to rank [0-9]" "$out" || fail "no message naming the problem"
    if grep -Eq "Segmentation|core dumped|signal [0-9]" "$out"; then fail "it crashed"; fi
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
