// foldplan topo (cli/topo_command.h).
#include "cli/topo_command.h"

#include "cli/output.h"
#include "core/text_table.h"
#include "topology/topology.h"

namespace foldplan {

int RunTopo(const TopoOptions& options, std::ostream& out, std::ostream& err) {
  if (Status s = CheckInputFlags(options.inputs); !s.ok()) return Usage(err, s);
  auto cluster = LoadClusterAlone(options.inputs);
  if (!cluster.ok()) return Fail(err, cluster.status());
  auto topo = Topology::Build(cluster.value());
  if (!topo.ok()) return Fail(err, topo.status());
  out << (options.json ? TopologySummaryJson(topo.value()) : WrapLines(TopologySummaryText(topo.value()), OutputColumns()));
  return 0;
}

}  // namespace foldplan
