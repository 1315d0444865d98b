#!/bin/sh
# `foldplan validate` end to end under the real launcher (CTest runs this from
# the source directory; see CMakeLists.txt).
#   cli_validate_launch.sh FOLDPLAN PLAN WORKDIR
# 8 ranks (the plan's world size; no --np), the foldbench next to foldplan,
# foldbench flags after --. Expects exit 0, the printed command on stderr,
# foldbench's correctness line on stdout and the measurements file.
set -u
# Under the sanitizer build (make sanitize): Open MPI is built without frame
# pointers, so the fast unwinder loses the frames of libopen-pal and friends
# that tests/sanitizer/lsan.supp names (an allocation through vasprintf, or
# in a plug-in unloaded before LeakSanitizer reports: CTest preloads
# tests/sanitizer/keep_dsos.cc so that none is); unwinding fully at
# allocation time keeps them. Harmless without a sanitizer.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
foldplan=$1 plan=$2 workdir=$3
out="$workdir/cli_validate_launch.out"
err="$workdir/cli_validate_launch.err"
json="$workdir/cli_validate_launch.json"
rm -f "$json"

fail() { echo "FAIL: $*"; exit 1; }

"$foldplan" validate --plan "$plan" -o "$json" -- --ops ulysses --max-seq 512 --warmup 1 --iters 2 \
  >"$out" 2>"$err"
rc=$?
echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"
[ $rc -eq 0 ] || fail "expected exit 0, got $rc"
bench="$(dirname "$foldplan")/foldbench"
grep -q "^running: .* -np 8 $bench --plan $plan -o $json --ops ulysses --max-seq 512 --warmup 1 --iters 2\$" "$err" \
  || fail "no 'running: ... -np 8 $bench --plan $plan -o ... --ops ulysses ...' line on stderr"
grep -q "correctness: every element checked, 0 wrong" "$out" || fail "no correctness line"
grep -q '"schema": "foldplan.measurements/v1"' "$json" || fail "no measurements file"
echo "PASS"
