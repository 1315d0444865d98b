// libFuzzer target: the reader of nccl-tests logs
// (inputs/parse_nccl_tests_log.cc), which `calibrate --nccl-tests` reads.
// The file name says all_reduce, so a log without its own collective line
// is read through to the end; a second call with a hint reaches the
// hint-against-the-log check.
#include "fuzz/fuzz_input.h"
#include "inputs/nccl_tests_log.h"

using namespace foldplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = fuzz::AsText(data, size);
  constexpr const char* kFile = "all_reduce_perf.fuzz-input.log";
  auto log = ParseNcclTestsLog(text, kFile);
  fuzz::CheckRefusal(log.status(), kFile);
  if (log.ok() && (log->ranks.empty() || log->rows.empty() || log->group_count < 1 ||
                   log->ranks.size() % log->group_count != 0 || log->collective.empty())) {
    std::fprintf(stderr, "accepted a log without ranks, rows or collective\n");
    std::abort();
  }
  fuzz::CheckRefusal(ParseNcclTestsLog(text, kFile, "all_to_all").status(), kFile);
  return 0;
}
