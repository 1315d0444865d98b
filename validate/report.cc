#include "validate/report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "core/formats.h"
#include "core/text_table.h"

namespace foldplan::validate {
namespace {

// How to read the numbers; printed under the table and kept in the JSON.
constexpr const char* kConventions =
    "conventions: time per operation, median / min / max across timed iterations and ranks "
    "(ulysses includes pack and unpack; dispatch is the whole dispatch and combine; pack "
    "times the kernels alone on rank 0). "
    "algbw = S / median time, GB = 1e9 B, with S (the bytes column) as in nccl-tests: the "
    "per-rank send buffer for all-to-all(-v), send/recv, ulysses and dispatch (T x top_k x "
    "hidden x 2 B), the gathered output for all-gather, the input for reduce-scatter, the "
    "buffer for all-reduce, and bytes read + written for pack. busbw = algbw x (n-1)/n, "
    "all-reduce 2(n-1)/n, send/recv and pack 1.";

std::string Format(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

std::string Seconds(double s) {
  if (s < 1e-3) return Format("%.1f us", s * 1e6);
  if (s < 1) return Format("%.3f ms", s * 1e3);
  return Format("%.3f s", s);
}

std::vector<std::string> UniqueHosts(const std::vector<std::string>& hosts) {
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (const auto& h : hosts) {
    if (seen.insert(h).second) unique.push_back(h);
  }
  return unique;
}

// Where one kind's groups run: the backend's class when it emulates the
// fabric, else inside one node or across nodes. A node stands for an NVLink
// domain, which is right for DGX / HGX nodes; foldbench does not know the
// cluster, so an NVL72 rack's nodes count as separate domains here.
std::string PlacementClass(const Environment& env, const GroupPlacement& placement) {
  if (env.placement_class.find("emulated") != std::string::npos) return env.placement_class;
  if (placement.max_hosts_per_group <= 1) return "inside one node (NVLink domain)";
  return "across " + std::to_string(placement.max_hosts_per_group) + " nodes (network)";
}

}  // namespace

GroupPlacement PlaceGroups(const GroupList& groups, const std::vector<std::string>& hosts) {
  GroupPlacement placement;
  for (const auto& group : groups) {
    std::vector<std::string> order;
    std::map<std::string, int> count;
    for (int rank : group) {
      const std::string& host = rank < static_cast<int>(hosts.size()) ? hosts[rank] : "?";
      if (count[host]++ == 0) order.push_back(host);
    }
    std::vector<int> per_host;
    for (const auto& h : order) per_host.push_back(count[h]);
    placement.max_hosts_per_group =
        std::max(placement.max_hosts_per_group, static_cast<int>(per_host.size()));
    placement.ranks_per_host.push_back(std::move(per_host));
  }
  return placement;
}

int64_t TotalWrongElements(const std::vector<OpResult>& results) {
  int64_t total = 0;
  for (const auto& r : results)
    for (const auto& c : r.cases) total += c.wrong_elements;
  return total;
}

nlohmann::ordered_json MeasurementsJson(const Environment& env, const BenchInput& input,
                                const std::vector<OpResult>& results) {
  using json = nlohmann::ordered_json;  // keeps "schema" first, fields in report order
  json doc;
  doc["schema"] = kMeasurementsSchema;
  doc["environment"] = {
      {"hosts", UniqueHosts(env.hosts)},
      {"ranks", env.hosts.size()},
      {"backend", env.backend},
      {"mpi_version", env.library_version},
      {"devices", env.device_facts},
  };
  doc["plan"] = {{"file", input.file}, {"schema", input.schema}, {"layout", input.layout_text},
                 {"world_size", input.world_size}};
  doc["conventions"] = kConventions;
  json ops = json::array();
  for (const auto& r : results) {
    json op = {{"op", r.op}, {"group_kind", r.group_kind}, {"group_count", r.group_count},
               {"notes", r.notes}};
    if (!r.skip_reason.empty()) {
      op["status"] = r.skip_reason;
      ops.push_back(op);
      continue;
    }
    op["status"] = "ran";
    op["group_size"] = r.group_size;
    const GroupPlacement placement =
        PlaceGroups(input.groups.contains(r.group_kind) ? input.groups.at(r.group_kind)
                                                        : GroupList{},
                    env.hosts);
    op["placement"] = {{"class", PlacementClass(env, placement)},
                       {"max_nodes_per_group", placement.max_hosts_per_group},
                       {"ranks_per_node", placement.ranks_per_host}};
    json sizes = json::array();
    for (const auto& c : r.cases) {
      json size = {{"case", c.op_case.name},
                   {"elements_per_rank", c.op_case.elements_per_rank},
                   {"element_bytes", SizeOf(c.op_case.type)},
                   {"send_bytes_per_rank", c.op_case.send_bytes_per_rank},
                   {"time_s", {{"median", c.median_s}, {"min", c.min_s}, {"max", c.max_s}}},
                   {"algbw_gb_per_s", c.algbw_gb_per_s},
                   {"bus_factor", c.op_case.bus_factor},
                   {"busbw_gb_per_s", c.busbw_gb_per_s}};
      if (c.op_case.flops > 0) {
        size["flops"] = c.op_case.flops;
        size["tflops_per_s"] = c.tflops_per_s;
      }
      if (const auto& g = c.op_case.gemm) {
        size["gemm"] = {{"batch", g->batch}, {"m", g->m}, {"n", g->n}, {"k", g->k}};
      }
      size["wrong_elements"] = c.wrong_elements;
      sizes.push_back(size);
    }
    op["sizes"] = sizes;
    ops.push_back(op);
  }
  doc["ops"] = ops;
  doc["wrong_elements"] = TotalWrongElements(results);
  return doc;
}

std::string ReportTable(const Environment& env, const BenchInput& input,
                        const std::vector<OpResult>& results) {
  std::string text;
  text += "foldbench: " + input.file + " (" + input.schema + ")\n";
  text += "  layout   " + input.layout_text + "\n";
  text += "  ranks    " + std::to_string(env.hosts.size()) + " on " +
          std::to_string(UniqueHosts(env.hosts).size()) + " host(s), backend " + env.backend +
          " (" + env.placement_class + ")\n";
  text += "  mpi      " + env.library_version.substr(0, env.library_version.find('\n')) + "\n";
  for (const auto& fact : env.device_facts) text += "  device   " + fact + "\n";
  for (const auto& r : results) {
    const bool grouped = input.groups.contains(r.group_kind);
    text += "\n" + r.op + (grouped ? " over " + r.group_kind + " groups" : " on every rank");
    if (!r.skip_reason.empty()) {
      text += ": " + r.skip_reason + "\n";
      continue;
    }
    if (grouped) {
      const GroupPlacement placement = PlaceGroups(input.groups.at(r.group_kind), env.hosts);
      text += " (" + std::to_string(r.group_count) + " groups of " +
              std::to_string(r.group_size) + ", widest spans " +
              std::to_string(placement.max_hosts_per_group) + " host(s); " +
              PlacementClass(env, placement) + ")";
    }
    text += "\n";
    for (const auto& note : r.notes) text += "  note: " + note + "\n";
    using A = TextTable::Align;
    const bool compute = std::any_of(r.cases.begin(), r.cases.end(),
                                     [](const CaseResult& c) { return c.op_case.flops > 0; });
    TextTable table({"case", compute ? "GFLOP" : "bytes S", "median", "min", "max",
                     compute ? "TFLOP/s" : "algbw GB/s", compute ? "" : "busbw GB/s", "wrong"},
                    {A::kLeft, A::kRight, A::kRight, A::kRight, A::kRight, A::kRight, A::kRight,
                     A::kRight});
    for (const auto& c : r.cases) {
      table.AddRow({c.op_case.name,
                    compute ? Format("%.1f", c.op_case.flops / 1e9)
                            : WithCommas(c.op_case.send_bytes_per_rank),
                    Seconds(c.median_s), Seconds(c.min_s), Seconds(c.max_s),
                    Format("%.2f", compute ? c.tflops_per_s : c.algbw_gb_per_s),
                    compute ? "" : Format("%.2f", c.busbw_gb_per_s),
                    WithCommas(c.wrong_elements)});
    }
    text += table.Render("  ");
  }
  text += std::string("\n") + kConventions + "\n";
  size_t cases_run = 0;
  for (const auto& r : results) cases_run += r.cases.size();
  const int64_t wrong = TotalWrongElements(results);
  if (wrong != 0) {
    text += "correctness: FAILED, " + std::to_string(wrong) + " wrong element(s)\n";
  } else if (cases_run == 0) {
    text += "correctness: nothing ran, nothing checked\n";
  } else {
    text += "correctness: every element checked, 0 wrong\n";
  }
  return text;
}

}  // namespace foldplan::validate
