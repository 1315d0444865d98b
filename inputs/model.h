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
  // Value head dim: MLA's v_head_dim, else head_dim.
  int v_head_dim() const;

  // Parameter counts, embeddings and output layer included, MTP excluded.
  int64_t total_params() const;
  // Parameters touched by one token: shared weights + top_k routed experts.
  int64_t active_params() const;
};

}  // namespace foldplan
