// calibrate: read the measurement files and logs, place and fit them
// (costmodel/calibrate.h), write the calibration atomically, report.
#include "cli/calibrate_command.h"

#include <chrono>
#include <cmath>
#include <ctime>

#include "cli/output.h"
#include "core/atomic_file.h"
#include "core/json_check.h"
#include "core/sha256.h"
#include "costmodel/calibrate.h"
#include "topology/topology.h"

namespace foldplan {
namespace {

std::string UtcNow() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

// "all_reduce:run.log" -> ("all_reduce", "run.log"); a plain path has no hint.
std::pair<std::string, std::string> SplitHint(const std::string& arg) {
  const size_t colon = arg.find(':');
  if (colon == std::string::npos || colon == 0 || arg.substr(0, colon).find('/') != std::string::npos) return {"", arg};
  return {arg.substr(0, colon), arg.substr(colon + 1)};
}

std::string CommandLine(const CalibrateCliOptions& o) {
  std::string s = "foldplan calibrate";
  for (const std::string& m : o.measurements) s += " --measurements " + m;
  for (const std::string& n : o.nccl_tests) s += " --nccl-tests " + n;
  if (!o.inputs.cluster.empty()) s += " --cluster " + o.inputs.cluster;
  if (o.inputs.nodes) s += " --nodes " + std::to_string(*o.inputs.nodes);
  if (o.inputs.gpus_per_domain) s += " --gpus-per-domain " + std::to_string(*o.inputs.gpus_per_domain);
  char share[32];
  std::snprintf(share, sizeof share, "%g", o.holdout);
  s += std::string(" --holdout ") + share + " --seed " + std::to_string(o.seed);
  if (o.max_segments != 3) s += " --max-segments " + std::to_string(o.max_segments);
  if (!o.output.empty()) s += " -o " + o.output;
  return s;
}

Status CheckFlags(const CalibrateCliOptions& o) {
  if (o.measurements.empty() && o.nccl_tests.empty()) {
    return Status::Error("calibrate needs --measurements FILE... or --nccl-tests LOG...");
  }
  if (!(o.holdout >= 0 && o.holdout <= 0.5)) {
    return Status::Error("--holdout: expected a share in [0, 0.5], found " + std::to_string(o.holdout));
  }
  if (o.max_segments < 1 || o.max_segments > 3) {
    return Status::Error("--max-segments: expected 1, 2 or 3, found " + std::to_string(o.max_segments));
  }
  if (o.json && o.report) return Status::Error("--json and --report exclude each other");
  return CheckInputFlags(o.inputs);
}

}  // namespace

int RunCalibrate(const CalibrateCliOptions& options, std::ostream& out, std::ostream& err) {
  if (Status s = CheckFlags(options); !s.ok()) return Usage(err, s);
  auto cluster = LoadClusterAlone(options.inputs);
  if (!cluster.ok()) return Fail(err, cluster.status());
  auto topology = Topology::Build(cluster.value());
  if (!topology.ok()) return Fail(err, topology.status());

  std::vector<CalibrationInput> inputs;
  std::vector<MeasurementSet> sets;
  std::vector<NcclTestsLog> logs;
  std::vector<MeasuredSeries> series;
  auto record = [&](const std::string& file, const char* kind, const std::string& text) {
    inputs.push_back({file, kind, Sha256Hex(text), static_cast<int64_t>(text.size())});
  };
  for (const std::string& path : options.measurements) {
    auto text = ReadTextFile(path);
    if (!text.ok()) return Fail(err, text.status());
    auto parsed = ParseJsonText(text.value(), path);
    if (!parsed.ok()) return Fail(err, parsed.status());
    auto set = ParseMeasurements(parsed.value(), path);
    if (!set.ok()) return Fail(err, set.status());
    auto found = SeriesFromMeasurements(set.value(), topology.value());
    if (!found.ok()) return Fail(err, found.status());
    series.insert(series.end(), found.value().begin(), found.value().end());
    record(path, "foldbench", text.value());
    sets.push_back(std::move(set).value());
  }
  for (const std::string& arg : options.nccl_tests) {
    const auto [hint, path] = SplitHint(arg);
    auto text = ReadTextFile(path);
    if (!text.ok()) return Fail(err, text.status());
    auto log = ParseNcclTestsLog(text.value(), path, hint);
    if (!log.ok()) return Fail(err, log.status());
    auto found = SeriesFromNcclTests(log.value(), topology.value());
    if (!found.ok()) return Fail(err, found.status());
    series.push_back(std::move(found).value());
    record(path, "nccl-tests", text.value());
    logs.push_back(std::move(log).value());
  }

  CalibrateOptions fit;
  fit.holdout_share = options.holdout;
  fit.seed = options.seed;
  fit.max_segments = options.max_segments;
  auto calibration = Calibrate(std::move(series), sets, logs, std::move(inputs), cluster.value(), fit);
  if (!calibration.ok()) return Fail(err, calibration.status());
  const Calibration& c = calibration.value();

  if (!options.output.empty()) {
    const std::string text = CalibrationFileJson(c, cluster.value(), UtcNow(), CommandLine(options)).dump(1) + "\n";
    if (Status s = WriteFileAtomically(options.output, text); !s.ok()) return Fail(err, s);
  }
  if (options.json) {
    out << CalibrationReportJson(c).dump(1) << "\n";
  } else if (options.report) {
    out << CalibrationReportText(c);
  } else {
    // The short answer: the pooled held-out error, fit against defaults.
    out << c.series.size() << " series fitted on " << (c.gpu.empty() ? "an unnamed GPU" : c.gpu);
    if (c.fit_error) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "; held-out median error %.1f%% (defaults %.1f%%) over %d points", 100 * c.fit_error->median,
                    100 * c.default_error->median, c.fit_error->points);
      out << buf;
    }
    if (!c.compute.is_null()) out << "; measured GEMM rates for the compute profile";
    out << " (--report for the table)\n";
    for (const std::string& w : c.warnings) err << "warning: " << w << "\n";
  }
  if (!options.output.empty()) err << "wrote " << options.output << "\n";
  return 0;
}

}  // namespace foldplan
