#pragma once
/// @file
/// DP-FETA's central images (Li et al., S&P 2025, Algs. 1-2): a few noisy per-class images released
/// under DP from a Poisson subsample of the private data, for a non-private warm-up.
///
/// One query draws a Poisson subsample with rate q_c and releases one image per class:
///  - mean: per class, the sum of the subsampled images (downsampled to `resolution`, pixels
///    p = (x + 1) / 2 in [0, 1]) plus N(0, (sigma_c Delta)^2) per pixel, divided by the *expected*
///    class count q_c N_class, never the realised one (which would depend on who was sampled).
///    N_class is public by default: N / classes (the paper's q_c N_s per class; N is public as in
///    DP-SGD's q = B / N, the class count comes from the model's configuration). The private
///    class histogram may be chosen instead (ClassSizes::private_counts): it is then released
///    without noise through the divisor, and the run must carry a caveat.
///    Delta = sqrt(C r^2) is the largest L2 norm a downsampled image can have: no clipping needed,
///    and images outside [-1, 1] are refused (they would break the bound).
///  - mode: per class and pixel, a histogram of p over `bins` equal bins plus N(0, sigma_c^2 d)
///    per count (one image moves one count in each of the d pixel histograms: L2 sensitivity
///    sqrt(d)); the noisy argmax's bin midpoint.
/// Privacy of one query: adding or removing one record changes one class's statistic only, so the
/// per-class releases compose in parallel and the query is one Poisson-subsampled Gaussian
/// (q_c, sigma_c) — central_images_event. How many images are released, and their shapes, depend
/// only on the options and the public class count: an empty class releases pure noise.
/// The authors' code divides by the realised count and scales the noise by the expected one; that
/// mixes the two and has no proof. Dividing by the expected count is the provable version.

#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/engine/poisson_sampler.hpp>
#include <privdiff/components/privacy_event.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace privdiff::sdk::engine {

enum class CentralStatistic { mean, mode };

/// The class sizes N_class of the mean query's divisor q_c N_class.
enum class ClassSizes {
  uniform,         ///< N / classes for every class: public
  private_counts,  ///< each class's count in the private data: outside the guarantee (a caveat)
};

struct CentralImageOptions {
  CentralStatistic statistic = CentralStatistic::mean;
  std::int64_t queries = 5;       ///< N_c / classes: each query releases one image per class
  double sampling_rate = 0.1;     ///< q_c
  double noise_multiplier = 5.0;  ///< sigma_c (noise std / sensitivity)
  std::int64_t resolution = 14;   ///< images are area-downsampled to resolution x resolution first
  std::int64_t bins = 16;         ///< mode: bins over [0, 1]
  ClassSizes class_sizes = ClassSizes::uniform;  ///< mean: the divisor's class sizes
  /// After upsampling: the authors' 3x3 median blur, then sharpening for grey images
  /// (data/image_filters.hpp). Post-processing of the release: no privacy cost.
  bool post_process = true;
};

/// The privacy spent by one query: a Poisson-subsampled Gaussian (q_c, sigma_c).
PRIVDIFF_SDK_API PrivacyEvent central_query_event(const CentralImageOptions& options);
/// The privacy spent by `options.queries` queries.
PRIVDIFF_SDK_API PrivacyEvent central_images_event(const CentralImageOptions& options);

/// Delta of the mean query: the largest L2 norm of a [C, r, r] image in [0, 1]. It is the mode
/// query's L2 sensitivity too, sqrt(C r^2): one count in each of a class's C r^2 pixel histograms.
PRIVDIFF_SDK_API double central_mean_sensitivity(std::int64_t channels, std::int64_t resolution);

/// The statistic the mean query releases: per class, the sum of `sampled` [B, C, r, r] in [0, 1]
/// plus N(0, (sigma_c Delta)^2) per pixel, [classes, C, r, r] (central_mean divides it).
PRIVDIFF_SDK_API at::Tensor central_noisy_sums(const at::Tensor& sampled, const at::Tensor& labels, std::int64_t classes,
                                               const CentralImageOptions& options, GaussianNoise& noise);
/// The statistic the mode query releases: per class and pixel, the histogram over `bins` plus
/// N(0, sigma_c^2 d) per count, [classes, d = C r r, bins] (central_mode takes its argmax).
PRIVDIFF_SDK_API at::Tensor central_noisy_histograms(const at::Tensor& sampled, const at::Tensor& labels,
                                                     std::int64_t classes, const CentralImageOptions& options,
                                                     GaussianNoise& noise);

/// One mean query's release from a given subsample: `sampled` [B, C, r, r] in [0, 1] with `labels`
/// [B]; `class_sizes` the N_class of the divisor (> 0). Returns [classes, C, r, r] (not clamped:
/// clamping is left to post-processing). An empty subsample gives pure noise over q_c N_class.
PRIVDIFF_SDK_API at::Tensor central_mean(const at::Tensor& sampled, const at::Tensor& labels,
                                         const std::vector<double>& class_sizes, const CentralImageOptions& options,
                                         GaussianNoise& noise);

/// One mode query's release: per-class, per-pixel noisy histograms -> bin midpoints [classes, C, r, r].
PRIVDIFF_SDK_API at::Tensor central_mode(const at::Tensor& sampled, const at::Tensor& labels, std::int64_t classes,
                                         const CentralImageOptions& options, GaussianNoise& noise);

/// Every query: images float [N, C, H, W] in [-1, 1] with labels [N] in [0, classes), `classes`
/// from public configuration (never the data's largest label). Returns the central images
/// upsampled (bilinear) back to H x W in [-1, 1] and post-processed (see
/// CentralImageOptions::post_process), [queries * classes, C, H, W], and their labels
/// (query-major), whatever the data hold: a class without examples releases noise. Throws
/// std::invalid_argument for images outside [-1, 1] or labels outside [0, classes) (input the host
/// checks before a run starts).
struct CentralImages {
  at::Tensor images, labels;
  /// Per query, the noisy statistic behind its images (central_noisy_sums or
  /// central_noisy_histograms), as released before division or argmax: what the checks replay.
  std::vector<at::Tensor> statistics;
};
PRIVDIFF_SDK_API CentralImages release_central_images(const at::Tensor& images, const at::Tensor& labels,
                                                      std::int64_t classes, const CentralImageOptions& options,
                                                      PoissonSampler& sampler, GaussianNoise& noise);

PRIVDIFF_SDK_API CentralStatistic central_statistic_from_string(const std::string& name);
PRIVDIFF_SDK_API ClassSizes class_sizes_from_string(const std::string& name);

/// The caveat a run carries when its divisor uses the private class counts.
PRIVDIFF_SDK_API std::string private_class_sizes_caveat();

}  // namespace privdiff::sdk::engine
