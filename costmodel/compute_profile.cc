// Reading a compute profile and looking rates up (compute_profile.h).
#include "costmodel/compute_profile.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/json_check.h"
#include "core/mix64.h"
#include "inputs/loader.h"

namespace foldplan {

using nlohmann::json;

namespace {

constexpr int64_t kMaxDim = (int64_t(1) << 31) - 1;  // any GEMM or sequence size
constexpr int64_t kMaxCount = 1 << 20;               // heads, experts, CP degree
constexpr double kMaxRate = 1e9;                     // TFLOP/s or GB/s; more is a typo
constexpr double kMinPositive = 1e-12;

// Free-text fields of the root (the measurement's provenance).
constexpr std::initializer_list<const char*> kInformational = {
    "description", "source", "notes", "method", "torch", "date", "attention_notes", "gemm_notes"};
// Every field the root may have.
constexpr std::initializer_list<const char*> kRootFields = {
    "schema", "description", "source", "notes", "method", "torch", "date", "gpu",
    "peak_bf16_tflops", "peak_fp8_tflops", "hbm_tb_per_s", "d2d_copy_gbps", "gemm_bf16",
    "gemm_fp8", "grouped_gemm_bf16", "attention", "attention_cudnn", "attention_notes", "gemm_notes", "permute_copy"};

using Points = std::vector<std::pair<double, double>>;  // (x, rate)

ComputeProfile::Curve BuildCurve(Points points) {
  std::sort(points.begin(), points.end());
  ComputeProfile::Curve c;
  for (size_t i = 0; i < points.size();) {
    // Repeated measurements of one x (the H200 file has a few) are averaged.
    size_t j = i;
    double sum = 0;
    while (j < points.size() && points[j].first == points[i].first) sum += points[j++].second;
    c.log_x.push_back(std::log(points[i].first));
    c.rate.push_back(sum / double(j - i));
    i = j;
  }
  return c;
}

double Sq(double x) { return x * x; }

// Nearest entry of `tables` by (log n, log k) among those `usable`; -1 if none.
template <class Table, class Usable>
int NearestShape(const std::vector<Table>& tables, double log_n, double log_k, Usable usable) {
  int best = -1;
  double best_d = 0;
  for (size_t i = 0; i < tables.size(); ++i) {
    if (!usable(tables[i])) continue;
    const double d = Sq(tables[i].log_n - log_n) + Sq(tables[i].log_k - log_k);
    if (best < 0 || d < best_d) {
      best = int(i);
      best_d = d;
    }
  }
  return best;
}

// A field that is free text or null (the H200 file's "model" of generic
// shapes is null). Asking for it as an optional object marks it read
// without an error when null; otherwise it must be a string.
void InformationalField(CheckedObject& o, const json& raw, const char* key) {
  if (raw.is_object() && raw.contains(key) && raw.at(key).is_null()) {
    o.OptionalObject(key);
    return;
  }
  o.String(key, "");
}

// The list at root/key, or nullptr (with an error when required or mistyped).
const json* ObjectList(const json& root, const std::string& key, bool required,
                       JsonErrors& errors) {
  const std::string pointer = "/" + key;
  auto it = root.find(key);
  if (it == root.end()) {
    if (required) errors.Add(pointer, "missing; expected a non-empty list of objects");
    return nullptr;
  }
  if (!it->is_array() || it->empty()) {
    errors.Add(pointer, "expected a non-empty list of objects, found " + DescribeJsonValue(*it));
    return nullptr;
  }
  return &*it;
}

// Sets the rate at log_x: replaces the point there, else inserts one.
void SetPoint(ComputeProfile::Curve& c, double log_x, double rate) {
  const auto it = std::lower_bound(c.log_x.begin(), c.log_x.end(), log_x);
  const size_t i = size_t(it - c.log_x.begin());
  if (it != c.log_x.end() && *it == log_x) {
    c.rate[i] = rate;
    return;
  }
  c.log_x.insert(it, log_x);
  c.rate.insert(c.rate.begin() + std::ptrdiff_t(i), rate);
}

// The entry of `list` whose fields n_of and k_of are exactly (n, k),
// appended when none is: a shape's points while reading, its table when
// merging measured points.
template <class T, class V>
T& FindShape(std::vector<T>& list, V T::*n_of, V T::*k_of, V n, V k) {
  for (T& t : list) {
    if (t.*n_of == n && t.*k_of == k) return t;
  }
  list.push_back(T{});
  list.back().*n_of = n;
  list.back().*k_of = k;
  return list.back();
}

std::string ElementPointer(const std::string& key, size_t i) {
  return "/" + key + "/" + std::to_string(i);
}

}  // namespace

double ComputeProfile::Curve::At(double log_x_query, Below below) const {
  const size_t n = rate.size();
  if (n == 0) return 0;
  if (log_x_query <= log_x[0]) {
    if (below == Below::kHoldRate) return rate[0];
    // Holding the time: rate proportional to x below the first point.
    if (below == Below::kHoldTime) return rate[0] * std::exp(log_x_query - log_x[0]);
    // The two smallest points' slope of log rate against log x, within
    // [0, 2]; one point: 2, the time of seq^2 work held.
    const double slope =
        n < 2 ? 2.0 : std::clamp(std::log(rate[1] / rate[0]) / (log_x[1] - log_x[0]), 0.0, 2.0);
    return rate[0] * std::exp(slope * (log_x_query - log_x[0]));
  }
  if (log_x_query >= log_x[n - 1]) return rate[n - 1];
  const size_t i = size_t(std::upper_bound(log_x.begin(), log_x.end(), log_x_query) - log_x.begin());
  const double t = (log_x_query - log_x[i - 1]) / (log_x[i] - log_x[i - 1]);
  return rate[i - 1] + t * (rate[i] - rate[i - 1]);
}

// Builds a ComputeProfile from checked JSON; one instance per file.
class ComputeProfileParser {
 public:
  explicit ComputeProfileParser(const std::string& file) : errors_(file) {}

  Result<ComputeProfile> Run(const json& j) {
    if (!j.is_object()) {
      errors_.Add("", "expected an object, found " + DescribeJsonValue(j));
      return errors_.status();
    }
    CheckedObject root(j, "", &errors_);
    // A file of another format gets one line, not a page of unknown fields.
    const std::string schema = root.String("schema");
    if (!errors_.empty()) return errors_.status();
    if (schema != kComputeProfileSchema) {
      errors_.Add("/schema", std::string("expected \"") + kComputeProfileSchema +
                                 "\", found " + DescribeJsonValue(j.at("schema")));
      return errors_.status();
    }
    for (const char* key : kInformational) root.String(key, "");
    p_.gpu_ = root.String("gpu", "");
    p_.peak_bf16_flops_ = root.Number("peak_bf16_tflops", 0.001, kMaxRate, 989) * 1e12;
    p_.peak_fp8_flops_ = root.Number("peak_fp8_tflops", 0.001, kMaxRate, 1979) * 1e12;
    p_.hbm_bytes_per_s_ = root.Number("hbm_tb_per_s", 0.001, kMaxRate, 4.8) * 1e12;
    p_.copy_gb_per_s_ = root.Number("d2d_copy_gbps", 0.001, kMaxRate);
    // Lists are read below; root.Finish() cannot see them, so unknown root
    // fields are checked by name here.
    for (auto it = j.begin(); it != j.end(); ++it) {
      const bool known = std::any_of(kRootFields.begin(), kRootFields.end(),
                                     [&](const char* k) { return it.key() == k; });
      if (!known) errors_.Add(root.Pointer(it.key()), "unknown field");
    }

    ReadGemms(j, "gemm_bf16", true, false);
    ReadGemms(j, "gemm_fp8", false, true);
    ReadGrouped(j);
    ReadAttention(j, "attention", true, flash2_);
    ReadAttention(j, "attention_cudnn", false, cudnn_);
    ReadPermute(j);
    if (!errors_.empty()) return errors_.status();
    Build();
    return std::move(p_);
  }

 private:
  struct GemmPoints {
    int64_t n = 0, k = 0;
    Points bf16, fp8;
  };
  struct GroupedPoints {
    int64_t n = 0, k = 0;
    std::vector<std::pair<int64_t, Points>> by_experts;
  };
  struct AttentionPoints {
    int64_t heads = 0, kv_heads = 0, head_dim = 0, v_head_dim = 0;
    bool causal = true;
    Points fwd, fwd_bwd;
  };

  int64_t Dim(CheckedObject& o, const char* key) { return o.Int(key, 1, kMaxDim); }
  double Positive(CheckedObject& o, const char* key) {
    return o.Number(key, kMinPositive, kMaxRate);
  }

  void ReadGemms(const json& j, const std::string& key, bool required, bool fp8) {
    const json* list = ObjectList(j, key, required, errors_);
    if (!list) return;
    for (size_t i = 0; i < list->size(); ++i) {
      const json& raw = (*list)[i];
      CheckedObject e(raw, ElementPointer(key, i), &errors_);
      InformationalField(e, raw, "model");
      InformationalField(e, raw, "op");
      const int64_t m = Dim(e, "M"), k = Dim(e, "K"), n = Dim(e, "N");
      Positive(e, "s");
      const double tflops = Positive(e, "tflops");
      e.Finish();
      GemmPoints& g = FindShape(gemm_, &GemmPoints::n, &GemmPoints::k, n, k);
      (fp8 ? g.fp8 : g.bf16).push_back({double(m), tflops * 1e12});
    }
  }

  void ReadGrouped(const json& j) {
    const std::string key = "grouped_gemm_bf16";
    const json* list = ObjectList(j, key, false, errors_);
    if (!list) return;
    for (size_t i = 0; i < list->size(); ++i) {
      const json& raw = (*list)[i];
      CheckedObject e(raw, ElementPointer(key, i), &errors_);
      InformationalField(e, raw, "model");
      const int64_t experts = e.Int("experts", 1, kMaxCount);
      const int64_t tokens = Dim(e, "tokens_per_expert");
      const int64_t k = Dim(e, "K"), n = Dim(e, "N");
      Positive(e, "s");
      const double tflops = Positive(e, "tflops");
      e.Finish();
      GroupedPoints& g = FindShape(grouped_, &GroupedPoints::n, &GroupedPoints::k, n, k);
      auto it = std::find_if(g.by_experts.begin(), g.by_experts.end(),
                             [&](const auto& p) { return p.first == experts; });
      if (it == g.by_experts.end()) {
        g.by_experts.push_back({experts, {}});
        it = g.by_experts.end() - 1;
      }
      it->second.push_back({double(tokens), tflops * 1e12});
    }
  }

  // An attention list (`attention`: FlashAttention-2; `attention_cudnn`:
  // cuDNN), causal and non-causal points apart.
  void ReadAttention(const json& j, const std::string& key, bool required, std::vector<AttentionPoints>& out) {
    const json* list = ObjectList(j, key, required, errors_);
    if (!list) return;
    for (size_t i = 0; i < list->size(); ++i) {
      const json& raw = (*list)[i];
      CheckedObject e(raw, ElementPointer(key, i), &errors_);
      InformationalField(e, raw, "date");
      const int64_t heads = e.Int("heads", 1, kMaxCount);
      const int64_t kv_heads = e.Int("kv_heads", 1, kMaxCount);
      const int64_t seq = Dim(e, "S");
      const int64_t head_dim = e.Int("d", 1, kMaxCount);
      const int64_t v_head_dim = e.Int("d_v", 1, kMaxCount, head_dim);
      const bool causal = e.Bool("causal");
      Positive(e, "fwd_s");
      const double fwd = Positive(e, "fwd_tflops");
      Positive(e, "fwd_bwd_s");
      const double fwd_bwd = Positive(e, "fwd_bwd_tflops");
      e.Finish();
      if (kv_heads > heads) {
        errors_.Add(e.Pointer("kv_heads"), "expected at most heads (" + std::to_string(heads) +
                                               "), found " + std::to_string(kv_heads));
        continue;
      }
      AttentionPoints* a = nullptr;
      for (AttentionPoints& t : out) {
        if (t.heads == heads && t.kv_heads == kv_heads && t.head_dim == head_dim && t.v_head_dim == v_head_dim &&
            t.causal == causal)
          a = &t;
      }
      if (!a) {
        out.push_back({heads, kv_heads, head_dim, v_head_dim, causal, {}, {}});
        a = &out.back();
      }
      a->fwd.push_back({double(seq), fwd * 1e12});
      a->fwd_bwd.push_back({double(seq), fwd_bwd * 1e12});
    }
    const bool any_causal = std::any_of(out.begin(), out.end(), [](const AttentionPoints& a) { return a.causal; });
    if (errors_.empty() && !any_causal) errors_.Add("/" + key, "expected at least one causal entry");
  }

  void ReadPermute(const json& j) {
    const std::string key = "permute_copy";
    const json* list = ObjectList(j, key, false, errors_);
    if (!list) return;
    for (size_t i = 0; i < list->size(); ++i) {
      const json& raw = (*list)[i];
      CheckedObject e(raw, ElementPointer(key, i), &errors_);
      InformationalField(e, raw, "op");
      e.Int("C", 1, kMaxCount);
      e.Int("heads", 1, kMaxCount);
      Dim(e, "tokens");
      e.Int("d", 1, kMaxCount);
      const double bytes = e.Number("bytes_moved", 1, 1e18);
      Positive(e, "s");
      const double gbps = Positive(e, "gbps");
      e.Finish();
      permute_.push_back({bytes, gbps});
    }
  }

  // Sorted curves and the FP8 fallback shapes, computed once.
  void Build() {
    for (GemmPoints& g : gemm_) {
      ComputeProfile::GemmShapeTable t;
      t.log_n = std::log(double(g.n));
      t.log_k = std::log(double(g.k));
      t.bf16 = BuildCurve(std::move(g.bf16));
      t.fp8 = BuildCurve(std::move(g.fp8));
      p_.gemm_.push_back(std::move(t));
    }
    p_.LinkFp8Ratios();
    for (GroupedPoints& g : grouped_) {
      ComputeProfile::GroupedShapeTable t;
      t.log_n = std::log(double(g.n));
      t.log_k = std::log(double(g.k));
      std::sort(g.by_experts.begin(), g.by_experts.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      for (auto& [experts, points] : g.by_experts) {
        t.by_experts.push_back({std::log(double(experts)), BuildCurve(std::move(points))});
      }
      p_.grouped_.push_back(std::move(t));
    }
    BuildAttention(flash2_, p_.flash2_);
    BuildAttention(cudnn_, p_.cudnn_);
    p_.permute_ = BuildCurve(std::move(permute_));
  }

  static void BuildAttention(std::vector<AttentionPoints>& points, ComputeProfile::AttentionTables& tables) {
    for (AttentionPoints& a : points) {
      ComputeProfile::AttentionTable t;
      t.heads = double(a.heads);
      t.log_heads = std::log(double(a.heads));
      t.log_kv_heads = std::log(double(a.kv_heads));
      t.log_qk_dim = std::log(double(a.head_dim));
      t.log_v_dim = std::log(double(a.v_head_dim));
      t.fwd = BuildCurve(std::move(a.fwd));
      t.fwd_bwd = BuildCurve(std::move(a.fwd_bwd));
      (a.causal ? tables.causal : tables.full).push_back(std::move(t));
    }
  }

  JsonErrors errors_;
  ComputeProfile p_;
  std::vector<GemmPoints> gemm_;
  std::vector<GroupedPoints> grouped_;
  std::vector<AttentionPoints> flash2_, cudnn_;
  Points permute_;
};

std::string ComputeProfile::DefaultPath() { return DataDir() + "/compute/h200.json"; }

Result<ComputeProfile> ComputeProfile::Load(const std::string& path) {
  auto j = ParseJsonFile(path);
  if (!j.ok()) return j.status();
  return Parse(j.value(), path);
}

Result<ComputeProfile> ComputeProfile::Parse(const json& json, const std::string& file) {
  return ComputeProfileParser(file).Run(json);
}

double ComputeProfile::GemmBf16Raw(double log_m, double log_n, double log_k) const {
  const int i = NearestShape(gemm_, log_n, log_k,
                             [](const GemmShapeTable& t) { return !t.bf16.empty(); });
  return gemm_[size_t(i)].bf16.At(log_m, Below::kHoldTime);
}

// Precondition: has_fp8_ (some shape is measured in both precisions).
double ComputeProfile::GemmFp8Raw(double log_m, double log_n, double log_k) const {
  const int i = NearestShape(gemm_, log_n, log_k, [](const GemmShapeTable&) { return true; });
  const GemmShapeTable& t = gemm_[size_t(i)];
  if (!t.fp8.empty()) return t.fp8.At(log_m, Below::kHoldTime);
  // BF16 here x the FP8/BF16 ratio, at this m, of the nearest shape measured in both.
  const GemmShapeTable& r = gemm_[size_t(t.ratio_shape)];
  const double ratio = r.fp8.At(log_m, Below::kHoldTime) / r.bf16.At(log_m, Below::kHoldTime);
  return t.bf16.At(log_m, Below::kHoldTime) * ratio;
}

double ComputeProfile::GemmFlopsPerS(double m, double n, double k, Precision precision) const {
  // Dimensions below 1 (fractional per-rank shares) count as 1.
  const double log_m = std::log(std::max(1.0, m));
  const double log_n = std::log(std::max(1.0, n));
  const double log_k = std::log(std::max(1.0, k));
  if (IsFp8(precision) && has_fp8_ && !fp8_as_bf16_) {
    return GemmFp8Raw(log_m, log_n, log_k) * fp8_scale_;
  }
  return GemmBf16Raw(log_m, log_n, log_k) * bf16_scale_;
}

double ComputeProfile::GroupedGemmFlopsPerS(int experts, double tokens_per_expert, double k,
                                            double n, Precision precision) const {
  if (experts <= 1 || grouped_.empty()) return GemmFlopsPerS(tokens_per_expert, n, k, precision);
  const double log_t = std::log(std::max(1.0, tokens_per_expert));
  const int g = NearestShape(grouped_, std::log(std::max(1.0, n)), std::log(std::max(1.0, k)),
                             [](const GroupedShapeTable&) { return true; });
  const std::vector<ExpertCurve>& by = grouped_[size_t(g)].by_experts;
  const double log_e = std::log(double(experts));
  double raw = 0;
  if (log_e <= by.front().log_experts) {
    raw = by.front().curve.At(log_t, Below::kHoldTime);
  } else if (log_e >= by.back().log_experts) {
    raw = by.back().curve.At(log_t, Below::kHoldTime);
  } else {
    size_t i = 1;
    while (by[i].log_experts < log_e) ++i;  // by[i-1] < log_e <= by[i]
    const double lo = by[i - 1].curve.At(log_t, Below::kHoldTime);
    const double hi = by[i].curve.At(log_t, Below::kHoldTime);
    const double t = (log_e - by[i - 1].log_experts) / (by[i].log_experts - by[i - 1].log_experts);
    raw = lo + t * (hi - lo);
  }
  double rate = raw * bf16_scale_;
  if (IsFp8(precision)) {
    // No grouped FP8 points: the plain GEMM's FP8/BF16 ratio at the same m.
    rate *= GemmFlopsPerS(tokens_per_expert, n, k, precision) /
            GemmFlopsPerS(tokens_per_expert, n, k, Precision::kBF16);
  }
  return rate;
}

double ComputeProfile::AttentionRaw(const AttentionTables& tables, const AttentionKernel& k,
                                    bool forward_and_backward) const {
  // Non-causal points when the table has them, else its causal ones.
  const std::vector<AttentionTable>& list = !k.causal && !tables.full.empty() ? tables.full : tables.causal;
  const int h = std::max(1, k.heads);
  const int kv = std::clamp(k.kv_heads, 1, h);
  const double log_h = std::log(double(h));
  const double log_kv = std::log(double(kv));
  const double log_qk = std::log(double(std::max(1, k.qk_head_dim)));
  const double log_v = std::log(double(std::max(1, k.v_head_dim > 0 ? k.v_head_dim : k.qk_head_dim)));
  const AttentionTable* best = nullptr;
  double best_d = 0;
  for (const AttentionTable& t : list) {
    const double d = Sq(t.log_heads - log_h) + Sq(t.log_kv_heads - log_kv) + Sq(t.log_qk_dim - log_qk) +
                     Sq(t.log_v_dim - log_v);
    if (!best || d < best_d) {
      best = &t;
      best_d = d;
    }
  }
  const Curve& c = forward_and_backward ? best->fwd_bwd : best->fwd;
  const double seq = std::max(1.0, k.seq);
  if (h >= best->heads) return c.At(std::log(seq), Below::kSlope);
  // Fewer heads than measured: the same grid at a shorter sequence, but no
  // slower than the measured count's kernel at seq (more work).
  const double share = h / best->heads;
  return std::max(c.At(std::log(std::max(1.0, seq * share)), Below::kSlope), c.At(std::log(seq), Below::kSlope) * share);
}

double ComputeProfile::AttentionFlopsPerS(AttentionBackend backend, const AttentionKernel& kernel,
                                          bool forward_and_backward) const {
  if (backend == AttentionBackend::kTeCudnn && !cudnn_.empty()) {
    return AttentionRaw(cudnn_, kernel, forward_and_backward) * bf16_scale_;
  }
  const double raw = AttentionRaw(flash2_, kernel, forward_and_backward) * bf16_scale_;
  return backend == AttentionBackend::kFlash3 ? raw * kFlash3OverFlash2 : raw;
}

bool ComputeProfile::MeasuredAttention(AttentionBackend backend) const {
  switch (backend) {
    case AttentionBackend::kTeCudnn: return !cudnn_.empty();
    case AttentionBackend::kFlash2: return true;
    case AttentionBackend::kFlash3: return false;
  }
  return false;
}

double ComputeProfile::PermuteGbPerS(double bytes_moved) const {
  if (permute_.empty()) return copy_gb_per_s();
  return permute_.At(std::log(std::max(1.0, bytes_moved)), Below::kHoldRate) * copy_scale_;
}

void ComputeProfile::LinkFp8Ratios() {
  auto both = [](const GemmShapeTable& t) { return !t.bf16.empty() && !t.fp8.empty(); };
  has_fp8_ = false;
  for (GemmShapeTable& t : gemm_) {
    t.ratio_shape = NearestShape(gemm_, t.log_n, t.log_k, both);
    if (both(t)) has_fp8_ = true;
  }
}

ComputeProfile ComputeProfile::WithMeasured(const std::vector<GemmPoint>& gemm,
                                            const std::vector<GroupedPoint>& grouped) const {
  // Stored in the profiled GPU's terms: lookups multiply by bf16_scale_.
  ComputeProfile out = *this;
  for (const GemmPoint& p : gemm) {
    GemmShapeTable& t = FindShape(out.gemm_, &GemmShapeTable::log_n, &GemmShapeTable::log_k,
                                  std::log(double(p.n)), std::log(double(p.k)));
    SetPoint(t.bf16, std::log(double(p.m)), p.flops_per_s / bf16_scale_);
  }
  for (const GroupedPoint& p : grouped) {
    GroupedShapeTable& t =
        FindShape(out.grouped_, &GroupedShapeTable::log_n, &GroupedShapeTable::log_k,
                  std::log(double(p.n)), std::log(double(p.k)));
    const double log_e = std::log(double(p.experts));
    auto it = std::find_if(t.by_experts.begin(), t.by_experts.end(),
                           [&](const ExpertCurve& c) { return c.log_experts >= log_e; });
    if (it == t.by_experts.end() || it->log_experts != log_e) {
      it = t.by_experts.insert(it, ExpertCurve{log_e, {}});
    }
    SetPoint(it->curve, std::log(double(p.tokens_per_expert)), p.flops_per_s / bf16_scale_);
  }
  out.LinkFp8Ratios();
  return out;
}

ComputeProfile ComputeProfile::ScaledTo(const GpuSpec& target) const {
  ComputeProfile out = *this;
  out.scaled_to_ = target.name;
  out.bf16_scale_ = target.peak_bf16_flops > 0 ? target.peak_bf16_flops / peak_bf16_flops_ : 1;
  out.fp8_as_bf16_ = target.peak_fp8_flops <= 0;
  out.fp8_scale_ = out.fp8_as_bf16_ ? 1 : target.peak_fp8_flops / peak_fp8_flops_;
  out.copy_scale_ = target.hbm_tb_per_s > 0 ? target.hbm_tb_per_s * 1e12 / hbm_bytes_per_s_ : 1;
  return out;
}

namespace {

uint64_t BitsOf(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// ComputeRateMemo's lookup kinds (the key's first word, low bits).
enum : uint64_t { kGemmLookup = 1, kGroupedLookup = 2, kAttentionLookup = 3 };

}  // namespace

ComputeRateMemo::ComputeRateMemo(size_t max_entries) : max_entries_(std::max<size_t>(1, max_entries)) {
  size_t slots = 2;
  while (slots < 2 * max_entries_) slots *= 2;
  slots_.resize(slots);
}

void ComputeRateMemo::Clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  size_ = 0;
}

ComputeRateMemo::Slot& ComputeRateMemo::Find(const Key& key) {
  const size_t mask = slots_.size() - 1;
  // One multiply per word, then a full mix: the probe is most of a hit.
  uint64_t h = key[0];
  for (size_t w = 1; w < key.size(); ++w) h = (h ^ key[w]) * kSplitMix64Increment;
  size_t i = size_t(Mix64(h)) & mask;
  auto same = [&](const Key& k) { return k[0] == key[0] && k[1] == key[1] && k[2] == key[2] && k[3] == key[3]; };
  while (slots_[i].used && !same(slots_[i].key)) i = (i + 1) & mask;
  return slots_[i];
}

template <class Rate>
double ComputeRateMemo::Lookup(const Key& key, Rate rate) {
  Slot* slot = &Find(key);
  if (slot->used) return slot->flops_per_s;
  if (size_ >= max_entries_) {
    Clear();
    slot = &Find(key);
  }
  *slot = {key, rate(), true};
  ++size_;
  return slot->flops_per_s;
}

double ComputeRateMemo::GemmFlopsPerS(const ComputeProfile& profile, double m, double n, double k,
                                      Precision precision) {
  const uint64_t fp8 = IsFp8(precision) ? 1 : 0;
  return Lookup({kGemmLookup | fp8 << 2, BitsOf(m), BitsOf(n), BitsOf(k)},
                [&] { return profile.GemmFlopsPerS(m, n, k, precision); });
}

double ComputeRateMemo::GroupedGemmFlopsPerS(const ComputeProfile& profile, int experts, double tokens_per_expert,
                                             double k, double n, Precision precision) {
  const uint64_t fp8 = IsFp8(precision) ? 1 : 0;
  const uint64_t e = uint64_t(uint32_t(experts));
  return Lookup({kGroupedLookup | fp8 << 2 | e << 32, BitsOf(tokens_per_expert), BitsOf(k), BitsOf(n)},
                [&] { return profile.GroupedGemmFlopsPerS(experts, tokens_per_expert, k, n, precision); });
}

double ComputeRateMemo::AttentionFlopsPerS(const ComputeProfile& profile, AttentionBackend backend,
                                           const AttentionKernel& k, bool forward_and_backward) {
  const uint64_t flags = uint64_t(forward_and_backward ? 1 : 0) | uint64_t(k.causal ? 2 : 0) |
                         uint64_t(uint32_t(backend)) << 2;
  auto pair = [](int hi, int lo) { return uint64_t(uint32_t(hi)) << 32 | uint64_t(uint32_t(lo)); };
  return Lookup({kAttentionLookup | flags << 2, BitsOf(k.seq), pair(k.heads, k.kv_heads),
                 pair(k.qk_head_dim, k.v_head_dim)},
                [&] { return profile.AttentionFlopsPerS(backend, k, forward_and_backward); });
}

}  // namespace foldplan
