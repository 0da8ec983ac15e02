// glyphs: a public dataset made here, with nothing downloaded — characters rendered with FreeType
// from installed fonts (handwriting-like ones included), with random scale, shift, rotation and
// stroke width; 28x28 grey; classes are the characters chosen (default: the 26 capital letters,
// like EMNIST letters, which DP-LDM pretrains on for MNIST; or pictograms such as Symbola's clothing,
// filled into silhouettes), captioned on request. Deterministic for a seed and a font set; rendered once and
// cached as an IDX pair (and how each glyph was drawn, for its caption).
#include "glyph_captions.hpp"
#include "glyph_renderer.hpp"

#include <privdiff/config/key_value_error.hpp>
#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/image_dataset.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/text/caption_sources.hpp>
#include <privdiff/text/template_caption_keys.hpp>

#include <ATen/ATen.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace privdiff::plugins::glyphs {

using namespace privdiff::sdk;
namespace fs = std::filesystem;

namespace {

// From the packages scripts/install_dependencies.sh installs: print, typewriter and handwriting-
// like faces (Humor Sans, Comic Neue, Dancing Script, Breip).
const std::vector<std::string> default_fonts = {
    "DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Italic.ttf",
    "DejaVuSansMono.ttf", "LiberationSans-Regular.ttf", "LiberationSerif-Regular.ttf", "LiberationSerif-Italic.ttf",
    "LiberationMono-Regular.ttf", "FreeSans.ttf", "FreeSerif.ttf", "FreeSerifItalic.ttf", "FreeMono.ttf",
    "Humor-Sans.ttf", "ComicNeue-Regular.otf", "ComicNeue-Bold.otf", "ComicNeue-Italic.otf",
    "DancingScript-Regular.otf", "DancingScript-Bold.otf", "Breip.ttf"};

std::vector<fs::path> find_fonts(const Config& c) {
  const std::vector<std::string> wanted = c.get_string_list("fonts").empty() ? default_fonts : c.get_string_list("fonts");
  const auto dirs = c.get_string_list("font_dirs");
  std::vector<fs::path> found;
  std::string missing;
  for (const auto& name : wanted) {
    fs::path hit;
    if (fs::path(name).is_absolute()) {
      if (fs::is_regular_file(name)) hit = name;
    }
    for (const auto& dir : dirs) {
      if (!hit.empty()) break;
      std::error_code ec;
      for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (it->path().filename() == name) {
          hit = it->path();
          break;
        }
      }
    }
    if (hit.empty()) missing += (missing.empty() ? "" : ", ") + name;
    else found.push_back(hit);
  }
  if (found.empty()) {
    throw std::runtime_error("fonts: none of the fonts was found under font_dirs (" + missing +
                             "); install the font packages (scripts/install_dependencies.sh) or set fonts");
  }
  if (!c.get_string_list("fonts").empty() && !missing.empty()) {
    throw std::runtime_error("fonts: not found under font_dirs: " + missing);
  }
  return found;
}

std::string fnv_hex(const std::string& text) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ULL;
  std::ostringstream os;
  os << std::hex << h;
  return os.str();
}

fs::path cache_directory(const Config& c) {
  if (!c.get_string("cache").empty()) return c.get_string("cache");
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "privdiff" / "glyphs";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "privdiff" / "glyphs";
  return fs::temp_directory_path() / "privdiff-glyphs";
}

// The cache folder, or where it will be made: the nearest part of it that exists must be a folder
// (a file there would make every write fail, and the cache silently do nothing).
void check_cache_directory(const fs::path& dir, const std::string& key) {
  std::error_code ec;
  for (fs::path p = dir; !p.empty(); p = p.parent_path()) {
    if (fs::exists(p, ec)) {
      if (!fs::is_directory(p, ec))
        throw KeyValueError(key, p == dir ? dir.string() + " is not a directory (give a directory, or \"none\")"
                                          : dir.string() + " cannot be made: " + p.string() + " is a file");
      return;
    }
    if (p == p.parent_path()) return;
  }
}

// The rendered dataset's files in the cache: images and labels (IDX), and how each image was drawn
// (what its caption says; written beside them, read only when captions are asked for).
struct GlyphCache {
  bool enabled = false;
  fs::path images, labels, draws;
};

GlyphCache glyph_cache(const Config& c, const std::string& key) {
  GlyphCache cache;
  cache.enabled = c.get_string("cache") != "none";
  const fs::path dir = cache_directory(c);
  if (cache.enabled) check_cache_directory(dir, c.path() + ".cache");
  const std::string stem = "glyphs-" + fnv_hex(key);
  cache.images = dir / (stem + "-images-idx3-ubyte.gz");
  cache.labels = dir / (stem + "-labels-idx1-ubyte.gz");
  cache.draws = dir / (stem + "-draws.bin");
  return cache;
}

constexpr char draws_magic[] = "privdiff-glyph-draws 1\n";

void write_draws(const fs::path& file, const std::vector<GlyphDraw>& draws) {
  std::ofstream out(file, std::ios::binary);
  out.write(draws_magic, sizeof draws_magic - 1);
  const std::uint64_t n = draws.size();
  out.write(reinterpret_cast<const char*>(&n), sizeof n);
  for (const GlyphDraw& d : draws) {
    const std::uint64_t font = d.font;
    const double values[3] = {d.scale, d.rotation_degrees, d.stroke};
    out.write(reinterpret_cast<const char*>(&font), sizeof font);
    out.write(reinterpret_cast<const char*>(values), sizeof values);
  }
  if (!out) throw std::runtime_error(file.string() + ": cannot be written");
}

// The cached draws of n images, or nothing when the file is absent or of another dataset.
std::vector<GlyphDraw> read_draws(const fs::path& file, std::int64_t n, std::size_t fonts) {
  std::ifstream in(file, std::ios::binary);
  std::string magic(sizeof draws_magic - 1, '\0');
  std::uint64_t count = 0;
  if (!in.read(magic.data(), static_cast<std::streamsize>(magic.size())) || magic != draws_magic ||
      !in.read(reinterpret_cast<char*>(&count), sizeof count) || count != static_cast<std::uint64_t>(n)) {
    return {};
  }
  std::vector<GlyphDraw> draws(count);
  for (GlyphDraw& d : draws) {
    std::uint64_t font = 0;
    double values[3];
    if (!in.read(reinterpret_cast<char*>(&font), sizeof font) || !in.read(reinterpret_cast<char*>(values), sizeof values) ||
        font >= fonts) {
      return {};
    }
    d = {static_cast<std::size_t>(font), values[0], values[1], values[2]};
  }
  return draws;
}

// Images, labels (and draws, when `with_draws`) from the cache; false when it lacks them.
bool read_cache(const GlyphCache& cache, std::int64_t n, bool with_draws, std::size_t fonts, LabelledBytes& out,
                std::vector<GlyphDraw>& draws) {
  std::error_code ec;
  if (!cache.enabled || !fs::is_regular_file(cache.images, ec) || !fs::is_regular_file(cache.labels, ec)) return false;
  if (with_draws && (draws = read_draws(cache.draws, n, fonts)).empty()) return false;
  const IdxArray images = read_idx(cache.images), labels = read_idx(cache.labels);
  if (images.shape != std::vector<std::int64_t>{n, 28, 28} || labels.shape != std::vector<std::int64_t>{n}) return false;
  out.images = at::from_blob(const_cast<std::uint8_t*>(images.data.data()), {n, 1, 28, 28}, at::kByte).clone();
  out.labels = at::from_blob(const_cast<std::uint8_t*>(labels.data.data()), {n}, at::kByte).to(at::kLong);
  return true;
}

// Best effort: a read-only cache only costs the next render.
void write_cache(const GlyphCache& cache, const LabelledBytes& out, const std::vector<GlyphDraw>& draws) {
  if (!cache.enabled) return;
  std::error_code ec;
  fs::create_directories(cache.images.parent_path(), ec);
  const std::string tmp = "." + std::to_string(::getpid()) + ".tmp";
  const std::vector<fs::path> finals = {cache.images, cache.labels, cache.draws};
  try {
    IdxArray images{{out.images.size(0), 28, 28}, {}}, labels{{out.labels.size(0)}, {}};
    const auto* p = out.images.data_ptr<std::uint8_t>();
    images.data.assign(p, p + out.images.numel());
    const at::Tensor label_bytes = out.labels.to(at::kByte).contiguous();
    labels.data.assign(label_bytes.data_ptr<std::uint8_t>(), label_bytes.data_ptr<std::uint8_t>() + label_bytes.numel());
    write_idx(cache.images.string() + tmp + ".gz", images);
    write_idx(cache.labels.string() + tmp + ".gz", labels);
    write_draws(cache.draws.string() + tmp, draws);
    fs::rename(cache.draws.string() + tmp, cache.draws);  // (the draws first: the images' presence implies them)
    fs::rename(cache.images.string() + tmp + ".gz", cache.images);
    fs::rename(cache.labels.string() + tmp + ".gz", cache.labels);
  } catch (const std::exception&) {
    for (const fs::path& f : finals) {
      fs::remove(f.string() + tmp + ".gz", ec);
      fs::remove(f.string() + tmp, ec);
    }
  }
}

std::vector<char32_t> distinct_characters(const Config& c) {
  const auto characters = code_points(c.get_string("characters"));
  if (characters.size() < 2) throw std::runtime_error("characters: give at least two characters (one class each)");
  for (std::size_t i = 0; i < characters.size(); ++i) {
    if (std::find(characters.begin(), characters.begin() + static_cast<std::ptrdiff_t>(i), characters[i]) !=
        characters.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw KeyValueError(c.path() + ".characters", code_point_name(characters[i]) + " appears twice (each character is one class)");
    }
  }
  return characters;
}

// The captions the recipe asks for: how each glyph was drawn, or class templates; none: empty.
std::vector<std::string> glyph_captions(const Config& c, const LabelledBytes& out, const std::vector<char32_t>& characters,
                                        const std::vector<GlyphDraw>& draws, const std::vector<fs::path>& fonts,
                                        const GlyphStyle& style) {
  const std::string mode = c.get_string("captions");
  if (mode == "none") return {};
  std::vector<std::string> names;
  for (char32_t ch : characters) names.push_back(default_glyph_name(ch));
  if (mode == "templates") return template_captions_from(c, out.labels, out.num_classes, names);
  if (const auto& given = c.get_string_list("class_names"); !given.empty()) {
    if (given.size() != names.size()) {
      throw KeyValueError(c.path() + ".class_names", std::to_string(given.size()) + " names for " +
                                                         std::to_string(names.size()) + " characters (one per character)");
    }
    names = given;
  }
  const std::vector<FontLook> looks = font_looks(fonts);
  std::vector<std::string> captions;
  const std::int64_t* label = out.labels.data_ptr<std::int64_t>();
  for (std::size_t i = 0; i < draws.size(); ++i) {
    captions.push_back(glyph_caption(names[static_cast<std::size_t>(label[i])], draws[i], looks[draws[i].font], style));
    if (const std::string why = caption_problem(captions.back()); !why.empty()) {  // (a font's family name, a class name)
      throw KeyValueError(c.path() + ".fonts", fonts[draws[i].font].string() + ": its caption '" + captions.back() +
                                                   "' cannot be one: " + why);
    }
  }
  return captions;
}

LabelledBytes render(const Config& c) {
  const auto characters = distinct_characters(c);
  const auto fonts = find_fonts(c);
  GlyphStyle style;
  style.max_rotation_degrees = c.get_double("rotation");
  style.max_shift_pixels = c.get_double("shift");
  style.stroke_max = c.get_double("stroke");
  style.fill_max = c.get_double("fill");
  const std::int64_t per_class = c.get_int("per_class");
  const auto seed = static_cast<std::uint64_t>(c.get_int("seed"));
  // The cache key: everything the images depend on, the font files' sizes included.
  std::ostringstream key;
  key << "v1|" << c.get_string("characters") << "|" << per_class << "|" << seed << "|" << style.max_rotation_degrees
      << "|" << style.max_shift_pixels << "|" << style.stroke_max;
  if (style.fill_max > 0) key << "|fill " << style.fill_max;  // absent otherwise: earlier caches stay valid
  for (const auto& f : fonts) key << "|" << f.string() << ":" << fs::file_size(f);
  const GlyphCache cache = glyph_cache(c, key.str());
  LabelledBytes out;
  out.num_classes = static_cast<std::int64_t>(characters.size());
  std::vector<GlyphDraw> draws;
  const bool with_draws = c.get_string("captions") == "attributes";
  if (!read_cache(cache, out.num_classes * per_class, with_draws, fonts.size(), out, draws)) {
    draws.clear();  // (draws read before images of another shape were found)
    try {
      render_glyphs(fonts, characters, per_class, seed, style, out.images, out.labels, &draws);
    } catch (const std::invalid_argument& e) {  // a character no font has
      throw KeyValueError(c.path() + ".characters", e.what());
    }
    write_cache(cache, out, draws);
  }
  out.captions = glyph_captions(c, out, characters, draws, fonts, style);
  return out;
}

}  // namespace

class GlyphsDataset : public ImageDataset {
 public:
  explicit GlyphsDataset(const Config& c) : ImageDataset(render(c), /*is_public=*/true, "glyphs (" + c.get_string("characters") + ")") {}
};

namespace {
void register_components(Registrar* registrar) {
  Schema schema;
  schema
      .add(Key::string("characters").defaults("ABCDEFGHIJKLMNOPQRSTUVWXYZ").doc("one class per character (UTF-8)"))
      .add(Key::integer("per_class").at_least(1).at_most(100000).defaults(2000).doc("images per character (at most 100,000: 0.3 GB of images each)"))
      .add(Key::integer("seed").at_least(0).defaults(0).doc("seed of the random transforms and font choices"))
      .add(Key::string_list("fonts").defaults(ConfigValue{std::vector<std::string>{}})
               .doc("font file names (searched under font_dirs) or absolute paths; [] = the default print and "
                    "handwriting-like set"))
      .add(Key::string_list("font_dirs").defaults(ConfigValue{std::vector<std::string>{"/usr/share/fonts"}})
               .doc("directories searched for the fonts"))
      .add(Key::number("rotation").at_least(0).at_most(180).defaults(12.0).doc("largest rotation, degrees"))
      .add(Key::number("shift").at_least(0).at_most(14).defaults(2.0).doc("largest shift, pixels"))
      .add(Key::number("stroke").at_least(0).at_most(10).defaults(1.2).doc("largest extra stroke width, pixels"))
      .add(Key::number("fill").at_least(0).at_most(1).defaults(0.0)
               .doc("grey that fills what a glyph's strokes enclose, as a fraction of white, drawn per image "
                    "from [fill/2, fill] (outline pictograms become silhouettes); 0 = no fill"))
      .add(Key::string("cache").defaults("").doc("cache directory; \"\" = $XDG_CACHE_HOME/privdiff/glyphs; "
                                                 "\"none\" = render every time"))
      .add(Key::string("captions").one_of({"none", "attributes", "templates"}).defaults("none")
               .doc("attributes: each glyph captioned from how it was drawn, e.g. \"a large bold italic letter A, "
                    "tilted left, in DejaVu Serif.\" (class_names name the characters); templates: from its class "
                    "alone (caption_templates)"));
  add_template_caption_keys(schema);
  registrar->add<GlyphsDataset>(
      "glyphs", "public data made here: characters rendered with FreeType from installed fonts, randomly transformed",
      std::move(schema));
}
}  // namespace

}  // namespace privdiff::plugins::glyphs

PRIVDIFF_PLUGIN("glyphs", "0.1.0", "public glyph datasets rendered with FreeType",
                privdiff::plugins::glyphs::register_components)
