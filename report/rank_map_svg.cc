#include "report/rank_map_svg.h"

#include <algorithm>
#include <set>

#include "report/colors.h"
#include "report/svg.h"

namespace foldplan {

std::optional<GroupKind> ColorKindNamed(std::string_view name) {
  for (GroupKind k : kColorKinds) {
    if (name == Name(k)) return k;
  }
  return std::nullopt;
}

GroupKind DefaultColorKind(const Layout& layout) {
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
  return best;
}

namespace {

constexpr double kCell = 30, kGap = 3, kNodePad = 5, kNodeHead = 14, kNodeGap = 6;
constexpr double kDomainPad = 6, kDomainHead = 16, kDomainGap = 10, kMaxWidth = 1300, kTop = 4;

std::string CoordsText(const RankCoords& c) {
  return "tp " + std::to_string(c.tp) + ", cp " + std::to_string(c.cp) + ", dp " + std::to_string(c.dp) + ", pp " +
         std::to_string(c.pp) + " | ep " + std::to_string(c.ep) + ", etp " + std::to_string(c.etp) + ", edp " +
         std::to_string(c.edp);
}

}  // namespace

RankMapPicture DrawRankMap(const RankMap& map, const ClusterSpec& cluster, GroupKind color_by, int max_gpus) {
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
  const Groups& groups = map.groups(color_by);
  std::vector<int> group_of(static_cast<size_t>(map.world()), 0);
  for (size_t g = 0; g < groups.size(); ++g) {
    for (int r : groups[g]) group_of[static_cast<size_t>(r)] = static_cast<int>(g);
  }
  pic.straddles = map.Straddles();
  std::vector<std::string> straddling(static_cast<size_t>(map.world()));
  for (const Straddle& s : pic.straddles) {
    for (int r : map.groups(s.kind)[static_cast<size_t>(s.group_index)]) {
      std::string& why = straddling[static_cast<size_t>(r)];
      why += (why.empty() ? "" : ", ") + std::string(Name(s.kind)) + " group " + std::to_string(s.group_index);
    }
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
  const std::string kind = Name(color_by);
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
        std::string title = "rank " + std::to_string(r) + " on " + where + "\n" + kind + " group " +
                            std::to_string(g) + "\n" + CoordsText(map.coords(r));
        if (!why.empty()) title += "\nstraddles NVLink domains: " + why;
        const std::string stroke = why.empty() ? "stroke=\"#7d8797\" stroke-width=\"0.75\""
                                               : "stroke=\"#d62728\" stroke-width=\"2.5\" class=\"straddle\"";
        svg.Rect(cx, cy, kCell, kCell, GroupColor(g, static_cast<int>(groups.size())), title,
                 "data-rank=\"" + std::to_string(r) + "\" data-group=\"" + std::to_string(g) + "\" rx=\"3\" " + stroke);
        svg.Text(cx + kCell / 2, cy + kCell / 2 + 3.5, std::to_string(r), "middle", r >= 1000 ? 8.5 : 10.5,
                 "class=\"cell-label\"");
      }
    }
  }
  // The idle hatching, defined once.
  svg.Raw("<defs><pattern id=\"idle\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
          "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#eef0f3\"/>"
          "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#c9ced6\" stroke-width=\"2\"/></pattern></defs>");
  pic.svg = svg.Finish();
  if (pic.nodes_drawn < pic.nodes_total) {
    pic.note = "showing the first " + std::to_string(pic.nodes_drawn) + " of " + std::to_string(pic.nodes_total) +
               " nodes (" + std::to_string(pic.gpus_drawn) + " of " + std::to_string(pic.gpus_total) + " GPUs, " +
               std::to_string(pic.ranks_drawn) + " of " + std::to_string(map.world()) + " ranks)";
  }
  return pic;
}

}  // namespace foldplan
