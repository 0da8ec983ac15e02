#pragma once
// The Unicode the tokenizers need, on ICU: UTF-8 in and out, NFC/NFD, case, and the character
// classes each reference tokenizer uses (its own Unicode version where it differs from ICU's).
// Private to sdk/src/text.

#include <string>
#include <string_view>

namespace privdiff::sdk::unicode {

/// The code points of `utf8`; std::invalid_argument "not valid UTF-8 at byte N" on an ill-formed
/// sequence (an overlong form, a surrogate, a cut-off sequence).
std::u32string decode(std::string_view utf8);
std::string encode(std::u32string_view text);

std::u32string nfc(std::u32string_view text);
std::u32string nfd(std::u32string_view text);
/// NFKC_Casefold: compatibility composition with full case folding (and default ignorables removed).
std::u32string nfkc_casefold(std::u32string_view text);
/// Each code point lower-cased on its own, with its full mapping (U+0130 → "i\u0307") and no context
/// (no final sigma): Rust's char::to_lowercase, which HF tokenizers' Lowercase applies.
std::u32string lower_each(std::u32string_view text);

/// The White_Space property (Rust's char::is_whitespace, Oniguruma's \s).
bool is_white_space(char32_t c);
bool is_letter(char32_t c);  // \p{L}
bool is_number(char32_t c);  // \p{N}
bool is_punctuation(char32_t c);  // \p{P}, today's Unicode (ICU's)
bool is_symbol(char32_t c);       // \p{S}
bool is_nonspacing_mark(char32_t c);  // \p{Mn}

/// The general categories as HF tokenizers' BERT normaliser and pre-tokeniser see them: through the
/// unicode_categories crate, whose tables are Unicode 8.0's, so a character assigned later is
/// unassigned there (not a control, a mark or punctuation, whatever it is today).
bool legacy_is_other(char32_t c);              // Cc, Cf, Co
bool legacy_is_nonspacing_mark(char32_t c);    // Mn
bool legacy_is_punctuation(char32_t c);        // Pc Pd Ps Pe Pi Pf Po

}  // namespace privdiff::sdk::unicode
