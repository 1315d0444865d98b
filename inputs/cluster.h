// A GPU cluster as read from a `foldplan.cluster/v1` file (doc/formats.md).
// Units are in the field names: FLOP/s, GiB, GB/s (10^9 bytes per second),
// Gbit/s (10^9 bits per second), microseconds.
#pragma once

#include <string>

#include "core/formats.h"
#include "core/status.h"

namespace foldplan {

// The GPU generation, for what its tensor cores can run: FP8 GEMMs need
// Hopper or later, MXFP8 (block scales in hardware) needs Blackwell.
enum class GpuArchitecture { kAmpere, kHopper, kBlackwell };
inline constexpr int kGpuArchitectureCount = 3;
const char* Name(GpuArchitecture a);  // "ampere", "hopper", "blackwell"

struct GpuSpec {
  std::string name;                   // "H100 SXM5"
  double peak_bf16_flops = 0;         // dense, per GPU, FLOP/s
  double peak_fp8_flops = 0;          // dense, per GPU, FLOP/s
  double hbm_gib = 0;                 // usable HBM per GPU, GiB
  double hbm_tb_per_s = 0;            // HBM bandwidth, 10^12 bytes/s
  GpuArchitecture architecture = GpuArchitecture::kHopper;
  int sms = 132;                      // streaming multiprocessors (H100 SXM: 132)
};

// Rail-optimised fat tree: NIC k of every node in a scalable unit (SU)
// connects to leaf switch k of that SU; leaves connect through spines.
struct FabricSpec {
  int su_nodes = 32;                  // nodes per scalable unit (one leaf per rail)
  double spine_oversubscription = 1;  // leaf down / up bandwidth ratio, >= 1
};

struct LatencySpec {
  double nvlink_us = 0.6;             // per NVLink hop (NCCL Simple-protocol order)
  double network_us = 3.0;            // per network hop, NIC to NIC through one leaf
  double spine_us = 1.0;              // extra per crossing of a spine switch
};

// Ranges of cluster fields that the command line sets too (--nodes), so that
// both check the same bounds (doc/formats.md#cluster). nodes x gpus_per_node
// is at most kMaxWorldSize (core/formats.h), formed by CheckedProduct.
inline constexpr int kMaxNodes = 1 << 20;       // nodes in [1, this]
inline constexpr int kMaxGpusPerNode = 1024;    // gpus_per_node in [1, this]

struct ClusterSpec {
  std::string name;                   // shipped name or file stem
  std::string source;                 // file it came from ("" when built in code)
  std::string description;
  GpuSpec gpu;
  int nodes = 1;
  int gpus_per_node = 8;
  int nvlink_domain_gpus = 8;         // GPUs sharing one NVSwitch fabric; whole nodes
  double nvlink_gb_per_s = 450;       // per GPU, per direction
  int nics_per_node = 8;              // compute-fabric NICs; rail k = local GPU % nics_per_node
  double nic_gbit_per_s = 400;        // per NIC line rate
  FabricSpec fabric;
  LatencySpec latency;
  std::string calibration;            // optional calibration file, "" if none

  // At most kMaxWorldSize in a checked spec (the file reader, --nodes).
  int total_gpus() const { return nodes * gpus_per_node; }
  int nodes_per_domain() const { return nvlink_domain_gpus / gpus_per_node; }
  int domains() const { return total_gpus() / nvlink_domain_gpus; }
};

// A generic cluster of `gpus` H100-class GPUs, 8 per node, one DGX-like
// NVLink domain per node; used by `foldplan ranks --world-size N`.
ClusterSpec GenericCluster(int gpus);

// The part of `cluster` a job sees when it uses only the first `gpus` GPUs
// of every NVLink domain (256-GPU GB200 jobs use 16 of each rack's 18
// trays): each domain keeps gpus / gpus_per_node nodes, with their NICs and
// NVLink ports; a scalable unit keeps its domains (su_nodes scales with
// them when it holds whole domains). `gpus` must be a multiple of
// gpus_per_node, at most the domain; the error says which.
Result<ClusterSpec> UsingGpusPerDomain(const ClusterSpec& cluster, int gpus);

}  // namespace foldplan
