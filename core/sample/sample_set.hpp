#pragma once
// Labelled synthetic images from a trained model: what `privdiff sample` writes and `privdiff eval`
// scores, stored as an IDX image/label pair like the MNIST family (so a real test set is scored by
// exactly the same code).

#include <privdiff/components/model.hpp>
#include <privdiff/components/sampler.hpp>
#include <privdiff/config/config.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>

namespace privdiff::core {

struct SampleOptions {
  std::int64_t count = 1000;
  std::int64_t num_classes = 10;   ///< 0: unconditional (no labels)
  bool balanced = true;            ///< equal counts per class, in class order; false: uniform random labels
  std::int64_t batch_size = 250;   ///< images per sampler call
  std::uint64_t seed = 0;
};

struct SampleSet {
  at::Tensor images;  ///< uint8 [N, C, H, W]
  at::Tensor labels;  ///< int64 [N]; undefined for an unconditional model
};

/// The classes a model is conditioned on, from its recipe section: the `num_classes` key, 0 when
/// it has none (an unconditional model).
std::int64_t model_classes(const sdk::Config& model_config);

/// Samples in batches, decoding to images in [-1, 1] and quantising to bytes; progress (images/s,
/// ETA) goes to `log` about every 2 s.
SampleSet generate_samples(sdk::Model& model, sdk::Sampler& sampler, const SampleOptions& options, std::ostream& log);

/// Writes PREFIX-images-idx3-ubyte.gz and PREFIX-labels-idx1-ubyte.gz (single-channel images: IDX
/// [N, H, W]; otherwise [N, C, H, W]) and PREFIX-grid.png (up to 10 x 10 images; for balanced
/// labels one class per row). Returns the images file.
std::filesystem::path write_sample_set(const std::filesystem::path& prefix, const SampleSet& set, bool balanced,
                                       std::int64_t num_classes);

/// The labels file of an IDX image file, by the MNIST naming convention
/// ("…-images-idx3-ubyte[.gz]" -> "…-labels-idx1-ubyte[.gz]"); empty when the name does not follow it.
std::filesystem::path labels_file_beside(const std::filesystem::path& images_file);

}  // namespace privdiff::core
