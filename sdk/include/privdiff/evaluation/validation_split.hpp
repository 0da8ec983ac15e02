#pragma once
/// @file
/// The held-out part of a set that classifier evaluations select their epoch on: a seeded random
/// share of the *synthetic* set, so no private record is touched by the selection.

#include <privdiff/components/evaluator.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>

namespace privdiff::sdk::evaluation {

struct TrainValidation {
  LabelledImages train, validation;
};

/// Splits `set` into `validation_count` images (at least 1) and the rest, by a permutation drawn
/// from `seed`. Throws std::invalid_argument when fewer than one image would be left to train on.
PRIVDIFF_SDK_API TrainValidation split_for_validation(const LabelledImages& set, std::int64_t validation_count,
                                                      std::uint64_t seed);

}  // namespace privdiff::sdk::evaluation
