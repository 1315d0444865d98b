// libFuzzer target: the reader of foldbench's measurements
// (inputs/parse_measurements.cc), which calibration will read.
#include "core/json_check.h"
#include "fuzz/fuzz_input.h"
#include "inputs/measurements.h"

using namespace foldplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto json = ParseJsonText(fuzz::AsText(data, size), fuzz::kFuzzFile);
  fuzz::CheckRefusal(json.status());
  if (!json.ok()) return 0;
  fuzz::CheckRefusal(ParseMeasurements(json.value(), fuzz::kFuzzFile).status());
  return 0;
}
