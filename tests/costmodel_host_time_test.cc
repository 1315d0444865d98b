// The host's side of a step (costmodel/host_time.h, doc/cost-model-host.md):
// the counts of a layer's parts turned into seconds by the cluster's
// measured per-op costs, CUDA graphs and recomputation applied, and the
// schedule's exposure of a host that cannot keep up. Each case states the
// arithmetic first, then the number it implies.
#include <doctest/doctest.h>

#include "costmodel/host_time.h"
#include "costmodel/schedule.h"
#include "inputs/loader.h"
#include "planner/legality.h"

using namespace foldplan;

namespace {

// Mixtral 8x7B (32 MoE layers of 8 experts, no shared experts, GQA, no q/k
// norm) on the default cluster's measured host.
struct Mixtral {
  ClusterSpec cluster = LoadCluster("h100-dgx-16n").value();
  ModelSpec model = LoadModel("mixtral-8x7b").value();
  JobSpec job = LoadJob("default").value();
  CostContext ctx;
  Mixtral() {
    ctx.cluster = &cluster;
    ctx.model = &model;
    ctx.job = &job;
  }
  Layout At(const std::string& text) const { return ParseLayout(text, 128, &job).value(); }
  HostWork Work(const std::string& text) const { return HostWorkOf(At(text), ctx); }
};

doctest::Approx Us(double us) { return doctest::Approx(us * 1e-6).epsilon(1e-12); }

}  // namespace

TEST_CASE("a MoE layer's forward on the host, worked by hand: Mixtral 8x7B, tp 1, ep 8, the alltoall dispatcher") {
  // The table's forward rows (host_time.cc) for tp 1, cp 1, ep 8 (one
  // local expert), etp 1, bf16, no overlaps:
  //   attention      3 modules,  7 ops, 5 views
  //   router         2 modules, 10 ops, 3 views
  //   preprocess                 9 ops, 2 views, 1 collective (the counts over TP x EP), 1 sync
  //   dispatch                   2 ops,          2 all-to-alls (tokens, probabilities)
  //   experts        2 modules,  2 ops, 2 views, 2 x 1 + 4 = 6 launches
  //   combine                    2 ops, 2 views, 1 all-to-all
  // = 7 modules, 32 ops, 14 views, 6 launches, 1 collective, 3 all-to-alls.
  // At the measured host (HostSpec: op 10.4, view 10.4 - 4.0 = 6.4,
  // module 9.2, launch 4.0, collective 43.4, all-to-all 60.9 us):
  //   32 x 10.4 + 14 x 6.4 + 7 x 9.2 + 6 x 4.0 + 43.4 + 3 x 60.9
  //   = 332.8 + 89.6 + 64.4 + 24.0 + 43.4 + 182.7 = 736.9 us.
  // The sync ends the preprocessing: issued before it are the attention,
  // the router and the preprocessing,
  //   (7 + 10 + 9) x 10.4 + (5 + 3 + 2) x 6.4 + 5 x 9.2 + 43.4 = 423.8 us.
  Mixtral f;
  const HostWork w = f.Work("tp=1,cp=1,pp=4,ep=8,etp=1");
  const HostPass& fwd = w.of(BlockKind::kMoeLayer).forward;
  CHECK(fwd.host_s == Us(736.9));
  CHECK(fwd.before_sync_s == Us(423.8));
  CHECK(fwd.syncs == 1);
  // Launches: every op, C++ launch and NCCL call starts a kernel: 32 + 6 + 1 + 3.
  CHECK(fwd.launches == 42);
  CHECK(w.sync_s == doctest::Approx(21.1e-6));
}

TEST_CASE("the dropless dispatch syncs once per MoE layer forward; padded to capacity the alltoall does not, DeepEP does") {
  Mixtral f;
  CHECK(f.Work("tp=1,cp=1,pp=4,ep=8,etp=1").of(BlockKind::kMoeLayer).forward.syncs == 1);
  CHECK(f.Work("tp=1,cp=1,pp=4,ep=8,etp=1,dispatcher=deepep").of(BlockKind::kMoeLayer).forward.syncs == 1);
  f.job.capacity_factor = 1.25;
  const HostWork padded = f.Work("tp=1,cp=1,pp=4,ep=8,etp=1");
  CHECK(padded.of(BlockKind::kMoeLayer).forward.syncs == 0);
  // Without a sync everything is issued "before" it.
  CHECK(padded.of(BlockKind::kMoeLayer).forward.before_sync_s == padded.of(BlockKind::kMoeLayer).forward.host_s);
  // DeepEP waits for its received-token count whatever the capacity.
  CHECK(f.Work("tp=1,cp=1,pp=4,ep=8,etp=1,dispatcher=deepep").of(BlockKind::kMoeLayer).forward.syncs == 1);
  // No backward pass syncs without recomputation.
  CHECK(padded.of(BlockKind::kMoeLayer).backward.syncs == 0);
}

TEST_CASE("CUDA graphs of attn, moe_router and moe_preprocess: one replay per pass for the three, the sync kept") {
  // The three parts are contiguous, so they are one captured run: its
  // forward launches (24 ops + 1 collective) become one replay of 49.0 us,
  // and its backward's likewise; the sync that ends the preprocessing
  // stays. Forward: 49.0 + the dispatch, experts and combine rows:
  //   ops 2 + 2 + 2 = 6, views 0 + 2 + 2 = 4, modules 2, launches 6,
  //   all-to-alls 3: 62.4 + 25.6 + 18.4 + 24.0 + 182.7 = 313.1 us;
  //   49.0 + 313.1 = 362.1 us.
  Mixtral f;
  const HostWork eager = f.Work("tp=1,cp=1,pp=4,ep=8,etp=1");
  const HostWork graphed = f.Work("tp=1,cp=1,pp=4,ep=8,etp=1,cuda_graphs=attn+moe_router+moe_preprocess");
  const HostBlock& g = graphed.of(BlockKind::kMoeLayer);
  CHECK(g.forward.host_s == Us(362.1));
  CHECK(g.forward.before_sync_s == Us(49.0));
  CHECK(g.forward.syncs == 1);
  // The replay, then dispatch (2 ops, 2 all-to-alls), experts (2 ops, 6
  // launches) and combine (2 ops, 1 all-to-all).
  CHECK(g.forward.launches == 1 + 4 + 8 + 3);
  CHECK(g.backward.host_s < eager.of(BlockKind::kMoeLayer).backward.host_s);
  // attn alone: the router starts a second, eager run.
  const HostWork attn = f.Work("tp=1,cp=1,pp=4,ep=8,etp=1,cuda_graphs=attn");
  CHECK(attn.of(BlockKind::kMoeLayer).forward.host_s > g.forward.host_s);
  // The embedding and the output layer stay eager but under full_iteration.
  CHECK(graphed.of(BlockKind::kOutputLayer).forward.host_s == eager.of(BlockKind::kOutputLayer).forward.host_s);
}

TEST_CASE("recomputing the moe module issues the MoE forward again in backward, its sync with it") {
  Mixtral f;
  const HostBlock plain = f.Work("tp=1,cp=1,pp=4,ep=8,etp=1").of(BlockKind::kMoeLayer);
  const HostBlock moe = f.Work("tp=1,cp=1,pp=4,ep=8,etp=1,recompute=moe").of(BlockKind::kMoeLayer);
  // Rerun: the router, preprocessing, dispatch, experts and combine rows'
  // forward, 736.9 us less the attention's 3 x 9.2 + 7 x 10.4 + 5 x 6.4 =
  // 132.4 us, so 604.5 us, and the checkpoint's 2 ops (20.8 us).
  CHECK(moe.backward.host_s - plain.backward.host_s == Us(604.5 + 20.8));
  CHECK(moe.backward.syncs == 1);
  CHECK(moe.forward.host_s == plain.forward.host_s);
  // moe_act reruns the activation: one op and the checkpoint's two.
  const HostBlock act = f.Work("tp=1,cp=1,pp=4,ep=8,etp=1,recompute=moe_act").of(BlockKind::kMoeLayer);
  CHECK(act.backward.host_s - plain.backward.host_s == Us(3 * 10.4));
  CHECK(act.backward.syncs == 0);
}

TEST_CASE("TP with sequence parallelism adds its collectives; TP overlap trades them for userbuffer launches") {
  // Attention with tp 2: 2 collectives forward (43.4 us each); with
  // tp_overlap each becomes 2 launches (4.0 us each): 86.8 -> 16 us.
  Mixtral f;
  const double tp1 = f.Work("tp=1,cp=1,pp=4,ep=8,etp=1").of(BlockKind::kMoeLayer).forward.host_s;
  const double tp2 = f.Work("tp=2,cp=1,pp=4,ep=8,etp=1").of(BlockKind::kMoeLayer).forward.host_s;
  const double overlap = f.Work("tp=2,cp=1,pp=4,ep=8,etp=1,tp_overlap=1").of(BlockKind::kMoeLayer).forward.host_s;
  // tp 2 also sums the router's aux-loss counts over TP x CP (1 more collective).
  CHECK(tp2 - tp1 == Us(3 * 43.4));
  CHECK(tp2 - overlap == Us(2 * 43.4 - 4 * 4.0));
}

TEST_CASE("a host slower than its GPU: the pass takes the host's time, and each sync adds what it idles") {
  // One rank, one MoE block, m = 4. Forward: GPU 1 ms, host 3 ms, one
  // sync of 20 us; backward: GPU 2 ms, host 1 ms. Per micro-batch:
  //   t = 3 ms (compute) + max(0, 3 - 1) + max(0, 1 - 2) + 1 x 20 us
  //     = 3 + 2 + 0 + 0.02 = 5.02 ms; pipeline = 4 t = 20.08 ms.
  StepWork w;
  w.pp = 1;
  w.microbatches = 4;
  w.block[static_cast<size_t>(BlockKind::kMoeLayer)] = {1e-3, 2e-3, 0};
  w.ranks.resize(1);
  w.ranks[0].blocks[static_cast<size_t>(BlockKind::kMoeLayer)] = 1;
  w.ranks[0].forward_s = 1e-3;
  w.ranks[0].backward_s = 2e-3;
  HostBlock& h = w.host.block[static_cast<size_t>(BlockKind::kMoeLayer)];
  h.forward.host_s = 3e-3;
  h.forward.syncs = 1;
  h.backward.host_s = 1e-3;
  w.host.sync_s = 20e-6;
  const PipelineTimes t = SchedulePipeline(w);
  CHECK(t.ranks[0].host_exposed_s == doctest::Approx(2.02e-3).epsilon(1e-12));
  CHECK(t.stage_time_s == doctest::Approx(5.02e-3).epsilon(1e-12));
  CHECK(t.pipeline_s == doctest::Approx(20.08e-3).epsilon(1e-12));
  // A plain op of 0.5 ms forward joins the forward's GPU time: the host
  // exceeds it by 3 - 1.5 = 1.5 ms; its 0.5 ms backward call, 2.5 ms of
  // GPU against 1 ms of host, exposes nothing.
  CommOp op;
  op.name = "op";
  op.scope = CommOp::kPerMoeLayer;
  op.calls_fwd = op.calls_bwd = 1;
  op.seconds_per_call = 0.5e-3;
  w.ops.push_back(op);
  const PipelineTimes with_op = SchedulePipeline(w);
  CHECK(with_op.ranks[0].host_exposed_s == doctest::Approx(1.52e-3).epsilon(1e-12));
}

TEST_CASE("a CUDA graph that holds a dropless MoE dispatch is refused; the router and preprocessing may be captured") {
  Mixtral f;
  auto problem = [&](const std::string& text) {
    return rules::CudaGraphsProblem(f.model, f.job, f.At(text));
  };
  CHECK(problem("tp=1,cp=1,pp=4,ep=8,etp=1,cuda_graphs=moe") != "");
  CHECK(problem("tp=1,cp=1,pp=4,ep=8,etp=1,cuda_graphs=layer") != "");
  CHECK(problem("tp=1,cp=1,pp=4,ep=8,etp=1,cuda_graphs=full_iteration") != "");
  CHECK(problem("tp=1,cp=1,pp=4,ep=8,etp=1,cuda_graphs=attn+moe_router+moe_preprocess") == "");
  f.job.capacity_factor = 1;
  CHECK(problem("tp=1,cp=1,pp=4,ep=8,etp=1,cuda_graphs=moe") == "");
  CHECK(problem("tp=1,cp=1,pp=4,ep=8,etp=1,cuda_graphs=full_iteration,dispatcher=deepep") != "");
  // A dense model has no dispatch: a whole layer may be captured.
  f.model = LoadModel("llama3-70b").value();
  CHECK(problem("tp=8,cp=1,pp=4,ep=1,etp=8,cuda_graphs=layer") == "");
}
