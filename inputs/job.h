// A training job as read from a `foldplan.job/v1` file (doc/formats.md):
// what is trained and which options the planner may choose among.
#pragma once

#include <string>
#include <vector>

namespace foldplan {

enum class Precision { kBF16, kFP8 };
enum class Recompute { kNone, kSelective, kFull };
enum class CpStyle { kUlysses, kRing };
enum class Dispatcher { kAllToAll, kAllGather, kFlex };

const char* Name(Precision p);   // "bf16", "fp8"
const char* Name(Recompute r);   // "none", "selective", "full"
const char* Name(CpStyle s);     // "ulysses", "ring"
const char* Name(Dispatcher d);  // "alltoall", "allgather", "flex"

struct JobSpec {
  std::string name;
  std::string source;
  std::string description;
  int seq_len = 4096;                       // tokens per sequence
  int global_batch = 1024;                  // sequences per optimizer step
  std::vector<int> micro_batch_sizes = {1, 2};  // sequences per micro-batch, candidates
  Precision precision = Precision::kBF16;
  std::vector<Recompute> recompute = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  std::vector<CpStyle> cp_styles = {CpStyle::kUlysses};
  std::vector<int> vpp = {1, 2, 4};         // virtual pipeline sizes to consider
  // Megatron order strings to consider (fastest axis first).
  std::vector<std::string> orders = {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"};
  Dispatcher dispatcher = Dispatcher::kAllToAll;
  double capacity_factor = 0;               // 0: dropless
  double routing_imbalance = 1.0;           // busiest expert's load / mean load, >= 1
  bool distributed_optimizer = true;        // optimizer states sharded over the grad group
  // Ulysses with CP > kv_heads/TP replicates KV heads (extra traffic) instead of refusing.
  bool ulysses_kv_replication = false;
  int world_size = 0;                       // ranks used; 0: every GPU of the cluster
};

}  // namespace foldplan
