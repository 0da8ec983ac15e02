#include <privdiff/engine/engine_path.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/micro_batch_clipping.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace privdiff::sdk::engine {

EnginePath engine_path_from_string(const std::string& name) {
  if (name == "auto") return EnginePath::automatic;
  if (name == "vectorised") return EnginePath::vectorised;
  if (name == "micro_batch") return EnginePath::micro_batch;
  throw std::invalid_argument("engine path must be \"auto\", \"vectorised\" or \"micro_batch\", got \"" + name + "\"");
}

std::string to_string(EnginePath path) {
  switch (path) {
    case EnginePath::automatic: return "auto";
    case EnginePath::vectorised: return "vectorised";
    case EnginePath::micro_batch: return "micro_batch";
  }
  return "unknown";
}

ClippedSum clipped_sum_along(const EnginePlan& plan, torch::nn::Module& model, const RowLoss& loss,
                             std::int64_t examples, std::int64_t group, double max_grad_norm, ClipMode mode,
                             NormPlanner& planner) {
  if (plan.path == EnginePath::micro_batch) {
    return micro_batch_clipped_sum(model, loss, examples, group, max_grad_norm, mode);
  }
  return clipped_gradient_sum(model, loss, examples, group, max_grad_norm, mode, planner);
}

namespace {

// Seconds per example of one chunk along `path` (the sums are read back: on a GPU that waits for
// the kernels).
double seconds_per_example(EnginePath path, torch::nn::Module& model, const EngineCalibration& s,
                           std::int64_t examples, NormPlanner& planner) {
  const RowLoss loss = s.synthetic_loss(examples);
  const EnginePlan plan{path, examples, {}};
  const auto start = std::chrono::steady_clock::now();
  const ClippedSum sums = clipped_sum_along(plan, model, loss, examples, s.group, s.max_grad_norm, s.mode, planner);
  (void)sums.norms.sum().item<double>();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / static_cast<double>(examples);
}

}  // namespace

EnginePlan calibrate_engine(torch::nn::Module& model, const EngineCalibration& s, NormPlanner& planner) {
  if (s.chunk < 1) throw std::invalid_argument("calibrate_engine: the chunk must hold at least one example");
  EnginePlan plan;
  plan.chunk = s.chunk;
  if (!has_closed_form(model) || s.requested == EnginePath::micro_batch) {
    plan.path = EnginePath::micro_batch;
    return plan;
  }
  // The norm strategies: each layer's candidates timed on a first vectorised pass.
  seconds_per_example(EnginePath::vectorised, model, s, s.chunk, planner);
  planner.freeze();
  plan.path = EnginePath::vectorised;
  if (s.requested == EnginePath::vectorised) return plan;
  double best = std::numeric_limits<double>::infinity();
  for (std::int64_t chunk = s.chunk, tries = 0; chunk >= 1 && tries < 4; chunk /= 2, ++tries) {
    if (chunk != s.chunk) seconds_per_example(EnginePath::vectorised, model, s, chunk, planner);  // warm-up
    const double t = seconds_per_example(EnginePath::vectorised, model, s, chunk, planner);
    plan.seconds_per_example["vectorised/" + std::to_string(chunk)] = t;
    if (t < best) {
      best = t;
      plan.chunk = chunk;
    }
    if (!s.may_shrink_chunk || chunk < 8) break;
  }
  // The micro-batch path on a few examples (one warm-up).
  const std::int64_t few = std::min<std::int64_t>(s.chunk, 4);
  seconds_per_example(EnginePath::micro_batch, model, s, 1, planner);
  const double micro = seconds_per_example(EnginePath::micro_batch, model, s, few, planner);
  plan.seconds_per_example["micro_batch"] = micro;
  if (micro < best) {
    plan.path = EnginePath::micro_batch;
    plan.chunk = s.chunk;
  }
  return plan;
}

std::map<std::string, std::string> EnginePlan::describe(const NormPlanner& planner) const {
  std::map<std::string, std::string> out{{"path", to_string(path)},
                                         {"chunk", chunk > 0 ? std::to_string(chunk) : "logical batch"}};
  std::string strategies;
  for (const auto& [name, count] : planner.counts()) {
    strategies += (strategies.empty() ? "" : ", ") + name + " x" + std::to_string(count);
  }
  if (path == EnginePath::vectorised && !strategies.empty()) out["norm_strategies"] = strategies;
  std::string measured;
  for (const auto& [name, seconds] : seconds_per_example) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%s %.4g s", name.c_str(), seconds);
    measured += (measured.empty() ? "" : ", ") + std::string(buffer);
  }
  if (!measured.empty()) out["seconds_per_example"] = measured;
  return out;
}

}  // namespace privdiff::sdk::engine
