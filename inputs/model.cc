// Layer layout and parameter counting for ModelSpec (doc/formats.md#model,
// "Parameter counting"). What is counted: every weight matrix, the router,
// norm weights (one vector per norm) and the QKV biases when qkv_bias is
// set. Not counted, each well under 0.01% of any shipped model: LayerNorm
// biases and GPT-style biases of the other linear layers, DeepSeek's router
// selection bias, rotary tables (not parameters), and MTP modules.
#include <algorithm>
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

// The parts of one layer, counted in N. Mirrors LayerParams (model.h),
// which is this struct counted in int64.
template <class N>
struct LayerCounts {
  N attention = 0;
  N attention_replicated = 0;
  N norms = 0;
  N dense_mlp = 0;
  N router = 0;
  N routed_expert = 0;
  N routed_experts = 0;
  N shared_experts = 0;
  N shared_expert_gate = 0;

  N Total(N routed) const {
    return attention + attention_replicated + norms + dense_mlp + router + shared_experts +
           shared_expert_gate + routed * routed_expert;
  }
};

// MLA: the down-projections (q_a, kv_a) and their latent norms are not
// split over TP (Megatron-Core builds them as duplicated linears on the
// sequence-parallel rows); the up-projections and o are.
template <class N>
void CountMla(const ModelSpec& m, LayerCounts<N>& c) {
  const MlaSpec& a = *m.mla;
  const N heads = m.heads;
  const N qk_dim = N(a.qk_nope_head_dim) + a.qk_rope_head_dim;
  if (a.q_lora_rank > 0) {
    // q_a (down), its norm, q_b (up to every head's nope + rope parts).
    c.attention_replicated += MatrixCount<N>(m.hidden, a.q_lora_rank) + a.q_lora_rank;
    c.attention += MatrixCount<N>(a.q_lora_rank, heads * qk_dim);
  } else {
    c.attention += MatrixCount<N>(m.hidden, heads * qk_dim);
  }
  // kv_a makes the compressed KV latent plus the shared rope key; kv_b
  // expands the latent into every head's nope key and value.
  c.attention_replicated +=
      MatrixCount<N>(m.hidden, N(a.kv_lora_rank) + a.qk_rope_head_dim) + a.kv_lora_rank;
  c.attention += MatrixCount<N>(a.kv_lora_rank, heads * (N(a.qk_nope_head_dim) + a.v_head_dim));
  c.attention += MatrixCount<N>(heads * a.v_head_dim, m.hidden);  // o
}

template <class N>
LayerCounts<N> CountLayer(const ModelSpec& m, bool moe_layer) {
  LayerCounts<N> c;
  if (m.attention == AttentionKind::kMLA && m.mla) {
    CountMla<N>(m, c);
  } else {
    const N q_width = N(m.heads) * m.head_dim;
    const N kv_width = N(m.kv_heads) * m.head_dim;
    c.attention =
        MatrixCount<N>(m.hidden, q_width + 2 * kv_width) + MatrixCount<N>(q_width, m.hidden);
    if (m.qkv_bias) c.attention += q_width + 2 * kv_width;
  }
  if (m.qk_norm) c.attention_replicated += 2 * N(m.head_dim);  // per-head-dim RMSNorm of q and k
  c.norms = 2 * N(m.hidden);  // before attention, before the MLP
  if (moe_layer && m.moe) {
    const MoeSpec& e = *m.moe;
    c.router = MatrixCount<N>(m.hidden, e.experts);
    c.routed_expert = MlpParams<N>(m, e.ffn_hidden);
    c.routed_experts = e.experts;
    c.shared_experts = N(e.shared_experts) * MlpParams<N>(m, e.shared_ffn_hidden);
    if (e.shared_expert_gate) c.shared_expert_gate = m.hidden;  // hidden -> 1
  } else {
    c.dense_mlp = MlpParams<N>(m, m.ffn_hidden);
  }
  return c;
}

EmbeddingParams CountEmbeddings(const ModelSpec& m) {
  EmbeddingParams e;
  e.input_embedding = MatrixCount<int64_t>(m.vocab, m.hidden);
  e.output_layer = m.tied_embeddings ? 0 : e.input_embedding;
  if (m.learned_positions) e.position_embedding = MatrixCount<int64_t>(m.max_positions, m.hidden);
  e.final_norm = m.hidden;
  return e;
}

template <class N>
N EmbeddingCount(const ModelSpec& m) {
  const N table = MatrixCount<N>(m.vocab, m.hidden);
  N params = m.tied_embeddings ? table : 2 * table;  // input table + output layer
  if (m.learned_positions) params += MatrixCount<N>(m.max_positions, m.hidden);
  return params + N(m.hidden);  // + final norm
}

// With all routed experts (the total) or top_k of them (the active count).
template <class N>
N CountParams(const ModelSpec& m, bool active_only) {
  const N moe_layers = m.moe_layer_count();
  const N dense_layers = N(m.layers) - moe_layers;
  N params = EmbeddingCount<N>(m) + dense_layers * CountLayer<N>(m, false).Total(0);
  if (m.moe) {
    const N routed = active_only ? m.moe->top_k : m.moe->experts;
    params += moe_layers * CountLayer<N>(m, true).Total(routed);
  }
  return params;
}

}  // namespace

bool ModelSpec::layer_is_moe(int i) const {
  if (!moe || i < moe->first_k_dense || i >= layers) return false;
  return moe->layer_freq <= 1 || (i - moe->first_k_dense) % moe->layer_freq == 0;
}

int ModelSpec::moe_layer_count() const { return moe_layers_below(layers); }

int ModelSpec::moe_layers_below(int layer) const {
  layer = std::min(layer, layers);
  if (!moe || layer <= moe->first_k_dense) return 0;
  const int after_dense = layer - moe->first_k_dense;
  const int freq = moe->layer_freq < 1 ? 1 : moe->layer_freq;
  return (after_dense + freq - 1) / freq;  // layers first_k_dense, +freq, +2 freq, ...
}

int ModelSpec::v_head_dim() const { return mla ? mla->v_head_dim : head_dim; }

LayerParams ModelSpec::layer_params(bool moe_layer) const {
  const LayerCounts<int64_t> c = CountLayer<int64_t>(*this, moe_layer);
  LayerParams p;
  p.attention = c.attention;
  p.attention_replicated = c.attention_replicated;
  p.norms = c.norms;
  p.dense_mlp = c.dense_mlp;
  p.router = c.router;
  p.routed_expert = c.routed_expert;
  p.routed_experts = static_cast<int>(c.routed_experts);
  p.shared_experts = c.shared_experts;
  p.shared_expert_gate = c.shared_expert_gate;
  return p;
}

EmbeddingParams ModelSpec::embedding_params() const { return CountEmbeddings(*this); }

MtpParams ModelSpec::mtp_params() const {
  MtpParams p;
  p.projection = 2 * int64_t{hidden} * hidden;
  p.norms = 3 * int64_t{hidden};
  return p;
}

int64_t ModelSpec::total_params() const { return CountParams<int64_t>(*this, false); }

int64_t ModelSpec::active_params() const { return CountParams<int64_t>(*this, true); }

namespace inputs_internal {
double TotalParamsAsDouble(const ModelSpec& model) { return CountParams<double>(model, false); }
}  // namespace inputs_internal

}  // namespace foldplan
