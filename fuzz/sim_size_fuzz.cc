// libFuzzer target: a simulation run's size from bytes (world, pp, vpp,
// micro-batches, imbalance, whole and trace), Mixtral-8x7B on the shipped
// H100 nodes. The rule: the estimate made before the run (sim/sim_estimate.h)
// bounds what the run built: its tasks and their members, dependencies,
// passes, events and the most events queued, and (built with ASan, whose
// allocator hooks count the heap) the bytes it held at its peak; a run
// above the limit is refused with the flag that raises it, and nothing is
// built.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "costmodel/evaluate.h"
#include "fuzz/fuzz_input.h"
#include "inputs/loader.h"
#include "planner/layout.h"
#include "sim/simulate.h"

using namespace foldplan;

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIM_SIZE_FUZZ_HEAP 1
#include <sanitizer/allocator_interface.h>
#endif
#endif

namespace {

#ifdef SIM_SIZE_FUZZ_HEAP
// The heap the run holds, counted by ASan's allocator hooks: live bytes
// and their peak since the last reset (one thread runs a simulation).
size_t g_live_bytes = 0;
size_t g_peak_bytes = 0;
void OnMalloc(const volatile void*, size_t bytes) {
  g_live_bytes += bytes;
  g_peak_bytes = std::max(g_peak_bytes, g_live_bytes);
}
void OnFree(const volatile void* p) {
  const size_t bytes = __sanitizer_get_allocated_size(const_cast<const void*>(p));
  g_live_bytes -= std::min(g_live_bytes, bytes);
}
const bool kHooked = __sanitizer_install_malloc_and_free_hooks(OnMalloc, OnFree) != 0;
#endif

// Small enough that a fuzz input runs in well under a second.
constexpr long long kSizeFuzzMaxSlots = 1LL << 18;

void SizeFuzzFail(const char* what, double built, double bound) {
  std::fprintf(stderr, "sim_size_fuzz: %s %.0f above the estimate %.0f\n", what, built, bound);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 6) return 0;
  static const ClusterSpec cluster = LoadCluster("h100-dgx-16n").value();
  static const ModelSpec model = LoadModel("mixtral-8x7b").value();
  const int nodes = 1 + data[0] % 16;           // 8 .. 128 GPUs
  const int pp = 1 << (data[1] % 4);            // 1, 2, 4, 8
  const int vpp = 1 + (data[2] & 1);            // 1 or 2
  const long long global = 8LL << (data[3] % 18);  // 8 .. 2^20 sequences
  const char* imbalance[] = {"", "uniform", "zipf:1", "dirichlet:0.5"};
  const int flags = data[4];
  JobSpec job = LoadJob("default").value();
  job.global_batch = global;
  const int world = nodes * 8;
  const std::string text = "tp=1,cp=1,pp=" + std::to_string(pp) + ",vpp=" + std::to_string(vpp) +
                           ",ep=8,etp=1" + (data[5] & 1 ? ",a2a_overlap=1" : "") +
                           ",world=" + std::to_string(world);
  auto layout = ParseLayout(text, cluster.total_gpus(), &job);
  if (!layout.ok()) return 0;
  auto cost = CostModel::Create(cluster, model, job);
  if (!cost.ok()) return 0;
  SimOptions o;
  o.whole = flags & 1;
  o.trace = flags & 2;
  o.imbalance = ParseLoadSpec(imbalance[(flags >> 2) & 3]).value();
  o.seed = flags >> 4;
  o.max_task_slots = kSizeFuzzMaxSlots;
  auto e = EstimateSimulation(*cost.value(), layout.value(), o);
#ifdef SIM_SIZE_FUZZ_HEAP
  g_peak_bytes = g_live_bytes;
  const size_t before_bytes = g_live_bytes;
#endif
  auto r = Simulate(*cost.value(), layout.value(), o);
#ifdef SIM_SIZE_FUZZ_HEAP
  const double heap_bytes = double(g_peak_bytes - before_bytes);
#endif
  if (!e.ok()) {
    if (r.ok()) {
      std::fprintf(stderr, "sim_size_fuzz: no estimate (%s) but a run\n", e.status().message().c_str());
      std::abort();
    }
    return 0;
  }
  if (!r.ok()) {
    const bool over = e->task_slots > double(kSizeFuzzMaxSlots);
    if (over && r.status().message().find("--max-tasks") == std::string::npos) {
      std::fprintf(stderr, "sim_size_fuzz: refusal without the flag: %s\n", r.status().message().c_str());
      std::abort();
    }
    return 0;
  }
  if (e->task_slots > double(kSizeFuzzMaxSlots)) SizeFuzzFail("a run over the limit: slots", 0, e->task_slots);
  const TaskGraph& g = r->graph.graph;
  double members = 0;
  for (uint32_t i = 0; i < g.size(); ++i) members += g.task(i).member_count;
  if (members > e->task_slots) SizeFuzzFail("task members", members, e->task_slots);
  if (double(g.edge_count()) > e->edges) SizeFuzzFail("dependencies", double(g.edge_count()), e->edges);
  if (double(r->graph.passes.size()) > e->passes) SizeFuzzFail("passes", double(r->graph.passes.size()), e->passes);
  if (double(r->events) > e->events) SizeFuzzFail("events", double(r->events), e->events);
  if (double(r->run.peak_queued) > e->events) SizeFuzzFail("events queued", double(r->run.peak_queued), e->events);
#ifdef SIM_SIZE_FUZZ_HEAP
  if (kHooked && heap_bytes > HeapBoundBytes(*e)) SizeFuzzFail("heap bytes", heap_bytes, HeapBoundBytes(*e));
#endif
  return 0;
}
