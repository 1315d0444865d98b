// foldplan list (cli/list_command.h).
#include "cli/list_command.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "cli/output.h"
#include "core/formats.h"
#include "core/nearest_name.h"
#include "core/text_table.h"
#include "inputs/loader.h"

namespace foldplan {

using json = nlohmann::ordered_json;

int RunList(const ListOptions& options, std::ostream& out, std::ostream& err) {
  constexpr InputKind kKinds[] = {InputKind::kCluster, InputKind::kModel, InputKind::kJob, InputKind::kRecipe};
  std::vector<InputKind> kinds;
  for (const std::string& c : options.category) {
    std::vector<std::string> names;
    std::optional<InputKind> found;
    for (InputKind kind : kKinds) {
      names.push_back(std::string(Name(kind)) + "s");
      if (c == Name(kind) || c == names.back()) found = kind;
    }
    if (!found) {
      return Usage(err, Status::Error("list: unknown category \"" + c + "\"" + DidYouMean(c, names) +
                                      " (the categories: clusters, models, jobs, recipes)"));
    }
    if (std::find(kinds.begin(), kinds.end(), *found) == kinds.end()) kinds.push_back(*found);
  }
  if (kinds.empty()) kinds.assign(std::begin(kKinds), std::end(kKinds));
  json all = json::object();
  all["schema"] = kListSchema;
  all["data_dir"] = DataDir();
  std::string text = "Shipped inputs (" + DataDir() + "):\n";
  bool cut = false;  // a description was cut short
  for (InputKind kind : kinds) {
    auto shipped = ListShipped(kind);
    if (!shipped.ok()) return Fail(err, shipped.status());
    TextTable table({std::string(Name(kind)) + "s", "what"});
    std::string long_text = "\n" + std::string(Name(kind)) + "s:\n";
    json items = json::array();
    for (const auto& s : shipped.value()) {
      std::string what = s.description;
      if (kind == InputKind::kCluster) {
        if (auto c = LoadCluster(s.path); c.ok()) {
          what = std::to_string(c->total_gpus()) + " x " + c->gpu.name + ", NVLink domain " +
                 std::to_string(c->nvlink_domain_gpus) + "; " + what;
        }
      } else if (kind == InputKind::kModel) {
        if (auto m = LoadModel(s.path); m.ok()) {
          char params[64];
          std::snprintf(params, sizeof params, "%.1fB params, %.1fB active",
                        m->total_params() / 1e9, m->active_params() / 1e9);
          what = std::string(params) + "; " + what;
        }
      } else if (kind == InputKind::kRecipe) {
        if (auto r = LoadRecipe(s.path); r.ok()) {
          what = std::to_string(r->gpus) + " of " + r->cluster_name + ", " + r->model_name + ": " + r->layout;
          for (RecipeFeature f : r->not_modelled) what += std::string(" [not modelled: ") + Name(f) + "]";
        }
      }
      items.push_back({{"name", s.name}, {"path", s.path}, {"description", s.description}});
      if (options.long_descriptions) {
        // A recipe's summary, then its own description.
        if (kind == InputKind::kRecipe && !s.description.empty()) what += "; " + s.description;
        long_text += "  " + s.name + "\n";
        for (const std::string& piece : WrapWords(what, 96)) long_text += "      " + piece + "\n";
        continue;
      }
      if (what.size() > kListDescriptionChars) {
        what = what.substr(0, kListDescriptionChars - 3) + "...";
        cut = true;
      }
      table.AddRow({s.name, what});
    }
    all[std::string(Name(kind)) + "s"] = items;
    text += options.long_descriptions ? long_text : "\n" + table.Render("  ", OutputColumns());
  }
  if (cut) {
    text += "\n(descriptions cut to " + std::to_string(kListDescriptionChars) +
            " characters; `foldplan list --long` prints them whole)\n";
  }
  out << (options.json ? all.dump(2) + "\n" : text);
  return 0;
}

}  // namespace foldplan
