// Reading a `foldplan.cluster/v1` file (doc/formats.md#cluster).
#include <cstdint>
#include <filesystem>
#include <string>

#include "inputs/checked_product.h"
#include "inputs/loader.h"
#include "inputs/parse_common.h"

namespace foldplan {
namespace {

using inputs_internal::IntField;
using inputs_internal::RequiredObject;

// kMaxNodes and kMaxGpusPerNode (inputs/cluster.h) keep every derived count
// (GPUs, NICs, links) well inside int; their product is at most the largest
// world, what a topology holds (core/formats.h).
constexpr double kMaxRate = 1e9;  // any rate or size above this is a typo

GpuSpec ReadGpu(std::optional<CheckedObject> object) {
  GpuSpec out;
  if (!object) return out;
  CheckedObject& gpu = *object;
  out.name = gpu.String("name");
  // TFLOP/s in the file, FLOP/s in the spec.
  out.peak_bf16_flops = gpu.Number("peak_bf16_tflops", 0.001, kMaxRate) * 1e12;
  out.peak_fp8_flops = gpu.Number("peak_fp8_tflops", 0, kMaxRate, 0) * 1e12;
  out.hbm_gib = gpu.Number("hbm_gib", 0.001, kMaxRate);
  out.hbm_tb_per_s = gpu.Number("hbm_tb_per_s", 0.001, kMaxRate);
  const std::string arch =
      gpu.Enum("architecture",
               {Name(GpuArchitecture::kAmpere), Name(GpuArchitecture::kHopper), Name(GpuArchitecture::kBlackwell)},
               Name(out.architecture));
  for (int i = 0; i < kGpuArchitectureCount; ++i) {
    if (arch == Name(GpuArchitecture(i))) out.architecture = GpuArchitecture(i);
  }
  out.sms = IntField(gpu, "sms", 1, 1024, out.sms);
  gpu.Finish();
  return out;
}

void ReadNvlink(std::optional<CheckedObject> object, ClusterSpec& c) {
  if (!object) return;
  CheckedObject& nvlink = *object;
  c.nvlink_domain_gpus = IntField(nvlink, "domain_gpus", 1, kMaxNodes);
  c.nvlink_gb_per_s = nvlink.Number("gb_per_s_per_direction", 0.001, kMaxRate);
  nvlink.Finish();
}

void ReadNetwork(std::optional<CheckedObject> object, ClusterSpec& c) {
  if (!object) return;
  CheckedObject& network = *object;
  c.nics_per_node = IntField(network, "nics_per_node", 1, kMaxGpusPerNode);
  c.nic_gbit_per_s = network.Number("nic_gbit_per_s", 0.001, kMaxRate);
  c.fabric.su_nodes = IntField(network, "scalable_unit_nodes", 1, kMaxNodes, 32);
  c.fabric.spine_oversubscription = network.Number("spine_oversubscription", 1, 1024, 1);
  network.Finish();
}

void ReadLatency(std::optional<CheckedObject> latency, ClusterSpec& c) {
  if (!latency) return;  // the LatencySpec defaults
  c.latency.nvlink_us = latency->Number("nvlink_hop", 0, 1e6, c.latency.nvlink_us);
  c.latency.network_us = latency->Number("network_hop", 0, 1e6, c.latency.network_us);
  c.latency.spine_us = latency->Number("spine_hop", 0, 1e6, c.latency.spine_us);
  latency->Finish();
}

void ReadHost(std::optional<CheckedObject> host, ClusterSpec& c) {
  if (!host) return;  // the HostSpec defaults
  HostSpec& h = c.host;
  constexpr double kMaxUs = 1e6;
  h.cpu = host->String("cpu", h.cpu);
  h.eager_op_us = host->Number("eager_op_us", 0, kMaxUs, h.eager_op_us);
  h.module_call_us = host->Number("module_call_us", 0, kMaxUs, h.module_call_us);
  h.backward_kernel_us = host->Number("backward_kernel_us", 0, kMaxUs, h.backward_kernel_us);
  h.launch_us = host->Number("launch_us", 0, kMaxUs, h.launch_us);
  h.collective_us = host->Number("collective_us", 0, kMaxUs, h.collective_us);
  h.alltoallv_us = host->Number("alltoallv_us", 0, kMaxUs, h.alltoallv_us);
  h.graph_replay_us = host->Number("graph_replay_us", 0, kMaxUs, h.graph_replay_us);
  h.sync_us = host->Number("sync_us", 0, kMaxUs, h.sync_us);
  host->Finish();
}

// A relative calibration path is relative to the cluster file, so that a
// cluster and its calibration can be moved together.
std::string ResolveCalibration(const std::string& path, const std::string& file) {
  if (path.empty() || std::filesystem::path(path).is_absolute()) return path;
  const std::filesystem::path dir = std::filesystem::path(file).parent_path();
  return dir.empty() ? path : (dir / path).string();
}

// Rules between fields; run only when every field is valid on its own.
void CheckClusterRules(const ClusterSpec& c, JsonErrors& errors) {
  const std::optional<int64_t> checked = CheckedProduct({c.nodes, c.gpus_per_node});
  if (!checked) {
    errors.Add("/nodes", "expected nodes x gpus_per_node <= " + std::to_string(kMaxWorldSize) + ", found " +
                             std::to_string(int64_t{c.nodes} * c.gpus_per_node) + " GPUs");
    return;
  }
  const int64_t total = *checked;
  if (c.nvlink_domain_gpus % c.gpus_per_node != 0) {
    errors.Add("/nvlink/domain_gpus", "expected a multiple of gpus_per_node (" +
                                          std::to_string(c.gpus_per_node) + "), found " +
                                          std::to_string(c.nvlink_domain_gpus));
  } else if (total % c.nvlink_domain_gpus != 0) {
    errors.Add("/nvlink/domain_gpus",
               "expected a divisor of the cluster's " + std::to_string(total) +
                   " GPUs (nodes x gpus_per_node), found " + std::to_string(c.nvlink_domain_gpus));
  }
  // Rail k serves local GPUs k, k + nics, ...: equal shares need a divisor.
  if (c.gpus_per_node % c.nics_per_node != 0) {
    errors.Add("/network/nics_per_node", "expected a divisor of gpus_per_node (" +
                                             std::to_string(c.gpus_per_node) + "), found " +
                                             std::to_string(c.nics_per_node));
  }
}

}  // namespace

Result<ClusterSpec> ParseCluster(const nlohmann::json& json, const std::string& file) {
  JsonErrors errors(file);
  CheckedObject root(json, "", &errors);
  if (!inputs_internal::CheckSchema(root, kClusterSchema)) return errors.status();

  ClusterSpec c;
  c.name = inputs_internal::StemOf(file);
  c.source = file;
  c.description = root.String("description", "");
  c.gpu = ReadGpu(RequiredObject(root, "gpu"));
  c.nodes = IntField(root, "nodes", 1, kMaxNodes);
  c.gpus_per_node = IntField(root, "gpus_per_node", 1, kMaxGpusPerNode);
  ReadNvlink(RequiredObject(root, "nvlink"), c);
  ReadNetwork(RequiredObject(root, "network"), c);
  ReadLatency(inputs_internal::OptionalObject(root, "latency_us"), c);
  ReadHost(inputs_internal::OptionalObject(root, "host"), c);
  c.calibration = ResolveCalibration(root.String("calibration", ""), file);
  root.Finish();

  if (errors.empty()) CheckClusterRules(c, errors);
  if (!errors.empty()) return errors.status();
  return c;
}

}  // namespace foldplan
