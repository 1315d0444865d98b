#include "planner/enumerate.h"

#include <cassert>
#include <string>

#include "planner/pipeline_split.h"
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

class Search {
 public:
  Search(const LegalityContext& ctx, const EnumerateOptions& options, Enumeration* out)
      : ctx_(ctx), model_(*ctx.model), job_(*ctx.job), options_(options), out_(out) {}

  void Run() {
    const int world = job_.world_size > 0 ? job_.world_size : ctx_.cluster->total_gpus();
    out_->world = world;
    if (world > ctx_.cluster->total_gpus()) {
      // Every candidate breaks the first rule; count them as one subtree each.
      for (int pp : Divisors(world)) Reject(Rule::kWorldFitsCluster, LeavesBelowPp(world, pp));
      return;
    }
    for (int pp : Divisors(world)) SearchPp(world, pp);
  }

 private:
  // --- Subtree sizes: the number of candidates below each level. ---
  uint64_t Styles(int cp) const { return cp == 1 ? 1 : job_.cp_styles.size(); }
  uint64_t ExpertChoices(size_t divisors) const {
    return model_.is_moe() ? uint64_t(divisors) * divisors : 1;  // (ep, etp) pairs
  }
  uint64_t LeavesBelowMbs() const { return orders_.size() * job_.recompute.size(); }
  uint64_t LeavesBelowEtp() const { return job_.micro_batch_sizes.size() * LeavesBelowMbs(); }
  uint64_t LeavesBelowStyle() const { return ExpertChoices(divisors_.size()) * LeavesBelowEtp(); }
  uint64_t LeavesBelowCp(int cp) const { return Styles(cp) * LeavesBelowStyle(); }
  uint64_t LeavesBelowTp() const {
    uint64_t n = 0;
    for (int cp : divisors_) n += LeavesBelowCp(cp);
    return n;
  }
  uint64_t LeavesBelowVpp() const { return divisors_.size() * LeavesBelowTp(); }
  uint64_t LeavesBelowPp(int world, int pp) {
    divisors_ = Divisors(world / pp);
    orders_ = DistinctOrders(job_.orders, pp);
    return job_.vpp.size() * LeavesBelowVpp();
  }

  void Reject(Rule rule, uint64_t n) {
    out_->rejected[static_cast<size_t>(rule)] += n;
    out_->candidates += n;
  }
  bool RejectIf(const std::vector<Violation>& v, Rule rule, uint64_t n) {
    for (const auto& x : v) {
      if (x.rule == rule) {
        Reject(rule, n);
        return true;
      }
    }
    return false;
  }

  void SearchPp(int world, int pp) {
    LeavesBelowPp(world, pp);  // sets divisors_ and orders_
    Layout l;
    l.world = world;
    l.pp = pp;
    for (int vpp : job_.vpp) {
      l.vpp = vpp;
      if (vpp > 1 && pp == 1) {
        Reject(Rule::kVppNeedsPp, LeavesBelowVpp());
        continue;
      }
      auto split = SplitLayers(model_.layers, pp, vpp);
      if (!split.ok()) {
        Reject(Rule::kPipelineSplit, LeavesBelowVpp());
        continue;
      }
      l.stage_layers = split.value();
      for (int tp : divisors_) SearchTp(l, tp);
    }
  }

  void SearchTp(Layout l, int tp) {
    l.tp = tp;
    if (!rules::TpDividesHeads(model_, tp)) return Reject(Rule::kTpDividesHeads, LeavesBelowTp());
    if (!rules::TpDividesKvHeads(model_, tp)) return Reject(Rule::kTpDividesKvHeads, LeavesBelowTp());
    if (!rules::TpDividesFfn(model_, tp)) return Reject(Rule::kTpDividesFfn, LeavesBelowTp());
    const int stage = l.world / l.pp;
    for (int cp : divisors_) {
      l.cp = cp;
      if (stage % (tp * cp) != 0) {
        Reject(Rule::kDenseProduct, LeavesBelowCp(cp));
        continue;
      }
      l.dp = stage / (tp * cp);
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
  }

  void SearchStyle(Layout l) {
    const uint64_t leaves = LeavesBelowStyle();
    if (!rules::UlyssesHeads(model_, l)) return Reject(Rule::kUlyssesHeads, leaves);
    if (!rules::UlyssesKvHeads(model_, job_, l)) return Reject(Rule::kUlyssesKvHeads, leaves);
    if (!rules::SeqDividesCp(job_.seq_len, l)) return Reject(Rule::kSeqDividesCp, leaves);
    if (job_.seq_len % l.cp != 0 || !rules::SeqDividesTp(job_.seq_len, l)) {
      return Reject(Rule::kSeqDividesTp, leaves);
    }
    if (!model_.is_moe()) {
      l.ep = 1;
      l.etp = l.tp;
      l.edp = l.world / l.pp / l.tp;
      return SearchMbs(l);
    }
    const int stage = l.world / l.pp;
    for (int ep : divisors_) {
      l.ep = ep;
      if (!rules::EpDividesExperts(model_, ep)) {
        Reject(Rule::kEpDividesExperts, divisors_.size() * LeavesBelowEtp());
        continue;
      }
      for (int etp : divisors_) {
        l.etp = etp;
        if (!rules::EtpDividesExpertFfn(model_, etp)) {
          Reject(Rule::kEtpDividesExpertFfn, LeavesBelowEtp());
          continue;
        }
        if (stage % (ep * etp) != 0) {
          Reject(Rule::kExpertProduct, LeavesBelowEtp());
          continue;
        }
        l.edp = stage / (ep * etp);
        SearchMbs(l);
      }
    }
  }

  void SearchMbs(Layout l) {
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
      for (const auto& order : orders_) {
        l.order = order;
        SearchOrder(l);
      }
    }
  }

  void SearchOrder(Layout l) {
    const uint64_t leaves = job_.recompute.size();
    if (l.order != order_checked_ || l.pp != pp_checked_ || l.dp != dp_checked_ ||
        l.edp != edp_checked_ || l.tp != tp_checked_ || l.cp != cp_checked_ ||
        l.ep != ep_checked_ || l.etp != etp_checked_) {
      // Order rules depend only on these fields; cache the last answer.
      order_violations_ = CheckOrder(l);
      order_checked_ = l.order;
      pp_checked_ = l.pp, dp_checked_ = l.dp, edp_checked_ = l.edp, tp_checked_ = l.tp;
      cp_checked_ = l.cp, ep_checked_ = l.ep, etp_checked_ = l.etp;
    }
    for (Rule r : {Rule::kOrderValid, Rule::kOrderPpStride}) {
      if (RejectIf(order_violations_, r, leaves)) return;
    }
    for (Recompute rc : job_.recompute) {
      l.recompute = rc;
      Accept(l);
    }
    MaybePacked(l);
  }

  // A packed variant is a distinct candidate only where it moves ranks:
  // the heavy block is smaller than a domain and does not divide it.
  void MaybePacked(Layout l) {
    const int domain = ctx_.cluster->nvlink_domain_gpus;
    const int block = HeavyBlock(l);
    if (block <= 0 || block >= domain || domain % block == 0) return;
    const uint64_t leaves = job_.recompute.size();
    l.placement = Placement::kPacked;
    if (PackBlocks(l.world, block, domain).gpus_needed > ctx_.cluster->total_gpus()) {
      return Reject(Rule::kPlacementFits, leaves);
    }
    for (Recompute rc : job_.recompute) {
      l.recompute = rc;
      Accept(l);
    }
  }

  void Accept(const Layout& l) {
    ++out_->candidates;
    ++out_->legal_count;
    if (options_.collect_layouts) out_->legal.push_back(l);
  }

  const LegalityContext& ctx_;
  const ModelSpec& model_;
  const JobSpec& job_;
  EnumerateOptions options_;
  Enumeration* out_;
  std::vector<int> divisors_;
  std::vector<std::string> orders_;
  std::vector<Violation> order_violations_;
  std::string order_checked_;
  int pp_checked_ = 0, dp_checked_ = 0, edp_checked_ = 0, tp_checked_ = 0, cp_checked_ = 0;
  int ep_checked_ = 0, etp_checked_ = 0;
};

}  // namespace

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

Enumeration EnumerateLayouts(const LegalityContext& ctx, const EnumerateOptions& options) {
  assert(ctx.cluster && ctx.model && ctx.job);
  Enumeration out;
  Search(ctx, options, &out).Run();
  return out;
}

}  // namespace foldplan
