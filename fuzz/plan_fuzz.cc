// libFuzzer target: foldbench's plan / rank-map reader (validate/plan_input.cc),
// the one place foldbench reads what a user hands it.
#include "fuzz/fuzz_input.h"
#include "validate/plan_input.h"

using namespace foldplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::CheckRefusal(validate::ReadPlanText(fuzz::AsText(data, size), fuzz::kFuzzFile).status());
  return 0;
}
