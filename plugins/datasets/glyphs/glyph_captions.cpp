#include "glyph_captions.hpp"

#include <cmath>

namespace privdiff::plugins::glyphs {

namespace {
std::string utf8(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}
}  // namespace

std::string default_glyph_name(char32_t c) {
  if (c >= U'A' && c <= U'Z') return "letter " + utf8(c);
  if (c >= U'a' && c <= U'z') return "small letter " + utf8(c);
  if (c >= U'0' && c <= U'9') return "digit " + utf8(c);
  return "sign " + utf8(c);
}

std::string glyph_caption(const std::string& name, const GlyphDraw& draw, const FontLook& font, const GlyphStyle& style) {
  const double third = (style.scale_max - style.scale_min) / 3;
  std::string caption = draw.scale < style.scale_min + third        ? "a small "
                        : draw.scale > style.scale_max - third      ? "a large "
                                                                    : "a medium-sized ";
  if (font.bold || draw.stroke > 0.6) {
    caption += "bold ";
  } else if (draw.stroke < 0) {
    caption += "thin ";
  }
  if (font.italic) caption += "italic ";
  caption += name;
  if (style.max_rotation_degrees > 0 && std::abs(draw.rotation_degrees) > style.max_rotation_degrees / 3) {
    caption += draw.rotation_degrees > 0 ? ", tilted left" : ", tilted right";
  } else {
    caption += ", upright";
  }
  return caption + ", in " + font.family + ".";
}

}  // namespace privdiff::plugins::glyphs
