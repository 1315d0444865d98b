// The host kernels (validate/kernels.h) against values worked out by hand:
// a Ulysses pack, a row gather, the dispatcher's expert function, the
// combine (including its summation order) and bf16 rounding. The expected
// values are derived in the comments before each check.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "validate/kernels.h"
#include "validate_bf16_util.h"

using namespace foldplan::validate;

TEST_CASE("HostCopyRuns: the Ulysses seq->heads pack of one rank") {
  // C = 2 ranks, B = 2, L = 2 tokens per rank, H = 2 heads (G = 1 per rank
  // after), d = 2; 2-byte words. Input [B][L][H][d] holds
  // in[b][l][h][x] = 8b + 4l + 2h + x, i.e. 0..15 in order. The packed
  // buffer is [C][B][L][G][d] with block p holding head p:
  // packed[p][b][l][x] = in[b][l][p][x] = 8b + 4l + 2p + x, so
  //   p = 0: 0 1 4 5 | 8 9 12 13     p = 1: 2 3 6 7 | 10 11 14 15
  // One RunCopy over (p, b, l) of runs of G d = 2 words (4 bytes):
  // source strides (bytes) G d 2 = 4, L H d 2 = 16, H d 2 = 8;
  // destination strides B L G d 2 = 16, L G d 2 = 8, G d 2 = 4.
  std::vector<uint16_t> in(16), packed(16, 0xFFFF);
  for (int i = 0; i < 16; ++i) in[i] = static_cast<uint16_t>(i);
  RunCopy pack;
  pack.count[0] = 2, pack.count[1] = 2, pack.count[2] = 2;
  pack.src_stride_bytes[0] = 4, pack.src_stride_bytes[1] = 16, pack.src_stride_bytes[2] = 8;
  pack.dst_stride_bytes[0] = 16, pack.dst_stride_bytes[1] = 8, pack.dst_stride_bytes[2] = 4;
  pack.run_bytes = 4;
  HostCopyRuns(packed.data(), in.data(), pack);
  CHECK(packed == std::vector<uint16_t>{0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15});

  // Unpacking with the strides swapped gives the input back.
  RunCopy unpack = pack;
  std::swap(unpack.src_stride_bytes, unpack.dst_stride_bytes);
  std::vector<uint16_t> back(16, 0xFFFF);
  HostCopyRuns(back.data(), packed.data(), unpack);
  CHECK(back == in);
}

TEST_CASE("HostCopyRuns: nothing is copied when a count is zero") {
  std::vector<uint16_t> src(4, 7), dst(4, 0);
  RunCopy copy;
  copy.count[1] = 0;
  copy.run_bytes = 8;
  HostCopyRuns(dst.data(), src.data(), copy);
  CHECK(dst == std::vector<uint16_t>(4, 0));
}

TEST_CASE("HostGatherRows: dst row r is src row rows[r], repeats allowed") {
  // src rows (2 words each): [10 11] [20 21] [30 31]; rows = 2, 0, 2
  // -> dst [30 31] [10 11] [30 31].
  const std::vector<uint16_t> src = {10, 11, 20, 21, 30, 31};
  const int64_t rows[] = {2, 0, 2};
  std::vector<uint16_t> dst(6, 0);
  HostGatherRows(dst.data(), src.data(), rows, 3, 4);
  CHECK(dst == std::vector<uint16_t>{30, 31, 10, 11, 30, 31});
}

TEST_CASE("HostExpertPartial: x + terms on ETP rank 0, terms alone elsewhere") {
  // ExpertTerm(e, j, i) = (3e + 5j + i) & 3. Rows x = [1 2 3] of expert 1
  // and [4 5 6] of expert 2, hidden 3.
  // ETP rank 0: expert 1 terms (3 + i) & 3 = 3 0 1 -> [4 2 4];
  //             expert 2 terms (6 + i) & 3 = 2 3 0 -> [6 8 6].
  // ETP rank 1: expert 1 terms (8 + i) & 3 = 0 1 2 -> [0 1 2];
  //             expert 2 terms (11 + i) & 3 = 3 0 1 -> [3 0 1].
  const int32_t experts[] = {1, 2};
  std::vector<uint16_t> rank0 = Bf16s({1, 2, 3, 4, 5, 6}), rank1 = rank0;
  HostExpertPartial(rank0.data(), 2, 3, experts, 0);
  HostExpertPartial(rank1.data(), 2, 3, experts, 1);
  CHECK(Floats(rank0) == std::vector<float>{4, 2, 4, 6, 8, 6});
  CHECK(Floats(rank1) == std::vector<float>{0, 1, 2, 3, 0, 1});
  // Summed over the ETP ranks (the reduce-scatter's job): x + both terms.
  CHECK(ExpertPartialValue(FloatToBf16(1), 1, 0, 0) == FloatToBf16(4));
}

TEST_CASE("HostCombineRows: weighted sum of each token's rows") {
  // rows_bf16: r0 = [1 2], r1 = [3 4], r2 = [0.5 -1]. Token 0 takes rows
  // 0, 2 with weights 0.5, 2: [0.5 + 1, 1 - 2] = [1.5 -1]. Token 1 takes
  // row 1 twice with weights 0.25, 0.75: [3 4].
  const std::vector<uint16_t> rows_bf16 = Bf16s({1, 2, 3, 4, 0.5f, -1});
  const int64_t rows[] = {0, 2, 1, 1};
  const float weights[] = {0.5f, 2, 0.25f, 0.75f};
  std::vector<float> out(4, -99);
  HostCombineRows(out.data(), rows_bf16.data(), rows, weights, 2, 2, 2);
  CHECK(out == std::vector<float>{1.5f, -1, 3, 4});
}

TEST_CASE("HostCombineRows: sums k = 0..top_k-1 in that order, in f32") {
  // Rows 2^24, 1, 1 with weight 1. In order: (0 + 2^24) + 1 rounds back to
  // 2^24 (2^24 + 1 is not an f32; the tie goes to the even 2^24), and again
  // for the last 1: 2^24. Summing the ones first would give 2^24 + 2.
  const std::vector<uint16_t> rows_bf16 = Bf16s({16777216.0f, 1, 1});
  const int64_t rows[] = {0, 1, 2};
  const float weights[] = {1, 1, 1};
  float out = 0;
  HostCombineRows(&out, rows_bf16.data(), rows, weights, 1, 3, 1);
  CHECK(out == 16777216.0f);
}

TEST_CASE("bf16: every non-NaN pattern round-trips; float rounds to nearest even") {
  int failures = 0;
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const bool nan = (bits & 0x7F80) == 0x7F80 && (bits & 0x007F) != 0;
    if (!nan && FloatToBf16(Bf16ToFloat(static_cast<uint16_t>(bits))) != bits) ++failures;
  }
  CHECK(failures == 0);
  CHECK(Bf16ToFloat(0x3F80) == 1.0f);
  CHECK(Bf16ToFloat(0xC000) == -2.0f);
  // bf16 keeps 8 significant bits: near 1 its spacing is 2^-7.
  // 1 + 2^-8 is half way between 1 (0x3F80) and 1 + 2^-7 (0x3F81): even -> 0x3F80.
  CHECK(FloatToBf16(1.0f + 0x1p-8f) == 0x3F80);
  // 1 + 3 2^-8 is half way between 0x3F81 and 0x3F82: even -> 0x3F82.
  CHECK(FloatToBf16(1.0f + 3 * 0x1p-8f) == 0x3F82);
  // Just above half way rounds up; just below rounds down.
  CHECK(FloatToBf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81);
  CHECK(FloatToBf16(1.0f + 0x1p-8f - 0x1p-20f) == 0x3F80);
  // Integers up to 256 are exact (the dispatcher's values rely on it).
  for (int i = -256; i <= 256; ++i) CHECK(Bf16ToFloat(FloatToBf16(static_cast<float>(i))) == i);
}
