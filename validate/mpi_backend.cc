// MPI on host memory: "GPU" buffers are malloc'd host memory and every
// collective is the blocking MPI one, so a run checks the plan's groups and
// data movement anywhere MPI runs, and measures only an emulation.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "validate/backend.h"
#include "validate/mpi_host.h"

namespace foldplan::validate {

namespace {

MPI_Datatype ToMpi(DType type) {
  switch (type) {
    case DType::kU16:
    case DType::kBF16: return MPI_UINT16_T;
    case DType::kF32: return MPI_FLOAT;
    case DType::kI32: return MPI_INT32_T;
  }
  return MPI_DATATYPE_NULL;
}

// MPI has no bfloat16: kBF16 travels as 16-bit words and is summed by this
// user op, in float and rounded back to bf16 as NCCL's bf16 sum does.
void SumBf16(void* in, void* inout, int* length, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *length; ++i) b[i] = FloatToBf16(Bf16ToFloat(a[i]) + Bf16ToFloat(b[i]));
}

// MemAvailable of /proc/meminfo in bytes; 0 when unreadable.
int64_t HostAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

Status Check(int rc, const char* what) { return MpiStatus(rc, what); }

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
  // `owned`: freed with the object (not MPI_COMM_WORLD).
  MpiGroupComm(MPI_Comm comm, int group_index, std::vector<int> members, bool owned)
      : GroupComm(group_index, std::move(members), RankIn(comm)), comm_(comm), owned_(owned) {}
  ~MpiGroupComm() override {
    if (owned_) MPI_Comm_free(&comm_);
  }
  MPI_Comm comm() const { return comm_; }

 private:
  static int RankIn(MPI_Comm comm) {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    return rank;
  }
  MPI_Comm comm_;
  bool owned_;
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
  std::vector<std::string> device_facts() override { return {"host memory (no GPU used)"}; }

  Result<std::unique_ptr<GroupComm>> Split(const GroupList& groups) override {
    const GroupSlot slot = FindGroupSlot(groups, world_rank_);
    const int color = slot.group < 0 ? MPI_UNDEFINED : slot.group, key = slot.position;
    MPI_Comm comm = MPI_COMM_NULL;
    if (Status s = Check(MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm), "MPI_Comm_split");
        !s.ok()) {
      return s;
    }
    if (comm == MPI_COMM_NULL) return std::unique_ptr<GroupComm>();
    return std::unique_ptr<GroupComm>(
        std::make_unique<MpiGroupComm>(comm, color, groups[color], true));
  }
  GroupComm& World() override { return *world_; }

  int64_t FreeBytes() override {
    // The ranks on one host share its memory; count them once.
    const std::vector<std::string> hosts = AllHostNames();
    int64_t on_this_host = 0;
    for (const auto& h : hosts) on_this_host += h == hosts[world_rank_];
    return HostAvailableBytes() / std::max<int64_t>(1, on_this_host);
  }
  void* Alloc(size_t bytes) override { return std::malloc(bytes == 0 ? 1 : bytes); }
  void Free(void* buffer) override { std::free(buffer); }
  // An empty copy (a rank that receives no rows under skewed routing) may
  // come with an empty vector's null data(), which memcpy must not see.
  Status Upload(void* buffer, const void* host, size_t bytes) override {
    if (bytes > 0) std::memcpy(buffer, host, bytes);
    return Status();
  }
  Status Download(void* host, const void* buffer, size_t bytes) override {
    if (bytes > 0) std::memcpy(host, buffer, bytes);
    return Status();
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
    MPI_Op sum = MPI_SUM;
    if (Status s = SumOp(type, &sum); !s.ok()) return s;
    if (!FitsInt(count_per_rank)) {
      return Status::Error("reduce-scatter larger than MPI's int count");
    }
    return Check(MPI_Reduce_scatter_block(send, recv, static_cast<int>(count_per_rank),
                                          ToMpi(type), sum, CommOf(comm)),
                 "MPI_Reduce_scatter_block");
  }
  Status ReduceScatterV(const void* send, const std::vector<size_t>& counts,
                        const std::vector<size_t>& offsets, void* recv, DType type,
                        GroupComm& comm) override {
    MPI_Op sum = MPI_SUM;
    if (Status s = SumOp(type, &sum); !s.ok()) return s;
    // MPI_Reduce_scatter takes blocks back to back in rank order.
    std::vector<int> int_counts, int_offsets;
    if (Status s = ToIntVectors(counts, offsets, &int_counts, &int_offsets); !s.ok()) return s;
    for (size_t i = 0, next = 0; i < counts.size(); next += counts[i], ++i) {
      if (offsets[i] != next) return Status::Error("reduce-scatter-v blocks must be contiguous");
    }
    return Check(MPI_Reduce_scatter(send, recv, int_counts.data(), ToMpi(type), sum,
                                    CommOf(comm)),
                 "MPI_Reduce_scatter");
  }
  Status AllReduce(void* buffer, size_t count, DType type, GroupComm& comm) override {
    MPI_Op sum = MPI_SUM;
    if (Status s = SumOp(type, &sum); !s.ok()) return s;
    if (!FitsInt(count)) return Status::Error("all-reduce larger than MPI's int count");
    return Check(MPI_Allreduce(MPI_IN_PLACE, buffer, static_cast<int>(count), ToMpi(type), sum,
                               CommOf(comm)),
                 "MPI_Allreduce");
  }
  Status SendRecv(const void* send, size_t send_count, int send_peer, void* recv,
                  size_t recv_count, int recv_peer, DType type, GroupComm& comm) override {
    if (!FitsInt(send_count) || !FitsInt(recv_count)) {
      return Status::Error("send/recv larger than MPI's int count");
    }
    return Check(MPI_Sendrecv(send, static_cast<int>(send_count), ToMpi(type),
                              send_peer < 0 ? MPI_PROC_NULL : send_peer, 0, recv,
                              static_cast<int>(recv_count), ToMpi(type),
                              recv_peer < 0 ? MPI_PROC_NULL : recv_peer, 0, CommOf(comm),
                              MPI_STATUS_IGNORE),
                 "MPI_Sendrecv");
  }
  Status Barrier(GroupComm& comm) override {
    return Check(MPI_Barrier(CommOf(comm)), "MPI_Barrier");
  }

  Status CopyRuns(void* dst, const void* src, const RunCopy& copy) override {
    HostCopyRuns(dst, src, copy);
    return Status();
  }
  Status GatherRows(void* dst, const void* src, const int64_t* rows, int64_t count,
                    int64_t row_bytes) override {
    HostGatherRows(dst, src, rows, count, row_bytes);
    return Status();
  }
  Status ExpertPartial(uint16_t* rows_bf16, int64_t count, int64_t hidden,
                       const int32_t* row_expert, int etp_rank) override {
    HostExpertPartial(rows_bf16, count, hidden, row_expert, etp_rank);
    return Status();
  }
  // Slow (a plain host GEMM loop) but exact: keep shapes small.
  Status ExpertGemm(uint16_t* rows_bf16, const std::vector<int64_t>& rows_per_expert,
                    int64_t hidden, int64_t ffn, const std::vector<const uint16_t*>& w1,
                    const std::vector<const uint16_t*>& w2, uint16_t* scratch) override {
    if (w1.size() != rows_per_expert.size() || w2.size() != rows_per_expert.size()) {
      return Status::Error("ExpertGemm: " + std::to_string(rows_per_expert.size()) +
                           " experts but " + std::to_string(w1.size()) + " and " +
                           std::to_string(w2.size()) + " weight matrices");
    }
    HostExpertGemm(rows_bf16, rows_per_expert.data(),
                   static_cast<int64_t>(rows_per_expert.size()), hidden, ffn, w1.data(),
                   w2.data(), scratch);
    return Status();
  }
  Status CombineRows(float* out, const uint16_t* rows_bf16, const int64_t* rows,
                     const float* weights, int64_t tokens, int64_t top_k,
                     int64_t hidden) override {
    HostCombineRows(out, rows_bf16, rows, weights, tokens, top_k, hidden);
    return Status();
  }

  void TimerStart() override { timer_start_s_ = MPI_Wtime(); }
  double TimerStopSeconds() override { return MPI_Wtime() - timer_start_s_; }

  [[noreturn]] void Abort(int exit_code) override {
    MpiAbortJob(exit_code);
  }

 private:
  // The sum a reduction of `type` uses: MPI_SUM, or the bf16 user op.
  Status SumOp(DType type, MPI_Op* op) {
    if (type == DType::kF32 || type == DType::kI32) {
      *op = MPI_SUM;
      return Status();
    }
    if (type == DType::kBF16) {
      if (bf16_sum_ == MPI_OP_NULL) MPI_Op_create(&SumBf16, /*commute=*/1, &bf16_sum_);
      *op = bf16_sum_;
      return Status();
    }
    return Status::Error(std::string("a reduction cannot sum ") + DTypeName(type) + " words");
  }

  int world_rank_ = 0, world_size_ = 0;
  std::unique_ptr<MpiGroupComm> world_;
  MPI_Op bf16_sum_ = MPI_OP_NULL;  // freed by MPI_Finalize
  double timer_start_s_ = 0;
};

}  // namespace

std::unique_ptr<Backend> MakeMpiBackend() { return std::make_unique<MpiBackend>(); }

}  // namespace foldplan::validate
