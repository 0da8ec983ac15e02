// idx: a directory of IDX pairs, as the MNIST family ships (MNIST, EMNIST, KMNIST, Fashion-MNIST):
// {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz], or with a prefix and "test" for "t10k" as
// EMNIST names them (emnist-letters-train-images-idx3-ubyte.gz). Registered three times: `idx`
// (give `path`), and `fashion-mnist` / `mnist`, whose `path` defaults to where Debian's dataset
// packages put them.
#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/image_dataset.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/text/template_caption_keys.hpp>

#include <ATen/ATen.h>

#include <filesystem>
#include <stdexcept>

namespace privdiff::plugins::idx {

using namespace privdiff::sdk;
namespace fs = std::filesystem;

namespace {
// Whether `dir` holds EMNIST's files, whose names need a prefix.
bool holds_emnist(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().rfind("emnist-", 0) == 0) return true;
  }
  return false;
}

LabelledBytes read_split(const Config& c) {
  const fs::path dir = c.get_string("path");
  const std::string prefix = c.get_string("prefix");
  try {
    return read_idx_split(dir, c.get_string("split"), prefix);
  } catch (const std::runtime_error& e) {
    std::string why = e.what();
    if (dir == system_idx_directory("fashion-mnist") && why.find("not a directory") != std::string::npos) {
      why += " (install Debian's dataset-fashion-mnist, or set path)";
    }
    if (dir == system_idx_directory("mnist") && why.find("not a directory") != std::string::npos) {
      why += " (Debian ships no MNIST package: download its four IDX files, train-images-idx3-ubyte.gz and the "
             "others, into a directory and set path to it, e.g. --set data.path=DIR)";
    }
    if (prefix.empty() && why.find("not found") != std::string::npos && holds_emnist(dir)) {
      why += " (EMNIST's files are named emnist-<split>-...: set prefix, e.g. prefix = \"emnist-letters-\")";
    }
    throw std::runtime_error(why);
  }
}

LabelledBytes read(const Config& c) {
  LabelledBytes out = read_split(c);
  // EMNIST stores each image transposed (column by column) relative to MNIST.
  if (c.get_bool("transpose")) out.images = out.images.transpose(2, 3).contiguous();
  if (c.get_string("captions") == "templates") out.captions = template_captions_from(c, out.labels, out.num_classes, {});
  return out;
}
std::string display_name(const Config& c) {
  return fs::path(c.get_string("path")).lexically_normal().filename().string() + " (" + c.get_string("split") + ")";
}
}  // namespace

class IdxDataset : public ImageDataset {
 public:
  explicit IdxDataset(const Config& c) : ImageDataset(read(c), c.get_bool("public"), display_name(c)) {}
};

namespace {
// Fashion-MNIST's classes as its README names them (lower case: they stand inside a caption).
const std::vector<std::string> fashion_names = {"T-shirt/top", "trouser", "pullover", "dress", "coat",
                                                "sandal",      "shirt",   "sneaker",  "bag",   "ankle boot"};
const std::vector<std::string> digit_names = {"digit 0", "digit 1", "digit 2", "digit 3", "digit 4",
                                              "digit 5", "digit 6", "digit 7", "digit 8", "digit 9"};

Schema idx_schema(const std::string& default_path, const std::vector<std::string>& class_names) {
  Schema s;
  Key path = Key::string("path").doc("directory of the IDX files");
  if (!default_path.empty()) path.defaults(ConfigValue{default_path});
  s.add(path)
      .add(Key::string("split").one_of({"train", "test"}).defaults("train").doc("which split: train or test (t10k)"))
      .add(Key::string("prefix").defaults("")
               .doc("file name prefix: EMNIST's is emnist-<split>-, e.g. \"emnist-letters-\" (its test files say "
                    "test- for t10k-: both are found)"))
      .add(Key::boolean("transpose").defaults(false)
               .doc("swap each image's rows and columns: EMNIST's files hold the letters transposed; true turns "
                    "them upright (torchvision and DPImageBench use them as stored)"))
      .add(Key::boolean("public").defaults(false)
               .doc("true marks the data as public: non-private stages may train on it, unless a private stage "
                    "of the run (or of its init_from ancestry) trains on it"))
      .add(Key::string("captions").one_of({"none", "templates"}).defaults("none")
               .doc("templates: each record captioned from its class (class_names, caption_templates), e.g. "
                    "\"a photo of the sneaker.\"; the captions are private as the images are"));
  add_template_caption_keys(s, class_names);
  return s;
}

void register_components(Registrar* registrar) {
  registrar->add<IdxDataset>("idx", "IDX image/label pairs (MNIST, EMNIST, KMNIST, Fashion-MNIST as downloaded)",
                             idx_schema("", {}));
  registrar->add<IdxDataset>("fashion-mnist", "Fashion-MNIST from Debian's dataset-fashion-mnist (private by default)",
                             idx_schema(system_idx_directory("fashion-mnist").string(), fashion_names));
  registrar->add<IdxDataset>("mnist", "MNIST from Debian's dataset package location (private by default)",
                             idx_schema(system_idx_directory("mnist").string(), digit_names));
}
}  // namespace

}  // namespace privdiff::plugins::idx

PRIVDIFF_PLUGIN("idx", "0.1.0", "IDX datasets (the MNIST family)", privdiff::plugins::idx::register_components)
