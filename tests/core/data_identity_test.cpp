// Data identity by content (core/data/): SipHash-2-4 against its reference vectors, record digests
// that ignore order, names and labels, keyed private record sets (no plain digest, padded to N,
// incomparable under another key), their file format and its damage checks.
#include "data/dataset_identity.hpp"
#include "data/near_duplicates.hpp"
#include "data/record_key.hpp"
#include "data/record_set.hpp"
#include "data/siphash.hpp"

#include <privdiff/data/image_dataset.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
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
  return std::make_unique<sdk::ImageDataset>(sdk::LabelledBytes{bytes, labels, 10}, false, name);
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

// Near-duplicates (issue 36): what the hashes cannot see — a changed pixel, a mirror image, a
// one-pixel shift, another brightness and contrast, another size — found and named; other images
// are not near-duplicates of each other.
namespace {

// Smooth random images (shapes, like photographs, not noise): [n, c, h, w] bytes.
at::Tensor smooth_images(std::int64_t n, std::int64_t c, std::int64_t side, std::uint64_t seed) {
  at::manual_seed(seed);
  const at::Tensor coarse = at::rand({n, c, side / 4, side / 4});
  const at::Tensor fine = at::upsample_bilinear2d(coarse, {side, side}, false) + 0.05 * at::rand({n, c, side, side});
  return (fine.clamp(0, 1) * 255).round().to(at::kByte);
}

std::optional<NearDuplicate> near(const at::Tensor& a, const at::Tensor& b) {
  const auto labels = [](const at::Tensor& x) { return at::zeros({x.size(0)}, at::kLong); };
  return find_near_duplicate(*images(a, labels(a), "a"), *images(b, labels(b), "b"));
}

}  // namespace

TEST(NearDuplicates, OtherImagesAreNone) {
  const at::Tensor a = smooth_images(300, 1, 28, 1), b = smooth_images(300, 1, 28, 2);
  EXPECT_FALSE(near(a, b).has_value());
  EXPECT_FALSE(near(smooth_images(50, 3, 32, 3), smooth_images(50, 3, 32, 4)).has_value());
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

  at::Tensor moved = at::zeros_like(a[123]);
  moved.narrow(1, 1, 27).copy_(a[123].narrow(1, 0, 27));  // one row down
  found = near(a, with(moved));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->shift_y, 1);
  EXPECT_EQ(found->shift_x, 0);
  EXPECT_NE(found->how().find("shifted by (0, 1) pixels"), std::string::npos) << found->how();

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
