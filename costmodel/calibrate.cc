// Series from measurements, the hold-out, the fits and their scores, and
// the calibration file (calibrate.h).
#include "costmodel/calibrate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <utility>

#include "core/formats.h"
#include "core/median.h"
#include "core/mix64.h"
#include "core/text_table.h"
#include "costmodel/collective.h"
#include "costmodel/compute_calibration.h"

namespace foldplan {
namespace {

// The group of `ranks_per_host[i]` ranks on host i placed on nodes 0, 1, ...
// of the cluster (local GPUs 0 .. count - 1 of each).
Result<GroupSpan> PlaceGroup(const std::vector<int>& ranks_per_host, const Topology& topo,
                             const std::string& what) {
  const ClusterSpec& c = topo.cluster();
  if (ranks_per_host.empty()) return Status::Error(what + ": a group with no ranks");
  if (static_cast<int>(ranks_per_host.size()) > c.nodes) {
    return Status::Error(what + ": a group spans " + std::to_string(ranks_per_host.size()) + " hosts, but cluster " +
                         c.name + " has " + std::to_string(c.nodes) + " nodes; name the measured cluster with --cluster");
  }
  std::vector<int> gpus;
  for (size_t host = 0; host < ranks_per_host.size(); ++host) {
    if (ranks_per_host[host] > c.gpus_per_node || ranks_per_host[host] < 1) {
      return Status::Error(what + ": " + std::to_string(ranks_per_host[host]) + " ranks of a group on one host, but " +
                           c.name + " has " + std::to_string(c.gpus_per_node) +
                           " GPUs per node; name the measured cluster with --cluster");
    }
    for (int g = 0; g < ranks_per_host[host]; ++g) gpus.push_back(static_cast<int>(host) * c.gpus_per_node + g);
  }
  return topo.Span(gpus);
}

SeriesKey KeyOf(Collective collective, const GroupSpan& span) {
  return {collective, span.gpus, ClassOf(span), RanksPerDomainOf(span)};
}

// Groups whose ranks share one host's NICs while all of them run at once:
// the host's ranks over the group's ranks on it.
int Sharing(double ranks_per_host, int group_ranks_on_host) {
  return std::max(1, static_cast<int>(std::ceil(ranks_per_host / std::max(group_ranks_on_host, 1) - 1e-9)));
}

uint64_t SplitMix64(uint64_t& state) {
  const uint64_t z = Mix64(state);
  state += kSplitMix64Increment;
  return z;
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

// The held-out sizes of a series with `sizes` distinct sizes (indices).
std::set<int> HeldOut(int sizes, const std::string& name, const CalibrateOptions& o) {
  std::set<int> out;
  if (sizes < 4 || o.holdout_share <= 0) return out;
  const int k = std::min(sizes - 2, static_cast<int>(std::lround(o.holdout_share * sizes)));
  std::vector<int> interior;
  for (int i = 1; i + 1 < sizes; ++i) interior.push_back(i);
  uint64_t state = o.seed ^ Fnv1a(name);
  for (int i = static_cast<int>(interior.size()) - 1; i > 0; --i) {  // Fisher-Yates, portable
    std::swap(interior[i], interior[SplitMix64(state) % static_cast<uint64_t>(i + 1)]);
  }
  out.insert(interior.begin(), interior.begin() + k);
  return out;
}


ErrorFigures Figures(const std::vector<double>& errors) {
  ErrorFigures f;
  f.points = static_cast<int>(errors.size());
  f.median = Median(errors);
  f.max = errors.empty() ? 0 : *std::max_element(errors.begin(), errors.end());
  return f;
}

// The model at line rate: every achieved fraction 1, so that its bus
// bandwidth for a huge message is what the links could carry at most.
CommParams LineRateParams(const ClusterSpec& cluster) {
  CommParams p = DefaultCommParams(cluster);
  p.nvlink_efficiency = p.network_efficiency = p.nvls_efficiency = 1;
  p.tree_simple_factor = 1;
  return p;
}

constexpr double kLineProbeBytes = 64.0 * (1ull << 30);  // 64 GiB: latency is negligible

void AddDistinct(std::vector<std::string>& list, const std::string& s) {
  if (!s.empty() && std::find(list.begin(), list.end(), s) == list.end()) list.push_back(s);
}

std::string Percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * x);
  return buf;
}

std::string Num(double x, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

// Points in one table of the compute section (0 without one).
size_t ComputePoints(const Calibration& c, const char* table) {
  if (!c.compute.is_object()) return 0;
  const auto it = c.compute.find(table);
  return it != c.compute.end() && it->is_array() ? it->size() : 0;
}

}  // namespace

std::string Name(const SeriesKey& key) {
  return std::string(Name(key.collective)) + "/" + std::to_string(key.gpus) + "/" + Name(key.placement) + "/" +
         std::to_string(key.ranks_per_domain);
}

Result<std::vector<MeasuredSeries>> SeriesFromMeasurements(const MeasurementSet& set, const Topology& topology) {
  std::vector<MeasuredSeries> out;
  const double ranks_per_host = static_cast<double>(set.ranks) / std::max<size_t>(set.hosts.size(), 1);
  for (size_t i = 0; i < set.ops.size(); ++i) {
    const MeasuredOp& op = set.ops[i];
    const std::optional<Collective> collective = CollectiveNamed(op.op);
    if (!collective || !op.ran || op.cases.empty()) continue;  // ulysses, dispatch, ...: not fitted
    const std::string pointer = "/ops/" + std::to_string(i);
    if (op.ranks_per_node.empty() || op.ranks_per_node.front().empty()) {
      return Status::Error(set.source + ": " + pointer +
                           "/placement/ranks_per_node: empty; the group's ranks per host are needed to place it");
    }
    auto span = PlaceGroup(op.ranks_per_node.front(), topology, set.source + ": " + pointer);
    if (!span.ok()) return span.status();
    MeasuredSeries s;
    s.key = KeyOf(*collective, span.value());
    s.span = span.value();
    s.groups_sharing_links = Sharing(ranks_per_host, *std::max_element(op.ranks_per_node.front().begin(),
                                                                       op.ranks_per_node.front().end()));
    s.sources = {set.source};
    for (size_t j = 0; j < op.cases.size(); ++j) {
      const MeasuredCase& c = op.cases[j];
      const std::string where = set.source + " " + pointer + "/sizes/" + std::to_string(j);
      if (c.wrong_elements != 0) {
        return Status::Error(where + ": " + std::to_string(c.wrong_elements) + " wrong element(s) in " + op.op +
                             " of " + std::to_string(c.send_bytes_per_rank) + " bytes; refused, not fitted");
      }
      if (c.send_bytes_per_rank > 0 && c.median_seconds > 0) {
        s.points.push_back({static_cast<double>(c.send_bytes_per_rank), c.median_seconds, where});
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

Result<MeasuredSeries> SeriesFromNcclTests(const NcclTestsLog& log, const Topology& topology) {
  const std::optional<Collective> collective = CollectiveNamed(log.collective);
  if (!collective) return Status::Error(log.source + ": collective \"" + log.collective + "\" is not one foldplan models");
  // Group 0's ranks per host, hosts in first-seen order.
  std::vector<std::string> hosts;
  std::vector<int> counts;
  for (const NcclTestsRank& r : log.ranks) {
    if (r.group != 0) continue;
    auto it = std::find(hosts.begin(), hosts.end(), r.host);
    if (it == hosts.end()) {
      hosts.push_back(r.host);
      counts.push_back(1);
    } else {
      ++counts[it - hosts.begin()];
    }
  }
  auto span = PlaceGroup(counts, topology, log.source);
  if (!span.ok()) return span.status();
  MeasuredSeries s;
  s.key = KeyOf(*collective, span.value());
  s.span = span.value();
  const int busiest = log.ranks_per_host.empty() ? 1 : *std::max_element(log.ranks_per_host.begin(), log.ranks_per_host.end());
  s.groups_sharing_links = Sharing(busiest, *std::max_element(counts.begin(), counts.end()));
  s.sources = {log.source};
  for (const NcclTestsRow& row : log.rows) {
    const std::string where = log.source + ":" + std::to_string(row.line);
    if (row.out_of_place.wrong != 0 || row.in_place.wrong != 0) {
      return Status::Error(where + ": " + std::to_string(row.out_of_place.wrong + row.in_place.wrong) +
                           " wrong element(s) at " + std::to_string(row.size_bytes) + " bytes; refused, not fitted");
    }
    if (row.out_of_place.present && row.size_bytes > 0 && row.out_of_place.time_us > 0) {
      s.points.push_back({static_cast<double>(row.size_bytes), row.out_of_place.time_us * 1e-6, where});
    }
  }
  return s;
}

Result<Calibration> Calibrate(std::vector<MeasuredSeries> series, const std::vector<MeasurementSet>& foldbench,
                              const std::vector<NcclTestsLog>& nccl_tests, std::vector<CalibrationInput> inputs,
                              const ClusterSpec& cluster, const CalibrateOptions& options) {
  Calibration c;
  c.options = options;
  c.inputs = std::move(inputs);

  // What was measured on what.
  static const std::regex kVersions(R"(CUDA driver ([^,]+), runtime ([^,]+), NCCL (\S+))");
  for (const MeasurementSet& m : foldbench) {
    for (const std::string& h : m.hosts) AddDistinct(c.hosts, h);
    AddDistinct(c.gpus, m.backend == "mpi" ? "host memory" : m.gpu_name());
    AddDistinct(c.versions, "MPI: " + m.mpi_version);
    for (const std::string& fact : m.devices) {
      std::smatch v;
      if (std::regex_search(fact, v, kVersions)) {
        AddDistinct(c.versions, "CUDA driver " + v[1].str() + ", runtime " + v[2].str() + ", NCCL " + v[3].str());
      }
    }
  }
  for (const NcclTestsLog& log : nccl_tests) {
    for (const std::string& h : log.hosts) AddDistinct(c.hosts, h);
    for (const NcclTestsRank& r : log.ranks) AddDistinct(c.gpus, r.gpu_name);
    if (!log.nccl_version.empty()) AddDistinct(c.versions, "NCCL " + log.nccl_version);
    if (!log.cuda_version.empty()) AddDistinct(c.versions, "CUDA " + log.cuda_version);
  }
  for (size_t i = 1; i < c.gpus.size(); ++i) {
    if (!SameGpu(c.gpus[i], c.gpus[0])) {
      return Status::Error("the measurements come from different hardware (\"" + c.gpus[0] + "\" and \"" + c.gpus[i] +
                           "\"); calibrate each apart");
    }
  }
  c.gpu = c.gpus.empty() ? "" : c.gpus.front();

  // Same key: one series (several files, or groups measured twice).
  std::map<SeriesKey, MeasuredSeries> merged;
  for (MeasuredSeries& s : series) {
    auto [it, fresh] = merged.try_emplace(s.key, s);
    if (fresh) continue;
    if (s.groups_sharing_links != it->second.groups_sharing_links) {
      c.warnings.push_back(Name(s.key) + ": merged measurements taken with " +
                           std::to_string(it->second.groups_sharing_links) + " and " +
                           std::to_string(s.groups_sharing_links) +
                           " groups sharing a host's links; if they differ, calibrate each apart");
    }
    it->second.points.insert(it->second.points.end(), s.points.begin(), s.points.end());
    for (const std::string& src : s.sources) AddDistinct(it->second.sources, src);
  }

  const CommParams defaults = DefaultCommParams(cluster);
  const CommParams line = LineRateParams(cluster);
  std::vector<double> all_fit_err, all_default_err;
  for (auto& [key, s] : merged) {
    if (s.points.size() > kMaxSeriesPoints) {
      return Status::Error(Name(key) + ": " + std::to_string(s.points.size()) + " points from " + s.sources.front() +
                           (s.sources.size() > 1 ? " and others" : "") + "; at most " +
                           std::to_string(kMaxSeriesPoints) + " are fitted per series");
    }
    std::vector<double> sizes;
    for (const MeasuredPoint& p : s.points) sizes.push_back(p.bytes);
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    const std::set<int> held = HeldOut(static_cast<int>(sizes.size()), Name(key), options);
    auto is_held = [&](double bytes) {
      const int index = static_cast<int>(std::lower_bound(sizes.begin(), sizes.end(), bytes) - sizes.begin());
      return held.contains(index);
    };
    std::vector<TimedBytes> train;
    for (const MeasuredPoint& p : s.points) {
      if (!is_held(p.bytes)) train.push_back({p.bytes, p.seconds});
    }
    auto fit = FitEnvelope(train, {.max_segments = options.max_segments});
    if (!fit.ok()) {
      c.warnings.push_back(Name(key) + " not fitted: " + fit.status().message());
      continue;
    }
    SeriesFit f;
    f.series = s;
    f.fit = std::move(fit).value();
    f.fitted_sizes = static_cast<int>(sizes.size() - held.size());
    f.held_out_sizes = static_cast<int>(held.size());
    for (int index : held) f.held_out_bytes.push_back(sizes[index]);
    f.min_bytes = sizes.front();
    f.max_bytes = sizes.back();
    for (bool o : f.fit.outlier) f.outliers += o;
    if (!held.empty()) {
      std::vector<double> fit_err, default_err;
      for (const MeasuredPoint& p : s.points) {
        if (!is_held(p.bytes)) continue;
        fit_err.push_back(std::abs(EnvelopeSeconds(f.fit.segments, p.bytes) / p.seconds - 1));
        const double model = CollectiveTime(key.collective, p.bytes, s.span, defaults, s.groups_sharing_links).seconds;
        default_err.push_back(std::abs(model / p.seconds - 1));
      }
      f.fit_error = Figures(fit_err);
      f.default_error = Figures(default_err);
      all_fit_err.insert(all_fit_err.end(), fit_err.begin(), fit_err.end());
      all_default_err.insert(all_default_err.end(), default_err.begin(), default_err.end());
    }
    f.busbw_at_large_gb_per_s = f.fit.segments.back().algbw_gb_per_s * BusBandwidthFactor(key.collective, key.gpus);
    f.line_busbw_gb_per_s =
        CollectiveTime(key.collective, kLineProbeBytes, s.span, line, s.groups_sharing_links).busbw_gb_per_s;
    if (f.busbw_at_large_gb_per_s > f.line_busbw_gb_per_s) {
      c.warnings.push_back(Name(key) + ": the fit implies " + Num(f.busbw_at_large_gb_per_s, 1) +
                           " GB/s bus bandwidth at large sizes, above the " + Num(f.line_busbw_gb_per_s, 1) +
                           " GB/s the cluster's line rates allow; check the cluster (--cluster) and the measurements");
    }
    c.series.push_back(std::move(f));
  }

  if (!all_fit_err.empty()) {
    c.fit_error = Figures(all_fit_err);
    c.default_error = Figures(all_default_err);
  }

  auto compute = ComputePointsFromMeasurements(foldbench);
  if (!compute.ok()) return compute.status();
  c.compute = compute.value();
  const bool any = ComputePoints(c, "gemm_bf16") + ComputePoints(c, "grouped_gemm_bf16") > 0;
  if (!any) c.compute = nullptr;
  if (c.series.empty() && !any) {
    std::string files;
    for (const CalibrationInput& in : c.inputs) files += (files.empty() ? " in " : ", ") + in.file;
    return Status::Error("nothing to fit" + files + ": no collective sweep, nccl-tests row or compute case");
  }
  return c;
}

namespace {

nlohmann::ordered_json FiguresJson(const std::optional<ErrorFigures>& f) {
  if (!f) return nullptr;
  return {{"points", f->points}, {"median", f->median}, {"max", f->max}};
}

nlohmann::ordered_json SeriesJson(const SeriesFit& f) {
  nlohmann::ordered_json segments = nlohmann::ordered_json::array();
  for (const AlphaBetaSegment& s : f.fit.segments) {
    segments.push_back({{"alpha_us", s.alpha_us}, {"algbw_gb_per_s", s.algbw_gb_per_s}});
  }
  const SeriesKey& k = f.series.key;
  return {{"collective", Name(k.collective)},
          {"gpus", k.gpus},
          {"placement", Name(k.placement)},
          {"ranks_per_domain", k.ranks_per_domain},
          {"segments", segments},
          {"sizes", {{"fitted", f.fitted_sizes}, {"held_out", f.held_out_sizes}, {"min_bytes", f.min_bytes},
                     {"max_bytes", f.max_bytes}, {"held_out_bytes", f.held_out_bytes}}},
          {"outliers", f.outliers},
          {"relative_scale", f.fit.relative_scale},
          {"busbw_gb_per_s_at_large", f.busbw_at_large_gb_per_s},
          {"line_busbw_gb_per_s", f.line_busbw_gb_per_s},
          {"held_out_error", {{"fit", FiguresJson(f.fit_error)}, {"defaults", FiguresJson(f.default_error)}}},
          {"source", [&] {
             std::string s;
             for (const std::string& src : f.series.sources) s += (s.empty() ? "" : ", ") + src;
             return s;
           }()}};
}

}  // namespace

nlohmann::ordered_json CalibrationFileJson(const Calibration& c, const ClusterSpec& cluster,
                                           const std::string& created, const std::string& command) {
  nlohmann::ordered_json inputs = nlohmann::ordered_json::array();
  for (const CalibrationInput& in : c.inputs) {
    inputs.push_back({{"file", in.file}, {"kind", in.kind}, {"sha256", in.sha256}, {"bytes", in.bytes}});
  }
  nlohmann::ordered_json fits = nlohmann::ordered_json::array();
  for (const SeriesFit& f : c.series) fits.push_back(SeriesJson(f));
  nlohmann::ordered_json out = {
      {"schema", kCalibrationSchema},
      {"description", "fitted by foldplan calibrate from " + std::to_string(c.inputs.size()) + " file(s)"},
      {"created", created},
      {"command", command},
      {"gpu", c.gpu},
      {"cluster", cluster.name},
      {"provenance", {{"inputs", inputs}, {"hosts", c.hosts}, {"gpus", c.gpus}, {"versions", c.versions}}},
      {"holdout", {{"share", c.options.holdout_share},
                   {"seed", c.options.seed},
                   {"rule", "round(share x sizes) of each series' sizes, drawn from all but its smallest and "
                            "largest; the fits below were made without them"}}},
      {"held_out_error", {{"fit", FiguresJson(c.fit_error)}, {"defaults", FiguresJson(c.default_error)}}},
      {"fits", fits}};
  if (!c.compute.is_null()) out["compute"] = c.compute;
  return out;
}

nlohmann::ordered_json CalibrationReportJson(const Calibration& c) {
  nlohmann::ordered_json series = nlohmann::ordered_json::array();
  for (const SeriesFit& f : c.series) series.push_back(SeriesJson(f));
  return {{"schema", kCalibrationReportSchema},
          {"gpu", c.gpu},
          {"holdout", {{"share", c.options.holdout_share}, {"seed", c.options.seed}}},
          {"held_out_error", {{"fit", FiguresJson(c.fit_error)}, {"defaults", FiguresJson(c.default_error)}}},
          {"series", series},
          {"compute_points", ComputePoints(c, "gemm_bf16") + ComputePoints(c, "grouped_gemm_bf16")},
          {"warnings", c.warnings}};
}

std::string CalibrationReportText(const Calibration& c) {
  using Align = TextTable::Align;
  TextTable t({"collective", "ranks", "class", "per domain", "sizes fit/held", "outliers", "segments (alpha us @ GB/s)",
               "busbw at large", "line", "held-out fit median/max", "defaults median/max"},
              {Align::kLeft, Align::kRight, Align::kLeft, Align::kRight, Align::kRight, Align::kRight, Align::kLeft,
               Align::kRight, Align::kRight, Align::kRight, Align::kRight});
  for (const SeriesFit& f : c.series) {
    std::string segs;
    for (const AlphaBetaSegment& s : f.fit.segments) {
      segs += (segs.empty() ? "" : ", ") + Num(s.alpha_us, 1) + " @ " + Num(s.algbw_gb_per_s, 2);
    }
    auto pair = [](const std::optional<ErrorFigures>& e) {
      return e ? Percent(e->median) + " / " + Percent(e->max) : std::string("n/a (too few sizes)");
    };
    const SeriesKey& k = f.series.key;
    t.AddRow({Name(k.collective), std::to_string(k.gpus), Name(k.placement), std::to_string(k.ranks_per_domain),
              std::to_string(f.fitted_sizes) + "/" + std::to_string(f.held_out_sizes), std::to_string(f.outliers), segs,
              Num(f.busbw_at_large_gb_per_s, 2), Num(f.line_busbw_gb_per_s, 1), pair(f.fit_error),
              pair(f.default_error)});
  }
  std::string out = "measured on " + (c.gpu.empty() ? std::string("an unnamed GPU") : c.gpu) + "; held out " +
                    Percent(c.options.holdout_share) + " of each series' sizes (seed " + std::to_string(c.options.seed) +
                    "); errors are |predicted / measured - 1| on those sizes only\n";
  out += t.Render();
  if (c.fit_error) {
    out += "all held-out points (" + std::to_string(c.fit_error->points) + "): fit median " + Percent(c.fit_error->median) +
           ", max " + Percent(c.fit_error->max) + "; defaults median " + Percent(c.default_error->median) + ", max " +
           Percent(c.default_error->max) + "\n";
  }
  if (!c.compute.is_null()) {
    out += "compute: " + std::to_string(ComputePoints(c, "gemm_bf16")) + " GEMM and " +
           std::to_string(ComputePoints(c, "grouped_gemm_bf16")) + " grouped-GEMM point(s) measured\n";
  }
  for (const std::string& w : c.warnings) out += "warning: " + w + "\n";
  return out;
}

}  // namespace foldplan
