#pragma once
/// @file
/// A JSON library error as a person reads it: nlohmann's "[json.exception.parse_error.101] parse error
/// at line 3, column 24: syntax error …" becomes "line 3, column 24: syntax error …", and
/// "[json.exception.out_of_range.403] key 'private' not found" "key 'private' not found". For messages
/// that name the file themselves ("FILE: not valid JSON (line 3, column 24: …)").

#include <privdiff/sdk_api.hpp>

#include <exception>
#include <string>

namespace privdiff::sdk {

/// e.what() without the library's "[json.exception.…] " tag (and "parse error at "); other texts as they are.
PRIVDIFF_SDK_API std::string json_error_text(const std::exception& e);

}  // namespace privdiff::sdk
