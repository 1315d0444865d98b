// Megatron's rank numbering: the worked examples of doc/folding.md section 3,
// list for list and in order, and the order-string errors.
#include <doctest/doctest.h>

#include <string>

#include "fixtures.h"
#include "planner/rank_generator.h"
#include "planner/rank_map.h"

namespace foldplan {
namespace {

using testing::MakeLayout;
ClusterSpec DgxNodes(int nodes) { return testing::MakeCluster(nodes); }

RankMap BuildMap(const Layout& l) {
  Result<RankMap> map = BuildRankMap(l, DgxNodes(2));
  REQUIRE_MESSAGE(map.ok(), map.status().message());
  return std::move(map).value();
}

TEST_CASE("rankmap: worked example 1, tp2 cp2 pp2 ep4 etp1, order tp-cp-ep-dp-pp") {
  const RankMap m = BuildMap(MakeLayout(16, 2, 2, 2, 4, 1));
  CHECK(m.layout().dp == 2);
  CHECK(m.layout().edp == 2);
  CHECK(m.groups(GroupKind::kTp) ==
        Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(m.groups(GroupKind::kCp) ==
        Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}});
  CHECK(m.groups(GroupKind::kDp) ==
        Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}});
  CHECK(m.groups(GroupKind::kDpCp) == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}});
  CHECK(m.groups(GroupKind::kTpCp) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}});
  CHECK(m.groups(GroupKind::kTpDp) == Groups{{0, 1, 4, 5}, {2, 3, 6, 7}, {8, 9, 12, 13}, {10, 11, 14, 15}});
  CHECK(m.groups(GroupKind::kTpDpCp) == Groups{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}});
  CHECK(m.groups(GroupKind::kMp) == Groups{{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}});
  CHECK(m.groups(GroupKind::kPp) ==
        Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}});
  CHECK(m.groups(GroupKind::kEmbedding) == m.groups(GroupKind::kPp));
  CHECK(m.groups(GroupKind::kPositionEmbedding) == Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}});
  CHECK(m.groups(GroupKind::kEp) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}});
  CHECK(m.groups(GroupKind::kEtp) ==
        Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}});
  CHECK(m.groups(GroupKind::kTpEp) == m.groups(GroupKind::kEp));
  CHECK(m.groups(GroupKind::kTpEpPp) == Groups{{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14, 15}});
  CHECK(m.groups(GroupKind::kEdp) ==
        Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}});

  // Rank 13 = t1 + 2*c0 + 4*d1 + 8*p1: dense (p1, d1, c0, t1); expert 13 = x1 + 4*e1 + 8*p1.
  const RankCoords& c = m.coords(13);
  CHECK(c.pp == 1);
  CHECK(c.dp == 1);
  CHECK(c.cp == 0);
  CHECK(c.tp == 1);
  CHECK(c.edp == 1);
  CHECK(c.ep == 1);
  CHECK(c.etp == 0);
  CHECK(m.dense_view() == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
}

TEST_CASE("rankmap: worked example 2, same sizes, order tp-cp-ep-pp-dp") {
  const RankMap m = BuildMap(MakeLayout(16, 2, 2, 2, 4, 1, kPpDpOrder));
  CHECK(m.groups(GroupKind::kPp) ==
        Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}});
  CHECK(m.groups(GroupKind::kDp) ==
        Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}});
  CHECK(m.groups(GroupKind::kEp) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}});
  CHECK(m.groups(GroupKind::kTp) ==
        Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(m.groups(GroupKind::kCp) ==
        Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}});
  CHECK(m.groups(GroupKind::kEdp) ==
        Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}});
  // Rank 6 = t0 + 2*c1 + 4*p1 + 8*d0.
  CHECK(m.coords(6).pp == 1);
  CHECK(m.coords(6).cp == 1);
  CHECK(m.coords(6).dp == 0);
}

TEST_CASE("rankmap: worked example 3, tp4 dp4, ep4 etp2 edp2") {
  const RankMap m = BuildMap(MakeLayout(16, 4, 1, 1, 4, 2));
  CHECK(m.groups(GroupKind::kTp) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}});
  CHECK(m.groups(GroupKind::kEtp) ==
        Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(m.groups(GroupKind::kEp) == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}});
  CHECK(m.groups(GroupKind::kEdp) ==
        Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}});
  CHECK(m.groups(GroupKind::kTpEp) == Groups{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}});
  // pp == 1: each pp group is one rank, and so is its embedding group.
  CHECK(m.groups(GroupKind::kPp).size() == 16);
  CHECK(m.groups(GroupKind::kEmbedding)[5] == std::vector<int>{5});
  CHECK(m.groups(GroupKind::kPositionEmbedding)[5] == std::vector<int>{5});
}

TEST_CASE("rank generator: masked groups ignore token order, list masked axes by order position") {
  Result<RankGenerator> gen =
      RankGenerator::Create(/*tp=*/2, /*ep=*/1, /*dp=*/2, /*pp=*/2, /*cp=*/2, kDefaultOrder);
  REQUIRE(gen.ok());
  CHECK(gen->world_size() == 16);
  CHECK(gen->order() == "tp-cp-ep-dp-pp");
  CHECK(*gen->GetRanks("dp-cp") == *gen->GetRanks("cp-dp"));
  CHECK(gen->Stride("pp") == 8);
  CHECK(gen->Stride("ep") == 4);
  CHECK(gen->Coordinate(13, "dp") == 1);
  CHECK_FALSE(gen->GetRanks("tp-zz").ok());
  CHECK_FALSE(gen->GetRanks("tp-tp").ok());
}

TEST_CASE("rank generator: size-1 axes missing from the order are appended in Megatron's order") {
  Result<RankGenerator> gen =
      RankGenerator::Create(/*tp=*/2, /*ep=*/1, /*dp=*/4, /*pp=*/1, /*cp=*/1, "TP-DP");
  REQUIRE_MESSAGE(gen.ok(), gen.status().message());
  CHECK(gen->order() == "tp-dp-pp-ep-cp");
  CHECK(gen->sizes() == std::vector<int>{2, 4, 1, 1, 1});
  CHECK(*gen->GetRanks("dp") == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}});
}

TEST_CASE("rank generator: order-string errors") {
  SUBCASE("unknown token") {
    Result<RankGenerator> gen = RankGenerator::Create(2, 1, 2, 2, 1, "tp-xp-dp-pp");
    REQUIRE_FALSE(gen.ok());
    CHECK(gen.status().message().find("unknown axis 'xp'") != std::string::npos);
  }
  SUBCASE("repeated token") {
    Result<RankGenerator> gen = RankGenerator::Create(2, 1, 2, 2, 1, "tp-dp-tp-pp");
    REQUIRE_FALSE(gen.ok());
    CHECK(gen.status().message().find("'tp' repeated") != std::string::npos);
  }
  SUBCASE("empty token") {
    Result<RankGenerator> gen = RankGenerator::Create(2, 1, 2, 2, 1, "tp--dp-pp");
    REQUIRE_FALSE(gen.ok());
    CHECK(gen.status().message().find("empty axis") != std::string::npos);
  }
  SUBCASE("missing axis of size > 1") {
    Result<RankGenerator> gen = RankGenerator::Create(2, 1, 2, /*pp=*/4, 1, "tp-cp-ep-dp");
    REQUIRE_FALSE(gen.ok());
    CHECK(gen.status().message().find("does not name pp, whose size is 4") != std::string::npos);
  }
  SUBCASE("ep > 1 and cp > 1 in one generator") {
    Result<RankGenerator> gen = RankGenerator::Create(1, /*ep=*/2, 2, 1, /*cp=*/2, kDefaultOrder);
    REQUIRE_FALSE(gen.ok());
    CHECK(gen.status().message().find("allows only one of them") != std::string::npos);
  }
  SUBCASE("size < 1") {
    Result<RankGenerator> gen = RankGenerator::Create(0, 1, 2, 1, 1, kDefaultOrder);
    REQUIRE_FALSE(gen.ok());
    CHECK(gen.status().message().find("tp size must be >= 1") != std::string::npos);
  }
}

TEST_CASE("rankmap: order errors reach BuildRankMap as errors") {
  ClusterSpec cluster = DgxNodes(2);
  SUBCASE("unknown token names the view") {
    Result<RankMap> m = BuildRankMap(MakeLayout(16, 2, 2, 2, 4, 1, "tp-cp-ep-dp-qq"), cluster);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message().find("dense view: order 'tp-cp-ep-dp-qq': unknown axis 'qq'") !=
          std::string::npos);
  }
  SUBCASE("order not ending with pp and edp != dp") {
    // tp1 cp1 pp2 dp8, ep4 etp1 edp2: dense pp stride 1, expert pp stride 4.
    Result<RankMap> m = BuildRankMap(MakeLayout(16, 1, 1, 2, 4, 1, kPpDpOrder), cluster);
    REQUIRE_FALSE(m.ok());
    const std::string& msg = m.status().message();
    CHECK(msg.find("order 'tp-cp-ep-pp-dp' gives different pipeline groups") != std::string::npos);
    CHECK(msg.find("order to end with pp, or pp == 1, or edp == dp") != std::string::npos);
  }
  SUBCASE("the same order is fine with pp == 1") {
    CHECK(BuildRankMap(MakeLayout(16, 1, 1, 1, 4, 1, kPpDpOrder), cluster).ok());
  }
  SUBCASE("degrees that do not multiply out") {
    Layout l = MakeLayout(16, 2, 2, 2, 4, 1);
    l.edp = 4;
    Result<RankMap> m = BuildRankMap(l, cluster);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message().find("pp*etp*ep*edp = 2*1*4*4 = 32 != world 16") != std::string::npos);
  }
  SUBCASE("world larger than the cluster") {
    Result<RankMap> m = BuildRankMap(MakeLayout(32, 2, 2, 2, 4, 1), DgxNodes(1));
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message().find("world 32 ranks > 8 GPUs") != std::string::npos);
  }
  SUBCASE("world smaller than the cluster leaves GPUs idle") {
    Result<RankMap> m = BuildRankMap(MakeLayout(16, 2, 2, 2, 4, 1), DgxNodes(4));
    REQUIRE(m.ok());
    CHECK(m->idle_gpus() == 16);
  }
}

}  // namespace
}  // namespace foldplan
