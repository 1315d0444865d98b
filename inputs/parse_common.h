// Helpers shared by the four input parsers (parse_cluster.cc, parse_model.cc,
// parse_job.cc, parse_recipe.cc) and the loader. Internal to the inputs/
// folder: other folders use inputs/loader.h and inputs/recipe.h.
#pragma once

#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/json_check.h"
#include "inputs/model.h"

namespace foldplan::inputs_internal {

// Reads an integer field; the range is within int, so the cast is exact.
int IntField(CheckedObject& object, const std::string& key, int min, int max);
int IntField(CheckedObject& object, const std::string& key, int min, int max, int default_value);

// An integer list whose values are within int.
std::vector<int> IntListField(CheckedObject& object, const std::string& key, int min, int max,
                              const std::vector<int>& default_value);

// A sub-object, or nullopt when it is missing or not an object; the one
// error is recorded, and the caller skips the object's fields, so that one
// mistake gives one line instead of one per field.
std::optional<CheckedObject> RequiredObject(CheckedObject& parent, const std::string& key);
// The same for an optional sub-object: nullopt, without error, when absent
// or null.
std::optional<CheckedObject> OptionalObject(CheckedObject& parent, const std::string& key);

// Checks the "schema" field first. Returns false when the value is not an
// object or names another format; the caller then stops, so that loading a
// model file as a cluster gives one clear line instead of a page of
// unknown-field errors.
bool CheckSchema(CheckedObject& root, const char* schema);

// A list value as "found ..." quotes it: "\"ring\"".
std::string DescribeString(const std::string& value);

// Each value of `values` equal to an earlier one: {its index, the first
// equal one's index}, in index order.
template <class T>
std::vector<std::pair<size_t, size_t>> Repeats(const std::vector<T>& values) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < values.size(); ++i) {
    for (size_t k = 0; k < i; ++k) {
      if (values[k] == values[i]) {
        out.emplace_back(i, k);
        break;
      }
    }
  }
  return out;
}

// Records "expected no repeated values" for the second occurrence of any
// value in `values`, read from the list at `pointer`.
template <class T>
void CheckNoRepeats(const std::vector<T>& values, const std::string& pointer,
                    JsonErrors* errors, std::string (*describe)(const T&)) {
  for (const auto& [i, first] : Repeats(values)) {
    errors->Add(pointer + "/" + std::to_string(i),
                "expected no repeated values, found " + describe(values[i]) + " again");
  }
}

// ModelSpec::total_params() counted in double, for the size check that
// must run before an int64 count is known not to overflow (model.cc).
double TotalParamsAsDouble(const ModelSpec& model);

// The file's stem ("data/models/x.json" -> "x"), used as the input's name.
std::string StemOf(const std::string& file);

// Whether an input given by name or path is a path: it holds a '/' or ends
// in ".json". Anything else is a shipped name (inputs/loader.h).
bool LooksLikePath(const std::string& name_or_path);

}  // namespace foldplan::inputs_internal
