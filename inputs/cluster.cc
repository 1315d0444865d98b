#include "inputs/cluster.h"

#include <algorithm>
#include <string>

namespace foldplan {

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
  c.gpu = GpuSpec{"H100 SXM5", 989e12, 1979e12, 79.6, 3.35};
  c.gpus_per_node = std::min(8, gpus);
  if (gpus % c.gpus_per_node != 0) c.gpus_per_node = gpus;
  c.nodes = gpus / c.gpus_per_node;
  c.nvlink_domain_gpus = c.gpus_per_node;
  c.nvlink_gb_per_s = 450;
  c.nics_per_node = c.gpus_per_node;
  c.nic_gbit_per_s = 400;
  return c;
}

}  // namespace foldplan
