// Measured compute rates of one GPU (a `foldplan.compute-profile/v1` file,
// e.g. data/compute/h200.json measured on the project's H200), looked up by
// shape, and scaled to another GPU by datasheet ratios.
// doc/cost-model-compute.md explains the lookup rules; in short:
//  - GEMM [m, k] x [k, n]: the measured (n, k) shape nearest in log space
//    (Euclidean distance of (log n, log k)), then linear interpolation of
//    the rate in log m between that shape's measured m. Above the largest m
//    the rate is held; below the smallest m the *time* is held (a GEMM that
//    small is bound by reading its weights, so fewer rows take no less time).
//    A shape far from every measured one still gets the nearest: the rate is
//    then an estimate of the right order, not a measurement.
//  - FP8: the nearest shape's FP8 curve when it has one, else its BF16 rate
//    x the FP8/BF16 ratio (at the same m) of the nearest shape measured in
//    both. A profile without FP8 points gives FP8 the BF16 rate.
//  - Grouped GEMM: nearest (n, k) shape, then linear in log(experts)
//    between the measured expert counts (held outside them) of rates
//    interpolated in log(tokens_per_expert) as for GEMMs. One expert is a
//    plain GEMM. FP8 applies the plain-GEMM FP8/BF16 ratio at
//    m = tokens_per_expert.
//  - Attention (bf16): one table per backend (AttentionBackend) and
//    causality: te-cudnn the `attention_cudnn` list (Transformer Engine's
//    fused attention runs cuDNN's kernels; the `attention` list when a
//    profile has none), flash2 the `attention` list (FlashAttention-2),
//    flash3 the flash2 rate x kFlash3OverFlash2 (no measurement: below).
//    A non-causal lookup reads the table's non-causal points, else its
//    causal ones at the same length. Within a table: the nearest measured
//    (heads, kv_heads, qk_head_dim, v_head_dim) in log space, then linear
//    in log(seq) between measured lengths; above the longest the rate is
//    held; below the shortest it follows the table's own slope, log rate
//    against log seq between its two shortest lengths, taken within
//    [0, 2] (2: the time held, so a shorter kernel never takes longer than
//    the shortest measured; 0: the rate held; one length: the time held).
//    Fewer heads than the nearest measured count: looked up at
//    seq x heads / measured_heads (the kernel's grid is heads x query
//    blocks, so that is the same parallel work), but never slower than
//    the measured count's kernel at seq, which does more work (rate at
//    least its rate x heads / measured_heads). Callers pass
//    batch x heads as `heads` for batched calls, and a rectangular kernel
//    (q rows != kv rows) at the side of the square of equal work,
//    sqrt(rows_q x rows_kv): the square's query blocks and each block's
//    loop over keys are the geometric means of the two sides.
//  - Rates use the file's FLOP counting. Attention forward is
//    heads S^2 (d_qk + d_v) causal (the causal half of the full score
//    matrix), twice that non-causal; forward + backward is
//    kAttentionFwdBwdFlopsRatio = 3.5 x forward (flash backward recomputes
//    QK^T: 5 matmuls against the forward's 2).
//  - Scaling (ScaledTo): BF16 GEMM, grouped GEMM and attention rates x
//    target bf16 peak / profiled bf16 peak; FP8 rates x the FP8 peak ratio
//    (a target without FP8 gets the BF16 rates for FP8); copy bandwidths x
//    the HBM bandwidth ratio. The profiled GPU's peaks are the optional file
//    fields peak_bf16_tflops, peak_fp8_tflops and hbm_tb_per_s, by default
//    the H200 datasheet's 989, 1979 and 4.8.
//  - Measured points (WithMeasured, for calibration): BF16 GEMM and grouped
//    GEMM rates measured on the GPU the profile describes now replace the
//    points of the same shape and are added where new; the rules above
//    then apply to the merged points unchanged.
// Lookups allocate nothing: each curve is sorted (and duplicates averaged)
// at load; a lookup scans the few measured shapes and bisects one curve.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/formats.h"
#include "core/status.h"
#include "inputs/cluster.h"
#include "inputs/job.h"

namespace foldplan {

// Flash-attention forward + backward FLOPs as counted in profile rates.
inline constexpr double kAttentionFwdBwdFlopsRatio = 3.5;

// FlashAttention-3's rate over FlashAttention-2's on Hopper, forward and
// forward + backward alike. Derived, not measured (no FlashAttention-3
// point exists): Shah et al., "FlashAttention-3: Fast and Accurate
// Attention with Asynchrony and Low-precision" (arXiv 2407.08608), whose
// abstract states 1.5-2.0x over FlashAttention-2 in the FP16 forward on
// H100 and whose backward figures give 1.5-1.75x; the lower bound of
// both, so that flash3 is not credited with the paper's best shapes.
inline constexpr double kFlash3OverFlash2 = 1.5;

// One attention kernel call, as the rate tables look it up.
struct AttentionKernel {
  double seq = 0;       // tokens (a rectangular call: the equal-work square's side, above)
  int heads = 0;        // batch x query heads
  int kv_heads = 0;     // batch x KV heads
  int qk_head_dim = 0;  // q and k
  int v_head_dim = 0;   // v
  bool causal = true;
};

class ComputeProfile {
 public:
  // data/compute/h200.json in the shipped data directory (inputs/loader.h).
  static std::string DefaultPath();
  static Result<ComputeProfile> Load(const std::string& path);
  // `file` names the source in error messages ("FILE: /gemm_bf16/3/tflops: ...").
  static Result<ComputeProfile> Parse(const nlohmann::json& json, const std::string& file);

  // FLOP/s of one [m, k] x [k, n] GEMM.
  double GemmFlopsPerS(double m, double n, double k, Precision precision) const;
  // FLOP/s of a grouped GEMM of `experts` equal groups of
  // [tokens_per_expert, k] x [k, n].
  double GroupedGemmFlopsPerS(int experts, double tokens_per_expert, double k, double n,
                              Precision precision = Precision::kBF16) const;
  // FLOP/s of one attention kernel of `backend`, forward or forward +
  // backward, in the counting described above.
  double AttentionFlopsPerS(AttentionBackend backend, const AttentionKernel& kernel,
                            bool forward_and_backward) const;
  // Whether the profile measured `backend`'s own kernels (te-cudnn without
  // an `attention_cudnn` list reads the flash2 table; flash3 is derived).
  bool MeasuredAttention(AttentionBackend backend) const;
  // GB/s (10^9 bytes read + written per second) of a plain device copy.
  double copy_gb_per_s() const { return copy_gb_per_s_ * copy_scale_; }
  // GB/s (read + written) of the Ulysses layout change (view, permute,
  // contiguous) moving `bytes_moved`; linear in log(bytes), held outside
  // the measured range; the copy rate when the profile has no such points.
  double PermuteGbPerS(double bytes_moved) const;

  // The GPU the rates were measured on.
  const std::string& gpu() const { return gpu_; }
  // The GPU the rates were scaled to; "" when not scaled.
  const std::string& scaled_to() const { return scaled_to_; }
  double profiled_peak_bf16_flops() const { return peak_bf16_flops_; }
  double profiled_peak_fp8_flops() const { return peak_fp8_flops_; }
  double profiled_hbm_bytes_per_s() const { return hbm_bytes_per_s_; }

  // A copy whose rates describe `target` (ratios above). Scaling is always
  // relative to the profiled GPU, so scaling a scaled profile does not
  // compound. A target without FP8 (peak_fp8_flops 0) gets the BF16 rates
  // for FP8; a zero bf16 peak or HBM bandwidth leaves that rate unscaled.
  ComputeProfile ScaledTo(const GpuSpec& target) const;

  // BF16 rates (FLOP/s) measured at one shape on the GPU this profile
  // describes now (scaled_to(), else gpu()).
  struct GemmPoint {
    int64_t m = 0, k = 0, n = 0;
    double flops_per_s = 0;
  };
  struct GroupedPoint {
    int64_t experts = 0, tokens_per_expert = 0, k = 0, n = 0;
    double flops_per_s = 0;
  };
  // A copy in which each point replaces the rate at its shape ((m, k, n);
  // (experts, tokens_per_expert, k, n)) or is added; lookups return a
  // point's rate as given, not scaled (a later ScaledTo scales it with the
  // rest, from the profiled GPU's peaks).
  ComputeProfile WithMeasured(const std::vector<GemmPoint>& gemm,
                              const std::vector<GroupedPoint>& grouped) const;

  // How a curve continues below its smallest measured x: the rate held,
  // the time held for work proportional to x (rate proportional to x), or
  // (attention, whose work grows as seq^2) the slope of log rate against
  // log x between its two smallest x, taken within [0, 2] (0: the rate
  // held; 2: the time held; one point: the time held).
  enum class Below { kHoldRate, kHoldTime, kSlope };
  // Rate against log(x), sorted by x, repeated x averaged.
  struct Curve {
    std::vector<double> log_x;
    std::vector<double> rate;
    bool empty() const { return rate.empty(); }
    double At(double log_x_query, Below below) const;
  };

 private:
  struct GemmShapeTable {
    double log_n = 0, log_k = 0;
    Curve bf16, fp8;
    int ratio_shape = -1;  // nearest shape measured in both precisions
  };
  struct ExpertCurve {
    double log_experts = 0;
    Curve curve;  // against log(tokens_per_expert)
  };
  struct GroupedShapeTable {
    double log_n = 0, log_k = 0;
    std::vector<ExpertCurve> by_experts;  // ascending experts
  };
  struct AttentionTable {
    double heads = 0;
    double log_heads = 0, log_kv_heads = 0, log_qk_dim = 0, log_v_dim = 0;
    Curve fwd, fwd_bwd;  // against log(seq)
  };
  // One backend's measured shapes, causal and non-causal.
  struct AttentionTables {
    std::vector<AttentionTable> causal, full;
    bool empty() const { return causal.empty(); }
  };
  double AttentionRaw(const AttentionTables& tables, const AttentionKernel& k, bool forward_and_backward) const;

  void LinkFp8Ratios();  // ratio_shape of every GEMM shape, has_fp8_
  double GemmBf16Raw(double log_m, double log_n, double log_k) const;
  double GemmFp8Raw(double log_m, double log_n, double log_k) const;

  std::string gpu_;
  std::string scaled_to_;
  double peak_bf16_flops_ = 989e12;
  double peak_fp8_flops_ = 1979e12;
  double hbm_bytes_per_s_ = 4.8e12;
  double copy_gb_per_s_ = 0;
  double bf16_scale_ = 1, fp8_scale_ = 1, copy_scale_ = 1;
  bool has_fp8_ = false;      // some shape is measured in both precisions
  bool fp8_as_bf16_ = false;  // the target has no FP8
  std::vector<GemmShapeTable> gemm_;
  std::vector<GroupedShapeTable> grouped_;
  AttentionTables flash2_;  // the `attention` list
  AttentionTables cudnn_;   // the `attention_cudnn` list; empty when the file has none
  Curve permute_;  // GB/s against log(bytes)

  friend class ComputeProfileParser;
};

// Memoises one profile's GemmFlopsPerS, GroupedGemmFlopsPerS and
// AttentionFlopsPerS: a search's compute keys share most shapes (the
// attention GEMMs do not depend on EP or the dispatcher, the experts' not
// on the CP style, none on the micro-batches per step), and a lookup costs
// logs and a scan of the measured shapes. Key: the lookup and the bits of
// its arguments, a precision as FP8 or not (all the lookups read of it).
// Returns the profile's rate bit for bit. Use with one profile only (Clear
// before another); not thread-safe: one per thread. Bounded: cleared when
// it would exceed `max_entries` (a DeepSeek-V3 search on 16,384 GPUs with
// the recipe options makes 6,129 distinct lookups).
class ComputeRateMemo {
 public:
  explicit ComputeRateMemo(size_t max_entries = 8192);
  double GemmFlopsPerS(const ComputeProfile& profile, double m, double n, double k, Precision precision);
  double GroupedGemmFlopsPerS(const ComputeProfile& profile, int experts, double tokens_per_expert, double k,
                              double n, Precision precision);
  double AttentionFlopsPerS(const ComputeProfile& profile, AttentionBackend backend, const AttentionKernel& kernel,
                            bool forward_and_backward);
  size_t size() const { return size_; }
  void Clear();

 private:
  using Key = std::array<uint64_t, 4>;  // lookup kind and flags, then the arguments' bits
  struct Slot {
    Key key{};
    double flops_per_s = 0;
    bool used = false;
  };
  // The slot holding `key`, or the empty one where it goes (linear probing).
  Slot& Find(const Key& key);
  // The stored rate of `key`, computing it with `rate()` when absent.
  template <class Rate>
  double Lookup(const Key& key, Rate rate);

  size_t max_entries_;
  size_t size_ = 0;
  std::vector<Slot> slots_;  // a power of two, at least 2 x max_entries_
};

}  // namespace foldplan
