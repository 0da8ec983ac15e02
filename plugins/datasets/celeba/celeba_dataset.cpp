// celeba: CelebA's aligned-and-cropped faces as distributed (img_align_celeba/000001.jpg ..,
// 178x218, with list_attr_celeba.txt and list_eval_partition.txt), labelled by one binary
// attribute (Male by default) and prepared as DPImageBench prepares them
// (data/preprocess_dataset.py in github.com/2019ChenGong/DPImageBench, make_transform's
// "center-crop"): the centred min(h, w) square, 178x178 (rows 20-197, all columns; not the
// 140x140 crop of many GAN papers), resized to image_size with PIL's Image.LANCZOS; the label is
// torchvision's (attribute + 1) / 2; captions made from the attributes on request. Two things differ by rounding only: stb_image decodes the
// JPEGs (PIL uses libjpeg; the two decoders' pixels differ by a grey level here and there) and the
// Lanczos weights are applied in floating point (PIL: 22-bit fixed point). On the test fixture
// 3.5% of the values come out one grey level off DPImageBench's, 0.01% two, none more.
#include "attribute_captions.hpp"
#include "celeba_lists.hpp"
#include "square_resample.hpp"

#include <privdiff/data/image_dataset.hpp>
#include <privdiff/plugin/export.hpp>

#include <ATen/ATen.h>
// stb is header-only here: the decoder is compiled into this plugin, private to it.
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace privdiff::plugins::celeba {

using namespace privdiff::sdk;
namespace fs = std::filesystem;

namespace {

struct CelebaFiles {
  fs::path images, attributes, partition;
};

// The three parts of the distribution under `root`, or an error that says what to fetch or unpack.
CelebaFiles locate(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw std::runtime_error(root.string() + " is not a directory");
  const CelebaFiles files{root / "img_align_celeba", root / "list_attr_celeba.txt", root / "list_eval_partition.txt"};
  if (fs::is_regular_file(root / "celeba" / "list_attr_celeba.txt", ec) && !fs::exists(files.attributes, ec)) {
    throw std::runtime_error(root.string() + " holds celeba/ (torchvision's layout): set path to " + (root / "celeba").string());
  }
  if (fs::is_regular_file(root / "list_attr_celeba.csv", ec) && !fs::exists(files.attributes, ec)) {
    throw std::runtime_error(root.string() + " holds list_attr_celeba.csv: this is a CSV re-packaging of CelebA; "
                             "use the official list_attr_celeba.txt and list_eval_partition.txt");
  }
  for (const fs::path& list : {files.attributes, files.partition}) {
    if (!fs::is_regular_file(list, ec)) throw std::runtime_error(list.string() + " not found (from CelebA's Anno/ and Eval/ folders)");
  }
  if (!fs::is_directory(files.images, ec)) {
    throw std::runtime_error(files.images.string() + " not found (unzip img_align_celeba.zip, the aligned-and-cropped JPEGs, into " +
                             root.string() + ")");
  }
  return files;
}

int partition_of(const std::string& split) { return split == "train" ? 0 : split == "valid" ? 1 : 2; }

// Decodes, crops and resizes one JPEG into out ([3, size, size] bytes); returns why it cannot, or "".
std::string load_face(const fs::path& file, std::int64_t size, Resample filter, std::uint8_t* out) {
  int w = 0, h = 0, n = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> pixels(stbi_load(file.c_str(), &w, &h, &n, 3), stbi_image_free);
  if (!pixels) {
    const char* why = stbi_failure_reason();
    return file.string() + ": cannot read the image (" + (why && *why ? why : "damaged or truncated image data") + ")";
  }
  crop_square_and_resize(pixels.get(), h, w, size, filter, out);
  return "";
}

// All images, decoded on all cores (160k JPEGs take minutes on one); the first failure in file
// order is reported, whatever order the threads met them in. Plain threads, not at::parallel_for:
// its OpenMP loop is compiled into the caller and runs serially without -fopenmp, as here.
at::Tensor load_faces(const fs::path& dir, const std::vector<std::string>& names, std::int64_t size, Resample filter) {
  const auto n = static_cast<std::int64_t>(names.size());
  at::Tensor images = at::empty({n, 3, size, size}, at::kByte);
  std::uint8_t* base = images.data_ptr<std::uint8_t>();
  std::vector<std::string> errors(names.size());
  std::atomic<std::int64_t> next{0};
  auto work = [&] {
    for (std::int64_t i = next++; i < n; i = next++) {
      const auto k = static_cast<std::size_t>(i);
      try {
        errors[k] = load_face(dir / names[k], size, filter, base + i * 3 * size * size);
      } catch (const std::exception& e) {
        errors[k] = (dir / names[k]).string() + ": " + e.what();
      }
    }
  };
  const std::int64_t cores = std::max<std::int64_t>(1, std::thread::hardware_concurrency());
  const std::int64_t workers = std::min({cores, std::int64_t{16}, n / 64 + 1});  // 64 images per thread at least
  std::vector<std::thread> threads;
  for (std::int64_t w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) {
    if (!e.empty()) throw std::runtime_error(e);
  }
  return images;
}

LabelledBytes read(const Config& c) {
  const CelebaFiles files = locate(c.get_string("path"));
  const std::string split = c.get_string("split");
  std::vector<std::string> names = read_partition(files.partition, partition_of(split));
  if (names.empty()) throw std::runtime_error(files.partition.string() + ": no image is in the " + split + " partition");
  // The first max_images of the split in file order, as DPImageBench's --max_image takes them.
  const std::int64_t max_images = c.get_int("max_images");
  if (max_images > 0 && static_cast<std::size_t>(max_images) < names.size()) names.resize(static_cast<std::size_t>(max_images));
  const AttributeTable table = read_attributes(files.attributes);
  const std::size_t column = table.column(c.get_string("attribute"));
  const bool captioned = c.get_string("captions") == "attributes";
  std::vector<std::int64_t> labels;
  std::vector<std::string> captions;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto found = table.images.find(names[i]);
    if (found == table.images.end()) {
      throw std::runtime_error(names[i] + " is in " + files.partition.string() + " but not in " + files.attributes.string());
    }
    labels.push_back(found->second[column] ? 1 : 0);
    if (captioned) {
      captions.push_back(attribute_caption(table.names, found->second, static_cast<std::uint64_t>(c.get_int("caption_seed")),
                                           static_cast<std::int64_t>(i)));
    }
  }
  LabelledBytes out;
  out.images = load_faces(files.images, names, c.get_int("image_size"),
                          c.get_string("resample") == "area" ? Resample::area : Resample::lanczos);
  out.labels = at::tensor(labels, at::kLong);
  out.num_classes = 2;
  out.captions = std::move(captions);
  return out;
}

}  // namespace

class CelebaDataset : public ImageDataset {
 public:
  explicit CelebaDataset(const Config& c)
      : ImageDataset(read(c), c.get_bool("public"), "celeba " + c.get_string("attribute") + " (" + c.get_string("split") + ")") {}
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<CelebaDataset>(
      "celeba", "CelebA aligned faces (img_align_celeba + list files), labelled by one attribute, centre-cropped RGB",
      Schema{}
          .add(Key::string("path").doc("directory holding img_align_celeba/, list_attr_celeba.txt and list_eval_partition.txt"))
          .add(Key::string("split").one_of({"train", "valid", "test"}).defaults("train")
                   .doc("list_eval_partition.txt's partition: train 162,770 images, valid 19,867, test 19,962"))
          .add(Key::string("attribute").defaults("Male")
                   .doc("the label: 1 where this column of list_attr_celeba.txt is 1, else 0 (DPImageBench: Male)"))
          .add(Key::integer("image_size").at_least(8).at_most(178).defaults(32)
                   .doc("side after the centre 178x178 crop (DPImageBench: 32, 64, 128); memory is "
                        "N x 3 x side^2 bytes: the train split is 0.5 GB at 32, 2 GB at 64, 8 GB at 128"))
          .add(Key::string("resample").one_of({"lanczos", "area"}).defaults("lanczos")
                   .doc("lanczos: as DPImageBench (PIL's LANCZOS, to within a grey level); area: box averaging"))
          .add(Key::integer("max_images").at_least(0).defaults(0)
                   .doc("keep the split's first max_images images (0: all); decoding and resizing take about 0.5 ms per "
                        "image and core, 1-2 core-minutes for the train split"))
          .add(Key::string("captions").one_of({"none", "attributes"}).defaults("none")
                   .doc("attributes: each face captioned from its 40 attributes in the manner of MM-CelebA-HQ (an "
                        "approximation: docs/text.md), e.g. \"The smiling young woman has wavy hair. She is wearing "
                        "lipstick.\"; private as the images are"))
          .add(Key::integer("caption_seed").at_least(0).defaults(0).doc("the order of each caption's phrases"))
          .add(Key::boolean("public").defaults(false)
                   .doc("true marks the data as public: non-private stages may train on it")));
}
}  // namespace

}  // namespace privdiff::plugins::celeba

PRIVDIFF_PLUGIN("celeba", "0.1.0", "CelebA (aligned and cropped)", privdiff::plugins::celeba::register_components)
