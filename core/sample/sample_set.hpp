#pragma once
// Labelled synthetic images from a trained model: what `privdiff sample` writes and `privdiff eval`
// scores, stored as an IDX image/label pair like the MNIST family (so a real test set is scored by
// exactly the same code).

#include "sample/sample_stamp.hpp"

#include <privdiff/components/model.hpp>
#include <privdiff/components/sampler.hpp>
#include <privdiff/config/config.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace privdiff::core {

struct SampleOptions {
  std::int64_t count = 1000;
  std::int64_t num_classes = 10;   ///< 0: unconditional (no labels)
  bool balanced = true;            ///< equal counts per class, in class order; false: uniform random labels
  std::int64_t batch_size = 250;   ///< images per sampler call
  std::uint64_t seed = 0;
  /// Prompts (a text-conditioned model): in contiguous blocks in prompt order, sample i getting prompt
  /// floor(i P / count) (every prompt some samples when count >= P); empty: none.
  std::vector<std::string> prompts;
  /// Each sample labelled with its prompt's index (prompt k names class k: [[eval]] labels = "prompts",
  /// whose classifier scores are then text alignment); the model is given that label only when it has
  /// classes (num_classes > 0).
  bool labels_from_prompts = false;
};

struct SampleSet {
  at::Tensor images;  ///< uint8 [N, C, H, W]
  at::Tensor labels;  ///< int64 [N]; undefined for an unconditional model
  std::vector<std::string> prompts;  ///< each sample's prompt; empty when sampled without
};

/// The classes a model is conditioned on, from its recipe section: the `num_classes` key, 0 when
/// it has none (an unconditional model).
std::int64_t model_classes(const sdk::Config& model_config);

/// Why `count` images of `image_shape` ([C, H, W]) cannot be sampled and written as an IDX pair under
/// `directory` (which need not exist yet), with the numbers: more images than an IDX file counts,
/// more memory than this machine has for holding them while they are written (2 bytes per pixel
/// value and 16 per label), or more free disk than there is (uncompressed: samples of a noisy model
/// hardly compress); also how many would fit. Empty when they fit. Checked before anything is
/// allocated (`privdiff sample --count`, [[eval]] samples).
std::string sample_set_too_large(std::int64_t count, const std::vector<std::int64_t>& image_shape,
                                 const std::filesystem::path& directory);

/// Samples in batches, decoding to images in [-1, 1] and quantising to bytes; progress (images/s,
/// ETA) goes to `log` about every 2 s.
SampleSet generate_samples(sdk::Model& model, sdk::Sampler& sampler, const SampleOptions& options, std::ostream& log);

/// Writes PREFIX-images-idx3-ubyte.gz and PREFIX-labels-idx1-ubyte.gz (single-channel images: IDX
/// [N, H, W]; otherwise [N, C, H, W]) and PREFIX-grid.png (up to 10 x 10 images; with `class_rows`
/// — balanced labels, a release — one class per row, as the run's samples.png; otherwise the first
/// images in rows of 10). `stamp` (may be null): the run the set belongs to, recorded in both files'
/// gzip headers (sample/sample_stamp.hpp), so that `privdiff eval` of a copy knows it. With prompts,
/// also PREFIX-prompts.txt: each sample's prompt, one per line. Returns the images file.
std::filesystem::path write_sample_set(const std::filesystem::path& prefix, const SampleSet& set, bool class_rows,
                                       std::int64_t num_classes, const SampleStamp* stamp = nullptr);

/// The labels file of an IDX image file, by the MNIST naming convention
/// ("…-images-idx3-ubyte[.gz]" -> "…-labels-idx1-ubyte[.gz]"); empty when the name does not follow it.
std::filesystem::path labels_file_beside(const std::filesystem::path& images_file);
/// The prompts file write_sample_set writes beside an images file (PREFIX-prompts.txt, one prompt a
/// line), or empty when the name is not ...-images-idx3-ubyte[.gz].
std::filesystem::path prompts_file_beside(const std::filesystem::path& images_file);
/// Each image's prompt from the prompts file beside `images_file`, when there is one (empty when not);
/// std::invalid_argument naming the file when it holds another number of lines than `count`.
std::vector<std::string> prompts_beside(const std::filesystem::path& images_file, std::int64_t count);

}  // namespace privdiff::core
