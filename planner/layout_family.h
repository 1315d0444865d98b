// A family of legal layouts: those that share every degree, the micro-batch
// size, the pipeline (pp, vpp, schedule, stages) and the CP style, and
// differ only in their arrangement (order and placement) and their recipe
// variant (recompute, dispatcher, EP overlap, precision, FSDP, TP overlap,
// CUDA graphs).
// Enumeration (planner/enumerate.h) hands the search one family at a time,
// so that a scorer can share what depends on the family alone, or on part
// of a variant, across its members (planner/scoring.h ScoreFamily), and
// count alike members at once instead of visiting each.
//
// Members are the legal (arrangement, variant) pairs, arrangement-major in
// search order: member (a, v) is legal unless variant v needs its expert
// TP x EP group inside one NVLink domain (HybridEP) and arrangement a does
// not give that. Every other rule is decided for the whole family, so the
// variants listed are legal under each arrangement but for that one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/layout.h"

namespace foldplan {

struct LayoutArrangement {
  std::string order;
  Placement placement = Placement::kLinear;
  bool expert_in_domain = false;  // every expert TP x EP group inside one NVLink domain
};

struct RecipeVariant {
  Recompute recompute;
  Dispatcher dispatcher = Dispatcher::kAllToAll;
  bool a2a_overlap = false;
  Precision precision = Precision::kBF16;
  bool fsdp = false;
  bool tp_overlap = false;
  CudaGraphs cuda_graphs;
  bool needs_expert_in_domain = false;  // HybridEP (rule hybridep_in_domain)
  bool operator==(const RecipeVariant&) const = default;
};

struct LayoutFamily {
  // The shared fields; its arrangement and recipe fields are the first
  // member's.
  Layout base;
  std::vector<LayoutArrangement> arrangements;  // in search order
  std::vector<RecipeVariant> variants;          // in search order

  bool Legal(size_t arrangement, size_t variant) const {
    return !variants[variant].needs_expert_in_domain || arrangements[arrangement].expert_in_domain;
  }
  // Legal members of one variant.
  uint64_t MembersOf(size_t variant) const {
    if (!variants[variant].needs_expert_in_domain) return arrangements.size();
    uint64_t n = 0;
    for (const LayoutArrangement& a : arrangements) n += a.expert_in_domain ? 1 : 0;
    return n;
  }
  uint64_t size() const {
    uint64_t n = 0;
    for (size_t v = 0; v < variants.size(); ++v) n += MembersOf(v);
    return n;
  }
  // Writes arrangement a's fields, and variant v's, into *layout (whose
  // shared fields are the base's).
  static void SetArrangement(const LayoutArrangement& a, Layout* layout) {
    layout->order = a.order;
    layout->placement = a.placement;
  }
  // The recipe variant a layout runs (needs_expert_in_domain left false:
  // the rules decide it).
  static RecipeVariant VariantOf(const Layout& layout) {
    RecipeVariant v;
    v.recompute = layout.recompute;
    v.dispatcher = layout.dispatcher;
    v.a2a_overlap = layout.a2a_overlap;
    v.precision = layout.precision;
    v.fsdp = layout.fsdp;
    v.tp_overlap = layout.tp_overlap;
    v.cuda_graphs = layout.cuda_graphs;
    return v;
  }
  static void SetVariant(const RecipeVariant& v, Layout* layout) {
    layout->recompute = v.recompute;
    layout->dispatcher = v.dispatcher;
    layout->a2a_overlap = v.a2a_overlap;
    layout->precision = v.precision;
    layout->fsdp = v.fsdp;
    layout->tp_overlap = v.tp_overlap;
    layout->cuda_graphs = v.cuda_graphs;
  }
  // Calls f(layout) with each legal member in order; the reference is
  // valid only during the call.
  template <class F>
  void ForEachMember(F&& f) const {
    Layout l = base;
    for (size_t a = 0; a < arrangements.size(); ++a) {
      SetArrangement(arrangements[a], &l);
      for (size_t v = 0; v < variants.size(); ++v) {
        if (!Legal(a, v)) continue;
        SetVariant(variants[v], &l);
        f(static_cast<const Layout&>(l));
      }
    }
  }
};

}  // namespace foldplan
