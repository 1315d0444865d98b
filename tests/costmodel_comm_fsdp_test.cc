// Megatron-FSDP (ZeRO-3) in the communication plan (costmodel/comm_plan.h):
// per-layer parameter all-gathers and gradient reduce-scatters over the
// shard groups, per micro-batch, instead of the distributed optimizer's
// per-step ones. Each test states the arithmetic, then checks the number it
// implies. Derivations: doc/cost-model-comm.md section 6 ("FSDP").
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "costmodel_comm_fixtures.h"
#include "costmodel/comm_params.h"
#include "costmodel/comm_plan.h"
#include "fixtures.h"
#include "inputs/loader.h"
#include "topology/topology.h"
#include "topology_fixtures.h"

namespace foldplan {
namespace {

using testing::MustBuild;

using testing::FindOp;
using Setup = testing::CommSetup;


// The public Qwen3-235B Megatron-FSDP recipe: 256 H100 (32 DGX nodes),
// TP2, EP8 ETP1, dp 128, edp 32, mbs 4, DeepEP, full recompute.
Setup Qwen3Fsdp() {
  Result<ModelSpec> model = LoadModel(std::string(FOLDPLAN_SOURCE_DIR) + "/data/models/qwen3-235b-a22b.json");
  REQUIRE_MESSAGE(model.ok(), model.status().message());
  Setup s(testing::DgxH100(32), *model);
  s.layout.world = 256;
  s.layout.tp = 2;
  s.layout.dp = 128;
  s.layout.ep = 8;
  s.layout.etp = 1;
  s.layout.edp = 32;
  s.layout.mbs = 4;
  s.layout.fsdp = true;
  s.layout.dispatcher = Dispatcher::kDeepEP;
  s.layout.recompute = Recompute::Full();
  return s;
}

TEST_CASE("Megatron-FSDP on Qwen3-235B TP2 EP8: per-layer gathers and reduce-scatters, every micro-batch") {
  const Setup s = Qwen3Fsdp();
  const std::vector<CommOp> ops = s.Plan();
  // Per MoE layer and rank, the dense shard (over dp x cp = 128):
  //   attention 4096 x (8192 + 2 x 512) + 8192 x 4096 = 71,303,168, over TP 2
  //   = 35,651,584; replicated on each TP rank: q/k norms 2 x 128, the two
  //   norms 2 x 4096, the router 4096 x 128 = 524,288: 36,184,320 in all.
  // bf16 all-gather 72,368,640 bytes before the forward and again before
  // the backward; fp32 reduce-scatter 144,737,280 bytes after the backward.
  const double dense = 71303168.0 / 2 + 256 + 8192 + 524288;
  CHECK(dense == 36184320);
  const CommOp* ag = FindOp(ops, "fsdp_moe_layer_allgather");
  REQUIRE(ag);
  CHECK(ag->group == GroupKind::kDpCp);
  CHECK(ag->collective == Collective::kAllGather);
  CHECK(ag->scope == CommOp::kPerMoeLayer);
  CHECK(ag->bytes == dense * 2);
  CHECK(ag->calls_fwd == 1);
  CHECK(ag->calls_bwd == 1);  // the backward's gather also serves the recomputed forward
  CHECK(ag->overlappable);    // prefetched behind the neighbouring layer
  const CommOp* rs = FindOp(ops, "fsdp_moe_layer_reducescatter");
  REQUIRE(rs);
  CHECK(rs->collective == Collective::kReduceScatter);
  CHECK(rs->bytes == dense * 4);
  CHECK(rs->calls_fwd == 0);
  CHECK(rs->calls_bwd == 1);
  CHECK(rs->overlappable);

  // Routed experts (over edp = 32): 128 experts x 3 x 4096 x 1536 over
  // EP 8 = 301,989,888 parameters per rank: 603,979,776 bytes gathered,
  // 1,207,959,552 reduce-scattered.
  const double experts = 128.0 * 3 * 4096 * 1536 / 8;
  const CommOp* eag = FindOp(ops, "fsdp_experts_allgather");
  const CommOp* ers = FindOp(ops, "fsdp_experts_reducescatter");
  REQUIRE(eag);
  REQUIRE(ers);
  CHECK(eag->group == GroupKind::kEdp);
  CHECK(eag->bytes == experts * 2);
  CHECK(ers->bytes == experts * 4);
  CHECK(eag->scope == CommOp::kPerMoeLayer);
  // The edp group has one rank on each of 32 nodes; the 8 groups of a node
  // share its 8 NICs, one each: a ring at 47.5 GB/s bus bandwidth (a 400
  // Gbit/s NIC at 0.95 of its line), algbw 47.5 x 32/31; Simple latency
  // 8.4 + 31 x 14 us. 12.76 ms per gather, so 2 x 12.76 + 25.08 ms per MoE
  // layer and micro-batch.
  CHECK(std::string(eag->algorithm) == "ring/Simple");
  CHECK(eag->seconds_per_call == doctest::Approx(442.4e-6 + experts * 2 / (47.5e9 * 32 / 31)));
  CHECK(ers->seconds_per_call == doctest::Approx(442.4e-6 + experts * 4 / (47.5e9 * 32 / 31)));

  // The embedding (151,936 x 4096 over TP 2) and the untied output layer
  // (the same, + the final norm 4096) are units of their own.
  const CommOp* emb = FindOp(ops, "fsdp_embedding_allgather");
  REQUIRE(emb);
  CHECK(emb->scope == CommOp::kPerEmbedding);
  CHECK(emb->bytes == 151936.0 * 4096 / 2 * 2);
  CHECK(FindOp(ops, "fsdp_embedding_reducescatter")->bytes == 151936.0 * 4096 / 2 * 4);
  const CommOp* out = FindOp(ops, "fsdp_output_allgather");
  REQUIRE(out);
  CHECK(out->scope == CommOp::kPerOutputLayer);
  CHECK(out->bytes == (151936.0 * 4096 / 2 + 4096) * 2);

  // Every layer is MoE: no dense-layer unit. And no per-step data-parallel
  // traffic: the optimizer updates its shard in place.
  CHECK(FindOp(ops, "fsdp_dense_layer_allgather") == nullptr);
  for (const CommOp& op : ops) {
    CAPTURE(op.name);
    CHECK(op.scope != CommOp::kPerStep);
  }
}

TEST_CASE("without FSDP the same layout reduces once per step") {
  // The distributed optimizer: one fp32 reduce-scatter and one bf16
  // all-gather of the whole stage per step. 94 MoE layers of the shares
  // above + the embedding and output layer: per-step bytes equal to one
  // micro-batch's FSDP reduce-scatters (94 x the layer's + the two units).
  Setup s = Qwen3Fsdp();
  const std::vector<CommOp> fsdp = s.Plan();
  s.layout.fsdp = false;
  const std::vector<CommOp> ops = s.Plan();
  CHECK(FindOp(ops, "fsdp_moe_layer_allgather") == nullptr);
  const CommOp* dense = FindOp(ops, "dp_grad_reducescatter");
  const CommOp* expert = FindOp(ops, "edp_grad_reducescatter");
  REQUIRE(dense);
  REQUIRE(expert);
  CHECK(dense->scope == CommOp::kPerStep);
  CHECK(dense->bytes == doctest::Approx(94 * FindOp(fsdp, "fsdp_moe_layer_reducescatter")->bytes +
                                        FindOp(fsdp, "fsdp_embedding_reducescatter")->bytes +
                                        FindOp(fsdp, "fsdp_output_reducescatter")->bytes));
  CHECK(expert->bytes == doctest::Approx(94 * FindOp(fsdp, "fsdp_experts_reducescatter")->bytes));
}

TEST_CASE("FSDP on a dense model and with tied embeddings") {
  // Mixtral's shape made dense (H 4096, 32/8 heads, SwiGLU 14336), tied
  // embeddings, tp 2 on 4 DGX nodes. A dense layer's shard: attention
  // 41,943,040 / 2 + MLP 3 x 4096 x 14336 / 2 + norms 8192.
  Setup s(testing::DgxH100(4), testing::MakeDense());
  s.model.tied_embeddings = true;
  s.layout.world = 32;
  s.layout.tp = 2;
  s.layout.dp = 16;
  s.layout.ep = 1;
  s.layout.etp = 2;
  s.layout.edp = 16;
  s.layout.fsdp = true;
  std::vector<CommOp> ops = s.Plan();
  const CommOp* layer = FindOp(ops, "fsdp_dense_layer_allgather");
  REQUIRE(layer);
  CHECK(layer->scope == CommOp::kPerDenseLayer);
  CHECK(layer->bytes == (41943040.0 / 2 + 3.0 * 4096 * 14336 / 2 + 8192) * 2);
  CHECK(FindOp(ops, "fsdp_moe_layer_allgather") == nullptr);
  CHECK(FindOp(ops, "fsdp_experts_allgather") == nullptr);
  // pp 1, tied: one table, gathered with the embedding; the output unit is
  // the final norm alone.
  CHECK(FindOp(ops, "fsdp_embedding_allgather")->bytes == 32000.0 * 4096 / 2 * 2);
  CHECK(FindOp(ops, "fsdp_output_allgather")->bytes == 4096.0 * 2);
  // pp 4: the last stage holds its own copy of the tied table.
  s.layout.pp = 4;
  s.layout.dp = 4;
  s.layout.edp = 4;
  ops = s.Plan();
  CHECK(FindOp(ops, "fsdp_output_allgather")->bytes == (32000.0 * 4096 / 2 + 4096) * 2);
  CHECK(FindOp(ops, "fsdp_embedding_allgather")->bytes == 32000.0 * 4096 / 2 * 2);
}

}  // namespace
}  // namespace foldplan
