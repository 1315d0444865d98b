// libFuzzer target: the reader of foldbench's measurements
// (inputs/parse_measurements.cc), which calibration will read.
#include "fuzz/fuzz_input.h"
#include "inputs/measurements.h"

using namespace foldplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto json = fuzz::ParseJson(data, size);
  if (!json) return 0;
  fuzz::CheckRefusal(ParseMeasurements(*json, fuzz::kFuzzFile).status());
  return 0;
}
