// image_folder: one sub-folder per class of PNG/JPEG images (classes in sorted folder order),
// decoded with stb_image, converted to grey or RGB and resized to image_size x image_size (area
// averaging when shrinking, bilinear when enlarging).
#include <privdiff/data/image_dataset.hpp>
#include <privdiff/plugin/export.hpp>

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

LabelledBytes read(const Config& c) {
  const fs::path root = c.get_string("path");
  const int channels = static_cast<int>(c.get_int("channels"));
  if (channels != 1 && channels != 3) throw std::runtime_error("channels: expected 1 (grey) or 3 (RGB)");
  const std::int64_t size = c.get_int("image_size");
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw std::runtime_error(root.string() + " is not a directory");
  // Hidden entries (".git/", ".DS_Store", "._photo.png") are neither classes nor images.
  auto hidden = [](const fs::path& p) { return p.filename().string().rfind('.', 0) == 0; };
  std::vector<fs::path> classes;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (hidden(entry.path())) continue;
    if (entry.is_directory()) classes.push_back(entry.path());
    // Other files beside the class folders (a README, a licence) are not data; an image is meant as some.
    if (!entry.is_directory() && is_image(entry.path())) {
      throw std::runtime_error(entry.path().string() + ": an image outside every class folder (it has no class: move it "
                               "into the folder of its class)");
    }
  }
  std::sort(classes.begin(), classes.end());
  std::vector<at::Tensor> images;
  std::vector<std::int64_t> labels;
  for (std::size_t k = 0; k < classes.size(); ++k) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(classes[k], ec)) {
      if (hidden(entry.path())) continue;
      // Nothing the user meant as data is skipped without a word: a folder inside a class, a broken link.
      if (entry.is_directory()) {
        throw std::runtime_error(entry.path().string() + ": a folder inside a class folder (its images would not be "
                                 "read: put them directly in " + classes[k].filename().string() + "/, or make it a class "
                                 "folder of its own)");
      }
      if (entry.is_symlink() && !fs::exists(entry.path(), ec)) {
        throw std::runtime_error(entry.path().string() + ": a broken link (its target is gone)");
      }
      if (is_other_image(entry.path())) {
        throw std::runtime_error(entry.path().string() + ": an image in a format image_folder does not read (it reads "
                                 ".png, .jpg and .jpeg: convert it, or move it out of the class folder)");
      }
      if (is_image(entry.path())) files.push_back(entry.path());  // (other files, notes or licences, are no data)
    }
    if (files.empty()) throw std::runtime_error(classes[k].string() + ": a class folder without PNG/JPEG images");
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      images.push_back(load_image(f, channels, size));
      labels.push_back(static_cast<std::int64_t>(k));
    }
  }
  if (classes.size() < 2) {
    throw std::runtime_error(root.string() + ": found " + std::to_string(classes.size()) + " class folder(s); an image "
                             "folder needs at least two (one sub-folder of images per class)");
  }
  LabelledBytes out;
  out.images = at::stack(images);
  out.labels = at::tensor(labels, at::kLong);
  out.num_classes = static_cast<std::int64_t>(classes.size());
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
  registrar->add<ImageFolderDataset>(
      "image_folder", "one sub-folder of PNG/JPEG images per class, resized to image_size",
      Schema{}
          .add(Key::string("path").doc("directory with one sub-folder of .png/.jpg/.jpeg images per class (classes in sorted name order; other image formats refused by name, hidden and non-image files skipped)"))
          .add(Key::integer("image_size").at_least(4).at_most(1024).defaults(28).doc("height and width the images are resized to (at most 1024)"))
          .add(Key::integer("channels").at_least(1).defaults(1).doc("1 = grey, 3 = RGB"))
          .add(Key::boolean("public").defaults(false).doc("true marks the images as public (non-private stages may use them)")));
}
}  // namespace

}  // namespace privdiff::plugins::image_folder

PRIVDIFF_PLUGIN("image_folder", "0.1.0", "image-folder datasets", privdiff::plugins::image_folder::register_components)
