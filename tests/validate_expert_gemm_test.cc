// The GEMM expert function of dispatch --expert gemm (validate/kernels.h):
// the host bf16 GEMM (what the MPI backend's ExpertGemm runs) against hand
// values, and the GEMMs of the structured weights against the closed form
// the dispatch check uses.
//
// The math: shard j of expert e has W1 [H x F] with one nonzero per column
// f, W1[p1(f)][f] = s1(f) = +-1, and W2 [F x H] with one 1 per column i,
// W2[p2(i)][i] = 1. So for a row x,
//   h[f] = sum_i x[i] W1[i][f] = s1(f) x[p1(f)],
//   y[i] = sum_f h[f] W2[f][i] = h[p2(i)] = s1(p2(i)) x[p1(p2(i))],
// each an f32 sum of one nonzero product and zeros (exact), and with x
// small integers every value is a small integer, exact in bf16. The ETP
// reduce-scatter adds the shards: expert e's output is sum_j y_j[i].
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "validate/kernels.h"
#include "validate_bf16_util.h"

using namespace foldplan::validate;

namespace {

// A small shape: H 16, F 6 (a shard's F/etp), rows 0..7 as in dispatch.
constexpr int64_t kHidden = 16, kFfn = 6;

uint16_t SmallValue(int64_t row, int64_t i) {
  return FloatToBf16(static_cast<float>((row * 5 + i * 3 + (i * i) % 7) % 8));
}

// Dense y = (x W1) W2 in double, straight from the weights, for checking
// the closed form itself.
double DenseOutput(const uint16_t* x, const std::vector<uint16_t>& w1,
                   const std::vector<uint16_t>& w2, int64_t i) {
  double y = 0;
  for (int64_t f = 0; f < kFfn; ++f) {
    double h = 0;
    for (int64_t p = 0; p < kHidden; ++p) h += Bf16ToFloat(x[p]) * Bf16ToFloat(w1[p * kFfn + f]);
    y += h * Bf16ToFloat(w2[f * kHidden + i]);
  }
  return y;
}

}  // namespace

TEST_CASE("HostGemmBf16: row-major product, f32 sums rounded once to bf16") {
  // a = [1 2 3; 4 5 6], b = [1 0; 0 1; 1 1]:
  // c = [1 + 3, 2 + 3; 4 + 6, 5 + 6] = [4 5; 10 11].
  const std::vector<uint16_t> a = Bf16s({1, 2, 3, 4, 5, 6}), b = Bf16s({1, 0, 0, 1, 1, 1});
  std::vector<uint16_t> c(4, 0xFFFF);
  HostGemmBf16(c.data(), a.data(), b.data(), 2, 3, 2);
  CHECK(Floats(c) == std::vector<float>{4, 5, 10, 11});

  // [129 128] x [1; 1] = 257 in f32 (exact), which bf16 (8 significant
  // bits) cannot hold: half way between 256 and 258, to even -> 256.
  // Rounding each product or partial sum to bf16 would give the same here,
  // so also: 129 x 1 + 128 x 1 + (-1) x 1 = 256 exactly in f32 -> 256,
  // while bf16 partial sums would give bf16(257) - 1 = 255.
  const std::vector<uint16_t> a2 = Bf16s({129, 128, -1}), b2 = Bf16s({1, 1, 1});
  uint16_t c2 = 0;
  HostGemmBf16(&c2, a2.data(), b2.data(), 1, 2, 1);
  CHECK(Bf16ToFloat(c2) == 256);
  HostGemmBf16(&c2, a2.data(), b2.data(), 1, 3, 1);
  CHECK(Bf16ToFloat(c2) == 256);

  // More rows than the 8-row block and a depth not a multiple of 4:
  // a [10 x 5] of ones times b [5 x 3] with b[p][j] = p + j gives
  // c[r][j] = sum_p (p + j) = 10 + 5j for every row.
  std::vector<uint16_t> ones(50, FloatToBf16(1)), b3(15);
  for (int p = 0; p < 5; ++p)
    for (int j = 0; j < 3; ++j) b3[p * 3 + j] = FloatToBf16(static_cast<float>(p + j));
  std::vector<uint16_t> c3(30);
  HostGemmBf16(c3.data(), ones.data(), b3.data(), 10, 5, 3);
  for (int r = 0; r < 10; ++r) {
    CHECK(Bf16ToFloat(c3[r * 3]) == 10);
    CHECK(Bf16ToFloat(c3[r * 3 + 1]) == 15);
    CHECK(Bf16ToFloat(c3[r * 3 + 2]) == 20);
  }
}

TEST_CASE("MakeExpertGemmWeights: one nonzero per column, at p1 / p2, of s1 / 1") {
  std::vector<uint16_t> w1(kHidden * kFfn), w2(kFfn * kHidden);
  MakeExpertGemmWeights(w1.data(), w2.data(), 5, 1, kHidden, kFfn);
  for (int64_t f = 0; f < kFfn; ++f) {
    int nonzero = 0;
    for (int64_t i = 0; i < kHidden; ++i) nonzero += w1[i * kFfn + f] != 0;
    CHECK(nonzero == 1);
    CHECK(Bf16ToFloat(w1[ExpertGemmP1(5, 1, f, kHidden) * kFfn + f]) == ExpertGemmS1(5, 1, f));
  }
  for (int64_t i = 0; i < kHidden; ++i) {
    int nonzero = 0;
    for (int64_t f = 0; f < kFfn; ++f) nonzero += w2[f * kHidden + i] != 0;
    CHECK(nonzero == 1);
    CHECK(Bf16ToFloat(w2[ExpertGemmP2(5, 1, i, kFfn) * kHidden + i]) == 1);
  }
  // Both signs and several rows occur (the hash is not degenerate).
  int negative = 0;
  for (int64_t f = 0; f < 64; ++f) negative += ExpertGemmS1(5, 1, f) < 0;
  CHECK(negative > 16);
  CHECK(negative < 48);
  CHECK(ExpertGemmP1(5, 1, 0, 1 << 20) != ExpertGemmP1(5, 1, 1, 1 << 20));
  CHECK(ExpertGemmP1(5, 0, 0, 1 << 20) != ExpertGemmP1(5, 1, 0, 1 << 20));
  CHECK(ExpertGemmP1(4, 1, 0, 1 << 20) != ExpertGemmP1(5, 1, 0, 1 << 20));
}

TEST_CASE("HostExpertGemm: grouped rows equal the closed form; shards sum to the output") {
  // Three experts 4, 5, 6 (global ids) with 2, 0 and 3 rows, grouped
  // contiguously; both ETP shards j = 0, 1 of each.
  const std::vector<int64_t> experts = {4, 5, 6}, rows_per_expert = {2, 0, 3};
  const int64_t count = 5;
  std::vector<uint16_t> x(count * kHidden);
  for (int64_t r = 0; r < count; ++r)
    for (int64_t i = 0; i < kHidden; ++i) x[r * kHidden + i] = SmallValue(r, i);
  std::vector<int64_t> expert_of_row = {4, 4, 6, 6, 6};

  std::vector<std::vector<uint16_t>> y(2);
  for (int j = 0; j < 2; ++j) {
    std::vector<std::vector<uint16_t>> w1(3, std::vector<uint16_t>(kHidden * kFfn)),
        w2(3, std::vector<uint16_t>(kFfn * kHidden));
    std::vector<const uint16_t*> w1p, w2p;
    for (int g = 0; g < 3; ++g) {
      MakeExpertGemmWeights(w1[g].data(), w2[g].data(), experts[g], j, kHidden, kFfn);
      w1p.push_back(w1[g].data());
      w2p.push_back(w2[g].data());
    }
    y[j] = x;
    std::vector<uint16_t> scratch(count * kFfn, 0xFFFF);
    HostExpertGemm(y[j].data(), rows_per_expert.data(), 3, kHidden, kFfn, w1p.data(),
                   w2p.data(), scratch.data());
    int wrong = 0, dense_wrong = 0;
    for (int64_t r = 0; r < count; ++r) {
      const int g = expert_of_row[r] == 4 ? 0 : 2;
      for (int64_t i = 0; i < kHidden; ++i) {
        const float closed = ExpertGemmShardValue(&x[r * kHidden], expert_of_row[r], j, i,
                                                  kHidden, kFfn);
        wrong += Bf16ToFloat(y[j][r * kHidden + i]) != closed;
        dense_wrong += DenseOutput(&x[r * kHidden], w1[g], w2[g], i) != closed;
      }
    }
    CHECK(wrong == 0);
    CHECK(dense_wrong == 0);  // the closed form is the dense product's value
  }
  // The reduce-scatter's sum of the two shards is ExpertGemmOutput (etp 2),
  // and it depends on the expert: rows of expert 4 read as expert 6 differ.
  int wrong = 0, other_expert_differs = 0;
  for (int64_t r = 0; r < count; ++r)
    for (int64_t i = 0; i < kHidden; ++i) {
      const float sum = Bf16ToFloat(y[0][r * kHidden + i]) + Bf16ToFloat(y[1][r * kHidden + i]);
      wrong += sum != ExpertGemmOutput(&x[r * kHidden], expert_of_row[r], 2, i, kHidden, kFfn);
      other_expert_differs +=
          sum != ExpertGemmOutput(&x[r * kHidden], 10 - expert_of_row[r], 2, i, kHidden, kFfn);
    }
  CHECK(wrong == 0);
  CHECK(other_expert_differs > 0);
}

TEST_CASE("HostExpertGemm: a wrong weight changes the output (the check can fail)") {
  // One row x = 1..7 repeated (no zero, so flipping a sign always shows),
  // expert 3, shard 0. Flip the sign of W1's nonzero in column
  // f = p2(0): y[0] = s1(f) x[p1(f)] becomes -y[0] != y[0].
  const int64_t expert = 3;
  std::vector<uint16_t> x(kHidden);
  for (int64_t i = 0; i < kHidden; ++i) x[i] = FloatToBf16(static_cast<float>(1 + i % 7));
  std::vector<uint16_t> w1(kHidden * kFfn), w2(kFfn * kHidden);
  MakeExpertGemmWeights(w1.data(), w2.data(), expert, 0, kHidden, kFfn);
  const int64_t one = 1;
  std::vector<uint16_t> scratch(kFfn);
  auto run = [&](const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
    std::vector<uint16_t> y = x;
    const uint16_t* w1p = a.data();
    const uint16_t* w2p = b.data();
    HostExpertGemm(y.data(), &one, 1, kHidden, kFfn, &w1p, &w2p, scratch.data());
    int wrong = 0;
    for (int64_t i = 0; i < kHidden; ++i) {
      wrong += Bf16ToFloat(y[i]) != ExpertGemmShardValue(x.data(), expert, 0, i, kHidden, kFfn);
    }
    return wrong;
  };
  CHECK(run(w1, w2) == 0);

  const int64_t f = ExpertGemmP2(expert, 0, 0, kFfn);
  std::vector<uint16_t> bad_w1 = w1;
  uint16_t& entry = bad_w1[ExpertGemmP1(expert, 0, f, kHidden) * kFfn + f];
  entry = FloatToBf16(-Bf16ToFloat(entry));
  CHECK(run(bad_w1, w2) > 0);

  // Moving W2's 1 of column 0 to another row f' reads h[f'] instead of
  // h[f]; with these x the values differ for some f', and then y[0] does.
  int caught = 0;
  for (int64_t other = 0; other < kFfn; ++other) {
    if (other == f) continue;
    std::vector<uint16_t> bad_w2 = w2;
    bad_w2[f * kHidden + 0] = 0;
    bad_w2[other * kHidden + 0] = FloatToBf16(1);
    const float h_f =
        ExpertGemmS1(expert, 0, f) * Bf16ToFloat(x[ExpertGemmP1(expert, 0, f, kHidden)]);
    const float h_other =
        ExpertGemmS1(expert, 0, other) * Bf16ToFloat(x[ExpertGemmP1(expert, 0, other, kHidden)]);
    if (h_f != h_other) {
      CHECK(run(w1, bad_w2) == 1);
      ++caught;
    }
  }
  CHECK(caught > 0);
}
