// Megatron's --pipeline-model-parallel-layout grammar (planner/pipeline_layout.h):
// expansion, structure rules, errors with their column, canonical text.
#include <doctest/doctest.h>

#include "planner/pipeline_layout.h"

using namespace foldplan;

namespace {

std::string ErrorOf(const char* text) {
  auto p = ParsePipelineLayout(text);
  REQUIRE_FALSE(p.ok());
  return p.status().message();
}

}  // namespace

TEST_CASE("DeepSeek-V3's Et|(tt|)*30L is 32 stages holding its 61 layers") {
  // "Et|" + 30 x "tt|" + "L": stage 0 = E and one layer, stages 1-30 two
  // layers each, stage 31 only the loss: 1 + 60 = 61 decoder layers.
  auto p = ParsePipelineLayout("Et|(tt|)*30L");
  REQUIRE(p.ok());
  CHECK(p->stages() == 32);
  CHECK(p->decoder_layers() == 61);
  CHECK(p->decoder.front() == 1);
  CHECK(p->decoder[15] == 2);
  CHECK(p->decoder.back() == 0);
  CHECK(p->mtp_layers() == 0);
}

TEST_CASE("repeats, groups, spaces and MTP layers") {
  // t*3 = ttt; (t*2|)*2 = tt|tt|; m before L on the last stage.
  auto p = ParsePipelineLayout(" E t*3 | (t*2|)*2 t m L ");
  REQUIRE(p.ok());
  CHECK(p->decoder == std::vector<int>{3, 2, 2, 1});
  CHECK(p->mtp == std::vector<int>{0, 0, 0, 1});
  // Nested groups multiply: ((t|)*2)*3 is six one-layer stages.
  auto nested = ParsePipelineLayout("E|((t|)*2)*3L");
  REQUIRE(nested.ok());
  CHECK(nested->stages() == 8);
  CHECK(nested->decoder_layers() == 6);
}

TEST_CASE("malformed layouts are refused with the column of the error") {
  CHECK(ErrorOf("Et|(tt|*30L") == "column 4: '(' without ')'");
  CHECK(ErrorOf("Et|tt)L") == "column 6: ')' without '('");
  CHECK(ErrorOf("Et|x|L") == "column 4: unexpected 'x'; expected E, t, m, L, '|', '(' or ')'");
  CHECK(ErrorOf("Et*|L") == "column 4: '*' needs a repeat count");
  CHECK(ErrorOf("Et*0|L") == "column 4: repeat count 0; expected at least 1");
  CHECK(ErrorOf("E()L") == "column 2: empty parentheses");
  CHECK(ErrorOf("") == "pp_layout is empty");
  // 10^7 layers would be gigabytes once expanded: refused, not allocated.
  CHECK(ErrorOf("Et*9999999L").find("too large") != std::string::npos);
}

TEST_CASE("misplaced embedding, loss and MTP layers name the stage") {
  CHECK(ErrorOf("t|EtL") == "E must open the first stage (found on stage 1)");
  CHECK(ErrorOf("Et|Lt") == "L must close the last stage (found on stage 1)");
  CHECK(ErrorOf("EtL|t") == "L must close the last stage (found on stage 0)");
  CHECK(ErrorOf("Et|t") == "no L; the last stage must close with the loss");
  CHECK(ErrorOf("t|tL") == "no E; the first stage must open with the embedding");
  CHECK(ErrorOf("EEt|tL") == "E appears twice; the embedding is on the first stage only");
  CHECK(ErrorOf("Etm|tL") == "t after m on stage 1; MTP layers follow every decoder layer");
}

TEST_CASE("the canonical text groups equal middle stages and reads back") {
  CHECK(FormatPipelineLayout({1, 2, 2, 2, 0}, {}) == "Et|(tt|)*3L");
  CHECK(FormatPipelineLayout({3, 4, 4, 2}, {0, 0, 0, 1}) == "Et*3|(t*4|)*2ttmL");
  CHECK(FormatPipelineLayout({5}, {}) == "Et*5L");
  for (const char* text : {"Et|(tt|)*30L", "Et*3|t*4|t*4|ttmL", "E|t|tL"}) {
    auto p = ParsePipelineLayout(text);
    REQUIRE(p.ok());
    auto again = ParsePipelineLayout(FormatPipelineLayout(p->decoder, p->mtp));
    REQUIRE(again.ok());
    CHECK(again->decoder == p->decoder);
    CHECK(again->mtp == p->mtp);
  }
}
