// The collective sweep: all-to-all, all-to-all-v, all-gather,
// reduce-scatter, all-reduce and send/recv over each group kind of the plan
// whose groups have more than one rank, at log-spaced sizes, for fitting
// the alpha-beta cost model (../shared/reference/cost-model.md section 3).
//
// Sizes follow nccl-tests: S is the per-rank send buffer for all-to-all(-v)
// and send/recv, the gathered output for all-gather, the input for
// reduce-scatter and the buffer for all-reduce; busbw = algbw x (n-1)/n,
// except all-reduce 2(n-1)/n and send/recv 1. Each size is rounded down to
// a whole number of elements per peer.
//
// Data: moved collectives carry 16-bit words PatternWord(hash of source
// rank, destination, index) (pattern.h); reductions carry f32 small
// integers (0..15) whose sums are exact, so every check is exact.
// All-to-all-v sends peer p (1 + (r + p) mod 3) / 2 times the even share,
// so the split sizes differ between peers and ranks. Send/recv is a ring:
// each rank sends to the next in the group and receives from the previous.
#include <algorithm>

#include "validate/op.h"
#include "validate/pattern.h"

namespace foldplan::validate {
namespace {

enum class Collective { kAllToAll, kAllToAllV, kAllGather, kReduceScatter, kAllReduce, kSendRecv };

struct CollectiveInfo {
  Collective collective;
  const char* name;
  DType type;
};

constexpr CollectiveInfo kCollectives[] = {
    {Collective::kAllToAll, "all_to_all", DType::kU16},
    {Collective::kAllToAllV, "all_to_all_v", DType::kU16},
    {Collective::kAllGather, "all_gather", DType::kU16},
    {Collective::kReduceScatter, "reduce_scatter", DType::kF32},
    {Collective::kAllReduce, "all_reduce", DType::kF32},
    {Collective::kSendRecv, "send_recv", DType::kU16},
};

uint16_t Word(int64_t source, int64_t destination, int64_t index) {
  return PatternWord((static_cast<uint64_t>(source) << 48) ^
                     (static_cast<uint64_t>(destination) << 32) ^ static_cast<uint64_t>(index));
}
// "512 B", "4 KiB", "16 MiB" (exact multiples) or the byte count.
std::string SizeName(int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

float SmallInt(int64_t source, int64_t index) {
  return static_cast<float>(Mix64((static_cast<uint64_t>(source) << 40) ^ index) & 15);
}

class SweepOp : public Op {
 public:
  SweepOp(CollectiveInfo info, std::string kind, std::shared_ptr<GroupComm> comm, int size,
          std::vector<int64_t> sizes_bytes, Backend* backend)
      : info_(info), kind_(std::move(kind)), comm_(std::move(comm)), n_(size),
        sizes_bytes_(std::move(sizes_bytes)), backend_(backend) {}
  ~SweepOp() override { Release(); }

  std::string name() const override { return info_.name; }
  std::string group_kind() const override { return kind_; }
  std::string skip_reason() const override { return ""; }
  std::vector<std::string> notes() const override { return {}; }
  int group_size() const override { return n_; }
  std::string group_label() const override { return GroupLabel(kind_, comm_.get()); }

  std::vector<OpCase> cases() const override {
    std::vector<OpCase> out;
    for (size_t index = 0; index < sizes_bytes_.size(); ++index) {
      OpCase c;
      c.type = info_.type;
      c.elements_per_rank = PerPeer(index) * n_;  // S in elements (all-to-all-v: nominal)
      c.send_bytes_per_rank = c.elements_per_rank * static_cast<int64_t>(SizeOf(info_.type));
      c.bus_factor = info_.collective == Collective::kAllReduce   ? 2.0 * (n_ - 1) / n_
                     : info_.collective == Collective::kSendRecv ? 1.0
                                                                 : double(n_ - 1) / n_;
      c.name = SizeName(c.send_bytes_per_rank);
      out.push_back(c);
    }
    return out;
  }

  // Input and output buffers; all-to-all-v at most 1.5x the even share.
  int64_t bytes_needed(int index) const override {
    const int64_t total = PerPeer(index) * n_ * static_cast<int64_t>(SizeOf(info_.type));
    return info_.collective == Collective::kAllToAllV ? 3 * total : 2 * total;
  }

  Status Prepare(int index) override {
    Release();
    per_peer_ = PerPeer(index);
    const int r = comm_->rank();
    const int64_t elem = static_cast<int64_t>(SizeOf(info_.type));
    send_counts_.assign(n_, 0);
    recv_counts_.assign(n_, 0);
    send_offsets_.assign(n_, 0);
    recv_offsets_.assign(n_, 0);
    int64_t send_elems = per_peer_ * n_, recv_elems = per_peer_ * n_;
    switch (info_.collective) {
      case Collective::kAllToAllV:
        for (int p = 0; p < n_; ++p) {
          send_counts_[p] = static_cast<size_t>(UnevenCount(r, p));
          recv_counts_[p] = static_cast<size_t>(UnevenCount(p, r));
          if (p > 0) {
            send_offsets_[p] = send_offsets_[p - 1] + send_counts_[p - 1];
            recv_offsets_[p] = recv_offsets_[p - 1] + recv_counts_[p - 1];
          }
        }
        send_elems = static_cast<int64_t>(send_offsets_.back() + send_counts_.back());
        recv_elems = static_cast<int64_t>(recv_offsets_.back() + recv_counts_.back());
        break;
      case Collective::kAllGather: send_elems = per_peer_; break;
      case Collective::kReduceScatter: recv_elems = per_peer_; break;
      default: break;
    }
    send_ = backend_->Alloc(static_cast<size_t>(send_elems * elem));
    recv_ = backend_->Alloc(static_cast<size_t>(recv_elems * elem));
    if (send_ == nullptr || recv_ == nullptr) {
      return Status::Error(std::string(info_.name) + ": cannot allocate " +
                           std::to_string((send_elems + recv_elems) * elem) + " bytes");
    }
    recv_elems_ = recv_elems;
    send_elems_ = send_elems;
    // Input: words addressed by (source, destination peer, index in block).
    if (info_.type == DType::kF32) {
      std::vector<float> in(static_cast<size_t>(send_elems));
      for (int64_t i = 0; i < send_elems; ++i) in[i] = SmallInt(r, i);
      if (Status s = backend_->Upload(send_, in.data(), in.size() * 4); !s.ok()) return s;
    } else {
      std::vector<uint16_t> in(static_cast<size_t>(send_elems));
      for (int p = 0; p < n_; ++p) {
        const int64_t begin = Offset(p, /*send=*/true), count = Count(p, /*send=*/true);
        for (int64_t i = 0; i < count && begin + i < send_elems; ++i) {
          in[begin + i] = Word(r, Destination(p), i);
        }
      }
      if (Status s = backend_->Upload(send_, in.data(), in.size() * 2); !s.ok()) return s;
    }
    const std::vector<char> zeros(static_cast<size_t>(recv_elems * elem), 0);
    return backend_->Upload(recv_, zeros.data(), zeros.size());
  }

  Status Run() override {
    const int r = comm_->rank();
    const size_t m = static_cast<size_t>(per_peer_);
    switch (info_.collective) {
      case Collective::kAllToAll:
        return backend_->AllToAll(send_, recv_, m, info_.type, *comm_);
      case Collective::kAllToAllV:
        return backend_->AllToAllV(send_, send_counts_, send_offsets_, recv_, recv_counts_,
                                   recv_offsets_, info_.type, *comm_);
      case Collective::kAllGather:
        return backend_->AllGather(send_, recv_, m, info_.type, *comm_);
      case Collective::kReduceScatter:
        return backend_->ReduceScatter(send_, recv_, m, info_.type, *comm_);
      case Collective::kAllReduce: {
        // In place on a copy of the input, so every run sums the same data.
        const size_t bytes = static_cast<size_t>(send_elems_) * 4;
        if (Status s = backend_->CopyRuns(recv_, send_, WholeCopy(bytes)); !s.ok()) return s;
        return backend_->AllReduce(recv_, m * n_, info_.type, *comm_);
      }
      case Collective::kSendRecv:
        return backend_->SendRecv(send_, m * n_, (r + 1) % n_, recv_, m * n_, (r + n_ - 1) % n_,
                                  info_.type, *comm_);
    }
    return Status();
  }

  void Corrupt() override {
    const size_t bytes = static_cast<size_t>(recv_elems_) * SizeOf(info_.type);
    std::vector<unsigned char> out(bytes);
    if (!backend_->Download(out.data(), recv_, bytes).ok()) return;
    out[bytes / 2] ^= 0x40;  // in f32 and u16 alike, a changed value
    (void)backend_->Upload(recv_, out.data(), bytes);
  }

  Result<int64_t> Check() override {
    const int r = comm_->rank();
    int64_t wrong = 0;
    if (info_.type == DType::kF32) {
      std::vector<float> out(static_cast<size_t>(recv_elems_));
      if (Status s = backend_->Download(out.data(), recv_, out.size() * 4); !s.ok()) return s;
      // Reduce-scatter: rank r gets block r of the sum; all-reduce: all of it.
      const int64_t first = info_.collective == Collective::kReduceScatter ? r * per_peer_ : 0;
      for (int64_t i = 0; i < recv_elems_; ++i) {
        float expected = 0;
        for (int source = 0; source < n_; ++source) expected += SmallInt(source, first + i);
        wrong += out[i] != expected;
      }
      return wrong;
    }
    std::vector<uint16_t> out(static_cast<size_t>(recv_elems_));
    if (Status s = backend_->Download(out.data(), recv_, out.size() * 2); !s.ok()) return s;
    for (int p = 0; p < n_; ++p) {
      const int64_t begin = Offset(p, /*send=*/false), count = Count(p, /*send=*/false);
      for (int64_t i = 0; i < count; ++i) {
        wrong += out[begin + i] != Word(Source(p), ReceiverKey(r), i);
      }
    }
    return wrong;
  }

  void Release() override {
    for (void** p : {&send_, &recv_}) {
      if (*p != nullptr) backend_->Free(*p);
      *p = nullptr;
    }
  }

 private:
  int64_t PerPeer(size_t index) const {
    const int64_t elem = static_cast<int64_t>(SizeOf(info_.type));
    return std::max<int64_t>(1, sizes_bytes_[index] / (elem * n_));
  }
  int64_t UnevenCount(int source, int destination) const {
    return std::max<int64_t>(1, per_peer_ * (1 + (source + destination) % 3) / 2);
  }
  static RunCopy WholeCopy(size_t bytes) {
    RunCopy copy;
    copy.run_bytes = static_cast<int64_t>(bytes);
    return copy;
  }

  // Block p of the send (send = true) or receive buffer: where it starts
  // and how many elements it has, per collective.
  int64_t Offset(int p, bool send) const {
    switch (info_.collective) {
      case Collective::kAllToAllV:
        return static_cast<int64_t>(send ? send_offsets_[p] : recv_offsets_[p]);
      case Collective::kAllGather: return send ? 0 : p * per_peer_;
      case Collective::kSendRecv: return 0;
      default: return p * per_peer_;
    }
  }
  int64_t Count(int p, bool send) const {
    const int r = comm_->rank();
    switch (info_.collective) {
      case Collective::kAllToAllV:
        return static_cast<int64_t>(send ? send_counts_[p] : recv_counts_[p]);
      case Collective::kAllGather: return send ? (p == 0 ? per_peer_ : 0) : per_peer_;
      case Collective::kSendRecv: {
        // One message of n per-peer blocks: to the next rank, from the previous.
        const int peer = send ? (r + 1) % n_ : (r + n_ - 1) % n_;
        return p == peer ? per_peer_ * n_ : 0;
      }
      default: return per_peer_;
    }
  }
  // Whose words block p of the receive buffer holds, and the destination
  // key they were written for: all-gather blocks are addressed to everyone.
  int Source(int p) const { return p; }
  int Destination(int p) const { return info_.collective == Collective::kAllGather ? -1 : p; }
  int ReceiverKey(int r) const { return info_.collective == Collective::kAllGather ? -1 : r; }

  CollectiveInfo info_;
  std::string kind_;
  std::shared_ptr<GroupComm> comm_;
  int n_;
  std::vector<int64_t> sizes_bytes_;
  Backend* backend_;
  int64_t per_peer_ = 0, send_elems_ = 0, recv_elems_ = 0;
  std::vector<size_t> send_counts_, recv_counts_, send_offsets_, recv_offsets_;
  void* send_ = nullptr;
  void* recv_ = nullptr;
};

}  // namespace

Result<std::vector<int64_t>> SweepSizes(const OpOptions& options) {
  if (options.sweep_min_bytes < 1 || options.sweep_step < 2 ||
      options.sweep_max_bytes < options.sweep_min_bytes) {
    return Status::Error("sweep: sizes need 1 <= min <= max and a step >= 2");
  }
  // min, min x step, ... up to max. The next size is made only when it
  // cannot pass max (bytes <= max / step), so no product overflows whatever
  // the bounds (foldbench's flags bound them too: doc/validate.md).
  std::vector<int64_t> sizes;
  for (int64_t bytes = options.sweep_min_bytes;; bytes *= options.sweep_step) {
    sizes.push_back(bytes);
    if (bytes > options.sweep_max_bytes / options.sweep_step) break;
  }
  return sizes;
}

Result<std::vector<std::unique_ptr<Op>>> MakeSweepOps(const BenchInput& input,
                                                      const OpOptions& options,
                                                      Backend* backend) {
  Result<std::vector<int64_t>> listed = SweepSizes(options);
  if (!listed.ok()) return listed.status();
  const std::vector<int64_t> sizes = std::move(listed).value();
  std::vector<std::unique_ptr<Op>> ops;
  // The group kinds the cost model times collectives on; foldbench refused
  // an input without one (CheckGroupsForOps), so a missing one is skipped
  // here only for other callers.
  for (const std::string& kind : GroupKindsNeeded("sweep")) {
    if (!input.groups.contains(kind)) continue;
    const int size = static_cast<int>(input.groups.at(kind).front().size());
    if (size < 2) continue;
    auto comm = backend->Split(input.groups.at(kind));  // collective: same kinds everywhere
    if (!comm.ok()) return comm.status();
    std::shared_ptr<GroupComm> shared = std::move(comm).value();
    for (const CollectiveInfo& info : kCollectives) {
      ops.push_back(std::make_unique<SweepOp>(info, kind, shared, size, sizes, backend));
    }
  }
  return ops;
}

}  // namespace foldplan::validate
