#include "sim/expert_loads.h"

#include <algorithm>
#include <cmath>

#include "core/atomic_file.h"
#include "core/formats.h"
#include "core/json_check.h"
#include "core/mix64.h"

namespace foldplan {
namespace {

// A stream of uniforms in [0, 1) from a key (SplitMix64).
class Stream {
 public:
  explicit Stream(uint64_t key) : state_(key) {}
  double Uniform() {
    state_ += kSplitMix64Increment;
    return double(Mix64(state_) >> 11) * 0x1.0p-53;
  }
  // Irwin-Hall: the sum of 12 uniforms less 6 has mean 0, variance 1.
  double Normal() {
    double s = 0;
    for (int i = 0; i < 12; ++i) s += Uniform();
    return s - 6;
  }
  // Marsaglia-Tsang for shape a >= 1; a < 1 by the boost
  // Gamma(a) = Gamma(a + 1) U^(1/a).
  double Gamma(double a) {
    if (a < 1) return Gamma(a + 1) * std::pow(std::max(Uniform(), 0x1.0p-53), 1 / a);
    const double d = a - 1.0 / 3, c = 1 / std::sqrt(9 * d);
    for (;;) {
      double x = Normal(), v = 1 + c * x;
      if (v <= 0) continue;
      v = v * v * v;
      const double u = std::max(Uniform(), 0x1.0p-53);
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
    }
  }

 private:
  uint64_t state_;
};

uint64_t Key(uint64_t a, uint64_t b) { return Mix64(a ^ Mix64(b)); }

Result<double> Parameter(const std::string& text, const std::string& name, double min, bool open) {
  const std::string value = text.substr(name.size() + 1);
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(v) || v < min || (open && v == min) || v > 1e6) {
    return Status::Error("--imbalance " + text + ": expected " + name + ":X with X " + (open ? "> " : ">= ") +
                         (min == 0 ? "0" : std::to_string(min)) + " (and at most 1e6)");
  }
  return v;
}

}  // namespace

Result<LoadSpec> LoadExpertLoadsFile(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseExpertLoads(text.value(), path);
}

Result<LoadSpec> ParseExpertLoads(const std::string& text, const std::string& path) {
  auto doc = ParseJsonText(text, path);
  if (!doc.ok()) return doc.status();
  JsonErrors errors(path);
  CheckedObject root(doc.value(), "", &errors);
  const std::string schema = root.String("schema");
  if (errors.empty() && schema != kExpertLoadsSchema) errors.Add("/schema", std::string("expected \"") + kExpertLoadsSchema + "\"");
  LoadSpec spec;
  spec.distribution = LoadDistribution::kHistogram;
  spec.text = path;
  if (!root.Has("loads")) {
    errors.Add("/loads", "expected a list of per-expert loads (numbers >= 0)");
  } else {
    const nlohmann::json& loads = root.Raw("loads");
    if (!loads.is_array() || loads.empty() || loads.size() > size_t(kMaxHistogramExperts)) {
      errors.Add("/loads", "expected a list of 1 to " + std::to_string(kMaxHistogramExperts) +
                               " per-expert loads, found " + DescribeJsonValue(loads));
    } else {
      double total = 0;
      for (size_t i = 0; i < loads.size(); ++i) {
        if (!loads[i].is_number() || !std::isfinite(loads[i].get<double>()) || loads[i].get<double>() < 0) {
          errors.Add("/loads/" + std::to_string(i), "expected a number >= 0, found " + DescribeJsonValue(loads[i]));
          continue;
        }
        spec.histogram.push_back(loads[i].get<double>());
        total += spec.histogram.back();
      }
      if (errors.empty() && !(total > 0)) errors.Add("/loads", "expected at least one load > 0");
      // Each share is a load over the total: an infinite total makes every
      // share 0, a balanced step that the file does not say.
      if (errors.empty() && !std::isfinite(total)) errors.Add("/loads", "expected loads whose sum is finite, found a sum above 1.8e308");
    }
  }
  root.Finish();
  if (!errors.empty()) return errors.status();
  return spec;
}

Result<LoadSpec> ParseLoadSpec(const std::string& text) {
  LoadSpec spec;
  spec.text = text;
  if (text.empty() || text == "balanced") return spec;
  if (text == "uniform") {
    spec.distribution = LoadDistribution::kUniform;
    return spec;
  }
  if (text.rfind("zipf:", 0) == 0) {
    auto s = Parameter(text, "zipf", 0, false);
    if (!s.ok()) return s.status();
    spec.distribution = LoadDistribution::kZipf;
    spec.parameter = s.value();
    return spec;
  }
  if (text.rfind("dirichlet:", 0) == 0) {
    auto a = Parameter(text, "dirichlet", 0, true);
    if (!a.ok()) return a.status();
    spec.distribution = LoadDistribution::kDirichlet;
    spec.parameter = a.value();
    return spec;
  }
  if (text.find(':') != std::string::npos && text.find('/') == std::string::npos && text.find('.') == std::string::npos) {
    return Status::Error("--imbalance " + text + ": expected uniform, zipf:S, dirichlet:A or a " +
                         kExpertLoadsSchema + " file");
  }
  return LoadExpertLoadsFile(text);
}

Status CheckLoadSpecExperts(const LoadSpec& spec, int experts) {
  if (spec.balanced()) return Status();
  if (experts < 1) {
    return Status::Error("--imbalance " + spec.text + ": the model has no experts (a dense model): imbalance needs a MoE model");
  }
  if (spec.distribution == LoadDistribution::kHistogram && int(spec.histogram.size()) != experts) {
    return Status::Error(spec.text + ": /loads: expected " + std::to_string(experts) + " loads (the model's experts), found " +
                         std::to_string(spec.histogram.size()));
  }
  return Status();
}

Result<ExpertLoadDraw> ExpertLoadDraw::Create(const LoadSpec& spec, int experts, int ep, double rows_per_rank,
                                              double capacity_factor, uint64_t seed) {
  if (experts < 1 || ep < 1 || experts % ep != 0) {
    return Status::Error("imbalance: " + std::to_string(experts) + " experts do not split over ep " + std::to_string(ep));
  }
  if (Status s = CheckLoadSpecExperts(spec, experts); !s.ok()) return s;
  ExpertLoadDraw d;
  d.spec_ = spec;
  d.experts_ = experts;
  d.ep_ = ep;
  d.assignments_ = std::max(1.0, double(ep) * rows_per_rank);
  d.capacity_factor_ = capacity_factor;
  d.seed_ = seed;
  return d;
}

const std::vector<double>& ExpertLoadDraw::Shares(int layer) const {
  if (layer >= int(shares_.size())) shares_.resize(size_t(layer) + 1);
  std::vector<double>& out = shares_[size_t(layer)];
  if (!out.empty()) return out;
  const size_t e = size_t(experts_);
  std::vector<double> p(e, 1.0);
  Stream rng(Key(seed_, uint64_t(layer) + 1));
  switch (spec_.distribution) {
    case LoadDistribution::kZipf: {
      // A seeded permutation (Fisher-Yates) gives each expert its place i.
      std::vector<size_t> place(e);
      for (size_t i = 0; i < e; ++i) place[i] = i;
      for (size_t i = e; i > 1; --i) std::swap(place[i - 1], place[size_t(rng.Uniform() * double(i))]);
      for (size_t i = 0; i < e; ++i) p[i] = 1 / std::pow(double(place[i] + 1), spec_.parameter);
      break;
    }
    case LoadDistribution::kDirichlet:
      for (size_t i = 0; i < e; ++i) p[i] = rng.Gamma(spec_.parameter);
      break;
    case LoadDistribution::kHistogram: p = spec_.histogram; break;
    default: break;
  }
  double total = 0;
  for (double v : p) total += v;
  out.assign(size_t(ep_), 0.0);
  const size_t per = e / size_t(ep_);
  for (size_t i = 0; i < e; ++i) out[i / per] += total > 0 ? p[i] / total : 1.0 / double(e);
  return out;
}

void ExpertLoadDraw::Draw(uint64_t group, int layer, int microbatch, std::vector<double>& factors) const {
  factors.assign(size_t(ep_), 1.0);
  if (spec_.balanced()) return;
  if (capacity_factor_ > 0) {
    factors.assign(size_t(ep_), capacity_factor_);
    return;
  }
  const std::vector<double>& shares = Shares(layer);
  Stream rng(Key(Key(seed_, group), Key(uint64_t(layer), uint64_t(microbatch))));
  const double n = assignments_;
  double total = 0;
  for (size_t r = 0; r < factors.size(); ++r) {
    const double mean = n * shares[r];
    const double count = std::max(0.0, mean + std::sqrt(mean * (1 - shares[r])) * rng.Normal());
    factors[r] = count;
    total += count;
  }
  // Renormalised to the N assignments, as a mean factor of 1.
  for (double& f : factors) f = total > 0 ? f * ep_ / total : 1.0;
}

}  // namespace foldplan
