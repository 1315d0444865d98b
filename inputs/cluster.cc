#include "inputs/cluster.h"

#include <algorithm>
#include <string>

namespace foldplan {

const char* Name(GpuArchitecture a) {
  switch (a) {
    case GpuArchitecture::kAmpere: return "ampere";
    case GpuArchitecture::kHopper: return "hopper";
    case GpuArchitecture::kBlackwell: return "blackwell";
  }
  return "?";
}

// DGX H100 figures (doc/formats.md, data/clusters/h100-dgx-16n.json): whole
// 8-GPU nodes when `gpus` is a multiple of 8 (or fewer than 8), else one
// node holding all `gpus`, so that every requested GPU exists and the NVLink
// domain (one node) divides the GPU count. One NIC per GPU.
ClusterSpec GenericCluster(int gpus) {
  gpus = std::max(gpus, 1);  // callers validate; never build an empty cluster
  ClusterSpec c;
  c.name = "generic-h100-" + std::to_string(gpus) + "gpu";
  c.description = "generated: " + std::to_string(gpus) +
                  " H100 SXM GPUs in DGX-like nodes (8 per node when the count allows)";
  c.gpu = GpuSpec{"H100 SXM5", 989e12, 1979e12, 79.6, 3.35, GpuArchitecture::kHopper, 132};
  c.gpus_per_node = std::min(8, gpus);
  if (gpus % c.gpus_per_node != 0) c.gpus_per_node = gpus;
  c.nodes = gpus / c.gpus_per_node;
  c.nvlink_domain_gpus = c.gpus_per_node;
  c.nvlink_gb_per_s = 450;
  c.nics_per_node = c.gpus_per_node;
  c.nic_gbit_per_s = 400;
  return c;
}

Result<ClusterSpec> UsingGpusPerDomain(const ClusterSpec& c, int gpus) {
  const std::string what = std::to_string(gpus) + " GPUs per NVLink domain";
  if (gpus < 1 || gpus > c.nvlink_domain_gpus || gpus % c.gpus_per_node != 0) {
    return Status::Error(what + ": expected a multiple of the " + std::to_string(c.gpus_per_node) +
                         " GPUs per node, at most the domain's " + std::to_string(c.nvlink_domain_gpus));
  }
  if (gpus == c.nvlink_domain_gpus) return c;
  ClusterSpec out = c;
  const int nodes_per_domain = c.nodes_per_domain();
  const int kept = gpus / c.gpus_per_node;
  out.nodes = c.domains() * kept;
  out.nvlink_domain_gpus = gpus;
  if (c.fabric.su_nodes % nodes_per_domain == 0) out.fabric.su_nodes = c.fabric.su_nodes / nodes_per_domain * kept;
  out.name += " (" + std::to_string(gpus) + " of " + std::to_string(c.nvlink_domain_gpus) + " GPUs per domain)";
  out.description = "the first " + std::to_string(kept) + " of " + std::to_string(nodes_per_domain) +
                    " nodes of every NVLink domain of: " + c.description;
  return out;
}

}  // namespace foldplan
