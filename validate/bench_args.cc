#include "validate/bench_args.h"

#include <cmath>
#include <limits>
#include <optional>

#include "core/decimal_text.h"
#include "core/formats.h"
#include "core/quoted_text.h"

namespace foldplan::validate {
namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

const BenchFlagRange kRanges[] = {
    {"--max-seq", 1, uint64_t{1} << 30},  // the plan reader's bound on seq_len
    {"--seed", 0, kU64Max},
    {"--sweep-min-bytes", 4, static_cast<uint64_t>(kMaxSweepBytes)},
    {"--sweep-max-bytes", 4, static_cast<uint64_t>(kMaxSweepBytes)},
    {"--sweep-step", 2, static_cast<uint64_t>(kMaxSweepStep)},
    {"--warmup", 0, static_cast<uint64_t>(kMaxBenchIters)},
    {"--iters", 1, static_cast<uint64_t>(kMaxBenchIters)},
    {"--corrupt-rank", 0, static_cast<uint64_t>(kMaxWorldSize - 1)},
    {"--hang-rank", 0, static_cast<uint64_t>(kMaxWorldSize - 1)},
    {"--die-rank", 0, static_cast<uint64_t>(kMaxWorldSize - 1)},
};

// Command-line text in a message, quoted or bare: every control byte
// escaped, cut after 64 bytes (core/quoted_text.h, the one rule for
// quoting input).
std::string QuotedArg(const std::string& text) { return foldplan::Quoted(text, 64); }
std::string Printable(const std::string& text) {
  std::string quoted = QuotedArg(text);  // "\"...\"", then "..." when cut
  const bool cut = quoted.back() != '"';
  if (cut) quoted.resize(quoted.size() - 3);
  return quoted.substr(1, quoted.size() - 2) + (cut ? "..." : "");
}

const BenchFlagRange* RangeOf(const std::string& flag) {
  for (const BenchFlagRange& r : kRanges) {
    if (flag == r.flag) return &r;
  }
  return nullptr;
}

// Digits only (core/decimal_text.h, the one rule for typed numbers), then
// held to the flag's range: the value is checked as the number it is,
// before any cut to a narrower type.
Result<uint64_t> ParseRanged(const BenchFlagRange& range, const std::string& text) {
  const std::optional<uint64_t> value = ParseDecimalUnsigned(text);
  if (value && *value >= range.min && *value <= range.max) return *value;
  return Status::Error(std::string(range.flag) + ": expected a decimal integer in [" +
                       std::to_string(range.min) + ", " + std::to_string(range.max) +
                       "], found " + QuotedArg(text));
}

// A decimal number >= 0 (core/decimal_text.h) or "inf" (--timeout: never
// fires; --skew: the draw's limit, doc/validate.md).
Result<double> ParseNonNegative(const std::string& flag, const std::string& text) {
  if (text == "inf") return HUGE_VAL;
  const std::optional<double> value = ParseDecimalNumber(text);
  // "-0" is a sign all the same.
  if (value && *value >= 0 && text[0] != '-') return *value;
  return Status::Error(flag + ": expected a number >= 0 or inf, found " + QuotedArg(text));
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma == std::string::npos ? std::string::npos
                                                                  : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

}  // namespace

const std::vector<BenchFlagRange>& BenchFlagRanges() {
  static const std::vector<BenchFlagRange> ranges(std::begin(kRanges), std::end(kRanges));
  return ranges;
}

const char* const kBenchUsage =
    "usage: mpirun -np N foldbench --plan FILE [--backend mpi|nccl]\n"
    "                 [--ops ulysses,dispatch,sweep,pack,compute] [-o measurements.json]\n"
    "                 [--max-seq N] [--routing uniform,skewed] [--skew S] [--seed N]\n"
    "                 [--expert term|gemm]\n"
    "                 [--sweep-min-bytes N] [--sweep-max-bytes N] [--sweep-step N]\n"
    "                 [--warmup N] [--iters N] [--timeout SECONDS]\n"
    "                 [--corrupt-rank R] [--hang-rank R] [--die-rank R]\n"
    "  FILE is a foldplan.plan/v1 (foldplan plan/explain -o) or foldplan.rankmap/v1 file\n"
    "  integers are decimal digits: --max-seq 1..2^30, --seed 0..2^64-1, sweep sizes\n"
    "  4..2^40 bytes, --sweep-step 2..2^20, --warmup 0..10000, --iters 1..10000, ranks\n"
    "  0..2^20-1; --skew and --timeout are decimal numbers >= 0, or inf\n"
    "  --timeout 0 turns the watchdog off; inf or any large value never fires\n"
    "  exit status: 0 ok, 1 invalid input, 2 usage, 3 run-time failure (doc/formats.md)\n";

Result<BenchArgs> ParseBenchArgs(const std::vector<std::string>& argv) {
  BenchArgs args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      args.help = true;
      continue;
    }
    if (i + 1 >= argv.size()) {
      return Status::Error(Printable(flag) + ": unknown flag or missing value");
    }
    const std::string& value = argv[++i];
    OpOptions& op = args.op_options;
    LoopOptions& loop = args.loop;
    if (const BenchFlagRange* range = RangeOf(flag)) {
      Result<uint64_t> parsed = ParseRanged(*range, value);
      if (!parsed.ok()) return parsed.status();
      const uint64_t v = parsed.value();
      // In range, so each conversion below is exact.
      if (flag == "--max-seq") op.max_seq_len = static_cast<int64_t>(v);
      else if (flag == "--seed") op.seed = v;
      else if (flag == "--sweep-min-bytes") op.sweep_min_bytes = static_cast<int64_t>(v);
      else if (flag == "--sweep-max-bytes") op.sweep_max_bytes = static_cast<int64_t>(v);
      else if (flag == "--sweep-step") op.sweep_step = static_cast<int64_t>(v);
      else if (flag == "--warmup") loop.warmup_iters = static_cast<int>(v);
      else if (flag == "--iters") loop.timed_iters = static_cast<int>(v);
      else if (flag == "--corrupt-rank") loop.corrupt_rank = static_cast<int>(v);
      else if (flag == "--hang-rank") loop.hang_rank = static_cast<int>(v);
      else if (flag == "--die-rank") loop.die_rank = static_cast<int>(v);
      continue;
    }
    if (flag == "--skew" || flag == "--timeout") {
      Result<double> parsed = ParseNonNegative(flag, value);
      if (!parsed.ok()) return parsed.status();
      (flag == "--skew" ? op.skew : loop.timeout_s) = parsed.value();
      continue;
    }
    if (flag == "--plan") args.plan = value;
    else if (flag == "-o" || flag == "--output") args.output = value;
    else if (flag == "--backend") args.backend = value;
    else if (flag == "--ops") args.ops = SplitList(value);
    else if (flag == "--routing") op.routings = SplitList(value);
    else if (flag == "--expert") op.expert_function = value;
    else return Status::Error(Printable(flag) + ": unknown flag");
  }
  if (args.help) return args;
  if (args.plan.empty()) return Status::Error("--plan FILE is required");
  if (args.backend != "mpi" && args.backend != "nccl") {
    return Status::Error("--backend " + Printable(args.backend) + ": expected mpi or nccl");
  }
  for (const std::string& op : args.ops) {
    // The refusal names the op as printable text (an escaped name is no
    // more a known op than the raw one).
    if (!CheckOpName(op).ok()) return Status::Error("--ops: " + CheckOpName(Printable(op)).message());
    if (op == "compute" && args.backend != "nccl") {
      return Status::Error("--ops compute times GPU kernels; it needs --backend nccl");
    }
  }
  for (const std::string& routing : args.op_options.routings) {
    if (routing != "uniform" && routing != "skewed") {
      return Status::Error("--routing " + Printable(routing) + ": expected uniform or skewed");
    }
  }
  if (args.op_options.expert_function != "term" && args.op_options.expert_function != "gemm") {
    return Status::Error("--expert " + Printable(args.op_options.expert_function) +
                         ": expected term or gemm");
  }
  if (args.op_options.sweep_max_bytes < args.op_options.sweep_min_bytes) {
    return Status::Error("--sweep-max-bytes is below --sweep-min-bytes");
  }
  return args;
}

}  // namespace foldplan::validate
