#include <privdiff/text/caption_templates.hpp>

#include <privdiff/text/caption_sources.hpp>

#include <stdexcept>

namespace privdiff::sdk {

namespace {
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
}  // namespace

std::uint64_t caption_choice(std::uint64_t seed, std::int64_t record, std::uint64_t k, std::uint64_t n) {
  if (n == 0) throw std::invalid_argument("caption_choice: nothing to choose from");
  const std::uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ static_cast<std::uint64_t>(record)) ^ k);
  return h % n;  // (bias below 2^-50 for the n a caption set has)
}

std::vector<std::string> template_captions(const std::vector<std::int64_t>& labels,
                                           const std::vector<std::string>& class_names,
                                           const std::vector<std::string>& templates, std::uint64_t seed) {
  if (templates.empty()) throw std::invalid_argument("no caption template");
  std::vector<std::pair<std::string, std::string>> parts;  // (before "{}", after it)
  for (std::size_t t = 0; t < templates.size(); ++t) {
    const std::size_t at = templates[t].find("{}");
    if (at == std::string::npos || templates[t].find("{}", at + 2) != std::string::npos) {
      throw std::invalid_argument("template " + std::to_string(t) + " ('" + templates[t] +
                                  "'): needs exactly one {} (where the class name goes)");
    }
    if (const std::string why = caption_problem(templates[t]); !why.empty()) {
      throw std::invalid_argument("template " + std::to_string(t) + ": " + why);
    }
    parts.emplace_back(templates[t].substr(0, at), templates[t].substr(at + 2));
  }
  for (std::size_t k = 0; k < class_names.size(); ++k) {
    if (const std::string why = caption_problem(class_names[k]); !why.empty()) {
      throw std::invalid_argument("class name " + std::to_string(k) + ": " + why);
    }
  }
  std::vector<std::string> out;
  out.reserve(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::int64_t label = labels[i];
    if (label < 0 || label >= static_cast<std::int64_t>(class_names.size())) {
      throw std::invalid_argument("class " + std::to_string(label) + " has no name (" +
                                  std::to_string(class_names.size()) + " class names given)");
    }
    const auto& [before, after] = parts[caption_choice(seed, static_cast<std::int64_t>(i), 0, parts.size())];
    out.push_back(before + class_names[static_cast<std::size_t>(label)] + after);
  }
  return out;
}

const std::vector<std::string>& default_caption_templates() {
  static const std::vector<std::string> templates = {  // ("the": no article to agree with the name)
      "a photo of the {}.", "a picture of the {}.", "an image of the {}.", "a small photo of the {}.",
      "a grey photo of the {}.", "the {}.", "a close-up photo of the {}.", "a centred photo of the {}."};
  return templates;
}

}  // namespace privdiff::sdk
