// Pre-flight, the data: open every dataset the stages train on (and what earlier stages release),
// fingerprint them by content, and refuse data the model cannot take.
#include "recipe/safe_name.hpp"
#include "run/run_session.hpp"

#include "sample/sample_set.hpp"
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/image_dataset.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

void RunOrchestrator::open_datasets(RunSession& s) {
  auto is_section = [&](const std::string& name) {
    return std::any_of(recipe_.datasets.begin(), recipe_.datasets.end(), [&](const DataSection& d) { return d.name == name; });
  };
  // A release is per class of the model's (public) classes: a model without classes cannot have one.
  auto refuse_release_without_classes = [&](std::size_t j) {
    if (public_classes() < 1 && components_.mechanisms.at(j)->released_examples(s.stage_sizes.at(j), 1) > 0) {
      throw std::runtime_error("stage[" + std::to_string(j) + "] '" + recipe_.stages[j].name + "' releases images per "
                               "class: the model must be class-conditional (set [model] num_classes)");
    }
  };
  for (std::size_t i = 0; i < recipe_.stages.size(); ++i) {
    const StageSection& stage = recipe_.stages[i];
    if (stage.data.empty()) {
      throw std::runtime_error("data: the recipe's stages need data: add a [data] section with dataset = \"...\" "
                               "(e.g. \"fashion-mnist\"), or [data.NAME] sections that stages name with data = \"NAME\"");
    }
    // The public data its mechanism reads besides its own (PrivImage's semantic query).
    if (const auto extra = components_.mechanisms.at(i)->public_data_name()) {
      if (!is_section(*extra)) {
        throw std::runtime_error("stage[" + std::to_string(i) + "] '" + stage.name + "': public_data = '" + *extra +
                                 "' names no dataset section (add [data." + *extra + "] with public data, e.g. "
                                 "dataset = \"glyphs\")");
      }
      if (!s.datasets.count(*extra)) s.datasets[*extra] = open_dataset_(recipe_.dataset(*extra));
    }
    if (is_section(stage.data)) {
      if (!s.datasets.count(stage.data)) s.datasets[stage.data] = open_dataset_(recipe_.dataset(stage.data));
      s.stage_sizes.push_back(s.datasets.at(stage.data)->size());
      continue;
    }
    // The data an earlier stage releases (the validator allows only earlier stages' names).
    std::size_t j = 0;
    while (j < i && recipe_.stages[j].name != stage.data) ++j;
    if (j == i) {
      throw std::runtime_error("stage[" + std::to_string(i) + "] '" + stage.name + "': no dataset or earlier stage is "
                               "named '" + stage.data + "'");
    }
    // How much is released depends on public configuration only (the model's classes), never on
    // the private labels.
    refuse_release_without_classes(j);
    const std::int64_t count = components_.mechanisms.at(j)->released_examples(s.stage_sizes.at(j), public_classes());
    if (count < 1) {
      throw std::runtime_error("stage[" + std::to_string(i) + "] '" + stage.name + "': data = '" + stage.data +
                               "' names stage '" + stage.data + "', whose mechanism '" +
                               recipe_.stages[j].mechanism.id + "' releases no data");
    }
    s.released[stage.data] = j;
    s.stage_sizes.push_back(count);
  }
  // Also the releases no later stage names.
  for (std::size_t i = 0; i < recipe_.stages.size(); ++i) refuse_release_without_classes(i);
  // What each dataset holds, by content: the data-use rules compare records, not names.
  for (const auto& [name, data] : s.datasets) {
    DatasetIdentity identity = dataset_identity(*data, &s.log);
    // Captions made from the recipe's templates and class names are public text: one says a record's
    // label, which class-conditional sampling names too, and no record's own words. Prompts are not
    // held against them (they still enter the ordered digest).
    if (is_section(name)) {
      const sdk::Config& config = recipe_.dataset(name).dataset.config;
      if (config.has("captions") && config.get_string("captions") == "templates") identity.captions.clear();
    }
    s.identities.emplace(name, std::move(identity));
    check_data_fits_model(name, *data, trained_on(name));
  }
}

void RunOrchestrator::check_public_data(const RunSession& s) const {
  // The mechanism's own rules for the public data it reads (e.g. no more classes selected than it
  // has), once the data-use rules found it public, before any run directory is made: a
  // KeyValueError is reported at its key (file:line).
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
    const auto name = components_.mechanisms[i]->public_data_name();
    if (!name) continue;
    const sdk::Dataset& data = *s.datasets.at(*name);
    try {
      components_.mechanisms[i]->check_public_data(data);
    } catch (const sdk::KeyValueError&) {
      throw;
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error("stage[" + std::to_string(i) + "] '" + recipe_.stages[i].name + "': public data " +
                               data.name() + ": " + e.what());
    }
  }
}

std::int64_t RunOrchestrator::public_classes() const {
  return recipe_.model ? model_classes(recipe_.model->config) : 0;
}

bool RunOrchestrator::trained_on(const std::string& name) const {
  return std::any_of(recipe_.stages.begin(), recipe_.stages.end(), [&](const StageSection& s) { return s.data == name; });
}

void RunOrchestrator::check_data_fits_model(const std::string& name, const sdk::Dataset& data, bool labels) const {
  // Input validation before anything is written (seen only by whoever holds the data): data the
  // model cannot take would otherwise fail mid-run, or train without a word on what it cannot be.
  if (!components_.model || data.size() == 0) return;
  const std::string& section = recipe_.dataset(name).path;
  const at::Tensor first = data.images(at::arange(1, at::kLong));
  if (!first.defined()) return;  // (test stand-ins without content)
  const auto shape = first.sizes().vec();
  const auto wanted = components_.model->image_shape();
  auto text = [](const std::vector<std::int64_t>& s) {
    std::string t;
    for (std::size_t i = 0; i < s.size(); ++i) t += (i ? "x" : "") + std::to_string(s[i]);
    return t;
  };
  if (shape.size() != 4 || std::vector<std::int64_t>(shape.begin() + 1, shape.end()) != wanted) {
    throw std::runtime_error(section + ": " + data.name() + " holds " +
                             text(std::vector<std::int64_t>(shape.begin() + 1, shape.end())) + " images (channels x "
                             "height x width), but the model takes " + text(wanted) + " (set [model] image_channels "
                             "and image_size to match the data)");
  }
  // A model that conditions on text learns from each record's caption; uncaptioned data would fail at
  // its first step.
  if (labels && components_.model->conditions_on_text() && !data.has_captions()) {
    throw std::runtime_error(section + ": " + data.name() + " has no captions, but the model (" + recipe_.model->id +
                             ") conditions on text and trains on each record's caption (set " + section +
                             ".captions: docs/captions.md)");
  }
  // A label the model has no class for would fail mid-run, or train as the guidance null label.
  // (Data a mechanism only reads, such as the semantic query's public classes, keep their own labels.)
  const std::int64_t classes = public_classes();
  if (classes < 1 || !labels) return;
  const std::int64_t largest = data.labels(at::arange(data.size(), at::kLong)).max().item<std::int64_t>();
  if (largest >= classes) {
    throw std::runtime_error(section + ": " + data.name() + " has labels up to " + std::to_string(largest) +
                             ", but the model has num_classes = " + std::to_string(classes) + " (set [model] "
                             "num_classes to " + std::to_string(largest + 1) + ", or keep fewer classes with " +
                             section + ".classes)");
  }
}

fs::path RunOrchestrator::released_directory(const RunSession& s, const std::string& name) const {
  // The validator refuses such names with their place; this keeps any other way in from writing a
  // release outside the run directory.
  if (!is_safe_name(name)) throw std::runtime_error("stage name '" + name + "' is not " + safe_name_rule);
  return s.run_dir / ("released-" + name);
}

void RunOrchestrator::open_released(RunSession& s, const std::string& name, std::int64_t classes) const {
  sdk::LabelledBytes bytes = sdk::read_idx_split(released_directory(s, name), "train");
  bytes.num_classes = classes;
  s.datasets[name] = std::make_unique<sdk::ImageDataset>(
      std::move(bytes), true, "data released by stage '" + name + "' (" + s.run_dir.string() + ")");
}

}  // namespace privdiff::core
