#include <privdiff/engine/central_images.hpp>

#include <privdiff/data/image_filters.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace privdiff::sdk::engine {

CentralStatistic central_statistic_from_string(const std::string& name) {
  if (name == "mean") return CentralStatistic::mean;
  if (name == "mode") return CentralStatistic::mode;
  throw std::invalid_argument("central image statistic must be \"mean\" or \"mode\", got \"" + name + "\"");
}

ClassSizes class_sizes_from_string(const std::string& name) {
  if (name == "uniform") return ClassSizes::uniform;
  if (name == "private") return ClassSizes::private_counts;
  throw std::invalid_argument("central image class sizes must be \"uniform\" or \"private\", got \"" + name + "\"");
}

std::string private_class_sizes_caveat() {
  return "central_images class_sizes = \"private\": the mean images are divided by q_c times each class's count in "
         "the private data, released without noise (the class histogram is outside the guarantee)";
}

namespace {

void check_options(const CentralImageOptions& o) {
  if (o.queries < 1) throw std::invalid_argument("central images: queries must be >= 1");
  if (!(o.sampling_rate > 0 && o.sampling_rate <= 1)) throw std::invalid_argument("central images: q_c must be in (0, 1]");
  if (!(o.noise_multiplier > 0)) throw std::invalid_argument("central images: the noise multiplier must be > 0");
  if (o.resolution < 1) throw std::invalid_argument("central images: resolution must be >= 1");
  if (o.bins < 2) throw std::invalid_argument("central images: bins must be >= 2");
}

// The mean image: noisy sums over the expected class counts q_c N_class (never the realised ones).
at::Tensor mean_from_sums(const at::Tensor& noisy_sums, const std::vector<double>& class_sizes, double sampling_rate) {
  const at::Tensor expected = at::tensor(class_sizes, at::kDouble) * sampling_rate;
  return noisy_sums / expected.view({noisy_sums.size(0), 1, 1, 1});
}

// The mode image: each pixel's noisy argmax bin, as the bin's midpoint in [0, 1], shaped like `like`.
at::Tensor mode_from_histograms(const at::Tensor& noisy, const at::Tensor& like) {
  const at::Tensor winner = noisy.argmax(2).to(at::kDouble);
  return ((winner + 0.5) / static_cast<double>(noisy.size(2))).view({noisy.size(0), like.size(1), like.size(2), like.size(3)});
}

}  // namespace

PrivacyEvent central_query_event(const CentralImageOptions& o) {
  check_options(o);
  return PrivacyEvent::poisson_sampled(o.sampling_rate, PrivacyEvent::gaussian(o.noise_multiplier));
}

PrivacyEvent central_images_event(const CentralImageOptions& o) {
  return PrivacyEvent::self_composed(central_query_event(o), o.queries);
}

double central_mean_sensitivity(std::int64_t channels, std::int64_t resolution) {
  return std::sqrt(static_cast<double>(channels * resolution * resolution));
}

at::Tensor central_noisy_sums(const at::Tensor& sampled, const at::Tensor& labels, std::int64_t classes,
                              const CentralImageOptions& o, GaussianNoise& noise) {
  check_options(o);
  const at::Tensor p = sampled.to(at::kDouble);
  // Class sums: one record moves one class's sum by at most Delta (its L2 norm).
  at::Tensor sums = at::zeros({classes, p.size(1), p.size(2), p.size(3)}, p.options());
  if (p.size(0) > 0) sums.index_add_(0, labels.to(at::kLong), p);
  const double delta = central_mean_sensitivity(p.size(1), p.size(2));
  return sums + noise.sample(sums, o.noise_multiplier * delta);
}

at::Tensor central_noisy_histograms(const at::Tensor& sampled, const at::Tensor& labels, std::int64_t classes,
                                    const CentralImageOptions& o, GaussianNoise& noise) {
  check_options(o);
  const at::Tensor p = sampled.to(at::kDouble);
  const std::int64_t dims = p.size(1) * p.size(2) * p.size(3);
  // counts[class, pixel, bin]: each record adds one count to each of its `dims` pixel histograms.
  at::Tensor counts = at::zeros({classes * dims * o.bins}, at::kDouble);
  if (p.size(0) > 0) {
    const at::Tensor bin = (p.flatten(1) * static_cast<double>(o.bins)).floor().clamp(0, o.bins - 1).to(at::kLong);
    const at::Tensor pixel = at::arange(dims, at::kLong).unsqueeze(0);
    const at::Tensor flat = (labels.to(at::kLong).unsqueeze(1) * dims + pixel) * o.bins + bin;
    counts.index_add_(0, flat.flatten(), at::ones({flat.numel()}, at::kDouble));
  }
  const double sensitivity = std::sqrt(static_cast<double>(dims));
  return (counts + noise.sample(counts, o.noise_multiplier * sensitivity)).view({classes, dims, o.bins});
}

at::Tensor central_mean(const at::Tensor& sampled, const at::Tensor& labels, const std::vector<double>& class_sizes,
                        const CentralImageOptions& o, GaussianNoise& noise) {
  const auto classes = static_cast<std::int64_t>(class_sizes.size());
  return mean_from_sums(central_noisy_sums(sampled, labels, classes, o, noise), class_sizes, o.sampling_rate);
}

at::Tensor central_mode(const at::Tensor& sampled, const at::Tensor& labels, std::int64_t classes,
                        const CentralImageOptions& o, GaussianNoise& noise) {
  return mode_from_histograms(central_noisy_histograms(sampled, labels, classes, o, noise), sampled);
}

CentralImages release_central_images(const at::Tensor& images, const at::Tensor& labels, std::int64_t classes,
                                     const CentralImageOptions& o, PoissonSampler& sampler, GaussianNoise& noise) {
  check_options(o);
  if (images.dim() != 4 || labels.dim() != 1 || labels.size(0) != images.size(0)) {
    throw std::invalid_argument("central images: expected images [N, C, H, W] and labels [N]");
  }
  if (images.numel() > 0 && (images.min().item<double>() < -1 || images.max().item<double>() > 1)) {
    throw std::invalid_argument("central images: pixel values outside [-1, 1] (the sensitivity assumes that range)");
  }
  if (classes < 1) throw std::invalid_argument("central images: the class count must be >= 1");
  if (images.size(0) < 1) throw std::invalid_argument("central images: the dataset has no images");
  if (labels.numel() > 0 && (labels.min().item<std::int64_t>() < 0 || labels.max().item<std::int64_t>() >= classes)) {
    throw std::invalid_argument("central images: a label is outside [0, " + std::to_string(classes) + ")");
  }
  // The divisor's class sizes (the mean query): public N / classes unless the private counts are
  // asked for. A class without examples then divides its noise by its expected size all the same.
  std::vector<double> class_sizes(static_cast<std::size_t>(classes),
                                  static_cast<double>(images.size(0)) / static_cast<double>(classes));
  if (o.class_sizes == ClassSizes::private_counts) {
    const at::Tensor counts = at::bincount(labels.to(at::kLong), {}, classes);
    for (std::int64_t c = 0; c < classes; ++c) {
      class_sizes[static_cast<std::size_t>(c)] = std::max<double>(1.0, static_cast<double>(counts[c].item<std::int64_t>()));
    }
  }
  const auto h = images.size(2), w = images.size(3);
  std::vector<at::Tensor> out_images, out_labels, statistics;
  for (std::int64_t q = 0; q < o.queries; ++q) {
    const at::Tensor batch = sampler.next();
    const at::Tensor picked = images.index_select(0, batch).to(at::kDouble);
    const at::Tensor small = (at::adaptive_avg_pool2d(picked, {o.resolution, o.resolution}) + 1) / 2;  // [0, 1]
    const at::Tensor y = labels.index_select(0, batch);
    const bool mean = o.statistic == CentralStatistic::mean;
    statistics.push_back(mean ? central_noisy_sums(small, y, classes, o, noise)
                              : central_noisy_histograms(small, y, classes, o, noise));
    const at::Tensor release = mean ? mean_from_sums(statistics.back(), class_sizes, o.sampling_rate)
                                    : mode_from_histograms(statistics.back(), small);
    // Post-processing: back to the image size and the pixel range, then the authors' filters.
    at::Tensor full = (at::upsample_bilinear2d(release, {h, w}, false) * 2 - 1).clamp(-1, 1);
    if (o.post_process) {
      full = data::median_blur3(full);
      if (full.size(1) == 1) full = data::sharpen(full);
    }
    out_images.push_back(full.to(images.scalar_type()));
    out_labels.push_back(at::arange(classes, at::kLong));
  }
  return {at::cat(out_images), at::cat(out_labels), std::move(statistics)};
}

}  // namespace privdiff::sdk::engine
