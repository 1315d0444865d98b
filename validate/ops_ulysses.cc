// The Ulysses (DeepSpeed-Ulysses / Megatron a2a CP) layout change over every
// CP group: a rank holding a sequence chunk of all heads, [B, S/C, H, d],
// ends up holding all of the sequence for a head chunk, [B, S, H/C, d], and
// back. Rank r of a CP group holds tokens [r S/C, (r+1) S/C) before and heads
// [r H/C, (r+1) H/C) after. Cases follow the cost model's collectives:
// q, k, v go sequence -> heads (k and v with the GQA kv_heads), the
// attention output goes heads -> sequence.
//
// Data: element (b, s, h, x) of tensor t holds PatternWord of its global
// linear index (pattern.h). Words are 16 bits so that the bytes moved are
// the plan's bf16 bytes; they are moved and compared as integers, so the
// values round-trip exactly.
#include <algorithm>

#include "validate/op.h"
#include "validate/pattern.h"
#include "validate/ulysses_layout.h"

namespace foldplan::validate {
namespace {

using Direction = UlyssesDirection;

struct UlyssesCase {
  std::string name;
  int tensor_id;       // separates q, k, v and out in the hash
  int64_t heads;       // H of this tensor
  Direction direction;
};

class UlyssesOp : public Op {
 public:
  UlyssesOp(const BenchInput& input, const OpOptions& options, Backend* backend)
      : backend_(backend) {
    if (!input.has_shapes) {
      skip_ = "skipped: the input has no model shapes (give a foldplan.plan/v1 file)";
      return;
    }
    cp_ = static_cast<int>(input.degrees.at("cp"));
    if (cp_ == 1) {
      skip_ = "skipped: cp = 1";
      return;
    }
    const ModelShapes& shapes = input.shapes;
    if (shapes.heads % cp_ != 0) {
      skip_ = "skipped: heads " + std::to_string(shapes.heads) + " not divisible by cp " +
              std::to_string(cp_);
      return;
    }
    batch_ = shapes.mbs;
    head_dim_ = shapes.head_dim;
    seq_ = ScaledSeqLen(shapes.seq_len, cp_, options, &notes_);
    if (seq_ % cp_ != 0) {
      skip_ = "skipped: seq_len " + std::to_string(seq_) + " not divisible by cp " +
              std::to_string(cp_);
      return;
    }
    cases_.push_back({"q seq->heads", 0, shapes.heads, Direction::kSeqToHeads});
    if (shapes.kv_heads % cp_ == 0) {
      cases_.push_back({"k seq->heads", 1, shapes.kv_heads, Direction::kSeqToHeads});
      cases_.push_back({"v seq->heads", 2, shapes.kv_heads, Direction::kSeqToHeads});
    } else {
      // Megatron replicates kv heads up to cp here; not emulated yet.
      notes_.push_back("k, v not run: kv_heads " + std::to_string(shapes.kv_heads) +
                       " not divisible by cp " + std::to_string(cp_));
    }
    cases_.push_back({"out heads->seq", 3, shapes.heads, Direction::kHeadsToSeq});
  }
  ~UlyssesOp() override { Release(); }

  // Collective: every rank makes its CP communicator.
  Status Init(const BenchInput& input) {
    if (!skip_.empty()) return Status();
    // The reader checks the cp groups against degrees.cp; buffers are sized
    // from the degree, so refuse rather than trust a caller that skipped it.
    if (!input.groups.contains("cp")) return Status::Error("ulysses: the rank map has no cp groups");
    auto comm = backend_->Split(input.groups.at("cp"));
    if (!comm.ok()) return comm.status();
    comm_ = std::move(comm).value();
    if (comm_ == nullptr || comm_->size() != cp_) {
      return Status::Error("ulysses: this rank's cp group has " +
                           std::to_string(comm_ == nullptr ? 0 : comm_->size()) +
                           " ranks, but the degree is " + std::to_string(cp_));
    }
    return Status();
  }

  std::string name() const override { return "ulysses"; }
  std::string group_kind() const override { return "cp"; }
  std::string skip_reason() const override { return skip_; }
  std::vector<std::string> notes() const override { return notes_; }
  int group_size() const override { return cp_; }
  std::string group_label() const override { return GroupLabel("cp", comm_.get()); }
  // in, send, recv, out: one tensor each.
  int64_t bytes_needed(int index) const override {
    return 4 * Elements(cases_[index].heads) * 2;
  }

  std::vector<OpCase> cases() const override {
    std::vector<OpCase> out;
    for (const UlyssesCase& c : cases_) {
      OpCase op_case;
      op_case.name = c.name;
      op_case.elements_per_rank = batch_ * (seq_ / cp_) * c.heads * head_dim_;
      op_case.type = DType::kU16;
      op_case.send_bytes_per_rank = op_case.elements_per_rank * 2;
      op_case.bus_factor = static_cast<double>(cp_ - 1) / cp_;
      out.push_back(op_case);
    }
    return out;
  }

  Status Prepare(int index) override {
    Release();
    current_ = index;
    const UlyssesCase& c = cases_[index];
    heads_ = c.heads;
    const size_t n = static_cast<size_t>(Elements(heads_));
    for (uint16_t** buffer : {&in_, &send_, &recv_, &out_}) {
      *buffer = static_cast<uint16_t*>(backend_->Alloc(n * sizeof(uint16_t)));
      if (*buffer == nullptr) {
        return Status::Error("ulysses: cannot allocate " + std::to_string(n * 2) + " bytes");
      }
    }
    host_in_.resize(n);
    FillInput(c, host_in_.data());
    if (Status s = backend_->Upload(in_, host_in_.data(), n * 2); !s.ok()) return s;
    const std::vector<uint16_t> zeros(n, 0);
    return backend_->Upload(out_, zeros.data(), n * 2);
  }

  Status Run() override { return Move(cases_[current_].direction, in_, out_); }

  void Corrupt() override {
    const size_t n = static_cast<size_t>(Elements(heads_));
    std::vector<uint16_t> out(n);
    if (!backend_->Download(out.data(), out_, n * 2).ok()) return;
    out[n / 2] ^= 0xFFFF;
    (void)backend_->Upload(out_, out.data(), n * 2);
  }

  Result<int64_t> Check() override {
    const UlyssesCase& c = cases_[current_];
    const size_t n = static_cast<size_t>(Elements(heads_));
    // The forward result against the coordinates it must hold ...
    std::vector<uint16_t> expected(n), got(n);
    FillOutput(c, expected.data());
    if (Status s = backend_->Download(got.data(), out_, n * 2); !s.ok()) return s;
    int64_t wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += got[i] != expected[i];
    // ... and the way back (into the input buffer) against the input.
    const Direction back = c.direction == Direction::kSeqToHeads ? Direction::kHeadsToSeq
                                                                 : Direction::kSeqToHeads;
    if (Status s = Move(back, out_, in_); !s.ok()) return s;
    if (Status s = backend_->Download(got.data(), in_, n * 2); !s.ok()) return s;
    for (size_t i = 0; i < n; ++i) wrong += got[i] != host_in_[i];
    return wrong;
  }

  void Release() override {
    for (uint16_t** buffer : {&in_, &send_, &recv_, &out_}) {
      if (*buffer != nullptr) backend_->Free(*buffer);
      *buffer = nullptr;
    }
    host_in_.clear();
    current_ = -1;
  }

 private:
  int64_t Elements(int64_t heads) const { return batch_ * (seq_ / cp_) * heads * head_dim_; }
  int64_t Chunk() const { return seq_ / cp_; }       // L: tokens per rank before
  int64_t HeadChunk() const { return heads_ / cp_; }  // G: heads per rank after

  uint64_t GlobalIndex(int tensor, int64_t b, int64_t s, int64_t h, int64_t x) const {
    return static_cast<uint64_t>((((tensor * batch_ + b) * seq_ + s) * heads_ + h) * head_dim_ +
                                 x);
  }

  // Input as this rank holds it: [B, L, H, d] for seq->heads, [B, S, G, d]
  // for heads->seq. Output is the other one.
  void FillSeqSharded(int tensor, uint16_t* data) const {
    const int64_t r = comm_->rank();
    size_t i = 0;
    for (int64_t b = 0; b < batch_; ++b)
      for (int64_t s = 0; s < Chunk(); ++s)
        for (int64_t h = 0; h < heads_; ++h)
          for (int64_t x = 0; x < head_dim_; ++x)
            data[i++] = PatternWord(GlobalIndex(tensor, b, r * Chunk() + s, h, x));
  }
  void FillHeadSharded(int tensor, uint16_t* data) const {
    const int64_t r = comm_->rank();
    size_t i = 0;
    for (int64_t b = 0; b < batch_; ++b)
      for (int64_t s = 0; s < seq_; ++s)
        for (int64_t h = 0; h < HeadChunk(); ++h)
          for (int64_t x = 0; x < head_dim_; ++x)
            data[i++] = PatternWord(GlobalIndex(tensor, b, s, r * HeadChunk() + h, x));
  }
  void FillInput(const UlyssesCase& c, uint16_t* data) const {
    if (c.direction == Direction::kSeqToHeads) FillSeqSharded(c.tensor_id, data);
    else FillHeadSharded(c.tensor_id, data);
  }
  void FillOutput(const UlyssesCase& c, uint16_t* data) const {
    if (c.direction == Direction::kSeqToHeads) FillHeadSharded(c.tensor_id, data);
    else FillSeqSharded(c.tensor_id, data);
  }

  // Pack, all-to-all, unpack (ulysses_layout.h).
  Status Move(Direction direction, const uint16_t* in, uint16_t* out) {
    const UlyssesCopies copies =
        UlyssesMove({batch_, seq_, heads_, head_dim_, cp_, /*element_bytes=*/2}, direction);
    if (Status s = backend_->CopyRuns(send_, in, copies.pack); !s.ok()) return s;
    const size_t per_peer = static_cast<size_t>(batch_ * Chunk() * HeadChunk() * head_dim_);
    if (Status s = backend_->AllToAll(send_, recv_, per_peer, DType::kU16, *comm_); !s.ok()) {
      return s;
    }
    return backend_->CopyRuns(out, recv_, copies.unpack);
  }

  Backend* backend_;
  std::string skip_;
  std::vector<std::string> notes_;
  std::vector<UlyssesCase> cases_;
  std::unique_ptr<GroupComm> comm_;
  int cp_ = 1;
  int64_t batch_ = 0, seq_ = 0, head_dim_ = 0, heads_ = 0;
  int current_ = -1;
  std::vector<uint16_t> host_in_;  // the input as filled, kept to check the round trip
  // Backend buffers: the sharded input and output, and the packed blocks
  // the all-to-all moves.
  uint16_t* in_ = nullptr;
  uint16_t* send_ = nullptr;
  uint16_t* recv_ = nullptr;
  uint16_t* out_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<Op>> MakeUlyssesOp(const BenchInput& input, const OpOptions& options,
                                          Backend* backend) {
  auto op = std::make_unique<UlyssesOp>(input, options, backend);
  if (Status s = op->Init(input); !s.ok()) return s;
  return std::unique_ptr<Op>(std::move(op));
}

}  // namespace foldplan::validate
