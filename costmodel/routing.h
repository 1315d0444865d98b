// What token routing implies for the busiest expert rank, for uniform top-k
// routing over experts spread evenly over the EP ranks: the one home of the
// load factor and the distinct-destination counts that the compute, memory
// and communication models use (the exact count, and the approximation the
// memory model's dispatch buffers still use).
#pragma once

#include "inputs/job.h"

namespace foldplan {

// The busiest EP rank's routed rows over the mean: a capacity factor pads
// (or drops) every expert to CF x its mean share (Megatron
// --moe-pad-expert-input-to-capacity), whatever the routing; dropless, the
// busiest expert's load over the mean (routing_imbalance, >= 1) bounds the
// busiest rank's. With ep 1 every rank holds every expert and receives
// exactly its own T K rows: 1.
double ExpertLoadFactor(const JobSpec& job, int ep);

// Probability that a set holding `held` of the `experts` experts receives a
// token whose top-k experts are k distinct experts drawn uniformly:
// 1 - C(E - held, k) / C(E, k) = 1 - prod_{i<k} (E - held - i) / (E - i).
double HitProbability(int experts, int top_k, double held);

// Expected number of distinct EP ranks a token's top-k experts live on:
// ep x HitProbability(E, k, E/ep), about ep x (1 - (1 - 1/ep)^k); 1 for ep 1.
double ExpectedDistinctRanks(int experts, int top_k, int ep);

// The with-replacement approximation of that count, ep x (1 - (1 - 1/ep)^k):
// it draws the k experts independently (so two may coincide) and needs no
// expert count. It undercounts: 7.58 against 7.68 for DeepSeek-V3 (256
// experts, top 8) on ep 64, 1.875 against 2 for Mixtral (8, top 2) on ep 8.
// The memory model's flex dispatch buffers use it (their formula in
// doc/cost-model-memory.md); moving them to ExpectedDistinctRanks would
// raise that term by under 2 % for DeepSeek-V3: a model change of its own.
double ApproxDistinctRanks(double ep, double top_k);

}  // namespace foldplan
