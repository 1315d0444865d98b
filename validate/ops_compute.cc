// The compute op (contract: op.h): times, on this rank's GPU, the GEMMs one
// rank of the plan runs per micro-batch and layer, with cuBLAS in bf16 (f32
// accumulation), on the NCCL backend's stream so that the runner's CUDA
// event timer measures them. Per rank, with S the sequence (scaled by
// --max-seq to a multiple of tp x cp), T = mbs x S / (tp x cp) the tokens a
// rank holds (sequence parallel):
//   expert up-proj    E_local x [M x H] x [H x 2F/etp]   (SwiGLU: gate + up)
//   expert down-proj  E_local x [M x F/etp] x [F/etp x H]
// with E_local = experts / ep local experts, F = moe_ffn_hidden and
// M = ceil(T x top_k x ep x etp / experts) rows per local expert (uniform
// routing: the T x top_k rows of each EP rank are spread over all experts,
// and the ETP group all-gathers its ranks' rows). A dense model gets
// mlp up/down-proj with M = T x tp (all-gathered over TP) and F/tp.
//   attention QK^T    mbs x H_local x [S x d] x [d x S]
//   attention PV      mbs x H_local x [S x S] x [S x d]
// with H_local = heads / (tp x cp) (Ulysses gives each rank all of S for
// its heads): plain batched GEMMs, no mask, softmax or fusion.
// cuBLAS is the backend's one handle (NcclBackend::cublas_handle).
// Inputs are small integers (cuda_kernels.h SmallIntValue), so every
// output element is an exact integer rounded once to bf16; Check compares
// 1024 sampled output elements with values computed on the host.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "validate/cuda_kernels.h"
#include "validate/nccl_backend.h"
#include "validate/op.h"
#include "validate/pattern.h"

namespace foldplan::validate {
namespace {

constexpr uint64_t kSeedA = 11, kSeedB = 12;
constexpr int kSamples = 1024;
constexpr int64_t kCublasWorkspaceBytes = int64_t{64} << 20;  // allowance, cuBLAS allocates it

Status CublasStatus(cublasStatus_t status, const std::string& call) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status();
  return Status::Error(call + " failed: " + cublasGetStatusName(status) + ": " +
                       cublasGetStatusString(status));
}

Status CudaStatus(cudaError_t error, const std::string& call) {
  if (error == cudaSuccess) return Status();
  (void)cudaGetLastError();
  return Status::Error(call + " failed: " + cudaGetErrorName(error) + ": " +
                       cudaGetErrorString(error));
}

std::string WithUnit(double value, const char* unit) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f %s", value, unit);
  return text;
}

// One timed shape, row-major: for each of `batch` problems C [m x n] =
// A [m x k] x B, with B stored [n x k] and used transposed (a weight as
// PyTorch stores it, or attention's K: X W^T) when b_transposed, else
// stored [k x n] (attention's V). Operands of one batch lie back to back.
struct GemmCase {
  std::string name;
  int64_t batch, m, n, k;
  bool b_transposed;
  double Flops() const { return 2.0 * batch * m * n * k; }
  int64_t AElements() const { return batch * m * k; }
  int64_t BElements() const { return batch * n * k; }
  int64_t CElements() const { return batch * m * n; }
};

int64_t Degree(const BenchInput& input, const char* key) {
  const auto it = input.degrees.find(key);
  return it == input.degrees.end() ? 1 : it->second;
}

class ComputeOp : public Op {
 public:
  ComputeOp(const BenchInput& input, const OpOptions& options, Backend* backend)
      : backend_(dynamic_cast<NcclBackend*>(backend)), world_size_(backend->world_size()) {
    if (backend_ == nullptr) {
      skip_ = "skipped: compute needs --backend nccl";
      return;
    }
    if (!input.has_shapes) {
      skip_ = "skipped: the input has no model shapes (give a foldplan.plan/v1 file)";
      return;
    }
    const ModelShapes& shapes = input.shapes;
    const int64_t tp = Degree(input, "tp"), cp = Degree(input, "cp");
    const int64_t ep = Degree(input, "ep"), etp = Degree(input, "etp");
    const int64_t split = tp * cp;
    const int64_t seq = ScaledSeqLen(shapes.seq_len, split, options, &notes_);
    if (seq % split != 0) {
      skip_ = "skipped: seq_len " + std::to_string(seq) + " not divisible by tp x cp = " +
              std::to_string(split);
      return;
    }
    const int64_t tokens = shapes.mbs * seq / split;
    const int64_t hidden = shapes.hidden;

    if (shapes.experts > 0 && shapes.moe_ffn_hidden > 0) {
      if (shapes.experts % ep != 0 || shapes.moe_ffn_hidden % etp != 0) {
        notes_.push_back("expert GEMMs not run: experts " + std::to_string(shapes.experts) +
                         " / ep " + std::to_string(ep) + " or moe_ffn_hidden " +
                         std::to_string(shapes.moe_ffn_hidden) + " / etp " +
                         std::to_string(etp) + " is not whole");
      } else {
        const int64_t local = shapes.experts / ep;
        const int64_t rows =
            std::max<int64_t>(1, (tokens * shapes.top_k * ep * etp + shapes.experts - 1) /
                                     shapes.experts);
        const int64_t ffn = shapes.moe_ffn_hidden / etp;
        notes_.push_back("T = mbs x S / (tp x cp) = " + std::to_string(tokens) +
                         " tokens per rank; M = ceil(T x top_k x ep x etp / experts) = " +
                         std::to_string(rows) + " rows for each of " + std::to_string(local) +
                         " local experts (uniform routing)");
        cases_.push_back({"expert up-proj", local, rows, 2 * ffn, hidden, true});
        cases_.push_back({"expert down-proj", local, rows, hidden, ffn, true});
      }
    } else if (shapes.ffn_hidden > 0 && shapes.ffn_hidden % tp == 0) {
      const int64_t rows = tokens * tp;
      const int64_t ffn = shapes.ffn_hidden / tp;
      notes_.push_back("dense MLP: M = mbs x S / cp = " + std::to_string(rows) + " rows");
      cases_.push_back({"mlp up-proj", 1, rows, 2 * ffn, hidden, true});
      cases_.push_back({"mlp down-proj", 1, rows, hidden, ffn, true});
    }
    if (shapes.heads % split == 0) {
      const int64_t batch = shapes.mbs * (shapes.heads / split);
      cases_.push_back({"attention QK^T", batch, seq, seq, shapes.head_dim, true});
      cases_.push_back({"attention PV", batch, seq, shapes.head_dim, seq, false});
    } else {
      notes_.push_back("attention GEMMs not run: heads " + std::to_string(shapes.heads) +
                       " not divisible by tp x cp = " + std::to_string(split));
    }
    for (const GemmCase& c : cases_) {
      if (c.m > INT_MAX || c.n > INT_MAX || c.k > INT_MAX || c.batch > INT_MAX) {
        skip_ = "skipped: " + c.name + " has a dimension above cuBLAS's int range";
        return;
      }
    }
    if (cases_.empty()) {
      skip_ = "skipped: the model has no expert, MLP or attention shape to time here";
      return;
    }
    for (const GemmCase& c : cases_) {
      notes_.push_back(c.name + ": " + std::to_string(c.batch) + " x [" + std::to_string(c.m) +
                       " x " + std::to_string(c.k) + "] x [" + std::to_string(c.k) + " x " +
                       std::to_string(c.n) + "], " + WithUnit(c.Flops() / 1e9, "GFLOP") +
                       " per run");
    }
    notes_.push_back(
        "cuBLAS bf16 in and out, f32 accumulation (cublasGemmStridedBatchedEx, "
        "CUBLAS_COMPUTE_32F, reduced-precision split-K reductions disallowed); GPU time on the "
        "backend's stream; TFLOP/s = flops / median time");
    notes_.push_back(
        "inputs are small integers in [-2, 2], so outputs are exact and checked at " +
        std::to_string(kSamples) +
        " sampled positions per case (such data may draw less power than random data)");
    if (backend_->ranks_per_gpu() > 1) {
      notes_.push_back(std::to_string(backend_->ranks_per_gpu()) +
                       " ranks share this GPU and run their GEMMs at the same time: times are "
                       "not those of a GPU of one's own");
    }
  }
  ~ComputeOp() override { Release(); }

  // The backend's handle: on its stream, split-K partial sums kept in f32,
  // so outputs are exact (see Check).
  Status Init() {
    if (!skip_.empty()) return Status();
    Result<void*> handle = backend_->cublas_handle();
    if (!handle.ok()) return handle.status();
    handle_ = static_cast<cublasHandle_t>(handle.value());
    return Status();
  }

  std::string name() const override { return "compute"; }
  std::string group_kind() const override { return "world"; }
  std::string skip_reason() const override { return skip_; }
  std::vector<std::string> notes() const override { return notes_; }
  int group_size() const override { return world_size_; }
  std::string group_label() const override {
    return "every rank (each times its own GPU, rank " +
           std::to_string(backend_ != nullptr ? backend_->world_rank() : 0) + " here)";
  }
  std::vector<OpCase> cases() const override {
    std::vector<OpCase> out;
    for (const GemmCase& c : cases_) {
      OpCase op_case;
      op_case.name = c.name;
      op_case.elements_per_rank = c.CElements();
      op_case.type = DType::kBF16;
      op_case.send_bytes_per_rank = 0;  // nothing is sent
      op_case.bus_factor = 1.0;
      op_case.flops = c.Flops();
      op_case.gemm = GemmShape{c.batch, c.m, c.n, c.k};
      out.push_back(op_case);
    }
    return out;
  }
  int64_t bytes_needed(int index) const override {
    const GemmCase& c = cases_[index];
    return 2 * (c.AElements() + c.BElements() + c.CElements()) + kCublasWorkspaceBytes;
  }

  Status Prepare(int index) override {
    Release();
    current_ = index;
    const GemmCase& c = cases_[index];
    void* stream = backend_->cuda_stream();
    for (auto [buffer, elements] : {std::pair{&a_, c.AElements()}, std::pair{&b_, c.BElements()},
                                    std::pair{&c_, c.CElements()}}) {
      *buffer = static_cast<uint16_t*>(backend_->Alloc(static_cast<size_t>(elements) * 2));
      if (*buffer == nullptr) {
        return Status::Error("compute: cannot allocate " + std::to_string(elements * 2) +
                             " bytes of device memory");
      }
    }
    if (Status s = LaunchFillSmallInts(a_, c.AElements(), kSeedA, stream); !s.ok()) return s;
    if (Status s = LaunchFillSmallInts(b_, c.BElements(), kSeedB, stream); !s.ok()) return s;
    // All ones: a bf16 NaN, which no GEMM output here can be.
    if (Status s = CudaStatus(cudaMemsetAsync(c_, 0xFF, static_cast<size_t>(c.CElements()) * 2,
                                              static_cast<cudaStream_t>(stream)),
                              "cudaMemsetAsync");
        !s.ok()) {
      return s;
    }
    return CudaStatus(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)),
                      "cudaStreamSynchronize (compute prepare)");
  }

  // Row-major C = A op(B) is column-major C^T = op(B)^T A^T: cuBLAS gets B
  // as its first operand and A as its second, m = n_rows of C^T = n.
  Status Run() override {
    const GemmCase& c = cases_[current_];
    const float alpha = 1.0f, beta = 0.0f;
    const int m = static_cast<int>(c.n), n = static_cast<int>(c.m), k = static_cast<int>(c.k);
    const int lda = c.b_transposed ? k : m;  // B as stored: [n x k] or [k x n]
    return CublasStatus(
        cublasGemmStridedBatchedEx(handle_, c.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   CUBLAS_OP_N, m, n, k, &alpha, b_, CUDA_R_16BF, lda,
                                   c.n * c.k, a_, CUDA_R_16BF, k, c.m * c.k, &beta, c_,
                                   CUDA_R_16BF, m, c.m * c.n, static_cast<int>(c.batch),
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx (" + c.name + ")");
  }

  void Corrupt() override {
    uint16_t word = 0;
    if (!backend_->Download(&word, c_, 2).ok()) return;
    word ^= 0x4001;
    (void)backend_->Upload(c_, &word, 2);
  }

  // Sampled output elements (the first, the last and kSamples - 2 hashed
  // ones) against the exact sum on the host, rounded once to bf16.
  Result<int64_t> Check() override {
    const GemmCase& c = cases_[current_];
    int64_t wrong = 0;
    for (int s = 0; s < kSamples; ++s) {
      int64_t index = 0;
      if (s == 1) index = c.CElements() - 1;
      if (s > 1) index = static_cast<int64_t>(Mix64(0xC0FFEE + s) % c.CElements());
      const int64_t b = index / (c.m * c.n), i = index / c.n % c.m, j = index % c.n;
      int64_t sum = 0;
      for (int64_t x = 0; x < c.k; ++x) {
        const int64_t a_at = (b * c.m + i) * c.k + x;
        const int64_t b_at = c.b_transposed ? (b * c.n + j) * c.k + x : (b * c.k + x) * c.n + j;
        sum += static_cast<int64_t>(SmallIntValue(kSeedA, a_at)) *
               SmallIntValue(kSeedB, b_at);
      }
      uint16_t got = 0;
      if (Status st = backend_->Download(&got, c_ + index, 2); !st.ok()) return st;
      wrong += got != FloatToBf16(static_cast<float>(sum));
    }
    return wrong;
  }

  void Release() override {
    for (uint16_t** buffer : {&a_, &b_, &c_}) {
      if (*buffer != nullptr) backend_->Free(*buffer);
      *buffer = nullptr;
    }
    current_ = -1;
  }

 private:
  NcclBackend* backend_;
  int world_size_;
  std::string skip_;
  std::vector<std::string> notes_;
  std::vector<GemmCase> cases_;
  cublasHandle_t handle_ = nullptr;  // the backend's; not destroyed here
  int current_ = -1;
  uint16_t* a_ = nullptr;
  uint16_t* b_ = nullptr;
  uint16_t* c_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<Op>> MakeComputeOp(const BenchInput& input, const OpOptions& options,
                                          Backend* backend) {
  auto op = std::make_unique<ComputeOp>(input, options, backend);
  if (Status s = op->Init(); !s.ok()) return s;
  return std::unique_ptr<Op>(std::move(op));
}

}  // namespace foldplan::validate
