#include "validate/backend.h"

#include "validate/mpi_host.h"

namespace foldplan::validate {

size_t SizeOf(DType type) { return type == DType::kU16 || type == DType::kBF16 ? 2 : 4; }

std::vector<double> Backend::GatherToRoot(const std::vector<double>& values) {
  return MpiGatherToRoot(values);
}
int64_t Backend::SumOverWorld(int64_t value) { return MpiSumOverWorld(value); }
std::vector<std::string> Backend::AllHostNames() { return MpiAllHostNames(); }
std::string Backend::LibraryVersion() { return MpiLibraryVersion(); }

GroupSlot FindGroupSlot(const GroupList& groups, int world_rank) {
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t i = 0; i < groups[g].size(); ++i) {
      if (groups[g][i] == world_rank) return {static_cast<int>(g), static_cast<int>(i)};
    }
  }
  return {};
}

const char* DTypeName(DType type) {
  switch (type) {
    case DType::kU16: return "u16";
    case DType::kBF16: return "bf16";
    case DType::kF32: return "f32";
    case DType::kI32: return "i32";
  }
  return "?";
}

}  // namespace foldplan::validate
