#pragma once
// The message of an exception without what follows its first line: LibTorch's errors carry a C++
// backtrace there, which a user-facing message must not.

#include <exception>
#include <string>

namespace privdiff::core {

inline std::string first_line(const std::exception& e) {
  std::string what = e.what();
  if (const auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
  return what;
}

}  // namespace privdiff::core
