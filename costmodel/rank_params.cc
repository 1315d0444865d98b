#include "costmodel/rank_params.h"

#include <algorithm>

namespace foldplan {

RankParamCounter::RankParamCounter(const ModelSpec& m) {
  // Parameters per layer, by how they are sharded (a dense layer has no
  // router, shared experts or gate, a MoE layer no dense MLP: those add 0).
  const LayerParams dense = m.layer_params(false);
  dense_layer_tp = double(dense.attention) + double(dense.dense_mlp) + double(dense.shared_experts);
  dense_layer_replicated = double(dense.attention_replicated) + double(dense.norms) + double(dense.router) +
                           double(dense.shared_expert_gate);
  // fp8 casts every decoder GEMM weight: the TP-split parts and the
  // replicated MLA down-projections (attention_replicated's norm vectors
  // are a rounding error next to those).
  layer_gemm_replicated = double(dense.attention_replicated);
  if (m.is_moe()) {
    const LayerParams moe = m.layer_params(true);
    moe_layer_tp = double(moe.attention) + double(moe.shared_experts) + double(moe.dense_mlp);
    moe_layer_replicated =
        double(moe.attention_replicated) + double(moe.norms) + double(moe.router) + double(moe.shared_expert_gate);
    moe_layer_experts = double(moe.routed_experts) * double(moe.routed_expert);
  }
  embeddings = m.embedding_params();
  // MTP (Megatron's MultiTokenPredictionLayer): enorm, hnorm, eh_proj
  // (2H -> H, a column-parallel linear), one transformer layer of the
  // decoder's last layer's spec, final_layernorm; the output head is shared.
  mtp_projection = double(m.mtp_params().projection);
  mtp_norms = double(m.mtp_params().norms);
  mtp_moe = m.is_moe() && m.mtp_layer_is_moe();
}

TablesHeld RankParamCounter::Tables(const PipelineRank& held) const {
  TablesHeld t;
  const bool tied = embeddings.output_layer <= 0;
  if (held.embedding) t.input = 1;
  if (held.loss) {
    if (!tied) {
      t.output = 1;
    } else if (!held.embedding) {
      // Tied: the loss stage holds its own copy of the table, unless the
      // embedding is on its rank too (pp 1, or DualPipeV's V).
      t.input += 1;
    }
  }
  if (held.mtp_layers > 0) {
    // The MTP stage embeds the next tokens itself (Megatron builds the
    // embedding there and keeps it equal to the first stage's): a copy
    // unless it already holds one.
    if (t.input == 0) t.input = 1;
    // And it needs the output head: untied, a copy off the loss stage;
    // tied, the table it holds.
    if (!tied && t.output == 0) t.output = 1;
  }
  return t;
}

StageParams RankParamCounter::OnRank(const Layout& layout, const PipelineRank& held) const {
  const double tp = std::max(1, layout.tp);
  const double expert_shards = double(std::max(1, layout.ep)) * std::max(1, layout.etp);
  // MTP layers count as decoder layers of the last layer's kind.
  const double mtp = held.mtp_layers;
  const double moe = held.moe_layers + (mtp_moe ? mtp : 0);
  const double dense = held.dense_layers() + (mtp_moe ? 0 : mtp);

  StageParams p;
  p.dense = dense * (dense_layer_tp / tp + dense_layer_replicated) +
            moe * (moe_layer_tp / tp + moe_layer_replicated) + mtp * (mtp_projection / tp + mtp_norms);
  p.expert = moe * moe_layer_experts / expert_shards;
  p.gemm = dense * (dense_layer_tp / tp + layer_gemm_replicated) +
           moe * (moe_layer_tp / tp + layer_gemm_replicated) + p.expert + mtp * mtp_projection / tp;
  const TablesHeld tables = Tables(held);
  // Vocab-parallel tables; learned positions (replicated) go with each
  // input-table copy that embeds tokens (not a tied loss-stage copy).
  p.dense += tables.input * double(embeddings.input_embedding) / tp +
             tables.output * double(embeddings.output_layer) / tp;
  if (held.embedding || held.mtp_layers > 0) p.dense += double(embeddings.position_embedding);
  if (held.loss) p.dense += double(embeddings.final_norm);
  return p;
}

StageParams RankParamCounter::Largest(const Layout& layout, const PipelineDescription& pipeline) const {
  StageParams largest;
  const PipelineRank* last = nullptr;
  for (const PipelineRank& held : pipeline.ranks) {
    if (last && held == *last) continue;  // the middle ranks often hold alike: the same shares
    last = &held;
    const StageParams p = OnRank(layout, held);
    largest.dense = std::max(largest.dense, p.dense);
    largest.expert = std::max(largest.expert, p.expert);
  }
  return largest;
}

double RankParamCounter::DenseLayer(int tp) const { return dense_layer_tp / std::max(1, tp) + dense_layer_replicated; }

double RankParamCounter::MoeLayer(int tp) const { return moe_layer_tp / std::max(1, tp) + moe_layer_replicated; }

double RankParamCounter::Experts(int ep, int etp) const {
  return moe_layer_experts / (double(std::max(1, ep)) * std::max(1, etp));
}

double RankParamCounter::Embedding(int tp) const {
  return double(embeddings.input_embedding) / std::max(1, tp) + double(embeddings.position_embedding);
}

double RankParamCounter::OutputLayer(int tp, int pp) const {
  // Untied: the output layer; tied: with pp > 1 the last stage's copy of
  // the input table, with pp 1 the one table, counted with the embedding.
  const double table = embeddings.output_layer > 0 ? double(embeddings.output_layer)
                       : pp > 1                    ? double(embeddings.input_embedding)
                                                   : 0;
  return table / std::max(1, tp) + double(embeddings.final_norm);
}

}  // namespace foldplan
