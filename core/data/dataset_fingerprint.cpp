#include "data/dataset_fingerprint.hpp"

#include <ATen/ATen.h>

#include <cstring>
#include <iomanip>
#include <sstream>

namespace privdiff::core {

namespace {

// FNV-1a over 64-bit words (a tail shorter than a word is zero-padded).
void mix(std::uint64_t& h, const void* bytes, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (std::size_t i = 0; i < size; i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, p + i, std::min<std::size_t>(8, size - i));
    h ^= word;
    h *= 1099511628211ULL;
  }
}

}  // namespace

std::string dataset_fingerprint(const sdk::Dataset& data) {
  std::uint64_t h = 1469598103934665603ULL;
  constexpr std::int64_t chunk = 4096;
  for (std::int64_t start = 0; start < data.size(); start += chunk) {
    const at::Tensor indices = at::arange(start, std::min(data.size(), start + chunk), at::kLong);
    for (at::Tensor t : {data.images(indices), data.labels(indices)}) {
      if (!t.defined()) continue;  // (test stand-ins without content)
      t = t.to(at::kDouble).contiguous();
      mix(h, t.data_ptr(), static_cast<std::size_t>(t.numel()) * sizeof(double));
    }
  }
  std::ostringstream os;
  os << data.name() << "|N=" << data.size() << "|classes=" << data.num_classes() << "|hash=" << std::hex
     << std::setw(16) << std::setfill('0') << h;
  return os.str();
}

}  // namespace privdiff::core
