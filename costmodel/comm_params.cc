// Default communication parameters and the calibration file reader.
#include "costmodel/comm_params.h"

#include <array>
#include <cctype>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/json_check.h"

namespace foldplan {

const char* Name(NcclProtocol protocol) {
  switch (protocol) {
    case NcclProtocol::kLL: return "LL";
    case NcclProtocol::kLL128: return "LL128";
    case NcclProtocol::kSimple: return "Simple";
  }
  return "?";
}

const char* Name(PlacementClass placement) {
  switch (placement) {
    case PlacementClass::kIntraDomain: return "intra_domain";
    case PlacementClass::kInterDomain: return "inter_domain";
    case PlacementClass::kCrossSpine: return "cross_spine";
  }
  return "?";
}

PlacementClass ClassOf(const GroupSpan& span) {
  if (span.crosses_spine) return PlacementClass::kCrossSpine;
  if (span.domains > 1) return PlacementClass::kInterDomain;
  return PlacementClass::kIntraDomain;
}

int RanksPerDomainOf(const GroupSpan& span) {
  if (span.domains <= 1) return span.gpus;
  if (span.min_per_domain >= 1) return span.min_per_domain;
  return span.gpus / span.domains;  // a span built by hand without counts: an even spread
}

const CollectiveFit* CommParams::FindFit(Collective collective, int gpus, PlacementClass placement,
                                         int ranks_per_domain) const {
  for (const CollectiveFit& fit : fits) {
    if (fit.collective == collective && fit.gpus == gpus && fit.placement == placement &&
        (ranks_per_domain == 0 || fit.ranks_per_domain == 0 || fit.ranks_per_domain == ranks_per_domain)) {
      return &fit;
    }
  }
  return nullptr;
}

std::vector<std::pair<Collective, PlacementClass>> FitMisses::Listed(const std::atomic<uint32_t>& set) {
  std::vector<std::pair<Collective, PlacementClass>> out;
  const uint32_t bits = set.load(std::memory_order_relaxed);
  for (int c = 0; c < kCollectiveCount; ++c) {
    for (int p = 0; p < 3; ++p) {
      if (bits & (uint32_t{1} << (c * 3 + p))) out.emplace_back(static_cast<Collective>(c), static_cast<PlacementClass>(p));
    }
  }
  return out;
}

namespace {

// The model number in a GPU name: the first word of 1-3 letters and 2-4
// digits ("NVIDIA H100 80GB HBM3" -> "H100"), a leading G of a Grace
// superchip dropped ("GB200" -> "B200"); "" when there is none.
std::string GpuModel(const std::string& name) {
  std::string upper;
  for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  size_t i = 0;
  while (i < upper.size()) {
    while (i < upper.size() && !std::isalnum(static_cast<unsigned char>(upper[i]))) ++i;
    size_t j = i;
    while (j < upper.size() && std::isalnum(static_cast<unsigned char>(upper[j]))) ++j;
    const std::string word = upper.substr(i, j - i);
    size_t letters = 0;
    while (letters < word.size() && std::isalpha(static_cast<unsigned char>(word[letters]))) ++letters;
    const size_t digits = word.size() - letters;
    bool all_digits = true;
    for (size_t k = letters; k < word.size(); ++k) all_digits &= std::isdigit(static_cast<unsigned char>(word[k])) != 0;
    if (letters >= 1 && letters <= 3 && digits >= 2 && digits <= 4 && all_digits) {
      return letters >= 2 && word[0] == 'G' ? word.substr(1) : word;
    }
    i = j;
  }
  return "";
}

std::string Lower(const std::string& s) {
  std::string out;
  for (char c : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool SameGpu(const std::string& a, const std::string& b) {
  const std::string ma = GpuModel(a), mb = GpuModel(b);
  if (!ma.empty() && !mb.empty()) return ma == mb;
  return Lower(a) == Lower(b);
}

double DefaultNvlinkEfficiency(const ClusterSpec& cluster) {
  // NCCL topo.h: SM90_NVLINK_BW 20.6 GB/s per NVLink 4 link (25 GB/s line
  // rate per direction), SM100_NVLINK_BW 40.1 per NVLink 5 link (50 GB/s).
  // NVLink 4 tops out at 18 x 25 = 450 GB/s per GPU per direction, so any
  // faster cluster is NVLink 5.
  constexpr double kNvlink4 = 20.6 / 25.0;
  constexpr double kNvlink5 = 40.1 / 50.0;
  return cluster.nvlink_gb_per_s > 450.0 ? kNvlink5 : kNvlink4;
}

namespace {

// NVLS needs NVSwitch SHARP, which arrived with Hopper's third-generation
// NVSwitch; A100 and V100 NVSwitch systems have none.
bool HasNvls(const ClusterSpec& cluster) {
  const std::string& name = cluster.gpu.name;
  return name.find("A100") == std::string::npos && name.find("V100") == std::string::npos &&
         cluster.nvlink_domain_gpus > 1;
}

}  // namespace

CommParams DefaultCommParams(const ClusterSpec& cluster) {
  CommParams p;
  p.nvlink_line_gb_per_s = cluster.nvlink_gb_per_s;
  p.nic_line_gb_per_s = cluster.nic_gbit_per_s / 8.0;
  p.spine_oversubscription = cluster.fabric.spine_oversubscription;
  p.nics_per_node = cluster.nics_per_node;
  p.nvlink_efficiency = DefaultNvlinkEfficiency(cluster);
  p.nvls_available = HasNvls(cluster);
  p.spine_hop_us = cluster.latency.spine_us;
  return p;
}

// ---------------------------------------------------------------------------
// Calibration files.

namespace {

using nlohmann::json;

constexpr double kMaxRate = 1e9;     // GB/s; anything above is a typo
constexpr double kMaxLatency = 1e7;  // us

// Every plain number of CommParams, by its JSON name under /params.
struct NumberField {
  const char* name;
  double CommParams::*member;
  double min, max;
};
constexpr std::array<NumberField, 20> kNumberFields = {{
    {"nvlink_line_gb_per_s", &CommParams::nvlink_line_gb_per_s, 1e-3, kMaxRate},
    {"nic_line_gb_per_s", &CommParams::nic_line_gb_per_s, 1e-3, kMaxRate},
    {"spine_oversubscription", &CommParams::spine_oversubscription, 1, 1024},
    {"nvlink_efficiency", &CommParams::nvlink_efficiency, 1e-3, 1},
    {"network_efficiency", &CommParams::network_efficiency, 1e-3, 1},
    {"nvls_efficiency", &CommParams::nvls_efficiency, 1e-3, 1},
    {"nvls_base_us", &CommParams::nvls_base_us, 0, kMaxLatency},
    {"nvls_nvlink_hop_us", &CommParams::nvls_nvlink_hop_us, 0, kMaxLatency},
    {"spine_hop_us", &CommParams::spine_hop_us, 0, kMaxLatency},
    {"ring_ll_factor", &CommParams::ring_ll_factor, 1e-3, 1},
    {"ring_ll_factor_intra", &CommParams::ring_ll_factor_intra, 1e-3, 1},
    {"ring_ll128_factor", &CommParams::ring_ll128_factor, 1e-3, 1},
    {"ring_ll128_factor_one_per_node", &CommParams::ring_ll128_factor_one_per_node, 1e-3, 1},
    {"tree_simple_factor", &CommParams::tree_simple_factor, 1e-3, 1},
    {"tree_ll_factor", &CommParams::tree_ll_factor, 1e-3, 1},
    {"tree_ll128_factor", &CommParams::tree_ll128_factor, 1e-3, 1},
    {"p2p_ll_threshold_bytes", &CommParams::p2p_ll_threshold_bytes, 0, 1e12},
    {"p2p_ll_factor", &CommParams::p2p_ll_factor, 1e-3, 1},
    // Relative to the modelled rates, which sit below the line rate (NVLink
    // at 0.80-0.82 of it): up to 4, the time capping the result at the line.
    {"flex_nvlink_factor", &CommParams::flex_nvlink_factor, 1e-3, 4},
    {"flex_network_factor", &CommParams::flex_network_factor, 1e-3, 4},
}};

// Every latency table, by its JSON name under /params.
struct TableField {
  const char* name;
  ProtocolTable CommParams::*member;
};
constexpr std::array<TableField, 7> kTableFields = {{
    {"ring_base_us", &CommParams::ring_base_us},
    {"tree_base_us", &CommParams::tree_base_us},
    {"ring_nvlink_hop_us", &CommParams::ring_nvlink_hop_us},
    {"tree_nvlink_hop_us", &CommParams::tree_nvlink_hop_us},
    {"ring_network_hop_us", &CommParams::ring_network_hop_us},
    {"tree_network_hop_us", &CommParams::tree_network_hop_us},
    {"p2p_base_us", &CommParams::p2p_base_us},
}};

// A table object: any of "ll", "ll128", "simple" (the others keep their value).
void ReadTable(CheckedObject& table, ProtocolTable& out) {
  out.ll = table.Number("ll", 0, kMaxLatency, out.ll);
  out.ll128 = table.Number("ll128", 0, kMaxLatency, out.ll128);
  out.simple = table.Number("simple", 0, kMaxLatency, out.simple);
  table.Finish();
}

void ReadParams(CheckedObject& params, CommParams& p) {
  for (const NumberField& f : kNumberFields) {
    if (params.Has(f.name)) p.*f.member = params.Number(f.name, f.min, f.max);
  }
  // Unset unless the file sets it (CommParams::nvls_allreduce_factor).
  if (params.Has("nvls_allreduce_factor")) p.nvls_allreduce_factor = params.Number("nvls_allreduce_factor", 1e-3, 4);
  for (const TableField& f : kTableFields) {
    if (std::optional<CheckedObject> table = params.OptionalObject(f.name)) ReadTable(*table, p.*f.member);
  }
  p.nics_per_node = static_cast<int>(params.Int("nics_per_node", 1, 1 << 20, p.nics_per_node));
  p.nvls_available = params.Bool("nvls_available", p.nvls_available);
  params.Finish();
}

// "tiers": measured per-tier bandwidth (per GPU per direction, as nccl-tests'
// busbw of a ring on that tier) and Simple-protocol per-step latency. A
// bandwidth becomes the efficiency against the line rate, so that the rest of
// the model (NVLS, sharing, spine) scales from it.
void ReadTiers(CheckedObject& tiers, CommParams& p) {
  if (std::optional<CheckedObject> nvlink = tiers.OptionalObject("nvlink")) {
    if (nvlink->Has("gb_per_s"))
      p.nvlink_efficiency = nvlink->Number("gb_per_s", 1e-3, p.nvlink_line_gb_per_s) / p.nvlink_line_gb_per_s;
    if (nvlink->Has("hop_us")) {
      const double hop = nvlink->Number("hop_us", 0, kMaxLatency);
      p.ring_nvlink_hop_us.simple = p.tree_nvlink_hop_us.simple = hop;
    }
    nvlink->Finish();
  }
  if (std::optional<CheckedObject> network = tiers.OptionalObject("network")) {
    if (network->Has("gb_per_s"))
      p.network_efficiency = network->Number("gb_per_s", 1e-3, p.nic_line_gb_per_s) / p.nic_line_gb_per_s;
    if (network->Has("hop_us")) {
      const double hop = network->Number("hop_us", 0, kMaxLatency);
      p.ring_network_hop_us.simple = p.tree_network_hop_us.simple = hop;
    }
    network->Finish();
  }
  if (std::optional<CheckedObject> spine = tiers.OptionalObject("spine")) {
    // The spine share is the network bandwidth over the oversubscription.
    if (spine->Has("gb_per_s")) {
      const double gb = spine->Number("gb_per_s", 1e-3, p.network_gb_per_s());
      p.spine_oversubscription = p.network_gb_per_s() / gb;
    }
    p.spine_hop_us = spine->Number("hop_us", 0, kMaxLatency, p.spine_hop_us);
    spine->Finish();
  }
  tiers.Finish();
}

// Arrays of objects are read element by element, each as its own
// CheckedObject, so that errors carry the element's pointer (/fits/2/gpus).
const json* ArrayField(const json& object, const std::string& key, const std::string& pointer,
                       JsonErrors& errors) {
  auto it = object.find(key);
  if (it == object.end()) return nullptr;
  if (!it->is_array()) {
    errors.Add(pointer, "expected an array, found " + DescribeJsonValue(*it));
    return nullptr;
  }
  return &*it;
}

// The object without `key` (read separately as an array).
json Without(const json& object, const char* key) {
  json copy = object;
  if (copy.is_object()) copy.erase(key);
  return copy;
}

PlacementClass PlacementOf(const std::string& name) {
  for (PlacementClass p : {PlacementClass::kIntraDomain, PlacementClass::kInterDomain, PlacementClass::kCrossSpine}) {
    if (name == Name(p)) return p;
  }
  return PlacementClass::kIntraDomain;  // unreachable
}

// What `foldplan calibrate` writes beside a v2 fit's curve (its sizes,
// outliers, implied bus bandwidth, held-out errors): checked for type; of
// it the model keeps the largest size measured.
void ReadFitReport(CheckedObject& fit, CollectiveFit& out) {
  if (std::optional<CheckedObject> sizes = fit.OptionalObject("sizes")) {
    sizes->Int("fitted", 0, int64_t{1} << 40);
    sizes->Int("held_out", 0, int64_t{1} << 40);
    sizes->Number("min_bytes", 0, 1e18);
    out.max_bytes = sizes->Number("max_bytes", 0, 1e18);
    if (sizes->Has("held_out_bytes")) sizes->Raw("held_out_bytes");  // a report
    sizes->Finish();
  }
  fit.Int("outliers", 0, int64_t{1} << 40, 0);
  fit.Number("relative_scale", 0, 1e9, 0);
  fit.Number("busbw_gb_per_s_at_large", 0, kMaxRate, 0);
  fit.Number("line_busbw_gb_per_s", 0, kMaxRate, 0);
  if (fit.Has("held_out_error")) fit.Raw("held_out_error");  // a report: any shape calibrate wrote
  fit.String("source", "");
}

CollectiveFit ReadFit(const json& element, const std::string& pointer, JsonErrors& errors, bool v2) {
  const json body = Without(element, "segments");
  CheckedObject fit(body, pointer, &errors);
  CollectiveFit out;
  // The names of Name(Collective); CollectiveNamed maps them back.
  out.collective = CollectiveNamed(fit.Enum("collective", {"all_gather", "reduce_scatter", "all_reduce", "all_to_all",
                                                           "send_recv", "all_to_all_v"}))
                       .value_or(Collective::kAllReduce);
  out.gpus = static_cast<int>(fit.Int("gpus", 2, 1 << 24));
  out.placement = PlacementOf(fit.Enum("placement", {"intra_domain", "inter_domain", "cross_spine"}));
  out.ranks_per_domain = static_cast<int>(fit.Int("ranks_per_domain", 1, out.gpus, 0));
  if (v2) ReadFitReport(fit, out);
  fit.Finish();

  const json* segments = element.is_object() ? ArrayField(element, "segments", pointer + "/segments", errors) : nullptr;
  if (element.is_object() && !element.contains("segments")) {
    errors.Add(pointer + "/segments", "missing; expected a non-empty array of {alpha_us, algbw_gb_per_s}");
  } else if (segments && segments->empty()) {
    errors.Add(pointer + "/segments", "expected a non-empty array, found []");
  }
  if (segments) {
    for (size_t i = 0; i < segments->size(); ++i) {
      CheckedObject seg((*segments)[i], pointer + "/segments/" + std::to_string(i), &errors);
      AlphaBetaSegment s;
      s.alpha_us = seg.Number("alpha_us", 0, kMaxLatency);
      s.algbw_gb_per_s = seg.Number("algbw_gb_per_s", 1e-6, kMaxRate);
      seg.Finish();
      out.segments.push_back(s);
    }
  }
  return out;
}

void ReadFits(const json& fits, CommParams& p, JsonErrors& errors, bool v2) {
  for (size_t i = 0; i < fits.size(); ++i) {
    const std::string pointer = "/fits/" + std::to_string(i);
    CollectiveFit fit = ReadFit(fits[i], pointer, errors, v2);
    if (p.FindFit(fit.collective, fit.gpus, fit.placement, fit.ranks_per_domain)) {
      errors.Add(pointer, std::string("expected one fit per (collective, gpus, placement, ranks_per_domain), "
                                      "found a second for (") +
                              Name(fit.collective) + ", " + std::to_string(fit.gpus) + ", " +
                              Name(fit.placement) + ", " + std::to_string(fit.ranks_per_domain) + ")");
      continue;
    }
    p.fits.push_back(std::move(fit));
  }
}

}  // namespace

Result<CommParams> LoadCommParams(const std::string& path, const ClusterSpec& cluster, const CalibrationUse& use) {
  Result<json> parsed = ParseJsonFile(path);
  if (!parsed.ok()) return parsed.status();
  return ParseCommParams(parsed.value(), path, cluster, use);
}

Result<CommParams> ParseCommParams(const nlohmann::json& raw, const std::string& path, const ClusterSpec& cluster,
                                   const CalibrationUse& use) {
  JsonErrors errors(path);
  const json body = Without(raw, "fits");
  CheckedObject root(body, "", &errors);
  if (!errors.empty()) return errors.status();  // not an object
  const std::string schema = root.String("schema");
  if (!errors.empty()) return errors.status();
  if (schema != kCalibrationSchema && schema != kCalibrationSchemaV1) {
    errors.Add("/schema", std::string("expected \"") + kCalibrationSchema + "\" or \"" + kCalibrationSchemaV1 +
                              "\", found \"" + schema + "\"");
    return errors.status();
  }
  const bool v2 = schema == kCalibrationSchema;

  CommParams p = DefaultCommParams(cluster);
  p.source = path;
  root.String("description", "");
  root.String("measured_on", "");
  if (v2) {
    p.calibrated_gpu = root.String("gpu", "");
    root.String("created", "");
    root.String("command", "");
    root.String("cluster", "");
    // Written by calibrate for people and for the compute profile
    // (costmodel/compute_calibration.h reads "compute").
    for (const char* key : {"provenance", "holdout", "held_out_error", "compute"}) {
      if (root.Has(key)) root.Raw(key);
    }
  }
  if (std::optional<CheckedObject> params = root.OptionalObject("params")) ReadParams(*params, p);
  // Tiers after params: a measured tier bandwidth wins over an efficiency.
  if (std::optional<CheckedObject> tiers = root.OptionalObject("tiers")) ReadTiers(*tiers, p);
  root.Finish();
  if (const json* fits = ArrayField(raw, "fits", "/fits", errors)) ReadFits(*fits, p, errors, v2);
  if (!errors.empty()) return errors.status();

  if (!p.calibrated_gpu.empty() && !SameGpu(p.calibrated_gpu, cluster.gpu.name) && !use.allow_other_gpu) {
    errors.Add("/gpu", "calibrated on \"" + p.calibrated_gpu + "\", but the cluster's GPU is \"" +
                           cluster.gpu.name + "\"; pass --force-calibration to use it anyway");
    return errors.status();
  }
  if (!p.fits.empty()) p.misses = std::make_shared<FitMisses>();
  return p;
}

Result<CommParams> CommParamsFor(const ClusterSpec& cluster, const CalibrationUse& use) {
  if (cluster.calibration.empty()) return DefaultCommParams(cluster);
  return LoadCommParams(cluster.calibration, cluster, use);
}

}  // namespace foldplan
