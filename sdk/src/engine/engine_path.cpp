#include <privdiff/engine/engine_path.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/micro_batch_clipping.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <utility>

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
                             NormPlanner& planner, const ClipRule& rule) {
  if (plan.path == EnginePath::micro_batch) {
    return micro_batch_clipped_sum(model, loss, examples, group, max_grad_norm, mode, rule);
  }
  if (plan.passes == ClipPasses::two) {
    return clipped_gradient_sum_two_passes(model, loss, examples, group, max_grad_norm, mode, planner, rule);
  }
  return clipped_gradient_sum(model, loss, examples, group, max_grad_norm, mode, planner, rule);
}

namespace {

// Seconds per example of one chunk along `path` (the sums are read back: on a GPU that waits for
// the kernels).
double seconds_per_example(EnginePath path, torch::nn::Module& model, const EngineCalibration& s,
                           std::int64_t examples, NormPlanner& planner) {
  const RowLoss loss = s.synthetic_loss(examples);
  const EnginePlan plan{path, examples, {}, s.passes};
  const auto start = std::chrono::steady_clock::now();
  const ClippedSum sums = clipped_sum_along(plan, model, loss, examples, s.group, s.max_grad_norm, s.mode, planner, s.rule);
  (void)sums.norms.sum().item<double>();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / static_cast<double>(examples);
}

}  // namespace

std::vector<std::int64_t> chunks_to_try(std::int64_t chunk, bool may_shrink, std::int64_t rows_per_example,
                                        std::int64_t max_rows) {
  std::vector<std::int64_t> out;
  for (int halvings = may_shrink ? 3 : 0; halvings >= 0; --halvings) {
    const std::int64_t c = chunk >> halvings;
    if (c < 1 || (!out.empty() && c == out.back())) continue;
    if (may_shrink && !out.empty() && c * rows_per_example > max_rows) break;
    out.push_back(c);
  }
  return out;
}

std::int64_t fastest_chunk(const std::vector<std::int64_t>& ascending,
                           const std::function<double(std::int64_t chunk)>& seconds_per_example) {
  // Smallest first, stopping at the first chunk 1.5 times slower per example than the best: a
  // chunk's memory grows with it, and such a jump is the sign of a working set past the caches (at
  // B 32 x K 8 half the chunk was 2 times slower than a quarter, and the whole chunk the stage's
  // peak memory). Smaller differences go on: the time per example is not monotone in the chunk
  // (at B 64 x K 1, 8 and 16 were level and 64 faster by a fifth).
  constexpr double clearly_slower = 1.5;
  // Of the chunks within 5 % of the fastest (one timing's noise), the largest: fewer, larger chunks
  // run the forward and backward passes faster, which a stage start's timings can miss (chunks of 8
  // timed level with 64 at B 64 x K 1, then ran its steps 20 % slower).
  constexpr double level = 1.05;
  std::vector<std::pair<std::int64_t, double>> tried;
  double best = std::numeric_limits<double>::infinity();
  for (const std::int64_t chunk : ascending) {
    const double t = seconds_per_example(chunk);
    tried.emplace_back(chunk, t);
    best = std::min(best, t);
    if (!(t < clearly_slower * best)) break;
  }
  std::int64_t chosen = 0;
  for (const auto& [chunk, t] : tried) {
    if (t <= level * best) chosen = chunk;
  }
  return chosen;
}

EnginePlan calibrate_engine(torch::nn::Module& model, const EngineCalibration& s, NormPlanner& planner) {
  if (s.chunk < 1) throw std::invalid_argument("calibrate_engine: the chunk must hold at least one example");
  EnginePlan plan;
  plan.chunk = s.chunk;
  plan.passes = s.passes;
  if (!has_closed_form(model) || s.requested == EnginePath::micro_batch) {
    plan.path = EnginePath::micro_batch;
    return plan;
  }
  // The norm strategies: each layer's candidates timed on a first vectorised pass (a layer's plan is
  // per example shape, not per chunk). On a CPU over the smallest chunk the search tries: times there
  // grow with the chunk alike for every strategy. On a GPU over the largest: they do not (on an
  // H200, cuDNN's grouped weight gradient in float32 was the fastest for 8 examples and took 93 of
  // a step's 190 ms for 64; docs/gpus.md).
  const bool search = s.requested != EnginePath::vectorised && s.may_shrink_chunk;
  // On a CPU the time per example stops falling once a chunk holds a few cache-sized slices of rows
  // (64 rows: B 64 x K 1 and B 32 x K 8 alike), while its memory keeps growing with it; a GPU is
  // kept busy by wide chunks.
  const bool on_gpu = !model.parameters().empty() && model.parameters().front().device().is_cuda();
  const std::int64_t max_rows = on_gpu ? std::numeric_limits<std::int64_t>::max() : 64;
  const std::vector<std::int64_t> chunks = chunks_to_try(s.chunk, search, s.group, max_rows);
  const std::int64_t calibrated = on_gpu ? chunks.back() : chunks.front();
  seconds_per_example(EnginePath::vectorised, model, s, calibrated, planner);
  planner.freeze();
  plan.path = EnginePath::vectorised;
  if (s.requested == EnginePath::vectorised) return plan;
  const auto trial = [&](std::int64_t chunk) {  // a warm-up, then the better of two timings
    if (chunk != calibrated) seconds_per_example(EnginePath::vectorised, model, s, chunk, planner);
    const double t = std::min(seconds_per_example(EnginePath::vectorised, model, s, chunk, planner),
                              seconds_per_example(EnginePath::vectorised, model, s, chunk, planner));
    plan.seconds_per_example["vectorised/" + std::to_string(chunk)] = t;
    return t;
  };
  plan.chunk = fastest_chunk(chunks, trial);
  const double best = plan.seconds_per_example.at("vectorised/" + std::to_string(plan.chunk));
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
  if (path == EnginePath::vectorised) out["clip_passes"] = to_string(passes);
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
