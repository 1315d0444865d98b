// libFuzzer target: foldbench's plan / rank-map reader (validate/plan_input.cc),
// the one place foldbench reads what a user hands it.
#include "core/json_check.h"
#include "fuzz/fuzz_input.h"
#include "validate/plan_input.h"

using namespace foldplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto json = ParseJsonText(fuzz::AsText(data, size), fuzz::kFuzzFile);
  fuzz::CheckRefusal(json.status());
  if (!json.ok()) return 0;
  fuzz::CheckRefusal(validate::ParseBenchInput(json.value(), fuzz::kFuzzFile).status());
  return 0;
}
