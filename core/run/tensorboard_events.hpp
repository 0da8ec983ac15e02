#pragma once
// TensorBoard's event files, for scalars: tensorflow.Event protocol buffers (wall_time, step, and
// a file_version or a Summary of simple_value scalars) in TFRecord framing (a length and the data,
// each followed by its masked CRC-32C). Encoded here, ~60 lines, rather than through protobuf and
// TensorFlow's .proto files: privdiff writes two message kinds, byte for byte what
// tensorboard's own RecordWriter writes for them (tests/fixtures/tensorboard, with its script).

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace privdiff::core {

/// CRC-32C (Castagnoli) of `size` bytes, as TFRecord uses it before masking.
std::uint32_t crc32c(const char* data, std::size_t size);

/// One TFRecord: the 8-byte length, its masked CRC-32C, `data`, and the data's masked CRC-32C.
std::string tfrecord(const std::string& data);

/// An Event whose file_version is "brain.Event:2", as TensorBoard's writers begin every file.
std::string file_version_event(double wall_time);

/// An Event at `step` with a Summary of scalars (tag, simple_value), in the order given.
std::string scalars_event(double wall_time, std::int64_t step, const std::vector<std::pair<std::string, float>>& values);

}  // namespace privdiff::core
