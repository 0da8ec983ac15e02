#include "unicode.hpp"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>
#include <unicode/utf8.h>

#include <stdexcept>

namespace privdiff::sdk::unicode {
namespace {

std::u16string to_utf16(std::u32string_view text) {
  std::u16string out;
  out.reserve(text.size());
  for (const char32_t c : text) {
    if (U_IS_BMP(c)) {
      out.push_back(static_cast<char16_t>(c));
    } else {
      out.push_back(static_cast<char16_t>(U16_LEAD(c)));
      out.push_back(static_cast<char16_t>(U16_TRAIL(c)));
    }
  }
  return out;
}

std::u32string to_utf32(const std::u16string& text) {
  std::u32string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    UChar32 c = 0;
    U16_NEXT(text.data(), i, text.size(), c);
    out.push_back(static_cast<char32_t>(c));
  }
  return out;
}

void check(UErrorCode status, const char* what) {
  if (U_FAILURE(status)) throw std::runtime_error(std::string("ICU ") + what + ": " + u_errorName(status));
}

std::u32string normalize(const UNormalizer2* form, std::u32string_view text) {
  const std::u16string source = to_utf16(text);
  UErrorCode status = U_ZERO_ERROR;
  const auto length = static_cast<int32_t>(source.size());
  std::u16string out(static_cast<std::size_t>(length) * 4 + 16, u'\0');
  int32_t got = unorm2_normalize(form, reinterpret_cast<const UChar*>(source.data()), length,
                                 reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &status);
  if (status == U_BUFFER_OVERFLOW_ERROR) {  // (NFKC expands a character into up to 18)
    out.assign(static_cast<std::size_t>(got), u'\0');
    status = U_ZERO_ERROR;
    got = unorm2_normalize(form, reinterpret_cast<const UChar*>(source.data()), length,
                           reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &status);
  }
  check(status, "normalization");
  out.resize(static_cast<std::size_t>(got));
  return to_utf32(out);
}

// Unicode 8.0's view: a code point assigned after 8.0 is unassigned there.
bool known_to_unicode_8(char32_t c) {
  UVersionInfo age;
  u_charAge(static_cast<UChar32>(c), age);
  return age[0] < 8 || (age[0] == 8 && age[1] == 0);
}

bool legacy_in(char32_t c, uint32_t mask) {
  return known_to_unicode_8(c) && (U_GET_GC_MASK(static_cast<UChar32>(c)) & mask) != 0;
}

}  // namespace

std::u32string decode(std::string_view utf8) {
  if (utf8.size() > static_cast<std::size_t>(INT32_MAX)) throw std::invalid_argument("a text of 2 GiB or more");
  std::u32string out;
  out.reserve(utf8.size());
  const auto* bytes = reinterpret_cast<const uint8_t*>(utf8.data());
  const auto length = static_cast<int32_t>(utf8.size());
  for (int32_t i = 0; i < length;) {
    const int32_t at = i;
    UChar32 c = 0;
    U8_NEXT(bytes, i, length, c);
    if (c < 0) throw std::invalid_argument("not valid UTF-8 at byte " + std::to_string(at));
    out.push_back(static_cast<char32_t>(c));
  }
  return out;
}

std::string encode(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char32_t c : text) {
    uint8_t buffer[U8_MAX_LENGTH];
    int32_t n = 0;
    U8_APPEND_UNSAFE(buffer, n, static_cast<UChar32>(c));
    out.append(reinterpret_cast<const char*>(buffer), static_cast<std::size_t>(n));
  }
  return out;
}

std::u32string nfc(std::u32string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* form = unorm2_getNFCInstance(&status);
  check(status, "NFC");
  return normalize(form, text);
}

std::u32string nfd(std::u32string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* form = unorm2_getNFDInstance(&status);
  check(status, "NFD");
  return normalize(form, text);
}

std::u32string nfkc_casefold(std::u32string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* form = unorm2_getNFKCCasefoldInstance(&status);
  check(status, "NFKC_Casefold");
  return normalize(form, text);
}

std::u32string lower_each(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (const char32_t c : text) {
    const std::u16string one = to_utf16(std::u32string_view(&c, 1));
    UChar lowered[8];
    UErrorCode status = U_ZERO_ERROR;
    const int32_t n = u_strToLower(lowered, 8, reinterpret_cast<const UChar*>(one.data()),
                                   static_cast<int32_t>(one.size()), "", &status);
    check(status, "lower case");
    out += to_utf32(std::u16string(reinterpret_cast<const char16_t*>(lowered), static_cast<std::size_t>(n)));
  }
  return out;
}

bool is_white_space(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)) != 0; }
bool is_letter(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_L_MASK) != 0; }
bool is_number(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_N_MASK) != 0; }
bool is_punctuation(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_P_MASK) != 0; }
bool is_symbol(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_S_MASK) != 0; }
bool is_nonspacing_mark(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_MN_MASK) != 0; }

bool legacy_is_other(char32_t c) { return legacy_in(c, U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CO_MASK); }
bool legacy_is_nonspacing_mark(char32_t c) { return legacy_in(c, U_GC_MN_MASK); }
bool legacy_is_punctuation(char32_t c) { return legacy_in(c, U_GC_P_MASK); }

}  // namespace privdiff::sdk::unicode
