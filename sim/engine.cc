#include "sim/engine.h"

#include <algorithm>
#include <limits>

#include "sim/event_queue.h"

namespace foldplan {
namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

// A rank's compute kernel and the SM-holding communication beside it.
struct RankState {
  uint32_t compute = kNone;     // the compute task running, if any
  SimNs remaining = 0;          // its work left at full rate, as of `since`
  SimNs since = 0;
  int held_sms = 0;             // the most SMs a running comm kernel holds
  std::vector<uint16_t> sms;    // every running SM-holding kernel's SMs
};

class Engine {
 public:
  explicit Engine(const TaskGraph& g) : g_(g), ranks_(static_cast<size_t>(g.ranks())) {
    const size_t n = g.size();
    run_.start_ns.assign(n, -1);
    run_.end_ns.assign(n, -1);
    run_.critical_pred.assign(n, kNone);
    deps_left_.assign(n, 0);
    version_.assign(n, 0);
    succ_begin_.assign(n + 1, 0);
    for (const auto& [from, to] : g.edges()) {
      ++deps_left_[to];
      ++succ_begin_[from + 1];
    }
    for (size_t i = 0; i < n; ++i) succ_begin_[i + 1] += succ_begin_[i];
    succ_.resize(g.edges().size());
    std::vector<uint32_t> fill(succ_begin_.begin(), succ_begin_.end() - 1);
    for (const auto& [from, to] : g.edges()) succ_[fill[from]++] = to;
  }

  Result<EngineRun> Run() {
    for (uint32_t i = 0; i < g_.size(); ++i) {
      if (deps_left_[i] == 0) Start(i, 0);
    }
    while (!queue_.empty()) {
      const SimEvent e = queue_.Pop();
      ++run_.events;
      if (e.version != version_[e.task]) continue;  // re-timed since
      Finish(e.task, e.time);
    }
    for (uint32_t i = 0; i < g_.size(); ++i) {
      if (run_.end_ns[i] < 0) {
        return Status::Error("simulator: task " + std::to_string(i) + " (" + g_.label(g_.task(i).label) +
                             ") never started: the step's task graph has a cycle");
      }
    }
    return std::move(run_);
  }

 private:
  // Seconds-free rate arithmetic: compute runs at (N - held) / N.
  SimNs Divisor(const RankState& r) const { return SimNs(g_.gpu_sms()) - r.held_sms; }

  // Work done at the rank's current rate over `elapsed` (rounded down).
  SimNs Done(const RankState& r, SimNs elapsed) const {
    return static_cast<SimNs>((__int128)elapsed * Divisor(r) / g_.gpu_sms());
  }
  // Time to finish `work` at the rank's current rate (rounded up).
  SimNs TimeFor(const RankState& r, SimNs work) const {
    const SimNs d = Divisor(r);
    const __int128 t = ((__int128)work * g_.gpu_sms() + d - 1) / d;
    return t > kMaxSimNs ? kMaxSimNs : static_cast<SimNs>(t);
  }

  void PushEnd(uint32_t task, SimNs at) { queue_.Push(at, task, version_[task]); }

  // The rank's SM-holding kernels changed at `now`: re-time its compute.
  void Retime(RankState& r, SimNs now, int new_held) {
    if (new_held == r.held_sms) return;
    if (r.compute != kNone) {
      r.remaining = std::max<SimNs>(0, r.remaining - Done(r, now - r.since));
      r.since = now;
    }
    r.held_sms = new_held;
    if (r.compute != kNone) {
      ++version_[r.compute];
      PushEnd(r.compute, now + TimeFor(r, r.remaining));
    }
  }

  static int MaxSms(const RankState& r) {
    int m = 0;
    for (uint16_t s : r.sms) m = std::max<int>(m, s);
    return m;
  }

  void Start(uint32_t id, SimNs now) {
    const SimTask& t = g_.task(id);
    run_.start_ns[id] = now;
    const int32_t* members = g_.members(id);
    if (t.kind == SimKind::kCompute) {
      RankState& r = ranks_[static_cast<size_t>(members[0])];
      r.compute = id;
      r.remaining = t.work_ns;
      r.since = now;
      PushEnd(id, now + TimeFor(r, t.work_ns));
    } else {
      PushEnd(id, now + t.work_ns);
    }
    if (t.sms > 0) {
      const uint16_t sms = std::min<uint16_t>(t.sms, static_cast<uint16_t>(std::max(0, g_.gpu_sms() - 1)));
      for (uint32_t k = 0; k < t.member_count; ++k) {
        RankState& r = ranks_[static_cast<size_t>(members[k])];
        r.sms.push_back(sms);
        Retime(r, now, MaxSms(r));
      }
    }
  }

  void Finish(uint32_t id, SimNs now) {
    const SimTask& t = g_.task(id);
    run_.end_ns[id] = now;
    run_.makespan_ns = std::max(run_.makespan_ns, now);
    ++version_[id];  // no later event of this task counts
    const int32_t* members = g_.members(id);
    if (t.kind == SimKind::kCompute) ranks_[static_cast<size_t>(members[0])].compute = kNone;
    if (t.sms > 0) {
      const uint16_t sms = std::min<uint16_t>(t.sms, static_cast<uint16_t>(std::max(0, g_.gpu_sms() - 1)));
      for (uint32_t k = 0; k < t.member_count; ++k) {
        RankState& r = ranks_[static_cast<size_t>(members[k])];
        r.sms.erase(std::find(r.sms.begin(), r.sms.end(), sms));
        Retime(r, now, MaxSms(r));
      }
    }
    for (uint32_t s = succ_begin_[id]; s < succ_begin_[id + 1]; ++s) {
      const uint32_t next = succ_[s];
      run_.critical_pred[next] = id;  // events come in time order: the last to release it ends last
      if (--deps_left_[next] == 0) Start(next, now);
    }
  }

  const TaskGraph& g_;
  std::vector<RankState> ranks_;
  EngineRun run_;
  std::vector<uint32_t> deps_left_, version_, succ_begin_, succ_;
  EventQueue queue_;
};

}  // namespace

Result<EngineRun> RunTaskGraph(const TaskGraph& graph) { return Engine(graph).Run(); }

}  // namespace foldplan
