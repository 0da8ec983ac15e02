#include <privdiff/data/augment.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>

namespace privdiff::sdk::data {

namespace {

constexpr double top_level = 30;  // torchvision: 31 magnitude bins, 0 .. 30

at::Tensor grey(const at::Tensor& p) {  // [C, H, W] -> [1, H, W], ITU-R 601 luma as torchvision
  if (p.size(0) == 1) return p;
  return (0.2989 * p[0] + 0.587 * p[1] + 0.114 * p[2]).unsqueeze(0);
}

// factor * image + (1 - factor) * degenerate, in [0, 1] (torchvision's _blend).
at::Tensor blend(const at::Tensor& image, const at::Tensor& degenerate, double factor) {
  return (degenerate + factor * (image - degenerate)).clamp(0, 1);
}

// Samples the image at theta * (output coordinates) (normalised, 2 x 3), nearest pixel, black outside.
at::Tensor affine(const at::Tensor& p, const std::vector<double>& theta) {
  const at::Tensor t = at::tensor(theta, at::kDouble).view({1, 2, 3}).to(p.options());
  const at::Tensor grid = at::affine_grid_generator(t, {1, p.size(0), p.size(1), p.size(2)}, false);
  return at::grid_sampler(p.unsqueeze(0), grid, /*nearest*/ 1, /*zeros*/ 0, false).squeeze(0);
}

at::Tensor equalize_channel(const at::Tensor& channel) {  // [H, W] in [0, 1], on 256 levels
  const at::Tensor bytes = (channel * 255).round().to(at::kLong).flatten();
  const at::Tensor counts = at::bincount(bytes, {}, 256).to(at::kDouble);
  const at::Tensor cdf = counts.cumsum(0);
  const double total = static_cast<double>(bytes.numel());
  const double first = cdf.masked_select(counts.gt(0))[0].item<double>();  // cdf at the darkest level present
  if (total - first <= 0) return channel;                            // one level: nothing to spread
  const at::Tensor lut = ((cdf - first) / (total - first) * 255).round().clamp(0, 255) / 255;
  return lut.index_select(0, bytes).view(channel.sizes()).to(channel.scalar_type());
}

}  // namespace

const std::vector<AugmentOp>& augment_ops() {
  static const std::vector<AugmentOp> ops{
      AugmentOp::identity,   AugmentOp::autocontrast, AugmentOp::equalize, AugmentOp::rotate,  AugmentOp::solarize,
      AugmentOp::color,      AugmentOp::posterize,    AugmentOp::contrast, AugmentOp::brightness, AugmentOp::sharpness,
      AugmentOp::shear_x,    AugmentOp::shear_y,      AugmentOp::translate_x, AugmentOp::translate_y};
  return ops;
}

std::string to_string(AugmentOp op) {
  static const char* names[] = {"identity",  "autocontrast", "equalize", "rotate",     "solarize",
                                "color",     "posterize",    "contrast", "brightness", "sharpness",
                                "shear_x",   "shear_y",      "translate_x", "translate_y"};
  return names[static_cast<int>(op)];
}

at::Tensor apply_augment_op(const at::Tensor& image, AugmentOp op, double magnitude, bool negative) {
  if (image.dim() != 3) throw std::invalid_argument("augment: expected one image [C, H, W]");
  if (!(magnitude >= 0 && magnitude <= top_level)) throw std::invalid_argument("augment: magnitude must be in [0, 30]");
  const at::Tensor p = ((image + 1) / 2).clamp(0, 1);
  const double f = magnitude / top_level, sign = negative ? -1.0 : 1.0;
  const double factor = 1 + sign * 0.9 * f;  // enhancement ops
  at::Tensor out;
  switch (op) {
    case AugmentOp::identity: out = p; break;
    case AugmentOp::autocontrast: {
      const at::Tensor flat = p.flatten(1);
      const at::Tensor lo = std::get<0>(flat.min(1)).view({-1, 1, 1}), hi = std::get<0>(flat.max(1)).view({-1, 1, 1});
      const at::Tensor range = hi - lo;
      out = at::where(range > 0, (p - lo) / range.clamp_min(1e-12), p);
      break;
    }
    case AugmentOp::equalize: {
      std::vector<at::Tensor> channels;
      for (std::int64_t c = 0; c < p.size(0); ++c) channels.push_back(equalize_channel(p[c]));
      out = at::stack(channels);
      break;
    }
    case AugmentOp::rotate: {
      const double a = sign * 30.0 * f * M_PI / 180.0;
      out = affine(p, {std::cos(a), -std::sin(a), 0, std::sin(a), std::cos(a), 0});
      break;
    }
    case AugmentOp::solarize: out = at::where(p > 1 - f, 1 - p, p); break;  // level 0: nothing above 1
    case AugmentOp::color: out = blend(p, grey(p).expand_as(p), factor); break;  // grey images: unchanged
    case AugmentOp::posterize: {
      const auto bits = static_cast<std::int64_t>(8 - std::round(4 * f));
      if (bits >= 8) {  // every level of an 8-bit image kept: the identity (no re-quantisation)
        out = p;
        break;
      }
      const std::int64_t mask = ~((std::int64_t{1} << (8 - bits)) - 1) & 0xFF;
      out = ((p * 255).round().to(at::kLong).bitwise_and(mask)).to(p.scalar_type()) / 255;
      break;
    }
    case AugmentOp::contrast: out = blend(p, grey(p).mean().expand_as(p), factor); break;
    case AugmentOp::brightness: out = blend(p, at::zeros_like(p), factor); break;
    case AugmentOp::sharpness: {
      // Degenerate = a 3 x 3 smoothing (centre 5, neighbours 1, / 13); the border keeps its pixels.
      const auto c = p.size(0);
      at::Tensor kernel = at::ones({3, 3}, p.options());
      kernel[1][1] = 5;
      kernel = (kernel / 13).expand({c, 1, 3, 3}).contiguous();
      at::Tensor smooth = p.clone();
      if (p.size(1) > 2 && p.size(2) > 2) {
        smooth.slice(1, 1, -1).slice(2, 1, -1).copy_(at::conv2d(p.unsqueeze(0), kernel, at::Tensor(), at::IntArrayRef{1, 1}, at::IntArrayRef{0, 0}, at::IntArrayRef{1, 1}, c).squeeze(0));
      }
      out = blend(p, smooth, factor);
      break;
    }
    case AugmentOp::shear_x: out = affine(p, {1, sign * 0.3 * f, 0, 0, 1, 0}); break;
    case AugmentOp::shear_y: out = affine(p, {1, 0, 0, sign * 0.3 * f, 1, 0}); break;
    case AugmentOp::translate_x: out = affine(p, {1, 0, sign * 2 * 0.45 * f, 0, 1, 0}); break;
    case AugmentOp::translate_y: out = affine(p, {1, 0, 0, 0, 1, sign * 2 * 0.45 * f}); break;
  }
  return out.clamp(0, 1) * 2 - 1;
}

at::Tensor rand_augment(const at::Tensor& images, const RandAugmentOptions& o, at::Generator& generator) {
  if (images.dim() != 4) throw std::invalid_argument("rand_augment: expected images [N, C, H, W]");
  if (o.ops_per_image < 0 || o.min_magnitude < 0 || o.max_magnitude > top_level || o.min_magnitude > o.max_magnitude) {
    throw std::invalid_argument("rand_augment: need ops_per_image >= 0 and 0 <= min_magnitude <= max_magnitude <= 30");
  }
  const auto n = images.size(0);
  const auto count = static_cast<std::int64_t>(augment_ops().size());
  const at::Tensor level = at::randint(o.min_magnitude, o.max_magnitude + 1, {n}, generator, at::kLong);
  const at::Tensor op = at::randint(0, count, {n, std::max<std::int64_t>(o.ops_per_image, 1)}, generator, at::kLong);
  const at::Tensor negative = at::randint(0, 2, {n, std::max<std::int64_t>(o.ops_per_image, 1)}, generator, at::kLong);
  std::vector<at::Tensor> out;
  for (std::int64_t i = 0; i < n; ++i) {
    at::Tensor x = images[i];
    for (std::int64_t j = 0; j < o.ops_per_image; ++j) {
      x = apply_augment_op(x, augment_ops()[static_cast<std::size_t>(op[i][j].item<std::int64_t>())],
                           static_cast<double>(level[i].item<std::int64_t>()), negative[i][j].item<std::int64_t>() == 1);
    }
    out.push_back(x);
  }
  return at::stack(out);
}

}  // namespace privdiff::sdk::data
