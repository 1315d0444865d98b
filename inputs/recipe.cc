#include "inputs/recipe.h"

#include "core/json_check.h"

namespace foldplan {

const char* Name(RecipeFeature f) {
  switch (f) {
    case RecipeFeature::kActivationOffloading: return "activation_offloading";
  }
  return "?";
}

bool RecipeSpec::Uses(RecipeFeature f) const {
  for (RecipeFeature g : not_modelled) {
    if (g == f) return true;
  }
  return false;
}

Result<RecipeSpec> LoadRecipe(const std::string& name_or_path) {
  auto path = ResolveInput(InputKind::kRecipe, name_or_path);
  if (!path.ok()) return path.status();
  auto json = ParseJsonFile(path.value());
  if (!json.ok()) return json.status();
  return ParseRecipe(json.value(), path.value());
}

}  // namespace foldplan
