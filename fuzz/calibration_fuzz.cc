// libFuzzer target: the calibration file reader (costmodel/comm_params.cc,
// v1 and v2), as `--calibration FILE` reads it for the default cluster.
#include "costmodel/comm_params.h"
#include "fuzz/fuzz_input.h"
#include "inputs/loader.h"

using namespace foldplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ClusterSpec cluster = LoadCluster("h100-dgx-16n").value();
  const auto json = fuzz::ParseJson(data, size);
  if (!json) return 0;
  fuzz::CheckRefusal(ParseCommParams(*json, fuzz::kFuzzFile, cluster).status());
  return 0;
}
