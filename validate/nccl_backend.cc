// The NCCL backend (contract: backend.h; GPU-only extras: nccl_backend.h).
// One GPU per rank: device = node-local rank modulo the visible devices.
// When a node has more ranks than GPUs, ranks share a GPU by looking like
// separate hosts to NCCL (NCCL_HOSTID per rank, sockets on loopback; see
// ../shared/device/README.md), and the placement class says so. Buffers are
// device memory (cudaMalloc); collectives, kernels (cuda_kernels.cu), copies
// and timer events all go on one CUDA stream, so the timer measures exactly
// the work issued between its calls. Every CUDA and NCCL error becomes a
// Status naming the call and the library's error string. Host code only:
// compiled by the host compiler against the CUDA runtime and NCCL headers.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "validate/cuda_kernels.h"
#include "validate/mpi_host.h"
#include "validate/nccl_backend.h"

namespace foldplan::validate {
namespace {

Status CudaStatus(cudaError_t error, const std::string& call) {
  if (error == cudaSuccess) return Status();
  // Reset the runtime's last error (when it is not sticky), so a later
  // kernel launch check does not report this one again.
  (void)cudaGetLastError();
  return Status::Error(call + " failed: " + cudaGetErrorName(error) + ": " +
                       cudaGetErrorString(error));
}

Status NcclStatus(ncclResult_t result, const std::string& call) {
  if (result == ncclSuccess) return Status();
  std::string message = call + " failed: " + ncclGetErrorString(result);
  const char* detail = ncclGetLastError(nullptr);
  if (detail != nullptr && *detail != '\0') message += std::string(" (") + detail + ")";
  return Status::Error(message);
}

Status CublasStatus(cublasStatus_t status, const std::string& call) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status();
  return Status::Error(call + " failed: " + cublasGetStatusName(status) + ": " +
                       cublasGetStatusString(status));
}

// The NCCL type a reduction of `type` sums in; NCCL has no 16-bit integers.
Result<ncclDataType_t> SumType(DType type) {
  switch (type) {
    case DType::kBF16: return ncclBfloat16;
    case DType::kF32: return ncclFloat32;
    case DType::kI32: return ncclInt32;
    case DType::kU16: break;
  }
  return Status::Error(std::string("a reduction cannot sum ") + DTypeName(type) + " words");
}

std::string VersionText(int major, int minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Every live communicator, so that Abort() can abort them all from the
// watchdog thread while the main thread is blocked inside one.
struct CommRegistry {
  std::mutex mutex;
  std::set<ncclComm_t> live;
  bool aborting = false;

  void Add(ncclComm_t comm) {
    std::lock_guard<std::mutex> lock(mutex);
    live.insert(comm);
  }
  // False when Abort() has taken over the communicators (do not destroy).
  bool Remove(ncclComm_t comm) {
    std::lock_guard<std::mutex> lock(mutex);
    if (aborting) return false;
    live.erase(comm);
    return true;
  }
};

class NcclGroupComm : public GroupComm {
 public:
  // `registry` null: the communicator is not owned (the world's).
  NcclGroupComm(ncclComm_t comm, int group_index, std::vector<int> members, int rank,
                std::shared_ptr<CommRegistry> registry)
      : GroupComm(group_index, std::move(members), rank),
        comm_(comm),
        registry_(std::move(registry)) {}
  ~NcclGroupComm() override {
    if (registry_ == nullptr || !registry_->Remove(comm_)) return;
    if (Status s = NcclStatus(ncclCommDestroy(comm_), "ncclCommDestroy"); !s.ok()) {
      std::fprintf(stderr, "foldbench: %s\n", s.message().c_str());
    }
  }
  ncclComm_t comm() const { return comm_; }

 private:
  ncclComm_t comm_;
  std::shared_ptr<CommRegistry> registry_;
};

ncclComm_t CommOf(GroupComm& comm) { return static_cast<NcclGroupComm&>(comm).comm(); }

// ncclGroupStart, the calls `body` issues, ncclGroupEnd (always, so that an
// error inside does not leave the group open); the first error wins.
template <typename Body>
Status Grouped(const std::string& what, Body body) {
  if (Status s = NcclStatus(ncclGroupStart(), "ncclGroupStart (" + what + ")"); !s.ok()) return s;
  const Status inner = body();
  const Status end = NcclStatus(ncclGroupEnd(), "ncclGroupEnd (" + what + ")");
  return inner.ok() ? end : inner;
}

Status CheckCounts(const std::string& what, size_t n, std::initializer_list<size_t> sizes) {
  for (size_t size : sizes) {
    if (size != n) {
      return Status::Error(what + ": " + std::to_string(size) +
                           " counts or offsets for a group of " + std::to_string(n));
    }
  }
  return Status();
}

const char* At(const void* buffer, size_t offset_bytes) {
  return static_cast<const char*>(buffer) + offset_bytes;
}
char* At(void* buffer, size_t offset_bytes) { return static_cast<char*>(buffer) + offset_bytes; }

class NcclBackendImpl : public NcclBackend {
 public:
  NcclBackendImpl() : registry_(std::make_shared<CommRegistry>()) {}
  ~NcclBackendImpl() override {
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    world_.reset();
    if (world_comm_ != nullptr && registry_->Remove(world_comm_)) {
      if (Status s = NcclStatus(ncclCommDestroy(world_comm_), "ncclCommDestroy (world)");
          !s.ok()) {
        std::fprintf(stderr, "foldbench: %s\n", s.message().c_str());
      }
    }
    if (cublas_ != nullptr) (void)cublasDestroy(cublas_);
    if (gemm_pointers_ != nullptr) (void)cudaFree(gemm_pointers_);
    if (barrier_word_ != nullptr) (void)cudaFree(barrier_word_);
    if (start_ != nullptr) (void)cudaEventDestroy(start_);
    if (stop_ != nullptr) (void)cudaEventDestroy(stop_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }

  // Collective over MPI_COMM_WORLD: picks the GPU, sets up NCCL's
  // environment, makes the stream, events and the world communicator.
  Status Init();

  std::string name() const override { return "nccl"; }
  int world_rank() const override { return world_rank_; }
  int world_size() const override { return world_size_; }
  std::string placement_class() const override {
    if (max_ranks_per_gpu_ == 1) return "nccl on device memory";
    if (node_gpus_ == 1) {
      return "socket-emulated (" + std::to_string(max_ranks_per_gpu_) + " ranks on one GPU)";
    }
    return "socket-emulated (up to " + std::to_string(max_ranks_per_gpu_) + " ranks per GPU on " +
           std::to_string(node_gpus_) + " GPUs)";
  }
  std::vector<std::string> device_facts() override;

  Result<std::unique_ptr<GroupComm>> Split(const GroupList& groups) override;
  GroupComm& World() override { return *world_; }

  int64_t FreeBytes() override {
    size_t free_bytes = 0, total_bytes = 0;
    if (Status s = CudaStatus(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
        !s.ok()) {
      Defer(s);
      return 0;
    }
    return static_cast<int64_t>(free_bytes) / ranks_per_gpu_;
  }
  void* Alloc(size_t bytes) override {
    void* buffer = nullptr;
    if (!CudaStatus(cudaMalloc(&buffer, std::max<size_t>(bytes, 1)), "cudaMalloc").ok()) {
      return nullptr;
    }
    return buffer;
  }
  void Free(void* buffer) override {
    if (buffer != nullptr) Defer(CudaStatus(cudaFree(buffer), "cudaFree"));
  }
  Status Upload(void* buffer, const void* host, size_t bytes) override {
    if (Status s = TakeDeferred(); !s.ok()) return s;
    if (bytes == 0) return Status();
    // On the stream (a plain cudaMemcpy from pageable memory may return
    // before its copy lands), then wait for it.
    if (Status s = CudaStatus(
            cudaMemcpyAsync(buffer, host, bytes, cudaMemcpyHostToDevice, stream_),
            "cudaMemcpyAsync (upload)");
        !s.ok()) {
      return s;
    }
    return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (upload)");
  }
  Status Download(void* host, const void* buffer, size_t bytes) override {
    if (Status s = TakeDeferred(); !s.ok()) return s;
    if (bytes == 0) return Status();
    if (Status s = CudaStatus(
            cudaMemcpyAsync(host, buffer, bytes, cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync (download)");
        !s.ok()) {
      return s;
    }
    return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (download)");
  }

  // Data movement goes as bytes (ncclUint8): NCCL has no 16-bit integer
  // type, and a copy does not care what the bytes mean.
  Status AllToAll(const void* send, void* recv, size_t count_per_peer, DType type,
                  GroupComm& comm) override {
    const size_t bytes = count_per_peer * SizeOf(type);
    const ncclComm_t c = CommOf(comm);
    const int n = comm.size();
    if (bytes == 0) return Status();
    return Grouped("all-to-all", [&]() -> Status {
      for (int p = 0; p < n; ++p) {
        const size_t at = static_cast<size_t>(p) * bytes;
        if (Status s = NcclStatus(ncclSend(At(send, at), bytes, ncclUint8, p, c, stream_),
                                  "ncclSend (all-to-all)");
            !s.ok()) {
          return s;
        }
        if (Status s = NcclStatus(ncclRecv(At(recv, at), bytes, ncclUint8, p, c, stream_),
                                  "ncclRecv (all-to-all)");
            !s.ok()) {
          return s;
        }
      }
      return Status();
    });
  }
  Status AllToAllV(const void* send, const std::vector<size_t>& send_counts,
                   const std::vector<size_t>& send_offsets, void* recv,
                   const std::vector<size_t>& recv_counts,
                   const std::vector<size_t>& recv_offsets, DType type,
                   GroupComm& comm) override {
    const size_t n = static_cast<size_t>(comm.size());
    if (Status s = CheckCounts("all-to-all-v", n,
                               {send_counts.size(), send_offsets.size(), recv_counts.size(),
                                recv_offsets.size()});
        !s.ok()) {
      return s;
    }
    const size_t e = SizeOf(type);
    const ncclComm_t c = CommOf(comm);
    // A pair with nothing to move is skipped on both sides (my send count
    // to p is p's receive count from me).
    return Grouped("all-to-all-v", [&]() -> Status {
      for (size_t p = 0; p < n; ++p) {
        const int peer = static_cast<int>(p);
        if (send_counts[p] > 0) {
          if (Status s = NcclStatus(ncclSend(At(send, send_offsets[p] * e), send_counts[p] * e,
                                             ncclUint8, peer, c, stream_),
                                    "ncclSend (all-to-all-v)");
              !s.ok()) {
            return s;
          }
        }
        if (recv_counts[p] > 0) {
          if (Status s = NcclStatus(ncclRecv(At(recv, recv_offsets[p] * e), recv_counts[p] * e,
                                             ncclUint8, peer, c, stream_),
                                    "ncclRecv (all-to-all-v)");
              !s.ok()) {
            return s;
          }
        }
      }
      return Status();
    });
  }
  Status AllGather(const void* send, void* recv, size_t count_per_rank, DType type,
                   GroupComm& comm) override {
    const size_t bytes = count_per_rank * SizeOf(type);
    if (bytes == 0) return Status();
    return NcclStatus(ncclAllGather(send, recv, bytes, ncclUint8, CommOf(comm), stream_),
                      "ncclAllGather");
  }
  // One broadcast per root, grouped so that NCCL runs them together.
  Status AllGatherV(const void* send, size_t send_count, void* recv,
                    const std::vector<size_t>& recv_counts,
                    const std::vector<size_t>& recv_offsets, DType type,
                    GroupComm& comm) override {
    const size_t n = static_cast<size_t>(comm.size());
    if (Status s = CheckCounts("all-gather-v", n, {recv_counts.size(), recv_offsets.size()});
        !s.ok()) {
      return s;
    }
    const int me = comm.rank();
    if (send_count != recv_counts[me]) {
      return Status::Error("all-gather-v: rank " + std::to_string(me) + " sends " +
                           std::to_string(send_count) + " elements but its block holds " +
                           std::to_string(recv_counts[me]));
    }
    const size_t e = SizeOf(type);
    const ncclComm_t c = CommOf(comm);
    return Grouped("all-gather-v", [&]() -> Status {
      for (size_t root = 0; root < n; ++root) {
        if (recv_counts[root] == 0) continue;
        char* block = At(recv, recv_offsets[root] * e);
        const void* from = static_cast<int>(root) == me ? send : block;  // used on the root only
        if (Status s = NcclStatus(ncclBroadcast(from, block, recv_counts[root] * e, ncclUint8,
                                                static_cast<int>(root), c, stream_),
                                  "ncclBroadcast (all-gather-v)");
            !s.ok()) {
          return s;
        }
      }
      return Status();
    });
  }
  Status ReduceScatter(const void* send, void* recv, size_t count_per_rank, DType type,
                       GroupComm& comm) override {
    Result<ncclDataType_t> t = SumType(type);
    if (!t.ok()) return t.status();
    if (count_per_rank == 0) return Status();
    return NcclStatus(
        ncclReduceScatter(send, recv, count_per_rank, *t, ncclSum, CommOf(comm), stream_),
        "ncclReduceScatter");
  }
  // One reduce per root, grouped: rank i gets the sum of block i.
  Status ReduceScatterV(const void* send, const std::vector<size_t>& counts,
                        const std::vector<size_t>& offsets, void* recv, DType type,
                        GroupComm& comm) override {
    Result<ncclDataType_t> t = SumType(type);
    if (!t.ok()) return t.status();
    const size_t n = static_cast<size_t>(comm.size());
    if (Status s = CheckCounts("reduce-scatter-v", n, {counts.size(), offsets.size()}); !s.ok()) {
      return s;
    }
    const size_t e = SizeOf(type);
    const ncclComm_t c = CommOf(comm);
    return Grouped("reduce-scatter-v", [&]() -> Status {
      for (size_t root = 0; root < n; ++root) {
        if (counts[root] == 0) continue;
        // recv is written on the root only.
        if (Status s = NcclStatus(ncclReduce(At(send, offsets[root] * e), recv, counts[root], *t,
                                             ncclSum, static_cast<int>(root), c, stream_),
                                  "ncclReduce (reduce-scatter-v)");
            !s.ok()) {
          return s;
        }
      }
      return Status();
    });
  }
  Status AllReduce(void* buffer, size_t count, DType type, GroupComm& comm) override {
    Result<ncclDataType_t> t = SumType(type);
    if (!t.ok()) return t.status();
    if (count == 0) return Status();
    return NcclStatus(ncclAllReduce(buffer, buffer, count, *t, ncclSum, CommOf(comm), stream_),
                      "ncclAllReduce");
  }
  Status SendRecv(const void* send, size_t send_count, int send_peer, void* recv,
                  size_t recv_count, int recv_peer, DType type, GroupComm& comm) override {
    const size_t e = SizeOf(type);
    const ncclComm_t c = CommOf(comm);
    return Grouped("send/recv", [&]() -> Status {
      if (send_peer >= 0 && send_count > 0) {
        if (Status s = NcclStatus(ncclSend(send, send_count * e, ncclUint8, send_peer, c, stream_),
                                  "ncclSend");
            !s.ok()) {
          return s;
        }
      }
      if (recv_peer >= 0 && recv_count > 0) {
        return NcclStatus(ncclRecv(recv, recv_count * e, ncclUint8, recv_peer, c, stream_),
                          "ncclRecv");
      }
      return Status();
    });
  }
  // A one-word all-reduce, then wait for it: no rank leaves before every
  // rank has joined, and the stream is idle afterwards.
  Status Barrier(GroupComm& comm) override {
    if (Status s = TakeDeferred(); !s.ok()) return s;
    if (Status s = NcclStatus(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum,
                                            CommOf(comm), stream_),
                              "ncclAllReduce (barrier)");
        !s.ok()) {
      return s;
    }
    return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (barrier)");
  }

  Status CopyRuns(void* dst, const void* src, const RunCopy& copy) override {
    if (copy.run_bytes <= 0 || copy.count[0] <= 0 || copy.count[1] <= 0 || copy.count[2] <= 0) {
      return Status();
    }
    if (Status s = DeviceBuffers("CopyRuns", {{dst, "dst"}, {src, "src"}}); !s.ok()) return s;
    return LaunchCopyRuns(dst, src, copy, stream_);
  }
  Status GatherRows(void* dst, const void* src, const int64_t* rows, int64_t count,
                    int64_t row_bytes) override {
    if (count <= 0 || row_bytes <= 0) return Status();
    if (Status s = DeviceBuffers("GatherRows", {{dst, "dst"}, {src, "src"}, {rows, "rows"}});
        !s.ok()) {
      return s;
    }
    return LaunchGatherRows(dst, src, rows, count, row_bytes, stream_);
  }
  Status ExpertPartial(uint16_t* rows_bf16, int64_t count, int64_t hidden,
                       const int32_t* row_expert, int etp_rank) override {
    if (count <= 0 || hidden <= 0) return Status();
    if (Status s = DeviceBuffers("ExpertPartial",
                                 {{rows_bf16, "rows_bf16"}, {row_expert, "row_expert"}});
        !s.ok()) {
      return s;
    }
    return LaunchExpertPartial(rows_bf16, count, hidden, row_expert, etp_rank, stream_);
  }
  Status ExpertGemm(uint16_t* rows_bf16, const std::vector<int64_t>& rows_per_expert,
                    int64_t hidden, int64_t ffn, const std::vector<const uint16_t*>& w1,
                    const std::vector<const uint16_t*>& w2, uint16_t* scratch) override;
  Status CombineRows(float* out, const uint16_t* rows_bf16, const int64_t* rows,
                     const float* weights, int64_t tokens, int64_t top_k,
                     int64_t hidden) override {
    if (tokens <= 0 || hidden <= 0) return Status();
    if (Status s = DeviceBuffers("CombineRows", {{out, "out"},
                                                 {rows_bf16, "rows_bf16"},
                                                 {rows, "rows"},
                                                 {weights, "weights"}});
        !s.ok()) {
      return s;
    }
    return LaunchCombineRows(out, rows_bf16, rows, weights, tokens, top_k, hidden, stream_);
  }

  void TimerStart() override {
    Defer(CudaStatus(cudaEventRecord(start_, stream_), "cudaEventRecord (timer start)"));
  }
  double TimerStopSeconds() override {
    float ms = 0;
    Status s = CudaStatus(cudaEventRecord(stop_, stream_), "cudaEventRecord (timer stop)");
    if (s.ok()) s = CudaStatus(cudaEventSynchronize(stop_), "cudaEventSynchronize (timer stop)");
    if (s.ok()) s = CudaStatus(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    Defer(s);
    return s.ok() ? ms * 1e-3 : 0.0;
  }


  [[noreturn]] void Abort(int exit_code) override {
    // Keep the lock: no destructor may free a communicator from here on.
    registry_->mutex.lock();
    registry_->aborting = true;
    // ncclCommAbort frees the communicator's memory, which can wait for the
    // device, where another communicator's kernel may still spin for a dead
    // peer (its abort flag not yet set): an unbounded wait here would keep
    // MPI_Abort from ever running. So the aborts run on a thread of their
    // own and MPI_Abort follows once they are done or after a grace period.
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> finished = done->get_future();
    std::thread([comms = registry_->live, device = device_, done] {
      // A new thread's current device is 0, not necessarily this rank's.
      (void)cudaSetDevice(device);
      for (ncclComm_t comm : comms) (void)ncclCommAbort(comm);
      done->set_value();
    }).detach();
    (void)finished.wait_for(std::chrono::seconds(10));
    MpiAbortJob(exit_code);
  }

  void* cuda_stream() override { return stream_; }
  int cuda_device() const override { return device_; }
  int ranks_per_gpu() const override { return ranks_per_gpu_; }
  Result<void*> cublas_handle() override;

 private:
  // Errors of calls that cannot return one (timer, Free, FreeBytes) wait
  // here for the next call that can: Barrier, Upload, Download, Split.
  void Defer(Status s) {
    if (!s.ok() && deferred_.ok()) deferred_ = std::move(s);
  }
  Status TakeDeferred() {
    Status s = std::move(deferred_);
    deferred_ = Status();
    return s;
  }

  // The kernels read and write device memory only; a host pointer would be
  // a fault that poisons the CUDA context, so say which argument it was.
  Status DeviceBuffers(const char* kernel,
                       std::initializer_list<std::pair<const void*, const char*>> buffers) {
    for (const auto& [pointer, what] : buffers) {
      cudaPointerAttributes attributes{};
      if (Status s = CudaStatus(cudaPointerGetAttributes(&attributes, pointer),
                                std::string("cudaPointerGetAttributes (") + kernel + ")");
          !s.ok()) {
        return s;
      }
      if (attributes.type == cudaMemoryTypeUnregistered) {
        return Status::Error(std::string(kernel) + ": " + what +
                             " is host memory; the NCCL backend's kernels need buffers from "
                             "Alloc()");
      }
    }
    return Status();
  }

  int world_rank_ = 0, world_size_ = 0;
  int local_rank_ = 0, local_size_ = 1;
  int device_ = 0, device_count_ = 0;
  int ranks_per_gpu_ = 1;       // local ranks on this rank's GPU
  int max_ranks_per_gpu_ = 1;   // most local ranks on one GPU of this node
  int node_gpus_ = 1;           // distinct GPUs (PCI bus ids) the ranks of this node use
  bool set_host_id_ = false;    // this backend set NCCL_HOSTID
  Status scheduling_;           // cudaSetDeviceFlags(yield) when ranks share a GPU
  std::shared_ptr<CommRegistry> registry_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  int32_t* barrier_word_ = nullptr;  // device word the barrier all-reduces (stays 0)
  cublasHandle_t cublas_ = nullptr;   // made by cublas_handle() on first use
  void** gemm_pointers_ = nullptr;    // ExpertGemm's device arrays of matrix pointers
  size_t gemm_pointer_capacity_ = 0;  // pointers gemm_pointers_ holds
  bool grouped_gemm_supported_ = true;  // false once cuBLAS refused the grouped call
  ncclComm_t world_comm_ = nullptr;
  std::unique_ptr<NcclGroupComm> world_;
  Status deferred_;
};

Status NcclBackendImpl::Init() {
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  const std::string me = "rank " + std::to_string(world_rank_);

  // Node-local rank: the ranks sharing this node's memory (and GPUs).
  MPI_Comm node = MPI_COMM_NULL;
  if (Status s = MpiStatus(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank_,
                                               MPI_INFO_NULL, &node),
                           "MPI_Comm_split_type");
      !s.ok()) {
    return s;
  }
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  // Kept for the GPU-sharing count below; freed there, or on an early return.
  struct NodeComm {
    MPI_Comm comm;
    void Free() {
      if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    }
    ~NodeComm() { Free(); }
  } node_comm{node};

  Status here;
  const cudaError_t counted = cudaGetDeviceCount(&device_count_);
  if (counted != cudaSuccess) {
    (void)cudaGetLastError();
    here = Status::Error("no CUDA device visible to " + me + ": cudaGetDeviceCount: " +
                         cudaGetErrorName(counted) + ": " + cudaGetErrorString(counted) +
                         (counted == cudaErrorInsufficientDriver
                              ? " (no NVIDIA driver, or one older than this CUDA runtime)"
                              : ""));
  } else if (device_count_ == 0) {
    here = Status::Error("no CUDA device visible to " + me + ": cudaGetDeviceCount found 0");
  }
  // Every rank learns whether every rank has a GPU before any of them
  // starts NCCL, which would wait for the missing ones.
  int ok_here = here.ok() ? 1 : 0, ok_everywhere = 0;
  if (Status s = MpiStatus(
          MPI_Allreduce(&ok_here, &ok_everywhere, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
          "MPI_Allreduce (GPU check)");
      !s.ok()) {
    return s;
  }
  if (!here.ok()) return here;
  if (ok_everywhere == 0) {
    return Status::Error("another rank has no usable CUDA device (its message says why)");
  }

  device_ = local_rank_ % device_count_;
  // Which node-local ranks share this GPU: compare PCI bus ids (what NCCL's
  // "Duplicate GPU" check compares), not ordinals. A launcher that gives each
  // rank its own CUDA_VISIBLE_DEVICES shows every rank one device 0, and
  // counting ordinals would then take 8 GPUs for one shared GPU (NCCL_HOSTID,
  // sockets instead of NVLink, FreeBytes / 8).
  constexpr int kBusIdBytes = 64;
  char bus_id[kBusIdBytes] = {};
  if (cudaDeviceGetPCIBusId(bus_id, kBusIdBytes, device_) != cudaSuccess) {
    (void)cudaGetLastError();
    std::snprintf(bus_id, sizeof bus_id, "ordinal %d", device_);  // as before: by ordinal
  }
  std::vector<char> bus_ids(static_cast<size_t>(local_size_) * kBusIdBytes);
  if (Status s = MpiStatus(MPI_Allgather(bus_id, kBusIdBytes, MPI_CHAR, bus_ids.data(),
                                         kBusIdBytes, MPI_CHAR, node_comm.comm),
                           "MPI_Allgather (GPU bus ids)");
      !s.ok()) {
    return s;
  }
  node_comm.Free();
  std::map<std::string, int> ranks_on;  // bus id -> node-local ranks on that GPU
  for (int r = 0; r < local_size_; ++r) {
    const char* id = bus_ids.data() + static_cast<size_t>(r) * kBusIdBytes;
    ++ranks_on[std::string(id, strnlen(id, kBusIdBytes))];
  }
  ranks_per_gpu_ = ranks_on[std::string(bus_id, strnlen(bus_id, kBusIdBytes))];
  max_ranks_per_gpu_ = 1;
  for (const auto& [id, ranks] : ranks_on) max_ranks_per_gpu_ = std::max(max_ranks_per_gpu_, ranks);
  node_gpus_ = static_cast<int>(ranks_on.size());
  if (max_ranks_per_gpu_ > 1 && std::getenv("NCCL_HOSTID") == nullptr) {
    // NCCL refuses two ranks of one communicator on one GPU of one host
    // ("Duplicate GPU detected"); a distinct host id per rank makes each
    // look like a host of its own, and they talk over sockets.
    const std::string host_id = "foldbench-host" + std::to_string(world_rank_);
    setenv("NCCL_HOSTID", host_id.c_str(), 1);
    // Loopback only when the whole job is on this node: a multi-node job
    // needs its real interface for NCCL's bootstrap.
    if (local_size_ == world_size_ && std::getenv("NCCL_SOCKET_IFNAME") == nullptr) {
      setenv("NCCL_SOCKET_IFNAME", "lo", 1);
    }
    set_host_id_ = true;
  }

  if (Status s =
          CudaStatus(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
      !s.ok()) {
    return s;
  }
  if (ranks_per_gpu_ > 1) {
    // Several processes on one GPU and its host's cores: waiting ranks
    // yield their core (to NCCL's proxy threads) instead of spinning. Only
    // a help, so a refusal is reported among the device facts, not fatal.
    scheduling_ = CudaStatus(cudaSetDeviceFlags(cudaDeviceScheduleYield), "cudaSetDeviceFlags");
  }
  // Everything that can fail locally comes before the world communicator,
  // so that a failure never leaves a communicator half made.
  if (Status s = CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                            "cudaStreamCreateWithFlags");
      !s.ok()) {
    return s;
  }
  if (Status s = CudaStatus(cudaEventCreate(&start_), "cudaEventCreate"); !s.ok()) return s;
  if (Status s = CudaStatus(cudaEventCreate(&stop_), "cudaEventCreate"); !s.ok()) return s;
  if (Status s = CudaStatus(cudaMalloc(&barrier_word_, sizeof(int32_t)), "cudaMalloc"); !s.ok()) {
    return s;
  }
  if (Status s = CudaStatus(cudaMemset(barrier_word_, 0, sizeof(int32_t)), "cudaMemset");
      !s.ok()) {
    return s;
  }

  // The world communicator: rank 0 makes the id, MPI hands it out.
  struct {
    int ok;
    ncclUniqueId id;
  } root_id{1, {}};
  Status id_status;
  if (world_rank_ == 0) {
    id_status = NcclStatus(ncclGetUniqueId(&root_id.id), "ncclGetUniqueId");
    root_id.ok = id_status.ok() ? 1 : 0;
  }
  if (Status s = MpiStatus(MPI_Bcast(&root_id, sizeof root_id, MPI_BYTE, 0, MPI_COMM_WORLD),
                           "MPI_Bcast (NCCL id)");
      !s.ok()) {
    return s;
  }
  if (!id_status.ok()) return id_status;
  if (root_id.ok == 0) {
    return Status::Error("rank 0 could not make an NCCL id (its message says why)");
  }
  if (Status s = NcclStatus(ncclCommInitRank(&world_comm_, world_size_, root_id.id, world_rank_),
                            "ncclCommInitRank (world, " + std::to_string(world_size_) +
                                " ranks, GPU " + std::to_string(device_) + ")");
      !s.ok()) {
    world_comm_ = nullptr;
    return s;
  }
  registry_->Add(world_comm_);
  std::vector<int> all(world_size_);
  for (int r = 0; r < world_size_; ++r) all[r] = r;
  world_ = std::make_unique<NcclGroupComm>(world_comm_, 0, std::move(all), world_rank_, nullptr);
  return Status();
}

// One communicator per group, split off the world communicator: color =
// the group's index, key = the position in it, as the MPI backend's
// MPI_Comm_split. ncclCommSplit rather than an ncclUniqueId per group
// broadcast over MPI: it reuses the world communicator's bootstrap (no new
// listening socket and id exchange per group, the part of NCCL setup most
// likely to fail on a restricted network), every rank takes part in the
// same one call for every kind (so a failure shows on all ranks at the same
// point), and a rank in no group simply passes NCCL_SPLIT_NOCOLOR.
Result<std::unique_ptr<GroupComm>> NcclBackendImpl::Split(const GroupList& groups) {
  if (Status s = TakeDeferred(); !s.ok()) return s;
  const GroupSlot slot = FindGroupSlot(groups, world_rank_);
  const int color = slot.group < 0 ? NCCL_SPLIT_NOCOLOR : slot.group, key = slot.position;
  ncclComm_t comm = nullptr;
  if (Status s = NcclStatus(ncclCommSplit(world_comm_, color, key, &comm, nullptr),
                            "ncclCommSplit");
      !s.ok()) {
    return s;
  }
  if (color == NCCL_SPLIT_NOCOLOR) return std::unique_ptr<GroupComm>();
  if (comm == nullptr) {
    return Status::Error("ncclCommSplit gave no communicator for group " + std::to_string(color));
  }
  registry_->Add(comm);
  auto group = std::make_unique<NcclGroupComm>(comm, color, groups[color], key, registry_);
  int count = 0, rank = -1;
  if (Status s = NcclStatus(ncclCommCount(comm, &count), "ncclCommCount"); !s.ok()) return s;
  if (Status s = NcclStatus(ncclCommUserRank(comm, &rank), "ncclCommUserRank"); !s.ok()) return s;
  if (count != group->size() || rank != key) {
    return Status::Error("ncclCommSplit made a communicator of " + std::to_string(count) +
                         " ranks with this one at " + std::to_string(rank) + "; group " +
                         std::to_string(color) + " has " + std::to_string(group->size()) +
                         " with it at " + std::to_string(key));
  }
  return std::unique_ptr<GroupComm>(std::move(group));
}

Result<void*> NcclBackendImpl::cublas_handle() {
  if (cublas_ != nullptr) return static_cast<void*>(cublas_);
  cublasHandle_t handle = nullptr;
  if (Status s = CublasStatus(cublasCreate(&handle), "cublasCreate"); !s.ok()) return s;
  Status s = CublasStatus(cublasSetStream(handle, stream_), "cublasSetStream");
  // Split-K partial sums stay f32, so GEMMs of small integers are exact
  // (the compute op's and ExpertGemm's checks rely on it).
  if (s.ok()) {
    const auto mode = static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
    s = CublasStatus(cublasSetMathMode(handle, mode), "cublasSetMathMode");
  }
  if (!s.ok()) {
    (void)cublasDestroy(handle);
    return s;
  }
  cublas_ = handle;
  return static_cast<void*>(cublas_);
}

// Row-major and cuBLAS's column-major: a row-major [r x c] matrix with
// leading dimension c is, read column-major, its transpose [c x r] with the
// same leading dimension. So row-major C [R x N] = A [R x K] B [K x N] is
// column-major C^T [N x R] = B^T [N x K] A^T [K x R]: cuBLAS gets m = N,
// n = R, k = K, its first operand B (ld N), its second A (ld K), C (ld N),
// no transposes: lda = m, ldb = k, ldc = m. Per expert g with R_g rows
// x_g and their h_g in scratch:
//   h = x W1:  m = ffn, n = R_g, k = hidden; A' = W1, B' = x_g, C' = h_g
//   y = h W2:  m = hidden, n = R_g, k = ffn; A' = W2, B' = h_g, C' = x_g
// Each weight is one cublasGemmGroupedBatchedEx: a group per expert with
// rows (group size 1, since m, n, k differ only in R_g), bf16 in and out,
// CUBLAS_COMPUTE_32F. Its matrix pointer arrays must be device memory:
// [A1][B1][C1][A2][B2][C2], one entry per group each, uploaded per call.
// Where this cuBLAS refuses the grouped call for these types or shapes
// (CUBLAS_STATUS_NOT_SUPPORTED or _INVALID_VALUE, both found before
// anything is launched) a loop of cublasGemmEx does the same, says so on
// stderr once, and the dispatch check verifies its output all the same.
Status NcclBackendImpl::ExpertGemm(uint16_t* rows_bf16,
                                   const std::vector<int64_t>& rows_per_expert, int64_t hidden,
                                   int64_t ffn, const std::vector<const uint16_t*>& w1,
                                   const std::vector<const uint16_t*>& w2, uint16_t* scratch) {
  const size_t experts = rows_per_expert.size();
  if (w1.size() != experts || w2.size() != experts) {
    return Status::Error("ExpertGemm: " + std::to_string(experts) + " experts but " +
                         std::to_string(w1.size()) + " and " + std::to_string(w2.size()) +
                         " weight matrices");
  }
  if (hidden <= 0 || ffn <= 0 || hidden > INT_MAX || ffn > INT_MAX) {
    return Status::Error("ExpertGemm: hidden " + std::to_string(hidden) + " or ffn " +
                         std::to_string(ffn) + " outside cuBLAS's int range");
  }
  // The groups: experts with rows, and where their rows start.
  std::vector<int> m1, n1, k1, m2, n2, k2, group_size;
  std::vector<const void*> pointers[6];  // A1 B1 C1 A2 B2 C2
  int64_t first = 0;
  const uint16_t* some_w1 = nullptr;
  for (size_t g = 0; g < experts; ++g) {
    const int64_t rows = rows_per_expert[g];
    if (rows < 0 || rows > INT_MAX) {
      return Status::Error("ExpertGemm: expert " + std::to_string(g) + " has " +
                           std::to_string(rows) + " rows, outside cuBLAS's int range");
    }
    if (rows > 0) {
      uint16_t* x = rows_bf16 + first * hidden;
      uint16_t* h = scratch + first * ffn;
      m1.push_back(static_cast<int>(ffn));
      n1.push_back(static_cast<int>(rows));
      k1.push_back(static_cast<int>(hidden));
      m2.push_back(static_cast<int>(hidden));
      n2.push_back(static_cast<int>(rows));
      k2.push_back(static_cast<int>(ffn));
      group_size.push_back(1);
      for (auto [list, pointer] : {std::pair{0, static_cast<const void*>(w1[g])},
                                   std::pair{1, static_cast<const void*>(x)},
                                   std::pair{2, static_cast<const void*>(h)},
                                   std::pair{3, static_cast<const void*>(w2[g])},
                                   std::pair{4, static_cast<const void*>(h)},
                                   std::pair{5, static_cast<const void*>(x)}}) {
        pointers[list].push_back(pointer);
      }
      if (some_w1 == nullptr) some_w1 = w1[g];
    }
    first += rows;
  }
  const int groups = static_cast<int>(group_size.size());
  if (groups == 0) return Status();
  // One weight of each kind stands for all (each check is a driver call).
  if (Status s = DeviceBuffers("ExpertGemm", {{rows_bf16, "rows_bf16"},
                                              {scratch, "scratch"},
                                              {some_w1, "w1"},
                                              {pointers[3][0], "w2"}});
      !s.ok()) {
    return s;
  }
  Result<void*> made = cublas_handle();
  if (!made.ok()) return made.status();
  const auto handle = static_cast<cublasHandle_t>(made.value());

  const std::vector<cublasOperation_t> no_transpose(groups, CUBLAS_OP_N);
  const std::vector<float> alpha(groups, 1.0f), beta(groups, 0.0f);
  // lda = m, ldb = k, ldc = m (the mapping above); alpha 1, beta 0.
  auto grouped = [&](int first_list, const std::vector<int>& m, const std::vector<int>& n,
                     const std::vector<int>& k) {
    void** at = gemm_pointers_ + static_cast<size_t>(first_list) * groups;
    return cublasGemmGroupedBatchedEx(handle, no_transpose.data(), no_transpose.data(), m.data(),
                                      n.data(), k.data(), alpha.data(), at, CUDA_R_16BF,
                                      m.data(), at + groups, CUDA_R_16BF, k.data(), beta.data(),
                                      at + 2 * groups, CUDA_R_16BF, m.data(), groups,
                                      group_size.data(), CUBLAS_COMPUTE_32F);
  };

  // The pointer arrays, uploaded in one copy (Upload waits for it).
  const size_t needed = 6 * static_cast<size_t>(groups);
  if (needed > gemm_pointer_capacity_) {
    if (gemm_pointers_ != nullptr) (void)cudaFree(gemm_pointers_);
    gemm_pointers_ = nullptr;
    gemm_pointer_capacity_ = 0;
    if (Status s = CudaStatus(cudaMalloc(reinterpret_cast<void**>(&gemm_pointers_),
                                         needed * sizeof(void*)),
                              "cudaMalloc (ExpertGemm pointers)");
        !s.ok()) {
      return s;
    }
    gemm_pointer_capacity_ = needed;
  }
  std::vector<const void*> all;
  all.reserve(needed);
  for (const auto& list : pointers) all.insert(all.end(), list.begin(), list.end());
  if (Status s = Upload(gemm_pointers_, all.data(), needed * sizeof(void*)); !s.ok()) return s;

  if (grouped_gemm_supported_) {
    cublasStatus_t status = grouped(0, m1, n1, k1);
    if (status == CUBLAS_STATUS_SUCCESS) status = grouped(3, m2, n2, k2);
    if (status == CUBLAS_STATUS_SUCCESS) return Status();
    if (status != CUBLAS_STATUS_NOT_SUPPORTED && status != CUBLAS_STATUS_INVALID_VALUE) {
      return CublasStatus(status, "cublasGemmGroupedBatchedEx (ExpertGemm)");
    }
    // A refused call launched nothing, and x_g is only overwritten by the
    // second GEMM, so the loop below may redo both.
    grouped_gemm_supported_ = false;
    std::fprintf(stderr,
                 "foldbench: rank %d: cublasGemmGroupedBatchedEx refused the expert GEMMs "
                 "(%s); ExpertGemm runs one cublasGemmEx per expert from now on\n",
                 world_rank_, cublasGetStatusName(status));
  }
  // One cublasGemmEx per expert and weight.
  const float one = 1.0f, zero = 0.0f;
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<int>& m = pass == 0 ? m1 : m2;
    const std::vector<int>& n = pass == 0 ? n1 : n2;
    const std::vector<int>& k = pass == 0 ? k1 : k2;
    for (int g = 0; g < groups; ++g) {
      if (Status s = CublasStatus(
              cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m[g], n[g], k[g], &one,
                           pointers[3 * pass][g], CUDA_R_16BF, m[g], pointers[3 * pass + 1][g],
                           CUDA_R_16BF, k[g], &zero,
                           const_cast<void*>(pointers[3 * pass + 2][g]), CUDA_R_16BF, m[g],
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              pass == 0 ? "cublasGemmEx (ExpertGemm, h = x W1)"
                        : "cublasGemmEx (ExpertGemm, y = h W2)");
          !s.ok()) {
        return s;
      }
    }
  }
  return Status();
}

std::vector<std::string> NcclBackendImpl::device_facts() {
  std::vector<std::string> facts;
  cudaDeviceProp prop{};
  if (Status s = CudaStatus(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
      !s.ok()) {
    facts.push_back("GPU " + std::to_string(device_) + ": " + s.message());
  } else {
    char memory[32];
    std::snprintf(memory, sizeof memory, "%.1f GiB",
                  static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
    facts.push_back("GPU " + std::to_string(device_) + " of " + std::to_string(device_count_) +
                    " (node-local rank " + std::to_string(local_rank_) + "): " + prop.name +
                    ", compute capability " + VersionText(prop.major, prop.minor) + ", " + memory +
                    ", " + std::to_string(prop.multiProcessorCount) + " SMs");
  }
  int driver = 0, runtime = 0, nccl = 0;
  const bool have_driver = cudaDriverGetVersion(&driver) == cudaSuccess;
  const bool have_runtime = cudaRuntimeGetVersion(&runtime) == cudaSuccess;
  const bool have_nccl = ncclGetVersion(&nccl) == ncclSuccess;
  (void)cudaGetLastError();
  auto cuda_version = [](bool ok, int v) {
    return ok ? VersionText(v / 1000, (v % 1000) / 10) : std::string("unknown");
  };
  // NCCL >= 2.9 codes versions as major * 10000 + minor * 100 + patch.
  const std::string nccl_text = !have_nccl ? "unknown"
                                           : std::to_string(nccl / 10000) + "." +
                                                 std::to_string(nccl / 100 % 100) + "." +
                                                 std::to_string(nccl % 100);
  facts.push_back("CUDA driver " + cuda_version(have_driver, driver) + ", runtime " +
                  cuda_version(have_runtime, runtime) + ", NCCL " + nccl_text);
  std::string sharing = "ranks per GPU: " + std::to_string(ranks_per_gpu_);
  if (max_ranks_per_gpu_ > 1) {
    const char* ifname = std::getenv("NCCL_SOCKET_IFNAME");
    sharing += std::string(set_host_id_ ? " (NCCL_HOSTID set per rank by foldbench"
                                        : " (NCCL_HOSTID given by the environment") +
               ", NCCL's socket transport on " + (ifname != nullptr ? ifname : "NCCL's choice") +
               "; bandwidths are the sockets', not NVLink's)";
  }
  facts.push_back(sharing);
  if (!scheduling_.ok()) facts.push_back("waiting ranks spin: " + scheduling_.message());
  return facts;
}

}  // namespace

bool NcclBackendBuilt() { return true; }

Result<std::unique_ptr<Backend>> MakeNcclBackend() {
  auto backend = std::make_unique<NcclBackendImpl>();
  if (Status s = backend->Init(); !s.ok()) return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace foldplan::validate
