#include <algorithm>

#include "validate/op.h"

namespace foldplan::validate {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

Result<std::unique_ptr<Op>> MakeOp(const std::string& name, const BenchInput& input,
                                   const OpOptions& options, Backend* backend) {
  if (name == "ulysses") return MakeUlyssesOp(input, options, backend);
  return Status::Error("unknown op \"" + name + "\"; known ops: ulysses");
}

Result<OpResult> RunOp(Op& op, const LoopOptions& options, Backend& backend,
                       const BenchInput& input) {
  OpResult result;
  result.op = op.name();
  result.group_kind = op.group_kind();
  result.skip_reason = op.skip_reason();
  result.notes = op.notes();
  if (input.groups.contains(op.group_kind())) {
    result.group_count = static_cast<int>(input.groups.at(op.group_kind()).size());
  }
  if (!result.skip_reason.empty()) return result;
  result.group_size = op.group_size();

  const std::vector<OpCase> cases = op.cases();
  for (int index = 0; index < static_cast<int>(cases.size()); ++index) {
    CaseResult row;
    row.op_case = cases[index];
    if (Status s = op.Prepare(index); !s.ok()) return s;
    for (int i = 0; i < options.warmup_iters; ++i) {
      if (Status s = op.Run(); !s.ok()) return s;
    }
    // Each iteration starts together (world barrier) so that one slow
    // rank's lateness is not counted as the others' transfer time.
    std::vector<double> times_s;
    for (int i = 0; i < options.timed_iters; ++i) {
      backend.Barrier(backend.World());
      const double start_s = backend.NowSeconds();
      if (Status s = op.Run(); !s.ok()) return s;
      times_s.push_back(backend.NowSeconds() - start_s);
    }
    const std::vector<double> all_s = backend.GatherToRoot(times_s);
    if (backend.world_rank() == 0) {
      row.median_s = Median(all_s);
      row.min_s = *std::min_element(all_s.begin(), all_s.end());
      row.max_s = *std::max_element(all_s.begin(), all_s.end());
      if (row.median_s > 0) {
        row.algbw_gb_per_s = static_cast<double>(row.op_case.send_bytes_per_rank) /
                             row.median_s / 1e9;
        row.busbw_gb_per_s = row.algbw_gb_per_s * row.op_case.bus_factor;
      }
    }

    // Correctness pass on freshly filled buffers, separate from the timing
    // so that checking never overlaps a timed iteration.
    if (Status s = op.Prepare(index); !s.ok()) return s;
    if (Status s = op.Run(); !s.ok()) return s;
    if (backend.world_rank() == options.corrupt_rank) op.Corrupt();
    Result<int64_t> wrong = op.Check();
    if (!wrong.ok()) return wrong.status();
    row.wrong_elements = backend.SumOverWorld(wrong.value());
    op.Release();
    result.cases.push_back(row);
  }
  return result;
}

}  // namespace foldplan::validate
