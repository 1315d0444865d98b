#!/usr/bin/env bash
# Runs every fuzz target of fuzz/targets.txt for SECONDS each, JOBS at once,
# on the clang build in BUILD (`make sanitize-build` configures it).
#   fuzz/run.sh BUILD SECONDS [JOBS] [TARGET...]
# The working corpus grows in BUILD/fuzz-corpus/<name>/ across runs, seeded
# from the target's seeds and fuzz/corpus/<name>/. A crash, leak, timeout
# (10 s per input) or out-of-memory (2 GiB) is written to
# BUILD/fuzz-artifacts/<name>/ and fails the run: copy it into
# fuzz/corpus/<name>/, where fuzz_<name>_replay runs it as a test, and fix it.
# Prints, per target, executions, corpus size and the result.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: fuzz/run.sh BUILD SECONDS [JOBS] [TARGET...]}
seconds=${2:?usage: fuzz/run.sh BUILD SECONDS [JOBS] [TARGET...]}
jobs=${3:-1}
shift $(( $# < 3 ? $# : 3 ))
wanted=("$@")

names=()
while read -r name lib dict seeds; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  if (( ${#wanted[@]} )) && [[ ! " ${wanted[*]} " =~ " $name " ]]; then continue; fi
  names+=("$name")
  declare "dict_$name=$dict" "seeds_$name=$seeds"
done < fuzz/targets.txt

if ! grep -q '^FOLDPLAN_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "fuzz/run.sh: $build is not a FOLDPLAN_FUZZ build; run make sanitize-build SAN_BUILD=$build" >&2
  exit 2
fi
targets=()
for n in "${names[@]}"; do targets+=("${n}_fuzz"); done
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

run_one() {
  local name=$1 dict_var="dict_$1" seeds_var="seeds_$1"
  local corpus="$build/fuzz-corpus/$name" artifacts="$build/fuzz-artifacts/$name"
  local seeds="$build/fuzz-seeds/$name"
  mkdir -p "$corpus" "$artifacts" "fuzz/corpus/$name"
  # libFuzzer takes directories only: the seed files and folders, copied flat.
  rm -rf "$seeds" && mkdir -p "$seeds"
  for s in ${!seeds_var}; do
    if [[ -d $s ]]; then find "$s" -type f -exec cp -t "$seeds" {} +; else cp "$s" "$seeds"; fi
  done
  local log="$build/fuzz-$name.log"
  # -max_len: large enough for the shipped files; bounded so that an input
  # is read in milliseconds.
  if "$build/${name}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -max_len=65536 -dict="fuzz/${!dict_var}" -print_final_stats=1 \
       -artifact_prefix="$artifacts/" "$corpus" "fuzz/corpus/$name" "$seeds" \
       > "$log" 2>&1; then
    result=ok
  else
    result="FAILED (see $log; the input is in $artifacts/)"
  fi
  local runs size
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  size=$(ls "$corpus" | wc -l)
  printf '%-8s %12s executions  corpus %6s inputs  %s\n' "$name" "${runs:-?}" "$size" "$result"
  [[ $result == ok ]]
}

status=0
pids=()
for n in "${names[@]}"; do
  run_one "$n" > "$build/fuzz-$n.result" &
  pids+=($!)
  if (( ${#pids[@]} >= jobs )); then wait "${pids[0]}" || status=1; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
for n in "${names[@]}"; do cat "$build/fuzz-$n.result"; done
exit $status
