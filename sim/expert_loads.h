// Routing imbalance for the simulator: each EP rank's routed rows in each
// MoE layer and micro-batch, drawn from a seeded distribution, as the
// rank's load over the mean (the factors of an EP group average 1).
//
// A layer's router has a popularity p_e per expert (fixed for the step):
//   uniform       p_e = 1/E (only the multinomial noise below remains)
//   zipf:S        p_e ~ 1 / i^S, i the expert's place in a seeded
//                 permutation of the layer (S >= 0)
//   dirichlet:A   p ~ Dirichlet(A, ..., A), seeded per layer (A > 0;
//                 small A: a few experts take most tokens)
//   FILE          p_e ~ the measured histogram of a foldplan.expert-loads/v1
//                 file ({"schema", "loads": [E numbers >= 0]}), every layer
// Rank r holds experts r E/ep .. (r + 1) E/ep - 1 (Megatron's contiguous
// split), so P_r = the sum of their p_e. A micro-batch's N = ep x T x k
// assignments (T tokens on each of the group's ep ranks, top-k) split over
// the ranks as a multinomial: rank r gets N P_r +- sqrt(N P_r (1 - P_r)),
// drawn as a normal (N is in the millions), then renormalised to N.
// Normals are Irwin-Hall sums of 12 uniforms from SplitMix64 (core/mix64.h)
// and gammas for the Dirichlet are Marsaglia-Tsang's on those normals: the
// draws use +, *, / and sqrt, log, pow only (IEEE correctly rounded or
// glibc's), so a seed gives the same loads on every machine.
//
// Capacity: with a capacity factor CF > 0 the cost model pads (and drops)
// every expert to CF x its mean share (routing.h), so every rank's load is
// CF whatever the draw; dropless, the draw stands.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace foldplan {

enum class LoadDistribution { kBalanced, kUniform, kZipf, kDirichlet, kHistogram };

struct LoadSpec {
  LoadDistribution distribution = LoadDistribution::kBalanced;
  double parameter = 0;           // zipf's S, dirichlet's A
  std::vector<double> histogram;  // kHistogram: relative load per expert
  std::string text;               // as given ("zipf:1.2", the file's path)
  bool balanced() const { return distribution == LoadDistribution::kBalanced; }
};

// The largest histogram read (experts); DeepSeek-V3 has 256.
inline constexpr int kMaxHistogramExperts = 1 << 16;

// "uniform", "zipf:S", "dirichlet:A", or the path of a foldplan.expert-loads/v1
// file; errors say which forms are accepted, or name the file and pointer.
Result<LoadSpec> ParseLoadSpec(const std::string& text);
// The file form alone (a histogram of `experts` entries is checked by
// ExpertLoadDraw::Create against the model).
Result<LoadSpec> LoadExpertLoadsFile(const std::string& path);
// The same from the file's text (`path` names it in errors).
Result<LoadSpec> ParseExpertLoads(const std::string& text, const std::string& path);

// Whether `spec` can route the experts of a model with `experts` of them
// (0: a dense model): an imbalance needs experts; a histogram needs one load
// per expert (the error names the file, /loads and the count expected).
Status CheckLoadSpecExperts(const LoadSpec& spec, int experts);

class ExpertLoadDraw {
 public:
  // For a model of `experts` experts on EP groups of `ep` ranks, each rank
  // routing `rows_per_rank` = T x k assignments per micro-batch. Error: a
  // histogram whose length is not `experts`, or experts not divisible by ep.
  static Result<ExpertLoadDraw> Create(const LoadSpec& spec, int experts, int ep, double rows_per_rank,
                                       double capacity_factor, uint64_t seed);
  // The ep ranks' load factors for EP group `group` in MoE layer `layer`
  // and micro-batch `microbatch` (the same arguments give the same draw).
  void Draw(uint64_t group, int layer, int microbatch, std::vector<double>& factors) const;
  int ep() const { return ep_; }

 private:
  ExpertLoadDraw() = default;
  // The ranks' shares P_r of layer `layer` (cached: layers x ep).
  const std::vector<double>& Shares(int layer) const;

  LoadSpec spec_;
  int experts_ = 0;
  int ep_ = 1;
  double assignments_ = 0;  // N per EP group and micro-batch
  double capacity_factor_ = 0;
  uint64_t seed_ = 0;
  mutable std::vector<std::vector<double>> shares_;  // per layer, filled on first use
};

}  // namespace foldplan
