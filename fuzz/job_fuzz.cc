// libFuzzer target: the job reader (inputs/parse_job.cc).
#include "fuzz/fuzz_input.h"
#include "inputs/loader.h"

using namespace foldplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto json = fuzz::ParseJson(data, size);
  if (!json) return 0;
  auto job = ParseJob(*json, fuzz::kFuzzFile);
  fuzz::CheckRefusal(job.status());
  if (job.ok()) (void)RepeatedCandidates(job.value());
  return 0;
}
