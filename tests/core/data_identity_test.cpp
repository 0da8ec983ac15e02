// Data identity by content (core/data/): SipHash-2-4 against its reference vectors, record digests
// that ignore order, names and labels, keyed private record sets (no plain digest, padded to N,
// incomparable under another key), their file format and its damage checks; near-duplicates under what
// pipelines do to images, and the data-identity service that combines them (disjointness.hpp).
#include "data/dataset_identity.hpp"
#include "data/disjointness.hpp"
#include "data/near_duplicate_cache.hpp"
#include "data/near_duplicates.hpp"
#include "data/prompt_check.hpp"
#include "data/record_key.hpp"
#include "data/record_set.hpp"
#include "data/siphash.hpp"

#include "image_changes.hpp"

#include <privdiff/data/image_dataset.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>

using namespace privdiff;
using namespace privdiff::core;

namespace {

SipKey counting_key() {
  SipKey k{};
  std::iota(k.begin(), k.end(), std::uint8_t{0});
  return k;
}

std::unique_ptr<sdk::ImageDataset> images(const at::Tensor& bytes, const at::Tensor& labels, const std::string& name) {
  return std::make_unique<sdk::ImageDataset>(sdk::LabelledBytes{bytes, labels, 10, {}}, false, name);
}

RecordKey key_from(std::uint8_t first, const std::string& id) {
  RecordKey k;
  k.key[0] = first;
  k.id = id;
  return k;
}

}  // namespace

TEST(SipHash, MatchesTheReferenceVectors) {
  // Aumasson & Bernstein's vectors: key 00..0f, message 00..(n-1).
  const SipKey key = counting_key();
  std::uint8_t message[64];
  std::iota(message, message + 64, std::uint8_t{0});
  EXPECT_EQ(siphash24(key, message, 0), 0x726fdb47dd0e0e31ULL);
  EXPECT_EQ(siphash24(key, message, 1), 0x74f839c593dc67fdULL);
  EXPECT_EQ(siphash24(key, message, 15), 0xa129ca6149be45e5ULL);  // the paper's worked example
}

TEST(DatasetIdentity, RecordsAreTheirPixelsWhateverTheOrderNameOrLabel) {
  const at::Tensor bytes = at::randint(0, 256, {30, 1, 4, 4}, at::kByte);
  const at::Tensor labels = at::arange(30, at::kLong).remainder(10);
  const DatasetIdentity a = dataset_identity(*images(bytes, labels, "a"));
  const at::Tensor reversed = at::arange(29, -1, -1, at::kLong);
  const DatasetIdentity b = dataset_identity(*images(bytes.index_select(0, reversed), (labels + 1).remainder(10), "b"));
  EXPECT_EQ(a.records, b.records);  // the same records, relabelled and reordered
  EXPECT_NE(a.ordered_digest, b.ordered_digest);  // ... but not the same data in order (resume)
  EXPECT_EQ(a.records.size(), 30u);
  const DatasetIdentity half = dataset_identity(*images(bytes.slice(0, 0, 15), labels.slice(0, 0, 15), "half"));
  EXPECT_EQ(shared_records(a.records, half.records), 15);
  const RecordKey key = key_from(1, "one");
  EXPECT_NE(a.fingerprint(key), dataset_identity(*images(bytes, labels, "a")).fingerprint(key_from(2, "two")));
  EXPECT_EQ(a.fingerprint(key), dataset_identity(*images(bytes, labels, "a")).fingerprint(key));
}

std::unique_ptr<sdk::ImageDataset> captioned(const at::Tensor& bytes, std::vector<std::string> captions) {
  sdk::LabelledBytes content{bytes, at::zeros({bytes.size(0)}, at::kLong), 1, {}};
  content.captions = std::move(captions);
  return std::make_unique<sdk::ImageDataset>(std::move(content), false, "captioned");
}

TEST(DatasetIdentity, ACaptionIsPartOfTheDataButTheImageDecidesTheRecord) {
  const at::Tensor bytes = at::randint(0, 256, {3, 1, 4, 4}, at::kByte);
  const DatasetIdentity a = dataset_identity(*captioned(bytes, {"A cat.", "a  DOG", "the bird"}));
  const DatasetIdentity b = dataset_identity(*captioned(bytes, {"a cat", "a dog!", "the bird"}));
  const DatasetIdentity other = dataset_identity(*captioned(bytes, {"a cow", "a dog", "the bird"}));
  const DatasetIdentity plain = dataset_identity(*images(bytes, at::zeros({3}, at::kLong), "plain"));
  EXPECT_EQ(a.records, plain.records);           // the same pictures under any caption: the same records
  EXPECT_EQ(a.records, other.records);
  EXPECT_NE(a.ordered_digest, b.ordered_digest);  // other captions, other data (a resume is refused)
  EXPECT_NE(a.ordered_digest, plain.ordered_digest);
  EXPECT_EQ(a.captions, b.captions);              // ... but the same captions in their matching form
  ASSERT_EQ(a.captions.size(), 3u);
  EXPECT_EQ(shared_records(a.captions, other.captions), 2);
  EXPECT_TRUE(plain.captions.empty());
  EXPECT_EQ(caption_digest("The Bird."), caption_digest("the bird"));
  EXPECT_NE(std::find(a.captions.begin(), a.captions.end(), caption_digest("THE BIRD")), a.captions.end());
}

TEST(RecordSets, CaptionHashesAreKeyedPaddedAndKeptInTheFile) {
  const at::Tensor bytes = at::randint(0, 256, {4, 1, 4, 4}, at::kByte);
  const DatasetIdentity data = dataset_identity(*captioned(bytes, {"one", "One.", "two", "three"}));
  ASSERT_EQ(data.captions.size(), 3u);  // "one" and "One." are one caption
  const RecordKey key = key_from(1, "one");
  const RecordSet set = private_record_set(data, key, "run");
  EXPECT_EQ(set.caption_hashes.size(), 4u);  // padded to N: how many captions repeat is not public
  EXPECT_EQ(shared_records(set.caption_hashes, data.captions), 0);  // keyed: no plain digest
  const RecordSet open = public_record_set(data, "run");
  EXPECT_EQ(open.caption_hashes, data.captions);
  const auto back = record_sets_from_bytes(record_sets_to_bytes({set, open}));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].caption_hashes, set.caption_hashes);
  EXPECT_EQ(back[1].caption_hashes, data.captions);
  EXPECT_EQ(back[1].hashes, data.records);
}

TEST(PromptCheck, PrivateCaptionsAreFoundInMatchingFormUnderTheKeyOnly) {
  const at::Tensor bytes = at::randint(0, 256, {3, 1, 4, 4}, at::kByte);
  const DatasetIdentity data = dataset_identity(*captioned(bytes, {"The woman has wavy hair.", "a man", "a hat"}));
  const RecordKey key = key_from(1, "one");
  const std::vector<Prompt> prompts = {{"the WOMAN has wavy-hair", "p.txt:1"}, {"a woman", "p.txt:2"}, {"A MAN!", "p.txt:3"}};
  const auto matches = private_prompts(prompts, {private_record_set(data, key, "/runs/r")}, key);
  ASSERT_EQ(matches.size(), 2u);
  EXPECT_EQ(matches[0].prompt.where, "p.txt:1");
  EXPECT_EQ(matches[1].prompt.where, "p.txt:3");
  EXPECT_NE(matches[0].what.find("is one of the private captions of captioned, 3 records, which /runs/r trained on privately"),
            std::string::npos) << matches[0].what;
  // Public captions are no match; a private set under another key is unknown, so every prompt counts.
  EXPECT_TRUE(private_prompts(prompts, {public_record_set(data, "/runs/r")}, key).empty());
  const auto unknown = private_prompts(prompts, {private_record_set(data, key_from(2, "two"), "/runs/r")}, key);
  ASSERT_EQ(unknown.size(), 3u);
  EXPECT_NE(unknown[1].what.find("cannot be compared"), std::string::npos);
  // An ancestry whose data were never recorded (init_from.cpp's "unknown" set, no caption hashes) too.
  const RecordSet unrecorded{true, "unknown", "the data of /runs/old (not recorded)", "/runs/old", {}, {}};
  const auto unseen = private_prompts(prompts, {unrecorded}, key);
  ASSERT_EQ(unseen.size(), 3u);
  EXPECT_NE(unseen[0].what.find("its data were not recorded"), std::string::npos) << unseen[0].what;
  // Private data without captions leave nothing to match.
  EXPECT_TRUE(private_prompts(prompts, {private_record_set(dataset_identity(*images(bytes, at::zeros({3}, at::kLong), "p")), key, "/r")}, key).empty());
  const std::string refusal = prompt_refusal(matches);
  EXPECT_NE(refusal.find("p.txt:3: the prompt 'A MAN!' is one of the private captions"), std::string::npos) << refusal;
  EXPECT_EQ(private_prompt_caveat(matches).find("wavy"), std::string::npos) << "a caveat is published: no caption in it";
  EXPECT_TRUE(prompt_refusal({}).empty());
}

// data-records.bin as runs before captions wrote it (version 1: no caption hashes) still reads.
TEST(RecordSets, AVersionOneFileStillReads) {
  std::string v1 = "privdiff-records 1\n";
  auto u64 = [&](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) v1.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  auto str = [&](const std::string& t) {
    u64(t.size());
    v1 += t;
  };
  u64(1);  // one set
  u64(0);  // public
  str("");
  str("d, 2 records");
  str("/runs/old");
  u64(2);
  u64(11);
  u64(42);
  u64(siphash24(SipKey{}, v1.data(), v1.size()));
  const auto sets = record_sets_from_bytes(v1);
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].hashes, (std::vector<std::uint64_t>{11, 42}));
  EXPECT_TRUE(sets[0].caption_hashes.empty());
  EXPECT_EQ(sets[0].origin, "/runs/old");
}

TEST(RecordSets, PrivateSetsAreKeyedPaddedToNAndComparableOnlyUnderTheirKey) {
  at::Tensor bytes = at::randint(0, 256, {20, 1, 4, 4}, at::kByte);
  bytes[19].copy_(bytes[18]);  // one duplicate record: 19 distinct
  const DatasetIdentity data = dataset_identity(*images(bytes, at::zeros({20}, at::kLong), "d"));
  ASSERT_EQ(data.records.size(), 19u);
  const RecordKey key = key_from(1, "one");
  const RecordSet set = private_record_set(data, key, "run");
  EXPECT_EQ(set.hashes.size(), 20u);  // padded: how many records are duplicates is not public
  EXPECT_TRUE(std::is_sorted(set.hashes.begin(), set.hashes.end()));
  EXPECT_EQ(shared_records(set.hashes, data.records), 0);  // no plain digest is written
  EXPECT_EQ(overlap(data, set, key).records, 19);
  const DatasetIdentity subset = dataset_identity(*images(bytes.slice(0, 0, 5), at::zeros({5}, at::kLong), "s"));
  EXPECT_EQ(overlap(subset, set, key).records, 5);
  const Overlap elsewhere = overlap(subset, set, key_from(2, "two"));
  EXPECT_FALSE(elsewhere.known);
  EXPECT_TRUE(elsewhere.any());  // unknown reads as shared
  const RecordSet open = public_record_set(subset, "run");
  EXPECT_EQ(overlap(data, open, key_from(2, "two")).records, 5);  // public sets compare under any key
}

TEST(RecordSets, TheFileRoundTripsAndDamageIsRefused) {
  const DatasetIdentity data = dataset_identity(*images(at::randint(0, 256, {8, 1, 4, 4}, at::kByte),
                                                        at::zeros({8}, at::kLong), "d"));
  const std::vector<RecordSet> sets{private_record_set(data, key_from(1, "one"), "a"), public_record_set(data, "b")};
  const std::string bytes = record_sets_to_bytes(sets);
  const auto back = record_sets_from_bytes(bytes);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(back[0].is_private);
  EXPECT_EQ(back[0].key_id, "one");
  EXPECT_EQ(back[0].hashes, sets[0].hashes);
  EXPECT_EQ(back[1].origin, "b");
  EXPECT_EQ(back[1].hashes, data.records);
  for (std::size_t at : {std::size_t{0}, bytes.size() / 2, bytes.size() - 1}) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x40);
    EXPECT_THROW(record_sets_from_bytes(damaged), std::runtime_error) << "byte " << at;
  }
  EXPECT_THROW(record_sets_from_bytes(bytes.substr(0, bytes.size() - 9)), std::runtime_error);
}

TEST(RecordKey, IsMadeOnceOwnerOnlyAndADamagedOneIsRefused) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("privdiff_record_key_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const char* saved = std::getenv("PRIVDIFF_RECORD_KEY");
  const std::string before = saved ? saved : "";
  const fs::path file = dir / "sub" / "record.key";
  ::setenv("PRIVDIFF_RECORD_KEY", file.c_str(), 1);
  const RecordKey& made = record_key();
  EXPECT_TRUE(fs::is_regular_file(file));
  EXPECT_EQ(fs::status(file).permissions() & (fs::perms::group_all | fs::perms::others_all), fs::perms::none);
  EXPECT_EQ(made.id.size(), 16u);
  const fs::path damaged = dir / "damaged.key";
  std::ofstream(damaged) << "not a key\n";
  ::setenv("PRIVDIFF_RECORD_KEY", damaged.c_str(), 1);
  try {
    record_key();
    ADD_FAILURE() << "a damaged key was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("is damaged"), std::string::npos) << e.what();
  }
  if (saved) ::setenv("PRIVDIFF_RECORD_KEY", before.c_str(), 1); else ::unsetenv("PRIVDIFF_RECORD_KEY");
  fs::remove_all(dir);
}

// Near-duplicates (issues 36, 50): what the hashes cannot see — a changed grey level, a mirror image,
// shifts, rotations, crops, padding, resizing, noise, another brightness, contrast or size — found and
// named; other images are not near-duplicates of each other.
namespace {

// Smooth random images (shapes, like photographs, not noise) filling the frame: [n, c, h, w] bytes.
at::Tensor smooth_images(std::int64_t n, std::int64_t c, std::int64_t side, std::uint64_t seed) {
  at::manual_seed(seed);
  const at::Tensor coarse = at::rand({n, c, side / 4, side / 4});
  const at::Tensor fine = at::upsample_bilinear2d(coarse, {side, side}, false) + 0.05 * at::rand({n, c, side, side});
  return (fine.clamp(0, 1) * 255).round().to(at::kByte);
}

// Objects on black, as Fashion-MNIST photographs its products: smooth random texture inside an ellipse
// of random size and place near the middle, [n, 1, 28, 28] bytes.
at::Tensor object_images(std::int64_t n, std::uint64_t seed) {
  at::manual_seed(seed);
  const at::Tensor texture = at::upsample_bilinear2d(at::rand({n, 1, 8, 8}), {28, 28}, false);
  const at::Tensor c = (at::arange(28, at::kFloat) - 13.5).view({1, 1, 1, 28});
  const at::Tensor rx = 8 + 5 * at::rand({n, 1, 1, 1}), ry = 9 + 4 * at::rand({n, 1, 1, 1});
  const at::Tensor cx = 2 * at::rand({n, 1, 1, 1}) - 1, cy = 2 * at::rand({n, 1, 1, 1}) - 1;
  const at::Tensor inside = ((c - cx) / rx).pow(2) + ((c.transpose(2, 3) - cy) / ry).pow(2);
  const at::Tensor mask = at::sigmoid((1 - inside) * 8);
  return ((0.25 + 0.75 * texture) * mask * 255).round().to(at::kByte);
}

std::optional<NearDuplicate> near(const at::Tensor& a, const at::Tensor& b) {
  const auto labels = [](const at::Tensor& x) { return at::zeros({x.size(0)}, at::kLong); };
  return find_near_duplicate(*images(a, labels(a), "a"), *images(b, labels(b), "b"));
}

// b: 200 other objects with `copy` (a changed copy of a[123]) at 45.
at::Tensor others_with(const at::Tensor& copy) {
  at::Tensor b = object_images(200, 2);
  b[45].copy_(copy);
  return b;
}

}  // namespace

TEST(NearDuplicates, OtherImagesAreNone) {
  const at::Tensor a = smooth_images(300, 1, 28, 1), b = smooth_images(300, 1, 28, 2);
  EXPECT_FALSE(near(a, b).has_value());
  EXPECT_FALSE(near(smooth_images(50, 3, 32, 3), smooth_images(50, 3, 32, 4)).has_value());
  const auto objects = near(object_images(300, 1), object_images(300, 2));
  EXPECT_FALSE(objects.has_value()) << objects->first << " / " << objects->second << ": " << objects->how();
}

TEST(NearDuplicates, ChangedPixelsMirrorsShiftsContrastAndSizeAreFound) {
  const at::Tensor a = smooth_images(300, 1, 28, 1);
  const at::Tensor others = smooth_images(300, 1, 28, 2);
  const auto with = [&](const at::Tensor& copy) {  // b: other images with the copy of a[123] at 45
    at::Tensor b = others.clone();
    b[45].copy_(copy);
    return b;
  };
  at::Tensor pixel = a[123].clone();
  pixel[0][0][0] = static_cast<std::uint8_t>(pixel[0][0][0].item<int>() ^ 1);
  auto found = near(a, with(pixel));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->first, 123);
  EXPECT_EQ(found->second, 45);
  EXPECT_FALSE(found->mirrored);
  EXPECT_GT(found->correlation, 0.999);

  found = near(a, with(a[123].flip(2)));
  ASSERT_TRUE(found.has_value());
  EXPECT_TRUE(found->mirrored);
  EXPECT_EQ(found->how().rfind("a mirror image, correlation 1.0000", 0), 0u) << found->how();

  found = near(a, with(image_changes::shifted(a.narrow(0, 123, 1), 0, 1)[0]));  // one row down
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->shift_y, 1);
  EXPECT_EQ(found->shift_x, 0);
  EXPECT_NE(found->how().find("the same image shifted by (0, 1) pixels"), std::string::npos) << found->how();

  const at::Tensor dimmer = (a[123].to(at::kFloat) * 0.6 + 20).round().to(at::kByte);
  found = near(a, with(dimmer));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->second, 45);

  // Another size (56 x 56, each pixel twice in each direction) and colour (the grey in 3 channels).
  const at::Tensor big = at::upsample_nearest2d(a.narrow(0, 0, 10).to(at::kFloat), {56, 56}).to(at::kByte).repeat({1, 3, 1, 1});
  found = near(big, a);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->first, found->second);
}

// What the field's pipelines do to a record (issue 50): each change of one object among 200 others is
// found as that object, with the transform that undoes it.
TEST(NearDuplicates, ShiftsRotationsCropsPaddingResizingAndNoiseAreFound) {
  using namespace privdiff::image_changes;
  const at::Tensor a = object_images(150, 1);
  const at::Tensor one = a.narrow(0, 123, 1);
  struct Case {
    const char* name;
    at::Tensor b;
    double rotation, scale;  // expected, within 2 degrees (3 degrees may read as none) and 0.04
  };
  const std::vector<Case> cases{
      {"one grey level up", others_with(one_grey_level(one)[0]), 0, 1},
      {"shift (2, 0)", others_with(shifted(one, 2, 0)[0]), 0, 1},
      {"shift (-2, 2)", others_with(shifted(one, -2, 2)[0]), 0, 1},
      {"rotation 3", others_with(rotated(one, 3)[0]), 3, 1},
      {"rotation -7", others_with(rotated(one, -7)[0]), -7, 1},
      {"rotation 10", others_with(rotated(one, 10)[0]), 10, 1},
      {"crop 2 per side", others_with(cropped(one, 2, 2, 2, 2)[0]), 0, 28.0 / 24},
      {"crop 2 left and top", others_with(cropped(one, 2, 2, 0, 0)[0]), 0, 28.0 / 26},
      {"noise 25", others_with(noisy(one, 25, 7)[0]), 0, 1},
      // Another size: compared at 28 x 28, padding to 32 shrinks the content by 28 / 32.
      {"padded to 32", padded(others_with(one[0]), 32), 0, 28.0 / 32},
      {"resized to 32", resized(others_with(one[0]), 32), 0, 1},
  };
  for (const auto& c : cases) {
    const auto found = near(a, c.b);
    ASSERT_TRUE(found.has_value()) << c.name;
    EXPECT_EQ(found->first, 123) << c.name;
    EXPECT_EQ(found->second, 45) << c.name;
    EXPECT_FALSE(found->mirrored) << c.name;
    if (std::abs(c.rotation) > 5) {
      EXPECT_NEAR(found->rotation, c.rotation, 2) << c.name << ": " << found->how();
    }
    EXPECT_NEAR(found->scale, c.scale, 0.04) << c.name << ": " << found->how();
  }
  const auto turned = near(a, others_with(rotated(one, 8)[0]));
  ASSERT_TRUE(turned.has_value());
  EXPECT_NE(turned->how().find("rotated clockwise by"), std::string::npos) << turned->how();
}

// The data-identity service (data/disjointness.hpp): hashes first, then near-duplicates, and an answer
// that says what it looked for and what not.
namespace {

ProtectedData protect(const sdk::Dataset& data, const std::string& description, bool with_images) {
  return {description, public_record_set(dataset_identity(data), "run"), with_images ? &data : nullptr,
          with_images ? "" : "its data cannot be opened: gone"};
}

}  // namespace

TEST(Disjointness, SharedRecordsThenNearCopiesAreFoundAndWhatWasNotCheckedIsSaid) {
  const at::Tensor bytes = object_images(100, 1);
  const auto labels = at::zeros({100}, at::kLong);
  const auto secret = images(bytes, labels, "secret");
  const std::vector<ProtectedData> opened{protect(*secret, "the private data", true)};
  const RecordKey key = key_from(1, "one");

  const auto copies = images(bytes.narrow(0, 10, 5).clone(), at::zeros({5}, at::kLong), "copies");
  Disjointness d = check_disjointness(*copies, opened, key);
  EXPECT_FALSE(d.disjoint());
  EXPECT_EQ(d.shared, 5);
  EXPECT_EQ(d.finding(), "holds 5 records of the private data");
  EXPECT_EQ(d.summary(), "holds records of the private data");

  // The audit's held-out split: other records, and copies of private ones each one grey level up.
  at::Tensor split = object_images(30, 3);
  split.narrow(0, 0, 4).copy_(image_changes::one_grey_level(bytes.narrow(0, 20, 4)));
  const auto held_out = images(split, at::zeros({30}, at::kLong), "held out");
  d = check_disjointness(*held_out, opened, key);
  EXPECT_FALSE(d.disjoint());
  EXPECT_EQ(d.shared, 0);
  EXPECT_EQ(d.near_copies, 4);
  ASSERT_TRUE(d.nearest.has_value());
  EXPECT_EQ(d.nearest->second, d.nearest->first + 20);
  EXPECT_EQ(d.finding().rfind("holds 4 records that are near-duplicates of records of the private data (e.g. its "
                              "record ", 0), 0u) << d.finding();
  EXPECT_EQ(d.summary(), "holds near-duplicates of records of the private data");  // no record numbers
  EXPECT_NE(d.checked().find("not looked for: rotations beyond 10 degrees, vertical flips, inverted (negative) images, "
                             "gamma"), std::string::npos) << d.checked();

  // Private images that cannot be opened: the hashes alone decide, and the answer says so.
  d = check_disjointness(*held_out, {protect(*secret, "the private data", false)}, key);
  EXPECT_TRUE(d.disjoint());
  EXPECT_NE(d.checked().find("not checked for near-duplicates against the private data (its data cannot be opened: "
                             "gone)"), std::string::npos) << d.checked();

  // Keyed sets under another key cannot be compared: that is not disjoint.
  const RecordSet keyed = private_record_set(dataset_identity(*secret), key, "run");
  d = check_disjointness(*held_out, {{"the keyed data", keyed, secret.get(), ""}}, key_from(2, "two"));
  EXPECT_FALSE(d.disjoint());
  EXPECT_EQ(d.finding().rfind("cannot be compared with the keyed data (recorded under another record key", 0), 0u);
  d = check_disjointness(*held_out, {{"the keyed data", keyed, secret.get(), ""}}, key);
  EXPECT_EQ(d.near_copies, 4);  // under its own key: compared, then near-copies found
}

// The near-duplicate answers are kept per user (data/near_duplicate_cache.hpp): computed once, read back
// for the same data, owner-only, under a name that is no plain digest; a damaged answer is computed again.
TEST(NearDuplicateCache, AnswersAreKeptOwnerOnlyAndReadBack) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("privdiff-nd-cache-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ::setenv("PRIVDIFF_CACHE_DIR", (dir / "cache").c_str(), 1);
  ::setenv("PRIVDIFF_RECORD_KEY", (dir / "record.key").c_str(), 1);
  const at::Tensor a = object_images(40, 1);
  at::Tensor b = object_images(60, 2);
  b[7].copy_(image_changes::one_grey_level(a.narrow(0, 3, 1))[0]);
  const auto labels = [](const at::Tensor& x) { return at::zeros({x.size(0)}, at::kLong); };
  const auto da = images(a, labels(a), "a"), db = images(b, labels(b), "b");

  const auto first = remembered_near_duplicates(*da, *db);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].first, 3);
  EXPECT_EQ(first[0].second, 7);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir / "cache" / "near-duplicates")) files.push_back(entry.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(fs::status(dir / "cache" / "near-duplicates").permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(fs::status(files[0]).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(files[0].filename().string().find(std::to_string(dataset_identity(*da).ordered_digest)), std::string::npos);

  // Read back: an answer planted in the file is what comes back (the check does not run again).
  std::ofstream(files[0]) << "[[3, 9, 0.999, false, 0, 1, 0, 0]]";
  const auto again = remembered_near_duplicates(*da, *db);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].second, 9);
  // Other data, another answer; a damaged file is computed again.
  EXPECT_TRUE(remembered_near_duplicates(*da, *images(object_images(60, 5), labels(b), "c")).empty());
  std::ofstream(files[0]) << "not json";
  EXPECT_EQ(remembered_near_duplicates(*da, *db).at(0).second, 7);
  fs::remove_all(dir);
}
