// Every shipped input (and foldbench's measurements), mutated the ways a careless edit or a hostile file
// would (a field deleted, a value of the wrong type, an out-of-range or huge
// number, the text truncated, bad UTF-8, deep nesting, a repeated key), is
// handed to `foldplan check`. For each mutant exactly one of these holds:
// accepted, exit 0, stdout "FILE: valid ..."; or refused, exit 1, and every
// line of stderr names FILE. A crash, hang (10 s per run) or any other exit
// fails the test. The mutants come from a fixed seed through splitmix64, so
// the same mutants are made on every machine.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "tests/cli_run.h"
#include "tests/under_sanitizer.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using foldplan::testing::CliRun;
using foldplan::testing::RunFoldplan;
using foldplan::testing::Slurp;

constexpr uint64_t kSeed = 20261201;
constexpr int kMutantsPerFile = 16;
// Under AddressSanitizer (make sanitize) every run of foldplan costs about
// three times as much, and 16 x 38 of them took two minutes of CI: there
// each file's mutants are all made (the same ones) but one in four is run,
// a different quarter for consecutive files; the Release suite runs all.
constexpr int kSanitizedStride = 4;

// splitmix64: a tiny generator whose sequence is fixed by its definition
// (std:: distributions are not the same across standard libraries).
struct Rng {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }
};

// Every value in the document, as pointers from the root (the root excluded).
void Collect(const ordered_json& v, const std::string& pointer, std::vector<std::string>* out) {
  if (!pointer.empty()) out->push_back(pointer);
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      std::string key;
      for (char c : it.key()) key += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
      Collect(it.value(), pointer + "/" + key, out);
    }
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) Collect(v[i], pointer + "/" + std::to_string(i), out);
  }
}

const ordered_json kWrongValues[] = {
    "x", "", true, nullptr, ordered_json::array(), ordered_json::object(), 1.5, -0.0,
};
// Out-of-range and huge numbers: past int, past int64, past double's int range.
const char* const kHugeNumbers[] = {
    "-1", "0", "2147483647", "2147483648", "-2147483649", "9223372036854775807",
    "18446744073709551616", "1e308", "-1e308", "1e-320", "4294967296",
};

std::string Mutate(const std::string& text, Rng& rng, std::string* what) {
  ordered_json doc = ordered_json::parse(text);
  std::vector<std::string> pointers;
  Collect(doc, "", &pointers);
  const std::string at = pointers[rng.Below(pointers.size())];
  const ordered_json::json_pointer pointer(at);
  switch (rng.Below(8)) {
    case 0: {  // delete a field or element
      *what = "delete " + at;
      ordered_json& parent = doc[pointer.parent_pointer()];
      if (parent.is_object()) parent.erase(pointer.back());
      else parent.erase(static_cast<size_t>(std::stoul(pointer.back())));
      return doc.dump(2);
    }
    case 1: {  // a value of the wrong type
      const ordered_json& v = kWrongValues[rng.Below(std::size(kWrongValues))];
      *what = "set " + at + " to " + v.dump();
      doc[pointer] = v;
      return doc.dump(2);
    }
    case 2: {  // an out-of-range or huge number, spliced in as text
      const std::string number = kHugeNumbers[rng.Below(std::size(kHugeNumbers))];
      *what = "set " + at + " to " + number;
      doc[pointer] = "@@NUMBER@@";
      std::string out = doc.dump(2);
      out.replace(out.find("\"@@NUMBER@@\""), 12, number);
      return out;
    }
    case 3: {  // truncated
      const size_t cut = rng.Below(text.size());
      *what = "truncate at byte " + std::to_string(cut);
      return text.substr(0, cut);
    }
    case 4: {  // bad UTF-8 inside a string (a lone continuation byte, a cut sequence, a surrogate)
      static const char* const kBad[] = {"\x80", "\xc3", "\xed\xa0\x80", "\xff\xfe", "\xf4\x90\x80\x80"};
      const size_t quote = text.find('"', rng.Below(text.size()));
      const size_t pos = quote == std::string::npos ? text.find('"') : quote;
      *what = "bad UTF-8 at byte " + std::to_string(pos + 1);
      return text.substr(0, pos + 1) + kBad[rng.Below(std::size(kBad))] + text.substr(pos + 1);
    }
    case 5: {  // deep nesting: past the reader's limit, or just a wrong shape
      const int depth = rng.Below(2) ? 100 + static_cast<int>(rng.Below(100000)) : 1 + static_cast<int>(rng.Below(8));
      *what = "nest " + at + " " + std::to_string(depth) + " arrays deep";
      doc[pointer] = "@@NEST@@";
      std::string out = doc.dump(2);
      out.replace(out.find("\"@@NEST@@\""), 10, std::string(depth, '[') + "1" + std::string(depth, ']'));
      return out;
    }
    case 6: {  // a repeated key, spliced after the first brace of the object holding the value
      *what = "repeat the key of " + at;
      std::string key = pointer.back();
      ordered_json& parent = doc[pointer.parent_pointer()];
      if (!parent.is_object()) return doc.dump(2) + "x";  // arrays have no keys: trailing garbage instead
      parent["@@DUP@@"] = parent[key];
      std::string out = doc.dump(2);
      out.replace(out.find("\"@@DUP@@\""), 9, ordered_json(key).dump());
      return out;
    }
    default: {  // an unknown field
      *what = "add an unknown field beside " + at;
      ordered_json& parent = doc[pointer.parent_pointer()];
      if (parent.is_object()) parent["mutant_field"] = 1;
      else parent.push_back("mutant");
      return doc.dump(2);
    }
  }
}

std::vector<fs::path> ShippedInputs() {
  std::vector<fs::path> files;
  for (const char* dir : {"clusters", "models", "jobs", "recipes", "calibration"}) {
    for (const auto& e : fs::directory_iterator(fs::path(FOLDPLAN_SOURCE_DIR) / "data" / dir)) {
      if (e.path().extension() == ".json") files.push_back(e.path());
    }
  }
  // foldbench's output, which calibration reads.
  for (const char* f : {"measurements_pp2_cp2_ep4.json", "measurements_rankmap_skipped.json"}) {
    files.push_back(fs::path(FOLDPLAN_TEST_DATA_DIR) / "inputs" / f);
  }
  // A calibration as `foldplan calibrate` writes it.
  files.push_back(fs::path(FOLDPLAN_TEST_DATA_DIR) / "calibration" / "nccl_tests_fixtures.calibration.json");
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("foldplan check accepts every shipped input as it is, one line per file") {
  std::string args = "check";
  const std::vector<fs::path> files = ShippedInputs();
  for (const fs::path& f : files) args += " " + f.string();
  const CliRun run = RunFoldplan(args, 60);
  CHECK(run.exit_code == 0);
  CHECK(run.err.empty());
  std::istringstream lines(run.out);
  size_t valid = 0;
  for (std::string line; std::getline(lines, line);) valid += line.find(": valid foldplan.") != std::string::npos;
  CHECK(valid == files.size());
}

TEST_CASE("foldplan check refuses a file of no known schema at /schema, and goes on to the next file") {
  const std::string file = "/tmp/foldplan_check_" + std::to_string(::getpid()) + ".json";
  std::ofstream(file) << R"({"schema": "foldplan.plan/v1"})";
  const CliRun run = RunFoldplan("check " + file + " data/jobs/default.json", 10);
  CHECK(run.exit_code == 1);
  CHECK(run.err == "foldplan: " + file + ": /schema: expected one of \"foldplan.cluster/v1\", \"foldplan.model/v1\", "
                   "\"foldplan.job/v1\", \"foldplan.recipe/v1\", \"foldplan.measurements/v1\", "
                   "\"foldplan.calibration/v2\", \"foldplan.calibration/v1\", \"foldplan.expert-loads/v1\", found the string "
                   "\"foldplan.plan/v1\"\n");
  CHECK(run.out == "data/jobs/default.json: valid foldplan.job/v1\n");
  fs::remove(file);
}

TEST_CASE("every mutant of every shipped input is either valid or refused with exit 1 naming the file") {
  const fs::path dir = fs::temp_directory_path() / ("foldplan_mutants_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  Rng rng{kSeed};
  int accepted = 0, refused = 0;
  const std::vector<fs::path> inputs = ShippedInputs();
  for (size_t f = 0; f < inputs.size(); ++f) {
    const fs::path& original = inputs[f];
    const std::string text = Slurp(original.string());
    for (int m = 0; m < kMutantsPerFile; ++m) {
      std::string what;
      const std::string mutant = Mutate(text, rng, &what);
      if (foldplan::testing::kUnderAsan && (m + f) % kSanitizedStride != 0) continue;
      const std::string file = (dir / (original.stem().string() + "-" + std::to_string(m) + ".json")).string();
      std::ofstream(file, std::ios::binary) << mutant;
      const CliRun run = RunFoldplan("check " + file, 10);
      INFO(original.filename().string() << " mutant " << m << ": " << what);
      INFO("stderr: " << run.err);
      if (run.exit_code == 0) {
        ++accepted;
        CHECK(run.out == file + ": valid " + run.out.substr(file.size() + 8));
        CHECK(run.err.empty());
      } else {
        ++refused;
        REQUIRE(run.exit_code == 1);
        REQUIRE(!run.err.empty());
        std::istringstream lines(run.err);
        for (std::string line; std::getline(lines, line);) {
          CHECK(line.find(file) != std::string::npos);
        }
      }
      fs::remove(file);
    }
  }
  MESSAGE(accepted << " mutants accepted, " << refused << " refused");
  // The mutations must mostly break the files, or they test nothing.
  CHECK(refused > accepted);
  fs::remove_all(dir);
}
