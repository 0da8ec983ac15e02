#pragma once
/// @file
/// The recipe keys with which a dataset plugin makes captions from its classes (header-only, for
/// plugins that link privdiff::sdk and privdiff::text):
///   captions          = "templates"    (the plugin's own `captions` key lists it among its choices)
///   class_names       = ["T-shirt", …] one name per class; [] = the dataset's own names
///   caption_templates = ["a photo of the {}.", …]; [] = default_caption_templates()
///   caption_seed      = 0              which template each record gets (caption_choice)
/// A template caption says nothing a label does not: it lets a text-conditioned model train on labelled
/// data, and a prompt name the class.

#include <privdiff/config/config.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/config/schema.hpp>
#include <privdiff/text/caption_templates.hpp>

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace privdiff::sdk {

/// Adds class_names (defaulting to `default_names`), caption_templates and caption_seed to `schema`.
inline Schema& add_template_caption_keys(Schema& schema, const std::vector<std::string>& default_names = {}) {
  schema
      .add(Key::string_list("class_names").defaults(ConfigValue{default_names})
               .doc("captions = \"templates\": one name per class, in label order ([] = the dataset's own names, "
                    "where it has them)"))
      .add(Key::string_list("caption_templates").defaults(ConfigValue{std::vector<std::string>{}})
               .doc("captions = \"templates\": caption patterns, each with one {} for the class name; each record "
                    "draws one by caption_seed ([] = privdiff's eight, docs/text.md)"))
      .add(Key::integer("caption_seed").at_least(0).defaults(0)
               .doc("which template (or phrase order) each record's caption gets"));
  return schema;
}

/// The captions of records labelled `labels` under c's keys; `own_names` are the dataset's class names
/// (empty where it has none). KeyValueError at the key for a wrong count of names or a bad template.
inline std::vector<std::string> template_captions_from(const Config& c, const at::Tensor& labels,
                                                       std::int64_t num_classes,
                                                       const std::vector<std::string>& own_names) {
  std::vector<std::string> names = c.get_string_list("class_names");
  if (names.empty()) names = own_names;
  if (static_cast<std::int64_t>(names.size()) != num_classes) {
    throw KeyValueError(c.path() + ".class_names",
                        names.empty() ? "this dataset names no classes: give one name per class (" +
                                            std::to_string(num_classes) + ")"
                                      : std::to_string(names.size()) + " names for " + std::to_string(num_classes) +
                                            " classes (one per class, in label order)");
  }
  std::vector<std::string> templates = c.get_string_list("caption_templates");
  if (templates.empty()) templates = default_caption_templates();
  const at::Tensor l = labels.to(at::kCPU).to(at::kLong).contiguous();
  const std::vector<std::int64_t> values(l.data_ptr<std::int64_t>(), l.data_ptr<std::int64_t>() + l.numel());
  try {
    return template_captions(values, names, templates, static_cast<std::uint64_t>(c.get_int("caption_seed")));
  } catch (const std::invalid_argument& e) {
    throw KeyValueError(c.path() + ".caption_templates", e.what());
  }
}

}  // namespace privdiff::sdk
