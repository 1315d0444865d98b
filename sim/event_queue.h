// The event loop's queue: events in time order, events at the same time in
// the order they were pushed (a sequence number breaks ties), so a run is
// reproducible. An event is a time and two integers the engine interprets
// (which task, which version of its end: a rescheduled end leaves the old
// entry behind, and the engine skips it). Small enough to read in one
// sitting, like htsim's EventList.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "sim/sim_time.h"

namespace foldplan {

struct SimEvent {
  SimNs time = 0;
  uint64_t seq = 0;
  uint32_t task = 0;
  uint32_t version = 0;
};

class EventQueue {
 public:
  void Push(SimNs time, uint32_t task, uint32_t version) { heap_.push({time, next_seq_++, task, version}); }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  SimEvent Pop() {
    SimEvent e = heap_.top();
    heap_.pop();
    return e;
  }
  uint64_t pushed() const { return next_seq_; }

 private:
  struct Later {
    bool operator()(const SimEvent& a, const SimEvent& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  std::priority_queue<SimEvent, std::vector<SimEvent>, Later> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace foldplan
