// libFuzzer target: the `--hosts FILE` reader (planner/launch_files.cc) of
// `ranks --format openmpi-rankfile|...` and `validate --hosts`. An accepted
// list holds distinct names the launcher files can carry: no separator of
// theirs (':', '=', whitespace), none empty, none starting with '-'.
#include <set>

#include "fuzz/fuzz_input.h"
#include "planner/launch_files.h"

using namespace foldplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto hosts = ParseHostList(fuzz::AsText(data, size), fuzz::kFuzzFile);
  fuzz::CheckRefusal(hosts.status());
  if (!hosts.ok()) return 0;
  std::set<std::string> seen;
  for (const std::string& h : hosts.value()) {
    if (h.empty() || h[0] == '-' || h.find_first_of(":= \t\r\n#") != std::string::npos || !seen.insert(h).second) {
      std::fprintf(stderr, "accepted host name \"%s\" a launcher file cannot carry, or a repeat\n", h.c_str());
      std::abort();
    }
  }
  return 0;
}
