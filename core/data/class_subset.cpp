#include "data/class_subset.hpp"

#include <privdiff/config/key_value_error.hpp>

#include <ATen/ATen.h>

#include <stdexcept>

namespace privdiff::core {

namespace {

class ClassSubset : public sdk::Dataset {
 public:
  ClassSubset(std::unique_ptr<sdk::Dataset> data, at::Tensor rows) : data_(std::move(data)), rows_(std::move(rows)) {}
  std::int64_t size() const override { return rows_.numel(); }
  at::Tensor images(const at::Tensor& indices) const override { return data_->images(map(indices)); }
  at::Tensor labels(const at::Tensor& indices) const override { return data_->labels(map(indices)); }
  std::int64_t num_classes() const override { return data_->num_classes(); }
  bool has_captions() const override { return data_->has_captions(); }
  std::vector<std::string> captions(const at::Tensor& indices) const override { return data_->captions(map(indices)); }
  bool is_public() const override { return data_->is_public(); }
  std::string name() const override { return data_->name(); }

 private:
  at::Tensor map(const at::Tensor& indices) const { return rows_.index_select(0, indices.to(at::kLong)); }
  std::unique_ptr<sdk::Dataset> data_;
  at::Tensor rows_;
};

}  // namespace

std::unique_ptr<sdk::Dataset> keep_classes(std::unique_ptr<sdk::Dataset> data, const std::vector<std::int64_t>& classes,
                                           const std::string& key_path) {
  // Checked against the data's classes (num_classes: which labels the dataset has, not which records
  // it holds), never against the labels themselves (a refusal must not depend on private labels): a
  // class that exists but has no examples keeps none.
  const std::int64_t known = data->num_classes();
  for (std::int64_t c : classes) {
    if (c < 0 || c >= known) {
      throw sdk::KeyValueError(key_path, "class " + std::to_string(c) + " does not exist: " + data->name() + " has " +
                                             (known == 1 ? "class 0 only" : "classes 0-" + std::to_string(known - 1)));
    }
  }
  const at::Tensor labels = data->labels(at::arange(data->size(), at::kLong));
  at::Tensor keep = at::zeros({data->size()}, at::kBool);
  for (std::int64_t c : classes) keep = keep | (labels == c);
  return std::make_unique<ClassSubset>(std::move(data), at::nonzero(keep).flatten());
}

}  // namespace privdiff::core
