#pragma once
/// @file
/// A tensor shape as messages print it: "[2, 1, 3, 3]".

#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>

namespace privdiff::sdk {

inline std::string shape_text(c10::IntArrayRef sizes) {
  std::string out = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (i) out += ", ";  // appended piece by piece: GCC 12 warns (-Wrestrict) on a chained +
    out += std::to_string(sizes[i]);
  }
  return out + "]";
}

}  // namespace privdiff::sdk
