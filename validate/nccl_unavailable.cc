// Built instead of nccl_backend.cc, ops_compute.cc and cuda_kernels.cu when
// CMake found no nvcc or no NCCL, or FOLDPLAN_WITH_CUDA is OFF:
// --backend nccl and the GPU-only ops then refuse with the reason.
#include "validate/backend.h"
#include "validate/op.h"

// CMake passes its reason (FOLDPLAN_NO_NCCL_WHY: "no CUDA compiler (nvcc)
// found", "FOLDPLAN_WITH_CUDA is OFF", ...).
#ifndef FOLDPLAN_NO_NCCL_WHY
#define FOLDPLAN_NO_NCCL_WHY "CMake found no nvcc or no nccl.h / libnccl"
#endif

namespace foldplan::validate {
namespace {
constexpr const char* kWhy =
    "this foldbench was built without CUDA and NCCL (" FOLDPLAN_NO_NCCL_WHY
    "); rebuild where both are installed";
}  // namespace

bool NcclBackendBuilt() { return false; }

Result<std::unique_ptr<Backend>> MakeNcclBackend() {
  return Status::Error(std::string("--backend nccl: ") + kWhy);
}

Result<std::unique_ptr<Op>> MakeComputeOp(const BenchInput&, const OpOptions&, Backend*) {
  return Status::Error(std::string("op compute: ") + kWhy);
}

}  // namespace foldplan::validate
