#pragma once
/// @file
/// The form in which two captions are compared when privdiff asks whether a text is one of the
/// private captions (the data-identity service, prompts): Unicode NFKC with case folding
/// (NFKC_Casefold: "Ｔｈｅ" and "the" agree, so do ligatures and full-width forms), punctuation
/// (general category P*) read as white space, every run of white space one space, none at either
/// end: "A red-dress,  smiling." and "a red dress smiling" have one matching form.
/// Part of libprivdiff_text (ICU).

#include <privdiff/sdk_api.hpp>

#include <string>

namespace privdiff::sdk {

/// std::invalid_argument for text that is not valid UTF-8.
PRIVDIFF_SDK_API std::string matching_form(const std::string& caption);

}  // namespace privdiff::sdk
