// Parameter counts of the shipped models against the published figures
// (shared/reference/models.md), and the layer layout behind them.
//
// The arithmetic for mixtral-8x7b (32 layers, hidden 4096, 32 / 8 heads of
// 128, vocab 32000, 8 experts of width 14336, top 2, untied):
//   attention  q 4096x4096 + k 4096x1024 + v 4096x1024 + o 4096x4096
//              = 16,777,216 + 4,194,304 + 4,194,304 + 16,777,216 = 41,943,040
//   norms      2 x 4096 = 8,192
//   router     4096 x 8 = 32,768
//   expert     3 x 4096 x 14336 = 176,160,768 (SwiGLU: gate, up, down)
//   layer      41,943,040 + 8,192 + 32,768 + 8 x 176,160,768 = 1,451,270,144
//   embeddings 2 x 32000 x 4096 = 262,144,000 (input table + output layer)
//   total      32 x 1,451,270,144 + 262,144,000 + 4096 (final norm)
//              = 46,702,792,704  (published 46.7B)
//   active     layer with 2 experts: 41,943,040 + 8,192 + 32,768 + 352,321,536
//              = 394,305,536; 32 x that + 262,148,096 = 12,879,925,248 (12.9B)
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "inputs/loader.h"
#include "shipped_model.h"

using namespace foldplan;

namespace {

struct Published {
  const char* model;
  double total_billions;
  double active_billions;  // == total for dense models
  double tolerance;        // relative
};

// 1% unless noted. Three active figures are published to two significant
// digits only, and the count, done the same way as for every other model
// (embeddings and output layer included), lands just outside 1% of them, so
// they get 2%:
//   qwen3-30b-a3b: 3.353B against "3.3B" (+1.6%; the publisher truncates);
//   olmoe-1b-7b: 1.282B against "1.3B" (-1.4%);
//   deepseek-v3: 37.55B against "37B" (+1.5%); leaving the input embedding
//     out, as some counts do, gives 36.63B (-1.0%) instead.
// Every total is within 1% (deepseek-v3: 671.03B against 671B).
constexpr Published kPublished[] = {
    {"mixtral-8x7b", 46.7, 12.9, 0.01},     {"mixtral-8x22b", 140.6, 39.2, 0.01},
    {"qwen2-57b-a14b", 57.4, 14.3, 0.01},   {"qwen3-30b-a3b", 30.5, 3.3, 0.02},
    {"qwen3-235b-a22b", 235.1, 22.2, 0.01}, {"deepseek-v3", 671, 37, 0.02},
    {"olmoe-1b-7b", 6.9, 1.3, 0.02},        {"llama3-70b", 70.6, 70.6, 0.01},
    {"gpt3-175b", 174.6, 174.6, 0.01},
};

double Billions(int64_t n) { return double(n) / 1e9; }

using foldplan::testing::ShippedModel;

}  // namespace

TEST_CASE("mixtral-8x7b counts exactly as the worked arithmetic above") {
  const ModelSpec m = ShippedModel("mixtral-8x7b");
  CHECK(m.total_params() == 46'702'792'704);
  CHECK(m.active_params() == 12'879'925'248);
}

TEST_CASE("every shipped model matches its published total and active counts") {
  for (const Published& p : kPublished) {
    const std::string name = p.model;
    CAPTURE(name);
    const ModelSpec m = ShippedModel(p.model);
    const double total = Billions(m.total_params());
    const double active = Billions(m.active_params());
    MESSAGE(name << ": total " << total << "B, active " << active << "B");
    CHECK(std::abs(total / p.total_billions - 1) <= 0.01);
    CHECK(std::abs(active / p.active_billions - 1) <= p.tolerance);
  }
}

TEST_CASE("the published table covers every shipped model") {
  auto shipped = ListShipped(InputKind::kModel);
  REQUIRE(shipped.ok());
  for (const ShippedInput& s : shipped.value()) {
    bool listed = false;
    for (const Published& p : kPublished) listed = listed || s.name == p.model;
    CHECK_MESSAGE(listed, s.name << " has no published count in this test");
  }
}

TEST_CASE("dense models have active == total") {
  for (const char* name : {"llama3-70b", "gpt3-175b"}) {
    const ModelSpec m = ShippedModel(name);
    CHECK_FALSE(m.is_moe());
    CHECK(m.moe_layer_count() == 0);
    CHECK(m.active_params() == m.total_params());
  }
}

TEST_CASE("deepseek-v3: first three layers dense, the other 58 MoE, MLA dims") {
  const ModelSpec m = ShippedModel("deepseek-v3");
  CHECK_FALSE(m.layer_is_moe(0));
  CHECK_FALSE(m.layer_is_moe(2));
  CHECK(m.layer_is_moe(3));
  CHECK(m.layer_is_moe(60));
  CHECK_FALSE(m.layer_is_moe(61));  // out of range
  CHECK_FALSE(m.layer_is_moe(-1));
  CHECK(m.moe_layer_count() == 58);
  CHECK(m.v_head_dim() == 128);
  CHECK(m.head_dim == 192);
  CHECK(m.mtp_layers == 1);
  // MTP is not counted: 671B, not 685B.
  CHECK(Billions(m.total_params()) < 672);
}

TEST_CASE("deepseek-v3's MTP module: its layer, eh_proj and norms, with the embedding and head, are the published 14B") {
  // A MoE decoder layer (the last layer's kind) + eh_proj 2 x 7168^2 =
  // 102,760,448 + 3 x 7168 norms; DeepSeek's checkpoint stores the MTP
  // module with its own copies of the embedding and output head
  // (2 x 129,280 x 7,168 = 1,853,358,080), which foldplan counts once (shared).
  const ModelSpec m = ShippedModel("deepseek-v3");
  CHECK(m.mtp_layer_is_moe());
  CHECK(m.mtp_params().projection == 102'760'448);
  CHECK(m.mtp_params().norms == 3 * 7168);
  const double module = double(m.layer_params(true).total()) + double(m.mtp_params().total());
  const double with_tables = module + 2.0 * 129280 * 7168;
  CHECK(with_tables / 1e9 == doctest::Approx(14).epsilon(0.05));
}

TEST_CASE("layer_freq places MoE layers every k-th layer after the dense ones") {
  ModelSpec m = ShippedModel("mixtral-8x7b");
  m.moe->first_k_dense = 1;
  m.moe->layer_freq = 2;
  // Layers 1, 3, 5, ..., 31 of 32.
  CHECK_FALSE(m.layer_is_moe(0));
  CHECK(m.layer_is_moe(1));
  CHECK_FALSE(m.layer_is_moe(2));
  CHECK(m.layer_is_moe(31));
  CHECK(m.moe_layer_count() == 16);
  int counted = 0;
  for (int i = 0; i < m.layers; ++i) counted += m.layer_is_moe(i) ? 1 : 0;
  CHECK(counted == m.moe_layer_count());
}

TEST_CASE("options change the count by exactly their own weights") {
  ModelSpec m = ShippedModel("llama3-70b");
  const int64_t base = m.total_params();
  const int64_t per_layer_qkv_bias = 64 * 128 + 2 * 8 * 128;
  m.qkv_bias = true;
  CHECK(m.total_params() - base == 80 * per_layer_qkv_bias);
  m.qkv_bias = false;
  m.qk_norm = true;
  CHECK(m.total_params() - base == 80 * 2 * 128);
  m.qk_norm = false;
  m.tied_embeddings = true;
  CHECK(base - m.total_params() == int64_t(128256) * 8192);
  m.tied_embeddings = false;
  m.activation = Activation::kGeLU;  // one of the three MLP matrices goes
  CHECK(base - m.total_params() == int64_t(80) * 8192 * 28672);
}

TEST_CASE("MLA without query compression projects queries directly") {
  ModelSpec m = ShippedModel("deepseek-v3");
  const int64_t base = m.total_params();
  m.mla->q_lora_rank = 0;
  // q_a (7168x1536) + q_a_norm (1536) + q_b (1536 x 128*192) become 7168 x 128*192.
  const int64_t compressed = 7168LL * 1536 + 1536 + 1536LL * 128 * 192;
  const int64_t direct = 7168LL * 128 * 192;
  CHECK(m.total_params() - base == 61 * (direct - compressed));
}
