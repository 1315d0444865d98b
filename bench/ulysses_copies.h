// The Ulysses pack and unpack as RunCopy descriptions, for the host and
// GPU pack benchmarks: one rank's [S/C, H, d] bf16 tensor (B = 1).
#pragma once

#include <cstdint>

#include "validate/kernels.h"

namespace foldplan::bench {

struct UlyssesShape {
  int64_t cp, heads, seq, head_dim;
  int64_t Tokens() const { return seq / cp; }                           // L
  int64_t Bytes() const { return Tokens() * heads * head_dim * 2; }     // one tensor
};

// seq -> heads pack (ops_ulysses.cc): [L, H, d] to [C][L][H/C][d].
inline validate::RunCopy UlyssesPack(const UlyssesShape& s) {
  const int64_t l = s.Tokens(), g = s.heads / s.cp, d = s.head_dim, e = 2;
  validate::RunCopy copy;
  copy.count[0] = s.cp;
  copy.count[2] = l;
  copy.src_stride_bytes[0] = g * d * e;
  copy.src_stride_bytes[2] = s.heads * d * e;
  copy.dst_stride_bytes[0] = l * g * d * e;
  copy.dst_stride_bytes[2] = g * d * e;
  copy.run_bytes = g * d * e;
  return copy;
}

// The strided unpack, after the heads -> seq all-to-all: [C][L][H/C][d] to
// [L][H][d], peer p's heads at p H/C (the inverse of the pack). The
// seq -> heads unpack is a plain copy when B = 1, so it is not timed.
inline validate::RunCopy UlyssesUnpack(const UlyssesShape& s) {
  const validate::RunCopy pack = UlyssesPack(s);
  validate::RunCopy copy = pack;
  for (int k = 0; k < 3; ++k) {
    copy.src_stride_bytes[k] = pack.dst_stride_bytes[k];
    copy.dst_stride_bytes[k] = pack.src_stride_bytes[k];
  }
  return copy;
}

}  // namespace foldplan::bench
