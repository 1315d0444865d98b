// The Ulysses (DeepSpeed-Ulysses / Megatron a2a CP) layout change over every
// CP group: a rank holding a sequence chunk of all heads, [B, S/C, H, d],
// ends up holding all of the sequence for a head chunk, [B, S, H/C, d], and
// back. Rank r of a CP group holds tokens [r S/C, (r+1) S/C) before and heads
// [r H/C, (r+1) H/C) after. Cases follow the cost model's collectives:
// q, k, v go sequence -> heads (k and v with the GQA kv_heads), the
// attention output goes heads -> sequence.
//
// Data: element (b, s, h, x) of tensor t holds the low 16 bits of a
// SplitMix64 hash of its global linear index. Words are 16 bits so that the
// bytes moved are the plan's bf16 bytes; they are moved and compared as
// integers, so the values round-trip exactly. A misplaced element matches
// its expected value with probability 2^-16; a corrupted one (bits flipped)
// never does.
#include <algorithm>
#include <cstring>

#include "validate/op.h"

namespace foldplan::validate {
namespace {

enum class Direction { kSeqToHeads, kHeadsToSeq };

struct UlyssesCase {
  std::string name;
  int tensor_id;       // separates q, k, v and out in the hash
  int64_t heads;       // H of this tensor
  Direction direction;
};

uint16_t ExpectedValue(uint64_t linear_index) {
  uint64_t z = linear_index + 0x9E3779B97F4A7C15ULL;  // SplitMix64 finalizer
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<uint16_t>(z);
}

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
    if (!backend->host_accessible()) {
      skip_ = "skipped: backend " + backend->name() + " has no device pack kernels yet";
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
    // Scale the sequence down (to a multiple of cp) so a CPU run stays small;
    // the per-token layout change is the same at any length.
    seq_ = shapes.seq_len;
    if (seq_ > options.max_seq_len) {
      seq_ = std::max<int64_t>(cp_, options.max_seq_len / cp_ * cp_);
      notes_.push_back("seq_len scaled from " + std::to_string(shapes.seq_len) + " to " +
                       std::to_string(seq_) + " (--max-seq " +
                       std::to_string(options.max_seq_len) + ")");
    }
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
    comm_ = backend->Split(input.groups.at("cp"));
  }
  ~UlyssesOp() override { Release(); }

  std::string name() const override { return "ulysses"; }
  std::string group_kind() const override { return "cp"; }
  std::string skip_reason() const override { return skip_; }
  std::vector<std::string> notes() const override { return notes_; }
  int group_size() const override { return cp_; }

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
    if (index != current_) Release();
    current_ = index;
    const UlyssesCase& c = cases_[index];
    heads_ = c.heads;
    const size_t n = static_cast<size_t>(batch_ * (seq_ / cp_) * heads_ * head_dim_);
    if (in_.empty()) {
      in_.resize(n);
      out_.resize(n);
      send_ = static_cast<uint16_t*>(backend_->Alloc(n * sizeof(uint16_t)));
      recv_ = static_cast<uint16_t*>(backend_->Alloc(n * sizeof(uint16_t)));
      if (send_ == nullptr || recv_ == nullptr) {
        return Status::Error("ulysses: cannot allocate " + std::to_string(2 * n * 2) + " bytes");
      }
    }
    FillInput(c, in_.data());
    std::fill(out_.begin(), out_.end(), 0);
    return Status();
  }

  Status Run() override { return Move(cases_[current_].direction, in_.data(), out_.data()); }

  void Corrupt() override { out_[out_.size() / 2] ^= 0xFFFF; }

  Result<int64_t> Check() override {
    const UlyssesCase& c = cases_[current_];
    const Direction back = c.direction == Direction::kSeqToHeads ? Direction::kHeadsToSeq
                                                                 : Direction::kSeqToHeads;
    // The forward result against the coordinates it must hold ...
    std::vector<uint16_t> expected(out_.size());
    FillOutput(c, expected.data());
    int64_t wrong = 0;
    for (size_t i = 0; i < out_.size(); ++i) wrong += out_[i] != expected[i];
    // ... and the way back against the input it started from.
    std::vector<uint16_t> round_trip(in_.size());
    if (Status s = Move(back, out_.data(), round_trip.data()); !s.ok()) return s;
    for (size_t i = 0; i < in_.size(); ++i) wrong += round_trip[i] != in_[i];
    return wrong;
  }

  void Release() override {
    if (send_ != nullptr) backend_->Free(send_);
    if (recv_ != nullptr) backend_->Free(recv_);
    send_ = recv_ = nullptr;
    in_.clear();
    out_.clear();
    current_ = -1;
  }

 private:
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
            data[i++] = ExpectedValue(GlobalIndex(tensor, b, r * Chunk() + s, h, x));
  }
  void FillHeadSharded(int tensor, uint16_t* data) const {
    const int64_t r = comm_->rank();
    size_t i = 0;
    for (int64_t b = 0; b < batch_; ++b)
      for (int64_t s = 0; s < seq_; ++s)
        for (int64_t h = 0; h < HeadChunk(); ++h)
          for (int64_t x = 0; x < head_dim_; ++x)
            data[i++] = ExpectedValue(GlobalIndex(tensor, b, s, r * HeadChunk() + h, x));
  }
  void FillInput(const UlyssesCase& c, uint16_t* data) const {
    if (c.direction == Direction::kSeqToHeads) FillSeqSharded(c.tensor_id, data);
    else FillHeadSharded(c.tensor_id, data);
  }
  void FillOutput(const UlyssesCase& c, uint16_t* data) const {
    if (c.direction == Direction::kSeqToHeads) FillHeadSharded(c.tensor_id, data);
    else FillSeqSharded(c.tensor_id, data);
  }

  // Pack, all-to-all, unpack. The packed buffer is [C][B][L][G][d] in both
  // directions: block p is what peer p gets. Every copy is one run of G x d
  // contiguous elements.
  Status Move(Direction direction, const uint16_t* in, uint16_t* out) {
    const int64_t c = cp_, l = Chunk(), g = HeadChunk(), d = head_dim_;
    const size_t run = static_cast<size_t>(g * d) * sizeof(uint16_t);
    auto packed = [&](uint16_t* base, int64_t p, int64_t b, int64_t i) {
      return base + (((p * batch_ + b) * l + i) * g) * d;
    };
    for (int64_t p = 0; p < c; ++p)
      for (int64_t b = 0; b < batch_; ++b)
        for (int64_t i = 0; i < l; ++i) {
          const uint16_t* from = direction == Direction::kSeqToHeads
                                     ? in + ((b * l + i) * heads_ + p * g) * d  // [B,L,H,d]
                                     : in + ((b * seq_ + p * l + i) * g) * d;   // [B,S,G,d]
          std::memcpy(packed(send_, p, b, i), from, run);
        }
    const size_t per_peer = static_cast<size_t>(batch_ * l * g * d);
    if (Status s = backend_->AllToAll(send_, recv_, per_peer, DType::kU16, *comm_); !s.ok()) {
      return s;
    }
    for (int64_t p = 0; p < c; ++p)
      for (int64_t b = 0; b < batch_; ++b)
        for (int64_t i = 0; i < l; ++i) {
          uint16_t* to = direction == Direction::kSeqToHeads
                             ? out + ((b * seq_ + p * l + i) * g) * d   // [B,S,G,d]
                             : out + ((b * l + i) * heads_ + p * g) * d;  // [B,L,H,d]
          std::memcpy(to, packed(recv_, p, b, i), run);
        }
    return Status();
  }

  Backend* backend_;
  std::string skip_;
  std::vector<std::string> notes_;
  std::vector<UlyssesCase> cases_;
  std::unique_ptr<GroupComm> comm_;
  int cp_ = 1;
  int64_t batch_ = 0, seq_ = 0, head_dim_ = 0, heads_ = 0;
  int current_ = -1;
  std::vector<uint16_t> in_, out_;     // host tensors (pack/unpack run on the host)
  uint16_t* send_ = nullptr;           // backend buffers the all-to-all moves
  uint16_t* recv_ = nullptr;
};

}  // namespace

std::unique_ptr<Op> MakeUlyssesOp(const BenchInput& input, const OpOptions& options,
                                  Backend* backend) {
  return std::make_unique<UlyssesOp>(input, options, backend);
}

}  // namespace foldplan::validate
