#include <privdiff/io/content_hash.hpp>

#include <iomanip>
#include <sstream>

namespace privdiff::sdk {

std::uint64_t fnv1a64(const char* data, std::size_t size) {
  std::uint64_t h = 1469598103934665603ULL;
  for (std::size_t i = 0; i < size; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ULL;
  }
  return h;
}

std::string content_hash(const std::string& text) {
  const std::uint64_t h = fnv1a64(text.data(), text.size());
  std::ostringstream os;
  os << std::hex << std::setw(16) << std::setfill('0') << h;
  return os.str();
}

}  // namespace privdiff::sdk
