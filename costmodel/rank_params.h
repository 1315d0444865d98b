// Parameter elements one rank holds, split as parallelism shards them: the
// one count behind the memory model's parameters, gradients and optimizer
// states, the optimizer step, and the data-parallel and FSDP volumes of the
// communication plan. From the model's own counting (ModelSpec::
// layer_params, embedding_params, mtp_params): TP shards attention, dense
// MLPs, shared experts and the vocabulary tables; norms, router, MLA
// down-projections and the shared-expert gate are replicated over TP (each
// TP rank reduces its own copy); routed experts are split over EP x ETP.
// Derivations: doc/cost-model-memory.md ("Parameters") and
// doc/cost-model-comm.md section 6 ("Parameters per rank").
#pragma once

#include "inputs/model.h"
#include "planner/layout.h"
#include "planner/pipeline.h"

namespace foldplan {

// Parameter elements held by one rank of a pipeline stage.
// MTP modules (PipelineRank::mtp_layers) count here like decoder layers: one
// decoder layer of the model's last layer's kind, the 2H -> H projection
// (TP-split), three norms; and the stage holding them keeps a copy of the
// input embedding (Megatron builds the embedding on the MTP stage and
// synchronises it with the first stage's, like a tied embedding) and, for
// an untied model off the loss stage, of the output layer.
struct StageParams {
  double dense = 0;   // non-expert: attention, norms, dense MLP, router, shared experts,
                      // embeddings and output layer where the stage holds them
  double expert = 0;  // routed-expert weights
  double gemm = 0;    // weights that fp8 GEMMs cast (decoder and MTP linears, experts included)
  double total() const { return dense + expert; }
};

// Vocab-sized matrices a pipeline rank holds: input-table copies (the
// embedding, a tied model's loss-stage copy, the MTP stage's copy) and
// output layers (untied: the loss stage's, the MTP stage's copy).
struct TablesHeld {
  int input = 0;
  int output = 0;
};

struct RankParamCounter {
  explicit RankParamCounter(const ModelSpec& model);

  // What one rank of pipeline rank `held` holds under `layout`.
  StageParams OnRank(const Layout& layout, const PipelineRank& held) const;
  // The largest dense and the largest expert share of any pipeline rank of
  // `pipeline` (each from the rank holding it; gemm unset).
  StageParams Largest(const Layout& layout, const PipelineDescription& pipeline) const;
  TablesHeld Tables(const PipelineRank& held) const;

  // One unit on one rank (FSDP gathers and reduces unit by unit):
  double DenseLayer(int tp) const;        // a dense decoder layer
  double MoeLayer(int tp) const;          // a MoE layer outside its routed experts
  double Experts(int ep, int etp) const;  // a MoE layer's routed experts
  double Embedding(int tp) const;         // the input table + learned positions
  double OutputLayer(int tp, int pp) const;  // the output layer (tied, pp > 1: a copy) + final norm

  // Elements per layer, split by sharding.
  double dense_layer_tp = 0, dense_layer_replicated = 0;  // dense layers
  double moe_layer_tp = 0, moe_layer_replicated = 0;      // MoE layers, outside routed experts
  double moe_layer_experts = 0;                           // all routed experts of one layer
  double layer_gemm_replicated = 0;  // replicated weights that fp8 GEMMs cast (MLA down-proj.)
  double mtp_projection = 0;         // MTP eh_proj, 2H x H (TP-split)
  double mtp_norms = 0;              // MTP enorm, hnorm, final norm: 3H (replicated)
  bool mtp_moe = false;              // MTP layers are of the last decoder layer's kind
  EmbeddingParams embeddings;
};

}  // namespace foldplan
