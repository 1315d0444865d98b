// Every parameter of the communication model, each with its source. The
// defaults come from the cluster's line rates and NCCL's own tuning model
// (src/graph/tuning.cc, topo.h; NCCL 2.2x; ../shared/reference/cost-model.md
// section 2); a calibration file (`foldplan.calibration/v2`, written by
// `foldplan calibrate`, or a hand-written v1; doc/cost-model-comm.md
// section 4) overrides any of them and may add measured alpha-beta fits per
// (collective, group size, placement class, ranks per NVLink domain).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/formats.h"
#include "core/status.h"
#include "costmodel/collective.h"
#include "inputs/cluster.h"

namespace foldplan {

// NCCL's three protocols. LL: 8-byte stores carrying 4 bytes of data and a
// flag (lowest latency, lowest bandwidth); LL128: 128-byte lines with 120
// bytes of data (NVLink only in practice); Simple: plain copies with fences
// (full bandwidth, highest latency).
enum class NcclProtocol { kLL, kLL128, kSimple };
inline constexpr int kNcclProtocolCount = 3;
const char* Name(NcclProtocol protocol);  // "LL", "LL128", "Simple"

// One number per protocol, as NCCL's latency tables hold them.
struct ProtocolTable {
  double ll = 0, ll128 = 0, simple = 0;
  double operator[](NcclProtocol p) const {
    return p == NcclProtocol::kLL ? ll : p == NcclProtocol::kLL128 ? ll128 : simple;
  }
  bool operator==(const ProtocolTable&) const = default;
};

// Where a group sits, for matching calibration fits.
enum class PlacementClass {
  kIntraDomain,  // every rank in one NVLink domain
  kInterDomain,  // several domains, one scalable unit (one leaf level)
  kCrossSpine,   // across scalable units
};
const char* Name(PlacementClass placement);  // "intra_domain", "inter_domain", "cross_spine"
PlacementClass ClassOf(const GroupSpan& span);

// One segment of a measured curve: t = alpha + bytes / algbw. A fitted
// curve is the lower envelope (minimum) of its segments, since protocol
// switches make one straight line fit poorly (cost-model.md section 3).
struct AlphaBetaSegment {
  double alpha_us = 0;
  double algbw_gb_per_s = 0;
  bool operator==(const AlphaBetaSegment&) const = default;
};

// A measured curve for one collective on groups of `gpus` ranks placed as
// `placement` with `ranks_per_domain` ranks in each NVLink domain (0: any,
// as v1 files have it); replaces the model for exactly that case.
struct CollectiveFit {
  Collective collective = Collective::kAllReduce;
  int gpus = 0;
  PlacementClass placement = PlacementClass::kIntraDomain;
  std::vector<AlphaBetaSegment> segments;
  int ranks_per_domain = 0;
  double max_bytes = 0;  // the largest size measured (v2 `sizes.max_bytes`); 0: not known
  bool operator==(const CollectiveFit&) const = default;
};

// The ranks per NVLink domain a fit of `span` is matched on: the emptiest
// domain's (it sets a crossing group's bandwidth); all of them inside one.
int RanksPerDomainOf(const GroupSpan& span);

// Which (collective, placement class) a calibrated model was asked to cost
// and had no fit for, and which fits it used past the largest size they
// measured (their fastest segment extended): recorded while costing, from
// any thread, and read afterwards for one warning each.
class FitMisses {
 public:
  void Record(Collective collective, PlacementClass placement) { Set(missing_, collective, placement); }
  void RecordBeyond(Collective collective, PlacementClass placement) { Set(beyond_, collective, placement); }
  std::vector<std::pair<Collective, PlacementClass>> List() const { return Listed(missing_); }
  std::vector<std::pair<Collective, PlacementClass>> ListBeyond() const { return Listed(beyond_); }

 private:
  static void Set(std::atomic<uint32_t>& bits, Collective collective, PlacementClass placement) {
    const uint32_t bit = uint32_t{1} << (static_cast<int>(collective) * 3 + static_cast<int>(placement));
    if (!(bits.load(std::memory_order_relaxed) & bit)) bits.fetch_or(bit, std::memory_order_relaxed);
  }
  static std::vector<std::pair<Collective, PlacementClass>> Listed(const std::atomic<uint32_t>& bits);
  std::atomic<uint32_t> missing_{0};
  std::atomic<uint32_t> beyond_{0};
};

// How a calibration file may be used.
struct CalibrationUse {
  // A file calibrated on another GPU than the cluster's is refused unless
  // this is set (`--force-calibration`).
  bool allow_other_gpu = false;
};

struct CommParams {
  // --- Line rates, copied from the cluster (inputs/cluster.h) ---------------
  double nvlink_line_gb_per_s = 450;  // per GPU per direction: cluster.nvlink_gb_per_s
  double nic_line_gb_per_s = 50;      // per NIC: cluster.nic_gbit_per_s / 8 (NCCL: speed_Mbps / 8000)
  double spine_oversubscription = 1;  // cluster.fabric.spine_oversubscription
  int nics_per_node = 8;              // cluster.nics_per_node

  // --- Achieved fractions of line rate -------------------------------------
  // NCCL models an NVLink 4 link at 20.6 GB/s per direction against a 25 GB/s
  // line rate (18 links: 370.8 of 450 GB/s per GPU), NVLink 5 at 40.1 of 50:
  // the cost of 128-byte payloads with headers. Defaults to 20.6/25 = 0.824,
  // or 40.1/50 = 0.802 for a cluster faster than NVLink 4's 450 GB/s.
  double nvlink_efficiency = 20.6 / 25.0;
  // NCCL models a NIC at exactly its line rate / 8, which no transfer
  // reaches. Published InfiniBand NDR figures (400 Gb/s = 50 GB/s per NIC;
  // ib_write_bw and nccl-tests' bus bandwidth through one NIC) span 46 to
  // 49 GB/s: the range the project's issue tracker quotes as published
  // (no primary document was at hand to pin one figure), 0.92-0.98 of the
  // line rate. The middle of that range, 47.5 of 50 GB/s, is taken
  // (kNdrMeasuredGbPerS); the spread is +-3%. The packet headers and CRCs
  // alone would allow 0.994 (26 bytes per 4096-byte MTU packet: LRH 8,
  // BTH 12, ICRC 4, VCRC 2); the rest is the NIC, PCIe and NCCL's proxy.
  // No published XDR (800 Gb/s, ConnectX-8) figure was at hand: the NDR
  // ratio is assumed for it and for every other NIC. A calibration
  // replaces it with the measured busbw / (line rate / 8).
  static constexpr double kNdrLineGbPerS = 50.0;
  static constexpr double kNdrMeasuredGbPerS = 47.5;
  double network_efficiency = kNdrMeasuredGbPerS / kNdrLineGbPerS;

  // --- NVLink SHARP (NVLS): reductions and multicast inside the NVSwitch ----
  // Hopper and later NVSwitch domains (not A100/V100). NCCL derates NVLS
  // bandwidth by 0.85 on Hopper (nvlsEfficiency). What each rank's NVLink
  // port carries per direction follows from the algorithm
  // (NvlsPortBytesPerByte in collective.h): (n+1)/n x the buffer for an
  // all-reduce, the buffer for an all-gather or a reduce-scatter; so an
  // all-reduce's bus bandwidth is 2(n-1)/n x n/(n+1) x 0.85 x NVLink:
  // 490 GB/s on 8 H100, against the about 480 GB/s above 256 MB that the
  // project's issue tracker quotes as published nccl-tests bus bandwidth
  // for 8 H100 (a check of the derivation, not a fit to it).
  bool nvls_available = true;
  double nvls_efficiency = 0.85;
  // A measured NVLS all-reduce bus bandwidth over nvls_efficiency x NVLink,
  // the same for every group size, in place of the derived 2(n-1)/(n+1).
  // Unset by default; a calibration file may set it
  // (`nvls_allreduce_factor`; a file holding 2.0, the model's earlier
  // constant, keeps that meaning).
  std::optional<double> nvls_allreduce_factor;

  // --- Latencies, microseconds (NCCL baseLat and hwLat tables) --------------
  ProtocolTable ring_base_us{6.6, 14.0, 8.4};
  ProtocolTable tree_base_us{6.8, 14.0, 8.4};
  double nvls_base_us = 0;
  ProtocolTable ring_nvlink_hop_us{0.6, 1.9, 3.4};
  ProtocolTable tree_nvlink_hop_us{0.6, 1.25, 4.0};
  double nvls_nvlink_hop_us = 25;  // NVLS is Simple-only
  ProtocolTable ring_network_hop_us{2.7, 4.0, 14.0};
  ProtocolTable tree_network_hop_us{5.0, 8.5, 14.0};
  // NCCL's model has no spine term; we add the cluster's per-spine-crossing
  // latency (cluster.latency.spine_us) to every network step of a group that
  // crosses the spine.
  double spine_hop_us = 1.0;

  // --- Protocol bandwidth factors (NCCL tuning.cc "model refinements") ------
  // Ring LL: 1/4 of the bus bandwidth across nodes or for all-reduce, else 1/3.
  double ring_ll_factor = 1.0 / 4.0;
  double ring_ll_factor_intra = 1.0 / 3.0;
  // Ring LL128: 0.92 (~120/128 of a line is payload); 0.7 with one rank per node.
  double ring_ll128_factor = 0.92;
  double ring_ll128_factor_one_per_node = 0.7;
  // Tree all-reduce: 0.92 of the bus bandwidth for Simple, 1/3.8 for LL,
  // 120/128 for LL128 (inter-node).
  double tree_simple_factor = 0.92;
  double tree_ll_factor = 1.0 / 3.8;
  double tree_ll128_factor = 120.0 / 128.0;

  // --- Point-to-point (send/recv and all-to-all) -----------------------------
  // NCCL has no tuning model for p2p: it picks LL for a peer message up to
  // NCCL_P2P_LL_THRESHOLD (16 KiB per channel) and Simple above; a peer's
  // message is split over NCCL_NCHANNELS_PER_NET_PEER (2) channels, hence
  // 32 KiB. Latency: the Ring base of the protocol plus one hop of the tier
  // crossed (NCCL's p2p runs on the same channels and proxies as Ring).
  double p2p_ll_threshold_bytes = 2 * 16384;
  ProtocolTable p2p_base_us{6.6, 14.0, 8.4};  // LL128 unused
  double p2p_ll_factor = 1.0 / 4.0;            // as Ring LL across nodes

  // --- Flex dispatcher (DeepEP / HybridEP forwarded all-to-all) -------------
  // Fractions of the modelled NVLink and per-rank NIC bandwidth (above) that
  // the flex kernels reach, capped at the line rate. 1: the same achieved
  // rates as the model's NCCL. DeepEP's README reports 153-158 GB/s over
  // NVLink on H800 (this model: 164.8) and 43-58 GB/s RDMA bottleneck
  // bandwidth on 400 Gb/s CX7 (line 50, this model 47.5), i.e. about the
  // same rates; we do not fit to those
  // figures. A calibration file can set them (doc/cost-model-comm.md section 4).
  double flex_nvlink_factor = 1.0;
  double flex_network_factor = 1.0;

  // --- Calibration -----------------------------------------------------------
  std::vector<CollectiveFit> fits;
  std::string source = "defaults";  // "defaults" or the calibration file read
  std::string calibrated_gpu;       // the file's "gpu" (v2); "" when it names none
  // Set when `fits` is not empty: the cases costed without a fit.
  std::shared_ptr<FitMisses> misses;

  // Achieved bandwidths, per GPU per direction, 10^9 bytes/s.
  double nvlink_gb_per_s() const { return nvlink_line_gb_per_s * nvlink_efficiency; }
  double network_gb_per_s() const { return nic_line_gb_per_s * network_efficiency; }
  // A NIC's share of its leaf's uplinks when every NIC sends across the spine.
  double spine_gb_per_s() const { return network_gb_per_s() / spine_oversubscription; }

  // The fit for exactly this case, or null; ranks_per_domain 0 matches any
  // fit of that collective, size and class, a fit's 0 matches any count.
  const CollectiveFit* FindFit(Collective collective, int gpus, PlacementClass placement,
                               int ranks_per_domain = 0) const;
};

// NCCL's per-link NVLink model over the per-link line rate, chosen by the
// cluster's per-GPU NVLink bandwidth (above 450 GB/s per direction: NVLink 5).
double DefaultNvlinkEfficiency(const ClusterSpec& cluster);

// Parameters derived from the cluster's line rates and NCCL's model alone.
CommParams DefaultCommParams(const ClusterSpec& cluster);


// Whether two GPU names are the same part: their model numbers ("H100",
// "B200"; a Grace superchip's "GB200" is its "B200") agree, or, when
// either has none ("host memory"), the names agree ignoring case.
bool SameGpu(const std::string& a, const std::string& b);

// DefaultCommParams(cluster) overridden by the calibration file at `path`
// (v1 or v2). Errors name the file and the JSON pointer of the bad field; a
// v2 file calibrated on another GPU than the cluster's is an error unless
// `use` allows it.
Result<CommParams> LoadCommParams(const std::string& path, const ClusterSpec& cluster,
                                  const CalibrationUse& use = {});
// The same on a parsed document; `path` names it in errors.
Result<CommParams> ParseCommParams(const nlohmann::json& json, const std::string& path, const ClusterSpec& cluster,
                                   const CalibrationUse& use = {});

// The cluster's own parameters: its `calibration` file when it names one,
// else the defaults.
Result<CommParams> CommParamsFor(const ClusterSpec& cluster, const CalibrationUse& use = {});

}  // namespace foldplan
