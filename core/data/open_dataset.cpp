#include "data/open_dataset.hpp"

#include "data/class_subset.hpp"

#include <privdiff/config/key_value_error.hpp>

#include <stdexcept>

namespace privdiff::core {

std::unique_ptr<sdk::Dataset> open_dataset(const DataSection& section, const ComponentRegistry& registry) {
  const auto found = registry.find(sdk::ComponentKind::dataset, section.dataset.id);
  if (!found) throw std::runtime_error(section.path + ".dataset: no dataset '" + section.dataset.id + "' is loaded");
  std::unique_ptr<sdk::Dataset> data;
  try {
    auto component = found->registration->factory(section.dataset.config);
    data.reset(dynamic_cast<sdk::Dataset*>(component.get()));
    if (!data) throw std::runtime_error("the plugin's '" + section.dataset.id + "' is not a dataset");
    component.release();
  } catch (const sdk::KeyValueError&) {  // bad input at a key: the caller places it in the recipe
    throw;
  } catch (const std::exception& e) {
    throw std::runtime_error(section.path + ": " + e.what());
  }
  if (section.classes) data = keep_classes(std::move(data), *section.classes, section.path + ".classes");
  if (data->size() == 0) throw std::runtime_error(section.path + ": " + data->name() + " has no examples");
  return data;
}

}  // namespace privdiff::core
