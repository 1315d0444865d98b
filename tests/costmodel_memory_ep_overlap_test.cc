// EP overlap (--overlap-moe-expert-parallel-comm with --delay-wgrad-compute)
// in the memory model: the second micro-batch's transient tensors of one
// MoE layer and the output gradients held for the deferred weight
// gradients. Arithmetic first; doc/cost-model-memory.md ("EP overlap").
#include <doctest/doctest.h>

#include "costmodel/memory.h"
#include "fixtures.h"
#include "inputs/loader.h"

using namespace foldplan;
using foldplan::testing::MakeCluster;
using foldplan::testing::MakeJob;
using foldplan::testing::MakeMixtral;

namespace {

Layout OverlapLayout(int tp, int dp, int pp, int vpp, int ep) {
  Layout l = testing::FromDegrees(tp, 1, dp, pp, ep);
  l.vpp = vpp;
  return l;
}

}  // namespace

// Mixtral-like (H 4096, F_e 14336, K 2), tp 2, pp 2, vpp 2, ep 8, load 1:
// T = 2048, R = 4,096 expert rows. With the overlap on, one micro-batch's
// forward runs beside another's backward, so a second set of one MoE
// layer's dispatch buffers is alive (alltoall: send T K H + receive
// load T K H, 2 x 2048 x 2 x 4096 x 2 B = 67,108,864), and the experts'
// weight gradients are deferred: fc2's output gradient R x H and fc1's
// R x 2 F_e, bf16: 4,096 x (4096 + 28672) x 2 = 268,435,456.
// Term: 335,544,320. Nothing else changes.
TEST_CASE("EP overlap holds a second micro-batch's dispatch buffers and the deferred wgrad inputs") {
  const ModelSpec m = MakeMixtral();
  const JobSpec model_job = MakeJob();  // outlives the model, which points to it
  const MemoryModel model(m, model_job, MakeCluster(4));
  Layout l = OverlapLayout(2, 8, 2, 2, 8);
  const MemoryBreakdown off = model.EstimateStage(l, 0);
  l.a2a_overlap = true;
  const MemoryBreakdown on = model.EstimateStage(l, 0);
  CHECK(off.bytes_of(memory_term::kEpOverlap) == 0);
  CHECK(on.bytes_of(memory_term::kEpOverlap) == 67'108'864.0 + 268'435'456.0);
  CHECK(on.bytes_of(memory_term::kActivations) == off.bytes_of(memory_term::kActivations));
  // It is short-lived: fragmentation is charged on it.
  CHECK(on.bytes_of(memory_term::kFragmentation) - off.bytes_of(memory_term::kFragmentation) ==
        doctest::Approx(0.10 * 335'544'320.0));
}

// Shared experts defer their weight gradients too: fc2's output gradient
// is the sequence-gathered mbs S / cp x H = tp T H, fc1's T x 2 F_s.
// deepseek-v3 (H 7168, one shared expert of 2048), tp 2: T = 2048,
// 2 B x 2048 x (2 x 7168 + 4096) = 75,497,472 on top of the experts'.
TEST_CASE("EP overlap defers the shared experts' weight gradients as well") {
  auto ds = LoadModel("deepseek-v3");
  REQUIRE(ds.ok());
  ModelSpec with_shared = ds.value();
  ModelSpec no_shared = with_shared;
  no_shared.moe->shared_experts = 0;
  JobSpec job = MakeJob();
  job.global_batch = 512;
  Layout l = OverlapLayout(2, 32, 8, 2, 64);
  l.a2a_overlap = true;
  const double with = MemoryModel(with_shared, job, MakeCluster(64))
                          .EstimateStage(l, 3).bytes_of(memory_term::kEpOverlap);
  const double without = MemoryModel(no_shared, job, MakeCluster(64))
                             .EstimateStage(l, 3).bytes_of(memory_term::kEpOverlap);
  CHECK(with - without == 75'497'472.0);
}
