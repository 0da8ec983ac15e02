#include <privdiff/evaluation/validation_split.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <stdexcept>
#include <string>

namespace privdiff::sdk::evaluation {

TrainValidation split_for_validation(const LabelledImages& set, std::int64_t validation_count, std::uint64_t seed) {
  const std::int64_t n = set.count();
  const std::int64_t validation = std::max<std::int64_t>(1, validation_count);
  if (n - validation < 1) {
    throw std::invalid_argument("too few images to train a classifier: " + std::to_string(n) + " images, " +
                                std::to_string(validation) + " of them held out for validation");
  }
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::Tensor order = at::randperm(n, generator, at::kLong);
  const at::Tensor held_out = order.narrow(0, 0, validation), rest = order.narrow(0, validation, n - validation);
  TrainValidation out;
  out.train = {set.images.index_select(0, rest), set.labels.index_select(0, rest)};
  out.validation = {set.images.index_select(0, held_out), set.labels.index_select(0, held_out)};
  return out;
}

}  // namespace privdiff::sdk::evaluation
