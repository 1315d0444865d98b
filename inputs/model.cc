// Layer layout and parameter counting for ModelSpec (doc/formats.md#model,
// "Parameter counting"). What is counted: every weight matrix, the router,
// norm weights (one vector per norm) and the QKV biases when qkv_bias is
// set. Not counted, each well under 0.01% of any shipped model: LayerNorm
// biases and GPT-style biases of the other linear layers, DeepSeek's router
// selection bias, rotary tables (not parameters), and MTP modules.
#include <cstdint>

#include "inputs/model.h"
#include "inputs/parse_common.h"

namespace foldplan {
namespace {

// Counts are templated on the number type so that the parser can first
// count in double (overflow-free) before anyone counts in int64.
template <class N>
N MatrixCount(N rows, N cols) {
  return rows * cols;
}

// A feed-forward block of width `width`: SwiGLU has gate, up and down
// projections; GELU has up and down.
template <class N>
N MlpParams(const ModelSpec& m, N width) {
  const N matrices = m.activation == Activation::kSwiGLU ? 3 : 2;
  return matrices * MatrixCount<N>(m.hidden, width);
}

template <class N>
N MlaParams(const ModelSpec& m) {
  const MlaSpec& a = *m.mla;
  const N heads = m.heads;
  const N qk_dim = N(a.qk_nope_head_dim) + a.qk_rope_head_dim;
  N q = 0;
  if (a.q_lora_rank > 0) {
    // q_a (down), its norm, q_b (up to every head's nope + rope parts).
    q = MatrixCount<N>(m.hidden, a.q_lora_rank) + a.q_lora_rank +
        MatrixCount<N>(a.q_lora_rank, heads * qk_dim);
  } else {
    q = MatrixCount<N>(m.hidden, heads * qk_dim);
  }
  // kv_a makes the compressed KV latent plus the shared rope key; kv_b
  // expands the latent into every head's nope key and value.
  const N kv = MatrixCount<N>(m.hidden, N(a.kv_lora_rank) + a.qk_rope_head_dim) +
               a.kv_lora_rank +
               MatrixCount<N>(a.kv_lora_rank, heads * (N(a.qk_nope_head_dim) + a.v_head_dim));
  const N o = MatrixCount<N>(heads * a.v_head_dim, m.hidden);
  return q + kv + o;
}

template <class N>
N AttentionParams(const ModelSpec& m) {
  N params = 0;
  if (m.attention == AttentionKind::kMLA && m.mla) {
    params = MlaParams<N>(m);
  } else {
    const N q_width = N(m.heads) * m.head_dim;
    const N kv_width = N(m.kv_heads) * m.head_dim;
    params = MatrixCount<N>(m.hidden, q_width + 2 * kv_width) + MatrixCount<N>(q_width, m.hidden);
    if (m.qkv_bias) params += q_width + 2 * kv_width;
  }
  if (m.qk_norm) params += 2 * N(m.head_dim);  // per-head-dim RMSNorm of q and k
  return params;
}

// One MoE block with `routed` routed experts counted (all of them for the
// total, top_k for the active count).
template <class N>
N MoeParams(const ModelSpec& m, N routed) {
  const MoeSpec& e = *m.moe;
  N params = MatrixCount<N>(m.hidden, e.experts);  // router
  params += routed * MlpParams<N>(m, e.ffn_hidden);
  params += N(e.shared_experts) * MlpParams<N>(m, e.shared_ffn_hidden);
  if (e.shared_expert_gate) params += m.hidden;  // hidden -> 1
  return params;
}

template <class N>
N EmbeddingParams(const ModelSpec& m) {
  const N table = MatrixCount<N>(m.vocab, m.hidden);
  N params = m.tied_embeddings ? table : 2 * table;  // input table + output layer
  if (m.learned_positions) params += MatrixCount<N>(m.max_positions, m.hidden);
  return params;
}

template <class N>
N CountParams(const ModelSpec& m, bool active_only) {
  const N norms_per_layer = 2 * N(m.hidden);  // before attention, before the MLP
  const N dense_layer = AttentionParams<N>(m) + norms_per_layer + MlpParams<N>(m, m.ffn_hidden);
  N moe_layer = 0;
  if (m.moe) {
    const N routed = active_only ? m.moe->top_k : m.moe->experts;
    moe_layer = AttentionParams<N>(m) + norms_per_layer + MoeParams<N>(m, routed);
  }
  const N moe_layers = m.moe_layer_count();
  const N dense_layers = N(m.layers) - moe_layers;
  const N final_norm = m.hidden;
  return EmbeddingParams<N>(m) + dense_layers * dense_layer + moe_layers * moe_layer +
         final_norm;
}

}  // namespace

bool ModelSpec::layer_is_moe(int i) const {
  if (!moe || i < moe->first_k_dense || i >= layers) return false;
  return moe->layer_freq <= 1 || (i - moe->first_k_dense) % moe->layer_freq == 0;
}

int ModelSpec::moe_layer_count() const {
  if (!moe || moe->first_k_dense >= layers) return 0;
  const int after_dense = layers - moe->first_k_dense;
  const int freq = moe->layer_freq < 1 ? 1 : moe->layer_freq;
  return (after_dense + freq - 1) / freq;  // layers first_k_dense, +freq, +2 freq, ...
}

int ModelSpec::v_head_dim() const { return mla ? mla->v_head_dim : head_dim; }

int64_t ModelSpec::total_params() const { return CountParams<int64_t>(*this, false); }

int64_t ModelSpec::active_params() const { return CountParams<int64_t>(*this, true); }

namespace inputs_internal {
double TotalParamsAsDouble(const ModelSpec& model) { return CountParams<double>(model, false); }
}  // namespace inputs_internal

}  // namespace foldplan
