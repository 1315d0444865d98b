// The memory model's intermediate terms (MemoryModel's private structs),
// shared by memory.cc, which computes them, and memory_memo.cc, whose
// FamilyPeakMemo keeps them across the layouts of a family. Internal to
// costmodel/memory*.cc.
#pragma once

#include <array>
#include <numeric>

#include "costmodel/memory.h"
#include "costmodel/rank_params.h"
#include "planner/pipeline.h"

namespace foldplan {

// One stage's terms as plain numbers, plus what the notes quote.
// Every field is set by OptionStageTerms and FsdpStageTerms together, so
// the terms are left unset here (no zeroing per stage scored).
struct MemoryModel::StageTerms {
  std::array<double, kMemoryTermCount> bytes;
  PipelineRank count;  // what the stage holds
  StageParams params;
  double inflight = 0;
  double mtp_inflight = 0;
  double fsdp_gathered = 0;  // parameter elements of the gathered units
  double fsdp_gradient = 0;  // ... of the units with unsharded gradients
  double fp8_gemm = 0;       // GEMM weights with FP8 copies
  double gemms = 0;          // FP8 GEMMs (scaling state)
  int collectives = 0;       // NCCL collective communicators in use
  int p2p_peers = 0;         // NCCL point-to-point peers in use
  double short_lived = 0;    // what fragmentation is charged on

  double peak() const { return std::accumulate(bytes.begin(), bytes.end(), 0.0); }
};

// What the layouts of one family share (memory.h's FamilyPeakMemo; those
// differing only in recompute, precision, dispatcher, a2a_overlap, fsdp): reads
// only the degrees (tp, cp, dp, ep, etp, edp, pp, vpp), mbs, cp_style, the
// schedule and the pipeline description; no recipe option.
struct MemoryModel::FamilyTerms {
  long long microbatches = 1;  // m = global_batch / (dp x mbs)
  double rows = 0;             // T: token rows per rank entering a layer
  double load = 1;             // expert-rank load factor (imbalance or capacity)
  double expert_rows = 0;      // R = etp x load x T x K on the busiest rank
  double embedding_per_microbatch = 0;
  double logits = 0;           // main output: fp32 logits + final-norm and output-layer inputs
  double mtp_logits = 0;       // one MTP head's fp32 logits
  bool mtp_with_loss = true;   // every MTP layer sits in the loss's virtual stage
  bool mtp_off_first = false;  // an MTP layer on a pipeline rank other than the embedding's
  double deferred_wgrad = 0;   // EP overlap: output gradients of one MoE layer's deferred wgrads
  double flex_ranks = 0;       // the flex dispatcher's TP x EP group, for the notes
  double local_experts = 0;    // E / ep
  // FSDP units, per rank (model-parallel shards), elements and GEMM weights.
  double dense_unit = 0, dense_unit_gemm = 0, moe_unit = 0, moe_unit_gemm = 0;
  double mtp_unit = 0, mtp_unit_gemm = 0, table_unit = 0;
  int collectives = 0, moe_collectives = 0;  // NCCL collective communicators
  int p2p_peers = 0;                         // NCCL point-to-point peers (CP)
};

// What the recipe options (recompute, precision, dispatcher) add to a
// family's terms, in two parts; a2a_overlap and fsdp only pick among stage
// terms. The layers, of (recompute, precision):
struct MemoryModel::LayerTerms {
  LayerBytes dense, moe;       // one layer of each kind, one micro-batch
};

// ... and the rest, of (precision, dispatcher).
struct MemoryModel::DispatchTerms {
  double mtp_row = 0;          // an MTP module's own tensors per row, outside its decoder layer
  double destinations = 0;     // D: distinct EP ranks a token goes to (flex)
  double dispatch = 0;         // one MoE layer's transient dispatch / combine buffers
  double dispatch_received = 0;  // of dispatch, the buffers sized by the rows received
  double flex_nvl = 0, flex_rdma = 0;  // persistent flex-dispatcher buffers
  double flex_peers = 0;       // for the notes
  bool fp8 = false;            // an FP8 precision
  double fp8_weight_bytes = 0;  // per GEMM weight element
  double fp8_state_per_gemm = 0;
  int moe_p2p_peers = 0;       // NCCL all-to-all peers (alltoall dispatcher)
};

// The fields of a stage's shape that read its index.
struct MemoryModel::StagePlace {
  int stage = 0;
  double inflight = 0;  // micro-batches of activations alive
  int p2p_peers = 0;    // NCCL point-to-point peers, but the all-to-all's
};

// One pipeline rank of a family: what it holds and every number of its
// terms that no recipe option but fsdp changes.
struct MemoryModel::StageShape {
  void Place(const StagePlace& at) {
    stage = at.stage;
    inflight = at.inflight;
    p2p_peers = at.p2p_peers;
  }
  int stage = 0;
  PipelineRank held;
  StageParams params;          // params_.OnRank
  double sharded = 0;          // dense / (dp x cp) + expert / edp
  double fsdp_gathered = 0, fsdp_gradient = 0;  // FSDP: the largest units' elements
  double gemms = 0;            // FP8 GEMMs (scaling state)
  double inflight = 0;         // micro-batches of activations alive
  int collectives = 0;         // NCCL collective communicators in use
  int p2p_peers = 0;           // NCCL point-to-point peers, but the all-to-all's
  // The terms that of the options only fsdp changes, bytes, and the GEMM
  // weights with FP8 copies: without FSDP at [0], with FSDP at [1] (left 0
  // until ShapeFsdp).
  struct ParamTerms {
    double parameters = 0, gradients = 0, optimizer_states = 0;
    double fsdp_gathered = 0, fsdp_gradients = 0;
    double optimizer_buckets = 0;  // the distributed optimizer's bucket padding (no FSDP)
    double fp8_gemm = 0;
  };
  std::array<ParamTerms, 2> by_fsdp;
};

}  // namespace foldplan
