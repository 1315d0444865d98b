// The foldplan subcommands as library calls: cli/main.cc parses the command
// line into these option structs and calls one function, which writes its
// report to `out`, errors to `err`, and returns the process exit code of
// doc/formats.md's table (Exit codes): 0 a positive answer; 1 an invalid
// input file or a negative answer (no legal layout, a layout illegal or out
// of memory); 2 command-line usage. Each function checks its flag values on
// their own first (ranges, names, the --layout text, flags that exclude each
// other) and answers 2 for any of them before loading or computing anything.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/status.h"
#include "inputs/cluster.h"
#include "inputs/job.h"
#include "inputs/model.h"
#include "inputs/recipe.h"
#include "costmodel/comm_params.h"
#include "planner/legality.h"

namespace foldplan {

// --cluster/--model/--job and the job overrides common to most commands.
struct InputOptions {
  std::string cluster = "";           // name or path; "" = shipped default
  std::string model = "";
  std::string job = "";
  std::optional<int> nodes;           // --nodes: override the cluster's node count
  std::optional<int> gpus;            // --gpus: use only this many of the cluster's GPUs
  std::optional<int> seq;             // --seq: tokens per sequence
  std::optional<int> global_batch;    // --global-batch: sequences per step
  std::optional<int> micro_batch;     // --micro-batch: the only micro-batch size considered
  // Candidate lists, comma-separated: --precision, --recompute, --dispatcher,
  // --cuda-graphs, --cp-style, --fsdp, --tp-overlap, --a2a-overlap,
  // --schedule; each replaces its job field's list.
  std::optional<std::string> precision;
  std::optional<std::string> recompute;
  std::optional<std::string> cuda_graphs;
  std::optional<std::string> dispatcher;
  std::optional<std::string> cp_style;     // job cp_styles: ulysses, ring
  std::optional<std::string> fsdp;         // job fsdp: 0, 1 (or false, true)
  std::optional<std::string> tp_overlap;   // job tp_overlap: 0, 1
  std::optional<std::string> a2a_overlap;  // job a2a_overlap: 0, 1
  std::optional<std::string> schedule;     // job pipeline_schedules: 1f1b, interleaved-1f1b, ...
  std::optional<std::string> attention_backend;  // --attention-backend NAME: the job's one backend
  std::optional<std::string> trainer;            // --trainer NAME: the trainer the layouts are for
  std::optional<int> mtp;                   // --mtp N: MTP layers instead of the model's
  std::optional<double> capacity_factor;    // --capacity-factor X (0: dropless)
  std::optional<double> routing_imbalance;  // --routing-imbalance X (1: forced balance)
  std::optional<int> gpus_per_domain;       // --gpus-per-domain N: N GPUs of every NVLink domain
  // --recipe NAME: the cluster, GPUs, model and job of a shipped (or given)
  // recipe instead of --cluster / --model / --job; the job overrides still apply.
  std::string recipe;
  // --calibration FILE: a foldplan.calibration/v1 or v2 file in place of
  // the cluster file's `calibration` field (commands that cost).
  std::string calibration;
  bool force_calibration = false;  // --force-calibration: accept a file made on another GPU
};

// The flag values on their own, before any file is read: each number in
// its file field's range (inputs/cluster.h, inputs/job.h), each name known,
// no candidate repeated, and no flag a --recipe excludes. An error is a
// usage error (exit 2).
Status CheckInputFlags(const InputOptions& options);

struct Inputs {
  ClusterSpec cluster;  // with the job's gpus_per_domain applied
  ModelSpec model;      // with the job's mtp_layers applied
  JobSpec job;
  std::optional<RecipeSpec> recipe;  // when loaded from --recipe
  CalibrationUse calibration_use;    // --force-calibration
};

// Loads the cluster, model and job (defaults where unnamed, or the recipe's)
// after CheckInputFlags,
// applies the overrides, then the job's model and cluster settings
// (mtp_layers; gpus_per_domain, from the job file, the recipe or
// --gpus-per-domain, cuts the cluster once, as in topo and ranks).
Result<Inputs> LoadInputs(const InputOptions& options);
// The cluster alone, for commands that read no model or job (topo,
// calibrate, collective): --nodes, --gpus-per-domain and --calibration applied.
Result<ClusterSpec> LoadClusterAlone(const InputOptions& options);

// "[recipe R: ]cluster C ([K of ]N x GPU), model M, job J (seq S, global
// batch B, P)": the recipe prefix when loaded from --recipe, "K of" when the
// job uses K of the cluster's N GPUs, P the precision candidates joined by
// '/' ("bf16/mxfp8").
std::string InputsLine(const Inputs& inputs);

// What a calibrated cost model must say on stderr: before costing, that a
// file made on another GPU is used as forced; after, one warning per
// (collective, placement class) it had no fit for (the defaults costed it)
// and per one whose fit it used past the largest size measured.
void WarnAboutCalibrationGpu(const CommParams& params, const ClusterSpec& cluster, std::ostream& err);
void WarnAboutFitMisses(const CommParams& params, std::ostream& err);

// --layout against the world size: options it leaves out take the job's
// first candidates, the stage split is filled (ctx.weights choose uneven
// ones), and legality is checked: an illegal layout's error lists every
// rule it breaks.
Result<Layout> ResolveLayout(const std::string& text, int default_world, const LegalityContext& ctx);
// "layout L is illegal; it breaks N rules:" and a line per rule, for stderr.
std::string IllegalLayoutText(const Layout& layout, const std::vector<Violation>& violations);
// --fix KEYS as pins (none when the flag is not given); the error names the
// flag and is a usage error.
Result<LayoutPins> ParsePins(const std::optional<std::string>& fix);
// The --layout text on its own (ParseLayoutPins): its error is a usage error.
Status CheckLayoutText(const std::optional<std::string>& layout);

// Limits of the commands' own flags (doc/formats.md, Command-line values).
inline constexpr int kMaxTop = 10000;  // plan --top in [1, this]: candidates costed in full and written
inline constexpr double kMaxMemoryGib = 1 << 20;  // plan --max-mem-gib in (0, this], --headroom-gib in [0, this]
inline constexpr int kMaxWorldSizes = 64;         // plan --gpus-range: at most this many world sizes

// --format of plan and enumerate: text (the default), json (also --json)
// or csv (cli/csv.h); --json with --format csv is a usage error.
enum class TableFormat { kText, kJson, kCsv };
Result<TableFormat> ParseTableFormat(const std::string& format, bool json_flag);

// `foldplan list [CATEGORY...] [--long] [--json]`: the shipped inputs, all
// four kinds or the categories named (clusters, models, jobs, recipes; the
// singular too); --long prints each description whole, wrapped.
struct ListOptions {
  std::vector<std::string> category;
  bool long_descriptions = false;
  bool json = false;
};
inline constexpr size_t kListDescriptionChars = 100;  // list without --long cuts each description to this
int RunList(const ListOptions& options, std::ostream& out, std::ostream& err);

// `foldplan check FILE...`: each file read as the input its "schema" names
// (cluster, model, job, recipe, foldbench's measurements), every field and
// cross-field rule checked,
// a cluster's topology built, a recipe's cluster, model, job and layout
// loaded. 0 when every file is valid, else 1 with each file's errors.
struct CheckOptions {
  std::vector<std::string> files;
};
int RunCheck(const CheckOptions& options, std::ostream& out, std::ostream& err);

struct TopoOptions {
  InputOptions inputs;
  bool json = false;
};
int RunTopo(const TopoOptions& options, std::ostream& out, std::ostream& err);

struct EnumerateOptionsCli {
  InputOptions inputs;
  bool json = false;
  bool why = false;                   // per-rule rejection counts
  int limit = 40;                     // layouts shown in the text table; 0 = all; >= 0
  std::optional<std::string> layout;  // check this one layout instead of enumerating
  std::optional<std::string> fix;     // --fix: only the layouts that agree with these keys
  std::string format = "text";        // --format text|json|csv (--json is json)
};
int RunEnumerate(const EnumerateOptionsCli& options, std::ostream& out, std::ostream& err);

struct RanksOptions {
  InputOptions inputs;
  std::optional<std::string> layout;  // required unless --recipe gives one
  std::string format = "rankmap";     // rankmap|megatron|torch|torchtitan|olmo-core
  std::optional<int> world_size;      // --world-size: generic cluster of N GPUs, [1, kMaxWorldSize]
  bool model_given = false;           // --model given: run the model's legality rules
  std::string output;                 // -o FILE; "" = stdout
  // The launcher formats (openmpi-rankfile|slurm|hostfile|env,
  // planner/launch_files.h) need --hosts FILE: host names in node order.
  std::string hosts;
  // --plan FILE [--candidate N]: a foldplan.plan/v1 file's inputs and its
  // candidate #N (from 1, the best) instead of --layout and the input flags.
  std::string plan;
  std::optional<int> candidate;
  // With a model, a layout that does not fit in memory is refused (exit 1)
  // unless --force, which exports it with a warning.
  bool force = false;
};
int RunRanks(const RanksOptions& options, std::ostream& out, std::ostream& err);

struct PlanOptions {
  InputOptions inputs;
  int top = 10;                       // candidates shown and written, [1, kMaxTop]
  std::string objective = "throughput";  // throughput|memory
  bool json = false;
  std::string output;                 // -o plan.json
  bool why = false;                   // rejection counts, memory included
  int threads = 2;                    // [1, kMaxSearchThreads] (planner/search.h)
  std::optional<std::string> fix;     // --fix: only the layouts that agree with these keys
  int simulate_top = 0;               // --simulate-top N: re-rank the best N by simulated step time
  std::string format = "text";        // --format text|json|csv (--json is json)
  // The table shows each layout once: twins (differing only in group
  // order) and layouts of bit-equal score (planner/search.h) collapsed.
  bool distinct = false;              // --distinct: that default, said
  bool all = false;                   // --all: every layout, twins included
  // --stats: the search's counts, time and peak memory on stderr (also
  // without it when stderr is a terminal and the search took over a second).
  bool stats = false;
  std::optional<double> max_mem_gib;  // --max-mem-gib X: only layouts whose peak is <= X GiB
  std::optional<double> headroom_gib; // --headroom-gib X: only layouts with >= X GiB of HBM to spare
  // --gpus-range A:B (A, 2A, 4A, ... <= B, and B), A:B:S (A, A+S, ... <= B)
  // or a list N,M,...: the search at each world size, the best of each.
  std::string gpus_range;
};
int RunPlan(const PlanOptions& options, std::ostream& out, std::ostream& err);

struct ExplainOptions {
  InputOptions inputs;
  std::optional<std::string> layout;  // required unless --recipe gives one
  bool json = false;
  std::string output;                 // -o plan.json holding just this layout
  bool allow_oom = false;             // -o writes (and exit 0) even when the layout does not fit in memory
  std::string plan;                   // --plan FILE: a foldplan.plan/v1 file's inputs and
  int candidate = 1;                  //   candidate #N (1: the best) instead of --layout
};
int RunExplain(const ExplainOptions& options, std::ostream& out, std::ostream& err);

}  // namespace foldplan
