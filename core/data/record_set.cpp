#include "data/record_set.hpp"

#include <privdiff/engine/random_stream.hpp>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace privdiff::core {

namespace {

std::string describe(const DatasetIdentity& data) { return data.name + ", " + std::to_string(data.size) + " records"; }

std::vector<std::uint64_t> keyed(const std::vector<std::uint64_t>& digests, const RecordKey& key) {
  std::vector<std::uint64_t> out;
  out.reserve(digests.size());
  for (std::uint64_t d : digests) out.push_back(siphash24(key.key, &d, sizeof d));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

constexpr char magic[] = "privdiff-records 2\n";
constexpr char magic_v1[] = "privdiff-records 1\n";  // (before captions: no caption hashes)
constexpr SipKey checksum_key{};

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_string(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

// A cursor over the file's bytes that refuses to read past the end.
struct Reader {
  const std::string& bytes;
  std::size_t at = 0;
  std::uint64_t u64() {
    need(8);
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
    at += 8;
    return v;
  }
  std::string string() {
    const std::uint64_t n = u64();
    need(n);
    std::string s = bytes.substr(at, n);
    at += n;
    return s;
  }
  void need(std::uint64_t n) const {
    if (n > bytes.size() - at) throw std::runtime_error("damaged: truncated");
  }
};

// Keyed and padded with random hashes to N entries: how many records (or captions) are duplicates is
// not public.
std::vector<std::uint64_t> keyed_and_padded(const std::vector<std::uint64_t>& digests, const RecordKey& key,
                                            std::int64_t size) {
  std::vector<std::uint64_t> hashes = keyed(digests, key);
  std::vector<std::uint64_t> padding(static_cast<std::size_t>(std::max<std::int64_t>(0, size)) -
                                     std::min<std::size_t>(hashes.size(), static_cast<std::size_t>(size)));
  sdk::engine::os_random_bytes(padding.data(), padding.size() * sizeof(std::uint64_t));
  hashes.insert(hashes.end(), padding.begin(), padding.end());
  std::sort(hashes.begin(), hashes.end());
  return hashes;
}

}  // namespace

RecordSet private_record_set(const DatasetIdentity& data, const RecordKey& key, const std::string& origin) {
  RecordSet set{true, key.id, describe(data), origin, keyed_and_padded(data.records, key, data.size), {}};
  if (!data.captions.empty()) set.caption_hashes = keyed_and_padded(data.captions, key, data.size);
  return set;
}

RecordSet public_record_set(const DatasetIdentity& data, const std::string& origin) {
  return RecordSet{false, "", describe(data), origin, data.records, data.captions};
}

Overlap overlap(const DatasetIdentity& data, const RecordSet& set, const RecordKey& key) {
  if (!set.is_private) return {true, shared_records(data.records, set.hashes)};
  if (set.key_id != key.id) return {false, 0};
  return {true, shared_records(keyed(data.records, key), set.hashes)};
}

std::string record_sets_to_bytes(const std::vector<RecordSet>& sets) {
  std::string out = magic;
  put_u64(out, sets.size());
  for (const auto& set : sets) {
    put_u64(out, set.is_private ? 1 : 0);
    put_string(out, set.key_id);
    put_string(out, set.description);
    put_string(out, set.origin);
    for (const auto* list : {&set.hashes, &set.caption_hashes}) {
      put_u64(out, list->size());
      for (std::uint64_t h : *list) put_u64(out, h);
    }
  }
  put_u64(out, siphash24(checksum_key, out.data(), out.size()));
  return out;
}

std::vector<RecordSet> record_sets_from_bytes(const std::string& bytes) {
  const std::size_t head = sizeof magic - 1;
  static_assert(sizeof magic == sizeof magic_v1);
  const bool v1 = bytes.compare(0, head, magic_v1) == 0;
  if (!v1 && bytes.compare(0, head, magic) != 0) throw std::runtime_error("damaged: not a privdiff record file");
  if (bytes.size() < head + 16) throw std::runtime_error("damaged: truncated");
  std::uint64_t sum = 0;
  std::memcpy(&sum, bytes.data() + bytes.size() - 8, 8);  // (little-endian hosts, as written)
  if (sum != siphash24(checksum_key, bytes.data(), bytes.size() - 8)) throw std::runtime_error("damaged: checksum mismatch");
  const std::string body = bytes.substr(0, bytes.size() - 8);
  Reader r{body, head};
  const std::uint64_t count = r.u64();
  if (count > body.size() / 8) throw std::runtime_error("damaged: impossible set count");
  std::vector<RecordSet> sets(count);
  for (auto& set : sets) {
    set.is_private = r.u64() != 0;
    set.key_id = r.string();
    set.description = r.string();
    set.origin = r.string();
    for (auto* list : {&set.hashes, &set.caption_hashes}) {
      if (v1 && list == &set.caption_hashes) break;
      const std::uint64_t n = r.u64();
      if (n > (body.size() - r.at) / 8) throw std::runtime_error("damaged: truncated");
      list->resize(n);
      for (auto& h : *list) h = r.u64();
    }
  }
  if (r.at != body.size()) throw std::runtime_error("damaged: trailing bytes");
  return sets;
}

}  // namespace privdiff::core
