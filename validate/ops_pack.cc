// The pack op: the Ulysses pack and unpack kernels alone, without the
// all-to-all, against a plain copy of the same tensor through the same
// backend kernel, for the kernel target (pack / unpack at >= 80 %
// of the device copy bandwidth). Tensor: the plan's q, [B, S/C, H, d] bf16
// per rank (S scaled by --max-seq); cases:
//   copy       one run of the whole tensor (the reference)
//   pack       seq -> heads pack, runs of H/C x d elements
//   unpack     the strided unpack after heads -> seq (the seq -> heads
//              unpack is a plain copy when B = 1)
// The kernels run on world rank 0 alone and only its times count, so that
// ranks sharing one GPU (the socket emulation) do not contend; the other
// ranks wait at the runner's barriers. Bytes S count read + written (twice
// the tensor), as the H200 profile counts its device copy, so algbw is the
// kernel's bandwidth. Check: rank 0's output equals HostCopyRuns of the
// same input, element for element.
#include <vector>

#include "validate/op.h"
#include "validate/pattern.h"
#include "validate/ulysses_layout.h"

namespace foldplan::validate {
namespace {

struct PackCase {
  std::string name;
  RunCopy copy;
};

class PackOp : public Op {
 public:
  PackOp(const BenchInput& input, const OpOptions& options, Backend* backend)
      : backend_(backend), root_(backend->world_rank() == 0) {
    if (!input.has_shapes) {
      skip_ = "skipped: the input has no model shapes (give a foldplan.plan/v1 file)";
      return;
    }
    const ModelShapes& shapes = input.shapes;
    const int64_t cp = input.degrees.at("cp");
    if (cp == 1) {
      skip_ = "skipped: cp = 1";
      return;
    }
    if (shapes.heads % cp != 0) {
      skip_ = "skipped: heads " + std::to_string(shapes.heads) + " not divisible by cp " +
              std::to_string(cp);
      return;
    }
    cp_ = static_cast<int>(cp);
    shape_ = {shapes.mbs, ScaledSeqLen(shapes.seq_len, cp, options, &notes_), shapes.heads,
              shapes.head_dim, cp, /*element_bytes=*/2};
    notes_.push_back("q tensor [" + std::to_string(shape_.batch) + ", " +
                     std::to_string(shape_.Tokens()) + ", " + std::to_string(shape_.heads) +
                     ", " + std::to_string(shape_.head_dim) +
                     "] bf16 on world rank 0 alone; bytes = read + written; the pack and "
                     "unpack rows' GB/s over the copy row's is the kernels' share of copy "
                     "bandwidth");
    RunCopy whole;
    whole.run_bytes = shape_.Bytes();
    cases_ = {{"copy (reference)", whole},
              {"pack seq->heads", UlyssesMove(shape_, UlyssesDirection::kSeqToHeads).pack},
              {"unpack heads->seq", UlyssesMove(shape_, UlyssesDirection::kHeadsToSeq).unpack}};
  }
  ~PackOp() override { Release(); }

  std::string name() const override { return "pack"; }
  std::string group_kind() const override { return "cp"; }
  std::string skip_reason() const override { return skip_; }
  std::vector<std::string> notes() const override { return notes_; }
  int group_size() const override { return cp_; }
  std::string group_label() const override { return "world rank 0 (local kernels)"; }
  bool timed_on_root_only() const override { return true; }

  std::vector<OpCase> cases() const override {
    std::vector<OpCase> out;
    for (const PackCase& c : cases_) {
      OpCase op_case;
      op_case.name = c.name;
      op_case.elements_per_rank = shape_.Bytes() / 2;
      op_case.type = DType::kU16;
      op_case.send_bytes_per_rank = 2 * shape_.Bytes();  // read + written
      op_case.bus_factor = 1;
      out.push_back(op_case);
    }
    return out;
  }
  int64_t bytes_needed(int) const override { return root_ ? 2 * shape_.Bytes() : 0; }

  Status Prepare(int index) override {
    Release();
    current_ = index;
    if (!root_) return Status();
    const size_t bytes = static_cast<size_t>(shape_.Bytes());
    in_ = backend_->Alloc(bytes);
    out_ = backend_->Alloc(bytes);
    if (in_ == nullptr || out_ == nullptr) {
      return Status::Error("pack: cannot allocate " + std::to_string(2 * bytes) + " bytes");
    }
    host_in_.resize(bytes / 2);
    for (size_t i = 0; i < host_in_.size(); ++i) host_in_[i] = PatternWord(i);
    if (Status s = backend_->Upload(in_, host_in_.data(), bytes); !s.ok()) return s;
    const std::vector<uint16_t> zeros(host_in_.size(), 0);
    return backend_->Upload(out_, zeros.data(), bytes);
  }

  Status Run() override {
    if (!root_) return Status();
    return backend_->CopyRuns(out_, in_, cases_[current_].copy);
  }

  void Corrupt() override {
    if (!root_) return;
    std::vector<uint16_t> out(host_in_.size());
    if (!backend_->Download(out.data(), out_, out.size() * 2).ok()) return;
    out[out.size() / 2] ^= 0xFFFF;
    (void)backend_->Upload(out_, out.data(), out.size() * 2);
  }

  Result<int64_t> Check() override {
    if (!root_) return int64_t{0};
    std::vector<uint16_t> expected(host_in_.size()), got(host_in_.size());
    HostCopyRuns(expected.data(), host_in_.data(), cases_[current_].copy);
    if (Status s = backend_->Download(got.data(), out_, got.size() * 2); !s.ok()) return s;
    int64_t wrong = 0;
    for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != expected[i];
    return wrong;
  }

  void Release() override {
    for (void** buffer : {&in_, &out_}) {
      if (*buffer != nullptr) backend_->Free(*buffer);
      *buffer = nullptr;
    }
    host_in_.clear();
  }

 private:
  Backend* backend_;
  bool root_;
  std::string skip_;
  std::vector<std::string> notes_;
  int cp_ = 1;
  UlyssesShape shape_;
  std::vector<PackCase> cases_;
  int current_ = -1;
  std::vector<uint16_t> host_in_;
  void* in_ = nullptr;
  void* out_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<Op>> MakePackOp(const BenchInput& input, const OpOptions& options,
                                       Backend* backend) {
  return std::unique_ptr<Op>(std::make_unique<PackOp>(input, options, backend));
}

}  // namespace foldplan::validate
