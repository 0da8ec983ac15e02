#pragma once
// What the benchmark executables share to read their command lines.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace privdiff::bench {

/// A positive integer argument, or std::invalid_argument naming it.
inline std::int64_t positive(const char* text, const char* name) {
  std::size_t end = 0;
  std::int64_t value = 0;
  try {
    value = std::stoll(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  if (end == 0 || text[end] != '\0' || value < 1) {
    throw std::invalid_argument(std::string(name) + " must be a positive integer, got '" + text + "'");
  }
  return value;
}

}  // namespace privdiff::bench
