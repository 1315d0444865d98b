// collective: the cost model's time for one collective across sizes, in
// nccl-tests' conventions (costmodel/collective.h), for one group placed
// `ranks_per_domain` to each of the first NVLink domains of the cluster.
#include <cinttypes>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/calibrate_command.h"
#include "cli/output.h"
#include "cli/usage_errors.h"
#include "core/formats.h"
#include "costmodel/collective.h"
#include "costmodel/comm_params.h"
#include "topology/topology.h"

namespace foldplan {
namespace {

constexpr int64_t kMaxCollectiveBytes = int64_t{1} << 40;  // 1 TiB: above any GPU's memory

// "8G" -> 8 x 2^30; "1024" -> 1024; nullopt when malformed or out of [1, 1 TiB].
std::optional<int64_t> ParseBytes(const std::string& text) {
  if (text.empty()) return std::nullopt;
  int shift = 0;
  std::string digits = text;
  switch (text.back()) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    default: break;
  }
  if (shift) digits.pop_back();
  if (digits.empty() || digits.size() > 13 || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const int64_t value = std::stoll(digits) << shift;
  if (value < 1 || value > kMaxCollectiveBytes) return std::nullopt;
  return value;
}

Result<std::pair<int64_t, int64_t>> ParseRange(const std::string& text) {
  const size_t colon = text.find(':');
  const auto lo = ParseBytes(text.substr(0, colon));
  const auto hi = colon == std::string::npos ? lo : ParseBytes(text.substr(colon + 1));
  if (!lo || !hi || *lo > *hi) {
    return Status::Error("--bytes: expected MIN:MAX with sizes in [1, 1T] such as 1K:8G (K, M, G: 2^10, 2^20, 2^30), found \"" +
                         text + "\"");
  }
  return std::make_pair(*lo, *hi);
}

std::string Fmt(const char* format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

}  // namespace

int RunCollective(const CollectiveCliOptions& options, std::ostream& out, std::ostream& err) {
  const std::optional<Collective> collective = CollectiveNamed(options.op);
  if (!collective) {
    return Usage(err, Status::Error("--op: expected all_reduce, all_gather, reduce_scatter, all_to_all, all_to_all_v "
                                    "or send_recv, found \"" + options.op + "\"" +
                                    DidYouMean(options.op, {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                                            "all_to_all_v", "send_recv"})));
  }
  if (options.ranks < 2 || options.ranks > kMaxWorldSize) {
    return Usage(err, Status::Error("--ranks: expected an integer in [2, " + std::to_string(kMaxWorldSize) +
                                    "], found " + std::to_string(options.ranks)));
  }
  if (options.ranks_per_domain && (*options.ranks_per_domain < 1 || *options.ranks_per_domain > options.ranks)) {
    return Usage(err, Status::Error("--ranks-per-domain: expected an integer in [1, --ranks], found " +
                                    std::to_string(*options.ranks_per_domain)));
  }
  auto range = ParseRange(options.bytes);
  if (!range.ok()) return Usage(err, range.status());
  if (Status s = CheckInputFlags(options.inputs); !s.ok()) return Usage(err, s);

  auto cluster = LoadClusterAlone(options.inputs);
  if (!cluster.ok()) return Fail(err, cluster.status());
  const ClusterSpec& c = cluster.value();
  const int per_domain = options.ranks_per_domain.value_or(std::min(options.ranks, c.nvlink_domain_gpus));
  if (options.ranks % per_domain != 0) {
    return Fail(err, Status::Error(std::to_string(options.ranks) + " ranks do not split into domains of " +
                                   std::to_string(per_domain) + " (--ranks-per-domain)"));
  }
  const int domains = options.ranks / per_domain;
  if (per_domain > c.nvlink_domain_gpus || domains > c.domains()) {
    return Fail(err, Status::Error(std::to_string(domains) + " NVLink domain(s) of " + std::to_string(per_domain) +
                                   " ranks do not fit cluster " + c.name + " (" + std::to_string(c.domains()) +
                                   " domains of " + std::to_string(c.nvlink_domain_gpus) + " GPUs)"));
  }
  auto topo = Topology::Build(c);
  if (!topo.ok()) return Fail(err, topo.status());
  auto params = CommParamsFor(c, CalibrationUse{options.inputs.force_calibration});
  if (!params.ok()) return Fail(err, params.status());
  WarnAboutCalibrationGpu(params.value(), c, err);
  std::vector<int> gpus;
  for (int d = 0; d < domains; ++d) {
    for (int g = 0; g < per_domain; ++g) gpus.push_back(d * c.nvlink_domain_gpus + g);
  }
  const GroupSpan span = topo.value().Span(gpus);

  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::string table;
  for (int64_t bytes = range.value().first; bytes <= range.value().second; bytes *= 2) {
    const CollectiveCost cost = CollectiveTime(*collective, static_cast<double>(bytes), span, params.value());
    rows.push_back({{"bytes", bytes}, {"time_us", cost.seconds * 1e6}, {"algbw_gb_per_s", cost.algbw_gb_per_s},
                    {"busbw_gb_per_s", cost.busbw_gb_per_s}, {"algorithm", cost.algorithm}});
    char line[160];
    std::snprintf(line, sizeof line, "%13" PRId64 "  %10.2f  %7.2f  %7.2f  %s\n", bytes, cost.seconds * 1e6,
                  cost.algbw_gb_per_s, cost.busbw_gb_per_s, cost.algorithm);
    table += line;
    if (bytes > range.value().second / 2) break;  // no overflow past the largest
  }
  const std::string placement = Name(ClassOf(span));
  if (options.json) {
    out << nlohmann::ordered_json{{"schema", kCollectiveTableSchema},
                                  {"cluster", c.name},
                                  {"op", Name(*collective)},
                                  {"ranks", options.ranks},
                                  {"ranks_per_domain", per_domain},
                                  {"placement", placement},
                                  {"calibration", params.value().source},
                                  {"conventions", "nccl-tests: algbw = bytes / time, busbw = algbw x bus factor " +
                                                      Fmt("%.4g", BusBandwidthFactor(*collective, options.ranks)) +
                                                      "; GB = 1e9 bytes"},
                                  {"rows", rows}}
               .dump(1)
        << "\n";
  } else {
    out << "# foldplan collective: " << Name(*collective) << " on " << options.ranks << " ranks, " << per_domain
        << " per NVLink domain (" << placement << ") of cluster " << c.name << "; calibration: "
        << params.value().source << "\n"
        << "# busbw = algbw x " << Fmt("%.4g", BusBandwidthFactor(*collective, options.ranks))
        << " (nccl-tests' factor); GB = 1e9 bytes\n"
        << "#        size        time    algbw    busbw  algorithm\n"
        << "#         (B)        (us)   (GB/s)   (GB/s)\n"
        << table;
  }
  WarnAboutFitMisses(params.value(), err);
  return 0;
}

}  // namespace foldplan
