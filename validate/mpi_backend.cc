// MPI on host memory: "GPU" buffers are malloc'd host memory and every
// collective is the blocking MPI one, so a run checks the plan's groups and
// data movement anywhere MPI runs, and measures only an emulation.
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include "validate/backend.h"

namespace foldplan::validate {

size_t SizeOf(DType type) { return type == DType::kU16 ? 2 : 4; }

namespace {

MPI_Datatype ToMpi(DType type) { return type == DType::kU16 ? MPI_UINT16_T : MPI_FLOAT; }

Status Check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return Status::Error(std::string(what) + " failed: " + std::string(text, length));
}

// MPI counts are int; larger messages would need MPI-4 large-count calls.
bool FitsInt(size_t n) { return n <= static_cast<size_t>(INT_MAX); }

Status ToIntVectors(const std::vector<size_t>& counts, const std::vector<size_t>& offsets,
                    std::vector<int>* int_counts, std::vector<int>* int_offsets) {
  for (size_t i = 0; i < counts.size(); ++i) {
    if (!FitsInt(counts[i]) || !FitsInt(offsets[i])) {
      return Status::Error("message larger than MPI's int count");
    }
    int_counts->push_back(static_cast<int>(counts[i]));
    int_offsets->push_back(static_cast<int>(offsets[i]));
  }
  return Status();
}

class MpiGroupComm : public GroupComm {
 public:
  MpiGroupComm(MPI_Comm comm, int group_index, std::vector<int> members, bool owned)
      : comm_(comm), group_index_(group_index), members_(std::move(members)), owned_(owned) {
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_rank(comm_, &rank_);
  }
  ~MpiGroupComm() override {
    if (owned_) MPI_Comm_free(&comm_);
  }
  int size() const override { return size_; }
  int rank() const override { return rank_; }
  int group_index() const override { return group_index_; }
  const std::vector<int>& members() const override { return members_; }
  MPI_Comm comm() const { return comm_; }

 private:
  MPI_Comm comm_;
  int group_index_;
  std::vector<int> members_;
  bool owned_;
  int size_ = 0, rank_ = 0;
};

MPI_Comm CommOf(GroupComm& comm) { return static_cast<MpiGroupComm&>(comm).comm(); }

class MpiBackend : public Backend {
 public:
  MpiBackend() {
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
    std::vector<int> all(world_size_);
    for (int r = 0; r < world_size_; ++r) all[r] = r;
    world_ = std::make_unique<MpiGroupComm>(MPI_COMM_WORLD, 0, std::move(all), false);
  }
  std::string name() const override { return "mpi"; }
  int world_rank() const override { return world_rank_; }
  int world_size() const override { return world_size_; }
  std::string placement_class() const override { return "emulated: MPI on host memory"; }
  bool host_accessible() const override { return true; }

  std::unique_ptr<GroupComm> Split(const GroupList& groups) override {
    // color = the index of this rank's group, key = its position there, so
    // the communicator's ranks follow the plan's group order.
    int color = MPI_UNDEFINED, key = 0;
    for (size_t g = 0; g < groups.size() && color == MPI_UNDEFINED; ++g) {
      for (size_t i = 0; i < groups[g].size(); ++i) {
        if (groups[g][i] == world_rank_) {
          color = static_cast<int>(g);
          key = static_cast<int>(i);
          break;
        }
      }
    }
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm);
    if (comm == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiGroupComm>(comm, color, groups[color], true);
  }
  GroupComm& World() override { return *world_; }

  void* Alloc(size_t bytes) override { return std::malloc(bytes == 0 ? 1 : bytes); }
  void Free(void* buffer) override { std::free(buffer); }
  void Upload(void* buffer, const void* host, size_t bytes) override {
    std::memcpy(buffer, host, bytes);
  }
  void Download(void* host, const void* buffer, size_t bytes) override {
    std::memcpy(host, buffer, bytes);
  }

  Status AllToAll(const void* send, void* recv, size_t count_per_peer, DType type,
                  GroupComm& comm) override {
    if (!FitsInt(count_per_peer)) return Status::Error("all-to-all larger than MPI's int count");
    const int n = static_cast<int>(count_per_peer);
    return Check(MPI_Alltoall(send, n, ToMpi(type), recv, n, ToMpi(type), CommOf(comm)),
                 "MPI_Alltoall");
  }
  Status AllToAllV(const void* send, const std::vector<size_t>& send_counts,
                   const std::vector<size_t>& send_offsets, void* recv,
                   const std::vector<size_t>& recv_counts,
                   const std::vector<size_t>& recv_offsets, DType type,
                   GroupComm& comm) override {
    std::vector<int> sc, so, rc, ro;
    if (Status s = ToIntVectors(send_counts, send_offsets, &sc, &so); !s.ok()) return s;
    if (Status s = ToIntVectors(recv_counts, recv_offsets, &rc, &ro); !s.ok()) return s;
    return Check(MPI_Alltoallv(send, sc.data(), so.data(), ToMpi(type), recv, rc.data(),
                               ro.data(), ToMpi(type), CommOf(comm)),
                 "MPI_Alltoallv");
  }
  Status AllGather(const void* send, void* recv, size_t count_per_rank, DType type,
                   GroupComm& comm) override {
    if (!FitsInt(count_per_rank)) return Status::Error("all-gather larger than MPI's int count");
    const int n = static_cast<int>(count_per_rank);
    return Check(MPI_Allgather(send, n, ToMpi(type), recv, n, ToMpi(type), CommOf(comm)),
                 "MPI_Allgather");
  }
  Status AllGatherV(const void* send, size_t send_count, void* recv,
                    const std::vector<size_t>& recv_counts,
                    const std::vector<size_t>& recv_offsets, DType type,
                    GroupComm& comm) override {
    std::vector<int> rc, ro;
    if (!FitsInt(send_count)) return Status::Error("all-gather-v larger than MPI's int count");
    if (Status s = ToIntVectors(recv_counts, recv_offsets, &rc, &ro); !s.ok()) return s;
    return Check(MPI_Allgatherv(send, static_cast<int>(send_count), ToMpi(type), recv,
                                rc.data(), ro.data(), ToMpi(type), CommOf(comm)),
                 "MPI_Allgatherv");
  }
  Status ReduceScatter(const void* send, void* recv, size_t count_per_rank, DType type,
                       GroupComm& comm) override {
    // MPI has no sum over 16-bit words that means bf16; reductions take kF32.
    if (type != DType::kF32) return Status::Error("reduce-scatter needs f32 data");
    if (!FitsInt(count_per_rank)) {
      return Status::Error("reduce-scatter larger than MPI's int count");
    }
    return Check(MPI_Reduce_scatter_block(send, recv, static_cast<int>(count_per_rank),
                                          MPI_FLOAT, MPI_SUM, CommOf(comm)),
                 "MPI_Reduce_scatter_block");
  }
  Status AllReduce(void* buffer, size_t count, DType type, GroupComm& comm) override {
    if (type != DType::kF32) return Status::Error("all-reduce needs f32 data");
    if (!FitsInt(count)) return Status::Error("all-reduce larger than MPI's int count");
    return Check(MPI_Allreduce(MPI_IN_PLACE, buffer, static_cast<int>(count), MPI_FLOAT,
                               MPI_SUM, CommOf(comm)),
                 "MPI_Allreduce");
  }
  Status Send(const void* buffer, size_t count, DType type, int peer,
              GroupComm& comm) override {
    if (!FitsInt(count)) return Status::Error("send larger than MPI's int count");
    return Check(MPI_Send(buffer, static_cast<int>(count), ToMpi(type), peer, 0, CommOf(comm)),
                 "MPI_Send");
  }
  Status Recv(void* buffer, size_t count, DType type, int peer, GroupComm& comm) override {
    if (!FitsInt(count)) return Status::Error("recv larger than MPI's int count");
    return Check(MPI_Recv(buffer, static_cast<int>(count), ToMpi(type), peer, 0, CommOf(comm),
                          MPI_STATUS_IGNORE),
                 "MPI_Recv");
  }
  void Barrier(GroupComm& comm) override { MPI_Barrier(CommOf(comm)); }
  double NowSeconds() override { return MPI_Wtime(); }

  std::vector<double> GatherToRoot(const std::vector<double>& values) override {
    const int n = static_cast<int>(values.size());
    std::vector<double> all(world_rank_ == 0 ? static_cast<size_t>(n) * world_size_ : 0);
    MPI_Gather(values.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return all;
  }
  int64_t SumOverWorld(int64_t value) override {
    int64_t sum = 0;
    MPI_Allreduce(&value, &sum, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    return sum;
  }
  std::vector<std::string> AllHostNames() override {
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    MPI_Get_processor_name(name, &length);
    std::vector<char> all(static_cast<size_t>(MPI_MAX_PROCESSOR_NAME) * world_size_);
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                  MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> names;
    for (int r = 0; r < world_size_; ++r) {
      names.emplace_back(all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME);
    }
    return names;
  }
  std::string LibraryVersion() override {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(text, &length);
    std::string version(text, length);
    while (!version.empty() && (version.back() == '\n' || version.back() == '\0')) {
      version.pop_back();
    }
    return version;
  }

 private:
  int world_rank_ = 0, world_size_ = 0;
  std::unique_ptr<MpiGroupComm> world_;
};

}  // namespace

std::unique_ptr<Backend> MakeMpiBackend() { return std::make_unique<MpiBackend>(); }

}  // namespace foldplan::validate
