#pragma once
/// @file
/// Captions made from what a dataset already knows about each record (its class, its attributes,
/// how it was drawn): deterministic for a seed and the same on every machine, so a captioned dataset
/// is one dataset (one identity) wherever it is read. Part of libprivdiff_text (no LibTorch).

#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace privdiff::sdk {

/// A number in [0, n) for draw `k` of record `record` under `seed` (SplitMix64 of the three): which
/// template, which order of attributes. n > 0.
PRIVDIFF_SDK_API std::uint64_t caption_choice(std::uint64_t seed, std::int64_t record, std::uint64_t k, std::uint64_t n);

/// Record i's caption: a template drawn by caption_choice(seed, i, 0, T) with its "{}" replaced by the
/// name of class labels[i]. std::invalid_argument for a template without exactly one "{}" (naming it
/// by its index from 0), a label with no name, or no template at all.
PRIVDIFF_SDK_API std::vector<std::string> template_captions(const std::vector<std::int64_t>& labels,
                                                             const std::vector<std::string>& class_names,
                                                             const std::vector<std::string>& templates,
                                                             std::uint64_t seed);

/// "a photo of the {}.", "a picture of the {}.", … : the templates a dataset uses when the recipe names
/// none (docs/text.md lists them).
PRIVDIFF_SDK_API const std::vector<std::string>& default_caption_templates();

}  // namespace privdiff::sdk
