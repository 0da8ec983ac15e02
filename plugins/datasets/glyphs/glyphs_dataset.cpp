// glyphs: a public dataset made here, with nothing downloaded — characters rendered with FreeType
// from installed fonts (handwriting-like ones included), with random scale, shift, rotation and
// stroke width; 28x28 grey; classes are the characters chosen (default: the 26 capital letters,
// like EMNIST letters, which DP-LDM pretrains on for MNIST; or pictograms such as Symbola's clothing,
// filled into silhouettes). Deterministic for a seed and a font set; rendered once and cached as an IDX pair.
#include "glyph_renderer.hpp"

#include <privdiff/config/key_value_error.hpp>
#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/image_dataset.hpp>
#include <privdiff/plugin/export.hpp>

#include <ATen/ATen.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
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

LabelledBytes render(const Config& c) {
  const auto characters = code_points(c.get_string("characters"));
  if (characters.size() < 2) throw std::runtime_error("characters: give at least two characters (one class each)");
  for (std::size_t i = 0; i < characters.size(); ++i) {
    if (std::find(characters.begin(), characters.begin() + static_cast<std::ptrdiff_t>(i), characters[i]) !=
        characters.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw KeyValueError(c.path() + ".characters", code_point_name(characters[i]) + " appears twice (each character is one class)");
    }
  }
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
  const fs::path dir = cache_directory(c);
  if (c.get_string("cache") != "none") check_cache_directory(dir, c.path() + ".cache");
  const std::string stem = "glyphs-" + fnv_hex(key.str());
  const fs::path images_file = dir / (stem + "-images-idx3-ubyte.gz"), labels_file = dir / (stem + "-labels-idx1-ubyte.gz");
  LabelledBytes out;
  out.num_classes = static_cast<std::int64_t>(characters.size());
  std::error_code ec;
  if (c.get_string("cache") != "none" && fs::is_regular_file(images_file, ec) && fs::is_regular_file(labels_file, ec)) {
    const IdxArray images = read_idx(images_file), labels = read_idx(labels_file);
    const std::int64_t n = out.num_classes * per_class;
    if (images.shape == std::vector<std::int64_t>{n, 28, 28} && labels.shape == std::vector<std::int64_t>{n}) {
      out.images = at::from_blob(const_cast<std::uint8_t*>(images.data.data()), {n, 1, 28, 28}, at::kByte).clone();
      out.labels = at::from_blob(const_cast<std::uint8_t*>(labels.data.data()), {n}, at::kByte).to(at::kLong);
      return out;
    }
  }
  try {
    render_glyphs(fonts, characters, per_class, seed, style, out.images, out.labels);
  } catch (const std::invalid_argument& e) {  // a character no font has
    throw KeyValueError(c.path() + ".characters", e.what());
  }
  if (c.get_string("cache") != "none") {  // best effort: a read-only cache only costs the next render
    fs::create_directories(dir, ec);
    const std::string tmp = "." + std::to_string(::getpid()) + ".tmp.gz";
    try {
      IdxArray images{{out.images.size(0), 28, 28}, {}}, labels{{out.labels.size(0)}, {}};
      const auto* p = out.images.data_ptr<std::uint8_t>();
      images.data.assign(p, p + out.images.numel());
      const at::Tensor label_bytes = out.labels.to(at::kByte).contiguous();
      labels.data.assign(label_bytes.data_ptr<std::uint8_t>(), label_bytes.data_ptr<std::uint8_t>() + label_bytes.numel());
      write_idx(dir / (stem + "-images" + tmp), images);
      write_idx(dir / (stem + "-labels" + tmp), labels);
      fs::rename(dir / (stem + "-images" + tmp), images_file);
      fs::rename(dir / (stem + "-labels" + tmp), labels_file);
    } catch (const std::exception&) {
      fs::remove(dir / (stem + "-images" + tmp), ec);
      fs::remove(dir / (stem + "-labels" + tmp), ec);
    }
  }
  return out;
}

}  // namespace

class GlyphsDataset : public ImageDataset {
 public:
  explicit GlyphsDataset(const Config& c) : ImageDataset(render(c), /*is_public=*/true, "glyphs (" + c.get_string("characters") + ")") {}
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<GlyphsDataset>(
      "glyphs", "public data made here: characters rendered with FreeType from installed fonts, randomly transformed",
      Schema{}
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
                                                     "\"none\" = render every time")));
}
}  // namespace

}  // namespace privdiff::plugins::glyphs

PRIVDIFF_PLUGIN("glyphs", "0.1.0", "public glyph datasets rendered with FreeType",
                privdiff::plugins::glyphs::register_components)
