#include <privdiff/engine/capture.hpp>
#include <privdiff/engine/norm_strategy.hpp>

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>

namespace privdiff::sdk::engine {

namespace {

// The library's convolution weight-gradient kernel does the same multiply-adds as the batched
// products of the materialised strategy about four times faster on a CPU (bench/engine_bench.cpp,
// DPDM's UNet); the cost model credits it with that.
constexpr double library_kernel_speedup = 4.0;
// Calibration times the candidates the cost model puts within this factor of its cheapest.
constexpr double calibration_range = 4.0;

double modelled_cost(const NormCandidate& c) {
  return c.strategy == NormStrategy::grouped_convolution ? c.flops_per_example / library_kernel_speedup
                                                         : c.flops_per_example;
}

// Waits for the device by reading one value back, so that a timing covers the kernels it launched.
void wait_for(const std::vector<at::Tensor>& results) {
  for (const auto& r : results) {
    if (r.defined() && r.numel() > 0) (void)r.sum().item<double>();
  }
}

}  // namespace

std::string to_string(NormStrategy strategy) {
  switch (strategy) {
    case NormStrategy::materialised: return "materialised";
    case NormStrategy::ghost: return "ghost";
    case NormStrategy::grouped_convolution: return "grouped_convolution";
    case NormStrategy::gradient_filter: return "gradient_filter";
  }
  return "unknown";
}

NormStrategy norm_strategy_from_string(const std::string& name) {
  for (auto s : {NormStrategy::materialised, NormStrategy::ghost, NormStrategy::grouped_convolution,
                 NormStrategy::gradient_filter}) {
    if (to_string(s) == name) return s;
  }
  throw std::invalid_argument(
      "norm strategy must be \"materialised\", \"ghost\", \"grouped_convolution\" or \"gradient_filter\", got \"" +
      name + "\"");
}

NormPlanner::NormPlanner(Mode mode, NormStrategy fixed_strategy) : mode_(mode), fixed_(fixed_strategy) {}

NormStrategy NormPlanner::choose(const std::vector<NormCandidate>& candidates) const {
  if (mode_ == Mode::fixed) {
    for (const auto& c : candidates) {
      if (c.strategy == fixed_) return fixed_;
    }
  }
  return std::min_element(candidates.begin(), candidates.end(), [](const NormCandidate& a, const NormCandidate& b) {
           return modelled_cost(a) < modelled_cost(b);
         })->strategy;
}

std::vector<at::Tensor> NormPlanner::squared_norms(const PerExampleLayer& layer, const CapturedCall& call,
                                                   const at::Tensor& output_grad, std::int64_t group,
                                                   std::vector<at::Tensor>* gradients) {
  std::vector<std::int64_t> shape(call.saved.sizes().begin() + 1, call.saved.sizes().end());
  const Key key{&layer, shape, group};
  // The planned strategy's norms, and its per-example gradients when the caller keeps them.
  auto planned = [&](NormStrategy strategy) {
    RECORD_USER_SCOPE("privdiff::norms_by_" + to_string(strategy));  // named in profiles (engine_bench)
    if (gradients) {
      *gradients = layer.per_example_by(call, output_grad, group, strategy);
      if (!gradients->empty()) return squared_norms_of(*gradients);
    }
    return layer.per_example_squared_norms(call, output_grad, group, strategy);
  };
  if (gradients) gradients->clear();
  if (const auto found = plan_.find(key); found != plan_.end()) return planned(found->second);
  const std::vector<NormCandidate> candidates = layer.norm_candidates(call, group);
  if (candidates.empty()) throw std::logic_error("a per-example layer offered no norm strategy");
  if (mode_ != Mode::calibrate || frozen_ || candidates.size() == 1) {
    const NormStrategy chosen = choose(candidates);
    plan_[key] = chosen;
    return planned(chosen);
  }
  // Calibration: each candidate within a factor of the model's cheapest (a ghost norm over 6,000
  // positions would cost 200 times more, and its Gram matrices gigabytes) three times — the first
  // run pays for kernel set-up — and the better of the other two kept (one timing alone made the
  // plan, and the step's time, differ by 5-10 % from run to run).
  double cheapest = std::numeric_limits<double>::infinity();
  for (const auto& c : candidates) cheapest = std::min(cheapest, modelled_cost(c));
  std::vector<at::Tensor> best_result;
  double best = std::numeric_limits<double>::infinity();
  for (const auto& candidate : candidates) {
    if (modelled_cost(candidate) > calibration_range * cheapest) continue;
    wait_for(layer.per_example_squared_norms(call, output_grad, group, candidate.strategy));
    std::vector<at::Tensor> result;
    double seconds = std::numeric_limits<double>::infinity();
    for (int timing = 0; timing < 2; ++timing) {
      const auto start = std::chrono::steady_clock::now();
      result = layer.per_example_squared_norms(call, output_grad, group, candidate.strategy);
      wait_for(result);
      seconds = std::min(seconds, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    if (seconds < best) {
      best = seconds;
      best_result = std::move(result);
      plan_[key] = candidate.strategy;
    }
  }
  return best_result;
}

std::map<std::string, int> NormPlanner::counts() const {
  std::map<std::string, int> out;
  for (const auto& [key, strategy] : plan_) ++out[to_string(strategy)];
  return out;
}

}  // namespace privdiff::sdk::engine
