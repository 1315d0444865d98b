// Inputs built in code, so planner tests do not depend on the JSON loaders.
#pragma once

#include "inputs/cluster.h"
#include "inputs/job.h"
#include "inputs/model.h"
#include "planner/layout.h"

namespace foldplan::testing {

inline ClusterSpec MakeCluster(int nodes, int gpus_per_node = 8, int domain_gpus = 8) {
  ClusterSpec c;
  c.name = "test-cluster";
  c.gpu.name = "H100 SXM5";
  c.gpu.peak_bf16_flops = 989e12;
  c.gpu.hbm_gib = 79.6;
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.nvlink_domain_gpus = domain_gpus;
  c.nics_per_node = gpus_per_node;
  return c;
}

// Mixtral-8x7B's shape: 32 layers, 32/8 heads, 8 experts top-2.
inline ModelSpec MakeMixtral() {
  ModelSpec m;
  m.name = "mixtral-like";
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.vocab = 32000;
  m.attention = AttentionKind::kGQA;
  m.moe = MoeSpec{.experts = 8, .top_k = 2, .ffn_hidden = 14336};
  return m;
}

inline ModelSpec MakeDense() {
  ModelSpec m = MakeMixtral();
  m.name = "dense-like";
  m.moe.reset();
  m.ffn_hidden = 14336;
  return m;
}

inline JobSpec MakeJob() {
  JobSpec j;
  j.name = "test-job";
  j.seq_len = 4096;
  j.global_batch = 64;
  j.micro_batch_sizes = {1, 2};
  j.vpp = {1, 2};
  return j;
}

// A layout from degrees alone, dp and edp derived from the world size.
inline Layout MakeLayout(int world, int tp, int cp, int pp, int ep, int etp,
                         const std::string& order = kDefaultOrder) {
  Layout l;
  l.world = world;
  l.tp = tp;
  l.cp = cp;
  l.pp = pp;
  l.dp = world / (tp * cp * pp);
  l.ep = ep;
  l.etp = etp;
  l.edp = world / (pp * ep * etp);
  l.order = order;
  return l;
}

// A layout from its dense degrees with dp given (world = pp tp cp dp) and
// its EP and ETP, edp derived.
inline Layout FromDegrees(int tp, int cp, int dp, int pp, int ep, int etp = 1) {
  Layout l;
  l.tp = tp;
  l.cp = cp;
  l.dp = dp;
  l.pp = pp;
  l.ep = ep;
  l.etp = etp;
  l.world = pp * tp * cp * dp;
  l.edp = tp * cp * dp / (ep * etp);
  return l;
}

}  // namespace foldplan::testing
