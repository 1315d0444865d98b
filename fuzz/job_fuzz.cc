// libFuzzer target: the job reader (inputs/parse_job.cc).
#include "core/json_check.h"
#include "fuzz/fuzz_input.h"
#include "inputs/loader.h"

using namespace foldplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto json = ParseJsonText(fuzz::AsText(data, size), fuzz::kFuzzFile);
  fuzz::CheckRefusal(json.status());
  if (!json.ok()) return 0;
  auto job = ParseJob(json.value(), fuzz::kFuzzFile);
  fuzz::CheckRefusal(job.status());
  if (job.ok()) (void)RepeatedCandidates(job.value());
  return 0;
}
