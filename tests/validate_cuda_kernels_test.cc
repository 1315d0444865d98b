// The NCCL backend's CUDA kernels, run on the CPU: cuda_kernel_bodies.h
// holds what each thread of each kernel does and how a launch is planned,
// as plain functions the host compiler builds too. Here every thread of
// every block of a planned launch runs in turn, and the result must equal
// the host kernel's (kernels.h) byte for byte, over shapes that exercise
// every access width, misaligned buffers, runs spanning blocks and partial
// last blocks. This checks the index arithmetic (fast division, run
// placement, vector widths, launch planning) in every build; what it
// cannot check is the GPU itself (nvcc's code, memory, timing).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "validate/cuda_kernel_bodies.h"
#include "validate/kernels.h"

using namespace foldplan::validate;
using namespace foldplan::validate::cuda;

namespace {

// 16-byte aligned storage of `bytes` filled with a byte pattern.
struct Buffer {
  explicit Buffer(size_t bytes, uint8_t seed) : words((bytes + 64) / 16 + 1) {
    auto* b = reinterpret_cast<uint8_t*>(words.data());
    for (size_t i = 0; i < words.size() * 16; ++i) b[i] = static_cast<uint8_t>(i * 131 + seed);
  }
  char* data() { return reinterpret_cast<char*>(words.data()); }
  size_t size() const { return words.size() * 16; }
  std::vector<Vec16> words;
};

template <typename V, typename Runs>
void RunCopyBlocks(const CopyLaunch<Runs>& plan, void* dst, const void* src) {
  for (uint64_t block = 0; block < plan.blocks; ++block) {
    for (uint32_t t = 0; t < kCopyThreads; ++t) {
      CopyVectorsBlock<V>(plan.placement, static_cast<char*>(dst), static_cast<const char*>(src),
                          plan.per_run, plan.total, block, t, kCopyThreads);
    }
  }
}

// Every thread of the planned launch, in the planned access width.
template <typename Runs>
void Emulate(const CopyLaunch<Runs>& plan, void* dst, const void* src) {
  switch (plan.width) {
    case 0: return;
    case 16: return RunCopyBlocks<Vec16>(plan, dst, src);
    case 8: return RunCopyBlocks<Vec8>(plan, dst, src);
    case 4: return RunCopyBlocks<uint32_t>(plan, dst, src);
    case 2: return RunCopyBlocks<uint16_t>(plan, dst, src);
    default: return RunCopyBlocks<uint8_t>(plan, dst, src);
  }
}

// The Ulysses pack (seq -> heads) of ops_ulysses.cc for C ranks, B, L
// tokens, H = C G heads of d words.
RunCopy UlyssesPack(int64_t c, int64_t b, int64_t l, int64_t g, int64_t d) {
  const int64_t e = 2, h = c * g;
  const int64_t packed[3] = {b * l * g * d * e, l * g * d * e, g * d * e};
  const int64_t seq_sharded[3] = {g * d * e, l * h * d * e, h * d * e};
  RunCopy pack;
  for (int k = 0; k < 3; ++k) {
    pack.count[k] = k == 0 ? c : k == 1 ? b : l;
    pack.src_stride_bytes[k] = seq_sharded[k];
    pack.dst_stride_bytes[k] = packed[k];
  }
  pack.run_bytes = g * d * e;
  return pack;
}

int64_t Extent(const RunCopy& copy, bool dst) {
  int64_t end = copy.run_bytes;
  for (int k = 0; k < 3; ++k) {
    end += (copy.count[k] - 1) * (dst ? copy.dst_stride_bytes[k] : copy.src_stride_bytes[k]);
  }
  return end;
}

// Device plan + emulation against HostCopyRuns, with both buffers shifted
// by the given byte offsets; returns the access width used.
int CheckCopyRuns(RunCopy copy, int src_shift, int dst_shift) {
  Buffer src(Extent(copy, false) + 16, 1), device(Extent(copy, true) + 16, 2);
  Buffer host = device;
  void* s = src.data() + src_shift;
  CopyLaunch<StridedRuns> plan;
  REQUIRE(PlanCopyRuns(device.data() + dst_shift, s, copy, &plan).empty());
  Emulate(plan, device.data() + dst_shift, s);
  HostCopyRuns(host.data() + dst_shift, s, copy);
  CHECK(std::memcmp(device.data(), host.data(), host.size()) == 0);
  return plan.width;
}

}  // namespace

TEST_CASE("FastDiv divides every 32-bit n exactly") {
  std::mt19937_64 random(7);
  std::vector<uint32_t> divisors = {1, 2, 3, 5, 6, 7, 10, 24, 25, 96, 100, 255, 256, 257, 641,
                                    1000, 4097, 65535, 65536, 65537, 1u << 20, 6700417,
                                    0x7FFFFFFFu, 0x80000000u, 0x80000001u, 0xFFFFFFFEu,
                                    0xFFFFFFFFu};
  for (int i = 0; i < 200; ++i) divisors.push_back(static_cast<uint32_t>(random() >> 33) + 1);
  int wrong = 0;
  for (uint32_t d : divisors) {
    const FastDiv div(d);
    std::vector<uint32_t> ns = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, 0x7FFFFFFFu,
                                0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu};
    for (int i = 0; i < 2000; ++i) ns.push_back(static_cast<uint32_t>(random()));
    for (uint32_t n : ns) wrong += div.Div(n) != n / d;
  }
  CHECK(wrong == 0);
}

TEST_CASE("CopyRuns kernel: Ulysses packs and unpacks of many shapes, every width") {
  // (C, B, L, G, d): runs of G d 2 bytes: 2, 6 (width 2), 4, 12 (4),
  // 8, 24 (8), 16, 256 (16); 16 KiB runs are one block's 1024 accesses
  // each, 32 KiB ones span two blocks, 10000-byte ones straddle block
  // boundaries; many runs make several blocks with a partial last one.
  const int64_t shapes[][5] = {{2, 1, 1, 1, 1},  {2, 2, 3, 1, 3},   {4, 1, 5, 1, 2},
                               {2, 2, 3, 3, 2},  {4, 1, 3, 1, 4},   {2, 1, 7, 3, 4},
                               {2, 2, 2, 1, 8},  {8, 2, 37, 1, 128}, {2, 1, 3, 1, 8192},
                               {4, 2, 3, 2, 8192}, {2, 2, 3, 1, 5000}, {2, 3, 5, 3, 64},
                               {1, 1, 1, 1, 64}};
  std::vector<int> widths;
  for (const auto& s : shapes) {
    const int64_t c = s[0], b = s[1], l = s[2], g = s[3], d = s[4];
    CAPTURE(c);
    CAPTURE(b);
    CAPTURE(l);
    CAPTURE(g);
    CAPTURE(d);
    const RunCopy pack = UlyssesPack(c, b, l, g, d);
    RunCopy unpack = pack;
    std::swap(unpack.src_stride_bytes, unpack.dst_stride_bytes);
    widths.push_back(CheckCopyRuns(pack, 0, 0));
    CheckCopyRuns(unpack, 0, 0);
    // Misaligned buffers fall back to narrower accesses, still right.
    CheckCopyRuns(pack, 2, 0);
    CheckCopyRuns(unpack, 0, 6);
    CheckCopyRuns(pack, 8, 8);
  }
  for (int w : {2, 4, 8, 16}) {
    CHECK(std::find(widths.begin(), widths.end(), w) != widths.end());
  }
}

TEST_CASE("CopyRuns kernel: plans no launch for empty work, refuses what it cannot do") {
  Buffer a(64, 1), b(64, 2);
  CopyLaunch<StridedRuns> plan;
  RunCopy empty;
  empty.count[2] = 0;
  empty.run_bytes = 16;
  CHECK(PlanCopyRuns(a.data(), b.data(), empty, &plan).empty());
  CHECK(plan.width == 0);
  RunCopy huge;
  huge.count[0] = huge.count[1] = 1 << 20;
  huge.run_bytes = 2;
  CHECK_FALSE(PlanCopyRuns(a.data(), b.data(), huge, &plan).empty());
  // A stride of a dimension of one does not limit the width.
  RunCopy one;
  one.count[0] = 1;
  one.src_stride_bytes[0] = 3;
  one.count[2] = 2;
  one.src_stride_bytes[2] = one.dst_stride_bytes[2] = 32;
  one.run_bytes = 32;
  CHECK(PlanCopyRuns(a.data(), b.data(), one, &plan).empty());
  CHECK(plan.width == 16);
}

TEST_CASE("GatherRows kernel: rows of 1, 2, 6, 16 and 4096 bytes, repeats and misalignment") {
  std::mt19937 random(3);
  for (int64_t row_bytes : {1, 2, 6, 16, 48, 4096}) {
    for (int shift : {0, 2}) {
      CAPTURE(row_bytes);
      CAPTURE(shift);
      const int64_t src_rows = 37, count = 300;
      std::vector<int64_t> rows(count);
      for (auto& r : rows) r = static_cast<int64_t>(random() % src_rows);
      Buffer src(src_rows * row_bytes + 16, 5), device(count * row_bytes + 16, 6);
      Buffer host = device;
      CopyLaunch<GatheredRows> plan;
      REQUIRE(PlanGatherRows(device.data() + shift, src.data(), rows.data(), count, row_bytes,
                             &plan)
                  .empty());
      Emulate(plan, device.data() + shift, src.data());
      HostGatherRows(host.data() + shift, src.data(), rows.data(), count, row_bytes);
      CHECK(std::memcmp(device.data(), host.data(), host.size()) == 0);
    }
  }
}

TEST_CASE("ExpertPartial kernel: wide and narrow rows, both ETP ranks") {
  std::mt19937 random(4);
  for (int64_t hidden : {3, 8, 24, 4104}) {
    for (int etp_rank : {0, 1}) {
      CAPTURE(hidden);
      CAPTURE(etp_rank);
      const int64_t count = 9;
      std::vector<int32_t> experts(count);
      for (auto& e : experts) e = static_cast<int32_t>(random() % 64);
      std::vector<Vec16> storage((count * hidden * 2 + 15) / 16);
      auto* device = reinterpret_cast<uint16_t*>(storage.data());
      for (int64_t i = 0; i < count * hidden; ++i) {
        device[i] = FloatToBf16(static_cast<float>(random() % 200));
      }
      std::vector<uint16_t> host(device, device + count * hidden);
      const bool wide = ExpertPartialWide(device, hidden);
      CHECK(wide == (hidden % 8 == 0));
      const int threads = RowThreads(wide ? hidden / 8 : hidden);
      for (int64_t row = 0; row < count; ++row) {
        for (int t = 0; t < threads; ++t) {
          if (wide) ExpertPartialRow<8>(device, hidden, experts.data(), etp_rank, row, t, threads);
          else ExpertPartialRow<1>(device, hidden, experts.data(), etp_rank, row, t, threads);
        }
      }
      HostExpertPartial(host.data(), count, hidden, experts.data(), etp_rank);
      CHECK(std::memcmp(device, host.data(), host.size() * 2) == 0);
    }
  }
}

TEST_CASE("CombineRows kernel: bit for bit the host's sums, wide and narrow") {
  std::mt19937 random(5);
  std::uniform_real_distribution<float> value(-3, 3);
  for (int64_t hidden : {5, 8, 1028}) {
    CAPTURE(hidden);
    const int64_t tokens = 7, top_k = 3, source_rows = 11;
    std::vector<Vec16> row_storage((source_rows * hidden * 2 + 15) / 16);
    auto* rows_bf16 = reinterpret_cast<uint16_t*>(row_storage.data());
    for (int64_t i = 0; i < source_rows * hidden; ++i) rows_bf16[i] = FloatToBf16(value(random));
    std::vector<int64_t> rows(tokens * top_k);
    std::vector<float> weights(tokens * top_k);
    for (auto& r : rows) r = static_cast<int64_t>(random() % source_rows);
    for (auto& w : weights) w = value(random);
    std::vector<Vec16> out_storage((tokens * hidden * 4 + 15) / 16);
    auto* device = reinterpret_cast<float*>(out_storage.data());
    std::vector<float> host(tokens * hidden);
    const bool wide = CombineRowsWide(device, rows_bf16, hidden);
    CHECK(wide == (hidden % 4 == 0));
    const int threads = RowThreads(wide ? hidden / 4 : hidden);
    for (int64_t token = 0; token < tokens; ++token) {
      for (int t = 0; t < threads; ++t) {
        if (wide) {
          CombineRowsToken<4>(device, rows_bf16, rows.data(), weights.data(), top_k, hidden,
                              token, t, threads);
        } else {
          CombineRowsToken<1>(device, rows_bf16, rows.data(), weights.data(), top_k, hidden,
                              token, t, threads);
        }
      }
    }
    HostCombineRows(host.data(), rows_bf16, rows.data(), weights.data(), tokens, top_k, hidden);
    CHECK(std::memcmp(device, host.data(), host.size() * 4) == 0);
  }
}

TEST_CASE("RowThreads: whole warps, at most kRowThreads") {
  CHECK(RowThreads(1) == 32);
  CHECK(RowThreads(32) == 32);
  CHECK(RowThreads(33) == 64);
  CHECK(RowThreads(100000) == kRowThreads);
  CHECK(RowBlocks(5) == 5);
  CHECK(RowBlocks(int64_t{1} << 40) == kMaxRowBlocks);
}
