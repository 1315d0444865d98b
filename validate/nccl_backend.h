// Internal to FOLDPLAN_HAVE_NCCL builds: what GPU-only ops (ops_compute.cc)
// need from the NCCL backend beyond Backend. They find it with
// dynamic_cast<NcclBackend*>(backend); any other backend is not one. No
// CUDA types here: the stream is a cudaStream_t passed as void*.
#pragma once

#include "validate/backend.h"

namespace foldplan::validate {

class NcclBackend : public Backend {
 public:
  // The one CUDA stream this backend issues everything on: collectives,
  // kernels, copies and the timer's events. Work a GPU-only op issues on
  // it is timed by TimerStart / TimerStopSeconds like the backend's own.
  virtual void* cuda_stream() = 0;
  virtual int cuda_device() const = 0;
  // Ranks of this node that share this rank's GPU (1: a GPU of its own).
  virtual int ranks_per_gpu() const = 0;
  // The backend's one cuBLAS handle (a cublasHandle_t), made on first use:
  // bound to cuda_stream(), split-K partial sums kept in f32
  // (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION). Shared by
  // ExpertGemm and the compute op; destroyed with the backend.
  virtual Result<void*> cublas_handle() = 0;
};

}  // namespace foldplan::validate
