// ToJson writes each input back in its own file format: every shipped file
// survives load -> ToJson -> parse -> ToJson unchanged.
#include <doctest/doctest.h>

#include "inputs/loader.h"
#include "inputs/serialize.h"

using namespace foldplan;

TEST_CASE("every shipped input round-trips through ToJson") {
  for (InputKind kind : {InputKind::kCluster, InputKind::kModel, InputKind::kJob}) {
    auto shipped = ListShipped(kind);
    REQUIRE(shipped.ok());
    for (const auto& s : shipped.value()) {
      CAPTURE(s.name);
      nlohmann::json first, second;
      if (kind == InputKind::kCluster) {
        auto a = LoadCluster(s.path);
        REQUIRE(a.ok());
        first = ToJson(a.value());
        auto b = ParseCluster(first, "round-trip");
        REQUIRE_MESSAGE(b.ok(), b.status().message());
        second = ToJson(b.value());
        CHECK(a->total_gpus() == b->total_gpus());
      } else if (kind == InputKind::kModel) {
        auto a = LoadModel(s.path);
        REQUIRE(a.ok());
        first = ToJson(a.value());
        auto b = ParseModel(first, "round-trip");
        REQUIRE_MESSAGE(b.ok(), b.status().message());
        second = ToJson(b.value());
        CHECK(a->total_params() == b->total_params());
      } else {
        auto a = LoadJob(s.path);
        REQUIRE(a.ok());
        first = ToJson(a.value());
        auto b = ParseJob(first, "round-trip");
        REQUIRE_MESSAGE(b.ok(), b.status().message());
        second = ToJson(b.value());
      }
      CHECK(first == second);
    }
  }
}

TEST_CASE("a job's pipeline schedules round-trip; a job that names none writes no field") {
  JobSpec job;
  CHECK_FALSE(ToJson(job).contains("pipeline_schedules"));
  job.pipeline_schedules = {PipelineSchedule::kDualPipeV, PipelineSchedule::kZeroBubbleH1};
  const nlohmann::json first = ToJson(job);
  CHECK(first["pipeline_schedules"] == nlohmann::json{"dualpipev", "zb-h1"});
  auto back = ParseJob(first, "round-trip");
  REQUIRE_MESSAGE(back.ok(), back.status().message());
  CHECK(back->pipeline_schedules == job.pipeline_schedules);
}

TEST_CASE("a job's attention backend round-trips; te-cudnn when the file names none") {
  JobSpec job;
  CHECK(job.attention_backend == AttentionBackend::kTeCudnn);
  CHECK(ToJson(job)["attention_backend"] == "te-cudnn");
  for (AttentionBackend b : {AttentionBackend::kTeCudnn, AttentionBackend::kFlash2, AttentionBackend::kFlash3}) {
    job.attention_backend = b;
    const nlohmann::json written = ToJson(job);
    CHECK(written["attention_backend"] == Name(b));
    auto back = ParseJob(written, "round-trip");
    REQUIRE_MESSAGE(back.ok(), back.status().message());
    CHECK(back->attention_backend == b);
  }
  nlohmann::json none = ToJson(JobSpec{});
  none.erase("attention_backend");
  auto read = ParseJob(none, "no-field");
  REQUIRE_MESSAGE(read.ok(), read.status().message());
  CHECK(read->attention_backend == AttentionBackend::kTeCudnn);
}
