#include "inputs/job.h"

namespace foldplan {

const char* Name(Precision p) {
  switch (p) {
    case Precision::kBF16: return "bf16";
    case Precision::kFP8: return "fp8";
  }
  return "?";
}

const char* Name(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

const char* Name(CpStyle s) {
  switch (s) {
    case CpStyle::kUlysses: return "ulysses";
    case CpStyle::kRing: return "ring";
  }
  return "?";
}

const char* Name(Dispatcher d) {
  switch (d) {
    case Dispatcher::kAllToAll: return "alltoall";
    case Dispatcher::kAllGather: return "allgather";
    case Dispatcher::kFlex: return "flex";
  }
  return "?";
}

}  // namespace foldplan
