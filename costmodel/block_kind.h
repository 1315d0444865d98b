// The kinds of block a pipeline rank holds: a unit of work that repeats
// (a dense or MoE decoder layer, the embedding, the output layer and loss,
// an MTP module). Every block of one kind costs the same on every rank.
#pragma once

namespace foldplan {

enum class BlockKind { kDenseLayer, kMoeLayer, kEmbedding, kOutputLayer, kMtpLayer };
inline constexpr int kBlockKindCount = 5;
inline constexpr BlockKind kAllBlockKinds[kBlockKindCount] = {
    BlockKind::kDenseLayer, BlockKind::kMoeLayer, BlockKind::kEmbedding, BlockKind::kOutputLayer,
    BlockKind::kMtpLayer};
// "dense_layer", "moe_layer", "embedding", "output_layer", "mtp_layer"
const char* Name(BlockKind kind);

}  // namespace foldplan
