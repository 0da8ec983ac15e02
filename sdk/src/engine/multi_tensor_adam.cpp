#include <privdiff/engine/multi_tensor_adam.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>

namespace privdiff::sdk::engine {

namespace {

// LibTorch keys a parameter's state by its TensorImpl: as text in 1.13, as the pointer since 2.x.
template <class Map>
typename Map::key_type state_key(const at::Tensor& p) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    std::ostringstream text;  // as c10::guts::to_string wrote it
    text << p.unsafeGetTensorImpl();
    return text.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

// The parameters of a group that take this step, as lists, by their state's step count: the bias
// corrections are one scalar per list (a parameter that missed a step has a count of its own).
struct StepLists {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;
};

template <class State, class Map>
std::map<int64_t, StepLists> lists_of(torch::optim::OptimizerParamGroup& group, Map& states) {
  std::map<int64_t, StepLists> out;
  for (auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    auto& slot = states[state_key<Map>(p)];
    if (!slot) {  // as LibTorch starts it
      auto state = std::make_unique<State>();
      state->step(0);
      state->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
      state->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      slot = std::move(state);
    }
    auto& state = static_cast<State&>(*slot);
    state.step(state.step() + 1);
    auto& lists = out[state.step()];
    lists.params.push_back(p);
    lists.grads.push_back(p.grad());
    lists.exp_avgs.push_back(state.exp_avg());
    lists.exp_avg_sqs.push_back(state.exp_avg_sq());
  }
  return out;
}

// LibTorch's Adam arithmetic (torch/csrc/api/src/optim/adam.cpp), tensor by tensor the same operations.
template <class Options>
void adam_update(StepLists& l, int64_t step, const Options& o, bool decoupled_weight_decay) {
  const auto [beta1, beta2] = o.betas();
  const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
  std::vector<at::Tensor> grads = l.grads;
  if (o.weight_decay() != 0) {
    if (decoupled_weight_decay) at::_foreach_mul_(l.params, 1 - o.lr() * o.weight_decay());
    else grads = at::_foreach_add(l.grads, l.params, o.weight_decay());
  }
  at::_foreach_mul_(l.exp_avgs, beta1);
  at::_foreach_add_(l.exp_avgs, grads, 1 - beta1);
  at::_foreach_mul_(l.exp_avg_sqs, beta2);
  at::_foreach_addcmul_(l.exp_avg_sqs, grads, grads, 1 - beta2);
  std::vector<at::Tensor> denominators = at::_foreach_sqrt(l.exp_avg_sqs);
  at::_foreach_div_(denominators, std::sqrt(bias_correction2));
  at::_foreach_add_(denominators, o.eps());
  at::_foreach_addcdiv_(l.params, l.exp_avgs, denominators, -o.lr() / bias_correction1);
}

template <class State, class Options, class Optimizer>
bool multi_tensor_step(Optimizer& optimizer, bool decoupled_weight_decay) {
  for (auto& group : optimizer.param_groups()) {
    if (static_cast<Options&>(group.options()).amsgrad()) return false;
    for (auto& p : group.params()) {
      if (p.grad().defined() && p.grad().is_sparse()) return false;
    }
  }
  at::NoGradGuard no_grad;
  for (auto& group : optimizer.param_groups()) {
    const auto& options = static_cast<Options&>(group.options());
    for (auto& [step, lists] : lists_of<State>(group, optimizer.state())) {
      adam_update(lists, step, options, decoupled_weight_decay);
    }
  }
  return true;
}

at::Tensor closure_loss(const torch::optim::Optimizer::LossClosure& closure) {
  if (closure == nullptr) return {};
  at::AutoGradMode enable_grad(true);
  return closure();
}

}  // namespace

at::Tensor MultiTensorAdam::step(LossClosure closure) {
  at::Tensor loss = closure_loss(closure);
  if (!multi_tensor_step<torch::optim::AdamParamState, torch::optim::AdamOptions>(*this, false)) {
    torch::optim::Adam::step(nullptr);
  }
  return loss;
}

at::Tensor MultiTensorAdamW::step(LossClosure closure) {
  at::Tensor loss = closure_loss(closure);
  if (!multi_tensor_step<torch::optim::AdamWParamState, torch::optim::AdamWOptions>(*this, true)) {
    torch::optim::AdamW::step(nullptr);
  }
  return loss;
}

void update_moving_average(std::vector<at::Tensor>& ema, const std::vector<at::Tensor>& params, double rate) {
  if (ema.empty()) return;
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p.detach());
  at::_foreach_mul_(ema, rate);
  at::_foreach_add_(ema, values, 1 - rate);
}

}  // namespace privdiff::sdk::engine
