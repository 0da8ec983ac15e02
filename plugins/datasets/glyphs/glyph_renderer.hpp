#pragma once
// Renders characters with FreeType into small grey images with random scale, shift, rotation and
// stroke width: the glyphs dataset's generator. Deterministic for a given seed and font files.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace privdiff::plugins::glyphs {

struct GlyphStyle {
  std::int64_t image_size = 28;
  double scale_min = 0.6, scale_max = 0.95;  ///< glyph em height as a fraction of the image
  double max_rotation_degrees = 12;
  double max_shift_pixels = 2;
  double stroke_min = -0.4, stroke_max = 1.2;  ///< outline emboldening in pixels (negative: thinner)
  double fill_max = 0;  ///< enclosed interiors' grey (fraction of white) drawn from [fill_max/2, fill_max]; 0: no fill
};

/// Paints the pixels of a size x size image that the glyph's strokes enclose (not reachable from the
/// border without crossing a stroke dilated by one pixel, so hairline gaps still close) with grey,
/// where they are darker: an outline pictogram becomes a silhouette.
void fill_enclosed(std::uint8_t* image, std::int64_t size, std::uint8_t grey);

/// Decodes UTF-8 into code points; throws std::invalid_argument for malformed text.
std::vector<char32_t> code_points(const std::string& utf8);

/// "U+0378": a code point as Unicode writes it, for messages.
std::string code_point_name(char32_t c);

/// How one image was drawn (what its caption can say): the font (an index into the fonts given), the
/// glyph's height as a fraction of the image, its rotation (degrees, positive = anticlockwise) and the
/// extra stroke width (pixels).
struct GlyphDraw {
  std::size_t font = 0;
  double scale = 0, rotation_degrees = 0, stroke = 0;
};

/// A font as a caption names it: its family ("DejaVu Serif") and FreeType's bold and italic flags.
struct FontLook {
  std::string family;
  bool bold = false, italic = false;
};

/// per_class images of each character (example i has class i % characters), uint8
/// [N, 1, size, size] and labels [N]; `draws` (when given) gets each image's GlyphDraw. Each image
/// draws its font among those that have the character. Throws std::runtime_error naming a font that
/// cannot be opened, std::invalid_argument naming a character no font has.
void render_glyphs(const std::vector<std::filesystem::path>& fonts, const std::vector<char32_t>& characters,
                   std::int64_t per_class, std::uint64_t seed, const GlyphStyle& style, at::Tensor& images,
                   at::Tensor& labels, std::vector<GlyphDraw>* draws = nullptr);

/// Each font's look, in order. Throws std::runtime_error naming a font that cannot be opened.
std::vector<FontLook> font_looks(const std::vector<std::filesystem::path>& fonts);

}  // namespace privdiff::plugins::glyphs
