#pragma once
/// @file
/// Small pieces every per-example layer needs (the SDK's own layers and a plugin's alike): which of
/// its parameters train, how a call's rows group into examples, and per-example row scaling.

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace privdiff::sdk::engine {

/// The tensors of `parameters` that are defined and require gradients, in order: what a layer's
/// trainable_parameters() returns, and the order its per_example()/scaled_sum() results follow.
PRIVDIFF_SDK_API std::vector<at::Tensor> trainable_only(std::initializer_list<at::Tensor> parameters);
/// True when `parameter` is defined and requires gradients.
PRIVDIFF_SDK_API bool is_trainable(const at::Tensor& parameter);
/// The number of examples in a call of `rows.size(0)` rows, `group` consecutive rows per example
/// (noise multiplicity K). Throws std::invalid_argument when the rows do not divide evenly.
PRIVDIFF_SDK_API std::int64_t rows_per_example(const at::Tensor& rows, std::int64_t group);
/// The loss of each of `n` examples from the loss's per-row values (`group` rows per example, the
/// mean of each example's rows). Throws std::invalid_argument when there are not n * group values.
PRIVDIFF_SDK_API at::Tensor example_means(const at::Tensor& rows, std::int64_t n, std::int64_t group);
/// `g` ([N, ...], N = B * group) with each example's `group` rows multiplied by that example's
/// entry of `scale` ([B]): the output gradient of a scaled_sum().
PRIVDIFF_SDK_API at::Tensor scale_rows(const at::Tensor& g, const at::Tensor& scale, std::int64_t group);
/// sum over rows r of scale[r / group] * per_row[r] for per_row [N, ...] -> [...]: a scaled sum of
/// quantities already reduced per row (a bias's or a norm layer's), as one matrix-vector product
/// instead of scaling the whole output gradient.
PRIVDIFF_SDK_API at::Tensor weighted_row_sum(const at::Tensor& per_row, const at::Tensor& scale, std::int64_t group);

}  // namespace privdiff::sdk::engine
