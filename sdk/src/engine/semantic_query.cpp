#include <privdiff/engine/semantic_query.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace privdiff::sdk::engine {

namespace {

void check_query_options(const SemanticQueryOptions& o) {
  if (o.top_k < 1) throw std::invalid_argument("semantic query: top_k must be >= 1");
  if (o.select < 1) throw std::invalid_argument("semantic query: select must be >= 1");
  if (!(o.noise_multiplier > 0) || !std::isfinite(o.noise_multiplier)) {
    throw std::invalid_argument("semantic query: the noise multiplier must be > 0");
  }
}

}  // namespace

PrivacyEvent semantic_query_event(const SemanticQueryOptions& o) {
  check_query_options(o);
  return PrivacyEvent::gaussian(o.noise_multiplier);
}

double semantic_query_sensitivity(std::int64_t top_k) {
  if (top_k < 1) throw std::invalid_argument("semantic query: top_k must be >= 1");
  return std::sqrt(static_cast<double>(top_k));
}

at::Tensor semantic_histogram(const at::Tensor& logits, const at::Tensor& labels, std::int64_t classes,
                              std::int64_t top_k) {
  if (logits.dim() != 2 || labels.dim() != 1 || logits.size(0) != labels.size(0)) {
    throw std::invalid_argument("semantic query: logits [N, public classes] and labels [N] expected");
  }
  if (top_k < 1 || top_k > logits.size(1)) {
    throw std::invalid_argument("semantic query: top_k " + std::to_string(top_k) + " must be in [1, " +
                                std::to_string(logits.size(1)) + "] (the public classes)");
  }
  const at::Tensor rows = labels.to(at::kCPU).to(at::kLong);
  if (rows.numel() > 0 && (rows.min().item<std::int64_t>() < 0 || rows.max().item<std::int64_t>() >= classes)) {
    throw std::invalid_argument("semantic query: a label outside [0, " + std::to_string(classes) + ")");
  }
  const std::int64_t columns = logits.size(1);
  const at::Tensor top = std::get<1>(logits.to(at::kCPU).to(at::kDouble).topk(top_k, 1));  // distinct columns
  // Flat index row * columns + column of every (image, rank): index_add counts repeats across images.
  const at::Tensor flat = (rows.unsqueeze(1) * columns + top).reshape({-1});
  return at::zeros({classes * columns}, at::kDouble)
      .index_add_(0, flat, at::ones({flat.numel()}, at::kDouble))
      .reshape({classes, columns});
}

SemanticSelection release_semantic_selection(const at::Tensor& histogram, const SemanticQueryOptions& o,
                                             GaussianNoise& noise) {
  check_query_options(o);
  if (histogram.dim() != 2 || o.select > histogram.size(1)) {
    throw std::invalid_argument("semantic query: select " + std::to_string(o.select) +
                                " must be at most the public classes (" + std::to_string(histogram.size(1)) + ")");
  }
  const at::Tensor h = histogram.to(at::kCPU).to(at::kDouble);
  const double noise_std = o.noise_multiplier * semantic_query_sensitivity(o.top_k);
  const at::Tensor noisy = h + noise.sample(h, noise_std);
  return {noisy, std::get<1>(noisy.topk(o.select, 1))};
}

std::pair<at::Tensor, at::Tensor> selected_public_records(const at::Tensor& public_labels, const at::Tensor& selected,
                                                          std::int64_t images_per_class, std::uint64_t generator_seed) {
  if (images_per_class < 1) throw std::invalid_argument("semantic query: images_per_class must be >= 1");
  const at::Tensor labels = public_labels.to(at::kCPU).to(at::kLong);
  const at::Tensor chosen = selected.to(at::kCPU).to(at::kLong);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(generator_seed);
  std::vector<at::Tensor> indices, classes;
  for (std::int64_t c = 0; c < chosen.size(0); ++c) {
    const at::Tensor pool = at::isin(labels, chosen[c]).nonzero().reshape({-1});
    if (pool.numel() == 0) {
      throw std::invalid_argument("semantic query: the public classes selected for class " + std::to_string(c) +
                                  " hold no public record");
    }
    // Whole permutations of the pool, as many as it takes, cut to images_per_class.
    const std::int64_t rounds = (images_per_class + pool.numel() - 1) / pool.numel();
    std::vector<at::Tensor> draws;
    for (std::int64_t r = 0; r < rounds; ++r) draws.push_back(pool.index({at::randperm(pool.numel(), generator)}));
    indices.push_back(at::cat(draws).slice(0, 0, images_per_class));
    classes.push_back(at::full({images_per_class}, c, at::kLong));
  }
  return {at::cat(indices), at::cat(classes)};
}

}  // namespace privdiff::sdk::engine
