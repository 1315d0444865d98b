// What the compute-model tests share: the measured H200 profile, its copy
// bandwidth, an exact comparison, and a model + job + context to time
// layers in.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "costmodel/compute_profile.h"
#include "costmodel/compute_time.h"
#include "costmodel/cost_context.h"
#include "inputs/loader.h"

namespace foldplan::testing {

inline const std::string kH200Profile = std::string(FOLDPLAN_SOURCE_DIR) + "/data/compute/h200.json";

inline const ComputeProfile& H200() {
  static const ComputeProfile profile = [] {
    auto p = ComputeProfile::Load(kH200Profile);
    REQUIRE_MESSAGE(p.ok(), p.status().message());
    return p.value();
  }();
  return profile;
}

// Bytes (read + written) per second of the H200 profile's device copy.
inline constexpr double kBw = 4224.003837367019e9;

inline doctest::Approx Close(double x) { return doctest::Approx(x).epsilon(1e-12); }

// A shipped model with S = 4096 and balanced routing, timed on `profile`.
struct ComputeSetup {
  ModelSpec model;
  JobSpec job;
  CostContext ctx;
  explicit ComputeSetup(const char* name, const ComputeProfile& profile = H200()) {
    auto m = LoadModel(name);
    REQUIRE_MESSAGE(m.ok(), m.status().message());
    model = m.value();
    job.seq_len = 4096;
    job.routing_imbalance = 1;
    ctx.model = &model;
    ctx.job = &job;
    ctx.profile = &profile;
  }
  ComputeTimes Times(const Layout& l) const { return ComputeLayerTimes(l, ctx); }
};

}  // namespace foldplan::testing
