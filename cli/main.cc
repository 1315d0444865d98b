// foldplan: the command line. A thin dispatch table: each subcommand parses
// its flags into an options struct and makes one library call
// (cli/*_command.h; cli/inputs.h states what each call returns).
#include <cstdio>
#include <iostream>
#include <new>

#include <CLI/CLI.hpp>

#include "cli/calibrate_command.h"
#include "cli/check_command.h"
#include "cli/cli_docs.h"
#include "cli/compare_command.h"
#include "cli/diff_command.h"
#include "cli/enumerate_command.h"
#include "cli/inputs.h"
#include "cli/list_command.h"
#include "cli/plan_command.h"
#include "cli/ranks_command.h"
#include "cli/report_command.h"
#include "cli/simulate_command.h"
#include "cli/topo_command.h"
#include "cli/usage_errors.h"
#include "cli/validate_command.h"
#include "inputs/loader.h"

namespace {

// Whether a command without --model uses the default model (ranks checks
// no model's rules then).
enum class ModelDefault { kShipped, kNone };

void AddInputFlags(CLI::App* cmd, foldplan::InputOptions* in, bool with_model_job = true,
                   ModelDefault model_default = ModelDefault::kShipped) {
  cmd->add_option("--cluster", in->cluster,
                  std::string("cluster: shipped name or JSON path (default ") + foldplan::kDefaultCluster + ")");
  if (with_model_job) {
    cmd->add_option("--model", in->model,
                    model_default == ModelDefault::kNone
                        ? std::string("model: shipped name or JSON path (default: the recipe's or plan's, else "
                                      "none: the model's rules and memory are not checked)")
                        : std::string("model: shipped name or JSON path (default ") + foldplan::kDefaultModel + ")");
    cmd->add_option("--job", in->job,
                    std::string("job: shipped name or JSON path (default ") + foldplan::kDefaultJob + ")");
    cmd->add_option("--seq", in->seq, "override the job's sequence length (tokens)");
    cmd->add_option("--global-batch", in->global_batch, "override the job's global batch (sequences)");
    cmd->add_option("--micro-batch", in->micro_batch, "consider only this micro-batch size");
    cmd->add_option("--precision", in->precision,
                    "the job's precision candidates: bf16, fp8-delayed, fp8-tensorwise (fp8), fp8-blockwise, mxfp8")
        ->type_name("LIST");
    cmd->add_option("--recompute", in->recompute,
                    "the job's recompute candidates: none, selective, full or modules joined by +, e.g. "
                    "layernorm+moe_act")
        ->type_name("LIST");
    cmd->add_option("--dispatcher", in->dispatcher,
                    "the job's dispatcher candidates: alltoall, allgather, deepep (flex), hybridep")
        ->type_name("LIST");
    cmd->add_option("--cuda-graphs", in->cuda_graphs,
                    "the job's CUDA graph candidates: none, layer, full_iteration or Megatron modules joined by +, "
                    "e.g. attn+moe_router+moe_preprocess")
        ->type_name("LIST");
    cmd->add_option("--cp-style", in->cp_style, "the job's CP style candidates: ulysses, ring")->type_name("LIST");
    cmd->add_option("--fsdp", in->fsdp,
                    "the job's FSDP candidates: 0 (distributed optimizer), 1 (Megatron FSDP), or 0,1")
        ->type_name("LIST");
    cmd->add_option("--tp-overlap", in->tp_overlap, "the job's TP communication overlap candidates: 0, 1 or 0,1")
        ->type_name("LIST");
    cmd->add_option("--a2a-overlap", in->a2a_overlap, "the job's EP (all-to-all) overlap candidates: 0, 1 or 0,1")
        ->type_name("LIST");
    cmd->add_option("--schedule", in->schedule,
                    "the job's pipeline schedule candidates: 1f1b, interleaved-1f1b (interleaved), gpipe, zb-h1 "
                    "(zb), dualpipev")
        ->type_name("LIST");
    cmd->add_option("--attention-backend", in->attention_backend,
                    "the job's attention kernels: te-cudnn|flash2|flash3 (te-cudnn: Transformer Engine's cuDNN "
                    "kernels, Megatron's default; flash3: Hopper only)")
        ->type_name("NAME");
    cmd->add_option("--trainer", in->trainer,
                    "the trainer that will run the layout: megatron|torchtitan|olmo-core|maxtext|jax (default: the "
                    "job's, megatron in the shipped jobs); only layouts it can run are legal (doc/trainers.md)")
        ->type_name("NAME");
    cmd->add_option("--mtp", in->mtp, "MTP layers instead of the model's")->type_name("N");
    cmd->add_option("--capacity-factor", in->capacity_factor,
                    "expert capacity factor instead of the job's (0: dropless)")
        ->type_name("X");
    cmd->add_option("--routing-imbalance", in->routing_imbalance,
                    "busiest expert's load / mean instead of the job's (1: forced balance)")
        ->type_name("X");
    cmd->add_option("--gpus", in->gpus, "use only N of the cluster's GPUs, the world size (default: the job's, "
                                        "else all)")
        ->type_name("N");
  }
  cmd->add_option("--nodes", in->nodes, "override the cluster's node count")->type_name("N");
  cmd->add_option("--gpus-per-domain", in->gpus_per_domain,
                  "use only the first N GPUs of every NVLink domain (default: the job's, else all)")
      ->type_name("N");
}

// The calibration flags of the commands that cost (plan, explain, collective, compare).
void AddCalibrationFlags(CLI::App* cmd, std::string* calibration, bool* force_calibration) {
  cmd->add_option("--calibration", *calibration,
                  "a foldplan.calibration file (from `foldplan calibrate`) instead of the cluster's")
      ->type_name("FILE");
  cmd->add_flag("--force-calibration", *force_calibration, "use a calibration made on another GPU");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"foldplan: parallel-folding layout planner for MoE training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", foldplan::kVersionText);

  foldplan::ListOptions list;
  auto* list_cmd = app.add_subcommand("list", "show the shipped clusters, models, jobs and recipes");
  list_cmd->add_option("category", list.category, "only these: clusters|models|jobs|recipes (default: all four)")
      ->type_name("CATEGORY");
  list_cmd->add_flag("--long", list.long_descriptions, "print each description whole (default: cut to 100 characters)");
  list_cmd->add_flag("--json", list.json, "print JSON (every description whole)");

  foldplan::CheckOptions check;
  auto* check_cmd = app.add_subcommand("check", "check input files (cluster, model, job, recipe, measurements, calibration, expert loads) without running anything");
  check_cmd->add_option("files", check.files, "the files; each one's \"schema\" says what it is")->required();

  foldplan::TopoOptions topo;
  auto* topo_cmd = app.add_subcommand("topo", "summarise a cluster's topology");
  AddInputFlags(topo_cmd, &topo.inputs, false);
  topo_cmd->add_flag("--json", topo.json, "print JSON (schema foldplan.topology/v1)");

  foldplan::EnumerateOptionsCli enumerate;
  auto* enum_cmd = app.add_subcommand("enumerate", "list every legal layout of a model on a cluster");
  AddInputFlags(enum_cmd, &enumerate.inputs);
  enum_cmd->add_flag("--json", enumerate.json, "print JSON (schema foldplan.enumeration/v1)");
  enum_cmd->add_flag("--why", enumerate.why, "count the candidates each rule rejected");
  enum_cmd->add_option("--limit", enumerate.limit, "layouts to list (0 = all)")->capture_default_str();
  enum_cmd->add_option("--layout", enumerate.layout, "check one layout, e.g. tp=2,cp=1,pp=8,ep=8,etp=1");
  enum_cmd->add_option("--fix", enumerate.fix, "only layouts that agree with these layout keys, e.g. tp=2,pp=8")
      ->type_name("KEYS");
  enum_cmd->add_option("--format", enumerate.format, "text|json|csv (--json is json)")->capture_default_str();

  foldplan::RanksOptions ranks;
  auto* ranks_cmd = app.add_subcommand("ranks", "export a layout's rank map");
  AddInputFlags(ranks_cmd, &ranks.inputs, true, ModelDefault::kNone);
  ranks_cmd->add_option("--layout", ranks.layout,
                        "the layout, e.g. tp=2,cp=1,pp=8,ep=8,etp=1 (default with --recipe: the recipe's)");
  ranks_cmd->add_option("--recipe", ranks.inputs.recipe,
                        "export a shipped recipe's layout (foldplan list) on its cluster, model and job")
      ->type_name("NAME");
  ranks_cmd->add_option("--format", ranks.format, "rankmap|megatron|torch|torchtitan|torchtitan-toml|olmo-core|jax|maxtext, or a launcher file (--hosts): openmpi-rankfile|slurm|hostfile|env")
      ->capture_default_str();
  auto* world = ranks_cmd->add_option("--world-size", ranks.world_size,
                                      "a generic cluster of N GPUs, 8 per node (instead of --cluster)");
  world->excludes(ranks_cmd->get_option("--cluster"));
  world->excludes(ranks_cmd->get_option("--nodes"));
  ranks_cmd->add_option("-o,--output", ranks.output, "write to FILE (atomically) instead of stdout");
  ranks_cmd->add_option("--hosts", ranks.hosts,
                        "host names, one per line in node order (the launcher formats: openmpi-rankfile, slurm, "
                        "hostfile, env)")
      ->type_name("FILE");
  auto* ranks_plan = ranks_cmd->add_option("--plan", ranks.plan, "or a foldplan.plan/v1 file: its inputs and a candidate")
                         ->type_name("FILE");
  for (const char* flag : {"--layout", "--recipe", "--world-size", "--cluster", "--model", "--job"})
    ranks_plan->excludes(ranks_cmd->get_option(flag));
  ranks_cmd->add_option("--candidate", ranks.candidate, "the plan's candidate #N, numbered from 1 as plan numbers them (default 1, the best)")
      ->type_name("N")
      ->needs(ranks_plan);
  ranks_cmd->add_flag("--force", ranks.force,
                      "export a layout that does not fit in memory (with a warning; without it, exit 1)");

  foldplan::PlanOptions plan;
  auto* plan_cmd = app.add_subcommand("plan", "search every legal layout and rank them by the cost model");
  AddInputFlags(plan_cmd, &plan.inputs);
  AddCalibrationFlags(plan_cmd, &plan.inputs.calibration, &plan.inputs.force_calibration);
  plan_cmd->add_option("--top", plan.top, "candidates to show and write")->capture_default_str();
  plan_cmd->add_option("--simulate-top", plan.simulate_top,
                       "simulate the best N and re-rank them by simulated step time")
      ->type_name("N");
  plan_cmd->add_option("--objective", plan.objective, "throughput|memory")->capture_default_str();
  plan_cmd->add_flag("--json", plan.json, "print JSON (schema foldplan.plan/v1)");
  plan_cmd->add_option("-o,--output", plan.output, "write the plan (foldplan.plan/v1) to FILE");
  plan_cmd->add_flag("--why", plan.why, "count the candidates each rule rejected, memory included");
  plan_cmd->add_option("--threads", plan.threads, "scoring threads")->capture_default_str();
  plan_cmd->add_option("--recipe", plan.inputs.recipe,
                       "search a shipped recipe's setting (foldplan list) and compare the best with its layout")
      ->type_name("NAME");
  plan_cmd->add_option("--fix", plan.fix, "search only layouts that agree with these layout keys, e.g. tp=2,pp=8,ep=32")
      ->type_name("KEYS");
  plan_cmd->add_option("--format", plan.format, "text|json|csv (--json is json)")->capture_default_str();
  auto* plan_distinct = plan_cmd->add_flag(
      "--distinct", plan.distinct,
      "the default: layouts differing only in group order (twins) shown once, with their orders, and layouts of "
      "equal cost to the bit once");
  plan_cmd->add_flag("--all", plan.all, "show every layout, twins included")->excludes(plan_distinct);
  plan_cmd->add_flag("--stats", plan.stats,
                     "print the search's candidates, legal, scored and pruned layouts, time and peak memory on stderr");
  plan_cmd->add_option("--max-mem-gib", plan.max_mem_gib, "only layouts whose peak memory is at most X GiB")
      ->type_name("X");
  plan_cmd->add_option("--headroom-gib", plan.headroom_gib,
                       "only layouts that leave at least X GiB of HBM free (default: 5% of HBM unless --max-mem-gib "
                       "is given; 0: none)")
      ->type_name("X");
  plan_cmd->add_option("--gpus-range", plan.gpus_range,
                       "search each world size: A:B (A, 2A, 4A, ... and B), A:B:STEP or N,M,...; the best of each")
      ->type_name("SIZES");

  foldplan::SimulateOptions simulate;
  auto* simulate_cmd = app.add_subcommand("simulate", "play one layout's training step out as events, beside the analytical model");
  AddInputFlags(simulate_cmd, &simulate.inputs);
  AddCalibrationFlags(simulate_cmd, &simulate.inputs.calibration, &simulate.inputs.force_calibration);
  simulate_cmd->add_option("--layout", simulate.layout, "the layout, e.g. tp=2,cp=1,pp=8,ep=8,etp=1");
  simulate_cmd->add_option("--plan", simulate.plan, "or a foldplan.plan/v1 file: its inputs and a candidate")
      ->type_name("FILE");
  simulate_cmd->add_option("--candidate", simulate.candidate, "the plan's candidate #N, numbered from 1 (1: the best)")
      ->type_name("N");
  // simulate's --schedule is the one layout's schedule, not the job's
  // candidates (AddInputFlags' --schedule).
  simulate_cmd->remove_option(simulate_cmd->get_option("--schedule"));
  simulate.inputs.schedule.reset();
  simulate_cmd->add_option("--schedule", simulate.schedule,
                           "pipeline schedule: 1f1b, interleaved, gpipe, zb or dualpipev (default: the layout's)");
  simulate_cmd->add_option("--overlap", simulate.overlap,
                           "overlaps: all, none or KEY=0|1 joined by commas, keys tp, cp, ep, dp, pp, shared, host "
                           "(default: the layout's recipe; shared off, host on)")
      ->type_name("LIST");
  simulate_cmd->add_option("--imbalance", simulate.imbalance,
                           "routing imbalance: uniform, zipf:S, dirichlet:A or a foldplan.expert-loads/v1 file "
                           "(default balanced); simulates every rank")
      ->type_name("DIST");
  simulate_cmd->add_option("--seed", simulate.seed, "seed of the imbalance's draws")->capture_default_str();
  simulate_cmd->add_flag("--whole", simulate.whole, "simulate every rank even with balanced loads");
  simulate_cmd->add_option("--trace", simulate.trace, "write a Perfetto-readable trace (Chrome trace-event JSON)")
      ->type_name("FILE");
  simulate_cmd->add_option("--trace-ranks", simulate.trace_ranks,
                           "only these simulated ranks in the trace, each once, e.g. 0,3: pipeline ranks, or every "
                           "rank with --whole or --imbalance (default: every rank simulated)")
      ->type_name("LIST")
      ->needs(simulate_cmd->get_option("--trace"));
  simulate_cmd->add_flag("--json", simulate.json, "print JSON (schema foldplan.simulation/v1)");
  simulate_cmd->add_option("--max-tasks", simulate.max_tasks,
                           "refuse a run whose estimate needs more task slots than N (a collective counts once per "
                           "member; about 130 bytes each)")
      ->type_name("N")
      ->capture_default_str();

  foldplan::ExplainOptions explain;
  auto* explain_cmd = app.add_subcommand("explain", "the full cost breakdown of one layout");
  AddInputFlags(explain_cmd, &explain.inputs);
  AddCalibrationFlags(explain_cmd, &explain.inputs.calibration, &explain.inputs.force_calibration);
  explain_cmd->add_option("--layout", explain.layout,
                          "the layout, e.g. tp=2,cp=1,pp=8,ep=8,etp=1 (default with --recipe: the recipe's)");
  explain_cmd->add_option("--recipe", explain.inputs.recipe,
                          "explain a shipped recipe (foldplan list): its cluster, GPUs, model, job and layout")
      ->type_name("NAME");
  explain_cmd->add_flag("--json", explain.json, "print the layout's costs as JSON (a plan candidate)");
  explain_cmd->add_option("-o,--output", explain.output, "write a foldplan.plan/v1 file holding this layout");
  explain_cmd->add_flag("--allow-oom", explain.allow_oom,
                        "accept a layout that does not fit in memory: -o writes its plan and the exit status is 0");
  explain_cmd->add_option("--plan", explain.plan, "or a foldplan.plan/v1 file: its inputs and a candidate")
      ->type_name("FILE");
  explain_cmd->add_option("--candidate", explain.candidate, "the plan's candidate #N, numbered from 1 (1: the best)")->type_name("N");

  foldplan::DiffOptions diff;
  auto* diff_cmd = app.add_subcommand("diff", "two layouts' costs side by side and what explains the gap");
  AddInputFlags(diff_cmd, &diff.inputs);
  AddCalibrationFlags(diff_cmd, &diff.inputs.calibration, &diff.inputs.force_calibration);
  diff_cmd->add_option("--layout", diff.layouts, "give it twice: layout A, then layout B")->type_name("LAYOUT");
  diff_cmd->add_option("--plan", diff.plan, "or a foldplan.plan/v1 file: its inputs and two candidates")
      ->type_name("FILE");
  diff_cmd->add_option("--candidates", diff.candidates, "the plan's two candidates #I,#J, numbered from 1 (1: the best; default 1,2)")
      ->type_name("I,J");
  diff_cmd->add_flag("--json", diff.json, "print JSON (schema foldplan.diff/v1)");

  foldplan::ValidateOptions validate;
  auto* validate_cmd = app.add_subcommand(
      "validate", "run foldbench on a plan under mpirun, printing the exact command first");
  validate_cmd->add_option("--plan", validate.plan, "a foldplan.plan/v1 or foldplan.rankmap/v1 file")
      ->type_name("FILE")
      ->required();
  validate_cmd->add_option("--np", validate.np, "ranks (default and only value: the plan's world size)")
      ->type_name("N");
  validate_cmd->add_option("--backend", validate.backend, "mpi|nccl (default: foldbench's, mpi)")
      ->type_name("NAME")
      ->check(CLI::IsMember({"mpi", "nccl"}));
  validate_cmd->add_option("--ops", validate.ops, "comma-separated foldbench ops (default: foldbench's)")
      ->type_name("LIST");
  validate_cmd->add_option("-o,--output", validate.output, "foldbench writes its measurements JSON to FILE")
      ->type_name("FILE");
  validate_cmd->add_option("--mpirun", validate.mpirun,
                           "the launcher (default " + foldplan::DefaultLauncher() + ")")
      ->type_name("PATH");
  validate_cmd->add_option("--mpirun-args", validate.mpirun_args,
                           "more launcher flags, split on spaces, e.g. \"--hostfile hosts\"")
      ->type_name("ARGS");
  validate_cmd->add_flag("--dry-run", validate.dry_run, "print the command on stdout and run nothing");
  validate_cmd->add_option("--candidate", validate.candidate,
                           "the plan's candidate #N, numbered from 1 (default: the plan's own, #1); its plan is written beside -o")
      ->type_name("N");
  validate_cmd->add_option("--hosts", validate.hosts,
                           "host names, one per line in node order: ranks go on their planned hosts (a rankfile)")
      ->type_name("FILE");
  validate_cmd->add_option("foldbench-args", validate.foldbench_args,
                           "after --: more foldbench flags, e.g. -- --max-seq 512 --iters 3")
      ->type_name("");
  validate_cmd->footer(
      "Flags for foldbench go after -- (doc/validate.md lists them). foldbench is\n"
      "$FOLDBENCH if set, else the foldbench next to foldplan. Open MPI gets\n"
      "--allow-run-as-root when run as root and --oversubscribe when the ranks outnumber\n"
      "this machine's cores and no hosts are named (--hosts, --hostfile). A placement that\n"
      "is not linear, or --hosts, gets an Open MPI --rankfile (doc/validate.md). Exit\n"
      "status is foldbench's: 0 every element right, 1 an invalid plan, 2 usage, 3 a\n"
      "run-time failure (a wrong element among them).");

  foldplan::CalibrateCliOptions calibrate;
  auto* calibrate_cmd = app.add_subcommand(
      "calibrate", "fit the cost model (collectives, GEMM rates) to measurements (foldbench, nccl-tests), scored on held-out sizes");
  calibrate_cmd->add_option("--measurements", calibrate.measurements, "foldbench's foldplan.measurements/v1 files")
      ->type_name("FILE...");
  calibrate_cmd->add_option("--nccl-tests", calibrate.nccl_tests,
                            "nccl-tests logs (stdout of all_reduce_perf, ...); COLLECTIVE:FILE names the collective")
      ->type_name("LOG...");
  AddInputFlags(calibrate_cmd, &calibrate.inputs, false);
  calibrate_cmd->add_option("-o,--output", calibrate.output, "write the calibration (foldplan.calibration/v2) to FILE")
      ->type_name("FILE");
  calibrate_cmd->add_option("--holdout", calibrate.holdout, "share of each series' sizes held out for the error figures")
      ->capture_default_str();
  calibrate_cmd->add_option("--seed", calibrate.seed, "seed of the hold-out draw")->capture_default_str();
  calibrate_cmd->add_option("--max-segments", calibrate.max_segments, "alpha-beta segments per curve, 1-3")
      ->capture_default_str();
  calibrate_cmd->add_flag("--report", calibrate.report, "print the per-series table: fits and held-out errors");
  calibrate_cmd->add_flag("--json", calibrate.json, "print the report as JSON (foldplan.calibration-report/v1)");

  foldplan::CollectiveCliOptions collective;
  auto* collective_cmd = app.add_subcommand(
      "collective", "the cost model's time of one collective across sizes, as an nccl-tests table");
  AddInputFlags(collective_cmd, &collective.inputs, false);
  AddCalibrationFlags(collective_cmd, &collective.inputs.calibration, &collective.inputs.force_calibration);
  collective_cmd->add_option("--op", collective.op,
                             "all_reduce|all_gather|reduce_scatter|all_to_all|all_to_all_v|send_recv")
      ->required();
  collective_cmd->add_option("--ranks", collective.ranks, "ranks in the group")->required();
  collective_cmd->add_option("--ranks-per-domain", collective.ranks_per_domain,
                             "ranks in each NVLink domain (default: as many as one holds)")
      ->type_name("K");
  collective_cmd->add_option("--bytes", collective.bytes, "MIN:MAX sizes, doubling (K, M, G)")->capture_default_str();
  collective_cmd->add_flag("--json", collective.json, "print JSON (foldplan.collective/v1)");
  foldplan::CompareOptions compare;
  auto* compare_cmd = app.add_subcommand(
      "compare", "the cost model's predictions beside foldbench's measurements of a plan, with the errors");
  compare_cmd->add_option("--plan", compare.plan, "the foldplan.plan/v1 file foldbench ran")
      ->type_name("FILE")
      ->required();
  compare_cmd->add_option("--measurements", compare.measurements,
                          "foldbench's foldplan.measurements/v1 output (-o) for that plan")
      ->type_name("FILE")
      ->required();
  AddCalibrationFlags(compare_cmd, &compare.calibration, &compare.force_calibration);
  compare_cmd->add_flag("--json", compare.json, "print JSON (schema foldplan.comparison/v1)");

  foldplan::ReportCommandOptions report;
  auto* report_cmd = app.add_subcommand(
      "report", "a plan as one self-contained HTML page: rank map, candidates, breakdowns, measurements, simulation");
  report_cmd->add_option("--plan", report.plan, "the foldplan.plan/v1 file (plan -o)")->type_name("FILE")->required();
  report_cmd->add_option("--measurements", report.measurements,
                         "foldbench's foldplan.measurements/v1 output for the plan's best layout")
      ->type_name("FILE");
  report_cmd->add_option("--simulation", report.simulation, "simulate --json output (foldplan.simulation/v1)")
      ->type_name("FILE");
  report_cmd->add_option("--color-by", report.color_by,
                         "what colours the rank map: a group kind (tp, cp, dp, ep, edp, pp: the pp groups) or "
                         "stage (the pipeline stages) (default: the largest of ep, tp, cp; dp when all are 1)")
      ->type_name("KIND");
  report_cmd->add_option("--max-gpus", report.max_gpus, "GPUs drawn in the rank map at most (whole domains)")
      ->capture_default_str();
  report_cmd->add_option("-o,--output", report.output, "the HTML file to write")->type_name("FILE")->required();

  auto* man_cmd = app.add_subcommand("man", "print the man page (groff), generated from these definitions");
  auto* completion_cmd = app.add_subcommand("completion", "print a bash completion script for foldplan");
  foldplan::FinishCliDefinition(app);
  foldplan::ApplyValueRules(app);  // every value's rule, a flag added above included

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version; every mistake in foldplan's words (cli/usage_errors.h).
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "foldplan: " << foldplan::ParseErrorText(app, e, argc, argv) << "\n";
    return 2;
  }
  ranks.model_given = !ranks.inputs.model.empty();

  // Out of memory anywhere below: a message and exit 3, never an abort
  // (doc/formats.md "Exit codes"; the estimates keep a run from getting here).
  try {
    if (*list_cmd) return foldplan::RunList(list, std::cout, std::cerr);
    if (*check_cmd) return foldplan::RunCheck(check, std::cout, std::cerr);
    if (*topo_cmd) return foldplan::RunTopo(topo, std::cout, std::cerr);
    if (*enum_cmd) return foldplan::RunEnumerate(enumerate, std::cout, std::cerr);
    if (*ranks_cmd) return foldplan::RunRanks(ranks, std::cout, std::cerr);
    if (*plan_cmd) return foldplan::RunPlan(plan, std::cout, std::cerr);
    if (*explain_cmd) return foldplan::RunExplain(explain, std::cout, std::cerr);
    if (*diff_cmd) return foldplan::RunDiff(diff, std::cout, std::cerr);
    if (*simulate_cmd) return foldplan::RunSimulate(simulate, std::cout, std::cerr);
    if (*validate_cmd) return foldplan::RunValidate(validate, std::cout, std::cerr);
    if (*calibrate_cmd) return foldplan::RunCalibrate(calibrate, std::cout, std::cerr);
    if (*collective_cmd) return foldplan::RunCollective(collective, std::cout, std::cerr);
    if (*compare_cmd) return foldplan::RunCompare(compare, std::cout, std::cerr);
    if (*report_cmd) return foldplan::RunReport(report, std::cout, std::cerr);
    if (*man_cmd) return foldplan::WriteManPage(app, std::cout), 0;
    if (*completion_cmd) return foldplan::WriteBashCompletion(app, std::cout), 0;
  } catch (const std::bad_alloc&) {
    std::fputs("foldplan: out of memory: the command needed more memory than this machine gave it; "
               "ask for less (doc/formats.md \"Resource contract\" says what each command's size grows with)\n",
               stderr);
    return 3;
  }
  return 2;
}
