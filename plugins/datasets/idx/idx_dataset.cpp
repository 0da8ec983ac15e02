// idx: a directory of IDX pairs, as the MNIST family ships (MNIST, EMNIST, KMNIST, Fashion-MNIST):
// {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]. Registered three times: `idx` (give `path`),
// and `fashion-mnist` / `mnist`, whose `path` defaults to where Debian's dataset packages put them.
#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/image_dataset.hpp>
#include <privdiff/plugin/export.hpp>

#include <filesystem>
#include <stdexcept>

namespace privdiff::plugins::idx {

using namespace privdiff::sdk;
namespace fs = std::filesystem;

namespace {
LabelledBytes read(const Config& c) {
  const fs::path dir = c.get_string("path");
  try {
    return read_idx_split(dir, c.get_string("split"));
  } catch (const std::runtime_error& e) {
    std::string why = e.what();
    if (dir == system_idx_directory("fashion-mnist") && why.find("not a directory") != std::string::npos) {
      why += " (install Debian's dataset-fashion-mnist, or set path)";
    }
    throw std::runtime_error(why);
  }
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
Schema idx_schema(const std::string& default_path) {
  Schema s;
  Key path = Key::string("path").doc("directory of the IDX files");
  if (!default_path.empty()) path.defaults(ConfigValue{default_path});
  s.add(path)
      .add(Key::string("split").one_of({"train", "test"}).defaults("train").doc("which split: train or test (t10k)"))
      .add(Key::boolean("public").defaults(false)
               .doc("true marks the data as public: non-private stages may train on it, unless a private stage "
                    "of the run (or of its init_from ancestry) trains on it"));
  return s;
}

void register_components(Registrar* registrar) {
  registrar->add<IdxDataset>("idx", "IDX image/label pairs (MNIST, EMNIST, KMNIST, Fashion-MNIST as downloaded)",
                             idx_schema(""));
  registrar->add<IdxDataset>("fashion-mnist", "Fashion-MNIST from Debian's dataset-fashion-mnist (private by default)",
                             idx_schema(system_idx_directory("fashion-mnist").string()));
  registrar->add<IdxDataset>("mnist", "MNIST from Debian's dataset package location (private by default)",
                             idx_schema(system_idx_directory("mnist").string()));
}
}  // namespace

}  // namespace privdiff::plugins::idx

PRIVDIFF_PLUGIN("idx", "0.1.0", "IDX datasets (the MNIST family)", privdiff::plugins::idx::register_components)
