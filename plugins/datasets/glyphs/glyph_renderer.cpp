#include "glyph_renderer.hpp"

#include <ATen/ATen.h>
#include <ft2build.h>
#include FT_FREETYPE_H
#include FT_OUTLINE_H

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <stdexcept>

namespace privdiff::plugins::glyphs {

namespace {

// splitmix64: a small, portable generator (std:: distributions differ between libraries, and the
// dataset must be the same everywhere for a seed). Public data: no secrecy needed.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53; }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }

 private:
  std::uint64_t state_;
};

struct LibraryCloser {
  void operator()(FT_Library l) const { FT_Done_FreeType(l); }
};
struct FaceCloser {
  void operator()(FT_Face f) const { FT_Done_Face(f); }
};
using Library = std::unique_ptr<std::remove_pointer_t<FT_Library>, LibraryCloser>;
using Face = std::unique_ptr<std::remove_pointer_t<FT_Face>, FaceCloser>;

Library open_library() {
  FT_Library raw_library = nullptr;
  if (FT_Init_FreeType(&raw_library)) throw std::runtime_error("cannot initialise FreeType");
  return Library(raw_library);
}

std::vector<Face> open_faces(const Library& library, const std::vector<std::filesystem::path>& fonts) {
  std::vector<Face> faces;
  for (const auto& font : fonts) {
    FT_Face face = nullptr;
    if (FT_New_Face(library.get(), font.c_str(), 0, &face)) throw std::runtime_error(font.string() + ": cannot open the font");
    faces.emplace_back(face);
  }
  return faces;
}

}  // namespace

std::vector<FontLook> font_looks(const std::vector<std::filesystem::path>& fonts) {
  const Library library = open_library();
  std::vector<FontLook> looks;
  for (const Face& face : open_faces(library, fonts)) {
    looks.push_back({face->family_name ? face->family_name : "an unnamed font", (face->style_flags & FT_STYLE_FLAG_BOLD) != 0,
                     (face->style_flags & FT_STYLE_FLAG_ITALIC) != 0});
  }
  return looks;
}

std::string code_point_name(char32_t c) {
  char name[16];
  std::snprintf(name, sizeof name, "U+%04X", static_cast<unsigned>(c));
  return name;
}

std::vector<char32_t> code_points(const std::string& s) {
  std::vector<char32_t> out;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (extra < 0 || i + static_cast<std::size_t>(extra) >= s.size()) {
      throw std::invalid_argument("characters: not valid UTF-8");
    }
    char32_t cp = extra == 0 ? c : (c & (0x3F >> extra));
    for (int k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      if ((cc >> 6) != 0x2) throw std::invalid_argument("characters: not valid UTF-8");
      cp = (cp << 6) | (cc & 0x3F);
    }
    out.push_back(cp);
    i += static_cast<std::size_t>(extra) + 1;
  }
  return out;
}

namespace {

// The mask grown by one pixel (8-neighbourhood).
std::vector<char> dilated(const std::vector<char>& mask, std::int64_t size) {
  std::vector<char> out(mask.size(), 0);
  for (std::int64_t y = 0; y < size; ++y) {
    for (std::int64_t x = 0; x < size; ++x) {
      if (!mask[static_cast<std::size_t>(y * size + x)]) continue;
      for (std::int64_t v = std::max<std::int64_t>(y - 1, 0); v <= std::min(y + 1, size - 1); ++v) {
        for (std::int64_t u = std::max<std::int64_t>(x - 1, 0); u <= std::min(x + 1, size - 1); ++u) {
          out[static_cast<std::size_t>(v * size + u)] = 1;
        }
      }
    }
  }
  return out;
}

// Pixels reachable from the border without crossing a wall (4-neighbourhood flood fill).
std::vector<char> reachable_from_border(const std::vector<char>& wall, std::int64_t size) {
  std::vector<char> outside(wall.size(), 0);
  std::deque<std::int64_t> queue;
  const auto visit = [&](std::int64_t y, std::int64_t x) {
    if (y < 0 || y >= size || x < 0 || x >= size) return;
    const auto p = static_cast<std::size_t>(y * size + x);
    if (wall[p] || outside[p]) return;
    outside[p] = 1;
    queue.push_back(y * size + x);
  };
  for (std::int64_t i = 0; i < size; ++i) {
    visit(0, i), visit(size - 1, i), visit(i, 0), visit(i, size - 1);
  }
  while (!queue.empty()) {
    const std::int64_t y = queue.front() / size, x = queue.front() % size;
    queue.pop_front();
    visit(y + 1, x), visit(y - 1, x), visit(y, x + 1), visit(y, x - 1);
  }
  return outside;
}

}  // namespace

void fill_enclosed(std::uint8_t* image, std::int64_t size, std::uint8_t grey) {
  constexpr std::uint8_t ink = 48;  // darker than this is background
  std::vector<char> inked(static_cast<std::size_t>(size * size));
  for (std::size_t p = 0; p < inked.size(); ++p) inked[p] = image[p] >= ink;
  // Strokes thickened by a pixel close hairline gaps; the outside grown back by a pixel takes the
  // thickening's margin, so only what the strokes enclose is left.
  const std::vector<char> outside = dilated(reachable_from_border(dilated(inked, size), size), size);
  for (std::size_t p = 0; p < inked.size(); ++p) {
    if (!inked[p] && !outside[p] && image[p] < grey) image[p] = grey;
  }
}

void render_glyphs(const std::vector<std::filesystem::path>& fonts, const std::vector<char32_t>& characters,
                   std::int64_t per_class, std::uint64_t seed, const GlyphStyle& style, at::Tensor& images,
                   at::Tensor& labels, std::vector<GlyphDraw>* draws) {
  const Library library = open_library();
  const std::vector<Face> faces = open_faces(library, fonts);
  // The fonts that have each character.
  std::vector<std::vector<std::size_t>> fonts_for(characters.size());
  for (std::size_t c = 0; c < characters.size(); ++c) {
    for (std::size_t f = 0; f < faces.size(); ++f) {
      if (FT_Get_Char_Index(faces[f].get(), characters[c]) != 0) fonts_for[c].push_back(f);
    }
    if (fonts_for[c].empty()) {
      throw std::invalid_argument("no font has the character " + code_point_name(characters[c]));
    }
  }
  const std::int64_t k = static_cast<std::int64_t>(characters.size()), n = k * per_class, size = style.image_size;
  images = at::zeros({n, 1, size, size}, at::kByte);
  labels = at::arange(n, at::kLong).remainder(k);
  std::uint8_t* out = images.data_ptr<std::uint8_t>();
  Rng rng(seed);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto c = static_cast<std::size_t>(i % k);
    const std::size_t font = fonts_for[c][rng.below(fonts_for[c].size())];
    FT_Face face = faces[font].get();
    const double scale = rng.uniform(style.scale_min, style.scale_max);
    const double degrees = rng.uniform(-style.max_rotation_degrees, style.max_rotation_degrees);
    const double angle = degrees * M_PI / 180.0;
    const double dx = rng.uniform(-style.max_shift_pixels, style.max_shift_pixels);
    const double dy = rng.uniform(-style.max_shift_pixels, style.max_shift_pixels);
    const double stroke = rng.uniform(style.stroke_min, style.stroke_max);
    if (draws) draws->push_back({font, scale, degrees, stroke});
    FT_Set_Pixel_Sizes(face, 0, static_cast<FT_UInt>(std::max(4.0, std::round(scale * static_cast<double>(size)))));
    FT_Matrix rotation{static_cast<FT_Fixed>(std::cos(angle) * 0x10000), static_cast<FT_Fixed>(-std::sin(angle) * 0x10000),
                       static_cast<FT_Fixed>(std::sin(angle) * 0x10000), static_cast<FT_Fixed>(std::cos(angle) * 0x10000)};
    FT_Set_Transform(face, &rotation, nullptr);
    if (FT_Load_Char(face, characters[c], FT_LOAD_DEFAULT | FT_LOAD_NO_BITMAP | FT_LOAD_NO_HINTING)) continue;
    if (face->glyph->format == FT_GLYPH_FORMAT_OUTLINE) {
      FT_Outline_Embolden(&face->glyph->outline, static_cast<FT_Pos>(stroke * 64));
    }
    if (FT_Render_Glyph(face->glyph, FT_RENDER_MODE_NORMAL)) continue;
    const FT_Bitmap& bitmap = face->glyph->bitmap;
    // The bitmap's box centred on the image centre, then shifted.
    const auto left = static_cast<std::int64_t>(std::lround((static_cast<double>(size) - bitmap.width) / 2 + dx));
    const auto top = static_cast<std::int64_t>(std::lround((static_cast<double>(size) - bitmap.rows) / 2 + dy));
    std::uint8_t* image = out + i * size * size;
    for (unsigned int r = 0; r < bitmap.rows; ++r) {
      const std::int64_t y = top + r;
      if (y < 0 || y >= size) continue;
      for (unsigned int col = 0; col < bitmap.width; ++col) {
        const std::int64_t x = left + col;
        if (x < 0 || x >= size) continue;
        image[y * size + x] = bitmap.buffer[static_cast<std::ptrdiff_t>(r) * bitmap.pitch + col];
      }
    }
    // Drawn only when filling, so that datasets without fill keep their images for a seed.
    if (style.fill_max > 0) {
      fill_enclosed(image, size, static_cast<std::uint8_t>(255 * rng.uniform(style.fill_max / 2, style.fill_max)));
    }
  }
}

}  // namespace privdiff::plugins::glyphs
