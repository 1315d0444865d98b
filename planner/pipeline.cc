#include "planner/pipeline.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "planner/pipeline_layout.h"
#include "planner/pipeline_split.h"

namespace foldplan {
namespace {

std::string Str(long long v) { return std::to_string(v); }

// The pipeline rank of each of `stages` virtual stages.
std::vector<int> RanksOfStages(PipelineSchedule schedule, int pp, size_t stages) {
  std::vector<int> rank_of(stages);
  for (size_t c = 0; c < stages; ++c) rank_of[c] = PipelineRankOf(schedule, pp, static_cast<int>(c));
  return rank_of;
}

// Weight of each pipeline rank under `stages` (decoder layers per virtual
// stage, summing to the model's layers; stage c on rank rank_of[c]): each
// layer by its kind, the embedding on stage 0, the loss and every MTP layer
// on the last.
std::vector<double> RankWeights(const std::vector<int>& stages, const ModelSpec& model, int pp,
                                const std::vector<int>& rank_of, const BlockWeights& w) {
  std::vector<double> rank(static_cast<size_t>(pp), 0.0);
  int first = 0;
  for (size_t c = 0; c < stages.size(); ++c) {
    const int moe = model.moe_layers_below(first + stages[c]) - model.moe_layers_below(first);
    double& r = rank[static_cast<size_t>(rank_of[c])];
    r += moe * w.moe_layer + (stages[c] - moe) * w.dense_layer;
    first += stages[c];
  }
  rank[static_cast<size_t>(rank_of.front())] += w.embedding;
  rank[static_cast<size_t>(rank_of.back())] += w.loss + model.mtp_layers * w.mtp_layer;
  return rank;
}

// Weight of the heaviest pipeline rank under `stages`.
double HeaviestRank(const std::vector<int>& stages, const ModelSpec& model, int pp, const std::vector<int>& rank_of,
                    const BlockWeights& w) {
  const std::vector<double> rank = RankWeights(stages, model, pp, rank_of, w);
  return *std::max_element(rank.begin(), rank.end());
}

// The least layers virtual stage c may hold: one, but the first may hold
// only the embedding and the last only the loss.
int MinLayers(size_t c, size_t stages) { return (c == 0 || c + 1 == stages) ? 0 : 1; }

// Greedy balance: ranks, then each rank's chunks, take one layer at a time
// where it adds least to the heaviest (layers weighed at their mean), then
// single layers move from the heaviest rank while that lightens it.
Result<std::vector<int>> Balanced(const ModelSpec& model, int pp, int vpp, PipelineSchedule schedule,
                                  const BlockWeights& w) {
  const size_t stages = static_cast<size_t>(pp) * static_cast<size_t>(vpp);
  // Refused before anything the size of `stages` is built: every stage but
  // the first and last needs a layer.
  if (stages > static_cast<size_t>(model.layers) + 2) {
    return Status::Error(Str(model.layers) + " layers cannot fill " + Str(static_cast<long long>(stages)) +
                         " virtual stages (" + Str(pp) + " x " + Str(vpp) +
                         "): every stage but the first and last needs a layer");
  }
  const std::vector<int> rank_of = RanksOfStages(schedule, pp, stages);
  std::vector<std::vector<size_t>> stages_of(static_cast<size_t>(pp));  // each rank's, ascending
  for (size_t c = 0; c < stages; ++c) stages_of[static_cast<size_t>(rank_of[c])].push_back(c);
  std::vector<int> out(stages);
  int minimum = 0;
  for (size_t c = 0; c < stages; ++c) minimum += out[c] = MinLayers(c, stages);
  const int moe = model.moe_layer_count();
  const double mean = (moe * w.moe_layer + (model.layers - moe) * w.dense_layer) / model.layers;
  // Extras on each stage: embedding on the first, loss and MTP on the last.
  std::vector<double> extra(stages, 0.0);
  extra.front() += w.embedding;
  extra.back() += w.loss + model.mtp_layers * w.mtp_layer;
  auto stage_weight = [&](size_t c) { return extra[c] + out[c] * mean; };
  auto rank_weight = [&](int p) {
    double sum = 0;
    for (size_t c : stages_of[static_cast<size_t>(p)]) sum += stage_weight(c);
    return sum;
  };
  for (int left = model.layers - minimum; left > 0; --left) {
    int best_rank = 0;
    for (int p = 1; p < pp; ++p) {
      if (rank_weight(p) < rank_weight(best_rank)) best_rank = p;
    }
    const std::vector<size_t>& own = stages_of[static_cast<size_t>(best_rank)];
    size_t best = own.front();
    for (size_t c : own) {
      if (stage_weight(c) < stage_weight(best)) best = c;
    }
    ++out[best];
  }
  // Local improvement with the layers' own weights (dense and MoE layers
  // differ): move one layer from a stage of the heaviest rank to a stage of
  // the lightest while that lightens the heaviest. Bounded: the greedy above
  // is within one layer of balance already.
  constexpr int kMaxMoves = 256;
  constexpr size_t kTries = 4;  // stages tried on each side
  auto ranks_by_weight = [&] {
    const std::vector<double> rank = RankWeights(out, model, pp, rank_of, w);
    const auto [lo, hi] = std::minmax_element(rank.begin(), rank.end());
    return std::pair<size_t, size_t>(size_t(hi - rank.begin()), size_t(lo - rank.begin()));
  };
  double heaviest = HeaviestRank(out, model, pp, rank_of, w);
  for (int move = 0; move < kMaxMoves; ++move) {
    const auto [heavy, light] = ranks_by_weight();
    if (heavy == light) break;
    auto chunks = [&](size_t p, bool most) {
      std::vector<size_t> c = stages_of[p];
      std::stable_sort(c.begin(), c.end(), [&](size_t a, size_t b) { return most ? out[a] > out[b] : out[a] < out[b]; });
      if (c.size() > kTries) c.resize(kTries);
      return c;
    };
    bool moved = false;
    for (size_t from : chunks(heavy, true)) {
      if (moved || out[from] <= MinLayers(from, stages)) continue;
      for (size_t to : chunks(light, false)) {
        --out[from];
        ++out[to];
        const double h = HeaviestRank(out, model, pp, rank_of, w);
        if (h < heaviest * (1 - 1e-12)) {
          heaviest = h;
          moved = true;
          break;
        }
        ++out[from];
        --out[to];
      }
    }
    if (!moved) break;
  }
  return out;
}

// Layers per virtual stage by the rules of the header.
std::vector<int> LayersPerVirtualStage(const Layout& l, const ModelSpec& model, int pp, int vpp,
                                       PipelineSchedule schedule, const BlockWeights& weights) {
  const int stages = pp * vpp;  // at most the largest world (CheckedProduct in ParseLayout)
  // Summed in 64 bits: stage lists that overflow an int must not pass for the model's layers.
  if (static_cast<int>(l.stage_layers.size()) == stages &&
      std::accumulate(l.stage_layers.begin(), l.stage_layers.end(), int64_t{0}) == model.layers) {
    return l.stage_layers;
  }
  if (Result<std::vector<int>> chosen = ChooseStageLayers(model, pp, vpp, weights, schedule); chosen.ok()) {
    return std::move(chosen).value();
  }
  std::vector<int> even(static_cast<size_t>(stages), model.layers / stages);
  for (int i = 0; i < model.layers % stages; ++i) ++even[static_cast<size_t>(i)];
  return even;
}

}  // namespace

int PipelineRankOf(PipelineSchedule schedule, int pp, int c) {
  const int p = c % pp;
  // DualPipeV's odd chunks run back up the ranks.
  return schedule == PipelineSchedule::kDualPipeV && (c / pp) % 2 == 1 ? pp - 1 - p : p;
}

PipelineSchedule ScheduleOf(const Layout& layout) { return layout.schedule_or_default(); }

const BlockWeights& WeightsOrDefault(const BlockWeights* weights) {
  static const BlockWeights kDefaults;
  return weights ? *weights : kDefaults;
}

bool NeedsChosenLayout(int layers, int pp, int vpp) {
  return layers % (int64_t{std::max(1, pp)} * std::max(1, vpp)) != 0;
}

Result<std::vector<int>> ChooseStageLayers(const ModelSpec& model, int pp, int vpp, const BlockWeights& weights,
                                           std::optional<PipelineSchedule> schedule) {
  if (model.layers < 1 || pp < 1 || vpp < 1) return Status::Error("ChooseStageLayers: bad arguments");
  if (!NeedsChosenLayout(model.layers, pp, vpp)) {
    return std::vector<int>(static_cast<size_t>(pp * vpp), model.layers / (pp * vpp));
  }
  const PipelineSchedule runs = schedule.value_or(DefaultSchedule(vpp));
  Result<std::vector<int>> balanced = Balanced(model, pp, vpp, runs, weights);
  Result<std::vector<int>> megatron = SplitLayers(model.layers, pp, vpp);
  if (!balanced.ok()) return megatron.ok() ? megatron : balanced;
  const std::vector<int> rank_of = RanksOfStages(runs, pp, balanced->size());
  if (megatron.ok() && HeaviestRank(*megatron, model, pp, rank_of, weights) <=
                           HeaviestRank(*balanced, model, pp, rank_of, weights) * (1 + 1e-12)) {
    return megatron;
  }
  return balanced;
}

Status CheckStages(const std::vector<int>& stage_layers, const std::vector<int>& stage_mtp, const ModelSpec& model,
                   int pp, int vpp) {
  const long long stages = 1LL * pp * vpp;
  if (static_cast<long long>(stage_layers.size()) != stages) {
    return Status::Error("the layout lists " + Str(long(stage_layers.size())) +
                         " virtual stages, expected pp*vpp = " + Str(stages));
  }
  long long sum = 0;
  for (int n : stage_layers) sum += n;
  if (sum != model.layers) {
    return Status::Error("the layout places " + Str(sum) + " decoder layers, the model has " + Str(model.layers));
  }
  long long mtp = 0;
  for (int n : stage_mtp) mtp += n;
  if (mtp != 0 && mtp != model.mtp_layers) {
    return Status::Error("the layout places " + Str(mtp) + " MTP layers (m), the model has " +
                         Str(model.mtp_layers) + (model.mtp_layers == 0 ? " (add --mtp N or drop the m)" : ""));
  }
  return Status();
}

std::vector<int> PipelineDescription::StageLayers() const {
  std::vector<int> out;
  out.reserve(stages.size());
  for (const VirtualStage& s : stages) out.push_back(s.layers);
  return out;
}

std::vector<int> PipelineDescription::StageMtp() const {
  std::vector<int> out;
  out.reserve(stages.size());
  for (const VirtualStage& s : stages) out.push_back(s.mtp_layers);
  return out;
}

std::string PipelineDescription::LayoutText() const { return FormatPipelineLayout(StageLayers(), StageMtp()); }

int PipelineDescription::boundaries() const {
  int crossings = 0;
  for (size_t c = 1; c < stages.size(); ++c) crossings += stages[c].pipeline_rank != stages[c - 1].pipeline_rank;
  return crossings;
}

PipelineDescription DescribePipeline(const Layout& layout, const ModelSpec& model, const BlockWeights* weights) {
  PipelineDescription d;
  d.pp = std::max(1, layout.pp);
  d.vpp = std::max(1, layout.vpp);
  d.schedule = ScheduleOf(layout);
  const std::vector<int> layers =
      LayersPerVirtualStage(layout, model, d.pp, d.vpp, d.schedule, WeightsOrDefault(weights));
  // MTP layers where the layout's m put them, else on the last stage.
  const bool mtp_given = layout.stage_mtp.size() == layers.size() &&
                         std::accumulate(layout.stage_mtp.begin(), layout.stage_mtp.end(), int64_t{0}) == model.mtp_layers &&
                         model.mtp_layers > 0;
  d.stages.resize(layers.size());
  d.ranks.resize(static_cast<size_t>(d.pp));
  int first = 0;
  for (size_t c = 0; c < layers.size(); ++c) {
    VirtualStage& s = d.stages[c];
    s.index = static_cast<int>(c);
    s.pipeline_rank = PipelineRankOf(d.schedule, d.pp, s.index);
    s.chunk = s.index / d.pp;
    s.first_layer = first;
    s.layers = layers[c];
    s.moe_layers = model.moe_layers_below(first + s.layers) - model.moe_layers_below(first);
    s.embedding = c == 0;
    s.loss = c + 1 == layers.size();
    s.mtp_layers = mtp_given ? layout.stage_mtp[c] : (s.loss ? model.mtp_layers : 0);
    first += s.layers;
    PipelineRank& r = d.ranks[static_cast<size_t>(s.pipeline_rank)];
    r.layers += s.layers;
    r.moe_layers += s.moe_layers;
    r.mtp_layers += s.mtp_layers;
    r.embedding |= s.embedding;
    r.loss |= s.loss;
  }
  return d;
}

}  // namespace foldplan
