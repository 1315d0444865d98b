// What each trainer can run (doc/trainers.md): the trainer rules, named
// like the legality rules (planner/legality.h) and checked beside them when
// a job names a trainer other than Megatron-LM. One home for each trainer's
// limits: legality, enumeration, `plan`'s "which trainers can run it" and
// every exporter's refusal read them here.
//
// The rules come in two levels, as enumeration meets them:
//  - the arrangement: degrees, pipeline, CP style, order and placement
//    (TrainerArrangementProblem);
//  - the recipe: recompute, dispatcher, overlaps, precision, FSDP, CUDA
//    graphs (TrainerRecipeProblem, which reads of the rest only tp, ep, pp
//    and vpp, the key enumeration decides recipes by).
// No rule reads both an arrangement field and a recipe field.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "inputs/cluster.h"
#include "inputs/job.h"
#include "inputs/model.h"
#include "planner/layout.h"
#include "planner/legality.h"

namespace foldplan {

// What the trainer rules read besides the layout. `model` and `cluster` may
// be null (their rules are skipped); `job` may be null (defaults).
struct TrainerContext {
  const ClusterSpec* cluster = nullptr;
  const ModelSpec* model = nullptr;
  const JobSpec* job = nullptr;
};

// Megatron's own validation of a recipe that the legality rules before it
// pass (deepep_no_padding, fp8_delayed_recompute): what Megatron's
// TransformerConfig refuses. Every trainer's layout passes it too (the
// layout is Megatron's description of the run). `job` may be null.
std::optional<Violation> MegatronRecipeProblem(const Layout& l, const JobSpec* job);

// The first arrangement rule of `trainer` the layout breaks, in rule order;
// none for Megatron (its rules are the legality rules).
std::optional<Violation> TrainerArrangementProblem(Trainer trainer, const Layout& l, const TrainerContext& ctx);
// The first recipe rule of `trainer` the layout breaks; none for Megatron.
std::optional<Violation> TrainerRecipeProblem(Trainer trainer, const Layout& l, const TrainerContext& ctx);
// Both, arrangement first: what `trainer` refuses of the layout (at most
// one violation of each level).
std::vector<Violation> CheckTrainer(Trainer trainer, const Layout& l, const TrainerContext& ctx);

// An exporter's refusal for a layout `trainer` cannot run: ok when it can;
// else "<trainer> cannot run this layout: <rule>: <detail> (doc/trainers.md);
// `foldplan plan --trainer <trainer>` on the same inputs finds the best
// layout it runs" (the re-plan left out for Megatron). Also checks
// Megatron's own validation (CheckLayout is not repeated: an exporter's
// layout is legal), so every export refuses what its trainer refuses.
Status TrainerRefusal(Trainer trainer, const Layout& l, const TrainerContext& ctx);

// What the trainer runs differently from what the cost model prices for
// the layout (e.g. OLMo-core's HSDP with shard = ep priced as Megatron's
// distributed optimizer), one sentence each; empty for Megatron. `plan`,
// `explain` and the exports print them.
std::vector<std::string> TrainerCostNotes(Trainer trainer, const Layout& l, const TrainerContext& ctx);

// The job's candidates widened with what `trainer` runs and the job lacks,
// so that a default job still finds its layouts: torchtitan's ring CP and
// FSDP2, OLMo-core's HSDP (FSDP) for MoE; and, for a job that lists no
// pipeline schedules (the implied ones, 1f1b and interleaved-1f1b: all
// Megatron runs), torchtitan's DualPipeV (its GPipe is never faster than
// 1F1B in the cost model, the same step with more in flight). The rules
// then refuse what the trainer cannot run (counted in --why). Megatron:
// the job unchanged.
JobSpec JobForTrainer(const JobSpec& job);

}  // namespace foldplan
