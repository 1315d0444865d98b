// Time of one collective on one group, from where the group sits on the
// topology (its GroupSpan) and the model parameters (comm_params.h).
// Formulas and their sources: doc/cost-model-comm.md.
//
// Byte conventions are nccl-tests' (cost-model.md section 3), so that a
// measured nccl-tests curve can be compared with, or fitted into, this model:
//   kAllGather      bytes = the gathered total = n x the per-rank input
//   kReduceScatter  bytes = the total input    = n x the per-rank output
//   kAllReduce      bytes = the buffer (same on every rank)
//   kAllToAll       bytes = one rank's send buffer (n slices, its own included)
//   kAllToAllV      bytes = the same, with slices of different sizes (the
//                   MoE dispatcher's); modelled as kAllToAll of those bytes,
//                   a calibration may fit it apart
//   kSendRecv       bytes = the message one rank sends to its peer
// algbw = bytes / seconds; busbw = algbw x BusBandwidthFactor(collective, n):
// all-reduce 2(n-1)/n, all-gather / reduce-scatter / all-to-all (n-1)/n,
// send/recv 1.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "topology/topology.h"

namespace foldplan {

struct CommParams;

enum class Collective { kAllGather, kReduceScatter, kAllReduce, kAllToAll, kSendRecv, kAllToAllV };
inline constexpr int kCollectiveCount = 6;
// "all_gather", "reduce_scatter", "all_reduce", "all_to_all", "send_recv",
// "all_to_all_v" (also the names calibration files and foldbench use).
const char* Name(Collective collective);
// The collective of that name, or nullopt.
std::optional<Collective> CollectiveNamed(std::string_view name);

// nccl-tests' busbw / algbw factor for a group of n ranks (0 when n < 2).
double BusBandwidthFactor(Collective collective, int n);

// The bytes NVLS (NVLink SHARP, one NVLink domain) carries through each
// rank's NVLink port per direction, per byte of nccl-tests' `bytes`, for a
// group of n ranks (doc/cost-model-comm.md "NVLS"). Every multimem load
// and store passes the switch, the issuing rank's own copy included:
//   all-reduce      (n+1)/n: rank r reduces slice r (the switch reads it
//                   from all n ranks: each rank sends its whole buffer,
//                   and r gets the reduced slice, bytes/n), then multicasts
//                   it (r sends bytes/n; every rank receives every slice,
//                   the buffer); so bytes + bytes/n each way
//   reduce-scatter  1: the switch reads every slice from every rank
//   all-gather      1: every rank receives every slice, its own included
// Other collectives, or n < 2: 0 (NVLS does not run them).
double NvlsPortBytesPerByte(Collective collective, int n);

struct CollectiveCost {
  double seconds = 0;
  double algbw_gb_per_s = 0;   // bytes / seconds, 10^9 bytes/s (0 when nothing moves)
  double busbw_gb_per_s = 0;   // algbw x BusBandwidthFactor
  const char* algorithm = "none";  // "ring/Simple", "nvls/Simple", "alltoall/LL", "calibrated", ...
};

// The fastest applicable algorithm (and protocol) for `bytes` on a group
// placed as `span`. `groups_sharing_links` is the number of groups of the
// same kind whose ranks share one node's NICs at the same time (all of them
// run the collective concurrently); it only matters for traffic that leaves
// the NVLink domain. A group of fewer than 2 GPUs, or bytes <= 0, costs 0.
CollectiveCost CollectiveTime(Collective collective, double bytes, const GroupSpan& span,
                              const CommParams& params, int groups_sharing_links = 1);

// The flex dispatcher's forwarded all-to-all (DeepEP, HybridEP): one rank
// sends `network_bytes` through its NIC (RDMA, to the GPU on its rail in
// each destination NVLink domain) while the domain's forwarders move
// `nvlink_bytes` per rank over NVLink, concurrently:
//   t = alpha + max(nvlink_bytes / B_nvl', network_bytes / B_rank')
//   alpha = p2p_base[Simple] + nvlink_hop[Simple] (if nvlink_bytes > 0)
//         + network_hop[Simple] + spine (if network_bytes > 0)
// B_nvl' = achieved NVLink x flex_nvlink_factor, B_rank' = a rank's NIC
// share x flex_network_factor, neither above the line rate (CommParams).
// algbw = busbw = (nvlink_bytes + network_bytes) / t: these kernels are not
// nccl-tests collectives, so no bus factor. Nothing moves: 0 seconds.
CollectiveCost ForwardedAllToAllTime(double nvlink_bytes, double network_bytes, const GroupSpan& span,
                                     const CommParams& params, int groups_sharing_links = 1);

// The bytes one member sends per call through its NVLink port and through
// its NIC, by the data the algorithm moves (doc/cost-model-comm.md
// "Per-rank traffic"), on a group placed as `span` (n = span.gpus ranks over N =
// span.domains domains, G = n / N per domain):
//   all-gather, reduce-scatter  ring: (n - 1)/n x bytes out of each rank;
//                               NCCL's rings cross the N domain boundaries
//                               on every rank's NIC in turn, so 1/G of it
//                               through the NIC, the rest over NVLink
//   all-reduce                  ring: twice that (reduce-scatter + all-gather);
//                               inside one domain the lesser of that and
//                               NVLS's (n+1)/n x bytes (NvlsPortBytesPerByte)
//   all-to-all(-v)              bytes/n to each peer: (n - G)/n x bytes to
//                               other domains (NIC), (G - 1)/n x bytes over NVLink
//   send/recv                   bytes, over the NIC unless both in one domain
// A simulator uses it to share links between concurrent collectives
// (sim/engine.h); alone, a collective takes CollectiveTime's seconds.
// Of the NIC bytes, `spine_bytes` leave the rank's scalable unit (S =
// span.scalable_units > 1): a ring crosses S of its N domain boundaries
// between units (S/N of them), an all-to-all sends (1 - 1/S) x bytes to
// other units, a send/recv all of it when the group crosses the spine.
struct RankTraffic {
  double nvlink_bytes = 0;
  double network_bytes = 0;
  double spine_bytes = 0;  // of network_bytes
};
RankTraffic RankTrafficOf(Collective collective, double bytes, const GroupSpan& span);

// Every candidate CollectiveTime chose among (one per applicable algorithm
// and protocol), for tests, reports and "why this algorithm" questions.
// Empty when nothing moves.
std::vector<CollectiveCost> CollectiveCandidates(Collective collective, double bytes,
                                                 const GroupSpan& span, const CommParams& params,
                                                 int groups_sharing_links = 1);

}  // namespace foldplan
