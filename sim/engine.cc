#include "sim/engine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <unordered_map>

#include "sim/event_queue.h"
#include "sim/flow_network.h"

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

// A member's bytes on one link, as solo nanoseconds left at a speed (its
// max-min rate over its cap, at most 1).
struct Flow {
  uint32_t task = 0;
  int32_t rank = 0;
  int link = 0;          // 0: NVLink, 1: NIC (inside the unit), 2: NIC and the uplink share
  FlowNetwork::FlowId id = 0;
  double cap = 0;        // bytes/s alone
  double left_ns = 0;    // solo nanoseconds of transfer left, as of `since`
  double speed = 1;
  SimNs since = 0;
  SimNs finish = 0;
};

class Engine {
 public:
  explicit Engine(const TaskGraph& g) : g_(g), ranks_(static_cast<size_t>(g.ranks())) {
    links_ = g.nvlink_bytes_per_s() > 0 || g.nic_bytes_per_s() > 0 || g.spine_bytes_per_s() > 0;
    if (links_) {
      nets_.resize(ranks_.size());
      rank_flows_.resize(ranks_.size());
      run_.link_bytes.assign(ranks_.size() * 3, 0.0);
    }
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

  Result<EngineRun> Run(const std::function<void(double)>& progress) {
    for (uint32_t i = 0; i < g_.size(); ++i) {
      if (deps_left_[i] == 0) Start(i, 0);
    }
    while (!queue_.empty()) {
      const SimEvent e = queue_.Pop();
      ++run_.events;
      if (progress && (run_.events & 0xffff) == 0) progress(double(ended_) / double(std::max<size_t>(1, g_.size())));
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

  void PushEnd(uint32_t task, SimNs at) {
    queue_.Push(at, task, version_[task]);
    run_.peak_queued = std::max<uint64_t>(run_.peak_queued, queue_.size());
  }

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

  // ---- Link sharing -------------------------------------------------------

  FlowNetwork& Net(int32_t rank) {
    std::unique_ptr<FlowNetwork>& n = nets_[static_cast<size_t>(rank)];
    if (!n) {
      n = std::make_unique<FlowNetwork>();
      n->AddResource(g_.nvlink_bytes_per_s() > 0 ? g_.nvlink_bytes_per_s() : 1e30);  // 0: NVLink
      n->AddResource(g_.nic_bytes_per_s() > 0 ? g_.nic_bytes_per_s() : 1e30);        // 1: NIC
      n->AddResource(g_.spine_bytes_per_s() > 0 ? g_.spine_bytes_per_s() : 1e30);    // 2: uplink share
    }
    return *n;
  }

  static SimNs FinishAt(SimNs now, double left_ns, double speed) {
    if (left_ns <= 0) return now;
    const double t = std::ceil(left_ns / speed);
    return t >= double(kMaxSimNs) ? kMaxSimNs : now + static_cast<SimNs>(t);
  }

  // Starts `id`'s flows; false when it has none (it then takes work_ns).
  bool StartFlows(uint32_t id, const SimTask& t, SimNs now) {
    if (!links_ || t.kind == SimKind::kCompute || t.kind == SimKind::kHost || t.work_ns == 0) return false;
    const double solo_s = ToSeconds(t.work_ns);
    // Three flows a member: NVLink; the NIC bytes that stay in the unit;
    // those that leave it, over the NIC and the uplink share. Each is capped
    // at its bytes over the solo time, and at its tightest link's rate.
    const double spine = g_.spine_bytes_per_s() > 0 ? std::min<double>(t.spine_bytes, t.network_bytes) : 0;
    const double bytes[3] = {t.nvlink_bytes, t.network_bytes - spine, spine};
    const double rates[3] = {g_.nvlink_bytes_per_s(), g_.nic_bytes_per_s(),
                             std::min(g_.nic_bytes_per_s() > 0 ? g_.nic_bytes_per_s() : 1e30, g_.spine_bytes_per_s())};
    std::vector<uint32_t>& mine = task_flows_[id];
    const int32_t* members = g_.members(id);
    for (uint32_t k = 0; k < t.member_count; ++k) {
      for (int link = 0; link < 3; ++link) {
        if (!(bytes[link] > 0) || !(rates[link] > 0)) continue;
        Flow f;
        f.task = id;
        f.rank = members[k];
        f.link = link;
        // Alone it reaches bytes / work_ns, never above the link's rate.
        f.cap = std::min(double(bytes[link]) / solo_s, rates[link]);
        std::vector<FlowNetwork::ResourceId> route = {FlowNetwork::ResourceId(link)};
        if (link == 2) route = {1, 2};  // leaving the unit: through the NIC too
        f.id = Net(f.rank).AddFlow(route, f.cap);
        f.left_ns = double(t.work_ns);
        f.since = now;
        f.finish = now + t.work_ns;
        uint32_t slot;
        if (!free_.empty()) {
          slot = free_.back();
          free_.pop_back();
          flows_[slot] = f;
        } else {
          slot = static_cast<uint32_t>(flows_.size());
          flows_.push_back(f);
        }
        mine.push_back(slot);
        rank_flows_[static_cast<size_t>(f.rank)].push_back(slot);
      }
    }
    if (mine.empty()) {
      task_flows_.erase(id);
      return false;
    }
    planned_[id] = now + t.work_ns;
    for (uint32_t k = 0; k < t.member_count; ++k) touched_.push_back(members[k]);
    return true;
  }

  // The flows on the touched ranks at their new rates, and their tasks'
  // ends re-pushed where they moved.
  void RetimeFlows(SimNs now) {
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    std::vector<uint32_t> tasks;
    for (int32_t rank : touched_) {
      FlowNetwork& net = Net(rank);
      for (uint32_t fi : rank_flows_[static_cast<size_t>(rank)]) {
        Flow& f = flows_[fi];
        Carry(f, now);
        const double rate = net.Rate(f.id);
        const double speed = rate >= f.cap * (1 - 1e-12) ? 1.0 : rate / f.cap;
        if (speed != f.speed || f.finish < now) {
          f.speed = speed;
          f.finish = FinishAt(now, f.left_ns, speed);
          tasks.push_back(f.task);
        }
      }
    }
    touched_.clear();
    std::sort(tasks.begin(), tasks.end());
    tasks.erase(std::unique(tasks.begin(), tasks.end()), tasks.end());
    for (uint32_t id : tasks) {
      SimNs end = now;
      for (uint32_t fi : task_flows_[id]) end = std::max(end, flows_[fi].finish);
      SimNs& planned = planned_[id];
      if (end != planned) {
        planned = end;
        ++version_[id];
        PushEnd(id, end);
      }
    }
  }

  // A flow's progress up to `now` at its speed, and the bytes it carried.
  void Carry(Flow& f, SimNs now) {
    const double done_ns = std::min(f.left_ns, double(now - f.since) * f.speed);
    f.left_ns -= done_ns;
    f.since = now;
    const double bytes = done_ns * 1e-9 * f.cap;
    run_.link_bytes[size_t(f.rank) * 3 + size_t(f.link == 0 ? 0 : 1)] += bytes;
    if (f.link == 2) run_.link_bytes[size_t(f.rank) * 3 + 2] += bytes;
  }

  void EndFlows(uint32_t id, SimNs now) {
    const auto it = task_flows_.find(id);
    if (it == task_flows_.end()) return;
    if (now > run_.start_ns[id] + g_.task(id).work_ns) ++run_.slowed_by_links;
    for (uint32_t fi : it->second) {
      Flow& f = flows_[fi];
      Carry(f, now);
      Net(f.rank).RemoveFlow(f.id);
      std::vector<uint32_t>& on = rank_flows_[static_cast<size_t>(f.rank)];
      on.erase(std::find(on.begin(), on.end(), fi));
      touched_.push_back(f.rank);
      free_.push_back(fi);
    }
    task_flows_.erase(it);
    planned_.erase(id);
    RetimeFlows(now);
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
    } else if (StartFlows(id, t, now)) {
      PushEnd(id, now + t.work_ns);
      RetimeFlows(now);
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
    ++ended_;
    run_.makespan_ns = std::max(run_.makespan_ns, now);
    ++version_[id];  // no later event of this task counts
    EndFlows(id, now);
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
  size_t ended_ = 0;
  // Link sharing (when the graph has link rates): a flow network per rank
  // (its NVLink port and NIC), the flows, which are on each rank and each
  // task, and each flowing task's planned end; a finished flow's slot is
  // reused.
  bool links_ = false;
  std::vector<std::unique_ptr<FlowNetwork>> nets_;
  std::vector<Flow> flows_;
  std::vector<std::vector<uint32_t>> rank_flows_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> task_flows_;
  std::unordered_map<uint32_t, SimNs> planned_;
  std::vector<int32_t> touched_;
  std::vector<uint32_t> free_;
};

}  // namespace

Result<EngineRun> RunTaskGraph(const TaskGraph& graph, const std::function<void(double)>& progress) {
  return Engine(graph).Run(progress);
}

}  // namespace foldplan
