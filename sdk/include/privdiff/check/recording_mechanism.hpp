#pragma once
/// @file
/// The DP-SGD engine with what each step did recorded (RecordingMechanism), and a collective that
/// logs every exchange: the white-box half of a record-replay check of the built-in engine.

#include <privdiff/check/replay_models.hpp>
#include <privdiff/check/replay_report.hpp>
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/engine/private_gradient.hpp>
#include <privdiff/parallel/collective.hpp>

#include <ATen/ATen.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace privdiff::sdk::check {

namespace engine = privdiff::sdk::engine;

// ---------------------------------------------------------------------------------------------
// Instrumented DP-SGD: the real engine, with what each step did recorded

/// DpSgdMechanism with its two privacy-critical hooks recorded: each physical chunk (examples,
/// per-example norms before clipping, clipped sum before noise) and each logical step's noise
/// (blocks of the noise stream consumed, the divisor). Behaviour is the engine's own.
class RecordingMechanism : public engine::DpSgdMechanism {
 public:
  using DpSgdMechanism::DpSgdMechanism;
  struct Step {
    std::vector<at::Tensor> clipped_sum;  ///< this rank's chunks, before noise (float64)
    at::Tensor norms = at::zeros({0}, at::kDouble);  ///< per example, before clipping, batch order
    std::int64_t chunks = 0;
  };
  std::vector<Step> steps;
  Trace* trace = nullptr;

 protected:
  engine::ClippedSum clipped_chunk_sum(torch::nn::Module& module, const engine::RowLoss& loss,
                                       std::int64_t examples) override {
    engine::ClippedSum sum = DpSgdMechanism::clipped_chunk_sum(module, loss, examples);
    record_chunk(examples, sum);
    return sum;
  }
  void noise_step_gradient(engine::PrivateGradient& gradient, double expected_batch_size,
                           engine::GaussianNoise& noise) override {
    const std::int64_t before = noise.state()[9].item<std::int64_t>();  // the block counter (seeded streams)
    DpSgdMechanism::noise_step_gradient(gradient, expected_batch_size, noise);
    const std::int64_t after = noise.state()[9].item<std::int64_t>();
    char line[128];
    std::snprintf(line, sizeof line, "noise: %lld blocks, divisor %.9g", static_cast<long long>(after - before),
                  expected_batch_size);
    if (trace) trace->released.push_back(line);
    steps.push_back(current_);
    current_ = Step{};
  }
  void record_chunk(std::int64_t examples, const engine::ClippedSum& sum) {
    if (trace) trace->internal.push_back("chunk of " + std::to_string(examples) + " examples");
    current_.norms = at::cat({current_.norms, sum.norms.to(at::kDouble).to(at::kCPU)});
    if (current_.clipped_sum.empty()) {
      for (const auto& s : sum.sums) current_.clipped_sum.push_back(s.detach().to(at::kDouble).clone());
    } else {
      for (std::size_t j = 0; j < sum.sums.size(); ++j) current_.clipped_sum[j] += sum.sums[j].detach().to(at::kDouble);
    }
    ++current_.chunks;
  }

 private:
  Step current_;
};

/// Planted bug (a), sensitivity 2C: each example is clipped to 2C while the ledger says C.

/// Logs every collective (op and shapes) into a trace, then passes it on.
class RecordingCollective : public sdk::Collective {
 public:
  RecordingCollective(sdk::Collective& inner, std::vector<std::string>& log) : inner_(inner), log_(log) {}
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  void all_reduce_sum(std::vector<at::Tensor>& tensors) override {
    std::string line = "all_reduce";
    for (const auto& t : tensors) line += " " + shape_of(t);
    log_.push_back(line);
    inner_.all_reduce_sum(tensors);
  }
  void broadcast(at::Tensor& tensor, int root) override {
    log_.push_back("broadcast " + shape_of(tensor) + " from " + std::to_string(root));
    inner_.broadcast(tensor, root);
  }

 private:
  sdk::Collective& inner_;
  std::vector<std::string>& log_;
};


}  // namespace privdiff::sdk::check
