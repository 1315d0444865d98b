#!/bin/sh
# foldbench end to end under mpirun (CTest runs this; see CMakeLists.txt).
#   validate_foldbench.sh CASE FOLDBENCH MPIRUN PLAN WORKDIR
# CASE ok:          8 ranks, ulysses verified, exit 0, measurements JSON written
# CASE corrupt:     one element flipped on rank 3 must be caught: exit 1 + message
# CASE wrong_world: -np 4 on the 8-rank plan must be refused: exit 2 + message
# The sequence is scaled down (--max-seq 512) to keep CI fast on few cores.
set -u
case_name=$1 foldbench=$2 mpirun=$3 plan=$4 workdir=$5

flags=""
if "$mpirun" --version 2>&1 | grep -Eq "Open MPI|OpenRTE|open-mpi"; then
  # CI machines have fewer cores than ranks, and containers run as root.
  flags="--oversubscribe --allow-run-as-root"
fi
out="$workdir/validate_foldbench_$case_name.out"
json="$workdir/validate_foldbench_$case_name.json"
rm -f "$json"

run() {  # run NP [extra foldbench args]
  np=$1
  shift
  # shellcheck disable=SC2086
  "$mpirun" $flags -np "$np" "$foldbench" --plan "$plan" --ops ulysses --max-seq 512 \
    --warmup 1 --iters 2 "$@" >"$out" 2>&1
  rc=$?
  cat "$out"
  return $rc
}

fail() { echo "FAIL: $*"; exit 1; }

case "$case_name" in
  ok)
    run 8 -o "$json"; rc=$?
    [ $rc -eq 0 ] || fail "expected exit 0, got $rc"
    grep -q "correctness: every element checked, 0 wrong" "$out" || fail "no correctness line"
    grep -q '"schema": "foldplan.measurements/v1"' "$json" || fail "no measurements file"
    grep -q '"wrong_elements": 0' "$json" || fail "measurements do not say 0 wrong"
    ;;
  corrupt)
    run 8 --corrupt-rank 3; rc=$?
    [ $rc -ne 0 ] || fail "a corrupted element was not caught (exit 0)"
    grep -q "correctness: FAILED" "$out" || fail "no FAILED line"
    ;;
  wrong_world)
    run 4; rc=$?
    [ $rc -ne 0 ] || fail "a wrong world size was accepted"
    grep -q "the plan is for 8 ranks but MPI started 4" "$out" || fail "no world-size message"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
