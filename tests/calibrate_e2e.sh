#!/bin/bash
# The calibration loop end to end (CTest runs this; see CMakeLists.txt):
# foldbench sweeps every collective of a plan's groups on 8 MPI ranks at 13
# log-spaced sizes, `foldplan calibrate` fits it holding out 25% of each
# series' sizes, then `collective` and `compare` use the fit.
#
# The bound on the pooled held-out median error, from runs on this
# project's 2-core machine (8 oversubscribed ranks, host memory): this test
# alone, 8 runs: 9.5-13.4%; the same sweep 5 times from a script: 8.8-14.2%,
# and 48.6% once with a compile running; this test beside builds of the
# project: 12.8, 13.1, 18.6, 27.0, 30.1 and 59.4%; under the sanitizer
# build (make sanitize), alone, 3 runs: 8.0, 9.6 and 10.6%. The uncalibrated model
# (an H100 cluster's NVLink) was 91-99% off in every run. The bound, 60%,
# is above every loaded run and far below the defaults: it fails when the
# fit is broken (wrong units, fitted on the held-out points), not when the
# host is busy; a second check asks the fit to be under half the defaults'
# error. RUN_SERIAL keeps other tests off its cores.
set -u
# Open MPI's own allocations, kept to exit, are suppressed by name in the
# sanitized run; the slow unwinder finds the names (see validate_foldbench.sh).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
foldplan=$1 foldbench=$2 mpirun=$3 plan=$4 workdir=$5
bound_percent=60
fail() { echo "FAIL: $*"; exit 1; }
flags=""
if "$mpirun" --version 2>&1 | grep -Eq "Open MPI|OpenRTE|open-mpi"; then
  flags="--oversubscribe --allow-run-as-root"
fi
m="$workdir/calibrate_e2e.measurements.json"
cal="$workdir/calibrate_e2e.calibration.json"
rm -f "$m" "$cal"

# shellcheck disable=SC2086
timeout -k 10 300 "$mpirun" $flags -np 8 "$foldbench" --plan "$plan" --ops sweep \
  --sweep-min-bytes 1024 --sweep-max-bytes 4194304 --sweep-step 2 --warmup 2 --iters 10 -o "$m" \
  > "$workdir/calibrate_e2e.foldbench.out" 2>&1 || { cat "$workdir/calibrate_e2e.foldbench.out"; fail "foldbench"; }

"$foldplan" calibrate --measurements "$m" -o "$cal" --report > "$workdir/calibrate_e2e.report" 2>&1 ||
  { cat "$workdir/calibrate_e2e.report"; fail "calibrate"; }
cat "$workdir/calibrate_e2e.report"
grep -q '"schema": "foldplan.calibration/v2"' "$cal" || fail "no v2 calibration written"
line=$(grep '^all held-out points' "$workdir/calibrate_e2e.report") || fail "no pooled held-out line"
fit=$(echo "$line" | sed -E 's/.*fit median ([0-9.]+)%.*/\1/')
defaults=$(echo "$line" | sed -E 's/.*defaults median ([0-9.]+)%.*/\1/')
echo "held-out median error: fit $fit%, defaults $defaults% (bound $bound_percent%)"
awk -v f="$fit" -v b="$bound_percent" 'BEGIN { exit !(f <= b) }' || fail "fit's held-out median $fit% > $bound_percent%"
awk -v f="$fit" -v d="$defaults" 'BEGIN { exit !(f < d / 2) }' || fail "the fit ($fit%) is not clearly better than the defaults ($defaults%)"

# The fit is host memory's: an H100 cluster uses it only when forced.
"$foldplan" collective --op all_reduce --ranks 4 --bytes 1K:1M --calibration "$cal" > /dev/null 2>&1 &&
  fail "a host-memory calibration was used for an H100 cluster without --force-calibration"
"$foldplan" collective --op all_reduce --ranks 4 --bytes 1K:1M --calibration "$cal" --force-calibration \
  > "$workdir/calibrate_e2e.collective" 2>&1 || fail "collective with the calibration"
grep -q 'calibrated$' "$workdir/calibrate_e2e.collective" || fail "collective did not use the fit"
# compare: every sweep case predicted by the fit (the same sweep, so these
# are the fitted points too: compare reports, the hold-out above tests).
"$foldplan" compare --plan "$plan" --measurements "$m" --calibration "$cal" --force-calibration --json \
  > "$workdir/calibrate_e2e.compare.json" 2> "$workdir/calibrate_e2e.compare.err" ||
  { cat "$workdir/calibrate_e2e.compare.err"; fail "compare with the calibration"; }
grep -q '"schema": "foldplan.comparison/v1"' "$workdir/calibrate_e2e.compare.json" || fail "no comparison JSON"
grep -q '"model": "calibrated"' "$workdir/calibrate_e2e.compare.json" || fail "compare did not use the fit"
echo "PASS"
