// The dispatch op's routing draw: which top_k distinct experts one token
// goes to. Contract: for any weights >= 0 (skewed weights that underflow to
// 0 included) and 1 <= top_k <= experts, the result is top_k distinct
// experts in [0, experts), a pure function of the weights and the token's
// hash. Experts are drawn without replacement by weight; once no positive
// weight is left, the lowest-numbered experts not yet drawn follow (the
// limit of the skewed draw as its weights vanish: the heaviest first).
#pragma once

#include <cstdint>
#include <vector>

namespace foldplan::validate {

// Expert e's weight: 1 for uniform routing, 1 / (e + 1)^skew for skewed
// (skew >= 0, inf included; large skews underflow to 0 past expert 0).
std::vector<double> ExpertWeights(int64_t experts, bool skewed, double skew);

// Draws top_k experts for one token into `out` (resized to top_k); the
// k-th draw reads UnitInterval(Mix64(token_hash + 2k + 1)).
void DrawExperts(const std::vector<double>& weights, int64_t top_k, uint64_t token_hash,
                 std::vector<int32_t>* out);

}  // namespace foldplan::validate
