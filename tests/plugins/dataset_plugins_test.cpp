// The dataset plugins (idx, fashion-mnist, image_folder, glyphs) as a recipe's [data] section opens
// them: content, classes, privacy status, and errors that name what is wrong.
#include "installed_datasets.hpp"
#include "png_files.hpp"

#include <privdiff/config/key_value_error.hpp>
#include <privdiff/data/idx_file.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

using namespace privdiff;
using privdiff::testing::error_of;
using privdiff::testing::installed_plugins;
using privdiff::testing::open_data;
using privdiff::testing::scratch_dir;
using privdiff::testing::text;
using privdiff::testing::write_png;
namespace fs = std::filesystem;

namespace {

const fs::path tiny = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "data/tiny-fashion-mnist";

}  // namespace

TEST(IdxDataset, ServesImagesInMinusOneToOneWithLabelsSplitsAndClasses) {
  auto data = open_data("idx", {{"path", text(tiny.string())}});
  EXPECT_EQ(data->size(), 20);
  EXPECT_FALSE(data->is_public());  // private unless the recipe says otherwise
  EXPECT_EQ(data->name(), "tiny-fashion-mnist (train)");
  const at::Tensor x = data->images(at::arange(20, at::kLong));
  EXPECT_EQ(x.sizes(), (std::vector<std::int64_t>{20, 1, 28, 28}));
  EXPECT_FLOAT_EQ(x.min().item<float>(), -1.0f);
  EXPECT_LE(x.max().item<float>(), 1.0f);
  EXPECT_EQ(data->labels(at::arange(1, at::kLong))[0].item<std::int64_t>(), 9);
  EXPECT_EQ(data->num_classes(), 10);
  EXPECT_EQ(open_data("idx", {{"path", text(tiny.string())}, {"split", text("test")}})->size(), 10);
  auto boots = open_data("idx", {{"path", text(tiny.string())}, {"public", sdk::ConfigValue{true}}}, std::vector<std::int64_t>{9, 0});
  EXPECT_TRUE(boots->is_public());
  const at::Tensor labels = boots->labels(at::arange(boots->size(), at::kLong));
  EXPECT_TRUE(((labels == 9) | (labels == 0)).all().item<bool>());
  EXPECT_GT(boots->size(), 0);
  EXPECT_LT(boots->size(), 20);
}

TEST(IdxDataset, BadDataIsNamed) {
  EXPECT_EQ(error_of([] { open_data("idx", {{"path", text("/nonexistent")}}); }), "data: /nonexistent is not a directory");
  EXPECT_NE(error_of([] { open_data("idx", {{"path", text(tiny.string())}}, std::vector<std::int64_t>{-1}); })
                .find("data.classes: class -1 does not exist: tiny-fashion-mnist (train) has classes 0-9"),
            std::string::npos);
  // A class beyond the data's classes is refused (it used to keep nothing, and [0, 12] trained on
  // class 0 alone), as a key's value the host places in the recipe.
  EXPECT_THROW(open_data("idx", {{"path", text(tiny.string())}}, std::vector<std::int64_t>{0, 12}), sdk::KeyValueError);
  EXPECT_NE(error_of([] { open_data("idx", {{"path", text(tiny.string())}}, std::vector<std::int64_t>{0, 12}); })
                .find("data.classes: class 12 does not exist: tiny-fashion-mnist (train) has classes 0-9"),
            std::string::npos);
  // A class the data have but that holds no record (the fixture has no 8) keeps nothing: no refusal
  // names what the (private) labels hold.
  EXPECT_NE(error_of([] { open_data("idx", {{"path", text(tiny.string())}}, std::vector<std::int64_t>{8}); })
                .find("has no examples"),
            std::string::npos);
  const fs::path dir = scratch_dir("magic");
  std::ofstream(dir / "train-images-idx3-ubyte", std::ios::binary) << "PK\x03\x04rest";
  fs::copy(tiny / "train-labels-idx1-ubyte.gz", dir / "train-labels-idx1-ubyte.gz");
  const std::string error = error_of([&] { open_data("idx", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find((dir / "train-images-idx3-ubyte").string() + ": not an IDX file"), std::string::npos) << error;
  fs::remove(dir / "train-images-idx3-ubyte");
  EXPECT_NE(error_of([&] { open_data("idx", {{"path", text(dir.string())}}); }).find("train-images-idx3-ubyte[.gz] not found"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(IdxDataset, FashionMnistIsTheDebianPackage) {
  auto data = open_data("fashion-mnist", {{"split", text("test")}});
  EXPECT_EQ(data->size(), 10000);
  EXPECT_EQ(data->name(), "fashion-mnist (test)");
  EXPECT_FALSE(data->is_public());
}

TEST(ImageFolderDataset, ClassesAreSubFoldersAndImagesAreResized) {
  const fs::path dir = scratch_dir("folder");
  fs::create_directories(dir / "cats");
  fs::create_directories(dir / "dogs");
  write_png(dir / "cats" / "a.png", 56, 56, 3, 200);
  write_png(dir / "cats" / "b.png", 14, 20, 1, 100);
  write_png(dir / "dogs" / "c.PNG", 28, 28, 1, 0);
  std::ofstream(dir / "dogs" / "notes.txt") << "not an image";
  // Hidden entries are neither classes nor images (a .git folder, macOS's ._ files).
  fs::create_directories(dir / ".git" / "objects");
  write_png(dir / ".git" / "objects" / "x.png", 28, 28, 1, 0);
  std::ofstream(dir / "dogs" / "._c.PNG") << "resource fork";
  auto data = open_data("image_folder", {{"path", text(dir.string())}});
  EXPECT_EQ(data->size(), 3);
  EXPECT_EQ(data->num_classes(), 2);
  EXPECT_FALSE(data->is_public());
  const at::Tensor x = data->images(at::arange(3, at::kLong));
  EXPECT_EQ(x.sizes(), (std::vector<std::int64_t>{3, 1, 28, 28}));
  EXPECT_TRUE(data->labels(at::arange(3, at::kLong)).equal(at::tensor({0, 0, 1}, at::kLong)));
  EXPECT_NEAR(x[0].mean().item<float>(), 200 / 127.5 - 1, 1e-3);  // grey of an RGB (200, 200, 200)
  EXPECT_NEAR(x[1].mean().item<float>(), 100 / 127.5 - 1, 1e-3);  // enlarged
  auto rgb = open_data("image_folder", {{"path", text(dir.string())}, {"channels", sdk::ConfigValue{std::int64_t{3}}},
                                   {"image_size", sdk::ConfigValue{std::int64_t{8}}}});
  EXPECT_EQ(rgb->images(at::arange(1, at::kLong)).sizes(), (std::vector<std::int64_t>{1, 3, 8, 8}));
  fs::remove_all(dir);
}

TEST(ImageFolderDataset, BadFoldersAndImagesAreNamed) {
  EXPECT_EQ(error_of([] { open_data("image_folder", {{"path", text("/nonexistent")}}); }), "data: /nonexistent is not a directory");
  const fs::path dir = scratch_dir("bad_folder");
  fs::create_directories(dir / "only");
  write_png(dir / "only" / "a.png", 28, 28, 1, 9);
  EXPECT_NE(error_of([&] { open_data("image_folder", {{"path", text(dir.string())}}); }).find("found 1 class folder(s)"),
            std::string::npos);
  fs::create_directories(dir / "other");
  std::ofstream(dir / "other" / "broken.png") << "this is not a PNG";
  const std::string error = error_of([&] { open_data("image_folder", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find((dir / "other" / "broken.png").string() + ": cannot read the image"), std::string::npos) << error;
  // A PNG whose compressed data is damaged: stb gives no reason; the message still says one.
  const std::string png_head("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\0\x1c\0\0\0\x1c\x08\0\0\0\0\x57\x66\x80\x48"
                             "\0\0\0\x07IDATnotzlib\0\0\0\0", 52);
  std::ofstream(dir / "other" / "broken.png", std::ios::binary) << png_head;
  const std::string damaged = error_of([&] { open_data("image_folder", {{"path", text(dir.string())}}); });
  EXPECT_EQ(damaged.find("()"), std::string::npos) << damaged;
  EXPECT_NE(damaged.find("cannot read the image ("), std::string::npos) << damaged;
  // Nothing meant as data is skipped without a word: a folder inside a class, a broken link (issue 69).
  write_png(dir / "other" / "broken.png", 28, 28, 1, 5);
  fs::create_directories(dir / "other" / "more");
  write_png(dir / "other" / "more" / "b.png", 28, 28, 1, 5);
  const std::string nested = error_of([&] { open_data("image_folder", {{"path", text(dir.string())}}); });
  EXPECT_NE(nested.find("more: a folder inside a class folder"), std::string::npos) << nested;
  fs::remove_all(dir / "other" / "more");
  fs::create_symlink(dir / "gone.png", dir / "other" / "link.png");
  const std::string link = error_of([&] { open_data("image_folder", {{"path", text(dir.string())}}); });
  EXPECT_NE(link.find("link.png: a broken link"), std::string::npos) << link;
  fs::remove(dir / "other" / "link.png");
  // An image of another format in a class folder, an image beside the class folders; a README is no data.
  std::ofstream(dir / "README.txt") << "what these images are";
  std::ofstream(dir / ".DS_Store") << "hidden";
  EXPECT_NO_THROW(open_data("image_folder", {{"path", text(dir.string())}}));
  std::ofstream(dir / "other" / "c.gif") << "GIF89a";
  const std::string gif = error_of([&] { open_data("image_folder", {{"path", text(dir.string())}}); });
  EXPECT_NE(gif.find("c.gif: an image in a format image_folder does not read"), std::string::npos) << gif;
  fs::remove(dir / "other" / "c.gif");
  write_png(dir / "stray.png", 28, 28, 1, 5);
  const std::string stray = error_of([&] { open_data("image_folder", {{"path", text(dir.string())}}); });
  EXPECT_NE(stray.find("stray.png: an image outside every class folder"), std::string::npos) << stray;
  fs::remove_all(dir);
}

TEST(GlyphsDataset, PublicDeterministicPerSeedAndCached) {
  if (!installed_plugins().find(sdk::ComponentKind::dataset, "glyphs")) {
    GTEST_SKIP() << "the glyphs plugin is not built here (FreeType missing; scripts/install_dependencies.sh installs it)";
  }
  const fs::path cache = scratch_dir("glyph_cache");
  auto glyphs = [&](std::int64_t seed, const std::string& cache_dir) {
    return open_data("glyphs", {{"characters", text("AbQ")}, {"per_class", sdk::ConfigValue{std::int64_t{4}}},
                           {"seed", sdk::ConfigValue{seed}}, {"cache", text(cache_dir)}});
  };
  auto a = glyphs(1, "none");
  EXPECT_TRUE(a->is_public());
  EXPECT_EQ(a->size(), 12);
  EXPECT_EQ(a->num_classes(), 3);
  const at::Tensor all = at::arange(12, at::kLong);
  EXPECT_TRUE(a->labels(all).equal(at::arange(12, at::kLong).remainder(3)));
  const at::Tensor x = a->images(all);
  EXPECT_EQ(x.sizes(), (std::vector<std::int64_t>{12, 1, 28, 28}));
  EXPECT_TRUE((x.amax({1, 2, 3}) > 0).all().item<bool>()) << "every image has ink";
  EXPECT_TRUE((x.amin({1, 2, 3}) == -1).all().item<bool>()) << "and background";
  EXPECT_TRUE(glyphs(1, "none")->images(all).equal(x));
  EXPECT_FALSE(glyphs(2, "none")->images(all).equal(x));
  EXPECT_TRUE(glyphs(1, cache.string())->images(all).equal(x));  // rendered, then cached
  EXPECT_EQ(std::distance(fs::directory_iterator(cache), fs::directory_iterator{}), 3);  // images, labels, draws
  EXPECT_TRUE(glyphs(1, cache.string())->images(all).equal(x));  // read from the cache
  EXPECT_NE(error_of([] { open_data("glyphs", {{"characters", text("A")}, {"cache", text("none")}}); }).find("at least two"),
            std::string::npos);
  EXPECT_NE(error_of([] { open_data("glyphs", {{"fonts", sdk::ConfigValue{std::vector<std::string>{"Nope.ttf"}}}}); })
                .find("Nope.ttf"),
            std::string::npos);
  // A character given twice would be two classes of one letter; a cache that is a file is refused.
  EXPECT_NE(error_of([] { open_data("glyphs", {{"characters", text("ABA")}, {"cache", text("none")}}); })
                .find("characters: U+0041 appears twice"),
            std::string::npos);
  const fs::path file = fs::temp_directory_path() / ("glyph-cache-file-" + std::to_string(::getpid()));
  std::ofstream(file) << "not a directory";
  EXPECT_NE(error_of([&] { open_data("glyphs", {{"characters", text("AB")}, {"cache", text(file.string())}}); })
                .find("is not a directory"),
            std::string::npos);
  // ... and so is one under a file, where nothing could ever be written (it was skipped silently).
  EXPECT_NE(error_of([&] { open_data("glyphs", {{"characters", text("AB")}, {"cache", text((file / "sub").string())}}); })
                .find("cannot be made: " + file.string() + " is a file"),
            std::string::npos);
  fs::remove(file);
  // A code point no font has, in hex (U+0378 is unassigned).
  EXPECT_NE(error_of([] { open_data("glyphs", {{"characters", text("A\u0378")}, {"cache", text("none")}}); })
                .find("no font has the character U+0378"),
            std::string::npos);
  fs::remove_all(cache);
}

TEST(GlyphsDataset, FillPaintsWhatTheStrokesEncloseAndNothingOutside) {
  if (!installed_plugins().find(sdk::ComponentKind::dataset, "glyphs")) {
    GTEST_SKIP() << "the glyphs plugin is not built here (FreeType missing; scripts/install_dependencies.sh installs it)";
  }
  auto glyphs = [](double fill) {
    // One print font, centred and upright: the O's hole is at the image centre.
    return open_data("glyphs", {{"characters", text("OL")}, {"per_class", sdk::ConfigValue{std::int64_t{20}}},
                                {"fonts", sdk::ConfigValue{std::vector<std::string>{"DejaVuSans.ttf"}}},
                                {"rotation", sdk::ConfigValue{0.0}}, {"shift", sdk::ConfigValue{0.0}},
                                {"fill", sdk::ConfigValue{fill}}, {"cache", text("none")}});
  };
  const at::Tensor all = at::arange(40, at::kLong);
  const at::Tensor filled = glyphs(0.8)->images(all), outlined = glyphs(0.0)->images(all);
  const auto o = at::arange(0, 40, 2, at::kLong), l = at::arange(1, 40, 2, at::kLong);
  const auto centre = [](const at::Tensor& x) { return x.index({at::indexing::Slice(), 0, 14, 14}); };
  // The O's hole is filled with a grey of at least 0.8/2 of white; without fill it is background.
  const at::Tensor o_centres = centre(filled.index_select(0, o));
  EXPECT_TRUE((o_centres >= 0.4 * 2 - 1 - 1e-3).all().item<bool>()) << o_centres;
  EXPECT_TRUE((centre(outlined.index_select(0, o)) == -1).all().item<bool>());
  // Nothing leaks outside a glyph: the corners stay background, and an L (no enclosure) gains no grey.
  EXPECT_TRUE((filled.index({at::indexing::Slice(), 0, 0, 0}) == -1).all().item<bool>());
  const at::Tensor l_grey = filled.index_select(0, l);
  const auto inked = [](const at::Tensor& x) { return (x > -1).to(at::kFloat).mean().item<float>(); };
  EXPECT_LT(inked(l_grey), 0.5 * inked(filled.index_select(0, o)));
}
