#pragma once
/// @file
/// The form in which two captions are compared when privdiff asks whether a text is one of the
/// private captions (the data-identity service, prompts): Unicode NFKC with case folding
/// (NFKC_Casefold: "Ｔｈｅ" and "the" agree, so do ligatures and full-width forms), accents removed
/// (NFD, nonspacing marks dropped: "café" is "cafe", as BERT's tokenizer reads it), punctuation and
/// symbols (general categories P*, S*) read as white space, every run of white space one space, none at
/// either end: "A red-dress,  smiling." and "a red dress smiling" have one matching form, so have "a+b"
/// and "a + b". Coarser than any tokenizer here, so two captions a text encoder reads alike match.
/// Part of libprivdiff_text (ICU).

#include <privdiff/sdk_api.hpp>

#include <string>

namespace privdiff::sdk {

/// std::invalid_argument for text that is not valid UTF-8.
PRIVDIFF_SDK_API std::string matching_form(const std::string& caption);

}  // namespace privdiff::sdk
