// The per-thread memos through which CostModel's search paths read
// (costmodel/evaluate_memo.cc, search_score.cc). Internal to costmodel/*.cc.
//
// ThreadMemo<T>(model_id) is one T per thread, for one cost model at a
// time: cleared (T::Clear) when the thread next serves another model, so
// that no model reads another's data. Each memo states its key and the one
// function it memoises; each returns that function's value bit for bit
// (tests/costmodel_score_cache_test.cc holds CostModel::Score, which reads
// through them, to ScoreReference, which reads through none).
#pragma once

#include <cstdint>

namespace foldplan {

// An inline template, so that every file of the library shares one T per
// thread (the compute-times memo is read from evaluate.cc and from
// evaluate_memo.cc).
template <class T>
T& ThreadMemo(uint64_t model_id) {
  struct Slot {
    uint64_t model_id = 0;
    T cache;
  };
  thread_local Slot slot;
  if (slot.model_id != model_id) {
    slot.model_id = model_id;
    slot.cache.Clear();
  }
  return slot.cache;
}

}  // namespace foldplan
