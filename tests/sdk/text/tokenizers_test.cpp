// The caption tokenizers against the reference tokenizers' ids on tests/fixtures/text/tokenizers.json
// (scripts/make_text_fixtures.sh: HF BertTokenizerFast, CLIPTokenizerFast, CLIPTokenizer and
// open_clip), and their refusals of damaged vocabularies.
#include <privdiff/text/clip_tokenizer.hpp>
#include <privdiff/text/wordpiece_tokenizer.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using privdiff::sdk::ClipTokenizer;
using privdiff::sdk::WordPieceTokenizer;

namespace {

const fs::path kDir = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "text";

const nlohmann::json& fixture() {
  static const nlohmann::json parsed = nlohmann::json::parse(std::ifstream(kDir / "tokenizers.json"));
  return parsed;
}

std::vector<std::int64_t> first(const nlohmann::json& ids, std::size_t n) {
  std::vector<std::int64_t> all = ids.get<std::vector<std::int64_t>>();
  all.resize(n);
  return all;
}

fs::path scratch_file(const std::string& name, const std::string& content) {
  const fs::path dir = fs::temp_directory_path() / ("privdiff_text_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << content;
  return dir / name;
}

template <class Make>
std::string refusal(Make make) {
  try {
    make();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(accepted)";
}

const std::string kBertHead = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";

}  // namespace

TEST(WordPieceTokenizer, IdsEqualBertTokenizerFastOnTheCorpus) {
  const auto& bert = fixture()["bert"];
  const WordPieceTokenizer tokenizer = WordPieceTokenizer::from_file(kDir / bert["vocab"].get<std::string>());
  const auto& corpus = fixture()["corpus"];
  ASSERT_EQ(corpus.size(), bert["rows"].size());
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    const auto& row = bert["rows"][i];
    const std::string text = corpus[i];
    EXPECT_EQ(tokenizer.encode(text), first(row["ids"], row["length"])) << "corpus line " << i << ": " << text;
    const auto padded = tokenizer.padded(text);
    EXPECT_EQ(padded.ids, row["ids"].get<std::vector<std::int64_t>>()) << "padded, line " << i;
    EXPECT_EQ(std::count(padded.mask.begin(), padded.mask.end(), 1), row["length"].get<long>());
  }
}

TEST(ClipTokenizer, IdsEqualClipTokenizerFastOnTheCorpus) {
  const auto& clip = fixture()["clip"];
  const ClipTokenizer tokenizer = ClipTokenizer::from_file(kDir / clip["merges"].get<std::string>());
  EXPECT_EQ(tokenizer.vocabulary_size(), 512 + clip["merges_used"].get<std::size_t>() + 2);
  EXPECT_EQ(tokenizer.pad_id(), clip["pad_id"].get<std::int64_t>());
  const auto& corpus = fixture()["corpus"];
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i];
    EXPECT_EQ(tokenizer.encode(text), clip["rows"][i]["ids"].get<std::vector<std::int64_t>>())
        << "corpus line " << i << ": " << text;
  }
}

// open_clip (and HF's slow CLIPTokenizer) clean the caption with ftfy (and html.unescape) and lower-case
// with Python's final sigma first; wherever that leaves the text as it is, their ids are ours, padded
// with 0 as open_clip pads.
TEST(ClipTokenizer, IdsEqualOpenClipWhereItsCleaningChangesNothing) {
  const auto& clip = fixture()["clip"];
  const ClipTokenizer tokenizer =
      ClipTokenizer::from_file(kDir / "clip_merges.txt.gz", 77, ClipTokenizer::Padding::zero);
  std::size_t agreeing = 0;
  const auto& corpus = fixture()["corpus"];
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    const auto& row = clip["rows"][i];
    if (!row["open_clip_agrees"].get<bool>()) continue;
    ++agreeing;
    std::vector<std::int64_t> expected = row["open_clip_ids"];
    expected.resize(77, 0);
    EXPECT_EQ(tokenizer.padded(corpus[i].get<std::string>()).ids, expected) << "corpus line " << i;
  }
  EXPECT_GE(agreeing, 20u) << "the fixture's corpus should be mostly text ftfy leaves alone";
}

TEST(Tokenizers, CutToTheContextLengthWithTheEndTokenLast) {
  const WordPieceTokenizer bert = WordPieceTokenizer::from_file(kDir / "bert_vocab.txt", 4);
  const auto ids = bert.encode("a photo of a woman");
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 3);  // [CLS] is line 4 of bert_vocab.txt
  EXPECT_EQ(ids.back(), 4);   // [SEP]
  const ClipTokenizer clip = ClipTokenizer::from_file(kDir / "clip_merges.txt", 3);
  EXPECT_EQ(clip.encode("a photo of a woman"),
            (std::vector<std::int64_t>{clip.start_id(), clip.encode("a")[1], clip.end_id()}));
  EXPECT_EQ(clip.encode(""), (std::vector<std::int64_t>{clip.start_id(), clip.end_id()}));
}

TEST(Tokenizers, CaptionsThatAreNotUtf8AreRefusedByByte) {
  const WordPieceTokenizer bert = WordPieceTokenizer::from_file(kDir / "bert_vocab.txt");
  const ClipTokenizer clip = ClipTokenizer::from_file(kDir / "clip_merges.txt");
  EXPECT_EQ(refusal([&] { bert.encode("caf\xc3"); }), "not valid UTF-8 at byte 3");
  EXPECT_EQ(refusal([&] { clip.encode("ok \xed\xa0\x80 surrogate"); }), "not valid UTF-8 at byte 3");
  EXPECT_EQ(refusal([&] { clip.encode("\xc0\xaf overlong"); }), "not valid UTF-8 at byte 0");
}

TEST(WordPieceTokenizer, DamagedVocabulariesAreRefusedByLine) {
  auto vocab = [](const std::string& name, const std::string& text) {
    const fs::path file = scratch_file(name, text);
    return file.string() + refusal([&] { WordPieceTokenizer::from_file(file); }).substr(file.string().size());
  };
  const std::string dir = scratch_file("probe", "").parent_path().string() + "/";
  EXPECT_EQ(vocab("twice.txt", kBertHead + "a\nb\na\n"), dir + "twice.txt:8: token 'a' again (first on line 6)");
  EXPECT_EQ(vocab("empty.txt", kBertHead + "a\n\nb\n"), dir + "empty.txt:7: an empty line (a vocab.txt has one token a line)");
  EXPECT_EQ(vocab("space.txt", kBertHead + "a b\n"), dir + "space.txt:6: a token with whitespace in it");
  EXPECT_EQ(vocab("crlf.txt", "[PAD]\r\n[UNK]\r\n"), dir + "crlf.txt:1: a token with whitespace in it (Windows line ends?)");
  EXPECT_EQ(vocab("latin1.txt", kBertHead + "caf\xe9\n"), dir + "latin1.txt:6: not valid UTF-8 at byte 3");
  EXPECT_EQ(vocab("nomask.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n"),
            dir + "nomask.txt: has no [MASK] token (a BERT vocab.txt has all of [PAD] [UNK] [CLS] [SEP] [MASK])");
  EXPECT_EQ(refusal([&] { WordPieceTokenizer::from_file(dir + "absent.txt"); }),
            dir + "absent.txt: no such file (a tokenizer's vocabulary file)");
  const std::string fifo = dir + "fifo.txt";
  ::mkfifo(fifo.c_str(), 0600);  // refused without being opened, so nothing blocks
  EXPECT_EQ(refusal([&] { WordPieceTokenizer::from_file(fifo); }), fifo + ": not a regular file (a folder, a pipe or a device)");
}

TEST(ClipTokenizer, DamagedMergesAreRefusedByLine) {
  auto merges = [](const std::string& name, const std::string& text) {
    const fs::path file = scratch_file(name, text);
    return refusal([&] { ClipTokenizer::from_file(file); });
  };
  const std::string dir = scratch_file("probe", "").parent_path().string() + "/";
  EXPECT_EQ(merges("header.txt", "a b\n"), dir + "header.txt:1: expected the '#version: …' line that starts a CLIP merges file");
  EXPECT_EQ(merges("three.txt", "#version: 0.2\na b c\n"),
            dir + "three.txt:2: expected a merge, two symbols with one space between them: 'a b c'");
  EXPECT_EQ(merges("unknown.txt", "#version: 0.2\nt h\nth e</w>\nthe x\n"),
            dir + "unknown.txt:4: symbol 'the' is neither a byte character nor made by an earlier merge");
  EXPECT_EQ(merges("again.txt", "#version: 0.2\nt h\ni n\nt h\n"), dir + "again.txt:4: the merge makes 'th' again (first on line 2)");
  EXPECT_EQ(merges("remade.txt", "#version: 0.2\nt h\nh e\nth e\nt he\n"),
            dir + "remade.txt:5: the merge makes 'the' again (first on line 4)");
  // A merge past CLIP's 48,894 is not read: a file of more lines (open_clip's has 262,145) is fine.
  const ClipTokenizer capped = ClipTokenizer::from_file(scratch_file("capped.txt", "#version: 0.2\nt h\nbad line here\n"), 77,
                                                        ClipTokenizer::Padding::end_of_text, 1);
  EXPECT_EQ(capped.vocabulary_size(), 512u + 1 + 2);
}

// A caption is refused beyond 16,384 bytes; up to there, encoding stops once the context is full (the
// ids are the same as encoding all of it and cutting).
TEST(Tokenizers, LongCaptionsStopAtTheContextAndOverlongOnesAreRefused) {
  const WordPieceTokenizer bert = WordPieceTokenizer::from_file(kDir / "bert_vocab.txt");
  const ClipTokenizer clip = ClipTokenizer::from_file(kDir / "clip_merges.txt");
  std::string words;
  while (words.size() + 8 <= privdiff::sdk::Tokenizer::kMaxCaptionBytes) words += "a photo ";
  EXPECT_EQ(clip.encode(words).size(), 77u);
  EXPECT_EQ(bert.encode(words).size(), 77u);
  std::string short_words;
  for (int i = 0; i < 60; ++i) short_words += "a photo ";
  EXPECT_EQ(clip.encode(words), clip.encode(short_words));
  EXPECT_EQ(bert.encode(words), bert.encode(short_words));
  const std::string one_word(privdiff::sdk::Tokenizer::kMaxCaptionBytes, 'x');
  EXPECT_EQ(clip.encode(one_word).size(), 77u);
  EXPECT_EQ(bert.encode(one_word).size(), 3u);  // [CLS] [UNK] [SEP]: a word over 100 characters
  const std::string over(privdiff::sdk::Tokenizer::kMaxCaptionBytes + 1, 'x');
  EXPECT_EQ(refusal([&] { clip.encode(over); }),
            "a caption of 16385 bytes, over the 16384 a caption may have (the encoder reads its first tokens only)");
  EXPECT_EQ(refusal([&] { bert.encode(over); }).substr(0, 25), "a caption of 16385 bytes,");
}
