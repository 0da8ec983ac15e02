#include <privdiff/diffusion/denoising_loss.hpp>

#include <ATen/ATen.h>

namespace privdiff::sdk::diffusion {

namespace {
at::Tensor per_sample(const at::Tensor& v, const at::Tensor& like) {
  std::vector<std::int64_t> shape(static_cast<std::size_t>(like.dim()), 1);
  shape[0] = like.size(0);
  return v.to(like.options()).view(shape);
}
}  // namespace

at::Tensor denoise(const Network& network, const Preconditioning& p, const at::Tensor& x, const at::Tensor& sigma,
                   const at::Tensor& labels) {
  const auto c = p.coefficients(sigma.to(at::kDouble));
  const at::Tensor f = network(x * per_sample(c.c_in, x), c.c_noise.to(x.options()), labels);
  return per_sample(c.c_skip, x) * x + per_sample(c.c_out, x) * f;
}

at::Tensor network_labels(const at::Tensor& labels, std::int64_t num_classes) {
  if (!labels.defined()) return labels;
  return at::where(labels < 0, at::full_like(labels, num_classes), labels);
}

at::Tensor denoising_loss(const Network& network, const Preconditioning& p, const at::Tensor& images,
                          const at::Tensor& labels, const DenoisingLossOptions& o, at::Generator& gen) {
  const std::int64_t b = images.size(0), k = o.noise_multiplicity;
  at::Tensor y;
  if (o.num_classes > 0) {
    // Drop each example's label with probability label_dropout, once for all its K rows.
    const at::Tensor drop = at::rand({b}, gen, at::TensorOptions().dtype(at::kDouble)) < o.label_dropout;
    y = at::where(drop, at::full({b}, o.num_classes, at::kLong), labels.to(at::kCPU).to(at::kLong))
            .repeat_interleave(k)
            .to(images.device());
  }
  const at::Tensor x = images.repeat_interleave(k, 0);
  const at::Tensor sigma = p.sample_training_sigma(b * k, gen);
  const at::Tensor noise = at::randn(x.sizes(), gen, at::TensorOptions().dtype(at::kFloat)).to(x.options());
  const at::Tensor noisy = x + per_sample(sigma, x) * noise;
  const at::Tensor d = denoise(network, p, noisy, sigma, y);
  return p.loss_weight(sigma).to(x.options()) * (d - x).pow(2).flatten(1).mean(1);
}

}  // namespace privdiff::sdk::diffusion
