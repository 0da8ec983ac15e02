// Where captions come from (caption files, JSONL/CSV tables, templates) and the form in which they are
// compared: what each reader accepts, what it refuses and where the refusal points.
#include <privdiff/text/caption_matching.hpp>
#include <privdiff/text/caption_sources.hpp>
#include <privdiff/text/caption_templates.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

namespace fs = std::filesystem;
using namespace privdiff::sdk;

namespace {

// A fresh folder per test, removed after it.
class CaptionFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("privdiff_captions_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& content) const {
    fs::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name, std::ios::binary) << content;
    return dir_ / name;
  }
  fs::path dir_;
};

template <class Read>
std::string refusal(Read read) {
  try {
    read();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST(CaptionProblem, NamesWhatIsWrong) {
  EXPECT_EQ(caption_problem("a woman with wavy hair"), "");
  EXPECT_EQ(caption_problem("caf\xC3\xA9 \xF0\x9F\x98\x80"), "");  // é, an emoji
  EXPECT_EQ(caption_problem("bad \xC3("), "not valid UTF-8 at byte 4");
  EXPECT_EQ(caption_problem(std::string("a\0b", 3)), "a NUL byte at byte 1");
  EXPECT_EQ(caption_problem("two\nlines"), "a line break inside the caption at byte 3");
  EXPECT_EQ(caption_problem("two\xE2\x80\xA8lines"), "a line break (U+2028) inside the caption");
  EXPECT_NE(caption_problem(std::string(16385, 'a')).find("16385 bytes (at most 16384)"), std::string::npos);
}

// MM-CelebA-HQ's layout: celeba-caption/{i}.txt beside CelebA-HQ-img/{i}.jpg, ten captions a file.
TEST_F(CaptionFiles, OneFilePerImageTheChosenLine) {
  write("celeba-caption/0.txt", "The woman has wavy hair.\r\n  She is smiling.  \nThird.\n");
  write("celeba-caption/1.txt", "The man has a beard.\nHe wears a hat.\n");
  write("celeba-caption/cls/2.txt", "A nested one.\nSecond nested.");
  const fs::path captions = dir_ / "celeba-caption";
  EXPECT_EQ(read_caption_files(captions, {"0.jpg", "1.jpg"}, 1),
            (std::vector<std::string>{"The woman has wavy hair.", "The man has a beard."}));
  EXPECT_EQ(read_caption_files(captions, {"0.jpg", "1.jpg", "cls/2.png"}, 2),
            (std::vector<std::string>{"She is smiling.", "He wears a hat.", "Second nested."}));
  EXPECT_EQ(refusal([&] { read_caption_files(captions, {"0.jpg", "7.jpg"}, 1); }),
            "7.jpg: no caption file " + (captions / "7.txt").string() + " (one .txt per image, named as the image)");
  EXPECT_EQ(refusal([&] { read_caption_files(captions, {"1.jpg"}, 3); }),
            (captions / "1.txt").string() + ": has 2 line(s); caption line 3 was asked for");
  write("celeba-caption/3.txt", "first\n   \nthird\n");
  EXPECT_EQ(refusal([&] { read_caption_files(captions, {"3.jpg"}, 2); }), (captions / "3.txt").string() + ":2: an empty caption");
  write("celeba-caption/4.txt", "bad \xFF byte\n");
  EXPECT_EQ(refusal([&] { read_caption_files(captions, {"4.jpg"}, 1); }),
            (captions / "4.txt").string() + ":1: not valid UTF-8 at byte 4");
  EXPECT_EQ(refusal([&] { read_caption_files(dir_ / "absent", {"0.jpg"}, 1); }),
            (dir_ / "absent").string() + ": not a directory of caption files");
}

TEST_F(CaptionFiles, JsonlTableAsHuggingFaceImagefolderMetadata) {
  const fs::path table = write("metadata.jsonl",
                               "{\"file_name\": \"cat/0.png\", \"text\": \"a cat\", \"other\": 3}\n"
                               "\n"
                               "{\"file_name\": \"./dog/1.png\", \"text\": \"a dog \\u00e9\"}\n");
  const CaptionTable t = read_caption_table(table, "text");
  EXPECT_EQ(t.for_images({"dog/1.png", "cat/0.png"}), (std::vector<std::string>{"a dog \xC3\xA9", "a cat"}));
  EXPECT_EQ(refusal([&] { t.for_images({"cat/0.png", "cat/9.png", "x.png"}); }),
            table.string() + ": no caption for 2 of 3 images (cat/9.png, x.png): each image needs a row whose "
                             "file_name is its path relative to the image folder");
  EXPECT_EQ(refusal([&] { read_caption_table(table, "caption"); }),
            table.string() + ":1: no string 'caption' (each row: {\"file_name\": …, \"caption\": …})");
  const fs::path twice = write("twice.jsonl", "{\"file_name\": \"a.png\", \"text\": \"x\"}\n"
                                              "{\"file_name\": \"b.png\", \"text\": \"y\"}\n"
                                              "{\"file_name\": \"./a.png\", \"text\": \"z\"}\n");
  EXPECT_EQ(refusal([&] { read_caption_table(twice, "text"); }),
            twice.string() + ":3: file_name 'a.png' again (first at line 1): one caption per image");
  const fs::path broken = write("broken.jsonl", "{\"file_name\": \"a.png\", \"text\": \"x\"}\n{\"file_name\": \n");
  EXPECT_EQ(refusal([&] { read_caption_table(broken, "text"); }), broken.string() + ":2: not a JSON object");
  const fs::path blank = write("blank.jsonl", "{\"file_name\": \"a.png\", \"text\": \"   \"}\n");
  EXPECT_EQ(refusal([&] { read_caption_table(blank, "text"); }), blank.string() + ":1: an empty caption");
  EXPECT_EQ(read_caption_table(write("spaced.jsonl", "{\"file_name\": \"a.png\", \"text\": \" a cat \"}\n"), "text")
                .for_images({"a.png"}),
            std::vector<std::string>{"a cat"});
  const fs::path newline = write("newline.jsonl", "{\"file_name\": \"a.png\", \"text\": \"two\\nlines\"}\n");
  EXPECT_EQ(refusal([&] { read_caption_table(newline, "text"); }),
            newline.string() + ":1: a line break inside the caption at byte 3");
}

TEST_F(CaptionFiles, CsvTableWithQuotesAndAByteOrderMark) {
  const fs::path table = write("metadata.csv",
                               "\xEF\xBB\xBF" "file_name,text,extra\r\n"
                               "a.png,\"a cat, sitting\",1\r\n"
                               "b.png,\"she said \"\"hi\"\"\",2\r\n"
                               "c.png,plain,3\r\n");
  const CaptionTable t = read_caption_table(table, "text");
  EXPECT_EQ(t.for_images({"a.png", "b.png", "c.png"}),
            (std::vector<std::string>{"a cat, sitting", "she said \"hi\"", "plain"}));
  const fs::path no_column = write("no_column.csv", "name,text\na.png,x\n");
  EXPECT_EQ(refusal([&] { read_caption_table(no_column, "text"); }),
            no_column.string() + ":1: the header row needs the columns file_name and text");
  const fs::path short_row = write("short.csv", "file_name,text\na.png,x\nb.png\n");
  EXPECT_EQ(refusal([&] { read_caption_table(short_row, "text"); }), short_row.string() + ":3: 1 field(s); the header names more");
  const fs::path open_quote = write("open.csv", "file_name,text\na.png,\"never closed\n");
  EXPECT_NE(refusal([&] { read_caption_table(open_quote, "text"); }).find(open_quote.string() + ":2: malformed CSV"),
            std::string::npos);
  const fs::path embedded = write("embedded.csv", "file_name,text\na.png,\"two\nlines\"\n");
  EXPECT_EQ(refusal([&] { read_caption_table(embedded, "text"); }),
            embedded.string() + ":3: a line break inside the caption at byte 3");
  EXPECT_EQ(refusal([&] { read_caption_table(write("t.txt", ""), "text"); }),
            (dir_ / "t.txt").string() + ": a captions table is a .jsonl or a .csv file (Hugging Face's imagefolder "
                                        "metadata: file_name and a caption column)");
  EXPECT_EQ(refusal([&] { read_caption_table(dir_ / "none.csv", "text"); }),
            (dir_ / "none.csv").string() + ": no such file (a captions table)");
}

TEST(TemplateCaptions, DeterministicPerRecordAndChecked) {
  const std::vector<std::string> names = {"sneaker", "bag"};
  const std::vector<std::string> templates = {"a photo of the {}.", "the {}, grey."};
  const auto a = template_captions({0, 1, 1, 0, 0, 1, 0, 1}, names, templates, 7);
  EXPECT_EQ(a, template_captions({0, 1, 1, 0, 0, 1, 0, 1}, names, templates, 7));
  ASSERT_EQ(a.size(), 8u);
  std::set<std::string> seen(a.begin(), a.end());
  EXPECT_GE(seen.size(), 3u);  // both templates drawn, for both classes
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NE(a[i].find(i == 1 || i == 2 || i == 5 || i == 7 ? "bag" : "sneaker"), std::string::npos);
  EXPECT_NE(a, template_captions({0, 1, 1, 0, 0, 1, 0, 1}, names, templates, 8));
  EXPECT_EQ(refusal([&] { template_captions({0}, names, {"no slot"}, 0); }),
            "template 0 ('no slot'): needs exactly one {} (where the class name goes)");
  EXPECT_EQ(refusal([&] { template_captions({0}, names, {"{} {}"}, 0); }),
            "template 0 ('{} {}'): needs exactly one {} (where the class name goes)");
  EXPECT_EQ(refusal([&] { template_captions({2}, names, templates, 0); }), "class 2 has no name (2 class names given)");
  for (const auto& t : default_caption_templates()) EXPECT_NE(t.find("{}"), std::string::npos) << t;
}

TEST(MatchingForm, CaseSpacingAndPunctuationLeftOut) {
  EXPECT_EQ(matching_form("A red-dress,  smiling."), "a red dress smiling");
  EXPECT_EQ(matching_form("a red dress smiling"), "a red dress smiling");
  EXPECT_EQ(matching_form("  The WOMAN\t has\n wavy hair!!  "), "the woman has wavy hair");
  EXPECT_EQ(matching_form("\xEF\xBC\xB4\xEF\xBD\x88\xEF\xBD\x85"), "the");  // full-width "Ｔｈｅ"
  EXPECT_EQ(matching_form("\xEF\xAC\x81ne"), "fine");                         // the ligature "ﬁ"
  EXPECT_EQ(matching_form("Stra\xC3\x9F" "e"), "strasse");                    // full case folding
  EXPECT_EQ(matching_form("caf\xC3\xA9"), matching_form("cafe\xCC\x81"));     // composed or not
  EXPECT_EQ(matching_form("caf\xC3\xA9"), "cafe");                              // accents, as BERT strips them
  EXPECT_EQ(matching_form("a+b = $5"), "a b 5");                                 // symbols as spaces
  EXPECT_EQ(matching_form("\xE2\x80\x9CQuoted\xE2\x80\x9D \xE2\x80\x94 text"), "quoted text");  // curly quotes, em dash
  EXPECT_EQ(matching_form("..."), "");
  EXPECT_NE(matching_form("a red dress"), matching_form("a red dresses"));
  EXPECT_THROW(matching_form("bad \xFF"), std::invalid_argument);
}
