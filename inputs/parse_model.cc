// Reading a `foldplan.model/v1` file (doc/formats.md#model).
#include <cstdint>
#include <string>

#include "inputs/loader.h"
#include "inputs/parse_common.h"

namespace foldplan {
namespace {

using inputs_internal::IntField;

// Upper bounds: generous for any published model, and small enough that
// products such as heads x head_dim or hidden x ffn_hidden fit in int64 and
// heads x head_dim fits in int. kMaxLayers is in inputs/model.h.
constexpr int kMaxHidden = 1 << 18;
constexpr int kMaxHeads = 4096;
constexpr int kMaxHeadDim = 4096;
constexpr int kMaxVocab = 1 << 24;
constexpr int kMaxFfn = 1 << 22;
constexpr int kMaxExperts = 1 << 16;
constexpr int kMaxRank = 1 << 18;
// Above this the model is surely a typo, and counts near int64 would overflow.
constexpr double kMaxParams = 1e15;

std::string Str(int64_t v) { return std::to_string(v); }

void ReadDimensions(CheckedObject& root, ModelSpec& m) {
  m.layers = IntField(root, "layers", 1, kMaxLayers);
  m.hidden = IntField(root, "hidden", 1, kMaxHidden);
  m.heads = IntField(root, "heads", 1, kMaxHeads);
  m.kv_heads = IntField(root, "kv_heads", 1, kMaxHeads);
  m.head_dim = IntField(root, "head_dim", 1, kMaxHeadDim);
  m.vocab = IntField(root, "vocab", 1, kMaxVocab);
  m.ffn_hidden = IntField(root, "ffn_hidden", 0, kMaxFfn, 0);
  const std::string activation = root.Enum("activation", {"swiglu", "gelu"});
  m.activation = activation == "gelu" ? Activation::kGeLU : Activation::kSwiGLU;
}

MlaSpec ReadMla(CheckedObject mla) {
  MlaSpec out;
  out.q_lora_rank = IntField(mla, "q_lora_rank", 0, kMaxRank);
  out.kv_lora_rank = IntField(mla, "kv_lora_rank", 1, kMaxRank);
  out.qk_nope_head_dim = IntField(mla, "qk_nope_head_dim", 0, kMaxHeadDim);
  out.qk_rope_head_dim = IntField(mla, "qk_rope_head_dim", 0, kMaxHeadDim);
  out.v_head_dim = IntField(mla, "v_head_dim", 1, kMaxHeadDim);
  mla.Finish();
  return out;
}

void ReadAttention(CheckedObject& root, ModelSpec& m) {
  const std::string kind = root.Enum("attention", {"mha", "gqa", "mla"});
  m.attention = kind == "mha"   ? AttentionKind::kMHA
                : kind == "mla" ? AttentionKind::kMLA
                                : AttentionKind::kGQA;
  if (m.attention == AttentionKind::kMLA) {
    if (auto mla = inputs_internal::RequiredObject(root, "mla")) m.mla = ReadMla(*mla);
  } else if (root.Has("mla")) {
    root.OptionalObject("mla");  // mark it read; it is reported below instead
    root.errors()->Add(root.Pointer("mla"), "expected no \"mla\" object unless attention is "
                                            "\"mla\", found one with attention \"" + kind + "\"");
  }
  m.qkv_bias = root.Bool("qkv_bias", false);
  m.qk_norm = root.Bool("qk_norm", false);
}

MoeSpec ReadMoe(CheckedObject moe) {
  MoeSpec out;
  out.experts = IntField(moe, "experts", 1, kMaxExperts);
  out.top_k = IntField(moe, "top_k", 1, kMaxExperts);
  out.ffn_hidden = IntField(moe, "ffn_hidden", 1, kMaxFfn);
  out.shared_experts = IntField(moe, "shared_experts", 0, 256, 0);
  out.shared_ffn_hidden = IntField(moe, "shared_ffn_hidden", 0, kMaxFfn, 0);
  out.shared_expert_gate = moe.Bool("shared_expert_gate", false);
  out.first_k_dense = IntField(moe, "first_k_dense", 0, kMaxLayers, 0);
  out.layer_freq = IntField(moe, "layer_freq", 1, kMaxLayers, 1);
  moe.Finish();
  return out;
}

void ReadEmbeddings(CheckedObject& root, ModelSpec& m) {
  m.tied_embeddings = root.Bool("tied_embeddings", false);
  m.learned_positions = root.Bool("learned_positions", false);
  m.max_positions = IntField(root, "max_positions", 1, kMaxVocab, 0);
  m.mtp_layers = IntField(root, "mtp_layers", 0, kMaxMtpLayers, 0);
}

void CheckAttentionRules(const ModelSpec& m, JsonErrors& errors) {
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0) {
    errors.Add("/kv_heads", "expected a divisor of heads (" + Str(m.heads) + "), found " +
                                Str(m.kv_heads));
  } else if (m.attention != AttentionKind::kGQA && m.kv_heads != m.heads) {
    errors.Add("/kv_heads", std::string("expected kv_heads == heads (") + Str(m.heads) +
                                ") for attention \"" +
                                (m.attention == AttentionKind::kMHA ? "mha" : "mla") +
                                "\", found " + Str(m.kv_heads));
  }
  if (m.mla) {
    const int qk = m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim;
    if (m.head_dim != qk) {
      errors.Add("/head_dim", "expected mla.qk_nope_head_dim + mla.qk_rope_head_dim (" +
                                  Str(qk) + ") for attention \"mla\", found " + Str(m.head_dim));
    }
  }
}

void CheckMoeRules(const ModelSpec& m, JsonErrors& errors) {
  const MoeSpec& e = *m.moe;
  if (e.top_k > e.experts) {
    errors.Add("/moe/top_k", "expected at most moe.experts (" + Str(e.experts) + "), found " +
                                 Str(e.top_k));
  }
  if (e.first_k_dense >= m.layers) {
    errors.Add("/moe/first_k_dense", "expected fewer than layers (" + Str(m.layers) +
                                         ") so that some layer is MoE, found " +
                                         Str(e.first_k_dense));
  }
  if ((e.shared_experts > 0) != (e.shared_ffn_hidden > 0)) {
    errors.Add("/moe/shared_ffn_hidden",
               "expected a width >= 1 exactly when moe.shared_experts > 0 (shared_experts " +
                   Str(e.shared_experts) + "), found " + Str(e.shared_ffn_hidden));
  }
  if (e.shared_expert_gate && e.shared_experts == 0) {
    errors.Add("/moe/shared_expert_gate",
               "expected false when moe.shared_experts is 0, found true");
  }
}

// Dense layers need a width; an all-MoE model must say 0 so that a copied
// but unused config value (Qwen's intermediate_size) is not mistaken for one.
void CheckFfnRule(const ModelSpec& m, JsonErrors& errors) {
  const bool has_dense_layer = m.moe_layer_count() < m.layers;
  if (has_dense_layer && m.ffn_hidden == 0) {
    errors.Add("/ffn_hidden", "expected a width >= 1 because " +
                                  Str(m.layers - m.moe_layer_count()) +
                                  " layer(s) use the dense MLP, found 0 (or missing)");
  } else if (!has_dense_layer && m.ffn_hidden != 0) {
    errors.Add("/ffn_hidden", "expected 0 (or no field) because every layer is MoE and the "
                              "value would be unused, found " + Str(m.ffn_hidden));
  }
}

void CheckPositionRule(const ModelSpec& m, JsonErrors& errors) {
  if (m.learned_positions && m.max_positions == 0) {
    errors.Add("/max_positions", "missing; expected an integer >= 1 (rows of the position "
                                 "table) because learned_positions is true");
  } else if (!m.learned_positions && m.max_positions != 0) {
    errors.Add("/max_positions", "expected no field unless learned_positions is true, found " +
                                     Str(m.max_positions));
  }
}

void CheckSizeRule(const ModelSpec& m, JsonErrors& errors) {
  // Counted in double: the field bounds alone do not keep int64 from overflowing.
  const double params = inputs_internal::TotalParamsAsDouble(m);
  if (params > kMaxParams) {
    errors.Add("", "expected a model of at most 1e15 parameters, found " +
                       std::to_string(params) + " from these dimensions");
  }
}

// Rules between fields; run only when every field is valid on its own.
void CheckModelRules(const ModelSpec& m, JsonErrors& errors) {
  CheckAttentionRules(m, errors);
  if (m.moe) CheckMoeRules(m, errors);
  CheckPositionRule(m, errors);
  if (!errors.empty()) return;  // the counts below assume the rules above
  CheckFfnRule(m, errors);
  if (errors.empty()) CheckSizeRule(m, errors);
}

}  // namespace

Result<ModelSpec> ParseModel(const nlohmann::json& json, const std::string& file) {
  JsonErrors errors(file);
  CheckedObject root(json, "", &errors);
  if (!inputs_internal::CheckSchema(root, kModelSchema)) return errors.status();

  ModelSpec m;
  m.name = inputs_internal::StemOf(file);
  m.source = file;
  m.description = root.String("description", "");
  ReadDimensions(root, m);
  ReadAttention(root, m);
  if (auto moe = inputs_internal::OptionalObject(root, "moe")) m.moe = ReadMoe(*moe);
  ReadEmbeddings(root, m);
  root.Finish();

  if (errors.empty()) CheckModelRules(m, errors);
  if (!errors.empty()) return errors.status();
  return m;
}

}  // namespace foldplan
