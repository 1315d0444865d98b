// What the communication-plan tests share: finding an op by name, and one
// plan on its own cluster (the context the plan builder reads).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "costmodel/comm_params.h"
#include "costmodel/comm_plan.h"
#include "fixtures.h"
#include "topology/topology.h"
#include "topology_fixtures.h"

namespace foldplan::testing {

inline const CommOp* FindOp(const std::vector<CommOp>& ops, const std::string& name) {
  for (const CommOp& op : ops)
    if (name == op.name) return &op;
  return nullptr;
}

struct CommSetup {
  ClusterSpec cluster;
  ModelSpec model;
  JobSpec job = MakeJob();
  Topology topo;
  CommParams params;
  Layout layout;

  CommSetup(ClusterSpec c, ModelSpec m)
      : cluster(std::move(c)), model(std::move(m)), topo(MustBuild(cluster)), params(DefaultCommParams(cluster)) {}
  CostContext ctx() const {
    CostContext c;
    c.cluster = &cluster;
    c.model = &model;
    c.job = &job;
    c.topology = &topo;
    c.comm = &params;
    return c;
  }
  std::vector<CommOp> Plan() const { return BuildCommPlan(layout, ctx()); }
};

}  // namespace foldplan::testing
