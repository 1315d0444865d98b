// libFuzzer target: the reader of foldplan.expert-loads/v1 histograms
// (sim/expert_loads.cc), which `simulate --imbalance FILE` reads; an
// accepted histogram is then drawn from as the simulator would (its experts
// over one and, when they divide, two EP ranks).
#include <cmath>

#include "fuzz/fuzz_input.h"
#include "sim/expert_loads.h"

using namespace foldplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto spec = ParseExpertLoads(fuzz::AsText(data, size), fuzz::kFuzzFile);
  fuzz::CheckRefusal(spec.status());
  if (!spec.ok()) return 0;
  const int experts = static_cast<int>(spec->histogram.size());
  for (int ep : {1, 2}) {
    if (experts % ep != 0) continue;
    auto draw = ExpertLoadDraw::Create(spec.value(), experts, ep, 4096.0 * 8, 0, 1);
    if (!draw.ok()) {
      std::fprintf(stderr, "an accepted histogram of %d loads refused on ep %d\n", experts, ep);
      std::abort();
    }
    std::vector<double> factors;
    draw->Draw(0, 0, 0, factors);
    double sum = 0;
    for (double f : factors) sum += f;
    if (!(std::abs(sum - ep) < 1e-6 * ep)) {
      std::fprintf(stderr, "factors sum to %g, not %d\n", sum, ep);
      std::abort();
    }
  }
  return 0;
}
