// The inputs every command loads: the flags that name and override them
// (InputOptions), checked on their own before any file is read
// (CheckInputFlags), then loaded (LoadInputs); and the --layout, --fix and
// --format values several commands share.
//
// Each command (cli/*_command.h) is one library call that cli/main.cc makes
// with the flags parsed into its options struct: it writes its report to
// `out`, errors to `err`, and returns the process exit code of
// doc/formats.md's table (Exit codes): 0 a positive answer; 1 an invalid
// input file or a negative answer (no legal layout, a layout illegal or out
// of memory); 2 command-line usage. Each checks its flag values on their
// own first (ranges, names, the --layout text, flags that exclude each
// other) and answers 2 for any of them before loading or computing anything.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "costmodel/comm_params.h"
#include "inputs/cluster.h"
#include "inputs/job.h"
#include "inputs/model.h"
#include "inputs/recipe.h"
#include "planner/layout.h"
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
// after CheckInputFlags, applies the overrides, then the job's model and cluster settings
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
// The same as JSON: cluster, cluster_gpus, model, job, seq_len,
// global_batch, precision, trainer.
nlohmann::ordered_json InputsJson(const Inputs& inputs);
// The GPUs a layout spans: the job's world_size, else the whole cluster.
int WorldOf(const ClusterSpec& cluster, const JobSpec& job);

// The inputs of a command whose model is optional (ranks): the cluster (a
// generic one of `world_size` GPUs when given, else the named one, whole),
// the job with the overrides and its gpus_per_domain applied, and the
// model with the job's settings when `with_model`.
struct InputsModelOptional {
  ClusterSpec cluster;
  JobSpec job;
  std::optional<ModelSpec> model;
};
Result<InputsModelOptional> LoadInputsModelOptional(const InputOptions& options, std::optional<int> world_size,
                                                    bool with_model);

// An integer flag's value in [lo, hi] (unset passes), the range of the
// file field it overrides: "--seq: expected an integer in [1, 16777216],
// found 0".
Status CheckIntFlag(const char* flag, const std::optional<int>& value, int64_t lo, int64_t hi);

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

// --format of plan and enumerate: text (the default), json (also --json)
// or csv (cli/csv.h); --json with --format csv is a usage error.
enum class TableFormat { kText, kJson, kCsv };
Result<TableFormat> ParseTableFormat(const std::string& format, bool json_flag);

}  // namespace foldplan
