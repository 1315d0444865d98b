#include "inputs/recipe.h"

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

}  // namespace foldplan
