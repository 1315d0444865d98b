// Reading an nccl-tests log (doc/formats.md "nccl-tests logs").
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/atomic_file.h"
#include "core/formats.h"
#include "core/quoted_text.h"
#include "inputs/nccl_tests_log.h"

namespace foldplan {
namespace {

constexpr size_t kMaxLineBytes = size_t{64} << 10;  // far past any line nccl-tests prints
constexpr int64_t kMaxMessageBytes = int64_t{1} << 62;
constexpr double kMaxTimeUs = 1e12;      // 11 days per iteration is a broken clock
// The least time nccl-tests prints other than 0.00 (two decimals): a launch
// alone takes microseconds, so less is not a measurement (and 1e-320 would
// make the size's bandwidth infinite).
constexpr double kMinTimeUs = 0.01;
constexpr double kMaxRateGbPerS = 1e9;   // far past any link
constexpr size_t kMaxRows = size_t{1} << 16;  // -d all -o all over 8 B..16 GiB is ~4000
constexpr int kMaxWorld = static_cast<int>(kMaxWorldSize);
constexpr int kMaxThreadsOrGpus = 1024;
constexpr int64_t kMaxIters = 1000000000;
constexpr size_t kMaxNameChars = 64;     // a data type or reduction op

// Collectives foldplan models, by nccl-tests' binary name and foldplan's.
struct CollectiveName {
  const char* nccl_tests;
  const char* foldplan;
};
constexpr CollectiveName kModelled[] = {{"all_reduce", "all_reduce"},
                                        {"all_gather", "all_gather"},
                                        {"reduce_scatter", "reduce_scatter"},
                                        {"alltoall", "all_to_all"},
                                        {"sendrecv", "send_recv"}};
constexpr const char* kNotModelled[] = {"broadcast", "reduce", "gather", "scatter", "hypercube"};
constexpr const char* kModelledList = "all_reduce, all_gather, reduce_scatter, all_to_all, send_recv";

using Tokens = std::vector<std::string_view>;

Tokens Split(std::string_view line) {
  Tokens out;
  size_t i = 0;
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; };
  while (i < line.size()) {
    while (i < line.size() && space(line[i])) ++i;
    size_t start = i;
    while (i < line.size() && !space(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// A token quoted for a message: at most 60 bytes, control bytes escaped.
std::string Quote(std::string_view s) { return Quoted(s, 60); }

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A results row's first token: a number, signed ones included so that a
// negative size is refused as a row rather than passed over as chatter.
bool StartsRow(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  return !s.empty() && s[0] >= '0' && s[0] <= '9';
}

std::optional<int64_t> ToInt(std::string_view s, int64_t min, int64_t max) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < min || v > max) return std::nullopt;
  return v;
}

std::optional<double> ToNumber(std::string_view s, double min, double max) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < min || v > max) {
    return std::nullopt;
  }
  return v;
}

bool IsName(std::string_view s) {
  return !s.empty() && s.size() <= kMaxNameChars && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool IsVersion(std::string_view s) {
  return !s.empty() && s.size() <= 20 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

// NCCL's version code: 22102 -> "2.21.2"; before 2.9, 2708 -> "2.7.8".
std::string DecodeNcclVersion(int64_t code) {
  const bool modern = code >= 10000;
  const int64_t major = modern ? code / 10000 : code / 1000;
  const int64_t minor = modern ? (code / 100) % 100 : (code / 100) % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

// A collective's name (foldplan's or nccl-tests', with or without "_perf")
// as foldplan's; the error says why not (without the file).
Result<std::string> ModelledName(std::string_view name) {
  std::string_view base = name;
  if (base.size() > 5 && base.substr(base.size() - 5) == "_perf") base.remove_suffix(5);
  for (const auto& c : kModelled) {
    if (base == c.nccl_tests || base == c.foldplan) return std::string(c.foldplan);
  }
  for (const char* c : kNotModelled) {
    if (base == c) {
      return Status::Error(std::string(c) + "_perf measures a collective foldplan does not model; it calibrates " +
                           kModelledList);
    }
  }
  return Status::Error("unknown collective " + Quote(name) + "; expected one of " + kModelledList);
}

// The collective a file's base name says, if exactly one.
Result<std::string> CollectiveFromFileName(const std::string& file) {
  const size_t slash = file.find_last_of('/');
  const std::string base = slash == std::string::npos ? file : file.substr(slash + 1);
  std::vector<std::string> found;
  for (const auto& c : kModelled) {
    if (base.find(c.nccl_tests) != std::string::npos || base.find(c.foldplan) != std::string::npos) {
      found.push_back(c.foldplan);
    }
  }
  const std::string how = std::string("name it as all_reduce:") + file + " (or one of " + kModelledList + ")";
  if (found.size() > 1) {
    return Status::Error(file + ": the file name names more than one collective (" + found[0] + ", " + found[1] +
                         ") and the log has no \"# Collective test starting\" line: " + how);
  }
  if (found.size() == 1) return found[0];
  for (const char* c : kNotModelled) {
    if (base.find(std::string(c) + "_perf") != std::string::npos) {
      return Status::Error(file + ": " + c + "_perf measures a collective foldplan does not model; it calibrates " +
                           kModelledList);
    }
  }
  return Status::Error(file + ": cannot tell which collective the log measured (it has no \"# Collective test "
                              "starting\" line and the file name does not say): " + how);
}

class LogReader {
 public:
  LogReader(const std::string& file, const std::string& hint) : file_(file), hint_(hint) { log_.source = file; }

  Result<NcclTestsLog> Read(std::string_view text) {
    if (text.size() > static_cast<uint64_t>(kMaxInputFileBytes)) {
      return Status::Error(file_ + ": larger than " + std::to_string(kMaxInputFileBytes) + " bytes");
    }
    size_t pos = 0;
    int line_no = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string_view::npos) end = text.size();
      ++line_no;
      const std::string_view line = text.substr(pos, end - pos);
      pos = end + 1;
      if (line.size() > kMaxLineBytes) {
        return At(line_no, "a line longer than " + std::to_string(kMaxLineBytes) + " bytes: not an nccl-tests log");
      }
      Status s = Line(line, line_no);
      if (!s.ok()) return s;
    }
    Status s = Finish();
    if (!s.ok()) return s;
    return std::move(log_);
  }

 private:
  enum class State { kBeforeTable, kInTable, kAfterTable };

  Status At(int line, const std::string& what) const {
    return Status::Error(file_ + ":" + std::to_string(line) + ": " + what);
  }
  Status Whole(const std::string& what) const { return Status::Error(file_ + ": " + what); }

  Status Line(std::string_view line, int line_no) {
    const Tokens tokens = Split(line);
    if (tokens.empty()) return Status();
    if (tokens[0][0] == '#') {
      Tokens c(tokens.begin() + 1, tokens.end());
      if (tokens[0].size() > 1) c.insert(c.begin(), tokens[0].substr(1));
      return Comment(c, line, line_no);
    }
    if (line.find("NCCL INFO NCCL version ") != std::string_view::npos) {
      NcclInfoVersion(tokens);
      return Status();
    }
    if (failure_line_ == 0 && line.find("Test") != std::string_view::npos &&
        line.find("failure") != std::string_view::npos) {
      failure_line_ = line_no;
      failure_text_ = Quote(line);
    }
    if (state_ == State::kInTable && StartsRow(tokens[0])) return Row(tokens, line_no);
    return Status();
  }

  Status Comment(const Tokens& c, std::string_view line, int line_no) {
    auto is = [&](size_t i, std::string_view word) { return c.size() > i && c[i] == word; };
    if (is(0, "nThread")) return Header(c, line_no);
    if (is(0, "Rank")) return RankLine(c, line, line_no);
    if (is(0, "size") && is(1, "count")) return ColumnHeader(c, line_no);
    if (is(0, "Avg") && is(1, "bus") && is(2, "bandwidth")) return Trailer(c, line_no);
    if (is(0, "Collective") && is(1, "test") && is(2, "starting:") && c.size() > 3) {
      if (collective_line_ != 0) {
        return At(line_no, "a second \"# Collective test starting\" line (the first is at line " +
                               std::to_string(collective_line_) + "): one nccl-tests run per log");
      }
      collective_line_ = line_no;
      collective_binary_ = std::string(c[3].substr(0, kMaxNameChars));
      return Status();
    }
    if (is(0, "nccl-tests") && is(1, "version")) {
      for (std::string_view t : c) {
        if (t.substr(0, 13) != "nccl-library=" || !log_.nccl_version.empty()) continue;
        if (auto code = ToInt(t.substr(13), 1, 9999999)) log_.nccl_version = DecodeNcclVersion(*code);
      }
    }
    return Status();  // other comments: "# Using devices", "# Out of bounds values", ...
  }

  // "... NCCL INFO NCCL version 2.21.5+cuda12.4"
  void NcclInfoVersion(const Tokens& tokens) {
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      if (tokens[i] != "version") continue;
      std::string_view v = tokens[i + 1];
      std::string_view cuda;
      if (size_t plus = v.find("+cuda"); plus != std::string_view::npos) {
        cuda = v.substr(plus + 5);
        v = v.substr(0, plus);
      }
      if (!IsVersion(v)) return;
      if (log_.nccl_version.empty()) log_.nccl_version = std::string(v);
      if (log_.cuda_version.empty() && IsVersion(cuda)) log_.cuda_version = std::string(cuda);
      return;
    }
  }

  // "# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 ..."
  Status Header(const Tokens& c, int line_no) {
    if (header_line_ != 0) {
      return At(line_no, "a second \"# nThread\" header (the first is at line " + std::to_string(header_line_) +
                             "): one nccl-tests run per log");
    }
    header_line_ = line_no;
    std::optional<int64_t> threads, gpus, min_bytes, max_bytes, warmup, iters;
    auto take = [&](size_t i, std::optional<int64_t>& out, int64_t min, int64_t max, const char* what) -> Status {
      std::optional<int64_t> v = i < c.size() ? ToInt(c[i], min, max) : std::nullopt;
      if (!v) {
        return At(line_no, std::string("expected an integer in [") + std::to_string(min) + ", " +
                               std::to_string(max) + "] after " + what + ", found " +
                               (i < c.size() ? Quote(c[i]) : std::string("the end of the line")));
      }
      out = v;
      return Status();
    };
    for (size_t i = 0; i < c.size(); ++i) {
      Status s;
      if (c[i] == "nThread") {
        s = take(i + 1, threads, 1, kMaxThreadsOrGpus, "nThread");
      } else if (c[i] == "nGpus") {
        s = take(i + 1, gpus, 1, kMaxThreadsOrGpus, "nGpus");
      } else if (c[i] == "minBytes") {
        s = take(i + 1, min_bytes, 0, kMaxMessageBytes, "minBytes");
      } else if (c[i] == "maxBytes") {
        s = take(i + 1, max_bytes, 0, kMaxMessageBytes, "maxBytes");
      } else if (c[i] == "warmup" && i + 1 < c.size() && c[i + 1] == "iters:") {
        s = take(i + 2, warmup, 0, kMaxIters, "warmup iters:");
        ++i;
      } else if (c[i] == "iters:" && (i == 0 || c[i - 1] != "agg")) {
        s = take(i + 1, iters, 0, kMaxIters, "iters:");
      }
      if (!s.ok()) return s;
    }
    if (!threads || !gpus || !min_bytes || !max_bytes || !warmup || !iters) {
      return At(line_no, "expected nThread, nGpus, minBytes, maxBytes, warmup iters: and iters: in the header line");
    }
    if (*min_bytes > *max_bytes) return At(line_no, "expected minBytes <= maxBytes");
    log_.threads = static_cast<int>(*threads);
    log_.gpus_per_thread = static_cast<int>(*gpus);
    log_.min_bytes = *min_bytes;
    log_.max_bytes = *max_bytes;
    log_.warmup_iters = static_cast<int>(*warmup);
    log_.iters = static_cast<int>(*iters);
    return Status();
  }

  // "#  Rank  0 Group  0 Pid  12345 on     node01 device  0 [0x07] NVIDIA H100 80GB HBM3"
  // (older logs have no Group).
  Status RankLine(const Tokens& c, std::string_view line, int line_no) {
    const std::string expected =
        "expected \"#  Rank N Group G Pid P on HOST device D [BUS] NAME\"";
    NcclTestsRank r;
    r.line = line_no;
    size_t i = 1;
    auto word = [&](std::string_view w) { return i < c.size() && c[i] == w; };
    auto integer = [&](int64_t min, int64_t max) -> std::optional<int64_t> {
      if (i >= c.size()) return std::nullopt;
      return ToInt(c[i++], min, max);
    };
    auto rank = integer(0, kMaxWorld - 1);
    if (!rank) return At(line_no, expected + " with 0 <= N < " + std::to_string(kMaxWorld));
    r.rank = static_cast<int>(*rank);
    if (word("Group")) {
      ++i;
      auto group = integer(0, kMaxWorld - 1);
      if (!group) return At(line_no, expected + " with 0 <= G < " + std::to_string(kMaxWorld));
      r.group = static_cast<int>(*group);
    }
    if (!word("Pid")) return At(line_no, expected);
    ++i;
    auto pid = integer(0, kMaxMessageBytes);
    if (!pid) return At(line_no, expected + " with a process id P >= 0");
    r.pid = *pid;
    if (!word("on") || i + 1 >= c.size()) return At(line_no, expected);
    r.host = std::string(c[i + 1]);
    i += 2;
    if (!word("device")) return At(line_no, expected);
    ++i;
    auto device = integer(0, 65535);
    if (!device) return At(line_no, expected + " with a device number D in [0, 65535]");
    r.device = static_cast<int>(*device);
    if (i >= c.size() || c[i].size() < 2 || c[i].front() != '[' || c[i].back() != ']') {
      return At(line_no, expected + ": no [BUS] id");
    }
    r.bus_id = std::string(c[i].substr(1, c[i].size() - 2));
    const size_t name_at = static_cast<size_t>(c[i].data() + c[i].size() - line.data());
    std::string_view name = line.substr(name_at);
    while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t' || name.back() == '\r')) name.remove_suffix(1);
    r.gpu_name = std::string(name);
    if (log_.ranks.size() >= static_cast<size_t>(kMaxWorld)) {
      return At(line_no, "more than " + std::to_string(kMaxWorld) + " rank lines");
    }
    log_.ranks.push_back(std::move(r));
    return Status();
  }

  // "#  size  count  type  redop  [root]  time algbw busbw #wrong|error  time algbw busbw #wrong|error"
  Status ColumnHeader(const Tokens& c, int line_no) {
    if (table_line_ != 0) {
      return At(line_no, "a second results table (the first starts at line " + std::to_string(table_line_) +
                             "): one nccl-tests run per log");
    }
    size_t i = 4;
    const bool root = c.size() > i && c[i] == "root";
    if (root) ++i;
    std::string check;
    for (int half = 0; half < 2; ++half) {
      const bool ok = c.size() >= i + 4 && c[i] == "time" && c[i + 1] == "algbw" && c[i + 2] == "busbw" &&
                      (c[i + 3] == "#wrong" || c[i + 3] == "error") && (check.empty() || c[i + 3] == check);
      if (!ok) break;
      check = std::string(c[i + 3]);
      i += 4;
    }
    if (c.size() < 12 || c[2] != "type" || c[3] != "redop" || i != c.size()) {
      return At(line_no,
                "expected the column header \"size count type redop [root] time algbw busbw #wrong|error "
                "time algbw busbw #wrong|error\"");
    }
    table_line_ = line_no;
    has_root_ = root;
    error_column_ = check == "error";
    state_ = State::kInTable;
    return Status();
  }

  Status Trailer(const Tokens& c, int line_no) {
    if (state_ != State::kInTable) return At(line_no, "an \"# Avg bus bandwidth\" line outside a results table");
    std::optional<double> v = c.size() == 5 && c[3] == ":" ? ToNumber(c[4], 0, kMaxRateGbPerS) : std::nullopt;
    if (!v) return At(line_no, "expected \"# Avg bus bandwidth : GB/s\" with a number in [0, 1e9]");
    log_.avg_busbw_gb_per_s = *v;
    state_ = State::kAfterTable;
    return Status();
  }

  Status Half(const Tokens& t, size_t at, int line_no, const char* which, NcclTestsHalf& h) {
    const std::string where = std::string(which) + " ";
    if (std::all_of(t.begin() + at, t.begin() + at + 4, [](std::string_view s) { return s == "N/A"; })) {
      return Status();  // not measured (alltoall's in-place in some versions)
    }
    auto time = ToNumber(t[at], kMinTimeUs, kMaxTimeUs);
    if (!time) {
      return At(line_no, "expected the " + where + "time in us (a number in [0.01, 1e12]: less is not a measured time) " +
                             "or N/A, found " + Quote(t[at]));
    }
    auto algbw = ToNumber(t[at + 1], 0, kMaxRateGbPerS);
    if (!algbw) return At(line_no, "expected the " + where + "algbw in GB/s (a number in [0, 1e9]), found " + Quote(t[at + 1]));
    auto busbw = ToNumber(t[at + 2], 0, kMaxRateGbPerS);
    if (!busbw) return At(line_no, "expected the " + where + "busbw in GB/s (a number in [0, 1e9]), found " + Quote(t[at + 2]));
    h.present = true;
    h.time_us = *time;
    h.algbw_gb_per_s = *algbw;
    h.busbw_gb_per_s = *busbw;
    const std::string_view w = t[at + 3];
    if (w == "N/A") return Status();  // not validated (-c 0)
    h.validated = true;
    if (error_column_) {
      auto error = ToNumber(w, 0, std::numeric_limits<double>::max());
      if (!error) return At(line_no, "expected the " + where + "error (a number >= 0) or N/A, found " + Quote(w));
      h.max_error = *error;
      h.wrong = *error != 0 ? 1 : 0;
    } else {
      auto wrong = ToInt(w, 0, kMaxMessageBytes);
      if (!wrong) return At(line_no, "expected the " + where + "#wrong (an integer >= 0) or N/A, found " + Quote(w));
      h.wrong = *wrong;
    }
    return Status();
  }

  Status Row(const Tokens& t, int line_no) {
    const size_t fields = 4 + (has_root_ ? 1 : 0) + 8;
    if (t.size() != fields) {
      return At(line_no, "expected a results row of " + std::to_string(fields) + " fields (as the header at line " +
                             std::to_string(table_line_) + " says), found " + std::to_string(t.size()));
    }
    if (log_.rows.size() >= kMaxRows) return At(line_no, "more than " + std::to_string(kMaxRows) + " rows");
    NcclTestsRow r;
    r.line = line_no;
    auto size = ToInt(t[0], 0, kMaxMessageBytes);
    if (!size) return At(line_no, "expected the size in bytes (an integer in [0, 2^62]), found " + Quote(t[0]));
    auto count = ToInt(t[1], 0, kMaxMessageBytes);
    if (!count) return At(line_no, "expected the count of elements (an integer in [0, 2^62]), found " + Quote(t[1]));
    if (!IsName(t[2])) return At(line_no, "expected a data type (letters, digits, _), found " + Quote(t[2]));
    if (!IsName(t[3])) return At(line_no, "expected a reduction op (letters, digits, _), found " + Quote(t[3]));
    r.size_bytes = *size;
    r.count = *count;
    r.type = std::string(t[2]);
    r.redop = std::string(t[3]);
    size_t at = 4;
    if (has_root_) {
      auto root = ToInt(t[at++], -1, kMaxWorld - 1);
      if (!root) return At(line_no, "expected the root (an integer in [-1, 2^20)), found " + Quote(t[4]));
      r.root = static_cast<int>(*root);
    }
    Status s = Half(t, at, line_no, "out-of-place", r.out_of_place);
    if (s.ok()) s = Half(t, at + 4, line_no, "in-place", r.in_place);
    if (!s.ok()) return s;
    log_.rows.push_back(std::move(r));
    return Status();
  }

  std::string FailureNote() const {
    if (failure_line_ == 0) return "";
    return "; line " + std::to_string(failure_line_) + " reports a failure: " + failure_text_;
  }

  Status Finish() {
    if (header_line_ == 0) {
      return Whole("no \"# nThread N nGpus G ...\" header line: not the output of an nccl-tests program" +
                   FailureNote());
    }
    if (log_.ranks.empty()) {
      return Whole("no \"#  Rank N Group G Pid P on HOST device D\" lines after the header at line " +
                   std::to_string(header_line_));
    }
    if (table_line_ == 0) {
      return Whole("no results table (the \"#  size  count  type  redop ...\" header line): the run did not "
                   "start measuring" + FailureNote());
    }
    if (state_ == State::kInTable) {
      std::string last = log_.rows.empty() ? "no rows"
                                           : "the last row is at line " + std::to_string(log_.rows.back().line);
      return At(table_line_, "the results table that starts here has no \"# Avg bus bandwidth\" line after it (" +
                                 last + "): the run did not finish" + FailureNote());
    }
    if (log_.rows.empty()) return At(table_line_, "the results table has no rows");
    if (Status s = CheckRanks(); !s.ok()) return s;
    return DecideCollective();
  }

  Status CheckRanks() {
    auto& ranks = log_.ranks;
    std::stable_sort(ranks.begin(), ranks.end(),
                     [](const NcclTestsRank& a, const NcclTestsRank& b) { return a.rank < b.rank; });
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (i > 0 && ranks[i].rank == ranks[i - 1].rank) {
        return At(ranks[i].line, "rank " + std::to_string(ranks[i].rank) + " again (first at line " +
                                     std::to_string(ranks[i - 1].line) + ")");
      }
      if (ranks[i].rank != static_cast<int>(i)) {
        return At(ranks[i].line, "no line for rank " + std::to_string(i) + ": expected ranks 0.." +
                                     std::to_string(ranks.size() - 1) + " each once");
      }
    }
    const int64_t per_process = int64_t{log_.threads} * log_.gpus_per_thread;
    const int64_t n = static_cast<int64_t>(ranks.size());
    if (n % per_process != 0) {
      return At(header_line_, std::to_string(n) + " rank lines, not a multiple of nThread x nGpus = " +
                                  std::to_string(per_process));
    }
    std::unordered_map<int, int64_t> group_ranks;
    std::unordered_map<std::string, size_t> host_index;
    for (const auto& r : ranks) {
      ++group_ranks[r.group];
      auto [it, added] = host_index.emplace(r.host, log_.hosts.size());
      if (added) {
        log_.hosts.push_back(r.host);
        log_.ranks_per_host.push_back(0);
      }
      ++log_.ranks_per_host[it->second];
    }
    const int64_t groups = static_cast<int64_t>(group_ranks.size());
    if (n % groups != 0) {
      return At(ranks.front().line, std::to_string(n) + " ranks do not divide into the " + std::to_string(groups) +
                                        " groups the rank lines name");
    }
    for (const auto& [group, count] : group_ranks) {
      if (count != n / groups) {
        return At(ranks.front().line, "group " + std::to_string(group) + " has " + std::to_string(count) +
                                          " ranks, expected " + std::to_string(n / groups) +
                                          " (every group the same size)");
      }
    }
    log_.group_count = static_cast<int>(groups);
    return Status();
  }

  Status DecideCollective() {
    if (!hint_.empty()) {
      Result<std::string> named = ModelledName(hint_);
      if (!named.ok()) return Whole(named.status().message() + " (the name before the file)");
      log_.collective = named.value();
    }
    if (collective_line_ != 0) {
      Result<std::string> logged = ModelledName(collective_binary_);
      if (!logged.ok()) return At(collective_line_, logged.status().message());
      if (!log_.collective.empty() && log_.collective != logged.value()) {
        return At(collective_line_, "the log is " + Quote(collective_binary_) + "'s, but it was named " +
                                        log_.collective);
      }
      log_.collective = logged.value();
    }
    if (log_.collective.empty()) {
      Result<std::string> from_name = CollectiveFromFileName(file_);
      if (!from_name.ok()) return from_name.status();
      log_.collective = from_name.value();
    }
    return Status();
  }

  std::string file_, hint_;
  NcclTestsLog log_;
  State state_ = State::kBeforeTable;
  int header_line_ = 0, table_line_ = 0, collective_line_ = 0, failure_line_ = 0;
  std::string collective_binary_, failure_text_;
  bool has_root_ = false, error_column_ = false;
};

}  // namespace

int64_t NcclTestsLog::wrong_rows() const {
  return std::count_if(rows.begin(), rows.end(),
                       [](const NcclTestsRow& r) { return r.out_of_place.wrong > 0 || r.in_place.wrong > 0; });
}

Result<NcclTestsLog> ParseNcclTestsLog(std::string_view text, const std::string& file,
                                       const std::string& collective_hint) {
  return LogReader(file, collective_hint).Read(text);
}

Result<NcclTestsLog> LoadNcclTestsLog(const std::string& path, const std::string& collective_hint) {
  Result<std::string> text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseNcclTestsLog(text.value(), path, collective_hint);
}

}  // namespace foldplan
