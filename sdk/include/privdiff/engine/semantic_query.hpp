#pragma once
/// @file
/// PrivImage's semantic query (Li et al., USENIX Security 2024, §4.1; SunnierLee/DP-ImaGen
/// src/SemanticQuery/query_semantics.py): which public classes look like the private data, released
/// under DP, so that pretraining uses only the public data that resemble them.
///
/// A classifier trained on the public data (its classes: the "semantics") labels every private image
/// with its top_k public classes. The histogram H[c, p] counts, per private class c, the private
/// images of class c with public class p among their top_k. Adding or removing one record changes
/// one row by one in top_k distinct entries: L2 sensitivity sqrt(top_k). The release is H plus
/// N(0, (sigma sqrt(top_k))^2) per entry: one Gaussian mechanism with noise multiplier sigma, on the
/// whole data (q = 1) — semantic_query_event. Per class, the `select` public classes of highest noisy
/// count are kept (post-processing). The classifier sees only public data; the private class c of a
/// record is part of the record (the query's rows are the model's public class list).
///
/// What the run releases is public images of the selected classes, labelled with the private class
/// that selected them: images_per_class of them per private class, so the release's size is public
/// configuration (the paper pretrains on every image of the selected classes; with images_per_class
/// at least the selected classes' size that is the same set, repeated).

#include <privdiff/components/privacy_event.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace privdiff::sdk::engine {

struct SemanticQueryOptions {
  std::int64_t top_k = 2;          ///< public classes counted per private image (the paper's num_words)
  double noise_multiplier = 100.0;  ///< sigma: noise std / sensitivity sqrt(top_k) (the paper's sigma1)
  std::int64_t select = 2;         ///< public classes kept per private class
};

/// The privacy the query spends: one Gaussian with the options' noise multiplier, on all records.
PRIVDIFF_SDK_API PrivacyEvent semantic_query_event(const SemanticQueryOptions& options);

/// The query's L2 sensitivity under adding or removing one record: sqrt(top_k).
PRIVDIFF_SDK_API double semantic_query_sensitivity(std::int64_t top_k);

/// H [classes, public_classes] (double) from the public classifier's `logits` [N, public_classes] of
/// the private images and their `labels` [N] in [0, classes). Each image adds one to the top_k
/// columns of highest logit in its class's row (top_k distinct columns; ties broken in any order).
PRIVDIFF_SDK_API at::Tensor semantic_histogram(const at::Tensor& logits, const at::Tensor& labels,
                                               std::int64_t classes, std::int64_t top_k);

struct SemanticSelection {
  at::Tensor noisy_histogram;  ///< [classes, public_classes]: H plus the Gaussian noise (the release)
  at::Tensor selected;         ///< int64 [classes, select]: per private class, the public classes kept
};

/// The release: H + N(0, (sigma sqrt(top_k))^2) per entry, and per row the `select` largest entries.
PRIVDIFF_SDK_API SemanticSelection release_semantic_selection(const at::Tensor& histogram,
                                                              const SemanticQueryOptions& options,
                                                              GaussianNoise& noise);

/// Which public records to pretrain on: per private class c, `images_per_class` indices into the
/// public data whose label is among selected[c] (drawn without replacement from them, the whole set
/// again when it is exhausted), with their label c. Post-processing of the release: public labels
/// and the selection only. `generator_seed` orders the draw. Returns {indices int64 [classes *
/// images_per_class], labels int64 [same]}; throws std::invalid_argument when a class's selected
/// public classes hold no record.
PRIVDIFF_SDK_API std::pair<at::Tensor, at::Tensor> selected_public_records(const at::Tensor& public_labels,
                                                                           const at::Tensor& selected,
                                                                           std::int64_t images_per_class,
                                                                           std::uint64_t generator_seed);

}  // namespace privdiff::sdk::engine
