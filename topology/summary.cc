// TopologySummaryText / TopologySummaryJson: the cluster's shape, graph size,
// link tiers and a few example spans, for `foldplan topo`.
#include <cstdio>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/formats.h"
#include "topology/fabric_shape_internal.h"
#include "topology/topology.h"

namespace foldplan {
namespace {

using json = nlohmann::ordered_json;  // keys in the order written
using topology_internal::FabricShape;
using topology_internal::PairClass;

constexpr double kBitsPerByte = 8;

// One row of the tier table: a tier's path for a pair on one rail, and (with
// two or more rails) the same for a pair on different rails, which PXN sends
// over NVLink first.
struct TierRow {
  LinkTier tier;
  const char* label;
  const char* scope;
  const char* absent_reason;  // why a cluster has no such pair
  std::optional<std::pair<int, int>> pair = std::nullopt;
  TierInfo info{};
  std::optional<std::pair<int, int>> pxn_pair = std::nullopt;
  TierInfo pxn_info{};
};

std::vector<TierRow> TierRows(const Topology& topo) {
  const FabricShape shape = FabricShape::Of(topo.cluster());
  std::vector<TierRow> rows = {
      {LinkTier::kNvlink, "nvlink", "same NVLink domain", "one GPU per domain"},
      {LinkTier::kNetwork, "network (same SU)", "different NVLink domains, same scalable unit",
       "no scalable unit holds two domains"},
      {LinkTier::kSpine, "spine", "different scalable units", "one scalable unit"},
  };
  const PairClass same_rail[] = {PairClass::kSameDomain, PairClass::kSameSuSameRail,
                                 PairClass::kCrossSuSameRail};
  const PairClass cross_rail[] = {PairClass::kSameDomain, PairClass::kSameSuCrossRail,
                                  PairClass::kCrossSuCrossRail};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    TierRow& row = rows[i];
    row.pair = shape.CanonicalPair(same_rail[i]);
    if (row.pair) row.info = topo.PathBetween(row.pair->first, row.pair->second);
    if (row.tier != LinkTier::kNvlink) {
      row.pxn_pair = shape.CanonicalPair(cross_rail[i]);
      if (row.pxn_pair) row.pxn_info = topo.PathBetween(row.pxn_pair->first, row.pxn_pair->second);
    }
  }
  return rows;
}

struct ExampleSpan {
  const char* name;
  int first_gpu;
  GroupSpan span;
};

std::vector<ExampleSpan> ExampleSpans(const Topology& topo) {
  const ClusterSpec& cluster = topo.cluster();
  auto span_of_first = [&](int count) {
    std::vector<int> gpus(count);
    std::iota(gpus.begin(), gpus.end(), 0);
    return topo.Span(gpus);
  };
  return {
      {"one node", 0, span_of_first(cluster.gpus_per_node)},
      {"one domain", 0, span_of_first(cluster.nvlink_domain_gpus)},
      {"whole cluster", 0, span_of_first(topo.gpus())},
  };
}

// Up to two decimals, trailing zeros dropped: 450, 16.67, 0.6.
std::string Num(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  std::string text = buffer;
  while (!text.empty() && text.back() == '0') text.pop_back();
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

std::string Plural(int count, const std::string& one, const std::string& many) {
  return std::to_string(count) + " " + (count == 1 ? one : many);
}

std::string PadLeft(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}
std::string PadRight(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

std::string PerDomain(const GroupSpan& span) {
  if (span.min_per_domain == span.max_per_domain) return std::to_string(span.max_per_domain);
  return std::to_string(span.min_per_domain) + "-" + std::to_string(span.max_per_domain);
}

std::string TierList(const GroupSpan& span) {
  std::string text;
  for (const TierInfo& t : span.tiers) text += (text.empty() ? "" : ", ") + std::string(Name(t.tier));
  return text.empty() ? "-" : text;
}

json TierJson(const TierInfo& info) {
  return json{{"tier", Name(info.tier)},
              {"gb_per_s", info.gb_per_s},
              {"latency_us", info.latency_us},
              {"hops", info.hops}};
}

}  // namespace

std::string TopologySummaryText(const Topology& topo) {
  const ClusterSpec& c = topo.cluster();
  const Topology::Counts counts = topo.counts();
  const double nic_gb_per_s = c.nic_gbit_per_s / kBitsPerByte;
  std::ostringstream out;

  out << "cluster " << (c.name.empty() ? "(unnamed)" : c.name);
  // The first sentence of the description; the rest (sources) is in the file.
  if (!c.description.empty()) out << ": " << c.description.substr(0, c.description.find(". "));
  out << "\n";
  out << "  GPUs            " << counts.gpus << " x " << (c.gpu.name.empty() ? "GPU" : c.gpu.name)
      << ", " << c.gpus_per_node << " per node\n";
  out << "  nodes           " << c.nodes << "\n";
  out << "  NVLink domains  " << counts.nvswitch_domains << " of "
      << Plural(c.nvlink_domain_gpus, "GPU", "GPUs") << " (" << Plural(c.nodes_per_domain(), "node", "nodes") << "), "
      << Num(c.nvlink_gb_per_s) << " GB/s per GPU per direction\n";
  out << "  rails           " << c.nics_per_node << " ("
      << Plural(c.nics_per_node, "NIC", "NICs") << " per node at " << Num(c.nic_gbit_per_s) << " Gbit/s = " << Num(nic_gb_per_s)
      << " GB/s; local GPU g uses NIC g % " << c.nics_per_node << ")\n";
  const int sus = FabricShape::Of(c).scalable_units;
  out << "  scalable units  " << sus << " of up to " << c.fabric.su_nodes << " nodes\n";
  out << "  switches        " << counts.leaf_switches << " leaf (one per rail per SU), "
      << counts.spine_switches << " spine";
  if (counts.spine_switches > 0) {
    out << " (one plane per rail, oversubscription " << Num(c.fabric.spine_oversubscription)
        << ":1)";
  }
  out << "\n";
  out << "  graph           " << counts.vertices << " vertices (" << counts.gpus << " GPUs, "
      << counts.nvswitch_domains << " NVSwitch, " << counts.nics << " NICs, "
      << counts.leaf_switches << " leaf, " << counts.spine_switches << " spine), "
      << counts.edges << " edges\n";

  out << "\n  " << PadRight("tier", 19) << PadLeft("GB/s/GPU/dir", 12) << PadLeft("latency us", 12)
      << PadLeft("hops", 6) << "  example pair\n";
  std::optional<TierRow> pxn_example;
  for (const TierRow& row : TierRows(topo)) {
    out << "  " << PadRight(row.label, 19);
    if (!row.pair) {
      out << PadLeft("-", 12) << PadLeft("-", 12) << PadLeft("-", 6) << "  (" << row.absent_reason
          << ")\n";
      continue;
    }
    out << PadLeft(Num(row.info.gb_per_s), 12) << PadLeft(Num(row.info.latency_us), 12)
        << PadLeft(std::to_string(row.info.hops), 6) << "  GPU " << row.pair->first << " - GPU "
        << row.pair->second << "\n";
    if (row.pxn_pair && !pxn_example) pxn_example = row;
  }
  if (pxn_example) {
    out << "  PXN: between different rails traffic first crosses NVLink to the destination's "
           "rail: +"
        << Num(pxn_example->pxn_info.latency_us - pxn_example->info.latency_us) << " us, +"
        << (pxn_example->pxn_info.hops - pxn_example->info.hops) << " hop (e.g. GPU "
        << pxn_example->pxn_pair->first << " - GPU " << pxn_example->pxn_pair->second << ": "
        << Num(pxn_example->pxn_info.gb_per_s) << " GB/s, "
        << Num(pxn_example->pxn_info.latency_us) << " us)\n";
  }

  out << "\n  " << PadRight("example span", 15) << PadLeft("gpus", 7) << PadLeft("nodes", 7)
      << PadLeft("domains", 9) << PadLeft("rails", 7) << PadLeft("SUs", 5) << "  "
      << PadRight("per domain", 12) << "tiers\n";
  for (const ExampleSpan& example : ExampleSpans(topo)) {
    const GroupSpan& s = example.span;
    out << "  " << PadRight(example.name, 15) << PadLeft(std::to_string(s.gpus), 7)
        << PadLeft(std::to_string(s.nodes), 7) << PadLeft(std::to_string(s.domains), 9)
        << PadLeft(std::to_string(s.rails), 7) << PadLeft(std::to_string(s.scalable_units), 5)
        << "  " << PadRight(PerDomain(s), 12) << TierList(s) << "\n";
  }
  return out.str();
}

std::string TopologySummaryJson(const Topology& topo) {
  const ClusterSpec& c = topo.cluster();
  const Topology::Counts counts = topo.counts();

  json tiers = json::array();
  for (const TierRow& row : TierRows(topo)) {
    if (!row.pair) continue;
    json tier = TierJson(row.info);
    tier["scope"] = row.scope;
    tier["pair"] = {row.pair->first, row.pair->second};
    if (row.pxn_pair) {
      json pxn = TierJson(row.pxn_info);
      pxn["pair"] = {row.pxn_pair->first, row.pxn_pair->second};
      tier["cross_rail"] = pxn;
    }
    tiers.push_back(tier);
  }

  json spans = json::array();
  for (const ExampleSpan& example : ExampleSpans(topo)) {
    const GroupSpan& s = example.span;
    json span_tiers = json::array();
    for (const TierInfo& t : s.tiers) span_tiers.push_back(TierJson(t));
    spans.push_back(json{{"name", example.name},
                         {"first_gpu", example.first_gpu},
                         {"gpus", s.gpus},
                         {"nodes", s.nodes},
                         {"domains", s.domains},
                         {"rails", s.rails},
                         {"scalable_units", s.scalable_units},
                         {"min_per_domain", s.min_per_domain},
                         {"max_per_domain", s.max_per_domain},
                         {"inside_one_domain", s.inside_one_domain},
                         {"crosses_spine", s.crosses_spine},
                         {"tiers", span_tiers}});
  }

  const json out = {
      {"schema", kTopologySchema},
      {"cluster", {{"name", c.name}, {"source", c.source}, {"description", c.description}}},
      {"gpu", {{"name", c.gpu.name}, {"count", counts.gpus}, {"per_node", c.gpus_per_node}}},
      {"nodes", c.nodes},
      {"nvlink_domains",
       {{"count", counts.nvswitch_domains},
        {"gpus", c.nvlink_domain_gpus},
        {"nodes", c.nodes_per_domain()},
        {"gb_per_s", c.nvlink_gb_per_s}}},
      {"rails",
       {{"count", c.nics_per_node},
        {"nic_gbit_per_s", c.nic_gbit_per_s},
        {"nic_gb_per_s", c.nic_gbit_per_s / kBitsPerByte}}},
      {"scalable_units",
       {{"count", FabricShape::Of(c).scalable_units}, {"su_nodes", c.fabric.su_nodes}}},
      {"switches",
       {{"nvswitch_domains", counts.nvswitch_domains},
        {"leaf", counts.leaf_switches},
        {"spine", counts.spine_switches},
        {"spine_oversubscription", c.fabric.spine_oversubscription}}},
      {"graph",
       {{"vertices", counts.vertices},
        {"edges", counts.edges},
        {"gpus", counts.gpus},
        {"nvswitch_domains", counts.nvswitch_domains},
        {"nics", counts.nics},
        {"leaf_switches", counts.leaf_switches},
        {"spine_switches", counts.spine_switches}}},
      {"tiers", tiers},
      {"spans", spans},
  };
  return out.dump(2) + "\n";
}

}  // namespace foldplan
