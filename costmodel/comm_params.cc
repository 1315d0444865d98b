// Default communication parameters and the calibration file reader.
#include "costmodel/comm_params.h"

#include <array>
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

const CollectiveFit* CommParams::FindFit(Collective collective, int gpus,
                                         PlacementClass placement) const {
  for (const CollectiveFit& fit : fits) {
    if (fit.collective == collective && fit.gpus == gpus && fit.placement == placement) return &fit;
  }
  return nullptr;
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
constexpr std::array<NumberField, 21> kNumberFields = {{
    {"nvlink_line_gb_per_s", &CommParams::nvlink_line_gb_per_s, 1e-3, kMaxRate},
    {"nic_line_gb_per_s", &CommParams::nic_line_gb_per_s, 1e-3, kMaxRate},
    {"spine_oversubscription", &CommParams::spine_oversubscription, 1, 1024},
    {"nvlink_efficiency", &CommParams::nvlink_efficiency, 1e-3, 1},
    {"network_efficiency", &CommParams::network_efficiency, 1e-3, 1},
    {"nvls_efficiency", &CommParams::nvls_efficiency, 1e-3, 1},
    {"nvls_allreduce_factor", &CommParams::nvls_allreduce_factor, 1e-3, 4},
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

CollectiveFit ReadFit(const json& element, const std::string& pointer, JsonErrors& errors) {
  const json body = Without(element, "segments");
  CheckedObject fit(body, pointer, &errors);
  CollectiveFit out;
  // The names of Name(Collective); CollectiveNamed maps them back.
  out.collective = CollectiveNamed(fit.Enum("collective", {"all_gather", "reduce_scatter", "all_reduce", "all_to_all",
                                                           "send_recv", "all_to_all_v"}))
                       .value_or(Collective::kAllReduce);
  out.gpus = static_cast<int>(fit.Int("gpus", 2, 1 << 24));
  out.placement = PlacementOf(fit.Enum("placement", {"intra_domain", "inter_domain", "cross_spine"}));
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

void ReadFits(const json& fits, CommParams& p, JsonErrors& errors) {
  for (size_t i = 0; i < fits.size(); ++i) {
    const std::string pointer = "/fits/" + std::to_string(i);
    CollectiveFit fit = ReadFit(fits[i], pointer, errors);
    if (p.FindFit(fit.collective, fit.gpus, fit.placement)) {
      errors.Add(pointer, std::string("expected one fit per (collective, gpus, placement), found a second for (") +
                              Name(fit.collective) + ", " + std::to_string(fit.gpus) + ", " +
                              Name(fit.placement) + ")");
      continue;
    }
    p.fits.push_back(std::move(fit));
  }
}

}  // namespace

Result<CommParams> LoadCommParams(const std::string& path, const ClusterSpec& cluster) {
  Result<json> parsed = ParseJsonFile(path);
  if (!parsed.ok()) return parsed.status();
  const json& raw = parsed.value();

  JsonErrors errors(path);
  const json body = Without(raw, "fits");
  CheckedObject root(body, "", &errors);
  if (!errors.empty()) return errors.status();  // not an object
  const std::string schema = root.String("schema");
  if (!errors.empty()) return errors.status();
  if (schema != kCalibrationSchema) {
    errors.Add("/schema", std::string("expected \"") + kCalibrationSchema + "\", found \"" + schema + "\"");
    return errors.status();
  }

  CommParams p = DefaultCommParams(cluster);
  p.source = path;
  root.String("description", "");
  root.String("measured_on", "");
  if (std::optional<CheckedObject> params = root.OptionalObject("params")) ReadParams(*params, p);
  // Tiers after params: a measured tier bandwidth wins over an efficiency.
  if (std::optional<CheckedObject> tiers = root.OptionalObject("tiers")) ReadTiers(*tiers, p);
  root.Finish();
  if (const json* fits = ArrayField(raw, "fits", "/fits", errors)) ReadFits(*fits, p, errors);

  if (!errors.empty()) return errors.status();
  return p;
}

Result<CommParams> CommParamsFor(const ClusterSpec& cluster) {
  if (cluster.calibration.empty()) return DefaultCommParams(cluster);
  return LoadCommParams(cluster.calibration, cluster);
}

}  // namespace foldplan
