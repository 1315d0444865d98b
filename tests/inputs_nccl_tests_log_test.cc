// inputs/nccl_tests_log.h reads the stdout of nccl-tests' perf programs. The
// fixtures (tests/data/nccl_tests/, hand-written in nccl-tests' format) cover
// both column variants, a multi-host MPI run, wrong elements and a run cut
// short; the short logs built here cover each refusal and its line.
#include <doctest/doctest.h>

#include <string>

#include "inputs/nccl_tests_log.h"

using foldplan::LoadNcclTestsLog;
using foldplan::NcclTestsLog;
using foldplan::ParseNcclTestsLog;

namespace {

const std::string kDir = FOLDPLAN_TEST_DATA_DIR "/nccl_tests/";

// A small all_reduce log in the current format: header lines 1-2, rank lines
// from line 3, then the table header, `rows` and (unless cut) the trailer.
std::string MiniLog(const std::string& rows, bool trailer = true,
                    const std::string& ranks = "#  Rank  0 Group  0 Pid 9 on n1 device  0 [0x07] GPU\n"
                                               "#  Rank  1 Group  0 Pid 9 on n1 device  1 [0x08] GPU\n") {
  std::string log = "# Collective test starting: all_reduce_perf\n"
                    "# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20\n" +
                    ranks +
                    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time"
                    "   algbw   busbw #wrong\n" +
                    rows;
  if (trailer) log += "# Avg bus bandwidth    : 0.5\n";
  return log;
}

const std::string kRow = "8 2 float sum -1 33.44 0.00 0.00 0 32.85 0.00 0.00 0\n";

std::string Refused(const std::string& text, const std::string& file = "r.log", const std::string& hint = "") {
  auto log = ParseNcclTestsLog(text, file, hint);
  REQUIRE(!log.ok());
  return log.status().message();
}

}  // namespace

TEST_CASE("an all_reduce_perf run on 8 GPUs of one host is read whole") {
  auto log = LoadNcclTestsLog(kDir + "all_reduce_perf_h100x8.log");
  REQUIRE(log.ok());
  CHECK(log->collective == "all_reduce");
  CHECK(log->threads == 1);
  CHECK(log->gpus_per_thread == 8);
  CHECK(log->min_bytes == 8);
  CHECK(log->max_bytes == 8589934592);
  CHECK(log->warmup_iters == 5);
  CHECK(log->iters == 20);
  CHECK(log->nccl_version == "2.21.2");  // nccl-library=22102
  CHECK(log->cuda_version == "");
  REQUIRE(log->ranks.size() == 8);
  CHECK(log->group_count == 1);
  CHECK(log->group_size() == 8);
  CHECK(log->hosts == std::vector<std::string>{"node01"});
  CHECK(log->ranks_per_host == std::vector<int>{8});
  CHECK(log->ranks[3].rank == 3);
  CHECK(log->ranks[3].device == 3);
  CHECK(log->ranks[3].pid == 412345);
  CHECK(log->ranks[3].bus_id == "0000:48:00");
  CHECK(log->ranks[3].gpu_name == "NVIDIA H100 80GB HBM3");
  CHECK(log->ranks[3].line == 9);
  REQUIRE(log->rows.size() == 31);
  const auto& first = log->rows.front();
  CHECK(first.line == 18);
  CHECK(first.size_bytes == 8);
  CHECK(first.count == 2);
  CHECK(first.type == "float");
  CHECK(first.redop == "sum");
  CHECK(first.root == -1);
  CHECK(first.out_of_place.present);
  CHECK(first.out_of_place.validated);
  CHECK(first.out_of_place.time_us == doctest::Approx(24.00));
  CHECK(first.in_place.time_us == doctest::Approx(23.48));
  const auto& last = log->rows.back();
  CHECK(last.line == 48);
  CHECK(last.size_bytes == 8589934592);
  CHECK(last.count == 2147483648);
  CHECK(last.out_of_place.time_us == doctest::Approx(32439));
  CHECK(last.out_of_place.algbw_gb_per_s == doctest::Approx(264.80));
  CHECK(last.out_of_place.busbw_gb_per_s == doctest::Approx(463.41));
  CHECK(last.in_place.busbw_gb_per_s == doctest::Approx(467.50));
  CHECK(log->avg_busbw_gb_per_s == doctest::Approx(163.0626));
  CHECK(log->wrong_rows() == 0);
}

TEST_CASE("the older variant without root and with an error column is read, the collective from the file name") {
  auto log = LoadNcclTestsLog(kDir + "all_gather_perf_v100x4_old.log");
  REQUIRE(log.ok());
  CHECK(log->collective == "all_gather");
  CHECK(log->gpus_per_thread == 4);
  CHECK(log->iters == 20);
  CHECK(log->nccl_version == "");
  REQUIRE(log->ranks.size() == 4);
  CHECK(log->ranks[0].group == 0);  // no Group on older rank lines
  CHECK(log->ranks[0].bus_id == "0x06");
  CHECK(log->ranks[0].gpu_name == "Tesla V100-SXM2-16GB");
  CHECK(log->hosts == std::vector<std::string>{"dgx1"});
  REQUIRE(log->rows.size() == 9);
  const auto& r = log->rows[0];
  CHECK(r.line == 12);
  CHECK(r.size_bytes == 1024);
  CHECK(r.redop == "none");
  CHECK(!r.root.has_value());
  CHECK(r.out_of_place.time_us == doctest::Approx(14.01));
  CHECK(r.out_of_place.validated);
  CHECK(r.out_of_place.wrong == 0);
  CHECK(r.out_of_place.max_error == 0);
  CHECK(r.in_place.time_us == doctest::Approx(13.51));
  CHECK(log->rows.back().size_bytes == 67108864);
}

TEST_CASE("an alltoall_perf run of 16 MPI ranks on 2 hosts gives hosts, group size and N/A in-place halves") {
  auto log = LoadNcclTestsLog(kDir + "alltoall_perf_2x8_mpi.log");
  REQUIRE(log.ok());
  CHECK(log->collective == "all_to_all");
  CHECK(log->threads == 1);
  CHECK(log->gpus_per_thread == 1);
  REQUIRE(log->ranks.size() == 16);
  CHECK(log->group_size() == 16);
  CHECK(log->hosts == std::vector<std::string>{"node01", "node02"});
  CHECK(log->ranks_per_host == std::vector<int>{8, 8});
  CHECK(log->ranks[15].host == "node02");
  CHECK(log->ranks[15].pid == 52007);
  CHECK(log->ranks[15].device == 7);
  CHECK(log->nccl_version == "2.21.5");  // from NCCL's INFO line
  CHECK(log->cuda_version == "12.4");
  REQUIRE(log->rows.size() == 11);  // the INFO line inside the table is skipped
  CHECK(log->rows[0].line == 32);
  CHECK(log->rows[0].out_of_place.time_us == doctest::Approx(81.85));
  CHECK(log->rows[5].line == 38);
  CHECK(log->rows[5].size_bytes == 33554432);
  for (const auto& r : log->rows) {
    CHECK(r.out_of_place.present);
    CHECK(!r.in_place.present);
  }
  CHECK(log->rows.back().size_bytes == 1073741824);
  CHECK(log->rows.back().out_of_place.time_us == doctest::Approx(22430));
}

TEST_CASE("rows with wrong elements are read with their counts and lines") {
  auto log = LoadNcclTestsLog(kDir + "reduce_scatter_perf_wrong.log");
  REQUIRE(log.ok());
  CHECK(log->collective == "reduce_scatter");
  CHECK(log->nccl_version == "2.19.3");  // nccl-library=21903
  REQUIRE(log->rows.size() == 7);
  CHECK(log->wrong_rows() == 2);
  CHECK(log->rows[3].line == 21);
  CHECK(log->rows[3].size_bytes == 8388608);
  CHECK(log->rows[3].out_of_place.wrong == 0);
  CHECK(log->rows[3].in_place.wrong == 1536);
  CHECK(log->rows[5].out_of_place.wrong == 12);
  CHECK(log->rows[5].in_place.wrong == 12);
}

TEST_CASE("a log cut short in the table says the run did not finish, and the failure it printed") {
  const std::string path = kDir + "all_reduce_perf_truncated.log";
  auto log = LoadNcclTestsLog(path);
  REQUIRE(!log.ok());
  CHECK(log.status().message() ==
        path + ":16: the results table that starts here has no \"# Avg bus bandwidth\" line after it (the last "
               "row is at line 25): the run did not finish; line 26 reports a failure: \"node01: Test NCCL "
               "failure common.cu:1005 'unhandled cuda err\"...");
}

TEST_CASE("the collective comes from the log's line, else the name given, else the file name") {
  auto from_line = ParseNcclTestsLog(MiniLog(kRow), "x.log");
  REQUIRE(from_line.ok());
  CHECK(from_line->collective == "all_reduce");

  std::string no_line = MiniLog(kRow);
  no_line.erase(0, no_line.find('\n') + 1);
  auto hinted = ParseNcclTestsLog(no_line, "x.log", "alltoall");
  REQUIRE(hinted.ok());
  CHECK(hinted->collective == "all_to_all");
  auto named = ParseNcclTestsLog(no_line, "runs/sendrecv_perf.out");
  REQUIRE(named.ok());
  CHECK(named->collective == "send_recv");

  CHECK(Refused(no_line, "x.log") ==
        "x.log: cannot tell which collective the log measured (it has no \"# Collective test starting\" line and "
        "the file name does not say): name it as all_reduce:x.log (or one of all_reduce, all_gather, "
        "reduce_scatter, all_to_all, send_recv)");
  CHECK(Refused(no_line, "all_reduce_vs_all_gather.log").find("names more than one collective") != std::string::npos);
  CHECK(Refused(MiniLog(kRow), "x.log", "all_gather") ==
        "x.log:1: the log is \"all_reduce_perf\"'s, but it was named all_gather");
  CHECK(Refused(MiniLog(kRow), "x.log", "allreduce") ==
        "x.log: unknown collective \"allreduce\"; expected one of all_reduce, all_gather, reduce_scatter, "
        "all_to_all, send_recv (the name before the file)");
}

TEST_CASE("perf programs of collectives foldplan does not model are refused") {
  std::string log = MiniLog(kRow);
  log.replace(log.find("all_reduce_perf"), 15, "broadcast_perf");
  CHECK(Refused(log) ==
        "r.log:1: broadcast_perf measures a collective foldplan does not model; it calibrates all_reduce, "
        "all_gather, reduce_scatter, all_to_all, send_recv");
}

TEST_CASE("a row that does not parse is refused at its line") {
  CHECK(Refused(MiniLog(kRow + "16 4 float sum -1 abc 0.00 0.00 0 32.85 0.00 0.00 0\n")) ==
        "r.log:7: expected the out-of-place time in us (a number in [0.01, 1e12]: less is not a measured time) or N/A, "
        "found \"abc\"");
  CHECK(Refused(MiniLog("16 4 float sum -1 1.0 0.00 0.00 0 32.85 0.00 0.00\n")) ==
        "r.log:6: expected a results row of 13 fields (as the header at line 5 says), found 12");
  CHECK(Refused(MiniLog("16 4 float sum -1 -1.0 0.00 0.00 0 32.85 0.00 0.00 0\n")).find("r.log:6: expected the "
                                                                                        "out-of-place time") == 0);
  CHECK(Refused(MiniLog("16 4 float sum -1 1.0 0.00 0.00 0 nan 0.00 0.00 0\n")).find("r.log:6: expected the "
                                                                                     "in-place time") == 0);
  CHECK(Refused(MiniLog("16 4 float sum -1 1.0 inf 0.00 0 1.0 0.00 0.00 0\n")).find("algbw") != std::string::npos);
  CHECK(Refused(MiniLog("16 4 float sum -1 1.0 0.00 0.00 -3 1.0 0.00 0.00 0\n")).find("#wrong") != std::string::npos);
  CHECK(Refused(MiniLog("9223372036854775807 4 float sum -1 1.0 0.00 0.00 0 1.0 0.00 0.00 0\n")) ==
        "r.log:6: expected the size in bytes (an integer in [0, 2^62]), found \"9223372036854775807\"");
  CHECK(Refused(MiniLog("99999999999999999999 4 float sum -1 1.0 0.00 0.00 0 1.0 0.00 0.00 0\n")).find("size") !=
        std::string::npos);
}

TEST_CASE("the column variant is the header line's, not guessed from a row") {
  std::string old = MiniLog("8 2 float sum 33.44 0.00 0.00 1.2e-03 32.85 0.00 0.00 0e+00\n");
  old.replace(old.find("   root"), 7, "");
  old.replace(old.find("#wrong"), 6, "error");
  old.replace(old.find("#wrong"), 6, "error");
  auto log = ParseNcclTestsLog(old, "r.log");
  REQUIRE(log.ok());
  CHECK(!log->rows[0].root.has_value());
  CHECK(log->rows[0].out_of_place.wrong == 1);
  CHECK(log->rows[0].out_of_place.max_error == doctest::Approx(1.2e-3));
  CHECK(log->rows[0].in_place.wrong == 0);
  CHECK(log->wrong_rows() == 1);
  // A current-format row under the older header has one field too many.
  old.insert(old.find("# Avg"), kRow);
  CHECK(Refused(old) == "r.log:7: expected a results row of 12 fields (as the header at line 5 says), found 13");
}

TEST_CASE("N/A in #wrong is a measured but unvalidated half") {
  auto log = ParseNcclTestsLog(MiniLog("8 2 float sum -1 33.44 0.00 0.00 N/A 32.85 0.00 0.00 N/A\n"), "r.log");
  REQUIRE(log.ok());
  CHECK(log->rows[0].out_of_place.present);
  CHECK(!log->rows[0].out_of_place.validated);
  CHECK(log->rows[0].out_of_place.time_us == doctest::Approx(33.44));
}

TEST_CASE("logs missing their header, ranks, table or rows are refused") {
  CHECK(Refused("hello\n") ==
        "r.log: no \"# nThread N nGpus G ...\" header line: not the output of an nccl-tests program");
  CHECK(Refused(MiniLog(kRow, true, "")) ==
        "r.log: no \"#  Rank N Group G Pid P on HOST device D\" lines after the header at line 2");
  CHECK(Refused(MiniLog("")) == "r.log:5: the results table has no rows");
  std::string no_table = MiniLog(kRow);
  no_table.resize(no_table.find("#       size"));
  CHECK(Refused(no_table).find("r.log: no results table") == 0);
  CHECK(Refused(MiniLog(kRow + "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 warmup iters: 5 iters: 20\n")) ==
        "r.log:7: a second \"# nThread\" header (the first is at line 2): one nccl-tests run per log");
}

TEST_CASE("rank lines: groups, divisibility, repeats and gaps") {
  const std::string four = "#  Rank  0 Group  0 Pid 9 on a device 0 [0x07] G\n"
                           "#  Rank  1 Group  0 Pid 9 on a device 1 [0x08] G\n"
                           "#  Rank  2 Group  1 Pid 9 on b device 0 [0x07] G\n"
                           "#  Rank  3 Group  1 Pid 9 on b device 1 [0x08] G\n";
  auto log = ParseNcclTestsLog(MiniLog(kRow, true, four), "r.log");
  REQUIRE(log.ok());
  CHECK(log->group_count == 2);
  CHECK(log->group_size() == 2);
  CHECK(log->hosts == std::vector<std::string>{"a", "b"});
  CHECK(log->ranks_per_host == std::vector<int>{2, 2});

  const std::string three = "#  Rank  0 Group  0 Pid 9 on a device 0 [0x07] G\n"
                            "#  Rank  1 Group  0 Pid 9 on a device 1 [0x08] G\n"
                            "#  Rank  2 Group  1 Pid 9 on b device 0 [0x07] G\n";
  CHECK(Refused(MiniLog(kRow, true, three)) == "r.log:3: 3 ranks do not divide into the 2 groups the rank lines name");
  const std::string repeated = "#  Rank  0 Group  0 Pid 9 on a device 0 [0x07] G\n"
                               "#  Rank  0 Group  0 Pid 9 on a device 1 [0x08] G\n";
  CHECK(Refused(MiniLog(kRow, true, repeated)) == "r.log:4: rank 0 again (first at line 3)");
  const std::string gap = "#  Rank  0 Group  0 Pid 9 on a device 0 [0x07] G\n"
                          "#  Rank  2 Group  0 Pid 9 on a device 1 [0x08] G\n";
  CHECK(Refused(MiniLog(kRow, true, gap)) == "r.log:4: no line for rank 1: expected ranks 0..1 each once");
  CHECK(Refused(MiniLog(kRow, true, "#  Rank  x Group  0 Pid 9 on a device 0 [0x07] G\n")).find("r.log:3: expected") ==
        0);
  CHECK(Refused(MiniLog(kRow, true, "#  Rank  0 Group  0 Pid 9 on a device 0 G\n")).find("no [BUS] id") !=
        std::string::npos);
}

TEST_CASE("nccl-tests' version codes before NCCL 2.9 decode as major*1000+minor*100+patch") {
  auto log = ParseNcclTestsLog("# nccl-tests version 2.0.0 nccl-headers=2708 nccl-library=2708\n" + MiniLog(kRow),
                               "r.log");
  REQUIRE(log.ok());
  CHECK(log->nccl_version == "2.7.8");
}

TEST_CASE("absurd input is refused, never read") {
  CHECK(Refused(std::string(70000, 'x')) == "r.log:1: a line longer than 65536 bytes: not an nccl-tests log");
  CHECK(Refused(std::string("\0\0#\n\xff", 5)).find("r.log") == 0);
  CHECK(Refused(MiniLog(kRow, false) + std::string(10, '\n')).find("the run did not finish") != std::string::npos);
  std::string big_header = MiniLog(kRow);
  big_header.replace(big_header.find("maxBytes 1024"), 13, "maxBytes 99999999999999999999");
  CHECK(Refused(big_header).find("r.log:2: expected an integer in [0, 4611686018427387904] after maxBytes") == 0);
}

TEST_CASE("a row whose time is below what nccl-tests prints is refused at its line, with the reason") {
  // 1e-320 was read, and made the series unfittable ("nothing to fit").
  CHECK(Refused(MiniLog(kRow + "16 4 float sum -1 1e-320 0.00 0.00 0 32.85 0.00 0.00 0\n")).find(
            "r.log:7: expected the out-of-place time in us (a number in [0.01, 1e12]: less is not a measured time)") == 0);
  CHECK(Refused(MiniLog("16 4 float sum -1 1.0 0.00 0.00 0 0 0.00 0.00 0\n")).find("r.log:6: expected the in-place time") ==
        0);
  CHECK(ParseNcclTestsLog(MiniLog("16 4 float sum -1 0.01 0.00 0.00 0 0.01 0.00 0.00 0\n"), "r.log").ok());
}

TEST_CASE("a row with a negative size is an error, not passed over") {
  CHECK(Refused(MiniLog(kRow + "-8 2 float sum -1 33.44 0.00 0.00 0 32.85 0.00 0.00 0\n")) ==
        "r.log:7: expected the size in bytes (an integer in [0, 2^62]), found \"-8\"");
}

TEST_CASE("a second \"# Collective test starting\" line is refused with the first one's line") {
  const std::string log = "# Collective test starting: all_gather_perf\n" + MiniLog(kRow);
  CHECK(Refused(log) == "r.log:2: a second \"# Collective test starting\" line (the first is at line 1): one nccl-tests "
                        "run per log");
}
