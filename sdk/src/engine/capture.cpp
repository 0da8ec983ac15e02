#include <privdiff/engine/capture.hpp>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace privdiff::sdk::engine {

namespace {
thread_local CaptureSession* active_session = nullptr;
}

CaptureSession::CaptureSession() : previous_(active_session) { active_session = this; }
CaptureSession::~CaptureSession() { active_session = previous_; }
CaptureSession* CaptureSession::current() { return active_session; }

void CaptureSession::record(PerExampleLayer* layer, at::Tensor saved, at::Tensor output) {
  const std::int64_t version = static_cast<std::int64_t>(output._version());
  calls_.push_back({layer, std::move(saved), std::move(output), version});
}

bool will_record(const PerExampleLayer* layer) {
  return CaptureSession::current() && at::GradMode::is_enabled() && !layer->trainable_parameters().empty();
}

void record_if_capturing(PerExampleLayer* layer, const at::Tensor& saved, const at::Tensor& output) {
  if (will_record(layer)) CaptureSession::current()->record(layer, saved.detach(), output);
}

PerExampleLayer::~PerExampleLayer() = default;

std::vector<NormCandidate> PerExampleLayer::norm_candidates(const CapturedCall&, std::int64_t) const {
  return {{NormStrategy::materialised, 0.0}};
}

std::vector<at::Tensor> PerExampleLayer::per_example_squared_norms(const CapturedCall& call, const at::Tensor& output_grad,
                                                                   std::int64_t group, NormStrategy strategy) const {
  std::vector<at::Tensor> gradients = per_example_by(call, output_grad, group, strategy);
  return squared_norms_of(gradients.empty() ? per_example(call, output_grad, group) : gradients);
}

std::vector<at::Tensor> PerExampleLayer::per_example_by(const CapturedCall& call, const at::Tensor& output_grad,
                                                        std::int64_t group, NormStrategy strategy) const {
  if (strategy != NormStrategy::materialised) return {};
  return per_example(call, output_grad, group);
}

at::Tensor squared_norms_of(const at::Tensor& per_example) {
  return at::linalg_vector_norm(per_example.reshape({per_example.size(0), -1}), 2, {1}).to(at::kDouble).pow(2);
}

std::vector<at::Tensor> squared_norms_of(const std::vector<at::Tensor>& per_example) {
  std::vector<at::Tensor> out;
  for (const auto& g : per_example) out.push_back(squared_norms_of(g));
  return out;
}

}  // namespace privdiff::sdk::engine
