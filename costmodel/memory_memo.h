// FamilyPeakMemo: MemoryModel::PeakBytes (memory.h) for the layouts of one
// family, bit for bit (tests/costmodel_memory_family_test.cc), what the
// search scores a family's memory with.
#pragma once

#include <cstddef>
#include <memory>

#include "costmodel/memory.h"
#include "planner/layout.h"
#include "planner/pipeline.h"

namespace foldplan {

// MemoryModel::PeakBytes for the layouts of one family, bit for bit, with
// the work shared. A family: layouts with the same world, degrees (pp, vpp,
// tp, cp, dp, ep, etp, edp), mbs, cp_style, schedule and stages (one
// PipelineDescription), differing in recompute, precision, dispatcher,
// a2a_overlap and fsdp (and order, placement and tp_overlap, which memory
// does not read). Per family it keeps each stage's shape and the stages
// that can be the worst; per (recompute, precision, dispatcher) the option
// terms, of which the layers' bytes it keeps across families too (in a
// bounded table; its key, with the model, is stated beside it in
// memory_memo.cc). Not thread-safe (one per thread); reads the model it was
// Reset with, which must outlive its use, like the pipeline.
class FamilyPeakMemo {
 public:
  FamilyPeakMemo();
  ~FamilyPeakMemo();
  FamilyPeakMemo(FamilyPeakMemo&&) noexcept;
  FamilyPeakMemo& operator=(FamilyPeakMemo&&) noexcept;

  // Starts a family: `base` gives the shared fields; `pipeline` is
  // DescribePipeline(base) (or the description PeakBytes would be given).
  void Reset(const MemoryModel& model, const Layout& base, const PipelineDescription& pipeline);
  // MemoryModel::PeakBytes(layout, pipeline, worst_stage), bit for bit, for
  // a layout of the family last Reset.
  double PeakBytes(const Layout& layout, int* worst_stage = nullptr);
  // For tests: the stages PeakBytes scores in this family (those that can
  // be the worst; every stage where the proof's conditions fail).
  size_t StagesScored() const;

 private:
  struct Cache;  // memory_memo.cc
  std::unique_ptr<Cache> cache_;
};

}  // namespace foldplan
