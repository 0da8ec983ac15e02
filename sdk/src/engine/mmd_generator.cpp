#include <privdiff/engine/mmd_generator.hpp>
#include <privdiff/engine/rff_embedding.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace privdiff::sdk::engine {

ConditionalGenerator::ConditionalGenerator(std::int64_t classes, std::int64_t channels_out, std::int64_t size,
                                           const MmdGeneratorOptions& o)
    : latent_dim_(o.latent_dim), channels_(o.channels), base_(size / 4) {
  if (size < 4 || size % 4 != 0) {
    throw std::invalid_argument("rff generator: the image size must be a multiple of 4, got " + std::to_string(size));
  }
  if (classes < 1 || o.latent_dim < 1 || o.channels < 1) {
    throw std::invalid_argument("rff generator: classes, latent_dim and channels must be >= 1");
  }
  const std::int64_t embedding = std::max<std::int64_t>(classes, 16);
  embed_ = register_module("embed", torch::nn::Embedding(classes, embedding));
  input_ = register_module("input", torch::nn::Linear(o.latent_dim + embedding, o.channels * base_ * base_));
  norm0_ = register_module("norm0", torch::nn::BatchNorm2d(o.channels));
  conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(o.channels, o.channels, 3).padding(1)));
  norm1_ = register_module("norm1", torch::nn::BatchNorm2d(o.channels));
  conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(o.channels, o.channels, 3).padding(1)));
  norm2_ = register_module("norm2", torch::nn::BatchNorm2d(o.channels));
  out_ = register_module("out", torch::nn::Conv2d(torch::nn::Conv2dOptions(o.channels, channels_out, 3).padding(1)));
}

at::Tensor ConditionalGenerator::block(int i, const at::Tensor& h) {
  const at::Tensor normed = at::relu(i == 0 ? norm0_->forward(h) : norm1_->forward(h));
  const at::Tensor up = at::upsample_nearest2d(normed, {2 * h.size(2), 2 * h.size(3)});
  return i == 0 ? conv1_->forward(up) : conv2_->forward(up);
}

at::Tensor ConditionalGenerator::forward(const at::Tensor& z, const at::Tensor& labels) {
  const at::Tensor h0 = input_->forward(at::cat({z, embed_->forward(labels)}, 1)).view({z.size(0), channels_, base_, base_});
  const at::Tensor h2 = block(1, block(0, h0));
  return at::tanh(out_->forward(at::relu(norm2_->forward(h2))));
}

at::Tensor mmd_loss(const at::Tensor& target, const at::Tensor& features, const at::Tensor& labels) {
  const at::Tensor onehot = at::one_hot(labels, target.size(0)).to(features.scalar_type());  // [B, classes]
  const at::Tensor generated = at::matmul(onehot.t(), features) / static_cast<double>(features.size(0));
  return (target.to(features.scalar_type()) - generated).pow(2).sum();
}

double fit_mmd_generator(ConditionalGenerator& g, const at::Tensor& target, const at::Tensor& frequencies,
                         const MmdGeneratorOptions& o, std::uint64_t seed,
                         const std::function<void(std::int64_t, double)>& progress) {
  if (o.steps < 1 || o.batch_size < 1 || !(o.lr > 0) || !(o.lr_decay > 0 && o.lr_decay <= 1) || o.decay_every < 1) {
    throw std::invalid_argument("rff generator: steps, batch size and decay_every >= 1, lr > 0, lr_decay in (0, 1]");
  }
  auto draws = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::optim::Adam adam(g.parameters(), torch::optim::AdamOptions(o.lr));
  g.train();
  double last = 0;
  for (std::int64_t step = 1; step <= o.steps; ++step) {
    const at::Tensor z = at::randn({o.batch_size, g.latent_dim()}, draws);
    const at::Tensor labels = at::randint(target.size(0), {o.batch_size}, draws, at::TensorOptions(at::kLong));
    const at::Tensor images = g.forward(z, labels);
    const at::Tensor p = ((images + 1) / 2).reshape({o.batch_size, -1});
    const at::Tensor loss = mmd_loss(target, rff_features(p, frequencies), labels);
    adam.zero_grad();
    loss.backward();
    adam.step();
    last = loss.item<double>();
    if (step % o.decay_every == 0) {
      for (auto& group : adam.param_groups()) {
        auto& options = static_cast<torch::optim::AdamOptions&>(group.options());
        options.lr(options.lr() * o.lr_decay);
      }
    }
    if (progress && (step % 50 == 0 || step == o.steps)) progress(step, last);
  }
  return last;
}

std::pair<at::Tensor, at::Tensor> generate_images(ConditionalGenerator& g, std::int64_t classes, std::int64_t per_class,
                                                  std::uint64_t seed) {
  auto draws = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::Tensor labels = at::arange(classes, at::kLong).repeat_interleave(per_class);
  std::vector<at::Tensor> images;
  at::NoGradGuard no_grad;
  g.eval();
  for (std::int64_t start = 0; start < labels.size(0); start += 1000) {
    const std::int64_t len = std::min<std::int64_t>(1000, labels.size(0) - start);
    images.push_back(g.forward(at::randn({len, g.latent_dim()}, draws), labels.narrow(0, start, len)));
  }
  return {at::cat(images, 0), labels};
}

}  // namespace privdiff::sdk::engine
