#pragma once
// Compositional captions of rendered glyphs, from how each was drawn: size, weight, slant, tilt and
// font, e.g. "a large bold italic letter A, tilted left, in DejaVu Serif." Public data made here, so
// a text encoder can be pretrained on captions whose every word the image shows.

#include "glyph_renderer.hpp"

#include <string>

namespace privdiff::plugins::glyphs {

/// What a caption calls character c where the recipe gives no class_names: "letter A", "small letter
/// a", "digit 7"; any other character as "sign ✓".
std::string default_glyph_name(char32_t c);

/// The caption of a glyph named `name` drawn as `draw` in `font`: size by thirds of style's scale
/// range (small, medium-sized, large), bold (the font's or a stroke over 0.6 px) or thin (a negative
/// stroke), italic (the font's), upright or tilted (beyond a third of the largest rotation).
std::string glyph_caption(const std::string& name, const GlyphDraw& draw, const FontLook& font, const GlyphStyle& style);

}  // namespace privdiff::plugins::glyphs
