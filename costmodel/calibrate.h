// `foldplan calibrate`: measured collective times (foldbench's sweep ops,
// nccl-tests logs) grouped into series, one per (collective, group size,
// placement class, ranks per NVLink domain); each series fitted as a lower
// envelope of alpha-beta segments (envelope_fit.h) on all but a held-out
// share of its sizes; the fit and the uncalibrated defaults scored on the
// held-out sizes only; the result written as `foldplan.calibration/v2`
// (doc/cost-model-comm.md section 5, doc/formats.md).
//
// Placement: a measured group's ranks per host, hosts taken as consecutive
// nodes of the cluster in the order the measurement lists them (the
// launcher's host order), are placed on the cluster's topology and classed
// as the cost model classes spans (ClassOf, RanksPerDomainOf). A series
// whose hosts or ranks per host the cluster cannot hold is an error.
//
// Held out: of each series' distinct sizes, round(share x sizes) drawn
// without replacement from all but the smallest and largest (so the error
// is of interpolation inside the measured range), by a SplitMix64 stream
// seeded with the seed and the series' name; every point of a drawn size is
// held out. Fewer than 4 sizes: none held out, no error figure. The fit
// written is the one made without the held-out sizes, so the figures are
// that fit's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "costmodel/comm_params.h"
#include "costmodel/envelope_fit.h"
#include "inputs/cluster.h"
#include "inputs/measurements.h"
#include "inputs/nccl_tests_log.h"
#include "topology/topology.h"

namespace foldplan {

// Points one series may hold (all its files together): the split search
// fits every point for each of up to about 1,100 splits, so this bounds a
// fit to 3 s with a sweep's 32 sizes and 11 s with every point its own size
// (bench/calibrate_bench.cc, 2-core machine; a 32-size sweep takes 9 ms).
// A sweep has tens of sizes; nccl-tests' 8 B .. 16 GiB at factor 2 is 32.
inline constexpr size_t kMaxSeriesPoints = 16384;

struct CalibrateOptions {
  double holdout_share = 0.25;  // [0, 0.5]: share of each series' sizes held out
  uint64_t seed = 1;            // the hold-out draw
  int max_segments = 3;         // [1, 3]
};

// One input file as calibrate read it.
struct CalibrationInput {
  std::string file;
  std::string kind;    // "foldbench" or "nccl-tests"
  std::string sha256;  // of the file's bytes
  int64_t bytes = 0;
};

// A measured point and where it came from ("FILE /ops/3/sizes/2", "FILE:41").
struct MeasuredPoint {
  double bytes = 0;
  double seconds = 0;
  std::string where;
};

struct SeriesKey {
  Collective collective = Collective::kAllReduce;
  int gpus = 0;
  PlacementClass placement = PlacementClass::kIntraDomain;
  int ranks_per_domain = 0;
  auto operator<=>(const SeriesKey&) const = default;
};
// "all_reduce/8/intra_domain/8"
std::string Name(const SeriesKey& key);

struct MeasuredSeries {
  SeriesKey key;
  GroupSpan span;                 // the group placed on the cluster
  int groups_sharing_links = 1;   // groups of the measurement sharing a host's NICs
  std::vector<MeasuredPoint> points;
  std::vector<std::string> sources;  // files
};

// Relative errors |predicted / measured - 1| over held-out points.
struct ErrorFigures {
  int points = 0;
  double median = 0;
  double max = 0;
};

struct SeriesFit {
  MeasuredSeries series;
  EnvelopeFit fit;
  int fitted_sizes = 0, held_out_sizes = 0;
  std::vector<double> held_out_bytes;   // the held-out sizes, ascending
  double min_bytes = 0, max_bytes = 0;
  int outliers = 0;                     // of the fitted points
  std::optional<ErrorFigures> fit_error, default_error;  // none when nothing was held out
  double busbw_at_large_gb_per_s = 0;   // the fastest segment's algbw x bus factor
  double line_busbw_gb_per_s = 0;       // the model's busbw at line rates, for a very large message
};

struct Calibration {
  std::vector<SeriesFit> series;
  // Over the held-out points of every series together.
  std::optional<ErrorFigures> fit_error, default_error;
  std::vector<CalibrationInput> inputs;
  std::vector<std::string> hosts, gpus, versions;  // distinct, as the inputs say them
  std::string gpu;                                 // the one GPU (or "host memory") measured
  nlohmann::json compute;                          // costmodel/compute_calibration.h section; null if none
  std::vector<std::string> warnings;               // fits above line rate, uneven groups, ...
  CalibrateOptions options;
};

// The series in foldbench's sweep ops (other ops are not fitted) and in
// nccl-tests logs (out-of-place times; in-place halves are not used).
// Points with wrong elements are refused: an error naming file and place.
// `topology` is the cluster's, built once for all the files.
Result<std::vector<MeasuredSeries>> SeriesFromMeasurements(const MeasurementSet& set, const Topology& topology);
Result<MeasuredSeries> SeriesFromNcclTests(const NcclTestsLog& log, const Topology& topology);

// Everything calibrate does after reading: series of the same key merged,
// held out, fitted, scored; compute points from foldbench's compute ops.
Result<Calibration> Calibrate(std::vector<MeasuredSeries> series, const std::vector<MeasurementSet>& foldbench,
                              const std::vector<NcclTestsLog>& nccl_tests, std::vector<CalibrationInput> inputs,
                              const ClusterSpec& cluster, const CalibrateOptions& options);

// The `foldplan.calibration/v2` file (LoadCommParams reads it back).
// `created` is an ISO 8601 UTC time, `command` the command line.
nlohmann::ordered_json CalibrationFileJson(const Calibration& c, const ClusterSpec& cluster,
                                           const std::string& created, const std::string& command);
// The report: one row per series, the held-out errors of fit and defaults
// side by side; as text and as `foldplan.calibration-report/v1`.
std::string CalibrationReportText(const Calibration& c);
nlohmann::ordered_json CalibrationReportJson(const Calibration& c);

}  // namespace foldplan
