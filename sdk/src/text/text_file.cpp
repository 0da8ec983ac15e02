#include "text_file.hpp"

#include <zlib.h>

#include <memory>

namespace privdiff::sdk::text_file {
namespace {

constexpr std::size_t kMaxBytes = std::size_t{64} << 20;

struct GzClose {
  void operator()(gzFile f) const { gzclose(f); }
};

}  // namespace

std::string trimmed(const std::string& s) {
  const char* space = " \t\r\n\f\v";
  const std::size_t a = s.find_first_not_of(space);
  return a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(space) - a + 1);
}

std::invalid_argument error_at(const std::filesystem::path& file, std::size_t line, const std::string& problem) {
  return std::invalid_argument(file.string() + ":" + std::to_string(line) + ": " + problem);
}

std::vector<std::string> read_lines(const std::filesystem::path& file, const std::string& kind) {
  auto fail = [&](const std::string& why) { return std::invalid_argument(file.string() + ": " + why); };
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) throw fail("no such file (" + kind + ")");
  if (!std::filesystem::is_regular_file(file, ec)) throw fail("not a regular file (a folder, a pipe or a device)");
  // gzread reads a plain file as it is, so one reader serves vocab.txt, bpe_simple_vocab_16e6.txt.gz and
  // captions, compressed or not.
  std::unique_ptr<gzFile_s, GzClose> f(gzopen(file.c_str(), "rb"));
  if (!f) throw fail("cannot be opened");
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    const int got = gzread(f.get(), buffer, sizeof buffer);
    if (got < 0) throw fail("cannot be read (damaged gzip data?)");
    if (got == 0) break;
    bytes.append(buffer, static_cast<std::size_t>(got));
    if (bytes.size() > kMaxBytes) throw fail("holds over 64 MiB: not " + kind);
  }
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < bytes.size()) {
    const std::size_t end = bytes.find('\n', start);
    if (end == std::string::npos) {
      lines.push_back(bytes.substr(start));
      break;
    }
    lines.push_back(bytes.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

}  // namespace privdiff::sdk::text_file
