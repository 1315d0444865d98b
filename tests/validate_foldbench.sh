#!/bin/sh
# foldbench end to end under mpirun (CTest runs this; see CMakeLists.txt).
#   validate_foldbench.sh CASE FOLDBENCH MPIRUN DATADIR WORKDIR
# Plans (DATADIR): pp2_cp2_ep4 (PP2, DP2 x CP2 for attention, EP4 for
# experts) and tp2_cp2_ep2_etp2 (TP2 x CP2, EP2 x ETP2), 8 ranks each; and
# cp2_ep2 (2 ranks, cut to what foldbench reads) for the cases that test
# foldbench's arguments, a skewed routing, or how a job ends (a hung or
# dying rank), which no rank count changes: a run costs about a second per
# rank under the sanitizers.
# CASE ok:          pp2_cp2_ep4: ulysses, dispatch, pack and a short sweep verified,
#                   exit 0, measurements JSON written
# CASE etp2:        tp2_cp2_ep2_etp2: ulysses and dispatch (with the all-gather-v
#                   and reduce-scatter-v over ETP) verified
# CASE gemm:        tp2_cp2_ep2_etp2: dispatch with --expert gemm (two real
#                   bf16 GEMMs per local expert on the MPI backend's host
#                   loop, rows sorted by expert and back) verified exactly;
#                   --max-seq 16, no warm-up, one timed run, to keep the host
#                   GEMMs (about 0.2 GFLOP per rank per run; 50 s under the
#                   sanitizers) short
# CASE corrupt:     one element flipped on rank 3 after every case must be
#                   caught in every case: exit 3 + message (one timed
#                   iteration, the sweep at one size: the check is the point)
# CASE wrong_world: -np 4 on the 8-rank plan must be refused: exit 2 + message
#                   saying "run with -np 8"
# CASE bad_args:    an unknown op, an unknown flag, a bad flag value, and
#                   compute without the nccl backend, are refused before
#                   anything runs, by both ranks of cp2_ep2: exit 2 + message;
#                   so are integers past a flag's range that were cut to int
#                   after the check (--iters 2147483648: no timed run, a
#                   crash; --die-rank 4294967296 killed rank 0) and a sweep
#                   bound near INT64_MAX (the size list overflowed, never
#                   ended, and grew until the OOM killer came)
# CASE skew_underflow: cp2_ep2: dispatch with --skew 1100, whose weights past
#                   expert 0 underflow to 0 (fewer than top_k left: the draw
#                   walked below expert 0, "free(): invalid pointer"): exit 0,
#                   0 wrong
# Malformed plans (small files in DATADIR holding only what foldbench reads)
# are refused on every rank before any collective: exit 1 + a message naming
# the file and the JSON pointer, no crash. The plan is read before the world
# size is checked, so these run 2 ranks of the 8-rank plans (a rank costs
# about a second under the sanitizers):
# CASE bad_ep_degree:  degrees.ep 2 against ep groups of 4 (this overran the
#                      dispatcher's count buffer: "double free" on every rank)
# CASE bad_tp_degree:  degrees.tp 1 against tp groups of 2 (this ran, exit 0)
# CASE missing_groups: no ep groups: refused for --ops dispatch (it was a
#                      skipped op), run for --ops ulysses (which needs none)
# CASE bad_plan:       cp groups that are not a partition of the world (rank
#                      5 twice, 6 never); a plan file that is not there
# CASE bad_folding:    groups of the right sizes that the layout's degrees
#                      and order do not generate (these ran to "0 wrong"):
#                      ep groups spanning both pipeline stages, cp groups
#                      equal to the dp groups, pp groups equal to the cp
#                      groups, a layout text whose order is not the groups
# CASE rank_dies:   cp2_ep2: rank 1 kills itself (--die-rank) in a timed
#                   iteration: the job must end non-zero, well within a
#                   bound, not hang
# CASE timeout_values: cp2_ep2: --timeout 1e30, inf and 0 run (1e30 and inf
#                   fired the watchdog at once), one timed iteration each;
#                   nan and -1 are usage errors (exit 2)
# CASE timeout_off: cp2_ep2: --timeout 0 with a hung rank: no watchdog fires,
#                   so only this script's own bound ends the job
# CASE no_memory:   a sweep size of 1 TiB is refused by the free-memory check
#                   before anything is allocated: exit 3 + message
# CASE hang:        cp2_ep2: rank 1 never joins a collective: the watchdog
#                   must end the job (exit 3) with a message naming the op
#                   and the group
# CASE nccl_ok:     (builds with NCCL, where a GPU is listed) pp2_cp2_ep4 with
#                   --backend nccl: ulysses verified on the GPU(s), exit 0;
#                   8 ranks share the GPUs there are (NCCL_HOSTID emulation)
# CASE nccl_no_gpu: (builds with NCCL, no GPU) --backend nccl must fail
#                   cleanly: exit non-zero + "no CUDA device visible to rank"
# Sizes are scaled down (--max-seq 512, sweep up to 16 KiB) to keep CI fast.
# Every run is bounded (timeout(1), $limit_s seconds) so that a hang fails
# the case instead of stalling CI.
set -u
# Under the sanitizer build (make sanitize): Open MPI is built without frame
# pointers, so the fast unwinder loses the frames of libopen-pal and friends
# that tests/sanitizer/lsan.supp names (an allocation through vasprintf, or
# in a plug-in unloaded before LeakSanitizer reports: CTest preloads
# tests/sanitizer/keep_dsos.cc so that none is); unwinding fully at
# allocation time keeps them. Harmless without a sanitizer.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
case_name=$1 foldbench=$2 mpirun=$3 datadir=$4 workdir=$5
command -v timeout >/dev/null 2>&1 || { echo "FAIL: needs timeout(1)"; exit 1; }
limit_s=300

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
  start_s=$(date +%s)
  # shellcheck disable=SC2086
  timeout -k 10 "$limit_s" "$mpirun" $flags -np "$np" "$foldbench" --plan "$plan" $small "$@" \
    >"$out" 2>&1
  rc=$?
  elapsed_s=$(($(date +%s) - start_s))
  cat "$out"
  return $rc
}

fail() { echo "FAIL: $*"; exit 1; }
no_kill_wait() {  # for the 2-rank cases, whose ranks all end by themselves
  # When a rank of a 1- or 2-rank job exits non-zero, Open MPI's mpirun
  # waits odls_base_sigkill_timeout (1 s) before SIGTERM and again before
  # SIGKILL, though the ranks are gone: 2 s of every usage error here.
  export OMPI_MCA_odls_base_sigkill_timeout=0
}
expect_exit() {  # expect_exit CODE WHAT: the last run's exit status
  [ "$rc" -eq "$1" ] || fail "$2 (expected exit $1, got $rc)"
}
expect_out() {  # expect_out PATTERN WHAT: a line of the last run's output
  grep -q -- "$1" "$out" || fail "$2"
}
no_crash() {  # the job ended by its own verdict, not a signal or a heap check
  if grep -Eq "double free|corruption|Segmentation|core dumped|signal [0-9]" "$out"; then
    fail "it crashed"
  fi
}

case "$case_name" in
  ok)
    run 8 pp2_cp2_ep4 --ops ulysses,dispatch,sweep,pack -o "$json"; rc=$?
    expect_exit 0 "exit status"
    expect_out "correctness: every element checked, 0 wrong" "no correctness line"
    grep -q '"schema": "foldplan.measurements/v1"' "$json" || fail "no measurements file"
    for op in ulysses dispatch pack all_to_all all_to_all_v all_gather reduce_scatter all_reduce \
              send_recv; do
      grep -q "\"op\": \"$op\"" "$json" || fail "op $op missing from the measurements"
    done
    expect_out "dispatch over ep groups (2 groups of 4" "dispatch did not run on ep"
    expect_out "all_reduce over dp_cp groups (2 groups of 4" "no dp_cp sweep"
    grep -q '"wrong_elements": 0' "$json" || fail "measurements do not say 0 wrong"
    ;;
  etp2)
    run 8 tp2_cp2_ep2_etp2 --ops ulysses,dispatch; rc=$?
    expect_exit 0 "exit status"
    expect_out "etp 2" "dispatch did not see etp 2"
    expect_out "correctness: every element checked, 0 wrong" "no correctness line"
    ;;
  gemm)
    run 8 tp2_cp2_ep2_etp2 --ops dispatch --expert gemm --max-seq 16 --warmup 0 --iters 1 \
      -o "$json"; rc=$?
    expect_exit 0 "exit status"
    expect_out "expert function: two bf16 GEMMs per local expert" "no GEMM note"
    expect_out "expert GEMM FLOPs per run" "no GEMM FLOPs note"
    expect_out "correctness: every element checked, 0 wrong" "no correctness line"
    grep -q '"wrong_elements": 0' "$json" || fail "measurements do not say 0 wrong"
    ;;
  corrupt)
    run 8 pp2_cp2_ep4 --ops ulysses,dispatch,sweep --corrupt-rank 3 --warmup 0 --iters 1 \
      --sweep-max-bytes 1024 -o "$json"; rc=$?
    expect_exit 3 "a corrupted element was not caught"
    expect_out "correctness: FAILED" "no FAILED line"
    # Rank 3 is in a group of every kind, so every case must count it.
    if grep -q '"wrong_elements": 0' "$json"; then fail "a case missed the corruption"; fi
    # The pack op runs on rank 0 alone: corrupt there.
    run 8 pp2_cp2_ep4 --ops pack --corrupt-rank 0 --warmup 0 --iters 1; rc=$?
    expect_exit 3 "a corrupted pack output was not caught"
    ;;
  wrong_world)
    run 4 pp2_cp2_ep4 --ops ulysses; rc=$?
    expect_exit 2 "a wrong world size was not refused"
    expect_out "pp2_cp2_ep4.plan.json: the plan is for 8 ranks but MPI started 4; run with -np 8" "no world-size message"
    ;;
  bad_args)
    no_kill_wait
    run 2 cp2_ep2 --ops ulysses,nope; rc=$?
    expect_exit 2 "an unknown op was not refused"
    expect_out 'foldbench: --ops: unknown op "nope"; known ops: ulysses, dispatch, sweep, compute' "no unknown-op message"
    run 2 cp2_ep2 --ops compute; rc=$?
    expect_exit 2 "compute on the mpi backend was not refused"
    expect_out "it needs --backend nccl" "no compute-backend message"
    run 2 cp2_ep2 --ops ulysses --no-such-flag 1; rc=$?
    expect_exit 2 "an unknown flag was not refused"
    expect_out "foldbench: --no-such-flag: unknown flag" "no unknown-flag message"
    run 2 cp2_ep2 --ops ulysses --iters zero; rc=$?
    expect_exit 2 "a bad flag value was not refused"
    expect_out 'foldbench: --iters: expected a decimal integer in \[1, 10000\], found "zero"' "no bad-value message"
    run 2 cp2_ep2 --ops ulysses --iters 2147483648; rc=$?
    no_crash
    expect_exit 2 "--iters past int was not refused"
    expect_out 'foldbench: --iters: expected a decimal integer in \[1, 10000\], found "2147483648"' "no --iters range message"
    run 2 cp2_ep2 --ops ulysses --die-rank 4294967296; rc=$?
    expect_exit 2 "--die-rank past int was not refused"
    expect_out 'foldbench: --die-rank: expected a decimal integer in \[0, 1048575\], found "4294967296"' "no --die-rank range message"
    run 2 cp2_ep2 --ops sweep --sweep-max-bytes 9223372036854775807; rc=$?
    expect_exit 2 "--sweep-max-bytes near INT64_MAX was not refused"
    expect_out 'foldbench: --sweep-max-bytes: expected a decimal integer in \[4, 1099511627776\]' "no sweep bound message"
    ;;
  skew_underflow)
    run 2 cp2_ep2 --ops dispatch --routing skewed --skew 1100; rc=$?
    no_crash
    expect_exit 0 "dispatch with --skew 1100"
    expect_out "correctness: every element checked, 0 wrong" "no correctness line"
    ;;
  bad_folding)
    no_kill_wait
    for plan in ep_across_stages:ep cp_groups_are_dp:cp pp_groups_are_cp:pp layout_order_disagrees:cp; do
      name=${plan%%:*} kind=${plan#*:}
      run 2 "$name" --ops ulysses,dispatch; rc=$?
      no_crash
      expect_exit 1 "$name was not refused"
      expect_out "$name.plan.json: /rank_map/groups/$kind/0: ranks 0 and [0-9] are in different" "$name: no message naming the file and the first wrong group"
    done
    ;;
  bad_ep_degree)
    no_kill_wait
    run 2 bad_ep_degree --ops dispatch; rc=$?
    no_crash
    expect_exit 1 "an ep degree against ep groups of 4 was not refused"
    expect_out "bad_ep_degree.plan.json: /rank_map/groups/ep: 2 groups of 4 ranks, but /rank_map/degrees/ep = 2 asks for 4 groups of 2 ranks" "no message naming the file, the ep groups and the degree"
    ;;
  bad_tp_degree)
    no_kill_wait
    run 2 bad_tp_degree --ops ulysses,dispatch; rc=$?
    no_crash
    expect_exit 1 "a tp degree against tp groups of 2 was not refused"
    expect_out "bad_tp_degree.plan.json: /rank_map/groups/tp: 4 groups of 2 ranks, but /rank_map/degrees/tp = 1 asks for 8 groups of 1 rank" "no message naming the file, the tp groups and the degree"
    ;;
  missing_groups)
    no_kill_wait
    run 2 no_ep_groups --ops ulysses,dispatch; rc=$?
    expect_exit 1 "dispatch without ep groups was not refused"
    expect_out "no_ep_groups.plan.json: /rank_map/groups/ep: missing; op dispatch needs the ep groups" "no message naming the missing kind and the op"
    # Ulysses needs only cp: the plan runs.
    run 8 no_ep_groups --ops ulysses --warmup 0 --iters 1; rc=$?
    expect_exit 0 "ulysses on a plan without ep groups"
    expect_out "correctness: every element checked, 0 wrong" "no correctness line"
    ;;
  bad_plan)
    no_kill_wait
    run 2 cp_not_partition --ops ulysses; rc=$?
    no_crash
    expect_exit 1 "cp groups that are not a partition were not refused"
    expect_out "cp_not_partition.plan.json: /rank_map/groups/cp/3/0: rank 5 is in more than one cp group" "no partition message"
    run 2 no_such_file --ops ulysses; rc=$?
    expect_exit 1 "a missing plan file was not refused"
    expect_out "no_such_file.plan.json: cannot open" "no missing-file message"
    ;;
  rank_dies)
    # The launcher ends the job when a rank dies (Open MPI: 128 + the
    # signal); the watchdog (--timeout 30) is the backstop; the bound here
    # catches a hang all the same.
    limit_s=90
    run 2 cp2_ep2 --ops ulysses --die-rank 1 --timeout 30; rc=$?
    [ $rc -ne 0 ] || fail "a rank died but the job exited 0"
    [ "$elapsed_s" -lt "$limit_s" ] || fail "the job hung until the script's bound (exit $rc)"
    expect_out "foldbench: rank 1: --die-rank: killing this rank in timed iteration 1 of op ulysses" "rank 1 did not die where asked"
    ;;
  timeout_values)
    no_kill_wait
    for t in 1e30 inf 0; do
      run 2 cp2_ep2 --ops ulysses --warmup 0 --iters 1 --timeout "$t"; rc=$?
      expect_exit 0 "--timeout $t"
      if grep -q "did not finish within" "$out"; then fail "--timeout $t: the watchdog fired"; fi
    done
    for t in nan -1; do
      run 2 cp2_ep2 --ops ulysses --timeout "$t"; rc=$?
      expect_exit 2 "--timeout $t was not refused"
      grep -q "foldbench: --timeout: expected a number >= 0 or inf, found \"$t\"" "$out" ||
        fail "--timeout $t: no message"
    done
    ;;
  timeout_off)
    # Rank 1 never joins; with the watchdog off nothing ends the job but
    # timeout(1) here, after 8 s (exit 124), and no watchdog speaks.
    limit_s=8
    run 2 cp2_ep2 --ops ulysses --hang-rank 1 --timeout 0; rc=$?
    expect_exit 124 "with --timeout 0 a hang should last until the bound"
    if grep -q "did not finish within" "$out"; then fail "a watchdog fired with --timeout 0"; fi
    ;;
  no_memory)
    run 8 pp2_cp2_ep4 --ops sweep --sweep-min-bytes 1099511627776 \
      --sweep-max-bytes 1099511627776; rc=$?
    expect_exit 3 "a size beyond free memory was not refused"
    expect_out 'op all_to_all, case "1048576 MiB", on [a-z_]* group [0-9]* (world ranks [0-9, ]*): needs [0-9]* bytes per rank, only [0-9]* free on this rank' "no free-memory message"
    ;;
  hang)
    run 2 cp2_ep2 --ops ulysses --hang-rank 1 --timeout 3; rc=$?
    expect_exit 3 "a hang was not turned into a run-time failure"
    # Rank 0 waits for rank 1 in their cp group.
    expect_out 'of op ulysses, case "q seq->heads", on cp group [0-9] (world ranks [0-9, ]*) did not finish within 3 s' "no watchdog message naming the op and the group"
    ;;
  nccl_ok)
    run 8 pp2_cp2_ep4 --backend nccl --ops ulysses -o "$json"; rc=$?
    expect_exit 0 "exit status"
    expect_out "correctness: every element checked, 0 wrong" "no correctness line"
    grep -q '"backend": "nccl"' "$json" || fail "the measurements do not name the nccl backend"
    ;;
  nccl_no_gpu)
    run 8 pp2_cp2_ep4 --backend nccl --ops ulysses; rc=$?
    [ $rc -ne 0 ] || fail "--backend nccl without a GPU exited 0"
    expect_out "no CUDA device visible to rank [0-9]" "no message naming the problem"
    if grep -Eq "Segmentation|core dumped|signal [0-9]" "$out"; then fail "it crashed"; fi
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
