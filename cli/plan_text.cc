#include "cli/plan_text.h"

#include "planner/trainer_rules.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>

#include "cli/output.h"
#include "core/text_table.h"

namespace foldplan {

double PeakRssMiB() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is KiB on Linux
}

std::string SearchStatsLine(const SearchResult& r, double seconds, int threads) {
  const uint64_t fitting = r.enumeration.legal_count;  // memory rejections already taken out
  const uint64_t in_full = fitting - r.over_memory_limit - r.pruned;  // objective computed
  std::string line = "search: " + WithCommas(r.enumeration.candidates) + " candidates, " + WithCommas(r.scored) +
                     " legal and scored (" + WithCommas(fitting) + " fit), " + WithCommas(r.pruned) +
                     " pruned by the bound, " + WithCommas(in_full) + " scored in full; " +
                     Fixed(seconds, 2) + " s on " + std::to_string(threads) + (threads == 1 ? " thread" : " threads") +
                     ", peak RSS " + Fixed(PeakRssMiB(), 0) + " MiB";
  return line;
}
namespace {

using Align = TextTable::Align;

void SortByMagnitude(std::vector<Difference>* d) {
  std::stable_sort(d->begin(), d->end(),
                   [](const Difference& x, const Difference& y) { return std::abs(x.delta) > std::abs(y.delta); });
}

std::string Gib(double gib) { return Fixed(gib, 2) + " GiB"; }

}  // namespace

std::string Seconds(double s) {
  if (s >= 1) return Fixed(s, 2) + " s";
  if (s >= 1e-3) return Fixed(s * 1e3, 1) + " ms";
  return Fixed(s * 1e6, 0) + " us";
}

std::string OptionsText(const Layout& l) {
  std::string out = "mbs" + std::to_string(l.mbs) + " " + Name(l.recompute);
  if (l.cp > 1) out += std::string(" ") + Name(l.cp_style);
  if (l.order != kDefaultOrder) out += " " + l.order;
  if (l.placement != Placement::kLinear) out += std::string(" ") + Name(l.placement);
  const std::string recipe = ShortRecipe(l);
  return recipe.empty() ? out : out + " " + recipe;
}

std::string CompactLayout(const Layout& l) { return ShortDegrees(l) + ", " + OptionsText(l); }

std::string MfuText(const StepBreakdown& s, Precision precision) {
  std::string out = "MFU " + Fixed(100 * s.mfu, 1) + "% of bf16 peak";
  if (IsFp8(precision) && s.mfu_precision_peak != s.mfu) {
    out += ", " + Fixed(100 * s.mfu_precision_peak, 1) + "% of fp8 peak";
  }
  return out;
}

std::string TflopsText(const StepBreakdown& s) { return Fixed(s.tflops_per_gpu, 1) + " TFLOP/s per GPU"; }

std::string TopExposed(const Evaluation& e, size_t n) {
  std::vector<CommKindCost> kinds = e.comm;
  std::sort(kinds.begin(), kinds.end(),
            [](const auto& a, const auto& b) { return a.exposed_s > b.exposed_s; });
  std::string out;
  for (size_t i = 0; i < kinds.size() && i < n; ++i) {
    if (kinds[i].exposed_s <= 0) break;
    out += (out.empty() ? "" : ", ") + kinds[i].name + " " + Seconds(kinds[i].exposed_s);
  }
  return out.empty() ? "-" : out;
}

namespace {

// "te-cudnn (Transformer Engine's cuDNN kernels, Megatron --attention-backend
// fused); ring over cp 8: per layer 1 causal and 7 non-causal steps of
// 2048-token blocks".
std::string AttentionText(const JobSpec& job, const Layout& l) {
  std::string out = Name(job.attention_backend);
  switch (job.attention_backend) {
    case AttentionBackend::kTeCudnn:
      out += " (Transformer Engine's cuDNN kernels, Megatron --attention-backend fused)";
      break;
    case AttentionBackend::kFlash2: out += " (FlashAttention-2, Megatron --attention-backend flash)"; break;
    case AttentionBackend::kFlash3:
      out += " (FlashAttention-3 at 1.5 x FlashAttention-2's rates, Megatron --attention-backend flash)";
      break;
  }
  if (l.cp > 1 && l.cp_style == CpStyle::kRing) {
    out += "; ring over cp " + std::to_string(l.cp) + ": per layer 1 causal and " + std::to_string(l.cp - 1) +
           " non-causal steps of " + std::to_string(job.seq_len / l.cp) + "-token blocks";
  }
  return out;
}

}  // namespace

std::string BreakdownText(const Evaluation& e, const JobSpec* job, size_t columns) {
  const StepBreakdown& s = e.step;
  std::string out;
  out += "  layout       " + CompactLayout(e.layout) + "\n";
  out += "  --layout     " + FormatLayout(e.layout) + "\n";
  out += "  step         " + Seconds(s.step_time_s) + " = pipeline " + Seconds(s.pipeline_s) +
         " (of which bubble " + Seconds(s.bubble_s) + ") + exposed data-parallel " +
         Seconds(s.dp_exposed_s) + " + optimizer " + Seconds(s.optimizer_s) + " + host syncs " +
         Seconds(s.host_step_s) + "\n";
  out += "  pipeline     " + std::string(Name(e.pipeline.schedule)) + ", " + e.pipeline.LayoutText() +
         (e.pipeline_chosen ? " (chosen: the layers do not divide over pp x vpp)" : "") + "\n";
  if (job) out += "  attention    " + AttentionText(*job, e.layout) + "\n";
  if (job && job->trainer != Trainer::kMegatron) {
    // What the trainer runs that the cost model prices as Megatron runs it.
    const std::vector<std::string> notes = TrainerCostNotes(job->trainer, e.layout, {nullptr, nullptr, job});
    std::string line;
    for (const std::string& n : notes) line += (line.empty() ? "" : "; ") + n;
    out += std::string("  trainer      ") + Name(job->trainer) + ": " + (line.empty() ? "runs it as priced" : line) +
           " (doc/trainers.md)\n";
  }
  out += "  per micro-batch on stage " + std::to_string(s.slowest_stage) + ": compute " +
         Seconds(s.stage_compute_s) + " + exposed communication " + Seconds(s.stage_exposed_comm_s) +
         " + exposed host " + Seconds(s.stage_host_exposed_s) + ", " + std::to_string(s.microbatches) +
         " micro-batches\n";
  out += "  host         launches " + WithCommas(static_cast<unsigned long long>(s.stage_launches + 0.5)) +
         ", syncs " + WithCommas(static_cast<unsigned long long>(s.stage_syncs + 0.5)) + ", issuing " +
         Seconds(s.stage_host_s) + ", exposed " + Seconds(s.stage_host_exposed_s) +
         " per micro-batch (doc/cost-model-host.md)\n";
  out += "  throughput   " + WithCommas(static_cast<unsigned long long>(s.tokens_per_s)) + " tokens/s, " +
         TflopsText(s) + ", " + MfuText(s, e.layout.precision) + " (" + Fixed(s.model_flops_per_token / 1e9, 2) +
         " GFLOP per token, causal attention; " + Fixed(100 * s.mfu_full_attention, 1) +
         "% counting full attention as Megatron did before core v0.12; see doc/cost-model.md)\n";
  TextTable comm({"communication", "total per step", "exposed"}, {Align::kLeft, Align::kRight, Align::kRight});
  for (const auto& c : e.comm) comm.AddRow({c.name, Seconds(c.total_s), Seconds(c.exposed_s)});
  out += "\n" + comm.Render("  ", columns);
  TextTable mem({"memory (stage " + std::to_string(e.memory.worst_stage) + ")", "GiB", "how"},
                {Align::kLeft, Align::kRight, Align::kLeft});
  for (const auto& t : e.memory.terms) {
    if (t.bytes == 0) continue;
    mem.AddRow({t.name, Fixed(t.bytes / kBytesPerGiB, 2), t.note});
  }
  mem.AddRow({"peak", Fixed(e.memory.peak_gib(), 2),
              std::string(e.memory.fits ? "fits" : "DOES NOT FIT") + " in " + Fixed(e.memory.hbm_gib, 1) + " GiB"});
  out += "\n" + mem.Render("  ", columns);
  return out;
}

std::vector<Difference> StepDifferences(const Evaluation& a, const Evaluation& b) {
  std::vector<Difference> deltas = {
      {"compute per micro-batch x micro-batches",
       (b.step.stage_compute_s * b.step.microbatches) - (a.step.stage_compute_s * a.step.microbatches)},
      {"exposed communication in the pipeline",
       (b.step.stage_exposed_comm_s * b.step.microbatches) - (a.step.stage_exposed_comm_s * a.step.microbatches)},
      {"exposed host in the pipeline",
       (b.step.stage_host_exposed_s * b.step.microbatches) - (a.step.stage_host_exposed_s * a.step.microbatches)},
      {"pipeline bubble", b.step.bubble_s - a.step.bubble_s},
      {"exposed data-parallel traffic", b.step.dp_exposed_s - a.step.dp_exposed_s},
      {"optimizer step", b.step.optimizer_s - a.step.optimizer_s},
  };
  SortByMagnitude(&deltas);
  std::erase_if(deltas, [](const Difference& d) { return std::abs(d.delta) < 1e-6; });
  return deltas;
}

std::vector<Difference> MemoryDifferences(const Evaluation& a, const Evaluation& b) {
  // Every breakdown lists all terms (zeros included), so b's names cover a's.
  std::vector<Difference> deltas;
  for (const MemoryTerm& t : b.memory.terms) {
    const double d = (t.bytes - a.memory.bytes_of(t.name)) / kBytesPerGiB;
    if (std::abs(d) >= 0.005) deltas.push_back({t.name, d});
  }
  SortByMagnitude(&deltas);
  return deltas;
}

std::string StepDifferencesText(const Evaluation& a, const Evaluation& b) {
  std::string out;
  for (const Difference& d : StepDifferences(a, b)) {
    out += "    " + std::string(d.delta > 0 ? "+" : "-") + Seconds(std::abs(d.delta)) + "  " + d.what + "\n";
  }
  out += "  peak memory " + Fixed(a.memory.peak_gib(), 1) + " GiB vs " + Fixed(b.memory.peak_gib(), 1) + " GiB\n";
  return out;
}

std::string WhyItWinsText(const Evaluation& a, const Evaluation& b, Objective objective, const std::string& b_name) {
  if (objective == Objective::kThroughput) {
    return "  " + b_name + " takes " + Seconds(b.step.step_time_s - a.step.step_time_s) + " longer per step:\n" +
           StepDifferencesText(a, b);
  }
  std::string out = "  " + b_name + " needs " + Gib(b.memory.peak_gib() - a.memory.peak_gib()) +
                    " more at its peak (" + Fixed(b.memory.peak_gib(), 2) + " vs " + Fixed(a.memory.peak_gib(), 2) +
                    " GiB):\n";
  for (const Difference& d : MemoryDifferences(a, b)) {
    out += "    " + std::string(d.delta > 0 ? "+" : "-") + Gib(std::abs(d.delta)) + "  " + d.what + "\n";
  }
  out += "  step " + Seconds(a.step.step_time_s) + " vs " + Seconds(b.step.step_time_s) + "\n";
  return out;
}

}  // namespace foldplan
