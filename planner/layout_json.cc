#include "planner/layout_json.h"

namespace foldplan {

nlohmann::ordered_json LayoutToJson(const Layout& l) {
  nlohmann::ordered_json out = {{"tp", l.tp}, {"cp", l.cp}, {"dp", l.dp}, {"pp", l.pp}, {"vpp", l.vpp}};
  // Only a named schedule other than the implied one, as FormatLayout.
  if (const auto schedule = l.non_default_schedule()) out["schedule"] = Name(*schedule);
  out.update(nlohmann::ordered_json{{"ep", l.ep},
                                    {"etp", l.etp},
                                    {"edp", l.edp},
                                    {"mbs", l.mbs},
                                    {"order", l.order},
                                    {"cp_style", Name(l.cp_style)},
                                    {"recompute", Name(l.recompute)},
                                    {"placement", Name(l.placement)},
                                    {"dispatcher", Name(l.dispatcher)},
                                    {"a2a_overlap", l.a2a_overlap},
                                    {"precision", Name(l.precision)},
                                    {"fsdp", l.fsdp},
                                    {"tp_overlap", l.tp_overlap},
                                    {"cuda_graphs", Name(l.cuda_graphs)},
                                    {"world", l.world},
                                    {"stage_layers", l.stage_layers},
                                    {"text", FormatLayout(l)}});
  return out;
}

}  // namespace foldplan
