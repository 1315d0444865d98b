// What the communication-plan tests share: finding an op by name, two ops
// held equal field by field, and one plan on its own cluster (the context
// the plan builder reads).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "costmodel/comm_params.h"
#include "costmodel/comm_plan.h"
#include "fixtures.h"
#include "seeded_draws.h"
#include "topology/topology.h"
#include "topology_fixtures.h"

namespace foldplan::testing {

inline const CommOp* FindOp(const std::vector<CommOp>& ops, const std::string& name) {
  for (const CommOp& op : ops)
    if (name == op.name) return &op;
  return nullptr;
}

// Every field of two ops equal, the doubles bit for bit.
inline void RequireSameOp(const CommOp& want, const CommOp& got) {
  INFO(want.name);
  REQUIRE(want.kind == got.kind);
  REQUIRE(std::string(want.name) == got.name);
  REQUIRE(want.group == got.group);
  REQUIRE(want.collective == got.collective);
  REQUIRE(Bits(want.bytes) == Bits(got.bytes));
  REQUIRE(Bits(want.network_bytes) == Bits(got.network_bytes));
  REQUIRE(want.scope == got.scope);
  REQUIRE(Bits(want.calls_fwd) == Bits(got.calls_fwd));
  REQUIRE(Bits(want.calls_bwd) == Bits(got.calls_bwd));
  REQUIRE(want.rerun == got.rerun);
  REQUIRE(Bits(want.rerun_calls) == Bits(got.rerun_calls));
  REQUIRE(Bits(want.seconds_per_call) == Bits(got.seconds_per_call));
  REQUIRE(std::string(want.algorithm) == got.algorithm);
  REQUIRE(want.overlappable == got.overlappable);
  REQUIRE(want.hides_behind_other_microbatch == got.hides_behind_other_microbatch);
  REQUIRE(want.combine == got.combine);
  REQUIRE(want.sms == got.sms);
  REQUIRE(Bits(want.traffic.nvlink_bytes) == Bits(got.traffic.nvlink_bytes));
  REQUIRE(Bits(want.traffic.network_bytes) == Bits(got.traffic.network_bytes));
  REQUIRE(Bits(want.traffic.spine_bytes) == Bits(got.traffic.spine_bytes));
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
