// Bad input through the command line: a clear message naming the file, the
// JSON pointer, what was expected and what was found; exit code 1; no crash.
#include "cli_run.h"


using foldplan::testing::RunFoldplan;

namespace {

void ExpectError(const std::string& args, const std::string& fragment) {
  auto r = RunFoldplan(args);
  CHECK_MESSAGE(r.exit_code == 1, args);
  CHECK_MESSAGE(r.err.find(fragment) != std::string::npos, "stderr was: " << r.err);
  CHECK(r.out.empty());
}

}  // namespace

TEST_CASE("a model file with a wrong field") {
  ExpectError("enumerate --model tests/data/cli/bad_top_k.json",
              "tests/data/cli/bad_top_k.json: /moe/top_k: expected an integer");
}

TEST_CASE("a file that is not JSON") {
  ExpectError("enumerate --cluster tests/data/cli/not_json.json", "tests/data/cli/not_json.json:3:");
}

TEST_CASE("an unknown shipped name lists the shipped ones") {
  ExpectError("enumerate --model mixtral-9x9b", "mixtral-8x7b");
}

TEST_CASE("a missing file") {
  ExpectError("topo --cluster ./no-such-cluster.json", "no-such-cluster.json");
}

TEST_CASE("bad overrides") {
  ExpectError("enumerate --precision fp4", "--precision: expected one of bf16, fp8-delayed");
  ExpectError("enumerate --nodes 3 --cluster gb200-nvl72-4r", "do not fill whole 72-GPU NVLink domains");
  ExpectError("enumerate --seq 0", "--seq: expected a positive integer");
}

TEST_CASE("bad layouts") {
  ExpectError("ranks --world-size 16 --layout tp=3", "does not divide the world size 16");
  ExpectError("ranks --world-size 16 --layout tp=2,zz=1", "unknown key \"zz\"");
  ExpectError("ranks --world-size 16 --layout tp=2 --format deepspeed", "deepspeed");
}

TEST_CASE("usage errors exit 2") {
  auto r = RunFoldplan("enumerate --no-such-flag");
  CHECK(r.exit_code == 2);
  r = RunFoldplan("");
  CHECK(r.exit_code == 2);
}
