// foldbench's compute cases as profile points, and the merged profile
// (compute_calibration.h).
#include "costmodel/compute_calibration.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/json_check.h"

namespace foldplan {
namespace {

using nlohmann::json;

constexpr int64_t kMaxDim = (int64_t(1) << 31) - 1;  // as compute_profile.cc
constexpr int64_t kMaxExperts = 1 << 20;
constexpr double kMinPositive = 1e-12;
constexpr double kMaxRate = 1e9;  // TFLOP/s
constexpr double kMaxSeconds = 1e6;

// Median of a non-empty list (mean of the middle two for an even count).
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// Times and rates of one shape, from every case that measured it.
struct Samples {
  std::vector<double> seconds, tflops;
};


class PointCollector {
 public:
  // Adds the points of one file; errors go to `errors` (the file's).
  // Returns whether the file gave a point.
  bool Add(const MeasurementSet& set, JsonErrors& errors) {
    bool any = false;
    for (size_t i = 0; i < set.ops.size(); ++i) {
      const MeasuredOp& op = set.ops[i];
      if (op.op != "compute" || !op.ran) continue;
      for (size_t j = 0; j < op.cases.size(); ++j) {
        any |= AddCase(op.cases[j], "/ops/" + std::to_string(i) + "/sizes/" + std::to_string(j),
                       errors);
      }
    }
    return any;
  }

  json Section() const {
    json gemm = json::array(), grouped = json::array();
    for (const auto& [shape, s] : gemm_) {
      gemm.push_back({{"M", shape[0]}, {"K", shape[1]}, {"N", shape[2]},
                      {"s", Median(s.seconds)}, {"tflops", Median(s.tflops)}});
    }
    for (const auto& [shape, s] : grouped_) {
      grouped.push_back({{"experts", shape[0]}, {"tokens_per_expert", shape[1]},
                         {"K", shape[2]}, {"N", shape[3]}, {"s", Median(s.seconds)},
                         {"tflops", Median(s.tflops)}});
    }
    return {{"gemm_bf16", gemm}, {"grouped_gemm_bf16", grouped}};
  }

 private:
  bool AddCase(const MeasuredCase& c, const std::string& pointer, JsonErrors& errors) {
    const std::string which = "compute case \"" + c.name + "\"";
    // Attention QK^T / PV: batched plain GEMMs, not the flash kernel of the
    // profile's attention table; no rate table holds them (header).
    if (c.name.rfind("attention ", 0) == 0) return false;
    if (c.wrong_elements > 0) {
      errors.Add(pointer, which + " has " + std::to_string(c.wrong_elements) +
                              " wrong element(s); refused, its time is not used");
      return false;
    }
    if (!c.gemm || !c.tflops_per_s || *c.tflops_per_s <= 0 || c.median_seconds <= 0) {
      errors.Add(pointer, which + " has no gemm shape or no time (foldbench's compute op "
                                  "writes both)");
      return false;
    }
    const MeasuredGemm& g = *c.gemm;
    Samples* s = nullptr;
    if (g.batch == 1) {
      s = &gemm_[{g.m, g.k, g.n}];
    } else if (c.name.rfind("expert ", 0) == 0) {
      s = &grouped_[{g.batch, g.m, g.k, g.n}];
    } else {
      errors.Add(pointer, which + " is " + std::to_string(g.batch) +
                              " batched GEMMs and not an expert group; no rate table holds it");
      return false;
    }
    s->seconds.push_back(c.median_seconds);
    s->tflops.push_back(*c.tflops_per_s);
    return true;
  }

  std::map<std::array<int64_t, 3>, Samples> gemm_;     // (M, K, N)
  std::map<std::array<int64_t, 4>, Samples> grouped_;  // (experts, tokens, K, N)
};

// The list at `key` of the section (possibly empty), each point read by
// `item` and then checked for unknown fields.
template <class F>
void ForEachPoint(CheckedObject& section, const std::string& key, F item) {
  ForEachObject(section, key, [&](CheckedObject& o) {
    item(o);
    o.Finish();
  });
}

// s and tflops of one point; the rate in FLOP/s.
double PointRate(CheckedObject& o) {
  o.Number("s", kMinPositive, kMaxSeconds);
  return o.Number("tflops", kMinPositive, kMaxRate) * 1e12;
}

// Records `shape` at `pointer`; an error when an earlier point had it.
template <class Shape>
void NoRepeat(std::map<Shape, std::string>& seen, const Shape& shape, const CheckedObject& o) {
  const auto [it, fresh] = seen.emplace(shape, o.pointer());
  if (!fresh) o.errors()->Add(o.pointer(), "the same shape as " + it->second + " (listed twice)");
}

}  // namespace

Result<json> ComputePointsFromMeasurements(const std::vector<MeasurementSet>& sets) {
  PointCollector points;
  std::vector<std::string> from;
  std::string gpu, gpu_file;
  std::string refusals;
  for (const MeasurementSet& set : sets) {
    JsonErrors errors(set.source);
    if (!points.Add(set, errors)) {
      if (!errors.empty()) refusals += (refusals.empty() ? "" : "\n") + errors.status().message();
      continue;
    }
    const std::string name = set.gpu_name();
    const int sharing = set.ranks_per_gpu();
    if (name.empty()) {
      errors.Add("/environment/devices", "no GPU name (\"GPU i of n (...): NAME, ...\"); the "
                                         "compute times cannot be given a GPU");
    } else if (sharing > 1) {
      errors.Add("/environment/devices", std::to_string(sharing) +
                                             " ranks share each GPU: the compute times are "
                                             "contended, not one GPU's; refused");
    } else if (gpu.empty()) {
      gpu = name;
      gpu_file = set.source;
    } else if (name != gpu) {
      errors.Add("/environment/devices", "measured on " + name + ", but " + gpu_file +
                                             " on " + gpu + "; calibrate one GPU at a time");
    }
    if (!errors.empty()) {
      refusals += (refusals.empty() ? "" : "\n") + errors.status().message();
      continue;
    }
    from.push_back(set.source);
  }
  if (!refusals.empty()) return Status::Error(refusals);
  json section = points.Section();
  section["gpu"] = gpu;
  section["points_from"] = from;
  return section;
}

Result<ComputeProfile> CalibratedComputeProfile(const ComputeProfile& shipped,
                                                const json& compute_section,
                                                const std::string& file, const GpuSpec& target) {
  JsonErrors errors(file);
  CheckedObject section(compute_section, kCalibrationComputePointer, &errors);
  section.String("gpu");
  std::vector<ComputeProfile::GemmPoint> gemm;
  std::vector<ComputeProfile::GroupedPoint> grouped;
  std::map<std::array<int64_t, 3>, std::string> gemm_seen;
  std::map<std::array<int64_t, 4>, std::string> grouped_seen;
  ForEachPoint(section, "gemm_bf16", [&](CheckedObject& o) {
    ComputeProfile::GemmPoint p;
    p.m = o.Int("M", 1, kMaxDim);
    p.k = o.Int("K", 1, kMaxDim);
    p.n = o.Int("N", 1, kMaxDim);
    p.flops_per_s = PointRate(o);
    NoRepeat(gemm_seen, {p.m, p.k, p.n}, o);
    gemm.push_back(p);
  });
  ForEachPoint(section, "grouped_gemm_bf16", [&](CheckedObject& o) {
    ComputeProfile::GroupedPoint p;
    // One expert is a plain GEMM (a gemm_bf16 point); the grouped lookup
    // never sees it, and as a grouped point it would bend the expert curve.
    p.experts = o.Int("experts", 2, kMaxExperts);
    p.tokens_per_expert = o.Int("tokens_per_expert", 1, kMaxDim);
    p.k = o.Int("K", 1, kMaxDim);
    p.n = o.Int("N", 1, kMaxDim);
    p.flops_per_s = PointRate(o);
    NoRepeat(grouped_seen, {p.experts, p.tokens_per_expert, p.k, p.n}, o);
    grouped.push_back(p);
  });
  // The measurements files read, for the record (empty: no compute op ran).
  if (!section.Has("points_from")) {
    errors.Add(section.Pointer("points_from"), "missing; expected a list of file names");
  } else if (const json& from = section.Raw("points_from");
             !from.is_array() ||
             !std::all_of(from.begin(), from.end(), [](const json& f) { return f.is_string(); })) {
    errors.Add(section.Pointer("points_from"),
               "expected a list of file names, found " + DescribeJsonValue(from));
  }
  section.Finish();
  if (!errors.empty()) return errors.status();
  return shipped.ScaledTo(target).WithMeasured(gemm, grouped);
}

}  // namespace foldplan
