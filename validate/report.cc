#include "validate/report.h"

#include <cstdio>
#include <map>
#include <set>

#include "core/text_table.h"

namespace foldplan::validate {
namespace {

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
  doc["schema"] = "foldplan.measurements/v1";
  doc["environment"] = {
      {"hosts", UniqueHosts(env.hosts)},
      {"ranks", env.hosts.size()},
      {"backend", env.backend},
      {"mpi_version", env.library_version},
  };
  doc["plan"] = {{"file", input.file}, {"schema", input.schema}, {"layout", input.layout_text},
                 {"world_size", input.world_size}};
  doc["conventions"] =
      "time: seconds per operation, median / min / max across timed iterations and ranks; "
      "algbw = S / median time with S the bytes each rank sends; busbw = algbw x bus_factor, "
      "all-to-all bus_factor (n - 1) / n (nccl-tests); GB = 1e9 bytes";
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
    const GroupPlacement placement = PlaceGroups(input.groups.at(r.group_kind), env.hosts);
    op["placement"] = {{"class", env.placement_class},
                       {"max_nodes_per_group", placement.max_hosts_per_group},
                       {"ranks_per_node", placement.ranks_per_host}};
    json sizes = json::array();
    for (const auto& c : r.cases) {
      sizes.push_back({{"case", c.op_case.name},
                       {"elements_per_rank", c.op_case.elements_per_rank},
                       {"element_bytes", SizeOf(c.op_case.type)},
                       {"send_bytes_per_rank", c.op_case.send_bytes_per_rank},
                       {"time_s", {{"median", c.median_s}, {"min", c.min_s}, {"max", c.max_s}}},
                       {"algbw_gb_per_s", c.algbw_gb_per_s},
                       {"bus_factor", c.op_case.bus_factor},
                       {"busbw_gb_per_s", c.busbw_gb_per_s},
                       {"wrong_elements", c.wrong_elements}});
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
  for (const auto& r : results) {
    text += "\n" + r.op + " over " + r.group_kind + " groups";
    if (!r.skip_reason.empty()) {
      text += ": " + r.skip_reason + "\n";
      continue;
    }
    const GroupPlacement placement = PlaceGroups(input.groups.at(r.group_kind), env.hosts);
    text += " (" + std::to_string(r.group_count) + " groups of " + std::to_string(r.group_size) +
            ", widest spans " + std::to_string(placement.max_hosts_per_group) + " host(s))\n";
    for (const auto& note : r.notes) text += "  note: " + note + "\n";
    using A = TextTable::Align;
    TextTable table({"case", "bytes/rank", "median", "min", "max", "algbw GB/s", "busbw GB/s",
                     "wrong"},
                    {A::kLeft, A::kRight, A::kRight, A::kRight, A::kRight, A::kRight, A::kRight,
                     A::kRight});
    for (const auto& c : r.cases) {
      table.AddRow({c.op_case.name, WithCommas(c.op_case.send_bytes_per_rank), Seconds(c.median_s),
                    Seconds(c.min_s), Seconds(c.max_s), Format("%.2f", c.algbw_gb_per_s),
                    Format("%.2f", c.busbw_gb_per_s), WithCommas(c.wrong_elements)});
    }
    text += table.Render("  ");
  }
  text += "\nbusbw: all-to-all busbw = algbw x (n-1)/n, algbw = bytes each rank sends / median "
          "time (nccl-tests); times include pack and unpack\n";
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
