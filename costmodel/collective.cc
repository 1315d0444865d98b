// Collective times: NCCL's algorithm/protocol model (ring, tree, NVLS) for
// all-gather, reduce-scatter and all-reduce; a hierarchical p2p model for
// all-to-all and send/recv, which NCCL does not tune. doc/cost-model-comm.md
// derives every formula.
#include "costmodel/collective.h"

#include <algorithm>
#include <cmath>

#include "costmodel/comm_params.h"

namespace foldplan {

const char* Name(Collective collective) {
  switch (collective) {
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kSendRecv: return "send_recv";
    case Collective::kAllToAllV: return "all_to_all_v";
  }
  return "?";
}

std::optional<Collective> CollectiveNamed(std::string_view name) {
  for (int c = 0; c < kCollectiveCount; ++c) {
    if (name == Name(static_cast<Collective>(c))) return static_cast<Collective>(c);
  }
  return std::nullopt;
}

double BusBandwidthFactor(Collective collective, int n) {
  if (n < 2) return 0;
  switch (collective) {
    case Collective::kAllReduce: return 2.0 * (n - 1) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
    case Collective::kAllToAllV: return static_cast<double>(n - 1) / n;
    case Collective::kSendRecv: return 1.0;
  }
  return 0;
}

double NvlsPortBytesPerByte(Collective collective, int n) {
  if (n < 2) return 0;
  switch (collective) {
    case Collective::kAllReduce: return static_cast<double>(n + 1) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter: return 1.0;
    case Collective::kAllToAll:
    case Collective::kAllToAllV:
    case Collective::kSendRecv: return 0;
  }
  return 0;
}

namespace {

constexpr NcclProtocol kProtocols[] = {NcclProtocol::kLL, NcclProtocol::kLL128, NcclProtocol::kSimple};

enum class Algorithm { kRing, kTree, kNvls, kAllToAll, kP2p };

// Static names, so that CollectiveCost can point at them.
const char* AlgorithmName(Algorithm algorithm, NcclProtocol p) {
  static constexpr const char* kNames[5][3] = {
      {"ring/LL", "ring/LL128", "ring/Simple"},
      {"tree/LL", "tree/LL128", "tree/Simple"},
      {"nvls/LL", "nvls/LL128", "nvls/Simple"},
      {"alltoall/LL", "alltoall/LL128", "alltoall/Simple"},
      {"p2p/LL", "p2p/LL128", "p2p/Simple"},
  };
  return kNames[static_cast<int>(algorithm)][static_cast<int>(p)];
}

// Receives every candidate: keeps the fastest, and lists all when asked to.
class Candidates {
 public:
  explicit Candidates(std::vector<CollectiveCost>* all = nullptr) : all_(all) {}
  void Add(const CollectiveCost& cost) {
    if (all_) all_->push_back(cost);
    if (!have_ || cost.seconds < best_.seconds) best_ = cost;
    have_ = true;
  }
  const CollectiveCost& best() const { return best_; }

 private:
  std::vector<CollectiveCost>* all_;
  CollectiveCost best_;
  bool have_ = false;
};

// What the model reads from a span, plus the links it may use.
struct GroupLinks {
  int n = 0;                // ranks
  int domains = 1;          // NVLink domains (NCCL's "nodes")
  int min_per_domain = 0;   // ranks in the emptiest domain
  int max_per_domain = 0;
  double nvlink = 0;        // achieved NVLink GB/s per GPU per direction
  double net_per_rank = 0;  // network GB/s one rank gets when all talk at once
  double spine_us = 0;      // extra latency per network step (0 unless crossing the spine)

  bool uses_nvlink() const { return max_per_domain >= 2; }
  bool uses_network() const { return domains >= 2; }
  int ranks_per_domain() const { return n / std::max(domains, 1); }
};

// A rank's network bandwidth. The group's ranks on one node, times the
// concurrent groups sharing that node, all send across the network at once;
// they share the node's NICs, and no rank gets more than one NIC (rail
// optimised: each GPU has its own NIC; PXN does not add NICs to a rank).
double NetworkPerRank(const GroupSpan& span, const CommParams& params, int groups_sharing_links) {
  const double link = span.crosses_spine ? params.spine_gb_per_s() : params.network_gb_per_s();
  const int nodes = std::max(span.nodes, 1);
  const int ranks_per_node = (span.gpus + nodes - 1) / nodes;
  const double talkers = static_cast<double>(ranks_per_node) * std::max(groups_sharing_links, 1);
  return link * std::min(1.0, params.nics_per_node / talkers);
}

GroupLinks LinksOf(const GroupSpan& span, const CommParams& params, int groups_sharing_links) {
  GroupLinks g;
  g.n = span.gpus;
  g.domains = std::max(span.domains, 1);
  g.min_per_domain = span.min_per_domain;
  g.max_per_domain = span.max_per_domain;
  if (g.max_per_domain < 1) {  // a span built by hand without counts: assume an even spread
    g.min_per_domain = g.n / g.domains;
    g.max_per_domain = (g.n + g.domains - 1) / g.domains;
  }
  g.nvlink = params.nvlink_gb_per_s();
  g.net_per_rank = NetworkPerRank(span, params, groups_sharing_links);
  g.spine_us = span.crosses_spine ? params.spine_hop_us : 0;
  return g;
}

// The bus bandwidth a ring (or tree) of channels sustains: NVLink between
// neighbours inside a domain, and at each domain boundary the NICs of that
// domain's ranks (NCCL stripes its channels over them). The emptiest domain
// has the fewest NICs to stripe over.
double RingBusBandwidth(const GroupLinks& g) {
  double bw = INFINITY;
  if (g.uses_nvlink()) bw = std::min(bw, g.nvlink);
  if (g.uses_network()) bw = std::min(bw, g.min_per_domain * g.net_per_rank);
  return bw;
}

CollectiveCost Finish(Collective collective, double bytes, int n, double latency_us,
                      double algbw_gb_per_s, const char* algorithm) {
  CollectiveCost cost;
  cost.seconds = latency_us * 1e-6 + bytes / (algbw_gb_per_s * 1e9);
  cost.algbw_gb_per_s = bytes / cost.seconds / 1e9;
  cost.busbw_gb_per_s = cost.algbw_gb_per_s * BusBandwidthFactor(collective, n);
  cost.algorithm = algorithm;
  return cost;
}

// NCCL ring: nsteps = 2(n-1) for all-reduce, n-1 otherwise; of those,
// nInter = 2(N-1) (resp. N-1) cross a domain boundary.
// latency = base + (nsteps - nInter) x intraHop + nInter x interHop;
// algbw = busbw x n / nsteps.
void AddRing(Collective c, double bytes, const GroupLinks& g, const CommParams& p,
             Candidates& out) {
  const bool all_reduce = c == Collective::kAllReduce;
  const int nsteps = all_reduce ? 2 * (g.n - 1) : g.n - 1;
  const int ninter = all_reduce ? 2 * (g.domains - 1) : g.domains - 1;
  const double bus = RingBusBandwidth(g);
  for (NcclProtocol proto : kProtocols) {
    double factor = 1;
    if (proto == NcclProtocol::kLL) {
      factor = (g.domains > 1 || all_reduce) ? p.ring_ll_factor : p.ring_ll_factor_intra;
    } else if (proto == NcclProtocol::kLL128) {
      factor = g.ranks_per_domain() < 2 ? p.ring_ll128_factor_one_per_node : p.ring_ll128_factor;
    }
    const double latency_us = p.ring_base_us[proto] + (nsteps - ninter) * p.ring_nvlink_hop_us[proto] +
                              ninter * (p.ring_network_hop_us[proto] + g.spine_us);
    const double algbw = bus * factor * g.n / nsteps;
    out.Add(Finish(c, bytes, g.n, latency_us, algbw, AlgorithmName(Algorithm::kRing, proto)));
  }
}

// NCCL tree all-reduce (across domains only: a chain inside each domain and
// a double binary tree between them).
// latency = base + 2 x ((n/N - 1) x intraHop + log2(N) x interHop);
// algbw = busbw x factor x 1/2 (every byte goes up and down the tree).
void AddTree(double bytes, const GroupLinks& g, const CommParams& p, Candidates& out) {
  if (!g.uses_network()) return;
  const double bus = RingBusBandwidth(g);
  const int levels = static_cast<int>(std::floor(std::log2(g.domains)));
  for (NcclProtocol proto : kProtocols) {
    const double factor = proto == NcclProtocol::kLL     ? p.tree_ll_factor
                          : proto == NcclProtocol::kLL128 ? p.tree_ll128_factor
                                                          : p.tree_simple_factor;
    const double latency_us =
        p.tree_base_us[proto] + 2 * ((g.ranks_per_domain() - 1) * p.tree_nvlink_hop_us[proto] +
                                     levels * (p.tree_network_hop_us[proto] + g.spine_us));
    const double algbw = bus * factor * 0.5;
    out.Add(Finish(Collective::kAllReduce, bytes, g.n, latency_us, algbw, AlgorithmName(Algorithm::kTree, proto)));
  }
}

// NVLS inside one NVLink domain (Simple only). The switch reduces and
// multicasts; each rank's port carries NvlsPortBytesPerByte x bytes each
// way at nvls_efficiency x NVLink, so
//   algbw = nvls_efficiency x NVLink / NvlsPortBytesPerByte
// (all-reduce: busbw = 2(n-1)/(n+1) x nvls_efficiency x NVLink). A
// calibrated nvls_allreduce_factor sets an all-reduce's busbw to that
// factor x nvls_efficiency x NVLink instead.
void AddNvls(Collective c, double bytes, const GroupLinks& g, const CommParams& p,
             Candidates& out) {
  if (!p.nvls_available || g.uses_network() || !g.uses_nvlink()) return;
  const double link = p.nvls_efficiency * g.nvlink;
  const double algbw = c == Collective::kAllReduce && p.nvls_allreduce_factor
                           ? *p.nvls_allreduce_factor * link / BusBandwidthFactor(c, g.n)
                           : link / NvlsPortBytesPerByte(c, g.n);
  out.Add(Finish(c, bytes, g.n, p.nvls_base_us + p.nvls_nvlink_hop_us, algbw, "nvls/Simple"));
}

// NCCL's p2p protocol is LL up to a threshold per peer message and Simple
// above it. Below the threshold we take Simple too when it is faster, so
// that time never falls as bytes grow (at the threshold LL's quarter
// bandwidth would otherwise make 2x the bytes cheaper).
struct ProtocolList {
  NcclProtocol items[2];
  int count;
  const NcclProtocol* begin() const { return items; }
  const NcclProtocol* end() const { return items + count; }
};
ProtocolList P2pProtocols(double peer_bytes, const CommParams& p) {
  if (peer_bytes <= p.p2p_ll_threshold_bytes) return {{NcclProtocol::kLL, NcclProtocol::kSimple}, 2};
  return {{NcclProtocol::kSimple, NcclProtocol::kSimple}, 1};
}

double P2pFactor(NcclProtocol proto, const CommParams& p) {
  return proto == NcclProtocol::kLL ? p.p2p_ll_factor : 1.0;
}

// Hierarchical all-to-all (cost-model.md section 3): a rank in a domain
// holding G of the n ranks sends P(G-1)/n over NVLink and P(n-G)/n over the
// network, concurrently (NCCL's grouped p2p; the flex dispatcher's
// forwarding is ForwardedAllToAllTime below):
// t = alpha + max(P(G-1)/(n B_nvl), P(n-G)/(n B_net)). The emptiest domain
// sends the largest network share, so G = min_per_domain.
void AddAllToAll(Collective c, double bytes, const GroupLinks& g, const CommParams& p, Candidates& out) {
  const int G = g.uses_network() ? g.min_per_domain : g.n;
  for (NcclProtocol proto : P2pProtocols(bytes / g.n, p)) {
    const double factor = P2pFactor(proto, p);
    const double nvlink_s = G >= 2 ? bytes * (G - 1) / g.n / (g.nvlink * factor * 1e9) : 0;
    const double network_s = g.n > G ? bytes * (g.n - G) / g.n / (g.net_per_rank * factor * 1e9) : 0;
    double hop_us = 0;
    if (G >= 2) hop_us = p.ring_nvlink_hop_us[proto];
    if (g.n > G) hop_us = std::max(hop_us, p.ring_network_hop_us[proto] + g.spine_us);
    const double transfer_s = std::max(nvlink_s, network_s);
    out.Add(Finish(c, bytes, g.n, p.p2p_base_us[proto] + hop_us,
                         bytes / transfer_s / 1e9, AlgorithmName(Algorithm::kAllToAll, proto)));
  }
}

// One message to a peer. The span is the group's (a pipeline group, a
// ring-CP group); its slowest neighbour pair crosses the network exactly
// when the group spans several domains (consecutive members must cross
// every boundary between the first and last), and the spine when it does.
void AddSendRecv(double bytes, const GroupLinks& g, const CommParams& p, Candidates& out) {
  const bool network = g.uses_network();
  for (NcclProtocol proto : P2pProtocols(bytes, p)) {
    const double bw = (network ? g.net_per_rank : g.nvlink) * P2pFactor(proto, p);
    const double hop_us = network ? p.ring_network_hop_us[proto] + g.spine_us : p.ring_nvlink_hop_us[proto];
    out.Add(Finish(Collective::kSendRecv, bytes, g.n, p.p2p_base_us[proto] + hop_us, bw,
                         AlgorithmName(Algorithm::kP2p, proto)));
  }
}

// A measured curve: the lower envelope of its alpha-beta segments.
void AddFit(Collective c, double bytes, int n, const CollectiveFit& fit, Candidates& out) {
  for (const AlphaBetaSegment& s : fit.segments) out.Add(Finish(c, bytes, n, s.alpha_us, s.algbw_gb_per_s, "calibrated"));
}

// Every applicable (algorithm, protocol), or the fit that replaces them.
void Evaluate(Collective collective, double bytes, const GroupSpan& span, const CommParams& params,
              int groups_sharing_links, Candidates& out) {
  if (span.gpus < 2 || !(bytes > 0)) return;
  if (!params.fits.empty()) {
    const PlacementClass placement = ClassOf(span);
    if (const CollectiveFit* fit = params.FindFit(collective, span.gpus, placement, RanksPerDomainOf(span));
        fit && !fit->segments.empty()) {
      AddFit(collective, bytes, span.gpus, *fit, out);
      if (fit->max_bytes > 0 && bytes > fit->max_bytes && params.misses) params.misses->RecordBeyond(collective, placement);
      return;
    }
    if (params.misses) params.misses->Record(collective, placement);
  }
  const GroupLinks g = LinksOf(span, params, groups_sharing_links);
  switch (collective) {
    case Collective::kAllReduce:
      AddRing(collective, bytes, g, params, out);
      AddTree(bytes, g, params, out);
      AddNvls(collective, bytes, g, params, out);
      break;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
      AddRing(collective, bytes, g, params, out);
      AddNvls(collective, bytes, g, params, out);
      break;
    case Collective::kAllToAll:
    case Collective::kAllToAllV: AddAllToAll(collective, bytes, g, params, out); break;
    case Collective::kSendRecv: AddSendRecv(bytes, g, params, out); break;
  }
}

}  // namespace

std::vector<CollectiveCost> CollectiveCandidates(Collective collective, double bytes, const GroupSpan& span,
                                                 const CommParams& params, int groups_sharing_links) {
  std::vector<CollectiveCost> all;
  Candidates out(&all);
  Evaluate(collective, bytes, span, params, groups_sharing_links, out);
  return all;
}

CollectiveCost CollectiveTime(Collective collective, double bytes, const GroupSpan& span,
                              const CommParams& params, int groups_sharing_links) {
  Candidates out;
  Evaluate(collective, bytes, span, params, groups_sharing_links, out);
  return out.best();
}

// DeepEP / HybridEP (doc/cost-model-comm.md section 3, "Forwarded
// all-to-all"). The two tiers run concurrently (DeepEP's RDMA senders and
// NVLink forwarders are different warps of one kernel), so the slower one
// sets the time; a token's first chunk crosses the network and then
// NVLink, so the latencies add. DeepEP's kernels are not NCCL's and publish
// no latency: a p2p transfer's Simple-protocol NCCL latency is charged per
// tier crossed.
CollectiveCost ForwardedAllToAllTime(double nvlink_bytes, double network_bytes, const GroupSpan& span,
                                     const CommParams& params, int groups_sharing_links) {
  CollectiveCost cost;
  nvlink_bytes = std::max(0.0, nvlink_bytes);
  network_bytes = std::max(0.0, network_bytes);
  if (span.gpus < 2 || !(nvlink_bytes + network_bytes > 0)) return cost;
  const GroupLinks g = LinksOf(span, params, groups_sharing_links);
  const double nvlink_gb = std::min(params.nvlink_line_gb_per_s, g.nvlink * params.flex_nvlink_factor);
  const double network_gb = std::min(params.nic_line_gb_per_s, g.net_per_rank * params.flex_network_factor);
  constexpr NcclProtocol kSimple = NcclProtocol::kSimple;
  double latency_us = params.p2p_base_us[kSimple];
  double transfer_s = 0;
  if (nvlink_bytes > 0) {
    latency_us += params.ring_nvlink_hop_us[kSimple];
    transfer_s = nvlink_bytes / (nvlink_gb * 1e9);
  }
  if (network_bytes > 0) {
    latency_us += params.ring_network_hop_us[kSimple] + g.spine_us;
    transfer_s = std::max(transfer_s, network_bytes / (network_gb * 1e9));
  }
  cost.seconds = latency_us * 1e-6 + transfer_s;
  cost.algbw_gb_per_s = (nvlink_bytes + network_bytes) / cost.seconds / 1e9;
  cost.busbw_gb_per_s = cost.algbw_gb_per_s;
  cost.algorithm = network_bytes > 0 ? "flex/rdma+nvlink" : "flex/nvlink";
  return cost;
}

RankTraffic RankTrafficOf(Collective collective, double bytes, const GroupSpan& span) {
  RankTraffic t;
  const double n = span.gpus;
  if (n < 2 || !(bytes > 0)) return t;
  const double domains = std::max(1, span.domains);
  const double g = std::max(1.0, n / domains);  // ranks per domain
  const bool one_domain = span.inside_one_domain || domains <= 1;
  switch (collective) {
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllReduce: {
      const double ring = (collective == Collective::kAllReduce ? 2 : 1) * (n - 1) / n * bytes;
      if (one_domain) {
        t.nvlink_bytes = collective == Collective::kAllReduce
                             ? std::min(ring, NvlsPortBytesPerByte(collective, span.gpus) * bytes)
                             : ring;
      } else {
        t.network_bytes = ring / g;
        t.nvlink_bytes = ring - t.network_bytes;
      }
      break;
    }
    case Collective::kAllToAll:
    case Collective::kAllToAllV:
      t.network_bytes = one_domain ? 0 : (n - g) / n * bytes;
      t.nvlink_bytes = (std::min(g, n) - 1) / n * bytes;
      break;
    case Collective::kSendRecv: (one_domain ? t.nvlink_bytes : t.network_bytes) = bytes; break;
  }
  const double units = std::max(1, span.scalable_units);
  if (span.crosses_spine && units > 1 && t.network_bytes > 0) {
    switch (collective) {
      case Collective::kAllToAll:
      case Collective::kAllToAllV: t.spine_bytes = std::min(t.network_bytes, (1 - 1 / units) * bytes); break;
      case Collective::kSendRecv: t.spine_bytes = t.network_bytes; break;
      default: t.spine_bytes = t.network_bytes * std::min(1.0, units / domains); break;
    }
  }
  return t;
}

}  // namespace foldplan
