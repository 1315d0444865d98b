#include "sim/step_graph.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

namespace foldplan {
namespace {

constexpr uint32_t kNoTask = UINT32_MAX;

SimKind KindOf(CommKind kind) {
  switch (kind) {
    case CommKind::kTensorParallel: return SimKind::kTp;
    case CommKind::kContextParallel: return SimKind::kCp;
    case CommKind::kExpertParallel: return SimKind::kEp;
    case CommKind::kPipeline: return SimKind::kPp;
    case CommKind::kDataParallel: return SimKind::kDp;
  }
  return SimKind::kTp;
}

SimStream StreamOf(CommKind kind) { return StreamOfKind(KindOf(kind)); }

SimPass PassOf(PassKind kind) {
  switch (kind) {
    case PassKind::kForward: return SimPass::kForward;
    case PassKind::kBackward: return SimPass::kBackward;
    case PassKind::kWeightGrad: return SimPass::kWeightGrad;
  }
  return SimPass::kStep;
}

// A block of a virtual stage: its kind and decoder layer (-1 for the
// embedding and the output layer; MTP module j is layer layers + j).
struct Block {
  BlockKind kind;
  int layer;
};

std::vector<Block> BlocksOf(const VirtualStage& stage, const ModelSpec& model) {
  std::vector<Block> blocks;
  if (stage.embedding) blocks.push_back({BlockKind::kEmbedding, -1});
  for (int i = stage.first_layer; i < stage.first_layer + stage.layers; ++i) {
    blocks.push_back({model.layer_is_moe(i) ? BlockKind::kMoeLayer : BlockKind::kDenseLayer, i});
  }
  for (int j = 0; j < stage.mtp_layers; ++j) blocks.push_back({BlockKind::kMtpLayer, model.layers + j});
  if (stage.loss) blocks.push_back({BlockKind::kOutputLayer, -1});
  return blocks;
}

// The tasks of one pass before they go into the graph, with dependencies
// on each other by index. An item is one task per lane (compute, a send),
// or one task per group of `group`'s kind (a collective). `phase` counts
// the nodes of the pass's EP-overlap blocks before the item (PhasedBlock):
// a pair's two passes are emitted phase by phase, each in turn, so that
// each stream runs the pair's nodes in Megatron's order.
struct Item {
  SimTask task;
  std::vector<int> after;
  int phase = 0;
  bool collective = false;
  GroupKind group = GroupKind::kTp;
  SimNs routed_ns = 0;    // of task.work_ns, the routed experts' part (scaled by each lane's load)
  bool scaled_a2a = false;  // an EP all-to-all: x the busiest member's load
  bool launch = false;      // a launch on the host stream: not a pass's entry (the host runs ahead)
  bool entry = false;       // waits for nothing in its pass but its launch: a pass's entry
};
struct BlockMark {
  int entry = -1;          // the block's first item on the compute stream (or -1)
  std::vector<int> exits;  // the items the block ends with
};
struct Chain {
  std::vector<Item> items;
  std::vector<int> exits;
  std::vector<BlockMark> blocks;
  int phase = 0;  // the next item's Item::phase
  // Adds `it` after `after` in the current phase; returns its index.
  int Push(Item it, const std::vector<int>& after) {
    it.after = after;
    it.phase = phase;
    items.push_back(std::move(it));
    return int(items.size() - 1);
  }
};

// The simulated ranks of one pipeline stage (its lanes, in the dense view's
// (dp, cp, tp) order, so lane i's pipeline neighbours are lane i of the
// next and previous stages) and, per group kind, its groups as lane lists.
struct Stage {
  std::vector<int32_t> ranks;
  std::array<std::vector<std::vector<int>>, kGroupKindCount> groups;
  std::vector<int> ep_group;  // per lane: its EP group's global index (the draws' key)
  std::vector<int> ep_index;  // per lane: its place in that group
};

// The host time a block's launches take when the host runs ahead: `hp`'s
// over `launches[0]` tasks before the sync (what is issued before it, when
// `split`) and `launches[1]` after; a side without tasks leaves its share
// to the other. Each task's launch takes ns[side], the first rest[side]
// one nanosecond more, so that they sum exactly.
struct LaunchShares {
  std::array<SimNs, 2> ns{}, rest{};
};
LaunchShares SplitLaunches(const HostPass& hp, bool split, const std::array<SimNs, 2>& launches) {
  const SimNs total = ToSimNs(hp.host_s);
  SimNs before = split ? std::min(total, ToSimNs(hp.before_sync_s)) : total;
  if (launches[0] == 0) before = 0;
  if (launches[1] == 0) before = total;
  const SimNs totals[2] = {before, total - before};
  LaunchShares out;
  for (size_t k = 0; k < 2; ++k) {
    const SimNs n = std::max<SimNs>(1, launches[k]);
    out.ns[k] = totals[k] / n;
    out.rest[k] = totals[k] % n;
  }
  return out;
}

class Builder {
 public:
  explicit Builder(const StepGraphSpec& spec)
      : spec_(spec), work_(*spec.work), order_(*spec.order), pipe_(*spec.work->pipeline) {
    out_.graph = TaskGraph(spec.ranks ? spec.ranks->world() : work_.pp, work_.gpu_sms);
    if (spec.share_links) {
      out_.graph.SetLinkRates(work_.nvlink_bytes_per_s, work_.nic_bytes_per_s, work_.spine_bytes_per_s);
    }
    for (const CommOp& op : work_.ops) {
      if (EpOverlapped(op)) ep_pairs_ = true;
      if (op.scope == CommOp::kPerStep && Concurrent(op)) dp_buckets_ = true;
      if (op.scope == CommOp::kPerStageBoundary) {
        send_fwd_s_ += op.calls_fwd * op.seconds_per_call;
        send_bwd_s_ += op.calls_bwd * op.seconds_per_call;
        send_fwd_.nvlink_bytes += op.calls_fwd * op.traffic.nvlink_bytes;
        send_fwd_.network_bytes += op.calls_fwd * op.traffic.network_bytes;
        send_fwd_.spine_bytes += op.calls_fwd * op.traffic.spine_bytes;
        send_bwd_.nvlink_bytes += op.calls_bwd * op.traffic.nvlink_bytes;
        send_bwd_.network_bytes += op.calls_bwd * op.traffic.network_bytes;
        send_bwd_.spine_bytes += op.calls_bwd * op.traffic.spine_bytes;
      }
    }
  }

  Result<StepGraph> Build() {
    for (int p = 0; p < work_.pp; ++p) {
      stage_ = MakeStage(p);
      EmitStage(p);
      if (spec_.progress) spec_.progress(double(p + 1) / work_.pp);
    }
    LinkPasses();
    return std::move(out_);
  }

  // Bounds on what EmitStage adds for one lane of pipeline rank p over m
  // micro-batches (BoundStepGraph), from each kind of pass's chain.
  struct LaneBound {
    double tasks = 0, edges = 0, passes = 0;
  };
  LaneBound BoundLane(int p, double m) {
    stage_ = MakeStage(p);  // one lane: the chains do not depend on lanes
    std::vector<PassKind> kinds = {PassKind::kForward, PassKind::kBackward};
    if (order_.split_backward) kinds.push_back(PassKind::kWeightGrad);
    struct PassCount {
      double items = 0, after = 0, entries = 0, exits = 0;
    };
    std::vector<PassCount> counts;
    double blocks_total = 0, max_exits = 1, block_exits = 1;
    for (int c = 0; c < std::max(1, order_.vpp); ++c) {
      const std::vector<Block> blocks =
          BlocksOf(pipe_.stages[static_cast<size_t>(order_.VirtualStage(p, c))], *spec_.model);
      blocks_total += double(blocks.size());
      for (PassKind kind : kinds) {
        PassCount most;
        for (bool paired : {false, true}) {
          if (paired && kind == PassKind::kWeightGrad) continue;
          PipelinePass pass;
          pass.kind = kind;
          pass.chunk = c;
          const Chain ch = MakeChain(pass, paired, blocks);
          PassCount n;
          n.items = double(ch.items.size());
          for (const Item& it : ch.items) {
            n.after += double(it.after.size());
            if ((it.after.empty() || it.entry) && !it.launch) n.entries += 1;
          }
          n.exits = double(ch.exits.size());
          for (const BlockMark& b : ch.blocks) block_exits = std::max(block_exits, double(b.exits.size()));
          most.items = std::max(most.items, n.items);
          most.after = std::max(most.after, n.after);
          most.entries = std::max(most.entries, n.entries);
          most.exits = std::max(most.exits, n.exits);
        }
        max_exits = std::max(max_exits, most.exits);
        counts.push_back(most);
      }
    }
    LaneBound out;
    for (const PassCount& n : counts) {
      // Each item: one task on the lane, one stream edge, its own
      // dependencies; then a send (its stream edge and the pass's exits),
      // the entries' waits on at most two other passes' exits or sends,
      // and the optimizer's wait on this pass's exits.
      out.tasks += m * (n.items + 1);
      out.edges += m * (n.items + n.after + 1 + n.exits + n.entries * 2 * max_exits + max_exits);
      out.passes += m;
    }
    // Data-parallel tasks: each per-step op once per block (bucketed) or
    // once, each after the stream's last and a block's exits; each block's
    // entry after its gather; the optimizer and the step's host sync.
    double dp_ops = 0;
    for (const CommOp& op : work_.ops) dp_ops += op.scope == CommOp::kPerStep ? 1 : 0;
    const double dp_tasks = dp_ops * std::max(1.0, blocks_total);
    out.tasks += dp_tasks + 2;
    out.edges += dp_tasks * (1 + block_exits) + blocks_total + 4;
    return out;
  }

 private:
  Stage MakeStage(int p) const {
    Stage st;
    if (!spec_.ranks) {
      st.ranks = {p};
      for (auto& g : st.groups) g = {{0}};
      st.ep_group = {0};
      st.ep_index = {0};
      return st;
    }
    const RankMap& rm = *spec_.ranks;
    const size_t per_stage = rm.dense_view().size() / size_t(work_.pp);
    std::vector<int> lane_of(size_t(rm.world()), -1);
    for (size_t i = 0; i < per_stage; ++i) {
      const int r = rm.dense_view()[size_t(p) * per_stage + i];
      lane_of[size_t(r)] = int(st.ranks.size());
      st.ranks.push_back(r);
    }
    for (int k = 0; k < kGroupKindCount; ++k) {
      for (const std::vector<int>& g : rm.groups(GroupKind(k))) {
        if (g.empty() || lane_of[size_t(g.front())] < 0) continue;  // another stage's (or spans stages)
        std::vector<int> lanes;
        bool inside = true;
        for (int r : g) {
          inside = inside && lane_of[size_t(r)] >= 0;
          lanes.push_back(lane_of[size_t(r)]);
        }
        if (inside) st.groups[size_t(k)].push_back(std::move(lanes));
      }
    }
    st.ep_group.assign(st.ranks.size(), 0);
    st.ep_index.assign(st.ranks.size(), 0);
    const Groups& ep = rm.groups(GroupKind::kEp);
    for (size_t g = 0; g < ep.size(); ++g) {
      for (size_t i = 0; i < ep[g].size(); ++i) {
        const int lane = lane_of[size_t(ep[g][i])];
        if (lane < 0) continue;
        st.ep_group[size_t(lane)] = int(g);
        st.ep_index[size_t(lane)] = int(i);
      }
    }
    return st;
  }

  size_t lanes() const { return stage_.ranks.size(); }

  // Whether `op` runs beside its block's compute (tp, cp, dp) or, in a
  // paired pass, beside the other pass (ep).
  bool Concurrent(const CommOp& op) const {
    switch (op.kind) {
      case CommKind::kTensorParallel: return spec_.overlap.tp.value_or(op.overlappable);
      case CommKind::kContextParallel: return spec_.overlap.cp.value_or(op.overlappable);
      case CommKind::kDataParallel: return spec_.overlap.dp.value_or(op.overlappable);
      default: return false;
    }
  }
  bool EpOverlapped(const CommOp& op) const {
    return op.kind == CommKind::kExpertParallel && spec_.overlap.ep.value_or(op.hides_behind_other_microbatch);
  }
  // Whether a block of `kind` runs an EP-overlapped op in the forward
  // (`fwd`) or the backward pass.
  bool HasEpOverlapped(BlockKind kind, bool fwd) const {
    for (const CommOp& op : work_.ops) {
      if (work_.Runs(op, kind) && EpOverlapped(op) && ToSimNs((fwd ? op.calls_fwd : op.calls_bwd) * op.seconds_per_call) > 0) {
        return true;
      }
    }
    return false;
  }

  // A task of the host stream, `ns` long: a launch, or the host waiting at
  // a sync (for the GPU to reach it, the item's dependency, then for its
  // round trip).
  Item HostItem(const SimTask& host_base, SimNs ns, const char* label) {
    Item it;
    it.task = host_base;
    it.task.work_ns = ns;
    it.task.label = out_.graph.Label(label);
    it.launch = true;
    return it;
  }

  // The host not running ahead: the block's start on the compute stream
  // after `prev` (after the rank's last GPU task there), then its launches,
  // `hp`'s host time, on the host stream. Sets *start to the start, which
  // the block's GPU tasks follow; returns the launches' item.
  int PushBlockHost(Chain& c, const SimTask& base, const SimTask& host_base, const HostPass& hp,
                    const std::vector<int>& prev, std::vector<int>* start) {
    Item st;
    st.task = base;
    st.task.kind = SimKind::kHost;
    st.task.label = out_.graph.Label("block_start");
    *start = {c.Push(std::move(st), prev)};
    Item h = HostItem(host_base, ToSimNs(hp.host_s), "launch");
    h.launch = false;
    return c.Push(std::move(h), *start);
  }

  // `op`'s calls of one pass as an item: a collective of its group.
  Item OpItem(const CommOp& op, const SimTask& base, bool fwd) {
    const double calls = fwd ? op.calls_fwd : op.calls_bwd;
    Item it;
    it.task = base;
    it.task.work_ns = ToSimNs(calls * op.seconds_per_call);
    it.task.nvlink_bytes = static_cast<float>(calls * op.traffic.nvlink_bytes);
    it.task.network_bytes = static_cast<float>(calls * op.traffic.network_bytes);
    it.task.spine_bytes = static_cast<float>(calls * op.traffic.spine_bytes);
    it.task.kind = KindOf(op.kind);
    it.task.sms = static_cast<uint16_t>(std::max(0, op.sms));
    it.task.label = out_.graph.Label(op.name);
    it.collective = true;
    it.group = op.group;
    it.scaled_a2a = op.kind == CommKind::kExpertParallel &&
                    (op.collective == Collective::kAllToAll || op.collective == Collective::kAllToAllV);
    return it;
  }

  // A block of a paired pass that runs EP-overlapped all-to-alls, as
  // Megatron's combined 1F1B schedule runs it (doc/cost-model.md "EP
  // overlap, phase by phase"): four nodes, each one phase of the chain
  // (Chain::phase), so that Emit interleaves the pair's forward and
  // backward node by node:
  //   forward:  attention | dispatch | experts | combine
  //   backward: combine gradient | experts' input gradients | dispatch
  //             gradient, beside the experts' deferred weight gradients |
  //             attention
  // The compute nodes run on the compute stream, the all-to-alls on the EP
  // stream, each node after its own pass's previous one (the deferred
  // weight gradients after the experts' input gradients only). The
  // experts' node holds the block's experts' share (StepWork::experts, as
  // the analytical model splits it; the routed part scaled per lane) and
  // the plain ops after the first EP-overlapped one in plan order (the ETP
  // collectives), the attention node the rest of the compute and the plain
  // ops before it (TP, the token counts). Overlappable ops run beside the
  // whole block as elsewhere; shared-expert overlap does not apply (the
  // shared experts compute in the experts' node). The host: running
  // ahead, a launch before each task and the sync before the first
  // all-to-all; not, the block's launches when it starts and, at its end,
  // a fence on the host stream (not the compute stream, where it would hold
  // the other pass's compute back), so the pair's two blocks take
  // max(both launches, the pair's GPU time) and their syncs.
  // Returns the block's exits.
  std::vector<int> PhasedBlock(Chain& c, const PipelinePass& pass, const Block& b, const SimTask& base,
                               double pass_s, const std::vector<int>& prev) {
    const bool fwd = pass.kind == PassKind::kForward;
    const auto clamp = [](double v, double hi) { return std::min(std::max(v, 0.0), hi); };
    const BlockCost& cost = work_.cost(b.kind);
    const BlockCost& x = work_.experts_cost(b.kind);
    const BlockCost& routed = work_.routed_cost(b.kind);
    // The pass's experts' node and, backward, the deferred weight
    // gradients (none when the schedule runs W apart); the attention node
    // is the rest of the pass's compute.
    double experts_s = 0, wgrad_s = 0, routed_s = 0, routed_wgrad_s = 0;
    if (fwd) {
      experts_s = clamp(x.forward_s, pass_s);
      routed_s = clamp(routed.forward_s, experts_s);
    } else {
      const double backward = clamp(x.backward_s + x.recompute_s, cost.backward_s + cost.recompute_s);
      const double wgrad = clamp(x.weight_grad_s, backward);
      experts_s = clamp(backward - wgrad, pass_s);
      wgrad_s = order_.split_backward ? 0 : clamp(wgrad, pass_s - experts_s);
      routed_s = clamp(routed.backward_s - routed.weight_grad_s, experts_s);
      routed_wgrad_s = clamp(routed.weight_grad_s, wgrad_s);
    }
    const double attention_s = std::max(0.0, pass_s - experts_s - wgrad_s);

    // The block's ops of this pass: EP-overlapped (dispatch's or
    // combine's), beside the block, or plain (before or after the first
    // EP-overlapped one).
    std::vector<Item> dispatch_ops, combine_ops, attention_ops, experts_ops, side_ops;
    bool after_ep = false;
    for (const CommOp& op : work_.ops) {
      if (!work_.Runs(op, b.kind)) continue;
      const bool ep = EpOverlapped(op);
      after_ep = after_ep || ep;
      Item it = OpItem(op, base, fwd);
      if (it.task.work_ns == 0) continue;
      if (ep) {
        it.task.stream = SimStream::kEp;
        (op.combine ? combine_ops : dispatch_ops).push_back(std::move(it));
      } else if (Concurrent(op)) {
        it.task.stream = StreamOf(op.kind);
        side_ops.push_back(std::move(it));
      } else {
        it.task.stream = SimStream::kCompute;
        (after_ep ? experts_ops : attention_ops).push_back(std::move(it));
      }
    }

    // The block's GPU tasks in node order, with their dependencies inside
    // the block (-1: the block's start).
    struct Pending {
      Item item;
      std::vector<int> after;
      int node = 0;
    };
    std::vector<Pending> tasks;
    auto add = [&](Item it, std::vector<int> after, int node) {
      tasks.push_back({std::move(it), std::move(after), node});
      return int(tasks.size() - 1);
    };
    // Equal segments of `ns` around `ops` (the remainder on the first
    // ones), the first segment carrying `routed_ns` more (scaled per
    // lane), in node `node` after `after`; returns the last task (or
    // `after`'s when there is none).
    auto segments = [&](SimNs ns, SimNs routed_ns, std::vector<Item>& ops, std::vector<int> after, int node) {
      const SimNs rest = std::max<SimNs>(0, ns - routed_ns);
      const SimNs n = SimNs(ops.size()) + 1;
      for (SimNs i = 0; i < n; ++i) {
        const SimNs here = rest / n + (i < rest % n ? 1 : 0) + (i == 0 ? routed_ns : 0);
        if (here > 0) {
          Item seg;
          seg.task = base;
          seg.task.work_ns = here;
          seg.routed_ns = i == 0 ? std::min(routed_ns, here) : 0;
          seg.task.label = out_.graph.Label(Name(b.kind));
          after = {add(std::move(seg), after, node)};
        }
        if (i + 1 < n) after = {add(std::move(ops[size_t(i)]), after, node)};
      }
      return after;
    };
    auto chain = [&](std::vector<Item>& ops, std::vector<int> after, int node) {
      for (Item& it : ops) after = {add(std::move(it), after, node)};
      return after;
    };
    const std::vector<int> start = {-1};
    std::vector<int> end;
    int sync_before = 0;  // the sync comes before this task (before the first all-to-all)
    if (fwd) {
      end = segments(ToSimNs(attention_s), 0, attention_ops, start, 0);
      sync_before = int(tasks.size());
      end = chain(dispatch_ops, end, 1);
      end = segments(ToSimNs(experts_s), ToSimNs(routed_s), experts_ops, end, 2);
      end = chain(combine_ops, end, 3);
    } else {
      end = chain(combine_ops, start, 0);
      end = segments(ToSimNs(experts_s), ToSimNs(routed_s), experts_ops, end, 1);
      const std::vector<int> experts_end = end;
      end = chain(dispatch_ops, end, 2);
      std::vector<Item> none;
      const std::vector<int> wgrad = segments(ToSimNs(wgrad_s), ToSimNs(routed_wgrad_s), none, experts_end, 2);
      if (end == experts_end) end = wgrad;  // no dispatch gradient: the attention follows the wgrad
      end = segments(ToSimNs(attention_s), 0, attention_ops, end, 3);
    }

    // The host's pass of this block.
    const HostBlock& hb = work_.host.of(b.kind);
    const HostPass hp = fwd ? hb.forward : hb.backward;
    const bool host = hp.host_s > 0 || hp.syncs > 0;
    const bool ahead = host && spec_.overlap.host;
    SimTask host_base = base;
    host_base.kind = SimKind::kHost;
    host_base.stream = SimStream::kHost;
    const SimNs sync_ns = ToSimNs(hp.syncs * work_.host.sync_s);
    const bool split = ahead && sync_ns > 0;
    // Running ahead: each task's launch, those before the sync sharing
    // what is issued before it, the others the rest.
    std::array<SimNs, 2> launches{}, launched{};
    for (size_t i = 0; i < tasks.size(); ++i) launches[split && int(i) >= sync_before ? 1 : 0] += 1;
    const LaunchShares share = SplitLaunches(hp, split, launches);
    const int first_phase = c.phase;
    std::vector<int> from = prev;  // what the block's start is
    int block_host = -1;
    if (host && !ahead) block_host = PushBlockHost(c, base, host_base, hp, prev, &from);
    BlockMark mark;
    std::vector<int> index(tasks.size(), -1);
    int last_gpu = -1;
    for (size_t i = 0; i < tasks.size(); ++i) {
      Pending& t = tasks[i];
      c.phase = first_phase + t.node;
      const int side = split && int(i) >= sync_before ? 1 : 0;
      if (split && int(i) == sync_before) {
        c.Push(HostItem(host_base, sync_ns, "host_sync"), last_gpu >= 0 ? std::vector<int>{last_gpu} : prev);
      }
      std::vector<int> deps;
      for (int a : t.after) {
        if (a < 0) deps.insert(deps.end(), from.begin(), from.end());
        else deps.push_back(index[size_t(a)]);
      }
      t.item.entry = deps.empty();
      if (ahead) {
        const SimNs ns = share.ns[size_t(side)] + (launched[size_t(side)] < share.rest[size_t(side)] ? 1 : 0);
        ++launched[size_t(side)];
        deps.push_back(c.Push(HostItem(host_base, ns, "launch"), {}));
      }
      const bool compute = t.item.task.stream == SimStream::kCompute;
      index[i] = c.Push(std::move(t.item), deps);
      last_gpu = index[i];
      if (mark.entry < 0 && compute) mark.entry = index[i];
    }
    if (split && sync_before == int(tasks.size())) {
      c.Push(HostItem(host_base, sync_ns, "host_sync"), last_gpu >= 0 ? std::vector<int>{last_gpu} : prev);
    }
    c.phase = first_phase + 3;
    for (int e : end) mark.exits.push_back(e < 0 ? -1 : index[size_t(e)]);
    if (end == start) mark.exits = from;
    for (Item& it : side_ops) mark.exits.push_back(c.Push(std::move(it), prev));
    if (block_host >= 0) {
      // The block ends when its GPU work and its launches have, then the
      // host idles through its syncs; on the host stream, beside the other
      // pass's compute.
      std::vector<int> after = mark.exits;
      after.push_back(block_host);
      Item fence;
      fence.task = host_base;
      fence.task.work_ns = sync_ns;
      fence.task.label = out_.graph.Label(sync_ns > 0 ? "host_sync" : "launched");
      mark.exits = {c.Push(std::move(fence), after)};
    }
    c.phase = first_phase + 4;
    c.blocks.push_back(mark);
    return mark.exits;
  }

  Chain MakeChain(const PipelinePass& pass, bool paired, const std::vector<Block>& blocks) {
    Chain c;
    const bool fwd = pass.kind == PassKind::kForward;
    std::vector<int> prev;  // the previous block's exits
    std::vector<Block> order = blocks;
    if (!fwd) std::reverse(order.begin(), order.end());
    for (const Block& b : order) {
      const BlockCost& cost = work_.cost(b.kind);
      // The pass's share of a block cost: forward, backward (without its
      // weight gradients when the schedule runs them apart) or those.
      auto of = [&](const BlockCost& c) {
        if (pass.kind == PassKind::kBackward) {
          return c.backward_s + c.recompute_s - (order_.split_backward ? c.weight_grad_s : 0);
        }
        return pass.kind == PassKind::kWeightGrad ? c.weight_grad_s : c.forward_s;
      };
      const double compute_s = of(cost), routed_s = of(work_.routed_cost(b.kind));
      const double shared_s = spec_.overlap.shared && pass.kind != PassKind::kWeightGrad
                                  ? of(work_.shared_cost(b.kind)) : 0;
      SimTask base;
      base.pass = PassOf(pass.kind);
      base.microbatch = pass.microbatch;
      base.layer = b.layer;
      base.chunk = static_cast<int16_t>(pass.chunk);
      if (paired && pass.kind != PassKind::kWeightGrad && HasEpOverlapped(b.kind, fwd)) {
        prev = PhasedBlock(c, pass, b, base, compute_s, prev);
        continue;
      }
      // The block's ops: on the compute stream in sequence, or beside it.
      std::vector<Item> seq_ops, side_ops;
      size_t routed_segment = 0;  // the segment after the first EP all-to-all (the experts' GEMMs)
      if (pass.kind != PassKind::kWeightGrad) {
        for (const CommOp& op : work_.ops) {
          if (!work_.Runs(op, b.kind)) continue;
          Item it = OpItem(op, base, fwd);
          if (it.task.work_ns == 0) continue;
          if (Concurrent(op)) {
            it.task.stream = StreamOf(op.kind);
          } else {
            it.task.stream = SimStream::kCompute;
          }
          if (it.task.stream != SimStream::kCompute) {
            side_ops.push_back(std::move(it));
          } else {
            if (it.scaled_a2a && routed_segment == 0) routed_segment = seq_ops.size() + 1;
            seq_ops.push_back(std::move(it));
          }
        }
      }
      // Equal segments of the rest of the compute around the sequential
      // ops (the remainder on the first ones, so they sum exactly); the
      // routed experts' part runs after the first all-to-all.
      const SimNs routed_ns = ToSimNs(routed_s);
      // Shared experts beside the dispatch: only where there is one.
      const SimNs shared_ns = routed_segment > 0 ? ToSimNs(shared_s) : 0;
      const SimNs compute_ns = std::max<SimNs>(0, ToSimNs(compute_s) - routed_ns - shared_ns);
      const SimNs segments = SimNs(seq_ops.size()) + 1;
      if (routed_segment >= size_t(segments)) routed_segment = size_t(segments) - 1;
      auto segment_ns = [&](SimNs s) {
        const SimNs routed_here = size_t(s) == routed_segment ? routed_ns : 0;
        return compute_ns / segments + (s < compute_ns % segments ? 1 : 0) + routed_here;
      };
      BlockMark mark;
      std::vector<int> cursor = prev;
      auto push = [&](Item it, const std::vector<int>& after) { return c.Push(std::move(it), after); };
      // The host's pass of this block (none for a weight-gradient pass:
      // its launches are the backward's).
      const HostBlock& hb = work_.host.of(b.kind);
      const HostPass hp = pass.kind == PassKind::kForward    ? hb.forward
                          : pass.kind == PassKind::kBackward ? hb.backward
                                                             : HostPass{};
      const bool host = hp.host_s > 0 || hp.syncs > 0;
      const bool ahead = host && spec_.overlap.host;
      SimTask host_base = base;
      host_base.kind = SimKind::kHost;
      host_base.stream = SimStream::kHost;
      // The sync's place: before the first EP all-to-all, else after the
      // first segment.
      const SimNs sync_at = routed_segment > 0 ? SimNs(routed_segment) - 1 : 0;
      const SimNs sync_ns = ToSimNs(hp.syncs * work_.host.sync_s);
      // Running ahead: the block's tasks on the compute stream (nonzero
      // segments and sequential ops) share its host time as their
      // launches, those before the sync what is issued before it, those
      // after the rest.
      const bool split = ahead && sync_ns > 0;
      std::array<SimNs, 2> launches{};
      int side = 0;  // 0 before the sync, 1 after
      if (ahead) {
        for (SimNs s = 0; s < segments; ++s) {
          launches[split && s > sync_at ? 1 : 0] += segment_ns(s) > 0 ? 1 : 0;
          if (s + 1 < segments) launches[split && s >= sync_at ? 1 : 0] += 1;
        }
        launches[split ? 1 : 0] += shared_ns > 0 ? 1 : 0;
      }
      const LaunchShares share = SplitLaunches(hp, split, launches);
      std::array<SimNs, 2> launched{};
      int last_gpu = -1;
      // Adds `it` (a task on a GPU stream) after its launch, when the host
      // runs ahead.
      auto push_launched = [&](Item it, const std::vector<int>& after) {
        std::vector<int> deps = after;
        it.entry = after.empty();
        if (ahead) {
          const SimNs ns = share.ns[size_t(side)] + (launched[size_t(side)] < share.rest[size_t(side)] ? 1 : 0);
          ++launched[size_t(side)];
          deps.push_back(push(HostItem(host_base, ns, "launch"), {}));
        }
        last_gpu = push(std::move(it), deps);
        return last_gpu;
      };
      // The host waits for the GPU to reach the sync, then for its round trip.
      auto push_sync = [&]() {
        if (!split) return;
        side = 1;
        push(HostItem(host_base, sync_ns, "host_sync"), last_gpu >= 0 ? std::vector<int>{last_gpu} : cursor);
      };
      // Not running ahead: the host starts the block's launches when the
      // GPU starts the block.
      int block_host = -1;
      if (host && !ahead) block_host = PushBlockHost(c, base, host_base, hp, prev, &cursor);
      for (SimNs s = 0; s < segments; ++s) {
        const SimNs routed_here = size_t(s) == routed_segment ? routed_ns : 0;
        const SimNs ns = segment_ns(s);
        if (ns > 0) {
          Item seg;
          seg.task = base;
          seg.task.work_ns = ns;
          seg.routed_ns = routed_here;
          seg.task.label = out_.graph.Label(Name(b.kind));
          const int i = push_launched(std::move(seg), cursor);
          if (mark.entry < 0) mark.entry = i;
          cursor = {i};
        }
        if (s == sync_at) push_sync();
        if (s + 1 < segments) {
          Item op = std::move(seq_ops[static_cast<size_t>(s)]);
          const bool beside_shared = shared_ns > 0 && size_t(s) + 1 == routed_segment;
          if (beside_shared) op.task.stream = SimStream::kEp;
          const int i = push_launched(std::move(op), cursor);
          if (mark.entry < 0 && c.items[static_cast<size_t>(i)].task.stream == SimStream::kCompute) mark.entry = i;
          if (beside_shared) {
            Item seg;
            seg.task = base;
            seg.task.work_ns = shared_ns;
            seg.task.label = out_.graph.Label("shared_experts");
            cursor = {i, push_launched(std::move(seg), cursor)};
          } else {
            cursor = {i};
          }
        }
      }
      mark.exits = cursor;
      for (Item& it : side_ops) mark.exits.push_back(push(std::move(it), prev));
      if (block_host >= 0) {
        // The block ends when both its GPU work and its launches have, then
        // the GPU idles through its syncs.
        std::vector<int> after = mark.exits;
        after.push_back(block_host);
        Item fence;
        fence.task = base;
        fence.task.kind = SimKind::kHost;
        fence.task.work_ns = sync_ns;
        fence.task.label = out_.graph.Label(sync_ns > 0 ? "host_sync" : "launched");
        mark.exits = {push(std::move(fence), after)};
      }
      c.blocks.push_back(mark);
      prev = mark.exits;
    }
    c.exits = prev;
    return c;
  }

  // Each lane's load over the costed one, for the pass's micro-batch and
  // `layer` (1 everywhere when balanced).
  const std::vector<double>& LaneScale(int microbatch, int layer) {
    scale_.assign(lanes(), 1.0);
    if (!spec_.loads || layer < 0) return scale_;
    std::map<int, std::vector<double>> drawn;
    for (size_t lane = 0; lane < lanes(); ++lane) {
      const int g = stage_.ep_group[lane];
      auto it = drawn.find(g);
      if (it == drawn.end()) {
        it = drawn.emplace(g, std::vector<double>()).first;
        spec_.loads->Draw(uint64_t(g), layer, microbatch, it->second);
      }
      const size_t i = size_t(stage_.ep_index[lane]);
      scale_[lane] = (i < it->second.size() ? it->second[i] : 1.0) / std::max(1e-9, work_.load_factor);
    }
    return scale_;
  }

  // Adds one item: a task per lane, or per group. ids[lane] = its task there.
  void AddItem(const Item& it, std::vector<uint32_t>& ids, const std::vector<std::vector<uint32_t>>& chain_ids) {
    ids.assign(lanes(), kNoTask);
    const std::vector<double>* scale = nullptr;
    if (it.routed_ns > 0 || it.scaled_a2a) scale = &LaneScale(it.task.microbatch, it.task.layer);
    auto depend = [&](uint32_t id, const std::vector<int>& members) {
      for (int a : it.after) {
        uint32_t last = kNoTask;
        for (int lane : members) {
          const uint32_t before = chain_ids[size_t(a)][size_t(lane)];
          if (before != last) out_.graph.Depend(id, before);
          last = before;
        }
      }
    };
    if (!it.collective) {
      for (size_t lane = 0; lane < lanes(); ++lane) {
        SimTask t = it.task;
        if (scale && it.routed_ns > 0) {
          t.work_ns += ToSimNs(double(it.routed_ns) * (*scale)[lane] * 1e-9) - it.routed_ns;
        }
        const uint32_t id = out_.graph.Add(t, {stage_.ranks[lane]});
        ids[lane] = id;
        depend(id, {int(lane)});
      }
      return;
    }
    for (const std::vector<int>& g : stage_.groups[size_t(it.group)]) {
      SimTask t = it.task;
      if (scale && it.scaled_a2a) {
        double busiest = 0;
        for (int lane : g) busiest = std::max(busiest, (*scale)[size_t(lane)]);
        t.work_ns = ToSimNs(double(t.work_ns) * busiest * 1e-9);
        t.nvlink_bytes = static_cast<float>(t.nvlink_bytes * busiest);
        t.network_bytes = static_cast<float>(t.network_bytes * busiest);
        t.spine_bytes = static_cast<float>(t.spine_bytes * busiest);
      }
      members_.clear();
      for (int lane : g) members_.push_back(stage_.ranks[size_t(lane)]);
      const uint32_t id = out_.graph.Add(t, members_);
      for (int lane : g) ids[size_t(lane)] = id;
      depend(id, g);
    }
  }

  // Adds the chains' items, phase by phase from each chain in turn (a
  // single pass: all at once): in turn t each chain adds its items of
  // phase t or less, so a node with no items still hands the turn over.
  // Returns, per chain and item, each lane's task.
  std::vector<std::vector<std::vector<uint32_t>>> Emit(std::vector<Chain*> chains) {
    std::vector<std::vector<std::vector<uint32_t>>> ids(chains.size());
    std::vector<size_t> next(chains.size(), 0);
    for (size_t k = 0; k < chains.size(); ++k) ids[k].resize(chains[k]->items.size());
    const bool turns = chains.size() > 1;
    bool more = true;
    for (int turn = 0; more; ++turn) {
      more = false;
      for (size_t k = 0; k < chains.size(); ++k) {
        Chain& c = *chains[k];
        while (next[k] < c.items.size() && (!turns || c.items[next[k]].phase <= turn)) {
          AddItem(c.items[next[k]], ids[k][next[k]], ids[k]);
          ++next[k];
        }
        if (next[k] < c.items.size()) more = true;
      }
    }
    return ids;
  }

  struct PassState {
    PipelinePass pass;
    int pipeline_rank = 0;
    int stage = 0;
    // Per lane: the tasks that wait for other passes, what the next pass
    // waits for (the send, if any) and the pass's own last tasks.
    std::vector<std::vector<uint32_t>> entries, exits, done;
  };

  // A data-parallel bucket (or the whole blocking gather / reduction): one
  // task per group of each per-step op's group kind, `share` of its seconds.
  void AddDpTasks(bool gather, SimStream stream, const char* label, double share_dense, double share_expert,
                  int chunk, int layer, const std::vector<std::vector<uint32_t>>* after,
                  std::vector<uint32_t>* last_per_lane) {
    for (const CommOp& op : work_.ops) {
      if (op.scope != CommOp::kPerStep || (op.collective == Collective::kAllGather) != gather) continue;
      const double share = op.group == GroupKind::kEdp ? share_expert : share_dense;
      const SimNs ns = ToSimNs(op.seconds_per_microbatch() * share);
      if (ns == 0) continue;
      SimTask t;
      const double calls = (op.calls_fwd + op.calls_bwd) * share;
      t.nvlink_bytes = static_cast<float>(calls * op.traffic.nvlink_bytes);
      t.network_bytes = static_cast<float>(calls * op.traffic.network_bytes);
      t.kind = SimKind::kDp;
      t.stream = stream;
      t.chunk = static_cast<int16_t>(chunk);
      t.layer = layer;
      t.work_ns = ns;
      t.label = out_.graph.Label(label);
      for (const std::vector<int>& g : stage_.groups[size_t(op.group)]) {
        members_.clear();
        for (int lane : g) members_.push_back(stage_.ranks[size_t(lane)]);
        const uint32_t id = out_.graph.Add(t, members_);
        for (int lane : g) {
          if (after) {
            for (uint32_t e : (*after)[size_t(lane)]) out_.graph.Depend(id, e);
          }
          if (last_per_lane) (*last_per_lane)[size_t(lane)] = id;
        }
      }
    }
  }

  void EmitStage(int p) {
    const std::vector<PipelinePass>& list = order_.ranks[static_cast<size_t>(p)];
    const int stages = static_cast<int>(pipe_.stages.size());
    // The first forward and the last backward (or weight-gradient) pass of
    // each chunk: where the data-parallel buckets attach.
    std::map<int, size_t> first_fwd, last_bwd;
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].kind == PassKind::kForward && !first_fwd.count(list[i].chunk)) first_fwd[list[i].chunk] = i;
      const bool final_kind = order_.split_backward ? list[i].kind == PassKind::kWeightGrad
                                                    : list[i].kind == PassKind::kBackward;
      if (final_kind) last_bwd[list[i].chunk] = i;
    }
    std::vector<std::vector<Block>> chunk_blocks(static_cast<size_t>(std::max(1, order_.vpp)));
    int blocks_total = 0, moe_blocks = 0;
    for (size_t k = 0; k < chunk_blocks.size(); ++k) {
      chunk_blocks[k] = BlocksOf(pipe_.stages[static_cast<size_t>(order_.VirtualStage(p, int(k)))], *spec_.model);
      for (const Block& b : chunk_blocks[k]) {
        ++blocks_total;
        if (IsMoe(b)) ++moe_blocks;
      }
    }
    // Per-step data-parallel traffic: the dense groups' over every block,
    // the expert groups' over the MoE blocks (a stage without any: over
    // every block too).
    auto shares = [&](const Block& b) {
      const double dense = 1.0 / std::max(1, blocks_total);
      return std::make_pair(dense, moe_blocks == 0 ? dense : IsMoe(b) ? 1.0 / moe_blocks : 0.0);
    };
    // Parameter all-gathers first: bucketed on the DP stream before each
    // block's first forward, or one blocking gather.
    std::map<std::pair<int, int>, std::vector<uint32_t>> gather_bucket;  // (chunk, block) -> per lane
    if (dp_buckets_) {
      std::vector<std::pair<size_t, int>> chunks;
      for (const auto& [chunk, at] : first_fwd) chunks.emplace_back(at, chunk);
      std::sort(chunks.begin(), chunks.end());
      for (const auto& [at, chunk] : chunks) {
        const std::vector<Block>& blocks = chunk_blocks[static_cast<size_t>(chunk)];
        for (size_t b = 0; b < blocks.size(); ++b) {
          std::vector<uint32_t> last(lanes(), kNoTask);
          const auto [dense, expert] = shares(blocks[b]);
          AddDpTasks(true, SimStream::kDp, "dp_param_allgather_bucket", dense, expert, chunk, blocks[b].layer,
                     nullptr, &last);
          if (last.front() != kNoTask) gather_bucket[{chunk, int(b)}] = last;
        }
      }
    } else {
      AddDpTasks(true, SimStream::kCompute, "dp_param_allgather", 1, 1, -1, -1, nullptr, nullptr);
    }
    std::vector<std::pair<std::vector<std::vector<uint32_t>>, std::pair<int, int>>> reduce_after;
    std::vector<size_t> stage_states;
    for (size_t i = 0; i < list.size(); ++i) {
      const PipelinePass& pass = list[i];
      // A pair: DualPipeV's marked pairs; with EP overlap also 1F1B's
      // steady state (a forward followed by another micro-batch's backward).
      bool paired = false;
      if (i + 1 < list.size()) {
        const PipelinePass& next = list[i + 1];
        const bool fb = pass.kind != next.kind && pass.kind != PassKind::kWeightGrad &&
                        next.kind != PassKind::kWeightGrad && pass.microbatch != next.microbatch;
        paired = fb && (pass.paired_with_next || (ep_pairs_ && pass.kind == PassKind::kForward));
      }
      const size_t count = paired ? 2 : 1;
      std::vector<Chain> chains(count);
      std::vector<PassState> states(count);
      for (size_t k = 0; k < count; ++k) {
        const PipelinePass& ps = list[i + k];
        chains[k] = MakeChain(ps, paired, chunk_blocks[static_cast<size_t>(ps.chunk)]);
        states[k].pass = ps;
        states[k].pipeline_rank = p;
        states[k].stage = order_.VirtualStage(p, ps.chunk);
      }
      std::vector<Chain*> ptrs;
      for (Chain& c : chains) ptrs.push_back(&c);
      const auto ids = Emit(ptrs);
      for (size_t k = 0; k < count; ++k) {
        PassState& st = states[k];
        const Chain& c = chains[k];
        const size_t index = i + k;
        st.entries.assign(lanes(), {});
        st.done.assign(lanes(), {});
        for (size_t lane = 0; lane < lanes(); ++lane) {
          for (size_t j = 0; j < c.items.size(); ++j) {
            const Item& it = c.items[j];
            if ((it.after.empty() || it.entry) && !it.launch) st.entries[lane].push_back(ids[k][j][lane]);
          }
          for (int e : c.exits) st.done[lane].push_back(ids[k][static_cast<size_t>(e)][lane]);
        }
        // Data-parallel buckets of this chunk's first forward / last backward.
        const auto ff = first_fwd.find(st.pass.chunk);
        if (ff != first_fwd.end() && ff->second == index) {
          for (size_t b = 0; b < c.blocks.size(); ++b) {
            const auto g = gather_bucket.find({st.pass.chunk, int(b)});
            if (g == gather_bucket.end() || c.blocks[b].entry < 0) continue;
            for (size_t lane = 0; lane < lanes(); ++lane) {
              out_.graph.Depend(ids[k][static_cast<size_t>(c.blocks[b].entry)][lane], g->second[lane]);
            }
          }
        }
        const auto lb = last_bwd.find(st.pass.chunk);
        if (lb != last_bwd.end() && lb->second == index) {
          // Backward walks the blocks in reverse: bucket b is block n-1-b.
          const size_t n = c.blocks.size();
          for (size_t b = 0; b < n; ++b) {
            std::vector<std::vector<uint32_t>> exits(lanes());
            for (size_t lane = 0; lane < lanes(); ++lane) {
              for (int e : c.blocks[b].exits) exits[lane].push_back(ids[k][static_cast<size_t>(e)][lane]);
            }
            reduce_after.push_back({std::move(exits), {st.pass.chunk, int(n - 1 - b)}});
          }
        }
        if (!c.items.empty()) {
          for (size_t lane = 0; lane < lanes(); ++lane) {
            // Its GPU tasks: the host's launches may run well ahead of them.
            uint32_t first = kNoTask, last = 0;
            for (size_t j = 0; j < c.items.size(); ++j) {
              if (c.items[j].task.stream == SimStream::kHost) continue;
              first = std::min(first, ids[k][j][lane]);
              last = std::max(last, ids[k][j][lane]);
            }
            PassRecord rec;
            rec.rank = stage_.ranks[lane];
            rec.pipeline_rank = p;
            rec.chunk = st.pass.chunk;
            rec.virtual_stage = st.stage;
            rec.microbatch = st.pass.microbatch;
            rec.kind = st.pass.kind;
            rec.first_task = first;
            rec.last_task = last;
            out_.passes.push_back(rec);
          }
        }
      }
      // Sends to the neighbouring virtual stage on another rank.
      for (size_t k = 0; k < count; ++k) {
        PassState& st = states[k];
        st.exits = st.done;
        const int to = st.pass.kind == PassKind::kForward ? st.stage + 1
                       : st.pass.kind == PassKind::kBackward ? st.stage - 1 : -1;
        if (to < 0 || to >= stages || pipe_.stages[static_cast<size_t>(to)].pipeline_rank == p) continue;
        SimTask send;
        send.kind = SimKind::kPp;
        send.stream = spec_.overlap.pp ? SimStream::kPp : SimStream::kCompute;
        send.pass = PassOf(st.pass.kind);
        send.microbatch = st.pass.microbatch;
        send.chunk = static_cast<int16_t>(st.pass.chunk);
        const bool forward = st.pass.kind == PassKind::kForward;
        send.work_ns = ToSimNs(forward ? send_fwd_s_ : send_bwd_s_);
        send.nvlink_bytes = static_cast<float>((forward ? send_fwd_ : send_bwd_).nvlink_bytes);
        send.network_bytes = static_cast<float>((forward ? send_fwd_ : send_bwd_).network_bytes);
        send.spine_bytes = static_cast<float>((forward ? send_fwd_ : send_bwd_).spine_bytes);
        send.label = out_.graph.Label("pp_send_recv");
        for (size_t lane = 0; lane < lanes(); ++lane) {
          const uint32_t id = out_.graph.Add(send, {stage_.ranks[lane]});
          for (uint32_t d : st.done[lane]) out_.graph.Depend(id, d);
          st.exits[lane] = {id};
        }
      }
      for (PassState& st : states) {
        index_[{int(st.pass.kind), st.pass.microbatch, st.stage}] = states_.size();
        stage_states.push_back(states_.size());
        states_.push_back(std::move(st));
      }
      i += count - 1;
    }
    // Gradient reductions: a bucket per block after its last backward, in
    // the order they become ready, or one blocking reduction.
    std::vector<uint32_t> last_dp(lanes(), kNoTask);
    if (dp_buckets_) {
      for (const auto& [exits, where] : reduce_after) {
        const Block& b = chunk_blocks[static_cast<size_t>(where.first)][static_cast<size_t>(where.second)];
        const auto [dense, expert] = shares(b);
        AddDpTasks(false, SimStream::kDp, "dp_grad_reduce_bucket", dense, expert, where.first, b.layer, &exits,
                   &last_dp);
      }
    } else {
      AddDpTasks(false, SimStream::kCompute, "dp_grad_reduce", 1, 1, -1, -1, nullptr, &last_dp);
    }
    SimTask opt;
    opt.label = out_.graph.Label("optimizer_step");
    opt.work_ns = ToSimNs(static_cast<size_t>(p) < spec_.optimizer_s.size() ? spec_.optimizer_s[static_cast<size_t>(p)] : 0);
    SimTask step_sync;
    step_sync.kind = SimKind::kHost;
    step_sync.label = out_.graph.Label("host_sync");
    step_sync.work_ns = ToSimNs(work_.host.step_syncs * work_.host.sync_s);
    for (size_t lane = 0; lane < lanes(); ++lane) {
      const uint32_t id = out_.graph.Add(opt, {stage_.ranks[lane]});
      if (last_dp[lane] != kNoTask) out_.graph.Depend(id, last_dp[lane]);
      // Everything on the rank's other streams ends before the step does.
      for (size_t s : stage_states) {
        for (uint32_t e : states_[s].exits[lane]) out_.graph.Depend(id, e);
      }
      out_.optimizer.push_back(id);
      // The step's own host syncs (the gradient norm, the loss report).
      if (step_sync.work_ns > 0) out_.graph.Depend(out_.graph.Add(step_sync, {stage_.ranks[lane]}), id);
    }
  }

  bool IsMoe(const Block& b) const {
    return b.kind == BlockKind::kMoeLayer || (b.kind == BlockKind::kMtpLayer && work_.mtp_moe);
  }

  // Cross-pass dependencies, lane by lane (lane i of one stage with lane i
  // of the next): a forward after the previous stage's forward (its send),
  // a backward after the next stage's backward and its own stage's forward,
  // a weight-gradient pass after its backward.
  void LinkPasses() {
    const int last = static_cast<int>(pipe_.stages.size()) - 1;
    auto find = [&](PassKind kind, int mb, int stage) -> const PassState* {
      const auto it = index_.find({int(kind), mb, stage});
      return it == index_.end() ? nullptr : &states_[it->second];
    };
    for (const PassState& st : states_) {
      std::vector<const PassState*> before;
      const PassState* own = nullptr;  // waited for directly (its own tasks, no send)
      const int mb = st.pass.microbatch;
      switch (st.pass.kind) {
        case PassKind::kForward:
          if (st.stage > 0) before.push_back(find(PassKind::kForward, mb, st.stage - 1));
          break;
        case PassKind::kBackward:
          if (st.stage < last) before.push_back(find(PassKind::kBackward, mb, st.stage + 1));
          before.push_back(find(PassKind::kForward, mb, st.stage));
          break;
        case PassKind::kWeightGrad: own = find(PassKind::kBackward, mb, st.stage); break;
      }
      for (size_t lane = 0; lane < st.entries.size(); ++lane) {
        std::vector<uint32_t> wait;
        if (own) wait = own->done[lane];
        for (const PassState* b : before) {
          if (!b) continue;
          // The same rank's pass is waited for directly; another's through its send.
          const bool same = b->pipeline_rank == st.pipeline_rank;
          const std::vector<uint32_t>& w = same ? b->done[lane] : b->exits[lane];
          wait.insert(wait.end(), w.begin(), w.end());
          if (!same && !w.empty() && w != b->done[lane] && !st.entries[lane].empty() &&
              (!spec_.ranks || lane == 0)) {
            out_.sends.push_back({w.front(), st.entries[lane].front()});
          }
        }
        for (uint32_t e : st.entries[lane]) {
          for (uint32_t w : wait) out_.graph.Depend(e, w);
        }
      }
    }
  }

  const StepGraphSpec& spec_;
  const StepWork& work_;
  const PipelineOrder& order_;
  const PipelineDescription& pipe_;
  double send_fwd_s_ = 0, send_bwd_s_ = 0;
  RankTraffic send_fwd_, send_bwd_;  // one crossing's bytes, each way
  bool ep_pairs_ = false;    // some EP op overlaps: 1F1B's steady F/B pairs run as pairs
  bool dp_buckets_ = false;  // the per-step data-parallel ops are bucketed
  Stage stage_;
  std::vector<double> scale_;
  std::vector<int32_t> members_;
  StepGraph out_;
  std::vector<PassState> states_;
  std::map<std::tuple<int, int, int>, size_t> index_;
};

}  // namespace

Result<StepGraph> BuildStepGraph(const StepGraphSpec& spec) {
  if (!spec.work || !spec.model || !spec.order || !spec.work->pipeline) {
    return Status::Error("simulator: the step graph needs the work, its pipeline, the model and the order");
  }
  const StepWork& w = *spec.work;
  if (spec.order->pp != w.pp || static_cast<int>(spec.order->ranks.size()) != w.pp ||
      static_cast<int>(w.pipeline->stages.size()) != w.pp * spec.order->vpp) {
    return Status::Error("simulator: the schedule's order (pp " + std::to_string(spec.order->pp) + ", vpp " +
                         std::to_string(spec.order->vpp) + ") does not match the pipeline (" +
                         std::to_string(w.pipeline->stages.size()) + " virtual stages on pp " +
                         std::to_string(w.pp) + ")");
  }
  return Builder(spec).Build();
}

Result<StepGraphBound> BoundStepGraph(const StepGraphSpec& spec, long long microbatches, long long lanes) {
  if (!spec.work || !spec.model || !spec.order || !spec.work->pipeline) {
    return Status::Error("simulator: the step graph needs the work, its pipeline, the model and the order");
  }
  const StepWork& w = *spec.work;
  if (spec.order->pp != w.pp || static_cast<int>(w.pipeline->stages.size()) != w.pp * spec.order->vpp) {
    return Status::Error("simulator: the schedule's order (pp " + std::to_string(spec.order->pp) + ", vpp " +
                         std::to_string(spec.order->vpp) + ") does not match the pipeline (" +
                         std::to_string(w.pipeline->stages.size()) + " virtual stages on pp " +
                         std::to_string(w.pp) + ")");
  }
  StepGraphSpec fast = spec;  // the chains are the same on either path
  fast.ranks = nullptr;
  fast.loads = nullptr;
  Builder b(fast);
  StepGraphBound out;
  for (int p = 0; p < w.pp; ++p) {
    const auto lane = b.BoundLane(p, double(microbatches));
    out.task_slots += double(lanes) * lane.tasks;
    out.edges += double(lanes) * lane.edges;
    out.passes += double(lanes) * lane.passes;
  }
  return out;
}

}  // namespace foldplan
