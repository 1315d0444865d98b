// The analytical pipeline schedule (costmodel/schedule.h) on step work
// built by hand: each case states the formula, then the number it implies.
#include <doctest/doctest.h>

#include "costmodel/schedule.h"

using namespace foldplan;

namespace {

double Inflight(int pp, int vpp, int stage, long long m) {
  return InflightMicrobatches(vpp > 1 ? PipelineSchedule::kInterleaved1F1B : PipelineSchedule::k1F1B, pp, vpp,
                              stage, m);
}

}  // namespace

TEST_CASE("1F1B and interleaved micro-batches in flight") {
  // 1F1B: min(pp - stage, m).
  CHECK(Inflight(8, 1, 0, 64) == 8);
  CHECK(Inflight(8, 1, 5, 64) == 3);
  CHECK(Inflight(8, 1, 7, 64) == 1);
  CHECK(Inflight(8, 1, 0, 4) == 4);
  CHECK(Inflight(1, 1, 0, 64) == 1);
  // Interleaved, first stage: pp x (1 + (pp - 1) / (pp x vpp)).
  for (int pp : {2, 4, 8, 16}) {
    for (int vpp : {2, 3, 4}) {
      CAPTURE(pp);
      CAPTURE(vpp);
      const double formula = pp * (1 + double(pp - 1) / (pp * vpp));
      CHECK(Inflight(pp, vpp, 0, 1024) == doctest::Approx(formula));
      // Later stages hold fewer; the last holds ((vpp - 1) pp + 1) / vpp.
      CHECK(Inflight(pp, vpp, pp - 1, 1024) ==
            doctest::Approx(((vpp - 1.0) * pp + 1) / vpp));
      for (int s = 1; s < pp; ++s) {
        CHECK(Inflight(pp, vpp, s, 1024) <
              Inflight(pp, vpp, s - 1, 1024));
      }
    }
  }
  // m == pp: Megatron runs every chunk's forward first: all m micro-batches.
  CHECK(Inflight(4, 2, 0, 4) == 4);
}

