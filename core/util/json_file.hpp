#pragma once
// A JSON report read from a file, with the file named when it is not valid JSON.

#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/json_error.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <stdexcept>

namespace privdiff::core {

/// Throws std::runtime_error "PATH: not valid JSON (...)", or read_file's error when it cannot be read.
inline nlohmann::json read_json_file(const std::filesystem::path& path) {
  try {
    return nlohmann::json::parse(sdk::read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + ": not valid JSON (" + privdiff::sdk::json_error_text(e) + ")");
  }
}

}  // namespace privdiff::core
