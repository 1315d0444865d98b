// Everything a cost evaluation reads, gathered once per (cluster, model,
// job) and shared by the compute, communication, memory and step-time
// models. Non-owning; every pointer must outlive the evaluation (pointers,
// not references, so that a temporary cannot bind to one unnoticed; a
// MemoryModel built from a context copies what it reads).
#pragma once

#include "inputs/cluster.h"
#include "inputs/job.h"
#include "inputs/model.h"

namespace foldplan {

class Topology;
class ComputeProfile;
struct CommParams;
struct RankParamCounter;

struct CostContext {
  const ClusterSpec* cluster = nullptr;
  const ModelSpec* model = nullptr;
  const JobSpec* job = nullptr;
  const Topology* topology = nullptr;       // built from *cluster
  const ComputeProfile* profile = nullptr;  // GEMM / attention rate tables
  const CommParams* comm = nullptr;         // collective model parameters (calibration)
  const RankParamCounter* rank_params = nullptr;  // of *model (the comm plan builds one when null)
};

}  // namespace foldplan
