// The main of every test program. A program holds a folder's tests
// (CMakeLists.txt) and CTest runs each file's cases as one test
// (--source-file=*/tests/<name>.cc): a run whose filters match no test case
// fails, so that a test whose file was renamed or emptied cannot pass by
// running nothing.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

// The number of test cases that passed the filters, once the run ends;
// -1 when no run took place (--help, --list-test-cases, --count, ...).
int g_cases_run = -1;

struct CaseCounter : doctest::IReporter {
  explicit CaseCounter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    g_cases_run = static_cast<int>(stats.numTestCasesPassingFilters);
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

DOCTEST_REGISTER_LISTENER("case_counter", 1, CaseCounter);

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (result == 0 && g_cases_run == 0) {
    std::fprintf(stderr, "%s: no test case matches the filters\n", argc > 0 ? argv[0] : "test");
    return 1;
  }
  return result;
}
