// IDX files (plain or gzip): any bytes are either read into an array whose size matches its shape,
// or refused with std::runtime_error naming the file. Memory is bounded by the input: a header
// that promises more values than the file holds must be refused before it is allocated
// (libFuzzer's -rss_limit_mb catches the opposite).
#include <privdiff/data/idx_file.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  static const std::string path = "/tmp/privdiff-idx-fuzz-" + std::to_string(::getpid());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(bytes, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    const privdiff::sdk::IdxArray a = privdiff::sdk::read_idx(path);
    std::int64_t count = 1;
    for (const auto d : a.shape) count *= d;
    if (count != static_cast<std::int64_t>(a.data.size())) std::abort();
  } catch (const std::runtime_error&) {
  }
  return 0;
}
