// libFuzzer target: the calibration file reader (costmodel/comm_params.cc,
// v1 and v2) and, when the file has one, its compute section merged into
// the shipped profile (costmodel/compute_calibration.cc), as `--calibration
// FILE` reads both for the default cluster.
#include "costmodel/comm_params.h"
#include "costmodel/compute_calibration.h"
#include "fuzz/fuzz_input.h"
#include "inputs/loader.h"

using namespace foldplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ClusterSpec cluster = LoadCluster(kDefaultCluster).value();
  static const ComputeProfile shipped = ComputeProfile::Load(ComputeProfile::DefaultPath()).value();
  const auto json = fuzz::ParseJson(data, size);
  if (!json) return 0;
  fuzz::CheckRefusal(ParseCommParams(*json, fuzz::kFuzzFile, cluster).status());
  if (json->is_object() && json->contains("compute")) {
    fuzz::CheckRefusal(CalibratedComputeProfile(shipped, (*json)["compute"], fuzz::kFuzzFile, cluster.gpu).status());
  }
  return 0;
}
