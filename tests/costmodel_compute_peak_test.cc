// No rate the compute profile gives, scaled to any shipped GPU, exceeds that
// GPU's dense peak for the precision (bf16, or fp8 for the FP8 recipes).
//
// Why it matters: MFU = model FLOPs per token x tokens/s / peak, and a
// step's compute is at least the model's FLOPs at the profile's rates (the
// experts' work is counted in full, capacity factor >= 1, recomputation
// only adds), so MFU against the precision's peak is at most
// max rate / peak. With every rate at or below the peak, no output can
// claim an MFU above 100% against the precision's own peak.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "costmodel/compute_profile.h"
#include "inputs/loader.h"
#include "costmodel_compute_fixtures.h"

namespace {

using foldplan::AttentionBackend;
using foldplan::AttentionKernel;
using foldplan::ComputeProfile;
using foldplan::Precision;

// The dense peak a rate of `precision` is bounded by on `gpu`: fp8's for
// the FP8 recipes where the GPU has one, else bf16's.
double ComputePeakTestPeakFor(const foldplan::GpuSpec& gpu, Precision precision) {
  return foldplan::IsFp8(precision) && gpu.peak_fp8_flops > 0 ? gpu.peak_fp8_flops : gpu.peak_bf16_flops;
}

}  // namespace

TEST_CASE("no GEMM, grouped GEMM or attention rate of the profile exceeds the GPU's peak, on every shipped GPU") {
  const auto clusters = foldplan::ListShipped(foldplan::InputKind::kCluster);
  REQUIRE_MESSAGE(clusters.ok(), clusters.status().message());
  // Shapes from one row to past the largest measured (the tables hold the
  // rate beyond their ends), every precision.
  const std::vector<double> sizes = {1, 16, 128, 1024, 4096, 16384, 65536, 1 << 20};
  const Precision precisions[] = {Precision::kBF16, Precision::kFP8Delayed, Precision::kFP8Tensorwise,
                                  Precision::kFP8Blockwise, Precision::kMXFP8};
  int checked = 0;
  for (const auto& shipped : clusters.value()) {
    auto cluster = foldplan::LoadCluster(shipped.path);
    REQUIRE_MESSAGE(cluster.ok(), cluster.status().message());
    const foldplan::GpuSpec& gpu = cluster->gpu;
    const ComputeProfile profile = foldplan::testing::H200().ScaledTo(gpu);
    CAPTURE(shipped.name);
    for (Precision p : precisions) {
      const double peak = ComputePeakTestPeakFor(gpu, p);
      REQUIRE(peak > 0);
      for (double m : sizes) {
        for (double n : sizes) {
          for (double k : sizes) {
            const double rate = profile.GemmFlopsPerS(m, n, k, p);
            CHECK_MESSAGE(rate <= peak, "gemm " << m << "x" << n << "x" << k << " " << rate << " > " << peak);
            ++checked;
          }
          for (int experts : {1, 8, 64, 256}) {
            const double rate = profile.GroupedGemmFlopsPerS(experts, m, n, n, p);
            CHECK_MESSAGE(rate <= peak, "grouped " << experts << " x " << m << "x" << n << " " << rate << " > " << peak);
            ++checked;
          }
        }
      }
    }
    // Attention runs in bf16 in every recipe (FP8 recipes keep it so).
    for (int b = 0; b < foldplan::kAttentionBackendCount; ++b) {
      for (double seq : sizes) {
        for (int heads : {1, 16, 128}) {
          for (bool causal : {true, false}) {
            AttentionKernel k;
            k.seq = seq;
            k.heads = heads;
            k.kv_heads = heads;
            k.qk_head_dim = 128;
            k.v_head_dim = 128;
            k.causal = causal;
            for (bool fwd_bwd : {false, true}) {
              const double rate = profile.AttentionFlopsPerS(static_cast<AttentionBackend>(b), k, fwd_bwd);
              CHECK_MESSAGE(rate <= gpu.peak_bf16_flops,
                            "attention seq " << seq << " heads " << heads << " " << rate << " > " << gpu.peak_bf16_flops);
              ++checked;
            }
          }
        }
      }
    }
  }
  CHECK(checked > 10000);
}
