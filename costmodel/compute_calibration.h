// Compute rates measured by foldbench's `compute` op (doc/validate.md) as
// the `compute` section of a calibration file, and the shipped compute
// profile with them merged in (doc/cost-model-compute.md "Calibrated
// compute tables"). The section is profile-shaped:
//   {"gpu": "NVIDIA H200",
//    "gemm_bf16": [{"M", "K", "N", "s", "tflops"}, ...],
//    "grouped_gemm_bf16": [{"experts", "tokens_per_expert", "K", "N", "s", "tflops"}, ...],
//    "points_from": ["measurements file", ...]}
//  - A case of batch 1 is a gemm_bf16 point (M = m, K = k, N = n); an
//    `expert ...` case of batch (local experts) > 1 a grouped_gemm_bf16
//    point. s is the case's median time, tflops its measured TFLOP/s;
//    a shape measured more than once (files) gets the median of each.
//  - The attention cases are left out: they time plain batched GEMMs (no
//    mask, softmax or fusion), not the causal flash kernel the profile's
//    attention table holds, and as gemm_bf16 points they would file a rate
//    of `batch` problems under one GEMM's (M, K, N), where plain-GEMM
//    lookups of nearby shapes would use it.
//  - Refused, by file and JSON pointer: a case with wrong elements, one
//    without a gemm shape or a time, a batched case that is not an expert
//    group; a file whose GPU name is not in /environment/devices, or whose
//    ranks share a GPU (contended times); files of different GPUs.
//  - No compute op ran: empty lists, "gpu" "" (the caller may leave the
//    section out).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "costmodel/compute_profile.h"
#include "inputs/cluster.h"
#include "inputs/measurements.h"

namespace foldplan {

// Where the section sits in a calibration file (its errors' pointers).
inline constexpr const char* kCalibrationComputePointer = "/compute";

Result<nlohmann::json> ComputePointsFromMeasurements(const std::vector<MeasurementSet>& sets);

// `shipped` scaled to `target` (ComputeProfile::ScaledTo), with the
// section's points, not scaled, replacing the shipped points of the same
// table and shape and added where new (ComputeProfile::WithMeasured). The
// section is read from calibration file `file`: a bad field is an error
// naming the file and its pointer under kCalibrationComputePointer, a
// shape listed twice too. Whether the section's GPU is `target` is the
// caller's to check.
Result<ComputeProfile> CalibratedComputeProfile(const ComputeProfile& shipped,
                                                const nlohmann::json& compute_section,
                                                const std::string& file, const GpuSpec& target);

}  // namespace foldplan
