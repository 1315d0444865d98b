#include "planner/enumerate.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <span>
#include <string>
#include <tuple>

#include "planner/pipeline.h"
#include "planner/trainer_rules.h"
#include "topology/cluster_shape.h"

namespace foldplan {
namespace {

// Orders that give distinct rank maps: with pp == 1 the pp token is inert.
std::vector<std::string> DistinctOrders(const std::vector<std::string>& orders, int pp) {
  std::vector<std::string> out;
  std::vector<std::string> keys;
  for (const auto& order : orders) {
    std::string key = order;
    if (pp == 1) {
      std::string stripped;
      size_t start = 0;
      while (start <= key.size()) {
        size_t dash = key.find('-', start);
        if (dash == std::string::npos) dash = key.size();
        const std::string token = key.substr(start, dash - start);
        if (token != "pp") stripped += (stripped.empty() ? "" : "-") + token;
        start = dash + 1;
      }
      key = stripped;
    }
    bool seen = false;
    for (const auto& k : keys) seen |= (k == key);
    if (!seen) {
      keys.push_back(key);
      out.push_back(order);
    }
  }
  return out;
}

bool Agrees(const std::optional<int>& pin, int value) { return !pin || *pin == value; }

// The first of `list` that `preferred` accepts, else its first: one value.
template <class T, class Pred>
std::vector<T> OneOf(const std::vector<T>& list, Pred preferred) {
  for (const T& v : list) {
    if (preferred(v)) return {v};
  }
  std::vector<T> out = list;
  out.resize(1);
  return out;
}

}  // namespace

class EnumerationWalker {
 public:
  EnumerationWalker(const LegalityContext& ctx, const LayoutPins* pins)
      : ctx_(ctx), model_(*ctx.model), job_(*ctx.job),
        pins_(pins ? *pins : LayoutPins{}),
        weights_(WeightsOrDefault(ctx.weights)) {
    // Recipe candidates; a dense model has no dispatch to choose or overlap,
    // so one of each, whichever order the job lists them in: no EP overlap
    // (a dense model breaks a2a_overlap_needs) and a dispatcher other than
    // HybridEP (whose rule may refuse) when the job lists one.
    dispatchers_ = job_.dispatchers;
    a2a_overlap_ = job_.a2a_overlap;
    if (!model_.is_moe()) {
      dispatchers_ = OneOf(job_.dispatchers, [](Dispatcher d) { return d != Dispatcher::kHybridEP; });
      a2a_overlap_ = OneOf(job_.a2a_overlap, [](bool overlap) { return !overlap; });
    }
    for (Dispatcher d : dispatchers_) has_hybridep_ |= d == Dispatcher::kHybridEP;
    // No schedule listed: one candidate per vpp, the implied schedule, left
    // unnamed so that layouts print as they always have.
    schedules_.assign(job_.pipeline_schedules.begin(), job_.pipeline_schedules.end());
    if (schedules_.empty()) schedules_.push_back(std::nullopt);
    for (Precision p : job_.precisions) precision_ok_.push_back(rules::PrecisionProblem(ctx.cluster->gpu, p).empty());
    world_ = job_.world_size > 0 ? job_.world_size : ctx_.cluster->total_gpus();
  }

  int world() const { return world_; }

  std::vector<EnumerationItem> Items() {
    std::vector<EnumerationItem> items;
    for (int pp : PpValues(world_)) {
      if (world_ > ctx_.cluster->total_gpus()) {
        // Every candidate breaks the first rule; one item counts the pp's subtree.
        items.push_back({pp, 0, 0, 0});
        continue;
      }
      SetPp(pp);
      for (int vpp : VppValues(pp)) {
        for (size_t s = 0; s < schedules_.size(); ++s) {
          for (int tp : TpValues()) {
            for (int cp : CpValues(tp)) items.push_back({pp, vpp, s, tp, cp});
          }
        }
      }
    }
    return items;
  }

  // The subtree of one (pp, vpp, schedule, tp, cp); a rejection
  // at the vpp or tp level counts this cp's share of it (the shares add up
  // to LeavesBelowVpp over the items of one (pp, vpp, schedule), and to
  // LeavesBelowTp over those of one tp).
  // Exactly one of `visit` and `visit_family` is non-null.
  void Run(const EnumerationItem& item, Enumeration* out, const LayoutVisitor* visit,
           const FamilyVisitor* visit_family) {
    out_ = out;
    visit_ = visit;
    visit_family_ = visit_family;
    if (item.vpp == 0) {
      Reject(Rule::kWorldFitsCluster, LeavesBelowPp(world_, item.pp));
      return;
    }
    SetPp(item.pp);
    Layout& l = item_layout_;
    l.world = world_;
    l.pp = item.pp;
    l.vpp = item.vpp;
    // The schedule decides which rank holds which stage, so the chosen
    // stages; its own rule waits for the micro-batches (SearchMbs).
    l.schedule = schedules_[item.schedule];
    if (item.vpp > 1 && item.pp == 1) return Reject(Rule::kVppNeedsPp, LeavesBelowCp(item.tp, item.cp));
    if (!StagesCached(&l)) return Reject(Rule::kPipelineSplit, LeavesBelowCp(item.tp, item.cp));
    SearchTp(l, item.tp, item.cp);
  }

 private:
  // One order of orders_, parsed, and its JudgeOrder for the degrees last
  // asked: the families of one set of degrees (each mbs, CP style) meet
  // each order again. Key: the order (one slot per orders_ entry, reset
  // with them) and (pp, dp, edp, tp, cp, ep, etp), all JudgeOrder reads
  // besides the order.
  struct OrderSlot {
    OrderString parsed;  // of orders_[i] (its token a view into it)
    std::array<int, 7> degrees{};  // all 0 (no layout's): none yet
    OrderVerdict verdict;
  };

  // Sets stage_, divisors_ and orders_ for pp (once per pp in a row).
  void SetPp(int pp) {
    if (pp_set_ == pp) return;
    LeavesBelowPp(world_, pp);
    pp_set_ = pp;
  }

  // StagesFor, remembered per (pp, vpp, schedule): the items of one differ
  // only in tp and cp, and the search walks the items of one (pp, tp, cp)
  // in a run, each vpp and schedule in turn (RunsOf). Bounded:
  // the keys of the pp in hand (cleared when pp changes).
  bool StagesCached(Layout* l) {
    if (stages_pp_ != l->pp) {
      stages_.clear();
      stages_pp_ = l->pp;
    }
    for (const Stages& s : stages_) {
      if (s.vpp == l->vpp && s.schedule == l->schedule) {
        l->stage_layers = s.layout.stage_layers;
        l->stage_mtp = s.layout.stage_mtp;
        l->explicit_stages = s.layout.explicit_stages;
        l->pp_layout_given = s.layout.pp_layout_given;
        return s.ok;
      }
    }
    const bool ok = StagesFor(l);
    stages_.push_back({l->vpp, l->schedule, ok, *l});
    return ok;
  }

  // --- The values of each level (the pins narrow them). ---
  std::vector<int> PpValues(int world) const {
    std::vector<int> out;
    for (int pp : Divisors(world)) {
      if (Agrees(pins_.pp, pp)) out.push_back(pp);
    }
    return out;
  }
  // Pinned stages agree only with their own pp x vpp.
  std::vector<int> VppValues(int pp) const {
    std::vector<int> out;
    for (int vpp : job_.vpp) {
      if (!pins_.stages || static_cast<int>(pins_.stages->size()) == pp * vpp) out.push_back(vpp);
    }
    return out;
  }
  std::vector<int> TpValues() const {
    std::vector<int> out;
    for (int tp : divisors_) {
      if (Agrees(pins_.tp, tp)) out.push_back(tp);
    }
    return out;
  }
  // With dp pinned, only the cp whose tp x cp leaves that dp.
  std::vector<int> CpValues(int tp) const {
    std::vector<int> out;
    for (int cp : divisors_) {
      if (!Agrees(pins_.cp, cp)) continue;
      if (pins_.dp && (stage_ % (tp * cp) != 0 || stage_ / (tp * cp) != *pins_.dp)) continue;
      out.push_back(cp);
    }
    return out;
  }
  // (ep, etp) pairs; a dense model has one, (1, tp). A MoE model's do not
  // depend on tp: listed once per pp (moe_experts_, by ListMoeExperts).
  bool ExpertAgrees(int ep, int etp) const {
    if (!Agrees(pins_.ep, ep) || !Agrees(pins_.etp, etp)) return false;
    return !pins_.edp || (stage_ % (ep * etp) == 0 && stage_ / (ep * etp) == *pins_.edp);
  }
  void ListMoeExperts() {
    moe_experts_.clear();
    if (!model_.is_moe()) return;
    for (int ep : divisors_) {
      for (int etp : divisors_) {
        if (ExpertAgrees(ep, etp)) moe_experts_.push_back({ep, etp});
      }
    }
  }
  // The pairs of tp; `dense` holds a dense model's.
  std::span<const std::pair<int, int>> ExpertValues(int tp, std::pair<int, int>& dense) const {
    if (model_.is_moe()) return moe_experts_;
    dense = {1, tp};
    return {&dense, ExpertAgrees(1, tp) ? size_t{1} : size_t{0}};
  }
  uint64_t ExpertCount(int tp) const {
    return model_.is_moe() ? moe_experts_.size() : ExpertAgrees(1, tp) ? 1 : 0;
  }

  // --- Subtree sizes: the number of candidates below each level. ---
  uint64_t Styles(int cp) const { return cp == 1 ? 1 : job_.cp_styles.size(); }
  uint64_t OptionLeaves() const {
    return uint64_t(job_.recompute.size()) * dispatchers_.size() * a2a_overlap_.size() *
           job_.precisions.size() * job_.fsdp.size() * job_.tp_overlap.size() * job_.cuda_graphs.size();
  }
  uint64_t LeavesBelowMbs() const { return orders_.size() * OptionLeaves(); }
  uint64_t LeavesBelowEtp() const { return job_.micro_batch_sizes.size() * LeavesBelowMbs(); }
  uint64_t LeavesBelowStyle(int tp) const { return ExpertCount(tp) * LeavesBelowEtp(); }
  uint64_t LeavesBelowCp(int tp, int cp) const { return Styles(cp) * LeavesBelowStyle(tp); }
  uint64_t LeavesBelowTp(int tp) const {
    uint64_t n = 0;
    for (int cp : CpValues(tp)) n += LeavesBelowCp(tp, cp);
    return n;
  }
  uint64_t LeavesBelowVpp() const {
    uint64_t n = 0;
    for (int tp : TpValues()) n += LeavesBelowTp(tp);
    return n;
  }
  uint64_t LeavesBelowPp(int world, int pp) {
    stage_ = world / pp;
    divisors_ = Divisors(stage_);
    ListMoeExperts();
    orders_ = DistinctOrders(job_.orders, pp);
    order_slots_.assign(orders_.size(), OrderSlot{});
    for (size_t i = 0; i < orders_.size(); ++i) order_slots_[i].parsed = ParseOrderString(orders_[i]);
    return VppValues(pp).size() * schedules_.size() * LeavesBelowVpp();
  }

  void Reject(Rule rule, uint64_t n) {
    out_->rejected[static_cast<size_t>(rule)] += n;
    out_->candidates += n;
  }

  // The stages of (pp, vpp): the pinned ones, else the chosen ones.
  bool StagesFor(Layout* l) const {
    if (pins_.stages) {
      l->stage_layers = *pins_.stages;
      l->stage_mtp = pins_.stage_mtp.value_or(std::vector<int>{});
      l->explicit_stages = true;
      l->pp_layout_given = pins_.pp_layout;
      return CheckStages(l->stage_layers, l->stage_mtp, model_, l->pp, l->vpp).ok();
    }
    auto split = ChooseStageLayers(model_, l->pp, l->vpp, weights_, l->schedule);
    if (!split.ok()) return false;
    l->stage_layers = std::move(split).value();
    return true;
  }

  // The levels below fill `l` in place, each field before it is read: a
  // level writes the fields it chooses and reads only those of the levels
  // above it (no copy per candidate).
  void SearchTp(Layout& l, int tp, int cp) {
    l.tp = tp;
    if (!rules::TpDividesHeads(model_, tp)) return Reject(Rule::kTpDividesHeads, LeavesBelowCp(tp, cp));
    if (!rules::TpDividesKvHeads(model_, tp)) return Reject(Rule::kTpDividesKvHeads, LeavesBelowCp(tp, cp));
    if (!rules::TpDividesFfn(model_, tp)) return Reject(Rule::kTpDividesFfn, LeavesBelowCp(tp, cp));
    l.cp = cp;
    if (stage_ % (tp * cp) != 0) return Reject(Rule::kDenseProduct, LeavesBelowCp(tp, cp));
    l.dp = stage_ / (tp * cp);
    if (cp == 1) {
      l.cp_style = job_.cp_styles.front();
      SearchStyle(l);
    } else {
      for (CpStyle style : job_.cp_styles) {
        l.cp_style = style;
        SearchStyle(l);
      }
    }
  }

  void SearchStyle(Layout& l) {
    std::pair<int, int> dense;
    const std::span<const std::pair<int, int>> experts = ExpertValues(l.tp, dense);
    const uint64_t leaves = experts.size() * LeavesBelowEtp();  // LeavesBelowStyle
    if (!rules::UlyssesHeads(model_, l)) return Reject(Rule::kUlyssesHeads, leaves);
    if (!rules::UlyssesKvHeads(model_, job_, l)) return Reject(Rule::kUlyssesKvHeads, leaves);
    if (!rules::SeqDividesCp(job_.seq_len, l)) return Reject(Rule::kSeqDividesCp, leaves);
    if (job_.seq_len % l.cp != 0 || !rules::SeqDividesTp(job_.seq_len, l)) {
      return Reject(Rule::kSeqDividesTp, leaves);
    }
    for (auto [ep, etp] : experts) {
      l.ep = ep;
      l.etp = etp;
      if (!rules::EpDividesExperts(model_, ep)) {
        Reject(Rule::kEpDividesExperts, LeavesBelowEtp());
        continue;
      }
      if (!rules::EtpDividesExpertFfn(model_, etp)) {
        Reject(Rule::kEtpDividesExpertFfn, LeavesBelowEtp());
        continue;
      }
      if (stage_ % (ep * etp) != 0) {
        Reject(Rule::kExpertProduct, LeavesBelowEtp());
        continue;
      }
      l.edp = stage_ / (ep * etp);
      SearchMbs(l);
    }
  }

  void SearchMbs(Layout& l) {
    for (int mbs : job_.micro_batch_sizes) {
      l.mbs = mbs;
      if (!rules::BatchDivides(job_.global_batch, l)) {
        Reject(Rule::kBatchDivides, LeavesBelowMbs());
        continue;
      }
      if (!rules::MicrobatchesCoverPp(job_.global_batch, l)) {
        Reject(Rule::kMicrobatchesCoverPp, LeavesBelowMbs());
        continue;
      }
      if (!rules::InterleavedMicrobatches(job_.global_batch, l)) {
        Reject(Rule::kInterleavedMicrobatches, LeavesBelowMbs());
        continue;
      }
      if (!rules::ScheduleFits(job_.global_batch, l)) {
        Reject(Rule::kScheduleNeeds, LeavesBelowMbs());
        continue;
      }
      family_.arrangements.clear();
      for (size_t i = 0; i < orders_.size(); ++i) {
        l.order = orders_[i];
        SearchOrder(l, order_slots_[i]);
      }
      EmitFamily(l);
    }
  }

  // `slot` is l.order's of order_slots_.
  void SearchOrder(Layout& l, OrderSlot& slot) {
    const std::array<int, 7> degrees = {l.pp, l.dp, l.edp, l.tp, l.cp, l.ep, l.etp};
    if (slot.degrees != degrees) {
      slot.degrees = degrees;
      slot.verdict = JudgeOrder(l, slot.parsed);
    }
    const OrderVerdict& verdict = slot.verdict;
    if (verdict.broken) return Reject(*verdict.broken, OptionLeaves());
    if (!pins_.placement || *pins_.placement == Placement::kLinear) AddArrangement(l, Placement::kLinear, verdict.blocks);
    MaybePacked(l, verdict.blocks);
  }

  // A packed variant is a distinct candidate only where it moves ranks:
  // the heavy block is smaller than a domain and does not divide it.
  void MaybePacked(Layout& l, const OrderBlocks& blocks) {
    if (pins_.placement && *pins_.placement == Placement::kLinear) return;
    const int domain = ctx_.cluster->nvlink_domain_gpus;
    const int block = blocks.heavy;
    if (block <= 0 || block >= domain || domain % block == 0) return;
    if (PackBlocks(l.world, block, domain).gpus_needed > ctx_.cluster->total_gpus()) {
      return Reject(Rule::kPlacementFits, OptionLeaves());
    }
    AddArrangement(l, Placement::kPacked, blocks);
  }

  // An (order, placement) that passed every rule before the recipe ones,
  // with what the HybridEP rule reads of it (needed only for HybridEP).
  void AddArrangement(Layout& l, Placement placement, const OrderBlocks& blocks) {
    l.placement = placement;
    if (job_.trainer != Trainer::kMegatron) {
      if (const auto v = TrainerArrangementProblem(job_.trainer, l, {ctx_.cluster, &model_, &job_})) {
        return Reject(v->rule, OptionLeaves());
      }
    }
    const bool in_domain = has_hybridep_ && ExpertGroupInDomain(l, ctx_.cluster->nvlink_domain_gpus, blocks);
    family_.arrangements.push_back({l.order, placement, in_domain});
  }

  // The recipe variants legal under a family's degrees and the rejections
  // of the rest, for an arrangement whose expert group is in one domain
  // ([0]) and one whose is not ([1]), into family_.variants and
  // variant_counts_. The rules read of the family only tp (TP overlap) and
  // what rules::A2aOverlapAllowed reads (ep, pp, vpp): decided once per
  // such key, the families of one in a row share them.
  struct VariantCounts {
    std::array<uint64_t, kRuleCount> rejected{};
    uint64_t legal = 0;
  };
  void DecideVariants(const Layout& shared) {
    const std::array<int, 4> key = {shared.tp < 2 ? 1 : 2, shared.ep, shared.pp, shared.vpp};
    if (variants_decided_ && key == variants_key_) return;
    variants_decided_ = true;
    variants_key_ = key;
    Layout l = shared;
    family_.variants.clear();
    variant_counts_ = {};
    std::array<uint64_t, kRuleCount>& in_domain = variant_counts_[0].rejected;
    std::array<uint64_t, kRuleCount>& off_domain = variant_counts_[1].rejected;
    for (const Recompute& rc : job_.recompute) {
      l.recompute = rc;
      for (Dispatcher d : dispatchers_) {
        l.dispatcher = d;
        for (bool a2a : a2a_overlap_) {
          l.a2a_overlap = a2a;
          // Precision, FSDP and TP overlap do not enter the EP-overlap rule.
          const bool a2a_ok = rules::A2aOverlapAllowed(model_, l);
          for (size_t p = 0; p < job_.precisions.size(); ++p) {
            for (bool fsdp : job_.fsdp) {
              for (bool tp_overlap : job_.tp_overlap) {
                for (const CudaGraphs& graphs : job_.cuda_graphs) {
                  const bool hybrid = d == Dispatcher::kHybridEP;
                  auto reject = [&](Rule rule, bool in, bool off) {
                    in_domain[static_cast<size_t>(rule)] += in ? 1 : 0;
                    off_domain[static_cast<size_t>(rule)] += off ? 1 : 0;
                  };
                  if (!precision_ok_[p]) {
                    reject(Rule::kPrecisionSupported, true, true);
                    continue;
                  }
                  // Off-domain arrangements break hybridep_in_domain first.
                  if (hybrid) reject(Rule::kHybridEpInDomain, false, true);
                  if (!a2a_ok) {
                    reject(Rule::kA2aOverlapNeeds, true, !hybrid);
                    continue;
                  }
                  if (tp_overlap && l.tp < 2) {
                    reject(Rule::kTpOverlapNeedsTp, true, !hybrid);
                    continue;
                  }
                  l.cuda_graphs = graphs;
                  if (!rules::CudaGraphsProblem(model_, job_, l).empty()) {
                    reject(Rule::kCudaGraphsMoeSync, true, !hybrid);
                    continue;
                  }
                  l.precision = job_.precisions[p];
                  l.fsdp = fsdp;
                  l.tp_overlap = tp_overlap;
                  if (const auto v = MegatronRecipeProblem(l, &job_)) {
                    reject(v->rule, true, !hybrid);
                    continue;
                  }
                  if (job_.trainer != Trainer::kMegatron) {
                    if (const auto v = TrainerRecipeProblem(job_.trainer, l, {ctx_.cluster, &model_, &job_})) {
                      reject(v->rule, true, !hybrid);
                      continue;
                    }
                  }
                  ++variant_counts_[0].legal;
                  variant_counts_[1].legal += hybrid ? 0 : 1;
                  family_.variants.push_back({rc, d, a2a, job_.precisions[p], fsdp, tp_overlap, graphs, hybrid});
                }
              }
            }
          }
        }
      }
    }
    variant_rules_.clear();
    for (int r = 0; r < kRuleCount; ++r) {
      if (in_domain[static_cast<size_t>(r)] + off_domain[static_cast<size_t>(r)] > 0) {
        variant_rules_.push_back(static_cast<Rule>(r));
      }
    }
  }

  // Every combination of the recipe candidates of the family's arrangements,
  // each checked against the recipe rules in rule order. Only the HybridEP
  // rule reads the arrangement (read only for HybridEP), so the variants
  // and the rejections are decided once for an arrangement whose expert
  // group is in one domain and once for one whose is not; each arrangement
  // then adds its kind's counts (added once per kind, times its
  // arrangements). The family's layouts go to the visitor.
  void EmitFamily(const Layout& shared) {
    if (family_.arrangements.empty()) return;
    DecideVariants(shared);
    const VariantCounts& in_domain = variant_counts_[0];
    const VariantCounts& off_domain = variant_counts_[1];
    uint64_t in_domain_arrangements = 0;
    for (const LayoutArrangement& a : family_.arrangements) in_domain_arrangements += a.expert_in_domain ? 1 : 0;
    const uint64_t off_domain_arrangements = family_.arrangements.size() - in_domain_arrangements;
    for (Rule r : variant_rules_) {
      const size_t i = static_cast<size_t>(r);
      Reject(r, in_domain.rejected[i] * in_domain_arrangements + off_domain.rejected[i] * off_domain_arrangements);
    }
    const uint64_t legal = in_domain.legal * in_domain_arrangements + off_domain.legal * off_domain_arrangements;
    out_->candidates += legal;
    out_->legal_count += legal;
    if (legal == 0) return;
    family_.base = shared;
    // The base's arrangement and variant are the first member's.
    for (size_t a = 0, found = 0; a < family_.arrangements.size() && !found; ++a) {
      for (size_t v = 0; v < family_.variants.size() && !found; ++v) {
        if (!family_.Legal(a, v)) continue;
        LayoutFamily::SetArrangement(family_.arrangements[a], &family_.base);
        LayoutFamily::SetVariant(family_.variants[v], &family_.base);
        found = 1;
      }
    }
    if (visit_family_) {
      (*visit_family_)(family_);
    } else if (*visit_) {
      family_.ForEachMember(*visit_);
    }
  }

  const LegalityContext& ctx_;
  const ModelSpec& model_;
  const JobSpec& job_;
  Enumeration* out_ = nullptr;           // the running item's counts
  const LayoutVisitor* visit_ = nullptr;  // the running item's visitor, or
  const FamilyVisitor* visit_family_ = nullptr;  // its family visitor
  LayoutFamily family_;                   // the family being built (SearchMbs)
  bool variants_decided_ = false;         // family_.variants are those of variants_key_
  std::array<int, 4> variants_key_{};     // DecideVariants' key
  std::array<VariantCounts, 2> variant_counts_{};  // in one domain, not
  std::vector<Rule> variant_rules_;                 // the rules either counts some rejections under
  int world_ = 0;
  int pp_set_ = 0;  // the pp stage_, divisors_ and orders_ are of (0: none yet)
  Layout item_layout_;
  struct Stages {  // StagesCached's, for one (vpp, schedule) of stages_pp_
    int vpp = 0;
    std::optional<PipelineSchedule> schedule;
    bool ok = false;
    Layout layout;  // its stage fields as StagesFor set them
  };
  int stages_pp_ = 0;
  std::vector<Stages> stages_;
  LayoutPins pins_;
  BlockWeights weights_;
  std::vector<Dispatcher> dispatchers_;
  std::vector<bool> a2a_overlap_;
  std::vector<std::optional<PipelineSchedule>> schedules_;  // unset: the implied one
  bool has_hybridep_ = false;       // HybridEP among dispatchers_
  std::vector<bool> precision_ok_;  // per job precision: the GPU runs it
  int stage_ = 1;                   // G = world / pp
  std::vector<int> divisors_;
  std::vector<std::pair<int, int>> moe_experts_;  // a MoE model's (ep, etp) of this pp
  std::vector<std::string> orders_;
  std::vector<OrderSlot> order_slots_;  // one per orders_ entry
};

LayoutEnumerator::LayoutEnumerator(const LegalityContext& ctx, const LayoutPins* pins)
    : walker_(std::make_unique<EnumerationWalker>(ctx, pins)) {
  assert(ctx.cluster && ctx.model && ctx.job);
}
LayoutEnumerator::~LayoutEnumerator() = default;
LayoutEnumerator::LayoutEnumerator(LayoutEnumerator&&) noexcept = default;
LayoutEnumerator& LayoutEnumerator::operator=(LayoutEnumerator&&) noexcept = default;
int LayoutEnumerator::world() const { return walker_->world(); }
std::vector<EnumerationItem> LayoutEnumerator::Items() { return walker_->Items(); }
void LayoutEnumerator::Run(const EnumerationItem& item, Enumeration* counts, const LayoutVisitor& visit) {
  walker_->Run(item, counts, &visit, nullptr);
}
void LayoutEnumerator::RunFamilies(const EnumerationItem& item, Enumeration* counts, const FamilyVisitor& visit) {
  walker_->Run(item, counts, nullptr, &visit);
}

ItemRuns RunsOf(const std::vector<EnumerationItem>& items) {
  const auto run = [](const EnumerationItem& i) { return std::tie(i.pp, i.tp, i.cp); };
  ItemRuns out{items, {}};
  std::stable_sort(out.items.begin(), out.items.end(),
                   [&](const EnumerationItem& a, const EnumerationItem& b) { return run(a) < run(b); });
  for (size_t i = 0; i < out.items.size(); ++i) {
    if (i == 0 || run(out.items[i]) != run(out.items[i - 1])) out.starts.push_back(i);
  }
  out.starts.push_back(out.items.size());
  return out;
}

std::vector<int> Divisors(int n) {
  std::vector<int> small, large;
  for (int d = 1; 1LL * d * d <= n; ++d) {
    if (n % d == 0) {
      small.push_back(d);
      if (d != n / d) large.push_back(n / d);
    }
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

JobSpec PinnedJob(const JobSpec& job, const LayoutPins& pins) {
  JobSpec out = job;
  if (pins.world) out.world_size = *pins.world;
  if (pins.mbs) out.micro_batch_sizes = {*pins.mbs};
  if (pins.vpp) out.vpp = {*pins.vpp};
  if (pins.order) out.orders = {*pins.order};
  if (pins.cp_style) out.cp_styles = {*pins.cp_style};
  if (pins.recompute) out.recompute = {*pins.recompute};
  if (pins.dispatcher) out.dispatchers = {*pins.dispatcher};
  if (pins.a2a_overlap) out.a2a_overlap = {*pins.a2a_overlap};
  if (pins.precision) out.precisions = {*pins.precision};
  if (pins.fsdp) out.fsdp = {*pins.fsdp};
  if (pins.tp_overlap) out.tp_overlap = {*pins.tp_overlap};
  if (pins.cuda_graphs) out.cuda_graphs = {*pins.cuda_graphs};
  if (pins.schedule) out.pipeline_schedules = {*pins.schedule};
  return out;
}

Enumeration EnumerateLayouts(const LegalityContext& ctx, const EnumerateOptions& options) {
  assert(ctx.cluster && ctx.model && ctx.job);
  Enumeration out;
  LayoutEnumerator walker(ctx, options.pins);
  out.world = walker.world();
  const LayoutVisitor visit = [&](const Layout& l) {
    if (options.collect_layouts) out.legal.push_back(l);
    if (options.visit) options.visit(l);
  };
  for (const EnumerationItem& item : walker.Items()) walker.Run(item, &out, visit);
  return out;
}

}  // namespace foldplan
