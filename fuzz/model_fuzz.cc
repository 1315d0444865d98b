// libFuzzer target: the model reader (inputs/parse_model.cc).
#include "fuzz/fuzz_input.h"
#include "inputs/loader.h"

using namespace foldplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto json = fuzz::ParseJson(data, size);
  if (!json) return 0;
  fuzz::CheckRefusal(ParseModel(*json, fuzz::kFuzzFile).status());
  return 0;
}
