// What foldbench needs from a plan or rank map file: the world size, the
// process groups of every kind, the micro-batch size and, from a plan, the
// model and job shapes the Ulysses op moves. Read straight from the JSON
// (doc/formats.md "Plan", doc/trainers.md) so that validate/ depends on core
// only, not on the planner or cost model whose output it checks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace foldplan::validate {

using GroupList = std::vector<std::vector<int>>;

// Tensor shapes of one micro-batch; present only in plan files (a rank map
// names its model but does not carry the spec).
struct ModelShapes {
  int64_t seq_len = 0;   // tokens per sequence (the job's)
  int64_t mbs = 0;       // sequences per micro-batch (the layout's)
  int64_t heads = 0;     // attention (query) heads
  int64_t kv_heads = 0;  // key/value heads (GQA)
  int64_t head_dim = 0;
  int64_t hidden = 0;
  int64_t ffn_hidden = 0;      // dense MLP (0 when every layer is MoE)
  int64_t experts = 0;         // routed experts; 0 for a dense model
  int64_t top_k = 0;           // experts per token
  int64_t moe_ffn_hidden = 0;  // per expert
};

struct BenchInput {
  std::string file;
  std::string schema;       // "foldplan.plan/v1" or "foldplan.rankmap/v1"
  // JSON pointer of the rank map in the file, for errors found later:
  // "" in a rank map file, "/rank_map" in a plan.
  std::string rank_map_pointer;
  std::string layout_text;  // the layout in foldplan's command-line syntax
  // The order the groups were generated with ("tp-cp-ep-dp-pp"): the rank
  // map's, else the layout text's, else Megatron's default.
  std::string order;
  int world_size = 0;
  std::map<std::string, int64_t> degrees;  // pp dp cp tp ep etp edp mbs ...
  std::map<std::string, GroupList> groups; // "cp" -> [[0, 1], [2, 3], ...]
  bool has_shapes = false;
  ModelShapes shapes;
};

// Parses an already-read document; `file` names it in errors. Every error
// names the file and the JSON pointer of the field, all at once.
//
// Beyond types and ranges it checks what the ops rely on before any
// collective, so that a bad plan is one message on every rank rather than a
// hang or a buffer overrun: each partitioning group kind holds every rank
// exactly once in groups of equal size; each kind with a degree (tp, cp, dp,
// pp, ep, etp, edp, and products such as dp_cp = dp x cp) has groups of
// that size, world / size of them; tp x cp x dp x pp and etp x ep x edp x pp
// are the world; experts divide by ep. Then what the folding implies
// (doc/folding.md): the layout text, the rank map and a plan's first
// candidate agree on degrees, order and world, and every kind's groups are
// those the degrees and order generate (as sets), so no kind but pp crosses
// a pipeline stage and both views factor every stage; the first wrong group
// of a kind is named by its pointer. Group kinds may be missing here:
// which an op needs is CheckGroupsForOps's business (op.h).
Result<BenchInput> ParseBenchInput(const nlohmann::json& doc, const std::string& file);
// Parses the text of a plan or rank map file: ParseJsonText, then
// ParseBenchInput. `file_name` names it in errors. Never throws and never
// crashes, whatever the text (a fuzz target's entry point); every refusal
// is an error status.
Result<BenchInput> ReadPlanText(const std::string& text, const std::string& file_name);
// Reads a file and parses it with ReadPlanText.
Result<BenchInput> ReadBenchInput(const std::string& path);

// Refuses an MPI world that is not the plan's: run before any collective so
// that a wrong -np is one clear message, not a hang or a wrong measurement.
Status CheckWorldSize(const BenchInput& input, int mpi_world_size);

}  // namespace foldplan::validate
