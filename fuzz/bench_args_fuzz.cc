// libFuzzer target: foldbench's command line (validate/bench_args.h), the
// bytes split at newlines into arguments, as the program's argv after its
// name. Parsed without MPI. A refusal must say something, with no control
// byte copied from the input into it; an accepted line must hold every value inside its documented range (a value
// cut to int after the check once crashed foldbench), and the sweep's size
// list must end.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/formats.h"
#include "fuzz/fuzz_input.h"
#include "validate/bench_args.h"
#include "validate/op.h"

using namespace foldplan;
using namespace foldplan::validate;

namespace {

void BenchArgsRequire(bool holds, const char* what) {
  if (holds) return;
  std::fprintf(stderr, "bench_args_fuzz: accepted, but %s\n", what);
  std::abort();
}

bool BenchArgsRank(int rank) { return rank >= -1 && rank < kMaxWorldSize; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = fuzz::AsText(data, size);
  std::vector<std::string> argv;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    argv.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  Result<BenchArgs> args = ParseBenchArgs(argv);
  if (!args.ok()) {
    const std::string& message = args.status().message();
    if (message.empty()) {
      std::fprintf(stderr, "bench_args_fuzz: a refusal without a message\n");
      std::abort();
    }
    // Input is quoted escaped: no control byte reaches the terminal.
    for (char c : message) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        std::fprintf(stderr, "bench_args_fuzz: a control byte in the refusal\n");
        std::abort();
      }
    }
    return 0;
  }
  if (args->help) return 0;
  const OpOptions& op = args->op_options;
  const LoopOptions& loop = args->loop;
  BenchArgsRequire(loop.timed_iters >= 1 && loop.timed_iters <= kMaxBenchIters, "--iters out of range");
  BenchArgsRequire(loop.warmup_iters >= 0 && loop.warmup_iters <= kMaxBenchIters,
                   "--warmup out of range");
  BenchArgsRequire(BenchArgsRank(loop.corrupt_rank) && BenchArgsRank(loop.hang_rank) &&
                       BenchArgsRank(loop.die_rank),
                   "a test-hook rank out of range");
  BenchArgsRequire(op.max_seq_len >= 1 && op.max_seq_len <= (int64_t{1} << 30),
                   "--max-seq out of range");
  BenchArgsRequire(op.sweep_min_bytes >= 4 && op.sweep_min_bytes <= op.sweep_max_bytes &&
                       op.sweep_max_bytes <= kMaxSweepBytes,
                   "sweep sizes out of range");
  BenchArgsRequire(op.sweep_step >= 2 && op.sweep_step <= kMaxSweepStep, "--sweep-step out of range");
  BenchArgsRequire(op.skew >= 0 && loop.timeout_s >= 0, "--skew or --timeout negative or NaN");
  auto sizes = SweepSizes(op);
  BenchArgsRequire(sizes.ok() && !sizes->empty() && sizes->size() <= 64 &&
                       sizes->back() <= op.sweep_max_bytes,
                   "the sweep's sizes are not a short list within the bounds");
  return 0;
}
