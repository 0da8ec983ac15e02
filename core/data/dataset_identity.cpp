#include "data/dataset_identity.hpp"

#include <privdiff/data/pixels.hpp>
#include <privdiff/text/caption_matching.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <sstream>

namespace privdiff::core {

namespace {
constexpr SipKey public_key{};  // digests anyone can recompute (public data, in-memory comparisons)
}

std::uint64_t record_digest(const std::uint8_t* pixels, std::int64_t channels, std::int64_t height, std::int64_t width) {
  const std::int64_t count = channels * height * width;
  std::vector<std::uint8_t> bytes(24 + static_cast<std::size_t>(count));
  const std::int64_t shape[3] = {channels, height, width};
  std::memcpy(bytes.data(), shape, 24);
  std::memcpy(bytes.data() + 24, pixels, static_cast<std::size_t>(count));
  return siphash24(public_key, bytes.data(), bytes.size());
}

std::uint64_t caption_digest(const std::string& caption) {
  const std::string form = sdk::matching_form(caption);
  return siphash24(public_key, form.data(), form.size());
}

std::int64_t shared_records(const std::vector<std::uint64_t>& a, const std::vector<std::uint64_t>& b) {
  std::int64_t n = 0;
  for (auto i = a.begin(), j = b.begin(); i != a.end() && j != b.end();) {
    if (*i < *j) {
      ++i;
    } else if (*j < *i) {
      ++j;
    } else {
      ++n, ++i, ++j;
    }
  }
  return n;
}

DatasetIdentity dataset_identity(const sdk::Dataset& data, std::ostream* log) {
  DatasetIdentity id;
  const bool large = log && data.size() > 50'000;
  if (large) *log << "fingerprinting " << data.name() << ": " << data.size() << " records\n" << std::flush;
  auto last = std::chrono::steady_clock::now();
  id.name = data.name();
  id.size = data.size();
  std::vector<std::uint64_t> ordered;  // (record digest, label[, caption digest]) per record, in order
  ordered.reserve(2 * static_cast<std::size_t>(data.size()));
  constexpr std::int64_t chunk = 4096;
  for (std::int64_t start = 0; start < data.size(); start += chunk) {
    const at::Tensor indices = at::arange(start, std::min(data.size(), start + chunk), at::kLong);
    const at::Tensor images = data.images(indices);
    const at::Tensor labels = data.labels(indices);
    const std::vector<std::string> captions = data.captions(indices);
    if (!images.defined()) continue;  // (test stand-ins without content)
    if (large && std::chrono::steady_clock::now() - last > std::chrono::seconds(10)) {
      last = std::chrono::steady_clock::now();
      *log << "  fingerprinted " << start << " of " << data.size() << " records\n" << std::flush;
    }
    const at::Tensor bytes = sdk::pixels_to_bytes(images.to(at::kCPU)).contiguous();
    const at::Tensor label_values =
        labels.defined() ? labels.to(at::kCPU).to(at::kLong).contiguous() : at::zeros({bytes.size(0)}, at::kLong);
    const std::int64_t c = bytes.size(1), h = bytes.size(2), w = bytes.size(3);
    const std::uint8_t* pixels = bytes.data_ptr<std::uint8_t>();
    const std::int64_t* label = label_values.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < bytes.size(0); ++i) {
      const std::uint64_t digest = record_digest(pixels + i * c * h * w, c, h, w);
      id.records.push_back(digest);
      ordered.push_back(digest);
      ordered.push_back(static_cast<std::uint64_t>(label[i]));
      if (captions.empty()) continue;
      const std::string& caption = captions[static_cast<std::size_t>(i)];
      ordered.push_back(siphash24(public_key, caption.data(), caption.size()));  // (the caption as it is)
      id.captions.push_back(caption_digest(caption));
    }
  }
  std::sort(id.captions.begin(), id.captions.end());
  id.captions.erase(std::unique(id.captions.begin(), id.captions.end()), id.captions.end());
  id.ordered_digest = siphash24(public_key, ordered.data(), ordered.size() * sizeof(std::uint64_t));
  std::sort(id.records.begin(), id.records.end());
  id.records.erase(std::unique(id.records.begin(), id.records.end()), id.records.end());
  return id;
}

std::string DatasetIdentity::fingerprint(const RecordKey& key) const {
  std::ostringstream os;
  os << name << "|N=" << size << "|hash=" << std::hex << std::setw(16) << std::setfill('0')
     << siphash24(key.key, &ordered_digest, sizeof ordered_digest);
  return os.str();
}

}  // namespace privdiff::core
