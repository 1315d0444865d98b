#include "sim/step_graph.h"

#include <algorithm>
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

SimStream StreamOf(CommKind kind) {
  switch (kind) {
    case CommKind::kTensorParallel: return SimStream::kTp;
    case CommKind::kContextParallel: return SimStream::kCp;
    case CommKind::kExpertParallel: return SimStream::kEp;
    case CommKind::kPipeline: return SimStream::kPp;
    case CommKind::kDataParallel: return SimStream::kDp;
  }
  return SimStream::kTp;
}

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
// on each other by index. An EP all-to-all of a paired pass ends a phase:
// the other pass of the pair may run its compute there.
struct Item {
  SimTask task;
  std::vector<int> after;
  bool phase_end = false;
};
struct BlockMark {
  int entry = -1;          // the block's first item on the compute stream (or -1)
  std::vector<int> exits;  // the items the block ends with
};
struct Chain {
  std::vector<Item> items;
  std::vector<int> exits;
  std::vector<BlockMark> blocks;
};

class Builder {
 public:
  explicit Builder(const StepGraphSpec& spec)
      : spec_(spec), work_(*spec.work), order_(*spec.order), pipe_(*spec.work->pipeline) {
    out_.graph = TaskGraph(work_.pp, work_.gpu_sms);
    for (const CommOp& op : work_.ops) {
      if (EpOverlapped(op)) ep_pairs_ = true;
      if (op.scope == CommOp::kPerStep && Concurrent(op)) dp_buckets_ = true;
      if (op.scope == CommOp::kPerStageBoundary) {
        send_fwd_s_ += op.calls_fwd * op.seconds_per_call;
        send_bwd_s_ += op.calls_bwd * op.seconds_per_call;
      }
    }
  }

  Result<StepGraph> Build() {
    for (int p = 0; p < work_.pp; ++p) EmitRank(p);
    LinkPasses();
    return std::move(out_);
  }

 private:
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

  Chain MakeChain(int rank, const PipelinePass& pass, bool paired, const std::vector<Block>& blocks) {
    Chain c;
    const bool fwd = pass.kind == PassKind::kForward;
    std::vector<int> prev;  // the previous block's exits
    std::vector<Block> order = blocks;
    if (!fwd) std::reverse(order.begin(), order.end());
    for (const Block& b : order) {
      const BlockCost& cost = work_.cost(b.kind);
      double compute_s = cost.forward_s;
      if (pass.kind == PassKind::kBackward) {
        compute_s = cost.backward_s + cost.recompute_s - (order_.split_backward ? cost.weight_grad_s : 0);
      } else if (pass.kind == PassKind::kWeightGrad) {
        compute_s = cost.weight_grad_s;
      }
      SimTask base;
      base.pass = PassOf(pass.kind);
      base.microbatch = pass.microbatch;
      base.layer = b.layer;
      base.chunk = static_cast<int16_t>(pass.chunk);
      // The block's ops: on the compute stream in sequence, or beside it.
      std::vector<Item> seq_ops, side_ops;
      if (pass.kind != PassKind::kWeightGrad) {
        for (const CommOp& op : work_.ops) {
          if (!work_.Runs(op, b.kind)) continue;
          const SimNs ns = ToSimNs((fwd ? op.calls_fwd : op.calls_bwd) * op.seconds_per_call);
          if (ns == 0) continue;
          Item it;
          it.task = base;
          it.task.work_ns = ns;
          it.task.kind = KindOf(op.kind);
          it.task.sms = static_cast<uint16_t>(std::max(0, op.sms));
          it.task.label = out_.graph.Label(op.name);
          if (paired && EpOverlapped(op)) {
            it.task.stream = SimStream::kEp;
            it.phase_end = true;
            seq_ops.push_back(std::move(it));
          } else if (Concurrent(op)) {
            it.task.stream = StreamOf(op.kind);
            side_ops.push_back(std::move(it));
          } else {
            it.task.stream = SimStream::kCompute;
            seq_ops.push_back(std::move(it));
          }
        }
      }
      // Equal compute segments around the sequential ops (the remainder on
      // the first ones, so they sum to the block's compute exactly).
      const SimNs compute_ns = ToSimNs(compute_s);
      const SimNs segments = SimNs(seq_ops.size()) + 1;
      BlockMark mark;
      std::vector<int> cursor = prev;
      auto push = [&](Item it, const std::vector<int>& after) {
        it.after = after;
        c.items.push_back(std::move(it));
        return int(c.items.size() - 1);
      };
      for (SimNs s = 0; s < segments; ++s) {
        const SimNs ns = compute_ns / segments + (s < compute_ns % segments ? 1 : 0);
        if (ns > 0) {
          Item seg;
          seg.task = base;
          seg.task.work_ns = ns;
          seg.task.label = out_.graph.Label(Name(b.kind));
          const int i = push(std::move(seg), cursor);
          if (mark.entry < 0) mark.entry = i;
          cursor = {i};
        }
        if (s + 1 < segments) {
          const int i = push(std::move(seq_ops[static_cast<size_t>(s)]), cursor);
          if (mark.entry < 0 && c.items[static_cast<size_t>(i)].task.stream == SimStream::kCompute) mark.entry = i;
          cursor = {i};
        }
      }
      mark.exits = cursor;
      for (Item& it : side_ops) mark.exits.push_back(push(std::move(it), prev));
      c.blocks.push_back(mark);
      prev = mark.exits;
    }
    c.exits = prev;
    return c;
  }

  // Adds a chain's items to the graph on `rank`, phase by phase from each
  // chain in turn (a single pass: all at once). Returns each chain's ids.
  std::vector<std::vector<uint32_t>> Emit(int rank, std::vector<Chain*> chains) {
    std::vector<std::vector<uint32_t>> ids(chains.size());
    std::vector<size_t> next(chains.size(), 0);
    for (size_t k = 0; k < chains.size(); ++k) ids[k].assign(chains[k]->items.size(), kNoTask);
    bool more = true;
    while (more) {
      more = false;
      for (size_t k = 0; k < chains.size(); ++k) {
        Chain& c = *chains[k];
        while (next[k] < c.items.size()) {
          const Item& it = c.items[next[k]];
          const uint32_t id = out_.graph.Add(it.task, {rank});
          for (int a : it.after) out_.graph.Depend(id, ids[k][static_cast<size_t>(a)]);
          ids[k][next[k]++] = id;
          if (it.phase_end && chains.size() > 1) break;
        }
        if (next[k] < c.items.size()) more = true;
      }
    }
    return ids;
  }

  struct PassState {
    PipelinePass pass;
    int rank = 0;
    int stage = 0;
    std::vector<uint32_t> entries;  // tasks that wait for other passes
    std::vector<uint32_t> exits;    // what the next pass waits for (the send, if any)
    std::vector<uint32_t> done;     // the pass's own last tasks (sends excluded)
  };

  void EmitRank(int p) {
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
        if (b.kind == BlockKind::kMoeLayer || (b.kind == BlockKind::kMtpLayer && work_.mtp_moe)) ++moe_blocks;
      }
    }
    // Per-step data-parallel seconds: gathers and reductions, the dense
    // groups' over every block, the expert groups' over the MoE blocks.
    double gather_s = 0, reduce_s = 0, gather_moe_s = 0, reduce_moe_s = 0;
    for (const CommOp& op : work_.ops) {
      if (op.scope != CommOp::kPerStep) continue;
      const bool gather = op.collective == Collective::kAllGather;
      const bool expert = op.group == GroupKind::kEdp && moe_blocks > 0;
      (gather ? (expert ? gather_moe_s : gather_s) : (expert ? reduce_moe_s : reduce_s)) += op.seconds_per_microbatch();
    }
    auto bucket_ns = [&](const Block& b, bool gather) {
      const bool moe = b.kind == BlockKind::kMoeLayer || (b.kind == BlockKind::kMtpLayer && work_.mtp_moe);
      double s = (gather ? gather_s : reduce_s) / std::max(1, blocks_total);
      if (moe) s += (gather ? gather_moe_s : reduce_moe_s) / moe_blocks;
      return ToSimNs(s);
    };
    SimTask dp;
    dp.kind = SimKind::kDp;
    // Parameter all-gathers first: bucketed on the DP stream, or one
    // blocking gather.
    std::map<std::pair<int, int>, uint32_t> gather_bucket;  // (chunk, block) -> task
    if (gather_s + gather_moe_s > 0) {
      if (dp_buckets_) {
        std::vector<std::pair<size_t, int>> chunks;
        for (const auto& [chunk, at] : first_fwd) chunks.emplace_back(at, chunk);
        std::sort(chunks.begin(), chunks.end());
        dp.stream = SimStream::kDp;
        dp.label = out_.graph.Label("dp_param_allgather_bucket");
        for (const auto& [at, chunk] : chunks) {
          const std::vector<Block>& blocks = chunk_blocks[static_cast<size_t>(chunk)];
          for (size_t b = 0; b < blocks.size(); ++b) {
            dp.work_ns = bucket_ns(blocks[b], true);
            dp.chunk = static_cast<int16_t>(chunk);
            dp.layer = blocks[b].layer;
            if (dp.work_ns > 0) gather_bucket[{chunk, int(b)}] = out_.graph.Add(dp, {p});
          }
        }
      } else {
        dp.stream = SimStream::kCompute;
        dp.label = out_.graph.Label("dp_param_allgather");
        dp.work_ns = ToSimNs(gather_s + gather_moe_s);
        out_.graph.Add(dp, {p});
      }
    }
    std::vector<std::pair<std::vector<uint32_t>, std::pair<int, int>>> reduce_after;  // block exits, (chunk, block)
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
        chains[k] = MakeChain(p, ps, paired, chunk_blocks[static_cast<size_t>(ps.chunk)]);
        states[k].pass = ps;
        states[k].rank = p;
        states[k].stage = order_.VirtualStage(p, ps.chunk);
      }
      std::vector<Chain*> ptrs;
      for (Chain& c : chains) ptrs.push_back(&c);
      const std::vector<std::vector<uint32_t>> ids = Emit(p, ptrs);
      for (size_t k = 0; k < count; ++k) {
        PassState& st = states[k];
        const Chain& c = chains[k];
        const size_t index = i + k;
        for (size_t j = 0; j < c.items.size(); ++j) {
          if (c.items[j].after.empty()) st.entries.push_back(ids[k][j]);
        }
        for (int e : c.exits) st.done.push_back(ids[k][static_cast<size_t>(e)]);
        // Data-parallel buckets of this chunk's first forward / last backward.
        const auto ff = first_fwd.find(st.pass.chunk);
        if (ff != first_fwd.end() && ff->second == index) {
          for (size_t b = 0; b < c.blocks.size(); ++b) {
            const auto g = gather_bucket.find({st.pass.chunk, int(b)});
            if (g != gather_bucket.end() && c.blocks[b].entry >= 0) {
              out_.graph.Depend(ids[k][static_cast<size_t>(c.blocks[b].entry)], g->second);
            }
          }
        }
        const auto lb = last_bwd.find(st.pass.chunk);
        if (lb != last_bwd.end() && lb->second == index) {
          // Backward walks the blocks in reverse: bucket b is block n-1-b.
          const size_t n = c.blocks.size();
          for (size_t b = 0; b < n; ++b) {
            std::vector<uint32_t> exits;
            for (int e : c.blocks[b].exits) exits.push_back(ids[k][static_cast<size_t>(e)]);
            reduce_after.push_back({std::move(exits), {st.pass.chunk, int(n - 1 - b)}});
          }
        }
        if (!c.items.empty()) {
          PassRecord rec;
          rec.rank = p;
          rec.chunk = st.pass.chunk;
          rec.virtual_stage = st.stage;
          rec.microbatch = st.pass.microbatch;
          rec.kind = st.pass.kind;
          rec.first_task = *std::min_element(ids[k].begin(), ids[k].end());
          rec.last_task = *std::max_element(ids[k].begin(), ids[k].end());
          out_.passes.push_back(rec);
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
        send.work_ns = ToSimNs(st.pass.kind == PassKind::kForward ? send_fwd_s_ : send_bwd_s_);
        send.label = out_.graph.Label("pp_send_recv");
        const uint32_t id = out_.graph.Add(send, {p});
        for (uint32_t d : st.done) out_.graph.Depend(id, d);
        st.exits = {id};
      }
      for (PassState& st : states) {
        index_[{int(st.pass.kind), st.pass.microbatch, st.stage}] = states_.size();
        states_.push_back(std::move(st));
      }
      i += count - 1;
    }
    // Gradient reductions: a bucket per block after its last backward, in
    // the order they become ready, or one blocking reduction.
    uint32_t last_dp = kNoTask;
    if (reduce_s + reduce_moe_s > 0) {
      if (dp_buckets_) {
        dp.stream = SimStream::kDp;
        dp.label = out_.graph.Label("dp_grad_reduce_bucket");
        for (const auto& [exits, where] : reduce_after) {
          dp.work_ns = bucket_ns(chunk_blocks[static_cast<size_t>(where.first)][static_cast<size_t>(where.second)], false);
          if (dp.work_ns == 0) continue;
          dp.chunk = static_cast<int16_t>(where.first);
          dp.layer = chunk_blocks[static_cast<size_t>(where.first)][static_cast<size_t>(where.second)].layer;
          last_dp = out_.graph.Add(dp, {p});
          for (uint32_t e : exits) out_.graph.Depend(last_dp, e);
        }
      } else {
        dp.stream = SimStream::kCompute;
        dp.label = out_.graph.Label("dp_grad_reduce");
        dp.work_ns = ToSimNs(reduce_s + reduce_moe_s);
        dp.layer = -1;
        dp.chunk = -1;
        last_dp = out_.graph.Add(dp, {p});
      }
    }
    SimTask opt;
    opt.label = out_.graph.Label("optimizer_step");
    opt.work_ns = ToSimNs(static_cast<size_t>(p) < spec_.optimizer_s.size() ? spec_.optimizer_s[static_cast<size_t>(p)] : 0);
    const uint32_t id = out_.graph.Add(opt, {p});
    if (last_dp != kNoTask) out_.graph.Depend(id, last_dp);
    // Everything on the rank's other streams ends before the step does.
    for (const PassState& st : states_) {
      if (st.rank == p) {
        for (uint32_t e : st.exits) out_.graph.Depend(id, e);
      }
    }
    out_.optimizer.push_back(id);
  }

  // Cross-pass dependencies: a forward after the previous stage's forward
  // (its send), a backward after the next stage's backward and its own
  // stage's forward, a weight-gradient pass after its backward.
  void LinkPasses() {
    const int last = static_cast<int>(pipe_.stages.size()) - 1;
    auto find = [&](PassKind kind, int mb, int stage) -> const PassState* {
      const auto it = index_.find({int(kind), mb, stage});
      return it == index_.end() ? nullptr : &states_[it->second];
    };
    for (const PassState& st : states_) {
      std::vector<const PassState*> before;
      std::vector<uint32_t> wait;
      const int mb = st.pass.microbatch;
      switch (st.pass.kind) {
        case PassKind::kForward:
          if (st.stage > 0) before.push_back(find(PassKind::kForward, mb, st.stage - 1));
          break;
        case PassKind::kBackward:
          if (st.stage < last) before.push_back(find(PassKind::kBackward, mb, st.stage + 1));
          before.push_back(find(PassKind::kForward, mb, st.stage));
          break;
        case PassKind::kWeightGrad:
          if (const PassState* b = find(PassKind::kBackward, mb, st.stage)) {
            wait = b->done;
          }
          break;
      }
      for (const PassState* b : before) {
        if (!b) continue;
        // The same rank's pass is waited for directly; another's through its send.
        const std::vector<uint32_t>& w = b->rank == st.rank ? b->done : b->exits;
        wait.insert(wait.end(), w.begin(), w.end());
        if (b->rank != st.rank && !b->exits.empty() && b->exits != b->done && !st.entries.empty()) {
          out_.sends.push_back({b->exits.front(), st.entries.front()});
        }
      }
      for (uint32_t e : st.entries) {
        for (uint32_t w : wait) out_.graph.Depend(e, w);
      }
    }
  }

  const StepGraphSpec& spec_;
  const StepWork& work_;
  const PipelineOrder& order_;
  const PipelineDescription& pipe_;
  double send_fwd_s_ = 0, send_bwd_s_ = 0;
  bool ep_pairs_ = false;    // some EP op overlaps: 1F1B's steady F/B pairs run as pairs
  bool dp_buckets_ = false;  // the per-step data-parallel ops are bucketed
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

}  // namespace foldplan
