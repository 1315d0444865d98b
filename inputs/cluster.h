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

// What the host CPU pays to drive the GPU from PyTorch (doc/cost-model-host.md):
// microseconds of CPU time per eager op, per launch, per collective call and
// per CUDA-graph replay, and the GPU time a device-to-host read the host
// waits for leaves idle. The defaults were measured on the lent H200
// machine's host (a 16-core Intel Xeon virtual machine; PyTorch 2.11, CUDA
// 13.0) on 2026-12-04 by bench/gpu/host_attention.sh; the figures are in
// bench/results/h200-host-attention-2026-12-04/. Another host (Grace, a
// faster x86) gives its own by running that script.
struct HostSpec {
  std::string cpu = "x86-64 (Intel Xeon, measured)";
  // A PyTorch op called from Python with its kernel launch (x.add_(1) on
  // 1,024 elements: host-probe-torch.json eager_add host_us 10.38).
  double eager_op_us = 10.4;
  // An nn.Module call's own overhead beyond its ops (nn.Linear against
  // F.linear on the same tensors: 22.71 - 13.51 us).
  double module_call_us = 9.2;
  // A kernel the autograd engine issues in backward (a chain of 200 muls:
  // 39.84 us per node, 3.01 kernels per node).
  double backward_kernel_us = 13.2;
  // cudaLaunchKernel of an empty kernel from C++ (launch-probe-cuda.json
  // launch_host_us 3.98): a kernel launched in a C++ loop (grouped GEMMs,
  // FP8 casts inside Transformer Engine, DeepEP).
  double launch_us = 4.0;
  // A torch.distributed collective call's host side (all_reduce on a
  // one-rank NCCL group: 43.43 us).
  double collective_us = 43.4;
  // all_to_all_single with split sizes, as Megatron's alltoall dispatcher
  // calls it (one-rank NCCL group: 60.95 us).
  double alltoallv_us = 60.9;
  // torch.cuda.CUDAGraph.replay of a captured region (100 nodes: 48.98 us).
  double graph_replay_us = 49.0;
  // GPU time left idle by a device-to-host read the host waits for at the
  // end of queued work (.item() after ~200 us of work: 21.14 us; the CUDA
  // runtime alone, cudaMemcpyAsync + cudaStreamSynchronize: 15.20 us).
  double sync_us = 21.1;
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
  HostSpec host;
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
