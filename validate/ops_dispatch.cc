// The MoE all-to-all dispatcher (Megatron's MoEAlltoAllTokenDispatcher,
// ../shared/reference/cost-model.md section 4) over the plan's EP and ETP
// groups, one case per routing:
//   count exchange  all-to-all of per-expert row counts over EP, then an
//                   all-gather of the received counts over ETP (downloaded to
//                   the host: the split sizes, Megatron's device-to-host sync)
//   permute         rows of [T, H] gathered into expert order, T K rows
//   dispatch        all-to-all-v over EP
//   gather          all-gather-v over ETP (every shard sees every row)
//   experts         --expert term: ExpertPartial, shard j of expert e adds its
//                   term (kernels.h); --expert gemm: rows sorted by local
//                   expert (GatherRows), two bf16 GEMMs per local expert
//                   (ExpertGemm), rows gathered back to arrival order
//   reduce-scatter  reduce-scatter-v over ETP (sums the shards' partials)
//   combine         all-to-all-v back over EP
//   unpermute       out[t] = sum_k p_k y(t, k) (CombineRows, f32)
// T = mbs x seq / (cp x tp) tokens per rank (the sequence scaled down by
// --max-seq like ulysses), H the hidden size, K = top_k, E experts, EP ranks
// own E / EP experts each, and the ETP ranks of one EP position hold shards
// of the same experts.
//
// Routing is seeded (the router's output is this op's input, computed on the
// host): token g picks K distinct experts, each draw with weight 1 (uniform)
// or 1 / (e + 1)^skew (skewed: low-numbered experts are hot), and
// probabilities p_k from the same hash, normalised to sum 1.
//
// Check: x[g][i] is a small integer (0..7). With `term` every expert term
// is 0..3, so the expert output x + sum_j term(e, j, i) is exact in bf16
// through every move and sum; with `gemm` the weights have one nonzero
// (+-1) per column, so shard j's output is y_j[i] = s1 x[p1(p2(i))] and
// expert e's sum_j y_j[i] (kernels.h states the math), integers again.
// ExpectedExpertOutput gives that value per expert function; the combined
// f32 output must equal sum_k p_k (that value), summed in k order on the
// host, bit for bit: every backend's CombineRows
// rounds each product and sum as the host does (the CUDA kernel with
// round-to-nearest intrinsics, host code with -ffp-contract=off), so the
// comparison is exact.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>
#include <utility>

#include "validate/expert_draw.h"
#include "validate/op.h"
#include "validate/pattern.h"

namespace foldplan::validate {
namespace {

struct Routing {
  std::vector<int32_t> expert;   // [T K] chosen experts, token-major
  std::vector<float> weight;     // [T K] probabilities, summing to 1 per token
  std::vector<int64_t> source;   // [T K] send row r holds token source[r]
  std::vector<int64_t> row_of;   // [T K] token t's k-th copy sits in send row row_of[t K + k]
  std::vector<int32_t> expert_counts;  // [E] rows this rank sends to each expert
};

struct DispatchCase {
  std::string routing;  // "uniform" or "skewed"
  Routing route;
  std::vector<int32_t> recv_counts;     // [EP][L] rows from each EP peer per local expert
  std::vector<int32_t> gathered_counts; // [ETP][EP][L] the same for every ETP peer
};

int64_t Sum(const std::vector<int32_t>& values, size_t begin, size_t end) {
  return std::accumulate(values.begin() + begin, values.begin() + end, int64_t{0});
}

// Max and mean over ranks of case k's value, from GatherToRoot of one value
// per case per rank (rank-major): all[r * cases + k].
std::pair<double, double> MaxMeanOverRanks(const std::vector<double>& all, size_t cases,
                                           size_t k) {
  double max = 0, total = 0;
  for (size_t r = k; r < all.size(); r += cases) {
    max = std::max(max, all[r]);
    total += all[r];
  }
  return {max, total / static_cast<double>(all.size() / cases)};
}

class DispatchOp : public Op {
 public:
  DispatchOp(const BenchInput& input, const OpOptions& options, Backend* backend)
      : backend_(backend), options_(options) {
    if (!input.has_shapes) {
      skip_ = "skipped: the input has no model shapes (give a foldplan.plan/v1 file)";
      return;
    }
    const ModelShapes& shapes = input.shapes;
    if (shapes.experts == 0) {
      skip_ = "skipped: dense model (no experts)";
      return;
    }
    ep_ = static_cast<int>(input.degrees.at("ep"));
    etp_ = static_cast<int>(input.degrees.at("etp"));
    if (ep_ * etp_ == 1) {
      skip_ = "skipped: ep = etp = 1 (the dispatcher moves nothing)";
      return;
    }
    // foldbench's reader and CheckGroupsForOps refuse these plans; the op
    // refuses them too rather than trust its caller with its buffers.
    if (!input.groups.contains("ep") || !input.groups.contains("etp")) {
      error_ = "dispatch: the rank map has no ep or etp groups";
      return;
    }
    if (shapes.experts % ep_ != 0) {
      error_ = "dispatch: " + std::to_string(shapes.experts) + " experts do not divide over ep " +
               std::to_string(ep_);
      return;
    }
    experts_ = shapes.experts;
    top_k_ = shapes.top_k;
    hidden_ = shapes.hidden;
    local_experts_ = experts_ / ep_;
    gemm_ = options.expert_function == "gemm";
    if (gemm_) {
      if (shapes.moe_ffn_hidden % etp_ != 0) {
        skip_ = "skipped: --expert gemm needs moe_ffn_hidden (" +
                std::to_string(shapes.moe_ffn_hidden) + ") divisible by etp (" +
                std::to_string(etp_) + ")";
        return;
      }
      if (7 * etp_ > 256) {  // |sum_j y_j| <= 7 etp must stay an exact bf16 integer
        skip_ = "skipped: --expert gemm checks exactly only up to etp 36";
        return;
      }
      ffn_ = shapes.moe_ffn_hidden / etp_;
    }
    const int64_t split = input.degrees.at("cp") * input.degrees.at("tp");
    const int64_t seq = ScaledSeqLen(shapes.seq_len, split, options, &notes_);
    tokens_ = shapes.mbs * seq / split;
    notes_.push_back(std::to_string(tokens_) + " tokens per rank (mbs x seq / (cp x tp)), top_k " +
                     std::to_string(top_k_) + ", " + std::to_string(experts_) + " experts, " +
                     std::to_string(local_experts_) + " per EP rank, etp " +
                     std::to_string(etp_) + ", hidden " + std::to_string(hidden_));
    notes_.push_back(
        "time: the whole dispatch and combine (count exchange, permute, all-to-all-v, "
        "all-gather-v over etp, expert function, reduce-scatter-v, all-to-all-v back, "
        "unpermute); algbw = T x top_k x hidden x 2 B / time; busbw = algbw x (ep-1)/ep");
    if (gemm_) {
      char text[320];
      std::snprintf(text, sizeof text,
                    "expert function: two bf16 GEMMs per local expert (H x F/etp, F/etp x H = "
                    "%lld x %lld, %lld x %lld), structured weights (one nonzero per column, "
                    "output known exactly), f32 accumulation; rows sorted by local expert "
                    "before and back after; weights %.1f MiB per rank",
                    static_cast<long long>(hidden_), static_cast<long long>(ffn_),
                    static_cast<long long>(ffn_), static_cast<long long>(hidden_),
                    static_cast<double>(WeightBytes()) / (1024.0 * 1024.0));
      notes_.push_back(text);
    } else {
      notes_.push_back(
          "expert function: term (each ETP shard adds a hashed term per element; no GEMM; "
          "--expert gemm runs real bf16 GEMMs)");
    }
    for (const std::string& routing : options.routings) cases_.push_back({routing, {}, {}, {}});
  }
  ~DispatchOp() override {
    Release();
    FreeWeights();
  }

  // Collective: communicators, routing, and one count exchange per case so
  // that buffer sizes (bytes_needed) are exact before anything is timed.
  Status Init(const BenchInput& input) {
    if (!error_.empty()) return Status::Error(error_);
    if (!skip_.empty()) return Status();
    for (auto [kind, comm] : {std::pair{"ep", &ep_comm_}, std::pair{"etp", &etp_comm_}}) {
      auto made = backend_->Split(input.groups.at(kind));
      if (!made.ok()) return made.status();
      *comm = std::move(made).value();
    }
    // Every count and row buffer is sized from ep and etp: the groups the
    // data moves over must be exactly that big (the same on every rank, as
    // the groups are), or an all-to-all would write past its buffer.
    for (auto [kind, comm, degree] : {std::tuple{"ep", ep_comm_.get(), ep_},
                                      std::tuple{"etp", etp_comm_.get(), etp_}}) {
      if (comm == nullptr || comm->size() != degree) {
        return Status::Error(std::string("dispatch: this rank's ") + kind + " group has " +
                             std::to_string(comm == nullptr ? 0 : comm->size()) +
                             " ranks, but the degree is " + std::to_string(degree));
      }
    }
    std::vector<double> recv_rows, gemm_flops;
    for (DispatchCase& c : cases_) {
      c.route = Route(c.routing);
      if (Status s = ExchangeCounts(c.route.expert_counts, &c.recv_counts, &c.gathered_counts);
          !s.ok()) {
        return s;
      }
      recv_rows.push_back(static_cast<double>(Sum(c.recv_counts, 0, c.recv_counts.size())));
      // Two GEMMs of 2 x rows x H x F/etp FLOPs over the gathered rows.
      gemm_flops.push_back(4.0 * static_cast<double>(Sum(c.gathered_counts, 0,
                                                         c.gathered_counts.size())) *
                           static_cast<double>(hidden_ * ffn_));
    }
    // Load imbalance the routing produced: rows received per rank, max / mean.
    const std::vector<double> all = backend_->GatherToRoot(recv_rows);
    for (size_t k = 0; k < cases_.size() && !all.empty(); ++k) {
      const auto [max_rows, mean] = MaxMeanOverRanks(all, cases_.size(), k);
      char text[160];
      std::snprintf(text, sizeof text,
                    "%s routing: rows received per rank max %.0f, mean %.1f (max/mean %.2f)",
                    CaseName(cases_[k]).c_str(), max_rows, mean, mean > 0 ? max_rows / mean : 0);
      notes_.push_back(text);
    }
    if (gemm_) {
      const std::vector<double> flops = backend_->GatherToRoot(gemm_flops);
      for (size_t k = 0; k < cases_.size() && !flops.empty(); ++k) {
        const auto [max_flops, mean] = MaxMeanOverRanks(flops, cases_.size(), k);
        char text[200];
        std::snprintf(text, sizeof text,
                      "%s routing: expert GEMM FLOPs per run (2 GEMMs x 2 x rows gathered x H "
                      "x F/etp) max %.3f GFLOP per rank, mean %.3f",
                      CaseName(cases_[k]).c_str(), max_flops / 1e9, mean / 1e9);
        notes_.push_back(text);
      }
    }
    return Status();
  }

  std::string name() const override { return "dispatch"; }
  std::string group_kind() const override { return "ep"; }
  std::string skip_reason() const override { return skip_; }
  std::vector<std::string> notes() const override { return notes_; }
  int group_size() const override { return ep_; }
  std::string group_label() const override {
    return GroupLabel("ep", ep_comm_.get()) + " and " + GroupLabel("etp", etp_comm_.get());
  }

  std::vector<OpCase> cases() const override {
    std::vector<OpCase> out;
    for (const DispatchCase& c : cases_) {
      OpCase op_case;
      op_case.name = CaseName(c);
      op_case.elements_per_rank = tokens_ * top_k_ * hidden_;
      op_case.type = DType::kBF16;
      op_case.send_bytes_per_rank = op_case.elements_per_rank * 2;
      op_case.bus_factor = static_cast<double>(ep_ - 1) / ep_;
      out.push_back(op_case);
    }
    return out;
  }

  int64_t bytes_needed(int index) const override {
    const DispatchCase& c = cases_[index];
    const int64_t sent = tokens_ * top_k_, received = Sum(c.recv_counts, 0, c.recv_counts.size());
    const int64_t gathered = Sum(c.gathered_counts, 0, c.gathered_counts.size());
    const int64_t rows = tokens_ + 2 * sent + 2 * received + gathered;  // bf16 row buffers
    const int64_t common = rows * hidden_ * 2 + tokens_ * hidden_ * 4 /* f32 out */ +
                           sent * (2 * 8 + 4) /* indices, weights */ +
                           2 * static_cast<int64_t>(experts_ + etp_ * experts_) * 4 /* counts */;
    if (!gemm_) return common + gathered * 4 /* row experts */;
    // gemm: the rows sorted by expert, h, the two permutations, and the
    // weights (local experts x 2 x H x F/etp bf16), made by the first
    // Prepare and kept for the op's life.
    return common + gathered * hidden_ * 2 + gathered * ffn_ * 2 + gathered * 2 * 8 +
           (weights_.empty() ? WeightBytes() : 0);
  }

  Status Prepare(int index) override {
    Release();
    current_ = index;
    const DispatchCase& c = cases_[index];
    const int64_t sent = tokens_ * top_k_;
    received_ = Sum(c.recv_counts, 0, c.recv_counts.size());
    gathered_ = Sum(c.gathered_counts, 0, c.gathered_counts.size());
    bool ok = true;
    auto alloc = [&](int64_t bytes) {
      void* p = backend_->Alloc(static_cast<size_t>(bytes));
      ok = ok && p != nullptr;
      buffers_.push_back(p);
      return p;
    };
    x_ = static_cast<uint16_t*>(alloc(tokens_ * hidden_ * 2));
    send_ = static_cast<uint16_t*>(alloc(sent * hidden_ * 2));
    recv_ = static_cast<uint16_t*>(alloc(received_ * hidden_ * 2));
    gathered_rows_ = static_cast<uint16_t*>(alloc(gathered_ * hidden_ * 2));
    reduced_ = static_cast<uint16_t*>(alloc(received_ * hidden_ * 2));
    back_ = static_cast<uint16_t*>(alloc(sent * hidden_ * 2));
    out_ = static_cast<float*>(alloc(tokens_ * hidden_ * 4));
    source_ = static_cast<int64_t*>(alloc(sent * 8));
    row_of_ = static_cast<int64_t*>(alloc(sent * 8));
    weight_ = static_cast<float*>(alloc(sent * 4));
    if (gemm_) {
      sorted_rows_ = static_cast<uint16_t*>(alloc(gathered_ * hidden_ * 2));
      scratch_ = static_cast<uint16_t*>(alloc(gathered_ * ffn_ * 2));
      sort_rows_ = static_cast<int64_t*>(alloc(gathered_ * 8));
      unsort_rows_ = static_cast<int64_t*>(alloc(gathered_ * 8));
    } else {
      row_expert_ = static_cast<int32_t*>(alloc(gathered_ * 4));
    }
    send_counts_ = static_cast<int32_t*>(alloc(experts_ * 4));
    recv_counts_ = static_cast<int32_t*>(alloc(experts_ * 4));
    gathered_counts_ = static_cast<int32_t*>(alloc(etp_ * experts_ * 4));
    if (!ok) return Status::Error("dispatch: cannot allocate " + std::to_string(bytes_needed(index)) + " bytes");
    if (gemm_ && weights_.empty()) {
      if (Status s = MakeWeights(); !s.ok()) return s;
    }

    std::vector<uint16_t> x(static_cast<size_t>(tokens_ * hidden_));
    for (int64_t t = 0; t < tokens_; ++t)
      for (int64_t i = 0; i < hidden_; ++i) x[t * hidden_ + i] = TokenValue(t, i);
    const Routing& route = c.route;
    Status s = backend_->Upload(x_, x.data(), x.size() * 2);
    if (s.ok()) s = backend_->Upload(source_, route.source.data(), sent * 8);
    if (s.ok()) s = backend_->Upload(row_of_, route.row_of.data(), sent * 8);
    if (s.ok()) s = backend_->Upload(weight_, route.weight.data(), sent * 4);
    if (s.ok()) s = backend_->Upload(send_counts_, route.expert_counts.data(), experts_ * 4);
    if (s.ok()) {
      const std::vector<float> zeros(static_cast<size_t>(tokens_ * hidden_), 0.0f);
      s = backend_->Upload(out_, zeros.data(), zeros.size() * 4);
    }
    return s;
  }

  Status Run() override {
    const int64_t h = hidden_, l = local_experts_;
    // Count exchange; the split sizes come back to the host.
    std::vector<int32_t> recv_counts(static_cast<size_t>(experts_));
    std::vector<int32_t> gathered_counts(static_cast<size_t>(etp_ * experts_));
    Status s = backend_->AllToAll(send_counts_, recv_counts_, l, DType::kI32, *ep_comm_);
    if (s.ok()) s = backend_->Download(recv_counts.data(), recv_counts_, experts_ * 4);
    if (s.ok()) {
      s = backend_->AllGather(recv_counts_, gathered_counts_, experts_, DType::kI32, *etp_comm_);
    }
    if (s.ok()) s = backend_->Download(gathered_counts.data(), gathered_counts_, etp_ * experts_ * 4);
    if (!s.ok()) return s;

    // Split sizes in elements: EP peer p gets the rows of its l experts.
    const std::vector<int32_t>& sent_counts = cases_[current_].route.expert_counts;
    std::vector<size_t> send_n(ep_), send_off(ep_), recv_n(ep_), recv_off(ep_);
    for (size_t p = 0, so = 0, ro = 0; p < static_cast<size_t>(ep_); ++p) {
      send_n[p] = static_cast<size_t>(Sum(sent_counts, p * l, (p + 1) * l) * h);
      recv_n[p] = static_cast<size_t>(Sum(recv_counts, p * l, (p + 1) * l) * h);
      send_off[p] = so;
      recv_off[p] = ro;
      so += send_n[p];
      ro += recv_n[p];
    }
    std::vector<size_t> gather_n(etp_), gather_off(etp_);
    size_t offset = 0;
    for (int j = 0; j < etp_; ++j) {
      const size_t base = static_cast<size_t>(j * experts_);
      gather_n[j] = static_cast<size_t>(Sum(gathered_counts, base, base + experts_) * h);
      gather_off[j] = offset;
      offset += gather_n[j];
    }
    if (Sum(gathered_counts, 0, gathered_counts.size()) != gathered_) {
      return Status::Error("dispatch: the exchanged counts changed between runs");
    }
    // Gathered rows arrive as [ETP peer j][EP peer p][local expert e]:
    // block (j, p, e) is entry j E + p l + e of gathered_counts.
    const int my_ep = ep_comm_->rank();
    std::vector<int32_t> row_expert;  // term: the expert of each arrived row
    std::vector<int64_t> rows_per_expert, sort_rows, unsort_rows;  // gemm
    if (!gemm_) {
      row_expert.reserve(static_cast<size_t>(gathered_));
      for (int j = 0; j < etp_; ++j)
        for (int p = 0; p < ep_; ++p)
          for (int64_t e = 0; e < l; ++e)
            row_expert.insert(row_expert.end(), gathered_counts[j * experts_ + p * l + e],
                              static_cast<int32_t>(my_ep * l + e));
    } else {
      SortByExpert(gathered_counts, &rows_per_expert, &sort_rows, &unsort_rows);
    }
    const int64_t sent = tokens_ * top_k_;
    if (s.ok()) s = backend_->GatherRows(send_, x_, source_, sent, h * 2);  // permute
    if (s.ok()) {
      s = backend_->AllToAllV(send_, send_n, send_off, recv_, recv_n, recv_off, DType::kBF16,
                              *ep_comm_);
    }
    if (s.ok()) {
      s = backend_->AllGatherV(recv_, received_ * h, gathered_rows_, gather_n, gather_off,
                               DType::kBF16, *etp_comm_);
    }
    if (!gemm_) {
      if (s.ok()) s = backend_->Upload(row_expert_, row_expert.data(), row_expert.size() * 4);
      if (s.ok()) {
        s = backend_->ExpertPartial(gathered_rows_, gathered_, h, row_expert_,
                                    etp_comm_->rank());
      }
    } else {
      // Megatron's sort_chunks_by_idxs: rows into [local expert][ETP peer]
      // [EP peer], the grouped GEMM over each expert's contiguous rows, and
      // back into arrival order for the reduce-scatter.
      if (s.ok()) s = backend_->Upload(sort_rows_, sort_rows.data(), sort_rows.size() * 8);
      if (s.ok()) s = backend_->Upload(unsort_rows_, unsort_rows.data(), unsort_rows.size() * 8);
      if (s.ok()) {
        s = backend_->GatherRows(sorted_rows_, gathered_rows_, sort_rows_, gathered_, h * 2);
      }
      if (s.ok()) {
        s = backend_->ExpertGemm(sorted_rows_, rows_per_expert, h, ffn_, w1_, w2_, scratch_);
      }
      if (s.ok()) {
        s = backend_->GatherRows(gathered_rows_, sorted_rows_, unsort_rows_, gathered_, h * 2);
      }
    }
    if (s.ok()) {
      s = backend_->ReduceScatterV(gathered_rows_, gather_n, gather_off, reduced_, DType::kBF16,
                                   *etp_comm_);
    }
    if (s.ok()) {
      s = backend_->AllToAllV(reduced_, recv_n, recv_off, back_, send_n, send_off, DType::kBF16,
                              *ep_comm_);
    }
    if (s.ok()) s = backend_->CombineRows(out_, back_, row_of_, weight_, tokens_, top_k_, h);
    return s;
  }

  void Corrupt() override {
    std::vector<float> out(static_cast<size_t>(tokens_ * hidden_));
    if (!backend_->Download(out.data(), out_, out.size() * 4).ok()) return;
    out[out.size() / 2] += 1000.0f;
    (void)backend_->Upload(out_, out.data(), out.size() * 4);
  }

  Result<int64_t> Check() override {
    std::vector<float> out(static_cast<size_t>(tokens_ * hidden_));
    if (Status s = backend_->Download(out.data(), out_, out.size() * 4); !s.ok()) return s;
    const Routing& route = cases_[current_].route;
    int64_t wrong = 0;
    std::vector<uint16_t> x(static_cast<size_t>(hidden_));
    for (int64_t t = 0; t < tokens_; ++t) {
      for (int64_t i = 0; i < hidden_; ++i) x[i] = TokenValue(t, i);
      for (int64_t i = 0; i < hidden_; ++i) {
        float expected = 0.0f;
        for (int64_t k = 0; k < top_k_; ++k) {
          const int32_t e = route.expert[t * top_k_ + k];
          expected += route.weight[t * top_k_ + k] * ExpectedExpertOutput(e, i, x.data());
        }
        wrong += out[t * hidden_ + i] != expected;
      }
    }
    return wrong;
  }

  void Release() override {
    for (void* p : buffers_) {
      if (p != nullptr) backend_->Free(p);
    }
    buffers_.clear();
    current_ = -1;
  }

 private:
  // Expert e's output element i for token row x after the ETP reduce-scatter
  // (kernels.h): the one formula the check uses, per expert function.
  float ExpectedExpertOutput(int64_t expert, int64_t i, const uint16_t* x) const {
    return gemm_ ? ExpertGemmOutput(x, expert, etp_, i, hidden_, ffn_)
                 : ExpertTermOutput(x, expert, etp_, i);
  }

  // Bytes of this rank's expert weights: local experts x 2 x H x F/etp bf16.
  int64_t WeightBytes() const { return local_experts_ * 2 * hidden_ * ffn_ * 2; }

  // The dense structured weights of this rank's shard of each local expert
  // (kernels.h MakeExpertGemmWeights), built on the host and uploaded once.
  Status MakeWeights() {
    const int my_ep = ep_comm_->rank(), my_etp = etp_comm_->rank();
    std::vector<uint16_t> w1(static_cast<size_t>(hidden_ * ffn_));
    std::vector<uint16_t> w2(static_cast<size_t>(ffn_ * hidden_));
    for (int64_t e = 0; e < local_experts_; ++e) {
      MakeExpertGemmWeights(w1.data(), w2.data(), my_ep * local_experts_ + e, my_etp, hidden_,
                            ffn_);
      for (const std::vector<uint16_t>* host : {&w1, &w2}) {
        void* buffer = backend_->Alloc(host->size() * 2);
        if (buffer == nullptr) {
          return Status::Error("dispatch: cannot allocate " + std::to_string(WeightBytes()) +
                               " bytes of expert weights");
        }
        weights_.push_back(buffer);
        if (Status s = backend_->Upload(buffer, host->data(), host->size() * 2); !s.ok()) {
          return s;
        }
        (host == &w1 ? w1_ : w2_).push_back(static_cast<const uint16_t*>(buffer));
      }
    }
    return Status();
  }
  void FreeWeights() {
    for (void* p : weights_) backend_->Free(p);
    weights_.clear();
    w1_.clear();
    w2_.clear();
  }

  // The permutation that groups the gathered rows by local expert: from
  // arrival order [ETP peer j][EP peer p][local expert e] (counts: entry
  // j E + p l + e of `gathered_counts`) to [e][j][p]. Sorted row r is
  // arrived row (*sort_rows)[r]; arrived row a is sorted row
  // (*unsort_rows)[a]; expert e has (*rows_per_expert)[e] rows.
  void SortByExpert(const std::vector<int32_t>& gathered_counts,
                    std::vector<int64_t>* rows_per_expert, std::vector<int64_t>* sort_rows,
                    std::vector<int64_t>* unsort_rows) const {
    const int64_t l = local_experts_;
    std::vector<int64_t> block_start(gathered_counts.size());
    rows_per_expert->assign(static_cast<size_t>(l), 0);
    int64_t at = 0;
    for (size_t b = 0; b < gathered_counts.size(); ++b) {
      block_start[b] = at;
      at += gathered_counts[b];
      (*rows_per_expert)[b % static_cast<size_t>(l)] += gathered_counts[b];
    }
    sort_rows->resize(static_cast<size_t>(at));
    unsort_rows->resize(static_cast<size_t>(at));
    int64_t sorted = 0;
    for (int64_t e = 0; e < l; ++e)
      for (int j = 0; j < etp_; ++j)
        for (int p = 0; p < ep_; ++p) {
          const size_t b = static_cast<size_t>(j * experts_ + p * l + e);
          for (int64_t r = 0; r < gathered_counts[b]; ++r, ++sorted) {
            (*sort_rows)[sorted] = block_start[b] + r;
            (*unsort_rows)[block_start[b] + r] = sorted;
          }
        }
  }

  std::string CaseName(const DispatchCase& c) const {
    if (c.routing != "skewed") return c.routing;
    char text[64];
    std::snprintf(text, sizeof text, "skewed (s=%.2g)", options_.skew);
    return text;
  }

  int64_t GlobalToken(int64_t t) const { return backend_->world_rank() * tokens_ + t; }

  // A small integer in bf16, so that every later sum is exact.
  uint16_t TokenValue(int64_t t, int64_t i) const {
    const uint64_t g = static_cast<uint64_t>(GlobalToken(t) * hidden_ + i);
    return FloatToBf16(static_cast<float>(Mix64(g ^ 0x5EEDULL) & 7));
  }

  Routing Route(const std::string& routing) const {
    Routing route;
    const int64_t sent = tokens_ * top_k_;
    route.expert.resize(sent);
    route.weight.resize(sent);
    const std::vector<double> base_weight = ExpertWeights(experts_, routing == "skewed", options_.skew);
    std::vector<int32_t> drawn;
    for (int64_t t = 0; t < tokens_; ++t) {
      const uint64_t token_hash = Mix64(options_.seed ^ Mix64(static_cast<uint64_t>(GlobalToken(t))));
      DrawExperts(base_weight, top_k_, token_hash, &drawn);
      float prob_sum = 0;
      for (int64_t k = 0; k < top_k_; ++k) {
        route.expert[t * top_k_ + k] = drawn[k];
        const float raw = 0.5f + static_cast<float>(UnitInterval(Mix64(token_hash + 2 * k + 2)));
        route.weight[t * top_k_ + k] = raw;
        prob_sum += raw;
      }
      for (int64_t k = 0; k < top_k_; ++k) route.weight[t * top_k_ + k] /= prob_sum;
    }
    // Permute: send rows in expert order (so in EP-peer order), stable in
    // token order, as Megatron's permute of the routing map.
    route.expert_counts.assign(static_cast<size_t>(experts_), 0);
    for (int32_t e : route.expert) ++route.expert_counts[e];
    std::vector<int64_t> next(static_cast<size_t>(experts_), 0);
    for (int64_t e = 1; e < experts_; ++e) next[e] = next[e - 1] + route.expert_counts[e - 1];
    route.source.resize(sent);
    route.row_of.resize(sent);
    for (int64_t t = 0; t < tokens_; ++t)
      for (int64_t k = 0; k < top_k_; ++k) {
        const int64_t row = next[route.expert[t * top_k_ + k]]++;
        route.source[row] = t;
        route.row_of[t * top_k_ + k] = row;
      }
    return route;
  }

  // The same exchange Run() times, once, to size the buffers.
  Status ExchangeCounts(const std::vector<int32_t>& expert_counts,
                        std::vector<int32_t>* recv_counts, std::vector<int32_t>* gathered) {
    const size_t n = static_cast<size_t>(experts_);
    auto* send = static_cast<int32_t*>(backend_->Alloc(n * 4));
    auto* recv = static_cast<int32_t*>(backend_->Alloc(n * 4));
    auto* all = static_cast<int32_t*>(backend_->Alloc(n * etp_ * 4));
    Status s = send && recv && all ? Status() : Status::Error("dispatch: cannot allocate counts");
    if (s.ok()) s = backend_->Upload(send, expert_counts.data(), n * 4);
    if (s.ok()) s = backend_->AllToAll(send, recv, local_experts_, DType::kI32, *ep_comm_);
    if (s.ok()) s = backend_->AllGather(recv, all, n, DType::kI32, *etp_comm_);
    recv_counts->resize(n);
    gathered->resize(n * etp_);
    if (s.ok()) s = backend_->Download(recv_counts->data(), recv, n * 4);
    if (s.ok()) s = backend_->Download(gathered->data(), all, n * etp_ * 4);
    for (void* p : {static_cast<void*>(send), static_cast<void*>(recv), static_cast<void*>(all)}) {
      if (p != nullptr) backend_->Free(p);
    }
    return s;
  }

  Backend* backend_;
  OpOptions options_;
  std::string skip_;
  std::string error_;  // non-empty: the input cannot be run (Init fails)
  std::vector<std::string> notes_;
  std::vector<DispatchCase> cases_;
  std::unique_ptr<GroupComm> ep_comm_, etp_comm_;
  int ep_ = 1, etp_ = 1;
  int64_t experts_ = 0, top_k_ = 0, hidden_ = 0, local_experts_ = 0, tokens_ = 0;
  bool gemm_ = false;  // --expert gemm
  int64_t ffn_ = 0;    // gemm: moe_ffn_hidden / etp, the shard's F
  std::vector<void*> weights_;              // gemm: w1 and w2 of each local expert
  std::vector<const uint16_t*> w1_, w2_;    // [local expert], into weights_
  int current_ = -1;
  int64_t received_ = 0, gathered_ = 0;  // rows, for the current case
  std::vector<void*> buffers_;
  uint16_t *x_ = nullptr, *send_ = nullptr, *recv_ = nullptr, *gathered_rows_ = nullptr,
           *reduced_ = nullptr, *back_ = nullptr;
  float* out_ = nullptr;
  int64_t *source_ = nullptr, *row_of_ = nullptr;
  float* weight_ = nullptr;
  int32_t *row_expert_ = nullptr, *send_counts_ = nullptr, *recv_counts_ = nullptr,
          *gathered_counts_ = nullptr;
  uint16_t *sorted_rows_ = nullptr, *scratch_ = nullptr;  // gemm, per case
  int64_t *sort_rows_ = nullptr, *unsort_rows_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<Op>> MakeDispatchOp(const BenchInput& input, const OpOptions& options,
                                           Backend* backend) {
  auto op = std::make_unique<DispatchOp>(input, options, backend);
  if (Status s = op->Init(input); !s.ok()) return s;
  return std::unique_ptr<Op>(std::move(op));
}

}  // namespace foldplan::validate
