#include <privdiff/io/atomic_file.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace privdiff::sdk {

namespace fs = std::filesystem;

void write_file_atomically(const fs::path& path, const std::string& contents) {
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  auto fail = [&](const char* what) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot " + std::string(what) + " " + path.string() + ": " + reason);
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("create a temporary file for");
  const char* data = contents.data();
  std::size_t left = contents.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      fail("write");
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail("flush");
  }
  if (::close(fd) != 0) fail("close");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("replace");
}

namespace {
bool is_temporary_file(const fs::directory_entry& entry) {  // NAME.tmp.PID, as write_file_atomically names them
  std::error_code ec;
  const std::string name = entry.path().filename().string();
  const auto at = name.rfind(".tmp.");
  if (at == std::string::npos || at + 5 == name.size() || !entry.is_regular_file(ec)) return false;
  return name.find_first_not_of("0123456789", at + 5) == std::string::npos;
}
}  // namespace

int remove_stale_temporary_files(const fs::path& dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (is_temporary_file(entry) && fs::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

bool holds_only_temporary_files(const fs::path& dir) {
  std::error_code ec;
  bool any = false;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!is_temporary_file(entry)) return false;
    any = true;
  }
  return any && !ec;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace privdiff::sdk
