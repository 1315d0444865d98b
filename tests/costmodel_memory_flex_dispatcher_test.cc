// The flex dispatchers (DeepEP, HybridEP) in the memory model: their
// persistent buffers and the transient tensors of one MoE layer's dispatch
// and combine. Arithmetic first; derivations in doc/cost-model-memory.md
// ("Flex dispatcher buffers").
#include <doctest/doctest.h>

#include "costmodel/memory.h"
#include "fixtures.h"
#include "inputs/loader.h"

using namespace foldplan;
using foldplan::testing::MakeCluster;
using foldplan::testing::MakeJob;
using foldplan::testing::MakeMixtral;

namespace {

Layout DispatcherLayout(int tp, int dp, int pp, int ep, Dispatcher d) {
  Layout l = testing::FromDegrees(tp, 1, dp, pp, ep);
  l.dispatcher = d;
  return l;
}

}  // namespace

// DeepEP, Megatron's 20 SMs = 10 channels, H 4096 (hidden_bytes 8192), each
// buffered token with 2,056 B of metadata (SourceMeta 8, 128 int64 top-k
// indices, 128 fp32 weights, 128 fp32 scales): 10,248 B.
//   ep 8 (one node, no RDMA): NVLink 10 channels x 8 peers x (4 x (2 x 1 +
//     3) + 256 tokens x 10,248) = 209,880,640
//   ep 32 (4 nodes): NVLink 10 x 8 x (4 x (2 x 4 + 3) + 288 x 10,248) =
//     236,117,440; RDMA 10 x 4 peers x (2 x 4 x 18 + 128 x 10,248 x 2)
//     = 104,945,280; together 341,062,720
TEST_CASE("DeepEP keeps NVLink and RDMA buffers sized by its configs") {
  auto q = LoadModel("qwen3-235b-a22b");
  REQUIRE(q.ok());
  JobSpec job = MakeJob();
  job.global_batch = 2048;
  const MemoryModel model(q.value(), job, MakeCluster(32));
  auto flex = [&](const Layout& l) {
    return model.EstimateStage(l, 0).bytes_of(memory_term::kFlexDispatcherBuffers);
  };
  CHECK(flex(DispatcherLayout(2, 64, 2, 8, Dispatcher::kDeepEP)) == 209'880'640.0);
  CHECK(flex(DispatcherLayout(2, 16, 8, 32, Dispatcher::kDeepEP)) == 341'062'720.0);
  CHECK(flex(DispatcherLayout(2, 16, 8, 32, Dispatcher::kAllToAll)) == 0);
  // 24 SMs: 12 channels, 1.2 x the buffers.
  job.deepep_sms = 24;
  const MemoryModel more_sms(q.value(), job, MakeCluster(32));
  CHECK(more_sms.EstimateStage(DispatcherLayout(2, 16, 8, 32, Dispatcher::kDeepEP), 0)
            .bytes_of(memory_term::kFlexDispatcherBuffers) == doctest::Approx(1.2 * 341'062'720.0));
}

// One MoE layer's transient tensors with a flex dispatcher. Mixtral-like
// (K 2), tp 2, ep 8, load 1: T = 2048, R = T K = 4,096 rows, distinct
// destination ranks D = 8 (1 - (7/8)^2) = 1.875 per token.
//   dispatch: the received tokens load T D = 3,840 x H 4096 x 2 B = 31,457,280
//   combine:  fc2's output R + the rows summed per token load T D,
//             (4,096 + 3,840) x 4096 x 2 B = 65,011,712
// The larger, the combine, is the term. Flex kernels use no NCCL
// all-to-all: 7 fewer p2p peers (x 2 channels x 4 MiB) than alltoall.
TEST_CASE("flex dispatch and combine: the combine's fc2 output and summed rows are the peak") {
  const ModelSpec m = MakeMixtral();
  const JobSpec model_job = MakeJob();  // outlives the model, which points to it
  const MemoryModel model(m, model_job, MakeCluster(2));
  const MemoryBreakdown deepep = model.EstimateStage(DispatcherLayout(2, 8, 1, 8, Dispatcher::kDeepEP), 0);
  CHECK(deepep.bytes_of(memory_term::kDispatchBuffers) == doctest::Approx(65'011'712.0));
  const MemoryBreakdown a2a = model.EstimateStage(DispatcherLayout(2, 8, 1, 8, Dispatcher::kAllToAll), 0);
  CHECK(a2a.bytes_of(memory_term::kNcclBuffers) - deepep.bytes_of(memory_term::kNcclBuffers) ==
        7 * 2 * 4 * 1024.0 * 1024);
  // alltoall keeps its formula: send T K H + receive load T K H, 2 B.
  CHECK(a2a.bytes_of(memory_term::kDispatchBuffers) == 2.0 * 2048 * 2 * 4096 * 2);
}
