#include "report/rank_map_svg.h"

#include <algorithm>
#include <set>

#include "report/colors.h"
#include "report/svg.h"

namespace foldplan {

std::optional<MapColoring> ColoringNamed(std::string_view name) {
  if (name == "stage") return MapColoring{true, GroupKind::kPp};
  for (GroupKind k : {GroupKind::kTp, GroupKind::kCp, GroupKind::kDp, GroupKind::kEp, GroupKind::kEdp, GroupKind::kPp}) {
    if (name == Name(k)) return MapColoring{false, k};
  }
  return std::nullopt;
}

std::string Name(const MapColoring& coloring) { return coloring.stage ? "stage" : std::string(Name(coloring.kind)); }

MapColoring DefaultColoring(const Layout& layout) {
  GroupKind best = GroupKind::kDp;
  int size = 1;
  const std::pair<GroupKind, int> heavy[3] = {{GroupKind::kEp, layout.ep}, {GroupKind::kTp, layout.tp},
                                              {GroupKind::kCp, layout.cp}};
  for (const auto& kind_degree : heavy) {
    if (kind_degree.second > size) {
      best = kind_degree.first;
      size = kind_degree.second;
    }
  }
  return MapColoring{false, best};
}

namespace {

constexpr double kCell = 30, kGap = 3, kNodePad = 5, kNodeHead = 14, kNodeGap = 6;
constexpr double kDomainPad = 6, kDomainHead = 16, kDomainGap = 10, kMaxWidth = 1300, kTop = 4;

std::string CoordsText(const RankCoords& c) {
  return "tp " + std::to_string(c.tp) + ", cp " + std::to_string(c.cp) + ", dp " + std::to_string(c.dp) + ", pp " +
         std::to_string(c.pp) + " | ep " + std::to_string(c.ep) + ", etp " + std::to_string(c.etp) + ", edp " +
         std::to_string(c.edp);
}

// The idle hatching, defined once per picture.
constexpr const char* kIdlePattern =
    "<defs><pattern id=\"idle\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
    "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#eef0f3\"/>"
    "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#c9ced6\" stroke-width=\"2\"/></pattern></defs>";

// What a compact map draws: every GPU's rank (-1: idle), each rank's group
// and why it straddles ("" when it does not).
struct CompactInput {
  const std::vector<int>& rank_of_gpu;
  const std::vector<int>& group_of;
  const std::vector<std::string>& straddling;
  const std::string& kind;  // "tp group", "stage", ...
  int gpn, npd, nodes;
};

constexpr double kNodeCell = 24, kNodeCellGap = 5, kBlockPad = 6, kBlockHead = 16, kBlockGap = 10;
constexpr int kNodesPerRow = 32;  // a row of nodes when a domain is one node

// One cell per node, a stripe per group on it (width by its GPUs), idle
// GPUs hatched; heavy edges between neighbouring nodes whose groups differ.
// Nodes are shown in blocks: a domain each, or rows of kNodesPerRow nodes
// when a domain is a single node.
std::string CompactMapSvg(const CompactInput& in, RankMapPicture* pic) {
  const int block_nodes = in.npd > 1 ? in.npd : std::min(kNodesPerRow, in.nodes);
  const int blocks = (in.nodes + block_nodes - 1) / block_nodes;
  const int cols = std::clamp(static_cast<int>((kMaxWidth - 2 * kBlockPad) / (kNodeCell + kNodeCellGap)), 1,
                              std::min(block_nodes, in.nodes));
  const int rows = (std::min(block_nodes, in.nodes) + cols - 1) / cols;
  const double block_w = 2 * kBlockPad + cols * (kNodeCell + kNodeCellGap) - kNodeCellGap;
  const double block_h = kBlockHead + kBlockPad + rows * (kNodeCell + kNodeCellGap) - kNodeCellGap;
  const int block_cols = std::clamp(static_cast<int>((kMaxWidth + kBlockGap) / (block_w + kBlockGap)), 1, blocks);
  const int block_rows = (blocks + block_cols - 1) / block_cols;
  // "compact": the page scales it down to a narrow window (one cell per
  // node stays legible there; a full map's cells would not).
  Svg svg(block_cols * (block_w + kBlockGap) - kBlockGap + 2, kTop + block_rows * (block_h + kBlockGap),
          "rankmap compact");

  // Each node's groups (in the order of its GPUs) with their GPU counts; -1 idle.
  std::vector<std::vector<std::pair<int, int>>> parts(static_cast<size_t>(in.nodes));
  std::vector<std::vector<int>> signature(static_cast<size_t>(in.nodes));
  for (int node = 0; node < in.nodes; ++node) {
    auto& p = parts[static_cast<size_t>(node)];
    for (int l = 0; l < in.gpn; ++l) {
      const int r = in.rank_of_gpu[static_cast<size_t>(node * in.gpn + l)];
      const int g = r < 0 ? -1 : in.group_of[static_cast<size_t>(r)];
      auto it = std::find_if(p.begin(), p.end(), [g](const auto& e) { return e.first == g; });
      if (it == p.end()) {
        p.push_back({g, 1});
      } else {
        ++it->second;
      }
    }
    auto& sig = signature[static_cast<size_t>(node)];
    for (const auto& e : p) sig.push_back(e.first);
    std::sort(sig.begin(), sig.end());
  }
  auto cell_x = [&](int node) {
    const int b = node / block_nodes, k = node % block_nodes;
    return 1 + (b % block_cols) * (block_w + kBlockGap) + kBlockPad + (k % cols) * (kNodeCell + kNodeCellGap);
  };
  auto cell_y = [&](int node) {
    const int b = node / block_nodes, k = node % block_nodes;
    return kTop + (b / block_cols) * (block_h + kBlockGap) + kBlockHead + (k / cols) * (kNodeCell + kNodeCellGap);
  };
  for (int b = 0; b < blocks; ++b) {
    const double bx = 1 + (b % block_cols) * (block_w + kBlockGap);
    const double by = kTop + (b / block_cols) * (block_h + kBlockGap);
    const int first = b * block_nodes, last = std::min(in.nodes, first + block_nodes) - 1;
    const std::string label = in.npd > 1 ? "NVLink domain " + std::to_string(b)
                                         : "nodes " + std::to_string(first) + "-" + std::to_string(last);
    svg.Rect(bx, by, block_w, block_h, "#f4f6f9", label,
             "class=\"domain\" stroke=\"#5a6b85\" stroke-width=\"1.5\" rx=\"6\"");
    svg.Text(bx + kBlockPad, by + 12, label, "start", 11, "class=\"box-label\"");
  }
  for (int node = 0; node < in.nodes; ++node) {
    const double x = cell_x(node), y = cell_y(node);
    const auto& p = parts[static_cast<size_t>(node)];
    std::vector<int> ranks;
    std::string why;
    for (int l = 0; l < in.gpn; ++l) {
      const int r = in.rank_of_gpu[static_cast<size_t>(node * in.gpn + l)];
      if (r < 0) continue;
      ranks.push_back(r);
      if (why.empty()) why = in.straddling[static_cast<size_t>(r)];
    }
    pic->ranks_drawn += static_cast<int>(ranks.size());
    std::string title = "node " + std::to_string(node) + " (GPUs " + std::to_string(node * in.gpn) + "-" +
                        std::to_string(node * in.gpn + in.gpn - 1) + "): ";
    if (ranks.empty()) {
      title += "idle";
    } else {
      title += std::to_string(ranks.size()) + (ranks.size() == 1 ? " rank: " : " ranks: ");
      for (size_t i = 0; i < ranks.size() && i < 8; ++i) title += (i ? ", " : "") + std::to_string(ranks[i]);
      if (ranks.size() > 8) title += ", ...";
      title += "\n" + in.kind + (p.size() > 1 ? "s " : " ");
      bool first = true;
      for (const auto& e : p) {
        if (e.first < 0) continue;
        title += (first ? "" : ", ") + std::to_string(e.first) + " (" + std::to_string(e.second) + " GPUs)";
        first = false;
      }
    }
    if (!why.empty()) title += "\nstraddles NVLink domains: " + why;
    // The stripes, then the node's frame with its hover text on top.
    if (p.size() <= 8) {
      double sx = x;
      for (const auto& [g, count] : p) {
        const double w = kNodeCell * count / in.gpn;
        svg.Rect(sx, y, w, kNodeCell, g < 0 ? "url(#idle)" : GroupColor(g, pic->groups), "",
                 g < 0 ? "" : "data-group=\"" + std::to_string(g) + "\"");
        sx += w;
      }
    } else {
      svg.Rect(x, y, kNodeCell, kNodeCell, "#c7c7c7");
    }
    const std::string stroke = why.empty() ? "stroke=\"#7d8797\" stroke-width=\"0.75\""
                                           : "stroke=\"#d62728\" stroke-width=\"2.5\" class=\"straddle\"";
    svg.Rect(x, y, kNodeCell, kNodeCell, "none", title,
             "data-node=\"" + std::to_string(node) + "\" data-ranks=\"" + std::to_string(ranks.size()) + "\" " + stroke);
    if (!ranks.empty()) {
      svg.Text(x + kNodeCell / 2, y + kNodeCell / 2 + 3, std::to_string(*std::min_element(ranks.begin(), ranks.end())),
               "middle", ranks.front() >= 1000 ? 7.5 : 8.5, "class=\"cell-label\"");
    }
  }
  // Group boundaries: a heavy edge between neighbours in a block whose groups differ.
  std::string edges;
  auto edge = [&edges](double x1, double y1, double x2, double y2) {
    edges += "<line x1=\"" + Num(x1) + "\" y1=\"" + Num(y1) + "\" x2=\"" + Num(x2) + "\" y2=\"" + Num(y2) + "\"/>";
  };
  const double half = kNodeCellGap / 2;
  for (int node = 0; node < in.nodes; ++node) {
    const int k = node % block_nodes;
    const double x = cell_x(node), y = cell_y(node);
    const int right = node + 1, below = node + cols;
    if (k % cols != cols - 1 && k + 1 < block_nodes && right < in.nodes &&
        signature[static_cast<size_t>(right)] != signature[static_cast<size_t>(node)]) {
      edge(x + kNodeCell + half, y - half, x + kNodeCell + half, y + kNodeCell + half);
    }
    if (k + cols < block_nodes && below < in.nodes &&
        signature[static_cast<size_t>(below)] != signature[static_cast<size_t>(node)]) {
      edge(x - half, y + kNodeCell + half, x + kNodeCell + half, y + kNodeCell + half);
    }
  }
  svg.Raw("<g class=\"group-edges\" stroke=\"#1f2733\" stroke-width=\"2.5\" stroke-linecap=\"round\">" + edges +
          "</g>");
  svg.Raw(kIdlePattern);
  return svg.Finish();
}

std::string CutNote(const RankMapPicture& pic, int world) {
  if (pic.nodes_drawn >= pic.nodes_total) return "";
  return "showing the first " + std::to_string(pic.nodes_drawn) + " of " + std::to_string(pic.nodes_total) +
         " nodes (" + std::to_string(pic.gpus_drawn) + " of " + std::to_string(pic.gpus_total) + " GPUs, " +
         std::to_string(pic.ranks_drawn) + " of " + std::to_string(world) + " ranks)";
}

}  // namespace

RankMapPicture DrawRankMap(const RankMap& map, const ClusterSpec& cluster, const MapColoring& color_by, int max_gpus) {
  RankMapPicture pic;
  const int gpn = std::max(1, cluster.gpus_per_node);
  const int npd = std::max(1, cluster.nodes_per_domain());
  pic.nodes_total = cluster.nodes;
  pic.gpus_total = cluster.total_gpus();
  // Whole domains while they fit under max_gpus; at least one node.
  int nodes = std::min(cluster.nodes, std::max(1, max_gpus / gpn));
  if (nodes >= npd) nodes -= nodes % npd;
  pic.nodes_drawn = nodes;
  pic.gpus_drawn = nodes * gpn;
  const int domains = (nodes + npd - 1) / npd;

  std::vector<int> rank_of_gpu(static_cast<size_t>(pic.gpus_drawn), -1);
  for (int r = 0; r < map.world(); ++r) {
    const int gpu = map.place(r).gpu;
    if (gpu >= 0 && gpu < pic.gpus_drawn) rank_of_gpu[static_cast<size_t>(gpu)] = r;
  }
  // Each rank's colour index: its group of the kind, or its stage.
  std::vector<int> group_of(static_cast<size_t>(map.world()), 0);
  if (color_by.stage) {
    for (int r = 0; r < map.world(); ++r) group_of[static_cast<size_t>(r)] = map.coords(r).pp;
    pic.groups = map.layout().pp;
  } else {
    const Groups& groups = map.groups(color_by.kind);
    for (size_t g = 0; g < groups.size(); ++g) {
      for (int r : groups[g]) group_of[static_cast<size_t>(r)] = static_cast<int>(g);
    }
    pic.groups = static_cast<int>(groups.size());
  }
  const std::string kind = color_by.stage ? "stage" : std::string(Name(color_by.kind)) + " group";
  pic.straddles = map.Straddles();
  std::vector<std::string> straddling(static_cast<size_t>(map.world()));
  for (const Straddle& s : pic.straddles) {
    for (int r : map.groups(s.kind)[static_cast<size_t>(s.group_index)]) {
      std::string& why = straddling[static_cast<size_t>(r)];
      why += (why.empty() ? "" : ", ") + std::string(Name(s.kind)) + " group " + std::to_string(s.group_index);
    }
  }
  if (pic.gpus_drawn > kCompactMapAboveGpus) {
    pic.compact = true;
    pic.svg = CompactMapSvg({rank_of_gpu, group_of, straddling, kind, gpn, npd, nodes}, &pic);
    pic.note = CutNote(pic, map.world());
    return pic;
  }

  // Geometry: cells in rows of at most 8 per node, nodes in a grid inside
  // their domain, domains flowed left to right.
  const int cell_cols = std::min(gpn, 8);
  const int cell_rows = (gpn + cell_cols - 1) / cell_cols;
  const double node_w = 2 * kNodePad + cell_cols * (kCell + kGap) - kGap;
  const double node_h = kNodeHead + kNodePad + cell_rows * (kCell + kGap) - kGap;
  const int shown_npd = std::min(npd, nodes);
  const int node_cols = std::clamp(static_cast<int>((kMaxWidth - 2 * kDomainPad + kNodeGap) / (node_w + kNodeGap)), 1,
                                   shown_npd);
  const int node_rows = (shown_npd + node_cols - 1) / node_cols;
  const double domain_w = 2 * kDomainPad + node_cols * (node_w + kNodeGap) - kNodeGap;
  const double domain_h = kDomainHead + kDomainPad + node_rows * (node_h + kNodeGap) - kNodeGap;
  const int domain_cols = std::clamp(static_cast<int>((kMaxWidth + kDomainGap) / (domain_w + kDomainGap)), 1, domains);
  const int domain_rows = (domains + domain_cols - 1) / domain_cols;
  const double width = domain_cols * (domain_w + kDomainGap) - kDomainGap + 2;
  const double height = kTop + domain_rows * (domain_h + kDomainGap);

  Svg svg(width, height, "rankmap");
  for (int d = 0; d < domains; ++d) {
    const double dx = 1 + (d % domain_cols) * (domain_w + kDomainGap);
    const double dy = kTop + (d / domain_cols) * (domain_h + kDomainGap);
    svg.Rect(dx, dy, domain_w, domain_h, "#f4f6f9", "NVLink domain " + std::to_string(d),
             "class=\"domain\" stroke=\"#5a6b85\" stroke-width=\"1.5\" rx=\"6\"");
    svg.Text(dx + kDomainPad, dy + 12, "NVLink domain " + std::to_string(d), "start", 11, "class=\"box-label\"");
    for (int k = 0; k < npd; ++k) {
      const int node = d * npd + k;
      if (node >= nodes) break;
      const double nx = dx + kDomainPad + (k % node_cols) * (node_w + kNodeGap);
      const double ny = dy + kDomainHead + (k / node_cols) * (node_h + kNodeGap);
      svg.Rect(nx, ny, node_w, node_h, "#ffffff", "node " + std::to_string(node),
               "class=\"node\" stroke=\"#9aa7ba\" rx=\"4\"");
      svg.Text(nx + kNodePad, ny + 11, "node " + std::to_string(node), "start", 9.5, "class=\"box-label\"");
      for (int l = 0; l < gpn; ++l) {
        const int gpu = node * gpn + l;
        const double cx = nx + kNodePad + (l % cell_cols) * (kCell + kGap);
        const double cy = ny + kNodeHead + (l / cell_cols) * (kCell + kGap);
        const int r = rank_of_gpu[static_cast<size_t>(gpu)];
        const std::string where = "node " + std::to_string(node) + " GPU " + std::to_string(l) + " (GPU " +
                                  std::to_string(gpu) + ")";
        if (r < 0) {
          svg.Rect(cx, cy, kCell, kCell, "url(#idle)", "idle: " + where,
                   "data-idle=\"" + std::to_string(gpu) + "\" stroke=\"#c4c9d1\" rx=\"3\"");
          continue;
        }
        ++pic.ranks_drawn;
        const int g = group_of[static_cast<size_t>(r)];
        const std::string& why = straddling[static_cast<size_t>(r)];
        std::string title = "rank " + std::to_string(r) + " on " + where + "\n" + kind + " " + std::to_string(g) +
                            "\n" + CoordsText(map.coords(r));
        if (!why.empty()) title += "\nstraddles NVLink domains: " + why;
        const std::string stroke = why.empty() ? "stroke=\"#7d8797\" stroke-width=\"0.75\""
                                               : "stroke=\"#d62728\" stroke-width=\"2.5\" class=\"straddle\"";
        svg.Rect(cx, cy, kCell, kCell, GroupColor(g, pic.groups), title,
                 "data-rank=\"" + std::to_string(r) + "\" data-group=\"" + std::to_string(g) + "\" rx=\"3\" " + stroke);
        svg.Text(cx + kCell / 2, cy + kCell / 2 + 3.5, std::to_string(r), "middle", r >= 1000 ? 8.5 : 10.5,
                 "class=\"cell-label\"");
      }
    }
  }
  svg.Raw(kIdlePattern);
  pic.svg = svg.Finish();
  pic.note = CutNote(pic, map.world());
  return pic;
}

}  // namespace foldplan
