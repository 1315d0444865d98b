// The Ulysses layout change as data movement: rank r of a CP group of C
// holds [B, S/C, H, d] (tokens [r L, (r+1) L), L = S/C) before, and
// [B, S, H/C, d] (heads [r G, (r+1) G), G = H/C) after. Either way, pack
// copies into C blocks [C][B][L][G][d] (block p for peer p), the all-to-all
// swaps blocks, and unpack copies out; each is one RunCopy over
// (p, b, i) of runs of G x d contiguous elements. Used by the ulysses and
// pack ops and the pack benchmarks.
#pragma once

#include <cstdint>

#include "validate/kernels.h"

namespace foldplan::validate {

enum class UlyssesDirection { kSeqToHeads, kHeadsToSeq };

struct UlyssesShape {
  int64_t batch = 1, seq = 0, heads = 0, head_dim = 0, cp = 1;
  int64_t element_bytes = 2;  // bf16
  int64_t Tokens() const { return seq / cp; }  // L
  int64_t Bytes() const { return batch * Tokens() * heads * head_dim * element_bytes; }
};

struct UlyssesCopies {
  RunCopy pack;    // sharded input -> packed blocks
  RunCopy unpack;  // packed blocks (after the all-to-all) -> sharded output
};

inline UlyssesCopies UlyssesMove(const UlyssesShape& s, UlyssesDirection direction) {
  const int64_t l = s.Tokens(), g = s.heads / s.cp, d = s.head_dim, e = s.element_bytes;
  const int64_t packed[3] = {s.batch * l * g * d * e, l * g * d * e, g * d * e};
  const int64_t seq_sharded[3] = {g * d * e, l * s.heads * d * e, s.heads * d * e};  // [B,L,H,d]
  const int64_t head_sharded[3] = {l * g * d * e, s.seq * g * d * e, g * d * e};     // [B,S,G,d]
  const bool to_heads = direction == UlyssesDirection::kSeqToHeads;
  const int64_t* from = to_heads ? seq_sharded : head_sharded;
  const int64_t* to = to_heads ? head_sharded : seq_sharded;
  UlyssesCopies copies;
  for (int k = 0; k < 3; ++k) {
    copies.pack.count[k] = copies.unpack.count[k] = k == 0 ? s.cp : k == 1 ? s.batch : l;
    copies.pack.src_stride_bytes[k] = from[k];
    copies.pack.dst_stride_bytes[k] = copies.unpack.src_stride_bytes[k] = packed[k];
    copies.unpack.dst_stride_bytes[k] = to[k];
  }
  copies.pack.run_bytes = copies.unpack.run_bytes = g * d * e;
  return copies;
}

}  // namespace foldplan::validate
