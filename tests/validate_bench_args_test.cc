// foldbench's command line (validate/bench_args.h), parsed without MPI:
// every integer flag is decimal digits in its documented range, checked
// before it is cut to the type it ends in (a 64-bit value cut to int once
// turned --iters 2147483648 into no timed run and a crash, and --die-rank
// 4294967296 into rank 0); --skew and --timeout are finite decimal numbers
// >= 0, or inf.
// Also the sweep's size list, overflow-free at the largest values.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "validate/bench_args.h"
#include "validate/op.h"

using namespace foldplan;
using namespace foldplan::validate;

namespace {

Result<BenchArgs> BenchArgsParse(std::vector<std::string> flags) {
  flags.insert(flags.begin(), {"--plan", "p.json"});
  return ParseBenchArgs(flags);
}

std::string BenchArgsError(std::vector<std::string> flags) {
  auto parsed = BenchArgsParse(std::move(flags));
  REQUIRE_FALSE(parsed.ok());
  return parsed.status().message();
}

}  // namespace

TEST_CASE("integer flags past int are refused, not cut to int") {
  CHECK(BenchArgsError({"--iters", "2147483648"}) ==
        "--iters: expected a decimal integer in [1, 10000], found \"2147483648\"");
  CHECK(BenchArgsError({"--iters", "4294967297"}) ==
        "--iters: expected a decimal integer in [1, 10000], found \"4294967297\"");
  CHECK(BenchArgsError({"--warmup", "4294967296"}) ==
        "--warmup: expected a decimal integer in [0, 10000], found \"4294967296\"");
  for (const char* flag : {"--die-rank", "--corrupt-rank", "--hang-rank"}) {
    CHECK(BenchArgsError({flag, "4294967296"}) ==
          std::string(flag) + ": expected a decimal integer in [0, 1048575], found \"4294967296\"");
  }
}

TEST_CASE("integer flags take decimal digits only") {
  for (const char* bad : {"", "-1", "+1", "0x10", " 5", "5 ", "1e3", "2.0", "five",
                          "99999999999999999999999"}) {
    const std::string message = BenchArgsError({"--iters", bad});
    CHECK(message.rfind("--iters: expected a decimal integer in [1, 10000], found \"", 0) == 0);
  }
  // A control byte is quoted escaped, never raw.
  CHECK(BenchArgsError({"--seed", "1\x1b[2J"}) ==
        "--seed: expected a decimal integer in [0, 18446744073709551615], found \"1\\x1b[2J\"");
}

TEST_CASE("each integer flag's range ends are accepted and one past them refused") {
  for (const BenchFlagRange& range : BenchFlagRanges()) {
    CAPTURE(range.flag);
    const std::string flag = range.flag;
    // --sweep-max-bytes must not fall below the default minimum and vice versa.
    std::vector<std::string> other;
    if (flag == "--sweep-max-bytes") other = {"--sweep-min-bytes", "4"};
    if (flag == "--sweep-min-bytes") other = {"--sweep-max-bytes", std::to_string(kMaxSweepBytes)};
    for (uint64_t v : {range.min, range.max}) {
      std::vector<std::string> flags = other;
      flags.insert(flags.end(), {flag, std::to_string(v)});
      CHECK(BenchArgsParse(flags).ok());
    }
    if (range.min > 0) CHECK_FALSE(BenchArgsParse({flag, std::to_string(range.min - 1)}).ok());
    if (range.max < std::numeric_limits<uint64_t>::max()) {
      CHECK_FALSE(BenchArgsParse({flag, std::to_string(range.max + 1)}).ok());
    } else {
      CHECK_FALSE(BenchArgsParse({flag, "18446744073709551616"}).ok());
    }
  }
}

TEST_CASE("in-range integer flags keep their value in their final type") {
  auto args = BenchArgsParse({"--iters", "10000", "--warmup", "0", "--die-rank", "1048575",
                              "--seed", "18446744073709551615", "--max-seq", "1073741824",
                              "--sweep-max-bytes", "1099511627776", "--sweep-step", "1048576"});
  REQUIRE(args.ok());
  CHECK(args->loop.timed_iters == 10000);
  CHECK(args->loop.warmup_iters == 0);
  CHECK(args->loop.die_rank == 1048575);
  CHECK(args->op_options.seed == std::numeric_limits<uint64_t>::max());
  CHECK(args->op_options.max_seq_len == int64_t{1} << 30);
  CHECK(args->op_options.sweep_max_bytes == int64_t{1} << 40);
  CHECK(args->op_options.sweep_step == int64_t{1} << 20);
}

TEST_CASE("sweep sizes past the bound are refused by name") {
  CHECK(BenchArgsError({"--sweep-max-bytes", "9223372036854775807"}) ==
        "--sweep-max-bytes: expected a decimal integer in [4, 1099511627776], found "
        "\"9223372036854775807\"");
  CHECK(BenchArgsError({"--sweep-step", "9223372036854775807"}) ==
        "--sweep-step: expected a decimal integer in [2, 1048576], found \"9223372036854775807\"");
}

TEST_CASE("skew and timeout are decimal numbers >= 0 or inf") {
  for (const char* good : {"0", "1", "1.5", ".5", "1100", "1e308", "inf"}) {
    CAPTURE(good);
    CHECK(BenchArgsParse({"--skew", good}).ok());
    CHECK(BenchArgsParse({"--timeout", good}).ok());
  }
  for (const char* bad : {"", "-1", "-0", "nan", "0x1p3", " 1", "1 ", "1e", "e5", ".", "+1", "1e999", "infinity"}) {
    CAPTURE(bad);
    CHECK(BenchArgsError({"--skew", bad}).rfind("--skew: expected a number >= 0 or inf, found \"", 0) ==
          0);
  }
}

TEST_CASE("the sweep's size list ends for the largest sizes and steps") {
  OpOptions options;
  options.sweep_min_bytes = 1024;
  options.sweep_max_bytes = std::numeric_limits<int64_t>::max();
  options.sweep_step = 4;
  auto sizes = SweepSizes(options);
  REQUIRE(sizes.ok());
  CHECK(sizes->size() == 27);  // 2^10, 2^12, ..., 2^62
  CHECK(sizes->back() == int64_t{1} << 62);
  options.sweep_step = std::numeric_limits<int64_t>::max();
  sizes = SweepSizes(options);
  REQUIRE(sizes.ok());
  CHECK(*sizes == std::vector<int64_t>{1024});
  options.sweep_min_bytes = options.sweep_max_bytes;
  options.sweep_step = 2;
  CHECK(*SweepSizes(options) == std::vector<int64_t>{std::numeric_limits<int64_t>::max()});
  options.sweep_min_bytes = 1024;
  options.sweep_max_bytes = 16384;
  options.sweep_step = 4;
  CHECK(*SweepSizes(options) == std::vector<int64_t>{1024, 4096, 16384});
  options.sweep_step = 1;
  CHECK_FALSE(SweepSizes(options).ok());
}

TEST_CASE("flag names and values are quoted escaped in every refusal") {
  CHECK(BenchArgsError({"--\x1b[2J", "1"}) == "--\\x1b[2J: unknown flag");
  CHECK(BenchArgsError({"--backend", "mpi\x07"}) == "--backend mpi\\x07: expected mpi or nccl");
  CHECK(BenchArgsError({"--ops", "ulysses,\x07x"}).rfind("--ops: unknown op \"\\x07x\"", 0) == 0);
  CHECK(BenchArgsError({"--routing", "\x1b"}) == "--routing \\x1b: expected uniform or skewed");
}
