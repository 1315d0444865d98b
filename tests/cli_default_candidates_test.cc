// The default job's candidates (both CP styles, EP overlap, FSDP, TP
// overlap, the cluster's dispatchers), the flags that override them
// (--cp-style, --fsdp, --tp-overlap, --a2a-overlap, --schedule), plan's
// default memory margin and its other precisions.
#include <nlohmann/json.hpp>

#include "cli_run.h"

using foldplan::testing::ExpectUsage;
using foldplan::testing::RunFoldplan;

namespace {

// `enumerate ARGS --json --why`'s document (the default cluster and model
// unless ARGS name others).
nlohmann::json DefaultCandidatesEnumeration(const std::string& args) {
  const auto run = RunFoldplan("enumerate --json --why --limit 1 " + args);
  REQUIRE_MESSAGE(run.exit_code == 0, args << "\n" << run.err);
  return nlohmann::json::parse(run.out);
}

uint64_t DefaultCandidatesLegal(const std::string& args) {
  return DefaultCandidatesEnumeration(args)["legal_count"].get<uint64_t>();
}

// `plan ARGS --json`'s document; exit 1 when no layout fits (the document
// printed all the same).
nlohmann::json DefaultCandidatesPlan(const std::string& args, int exit_code = 0) {
  const auto run = RunFoldplan("plan --json " + args);
  REQUIRE_MESSAGE(run.exit_code == exit_code, args << "\n" << run.err);
  return nlohmann::json::parse(run.out);
}

}  // namespace

TEST_CASE("the candidate flags refuse what is not a candidate, as --precision does (usage errors)") {
  ExpectUsage("plan --cp-style ulysses,spiral", "foldplan: --cp-style: expected one of ulysses, ring, found \"spiral\"\n");
  ExpectUsage("plan --fsdp 0,2", "foldplan: --fsdp: expected 0 or 1 (or false, true), found \"2\"\n");
  ExpectUsage("plan --tp-overlap yes", "foldplan: --tp-overlap: expected 0 or 1 (or false, true), found \"yes\"\n");
  ExpectUsage("enumerate --a2a-overlap ''", "foldplan: enumerate: --a2a-overlap: expected a value, found an empty one\n");
  ExpectUsage("plan --schedule 1f1b,dualpipe", "foldplan: --schedule: expected one of ");
  ExpectUsage("plan --schedule 1f1b,dualpipe", "found \"dualpipe\"");
  // A repeat, an alias included, by the job reader's rule.
  ExpectUsage("plan --cp-style ring,ring", "foldplan: --cp-style: ring given twice\n");
  ExpectUsage("plan --fsdp 0,false", "foldplan: --fsdp: false given twice (0 is false)\n");
  ExpectUsage("explain --layout tp=2 --a2a-overlap 1,1", "foldplan: --a2a-overlap: true given twice (1 is true)\n");
  ExpectUsage("enumerate --schedule interleaved,interleaved-1f1b",
              "foldplan: --schedule: interleaved-1f1b given twice (interleaved is interleaved-1f1b)\n");
  // Checked before any file is read: the flag's error, not the missing cluster's.
  ExpectUsage("plan --cluster no-such-cluster --tp-overlap 2", "foldplan: --tp-overlap: expected 0 or 1");
}

TEST_CASE("each candidate flag replaces its job field's list, which the default job fills") {
  const uint64_t all = DefaultCandidatesLegal("");
  // FSDP and the distributed optimizer: both candidates of the default job.
  const uint64_t no_fsdp = DefaultCandidatesLegal("--fsdp 0");
  const uint64_t fsdp = DefaultCandidatesLegal("--fsdp 1");
  CHECK(no_fsdp > 0);
  CHECK(fsdp > 0);
  CHECK(no_fsdp + fsdp == all);
  CHECK(DefaultCandidatesLegal("--fsdp false,true") == all);
  // EP overlap: on where a2a_overlap_needs allows it.
  const uint64_t overlap = DefaultCandidatesLegal("--a2a-overlap 1");
  CHECK(overlap > 0);
  CHECK(DefaultCandidatesLegal("--a2a-overlap 0") + overlap == all);
  // Both CP styles; ring at cp > 1 only (cp 1 has one style).
  const uint64_t ulysses = DefaultCandidatesLegal("--cp-style ulysses");
  CHECK(ulysses < all);
  CHECK(DefaultCandidatesLegal("--cp-style ring") < all);
  // TP overlap: both (and only tp > 1 may take it).
  CHECK(DefaultCandidatesLegal("--tp-overlap 0") < all);
  // The schedules: the default job lists none, so each layout runs its
  // implied one (1f1b at vpp 1, interleaved-1f1b above), as listing those
  // two does; more schedules, more layouts.
  CHECK(DefaultCandidatesLegal("--schedule 1f1b,interleaved") == all);
  CHECK(DefaultCandidatesLegal("--schedule 1f1b,interleaved,dualpipev,zb-h1") > all);
  // plan takes them as enumerate does (plan --fsdp 0,1 was refused once).
  const auto run = RunFoldplan("plan --fsdp 0,1 --a2a-overlap 0,1 --tp-overlap 1 --cp-style ring,ulysses --top 1");
  CHECK_MESSAGE(run.exit_code == 0, run.err);
}

TEST_CASE("the default job's counts show EP overlap and FSDP as candidates") {
  const nlohmann::json e = DefaultCandidatesEnumeration("");
  // a2a_overlap_needs rejects EP overlap where Megatron refuses it (ep 1,
  // pp > 1 without vpp, full recompute): counted only when it is a candidate.
  CHECK(e["rejected"]["a2a_overlap_needs"].get<uint64_t>() > 0);
  CHECK(DefaultCandidatesEnumeration("--a2a-overlap 0")["rejected"]["a2a_overlap_needs"].get<uint64_t>() == 0);
  CHECK(e["rejected"]["tp_overlap_needs_tp"].get<uint64_t>() > 0);
}

TEST_CASE("a ring CP layout can win under the default job (Megatron's default CP)") {
  // DeepSeek-V3 on 1,024 H100s with two CP ranks: the p2p ring beats
  // Ulysses' all-to-all there, and the default job now lets it.
  const nlohmann::json plan =
      DefaultCandidatesPlan("--cluster h100-dgx-128n --model deepseek-v3 --fix cp=2 --top 1");
  const std::string best = plan["candidates"][0]["layout"]["text"].get<std::string>();
  CHECK_MESSAGE(best.find("cp_style=ring") != std::string::npos, best);
  // Ulysses only (the default job before): no ring layout to win.
  const nlohmann::json ulysses =
      DefaultCandidatesPlan("--cluster h100-dgx-128n --model deepseek-v3 --fix cp=2 --top 1 --cp-style ulysses");
  CHECK(ulysses["candidates"][0]["step_time_s"].get<double>() > plan["candidates"][0]["step_time_s"].get<double>());
}

TEST_CASE("the default job's dispatchers are the cluster's") {
  // The plan file records the job's candidates as decided (inputs.job.spec).
  // DGX H100 nodes, 16 of them: alltoall and DeepEP (Hopper, across nodes).
  const nlohmann::json h100 = DefaultCandidatesPlan("--top 1");
  CHECK(h100["inputs"]["job"]["spec"]["dispatcher"] == nlohmann::json::array({"alltoall", "deepep"}));
  // One node: the alltoall only (no layout of Mixtral-8x7B fits on 8 GPUs).
  const nlohmann::json one = DefaultCandidatesPlan("--gpus 8 --model mixtral-8x7b --top 1", 1);
  CHECK(one["candidates"].empty());
  CHECK(one["inputs"]["job"]["spec"]["dispatcher"] == "alltoall");
  // NVL72 racks: HybridEP too.
  const nlohmann::json nvl72 = DefaultCandidatesPlan("--cluster gb200-nvl72-4r --model mixtral-8x7b --top 1");
  CHECK(nvl72["inputs"]["job"]["spec"]["dispatcher"] == nlohmann::json::array({"alltoall", "deepep", "hybridep"}));
  // A job or flag that names them keeps them.
  const nlohmann::json named = DefaultCandidatesPlan("--top 1 --dispatcher alltoall");
  CHECK(named["inputs"]["job"]["spec"]["dispatcher"] == "alltoall");
}

TEST_CASE("plan keeps a default memory margin, says so, and --headroom-gib 0 turns it off") {
  // 5% of the H100's 79.6 GiB: the limit is 75.62 GiB.
  const auto text = RunFoldplan("plan --top 3");
  REQUIRE(text.exit_code == 0);
  CHECK_MESSAGE(text.out.find("\nmemory margin: 3.98 GiB of the 79.6 GiB HBM kept free, peak at most 75.62 GiB "
                              "(the default: 5% of HBM") != std::string::npos,
                text.out);
  const nlohmann::json plan = DefaultCandidatesPlan("--top 10");
  REQUIRE(plan.contains("memory_limit"));
  CHECK(plan["memory_limit"]["max_peak_gib"].get<double>() == doctest::Approx(0.95 * 79.6));
  CHECK(plan["memory_limit"]["headroom_gib"].get<double>() == doctest::Approx(0.05 * 79.6));
  CHECK(plan["memory_limit"]["set_by"] == "default");
  CHECK(plan["memory_limit"]["refused"].get<uint64_t>() > 0);
  for (const auto& c : plan["candidates"]) CHECK(c["memory"]["peak_gib"].get<double>() <= 0.95 * 79.6);

  // Off: no limit, and layouts above the margin rank again.
  const nlohmann::json off = DefaultCandidatesPlan("--top 10 --headroom-gib 0");
  CHECK_FALSE(off.contains("memory_limit"));
  bool above = false;
  for (const auto& c : off["candidates"]) above |= c["memory"]["peak_gib"].get<double>() > 0.95 * 79.6;
  CHECK(above);
  const auto off_text = RunFoldplan("plan --top 1 --headroom-gib 0");
  CHECK(off_text.out.find("\nmemory margin: none (--headroom-gib 0)") != std::string::npos);

  // A margin given, or a limit given: that one, not the default on top.
  const auto given = RunFoldplan("plan --top 1 --headroom-gib 2");
  CHECK(given.out.find("\nmemory margin: 2.00 GiB of the 79.6 GiB HBM kept free, peak at most 77.60 GiB "
                       "(--headroom-gib 2.0)") != std::string::npos);
  const nlohmann::json max = DefaultCandidatesPlan("--top 1 --max-mem-gib 78");
  CHECK(max["memory_limit"]["max_peak_gib"].get<double>() == doctest::Approx(78));
  CHECK(max["memory_limit"]["set_by"] == "--max-mem-gib");
}

TEST_CASE("plan prints what the other precisions the GPU runs would give the best layout") {
  const auto h100 = RunFoldplan("plan --top 1");
  REQUIRE(h100.exit_code == 0);
  CHECK(h100.out.find("\nother precisions (the best layout re-costed in each recipe the H100 SXM5 runs") !=
        std::string::npos);
  for (const char* p : {"fp8-delayed", "fp8-tensorwise", "fp8-blockwise"}) {
    CHECK_MESSAGE(h100.out.find(std::string("\n  with --precision ") + p + ": ") != std::string::npos, p);
  }
  CHECK(h100.out.find("with --precision mxfp8") == std::string::npos);  // Blackwell only
  CHECK(h100.out.find("with --precision bf16") == std::string::npos);   // the best layout's own
  // Blackwell runs MXFP8 too.
  const auto gb200 = RunFoldplan("plan --cluster gb200-nvl72-4r --model mixtral-8x7b --top 1");
  REQUIRE(gb200.exit_code == 0);
  CHECK(gb200.out.find("\n  with --precision mxfp8: ") != std::string::npos);
  // Where the best layout's FP8 weight copies take it over the limit, the
  // layouts of its degrees are searched in that precision instead.
  const auto tight = RunFoldplan("plan --top 1 --max-mem-gib 65");
  REQUIRE(tight.exit_code == 0);
  const size_t re = tight.out.find("\n  with --precision fp8-blockwise: ");
  REQUIRE(re != std::string::npos);
  // The line, wrapped to the output's width, joined back.
  const size_t next = tight.out.find("\n  with", re + 1);
  std::string line = tight.out.substr(re + 1, next == std::string::npos ? std::string::npos : next - re - 1);
  for (size_t nl; (nl = line.find("\n    ")) != std::string::npos;) line.replace(nl, 5, " ");
  CHECK_MESSAGE(line.find("(these degrees re-searched, as this layout peaks at ") != std::string::npos, line);
  // From FP8, bf16 is the other.
  const auto fp8 = RunFoldplan("plan --top 1 --precision fp8-blockwise");
  CHECK(fp8.out.find("\n  with --precision bf16: ") != std::string::npos);
}
