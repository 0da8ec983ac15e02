#include <privdiff/engine/capture.hpp>

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

void record_if_capturing(PerExampleLayer* layer, const at::Tensor& saved, const at::Tensor& output) {
  CaptureSession* session = CaptureSession::current();
  if (!session || !at::GradMode::is_enabled() || layer->trainable_parameters().empty()) return;
  session->record(layer, saved.detach(), output);
}

PerExampleLayer::~PerExampleLayer() = default;

}  // namespace privdiff::sdk::engine
