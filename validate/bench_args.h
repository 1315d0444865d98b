// foldbench's command line as checked values, parsed without MPI (the
// program calls it after MPI_Init, the fuzz target without MPI at all).
// Contract: every input gets a value or a usage error naming the flag;
// nothing throws, overflows or is silently cut. Numbers follow the one rule
// of core/decimal_text.h: integer flags are decimal digits only (no sign,
// hex, spaces or exponent), checked against the documented range of the
// type they end in (BenchFlagRanges); --skew and --timeout are finite
// decimal numbers >= 0, or "inf" (doc/validate.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "validate/op.h"

namespace foldplan::validate {

// A rank's sweep buffer is one allocation of this many bytes at most: no
// rank has 1 TiB to give (the largest GPU holds 192 GB; a host shares its
// memory among its ranks), the free-memory check refuses what is not free
// before allocating, and size x step stays far below int64's range.
inline constexpr int64_t kMaxSweepBytes = int64_t{1} << 40;
// Iterations per case (warm-up and timed each): the root gathers
// world x iters times, and a median needs far fewer (nccl-tests runs 20).
inline constexpr int64_t kMaxBenchIters = 10000;
// The sweep's growth factor: a larger step leaves one size in the range.
inline constexpr int64_t kMaxSweepStep = int64_t{1} << 20;

// One integer flag's accepted range, as the usage text and doc state it.
struct BenchFlagRange {
  const char* flag;
  uint64_t min, max;
};
// Every integer flag foldbench takes, with its range.
const std::vector<BenchFlagRange>& BenchFlagRanges();

struct BenchArgs {
  std::string plan, output, backend = "mpi";
  std::vector<std::string> ops = {"ulysses", "dispatch"};
  OpOptions op_options;
  LoopOptions loop;
  bool help = false;
};

extern const char* const kBenchUsage;

// Parses foldbench's flags (argv without the program name). A usage error
// names the flag and what was expected; help is set for -h / --help.
Result<BenchArgs> ParseBenchArgs(const std::vector<std::string>& args);

}  // namespace foldplan::validate
