// FP8 recipes in the memory model: FP8 linears save FP8 inputs (with the
// recipe's scales), attention stays bf16, FP8 weight copies per recipe and
// GPU, scaling state, FP8 dispatch. The arithmetic is stated first; the
// derivations are in doc/cost-model-memory.md ("FP8 recipes").
#include <doctest/doctest.h>

#include "costmodel/memory.h"
#include "fixtures.h"

using namespace foldplan;
using foldplan::testing::MakeCluster;
using foldplan::testing::MakeDense;
using foldplan::testing::MakeJob;
using foldplan::testing::MakeMixtral;

namespace {

Layout Fp8Layout(int tp, int cp, int dp, int pp, int ep, Precision precision) {
  Layout l = testing::FromDegrees(tp, cp, dp, pp, ep);
  l.precision = precision;
  return l;
}

ClusterSpec Blackwell(int nodes) {
  ClusterSpec c = MakeCluster(nodes);
  c.gpu.architecture = GpuArchitecture::kBlackwell;
  return c;
}

}  // namespace

// The dense SwiGLU GQA layer (H 4096, q 4096, k = v = 1024, o 4096,
// F 14336), tp 2, cp 2: T = 1024 rows. Per row, no recomputation, bf16:
// 2 x (4 x 4096 + 4096 + 1024 + 1024 + 4096 + 3 x 14336) + 128 = 139,392.
// Tensorwise FP8 (1 B per saved FP8-linear input, one scale per tensor):
//   attention  norm input 2 x 4096 + linear_qkv's FP8 input 4096 + q, k, v
//              2 x 6144 + the attention output twice: bf16 for the core's
//              backward, FP8 for linear_proj (3 x 4096) + LSE 128 = 36,992
//   MLP        norm input 8192 + fc1's FP8 input 4096 + SwiGLU input (bf16)
//              2 x 28672 + fc2's FP8 input 14336 = 83,968
// With core_attn recomputed the core keeps nothing: the output is stored
// once, in FP8: attention 28,672, layer 112,640 per row.
// Blockwise (+ fp32 scale per 1x128) and mxfp8 (+ E8M0 per 32): 1.03125 B
// per FP8 element: attention 8192 + 4224 + 12288 + 4224 = 28,928; MLP 8192 +
// 4224 + 57344 + 14784 = 84,544; layer 113,472 per row.
TEST_CASE("FP8 linears keep FP8 inputs with the recipe's scales; attention stays bf16") {
  const ModelSpec m = MakeDense();
  const JobSpec job = MakeJob();
  const MemoryModel hopper(m, job, MakeCluster(1));
  auto layer = [&](Precision p, Recompute r) {
    return hopper.LayerActivationBytes(Fp8Layout(2, 2, 2, 1, 1, p), false, r);
  };
  CHECK(layer(Precision::kBF16, Recompute::None()) == 1024.0 * 139'392);
  CHECK(layer(Precision::kFP8Tensorwise, Recompute::None()) == 1024.0 * (36'992 + 83'968));
  CHECK(layer(Precision::kFP8Delayed, Recompute::None()) == 1024.0 * (36'992 + 83'968));
  CHECK(layer(Precision::kFP8Tensorwise, Recompute::Selective()) == 1024.0 * 112'640);
  CHECK(layer(Precision::kFP8Blockwise, Recompute::Selective()) == 1024.0 * 113'472);
  const MemoryModel blackwell(m, job, Blackwell(1));
  CHECK(blackwell.LayerActivationBytes(Fp8Layout(2, 2, 2, 1, 1, Precision::kMXFP8), false,
                                       Recompute::Selective()) == 1024.0 * 113'472);
  // Full recomputation keeps the bf16 layer input, whatever the recipe.
  CHECK(layer(Precision::kFP8Tensorwise, Recompute::Full()) == 1024.0 * 2 * 4096);
}

// An MoE layer's expert rows under tensorwise FP8: fc1's FP8 input 4096 +
// SwiGLU input (bf16) 2 x 28672 + fp32 probability 4 + fc2's FP8 input
// 14336 = 75,780 per row instead of bf16's 94,212. Mixtral-like, tp 2,
// ep 8, load 1: R = 2048 x 2 = 4,096 rows.
TEST_CASE("FP8 expert rows store FP8 GEMM inputs and a bf16 activation input") {
  const ModelSpec m = MakeMixtral();
  const JobSpec model_job = MakeJob();  // outlives the model, which points to it
  const MemoryModel model(m, model_job, MakeCluster(1));
  const Layout bf16 = Fp8Layout(2, 1, 4, 1, 8, Precision::kBF16);
  const Layout fp8 = Fp8Layout(2, 1, 4, 1, 8, Precision::kFP8Tensorwise);
  const double bf16_bytes = model.LayerActivationBytes(bf16, true, Recompute::Selective());
  const double fp8_bytes = model.LayerActivationBytes(fp8, true, Recompute::Selective());
  // Attention with core_attn: QKV input 4096 and the output 4096 at 1 B
  // instead of 2: 2048 x 8192 less; the MoE norm output stays bf16 (the
  // router reads it).
  CHECK(bf16_bytes - fp8_bytes == 2048.0 * 8192 + 4096.0 * (94'212 - 75'780));
}

// FP8 weight copies cached across micro-batches, per GEMM weight element:
//   delayed, tensorwise: Hopper weight + transpose 2 B; Blackwell 1 B
//   blockwise: rowwise + columnwise, each with an fp32 scale per 128 x 128
//              block: 2 x (1 + 4 / 16384) = 2.00048828125 B
//   mxfp8: rowwise + columnwise, an E8M0 scale per 32 each: 2 x 1.03125 B
// mixtral-8x7b-like stage 0 of tp 2, pp 4, ep 8: 8 layers x 41,943,040 / 2
// attention weights + 1,409,286,144 expert weights = 1,577,058,304 GEMM
// weights (norms, router and embedding are not FP8).
TEST_CASE("FP8 weight copies per recipe and GPU architecture") {
  const ModelSpec m = MakeMixtral();
  const JobSpec job = MakeJob();
  const double gemm = 8 * 41'943'040.0 / 2 + 1'409'286'144.0;
  auto copies = [&](const ClusterSpec& c, Precision p) {
    const MemoryModel model(m, job, c);
    const Layout l = Fp8Layout(2, 1, 8, 4, 8, p);
    CHECK(model.ParamsOnStage(l, 0).gemm == gemm);
    return model.EstimateStage(l, 0).bytes_of(memory_term::kFp8WeightCopies);
  };
  const ClusterSpec hopper = MakeCluster(8);
  CHECK(copies(hopper, Precision::kBF16) == 0);
  CHECK(copies(hopper, Precision::kFP8Delayed) == 2 * gemm);
  CHECK(copies(hopper, Precision::kFP8Tensorwise) == 2 * gemm);
  CHECK(copies(hopper, Precision::kFP8Blockwise) == 2.00048828125 * gemm);
  CHECK(copies(Blackwell(8), Precision::kFP8Tensorwise) == gemm);
  CHECK(copies(Blackwell(8), Precision::kMXFP8) == 2.0625 * gemm);
}

// Scaling state outside the tensors: TE keeps five scaled tensors per FP8
// GEMM. Stage 0 above holds 8 MoE layers x (linear_qkv + linear_proj + 2
// GEMMs of its 8 / ep 8 = 1 local expert) = 32 FP8 GEMMs.
//   delayed, amax history 1: 32 x 5 x (1 + 2) x 4 B = 1,920 B
//   delayed, history 1024:   32 x 5 x 1026 x 4 B = 656,640 B
//   tensorwise (scale, amax): 32 x 5 x 2 x 4 B = 1,280 B
//   blockwise, mxfp8: the scales are counted with their tensors: 0
TEST_CASE("FP8 scaling state: amax histories for delayed scaling, next to nothing otherwise") {
  const ModelSpec m = MakeMixtral();
  const JobSpec job = MakeJob();
  auto state = [&](Precision p, int history) {
    MemoryAssumptions a;
    a.fp8_amax_history_len = history;
    const MemoryModel model(m, job, MakeCluster(8), a);
    return model.EstimateStage(Fp8Layout(2, 1, 8, 4, 8, p), 0).bytes_of(memory_term::kFp8ScalingState);
  };
  CHECK(state(Precision::kFP8Delayed, 1) == 1920);
  CHECK(state(Precision::kFP8Delayed, 1024) == 656'640);
  CHECK(state(Precision::kFP8Tensorwise, 1) == 1280);
  CHECK(state(Precision::kFP8Blockwise, 1) == 0);
  CHECK(state(Precision::kBF16, 1) == 0);
}

// The flex dispatchers dispatch FP8 tokens under an FP8 recipe and combine
// in bf16. HybridEP's NVLink buffers hold every token of every NVLink peer
// in the group: T x peers x H x (dispatch + combine bytes). Mixtral-like,
// tp 1, ep 8 (8 peers in one NVLink domain), S 4096: T = 4096.
//   bf16: 4096 x 8 x 4096 x (2 + 2) = 536,870,912
//   fp8:  4096 x 8 x 4096 x (1.03125 + 2) = 406,847,488
TEST_CASE("FP8 dispatch shrinks HybridEP's dispatch buffer, not its bf16 combine buffer") {
  const ModelSpec m = MakeMixtral();
  const JobSpec model_job = MakeJob();  // outlives the model, which points to it
  const MemoryModel model(m, model_job, Blackwell(8));
  Layout l = Fp8Layout(1, 1, 8, 1, 8, Precision::kBF16);
  l.dispatcher = Dispatcher::kHybridEP;
  CHECK(model.EstimateStage(l, 0).bytes_of(memory_term::kFlexDispatcherBuffers) == 536'870'912.0);
  l.precision = Precision::kMXFP8;
  CHECK(model.EstimateStage(l, 0).bytes_of(memory_term::kFlexDispatcherBuffers) == 406'847'488.0);
}
