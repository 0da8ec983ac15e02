#pragma once
// What a text encoder checks of the token ids it is given (internal to the SDK): int64 [N, T], T within
// its positions, every id within its vocabulary; std::invalid_argument naming `encoder` otherwise.

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

namespace privdiff::sdk::text_encoders {

inline void check_token_ids(const at::Tensor& ids, std::int64_t positions, std::int64_t vocabulary,
                            const std::string& encoder) {
  if (ids.dim() != 2 || ids.scalar_type() != at::kLong) throw std::invalid_argument(encoder + ": token ids must be int64 [N, T]");
  if (ids.size(1) > positions)
    throw std::invalid_argument(encoder + ": " + std::to_string(ids.size(1)) + " tokens, over its " +
                                std::to_string(positions) + " positions");
  if (ids.numel() > 0 && (ids.min().item<std::int64_t>() < 0 || ids.max().item<std::int64_t>() >= vocabulary))
    throw std::invalid_argument(encoder + ": a token id outside its vocabulary of " + std::to_string(vocabulary));
}

}  // namespace privdiff::sdk::text_encoders
