#include "run/tensorboard_events.hpp"

#include <array>
#include <cstring>

namespace privdiff::core {

namespace {

// Protocol buffer wire format: a field's key is (number << 3 | wire type); proto3 leaves out a
// field at its default (wall_time 0, step 0), but never a member of a oneof (simple_value).
void varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

template <typename T>
void little_endian(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // (x86-64 and aarch64 are little-endian)
  out.append(bytes, sizeof(T));
}

void length_delimited(std::string& out, int field, const std::string& bytes) {
  varint(out, static_cast<std::uint64_t>(field) << 3 | 2);
  varint(out, bytes.size());
  out += bytes;
}

std::string event_header(double wall_time, std::int64_t step) {
  std::string e;
  if (wall_time != 0) {
    e += '\x09';  // 1: wall_time, 64-bit
    little_endian(e, wall_time);
  }
  if (step != 0) {
    e += '\x10';  // 2: step, varint (two's complement for a negative one, as int64 is)
    varint(e, static_cast<std::uint64_t>(step));
  }
  return e;
}

std::uint32_t masked(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace

std::uint32_t crc32c(const char* data, std::size_t size) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected 0x1EDC6F41
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) crc = table[(crc ^ static_cast<unsigned char>(data[i])) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

std::string tfrecord(const std::string& data) {
  std::string out, length;
  little_endian(length, static_cast<std::uint64_t>(data.size()));
  out += length;
  little_endian(out, masked(crc32c(length.data(), length.size())));
  out += data;
  little_endian(out, masked(crc32c(data.data(), data.size())));
  return out;
}

std::string file_version_event(double wall_time) {
  std::string e = event_header(wall_time, 0);
  length_delimited(e, 3, "brain.Event:2");  // 3: file_version
  return e;
}

std::string scalars_event(double wall_time, std::int64_t step, const std::vector<std::pair<std::string, float>>& values) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string v;
    length_delimited(v, 1, tag);  // Summary.Value 1: tag
    v += '\x15';                  // 2: simple_value, 32-bit
    little_endian(v, value);
    length_delimited(summary, 1, v);  // Summary 1: value (repeated)
  }
  std::string e = event_header(wall_time, step);
  length_delimited(e, 5, summary);  // 5: summary
  return e;
}

}  // namespace privdiff::core
