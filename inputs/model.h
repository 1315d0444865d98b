// A transformer model (dense or mixture-of-experts) as read from a
// `foldplan.model/v1` file (doc/formats.md). Sizes are element counts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace foldplan {

enum class Activation { kSwiGLU, kGeLU };
enum class AttentionKind { kMHA, kGQA, kMLA };

// Multi-head latent attention (DeepSeek-V2/V3).
struct MlaSpec {
  int q_lora_rank = 0;         // 0: queries are not low-rank compressed
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
};

struct MoeSpec {
  int experts = 0;             // routed experts
  int top_k = 0;
  int ffn_hidden = 0;          // per routed expert
  int shared_experts = 0;      // shared experts, each of width shared_ffn_hidden
  int shared_ffn_hidden = 0;
  bool shared_expert_gate = false;  // a sigmoid gate (hidden -> 1) on the shared block
  int first_k_dense = 0;       // the first k layers use the dense MLP
  int layer_freq = 1;          // after those, every layer_freq-th layer is MoE
};

// Parameters of one decoder layer, split by how parallelism shards them, so
// that the memory model (costmodel/memory.h) places each part on a rank
// without counting again. The sum is what total_params() counts per layer.
struct LayerParams {
  int64_t attention = 0;             // TP-sharded: q/k/v/o (MLA: q_b or q, kv_b, o), QKV bias
  int64_t attention_replicated = 0;  // not TP-sharded: MLA q_a/kv_a down-projections and
                                     // their latent norms (Megatron builds them duplicated),
                                     // q/k norms
  int64_t norms = 0;                 // the norms before attention and before the MLP
  int64_t dense_mlp = 0;             // dense layers only; TP-sharded
  int64_t router = 0;                // MoE layers only; replicated (a dense-view parameter)
  int64_t routed_expert = 0;         // ONE routed expert's MLP; ETP-sharded
  int routed_experts = 0;            // routed experts in the layer (0 in dense layers)
  int64_t shared_experts = 0;        // every shared expert together; TP-sharded like a dense MLP
  int64_t shared_expert_gate = 0;    // hidden -> 1, replicated

  // Every weight of the layer, all routed experts included.
  int64_t total() const { return non_expert() + int64_t(routed_experts) * routed_expert; }
  // Everything outside the routed experts (gradients reduce over DP x CP).
  int64_t non_expert() const {
    return attention + attention_replicated + norms + dense_mlp + router + shared_experts +
           shared_expert_gate;
  }
};

// An MTP module's own parameters (Megatron's MultiTokenPredictionLayer,
// DeepSeek-V3's MTP), beside its one decoder layer of the model's last
// layer's kind; the embedding and output head are the model's, shared.
struct MtpParams {
  int64_t projection = 0;  // eh_proj: [hidden; next-token embedding] 2H -> H, TP-split
  int64_t norms = 0;       // enorm, hnorm and its final norm, H each, replicated
  int64_t total() const { return projection + norms; }
};

// Parameters outside the decoder layers.
struct EmbeddingParams {
  int64_t input_embedding = 0;     // vocab x hidden, vocab-parallel over TP (first stage)
  int64_t position_embedding = 0;  // learned positions, replicated (first stage)
  int64_t output_layer = 0;        // vocab x hidden, vocab-parallel over TP (last stage);
                                   // 0 when tied: the last stage then holds a copy of the
                                   // input embedding instead (when pp > 1)
  int64_t final_norm = 0;          // hidden (last stage)

  int64_t total() const { return input_embedding + position_embedding + output_layer + final_norm; }
};

// Decoder layers of a model file ([1, this]); also the most layers one
// virtual stage of a layout's stages= may hold (doc/formats.md#model).
inline constexpr int kMaxLayers = 4096;

struct ModelSpec {
  std::string name;
  std::string source;          // file it came from
  std::string description;
  int layers = 0;
  int hidden = 0;
  int heads = 0;               // query heads
  int kv_heads = 0;            // key/value heads (query groups); == heads for MHA and MLA
  int head_dim = 0;            // query/key head dim (MLA: nope + rope)
  int vocab = 0;
  int ffn_hidden = 0;          // dense MLP width; 0 if every layer is MoE
  Activation activation = Activation::kSwiGLU;
  AttentionKind attention = AttentionKind::kGQA;
  std::optional<MlaSpec> mla;  // set iff attention == kMLA
  bool qkv_bias = false;
  bool qk_norm = false;
  std::optional<MoeSpec> moe;  // unset for dense models
  bool tied_embeddings = false;
  bool learned_positions = false;  // absolute position embedding table (GPT-3)
  int max_positions = 0;           // rows of that table
  int mtp_layers = 0;              // multi-token-prediction modules (not counted in params)

  bool is_moe() const { return moe.has_value(); }
  // Layer i (0-based) uses the MoE block.
  bool layer_is_moe(int i) const;
  int moe_layer_count() const;
  // MoE layers among layers 0 .. layer - 1 (layer clamped to [0, layers]).
  int moe_layers_below(int layer) const;
  // Value head dim: MLA's v_head_dim, else head_dim.
  int v_head_dim() const;

  // Parameters of one dense (moe_layer false) or MoE decoder layer.
  LayerParams layer_params(bool moe_layer) const;
  EmbeddingParams embedding_params() const;
  // One MTP module: its own parameters, and whether its decoder layer is a
  // MoE layer (the last decoder layer's kind).
  MtpParams mtp_params() const;
  bool mtp_layer_is_moe() const { return layers > 0 && layer_is_moe(layers - 1); }

  // Parameter counts, embeddings and output layer included, MTP excluded.
  int64_t total_params() const;
  // Parameters touched by one token: shared weights + top_k routed experts.
  int64_t active_params() const;
};

}  // namespace foldplan
