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

at::Tensor scale_rows(const at::Tensor& g, const at::Tensor& scale, std::int64_t group) {
  std::vector<std::int64_t> shape(static_cast<std::size_t>(g.dim()), 1);
  shape[0] = g.size(0);
  return g * scale.to(g.scalar_type()).repeat_interleave(group).view(shape);
}

}  // namespace privdiff::sdk::engine
