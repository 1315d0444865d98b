// The communication backend foldbench runs ops on. One implementation so
// far: MPI on host memory (mpi_backend.cc, what CI runs). The interface is
// shaped for an NCCL backend on device memory as well: buffers come from
// Alloc() (device memory there), data moves in and out with Upload() /
// Download(), and times come from Timer (CUDA events there), so ops never
// touch a buffer's memory directly except through a backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "validate/plan_input.h"

namespace foldplan::validate {

enum class DType { kU16, kF32 };  // kU16: bf16-sized words (the checked ops' data)
size_t SizeOf(DType type);

// A communicator over one group of one kind: the group of `kind` that holds
// this rank. rank() is the position in the group's rank list.
class GroupComm {
 public:
  virtual ~GroupComm() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  virtual int group_index() const = 0;   // index into the kind's group list
  virtual const std::vector<int>& members() const = 0;  // world ranks, in group order
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "mpi"
  virtual int world_rank() const = 0;
  virtual int world_size() const = 0;
  // Placement class of the memory and links the ops run on, for the report.
  virtual std::string placement_class() const = 0;
  // Whether Alloc()'d buffers may be read and written by host code (MPI:
  // yes). Ops that pack on the host need it; a device backend needs device
  // pack kernels instead.
  virtual bool host_accessible() const = 0;

  // Collective over the world: every rank calls it with the same groups and
  // gets the communicator of the group holding it. A rank in no group gets null.
  virtual std::unique_ptr<GroupComm> Split(const GroupList& groups) = 0;
  virtual GroupComm& World() = 0;

  // Buffers the collectives read and write (host memory for MPI).
  virtual void* Alloc(size_t bytes) = 0;
  virtual void Free(void* buffer) = 0;
  virtual void Upload(void* buffer, const void* host, size_t bytes) = 0;
  virtual void Download(void* host, const void* buffer, size_t bytes) = 0;

  // Collectives; counts are elements of `type`; all reductions are sums.
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
  virtual Status AllReduce(void* buffer, size_t count, DType type, GroupComm& comm) = 0;
  virtual Status Send(const void* buffer, size_t count, DType type, int peer,
                      GroupComm& comm) = 0;
  virtual Status Recv(void* buffer, size_t count, DType type, int peer, GroupComm& comm) = 0;
  virtual void Barrier(GroupComm& comm) = 0;

  // Wall-clock seconds after everything issued so far has completed (MPI
  // collectives are blocking; a device backend synchronizes its stream).
  virtual double NowSeconds() = 0;

  // Host-side helpers over the world for the runner's bookkeeping.
  virtual std::vector<double> GatherToRoot(const std::vector<double>& values) = 0;
  virtual int64_t SumOverWorld(int64_t value) = 0;
  virtual std::vector<std::string> AllHostNames() = 0;  // indexed by world rank
  virtual std::string LibraryVersion() = 0;
};

// The MPI backend; MPI must be initialized and stay so while it lives.
std::unique_ptr<Backend> MakeMpiBackend();

}  // namespace foldplan::validate
