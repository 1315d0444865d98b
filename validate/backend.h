// The communication backend foldbench runs ops on: MPI on host memory
// (mpi_backend.cc, always built, what CI runs) and NCCL on device memory
// (nccl_backend.cc, built when CUDA and NCCL are found). Ops never touch a
// buffer's memory directly: buffers come from Alloc() (device memory for
// NCCL), data moves in and out with Upload() / Download(), packing and the
// dispatcher's row work run as backend kernels (kernels.h: host loops for
// MPI, CUDA kernels and cuBLAS for NCCL), and times come from TimerStart() /
// TimerStopSeconds() (CUDA events for NCCL). Errors are values; a backend
// aborts only through Abort(), which the watchdog calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "validate/kernels.h"
#include "validate/plan_input.h"

namespace foldplan::validate {

enum class DType {
  kU16,   // 16-bit words moved and compared bit for bit, never reduced
  kBF16,  // bfloat16 numbers; reductions sum them (the dispatcher's payload)
  kF32,
  kI32,   // counts (the dispatcher's split sizes)
};
size_t SizeOf(DType type);
const char* DTypeName(DType type);  // "u16", "bf16", "f32", "i32"

// A communicator over one group of one kind: the group of `kind` that holds
// this rank. rank() is the position in the group's rank list. Backends
// derive from it to hold their library's communicator.
class GroupComm {
 public:
  virtual ~GroupComm() = default;
  int size() const { return static_cast<int>(members_.size()); }
  int rank() const { return rank_; }
  int group_index() const { return group_index_; }           // into the kind's group list
  const std::vector<int>& members() const { return members_; }  // world ranks, in group order

 protected:
  GroupComm(int group_index, std::vector<int> members, int rank)
      : group_index_(group_index), members_(std::move(members)), rank_(rank) {}

 private:
  int group_index_;
  std::vector<int> members_;
  int rank_;
};

// Where a rank sits in a kind's group list: the index of the group that
// holds it and its position there (the color and key of a communicator
// split, so that communicator ranks follow the plan's group order);
// group = -1 when no group holds it.
struct GroupSlot {
  int group = -1;
  int position = 0;
};
GroupSlot FindGroupSlot(const GroupList& groups, int world_rank);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "mpi" or "nccl"
  virtual int world_rank() const = 0;
  virtual int world_size() const = 0;
  // Placement class of the memory and links the ops run on, for the report:
  // "emulated: MPI on host memory", "socket-emulated", "nvlink", ...
  virtual std::string placement_class() const = 0;
  // One line per fact for the report: GPU names, driver, NCCL version.
  virtual std::vector<std::string> device_facts() = 0;

  // Collective over the world: every rank calls it with the same groups and
  // gets the communicator of the group holding it. A rank in no group gets
  // null. Errors (e.g. an NCCL init failure) are returned, not thrown.
  virtual Result<std::unique_ptr<GroupComm>> Split(const GroupList& groups) = 0;
  virtual GroupComm& World() = 0;

  // Bytes this rank may still allocate with Alloc(): device memory free
  // for NCCL; for MPI the host's available memory shared by the ranks on it.
  virtual int64_t FreeBytes() = 0;
  // Buffers the collectives and kernels read and write. Alloc returns null
  // when the memory is not there.
  virtual void* Alloc(size_t bytes) = 0;
  virtual void Free(void* buffer) = 0;
  virtual Status Upload(void* buffer, const void* host, size_t bytes) = 0;
  virtual Status Download(void* host, const void* buffer, size_t bytes) = 0;

  // Collectives; counts are elements of `type`; all reductions are sums
  // (kBF16 and kF32 only). Offsets are in elements too.
  virtual Status AllToAll(const void* send, void* recv, size_t count_per_peer, DType type,
                          GroupComm& comm) = 0;
  virtual Status AllToAllV(const void* send, const std::vector<size_t>& send_counts,
                           const std::vector<size_t>& send_offsets, void* recv,
                           const std::vector<size_t>& recv_counts,
                           const std::vector<size_t>& recv_offsets, DType type,
                           GroupComm& comm) = 0;
  virtual Status AllGather(const void* send, void* recv, size_t count_per_rank, DType type,
                           GroupComm& comm) = 0;
  virtual Status AllGatherV(const void* send, size_t send_count, void* recv,
                            const std::vector<size_t>& recv_counts,
                            const std::vector<size_t>& recv_offsets, DType type,
                            GroupComm& comm) = 0;
  virtual Status ReduceScatter(const void* send, void* recv, size_t count_per_rank, DType type,
                               GroupComm& comm) = 0;
  // Rank i receives the sum of block i, [offsets[i], offsets[i] + counts[i]).
  virtual Status ReduceScatterV(const void* send, const std::vector<size_t>& counts,
                                const std::vector<size_t>& offsets, void* recv, DType type,
                                GroupComm& comm) = 0;
  virtual Status AllReduce(void* buffer, size_t count, DType type, GroupComm& comm) = 0;
  // Sends `send` to `send_peer` and receives `recv` from `recv_peer` at once
  // (either peer may be -1: no send / no receive), as a pipeline stage does.
  virtual Status SendRecv(const void* send, size_t send_count, int send_peer, void* recv,
                          size_t recv_count, int recv_peer, DType type, GroupComm& comm) = 0;
  virtual Status Barrier(GroupComm& comm) = 0;

  // Kernels on Alloc()'d buffers (kernels.h states what each computes).
  virtual Status CopyRuns(void* dst, const void* src, const RunCopy& copy) = 0;
  virtual Status GatherRows(void* dst, const void* src, const int64_t* rows, int64_t count,
                            int64_t row_bytes) = 0;
  virtual Status ExpertPartial(uint16_t* rows_bf16, int64_t count, int64_t hidden,
                               const int32_t* row_expert, int etp_rank) = 0;
  // The GEMM expert function (dispatch --expert gemm) on rows grouped by
  // expert, in place: for g < rows_per_expert.size(), the R_g =
  // rows_per_expert[g] rows starting at row R_0 + ... + R_{g-1} of
  // rows_bf16 ([sum R_g x hidden], row-major bf16) become
  //   h = bf16(rows_g [R_g x hidden] x w1[g] [hidden x ffn])   (into scratch)
  //   rows_g = bf16(h [R_g x ffn] x w2[g] [ffn x hidden])
  // with f32 accumulation and one rounding to bf16 per output
  // (HostExpertGemm, kernels.h, states the values). w1[g], w2[g] are
  // row-major bf16 matrices and scratch ([sum R_g x ffn] bf16) a work
  // buffer, all from Alloc(). MPI: a host loop; NCCL: cuBLAS, one grouped
  // GEMM per weight (cublasGemmGroupedBatchedEx) on the backend's stream.
  virtual Status ExpertGemm(uint16_t* rows_bf16, const std::vector<int64_t>& rows_per_expert,
                            int64_t hidden, int64_t ffn, const std::vector<const uint16_t*>& w1,
                            const std::vector<const uint16_t*>& w2, uint16_t* scratch) = 0;
  virtual Status CombineRows(float* out, const uint16_t* rows_bf16, const int64_t* rows,
                             const float* weights, int64_t tokens, int64_t top_k,
                             int64_t hidden) = 0;

  // Times what is issued between the two calls; TimerStopSeconds waits for
  // it to complete (wall clock for MPI, CUDA events on the stream for NCCL).
  virtual void TimerStart() = 0;
  virtual double TimerStopSeconds() = 0;

  // Host-side helpers over the world for the runner's bookkeeping: plain
  // MPI on host memory whatever the backend (mpi_host.h), so not virtual.
  // Collectives over MPI_COMM_WORLD except LibraryVersion.
  std::vector<double> GatherToRoot(const std::vector<double>& values);  // rank 0 gets all
  int64_t SumOverWorld(int64_t value);
  std::vector<std::string> AllHostNames();  // indexed by world rank
  std::string LibraryVersion();             // MPI's

  // Last resort of the watchdog: abort device communicators so that no
  // rank stays blocked in them, then the MPI job. Does not return.
  [[noreturn]] virtual void Abort(int exit_code) = 0;
};

// The MPI backend; MPI must be initialized and stay so while it lives.
std::unique_ptr<Backend> MakeMpiBackend();

// The NCCL backend, when this build has one (FOLDPLAN_HAVE_NCCL): one GPU
// per rank, chosen from the node-local rank; fails with a clear message when
// there is no usable GPU.
bool NcclBackendBuilt();
Result<std::unique_ptr<Backend>> MakeNcclBackend();

}  // namespace foldplan::validate
