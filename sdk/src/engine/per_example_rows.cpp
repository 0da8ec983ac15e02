#include <privdiff/engine/per_example_rows.hpp>

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

namespace privdiff::sdk::engine {

bool is_trainable(const at::Tensor& parameter) { return parameter.defined() && parameter.requires_grad(); }

std::vector<at::Tensor> trainable_only(std::initializer_list<at::Tensor> parameters) {
  std::vector<at::Tensor> out;
  for (const auto& p : parameters) {
    if (is_trainable(p)) out.push_back(p);
  }
  return out;
}

std::int64_t rows_per_example(const at::Tensor& rows, std::int64_t group) {
  if (rows.size(0) % group != 0) {
    throw std::invalid_argument("per-example gradients: " + std::to_string(rows.size(0)) +
                                " rows are not a multiple of the group size " + std::to_string(group));
  }
  return rows.size(0) / group;
}

namespace {
at::Tensor row_scales(const at::Tensor& scale, std::int64_t group, at::ScalarType type) {
  const at::Tensor s = scale.to(type);
  return group == 1 ? s : s.repeat_interleave(group);
}
}  // namespace

at::Tensor example_means(const at::Tensor& rows, std::int64_t n, std::int64_t group) {
  if (rows.numel() != n * group) {
    throw std::invalid_argument("per-example gradients: the loss returned " + std::to_string(rows.numel()) +
                                " values for " + std::to_string(n) + " examples x " + std::to_string(group) +
                                " rows");
  }
  return rows.reshape({n, group}).mean(1);
}

at::Tensor scale_rows(const at::Tensor& g, const at::Tensor& scale, std::int64_t group) {
  std::vector<std::int64_t> shape(static_cast<std::size_t>(g.dim()), 1);
  shape[0] = g.size(0);
  return g * row_scales(scale, group, g.scalar_type()).view(shape);
}

at::Tensor weighted_row_sum(const at::Tensor& per_row, const at::Tensor& scale, std::int64_t group) {
  const at::Tensor weights = row_scales(scale, group, per_row.scalar_type());
  return at::matmul(weights.unsqueeze(0), per_row.reshape({per_row.size(0), -1})).reshape(per_row.sizes().slice(1));
}

}  // namespace privdiff::sdk::engine
