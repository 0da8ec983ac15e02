#pragma once
/// @file
/// KeyValueError: a recipe value its key's schema accepts but that cannot be used where it is.

#include <privdiff/sdk_api.hpp>

#include <stdexcept>
#include <string>

namespace privdiff::sdk {

/// Thrown by a component (or by the SDK on its behalf) for a recipe value that passed its schema but
/// cannot be used, e.g. an adapter's `targets` that is not a regular expression or matches no layer of
/// the model, or a class the data do not have. It is bad input: the host reports it at the key's place
/// in the recipe (`recipe.toml:12:11: adapter.targets: <problem>`) and exits with code 2. what() is
/// "<key_path>: <problem>", so code that catches std::invalid_argument still sees which key.
class PRIVDIFF_SDK_API KeyValueError : public std::invalid_argument {
 public:
  /// `key_path`: the recipe key path, e.g. "adapter.targets" (Config::path() + "." + key);
  /// `problem`: what is wrong with its value, without the key.
  KeyValueError(const std::string& key_path, const std::string& problem);
  ~KeyValueError() override;
  const std::string& key_path() const { return key_path_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string key_path_;
  std::string problem_;
};

}  // namespace privdiff::sdk
