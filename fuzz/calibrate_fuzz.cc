// libFuzzer target: `foldplan calibrate` on a measurements file, after its
// reader (measurements_fuzz.cc): the groups placed on the default cluster,
// series fitted and scored (costmodel/calibrate.cc, envelope_fit.cc).
#include "costmodel/calibrate.h"
#include "fuzz/fuzz_input.h"
#include "inputs/loader.h"

using namespace foldplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ClusterSpec cluster = LoadCluster(kDefaultCluster).value();
  static const Topology topology = Topology::Build(cluster).value();
  const auto json = fuzz::ParseJson(data, size);
  if (!json) return 0;
  auto set = ParseMeasurements(*json, fuzz::kFuzzFile);
  if (!set.ok()) return 0;  // the reader's own target checks its refusals
  auto series = SeriesFromMeasurements(set.value(), topology);
  fuzz::CheckRefusal(series.status());
  if (!series.ok()) return 0;
  // Refusals here may name the series rather than the file (nothing to fit,
  // too many points, other hardware): any message will do, none may be empty.
  const Status fitted = Calibrate(series.value(), {set.value()}, {}, {}, cluster, {}).status();
  if (!fitted.ok() && fitted.message().empty()) std::abort();
  return 0;
}
