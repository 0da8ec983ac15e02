#pragma once
// The physical chunks of a DP-SGD stage (internal to dp_sgd_mechanism.cpp): which chunks of each
// logical batch this rank trains, the loss of a chunk at the stage's precision, the synthetic
// chunks the engine's calibration times, and the engine plan itself.

#include <privdiff/components/dataset.hpp>
#include <privdiff/components/model.hpp>
#include <privdiff/data/augment.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>
#include <privdiff/engine/engine_path.hpp>
#include <privdiff/engine/precision.hpp>
#include <privdiff/engine/private_gradient.hpp>
#include <privdiff/engine/seeds.hpp>
#include <privdiff/parallel/collective.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <functional>

namespace privdiff::sdk::engine::detail {

// This rank's share of each logical batch: physical chunks (numbered; chunk c is trained by rank
// c mod world) whose gradients go into the step's PrivateGradient, clipped (private) or plainly
// (non-private). The loss's randomness is seeded afresh for each chunk from (loss seed, step,
// chunk), so it does not depend on which rank trains the chunk.
class ChunkTrainer {
 public:
  // 77 words: every tokenizer's context (77 tokens) is full, as the longest real caption's would be.
  static std::string synthetic_caption() {
    std::string text = "a";
    for (int i = 1; i < 77; ++i) text += " a";
    return text;
  }

  using ClippedSumFn = std::function<ClippedSum(torch::nn::Module&, const RowLoss&, std::int64_t)>;

  ChunkTrainer(const DpSgdOptions& options, const Dataset& data, Model& model, std::uint64_t loss_seed,
               double expected_batch, c10::Device device, Collective* ranks, ClippedSumFn clipped_sum)
      : options_(options), data_(data), model_(model), loss_seed_(loss_seed),
        loss_generator_(at::make_generator<at::CPUGeneratorImpl>(loss_seed)), expected_batch_(expected_batch),
        device_(device), rank_(ranks ? ranks->rank() : 0), world_(ranks ? ranks->world_size() : 1),
        clipped_sum_(std::move(clipped_sum)) {}

  // Trains this rank's chunks of `batch`; returns their loss, summed over examples (K rows averaged).
  double train(const at::Tensor& batch, std::int64_t step, PrivateGradient& gradient) {
    const std::int64_t b = batch.numel();
    // Without a physical batch size, one chunk per rank.
    const std::int64_t chunk_len = chosen_chunk_ > 0                   ? chosen_chunk_
                                   : options_.physical_batch_size > 0 ? options_.physical_batch_size
                                                                      : std::max<std::int64_t>(1, (b + world_ - 1) / world_);
    double loss_sum = 0;
    std::int64_t chunk = -1;
    for (std::int64_t start = 0; start < b; start += chunk_len) {
      if (++chunk % world_ != rank_) continue;
      const at::Tensor indices = batch.narrow(0, start, std::min(b - start, chunk_len));
      loss_generator_.set_current_seed(chunk_seed(loss_seed_, step, chunk));
      train_chunk(indices, gradient, loss_sum);
    }
    return loss_sum;
  }

  // The model's per-row losses at the stage's precision (the rows themselves in float32 at least).
  at::Tensor forward(const at::Tensor& images, const Conditioning& cond, at::Generator& generator) const {
    const PrecisionScope scope(options_.precision, device_);
    const at::Tensor rows = model_.training_loss(images, cond, options_.noise_multiplicity, generator);
    return rows.scalar_type() == at::kBFloat16 || rows.scalar_type() == at::kHalf ? rows.to(at::kFloat) : rows;
  }

  // Chunks of `examples` from now on (the engine's calibration chose them; one process only, where
  // no other rank has to agree on the chunks).
  void use_chunk(std::int64_t examples) { chosen_chunk_ = examples; }

  // The loss of `examples` synthetic examples of the data's shape (uniform images, label 0, and a
  // fixed caption of the tokenizers' full context where the data are captioned): what the engine's
  // calibration times, so that its recorded choice never depends on the records.
  RowLoss synthetic_loss(std::int64_t examples) const {
    const at::Tensor probe = data_.images(at::zeros({1}, at::kLong));
    std::vector<std::int64_t> shape(probe.sizes().begin(), probe.sizes().end());
    shape[0] = examples;
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(0x5eed);
    const at::Tensor images = (at::rand(shape, generator) * 2 - 1).to(probe.scalar_type()).to(device_);
    Conditioning cond{at::zeros({examples}, at::kLong).to(device_), {}};
    if (data_.has_captions()) cond.captions.assign(static_cast<std::size_t>(examples), synthetic_caption());
    return [this, images, cond, generator](const at::Tensor& e) mutable {
      return forward(images.index_select(0, e.to(device_)), select_rows(cond, e), generator);
    };
  }

 private:
  void train_chunk(const at::Tensor& indices, PrivateGradient& gradient, double& loss_sum) {
    const std::int64_t len = indices.numel(), k = options_.noise_multiplicity;
    // Augmentation (per example, from the loss's generator: no effect on the privacy analysis).
    at::Tensor batch_images = data_.images(indices);
    if (options_.augment.ops_per_image > 0) {
      batch_images = data::rand_augment(batch_images, options_.augment, loss_generator_);
    }
    const at::Tensor images = batch_images.to(device_);
    const Conditioning cond{data_.labels(indices).to(device_), data_.captions(indices)};
    const RowLoss loss = [&](const at::Tensor& examples) {
      at::Tensor rows = forward(images.index_select(0, examples.to(device_)), select_rows(cond, examples), loss_generator_);
      loss_sum += rows.detach().sum().item<double>() / static_cast<double>(k);
      return rows;
    };
    if (options_.is_private) {
      gradient.add_clipped(clipped_sum_(model_.module(), loss, len), len);
    } else {
      const at::Tensor rows = loss(at::arange(len, at::kLong));
      (rows.reshape({len, k}).mean(1).sum() / expected_batch_).backward();
    }
  }

  const DpSgdOptions& options_;
  const Dataset& data_;
  Model& model_;
  std::uint64_t loss_seed_;
  at::Generator loss_generator_;
  double expected_batch_;  // q N: the divisor, never the realised batch size
  c10::Device device_;
  int rank_, world_;
  ClippedSumFn clipped_sum_;
  std::int64_t chosen_chunk_ = 0;
};

// A private stage's engine plan: norm strategies, path and chunk measured on synthetic chunks
// before the first step (engine_path.hpp). With several processes the chunks stay as configured.
inline EnginePlan plan_engine(const DpSgdOptions& options, torch::nn::Module& module, ChunkTrainer& chunks,
                       double expected_batch, bool several_processes, NormPlanner& planner, ClipRule rule) {
  EngineCalibration settings;
  settings.synthetic_loss = [&chunks](std::int64_t examples) { return chunks.synthetic_loss(examples); };
  settings.chunk = options.physical_batch_size > 0
                       ? options.physical_batch_size
                       : std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(expected_batch)));
  settings.may_shrink_chunk = options.physical_batch_size == 0 && !several_processes;
  settings.group = options.noise_multiplicity;
  settings.max_grad_norm = options.max_grad_norm;
  settings.mode = options.clipping;
  settings.rule = std::move(rule);
  settings.requested = options.engine_path;
  settings.passes = options.clip_passes;
  EnginePlan plan = calibrate_engine(module, settings, planner);
  if (settings.may_shrink_chunk && plan.chunk < settings.chunk) chunks.use_chunk(plan.chunk);
  return plan;
}

}  // namespace privdiff::sdk::engine::detail
