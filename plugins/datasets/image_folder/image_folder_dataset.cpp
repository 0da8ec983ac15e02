// image_folder: one sub-folder per class of PNG/JPEG images (classes in sorted folder order), or a
// flat folder of one class, decoded with stb_image, converted to grey or RGB and resized to
// image_size x image_size (area averaging when shrinking, bilinear when enlarging); optionally
// captioned: a .txt per image (MM-CelebA-HQ's layout), a JSONL/CSV table, or class templates.
#include <privdiff/data/image_dataset.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/text/caption_sources.hpp>
#include <privdiff/text/template_caption_keys.hpp>

#include <ATen/ATen.h>
// stb is header-only here: the decoder is compiled into this plugin, private to it.
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <vector>

namespace privdiff::plugins::image_folder {

using namespace privdiff::sdk;
namespace fs = std::filesystem;

namespace {

std::string extension_of(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

bool is_image(const fs::path& p) {
  const std::string ext = extension_of(p);
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// An image in a format this plugin does not read: meant as data, so never skipped without a word.
bool is_other_image(const fs::path& p) {
  const std::string ext = extension_of(p);
  for (const char* other : {".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm", ".pnm", ".heic", ".avif", ".jxl"}) {
    if (ext == other) return true;
  }
  return false;
}

// One image as uint8 [C, size, size].
at::Tensor load_image(const fs::path& file, int channels, std::int64_t size) {
  int w = 0, h = 0, n = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> pixels(stbi_load(file.c_str(), &w, &h, &n, channels), stbi_image_free);
  if (!pixels) {
    // stb's reasons are terse ("first not IHDR") and sometimes empty (a damaged compressed stream).
    const char* why = stbi_failure_reason();
    const std::string reason = why && *why ? why : "damaged or truncated image data";
    throw std::runtime_error(file.string() + ": cannot read the image (" + reason + ")");
  }
  at::Tensor x = at::from_blob(pixels.get(), {h, w, channels}, at::kByte).permute({2, 0, 1}).unsqueeze(0).to(at::kFloat);
  if (h != size || w != size) {
    x = (h >= size && w >= size) ? at::adaptive_avg_pool2d(x, {size, size})
                                 : at::upsample_bilinear2d(x, {size, size}, /*align_corners=*/false);
  }
  return x.squeeze(0).round().clamp(0, 255).to(at::kByte);
}

// Hidden entries (".git/", ".DS_Store", "._photo.png") are neither classes nor images.
bool hidden(const fs::path& p) { return p.filename().string().rfind('.', 0) == 0; }

// The images of one folder, sorted; nothing the user meant as data is skipped without a word (a
// folder inside it, a broken link, an image in another format). `what` names the folder's role.
std::vector<fs::path> images_in(const fs::path& dir, const std::string& what) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (hidden(entry.path())) continue;
    if (entry.is_directory()) {
      throw std::runtime_error(entry.path().string() + ": a folder inside " + what + " (its images would not be read: " +
                               (what == "a class folder" ? "put them directly in " + dir.filename().string() +
                                                               "/, or make it a class folder of its own)"
                                                         : "with layout = \"flat\" every image lies directly in path)"));
    }
    if (entry.is_symlink() && !fs::exists(entry.path(), ec)) {
      throw std::runtime_error(entry.path().string() + ": a broken link (its target is gone)");
    }
    if (is_other_image(entry.path())) {
      throw std::runtime_error(entry.path().string() + ": an image in a format image_folder does not read (it reads "
                               ".png, .jpg and .jpeg: convert it, or move it out of " + what + ")");
    }
    if (is_image(entry.path())) files.push_back(entry.path());  // (other files, notes or licences, are no data)
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The class folders under root, sorted (at least two).
std::vector<fs::path> class_folders(const fs::path& root) {
  std::error_code ec;
  std::vector<fs::path> classes;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (hidden(entry.path())) continue;
    if (entry.is_directory()) classes.push_back(entry.path());
    // Other files beside the class folders (a README, a licence) are not data; an image is meant as some.
    if (!entry.is_directory() && is_image(entry.path())) {
      throw std::runtime_error(entry.path().string() + ": an image outside every class folder (it has no class: move it "
                               "into the folder of its class, or set layout = \"flat\" for a folder without classes)");
    }
  }
  std::sort(classes.begin(), classes.end());
  if (classes.size() < 2) {
    throw std::runtime_error(root.string() + ": found " + std::to_string(classes.size()) + " class folder(s); an image "
                             "folder needs at least two (one sub-folder of images per class), or layout = \"flat\"");
  }
  return classes;
}

// Every image with its label and its path relative to root ('/'-separated), in record order.
struct Listing {
  std::vector<fs::path> files;
  std::vector<std::string> relative;
  std::vector<std::int64_t> labels;
  std::int64_t num_classes = 1;
  std::vector<std::string> class_names;  ///< the class folders' names (flat: none)
};

Listing list_images(const fs::path& root, bool flat) {
  Listing out;
  auto add = [&](const std::vector<fs::path>& files, std::int64_t label) {
    for (const auto& f : files) {
      out.files.push_back(f);
      out.relative.push_back(f.lexically_relative(root).generic_string());
      out.labels.push_back(label);
    }
  };
  if (flat) {
    add(images_in(root, "the image folder"), 0);
    if (out.files.empty()) throw std::runtime_error(root.string() + ": no PNG/JPEG images in it");
    return out;
  }
  const std::vector<fs::path> classes = class_folders(root);
  for (std::size_t k = 0; k < classes.size(); ++k) {
    const std::vector<fs::path> files = images_in(classes[k], "a class folder");
    if (files.empty()) throw std::runtime_error(classes[k].string() + ": a class folder without PNG/JPEG images");
    add(files, static_cast<std::int64_t>(k));
    out.class_names.push_back(classes[k].filename().string());
  }
  out.num_classes = static_cast<std::int64_t>(classes.size());
  return out;
}

// The captions the recipe asks for (none: empty).
std::vector<std::string> captions_of(const Config& c, const Listing& images, const at::Tensor& labels) {
  const std::string mode = c.get_string("captions");
  const std::string source = c.get_string("caption_path");
  if (mode == "none" || mode == "templates") {
    if (!source.empty()) throw KeyValueError(c.path() + ".caption_path", "set, but captions = \"" + mode + "\" reads no file");
    return mode == "none" ? std::vector<std::string>{} : template_captions_from(c, labels, images.num_classes, images.class_names);
  }
  if (source.empty()) {
    throw KeyValueError(c.path() + ".caption_path", "captions = \"" + mode + "\" needs it: " +
                        (mode == "files" ? "the folder of one .txt per image" : "the .jsonl or .csv captions table"));
  }
  try {
    if (mode == "files") return read_caption_files(source, images.relative, static_cast<std::size_t>(c.get_int("caption_line")));
    return read_caption_table(source, c.get_string("caption_column")).for_images(images.relative);
  } catch (const std::invalid_argument& e) {
    throw KeyValueError(c.path() + ".caption_path", e.what());
  }
}

LabelledBytes read(const Config& c) {
  const fs::path root = c.get_string("path");
  const int channels = static_cast<int>(c.get_int("channels"));
  if (channels != 1 && channels != 3) throw std::runtime_error("channels: expected 1 (grey) or 3 (RGB)");
  const std::int64_t size = c.get_int("image_size");
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw std::runtime_error(root.string() + " is not a directory");
  const Listing listing = list_images(root, c.get_string("layout") == "flat");
  LabelledBytes out;
  out.labels = at::tensor(listing.labels, at::kLong);
  out.num_classes = listing.num_classes;
  out.captions = captions_of(c, listing, out.labels);  // (before the images: a caption error costs no decoding)
  std::vector<at::Tensor> images;
  for (const auto& f : listing.files) images.push_back(load_image(f, channels, size));
  out.images = at::stack(images);
  return out;
}

}  // namespace

class ImageFolderDataset : public ImageDataset {
 public:
  explicit ImageFolderDataset(const Config& c)
      : ImageDataset(read(c), c.get_bool("public"),
                     fs::path(c.get_string("path")).lexically_normal().filename().string() + " (image folder)") {}
};

namespace {
void register_components(Registrar* registrar) {
  Schema schema;
  schema
      .add(Key::string("path").doc("directory with one sub-folder of .png/.jpg/.jpeg images per class (classes in sorted name order), or the images themselves (layout = flat); other image formats refused by name, hidden and non-image files skipped"))
      .add(Key::integer("image_size").at_least(4).at_most(1024).defaults(28).doc("height and width the images are resized to (at most 1024)"))
      .add(Key::integer("channels").at_least(1).defaults(1).doc("1 = grey, 3 = RGB"))
      .add(Key::string("layout").one_of({"class_folders", "flat"}).defaults("class_folders")
               .doc("class_folders: one sub-folder per class; flat: every image directly in path, one class "
                    "(e.g. CelebA-HQ-img/ of MM-CelebA-HQ, for text-to-image)"))
      .add(Key::string("captions").one_of({"none", "files", "table", "templates"}).defaults("none")
               .doc("files: one .txt per image in caption_path, named as the image (MM-CelebA-HQ's "
                    "celeba-caption/); table: caption_path is a .jsonl or .csv table (Hugging Face's "
                    "imagefolder metadata: file_name, relative to path, and caption_column); templates: made "
                    "from the class folder's name (class_names, caption_templates). Captions are private as "
                    "the images are"))
      .add(Key::string("caption_path").defaults("").doc("captions = files: the folder of caption files; table: the table file"))
      .add(Key::integer("caption_line").at_least(1).defaults(1)
               .doc("captions = files: which line of each file is the caption (MM-CelebA-HQ's files hold ten)"))
      .add(Key::string("caption_column").defaults("text").doc("captions = table: the column holding the caption"))
      .add(Key::boolean("public").defaults(false).doc("true marks the images as public (non-private stages may use them)"));
  add_template_caption_keys(schema);
  registrar->add<ImageFolderDataset>(
      "image_folder", "PNG/JPEG images, one sub-folder per class (or flat), resized to image_size, captions optional",
      std::move(schema));
}
}  // namespace

}  // namespace privdiff::plugins::image_folder

PRIVDIFF_PLUGIN("image_folder", "0.1.0", "image-folder datasets", privdiff::plugins::image_folder::register_components)
