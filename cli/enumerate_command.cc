// foldplan enumerate (cli/enumerate_command.h).
#include "cli/enumerate_command.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "cli/csv.h"
#include "cli/output.h"
#include "core/formats.h"
#include "core/text_table.h"
#include "costmodel/evaluate.h"
#include "planner/enumerate.h"
#include "planner/layout_json.h"
#include "planner/legality.h"
#include "planner/pipeline.h"

namespace foldplan {
namespace {

using json = nlohmann::ordered_json;
using Align = TextTable::Align;

std::string StagesText(const Layout& l) {
  // Per pipeline rank: "7/8/8/8/8/8/8/6"; even splits as "8 each".
  std::vector<int> per_rank;
  for (int p = 0; p < l.pp; ++p) per_rank.push_back(l.layers_on_stage(p));
  bool even = true;
  for (int n : per_rank) even &= (n == per_rank.front());
  if (even) return std::to_string(per_rank.front()) + " each";
  std::string out;
  for (size_t i = 0; i < per_rank.size(); ++i) out += (i ? "/" : "") + std::to_string(per_rank[i]);
  return out;
}

// enumerate --format csv (doc/formats.md, "CSV"): the layouts shown, one
// record each, the columns of the text table.
std::string EnumerationCsv(const std::vector<Layout>& layouts) {
  std::string out = CsvRecord({"index", "layout", "tp", "cp", "dp", "pp", "vpp", "ep", "etp", "edp", "mbs", "order",
                               "cp_style", "recompute", "placement", "dispatcher", "precision", "recipe",
                               "layers_per_stage"});
  for (size_t i = 0; i < layouts.size(); ++i) {
    const Layout& l = layouts[i];
    out += CsvRecord({std::to_string(i + 1), FormatLayout(l), std::to_string(l.tp), std::to_string(l.cp),
                      std::to_string(l.dp), std::to_string(l.pp), std::to_string(l.vpp), std::to_string(l.ep),
                      std::to_string(l.etp), std::to_string(l.edp), std::to_string(l.mbs), l.order, Name(l.cp_style),
                      Name(l.recompute), Name(l.placement), Name(l.dispatcher), Name(l.precision), ShortRecipe(l),
                      StagesText(l)});
  }
  return out;
}

}  // namespace

int RunEnumerate(const EnumerateOptionsCli& options, std::ostream& out, std::ostream& err) {
  if (Status s = CheckInputFlags(options.inputs); !s.ok()) return Usage(err, s);
  if (options.limit < 0) {
    return Usage(err, Status::Error("--limit: expected 0 (all) or a positive count, found " +
                                    std::to_string(options.limit)));
  }
  if (Status s = CheckLayoutText(options.layout); !s.ok()) return Usage(err, s);
  auto format = ParseTableFormat(options.format, options.json);
  if (!format.ok()) return Usage(err, format.status());
  const bool json_out = format.value() == TableFormat::kJson;
  auto pins = ParsePins(options.fix);
  if (!pins.ok()) return Usage(err, pins.status());
  auto inputs = LoadInputs(options.inputs);
  if (!inputs.ok()) return Fail(err, inputs.status());
  Inputs in = inputs.value();
  in.job = PinnedJob(in.job, *pins);
  // The cost model weighs the blocks of pipeline layouts it chooses.
  auto cost = CostModel::Create(in.cluster, in.model, in.job, in.calibration_use);
  if (!cost.ok()) return Fail(err, cost.status());
  const LegalityContext ctx = cost.value()->legality();

  if (options.layout) {
    auto layout = ResolveLayout(*options.layout, WorldOf(in.cluster, in.job), ctx);
    if (!layout.ok()) return Fail(err, layout.status());
    if (format.value() == TableFormat::kCsv) {
      out << EnumerationCsv({layout.value()});
    } else if (json_out) {
      out << json{{"schema", kEnumerationSchema}, {"inputs", InputsJson(in)},
                  {"legal", true}, {"layout", LayoutToJson(layout.value())}}.dump(2) << "\n";
    } else {
      const Layout& l = layout.value();
      const bool chosen = !l.explicit_stages && NeedsChosenLayout(in.model.layers, l.pp, l.vpp);
      out << InputsLine(in) << "\n" << "legal: " << FormatLayout(l) << "\n"
          << "layers per pipeline stage: " << StagesText(l) << "\n"
          << "pipeline layout: " << DescribePipeline(l, in.model, ctx.weights).LayoutText()
          << (chosen ? " (chosen: the layers do not divide over pp x vpp)" : "") << "\n";
    }
    return 0;
  }

  // Only the layouts shown are kept (the first --limit, or all with 0):
  // a widened job's legal set can be millions of layouts.
  EnumerateOptions enumerate;
  enumerate.pins = &*pins;
  enumerate.collect_layouts = false;
  std::vector<Layout> shown_layouts;
  enumerate.visit = [&](const Layout& l) {
    if (options.limit <= 0 || shown_layouts.size() < static_cast<size_t>(options.limit)) shown_layouts.push_back(l);
  };
  const Enumeration e = EnumerateLayouts(ctx, enumerate);
  if (format.value() == TableFormat::kCsv) {
    out << EnumerationCsv(shown_layouts);
    return 0;
  }
  if (json_out) {
    json rejected = json::object();
    for (int r = 0; r < kRuleCount; ++r) rejected[Name(Rule(r))] = e.rejected[r];
    json layouts = json::array();
    for (const auto& l : shown_layouts) layouts.push_back(LayoutToJson(l));
    out << json{{"schema", kEnumerationSchema},
                {"inputs", InputsJson(in)},
                {"world", e.world},
                {"candidates", e.candidates},
                {"legal_count", e.legal_count},
                {"rejected", rejected},
                {"layouts", layouts}}
               .dump(2)
        << "\n";
    return 0;
  }

  out << InputsLine(in) << "\n";
  out << "world " << e.world << ": " << WithCommas(e.candidates) << " candidates, "
      << WithCommas(e.legal_count) << " legal\n";
  if (options.why) {
    TextTable table({"rule", "rejected", "statement"}, {Align::kLeft, Align::kRight, Align::kLeft});
    for (int r = 0; r < kRuleCount; ++r) {
      table.AddRow({Name(Rule(r)), WithCommas(e.rejected[r]), Info(Rule(r)).statement});
    }
    table.AddRow({"legal", WithCommas(e.legal_count), ""});
    table.AddRow({"total", WithCommas(e.candidates), ""});
    out << "\nRejections (each candidate under the first rule it breaks):\n" << table.Render("  ", OutputColumns());
  }
  TextTable table({"#", "tp", "cp", "dp", "pp", "vpp", "ep", "etp", "edp", "mbs", "order", "cp_style",
                   "recompute", "placement", "recipe", "layers/stage"},
                  {Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight,
                   Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight});
  size_t shown = 0;
  for (const auto& l : shown_layouts) {
    ++shown;
    table.AddRow({std::to_string(shown), std::to_string(l.tp), std::to_string(l.cp),
                  std::to_string(l.dp), std::to_string(l.pp), std::to_string(l.vpp),
                  std::to_string(l.ep), std::to_string(l.etp), std::to_string(l.edp),
                  std::to_string(l.mbs), l.order, l.cp > 1 ? Name(l.cp_style) : "-",
                  Name(l.recompute), Name(l.placement), ShortRecipe(l).empty() ? "-" : ShortRecipe(l),
                  StagesText(l)});
  }
  if (shown > 0) out << "\n" << table.Render("  ", OutputColumns());
  if (shown < e.legal_count) {
    out << "  ... " << WithCommas(e.legal_count - shown) << " more (--limit 0 shows all)\n";
  }
  return 0;
}

}  // namespace foldplan
