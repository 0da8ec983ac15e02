// The dataset plugins' captions (docs/captions.md) as a recipe's [data] section asks for them: each
// record's caption is its own (checked against the source read independently here), deterministic,
// kept through class filters, and every refusal is placed at its key.
#include "installed_datasets.hpp"
#include "png_files.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

using namespace privdiff;
using privdiff::testing::error_of;
using privdiff::testing::installed_plugins;
using privdiff::testing::integer;
using privdiff::testing::open_data;
using privdiff::testing::scratch_dir;
using privdiff::testing::text;
namespace fs = std::filesystem;

namespace {

const fs::path tiny = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "data/tiny-fashion-mnist";
const fs::path celeba = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "celeba";

// A grey PNG whose value tells the images apart.
void png(const fs::path& file, std::uint8_t value) { privdiff::testing::write_png(file, 28, 28, 1, value); }

void write(const fs::path& file, const std::string& content) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << content;
}

sdk::ConfigValue names(std::vector<std::string> v) { return sdk::ConfigValue{std::move(v)}; }

std::vector<std::string> all_captions(const sdk::Dataset& data) { return data.captions(at::arange(data.size(), at::kLong)); }

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

// MM-CelebA-HQ's layout: CelebA-HQ-img/{i}.jpg (flat, no classes) and celeba-caption/{i}.txt.
TEST(CaptionedImageFolder, FlatFolderWithOneCaptionFilePerImage) {
  const fs::path root = scratch_dir("mmceleba");
  for (int i : {0, 1, 10}) {
    png(root / "CelebA-HQ-img" / (std::to_string(i) + ".png"), static_cast<std::uint8_t>(20 * i));
    write(root / "celeba-caption" / (std::to_string(i) + ".txt"),
          "first caption of " + std::to_string(i) + "\nsecond caption of " + std::to_string(i) + "\n");
  }
  const std::map<std::string, sdk::ConfigValue> keys = {{"path", text((root / "CelebA-HQ-img").string())},
                                                        {"layout", text("flat")},
                                                        {"captions", text("files")},
                                                        {"caption_path", text((root / "celeba-caption").string())}};
  auto data = open_data("image_folder", keys);
  ASSERT_EQ(data->size(), 3);
  EXPECT_EQ(data->num_classes(), 1);
  EXPECT_TRUE(data->has_captions());
  // Record order is the files' sorted order (0, 1, 10); each caption belongs to its own image.
  EXPECT_EQ(all_captions(*data), (std::vector<std::string>{"first caption of 0", "first caption of 1", "first caption of 10"}));
  const at::Tensor grey = data->images(at::arange(3, at::kLong)).mean({1, 2, 3});
  EXPECT_NEAR(grey[2].item<float>(), 200 / 127.5 - 1, 1e-3);  // 10.png is record 2
  auto second = keys;
  second["caption_line"] = integer(2);
  EXPECT_EQ(open_data("image_folder", second)->captions(at::tensor({2, 0}, at::kLong)),
            (std::vector<std::string>{"second caption of 10", "second caption of 0"}));
  // Refusals at the key, naming the file (and the line).
  second["caption_line"] = integer(3);
  EXPECT_EQ(error_of([&] { open_data("image_folder", second); }),
            "data.caption_path: " + (root / "celeba-caption/0.txt").string() + ": has 2 line(s); caption line 3 was asked for");
  fs::remove(root / "celeba-caption/1.txt");
  EXPECT_EQ(error_of([&] { open_data("image_folder", keys); }),
            "data.caption_path: 1.png: no caption file " + (root / "celeba-caption/1.txt").string() +
                " (one .txt per image, named as the image)");
  auto no_path = keys;
  no_path.erase("caption_path");
  EXPECT_EQ(error_of([&] { open_data("image_folder", no_path); }),
            "data.caption_path: captions = \"files\" needs it: the folder of one .txt per image");
  auto stray = keys;
  stray["captions"] = text("none");
  EXPECT_EQ(error_of([&] { open_data("image_folder", stray); }), "data.caption_path: set, but captions = \"none\" reads no file");
  // A flat folder holds no folders (their images would not be read).
  fs::create_directories(root / "CelebA-HQ-img" / "more");
  EXPECT_NE(error_of([&] { open_data("image_folder", keys); }).find("a folder inside the image folder"), std::string::npos);
  fs::remove_all(root);
}

TEST(CaptionedImageFolder, JsonlAndCsvTablesAndClassTemplates) {
  const fs::path root = scratch_dir("tables");
  png(root / "cats" / "a.png", 10);
  png(root / "cats" / "b.png", 20);
  png(root / "dogs" / "c.png", 30);
  write(root / "metadata.jsonl", "{\"file_name\": \"dogs/c.png\", \"text\": \"a dog, lying down\"}\n"
                                 "{\"file_name\": \"cats/a.png\", \"text\": \"a cat\"}\n"
                                 "{\"file_name\": \"cats/b.png\", \"text\": \"another cat\"}\n"
                                 "{\"file_name\": \"birds/z.png\", \"text\": \"no such image: ignored\"}\n");
  write(root / "metadata.csv", "file_name,caption\ncats/a.png,\"a cat, \"\"tabby\"\"\"\ncats/b.png,b\ndogs/c.png,c\n");
  auto jsonl = open_data("image_folder", {{"path", text(root.string())}, {"captions", text("table")},
                                          {"caption_path", text((root / "metadata.jsonl").string())}});
  EXPECT_EQ(all_captions(*jsonl), (std::vector<std::string>{"a cat", "another cat", "a dog, lying down"}));
  auto csv = open_data("image_folder", {{"path", text(root.string())}, {"captions", text("table")},
                                        {"caption_path", text((root / "metadata.csv").string())},
                                        {"caption_column", text("caption")}});
  EXPECT_EQ(all_captions(*csv), (std::vector<std::string>{"a cat, \"tabby\"", "b", "c"}));
  // A class filter keeps each record's caption with it.
  auto dogs = open_data("image_folder", {{"path", text(root.string())}, {"captions", text("table")},
                                         {"caption_path", text((root / "metadata.jsonl").string())}},
                        std::vector<std::int64_t>{1});
  EXPECT_TRUE(dogs->has_captions());
  EXPECT_EQ(all_captions(*dogs), (std::vector<std::string>{"a dog, lying down"}));
  // Templates name the class folder.
  auto templated = open_data("image_folder", {{"path", text(root.string())}, {"captions", text("templates")},
                                              {"caption_templates", names({"a photo of the {}."})}});
  EXPECT_EQ(all_captions(*templated), (std::vector<std::string>{"a photo of the cats.", "a photo of the cats.", "a photo of the dogs."}));
  EXPECT_EQ(error_of([&] {
              open_data("image_folder", {{"path", text(root.string())}, {"captions", text("templates")},
                                         {"class_names", names({"cat"})}});
            }),
            "data.class_names: 1 names for 2 classes (one per class, in label order)");
  write(root / "short.jsonl", "{\"file_name\": \"cats/a.png\", \"text\": \"a cat\"}\n");
  EXPECT_EQ(error_of([&] {
              open_data("image_folder", {{"path", text(root.string())}, {"captions", text("table")},
                                         {"caption_path", text((root / "short.jsonl").string())}});
            }),
            "data.caption_path: " + (root / "short.jsonl").string() +
                ": no caption for 2 of 3 images (cats/b.png, dogs/c.png): each image needs a row whose file_name is "
                "its path relative to the image folder");
  auto plain = open_data("image_folder", {{"path", text(root.string())}});
  EXPECT_FALSE(plain->has_captions());
  EXPECT_TRUE(plain->captions(at::arange(3, at::kLong)).empty());
  fs::remove_all(root);
}

TEST(CaptionedIdx, FashionMnistTemplatesNameEachRecordsClass) {
  const std::vector<std::string> fashion = {"T-shirt/top", "trouser", "pullover", "dress", "coat",
                                            "sandal",      "shirt",   "sneaker",  "bag",   "ankle boot"};
  auto data = open_data("fashion-mnist", {{"path", text(tiny.string())}, {"captions", text("templates")}});
  const std::vector<std::string> captions = all_captions(*data);
  const at::Tensor labels = data->labels(at::arange(data->size(), at::kLong));
  ASSERT_EQ(static_cast<std::int64_t>(captions.size()), data->size());
  std::set<std::string> forms;
  for (std::size_t i = 0; i < captions.size(); ++i) {
    const std::string& name = fashion[static_cast<std::size_t>(labels[static_cast<std::int64_t>(i)].item<std::int64_t>())];
    EXPECT_TRUE(has(captions[i], " " + name + ".") || has(captions[i], " " + name + ",")) << captions[i];
    forms.insert(captions[i].substr(0, captions[i].find(name)));
  }
  EXPECT_GE(forms.size(), 4u) << "records draw different templates";
  EXPECT_EQ(all_captions(*open_data("fashion-mnist", {{"path", text(tiny.string())}, {"captions", text("templates")}})), captions);
  EXPECT_NE(all_captions(*open_data("fashion-mnist", {{"path", text(tiny.string())}, {"captions", text("templates")},
                                                      {"caption_seed", integer(1)}})),
            captions);
  EXPECT_EQ(error_of([] {
              open_data("idx", {{"path", text(tiny.string())}, {"captions", text("templates")}});
            }),
            "data.class_names: this dataset names no classes: give one name per class (10)");
  EXPECT_FALSE(open_data("fashion-mnist", {{"path", text(tiny.string())}})->has_captions());
}

// The caption of each face against its attributes, read here from list_attr_celeba.txt on its own.
TEST(CaptionedCeleba, AttributeCaptionsSayWhatTheAttributesSay) {
  std::ifstream list(celeba / "list_attr_celeba.txt");
  std::string line;
  std::getline(list, line);
  std::getline(list, line);
  std::vector<std::string> columns;
  std::istringstream header(line);
  for (std::string name; header >> name;) columns.push_back(name);
  std::map<std::string, std::map<std::string, bool>> attributes;  // image -> attribute -> value
  while (std::getline(list, line)) {
    std::istringstream row(line);
    std::string image;
    row >> image;
    for (const auto& name : columns) {
      int v = 0;
      row >> v;
      attributes[image][name] = v == 1;
    }
  }
  std::vector<std::string> train;
  std::ifstream partition(celeba / "list_eval_partition.txt");
  for (std::string image, split; partition >> image >> split;) {
    if (split == "0") train.push_back(image);
  }
  auto data = open_data("celeba", {{"path", text(celeba.string())}, {"captions", text("attributes")}});
  const std::vector<std::string> captions = all_captions(*data);
  ASSERT_EQ(captions.size(), train.size());
  const std::map<std::string, std::string> phrase = {{"Smiling", "smiling"},       {"Wearing_Hat", "a hat"},
                                                     {"Eyeglasses", "eyeglasses"}, {"Wavy_Hair", "wavy hair"},
                                                     {"Young", "young"},           {"Wearing_Lipstick", "lipstick"}};
  for (std::size_t i = 0; i < train.size(); ++i) {
    const auto& a = attributes.at(train[i]);
    const std::string& c = captions[i];
    EXPECT_EQ(has(c, "woman"), !a.at("Male")) << c;
    EXPECT_EQ(has(c, " man"), a.at("Male")) << c;
    for (const auto& [name, words] : phrase) EXPECT_EQ(has(c, words), a.at(name)) << name << ": " << c;
    EXPECT_EQ(has(c, "He is wearing") || has(c, "She is wearing"),
              a.at("Eyeglasses") || a.at("Heavy_Makeup") || a.at("Wearing_Earrings") || a.at("Wearing_Hat") ||
                  a.at("Wearing_Lipstick") || a.at("Wearing_Necklace") || a.at("Wearing_Necktie"))
        << c;
  }
  EXPECT_EQ(all_captions(*open_data("celeba", {{"path", text(celeba.string())}, {"captions", text("attributes")}})), captions);
  EXPECT_FALSE(open_data("celeba", {{"path", text(celeba.string())}})->has_captions());
}

TEST(CaptionedGlyphs, CaptionsSayHowEachGlyphWasDrawnAndSurviveTheCache) {
  if (!installed_plugins().find(sdk::ComponentKind::dataset, "glyphs")) {
    GTEST_SKIP() << "the glyphs plugin is not built here (FreeType missing; scripts/install_dependencies.sh installs it)";
  }
  const fs::path cache = scratch_dir("glyph_captions");
  auto glyphs = [&](const std::string& cache_dir, std::vector<std::string> class_names) {
    return open_data("glyphs", {{"characters", text("Ab7")}, {"per_class", integer(6)}, {"captions", text("attributes")},
                                {"cache", text(cache_dir)}, {"class_names", names(std::move(class_names))}});
  };
  auto fresh = glyphs("none", {});
  const std::vector<std::string> captions = all_captions(*fresh);
  ASSERT_EQ(captions.size(), 18u);
  const std::vector<std::string> expected_name = {"letter A,", "small letter b,", "digit 7,"};
  std::set<std::string> sizes, tilts;
  for (std::size_t i = 0; i < captions.size(); ++i) {
    const std::string& c = captions[i];
    EXPECT_TRUE(has(c, expected_name[i % 3])) << c;
    EXPECT_EQ(c.rfind("a ", 0), 0u) << c;
    EXPECT_TRUE(has(c, ", in ")) << c;
    for (const char* s : {"a small ", "a medium-sized ", "a large "}) if (c.rfind(s, 0) == 0) sizes.insert(s);
    for (const char* t : {"upright", "tilted left", "tilted right"}) if (has(c, t)) tilts.insert(t);
  }
  EXPECT_GE(sizes.size(), 2u);
  EXPECT_GE(tilts.size(), 2u);
  // Rendered into the cache (images, labels, draws), then read back: the same captions.
  EXPECT_EQ(all_captions(*glyphs(cache.string(), {})), captions);
  EXPECT_EQ(std::distance(fs::directory_iterator(cache), fs::directory_iterator{}), 3);
  EXPECT_EQ(all_captions(*glyphs(cache.string(), {})), captions);
  const std::vector<std::string> renamed = all_captions(*glyphs(cache.string(), {"ant", "bee", "seven"}));
  EXPECT_TRUE(has(renamed[0], " ant,") && has(renamed[1], " bee,") && has(renamed[2], " seven,")) << renamed[0];
  EXPECT_EQ(error_of([&] { glyphs("none", {"ant"}); }), "data.class_names: 1 names for 3 characters (one per character)");
  fs::remove_all(cache);
}
