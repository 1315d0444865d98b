// A job file's settings that shape the cluster hold in every command, as
// the flag of the same name does.
#include "cli_run.h"

using foldplan::testing::RunFoldplan;

namespace {

const std::string kJob64 = "tests/data/cli/job_gpus_per_domain_64.json";
const std::string kRanks = "ranks --cluster gb200-nvl72-4r --layout tp=1,pp=4,ep=8,etp=1 --format rankmap";

}  // namespace

// The job's gpus_per_domain cuts the cluster whether or not --model is
// given: the rank map is the one --gpus-per-domain 64 gives (4 racks x 64
// = 256 ranks), not the whole 288-GPU cluster's.
TEST_CASE("ranks honours a job file's gpus_per_domain, with or without --model") {
  const auto by_flag = RunFoldplan(kRanks + " --gpus-per-domain 64");
  REQUIRE(by_flag.exit_code == 0);
  const auto whole = RunFoldplan(kRanks);
  REQUIRE(whole.exit_code == 0);
  CHECK(by_flag.out != whole.out);  // the cut shows in the rank map

  const auto by_job = RunFoldplan(kRanks + " --job " + kJob64);
  CHECK(by_job.exit_code == 0);
  CHECK(by_job.out == by_flag.out);

  // With --model (the rank map then carries the model's stage split).
  const auto with_model = RunFoldplan(kRanks + " --job " + kJob64 + " --model qwen3-235b-a22b");
  const auto flag_with_model = RunFoldplan(kRanks + " --gpus-per-domain 64 --model qwen3-235b-a22b");
  CHECK(with_model.exit_code == 0);
  CHECK(with_model.out == flag_with_model.out);
}

// plan and enumerate read the job's setting too (they always did; one route
// now serves every command).
TEST_CASE("enumerate honours a job file's gpus_per_domain as the flag") {
  const std::string e = "enumerate --cluster gb200-nvl72-4r --model qwen3-235b-a22b --json --limit 0";
  const auto by_job = RunFoldplan(e + " --job " + kJob64);
  const auto by_flag = RunFoldplan(e + " --gpus-per-domain 64 --job " + kJob64);
  CHECK(by_job.exit_code == 0);
  CHECK(by_job.out == by_flag.out);
  CHECK(by_job.out.find("\"cluster_gpus\": 256") != std::string::npos);
}
